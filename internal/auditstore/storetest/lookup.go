package storetest

import (
	"context"
	"encoding/binary"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/auditrail/auditrail/internal/auditstore"
	"github.com/auditrail/auditrail/schemas"
)

// Lookup is the event lookup that wait_for polls (query.Reader and
// query.ExecutionReader declare it); every backend implements it.
type Lookup interface {
	HasAudit(ctx context.Context, org uuid.UUID, project *uuid.UUID, id uuid.UUID) (bool, error)
	HasExecution(ctx context.Context, org uuid.UUID, project *uuid.UUID, id uuid.UUID) (bool, error)
}

// V7At returns a random UUIDv7 whose time is at (to the millisecond).
func V7At(at time.Time) uuid.UUID {
	u := uuid.Must(uuid.NewV7())
	var ms [8]byte
	binary.BigEndian.PutUint64(ms[:], uint64(at.UnixMilli()))
	copy(u[:6], ms[2:])
	return u
}

// testLookup: an event is found by its id in its organization (and
// project), never in another; a UUIDv7 id is found when the event's time is
// within auditstore.LookupV7Slack of the id's time (however old), any other
// id when the event is recent (auditstore.LookupRecent).
func testLookup(t *testing.T, open Opener) {
	st := mustOpen(t, open)
	s, ok := st.(Lookup)
	if !ok {
		t.Fatal("the store does not look events up")
	}
	es, ok := st.(auditstore.ExecutionStore)
	if !ok {
		t.Fatal("the store does not keep executions")
	}
	org, other, p1, p2 := uuid.New(), uuid.New(), uuid.New(), uuid.New()
	now := time.Now()
	old := now.Add(-72 * time.Hour)

	// Each event: its id, its time, its project (nil: none).
	type event struct {
		name    string
		id      uuid.UUID
		at      time.Time
		project *uuid.UUID
	}
	events := []event{
		{"v7 of now in p1", V7At(now), now, &p1},
		{"v7 of now, no project", V7At(now), now, nil},
		{"v7 three days old, 9 minutes after its id", V7At(old), old.Add(9 * time.Minute), &p1},
		{"v7 three days old, 9 minutes before its id", V7At(old), old.Add(-9 * time.Minute), &p1},
		{"v4, 30 minutes old", uuid.New(), now.Add(-30 * time.Minute), &p1},
	}
	var audits []schemas.AuditEvent
	var execs []schemas.ExecutionEvent
	for _, e := range events {
		a := Event(org, e.at)
		a.EventID, a.ProjectID = e.id, e.project
		audits = append(audits, a)
		project := uuid.Nil
		if e.project != nil {
			project = *e.project
		}
		x := execEvent(org, project, e.at, true)
		x.EventID = e.id.String()
		if e.project == nil {
			x.ProjectID = ""
		}
		execs = append(execs, x)
	}
	write(t, st, audits)
	if err := es.WriteExecutions(ctx(t), execs); err != nil {
		t.Fatal(err)
	}

	type lookup struct {
		name    string
		org     uuid.UUID
		project *uuid.UUID
		id      uuid.UUID
		want    bool
	}
	var tests []lookup
	for _, e := range events {
		tests = append(tests,
			lookup{e.name + ": in the org", org, nil, e.id, true},
			lookup{e.name + ": in another org", other, nil, e.id, false},
			lookup{e.name + ": in another project", org, &p2, e.id, false})
		if e.project != nil {
			tests = append(tests, lookup{e.name + ": in its project", org, e.project, e.id, true})
		}
	}
	tests = append(tests,
		lookup{"never written v7", org, nil, V7At(now), false},
		lookup{"never written v4", org, nil, uuid.New(), false},
		lookup{"never written, in a project", org, &p1, uuid.New(), false},
		lookup{"the nil id", org, nil, uuid.Nil, false})
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for kind, has := range map[string]func(context.Context, uuid.UUID, *uuid.UUID, uuid.UUID) (bool, error){
				"audit": s.HasAudit, "execution": s.HasExecution,
			} {
				got, err := has(ctx(t), tc.org, tc.project, tc.id)
				if err != nil {
					t.Fatalf("%s: %v", kind, err)
				}
				if got != tc.want {
					t.Errorf("%s found: %v, want %v", kind, got, tc.want)
				}
			}
		})
	}
	// An audit event id is not a tool execution's, and the reverse.
	only := Event(org, now)
	only.EventID = V7At(now)
	write(t, st, []schemas.AuditEvent{only})
	if found, err := s.HasExecution(ctx(t), org, nil, only.EventID); err != nil || found {
		t.Fatalf("an audit entry found as an execution: %v %v", found, err)
	}
	if found, err := s.HasAudit(ctx(t), org, nil, only.EventID); err != nil || !found {
		t.Fatalf("audit entry written after the others: %v %v", found, err)
	}
}
