package producers

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"

	"github.com/auditrail/auditrail/schemas"
)

// Mutation is one administrative change, as the control plane describes it.
type Mutation struct {
	Action          schemas.AuditAction
	Source          schemas.AuditSource
	ResourceType    schemas.ResourceType
	ResourceID      string
	ResourceDisplay string
	OrgID           uuid.UUID
	ProjectID       *uuid.UUID
	// Who: the credential, its kind, the user it acts as and a display name.
	PrincipalID   string
	PrincipalType string
	UserID        string
	DisplayName   string
	ClientIP      string
	// Before and After are the resource around the change, secrets already
	// redacted; nil for a creation's before or a deletion's after.
	Before, After any
}

// Recorder turns mutations into audit events and publishes them, waiting
// until the stream has stored each one.
type Recorder struct {
	pub     *Publisher
	timeout time.Duration
	now     func() time.Time
}

// NewRecorder returns a recorder whose Send gives up after timeout.
func NewRecorder(pub *Publisher, timeout time.Duration) *Recorder {
	return &Recorder{pub: pub, timeout: timeout, now: time.Now}
}

// Event builds the audit event of m.
func (r *Recorder) Event(m Mutation) (*schemas.AuditEvent, error) {
	data, err := json.Marshal(map[string]any{"before": m.Before, "after": m.After})
	if err != nil {
		return nil, fmt.Errorf("%w: data: %w", ErrEncode, err)
	}
	rt := m.ResourceType
	ev := &schemas.AuditEvent{
		EventID:         uuid.Must(uuid.NewV7()), // time-ordered: ties in the listing follow creation order
		Timestamp:       r.now().UTC(),
		Action:          m.Action,
		Source:          m.Source,
		DisplayName:     m.DisplayName,
		OrganizationID:  m.OrgID,
		ProjectID:       m.ProjectID,
		PrincipalID:     m.PrincipalID,
		PrincipalType:   m.PrincipalType,
		ResourceType:    &rt,
		ResourceID:      schemas.Ptr(m.ResourceID),
		ResourceDisplay: schemas.Ptr(m.ResourceDisplay),
		Data:            data,
	}
	if m.UserID != "" {
		ev.UserID = schemas.Ptr(m.UserID)
	}
	if m.ClientIP != "" {
		ev.ClientIP = schemas.Ptr(m.ClientIP)
	}
	return ev, ev.Validate()
}

// Prepare builds the audit event of m and the message that publishes it
// (Nats-Msg-Id = event_id), without sending it: the control plane stores
// the message in its outbox together with the change, then sends it.
func (r *Recorder) Prepare(m Mutation) (*schemas.AuditEvent, *nats.Msg, error) {
	ev, err := r.Event(m)
	if err != nil {
		return nil, nil, err
	}
	msg, err := Message(ev)
	if err != nil {
		return nil, nil, err
	}
	return ev, msg, nil
}

// Send publishes prepared messages and returns nil once the stream stored
// each of them; it gives up after the recorder's timeout. A message sent
// again is stored once (within the stream's dedup window; the store
// deduplicates by event_id after it).
func (r *Recorder) Send(ctx context.Context, msgs ...*nats.Msg) error {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	return r.pub.PublishMsgs(ctx, msgs)
}
