// Tamper evidence on the page: each opened entry is verified here, in the
// browser, against the latest signed checkpoint of its organization's log
// (its leaf recomputed from the entry as the list route returned it, the
// inclusion proof run up to the checkpoint's root, the checkpoint's Ed25519
// signature checked with a key of GET /api/v1/audit_keys: tlog.js), and
// each view shows the latest checkpoint of its log. Nothing the server
// says about the result is taken on trust; a failure names the check that
// failed. The keys come from the same server: the page proves that the
// entry is the one the log signed, not that the server's keys are yours —
// compare their key_id with the one you keep (auditrail verify --keys).
import { h, clear, append, time } from "./dom.js";
import { ApiError } from "./api.js";
import { VerifyError, openCheckpoint, leafHash, checkRecord, fromBase64, equal, parseWitnessKey, cosignatures } from "./tlog.js";

// The two logs of an organization, by route segment.
export const AUDIT = "audit_logs";
export const EXECUTIONS = "tool_executions";

// keys is the audit_keys answer, asked once per page and again when a
// checkpoint is signed by a key it does not list (a rotation).
let keys = null;

function auditKeys(api, fresh) {
  if (!keys || fresh) {
    const p = keys = api.get("/audit_keys");
    p.catch(() => { if (keys === p) keys = null; });
  }
  return keys;
}

// Result of a check: {state, check, message, cp, leafIndex, unsequenced};
// state is "verified", "pending" (not yet in the log — unsequenced — or not
// yet covered by a checkpoint), "none" (no checkpoint yet), "failed" (check names what) or
// "unavailable" (the page could not ask, or this browser cannot check).
function failure(e, prefix = "") {
  if (e instanceof VerifyError) {
    if (e.check === "unsupported") return { state: "unavailable", message: e.message };
    return { state: "failed", check: e.check, message: prefix + e.message };
  }
  if (e instanceof ApiError) {
    return { state: "unavailable", message: e.status === 403 ? "this credential may not read the organization's log (" + e.message + ")" : e.message };
  }
  return { state: "unavailable", message: (e && e.message) || String(e) };
}

// witnessed checks the cosignatures on note of the organization's
// witnesses (GET /orgs/{org}/witnesses: the operator's and its own):
// {listed, valid, forged} (names), or null when the list cannot be read.
// The list comes from the same server as the note: a count of witnesses
// here says that those witnesses saw this checkpoint, as the server names
// them; auditrail verify --witness pins the witnesses' keys.
async function witnessed(api, org, note) {
  let list;
  try {
    list = await api.get(`/orgs/${org}/witnesses`);
  } catch {
    return null;
  }
  if (!Array.isArray(list) || list.length === 0) return null;
  const keys = await Promise.all(list.map((w) => parseWitnessKey(w && w.vkey)));
  const r = await cosignatures(note, keys);
  return { listed: keys.filter(Boolean).length, ...r };
}

// witnessText says how many witnesses cosigned a checkpoint.
export function witnessText(w) {
  if (!w) return "";
  const n = w.valid.length;
  return n === 0 ? `not cosigned by any of its ${w.listed} witness${w.listed === 1 ? "" : "es"} yet`
    : `verified by ${n} witness${n === 1 ? "" : "es"} (${w.valid.join(", ")})`;
}

// checkpoint fetches and verifies the latest checkpoint of org's log of
// kind: {state: "verified", cp} (cp: tlog.js openCheckpoint's answer, with
// key, and witnesses: witnessed's answer), "none", "failed" or
// "unavailable". A cosignature by a listed witness that does not verify
// fails it (check "witness"). It never rejects.
export async function checkpoint(api, org, kind) {
  let data;
  try {
    data = await api.get(`/orgs/${org}/${kind}/checkpoint`);
  } catch (e) {
    if (e instanceof ApiError && e.status === 404) return { state: "none", message: "No checkpoint of this log yet." };
    return failure(e);
  }
  const origin = `/orgs/${org}/${kind}`;
  try {
    const note = data && data.note;
    let cp;
    try {
      cp = await openCheckpoint(note, await auditKeys(api), origin);
    } catch (e) {
      // A key rotated since the page asked: ask once more.
      if (!(e instanceof VerifyError && e.check === "key")) throw e;
      cp = await openCheckpoint(note, await auditKeys(api, true), origin);
    }
    cp.witnesses = await witnessed(api, org, note);
    if (cp.witnesses && cp.witnesses.forged.length) {
      throw new VerifyError("witness", `the cosignature of witness ${cp.witnesses.forged.join(", ")} does not verify: forged, or the checkpoint was altered`);
    }
    return { state: "verified", cp };
  } catch (e) {
    return failure(e, "checkpoint: ");
  }
}

// listingCheckpoint is the checkpoint of a listing (one per search: asked
// again when the view reloads its entries), asked once the first page of
// entries is in: the entries are the critical path of the view.
export function listingCheckpoint(listing, api, org, kind) {
  if (!listing.checkpoint) {
    const first = listing.loading && !listing.loaded ? listing.loading.catch(() => {}) : Promise.resolve();
    listing.checkpoint = first.then(() => checkpoint(api, org, kind));
  }
  return listing.checkpoint;
}

// verifyEntry verifies item (an entry as the list route of kind returned
// it) against the checkpoint cpp resolves to, or a newer one when that one
// does not cover it. It never rejects.
export async function verifyEntry(api, org, kind, item, cpp) {
  const idx = item ? item.leaf_index : undefined;
  if (idx === undefined) return { state: "unavailable", message: "this server keeps no tamper-evidence log (the entry has no leaf_index)." };
  if (idx === null) return { state: "pending", unsequenced: true, message: "Not yet in the log: the entry is stored, its leaf comes within seconds. Check again." };
  if (!Number.isSafeInteger(idx) || idx < 0) return { state: "failed", check: "proof", message: `the listing gives leaf_index ${JSON.stringify(idx)}, not a position` };
  let c = await (cpp || checkpoint(api, org, kind));
  if (c.state === "none" || (c.state === "verified" && c.cp.size <= idx)) c = await checkpoint(api, org, kind);
  if (c.state === "none") return { state: "pending", leafIndex: idx, message: `In the log at leaf ${idx}; no checkpoint is signed yet.` };
  if (c.state !== "verified") return c;
  const cp = c.cp;
  if (cp.size <= idx) return { state: "pending", leafIndex: idx, message: `In the log at leaf ${idx}; the latest checkpoint (${cp.size} leaves) does not cover it yet.` };
  try {
    // An erased entry no longer hashes to its leaf: the listing gives the
    // original leaf hash, which must be the one the log holds (a record of
    // the erasure names the leaf: `auditrail verify` checks that).
    // An entry of version 2 (erased fields opened by their commitments,
    // the others by their keys) hashes to it again: every field the
    // erasure did not replace is checked.
    const erased = item.erasure && typeof item.erasure === "object" ? item.erasure : null;
    const erasedFields = [];
    const committedFields = erased && erased.fields !== undefined;
    let leaf = erased ? fromBase64(erased.leaf_hash, 32) : await leafHash(item);
    if (!leaf) throw new VerifyError("leaf", "the entry's erasure member holds no leaf hash");
    if (committedFields && !equal(await leafHash(item, erasedFields), leaf)) {
      throw new VerifyError("leaf", "the leaf differs: a field that the erasure did not replace was changed after it was logged");
    }
    let p;
    try {
      p = await api.get(`/orgs/${org}/${kind}/proof`, { event_id: item.event_id, size: cp.size });
    } catch (e) {
      if (e instanceof ApiError && (e.status === 404 || e.status === 400)) throw new VerifyError("proof", "the log gives no proof for this entry: " + e.message);
      throw e;
    }
    if (!p || p.leaf_index !== idx) throw new VerifyError("proof", `the log places this entry at leaf ${p && p.leaf_index}, the listing at ${idx}`);
    const logged = fromBase64(p.leaf_hash, 32);
    const hashes = Array.isArray(p.hashes) ? p.hashes.map((x) => fromBase64(x, 32)) : [null];
    if (!logged || hashes.some((x) => !x)) throw new VerifyError("proof", "the proof is malformed");
    if (!equal(leaf, logged)) throw new VerifyError("leaf", `the leaf differs: this entry, as listed, is not the one the log holds at leaf ${idx} (it was changed after it was logged)`);
    await checkRecord(hashes, cp.size, cp.root, idx, leaf);
    if (erased) {
      if (committedFields) {
        return { state: "erased", cp, leafIndex: idx, erasure: String(erased.id), fields: erasedFields,
          message: `Erased by erasure ${erased.id}: ${erasedFields.join(", ") || "no field"} replaced by the pseudonym (not checked); every other field verified against checkpoint ${cp.size}` };
      }
      return { state: "erased", cp, leafIndex: idx, erasure: String(erased.id),
        message: `Erased by erasure ${erased.id}: the log holds this entry's original leaf (checkpoint ${cp.size}); the values replaced by the pseudonym, and so this entry's fields, cannot be checked here` };
    }
    return { state: "verified", cp, leafIndex: idx, message: `Verified against checkpoint ${cp.size}` };
  } catch (e) {
    return failure(e);
  }
}

// What each failed check means, for the badge's heading.
const checks = {
  canonical: "the entry has no canonical form",
  leaf: "the leaf differs",
  proof: "the proof does not reach the root",
  signature: "the checkpoint's signature is invalid",
  key: "the checkpoint's key is unknown or not valid then",
  checkpoint: "the checkpoint is malformed",
  witness: "a witness's cosignature is invalid",
};

const results = new WeakMap(); // item → promise of its result (redraws do not ask again)

// verifyBadge is the line of an entry's detail that says whether the page
// verified it: #verify, data-state (checking, verified, erased, pending,
// failed, unavailable), data-check (the failed check) and data-size (the
// checkpoint's size). refetch, when given, answers the entry read again
// (for "Check again" on an entry not yet in the log).
export function verifyBadge(ctx, kind, item, listing, refetch) {
  const el = h("div", { class: "verify", id: "verify", role: "status", "aria-live": "polite", dataset: { state: "checking" } }, "Verifying in this browser…");
  const run = (it, again) => {
    let p = results.get(it);
    if (!p || again) {
      const cpp = again || !listing ? checkpoint(ctx.api, ctx.org.id, kind) : listingCheckpoint(listing, ctx.api, ctx.org.id, kind);
      p = verifyEntry(ctx.api, ctx.org.id, kind, it, cpp);
      results.set(it, p);
    }
    p.then((r) => draw(r, it));
  };
  const fill = (...kids) => append(clear(el), kids);
  const draw = (r, it) => {
    el.dataset.state = r.state;
    if (r.check) el.dataset.check = r.check; else delete el.dataset.check;
    if (r.cp) el.dataset.size = String(r.cp.size); else delete el.dataset.size;
    const again = h("button", { type: "button", class: "again", id: "verify-again", onclick: async () => {
      el.dataset.state = "checking";
      let next = it;
      if (refetch && (it.leaf_index === null || it.leaf_index === undefined)) {
        try { next = (await refetch()) || it; } catch (e) { ctx.showError(e); }
      }
      run(next, true);
    } }, "Check again");
    switch (r.state) {
      case "verified":
        return fill(h("strong", {}, "✓ ", r.message), h("span", { class: "muted" },
          ` · leaf ${r.leafIndex} of ${r.cp.size} · signed by key ${r.cp.key.key_id} (${r.cp.key.name}) at `, time(r.cp.timestamp),
          r.cp.witnesses ? " · " + witnessText(r.cp.witnesses) : ""));
      case "erased":
        return fill(h("strong", {}, "Erased"), h("span", { class: "muted" }, " — " + r.message));
      case "pending":
        return fill(h("strong", {}, "… ", r.unsequenced ? "Not yet in the log" : "Not yet covered by a checkpoint"), " ", h("span", { class: "muted" }, r.message), " ", again);
      case "failed":
        return fill(h("strong", {}, "✗ Verification failed: ", checks[r.check] || r.check), h("span", {}, " — " + r.message), " ", again);
      default:
        return fill(h("strong", {}, "Cannot verify"), h("span", { class: "muted" }, ": " + r.message), " ", again);
    }
  };
  run(item, false);
  return el;
}

// checkpointPanel shows the latest checkpoint of the organization's log of
// kind, verified here (size, time, root, key id): #checkpoint, data-state
// and data-size.
export function checkpointPanel(ctx, kind, listing) {
  const el = h("section", { class: "checkpoint", id: "checkpoint", "aria-label": "Latest checkpoint", dataset: { state: "checking" } },
    h("span", { class: "muted" }, "Latest checkpoint: loading…"));
  listingCheckpoint(listing, ctx.api, ctx.org.id, kind).then((r) => {
    el.dataset.state = r.state;
    const fill = (...kids) => append(clear(el), kids);
    if (r.state === "verified") {
      const cp = r.cp;
      el.dataset.size = String(cp.size);
      if (cp.witnesses) el.dataset.witnesses = String(cp.witnesses.valid.length);
      const what = kind === AUDIT ? "audit log" : "executions log";
      return fill(h("strong", { title: "Its signature was verified in this browser" }, "✓ Latest checkpoint"), ` of the organization's ${what}: `, h("span", { class: "cp-size" }, `${cp.size} entr${cp.size === 1 ? "y" : "ies"}`),
        " · ", time(cp.timestamp), " · root ", h("code", { class: "cp-root", title: cp.rootB64 }, cp.rootB64),
        " · key ", h("code", { class: "cp-key", title: cp.key.name }, cp.key.key_id),
        cp.sealedUntil ? h("span", { class: "cp-sealed", title: "Every entry recorded by then is in this checkpoint (sealed_until)" }, " · complete up to ", time(cp.sealedUntil)) : "",
        cp.witnesses ? h("span", { class: "cp-witnesses" }, " · " + witnessText(cp.witnesses)) : "");
    }
    if (r.state === "none") return fill(h("span", { class: "muted" }, "Latest checkpoint: none yet (the log signs one within a minute of new entries)."));
    if (r.state === "failed") {
      el.dataset.check = r.check;
      return fill(h("strong", {}, "✗ Latest checkpoint: ", checks[r.check] || r.check), h("span", {}, " — " + r.message));
    }
    return fill(h("span", { class: "muted" }, "Latest checkpoint: cannot be checked: " + r.message));
  });
  return el;
}
