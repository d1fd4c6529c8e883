// The tamper-evidence log's formats and checks, in the browser (no DOM, no
// fetch): the same rules as internal/tlog, written again so that the page
// checks what the server says instead of trusting it.
//   - leaf = SHA-256(0x00 ‖ JCS(entry restricted to the covered members)),
//     JCS being RFC 8785 (ECMAScript's own number and string printing,
//     names sorted by UTF-16 code units);
//   - node = SHA-256(0x01 ‖ left ‖ right); an inclusion proof is checked as
//     golang.org/x/mod/sumdb/tlog.CheckRecord does;
//   - a checkpoint is a C2SP signed note (Ed25519) of four or five lines: origin,
//     size, root (base64), "timestamp <RFC 3339 ms UTC>" and the optional
//     "sealed_until <RFC 3339 ms UTC>"; witnesses' cosignature lines follow
//     the log's own signature.
// Every failure is a VerifyError naming the check that failed.

// VerifyError: check is "canonical" (the entry has no canonical form),
// "leaf" (the entry is not the one the log holds), "proof" (the proof does
// not reach the root), "signature" (a signature does not verify), "key" (no
// key of audit_keys signed it, or not at that time) or "checkpoint" (the
// checkpoint is malformed or of another log).
export class VerifyError extends Error {
  constructor(check, message) {
    super(message);
    this.name = "VerifyError";
    this.check = check;
  }
}

// covered lists the top-level members a leaf covers (tlog.Covered: the
// members of version 1 of the audit entry and the tool execution). Any
// other member (leaf_index, a field added later) is left out.
export const covered = new Set([
  "id", "event_id", "timestamp", "client_ip", "action", "source", "display_name", "customer_id",
  "organization_id", "project_id", "principal_id", "user_id", "principal_type", "resource_type",
  "resource_id", "resource_display", "data", "created_time",
  "execution_id", "tool", "tool_name", "started_at", "ended_at", "duration_ms", "success",
  "execution_code", "error", "hooks",
]);

const maxDepth = 64; // as internal/tlog: deeper has no canonical form

function wellFormed(s) {
  return typeof s.isWellFormed === "function" ? s.isWellFormed() : !/[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/.test(s);
}

function jcsString(s) {
  if (!wellFormed(s)) throw new VerifyError("canonical", "a string holds a lone surrogate: no canonical form");
  // JSON.stringify escapes exactly '"', '\\' and the control characters
  // (\b \f \n \r \t, else \u00xx in lower case), as RFC 8785 does.
  return JSON.stringify(s);
}

// jcs is the RFC 8785 text of v (a value JSON.parse made).
export function jcs(v, depth = 0) {
  if (v === null) return "null";
  switch (typeof v) {
    case "boolean":
      return v ? "true" : "false";
    case "number":
      if (!Number.isFinite(v)) throw new VerifyError("canonical", "a number is not finite: no canonical form");
      return JSON.stringify(v); // ECMAScript's Number::toString; -0 is "0"
    case "string":
      return jcsString(v);
    case "object": {
      if (depth >= maxDepth) throw new VerifyError("canonical", `nested deeper than ${maxDepth}: no canonical form`);
      if (Array.isArray(v)) return "[" + v.map((x) => jcs(x, depth + 1)).join(",") + "]";
      // sort() with no comparator orders by UTF-16 code units.
      return "{" + Object.keys(v).sort().map((k) => jcsString(k) + ":" + jcs(v[k], depth + 1)).join(",") + "}";
    }
  }
  throw new VerifyError("canonical", `a ${typeof v} is not JSON`);
}

// canonicalEntry is the JCS text a leaf hashes: the entry's covered
// top-level members only.
export function canonicalEntry(item) {
  if (item === null || typeof item !== "object" || Array.isArray(item)) throw new VerifyError("canonical", "the entry is not a JSON object");
  const keys = Object.keys(item).filter((k) => covered.has(k)).sort();
  return "{" + keys.map((k) => jcsString(k) + ":" + jcs(item[k], 1)).join(",") + "}";
}

async function sha256(...parts) {
  let n = 0;
  for (const p of parts) n += p.length;
  const buf = new Uint8Array(n);
  let at = 0;
  for (const p of parts) { buf.set(p, at); at += p.length; }
  return new Uint8Array(await crypto.subtle.digest("SHA-256", buf));
}

const utf8 = new TextEncoder();

// committed lists the covered members that a leaf of version 2 commits
// to one by one (tlog.Committed): the values an erasure may replace.
export const committed = new Set(["client_ip", "display_name", "principal_id", "user_id", "resource_id", "resource_display", "data", "error"]);

const fieldKeyPrefix = utf8.encode("auditrail field key v2\0");


// fieldKey is K(f) = SHA-256("auditrail field key v2" ‖ 0x00 ‖ salt ‖ 0x00 ‖ f).
function fieldKey(salt, f) {
  return sha256(fieldKeyPrefix, salt, Uint8Array.of(0), utf8.encode(f));
}

// opener opens the committed fields of a version 2 entry: by its salt, or
// by the keys and commitments of its erasure (null: a version 1 entry).
function opener(item) {
  if (item.salt !== undefined) {
    const salt = fromBase64(item.salt, 16);
    if (!salt) throw new VerifyError("canonical", "the entry's salt is not the base64 of 16 bytes");
    if (item.erasure && typeof item.erasure === "object" && item.erasure.fields !== undefined) {
      throw new VerifyError("canonical", "the entry has both a salt and erased fields");
    }
    return { salt, erased: [] };
  }
  const f = item.erasure && typeof item.erasure === "object" ? item.erasure.fields : undefined;
  if (f === undefined) return null;
  if (f === null || typeof f !== "object" || Array.isArray(f)) throw new VerifyError("canonical", "the erasure's fields are not an object");
  return { fields: f, erased: [] };
}

// open is C(f) of field f whose canonical value is v (undefined: not served).
async function open(o, f, v, op) {
  if (o.salt) return sha256(await fieldKey(o.salt, f), utf8.encode(v));
  if (!op || typeof op !== "object") throw new VerifyError("canonical", `field ${f} has no opening`);
  if (op.key !== undefined && op.commitment !== undefined) throw new VerifyError("canonical", `field ${f} has both a key and a commitment`);
  if (op.commitment !== undefined) {
    const c = fromBase64(op.commitment, 32);
    if (!c) throw new VerifyError("canonical", `the commitment of ${f} is not the base64 of 32 bytes`);
    return c;
  }
  const k = fromBase64(op.key, 32);
  if (!k) throw new VerifyError("canonical", `the key of ${f} is not the base64 of 32 bytes`);
  if (v === undefined) throw new VerifyError("canonical", `field ${f} is opened by its key but not served`);
  return sha256(k, utf8.encode(v));
}

// canonicalV2 is the JCS text of a version 2 leaf (tlog.canonicalV2); it
// sets o.erased to the fields the erasure replaced.
async function canonicalV2(item, o) {
  const out = {};
  const comm = {};
  for (const k of Object.keys(item)) {
    if (!covered.has(k)) continue;
    const v = item[k];
    if (!committed.has(k) || (k === "data" && (v === null || typeof v !== "object" || Array.isArray(v)))) {
      out[k] = v;
      continue;
    }
    if (k !== "data") {
      const op = o.fields ? o.fields[k] : undefined;
      comm[k] = toBase64(await open(o, k, jcs(v, 1), op));
      if (op && op.commitment !== undefined) o.erased.push(k);
      continue;
    }
    const names = Object.keys(v).sort();
    const list = [];
    if (o.salt) {
      for (let i = 0; i < names.length; i++) {
        list.push(toBase64(await open(o, "data/" + i, jcs([names[i], v[names[i]]], 1))));
      }
    } else {
      const ops = o.fields.data;
      if (!Array.isArray(ops)) throw new VerifyError("canonical", "the erasure's data openings are not a list");
      const used = new Set();
      let erased = 0;
      for (let i = 0; i < ops.length; i++) {
        const op = ops[i];
        let val;
        if (op && typeof op === "object" && op.key !== undefined && typeof op.member === "string") {
          if (!Object.hasOwn(v, op.member) || used.has(op.member)) throw new VerifyError("canonical", `data position ${i} opens member ${JSON.stringify(op.member)}, which the entry's data does not have once`);
          used.add(op.member);
          val = jcs([op.member, v[op.member]], 1);
        } else {
          erased++;
        }
        list.push(toBase64(await open(o, "data/" + i, val, op)));
      }
      if (erased > 0) o.erased.push("data");
    }
    comm.data = list;
  }
  out.commitments = comm;
  out.leaf_version = 2;
  return jcs(out);
}

// leafHash is SHA-256(0x00 ‖ JCS(entry)) for an entry of version 1, and
// of its version 2 form for an entry with a salt or erased fields
// (internal/tlog/commit.go). erasedFields, when given, receives the
// fields an erasure replaced.
export async function leafHash(item, erasedFields) {
  if (item === null || typeof item !== "object" || Array.isArray(item)) throw new VerifyError("canonical", "the entry is not a JSON object");
  const o = opener(item);
  if (!o) return sha256(Uint8Array.of(0), utf8.encode(canonicalEntry(item)));
  const text = await canonicalV2(item, o);
  if (erasedFields) erasedFields.push(...o.erased.sort());
  return sha256(Uint8Array.of(0), utf8.encode(text));
}

// nodeHash is SHA-256(0x01 ‖ left ‖ right).
export function nodeHash(left, right) {
  return sha256(Uint8Array.of(1), left, right);
}

// fromBase64 decodes standard base64 strictly (the canonical padding only);
// want, when given, is the length required.
export function fromBase64(s, want) {
  if (typeof s !== "string" || !/^[A-Za-z0-9+/]*={0,2}$/.test(s) || s.length % 4 !== 0) return null;
  let bin;
  try { bin = atob(s); } catch { return null; }
  const b = Uint8Array.from(bin, (c) => c.charCodeAt(0));
  if (toBase64(b) !== s) return null;
  if (want !== undefined && b.length !== want) return null;
  return b;
}

export function toBase64(b) {
  let s = "";
  for (const x of b) s += String.fromCharCode(x);
  return btoa(s);
}

export function hex(b) {
  return [...b].map((x) => x.toString(16).padStart(2, "0")).join("");
}

export function equal(a, b) {
  if (a.length !== b.length) return false;
  let d = 0;
  for (let i = 0; i < a.length; i++) d |= a[i] ^ b[i];
  return d === 0;
}

// checkRecord checks that proof (hashes, bytes) shows leaf at index in the
// tree of size leaves whose root is root: x/mod/sumdb/tlog.CheckRecord.
export async function checkRecord(proof, size, root, index, leaf) {
  if (!Number.isSafeInteger(size) || !Number.isSafeInteger(index) || index < 0 || index >= size) {
    throw new VerifyError("proof", `leaf ${index} is not in a tree of ${size} leaves`);
  }
  const got = await runRecordProof(proof, 0, size, index, leaf);
  if (!got || !equal(got, root)) throw new VerifyError("proof", `the inclusion proof of leaf ${index} does not reach the root of the tree of ${size} leaves`);
}

// runRecordProof is the hash of the subtree [lo, hi) that proof implies
// (null: the proof has too few or too many hashes).
async function runRecordProof(proof, lo, hi, n, leaf) {
  if (lo + 1 === hi) return proof.length === 0 ? leaf : null;
  if (proof.length === 0) return null;
  let k = 1; // the largest power of two smaller than hi - lo
  while (k * 2 < hi - lo) k *= 2;
  const last = proof[proof.length - 1], rest = proof.slice(0, -1);
  if (n < lo + k) {
    const th = await runRecordProof(rest, lo, lo + k, n, leaf);
    return th && nodeHash(th, last);
  }
  const th = await runRecordProof(rest, lo + k, hi, n, leaf);
  return th && nodeHash(last, th);
}

// maxNoteBytes bounds a checkpoint (tlog.MaxCheckpointBytes).
export const maxNoteBytes = 16 << 10;

const sigPrefix = "\u2014 "; // "— "

// parseNote splits a signed note into its text (the signed message, ending
// with a newline) and its signature lines [{name, hash, sig}] as
// golang.org/x/mod/sumdb/note.Open reads them.
export function parseNote(note) {
  const bad = (why) => new VerifyError("checkpoint", "the checkpoint is not a signed note: " + why);
  if (typeof note !== "string") throw bad("no note");
  if (utf8.encode(note).length > maxNoteBytes) throw bad(`over ${maxNoteBytes} bytes`);
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u0009\u000b-\u001f]/.test(note) || !wellFormed(note)) throw bad("a control character or invalid text");
  const split = note.lastIndexOf("\n\n");
  if (split < 0) throw bad("no signature block");
  const text = note.slice(0, split + 1);
  let sigs = note.slice(split + 2);
  if (!sigs.endsWith("\n")) throw bad("the signature block does not end with a newline");
  const out = [];
  for (const line of sigs.slice(0, -1).split("\n")) {
    if (!line.startsWith(sigPrefix)) throw bad("a signature line does not start with —");
    const rest = line.slice(sigPrefix.length);
    const sp = rest.indexOf(" ");
    const name = sp < 0 ? rest : rest.slice(0, sp);
    const b = sp < 0 ? null : fromBase64(rest.slice(sp + 1));
    if (!validName(name) || !b || b.length < 5) throw bad("a malformed signature line");
    out.push({ name, hash: hex(b.subarray(0, 4)), sig: b.subarray(4) });
    if (out.length > 100) throw bad("more than 100 signatures");
  }
  return { text, sigs: out };
}

// validName: printable ASCII without spaces or '+' (the log's key names and origins).
function validName(s) {
  return typeof s === "string" && s.length > 0 && s.length <= 256 && /^[\x21-\x2a\x2c-\x7e]+$/.test(s);
}

// parseCheckpoint reads a checkpoint body exactly as tlog's parseBody
// does: {origin, size, root (bytes), rootB64, timestamp (string), time (ms)}.
export function parseCheckpoint(text) {
  const bad = (why) => new VerifyError("checkpoint", "malformed checkpoint: " + why);
  if (!text.endsWith("\n")) throw bad("the body does not end with a newline");
  const lines = text.slice(0, -1).split("\n");
  if (lines.length !== 4 && lines.length !== 5) throw bad(`${lines.length} lines (want origin, size, root hash, timestamp and the optional sealed_until)`);
  const [origin, sizeS, rootS, tsLine, sealedLine] = lines;
  if (!validName(origin)) throw bad("origin");
  if (!/^(0|[1-9][0-9]{0,18})$/.test(sizeS)) throw bad("size is not a decimal number without leading zeros");
  const size = Number(sizeS);
  if (!Number.isSafeInteger(size)) throw bad("size beyond what this page can check");
  const root = fromBase64(rootS, 32);
  if (!root) throw bad("root hash is not the base64 of 32 bytes");
  const m = /^timestamp (\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z)$/.exec(tsLine);
  const time = m ? Date.parse(m[1]) : NaN;
  if (!m || Number.isNaN(time) || new Date(time).toISOString() !== m[1]) throw bad("line 4 is not the timestamp line");
  let sealedUntil = null;
  if (sealedLine !== undefined) {
    const sm = /^sealed_until (\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z)$/.exec(sealedLine);
    const st = sm ? Date.parse(sm[1]) : NaN;
    if (!sm || Number.isNaN(st) || new Date(st).toISOString() !== sm[1]) throw bad("line 5 is not the sealed_until line");
    if (st > time) throw bad("sealed_until is after the checkpoint's time");
    sealedUntil = sm[1];
  }
  return { origin, size, root, rootB64: rootS, timestamp: m[1], time, sealedUntil };
}

// keyHash is the note key hash of an Ed25519 key: the first 4 bytes of
// SHA-256(name ‖ "\n" ‖ 0x01 ‖ public key), as 8 hex digits (its key_id).
export async function keyHash(name, pub) {
  return hex((await sha256(utf8.encode(name + "\n"), Uint8Array.of(1), pub)).subarray(0, 4));
}

// parseWitnessKey reads a witness's cosigning key (C2SP tlog-cosignature
// vkey: name+hash+base64 of 0x04 and the 32-byte Ed25519 key) as
// tlog.ParseWitnessKey does: {name, hash, pub}, or null when it is not one.
export async function parseWitnessKey(vkey) {
  // The key's base64 may hold '+': the first two '+' split the three parts.
  const i = typeof vkey === "string" ? vkey.indexOf("+") : -1;
  const j = i < 0 ? -1 : vkey.indexOf("+", i + 1);
  if (j < 0) return null;
  const name = vkey.slice(0, i), hash = vkey.slice(i + 1, j), b64 = vkey.slice(j + 1);
  const raw = fromBase64(b64, 33);
  if (!validName(name) || !/^[0-9a-f]{8}$/.test(hash) || !raw || raw[0] !== 4) return null;
  const pub = raw.subarray(1);
  if (hex((await sha256(utf8.encode(name + "\n"), Uint8Array.of(4), pub)).subarray(0, 4)) !== hash) return null;
  return { name, hash, pub };
}

// cosignatures checks the witnesses' cosignatures (cosignature/v1) on a
// signed note: {valid, forged}, the names of the witnesses whose first
// signature line verifies over "cosignature/v1\ntime T\n" and the note's
// text, and of those whose does not. Lines of other keys are ignored.
export async function cosignatures(note, witnesses) {
  const { text, sigs } = parseNote(note);
  const valid = [], forged = [];
  for (const w of witnesses) {
    if (!w) continue;
    const s = sigs.find((x) => x.name === w.name && x.hash === w.hash);
    if (!s) continue;
    let ok = false;
    if (s.sig.length === 72) {
      const t = new DataView(s.sig.buffer, s.sig.byteOffset, 8).getBigUint64(0);
      ok = t <= 2n ** 62n && await ed25519Verify(w.pub, s.sig.subarray(8), utf8.encode(`cosignature/v1\ntime ${t}\n` + text));
    }
    (ok ? valid : forged).push(w.name);
  }
  return { valid, forged };
}

// ed25519Verify checks sig over msg with the 32 raw bytes pub (WebCrypto).
async function ed25519Verify(pub, sig, msg) {
  let key;
  try {
    key = await crypto.subtle.importKey("raw", pub, { name: "Ed25519" }, false, ["verify"]);
  } catch (e) {
    if (e && e.name === "NotSupportedError") throw new VerifyError("unsupported", "this browser cannot verify Ed25519 signatures (WebCrypto)");
    throw new VerifyError("key", "a public key of audit_keys is not an Ed25519 key");
  }
  return crypto.subtle.verify({ name: "Ed25519" }, key, sig, msg);
}

// openCheckpoint verifies a signed checkpoint against keys (the data of GET
// /api/v1/audit_keys) and parses it. origin, when given, is the suffix its
// origin must have ("/orgs/<org>/audit_logs"): a checkpoint of another log
// proves nothing about this one. As tlog.Open: a signature by a listed key
// that does not verify fails; a note signed by no listed key fails; the
// key must be valid at the checkpoint's time (not_before <= t < not_after).
// It answers the checkpoint with key, the key that verified it.
export async function openCheckpoint(note, keys, origin) {
  const { text, sigs } = parseNote(note);
  const cp = parseCheckpoint(text);
  if (origin && !cp.origin.endsWith(origin)) throw new VerifyError("checkpoint", `the checkpoint is of another log (${cp.origin})`);
  const msg = utf8.encode(text);
  const unknown = [], outside = [];
  for (const s of sigs) {
    const k = (keys || []).find((x) => x && x.name === s.name && x.key_id === s.hash);
    if (!k) { unknown.push(`${s.hash} (${s.name})`); continue; }
    const pub = k.algorithm === "Ed25519" ? fromBase64(k.public_key, 32) : null;
    if (!pub) throw new VerifyError("key", `key ${k.key_id} of audit_keys is not a 32-byte Ed25519 key`);
    if (await keyHash(k.name, pub) !== k.key_id) throw new VerifyError("key", `key ${k.key_id} of audit_keys: its key_id does not match the key`);
    if (s.sig.length !== 64 || !(await ed25519Verify(pub, s.sig, msg))) throw new VerifyError("signature", `the signature of key ${k.key_id} (${k.name}) does not verify: the checkpoint was altered or forged`);
    const from = Date.parse(k.not_before), to = k.not_after ? Date.parse(k.not_after) : Infinity;
    if (cp.time >= from && cp.time < to) return { ...cp, key: k };
    outside.push(`key ${k.key_id} is valid from ${k.not_before}${k.not_after ? " until " + k.not_after : ""}`);
  }
  if (outside.length) throw new VerifyError("key", `the checkpoint of ${cp.timestamp} is signed outside its key's validity: ${outside.join(", ")}`);
  throw new VerifyError("key", `the checkpoint is signed by an unknown key ${unknown.join(", ") || "(no signature)"}: no key of audit_keys signed it`);
}
