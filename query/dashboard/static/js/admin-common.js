// What the admin views share: who may use them, the confirmation dialog,
// the secret shown once, the state badge. Every value is set as text
// (dom.js h), never parsed as markup.
import { h } from "./dom.js";
import { ApiError } from "./api.js";

// Principal types that manage every organization without a membership
// (their role in /api/v1/me is ""). A project service key also has role
// "" but manages nothing.
const platformTypes = ["PLATFORM_ADMIN", "SYSTEM"];

// canAdmin reports whether the signed-in principal may change the keys and
// hooks of org: its owners and admins, and the platform admin. The server
// decides in the end (a 403 goes to the banner).
export function canAdmin(me, org) {
  if (!org) return false;
  if (org.role === "owner" || org.role === "admin") return true;
  const type = me && me.principal ? me.principal.type : "";
  return org.role === "" && platformTypes.includes(type);
}

// guard starts an admin view: its title, and for a principal who may not
// manage the organization, the banner's 403 and an empty state (false)
// saying what the view manages (refused; by default the keys' and hooks').
export function guard(root, ctx, title, refused) {
  root.append(h("h1", {}, title));
  if (canAdmin(ctx.me, ctx.org)) return true;
  ctx.showError(new ApiError(403, "owner or admin of the organization"));
  root.append(h("p", { class: "empty", id: "admin-refused" }, refused || "Owners and admins of the organization manage its API keys, service keys and hooks here."));
  return false;
}

// confirmDialog asks a question in a modal <dialog> made of DOM (Escape or
// Cancel: false). It answers a promise of the choice.
export function confirmDialog(message, action) {
  const no = h("button", { type: "submit", value: "no", id: "confirm-no" }, "Cancel");
  const yes = h("button", { type: "submit", value: "yes", id: "confirm-yes", class: "danger" }, action);
  const dlg = h("dialog", { class: "admin-confirm", id: "confirm", "aria-labelledby": "confirm-msg" },
    h("form", { method: "dialog" },
      h("p", { id: "confirm-msg" }, message),
      h("div", { class: "admin-actions" }, no, yes)));
  document.body.append(dlg);
  return new Promise((resolve) => {
    dlg.addEventListener("close", () => {
      resolve(dlg.returnValue === "yes");
      dlg.remove();
    });
    dlg.showModal();
    no.focus(); // the safe choice is the default one
  });
}

// closeDialogs is the admin views' cleanup: a question left open by the
// view is answered Cancel.
export function closeDialogs() {
  for (const d of document.querySelectorAll("dialog.admin-confirm")) d.close();
}

// secretOnce is the panel of a new key's secret, shown once: a read-only
// field, a copy button and a Done button that forgets it.
export function secretOnce(name, secret) {
  const field = h("input", { type: "text", id: "new-secret-value", readOnly: true, value: secret, class: "mono", spellcheck: "false", autocomplete: "off", "aria-label": "The new key" });
  field.addEventListener("focus", () => field.select());
  const status = h("span", { class: "muted", role: "status" });
  const copy = h("button", { type: "button", id: "new-secret-copy", class: "primary", onclick: async () => {
    try {
      await navigator.clipboard.writeText(secret);
      status.textContent = "Copied.";
    } catch {
      field.focus();
      field.select();
      status.textContent = document.execCommand && document.execCommand("copy") ? "Copied." : "Selected: copy it with Ctrl+C or ⌘C.";
    }
  } }, "Copy");
  const panel = h("section", { class: "admin-secret", id: "new-secret", "aria-labelledby": "new-secret-title" },
    h("h2", { id: "new-secret-title" }, "New key ", h("span", { class: "name" }, name), ": copy it now"),
    h("p", {}, h("strong", {}, "You will not see it again."), " Only its hash is kept. If it is lost, create another key and disable this one."),
    field,
    h("div", { class: "admin-actions" }, copy,
      h("button", { type: "button", id: "new-secret-done", onclick: () => { field.value = ""; panel.remove(); } }, "Done"),
      status));
  return panel;
}

// state is a badge: on (enabled, active) or off.
export function state(on, onText, offText) {
  return h("span", { class: "admin-state " + (on ? "on" : "off") }, on ? onText : offText);
}

// cell is a table cell labelled for the narrow layout (the label shows
// before the value when rows stack).
export function cell(label, ...children) {
  return h("td", { "data-label": label }, ...children);
}

// busy disables the buttons of el while the promise of f runs.
export async function busy(el, f) {
  const buttons = [...el.querySelectorAll("button")].filter((b) => !b.disabled);
  for (const b of buttons) b.disabled = true;
  try {
    return await f();
  } finally {
    for (const b of buttons) b.disabled = false;
  }
}
