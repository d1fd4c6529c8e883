// The admin views: API keys, service keys, hooks (filled in by the admin work).
import { h } from "./dom.js";

// views lists the admin views: {id, title, module: {render}, needsProject}.
export const views = [
  { id: "keys", title: "API keys", module: { render: (root) => root.append(h("h1", {}, "API keys")) } },
];
