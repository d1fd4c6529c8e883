package tlog

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"

	"golang.org/x/mod/sumdb/tlog"
)

// Hash is a SHA-256 hash of the log (golang.org/x/mod/sumdb/tlog.Hash).
type Hash = tlog.Hash

// LeafIndexMember is the member that exports add to each entry and that a
// leaf never includes.
const LeafIndexMember = "leaf_index"

// MaxEntryBytes bounds one entry (one export line) that Canonical and
// ParseEntry accept.
const MaxEntryBytes = 1 << 20

var canonicalizers = sync.Pool{New: func() any { return new(canonicalizer) }}

// Canonical returns the RFC 8785 (JCS) bytes of item, a JSON object, with
// a top-level leaf_index member removed if present: the bytes a leaf
// hashes. item is the JSON text ([]byte or json.RawMessage) or a value
// that encoding/json marshals to an object (apiitem.Item,
// apiitem.ExecutionItem).
func Canonical(item any) ([]byte, error) {
	var src []byte
	switch v := item.(type) {
	case json.RawMessage:
		src = v
	case []byte:
		src = v
	default:
		b, err := json.Marshal(item)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrNotCanonicalizable, err)
		}
		src = b
	}
	e, err := ParseEntry(nil, src)
	if err != nil {
		return nil, err
	}
	return e.Canonical, nil
}

// Leaf is the leaf hash of an entry's JSON as a route serves it (the
// members of version 1 only: Covered): LeafHash(Canonical(item)).
func Leaf(item []byte) (Hash, error) {
	e, err := ParseEntry(nil, item)
	if err != nil {
		return Hash{}, err
	}
	return e.Leaf, nil
}

// LeafHash is the hash of the leaf whose canonical bytes are canonical:
// SHA-256(0x00 ‖ canonical) (RFC 6962, tlog.RecordHash).
func LeafHash(canonical []byte) Hash { return tlog.RecordHash(canonical) }

// Entry is one entry read from an export line.
type Entry struct {
	// Canonical is the entry's canonical bytes (without leaf_index).
	Canonical []byte
	// Leaf is LeafHash(Canonical).
	Leaf Hash
	// LeafIndex is the entry's leaf_index, -1 when it has none or it is
	// null.
	LeafIndex int64
	// Pending: the entry's leaf_index is null (the export was made before
	// the entry was sequenced into the log).
	Pending bool
	// Members is the number of top-level members the leaf covers;
	// Uncovered the number of other members (leaf_index not counted: the
	// feed's position, a field added after v1), left out of the leaf.
	Members, Uncovered int
	// eventID is the span of the event_id member's value in Canonical.
	eventID [2]int
	// Version is the leaf's version: 1, or 2 for an entry with a salt or
	// erased fields (commit.go).
	Version int
	// Erased are the committed fields (top-level members) that an
	// erasure replaced: their values are not checked.
	Erased []string
}

// EventID is the entry's event_id member, "" when it has none or it is not
// a string.
func (e Entry) EventID() string {
	if e.eventID[1] == 0 {
		return ""
	}
	var s string
	if json.Unmarshal(e.Canonical[e.eventID[0]:e.eventID[1]], &s) != nil {
		return ""
	}
	return s
}

// ParseEntry canonicalizes line (a JSON object), appending the canonical
// bytes to dst (which may be nil), takes out its top-level leaf_index
// (which must be a non-negative integer or null when present: null marks an
// entry not sequenced yet, Pending) and every member the leaf does not
// cover (Covered), and hashes the rest.
// It refuses what RFC 8785 cannot canonicalize, a value that is not an
// object, and a line over MaxEntryBytes.
func ParseEntry(dst, line []byte) (Entry, error) {
	var e Entry
	if len(line) > MaxEntryBytes {
		return e, fmt.Errorf("%w: entry of %d bytes (at most %d)", ErrTooLarge, len(line), MaxEntryBytes)
	}
	c := canonicalizers.Get().(*canonicalizer)
	defer canonicalizers.Put(c)
	start := len(dst)
	out, err := c.canonical(dst, line)
	if err != nil {
		return e, err
	}
	if out[start] != '{' {
		return e, fmt.Errorf("%w: not a JSON object", ErrNotCanonicalizable)
	}
	e.LeafIndex = -1
	e.Version = 1
	o, err := v2Of(out[start:], c.top)
	if err != nil {
		return e, err
	}
	if o != nil {
		return parseV2(e, dst[:start], out[start:], c.top, o)
	}
	// Keep the covered members, in place: each moves left over what was
	// dropped before it (copy handles the overlap).
	w := start + 1 // after '{'
	var eventID [2]int
	for _, m := range c.top {
		name := out[m.key+1 : m.colon-1]
		if string(name) == LeafIndexMember {
			if err := e.setLeafIndex(out[m.colon+1 : m.end]); err != nil {
				return e, err
			}
			continue
		}
		if !Covered(name) {
			e.Uncovered++
			continue
		}
		if e.Members > 0 {
			out[w] = ','
			w++
		}
		if string(name) == "event_id" && out[m.colon+1] == '"' {
			off := w - m.key
			eventID = [2]int{m.colon + 1 + off - start, m.end + off - start}
		}
		w += copy(out[w:], out[m.key:m.end])
		e.Members++
	}
	out[w] = '}'
	out = out[:w+1]
	e.eventID = eventID
	e.Canonical = out[start:]
	e.Leaf = LeafHash(e.Canonical)
	return e, nil
}

// setLeafIndex reads the value of the leaf_index member: a non-negative
// integer, or null (Pending).
func (e *Entry) setLeafIndex(v []byte) error {
	if string(v) == "null" {
		e.Pending = true
		return nil
	}
	n, err := strconv.ParseInt(string(v), 10, 64)
	if err != nil || n < 0 {
		return fmt.Errorf("%w: leaf_index %.40s is not a non-negative integer", ErrNotCanonicalizable, v)
	}
	e.LeafIndex = n
	return nil
}

// parseV2 is ParseEntry of an entry of version 2: canon are its canonical
// bytes and top its members; the leaf's canonical bytes are appended to
// dst.
func parseV2(e Entry, dst, canon []byte, top []member, o opener) (Entry, error) {
	ms := make([]served, 0, len(top))
	var eventID []byte
	for _, m := range top {
		name := canon[m.key+1 : m.colon-1]
		v := canon[m.colon+1 : m.end]
		if string(name) == LeafIndexMember {
			if err := e.setLeafIndex(v); err != nil {
				return e, err
			}
			continue
		}
		if !Covered(name) {
			e.Uncovered++
			continue
		}
		if string(name) == "event_id" && len(v) > 0 && v[0] == '"' {
			eventID = v
		}
		ms = append(ms, served{string(name), v})
		e.Members++
	}
	v2, erased, err := canonicalV2(nil, ms, o)
	if err != nil {
		return e, err
	}
	out := append(dst, v2...)
	e.Canonical = out[len(dst):]
	if eventID != nil {
		// The event id is a plain member of the version 2 leaf, served as is.
		if i := bytes.Index(e.Canonical, append([]byte(`"event_id":`), eventID...)); i >= 0 {
			e.eventID = [2]int{i + len(`"event_id":`), i + len(`"event_id":`) + len(eventID)}
		}
	}
	e.Version, e.Erased = 2, erased
	e.Leaf = LeafHash(e.Canonical)
	return e, nil
}

// sha256Empty is SHA-256 of the empty string: the root of the empty tree
// (RFC 6962 §2.1).
var sha256Empty = Hash(sha256.Sum256(nil))

// Covered reports whether a top-level member of an entry is part of its
// leaf: the fields of an audit entry or of a tool execution as the list
// routes return them in version 1 (CONTRACT.md, "Tamper evidence"). Any
// other member — leaf_index, the feed's position, a field added to the
// items later — is left out, so that one entry has one leaf however it is
// served, and the leaves of entries stored today stay valid when the items
// grow.
func Covered(name []byte) bool {
	switch string(name) {
	case "id", "event_id", "timestamp", "client_ip", "action", "source", "display_name", "customer_id",
		"organization_id", "project_id", "principal_id", "user_id", "principal_type", "resource_type",
		"resource_id", "resource_display", "data", "created_time",
		// tool executions (the shared ones above)
		"execution_id", "tool", "tool_name", "started_at", "ended_at", "duration_ms", "success",
		"execution_code", "error", "hooks":
		return true
	}
	return false
}
