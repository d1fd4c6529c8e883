package ingest_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"

	"github.com/auditrail/auditrail/ingest"
	"github.com/auditrail/auditrail/internal/auditstore"
	"github.com/auditrail/auditrail/internal/auditstore/sqlite"
	"github.com/auditrail/auditrail/internal/testenv"
	"github.com/auditrail/auditrail/producers"
	"github.com/auditrail/auditrail/schemas"
)

// Signed checkpoints published on an org's subjects (auditrail.events.<org>.checkpoint,
// a text note, not msgpack) are never taken by the audit or the execution
// ingester: nothing is dead-lettered, the events around them are stored,
// and both consumers have nothing left pending.
func TestCheckpointsAreNotDeadLettered(t *testing.T) {
	s, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "audit.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	_, nc, js := testenv.NATS(t)
	audit, _ := runIngester(t, nc, s, testConfig())
	cfg := testConfig()
	cfg.Durable = ingest.ExecutionDurable
	exec, err := ingest.NewExecution(nc, s, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = exec.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	org := uuid.New()
	note := []byte("auditrail/orgs/" + org.String() + "/audit_logs\n3\nAAAA\ntimestamp 2026-01-01T00:00:00.000Z\n\n— auditrail abcd\n")
	hdr := nats.Header{schemas.HeaderSchema: {schemas.SchemaCheckpointV1}, schemas.HeaderContentType: {schemas.ContentTextPlain}}
	publishRaw(t, js, schemas.EventSubject(org.String(), schemas.KindCheckpoint), note, hdr)
	pub := newPublisher(t, nc)
	evs := []*schemas.AuditEvent{event(org, time.Now()), event(org, time.Now())}
	publish(t, pub, evs)
	id := uuid.NewString()
	if err := pub.PublishBatch(context.Background(), []producers.Event{&schemas.ExecutionEvent{EventID: id, ExecutionID: id, OrganizationID: org.String(), UserID: "u",
		Tool: schemas.ToolRef{Toolkit: "K", Name: "T", Version: "1"}, StartedAt: time.Now(), EndedAt: time.Now(), Success: true, ExecutionCode: "OK"}}); err != nil {
		t.Fatal(err)
	}
	publishRaw(t, js, schemas.EventSubject(org.String(), schemas.KindCheckpoint), append(note, '.'), hdr)
	testenv.Eventually(t, 20*time.Second, "the audit events stored", func() bool { return len(listAll(t, s, org)) == len(evs) })
	checkExactlyOnce(t, s, org, evs)
	testenv.Eventually(t, 20*time.Second, "the execution stored", func() bool {
		p, err := s.ListExecutions(context.Background(), auditstore.ExecQuery{OrgID: org, Limit: 10})
		return err == nil && len(p.Items) == 1
	})
	for _, durable := range []string{ingest.DefaultConfig().Durable, ingest.ExecutionDurable} {
		testenv.Eventually(t, 10*time.Second, durable+" has nothing pending", func() bool {
			ack, pending := consumerPending(t, js, durable)
			return ack == 0 && pending == 0
		})
	}
	if n := len(dlqMessages(t, js)); n != 0 || audit.Stats().DeadLettered != 0 || exec.Stats().DeadLettered != 0 {
		t.Fatalf("%d dead letters (audit %d, execution %d)", n, audit.Stats().DeadLettered, exec.Stats().DeadLettered)
	}
}
