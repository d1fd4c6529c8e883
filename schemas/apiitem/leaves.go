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
