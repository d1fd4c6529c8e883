// before/after of a change as a diff: both sides flattened to JSON paths
// (a.b[2].c), each path shown once as added, removed, changed or, folded
// away, unchanged. Values are shown as JSON text.
import { h } from "./dom.js";

// flatten maps every leaf path of v to its JSON text; empty objects and
// arrays are leaves.
export function flatten(v, path = "", out = new Map()) {
  if (v !== null && typeof v === "object" && Object.keys(v).length > 0) {
    if (Array.isArray(v)) v.forEach((x, i) => flatten(x, `${path}[${i}]`, out));
    else for (const k of Object.keys(v).sort()) flatten(v[k], path ? `${path}.${k}` : k, out);
  } else if (v !== undefined) {
    out.set(path || "(value)", JSON.stringify(v));
  }
  return out;
}

// changes answers [{path, kind: added|removed|changed|same, before, after}] in path order.
export function changes(before, after) {
  const b = flatten(before ?? {}), a = flatten(after ?? {});
  const paths = [...new Set([...b.keys(), ...a.keys()])].sort();
  return paths.map((p) => {
    const x = b.get(p), y = a.get(p);
    const kind = x === undefined ? "added" : y === undefined ? "removed" : x === y ? "same" : "changed";
    return { path: p, kind, before: x, after: y };
  });
}

const marks = { added: "+", removed: "−", changed: "~", same: " " };

// diffTable renders the changes; unchanged paths are counted, and listed on demand.
export function diffTable(before, after) {
  const rows = changes(before, after);
  const changed = rows.filter((r) => r.kind !== "same");
  const same = rows.filter((r) => r.kind === "same");
  const row = (r) => h("tr", { class: "d-" + r.kind },
    h("td", { class: "mark", "aria-label": r.kind }, marks[r.kind]),
    h("td", { class: "mono path" }, r.path),
    h("td", { class: "mono before" }, r.before ?? ""),
    h("td", { class: "mono after" }, r.after ?? ""));
  const table = h("table", { class: "diff" },
    h("thead", {}, h("tr", {}, h("th", {}, ""), h("th", {}, "Field"), h("th", {}, "Before"), h("th", {}, "After"))),
    h("tbody", {}, changed.length ? changed.map(row) : h("tr", {}, h("td", { colspan: "4", class: "muted" }, "No field changed."))));
  const out = [table];
  if (same.length) {
    out.push(h("details", { class: "unchanged" }, h("summary", {}, `${same.length} unchanged field${same.length === 1 ? "" : "s"}`),
      h("table", { class: "diff" }, h("tbody", {}, same.map(row)))));
  }
  return out;
}
