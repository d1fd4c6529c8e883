package schemas

import (
	"bytes"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/vmihailenco/msgpack/v5"
)

// ExecutionEvent is one tool execution with the decisions of every hook it
// passed through (schema execution/v1, subject auditrail.events.<org>.execution).
// Field names on the wire are the msgpack tags.
type ExecutionEvent struct {
	EventID        string `msgpack:"event_id" json:"event_id"`
	ExecutionID    string `msgpack:"execution_id" json:"execution_id"`
	OrganizationID string `msgpack:"organization_id" json:"organization_id"`
	ProjectID      string `msgpack:"project_id" json:"project_id"`
	// UserID is the end user the tool ran for (whose connections it used).
	UserID string `msgpack:"user_id" json:"user_id"`
	// The principal that asked for the execution: a user's key or JWT acts as
	// that user; a project service key may act for an end user (UserID).
	PrincipalID    string     `msgpack:"principal_id" json:"principal_id"`
	PrincipalType  string     `msgpack:"principal_type" json:"principal_type"`
	DisplayName    string     `msgpack:"display_name" json:"display_name"`
	ClientIP       string     `msgpack:"client_ip" json:"client_ip"`
	Tool           ToolRef    `msgpack:"tool" json:"tool"`
	StartedAt      time.Time  `msgpack:"started_at" json:"started_at"`
	EndedAt        time.Time  `msgpack:"ended_at" json:"ended_at"`
	DurationMS     float64    `msgpack:"duration_ms" json:"duration_ms"`
	Success        bool       `msgpack:"success" json:"success"`
	ExecutionCode  string     `msgpack:"execution_code" json:"execution_code"`
	ExecutionError string     `msgpack:"execution_error" json:"execution_error"`
	ErrorKind      string     `msgpack:"error_kind" json:"error_kind"`
	Hooks          []HookCall `msgpack:"hooks" json:"hooks"`
	// Client is the program through which the principal asked, as it names
	// itself (declared by the client, not authenticated): an MCP client's
	// clientInfo. Absent (nil) for calls of the HTTP API; decoders that
	// predate it skip the key.
	Client *ClientInfo `msgpack:"client,omitempty" json:"client,omitempty"`
	// Salt is as AuditEvent.Salt: binary on the wire, absent when none.
	Salt []byte `msgpack:"salt,omitempty" json:"salt,omitempty"`
	// Stored is as AuditEvent.Stored: set by ingest, not on the wire.
	Stored Persisted `msgpack:"-" json:"-"`
}

// ClientInfo names the client program of an execution.
type ClientInfo struct {
	// Protocol is how the client called: "mcp".
	Protocol string `msgpack:"protocol" json:"protocol"`
	Name     string `msgpack:"name" json:"name"`
	Version  string `msgpack:"version" json:"version"`
}

// ToolRef names a tool.
type ToolRef struct {
	Toolkit string `msgpack:"toolkit" json:"toolkit"`
	Name    string `msgpack:"name" json:"name"`
	Version string `msgpack:"version" json:"version"`
}

// HookCall is one call (or skipped call) of a customer hook in an execution.
type HookCall struct {
	HookID       string  `msgpack:"hook_id" json:"hook_id"`
	HookName     string  `msgpack:"hook_name" json:"hook_name"`
	Point        string  `msgpack:"point" json:"point"` // access, pre, post
	Code         string  `msgpack:"code" json:"code"`   // OK, CHECK_FAILED, RATE_LIMIT_EXCEEDED, or "" when the call failed
	ErrorMessage string  `msgpack:"error_message" json:"error_message"`
	HTTPStatus   int     `msgpack:"http_status" json:"http_status"`
	Attempts     int     `msgpack:"attempts" json:"attempts"`
	LatencyMS    float64 `msgpack:"latency_ms" json:"latency_ms"`
	// Failure describes why the call failed (timeout, status 503, breaker open, …); empty on success.
	Failure string `msgpack:"failure" json:"failure"`
	// FailureModeApplied is fail_open or fail_closed when the failure mode decided, else empty.
	FailureModeApplied string `msgpack:"failure_mode_applied" json:"failure_mode_applied"`
	// Decision is allow or deny.
	Decision   string `msgpack:"decision" json:"decision"`
	Overridden bool   `msgpack:"overridden" json:"overridden"`
	// Cached is true when the decision came from the access cache: no call
	// was made for this execution (attempts and latency are 0).
	Cached bool `msgpack:"cached,omitempty" json:"cached,omitempty"`
}

// Key is the event id, used as Nats-Msg-Id.
func (e *ExecutionEvent) Key() string { return e.EventID }

// Subject is auditrail.events.<org_id>.execution.
func (e *ExecutionEvent) Subject() string { return EventSubject(e.OrganizationID, KindExecution) }

// Schema is execution/v1.
func (e *ExecutionEvent) Schema() string { return SchemaExecutionV1 }

// Marshal encodes the event in the execution/v1 wire format.
func (e *ExecutionEvent) Marshal() ([]byte, error) {
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	enc.SetCustomStructTag("msgpack")
	if err := enc.Encode(e); err != nil {
		return nil, fmt.Errorf("encode execution event: %w", err)
	}
	return buf.Bytes(), nil
}

// Validate checks the identifiers and times that ingest requires.
func (e *ExecutionEvent) Validate() error {
	for _, f := range []struct{ name, v string }{
		{"event_id", e.EventID}, {"execution_id", e.ExecutionID}, {"organization_id", e.OrganizationID},
	} {
		if _, err := uuid.Parse(f.v); err != nil {
			return fmt.Errorf("%w: %s is not a UUID", ErrInvalidEvent, f.name)
		}
	}
	if e.ProjectID != "" {
		if _, err := uuid.Parse(e.ProjectID); err != nil {
			return fmt.Errorf("%w: project_id is not a UUID", ErrInvalidEvent)
		}
	}
	if e.StartedAt.IsZero() {
		return fmt.Errorf("%w: missing started_at", ErrInvalidEvent)
	}
	if e.Tool.Name == "" || e.Tool.Toolkit == "" {
		return fmt.Errorf("%w: missing tool", ErrInvalidEvent)
	}
	return validateSalt(e.Salt)
}

// EnsureSalt is as AuditEvent.EnsureSalt.
func (e *ExecutionEvent) EnsureSalt() error { return ensureSalt(&e.Salt) }

// UnmarshalExecutionEvent decodes and validates an execution/v1 payload.
// Errors wrap ErrDecode or ErrInvalidEvent; trailing bytes are an error.
func UnmarshalExecutionEvent(b []byte) (ExecutionEvent, error) {
	var e ExecutionEvent
	r := mpReader{b: b}
	if err := e.decode(&r); err != nil {
		return ExecutionEvent{}, err
	}
	if r.remaining() != 0 {
		return ExecutionEvent{}, fmt.Errorf("%w: %d trailing bytes", ErrDecode, r.remaining())
	}
	if err := e.Validate(); err != nil {
		return ExecutionEvent{}, err
	}
	return e, nil
}
