package natsx

import (
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/auditrail/auditrail/schemas"
)

// DecodeExecution decodes an execution message and checks it against its
// subject and headers; an error means the message belongs in the DLQ.
func DecodeExecution(m jetstream.Msg) (schemas.ExecutionEvent, error) {
	if s := m.Headers().Get(schemas.HeaderSchema); s != "" && s != schemas.SchemaExecutionV1 {
		return schemas.ExecutionEvent{}, fmt.Errorf("%w: schema %q on an execution subject", ErrRejected, s)
	}
	ev, err := schemas.UnmarshalExecutionEvent(m.Data())
	if err != nil {
		return ev, err
	}
	org, _, ok := schemas.ParseEventSubject(m.Subject())
	if !ok || org != ev.OrganizationID {
		return schemas.ExecutionEvent{}, fmt.Errorf("%w: organization_id %s does not match subject %s", ErrRejected, ev.OrganizationID, m.Subject())
	}
	ev.Stored = Persisted(m)
	return ev, nil
}

// ErrRejected marks a message that does not decode or does not belong on
// its subject: ingest sends it to the dead-letter stream.
var ErrRejected = errors.New("rejected")

// DecodeAudit decodes an audit message and checks it against its subject and
// headers; an error means the message belongs in the DLQ.
func DecodeAudit(m jetstream.Msg) (schemas.AuditEvent, error) {
	if s := m.Headers().Get(schemas.HeaderSchema); s != "" && s != schemas.SchemaAuditV1 {
		return schemas.AuditEvent{}, fmt.Errorf("%w: schema %q on an audit subject", ErrRejected, s)
	}
	ev, err := schemas.UnmarshalAuditEvent(m.Data())
	if err != nil {
		return ev, err
	}
	org, _, ok := schemas.ParseEventSubject(m.Subject())
	if !ok || !sameUUID(org, ev.OrganizationID) {
		return schemas.AuditEvent{}, fmt.Errorf("%w: organization_id %s does not match subject %s", ErrRejected, ev.OrganizationID, m.Subject())
	}
	ev.Stored = Persisted(m)
	return ev, nil
}

// Persisted is where and when the stream stored m (zero for a message
// that does not come from a JetStream consumer).
func Persisted(m jetstream.Msg) schemas.Persisted {
	meta, err := m.Metadata()
	if err != nil {
		return schemas.Persisted{}
	}
	return schemas.Persisted{Seq: meta.Sequence.Stream, Time: meta.Timestamp.UTC()}
}

// sameUUID compares a subject token with a UUID without allocating.
func sameUUID(token string, id uuid.UUID) bool {
	u, err := uuid.Parse(token)
	return err == nil && u == id
}
