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
	return saltedLeaf(salt, "audit", it.EventID, func(b *itlog.SaltedLeaf) error {
		// In name order: the leaf sorts its members, in one pass when
		// they come sorted.
		b.String("action", it.Action)
		b.StringOrNull("client_ip", it.ClientIP)
		b.String("created_time", it.CreatedTime)
		b.StringOrNull("customer_id", it.CustomerID)
		b.JSON("data", it.Data)
		b.String("display_name", it.DisplayName)
		b.String("event_id", it.EventID)
		b.String("id", it.ID)
		b.String("organization_id", it.OrganizationID)
		b.String("principal_id", it.PrincipalID)
		b.String("principal_type", it.PrincipalType)
		b.StringOrNull("project_id", it.ProjectID)
		b.StringOrNull("resource_display", it.ResourceDisplay)
		b.StringOrNull("resource_id", it.ResourceID)
		b.StringOrNull("resource_type", it.ResourceType)
		b.String("source", it.Source)
		b.String("timestamp", it.Timestamp)
		b.StringOrNull("user_id", it.UserID)
		return nil
	}, func() ([32]byte, error) { return servedLeaf(it, it.EventID) })
}

// saltedExecutionLeaf is saltedAuditLeaf of an execution item.
func saltedExecutionLeaf(it ExecutionItem, salt []byte) ([32]byte, error) {
	return saltedLeaf(salt, "execution", it.EventID, func(b *itlog.SaltedLeaf) error {
		jsonMember := func(name string, v any) error {
			raw, err := json.Marshal(v)
			if err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			b.JSON(name, raw)
			return nil
		}
		// In name order (as saltedAuditLeaf).
		b.StringOrNull("client_ip", it.ClientIP)
		b.String("created_time", it.CreatedTime)
		b.String("display_name", it.DisplayName)
		if err := jsonMember("duration_ms", it.DurationMS); err != nil {
			return err
		}
		b.String("ended_at", it.EndedAt)
		if err := jsonMember("error", it.Error); err != nil {
			return err
		}
		b.String("event_id", it.EventID)
		b.String("execution_code", it.ExecutionCode)
		b.String("execution_id", it.ExecutionID)
		if err := jsonMember("hooks", it.Hooks); err != nil {
			return err
		}
		b.String("organization_id", it.OrganizationID)
		b.String("principal_id", it.PrincipalID)
		b.String("principal_type", it.PrincipalType)
		b.StringOrNull("project_id", it.ProjectID)
		b.String("started_at", it.StartedAt)
		if err := jsonMember("success", it.Success); err != nil {
			return err
		}
		if err := jsonMember("tool", it.Tool); err != nil {
			return err
		}
		b.String("tool_name", it.ToolName)
		b.String("user_id", it.UserID)
		return nil
	}, func() ([32]byte, error) { return servedLeaf(it, it.EventID) })
}

// saltedLeaf is the version 2 leaf of an item (of this kind and event id,
// for errors) with this salt, from the members that add adds; from the
// item's JSON (served) when they are large (internal/tlog.SaltedLeaf.Large).
func saltedLeaf(salt []byte, kind, event string, add func(*itlog.SaltedLeaf) error, served func() ([32]byte, error)) ([32]byte, error) {
	b, err := itlog.NewSaltedLeaf(salt)
	if err != nil {
		return [32]byte{}, fmt.Errorf("%s item of event %s: %w", kind, event, err)
	}
	defer b.Free()
	if err := add(b); err != nil {
		return [32]byte{}, fmt.Errorf("%s item of event %s: %w", kind, event, err)
	}
	if b.Large() {
		return served()
	}
	h, err := b.Leaf()
	if err != nil {
		return h, fmt.Errorf("%s item of event %s: %w", kind, event, err)
	}
	return h, nil
}

// servedLeaf is the leaf of an item from its JSON (a large item: see
// internal/tlog.SaltedLeaf.Large).
func servedLeaf(item any, event string) ([32]byte, error) {
	b, err := json.Marshal(item)
	if err != nil {
		return [32]byte{}, fmt.Errorf("item of event %s: %w", event, err)
	}
	return itlog.Leaf(b)
}
