package ingest_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/auditrail/auditrail/ingest"
	"github.com/auditrail/auditrail/internal/auditstore"
	"github.com/auditrail/auditrail/internal/testenv"
	"github.com/auditrail/auditrail/schemas"
)

// refusingStore refuses every row while refusing is set, as a store does
// whose row limit is too low for an organization's events.
type refusingStore struct {
	auditstore.Store
	refusing atomic.Bool
}

func (s *refusingStore) WriteAudit(ctx context.Context, events []schemas.AuditEvent) error {
	if s.refusing.Load() {
		return fmt.Errorf("%w: row limit", auditstore.ErrRefused)
	}
	return s.Store.WriteAudit(ctx, events)
}

// Dead letters are listed with their original subject and reason, and a
// replay once the cause is fixed stores them (exactly once, also when
// replayed twice) and removes them from the DLQ; a dead letter of a
// subject that is not an event subject is never republished.
func TestListAndReplayDeadLetters(t *testing.T) {
	store := &refusingStore{Store: backends()[0].open(t)}
	store.refusing.Store(true)
	_, nc, js := testenv.NATS(t)
	cfg := testConfig()
	in, _ := runIngester(t, nc, store, cfg)
	orgA, orgB := uuid.New(), uuid.New()
	a := []*schemas.AuditEvent{event(orgA, time.Now()), event(orgA, time.Now().Add(-time.Millisecond))}
	b := []*schemas.AuditEvent{event(orgB, time.Now())}
	publish(t, newPublisher(t, nc), append(append([]*schemas.AuditEvent{}, a...), b...))
	testenv.Eventually(t, 30*time.Second, "all dead-lettered", func() bool { return in.Stats().DeadLettered >= 3 })
	// A foreign message in the DLQ (not from an event subject).
	if _, err := js.PublishMsg(context.Background(), &nats.Msg{Subject: "auditrail.dlq.unknown", Data: []byte("x"),
		Header: nats.Header{schemas.HeaderDLQSubject: {"elsewhere.x"}, schemas.HeaderDLQReason: {"r"}}}); err != nil {
		t.Fatal(err)
	}

	ctx := context.Background()
	all, err := ingest.ListDeadLetters(ctx, js, ingest.DeadLetterFilter{}, 0)
	if err != nil || len(all) != 4 {
		t.Fatalf("list: %d, %v", len(all), err)
	}
	onlyA, err := ingest.ListDeadLetters(ctx, js, ingest.DeadLetterFilter{Org: orgA}, 0)
	if err != nil || len(onlyA) != 2 {
		t.Fatalf("list of org A: %d, %v", len(onlyA), err)
	}
	for _, d := range onlyA {
		if d.Org != orgA.String() || d.Kind != schemas.KindAudit || d.Subject != schemas.EventSubject(orgA.String(), schemas.KindAudit) ||
			!contains(d.Reason, "store refused") || d.MsgID == "" || d.Seq == 0 {
			t.Fatalf("dead letter %+v", d)
		}
	}
	if first, _ := ingest.ListDeadLetters(ctx, js, ingest.DeadLetterFilter{}, 1); len(first) != 1 || first[0].Seq != all[0].Seq {
		t.Fatalf("limit 1: %+v", first)
	}

	store.refusing.Store(false) // the cause is fixed
	for _, d := range onlyA {
		if err := ingest.ReplayDeadLetter(ctx, js, d); err != nil {
			t.Fatal(err)
		}
		if err := ingest.ReplayDeadLetter(ctx, js, d); err != nil { // twice: still stored once
			t.Fatal(err)
		}
	}
	testenv.Eventually(t, 30*time.Second, "the replayed events stored", func() bool { return in.Stats().Stored >= 2 })
	checkExactlyOnce(t, store.Store, orgA, a)
	rest, err := ingest.ListDeadLetters(ctx, js, ingest.DeadLetterFilter{}, 0)
	if err != nil || len(rest) != 2 {
		t.Fatalf("after the replay the DLQ holds %d, %v; want org B's and the foreign one", len(rest), err)
	}
	for _, d := range rest {
		if d.Org == "" {
			if err := ingest.ReplayDeadLetter(ctx, js, d); err == nil {
				t.Fatal("a dead letter of a non-event subject was replayed")
			}
		}
	}
	_ = jetstream.AckExplicitPolicy
}
