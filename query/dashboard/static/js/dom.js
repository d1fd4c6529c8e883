// Building the DOM without HTML strings: every value is set as text or as
// a property, never parsed as markup, so a value taken from an event
// (a resource name holding an img tag with an error handler) shows as the
// text it is.

// h makes an element: h("a", {href, class: "x", onclick: f}, "text", child…).
// Attributes named on* must be functions (they are added as listeners);
// null, undefined and false attributes and children are skipped; strings
// and numbers become text nodes.
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith("on")) {
      if (typeof v !== "function") throw new TypeError(`${k} must be a function`);
      el.addEventListener(k.slice(2), v);
    } else if (k === "class") {
      el.className = v;
    } else if (k === "dataset") {
      Object.assign(el.dataset, v);
    } else if (k === "text") {
      el.textContent = String(v);
    } else if (k === "style") {
      throw new TypeError("style attributes are refused by the page's CSP: use a class");
    } else if (k in el && typeof v !== "string") {
      el[k] = v;
    } else {
      el.setAttribute(k, v === true ? "" : String(v));
    }
  }
  append(el, children);
  return el;
}

// append adds children (nested arrays allowed) to el as nodes or text.
export function append(el, children) {
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

// clear empties el and returns it.
export function clear(el) {
  el.replaceChildren();
  return el;
}

// svg makes an SVG element (histograms): attributes are set as strings.
export function svg(tag, attrs, ...children) {
  const el = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else el.setAttribute(k, String(v));
  }
  append(el, children);
  return el;
}

// time renders an RFC 3339 instant in the viewer's zone, with UTC on hover.
export function time(iso) {
  if (!iso) return h("span", { class: "muted" }, "—");
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return h("span", {}, iso);
  const local = d.toLocaleString(undefined, { year: "numeric", month: "short", day: "2-digit", hour: "2-digit", minute: "2-digit", second: "2-digit", timeZoneName: "short" });
  return h("time", { datetime: iso, title: d.toISOString().replace(".000Z", "Z") + " UTC" }, local);
}
