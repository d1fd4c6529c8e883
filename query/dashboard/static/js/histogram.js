// The histogram of a range (GET …/audit_logs/stats): stacked bars per
// bucket and key (action, source or resource type), drawn in SVG; a drag
// across it selects a sub-range (zoom). Colours come from app.css classes
// (k0…k9), so dark mode applies.
import { h, svg } from "./dom.js";

const bucketMs = { minute: 60e3, hour: 3600e3, day: 86400e3 };

// bucketFor picks the bucket for a span: at most ~200 bars.
export function bucketFor(from, to) {
  const span = to - from;
  if (span <= 3 * 3600e3) return "minute";
  if (span <= 8 * 86400e3) return "hour";
  return "day";
}

// short drops an enum's prefix: AUDIT_ACTION_CREATED → CREATED.
export function short(k) {
  return String(k).replace(/^(AUDIT_ACTION_|AUDIT_SOURCE_|RESOURCE_TYPE_)/, "");
}

const H = 150, padL = 36, padB = 20, padT = 6;

// histogram draws data.buckets over [from, to) into a figure; onZoom(from,
// to) receives a dragged range (Dates), onKey(key) a legend click.
export function histogram({ buckets, from, to, bucket, width, onZoom, onKey }) {
  const W = Math.max(280, Math.floor(width || 800));
  const plotW = W - padL - 8, plotH = H - padB - padT;
  const keys = [];
  const totals = new Map();
  for (const b of buckets) {
    for (const [k, n] of Object.entries(b.counts || {})) {
      if (!totals.has(k)) keys.push(k);
      totals.set(k, (totals.get(k) || 0) + n);
    }
  }
  keys.sort((a, b) => totals.get(b) - totals.get(a));
  // Actions keep the colours of their badges; other keys take the palette in order.
  const fixed = { AUDIT_ACTION_UPDATED: "k0", AUDIT_ACTION_CREATED: "k1", AUDIT_ACTION_DELETED: "k2", AUDIT_ACTION_DISABLED: "k3" };
  const cls = new Map(keys.map((k, i) => [k, fixed[k] || "k" + (i % 10)]));
  const t0 = from.getTime(), t1 = Math.max(to.getTime(), t0 + 1);
  const x = (t) => padL + ((t - t0) / (t1 - t0)) * plotW;
  const step = bucketMs[bucket] || 3600e3;
  const max = Math.max(1, ...buckets.map((b) => Object.values(b.counts || {}).reduce((s, n) => s + n, 0)));
  const yTop = niceMax(max);
  const y = (n) => padT + plotH - (n / yTop) * plotH;
  const bars = svg("g", { class: "bars" });
  for (const b of buckets) {
    const s = new Date(b.start).getTime();
    if (Number.isNaN(s)) continue;
    const left = Math.max(padL, x(s)), right = Math.min(padL + plotW, x(s + step));
    if (right <= padL || left >= padL + plotW) continue;
    const bw = Math.max(1, right - left - (right - left > 4 ? 1 : 0));
    let acc = 0;
    for (const k of keys) {
      const n = (b.counts || {})[k];
      if (!n) continue;
      const top = y(acc + n), bottom = y(acc);
      acc += n;
      bars.append(svg("rect", { class: "bar " + cls.get(k), x: left.toFixed(1), y: top.toFixed(1), width: bw.toFixed(1), height: Math.max(0.5, bottom - top).toFixed(1) },
        svg("title", {}, `${new Date(s).toLocaleString()} · ${short(k)}: ${n}`)));
    }
  }
  const axis = svg("g", { class: "axis" },
    svg("line", { x1: padL, y1: padT + plotH, x2: padL + plotW, y2: padT + plotH }),
    svg("text", { x: padL - 4, y: padT + 8, "text-anchor": "end" }, String(yTop)),
    svg("text", { x: padL - 4, y: padT + plotH, "text-anchor": "end" }, "0"));
  for (const t of ticks(t0, t1, Math.max(2, Math.floor(plotW / 130)))) {
    axis.append(svg("line", { class: "tick", x1: x(t), y1: padT + plotH, x2: x(t), y2: padT + plotH + 4 }),
      svg("text", { x: x(t), y: H - 4, "text-anchor": "middle" }, tickLabel(t, t1 - t0)));
  }
  const sel = svg("rect", { class: "selection", x: 0, y: padT, width: 0, height: plotH, visibility: "hidden" });
  const hit = svg("rect", { class: "hit", x: padL, y: padT, width: plotW, height: plotH });
  const chart = svg("svg", { viewBox: `0 0 ${W} ${H}`, width: W, height: H, role: "img", "aria-label": "Entries over time; drag to zoom", class: "histogram" }, axis, bars, sel, hit);

  // Drag to zoom: pointer events in SVG coordinates.
  let startX = null;
  const px = (e) => {
    const r = chart.getBoundingClientRect();
    return Math.min(padL + plotW, Math.max(padL, ((e.clientX - r.left) / r.width) * W));
  };
  chart.addEventListener("pointerdown", (e) => {
    if (e.button !== 0) return;
    startX = px(e);
    chart.setPointerCapture(e.pointerId);
    sel.setAttribute("x", startX);
    sel.setAttribute("width", 0);
    sel.setAttribute("visibility", "visible");
    e.preventDefault();
  });
  chart.addEventListener("pointermove", (e) => {
    if (startX === null) return;
    const cur = px(e);
    sel.setAttribute("x", Math.min(startX, cur));
    sel.setAttribute("width", Math.abs(cur - startX));
  });
  const end = (e, apply) => {
    if (startX === null) return;
    const a = startX, b = px(e);
    startX = null;
    sel.setAttribute("visibility", "hidden");
    if (!apply || Math.abs(b - a) < 4) return;
    const t = (v) => new Date(Math.round((t0 + ((v - padL) / plotW) * (t1 - t0)) / 1000) * 1000);
    onZoom(t(Math.min(a, b)), t(Math.max(a, b)));
  };
  chart.addEventListener("pointerup", (e) => end(e, true));
  chart.addEventListener("pointercancel", (e) => end(e, false));

  const legend = h("ul", { class: "legend" }, keys.map((k) => h("li", {},
    h("button", { type: "button", class: "key", title: "Add to the search", dataset: { key: k }, onclick: () => onKey(k) },
      h("span", { class: "swatch " + cls.get(k), "aria-hidden": "true" }), short(k), h("span", { class: "muted" }, " " + totals.get(k))))));
  const total = [...totals.values()].reduce((s, n) => s + n, 0);
  return { chart, legend, total };
}

function niceMax(n) {
  const p = Math.pow(10, Math.floor(Math.log10(n)));
  for (const m of [1, 2, 2.5, 5, 10]) if (m * p >= n) return m * p;
  return 10 * p;
}

function ticks(t0, t1, count) {
  const span = t1 - t0;
  const steps = [60e3, 5 * 60e3, 15 * 60e3, 30 * 60e3, 3600e3, 3 * 3600e3, 6 * 3600e3, 12 * 3600e3, 86400e3, 2 * 86400e3, 7 * 86400e3];
  const step = steps.find((s) => span / s <= count) || 7 * 86400e3;
  const off = new Date(t0).getTimezoneOffset() * 60e3; // ticks on local round times
  const out = [];
  for (let t = Math.ceil((t0 - off) / step) * step + off; t < t1; t += step) out.push(t);
  return out;
}

function tickLabel(t, span) {
  const d = new Date(t);
  if (span <= 2 * 86400e3) return d.toLocaleTimeString(undefined, { hour: "2-digit", minute: "2-digit" });
  return d.toLocaleDateString(undefined, { month: "short", day: "numeric" });
}
