// The tool executions view (filled in by the audit-view work).
import { h } from "./dom.js";

export function render(root) {
  root.append(h("h1", {}, "Tool executions"));
}
