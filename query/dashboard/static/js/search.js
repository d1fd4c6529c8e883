// The search box: the q language of the listing routes (docs/api.md, audit.yaml)
// with completion of its keys and of the values of enum-like keys, in a
// small listbox driven by the keyboard (↑ ↓ choose, Enter or Tab accept,
// Esc closes) or the mouse.
import { h, clear } from "./dom.js";

const resourceTypes = ["API_KEY", "CUSTOMER", "INVITATION", "ORGANIZATION", "PROJECT", "PROJECT_MEMBER", "USER", "WORKER",
  "GATEWAY", "PLUGIN", "HOOK", "MODEL", "AUTH_PROVIDER", "SECRET", "USER_CONNECTION", "DEPLOYMENT", "SETTING"];

// grammar: per kind, each key with a hint and its values (when enumerable).
export const grammar = {
  audit: {
    action: { hint: "what was done", values: ["CREATED", "UPDATED", "DELETED", "DISABLED"] },
    source: { hint: "through which channel", values: ["API", "DASHBOARD", "CLI", "SDK", "SYSTEM"] },
    resource_type: { hint: "kind of resource", values: resourceTypes },
    resource_id: { hint: "id of the resource" },
    actor: { hint: "principal id, user id or display name" },
    principal_type: { hint: "kind of principal", values: ["ACCOUNT", "API_KEY", "SERVICE_KEY", "PLATFORM_ADMIN", "SYSTEM"] },
    project: { hint: "project id (UUID)" },
    ip: { hint: "address or CIDR" },
    event_id: { hint: "event id (UUID)" },
  },
  executions: {
    tool: { hint: "tool name" },
    toolkit: { hint: "toolkit", values: ["DocsToolkit", "MailToolkit", "DocumentDbToolkit"] },
    user: { hint: "user acted for" },
    success: { hint: "outcome", values: ["true", "false"] },
    hook_decision: { hint: "a hook's decision or failure mode", values: ["allow", "deny", "fail_open", "fail_closed"] },
    error_kind: { hint: "error kind", values: ["HOOK_CHECK_FAILED", "HOOK_RATE_LIMITED", "TOOL_INPUT_INVALID", "TOOL_RUNTIME_ERROR",
      "TOOL_TIMEOUT", "UPSTREAM_ERROR", "NOT_FOUND", "SECRET_MISSING", "AUTHORIZATION_REQUIRED", "AUTHORIZATION_FAILED", "AUTH_PROVIDER_NOT_CONFIGURED"] },
  },
};

// quote quotes a value when the language needs it (spaces, commas, quotes, colons).
export function quote(v) {
  v = String(v);
  return /^[^\s",:]+$/.test(v) ? v : '"' + v.replace(/[\\"]/g, (c) => "\\" + c) + '"';
}

// addTerm appends key:value to q unless q already holds that term.
export function addTerm(q, key, value) {
  const term = (key ? key + ":" : "") + quote(value);
  const terms = splitTerms(q || "");
  if (terms.some((t) => t.text === term)) return q || "";
  return [...terms.map((t) => t.text), term].join(" ");
}

// splitTerms cuts q into terms at spaces outside quotes, with their offsets.
export function splitTerms(q) {
  const out = [];
  let start = -1, inQuote = false, escaped = false;
  for (let i = 0; i <= q.length; i++) {
    const c = q[i];
    if (i === q.length || (!inQuote && /\s/.test(c))) {
      if (start >= 0) out.push({ start, end: i, text: q.slice(start, i) });
      start = -1;
      continue;
    }
    if (start < 0) start = i;
    if (escaped) escaped = false;
    else if (inQuote && c === "\\") escaped = true;
    else if (c === '"') inQuote = !inQuote;
  }
  return out;
}

// suggestions answers what completes the term that ends at the caret:
// [{label, hint, insert}] where insert replaces the term's text.
export function suggestions(kind, q, caret) {
  const keys = grammar[kind];
  let start = caret;
  while (start > 0 && !/\s/.test(q[start - 1])) start--;
  const word = q.slice(start, caret);
  if (word.includes('"')) return { start, list: [] };
  const neg = word.startsWith("-") ? "-" : "";
  const body = word.slice(neg.length);
  const colon = body.indexOf(":");
  if (colon < 0) {
    const list = Object.entries(keys).filter(([k]) => k.startsWith(body.toLowerCase()))
      .map(([k, g]) => ({ label: neg + k + ":", hint: g.hint, insert: neg + k + ":" }));
    return { start, list: body === "" && !neg ? list : list.filter((s) => s.insert !== word) };
  }
  const key = body.slice(0, colon);
  const g = keys[key];
  if (!g || !g.values) return { start, list: [] };
  const vals = body.slice(colon + 1);
  const comma = vals.lastIndexOf(",");
  const done = vals.slice(0, comma + 1);
  const part = vals.slice(comma + 1).toUpperCase();
  const chosen = done.split(",").filter(Boolean);
  const list = g.values.filter((v) => v.toUpperCase().startsWith(part) && !chosen.includes(v) && v.toUpperCase() !== part)
    .map((v) => ({ label: v, hint: key, insert: neg + key + ":" + done + v }));
  return { start, list };
}

let boxes = 0;

// searchBox makes the form: input, completion list and a submit button.
// onSubmit(q) runs on Enter (no suggestion chosen) or on the button.
export function searchBox(kind, value, onSubmit) {
  const n = ++boxes;
  const list = h("ul", { class: "completions", id: "completions-" + n, role: "listbox", hidden: true });
  const input = h("input", {
    type: "search", id: "q", name: "q", value: value || "", autocomplete: "off", spellcheck: "false",
    placeholder: kind === "audit" ? "action:CREATED source:DASHBOARD actor:alice \"free text\"  ( / )" : "hook_decision:fail_open tool:CountDocuments  ( / )",
    role: "combobox", "aria-autocomplete": "list", "aria-expanded": "false", "aria-controls": list.id, "aria-label": "Search",
  });
  let items = [], active = -1, start = 0;

  const close = () => { list.hidden = true; items = []; active = -1; input.setAttribute("aria-expanded", "false"); input.removeAttribute("aria-activedescendant"); };
  const show = () => {
    const s = suggestions(kind, input.value, input.selectionStart ?? input.value.length);
    items = s.list.slice(0, 12);
    start = s.start;
    active = -1;
    clear(list);
    if (!items.length) return close();
    items.forEach((it, i) => list.append(h("li", {
      id: `completion-${n}-${i}`, role: "option", "aria-selected": "false",
      onmousedown: (e) => { e.preventDefault(); accept(i); },
    }, h("span", { class: "mono" }, it.label), it.hint ? h("span", { class: "muted" }, " " + it.hint) : null)));
    list.hidden = false;
    input.setAttribute("aria-expanded", "true");
  };
  const mark = (i) => {
    active = i;
    [...list.children].forEach((li, j) => li.setAttribute("aria-selected", String(j === i)));
    if (i >= 0) { input.setAttribute("aria-activedescendant", list.children[i].id); list.children[i].scrollIntoView({ block: "nearest" }); }
  };
  const accept = (i) => {
    const it = items[i];
    const caret = input.selectionStart ?? input.value.length;
    const before = input.value.slice(0, start) + it.insert;
    const after = input.value.slice(caret);
    const sep = it.insert.endsWith(":") || after.startsWith(" ") ? "" : " ";
    input.value = before + sep + after;
    const pos = before.length + sep.length;
    input.setSelectionRange(pos, pos);
    input.focus();
    show();
  };
  input.addEventListener("input", show);
  input.addEventListener("focus", show);
  input.addEventListener("click", show);
  input.addEventListener("blur", () => setTimeout(close, 100));
  // A chosen suggestion's Enter must not submit too: some input paths
  // (automation) deliver its keypress even when keydown was prevented.
  let suppress = false;
  input.addEventListener("keypress", (e) => { if (e.key === "Enter" && suppress) { e.preventDefault(); suppress = false; } });
  input.addEventListener("keydown", (e) => {
    suppress = false;
    if (e.key === "ArrowDown" && items.length) { e.preventDefault(); mark((active + 1) % items.length); }
    else if (e.key === "ArrowUp" && items.length) { e.preventDefault(); mark((active - 1 + items.length) % items.length); }
    else if ((e.key === "Enter" || e.key === "Tab") && active >= 0) { e.preventDefault(); suppress = e.key === "Enter"; accept(active); }
    else if (e.key === "Escape") {
      if (!list.hidden) { e.preventDefault(); e.stopPropagation(); close(); } else input.blur();
    }
  });
  const form = h("form", { class: "search", role: "search", onsubmit: (e) => { e.preventDefault(); close(); onSubmit(input.value.trim()); } },
    h("div", { class: "combo" }, input, list),
    h("button", { type: "submit", class: "primary", id: "search-go" }, "Search"));
  return { form, input };
}
