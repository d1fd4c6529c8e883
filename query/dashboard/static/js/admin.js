// The admin views of an organization's owners and admins: API keys,
// service keys (of the picked project), hooks, and the lifecycle of the
// organization's records (retention, legal holds, erasures). Their
// changes go through Api.send, so that they are recorded with source
// DASHBOARD.
import { keys, serviceKeys } from "./admin-keys.js";
import { hooks } from "./admin-hooks.js";
import { lifecycle } from "./admin-lifecycle.js";

export { canAdmin } from "./admin-common.js";

// views lists the admin views: {id, title, module: {render}, needsProject}.
export const views = [
  { id: "keys", title: "API keys", module: keys },
  { id: "service-keys", title: "Service keys", module: serviceKeys, needsProject: true },
  { id: "hooks", title: "Hooks", module: hooks },
  { id: "lifecycle", title: "Lifecycle", module: lifecycle },
];
