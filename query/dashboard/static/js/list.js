// What the audit log and the tool executions views share: a listing kept
// across redraws (the URL changes on every click, the entries loaded stay),
// pages by cursor, the table with keyboard navigation, the detail panel,
// the export buttons and the empty and error states.
import { h, clear, time } from "./dom.js";
import { ApiError } from "./api.js";
import { resolve, rangeKey } from "./range.js";

// Listing is one query's entries: created for a key (scope, q, range), it
// keeps the since/until it resolved (cursors are bound to them).
export class Listing {
  constructor(ctx, path, extra = {}) {
    const r = resolve(ctx.params);
    this.key = listingKey(ctx, path);
    this.path = path;
    this.q = ctx.params.get("q") || "";
    this.range = r;
    this.filters = { q: this.q, since: r.since, until: r.until, ...extra };
    this.items = [];
    this.cursor = null;
    this.hasMore = false;
    this.loaded = false;
    this.loading = null;
    this.error = null;
    this.fresh = new Set(); // ids of entries that arrived live (animated once)
  }

  // more fetches the next page (the first when none is loaded).
  more(api) {
    if (this.loading) return this.loading;
    const params = { ...this.filters, limit: 50 };
    if (this.cursor) params.cursor = this.cursor;
    this.error = null;
    this.loading = api.get(this.path, params).then((d) => {
      this.items.push(...(d.items || []).filter((it) => !this.has(idOf(it))));
      this.cursor = d.next_cursor || null;
      this.hasMore = !!d.has_more;
      this.loaded = true;
    }, (e) => { this.error = e; throw e; }).finally(() => { this.loading = null; });
    return this.loading;
  }

  has(id) {
    return this.items.some((it) => idOf(it) === id);
  }
}

export function listingKey(ctx, path) {
  return [path, ctx.params.get("q") || "", rangeKey(ctx.params)].join("\u0000");
}

// idOf is an entry's identity in the page: its event_id.
export function idOf(it) {
  return it.event_id;
}

// rowsTable draws the table of items: columns [{title, cell(it), cls}];
// a row opens its entry on click or Enter.
export function rowsTable(columns, items, { open, fresh, onOpen }) {
  const tbody = h("tbody", {});
  for (const it of items) tbody.append(row(columns, it, { open, fresh, onOpen }));
  return h("table", { class: "entries", id: "entries" },
    h("thead", {}, h("tr", {}, columns.map((c) => h("th", { class: (c.cls || "").includes("hide-narrow") ? "hide-narrow" : null, scope: "col" }, c.title)))),
    tbody);
}

export function row(columns, it, { open, fresh, onOpen }) {
  const id = idOf(it);
  const cls = [id === open ? "open" : "", fresh && fresh.has(id) ? "fresh" : ""].filter(Boolean).join(" ");
  return h("tr", { tabindex: "0", class: cls || null, dataset: { id }, "aria-selected": String(id === open),
    onclick: (e) => { if (!e.target.closest("button, a")) onOpen(id); } },
  columns.map((c) => h("td", { class: c.cls || null }, c.cell(it))));
}

// moreButton is "Load more" (or the end of the list).
export function moreButton(listing, onMore) {
  if (!listing.loaded) return null;
  if (!listing.hasMore) return h("p", { class: "muted end", id: "end" }, listing.items.length ? `${listing.items.length} entr${listing.items.length === 1 ? "y" : "ies"}, no more.` : "");
  return h("button", { type: "button", id: "more", onclick: onMore }, "Load more");
}

// emptyState says why the table is empty and what to do.
export function emptyState(listing, what) {
  if (listing.error) return null;
  if (!listing.loaded) return h("p", { class: "empty", id: "loading", "aria-live": "polite" }, "Loading…");
  if (listing.items.length) return null;
  const r = listing.range;
  return h("div", { class: "empty", id: "empty" },
    h("p", {}, `No ${what} ${listing.q ? "match " : ""}`, listing.q ? h("code", {}, listing.q) : null,
      r.preset ? ` in the last ${r.preset}.` : " in this range."),
    h("p", { class: "muted" }, listing.q ? "Remove a term, or widen the time range." : "Widen the time range, or pick another project."));
}

// errorState shows a failed load inline, with a retry; the banner (ctx.showError) says more.
export function errorState(listing, retry) {
  if (!listing.error) return null;
  const e = listing.error;
  const msg = e instanceof ApiError && e.status === 400 ? "The search is not valid: " + e.message : "The entries could not be loaded" + (e.message ? ": " + e.message : ".");
  return h("div", { class: "error-state", id: "list-error", role: "alert" }, h("p", { class: "error" }, msg), h("button", { type: "button", onclick: retry }, "Retry"));
}

// exportButtons download the current view as CSV or JSON Lines. The
// export routes want the bearer header, so the file is fetched, turned
// into a Blob and saved through an object URL (allowed by the CSP).
export function exportButtons(ctx, path, filters) {
  const run = async (format, btn) => {
    btn.disabled = true;
    try {
      const url = ctx.api.url(path + "/export", { ...filters, format });
      const res = await ctx.api.fetch(url, { headers: { Accept: format === "csv" ? "text/csv" : "application/x-ndjson" } });
      if (!res.ok) throw await ctx.api.failure(res);
      const blob = await res.blob();
      const cd = res.headers.get("Content-Disposition") || "";
      const m = /filename="?([^";]+)"?/.exec(cd);
      const name = m ? m[1] : `${path.split("/").pop()}.${format}`;
      const href = URL.createObjectURL(blob);
      const a = h("a", { href, download: name, hidden: true });
      document.body.append(a);
      a.click();
      a.remove();
      setTimeout(() => URL.revokeObjectURL(href), 60e3);
    } catch (e) {
      ctx.showError(e);
    } finally {
      btn.disabled = false;
    }
  };
  const b1 = h("button", { type: "button", id: "export-csv", title: "Every entry of this search, as CSV", onclick: () => run("csv", b1) }, "Export CSV");
  const b2 = h("button", { type: "button", id: "export-jsonl", title: "Every entry of this search, one JSON object a line", onclick: () => run("jsonl", b2) }, "Export JSON Lines");
  return h("span", { class: "exports" }, b1, b2);
}

// keyboard installs the view's keys: / focuses the search, j/k or ↓/↑ move
// through the rows, Enter opens, Esc closes. Answers the uninstaller.
export function keyboard({ search, open, close }) {
  const onKey = (e) => {
    if (e.defaultPrevented || e.altKey || e.ctrlKey || e.metaKey) return;
    const el = document.activeElement;
    const typing = el && (el.tagName === "INPUT" || el.tagName === "TEXTAREA" || el.tagName === "SELECT" || el.isContentEditable);
    if (e.key === "Escape") {
      if (typing && el.id === "q") return;
      if (close()) e.preventDefault();
      return;
    }
    if (typing) return;
    if (e.key === "/") {
      e.preventDefault();
      search().focus();
      search().select();
      return;
    }
    const rows = [...document.querySelectorAll("#entries tbody tr[data-id]")];
    if (!rows.length) return;
    const at = rows.indexOf(el && el.closest ? el.closest("tr[data-id]") : null);
    let to = -1;
    if (e.key === "j" || e.key === "ArrowDown") to = Math.min(rows.length - 1, at + 1);
    else if (e.key === "k" || e.key === "ArrowUp") to = Math.max(0, at < 0 ? 0 : at - 1);
    else if (e.key === "Enter" && at >= 0) { e.preventDefault(); open(rows[at].dataset.id); return; }
    if (to >= 0) {
      e.preventDefault();
      rows[to].focus();
    }
  };
  document.addEventListener("keydown", onKey);
  return () => document.removeEventListener("keydown", onKey);
}

// panel is the detail of one entry: a heading, a close button and body.
export function panel(title, close, ...body) {
  return h("aside", { class: "detail", id: "detail", "aria-label": "Entry", tabindex: "-1" },
    h("div", { class: "detail-head" }, h("h2", {}, title),
      h("button", { type: "button", class: "close", id: "detail-close", "aria-label": "Close (Esc)", title: "Close (Esc)", onclick: close }, "×")),
    body);
}

// fields renders [label, value] pairs as a definition list; a value is a
// Node or text, null shows as —.
export function fields(pairs) {
  const dl = h("dl", { class: "fields" });
  for (const [k, v] of pairs) {
    dl.append(h("dt", {}, k), h("dd", { class: v === null || v === undefined ? "muted" : null }, v === null || v === undefined || v === "" ? "—" : v));
  }
  return dl;
}

// json pretty-prints a value as text; the block scrolls when it is wider
// or taller than the panel, so it takes the focus (keyboard users scroll it).
export function json(v, label = "JSON") {
  return h("pre", { class: "json", tabindex: "0", role: "region", "aria-label": label }, JSON.stringify(v, null, 2));
}

// when is an instant for a table cell: dom.js time() (viewer's zone, UTC
// on hover) in a compact form — the time alone today, no year this year.
export function when(iso) {
  const el = time(iso);
  const d = new Date(iso);
  if (!iso || Number.isNaN(d.getTime())) return el;
  // Always the date and the time zone (a list spans days, and a reader
  // compares it with logs kept in UTC); the year only when it is not this one.
  const year = d.getFullYear() === new Date().getFullYear() ? {} : { year: "numeric" };
  el.textContent = d.toLocaleString(undefined, { month: "short", day: "numeric", ...year, hour: "2-digit", minute: "2-digit", second: "2-digit", timeZoneName: "short" });
  return el;
}

// focusRow focuses the row of id (after a redraw).
export function focusRow(id) {
  if (!id) return;
  const tr = [...document.querySelectorAll("#entries tbody tr[data-id]")].find((r) => r.dataset.id === id);
  if (tr) tr.focus({ preventScroll: false });
}

export { clear };
