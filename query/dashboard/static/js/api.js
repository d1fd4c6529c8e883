// The public API as the page uses it: the bearer credential of the
// session, the seed's envelope, and errors that say what the user can do.

// ApiError is a failed call: status is the HTTP status (0: network),
// message the API's msg, retryAfter the seconds a 429 asks to wait.
export class ApiError extends Error {
  constructor(status, message, retryAfter) {
    super(message);
    this.name = "ApiError";
    this.status = status;
    this.retryAfter = retryAfter;
  }
}

// invalidSearch says whether e is the API refusing the search (q) itself:
// the list shows it where the entries would be, once; nothing else does.
export function invalidSearch(e) {
  return e instanceof ApiError && e.status === 400 && /\bq: /.test(e.message || "");
}

// Api calls /api/v1 with a bearer credential. Mutations carry
// X-Auditrail-Source: DASHBOARD, so that the audit log records them with
// that source.
export class Api {
  constructor(credential, base = "") {
    this.credential = credential;
    this.base = base;
  }

  headers(extra) {
    return { Authorization: "Bearer " + this.credential, Accept: "application/json", ...extra };
  }

  // url builds /api/v1 + path with the non-empty params.
  url(path, params) {
    const u = new URL(this.base + "/api/v1" + path, location.origin);
    for (const [k, v] of Object.entries(params || {})) {
      if (v !== undefined && v !== null && v !== "") u.searchParams.set(k, String(v));
    }
    return u;
  }

  // get answers the envelope's data.
  async get(path, params, signal) {
    return this.call("GET", path, params, undefined, signal);
  }

  // send is a mutation: POST, PUT, PATCH or DELETE with an optional JSON body.
  async send(method, path, body, signal) {
    return this.call(method, path, undefined, body, signal);
  }

  async call(method, path, params, body, signal) {
    const headers = this.headers(method === "GET" ? {} : { "X-Auditrail-Source": "DASHBOARD" });
    if (body !== undefined) headers["Content-Type"] = "application/json";
    const res = await this.fetch(this.url(path, params), { method, headers, body: body === undefined ? undefined : JSON.stringify(body), signal });
    if (res.status === 204) return null;
    if (!res.ok) throw await this.failure(res);
    let env;
    try {
      env = await res.json();
    } catch {
      throw new ApiError(res.status, `${method} ${path}: the server answered ${res.status} without JSON`);
    }
    return env && "data" in env ? env.data : env;
  }

  // fetch is a raw call with the credential (exports, streams): it
  // answers the response, whatever its status (see failure), and throws
  // an ApiError with status 0 when the server cannot be reached.
  async fetch(url, init = {}) {
    try {
      return await fetch(url, { ...init, headers: { ...this.headers(), ...(init.headers || {}) }, credentials: "omit", cache: "no-store", redirect: "error" });
    } catch (e) {
      if (e.name === "AbortError") throw e;
      throw new ApiError(0, "The server cannot be reached: " + e.message);
    }
  }

  // failure reads the ApiError of a failed raw response.
  async failure(res) {
    let env = null;
    try { env = await res.json(); } catch { /* not JSON */ }
    return errorOf(res, env);
  }
}

function retryAfterOf(res) {
  const v = Number(res.headers.get("Retry-After"));
  return Number.isFinite(v) && v > 0 ? Math.ceil(v) : undefined;
}

function errorOf(res, env) {
  const msg = (env && typeof env.msg === "string" && env.msg) || `${res.status} ${res.statusText}`;
  return new ApiError(res.status, String(msg), retryAfterOf(res));
}
