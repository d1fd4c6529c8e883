// The audit log view: search (q) and time range, the histogram of the
// range with its top actors and resources, the entries newest first with
// "Load more", each entry's every field and its before/after as a diff, the
// live tail and the exports. The URL holds the view (q, range or
// since/until, by, open, live): a link is a saved search, Back works.
import { h, clear, append, time } from "./dom.js";
import { ApiError, invalidSearch } from "./api.js";
import { searchBox, addTerm } from "./search.js";
import { picker } from "./range.js";
import { Listing, listingKey, rowsTable, row, moreButton, emptyState, errorState, exportButtons, keyboard, panel, fields, json, focusRow, idOf, when } from "./list.js";
import { histogram, bucketFor, short } from "./histogram.js";
import { tail } from "./live.js";
import { diffTable } from "./diff.js";
import { verifyBadge, checkpointPanel, AUDIT } from "./verify.js";

const byKeys = { action: "Action", source: "Source", resource_type: "Resource type" };

// Kept across redraws of the view (every click changes the URL and redraws).
let listing = null; // the entries of the current search
let stats = null; // {key, data, error, loading}
let live = null; // {key, conn, paused, pending, hooks, detach, state}
let resume = null; // {key, id}: where a stopped tail of a search was, so that turning it on again misses nothing
const single = new Map(); // event_id → entry opened by link (not in the listing)

const columns = [
  { title: "Time", cell: (it) => when(it.timestamp), cls: "when" },
  { title: "Action", cell: (it) => h("span", { class: "badge a-" + short(it.action) }, short(it.action)) },
  { title: "Actor", cell: (it) => [h("span", {}, it.display_name || it.principal_id), it.user_id && it.user_id !== it.display_name ? h("span", { class: "muted sub" }, it.user_id) : null] },
  { title: "Resource", cell: (it) => [it.resource_type ? h("span", { class: "rtype" }, short(it.resource_type)) : null, " ", h("span", { title: it.resource_id || "" }, it.resource_display || it.resource_id || "")] },
  { title: "Source", cell: (it) => short(it.source), cls: "hide-narrow" },
  { title: "IP", cell: (it) => it.client_ip || "", cls: "hide-narrow mono" },
];

export function render(root, ctx) {
  const p = ctx.params;
  const q = p.get("q") || "";
  const by = byKeys[p.get("by")] ? p.get("by") : "action";
  const open = p.get("open") || "";
  const path = ctx.base + "/audit_logs";
  const key = listingKey(ctx, path);
  if (!listing || listing.key !== key) listing = new Listing(ctx, path);
  const L = listing;
  // The first page is the critical path of the view: ask for it before
  // anything else (the histogram's stats, the live tail); it is drawn below.
  if (!L.loaded && !L.error) L.more(ctx.api).catch(() => {});
  const set = (changes, opts) => ctx.setParams(changes, opts);
  const canLive = !L.range.until;
  const wantLive = p.get("live") === "1" && canLive;

  // Head: title, live tail, exports.
  const liveBtn = h("button", { type: "button", id: "live", class: wantLive ? "on" : null, "aria-pressed": String(wantLive), disabled: !canLive,
    title: canLive ? "New entries appear at the top as they happen" : "The live tail needs a range that ends now",
    onclick: () => set({ live: wantLive ? null : "1" }, { replace: true }) }, h("span", { class: "dot", "aria-hidden": "true" }), wantLive ? "Live" : "Live tail");
  const pauseBtn = h("button", { type: "button", id: "pause", hidden: !wantLive, onclick: () => togglePause() }, "Pause");
  const liveState = h("span", { class: "muted live-state", id: "live-state", "aria-live": "polite" });
  const search = searchBox("audit", q, (nq) => set({ q: nq, open: null }));
  root.append(
    h("div", { class: "view-head" }, h("h1", {}, "Audit log"),
      h("span", { class: "live-controls" }, liveBtn, pauseBtn, liveState),
      exportButtons(ctx, path, L.filters)),
    search.form,
    h("div", { class: "toolbar" }, picker(p, (c) => set({ ...c, open: null })),
      h("span", { class: "by", role: "group", "aria-label": "Histogram by" }, h("span", { class: "muted" }, "By"),
        Object.entries(byKeys).map(([k, t]) => h("button", { type: "button", class: k === by ? "on" : null, "aria-pressed": String(k === by), dataset: { by: k },
          onclick: () => set({ by: k === "action" ? null : k }) }, t)))));
  // The latest signed checkpoint of the organization's log (one per search).
  root.append(checkpointPanel(ctx, AUDIT, L));

  // Histogram and top lists.
  const statsBox = h("section", { class: "stats", id: "stats", "aria-label": "Histogram" });
  root.append(statsBox);
  const drawStats = () => {
    clear(statsBox);
    if (!stats || stats.loading) return statsBox.append(h("div", { class: "chart-box placeholder muted" }, "Loading the histogram…"));
    if (stats.error) {
      const e = stats.error;
      if (invalidSearch(e)) return; // the list says what is wrong with the search
      return statsBox.append(h("p", { class: "muted", id: "stats-unavailable" }, e instanceof ApiError && e.status === 404 ? "The histogram is not available on this server (no stats route)." : "The histogram could not be loaded."));
    }
    const d = stats.data || {};
    const chartBox = h("div", { class: "chart-box", id: "histogram" });
    statsBox.append(chartBox, topList("Top actors", "top-actors", (d.top && d.top.actors) || [], "actor"), topList("Top resources", "top-resources", (d.top && d.top.resources) || [], "resource_id"));
    const hg = histogram({
      buckets: d.buckets || [], from: stats.from, to: stats.to, bucket: stats.bucket, width: chartBox.clientWidth,
      onZoom: (f, t) => set({ range: null, since: f.toISOString(), until: t.toISOString(), open: null, live: null }),
      onKey: (k) => set({ q: addTerm(q, by, short(k)), open: null }),
    });
    chartBox.append(h("div", { class: "chart-head" }, h("span", {}, h("strong", { id: "stats-total" }, String(hg.total)), ` entr${hg.total === 1 ? "y" : "ies"} · per ${stats.bucket} · drag to zoom`)), hg.chart, hg.legend);
    chartBox.dataset.width = String(chartBox.clientWidth);
  };
  const topList = (title, id, rows, key) => h("div", { class: "top", id },
    h("h2", {}, title),
    rows.length ? h("ol", {}, rows.map((r) => h("li", {},
      // The name the newest entry gives it (the id when it has none); the
      // id in the tooltip, and the filter searches by id.
      h("button", { type: "button", class: "filter", title: `Search ${key}:${r.value}` + (r.display ? ` (${r.value})` : ""), dataset: { value: r.value }, onclick: () => set({ q: addTerm(q, key, r.value), open: null }) },
        r.resource_type ? h("span", { class: "rtype" }, short(r.resource_type) + " ") : null, String(r.display || r.value)),
      h("span", { class: "muted count" }, String(r.count))))) : h("p", { class: "muted" }, "None in this range."));
  const statsKey = key + "\u0000" + by;
  if (!stats || stats.key !== statsKey) {
    const from = L.range.from, to = L.range.to, bucket = bucketFor(from, to);
    const s = stats = { key: statsKey, from, to, bucket, loading: true };
    // Asked once the first page of entries is in: on a busy tenant the
    // stats cost several list pages of server time, and asked together
    // they would delay the entries, which a user came for.
    const first = L.loading && !L.loaded ? L.loading.catch(() => {}) : Promise.resolve();
    s.promise = first.then(() => ctx.api.get(path + "/stats", { q, since: L.range.since || from.toISOString(), until: L.range.until, bucket, by })).then((d) => { s.data = d; }, (e) => {
      s.error = e;
      if (!(e instanceof ApiError && e.status === 404)) ctx.showError(e);
    }).finally(() => { s.loading = false; });
  }
  drawStats();
  if (stats.loading) {
    // Whichever render is current when the answer comes draws it.
    const s = stats;
    s.promise.then(() => { if (ctx.current() && stats === s) drawStats(); });
  }
  let width = statsBox.clientWidth;
  const ro = new ResizeObserver(() => { if (Math.abs(statsBox.clientWidth - width) > 20) { width = statsBox.clientWidth; if (stats && !stats.loading) drawStats(); } });
  ro.observe(statsBox);

  // The entries and the open one.
  const listBox = h("div", { class: "list" });
  const detailBox = h("div", { class: "detail-box" });
  root.append(h("div", { class: "list-grid" + (open ? " with-detail" : "") }, listBox, detailBox));
  const openEntry = (id) => set({ open: id === open ? null : id });
  const closeEntry = () => { if (!open) return false; set({ open: null }); return true; };
  const drawList = () => {
    append(clear(listBox), [
      errorState(L, () => { L.more(ctx.api).then(drawList, (e) => { ctx.showError(e); drawList(); }); drawList(); }),
      emptyState(L, "entries"),
      L.items.length ? h("div", { class: "table-wrap" }, rowsTable(columns, L.items, { open, fresh: L.fresh, onOpen: openEntry })) : null,
      moreButton(L, () => { L.more(ctx.api).then(() => { if (ctx.current() && listing === L) drawList(); }, ctx.showError); })]);
    L.fresh.clear();
    // User Timing: when this document first showed entries (make bench
    // reads it: the first render of the newest page after navigation).
    if (L.items.length && !performance.getEntriesByName("auditrail:first-page").length) performance.mark("auditrail:first-page");
  };
  const drawDetail = () => {
    clear(detailBox);
    if (!open) return;
    const it = L.items.find((x) => idOf(x) === open) || single.get(open);
    if (it) return detailBox.append(detail(it, ctx, q, set, L));
    detailBox.append(panel("Entry", closeEntry, h("p", { class: "muted" }, "Loading…")));
    ctx.api.get(path, { q: "event_id:" + open, limit: 1 }).then((d) => {
      const found = (d.items || [])[0];
      if (found) single.set(open, found);
      if (!ctx.current()) return;
      clear(detailBox).append(found ? detail(found, ctx, q, set, L) : panel("Entry", closeEntry, h("p", { class: "empty" }, "No entry of this scope has this event id.")));
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

  // The live tail: kept open across redraws of the same search.
  function setLiveState(s, detail) {
    if (!live) return;
    live.state = s;
    const el = document.getElementById("live-state");
    if (!el) return;
    el.dataset.state = s;
    if (s === "connecting") el.textContent = "connecting…";
    else if (s === "live") el.textContent = live.paused ? `paused · ${live.pending.length} new` : "live";
    else if (s === "retrying") el.textContent = `reconnecting in ${detail} s…`;
    else if (s === "stopped" && detail) {
      el.textContent = detail.status === 404 ? "The live tail is not available on this server." : "stopped";
      if (detail.status !== 404) ctx.showError(detail);
    }
  }
  function arrive(it) {
    const id = idOf(it);
    if (!id || L.has(id) || live.pending.some((x) => idOf(x) === id)) return;
    if (live.paused) {
      live.pending.push(it);
      pauseBtn.textContent = `Resume (${live.pending.length} new)`;
      setLiveState(live.state);
      return;
    }
    L.items.unshift(it);
    const tbody = listBox.querySelector("#entries tbody");
    if (tbody) tbody.prepend(row(columns, it, { open, fresh: new Set([id]), onOpen: openEntry }));
    else drawList();
  }
  function togglePause() {
    if (!live) return;
    live.paused = !live.paused;
    if (!live.paused) {
      for (const it of live.pending) { L.items.unshift(it); L.fresh.add(idOf(it)); }
      live.pending = [];
      drawList();
    }
    pauseBtn.textContent = live.paused ? "Resume" : "Pause";
    pauseBtn.setAttribute("aria-pressed", String(live.paused));
    setLiveState(live.state);
  }
  if (live && (!wantLive || live.key !== key)) stopLive();
  if (wantLive) {
    if (live) clearTimeout(live.detach);
    else {
      live = { key, paused: false, pending: [], state: "connecting", hooks: { arrive, state: setLiveState } };
      const url = ctx.api.url(path + "/stream", { q });
      const mine = live;
      mine.conn = tail(ctx.api, url, { lastEventId: resume && resume.key === key ? resume.id : null, onItem: (it) => live === mine && mine.hooks.arrive(it), onState: (s, d) => live === mine && mine.hooks.state(s, d) });
    }
    live.hooks = { arrive, state: setLiveState };
    if (live.paused) { pauseBtn.textContent = live.pending.length ? `Resume (${live.pending.length} new)` : "Resume"; pauseBtn.setAttribute("aria-pressed", "true"); }
    setLiveState(live.state);
  }

  const unkey = keyboard({ search: () => search.input, open: openEntry, close: closeEntry });
  return () => {
    unkey();
    ro.disconnect();
    // Redraws of the same search keep the stream; the next render decides.
    if (live) live.detach = setTimeout(stopLive, 0);
  };
}

function stopLive() {
  if (!live) return;
  const l = live;
  live = null;
  clearTimeout(l.detach);
  l.conn.stop();
  if (l.conn.lastEventId) resume = { key: l.key, id: l.conn.lastEventId };
}

// The seed's fields, in its order.
const seedFields = ["id", "event_id", "timestamp", "client_ip", "action", "source", "display_name", "customer_id", "organization_id", "project_id",
  "principal_id", "user_id", "principal_type", "resource_type", "resource_id", "resource_display", "data", "created_time"];

// detail shows every field of an entry, data pretty-printed,
// data.before/data.after as a diff, and whether it verifies against the
// log's latest checkpoint.
function detail(it, ctx, q, set, L) {
  const close = () => set({ open: null });
  const pairs = seedFields.filter((f) => f !== "data").map((f) => {
    const v = it[f];
    if ((f === "timestamp" || f === "created_time") && v) return [f, time(v)];
    return [f, v === null || v === undefined ? null : h("span", { class: "mono" }, String(v))];
  });
  const data = it.data;
  const hasDiff = data && typeof data === "object" && ("before" in data || "after" in data);
  const filters = h("div", { class: "detail-actions" },
    h("button", { type: "button", class: "filter", id: "filter-actor", onclick: () => set({ q: addTerm(q, "actor", it.principal_id), open: null }) }, "Filter by this actor"),
    it.resource_id ? h("button", { type: "button", class: "filter", id: "filter-resource", onclick: () => set({ q: addTerm(q, "resource_id", it.resource_id), open: null }) }, "Filter by this resource") : null);
  const title = `${short(it.action)} ${it.resource_type ? short(it.resource_type) : ""} ${it.resource_display || it.resource_id || ""}`.trim();
  return panel(title, close,
    h("p", { class: "muted" }, "by ", h("strong", {}, it.display_name || it.principal_id), " via ", short(it.source), " · ", time(it.timestamp)),
    // Verified here, against the log's signed checkpoint; "Check again"
    // reads the entry anew (its leaf_index comes once it is sequenced).
    verifyBadge(ctx, AUDIT, it, L, () => ctx.api.get(ctx.base + "/audit_logs", { q: "event_id:" + it.event_id, limit: 1 }).then((d) => (d.items || [])[0])),
    filters,
    hasDiff ? [h("h3", {}, "Changes"), h("div", { class: "diff-box", id: "diff" }, diffTable(data.before, data.after))] : null,
    h("h3", {}, "Fields"), fields(pairs),
    h("h3", {}, "data"), data === null || data === undefined ? h("p", { class: "muted" }, "No data.") : json(data, "The entry's data"));
}
