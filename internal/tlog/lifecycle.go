package tlog

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"golang.org/x/mod/sumdb/tlog"
)

// A lifecycle record is an audit entry of an organization's audit log that
// authorises the removal of entries from one of its logs, signed in a
// checkpoint before anything is removed: its data is
//
//	{"lifecycle": {"type": "expiry", "log": "audit_logs"|"tool_executions",
//	  "below_leaf": N, "kept": K, "expired": E, "retention": "400d",
//	  "cutoff": "<RFC 3339>", "holds": ["<legal hold id>", …]}}
//
// An expiry record says: of the leaves 0..N-1 of that log, the entries
// persisted before cutoff and held by none of the holds are deleted; K of
// them stay (held, or persisted after the cutoff), E were deleted. The
// record of the largest leaf index is the log's horizon: a verifier
// accepts a missing leaf only below its N, and at least K entries must be
// present below it (fewer means held entries were deleted by hand).

// LifecycleMember is the member of an entry's data that holds a record.
const LifecycleMember = "lifecycle"

// Lifecycle record types.
const (
	RecordExpiry  = "expiry"
	RecordErasure = "erasure"
)

// An erasure record says: the entries at these leaves of that log were
// rewritten by erasure E, their identifying values (fields) replaced by
// the pseudonym; each such entry is served with a member
// {"erasure": {"id": E, "leaf_hash": "<its original leaf hash>"}}, which
// no leaf covers, and the verifier places that leaf hash for it only when
// a verified record of E names its leaf. An erasure of many entries has
// several records (at most MaxRecordRanges ranges each).
//
//	{"lifecycle": {"type": "erasure", "erasure": "<id>", "log": "audit_logs",
//	  "leaves": [[a, b], …], "fields": ["display_name", …], "pseudonym": "erased-…"}}

// MaxRecordRanges bounds the leaf ranges of one erasure record.
const MaxRecordRanges = 2000

// ErasureMember is the member of an erased entry as the routes serve it.
const ErasureMember = "erasure"

// ErasureRef is an erased entry's erasure member.
type ErasureRef struct {
	ID       string `json:"id"`
	LeafHash string `json:"leaf_hash"`
}

// The logs' names in records (as the API routes name them).
const (
	LogNameAudit      = "audit_logs"
	LogNameExecutions = "tool_executions"
)

// LifecycleRecord is the data.lifecycle of a record entry.
type LifecycleRecord struct {
	Type      string    `json:"type"`
	Log       string    `json:"log"`
	BelowLeaf int64     `json:"below_leaf"`
	Kept      int64     `json:"kept"`
	Expired   int64     `json:"expired"`
	Retention string    `json:"retention"`
	Cutoff    time.Time `json:"cutoff"`
	Holds     []string  `json:"holds"`
	// Erasure records.
	Erasure   string     `json:"erasure,omitempty"`
	Leaves    [][2]int64 `json:"leaves,omitempty"`
	Fields    []string   `json:"fields,omitempty"`
	Pseudonym string     `json:"pseudonym,omitempty"`
}

// ErrNoRecord: the entry holds no lifecycle record.
var ErrNoRecord = errors.New("not a lifecycle record")

// Validate checks a record's fields.
func (r LifecycleRecord) Validate() error {
	switch {
	case r.Type != RecordExpiry && r.Type != RecordErasure:
		return fmt.Errorf("lifecycle record: unknown type %q", r.Type)
	case r.Log != LogNameAudit && r.Log != LogNameExecutions:
		return fmt.Errorf("lifecycle record: unknown log %q", r.Log)
	case r.Type == RecordErasure:
		if r.Erasure == "" || len(r.Leaves) == 0 || len(r.Leaves) > MaxRecordRanges {
			return fmt.Errorf("lifecycle record: an erasure record of %d leaf ranges, erasure %q", len(r.Leaves), r.Erasure)
		}
		for _, l := range r.Leaves {
			if l[0] < 0 || l[1] < l[0] {
				return fmt.Errorf("lifecycle record: leaf range %d..%d", l[0], l[1])
			}
		}
		return nil
	case r.BelowLeaf < 1 || r.Kept < 0 || r.Expired < 0 || r.Kept+r.Expired > r.BelowLeaf:
		return fmt.Errorf("lifecycle record: %d leaves keeping %d and deleting %d", r.BelowLeaf, r.Kept, r.Expired)
	}
	return nil
}

// ParseLifecycleRecord reads the record of an entry (the JSON of the item
// as the list route serves it): ErrNoRecord when its data holds none.
func ParseLifecycleRecord(entry []byte) (LifecycleRecord, error) {
	var item struct {
		Data json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(entry, &item); err != nil {
		return LifecycleRecord{}, fmt.Errorf("lifecycle record: %w", err)
	}
	var data map[string]json.RawMessage
	if len(item.Data) == 0 || json.Unmarshal(item.Data, &data) != nil || data[LifecycleMember] == nil {
		return LifecycleRecord{}, ErrNoRecord
	}
	var r LifecycleRecord
	if err := json.Unmarshal(data[LifecycleMember], &r); err != nil {
		return LifecycleRecord{}, fmt.Errorf("lifecycle record: %w", err)
	}
	return r, r.Validate()
}

// The lines an export adds for the entries that left it (before its
// checkpoint line): one per run of expired leaves, with the hashes of the
// subtrees that cover them (the stored hashes of Pieces(first, last+1), in
// order), and the newest expiry record of the log with its inclusion proof
// in a signed checkpoint of the organization's audit log.
//
//	{"expired": {"first_leaf": a, "last_leaf": b, "hashes": ["<base64>", …]}}
//	{"record": {"entry": {…}, "leaf_index": r, "proof": ["<base64>", …], "checkpoint": "<signed note>"}}
const (
	ExpiredLineMember = "expired"
	RecordLineMember  = "record"
)

// ExpiredRun is an expired line's value.
type ExpiredRun struct {
	FirstLeaf int64    `json:"first_leaf"`
	LastLeaf  int64    `json:"last_leaf"`
	Hashes    []string `json:"hashes"`
}

// RecordProof is a record line's value: the record entry as the list
// route serves it (without leaf_index), its leaf index in the audit log,
// the inclusion proof and the checkpoint it is proved against.
type RecordProof struct {
	Entry      json.RawMessage `json:"entry"`
	LeafIndex  int64           `json:"leaf_index"`
	Proof      []string        `json:"proof"`
	Checkpoint string          `json:"checkpoint"`
}

// Node is a complete subtree of a log: the 2^Level leaves from Index·2^Level.
type Node struct {
	Level int
	Index int64
}

// Range is the node's leaves [lo, hi).
func (n Node) Range() (lo, hi int64) { return n.Index << n.Level, (n.Index + 1) << n.Level }

// Pieces covers the leaves [lo, hi) with the fewest complete subtrees,
// left to right (each as large as its start's alignment and hi allow).
func Pieces(lo, hi int64) []Node {
	var out []Node
	for lo < hi {
		l := 0
		for l < 62 && lo&(1<<(l+1)-1) == 0 && lo+1<<(l+1) <= hi {
			l++
		}
		out = append(out, Node{Level: l, Index: lo >> l})
		lo += 1 << l
	}
	return out
}

// StoredIndex is the index of the node's stored hash
// (golang.org/x/mod/sumdb/tlog.StoredHashIndex).
func (n Node) StoredIndex() int64 { return tlog.StoredHashIndex(n.Level, n.Index) }

// RootWithNodes is RootOf where some complete subtrees are given by their
// hash instead of their leaves (the leaves under them are ignored): the
// root of a log whose expired leaves are known only by the subtrees that
// cover them. leaves is overwritten.
func RootWithNodes(leaves []Hash, nodes map[Node]Hash) Hash {
	n := len(leaves)
	if n == 0 {
		return EmptyRoot
	}
	byLevel := map[int][]Node{}
	for nd := range nodes {
		byLevel[nd.Level] = append(byLevel[nd.Level], nd)
	}
	set := func(level, width int) {
		for _, nd := range byLevel[level] {
			if nd.Index < int64(width) {
				leaves[nd.Index] = nodes[nd]
			}
		}
	}
	set(0, n)
	for level := 1; n > 1; level++ {
		half := n / 2
		for i := range half {
			leaves[i] = tlog.NodeHash(leaves[2*i], leaves[2*i+1])
		}
		if n%2 == 1 {
			leaves[half] = leaves[n-1]
			half++
		}
		n = half
		// Only complete nodes are given: the moved-up last node of an odd
		// level is not one (its index is n-1 with fewer leaves under it),
		// and Pieces never names it.
		set(level, n)
	}
	return leaves[0]
}
