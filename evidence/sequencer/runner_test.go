package sequencer_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/auditrail/auditrail/evidence/sequencer"
	"github.com/auditrail/auditrail/ingest"
	"github.com/auditrail/auditrail/internal/auditstore"
	"github.com/auditrail/auditrail/internal/auditstore/sqlite"
	"github.com/auditrail/auditrail/internal/metrics"
	"github.com/auditrail/auditrail/internal/natsx"
	"github.com/auditrail/auditrail/internal/synth"
	"github.com/auditrail/auditrail/internal/testenv"
	"github.com/auditrail/auditrail/producers"
	"github.com/auditrail/auditrail/schemas"
)

func runIngest(t *testing.T, nc *nats.Conn, s *sqlite.Store) (stop func()) {
	t.Helper()
	cfg := ingest.DefaultConfig()
	cfg.BatchSize, cfg.MaxAckPending, cfg.FlushInterval, cfg.DrainTimeout = 300, 2000, 50*time.Millisecond, time.Second
	in, err := ingest.NewAudit(nc, s, cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	stopA := run(t, "ingest", in.Run)
	// The executions' too: a seal waits for both kinds' ingest.
	cfg.Durable = ingest.ExecutionDurable
	ex, err := ingest.NewExecution(nc, s, cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	stopE := run(t, "ingest executions", ex.Run)
	return func() { stopA(); stopE() }
}

// run runs fn until the test ends.
func run(t *testing.T, name string, fn func(context.Context) error) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- fn(ctx) }()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			if err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, nats.ErrConnectionClosed) && !errors.Is(err, jetstream.ErrMsgIteratorClosed) {
				t.Errorf("%s: %v", name, err)
			}
		case <-time.After(30 * time.Second):
			t.Errorf("%s did not stop", name)
		}
	}
	t.Cleanup(stop)
	return stop
}

func newRunner(t *testing.T, nc *nats.Conn, js jetstream.JetStream, s *sqlite.Store, instance string) *sequencer.Runner {
	t.Helper()
	kv, err := js.CreateOrUpdateKeyValue(context.Background(), jetstream.KeyValueConfig{Bucket: natsx.TLogBucket})
	if err != nil {
		t.Fatal(err)
	}
	cfg := sequencer.DefaultConfig()
	cfg.Instance, cfg.LeaseTTL, cfg.Idle = instance, time.Second, 100*time.Millisecond
	r, err := sequencer.NewRunner(cfg, sequencer.New(s), js, kv, natsx.NewWatermarks(js, 10*time.Millisecond), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func publishN(t *testing.T, nc *nats.Conn, orgs []uuid.UUID, n int) map[uuid.UUID][]uuid.UUID {
	t.Helper()
	pub, err := producers.New(nc, producers.DefaultConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	out := map[uuid.UUID][]uuid.UUID{}
	gens := make([]*synth.Generator, len(orgs))
	for i, o := range orgs {
		gens[i] = synth.New(o, 2, uint64(i+1))
	}
	batch := make([]producers.Event, 0, n)
	for i := 0; i < n; i++ {
		e := gens[i%len(orgs)].Event(time.Now().Add(-time.Duration(i%500) * time.Second))
		out[e.OrganizationID] = append(out[e.OrganizationID], e.EventID)
		batch = append(batch, &e)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := pub.PublishBatch(ctx, batch); err != nil {
		t.Fatal(err)
	}
	return out
}

func waitSize(t *testing.T, s *sqlite.Store, org uuid.UUID, want int64) {
	t.Helper()
	var size int64
	testenv.Eventually(t, 30*time.Second, func() string { return fmt.Sprintf("log of %s: size %d, want %d", org, size, want) }, func() bool {
		var err error
		if size, _, err = s.LogHead(context.Background(), org, auditstore.LogAudit); err != nil {
			t.Fatal(err)
		}
		if size > want {
			t.Fatalf("log of %s: size %d, want %d", org, size, want)
		}
		return size == want
	})
}

// Published events are sequenced by whichever runner holds the lease,
// each once, in the stream's order; when the holder stops, another takes
// over after the lease runs out and continues the same tree.
func TestRunnerSequencesPublishedEvents(t *testing.T) {
	_, nc, js := testenv.NATS(t)
	s := openStore(t)
	runIngest(t, nc, s)
	orgs := []uuid.UUID{uuid.New(), uuid.New(), uuid.New()}
	stopA := run(t, "runner a", newRunner(t, nc, js, s, "a").Run)
	run(t, "runner b", newRunner(t, nc, js, s, "b").Run) // waits for the lease
	ids := publishN(t, nc, orgs, 3000)
	for _, o := range orgs {
		waitSize(t, s, o, int64(len(ids[o])))
	}
	stopA()
	more := publishN(t, nc, orgs, 900)
	for _, o := range orgs {
		ids[o] = append(ids[o], more[o]...)
		waitSize(t, s, o, int64(len(ids[o])))
	}
	for _, o := range orgs {
		size := int64(len(ids[o]))
		if got, want := storedRoot(t, s, o, size), expectedRoot(t, s, o, ids[o]); got != want {
			t.Fatalf("org %s: root %s, want %s (entries in publish order)", o, got, want)
		}
	}
}

// Checkpoints published on an org's subjects are not entries: ingest
// marks no commit for them (the sequencer's consumer of the marks has
// nothing pending once the events are sequenced), and an org with only
// checkpoints has no log.
func TestRunnerIgnoresCheckpoints(t *testing.T) {
	_, nc, js := testenv.NATS(t)
	s := openStore(t)
	runIngest(t, nc, s)
	obs := &recorder{}
	run(t, "runner", newRunner(t, nc, js, s, "a").WithObserver(obs).Run)
	org, only := uuid.New(), uuid.New()
	for _, o := range []uuid.UUID{org, only} {
		m := nats.NewMsg(schemas.EventSubject(o.String(), schemas.KindCheckpoint))
		m.Data = []byte("auditrail/orgs/" + o.String() + "/audit_logs\n1\nAAAA\n\n— x y\n")
		m.Header.Set(schemas.HeaderSchema, schemas.SchemaCheckpointV1)
		if _, err := js.PublishMsg(context.Background(), m); err != nil {
			t.Fatal(err)
		}
	}
	published := time.Now()
	ids := publishN(t, nc, []uuid.UUID{org}, 20)
	waitSize(t, s, org, int64(len(ids[org])))
	cons, err := js.Consumer(context.Background(), schemas.StreamCommits, sequencer.DefaultConfig().Durable)
	if err != nil {
		t.Fatal(err)
	}
	var info *jetstream.ConsumerInfo
	testenv.Eventually(t, 10*time.Second, func() string {
		return fmt.Sprintf("sequencer consumer: %d pending, %d unacknowledged", info.NumPending, info.NumAckPending)
	}, func() bool {
		var err error
		if info, err = cons.Info(context.Background()); err != nil {
			t.Fatal(err)
		}
		return info.NumPending == 0 && info.NumAckPending == 0
	})
	if obs.appended() != 20 {
		t.Errorf("observer: %d leaves appended, want 20", obs.appended())
	}
	// Each append's delay runs from its oldest entry's storing, after the
	// publishing began, to the append, before now.
	obs.mu.Lock()
	delays := slices.Clone(obs.delays)
	obs.mu.Unlock()
	for _, d := range delays {
		if d <= 0 || d > time.Since(published) {
			t.Errorf("sequencing delay %v: not within the %v since the events were published", d, time.Since(published))
		}
	}
	if len(delays) == 0 {
		t.Error("no sequencing delay observed")
	}
	if size, _, err := s.LogHead(context.Background(), only, auditstore.LogAudit); err != nil || size != 0 {
		t.Fatalf("org with only checkpoints: log size %d, %v", size, err)
	}
	commits, err := js.Stream(context.Background(), schemas.StreamCommits)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := commits.GetLastMsgForSubject(context.Background(), schemas.CommitSubject(only.String(), schemas.KindCheckpoint)); !errors.Is(err, jetstream.ErrMsgNotFound) {
		t.Fatalf("a commit mark for a checkpoint: %v", err)
	}
	if _, err := commits.GetLastMsgForSubject(context.Background(), schemas.CommitSubject(org.String(), schemas.KindAudit)); err != nil {
		t.Fatalf("the organization's commit mark: %v", err)
	}
}

// recorder is a sequencer.Observer.
type recorder struct {
	mu     sync.Mutex
	n      map[string]int
	delays []time.Duration
}

func (r *recorder) SequencerAppended(kind string, n int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.n == nil {
		r.n = map[string]int{}
	}
	r.n[kind] += n
}

func (r *recorder) SequencerLag(uint64) {}

func (r *recorder) SequencerDelay(_ string, d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.delays = append(r.delays, d)
}

func (r *recorder) appended() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n["audit_logs"]
}

var _ sequencer.Observer = (*metrics.TLogObserver)(nil)

// The seal holds under load: whenever it is read, every entry stored with
// a created_time at or before it is already in its organization's log;
// once the runner is idle it reaches past every entry stored.
func TestRunnerSeals(t *testing.T) {
	_, nc, js := testenv.NATS(t)
	s := openStore(t)
	runIngest(t, nc, s)
	orgs := []uuid.UUID{uuid.New(), uuid.New()}
	run(t, "runner", newRunner(t, nc, js, s, "a").Run)
	kv, err := js.KeyValue(context.Background(), natsx.TLogBucket)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	// check reads the seal, then every stored entry: those at or before
	// the seal must have leaves. It returns the seal and the newest entry.
	check := func() (sequencer.Sealed, time.Time) {
		t.Helper()
		sealed, ok, err := sequencer.ReadSealed(ctx, kv)
		if err != nil || !ok {
			return sequencer.Sealed{}, time.Time{}
		}
		var newest time.Time
		for _, o := range orgs {
			var after auditstore.FeedKey
			for {
				p, err := s.FeedAudit(ctx, auditstore.FeedQuery{OrgID: o, After: after, Upto: math.MaxUint64, Limit: auditstore.FeedMaxLimit})
				if err != nil {
					t.Fatal(err)
				}
				var ids []uuid.UUID
				for i := range p.Items {
					if !p.Items[i].CreatedTime.After(sealed.Time) {
						ids = append(ids, p.Items[i].EventID)
					}
					if p.Items[i].CreatedTime.After(newest) {
						newest = p.Items[i].CreatedTime
					}
				}
				if len(ids) > 0 {
					got, err := s.LeafIndexes(ctx, o, auditstore.LogAudit, ids)
					if err != nil {
						t.Fatal(err)
					}
					if len(got) != len(ids) {
						t.Fatalf("sealed until %s (seq %d), but %d of the %d entries stored at or before it are not in the log", sealed.Time, sealed.Seq, len(ids)-len(got), len(ids))
					}
				}
				if !p.HasMore || len(p.Items) == 0 {
					break
				}
				after = p.Next
			}
		}
		return sealed, newest
	}
	for range 8 {
		publishN(t, nc, orgs, 400)
		check()
	}
	var sealed sequencer.Sealed
	var newest time.Time
	testenv.Eventually(t, 30*time.Second, func() string {
		return fmt.Sprintf("the idle seal %s reaches the newest entry %s", sealed.Time, newest)
	}, func() bool {
		sealed, newest = check()
		return !newest.IsZero() && !sealed.Time.Before(newest)
	})
}

// An upgrade: the sequencer followed the event stream with its durable
// before it followed the commit marks. It deletes that durable and, since
// what it still held is marked nowhere, looks at every log once: entries
// stored without a mark (here: marks lost) are sequenced all the same.
func TestRunnerUpgradeLooksAtEveryLog(t *testing.T) {
	_, nc, js := testenv.NATS(t)
	s := openStore(t)
	runIngest(t, nc, s)
	org := uuid.New()
	stop := run(t, "runner a", newRunner(t, nc, js, s, "a").Run)
	ids := publishN(t, nc, []uuid.UUID{org}, 50)
	waitSize(t, s, org, 50)
	stop()
	ctx := context.Background()
	more := publishN(t, nc, []uuid.UUID{org}, 30)
	// Ingest stores them (its watermark passes them), and their marks are
	// lost, as an older ingest would never have written them.
	events, err := js.Stream(ctx, schemas.StreamEvents)
	if err != nil {
		t.Fatal(err)
	}
	last := events.CachedInfo().State.LastSeq
	testenv.Eventually(t, 30*time.Second, "ingest committed the new events", func() bool {
		w, err := natsx.NewWatermarks(js, time.Millisecond).Watermark(ctx, schemas.IngestAuditDurable)
		return err == nil && w >= last
	})
	commits, err := js.Stream(ctx, schemas.StreamCommits)
	if err != nil {
		t.Fatal(err)
	}
	if err := commits.Purge(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateOrUpdateConsumer(ctx, schemas.StreamEvents, jetstream.ConsumerConfig{Durable: natsx.TLogDurable, AckPolicy: jetstream.AckAllPolicy}); err != nil {
		t.Fatal(err)
	}
	run(t, "runner b", newRunner(t, nc, js, s, "b").Run)
	waitSize(t, s, org, int64(len(ids[org])+len(more[org])))
	if _, err := js.Consumer(ctx, schemas.StreamEvents, natsx.TLogDurable); !errors.Is(err, jetstream.ErrConsumerNotFound) {
		t.Fatalf("the old durable of the event stream: %v", err)
	}
}

// A seal never passes an event that ingest has not committed: with ingest
// stopped, events published wait in the stream, and however many rounds
// the runner makes, the seal stays before them; once ingest stores them,
// it passes them.
func TestRunnerSealWaitsForIngest(t *testing.T) {
	_, nc, js := testenv.NATS(t)
	s := openStore(t)
	stop := runIngest(t, nc, s)
	org := uuid.New()
	run(t, "runner", newRunner(t, nc, js, s, "a").Run)
	publishN(t, nc, []uuid.UUID{org}, 20)
	waitSize(t, s, org, 20)
	ctx := context.Background()
	kv, err := js.KeyValue(ctx, natsx.TLogBucket)
	if err != nil {
		t.Fatal(err)
	}
	stop()
	events, err := js.Stream(ctx, schemas.StreamEvents)
	if err != nil {
		t.Fatal(err)
	}
	last := events.CachedInfo().State.LastSeq
	publishN(t, nc, []uuid.UUID{org}, 10)
	first, err := events.GetMsg(ctx, last+1) // the first event ingest has not stored
	if err != nil {
		t.Fatal(err)
	}
	before := first.Time
	time.Sleep(time.Second) // rounds of the runner (Idle 100ms)
	sealed, ok, err := sequencer.ReadSealed(ctx, kv)
	if err != nil || !ok {
		t.Fatalf("seal: %v, %v", ok, err)
	}
	if !sealed.Time.Before(before) {
		t.Fatalf("sealed until %s, past an event stored at %s that ingest has not committed", sealed.Time, before)
	}
	runIngest(t, nc, s)
	waitSize(t, s, org, 30)
	testenv.Eventually(t, 10*time.Second, func() string { return fmt.Sprintf("the seal %s passes %s", sealed.Time, before) }, func() bool {
		sealed, _, err = sequencer.ReadSealed(ctx, kv)
		return err == nil && sealed.Time.After(before)
	})
}

// forgetting is a store that remembers its appends: it counts the calls
// that make it forget them.
type forgetting struct {
	*sqlite.Store
	mu      sync.Mutex
	forgets int
}

func (f *forgetting) ForgetLogWrites() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.forgets++
}

func (f *forgetting) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.forgets
}

// A runner that takes the lease makes the store forget where its own
// appends left the logs (another instance may have led meanwhile and
// crashed in an append), each time it takes it, and not each round.
func TestRunnerForgetsWritesWhenItTakesTheLease(t *testing.T) {
	_, nc, js := testenv.NATS(t)
	s := &forgetting{Store: openStore(t)}
	runIngest(t, nc, s.Store)
	kv, err := js.CreateOrUpdateKeyValue(context.Background(), jetstream.KeyValueConfig{Bucket: natsx.TLogBucket})
	if err != nil {
		t.Fatal(err)
	}
	cfg := sequencer.DefaultConfig()
	cfg.Instance, cfg.LeaseTTL, cfg.Idle = "a", time.Second, 100*time.Millisecond
	seq := sequencer.New(s)
	r, err := sequencer.NewRunner(cfg, seq, js, kv, natsx.NewWatermarks(js, 10*time.Millisecond), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	stop := run(t, "runner", r.Run)
	org := uuid.New()
	ids := publishN(t, nc, []uuid.UUID{org}, 50)
	waitSize(t, s.Store, org, int64(len(ids[org])))
	time.Sleep(500 * time.Millisecond) // rounds go on
	if n := s.count(); n != 1 {
		t.Fatalf("the store was told to forget %d times, want once (when the runner took the lease)", n)
	}
	// The log that grew is told once, in the lead's epoch.
	grown, epoch, leading := seq.Grown(auditstore.LogAudit)
	if !leading || len(grown) != 1 || grown[org] != int64(len(ids[org])) {
		t.Fatalf("Grown = %v, %d, %v; want the org's log at %d, leading", grown, epoch, leading, len(ids[org]))
	}
	if again, e, l := seq.Grown(auditstore.LogAudit); len(again) != 0 || e != epoch || !l {
		t.Fatalf("Grown again = %v, %d, %v; want nothing new in epoch %d", again, e, l, epoch)
	}
	more := publishN(t, nc, []uuid.UUID{org}, 7)
	waitSize(t, s.Store, org, int64(len(ids[org])+len(more[org])))
	if grown, e, _ := seq.Grown(auditstore.LogAudit); e != epoch || grown[org] != int64(len(ids[org])+len(more[org])) {
		t.Fatalf("Grown after more = %v, %d; want the new size in epoch %d", grown, e, epoch)
	}
	stop()
	if _, e, l := seq.Grown(auditstore.LogAudit); l || e == epoch {
		t.Fatalf("after the lead: epoch %d (was %d), leading %v", e, epoch, l)
	}
}
