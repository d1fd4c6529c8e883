package apiitem

import (
	"encoding/json"
	"fmt"

	"github.com/auditrail/auditrail/internal/auditstore"
	itlog "github.com/auditrail/auditrail/internal/tlog"
	"github.com/auditrail/auditrail/schemas"
)

// Leaves computes the tamper-evidence leaf of an entry from the item the
// list routes serve for it (CONTRACT "Tamper evidence": the leaf hashes the
// JCS of that item). It is auditstore.Leaves: ingest's store keeps each
// entry's leaf, and the sequencer appends the same hash for an entry stored
// without one.
type Leaves struct{}

var _ auditstore.Leaves = Leaves{}

// AuditLeaf is the leaf of an audit entry.
func (Leaves) AuditLeaf(e *schemas.AuditEntry) ([32]byte, error) {
	b, err := json.Marshal(NewItem(e))
	if err != nil {
		return [32]byte{}, fmt.Errorf("audit item of event %s: %w", e.EventID, err)
	}
	return itlog.Leaf(b)
}

// ExecutionLeaf is the leaf of a tool execution.
func (Leaves) ExecutionLeaf(e *auditstore.Execution) ([32]byte, error) {
	b, err := json.Marshal(NewExecutionItem(e))
	if err != nil {
		return [32]byte{}, fmt.Errorf("execution item of event %s: %w", e.EventID, err)
	}
	return itlog.Leaf(b)
}

// Preimage is the leaf preimage of an item as the routes serve it (an
// Item or an ExecutionItem, its erasure member included): the entry that
// internal/tlog.ParseEntry reads from its JSON, whose Canonical are the
// exact bytes the leaf hashes (Leaf = SHA-256(0x00 ‖ Canonical)) and
// Version the leaf's version. For version 1 they are the JCS of the item's
// covered members; for version 2 (an item with a salt, or the fields of
// its erasure) the JCS of the leaf object with its commitments, which an
// erasure does not change: an erased entry of version 2 has the preimage
// of its original leaf, one of version 1 has not (its Leaf differs from
// its erasure's leaf_hash).
func Preimage(item any) (itlog.Entry, error) {
	b, err := json.Marshal(item)
	if err != nil {
		return itlog.Entry{}, fmt.Errorf("item: %w", err)
	}
	return itlog.ParseEntry(nil, b)
}
