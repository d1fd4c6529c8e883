// The tool executions view: tool, user, principal, duration, outcome and
// every hook call (point, code, latency, failure mode applied); "let
// through by fail-open" and "refused by a hook" are one click. Search,
// range, pages, detail and exports as in the audit log.
import { h, clear, append, time } from "./dom.js";
import { searchBox } from "./search.js";
import { picker } from "./range.js";
import { verifyBadge, checkpointPanel, EXECUTIONS } from "./verify.js";
import { Listing, listingKey, rowsTable, moreButton, emptyState, errorState, exportButtons, keyboard, panel, fields, json, focusRow, idOf, when } from "./list.js";

let listing = null;
const single = new Map();

// quick filters: one click each (the search language's hook_decision).
const quick = [
  { id: "fail-open", label: "Let through by fail-open", q: "hook_decision:fail_open", title: "A hook failed and its fail-open mode let the call run" },
  { id: "refused", label: "Refused by a hook", q: "hook_decision:deny,fail_closed", title: "A hook denied the call, or failed in fail-closed mode" },
  { id: "failed", label: "Failed", q: "success:false", title: "Every failed execution" },
];

export function duration(ms) {
  if (ms === null || ms === undefined) return "";
  if (ms < 1) return ms.toFixed(2) + " ms";
  if (ms < 1000) return (ms < 10 ? ms.toFixed(1) : Math.round(ms)) + " ms";
  return (ms / 1000).toFixed(ms < 10e3 ? 2 : 1) + " s";
}

// decisionOf is what a hook call decided, as the search names it.
function decisionOf(c) {
  return c.failure_mode_applied || c.decision || (c.failure ? "failed" : "");
}

function hookChip(c) {
  const d = decisionOf(c);
  return h("span", { class: "chip d-" + (d || "none"), title: `${c.point} hook ${c.hook_name || c.hook_id}: ${c.code || c.failure || ""} · ${duration(c.latency_ms)}${c.cached ? " (cached)" : ""}` },
    c.point, " ", h("strong", {}, d.replace("_", "-") || "?"), c.cached ? "" : " " + duration(c.latency_ms));
}

function outcome(it) {
  if (it.success) return h("span", { class: "ok" }, "✓ ", it.execution_code || "OK");
  return h("span", { class: "bad", title: it.error ? it.error.message : "" }, "✗ ", (it.error && it.error.kind) || it.execution_code || "failed");
}

const columns = [
  { title: "Started", cell: (it) => when(it.started_at), cls: "when" },
  { title: "Tool", cell: (it) => [h("span", { class: "mono" }, it.tool ? it.tool.name : it.tool_name), it.tool ? h("span", { class: "muted sub" }, it.tool.toolkit + (it.tool.version ? " " + it.tool.version : "")) : null] },
  { title: "User", cell: (it) => it.user_id || "" },
  { title: "Principal", cell: (it) => [h("span", {}, it.display_name || it.principal_id), h("span", { class: "muted sub" }, it.principal_type)], cls: "hide-narrow" },
  { title: "Duration", cell: (it) => duration(it.duration_ms), cls: "num" },
  { title: "Outcome", cell: outcome },
  { title: "Hooks", cell: (it) => (it.hooks || []).length ? h("span", { class: "chips" }, it.hooks.map(hookChip)) : h("span", { class: "muted" }, "none") },
];

export function render(root, ctx) {
  const p = ctx.params;
  const q = p.get("q") || "";
  const open = p.get("open") || "";
  const path = ctx.base + "/tool_executions";
  const key = listingKey(ctx, path);
  if (!listing || listing.key !== key) listing = new Listing(ctx, path);
  const L = listing;
  // The first page is the critical path of the view: ask for it before
  // anything else (the histogram's stats, the live tail); it is drawn below.
  if (!L.loaded && !L.error) L.more(ctx.api).catch(() => {});
  const set = (changes, opts) => ctx.setParams(changes, opts);
  const search = searchBox("executions", q, (nq) => set({ q: nq, open: null }));
  root.append(
    h("div", { class: "view-head" }, h("h1", {}, "Tool executions"), exportButtons(ctx, path, L.filters)),
    search.form,
    h("div", { class: "toolbar" }, picker(p, (c) => set({ ...c, open: null })),
      h("span", { class: "quick", role: "group", "aria-label": "Quick filters" }, quick.map((f) => h("button", {
        type: "button", id: "quick-" + f.id, class: q === f.q ? "on" : null, "aria-pressed": String(q === f.q), title: f.title,
        onclick: () => set({ q: q === f.q ? null : f.q, open: null }),
      }, f.label)))));
  root.append(checkpointPanel(ctx, EXECUTIONS, L));
  const listBox = h("div", { class: "list" });
  const detailBox = h("div", { class: "detail-box" });
  root.append(h("div", { class: "list-grid" + (open ? " with-detail" : "") }, listBox, detailBox));
  const openEntry = (id) => set({ open: id === open ? null : id });
  const closeEntry = () => { if (!open) return false; set({ open: null }); return true; };
  const drawList = () => {
    append(clear(listBox), [
      errorState(L, () => { L.more(ctx.api).then(drawList, (e) => { ctx.showError(e); drawList(); }); drawList(); }),
      emptyState(L, "tool executions"),
      L.items.length ? h("div", { class: "table-wrap" }, rowsTable(columns, L.items, { open, onOpen: openEntry })) : null,
      moreButton(L, () => { L.more(ctx.api).then(() => { if (ctx.current() && listing === L) drawList(); }, ctx.showError); })]);
  };
  const drawDetail = () => {
    clear(detailBox);
    if (!open) return;
    const it = L.items.find((x) => idOf(x) === open) || single.get(open);
    if (it) return detailBox.append(detail(it, closeEntry, ctx, L));
    detailBox.append(panel("Execution", closeEntry, h("p", { class: "muted" }, "Loading…")));
    // Not loaded (a link): look for it in the newest pages of the range.
    find(ctx, path, L, open).then((found) => {
      if (found) single.set(open, found);
      if (!ctx.current()) return;
      clear(detailBox).append(found ? detail(found, closeEntry, ctx, L) : panel("Execution", closeEntry, h("p", { class: "empty" }, "This execution is not in the range shown.")));
    }, ctx.showError);
  };
  drawList();
  drawDetail();
  if (!L.loaded && !L.error) {
    // The first page (or the one a previous render of this search asked for).
    (L.loading || L.more(ctx.api)).then(() => { if (ctx.current() && listing === L) { drawList(); drawDetail(); focusRow(open); } },
      (e) => { if (ctx.current()) { ctx.showError(e); drawList(); } });
  }
  focusRow(open);
  return keyboard({ search: () => search.input, open: openEntry, close: closeEntry });
}

// find looks for the execution id in the newest pages of the listing's
// range (the search has no event_id key).
async function find(ctx, path, L, id) {
  let cursor = null;
  for (let i = 0; i < 5; i++) {
    const d = await ctx.api.get(path, { ...L.filters, limit: 100, cursor });
    const found = (d.items || []).find((x) => idOf(x) === id);
    if (found) return found;
    if (!d.has_more) return null;
    cursor = d.next_cursor;
  }
  return null;
}

function detail(it, close, ctx, L) {
  const t = it.tool || {};
  const hooks = it.hooks || [];
  return panel(`${t.toolkit || ""}.${t.name || it.tool_name}`, close,
    h("p", { class: "muted" }, "for ", h("strong", {}, it.user_id || "—"), " by ", it.display_name || it.principal_id, " · ", time(it.started_at)),
    h("p", {}, outcome(it), it.error && it.error.message ? h("span", { class: "muted" }, " — ", it.error.message) : null),
    verifyBadge(ctx, EXECUTIONS, it, L, () => find(ctx, ctx.base + "/tool_executions", L, idOf(it))),
    h("h3", {}, "Hook calls"),
    hooks.length ? h("div", { class: "table-wrap" }, h("table", { class: "hooks", id: "hook-calls" },
      // Four columns, so that the panel shows every call whole at 1280 px.
      h("thead", {}, h("tr", {}, ["Point", "Hook", "Decision", "Call"].map((x) => h("th", {}, x)))),
      h("tbody", {}, hooks.map((c) => h("tr", { class: "d-" + (decisionOf(c) || "none") },
        h("td", {}, c.point), h("td", { title: c.hook_id }, c.hook_name || c.hook_id),
        h("td", {}, c.decision || "—", c.overridden ? h("span", { class: "muted" }, " (overridden)") : null,
          c.code ? h("span", { class: "sub mono" }, "code " + c.code) : null,
          c.failure_mode_applied ? h("strong", { class: "sub" }, c.failure_mode_applied + " applied") : null,
          c.failure || c.error_message ? h("span", { class: "sub muted" }, c.failure || c.error_message) : null),
        h("td", { class: "call" }, c.http_status ? "HTTP " + c.http_status : "no answer",
          h("span", { class: "sub muted" }, (c.attempts ? c.attempts + (c.attempts === 1 ? " attempt · " : " attempts · ") : "") + (c.cached ? "cached" : duration(c.latency_ms))))))))) : h("p", { class: "muted" }, "No hook was called."),
    h("h3", {}, "Fields"),
    fields([
      ["execution_id", h("span", { class: "mono" }, it.execution_id)], ["event_id", h("span", { class: "mono" }, it.event_id)],
      ["tool", `${t.toolkit}.${t.name} ${t.version || ""}`], ["user_id", it.user_id], ["principal_id", it.principal_id],
      ["principal_type", it.principal_type], ["display_name", it.display_name], ["client_ip", it.client_ip],
      ["project_id", it.project_id], ["started_at", time(it.started_at)], ["ended_at", time(it.ended_at)],
      ["duration", duration(it.duration_ms)], ["execution_code", it.execution_code], ["created_time", time(it.created_time)],
    ]),
    h("h3", {}, "As the API returns it"), json(it, "The execution as the API returns it"));
}
