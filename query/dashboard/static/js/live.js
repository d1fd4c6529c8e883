// The live tail: GET …/audit_logs/stream read as Server-Sent Events with
// fetch (EventSource cannot send the Authorization header). A dropped
// connection is reopened with back-off and Last-Event-ID, so that no entry
// is lost within the stream's retention.
import { ApiError } from "./api.js";

// parseSSE feeds text chunks and calls onMessage({id, event, data}) per
// complete message (the SSE field rules: id, event, data, comments).
export function sseParser(onMessage) {
  let buf = "", id = null, event = "", data = [];
  return (chunk) => {
    buf += chunk;
    let nl;
    while ((nl = buf.search(/\r\n|\r|\n/)) >= 0) {
      const line = buf.slice(0, nl);
      buf = buf.slice(nl + (buf[nl] === "\r" && buf[nl + 1] === "\n" ? 2 : 1));
      if (line === "") {
        if (data.length) onMessage({ id, event: event || "message", data: data.join("\n") });
        event = "";
        data = [];
        continue;
      }
      if (line.startsWith(":")) continue;
      const c = line.indexOf(":");
      const field = c < 0 ? line : line.slice(0, c);
      let value = c < 0 ? "" : line.slice(c + 1);
      if (value.startsWith(" ")) value = value.slice(1);
      if (field === "data") data.push(value);
      else if (field === "id" && !value.includes("\0")) id = value;
      else if (field === "event") event = value;
    }
  };
}

// tail opens the stream of url (the list route's filters) and keeps it
// open until stop(). onItem(item) per entry; onState(state, detail) with
// state "connecting", "live", "retrying" (detail: seconds), "stopped"
// (detail: the ApiError that ended it: 401, 403, 404, 400).
export function tail(api, url, { lastEventId, onItem, onState }) {
  let ctl = null, stopped = false, timer = null, failures = 0;
  let last = lastEventId || null;
  const connect = async () => {
    if (stopped) return;
    ctl = new AbortController();
    onState("connecting");
    try {
      const headers = { Accept: "text/event-stream" };
      if (last) headers["Last-Event-ID"] = last;
      const res = await api.fetch(url, { headers, signal: ctl.signal });
      if (!res.ok) {
        const err = await api.failure(res);
        if (res.status === 429 || res.status >= 500) return retry(err.retryAfter);
        stopped = true;
        return onState("stopped", err);
      }
      failures = 0;
      onState("live");
      const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
      // The server ends a stream with a named event: "error" when the
      // credential may no longer read it (401, 403: stop; else retry),
      // "reconnect" at the stream's lifetime (resume at once).
      let ended = null;
      const feed = sseParser((m) => {
        if (m.id) last = m.id;
        if (m.event === "error") {
          let d = {};
          try { d = JSON.parse(m.data) || {}; } catch { /* not JSON */ }
          ended = new ApiError(Number(d.code) || 0, String(d.msg || "The stream ended."));
          return;
        }
        if (m.event !== "message") return;
        let item;
        try { item = JSON.parse(m.data); } catch { return; }
        onItem(item);
      });
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        feed(value);
      }
      if (ended && (ended.status === 401 || ended.status === 403)) {
        stopped = true;
        return onState("stopped", ended);
      }
      retry();
    } catch (e) {
      if (stopped || (e && e.name === "AbortError")) return;
      retry();
    }
  };
  const retry = (after) => {
    if (stopped) return;
    failures++;
    const s = after || Math.min(15, 2 ** Math.min(failures - 1, 4));
    onState("retrying", s);
    timer = setTimeout(connect, s * 1000);
  };
  connect();
  return {
    stop() {
      stopped = true;
      clearTimeout(timer);
      if (ctl) ctl.abort();
      onState("stopped");
    },
    get lastEventId() { return last; },
  };
}

export { ApiError };
