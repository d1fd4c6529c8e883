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

// AuditLeaf is the leaf of an audit entry: of an entry with a salt
// (version 2, every entry ingest stores), written from the item's members
// (internal/tlog.SaltedLeaf: the hash of the item's JSON without making
// it); of one without, from the item's JSON.
func (Leaves) AuditLeaf(e *schemas.AuditEntry) ([32]byte, error) {
	if len(e.Salt) > 0 {
		return saltedAuditLeaf(NewItem(e), e.Salt)
	}
	b, err := json.Marshal(NewItem(e))
	if err != nil {
		return [32]byte{}, fmt.Errorf("audit item of event %s: %w", e.EventID, err)
	}
	return itlog.Leaf(b)
}

// ExecutionLeaf is the leaf of a tool execution (as AuditLeaf).
func (Leaves) ExecutionLeaf(e *auditstore.Execution) ([32]byte, error) {
	if len(e.Salt) > 0 {
		return saltedExecutionLeaf(NewExecutionItem(e), e.Salt)
	}
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

// saltedAuditLeaf is the version 2 leaf of an audit item with this salt,
// from its covered members (TestSaltedLeavesAreTheServedLeaves: the same
// hash as the item's JSON).
func saltedAuditLeaf(it Item, salt []byte) ([32]byte, error) {
	b, err := itlog.NewSaltedLeaf(salt)
	if err != nil {
		return [32]byte{}, fmt.Errorf("audit item of event %s: %w", it.EventID, err)
	}
	defer b.Free()
	b.String("id", it.ID)
	b.String("event_id", it.EventID)
	b.String("timestamp", it.Timestamp)
	b.StringOrNull("client_ip", it.ClientIP)
	b.String("action", it.Action)
	b.String("source", it.Source)
	b.String("display_name", it.DisplayName)
	b.StringOrNull("customer_id", it.CustomerID)
	b.String("organization_id", it.OrganizationID)
	b.StringOrNull("project_id", it.ProjectID)
	b.String("principal_id", it.PrincipalID)
	b.StringOrNull("user_id", it.UserID)
	b.String("principal_type", it.PrincipalType)
	b.StringOrNull("resource_type", it.ResourceType)
	b.StringOrNull("resource_id", it.ResourceID)
	b.StringOrNull("resource_display", it.ResourceDisplay)
	b.JSON("data", it.Data)
	b.String("created_time", it.CreatedTime)
	h, err := b.Leaf()
	if err != nil {
		return h, fmt.Errorf("audit item of event %s: %w", it.EventID, err)
	}
	return h, nil
}

// saltedExecutionLeaf is saltedAuditLeaf of an execution item.
func saltedExecutionLeaf(it ExecutionItem, salt []byte) ([32]byte, error) {
	b, err := itlog.NewSaltedLeaf(salt)
	if err != nil {
		return [32]byte{}, fmt.Errorf("execution item of event %s: %w", it.EventID, err)
	}
	defer b.Free()
	b.String("execution_id", it.ExecutionID)
	b.String("event_id", it.EventID)
	b.String("organization_id", it.OrganizationID)
	b.StringOrNull("project_id", it.ProjectID)
	b.String("user_id", it.UserID)
	b.String("principal_id", it.PrincipalID)
	b.String("principal_type", it.PrincipalType)
	b.String("display_name", it.DisplayName)
	b.StringOrNull("client_ip", it.ClientIP)
	b.String("tool_name", it.ToolName)
	b.String("started_at", it.StartedAt)
	b.String("ended_at", it.EndedAt)
	b.String("execution_code", it.ExecutionCode)
	b.String("created_time", it.CreatedTime)
	for _, m := range []struct {
		name string
		v    any
	}{{"tool", it.Tool}, {"duration_ms", it.DurationMS}, {"success", it.Success}, {"error", it.Error}, {"hooks", it.Hooks}} {
		v, err := json.Marshal(m.v)
		if err != nil {
			return [32]byte{}, fmt.Errorf("execution item of event %s: %s: %w", it.EventID, m.name, err)
		}
		b.JSON(m.name, v)
	}
	h, err := b.Leaf()
	if err != nil {
		return h, fmt.Errorf("execution item of event %s: %w", it.EventID, err)
	}
	return h, nil
}
