package tlog

import (
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
// that encoding/json marshals to an object (query.Item,
// query.ExecutionItem).
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
	// Members is the number of top-level members (leaf_index not counted).
	Members int
	// eventID is the span of the event_id member's value in Canonical.
	eventID [2]int
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
// entry not sequenced yet, Pending) and hashes the rest.
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
	cut := -1
	var eventID [2]int
	for i, m := range c.top {
		switch string(out[m.key+1 : m.colon-1]) {
		case LeafIndexMember:
			v := out[m.colon+1 : m.end]
			if string(v) == "null" {
				e.Pending, cut = true, i
				continue
			}
			n, err := strconv.ParseInt(string(v), 10, 64)
			if err != nil || n < 0 {
				return e, fmt.Errorf("%w: leaf_index %.40s is not a non-negative integer", ErrNotCanonicalizable, v)
			}
			e.LeafIndex, cut = n, i
		case "event_id":
			if out[m.colon+1] == '"' {
				eventID = [2]int{m.colon + 1 - start, m.end - start}
			}
		}
	}
	if cut >= 0 {
		m := c.top[cut]
		from, to := m.key, m.end
		switch {
		case cut+1 < len(c.top):
			to++ // the comma after it
		case cut > 0:
			from-- // the comma before it
		}
		out = append(out[:from], out[to:]...)
		if eventID[0] > from-start {
			eventID[0] -= to - from
			eventID[1] -= to - from
		}
	}
	e.Members = len(c.top)
	if cut >= 0 {
		e.Members--
	}
	e.eventID = eventID
	e.Canonical = out[start:]
	e.Leaf = LeafHash(e.Canonical)
	return e, nil
}

// sha256Empty is SHA-256 of the empty string: the root of the empty tree
// (RFC 6962 §2.1).
var sha256Empty = Hash(sha256.Sum256(nil))
