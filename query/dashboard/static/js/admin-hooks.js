// The webhook hooks of the organization and of the picked project: each
// with its endpoint, points and failure modes, enabled state, the health
// of its server and the circuit breaker of each point; enable, disable,
// delete, and a short form to add one.
import { h, clear, time } from "./dom.js";
import { guard, confirmDialog, state, busy, closeDialogs } from "./admin-common.js";

const points = ["access", "pre", "post"];

export const hooks = {
  render(root, ctx) {
    if (!guard(root, ctx, "Hooks")) return;
    root.append(h("p", { class: "muted" }, "Hook servers decide on tool calls: access (which tools a user sees), pre (before a call) and post (after). Organization hooks apply to every project."));
    section(root, ctx, "/orgs/" + ctx.org.id + "/hooks", "org", "Organization hooks");
    if (ctx.project) {
      section(root, ctx, `/orgs/${ctx.org.id}/projects/${ctx.project.id}/hooks`, "project", "Hooks of project " + (ctx.project.name || ctx.project.id));
    }
    return closeDialogs;
  },
};

// section is the list and the creation form of one scope's hooks.
function section(root, ctx, path, scope, title) {
  const list = h("div", { class: "admin-list", id: `hooks-${scope}`, "aria-live": "polite" }, h("p", { class: "muted" }, "Loading…"));
  const note = h("p", { class: "admin-note", role: "status", id: `hooks-${scope}-note` });
  const load = async () => {
    let items;
    try {
      items = ((await ctx.api.get(path)) || {}).items || [];
      // The list has no state: each hook's GET adds health and breakers.
      items = await Promise.all(items.map((it) => ctx.api.get(path + "/" + encodeURIComponent(it.id)).catch(() => it)));
    } catch (e) {
      if (!ctx.current()) return;
      clear(list).append(h("p", { class: "error" }, "The hooks could not be loaded."));
      return ctx.showError(e);
    }
    if (!ctx.current()) return;
    items.sort((a, b) => String(a.config && a.config.name).localeCompare(String(b.config && b.config.name)));
    clear(list).append(...(items.length ? items.map((it) => card(ctx, path, it, load, note)) : [h("p", { class: "empty" }, "No hooks.")]));
  };
  root.append(h("section", { class: "admin-scope", "aria-labelledby": `hooks-${scope}-title` },
    h("h2", { id: `hooks-${scope}-title` }, title), note, list, createForm(ctx, path, scope, load, note)));
  load();
}

// card shows one hook.
function card(ctx, path, hk, reload, note) {
  const cfg = hk.config || {};
  const enabled = cfg.enabled !== false;
  const st = hk.status || null;
  const hp = path + "/" + encodeURIComponent(hk.id);
  const label = `«${cfg.name}»`;
  const el = h("article", { class: "admin-hook", dataset: { hookId: hk.id, state: enabled ? "enabled" : "disabled" }, "aria-label": "Hook " + cfg.name });
  const change = async (method, suffix, body, done) => {
    await busy(el, async () => {
      try {
        const out = await ctx.api.send(method, hp + suffix, body);
        const warnings = (out && out.warnings) || [];
        note.textContent = done + (warnings.length ? " " + warnings.join("; ") : "");
        await reload();
      } catch (e) {
        if (ctx.current()) ctx.showError(e);
      }
    });
  };
  const toggle = enabled
    ? h("button", { type: "button", class: "disable", "aria-label": `Disable ${label}`, onclick: async () => {
      if (await confirmDialog(`Disable the hook ${label}? Its points stop being called: tool calls go on without its decisions.`, "Disable hook")) {
        await change("POST", "/disable", undefined, `Hook ${label} disabled.`);
      }
    } }, "Disable")
    : h("button", { type: "button", class: "enable primary", "aria-label": `Enable ${label}`,
      onclick: () => change("PATCH", "", { enabled: true }, `Hook ${label} enabled.`) }, "Enable");
  const del = h("button", { type: "button", class: "danger delete", "aria-label": `Delete ${label}`, onclick: async () => {
    if (await confirmDialog(`Delete the hook ${label}? This cannot be undone.`, "Delete hook")) {
      await change("DELETE", "", undefined, `Hook ${label} deleted.`);
    }
  } }, "Delete");
  const health = st && st.health;
  const healthText = !health ? h("span", { class: "muted" }, "not checked yet")
    : h("span", { class: health.ok ? "admin-ok" : "admin-bad" },
      health.status || (health.ok ? "answered" : "failed"),
      health.http_status ? ` (HTTP ${health.http_status})` : "",
      health.failure ? ` — ${health.failure}` : "");
  const auth = cfg.auth || {};
  el.append(
    h("header", {}, h("h3", { class: "name" }, cfg.name || hk.id), state(enabled, "enabled", "disabled"), h("div", { class: "admin-actions" }, toggle, del)),
    h("dl", {},
      h("dt", {}, "Endpoint"), h("dd", {}, h("code", { class: "endpoint" }, cfg.endpoint || "—")),
      h("dt", {}, "Health"), h("dd", { class: "health" }, healthText, health ? [" · checked ", time(health.checked_at)] : null),
      h("dt", {}, "Calls"), h("dd", { class: "calls" }, st ? `${st.calls || 0} calls, ${st.failures || 0} failed, breaker opened ${st.breaker_open || 0} times` : "—",
        st && st.last_failure ? [" · last failure: ", st.last_failure, " ", time(st.last_failure_at)] : null),
      h("dt", {}, "Auth"), h("dd", {}, [auth.type || "—", auth.token ? " (token set)" : ""].join("")),
      h("dt", {}, "Contract"), h("dd", {}, `${cfg.contract || "auditrail"}, phase ${cfg.phase || "—"}, priority ${cfg.priority || 0}`),
      h("dt", {}, "Updated"), h("dd", {}, time(hk.updated_at))),
    h("table", { class: "admin points" },
      h("thead", {}, h("tr", {}, ["Point", "Path", "Timeout", "Failure mode", "Breaker"].map((t) => h("th", { scope: "col" }, t)))),
      h("tbody", {}, points.filter((p) => cfg.points && cfg.points[p]).map((p) => {
        const pc = cfg.points[p];
        const b = st && st.breakers && st.breakers[p];
        return h("tr", { dataset: { point: p } },
          h("td", { "data-label": "Point" }, p),
          h("td", { "data-label": "Path" }, h("code", {}, pc.path || "")),
          h("td", { "data-label": "Timeout" }, `${pc.timeout_ms || cfg.timeout_ms || 0} ms`),
          h("td", { "data-label": "Failure mode" }, pc.failure_mode === "fail_open" ? "fail open (let through)" : "fail closed (refuse)"),
          h("td", { "data-label": "Breaker", class: "breaker" },
            b ? h("span", { class: b.state === "closed" ? "admin-ok" : "admin-bad" }, b.state, b.consecutive_failures ? ` (${b.consecutive_failures} failures in a row)` : "")
              : h("span", { class: "muted" }, "closed (not called yet)")));
      }))));
  return el;
}

// createForm adds a hook with a bearer token: name, endpoint, points and
// one failure mode for them.
function createForm(ctx, path, scope, reload, note) {
  const id = (s) => `hook-${scope}-${s}`;
  const name = h("input", { id: id("name"), required: true, maxlength: 200, autocomplete: "off" });
  const endpoint = h("input", { id: id("endpoint"), type: "url", required: true, placeholder: "https://hooks.example.com", autocomplete: "off" });
  const token = h("input", { id: id("token"), type: "password", required: true, autocomplete: "new-password" });
  const mode = h("select", { id: id("mode") }, h("option", { value: "fail_closed" }, "fail closed (refuse)"), h("option", { value: "fail_open" }, "fail open (let through)"));
  const boxes = points.map((p) => h("input", { type: "checkbox", id: id(p), value: p, defaultChecked: p === "access" }));
  const form = h("form", { class: "admin-form", id: id("form"), onsubmit: async (e) => {
    e.preventDefault();
    const chosen = boxes.filter((b) => b.checked).map((b) => b.value);
    if (!chosen.length) {
      note.textContent = "Pick at least one point.";
      return;
    }
    await busy(form, async () => {
      try {
        const out = await ctx.api.send("POST", path, {
          name: name.value.trim(), endpoint: endpoint.value.trim(),
          points: Object.fromEntries(chosen.map((p) => [p, { failure_mode: mode.value }])),
          auth: { type: "bearer", token: token.value },
        });
        const warnings = (out && out.warnings) || [];
        note.textContent = `Hook «${name.value.trim()}» created.` + (warnings.length ? " " + warnings.join("; ") : "");
        form.reset();
        details.open = false;
        await reload();
      } catch (err) {
        if (ctx.current()) ctx.showError(err);
      }
    });
  } },
  h("label", { for: id("name") }, "Name", name),
  h("label", { for: id("endpoint") }, "Endpoint", endpoint),
  h("fieldset", { class: "admin-points" }, h("legend", {}, "Points"), points.map((p, i) => h("label", { for: id(p) }, boxes[i], " ", p))),
  h("label", { for: id("mode") }, "Failure mode", mode),
  h("label", { for: id("token") }, "Bearer token", token),
  h("button", { type: "submit", class: "primary" }, "Add hook"));
  const details = h("details", { class: "admin-new", id: id("new") }, h("summary", {}, "Add a hook"), form);
  return details;
}
