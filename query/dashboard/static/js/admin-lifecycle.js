// The lifecycle of an organization's records: its retention (what is set,
// what is in force, the operator's bounds), its legal holds and the
// erasures of a person. Owners and admins change the first two; the API
// decides who may ask an erasure, and its refusal is shown with its msg.
// Every value from the API is set as text (dom.js h); every change goes
// through Api.send, recorded with source DASHBOARD.
import { h, clear, time, append } from "./dom.js";
import { ApiError } from "./api.js";
import { guard, confirmDialog, cell, busy, closeDialogs } from "./admin-common.js";

// The logs an organization keeps, as the retention routes name them.
const logs = [
  { key: "audit_logs", title: "Audit log" },
  { key: "tool_executions", title: "Tool executions" },
];

// The subjects an erasure names (the API's subject members).
const subjectKinds = [
  { key: "user_id", title: "User id" },
  { key: "principal_id", title: "Principal id" },
];

export const lifecycle = {
  render(root, ctx) {
    if (!guard(root, ctx, "Lifecycle", "Owners and admins of the organization manage its retention, legal holds and erasures here.")) return;
    const org = "/orgs/" + ctx.org.id;
    root.append(h("p", { class: "muted" }, "How long ", h("strong", {}, ctx.org.name || ctx.org.id),
      " keeps its audit log and tool executions, the legal holds that keep entries past it, and the erasures of a person."));
    retention(root, ctx, org + "/retention");
    holds(root, ctx, org + "/legal_holds");
    erasures(root, ctx, org + "/erasures");
    return closeDialogs;
  },
};

// failed shows an API error in el (the API's msg); a 401 and what is not
// an answer of the API go to the shell (sign-in, banner).
function failed(ctx, el, e) {
  if (!ctx.current()) return;
  if (!(e instanceof ApiError) || e.status === 401 || e.status === 0) {
    el.textContent = "";
    ctx.showError(e);
    return;
  }
  el.textContent = e.message;
}

function loading() {
  return h("p", { class: "muted loading" }, "Loading…");
}

// forever renders a retention value: null keeps forever.
function forever(v) {
  return v === null || v === undefined ? h("span", { class: "lc-forever" }, "forever") : h("code", {}, v);
}

// badge is a status (hold: active, released; erasure: pending, done,
// refused).
function badge(status) {
  return h("span", { class: "admin-state lc-" + String(status).replace(/[^a-z_]/g, "") }, status);
}

// rfc3339 is the value of a datetime-local input (the viewer's zone) as
// an RFC 3339 instant in UTC; "" is left out (undefined).
function rfc3339(v) {
  if (!v) return undefined;
  const d = new Date(v);
  if (Number.isNaN(d.getTime())) return v; // the API names it
  return d.toISOString().replace(/\.000Z$/, "Z");
}

// by is "<time> by <principal>".
function by(at, who) {
  return [time(at), who ? h("span", { class: "sub muted" }, "by ", who) : null];
}

// ---- retention ----

function retention(root, ctx, path) {
  const summary = h("div", { id: "retention-summary", "aria-live": "polite" }, loading());
  const note = h("p", { class: "admin-note", role: "status", id: "retention-note" });
  const formError = h("p", { class: "error", id: "retention-error", role: "alert" });
  let current = null;
  const fields = logs.map((l) => {
    const id = "retention-" + l.key;
    const input = h("input", { id, name: l.key, type: "text", class: "mono", required: true, autocomplete: "off", spellcheck: "false", placeholder: "400d", "aria-describedby": `${id}-hint ${id}-error`, size: 10 });
    const keep = h("input", { type: "checkbox", id: id + "-forever", name: l.key + "-forever" });
    const hint = h("span", { class: "muted lc-hint", id: id + "-hint" }, "A duration: \"400d\", \"36h\" or \"90m\".");
    const error = h("span", { class: "error lc-field-error", id: id + "-error", role: "alert" });
    keep.addEventListener("change", () => {
      input.disabled = keep.checked;
      input.required = !keep.checked;
    });
    const el = h("fieldset", { class: "lc-retention-field", dataset: { log: l.key } },
      h("legend", {}, l.title),
      h("label", { for: id }, "Keep entries for", input),
      h("label", { for: id + "-forever", class: "lc-check" }, keep, " Keep forever"),
      hint, error);
    return { log: l, input, keep, hint, error, el };
  });
  const form = h("form", { class: "admin-form lc-retention-form", id: "retention-form", "aria-labelledby": "retention-form-title", onsubmit: async (e) => {
    e.preventDefault();
    if (!current) return;
    note.textContent = "";
    formError.textContent = "";
    const body = {};
    for (const f of fields) {
      f.error.textContent = "";
      f.input.removeAttribute("aria-invalid");
      const want = f.keep.checked ? null : f.input.value.trim();
      const had = current[f.log.key] === undefined ? null : current[f.log.key];
      if (want !== had) body[f.log.key] = want;
    }
    if (!Object.keys(body).length) {
      note.textContent = "Nothing to change.";
      return;
    }
    await busy(form, async () => {
      try {
        const answer = await ctx.api.send("PUT", path, body);
        if (!ctx.current()) return;
        show(answer);
        note.textContent = "Saved: " + logs.map((l) => `${l.title.toLowerCase()} ${answer[l.key] === null ? "forever" : answer[l.key]}`).join(", ") + ".";
      } catch (err) {
        if (!ctx.current()) return;
        // A 400 names its member ("audit_logs: …"): shown by that field.
        const f = err instanceof ApiError && err.status === 400 && fields.find((x) => new RegExp("\\b" + x.log.key + "\\b").test(err.message));
        if (f) {
          f.error.textContent = err.message;
          f.input.setAttribute("aria-invalid", "true");
          if (!f.input.disabled) f.input.focus();
        } else {
          failed(ctx, formError, err);
        }
      }
    });
  } },
  h("h3", { id: "retention-form-title" }, "Change the retention"),
  ...fields.map((f) => f.el),
  h("button", { type: "submit", class: "primary" }, "Save retention"),
  formError);

  // show draws the answer of GET or PUT and sets the form to it.
  const show = (r) => {
    current = r;
    const eff = r.effective || {};
    const b = r.bounds || {};
    const from = r.applies_from ? new Date(r.applies_from) : null;
    const waiting = from && from.getTime() > Date.now();
    clear(summary).append(
      h("table", { class: "admin", id: "retention-table" },
        h("thead", {}, h("tr", {}, ["Log", "Set", "In force now"].map((t) => h("th", { scope: "col" }, t)))),
        h("tbody", {}, logs.map((l) => h("tr", { dataset: { log: l.key } },
          cell("Log", l.title),
          cell("Set", h("span", { class: "set" }, forever(r[l.key]))),
          cell("In force now", h("span", { class: "effective" }, forever(eff[l.key]))))))),
      h("p", { id: "retention-applies", dataset: { state: !r.applies_from ? "default" : waiting ? "waiting" : "applied" } },
        !r.applies_from ? "No setting: the operator's default applies."
          : waiting ? ["A shorter retention waits for the grace period (", b.grace, "): it applies from ", time(r.applies_from),
            ". Until then the longer of the previous and the new value is in force."]
            : ["The setting applies since ", time(r.applies_from), "."]),
      h("h3", {}, "The operator's bounds"),
      h("dl", { class: "lc-bounds", id: "retention-bounds" },
        h("dt", {}, "Minimum"), h("dd", { class: "min" }, b.min === "0" ? "none" : h("code", {}, b.min)),
        h("dt", {}, "Maximum"), h("dd", { class: "max" }, b.max === null || b.max === undefined ? "none (keeping forever is allowed)" : h("code", {}, b.max)),
        h("dt", {}, "Default"), h("dd", { class: "default" }, forever(b.default)),
        h("dt", {}, "Grace period"), h("dd", { class: "grace" }, b.grace === "0" ? "none: a change applies at once" : h("code", {}, b.grace))));
    const noForever = b.max !== null && b.max !== undefined;
    for (const f of fields) {
      const v = r[f.log.key];
      f.keep.checked = v === null;
      // The operator's maximum refuses keep forever (unless it is set).
      f.keep.disabled = noForever && v !== null;
      f.input.value = v === null ? "" : v;
      f.input.disabled = f.keep.checked;
      f.input.required = !f.keep.checked;
      f.hint.textContent = "A duration: \"400d\", \"36h\" or \"90m\"." + (noForever ? ` Keeping forever is not allowed (maximum ${b.max}).` : "");
    }
  };

  root.append(h("section", { class: "admin-scope lc-section", id: "retention", "aria-labelledby": "retention-title" },
    h("h2", { id: "retention-title" }, "Retention"),
    h("p", { class: "muted" }, "An entry expires when it is older than the retention in force. A shorter retention waits for the operator's grace period; a longer one protects at once."),
    summary, note, form));

  ctx.api.get(path).then((r) => { if (ctx.current()) show(r || {}); }, (e) => {
    if (!ctx.current()) return;
    clear(summary).append(h("p", { class: "error" }, "The retention could not be loaded."));
    ctx.showError(e);
  });
}

// ---- legal holds ----

function holds(root, ctx, path) {
  const list = h("div", { class: "admin-list", id: "holds", "aria-live": "polite" }, loading());
  const note = h("p", { class: "admin-note", role: "status", id: "holds-note" });
  const listError = h("p", { class: "error", id: "holds-error", role: "alert" });
  const load = async () => {
    let items;
    try {
      items = ((await ctx.api.get(path)) || {}).items || [];
    } catch (e) {
      if (!ctx.current()) return;
      clear(list).append(h("p", { class: "error" }, "The legal holds could not be loaded."));
      return ctx.showError(e);
    }
    if (!ctx.current()) return;
    if (!items.length) {
      clear(list).append(h("p", { class: "empty" }, "No legal holds."));
      return;
    }
    const rows = items.map((hd) => {
      const row = h("tr", { dataset: { holdId: hd.id, status: hd.status } });
      const label = `«${hd.name}»`;
      const release = hd.status === "active" ? h("button", { type: "button", class: "danger release", "aria-label": `Release ${label}`, onclick: async () => {
        if (!(await confirmDialog(`Release the legal hold ${label}? Its entries expire again under the retention. The hold stays listed as released.`, "Release hold"))) return;
        await busy(row, async () => {
          try {
            listError.textContent = "";
            await ctx.api.send("DELETE", path + "/" + encodeURIComponent(hd.id));
            if (!ctx.current()) return;
            note.textContent = `Legal hold ${label} released.`;
            await load();
          } catch (e) {
            failed(ctx, listError, e);
          }
        });
      } }, "Release") : null;
      append(row, [
        cell("Name", h("span", { class: "name" }, hd.name)),
        cell("Search", hd.q ? h("code", { class: "q" }, hd.q) : h("span", { class: "q muted" }, "every entry")),
        cell("Since", hd.since ? time(hd.since) : h("span", { class: "muted" }, "unbounded")),
        cell("Until", hd.until ? time(hd.until) : h("span", { class: "muted" }, "unbounded")),
        cell("Logs", h("span", { class: "kinds" }, (hd.kinds || []).join(", ") || "—")),
        cell("Held", h("span", { class: "held" }, hd.held === null || hd.held === undefined ? h("span", { class: "muted" }, "not counted") : String(hd.held))),
        cell("Status", h("span", { class: "status" }, badge(hd.status)), hd.released_at ? h("span", { class: "sub muted" }, time(hd.released_at)) : null),
        cell("Created", by(hd.created_at, hd.created_by)),
        cell("Actions", h("div", { class: "admin-actions" }, release)),
      ]);
      return row;
    });
    clear(list).append(h("table", { class: "admin", id: "holds-table" },
      h("thead", {}, h("tr", {}, ["Name", "Search", "Since", "Until", "Logs", "Held", "Status", "Created", "Actions"].map((t) => h("th", { scope: "col" }, t)))),
      h("tbody", {}, rows)));
  };

  const name = h("input", { id: "hold-name", name: "name", required: true, maxlength: 200, autocomplete: "off" });
  const q = h("input", { id: "hold-q", name: "q", maxlength: 1024, autocomplete: "off", spellcheck: "false", class: "mono", placeholder: "actor:alice", "aria-describedby": "hold-q-hint" });
  const since = h("input", { id: "hold-since", name: "since", type: "datetime-local", "aria-describedby": "hold-times-hint" });
  const until = h("input", { id: "hold-until", name: "until", type: "datetime-local", "aria-describedby": "hold-times-hint" });
  const error = h("p", { class: "error", id: "hold-error", role: "alert" });
  const form = h("form", { class: "admin-form", id: "hold-form", "aria-labelledby": "hold-form-title", onsubmit: async (e) => {
    e.preventDefault();
    error.textContent = "";
    note.textContent = "";
    const body = { name: name.value.trim(), q: q.value.trim() };
    const s = rfc3339(since.value), u = rfc3339(until.value);
    if (s) body.since = s;
    if (u) body.until = u;
    await busy(form, async () => {
      try {
        const hd = await ctx.api.send("POST", path, body);
        if (!ctx.current()) return;
        note.textContent = `Legal hold «${hd.name}» placed.`;
        form.reset();
        await load();
      } catch (err) {
        failed(ctx, error, err);
      }
    });
  } },
  h("h3", { id: "hold-form-title" }, "Place a legal hold"),
  h("label", { for: "hold-name" }, "Name", name),
  h("label", { for: "hold-q", class: "lc-wide" }, "Search", q),
  h("label", { for: "hold-since" }, "Since", since),
  h("label", { for: "hold-until" }, "Until", until),
  h("button", { type: "submit", class: "primary" }, "Place hold"),
  h("p", { class: "muted lc-hint", id: "hold-q-hint" }, "A search of the listings; empty holds every entry between the times."),
  h("p", { class: "muted lc-hint", id: "hold-times-hint" }, "Times are in your time zone (sent in UTC); since is inclusive, until exclusive; empty is unbounded."),
  error);

  root.append(h("section", { class: "admin-scope lc-section", id: "legal-holds", "aria-labelledby": "legal-holds-title" },
    h("h2", { id: "legal-holds-title" }, "Legal holds"),
    h("p", { class: "muted" }, "An entry that an active hold matches never expires, and a person with held entries cannot be erased."),
    note, listError, list, form));
  load();
}

// ---- erasures ----

function erasures(root, ctx, path) {
  const list = h("div", { class: "admin-list", id: "erasures", "aria-live": "polite" }, loading());
  const note = h("p", { class: "admin-note", role: "status", id: "erasures-note" });
  const load = async () => {
    let items;
    try {
      items = ((await ctx.api.get(path)) || {}).items || [];
    } catch (e) {
      if (!ctx.current()) return;
      clear(list).append(h("p", { class: "error" }, "The erasures could not be loaded."));
      return ctx.showError(e);
    }
    if (!ctx.current()) return;
    if (!items.length) {
      clear(list).append(h("p", { class: "empty" }, "No erasures."));
      return;
    }
    const kinds = new Map(subjectKinds.map((k) => [k.key, k.title]));
    clear(list).append(h("table", { class: "admin", id: "erasures-table" },
      h("thead", {}, h("tr", {}, ["Id", "Subject", "Reason", "Pseudonym", "Status", "Message", "Entries", "Created", "Done"].map((t) => h("th", { scope: "col" }, t)))),
      h("tbody", {}, items.map((er) => h("tr", { dataset: { erasureId: er.id, status: er.status } },
        cell("Id", h("code", { class: "id" }, er.id)),
        cell("Subject", h("span", { class: "kind", title: er.subject_kind }, kinds.get(er.subject_kind) || er.subject_kind)),
        cell("Reason", h("span", { class: "reason" }, er.reason)),
        cell("Pseudonym", h("code", { class: "pseudonym" }, er.pseudonym)),
        cell("Status", h("span", { class: "status" }, badge(er.status))),
        cell("Message", h("span", { class: "status-msg" }, er.status_msg || "")),
        cell("Entries", h("span", { class: "entries" }, String(er.entries)),
          h("span", { class: "sub muted" }, `${er.audit_entries} audit, ${er.executions} executions`)),
        cell("Created", by(er.created_at, er.created_by)),
        cell("Done", er.done_at ? time(er.done_at) : h("span", { class: "muted" }, "—")))))));
  };

  const kind = h("select", { id: "erasure-kind", name: "subject_kind" }, subjectKinds.map((k) => h("option", { value: k.key }, k.title)));
  const value = h("input", { id: "erasure-value", name: "value", required: true, maxlength: 256, autocomplete: "off", spellcheck: "false", class: "mono" });
  const reason = h("input", { id: "erasure-reason", name: "reason", required: true, maxlength: 500, autocomplete: "off", "aria-describedby": "erasure-reason-hint", size: 40 });
  const error = h("p", { class: "error", id: "erasure-error", role: "alert" });
  const form = h("form", { class: "admin-form", id: "erasure-form", "aria-labelledby": "erasure-form-title", "aria-describedby": "erasure-warning", onsubmit: async (e) => {
    e.preventDefault();
    error.textContent = "";
    note.textContent = "";
    const k = kind.value;
    const v = value.value.trim();
    const title = (subjectKinds.find((x) => x.key === k) || { title: k }).title.toLowerCase();
    if (!(await confirmDialog(`Erase the ${title} «${v}» from the organization's audit log and tool executions? Every value of it is replaced by a pseudonym. This cannot be undone.`, "Erase"))) return;
    await busy(form, async () => {
      try {
        const er = await ctx.api.send("POST", path, { subject: { [k]: v }, reason: reason.value.trim() });
        if (!ctx.current()) return;
        form.reset(); // the value is not kept in the page
        note.textContent = `Erasure ${er.id} asked: ${er.status}.`;
        await load();
      } catch (err) {
        failed(ctx, error, err);
      }
    });
  } },
  h("h3", { id: "erasure-form-title" }, "Erase a person"),
  h("p", { class: "lc-warning", id: "erasure-warning" }, h("strong", {}, "Irreversible."),
    " Every value of the person in this organization's audit log and tool executions is replaced by a pseudonym; nothing can bring it back. You are asked to confirm."),
  h("label", { for: "erasure-kind" }, "Subject", kind),
  h("label", { for: "erasure-value" }, "Value", value),
  h("label", { for: "erasure-reason", class: "lc-wide" }, "Reason", reason),
  h("button", { type: "submit", class: "danger" }, "Erase…"),
  h("p", { class: "muted lc-hint", id: "erasure-reason-hint" }, "The reason is kept with the erasure; it must not contain the value."),
  error);

  const refresh = h("button", { type: "button", id: "erasures-refresh", onclick: () => busy(refresh.parentElement, load) }, "Refresh");
  root.append(h("section", { class: "admin-scope lc-section", id: "erasures-section", "aria-labelledby": "erasures-title" },
    h("div", { class: "lc-head" }, h("h2", { id: "erasures-title" }, "Erasures"), refresh),
    h("p", { class: "muted" }, "The lifecycle applies a pending erasure on its next cycle, then marks it done (or refused, saying why). The erased value is never shown."),
    note, list, form));
  load();
}
