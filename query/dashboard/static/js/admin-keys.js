// The API keys of an organization and the service keys of a project:
// list, create (the secret shown once), disable, delete.
import { h, clear, time, append } from "./dom.js";
import { guard, confirmDialog, secretOnce, state, cell, busy, closeDialogs } from "./admin-common.js";

// keys is the view of the organization's keys (user keys and the service
// keys of its projects).
export const keys = {
  render(root, ctx) {
    if (!guard(root, ctx, "API keys")) return;
    const org = "/orgs/" + ctx.org.id;
    const user = h("select", { id: "key-user", name: "user_id", required: true });
    const form = createForm(ctx, "key", "Create key", [
      h("label", { for: "key-user" }, "For the member", user),
    ], (name) => ctx.api.send("POST", org + "/api_keys", { name, user_id: user.value }));
    root.append(
      h("p", { class: "muted" }, "A user key acts as its member, with the member's role. Disabling or deleting a key refuses its calls at once."),
      form.el,
      h("h2", {}, "Keys of ", ctx.org.name || ctx.org.id),
      form.list);
    const load = keyList(ctx, form.list, () => ctx.api.get(org + "/api_keys"), true);
    form.onCreated = load;
    ctx.api.get(org + "/members").then((m) => {
      if (!ctx.current()) return;
      const mine = ctx.me.principal && ctx.me.principal.user_id;
      for (const it of (m && m.items) || []) {
        user.append(h("option", { value: it.user_id, selected: it.user_id === mine }, `${it.display_name || it.user_id} (${it.user_id}, ${it.role})`));
      }
    }, (e) => ctx.current() && ctx.showError(e));
    load();
    return closeDialogs;
  },
};

// serviceKeys is the view of a project's service keys.
export const serviceKeys = {
  render(root, ctx) {
    if (!guard(root, ctx, "Service keys")) return;
    if (!ctx.project) {
      root.append(h("p", { class: "empty", id: "pick-project" }, "Service keys belong to a project: pick one above."));
      return;
    }
    const path = `/orgs/${ctx.org.id}/projects/${ctx.project.id}/service_keys`;
    const form = createForm(ctx, "service-key", "Create service key", [],
      (name) => ctx.api.send("POST", path, { name }));
    root.append(
      h("p", { class: "muted" }, "A service key lets an agent platform list and run the tools of ", h("strong", {}, ctx.project.name || ctx.project.id),
        " for the end user each call names, and nothing else."),
      form.el,
      h("h2", {}, "Service keys of ", ctx.project.name || ctx.project.id),
      form.list);
    const load = keyList(ctx, form.list, () => ctx.api.get(path), false);
    form.onCreated = load;
    load();
    return closeDialogs;
  },
};

// createForm is a form naming a new key (extra: more labelled fields);
// create(name) makes it and answers {key, name}; the secret is shown once
// above the list.
function createForm(ctx, id, action, extra, create) {
  const name = h("input", { id: id + "-name", name: "name", required: true, maxlength: 200, autocomplete: "off" });
  const out = { list: h("div", { class: "admin-list", "aria-live": "polite" }), onCreated: null };
  const slot = h("div", { class: "admin-slot" });
  const form = h("form", { class: "admin-form", id: id + "-form", onsubmit: async (e) => {
    e.preventDefault();
    await busy(form, async () => {
      try {
        const k = await create(name.value.trim());
        clear(slot).append(secretOnce(k.name, k.key));
        name.value = "";
        slot.querySelector("#new-secret-value").focus();
        if (out.onCreated) out.onCreated();
      } catch (err) {
        if (ctx.current()) ctx.showError(err);
      }
    });
  } },
  h("label", { for: id + "-name" }, "Name", name), ...extra,
  h("button", { type: "submit", class: "primary" }, action));
  out.el = h("div", {}, form, slot);
  return out;
}

// keyList fills el with the keys list() answers, each with disable and
// delete; withOwner adds the kind and the user or project of each key.
function keyList(ctx, el, list, withOwner) {
  const org = "/orgs/" + ctx.org.id;
  const projects = new Map(((ctx.org && ctx.org.projects) || []).map((p) => [p.id, p.name]));
  const load = async () => {
    let items;
    try {
      items = ((await list()) || {}).items || [];
    } catch (e) {
      if (!ctx.current()) return;
      clear(el).append(h("p", { class: "error" }, "The keys could not be loaded."));
      return ctx.showError(e);
    }
    if (!ctx.current()) return;
    items.sort((a, b) => String(b.created_at).localeCompare(String(a.created_at)));
    if (!items.length) {
      clear(el).append(h("p", { class: "empty" }, "No keys yet."));
      return;
    }
    const act = async (row, k, method, suffix, question, verb) => {
      if (!(await confirmDialog(question, verb))) return;
      await busy(row, async () => {
        try {
          await ctx.api.send(method, `${org}/api_keys/${encodeURIComponent(k.id)}${suffix}`);
          await load();
        } catch (e) {
          if (ctx.current()) ctx.showError(e);
        }
      });
    };
    const rows = items.map((k) => {
      const row = h("tr", { dataset: { keyId: k.id, state: k.disabled ? "disabled" : "active" } });
      const owner = k.kind === "service" ? `project ${projects.get(k.project_id) || k.project_id}` : k.user_id;
      const label = `«${k.name}»`;
      append(row, [
        cell("Name", h("span", { class: "name" }, k.name)),
        withOwner ? cell("Kind", k.kind) : null,
        withOwner ? cell("For", owner || "—") : null,
        cell("Prefix", h("code", {}, k.prefix ? k.prefix + "…" : "—")),
        cell("Created", time(k.created_at)),
        cell("State", state(!k.disabled, "active", "disabled")),
        cell("Actions", h("div", { class: "admin-actions" },
          k.disabled ? null : h("button", { type: "button", class: "disable", "aria-label": `Disable ${label}`,
            onclick: () => act(row, k, "POST", "/disable", `Disable the key ${label}? Calls made with it are refused at once, and a disabled key cannot be enabled again.`, "Disable key") }, "Disable"),
          h("button", { type: "button", class: "danger delete", "aria-label": `Delete ${label}`,
            onclick: () => act(row, k, "DELETE", "", `Delete the key ${label}? Calls made with it are refused at once. This cannot be undone.`, "Delete key") }, "Delete")))]);
      return row;
    });
    clear(el).append(h("table", { class: "admin", id: withOwner ? "keys-table" : "service-keys-table" },
      h("thead", {}, h("tr", {}, ["Name", withOwner && "Kind", withOwner && "For", "Prefix", "Created", "State", "Actions"]
        .filter(Boolean).map((t) => h("th", { scope: "col" }, t)))),
      h("tbody", {}, rows)));
  };
  return load;
}
