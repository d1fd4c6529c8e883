// The audit log view (filled in by the audit-view work).
import { h } from "./dom.js";

export function render(root, ctx) {
  root.append(h("h1", {}, "Audit log"));
  ctx.api.get(ctx.base + "/audit_logs", { limit: 50 }).then((d) => {
    if (!ctx.current()) return;
    const ul = h("ul", { class: "entries" });
    for (const it of d.items) ul.append(h("li", {}, it.display_name || it.action));
    root.append(ul);
  }, ctx.showError);
}
