package deliver

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/auditrail/auditrail/controlplane/destination"
	"github.com/auditrail/auditrail/internal/auditstore"
	"github.com/auditrail/auditrail/internal/auditstore/search"
	"github.com/auditrail/auditrail/internal/ocsf"
	"github.com/auditrail/auditrail/internal/tlog"
	"github.com/auditrail/auditrail/schemas"
	"github.com/auditrail/auditrail/schemas/apiitem"
)

// spec is a destination as a worker delivers it: its filters parsed.
type spec struct {
	destination.ResolvedDestination
	audit, executions *search.Query
}

func newSpec(d destination.ResolvedDestination) (*spec, error) {
	qa, qe, err := destination.Filter(d.Q)
	if err != nil {
		return nil, fmt.Errorf("destination %s: q: %w", d.ID, err)
	}
	return &spec{ResolvedDestination: d, audit: qa, executions: qe}, nil
}

// CheckpointItem is a checkpoint's line in the JSON format: the signed
// note as published (C2SP tlog-checkpoint body and signature lines).
type CheckpointItem struct {
	Type string `json:"type"` // "checkpoint"
	Note string `json:"note"`
}

// hecEvent is Splunk HTTP Event Collector's event envelope.
type hecEvent struct {
	Time       float64 `json:"time"`
	Host       string  `json:"host"`
	Source     string  `json:"source"`
	Sourcetype string  `json:"sourcetype"`
	Event      any     `json:"event"`
}

// encode returns the line of one event for the destination (without the
// newline), or nil when its filter leaves it out. created is the time the
// stream stored it (created_time); leaf its leaf_index (nil: unknown). An error for an undecodable payload
// (ingest sends it to the dead-letter stream; it is not delivered).
//
// An event is delivered only to the organization its subject names, and
// only when its payload names that organization too (as ingest checks): a
// message on auditrail.events.<A>.audit whose organization_id is B is an
// error wrapping ErrOrganizationMismatch, delivered to neither A nor B.
func (s *spec) encode(subject string, data []byte, created time.Time, leaf *int64) ([]byte, error) {
	org, kind, ok := schemas.ParseEventSubject(subject)
	if !ok {
		return nil, fmt.Errorf("subject %q is not an event subject", subject)
	}
	subjectOrg, err := uuid.Parse(org)
	if err != nil || subjectOrg != s.OrgID {
		return nil, fmt.Errorf("%w: subject %s, destination of organization %s", ErrOrganizationMismatch, subject, s.OrgID)
	}
	// mismatch checks the organization the payload names.
	mismatch := func(payload string) error {
		if id, err := uuid.Parse(payload); err != nil || id != subjectOrg {
			return fmt.Errorf("%w: organization_id %q on subject %s", ErrOrganizationMismatch, payload, subject)
		}
		return nil
	}
	var v any
	var at time.Time
	switch kind {
	case schemas.KindAudit:
		ev, err := schemas.UnmarshalAuditEvent(data)
		if err != nil {
			return nil, err
		}
		if err := mismatch(ev.OrganizationID.String()); err != nil {
			return nil, err
		}
		if s.audit == nil || !s.audit.MatchAudit(&ev) {
			return nil, nil
		}
		at = ev.Timestamp
		if s.Format == destination.FormatOCSF {
			v = ocsf.Audit(&ev)
		} else {
			entry := schemas.AuditEntry{ID: schemas.EntryID(ev.EventID), AuditEvent: ev, CreatedTime: created}
			item := apiitem.NewItem(&entry)
			item.LeafIndex = leaf
			v = item
		}
	case schemas.KindExecution:
		ev, err := schemas.UnmarshalExecutionEvent(data)
		if err != nil {
			return nil, err
		}
		if err := mismatch(ev.OrganizationID); err != nil {
			return nil, err
		}
		if s.executions == nil || !s.executions.MatchExecution(&ev) {
			return nil, nil
		}
		at = ev.StartedAt
		if s.Format == destination.FormatOCSF {
			v = ocsf.Execution(&ev)
		} else {
			item := apiitem.NewExecutionItem(&auditstore.Execution{ExecutionEvent: ev, CreatedTime: created})
			item.LeafIndex = leaf
			v = item
		}
	case schemas.KindCheckpoint:
		// A signed checkpoint of the org's logs (issue 24): delivered in
		// the JSON format, whatever the filter q (it covers every entry of
		// a log, and the SIEM needs it to verify what it got); skipped in
		// OCSF, which has no class for a signed tree head (an invented one
		// would not validate against the OCSF schema).
		if s.Format == destination.FormatOCSF {
			return nil, nil
		}
		if !utf8.Valid(data) || len(data) > tlog.MaxCheckpointBytes {
			return nil, fmt.Errorf("checkpoint is not a signed note")
		}
		// The note's first line is its origin: …/orgs/<org_id>/<kind>.
		origin, _, _ := strings.Cut(string(data), "\n")
		_, noteOrg, _, ok := tlog.ParseOrigin(origin)
		if !ok {
			return nil, fmt.Errorf("checkpoint origin %q names no organization", origin)
		}
		if err := mismatch(noteOrg.String()); err != nil {
			return nil, err
		}
		at = created
		v = CheckpointItem{Type: schemas.KindCheckpoint, Note: string(data)}
	default:
		return nil, fmt.Errorf("subject %q is not an event subject", subject)
	}
	if s.Type == destination.DestSplunkHEC {
		st := "auditrail:" + kind
		if s.Format == destination.FormatOCSF {
			st = "ocsf:api_activity"
		}
		v = hecEvent{Time: float64(at.UnixMilli()) / 1000, Host: "auditrail", Source: "auditrail", Sourcetype: st, Event: v}
	}
	return json.Marshal(v)
}

// contentType is the Content-Type of the destination's bodies.
func (s *spec) contentType() string {
	if s.Type == destination.DestSplunkHEC {
		return "application/json"
	}
	return "application/x-ndjson"
}
