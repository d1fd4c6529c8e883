package ingest_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/proto"
	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/auditrail/auditrail/ingest"
	"github.com/auditrail/auditrail/internal/auditstore"
	"github.com/auditrail/auditrail/internal/natsx"
	"github.com/auditrail/auditrail/internal/testenv"
	"github.com/auditrail/auditrail/schemas"
)

// unwellStore fails its first writes with err while still answering Ping,
// as a store with a full disk or a flaky network does, then writes.
type unwellStore struct {
	ingest.AuditWriter
	err      error
	failures atomic.Int64
}

func (s *unwellStore) WriteAudit(ctx context.Context, events []schemas.AuditEvent) error {
	if s.failures.Add(-1) >= 0 {
		return s.err
	}
	return s.AuditWriter.WriteAudit(ctx, events)
}

// A store that fails writes for a reason that is not a property of the rows
// — a full disk (SQLITE_FULL, ClickHouse 243), an I/O error, a network
// error (209, 210), a cancelled query (394), anything unclassified — while
// it still answers Ping is an outage: the batch waits and is written once
// the store is well, nothing is dead-lettered.
func TestStoreFailuresThatAreNotRefusalsWait(t *testing.T) {
	errs := map[string]error{
		"sqlite full":          fmt.Errorf("sqlite insert: %w", errors.New("database or disk is full (13)")),
		"sqlite io":            fmt.Errorf("sqlite commit: %w", errors.New("disk I/O error (10)")),
		"clickhouse no space":  fmt.Errorf("clickhouse insert 3 rows: %w", &proto.Exception{Code: 243, Name: "DB::Exception", Message: "Cannot reserve 1.00 MiB, not enough space"}),
		"clickhouse network":   fmt.Errorf("clickhouse insert 3 rows: %w", &proto.Exception{Code: 210, Name: "DB::NetException", Message: "Connection refused"}),
		"clickhouse timeout":   fmt.Errorf("clickhouse insert 3 rows: %w", &proto.Exception{Code: 209, Name: "DB::NetException", Message: "Timeout exceeded while reading from socket"}),
		"clickhouse cancelled": fmt.Errorf("clickhouse insert 3 rows: %w", &proto.Exception{Code: 394, Name: "DB::Exception", Message: "Query was cancelled"}),
		"unclassified":         errors.New("something nobody classified"),
	}
	for name, werr := range errs {
		t.Run(name, func(t *testing.T) {
			store := &unwellStore{AuditWriter: backends()[0].open(t), err: werr}
			store.failures.Store(6) // more than any "tries before the DLQ" would allow
			_, nc, js := testenv.NATS(t)
			cfg := testConfig()
			cfg.FlushInterval = 300 * time.Millisecond
			org := uuid.New()
			evs := []*schemas.AuditEvent{event(org, time.Now()), event(org, time.Now().Add(-time.Millisecond)), event(org, time.Now().Add(-2*time.Millisecond))}
			publish(t, newPublisher(t, nc), evs)
			in, _ := runIngester(t, nc, store, cfg)
			testenv.Eventually(t, 10*time.Second, "ingester ready", in.Ready)
			testenv.Eventually(t, 30*time.Second, "the batch committed", func() bool {
				ack, pending := consumerPending(t, js, cfg.Durable)
				return ack == 0 && pending == 0 && in.Stats().Stored >= uint64(len(evs))
			})
			checkExactlyOnce(t, store.AuditWriter.(auditstore.Store), org, evs)
			if n := len(dlqMessages(t, js)); n != 0 {
				t.Fatalf("%d valid events dead-lettered while the store was unwell", n)
			}
			if st := in.Stats(); st.DeadLettered != 0 || st.Refused != 0 || st.Retries < 6 {
				t.Errorf("stats %+v", st)
			}
		})
	}
}

// Ingest marks each organization's commit (schemas.StreamCommits) only
// once its events are stored, before it acknowledges them: while the store
// fails, nothing is marked; then one mark per organization, naming the
// highest stream sequence of its events, which its watermark then passes.
func TestCommitMarksFollowTheStore(t *testing.T) {
	store := &unwellStore{AuditWriter: backends()[0].open(t), err: errors.New("down")}
	store.failures.Store(4)
	_, nc, js := testenv.NATS(t)
	cfg := testConfig()
	cfg.FlushInterval = 300 * time.Millisecond
	ctx := context.Background()
	a, b := uuid.New(), uuid.New()
	publish(t, newPublisher(t, nc), []*schemas.AuditEvent{event(a, time.Now()), event(b, time.Now()), event(a, time.Now())})
	events, err := js.Stream(ctx, schemas.StreamEvents)
	if err != nil {
		t.Fatal(err)
	}
	last := events.CachedInfo().State.LastSeq
	commits, err := js.Stream(ctx, schemas.StreamCommits)
	if err != nil {
		t.Fatal(err)
	}
	mark := func(org uuid.UUID) (string, error) {
		m, err := commits.GetLastMsgForSubject(ctx, schemas.CommitSubject(org.String(), schemas.KindAudit))
		if err != nil {
			return "", err
		}
		return string(m.Data), nil
	}
	in, _ := runIngester(t, nc, store, cfg)
	testenv.Eventually(t, 10*time.Second, "the store's first failure", func() bool { return store.failures.Load() < 3 })
	for _, o := range []uuid.UUID{a, b} {
		if _, err := mark(o); !errors.Is(err, jetstream.ErrMsgNotFound) {
			t.Fatalf("marked before the store write: %v", err)
		}
	}
	testenv.Eventually(t, 30*time.Second, "the batch committed", func() bool { return in.Stats().Stored == 3 })
	got, err := mark(a)
	if err != nil || got != fmt.Sprint(last) {
		t.Fatalf("mark of a: %q, %v; want %d, the last event's sequence", got, err, last)
	}
	if got, err := mark(b); err != nil || got != fmt.Sprint(last-1) {
		t.Fatalf("mark of b: %q, %v; want %d", got, err, last-1)
	}
	if info, err := commits.Info(ctx); err != nil || info.State.Msgs != 2 {
		t.Fatalf("commit marks: %+v, %v; want 2", info.State, err)
	}
}

// A commit mark whose ack never comes (a stream leader lost with it) does
// not hold ingest forever: the wait ends, the commit is tried again, and
// the batch is acknowledged once a mark is taken.
func TestCommitMarkWithoutAckIsRetried(t *testing.T) {
	ingest.SetAsyncPublishTimeout(t, 300*time.Millisecond)
	store := backends()[0].open(t)
	_, nc, js := testenv.NATS(t)
	ctx := context.Background()
	// The marks reach a subscriber that never answers, not the stream.
	if err := js.DeleteStream(ctx, schemas.StreamCommits); err != nil {
		t.Fatal(err)
	}
	sink, err := nc.SubscribeSync(schemas.SubjectCommitsAll)
	if err != nil {
		t.Fatal(err)
	}
	cfg := testConfig()
	cfg.FlushInterval = 100 * time.Millisecond
	org := uuid.New()
	evs := []*schemas.AuditEvent{event(org, time.Now())}
	publish(t, newPublisher(t, nc), evs)
	in, _ := runIngester(t, nc, store, cfg)
	testenv.Eventually(t, 10*time.Second, "the unanswered mark retried", func() bool { return in.Stats().Retries >= 2 })
	if ack, pending := consumerPending(t, js, cfg.Durable); ack == 0 && pending == 0 {
		t.Fatal("the batch was acknowledged without its mark")
	}
	if err := sink.Unsubscribe(); err != nil {
		t.Fatal(err)
	}
	if err := natsx.EnsureStreams(ctx, js, natsx.DefaultStreamConfig()); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, "the batch committed", func() bool {
		ack, pending := consumerPending(t, js, cfg.Durable)
		return ack == 0 && pending == 0
	})
}
