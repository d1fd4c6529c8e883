package schemas

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
)

// ErrInvalidEvent is returned by Validate and by the decoders when a payload is
// well-formed msgpack but not a valid event.
var ErrInvalidEvent = errors.New("invalid event")

// ErrDecode is returned when a payload is not the msgpack shape of an event.
var ErrDecode = errors.New("cannot decode event")

// AuditEvent is one administrative action as producers publish it: every field
// of the seed's audit log entry except id and created_time, which ingest sets.
// Pointer fields are nullable; nil is null.
type AuditEvent struct {
	EventID         uuid.UUID
	Timestamp       time.Time
	ClientIP        *string
	Action          AuditAction
	Source          AuditSource
	DisplayName     string
	CustomerID      *uuid.UUID
	OrganizationID  uuid.UUID
	ProjectID       *uuid.UUID
	PrincipalID     string
	UserID          *string
	PrincipalType   string
	ResourceType    *ResourceType
	ResourceID      *string
	ResourceDisplay *string
	// Data is the structured payload as a JSON object, or nil for null.
	Data json.RawMessage
	// Salt is the entry's salt (SaltBytes random bytes, wire key "salt",
	// binary; nil: none), which the leaf of version 2 derives the keys of
	// the committed fields from (internal/tlog). Producers set it when an
	// event is first encoded for publishing (EnsureSalt).
	Salt []byte
	// Stored is where the event stream keeps the event: set by ingest, not
	// part of the wire format.
	Stored Persisted `json:"-"`
}

// Persisted is an event's place in the event stream, which ingest takes
// from the JetStream message: Seq, its stream sequence, orders the feed
// (every org's entries in the order they were persisted) and Time, when
// the stream stored it, is the entry's created_time. Zero: unknown (an
// entry written by other means than ingest, or before feeds existed).
type Persisted struct {
	Seq  uint64
	Time time.Time
}

// AuditEntry is a stored audit event as readers see it.
type AuditEntry struct {
	// ID is derived from EventID (EntryID), so that every delivery of one event
	// has the same id.
	ID uuid.UUID
	AuditEvent
	CreatedTime time.Time
}

// entryNamespace is the UUIDv5 namespace of entry ids.
var entryNamespace = uuid.MustParse("5f2d7a3e-7c1b-4f7e-9a55-0d6c3b1e8a21")

// EntryID is the internal identifier of the entry stored for eventID. It is a
// UUIDv5 of the event id, identical for every delivery of that event.
func EntryID(eventID uuid.UUID) uuid.UUID {
	return uuid.NewSHA1(entryNamespace, eventID[:])
}

// Validate checks the fields that ingest requires: event_id, organization_id,
// timestamp, known enum numbers, and a JSON object (or null) in data.
func (e *AuditEvent) Validate() error { return e.validate(true) }

func (e *AuditEvent) validate(checkData bool) error {
	switch {
	case e.EventID == uuid.Nil:
		return fmt.Errorf("%w: missing event_id", ErrInvalidEvent)
	case e.OrganizationID == uuid.Nil:
		return fmt.Errorf("%w: missing organization_id", ErrInvalidEvent)
	case e.Timestamp.IsZero():
		return fmt.Errorf("%w: missing timestamp", ErrInvalidEvent)
	case !e.Action.Valid():
		return fmt.Errorf("%w: action %d out of range", ErrInvalidEvent, e.Action)
	case !e.Source.Valid():
		return fmt.Errorf("%w: source %d out of range", ErrInvalidEvent, e.Source)
	case e.ResourceType != nil && !e.ResourceType.Valid():
		return fmt.Errorf("%w: resource_type %d out of range", ErrInvalidEvent, *e.ResourceType)
	}
	if err := validateSalt(e.Salt); err != nil {
		return err
	}
	if checkData && e.Data != nil {
		trimmed := bytes.TrimLeft(e.Data, " \t\r\n")
		if len(trimmed) == 0 || trimmed[0] != '{' || !json.Valid(trimmed) {
			return fmt.Errorf("%w: data must be a JSON object", ErrInvalidEvent)
		}
	}
	return nil
}

// Key is the event id, used as Nats-Msg-Id.
func (e *AuditEvent) Key() string { return e.EventID.String() }

// Subject is auditrail.events.<org_id>.audit.
func (e *AuditEvent) Subject() string { return EventSubject(e.OrganizationID.String(), KindAudit) }

// Schema is audit/v1.
func (e *AuditEvent) Schema() string { return SchemaAuditV1 }

// Marshal encodes the event in the audit/v1 wire format.
func (e *AuditEvent) Marshal() ([]byte, error) { return MarshalAuditEvent(e) }

// EnsureSalt gives the event a new salt (NewSalt) when it has none, and
// keeps the one it has: an event encoded again, or published again,
// carries the same salt.
func (e *AuditEvent) EnsureSalt() error { return ensureSalt(&e.Salt) }

// Ptr returns a pointer to v, for the nullable fields.
func Ptr[T any](v T) *T { return &v }
