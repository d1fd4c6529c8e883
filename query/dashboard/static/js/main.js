// The dashboard's shell: sign-in (credential in sessionStorage), the
// organization and project picked from GET /api/v1/me, the views and the
// URL that holds the whole view (a link is a saved search; back works).
//
// A view is a module exporting render(root, ctx) that fills root and may
// answer a cleanup function, called before the next view is drawn. ctx:
//   api       Api of the session
//   me        the answer of GET /api/v1/me
//   org       {id, name, role, projects}; project: {id, name, role} or null
//   base      "/orgs/<org>" or "/orgs/<org>/projects/<project>": the scope's API path
//   params    URLSearchParams of the view's own state (q, since, …)
//   setParams(obj, {replace}) updates the view's state in the URL (null deletes) and redraws
//   showError(err) shows an API error as the user can act on it
import { Api, ApiError, invalidSearch } from "./api.js";
import { h, clear } from "./dom.js";
import * as audit from "./audit.js";
import * as executions from "./executions.js";
import * as admin from "./admin.js";

const storageKey = "auditrail.credential";

// views in the order of the navigation; admin views need an org role of
// owner or admin (or the platform admin), the server decides in the end.
const views = [
  { id: "audit", title: "Audit log", module: audit },
  { id: "executions", title: "Tool executions", module: executions },
  ...admin.views.map((v) => ({ ...v, admin: true })),
];

// Keys of the URL that belong to the shell; the rest is the view's.
const shellKeys = ["org", "project", "view"];

const state = { api: null, me: null, cleanup: null, drawn: 0 };

const $ = (id) => document.getElementById(id);

function currentCredential() {
  return sessionStorage.getItem(storageKey);
}

// signIn draws the sign-in form; message says why (a 401 ended the session).
function signIn(message) {
  state.api = null;
  state.me = null;
  sessionStorage.removeItem(storageKey);
  for (const id of ["nav", "scope", "who", "signout"]) $(id).hidden = true;
  hideBanner();
  const input = h("input", { type: "password", id: "credential", name: "credential", autocomplete: "off", required: true, spellcheck: "false", placeholder: "ak_… or a JWT" });
  const err = h("p", { class: "error", id: "signin-error", role: "alert" }, message || "");
  const form = h("form", { class: "signin", id: "signin", onsubmit: async (e) => {
    e.preventDefault();
    const cred = input.value.trim();
    if (!cred) return;
    err.textContent = "";
    const api = new Api(cred);
    try {
      const me = await api.get("/me");
      sessionStorage.setItem(storageKey, cred);
      start(api, me);
    } catch (e2) {
      err.textContent = e2 instanceof ApiError && e2.status === 401 ? "This credential is not valid (revoked, expired or mistyped)." : describe(e2);
    }
  } },
  h("h1", {}, "Sign in to auditrail"),
  h("p", {}, "Paste an API key or a JWT. It stays in this tab only (sessionStorage) and is sent to this server's public API as a bearer credential."),
  h("label", { for: "credential" }, "API key or JWT"), input,
  h("button", { type: "submit" }, "Sign in"), err);
  runCleanup();
  clear($("view")).append(form);
  input.focus();
}

async function resume() {
  const cred = currentCredential();
  if (!cred) return signIn();
  const api = new Api(cred);
  try {
    start(api, await api.get("/me"));
  } catch (e) {
    if (e instanceof ApiError && e.status === 401) return signIn("Your session ended or the credential was revoked: sign in again.");
    clear($("view")).append(h("p", { class: "error", role: "alert" }, describe(e)), h("button", { type: "button", onclick: resume }, "Retry"));
  }
}

function start(api, me) {
  state.api = api;
  state.me = me;
  const p = me.principal || {};
  // A user's key: "alice (alice's laptop)"; a service or admin key: its name.
  $("who").textContent = p.user_id ? `${p.user_id} (${p.display_name || p.id})` : p.display_name || p.id || "";
  $("who").title = `${p.type || ""} ${p.id || ""}`.trim();
  for (const id of ["nav", "scope", "who", "signout"]) $(id).hidden = false;
  draw();
}

// scope resolves the org and project of the URL against /me, defaulting to
// the first organization.
function scope(url) {
  const orgs = state.me.organizations || [];
  const org = orgs.find((o) => o.id === url.searchParams.get("org")) || orgs[0] || null;
  const project = org && (org.projects || []).find((p) => p.id === url.searchParams.get("project")) || null;
  return { org, project };
}

function draw() {
  if (!state.api) return;
  const url = new URL(location.href);
  const { org, project } = scope(url);
  drawScope(org, project);
  const view = views.find((v) => v.id === url.searchParams.get("view")) || views[0];
  drawNav(view, org, project);
  runCleanup();
  const root = clear($("view"));
  if (!org) {
    root.append(h("p", { class: "empty" }, "This credential may read no organization. Ask an owner of your organization to add you as a member."));
    return;
  }
  const params = new URLSearchParams(url.search);
  for (const k of shellKeys) params.delete(k);
  const drawn = ++state.drawn;
  const ctx = {
    api: state.api, me: state.me, org, project,
    base: "/orgs/" + org.id + (project ? "/projects/" + project.id : ""),
    params,
    setParams: (changes, opts) => navigate({ ...changes }, opts),
    showError,
    // current reports whether this view is still the one shown (a late
    // answer of a view left must not draw).
    current: () => drawn === state.drawn,
  };
  hideBanner();
  try {
    const cleanup = view.module.render(root, ctx);
    state.cleanup = typeof cleanup === "function" ? cleanup : null;
  } catch (e) {
    showError(e);
  }
}

function runCleanup() {
  const f = state.cleanup;
  state.cleanup = null;
  if (f) try { f(); } catch (e) { console.error(e); }
}

// navigate changes the URL (keys set to null or "" are deleted) and draws.
// opts.replace replaces the history entry instead of adding one;
// opts.view changes the view (and drops the old view's state).
export function navigate(changes, opts = {}) {
  const url = new URL(location.href);
  if (opts.view !== undefined) {
    for (const k of [...url.searchParams.keys()]) if (!shellKeys.includes(k)) url.searchParams.delete(k);
  }
  for (const [k, v] of Object.entries(changes)) {
    if (v === null || v === undefined || v === "") url.searchParams.delete(k);
    else url.searchParams.set(k, String(v));
  }
  if (url.href !== location.href) {
    if (opts.replace) history.replaceState(null, "", url);
    else history.pushState(null, "", url);
  }
  draw();
}

function drawScope(org, project) {
  const orgs = state.me.organizations || [];
  const so = clear($("org"));
  for (const o of orgs) so.append(h("option", { value: o.id, selected: org && o.id === org.id }, o.name || o.id));
  so.onchange = () => navigate({ org: so.value, project: null });
  const sp = clear($("project"));
  sp.append(h("option", { value: "" }, "All projects"));
  for (const p of (org && org.projects) || []) sp.append(h("option", { value: p.id, selected: project && p.id === project.id }, p.name || p.id));
  sp.onchange = () => navigate({ project: sp.value });
}

function drawNav(active, org, project) {
  const nav = clear($("nav"));
  // role "" is the platform admin, but also a project service key (no member): admin.canAdmin tells them apart.
  const isAdmin = admin.canAdmin(state.me, org);
  for (const v of views) {
    if (v.admin && !isAdmin) continue;
    if (v.needsProject && !project) continue;
    const url = new URL(location.href);
    for (const k of [...url.searchParams.keys()]) if (!shellKeys.includes(k)) url.searchParams.delete(k);
    url.searchParams.set("view", v.id);
    nav.append(h("a", { href: url.pathname + url.search, class: v === active ? "active" : null, "aria-current": v === active ? "page" : null, dataset: { view: v.id },
      onclick: (e) => { if (e.button === 0 && !e.metaKey && !e.ctrlKey) { e.preventDefault(); navigate({ view: v.id }, { view: v.id }); } } }, v.title));
  }
}

// describe says what an error means for the user.
export function describe(e) {
  if (!(e instanceof ApiError)) return "Something went wrong: " + (e && e.message ? e.message : String(e));
  switch (e.status) {
    case 0: return e.message;
    case 401: return "Your session ended: sign in again.";
    case 403: {
      const { org, project } = state.me ? scope(new URL(location.href)) : {};
      const where = org ? (project ? `${org.name} or of its project ${project.name}` : org.name) : "this organization";
      return `Not allowed: you are not a member of ${where} with the role this needs (${e.message}).`;
    }
    case 429: return `Rate limited: retry in ${e.retryAfter || "a few"} s.`;
    default: return e.message;
  }
}

// showError shows err in the banner; a 401 signs out.
export function showError(e) {
  if (e && e.name === "AbortError") return;
  if (invalidSearch(e)) return; // shown once, in the list (errorState)
  if (e instanceof ApiError && e.status === 401) return signIn("Your session ended or the credential was revoked: sign in again.");
  const b = $("banner");
  clear(b).append(h("span", {}, describe(e)), h("button", { type: "button", class: "close", "aria-label": "Dismiss", onclick: hideBanner }, "×"));
  b.dataset.status = e instanceof ApiError ? String(e.status) : "error";
  b.hidden = false;
}

function hideBanner() {
  $("banner").hidden = true;
}

addEventListener("popstate", draw);
$("signout").addEventListener("click", () => signIn());
resume();
