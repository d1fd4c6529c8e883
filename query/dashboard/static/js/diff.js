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

// changes answers [{path, kind: added|removed|changed|same, before, after}]:
// objects compared key by key (in key order), arrays element by element
// *by value* (one scope added to a list is one added row, whatever its
// place), anything else as its JSON text.
export function changes(before, after) {
  const out = [];
  walk(before ?? {}, after ?? {}, "", out);
  return out;
}

const isObject = (v) => v !== null && typeof v === "object" && !Array.isArray(v);

function walk(b, a, path, out) {
  if (isObject(b) && isObject(a) && (Object.keys(b).length || Object.keys(a).length)) {
    for (const k of [...new Set([...Object.keys(b), ...Object.keys(a)])].sort()) {
      const p = path ? `${path}.${k}` : k;
      if (!(k in a)) side(b[k], p, "removed", out);
      else if (!(k in b)) side(a[k], p, "added", out);
      else walk(b[k], a[k], p, out);
    }
    return;
  }
  if (Array.isArray(b) && Array.isArray(a) && (b.length || a.length)) {
    // Match equal elements (as JSON text), each at most once; what is
    // left of before was removed, what is left of after was added.
    const left = new Map();
    b.forEach((x, i) => {
      const key = JSON.stringify(x);
      if (!left.has(key)) left.set(key, []);
      left.get(key).push(i);
    });
    const rows = [];
    a.forEach((y, j) => {
      const key = JSON.stringify(y), at = left.get(key);
      if (at && at.length) {
        at.shift();
        side(y, `${path}[${j}]`, "same", rows);
      } else side(y, `${path}[${j}]`, "added", rows);
    });
    for (const [, idx] of left) for (const i of idx) side(b[i], `${path}[${i}]`, "removed", rows);
    out.push(...rows);
    return;
  }
  const x = JSON.stringify(b), y = JSON.stringify(a);
  if (x === y) { out.push({ path: path || "(value)", kind: "same", before: x, after: y }); return; }
  if ((b !== null && typeof b === "object") || (a !== null && typeof a === "object")) {
    // A value became a structure (or the other way): the old leaves
    // removed, the new ones added.
    side(b, path, "removed", out);
    side(a, path, "added", out);
    return;
  }
  out.push({ path: path || "(value)", kind: "changed", before: x, after: y });
}

// side lists every leaf of v under path as one kind of change.
function side(v, path, kind, out) {
  for (const [p, text] of flatten(v, path)) {
    out.push({ path: p, kind, before: kind === "added" ? undefined : text, after: kind === "removed" ? undefined : text });
  }
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
