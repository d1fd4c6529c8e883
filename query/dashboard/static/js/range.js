// The time range of a view: a preset relative to now (range=1h|24h|7d|30d,
// the default 24h, open at the end so that new entries belong to it) or a
// custom since–until (RFC 3339 in the URL, as the API takes them).
import { h } from "./dom.js";

export const presets = { "1h": 3600e3, "24h": 86400e3, "7d": 7 * 86400e3, "30d": 30 * 86400e3 };
export const defaultPreset = "24h";

// resolve answers {preset, since, until, from, to}: since/until are the API
// parameters ("" when open), from/to the Date bounds for a histogram.
export function resolve(params, now = Date.now()) {
  const since = params.get("since") || "", until = params.get("until") || "";
  if (since || until) {
    const from = since ? new Date(since) : new Date(now - presets[defaultPreset]);
    const to = until ? new Date(until) : new Date(now);
    return { preset: "", since, until, from, to };
  }
  const preset = presets[params.get("range")] ? params.get("range") : defaultPreset;
  // Rounded down to the second: the same view asked twice in a second is the same query.
  const from = new Date(Math.floor((now - presets[preset]) / 1000) * 1000);
  return { preset, since: from.toISOString(), until: "", from, to: new Date(now) };
}

// rangeKey is what identifies the range in a cache: a preset by its name.
export function rangeKey(params) {
  const since = params.get("since") || "", until = params.get("until") || "";
  return since || until ? `${since}~${until}` : presets[params.get("range")] ? params.get("range") : defaultPreset;
}

// local formats a Date for <input type="datetime-local"> in the viewer's zone.
function local(d) {
  if (!d || Number.isNaN(d.getTime())) return "";
  const p = (n) => String(n).padStart(2, "0");
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())}T${p(d.getHours())}:${p(d.getMinutes())}`;
}

// picker makes the preset buttons and the custom since–until fields;
// set(changes) receives URL changes ({range} or {since, until}).
export function picker(params, set) {
  const r = resolve(params);
  const group = h("div", { class: "range", role: "group", "aria-label": "Time range" });
  for (const p of Object.keys(presets)) {
    group.append(h("button", { type: "button", class: r.preset === p ? "on" : null, "aria-pressed": String(r.preset === p), dataset: { range: p },
      onclick: () => set({ range: p === defaultPreset ? null : p, since: null, until: null }) }, p));
  }
  const from = h("input", { type: "datetime-local", id: "range-since", "aria-label": "Since", value: r.preset ? "" : local(params.get("since") ? r.from : null) });
  const to = h("input", { type: "datetime-local", id: "range-until", "aria-label": "Until", value: r.preset ? "" : local(params.get("until") ? r.to : null) });
  const custom = h("form", { class: "custom" + (r.preset ? "" : " on"), onsubmit: (e) => {
    e.preventDefault();
    const s = from.value ? new Date(from.value) : null, u = to.value ? new Date(to.value) : null;
    if (!s && !u) return;
    set({ range: null, since: s ? s.toISOString() : null, until: u ? u.toISOString() : null });
  } }, from, h("span", { class: "muted" }, "–"), to, h("button", { type: "submit", id: "range-apply" }, "Apply"));
  group.append(custom);
  return group;
}
