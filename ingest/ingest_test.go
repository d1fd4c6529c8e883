package ingest_test

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/auditrail/auditrail/ingest"
	"github.com/auditrail/auditrail/internal/auditstore"
	"github.com/auditrail/auditrail/internal/auditstore/clickhouse"
	"github.com/auditrail/auditrail/internal/auditstore/sqlite"
	"github.com/auditrail/auditrail/internal/testenv"
	"github.com/auditrail/auditrail/producers"
	"github.com/auditrail/auditrail/schemas"
)

func TestMain(m *testing.M) { testenv.MainNoLeaks(m) }

type backend struct {
	name string
	open func(t *testing.T) auditstore.Store
}

func backends() []backend {
	return []backend{
		{"sqlite", func(t *testing.T) auditstore.Store {
			s, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "audit.db"))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		}},
		{"clickhouse", func(t *testing.T) auditstore.Store {
			s, err := clickhouse.Open(context.Background(), testenv.ClickHouse(t))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		}},
	}
}

func testConfig() ingest.Config {
	cfg := ingest.DefaultConfig()
	cfg.BatchSize = 500
	cfg.MaxAckPending = 2000
	cfg.FlushInterval = 50 * time.Millisecond
	cfg.RetryMin = 20 * time.Millisecond
	cfg.RetryMax = 200 * time.Millisecond
	cfg.DrainTimeout = time.Second
	return cfg
}

func event(org uuid.UUID, ts time.Time) *schemas.AuditEvent {
	return &schemas.AuditEvent{EventID: uuid.New(), OrganizationID: org, Timestamp: auditstore.Millis(ts),
		Action: schemas.AuditActionUpdated, Source: schemas.AuditSourceSDK, DisplayName: "svc", PrincipalID: "p", PrincipalType: "SERVICE"}
}

// runIngester runs an ingester until the test ends; it returns a func that
// stops it and waits.
func runIngester(t *testing.T, nc *nats.Conn, store ingest.AuditWriter, cfg ingest.Config) (*ingest.Ingester[schemas.AuditEvent], func()) {
	t.Helper()
	in, err := ingest.NewAudit(nc, store, cfg, slog.New(slog.NewTextHandler(t.Output(), nil)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- in.Run(ctx) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil && !errors.Is(err, nats.ErrConnectionClosed) && !errors.Is(err, jetstream.ErrMsgIteratorClosed) {
					t.Errorf("ingester: %v", err)
				}
			case <-time.After(30 * time.Second):
				t.Error("ingester did not stop")
			}
		})
	}
	t.Cleanup(stop)
	return in, stop
}

// listAll returns every entry of org.
func listAll(t *testing.T, s auditstore.Store, org uuid.UUID) []schemas.AuditEntry {
	t.Helper()
	var out []schemas.AuditEntry
	q := auditstore.Query{OrgID: org, Limit: auditstore.MaxLimit}
	for {
		p, err := s.ListAudit(context.Background(), q)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, p.Items...)
		if !p.HasMore {
			return out
		}
		q.After = p.Next()
	}
}

// checkExactlyOnce asserts that org holds exactly the events want, once each.
func checkExactlyOnce(t *testing.T, s auditstore.Store, org uuid.UUID, want []*schemas.AuditEvent) []schemas.AuditEntry {
	t.Helper()
	got := listAll(t, s, org)
	seen := map[uuid.UUID]int{}
	for _, e := range got {
		seen[e.EventID]++
		if e.ID != schemas.EntryID(e.EventID) {
			t.Fatalf("entry %s has id %s", e.EventID, e.ID)
		}
	}
	for _, e := range want {
		if seen[e.EventID] != 1 {
			t.Fatalf("event %s stored %d times", e.EventID, seen[e.EventID])
		}
	}
	if len(got) != len(want) {
		t.Fatalf("org holds %d entries, want %d", len(got), len(want))
	}
	return got
}

func publish(t *testing.T, p *producers.Publisher, evs []*schemas.AuditEvent) {
	t.Helper()
	batch := make([]producers.Event, len(evs))
	for i, e := range evs {
		batch[i] = e
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := p.PublishBatch(ctx, batch); err != nil {
		t.Fatal(err)
	}
}

// publishRaw publishes without Nats-Msg-Id, as a careless producer would.
func publishRaw(t *testing.T, js jetstream.JetStream, subject string, data []byte, hdr nats.Header) {
	t.Helper()
	m := nats.NewMsg(subject)
	m.Data = data
	for k, v := range hdr {
		m.Header[k] = v
	}
	if _, err := js.PublishMsg(context.Background(), m); err != nil {
		t.Fatal(err)
	}
}

func newPublisher(t *testing.T, nc *nats.Conn) *producers.Publisher {
	p, err := producers.New(nc, producers.DefaultConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func consumerPending(t *testing.T, js jetstream.JetStream, durable string) (ackPending int, numPending uint64) {
	c, err := js.Consumer(context.Background(), schemas.StreamEvents, durable)
	if err != nil {
		t.Fatal(err)
	}
	info, err := c.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return info.NumAckPending, info.NumPending
}

func TestIngestExactlyOnce(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			store := b.open(t)
			_, nc, js := testenv.NATS(t)
			pub := newPublisher(t, nc)
			cfg := testConfig()
			in, _ := runIngester(t, nc, store, cfg)

			orgs := []uuid.UUID{uuid.New(), uuid.New(), uuid.New()}
			byOrg := map[uuid.UUID][]*schemas.AuditEvent{}
			var all []*schemas.AuditEvent
			for i := 0; i < 3000; i++ {
				org := orgs[i%3]
				e := event(org, time.Now().Add(-time.Duration(i)*time.Millisecond))
				byOrg[org] = append(byOrg[org], e)
				all = append(all, e)
			}
			publish(t, pub, all)
			// The producer retries: JetStream drops these by Nats-Msg-Id.
			publish(t, pub, all[:500])
			// A producer re-publishes without Nats-Msg-Id: the store folds them.
			for _, e := range all[1000:1100] {
				b, _ := e.Marshal()
				publishRaw(t, js, e.Subject(), b, nil)
			}
			testenv.Eventually(t, 30*time.Second, "all events received", func() bool { return in.Stats().Received >= 3100 })
			testenv.Eventually(t, 10*time.Second, "all acked", func() bool {
				ack, pending := consumerPending(t, js, cfg.Durable)
				return ack == 0 && pending == 0
			})
			for _, org := range orgs {
				checkExactlyOnce(t, store, org, byOrg[org])
			}
			if st := in.Stats(); st.DeadLettered != 0 || st.Stored != 3100 {
				t.Errorf("stats %+v", st)
			}
		})
	}
}

func TestPoisonMessagesGoToDLQ(t *testing.T) {
	store := backends()[0].open(t)
	_, nc, js := testenv.NATS(t)
	pub := newPublisher(t, nc)
	cfg := testConfig()
	in, _ := runIngester(t, nc, store, cfg)

	org := uuid.New()
	subject := schemas.EventSubject(org.String(), schemas.KindAudit)
	good := []*schemas.AuditEvent{event(org, time.Now()), event(org, time.Now())}
	valid := func(mut func(m map[string]any)) []byte {
		m := map[string]any{"event_id": uuid.NewString(), "organization_id": org.String(), "timestamp": time.Now(),
			"action": "AUDIT_ACTION_CREATED", "source": "AUDIT_SOURCE_API"}
		mut(m)
		b, _ := msgpack.Marshal(m)
		return b
	}
	poison := []struct {
		name   string
		data   []byte
		hdr    nats.Header
		reason string
	}{
		{"garbage", []byte("\xc1not msgpack"), nil, "cannot decode"},
		{"missing event_id", valid(func(m map[string]any) { delete(m, "event_id") }), nil, "missing event_id"},
		{"missing organization_id", valid(func(m map[string]any) { delete(m, "organization_id") }), nil, "missing organization_id"},
		{"missing timestamp", valid(func(m map[string]any) { delete(m, "timestamp") }), nil, "missing timestamp"},
		{"unknown enum", valid(func(m map[string]any) { m["action"] = "AUDIT_ACTION_BOGUS" }), nil, "unknown enum"},
		{"org of another tenant", valid(func(m map[string]any) { m["organization_id"] = uuid.NewString() }), nil, "does not match subject"},
		{"wrong schema", valid(func(map[string]any) {}), nats.Header{"Auditrail-Schema": []string{"execution/v1"}}, "schema"},
	}
	publish(t, pub, good[:1])
	for _, p := range poison {
		publishRaw(t, js, subject, p.data, p.hdr)
	}
	publish(t, pub, good[1:])

	testenv.Eventually(t, 20*time.Second, "all messages handled", func() bool { return in.Stats().Received >= uint64(len(poison)+2) })
	testenv.Eventually(t, 10*time.Second, "all acked", func() bool { ack, pending := consumerPending(t, js, cfg.Durable); return ack == 0 && pending == 0 })
	checkExactlyOnce(t, store, org, good)

	dlq, err := js.Stream(context.Background(), schemas.StreamDLQ)
	if err != nil {
		t.Fatal(err)
	}
	info, _ := dlq.Info(context.Background())
	if info.State.Msgs != uint64(len(poison)) {
		t.Fatalf("DLQ holds %d messages, want %d", info.State.Msgs, len(poison))
	}
	for i, p := range poison {
		m, err := dlq.GetMsg(context.Background(), uint64(i+1))
		if err != nil {
			t.Fatal(err)
		}
		if string(m.Data) != string(p.data) {
			t.Errorf("%s: DLQ payload differs from the original", p.name)
		}
		reason := m.Header.Get(schemas.HeaderDLQReason)
		if !contains(reason, p.reason) {
			t.Errorf("%s: reason %q does not mention %q", p.name, reason, p.reason)
		}
		if m.Header.Get(schemas.HeaderDLQSubject) != subject || m.Subject != "auditrail.dlq."+org.String()+".audit" {
			t.Errorf("%s: subject %s / original %s", p.name, m.Subject, m.Header.Get(schemas.HeaderDLQSubject))
		}
	}
	if st := in.Stats(); st.DeadLettered != uint64(len(poison)) {
		t.Errorf("stats %+v", st)
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

// crashingStore commits a batch, then kills the ingester's connection before
// it can acknowledge: a crash between the store commit and the ack.
type crashingStore struct {
	ingest.AuditWriter
	nc      *nats.Conn
	crashed atomic.Bool
}

func (c *crashingStore) WriteAudit(ctx context.Context, evs []schemas.AuditEvent) error {
	if err := c.AuditWriter.WriteAudit(ctx, evs); err != nil {
		return err
	}
	if c.crashed.CompareAndSwap(false, true) {
		c.nc.Close()
	}
	if c.crashed.Load() {
		// A dead process does nothing more.
		<-ctx.Done()
		return ctx.Err()
	}
	return nil
}

func TestCrashAfterCommitBeforeAck(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			store := b.open(t)
			srv, nc, js := testenv.NATS(t)
			cfg := testConfig()
			cfg.AckWait = 1 * time.Second
			cfg.FlushInterval = 200 * time.Millisecond

			org := uuid.New()
			var evs []*schemas.AuditEvent
			for i := 0; i < 1200; i++ {
				evs = append(evs, event(org, time.Now().Add(-time.Duration(i)*time.Second)))
			}
			publish(t, newPublisher(t, nc), evs)

			nc1, err := nats.Connect(srv.ClientURL())
			if err != nil {
				t.Fatal(err)
			}
			crash := &crashingStore{AuditWriter: store, nc: nc1}
			in1, stop1 := runIngester(t, nc1, crash, cfg)
			testenv.Eventually(t, 20*time.Second, "the crash", func() bool { return crash.crashed.Load() })
			stop1()
			if in1.Stats().Batches != 0 {
				t.Fatalf("the crashed ingester acknowledged %d batches", in1.Stats().Batches)
			}
			firstWrite := listAll(t, store, org)
			if len(firstWrite) == 0 {
				t.Fatal("nothing committed before the crash")
			}

			nc2, err := nats.Connect(srv.ClientURL())
			if err != nil {
				t.Fatal(err)
			}
			defer nc2.Close()
			runIngester(t, nc2, store, cfg)
			testenv.Eventually(t, 30*time.Second, "redelivery and ack", func() bool {
				ack, pending := consumerPending(t, js, cfg.Durable)
				return ack == 0 && pending == 0
			})
			got := checkExactlyOnce(t, store, org, evs)
			before := map[uuid.UUID]schemas.AuditEntry{}
			for _, e := range firstWrite {
				before[e.EventID] = e
			}
			for _, e := range got {
				if f, ok := before[e.EventID]; ok && (f.ID != e.ID || !f.CreatedTime.Equal(e.CreatedTime)) {
					t.Fatalf("redelivered event %s changed: %v/%v -> %v/%v", e.EventID, f.ID, f.CreatedTime, e.ID, e.CreatedTime)
				}
			}
		})
	}
}

func TestClickHouseOutageMidStream(t *testing.T) {
	chSrv, dsn := testenv.ClickHouseDedicated(t)
	store, err := clickhouse.Open(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	_, nc, js := testenv.NATS(t)
	pub := newPublisher(t, nc)
	cfg := testConfig()
	cfg.AckWait = 2 * time.Second // shorter than the outage: held batches must be kept alive
	in, _ := runIngester(t, nc, store, cfg)

	org := uuid.New()
	var evs []*schemas.AuditEvent
	for i := 0; i < 20_000; i++ {
		evs = append(evs, event(org, time.Now().Add(-time.Duration(i)*time.Millisecond)))
	}
	publish(t, pub, evs[:5000])
	testenv.Eventually(t, 30*time.Second, "first events stored", func() bool { return in.Stats().Stored >= 1000 })

	chSrv.Kill()
	publish(t, pub, evs[5000:])
	testenv.Eventually(t, 30*time.Second, "retries during the outage", func() bool { return in.Stats().Retries >= 3 })
	time.Sleep(3 * time.Second) // longer than AckWait
	if err := chSrv.Start(); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 60*time.Second, "recovery", func() bool {
		ack, pending := consumerPending(t, js, cfg.Durable)
		return ack == 0 && pending == 0 && in.Stats().Stored >= uint64(len(evs))
	})
	checkExactlyOnce(t, store, org, evs)
	// An outage is not a refusal: nothing was split off to the DLQ.
	if st := in.Stats(); st.DeadLettered != 0 || st.Refused != 0 {
		t.Fatalf("events dead-lettered during an outage: %+v", st)
	}
	t.Logf("stats after outage: %+v", in.Stats())
}

func TestGracefulStopCommitsBatchInHand(t *testing.T) {
	store := backends()[0].open(t)
	_, nc, js := testenv.NATS(t)
	cfg := testConfig()
	cfg.FlushInterval = 20 * time.Second // the batch would wait long without a stop
	cfg.AckWait = 30 * time.Second
	in, stop := runIngester(t, nc, store, cfg)
	testenv.Eventually(t, 10*time.Second, "ingester ready", in.Ready)
	org := uuid.New()
	evs := []*schemas.AuditEvent{event(org, time.Now()), event(org, time.Now())}
	publish(t, newPublisher(t, nc), evs)
	// Both events are in the ingester's hands, in a batch that would wait
	// 20 s more for company: the stop must commit it.
	testenv.Eventually(t, 10*time.Second, "events received", func() bool { return in.Stats().Received == 2 })
	stop()
	checkExactlyOnce(t, store, org, evs)
	if ack, _ := consumerPending(t, js, cfg.Durable); ack != 0 {
		t.Fatalf("%d messages left unacknowledged after a graceful stop", ack)
	}
}

func TestConfigValidate(t *testing.T) {
	mut := []func(c *ingest.Config){
		func(c *ingest.Config) { c.Durable = "" },
		func(c *ingest.Config) { c.BatchSize = 0 },
		func(c *ingest.Config) { c.MaxAckPending = c.BatchSize },
		func(c *ingest.Config) { c.FlushInterval = 0 },
		func(c *ingest.Config) { c.AckWait = c.FlushInterval },
		func(c *ingest.Config) { c.RetryMax = c.RetryMin / 2 },
		func(c *ingest.Config) { c.DrainTimeout = 0 },
		func(c *ingest.Config) { c.MaxFuture = 0 },
		func(c *ingest.Config) { c.MaxDeliver = 0 },
		func(c *ingest.Config) { c.BatchBytes = 0 },
		func(c *ingest.Config) { c.FetchSize = 0 },
		func(c *ingest.Config) { c.Writers = 0 },
	}
	for i, m := range mut {
		c := ingest.DefaultConfig()
		m(&c)
		if err := c.Validate(); !errors.Is(err, ingest.ErrInvalidOption) {
			t.Errorf("case %d: %v", i, err)
		}
	}
	if err := ingest.DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestExecutionEventsIngested(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			store := b.open(t).(interface {
				auditstore.Store
				auditstore.ExecutionStore
			})
			_, nc, js := testenv.NATS(t)
			cfg := testConfig()
			cfg.Durable = ingest.ExecutionDurable
			in, err := ingest.NewExecution(nc, store, cfg, nil)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			go func() { _ = in.Run(ctx) }()
			org := uuid.New()
			pub := newPublisher(t, nc)
			var evs []producers.Event
			for i := 0; i < 20; i++ {
				id := uuid.NewString()
				evs = append(evs, &schemas.ExecutionEvent{EventID: id, ExecutionID: id, OrganizationID: org.String(), UserID: "u",
					Tool: schemas.ToolRef{Toolkit: "K", Name: "T", Version: "1"}, StartedAt: time.Now(), EndedAt: time.Now(), Success: true, ExecutionCode: "OK"})
			}
			if err := pub.PublishBatch(context.Background(), evs); err != nil {
				t.Fatal(err)
			}
			// A poison execution message goes to the DLQ too.
			publishRaw(t, js, schemas.EventSubject(org.String(), schemas.KindExecution), []byte("junk"), nil)
			testenv.Eventually(t, 20*time.Second, "executions stored", func() bool {
				p, err := store.ListExecutions(context.Background(), auditstore.ExecQuery{OrgID: org, Limit: 100})
				return err == nil && len(p.Items) == 20
			})
			testenv.Eventually(t, 10*time.Second, "poison dead-lettered", func() bool { return in.Stats().DeadLettered == 1 })
			// The audit consumer does not take execution events.
			if p, _ := store.ListAudit(context.Background(), auditstore.Query{OrgID: org, Limit: 10}); len(p.Items) != 0 {
				t.Fatal("execution events in the audit log")
			}
		})
	}
}

// dlqMessages returns every message of the DLQ stream.
func dlqMessages(t *testing.T, js jetstream.JetStream) []*jetstream.RawStreamMsg {
	t.Helper()
	dlq, err := js.Stream(context.Background(), schemas.StreamDLQ)
	if err != nil {
		t.Fatal(err)
	}
	info, err := dlq.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var out []*jetstream.RawStreamMsg
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		m, err := dlq.GetMsg(context.Background(), seq)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, m)
	}
	return out
}

// dlqReasons maps the payload of each DLQ message to its reason.
func dlqReasons(t *testing.T, js jetstream.JetStream) map[string]string {
	out := map[string]string{}
	for _, m := range dlqMessages(t, js) {
		out[string(m.Data)] = m.Header.Get(schemas.HeaderDLQReason)
	}
	return out
}

// Events dated in the far future would sort first in their organization's
// log forever, events before 2000 are bogus: both go to the DLQ, for audit
// and execution events alike; MaxFuture sets the tolerance.
func TestImplausibleTimesGoToDLQ(t *testing.T) {
	store := backends()[0].open(t).(interface {
		auditstore.Store
		auditstore.ExecutionStore
	})
	_, nc, js := testenv.NATS(t)
	cfg := testConfig()
	cfg.MaxFuture = 10 * time.Minute
	in, _ := runIngester(t, nc, store, cfg)
	ecfg := cfg
	ecfg.Durable = ingest.ExecutionDurable
	inExec, err := ingest.NewExecution(nc, store, ecfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	execDone := make(chan error, 1)
	go func() { execDone <- inExec.Run(ctx) }()
	defer func() { cancel(); <-execDone }()

	org := uuid.New()
	now := time.Now()
	tests := []struct {
		name   string
		ts     time.Time
		reason string // "" when stored
	}{
		{"year 2300", time.Date(2300, 1, 1, 0, 0, 0, 0, time.UTC), "ahead of the ingest clock"},
		{"11 minutes ahead", now.Add(11 * time.Minute), "ahead of the ingest clock"},
		{"9 minutes ahead (within MaxFuture)", now.Add(9 * time.Minute), ""},
		{"now", now, ""},
		{"1999", time.Date(1999, 12, 31, 23, 59, 59, 0, time.UTC), "before 2000-01-01"},
		{"2000-01-01", time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC), ""},
		{"Unix epoch", time.Unix(0, 0), "before 2000-01-01"},
	}
	var audits, execs []producers.Event
	var stored []*schemas.AuditEvent
	for _, tc := range tests {
		ev := event(org, tc.ts)
		audits = append(audits, ev)
		if tc.reason == "" {
			stored = append(stored, ev)
		}
		id := uuid.NewString()
		execs = append(execs, &schemas.ExecutionEvent{EventID: id, ExecutionID: id, OrganizationID: org.String(), UserID: "u",
			Tool: schemas.ToolRef{Toolkit: "K", Name: tc.name, Version: "1"}, StartedAt: tc.ts, EndedAt: tc.ts, Success: true, ExecutionCode: "OK"})
	}
	pub := newPublisher(t, nc)
	if err := pub.PublishBatch(context.Background(), append(audits, execs...)); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 20*time.Second, "all events handled", func() bool {
		return in.Stats().Received == uint64(len(tests)) && inExec.Stats().Received == uint64(len(tests)) &&
			in.Stats().Batches > 0 && inExec.Stats().Batches > 0
	})
	testenv.Eventually(t, 10*time.Second, "all acked", func() bool {
		a1, p1 := consumerPending(t, js, cfg.Durable)
		a2, p2 := consumerPending(t, js, ecfg.Durable)
		return a1+a2 == 0 && p1+p2 == 0
	})
	checkExactlyOnce(t, store, org, stored)
	page, err := store.ListExecutions(context.Background(), auditstore.ExecQuery{OrgID: org, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	storedExec := map[string]bool{}
	for _, e := range page.Items {
		storedExec[e.Tool.Name] = true
	}
	reasons := dlqReasons(t, js)
	for i, tc := range tests {
		ab, _ := audits[i].Marshal()
		eb, _ := execs[i].Marshal()
		for _, c := range []struct {
			kind, field string
			data        []byte
			stored      bool
		}{{"audit", "timestamp", ab, true}, {"execution", "started_at", eb, storedExec[tc.name]}} {
			reason, dead := reasons[string(c.data)]
			switch {
			case tc.reason == "" && dead:
				t.Errorf("%s %s: dead-lettered (%s), want stored", c.kind, tc.name, reason)
			case tc.reason == "" && c.kind == "execution" && !c.stored:
				t.Errorf("execution %s: not stored", tc.name)
			case tc.reason != "" && !dead:
				t.Errorf("%s %s: not in the DLQ", c.kind, tc.name)
			case tc.reason != "" && (!contains(reason, tc.reason) || !contains(reason, c.field)):
				t.Errorf("%s %s: reason %q, want %q about %s", c.kind, tc.name, reason, tc.reason, c.field)
			case tc.reason != "" && c.kind == "execution" && storedExec[tc.name]:
				t.Errorf("execution %s: stored and dead-lettered", tc.name)
			}
		}
	}
}

// rowLimit is the largest data object the stores accept
// (schemas/*/0010_row_limits.sql).
const rowLimit = 1 << 20

// bigData is a JSON object of n bytes.
func bigData(n int) []byte {
	return []byte(`{"blob":"` + strings.Repeat("x", n-len(`{"blob":""}`)) + `"}`)
}

// A batch that the store refuses while it answers does not stall the
// consumer: it is split until the refused rows are alone, those go to the
// DLQ with the store's error, and the rest of the batch is stored. The row
// here is really refused by each store: its data is over the row limit of
// 0010_row_limits.sql.
func TestStoreRefusedRowsAreDeadLettered(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			store := b.open(t)
			_, nc, js := testenv.NATS(t)
			cfg := testConfig()
			cfg.FlushInterval = 500 * time.Millisecond // one batch for all

			org := uuid.New()
			var evs, good, bad []*schemas.AuditEvent
			for i := 0; i < 200; i++ {
				e := event(org, time.Now().Add(-time.Duration(i)*time.Millisecond))
				switch i {
				case 17, 150:
					e.Data = bigData(rowLimit + 1)
					bad = append(bad, e)
				case 18:
					e.Data = bigData(rowLimit) // at the limit: stored
					good = append(good, e)
				default:
					good = append(good, e)
				}
				evs = append(evs, e)
			}
			publish(t, newPublisher(t, nc), evs)
			var refused [][]byte // the payloads as published (with the salt the publisher gave)
			for _, e := range bad {
				b, _ := e.Marshal()
				refused = append(refused, b)
			}
			in, _ := runIngester(t, nc, store, cfg)
			testenv.Eventually(t, 10*time.Second, "ingester ready", in.Ready)
			testenv.Eventually(t, 30*time.Second, "the batch committed", func() bool {
				ack, pending := consumerPending(t, js, cfg.Durable)
				return ack == 0 && pending == 0 && in.Stats().Received >= uint64(len(evs))
			})
			checkExactlyOnce(t, store, org, good)
			reasons := dlqReasons(t, js)
			if len(reasons) != len(refused) {
				t.Fatalf("DLQ holds %d messages, want %d", len(reasons), len(refused))
			}
			for _, r := range refused {
				reason, ok := reasons[string(r)]
				if !ok {
					t.Fatal("a refused event is not in the DLQ")
				}
				if !contains(reason, "store refused") || !contains(reason, auditstore.ErrRefused.Error()) {
					t.Errorf("reason %q does not name the store's refusal", reason)
				}
			}
			if st := in.Stats(); st.Refused != 2 || st.DeadLettered != 2 || st.Stored != uint64(len(good)) {
				t.Errorf("stats %+v", st)
			}
		})
	}
}

// A message delivered more than MaxDeliver times without being committed
// (an ingest that crashed or hung on it) goes to the DLQ instead of being
// tried forever.
func TestMaxDeliverDeadLetters(t *testing.T) {
	store := backends()[0].open(t)
	_, nc, js := testenv.NATS(t)
	cfg := testConfig()
	cfg.MaxDeliver = 3
	org := uuid.New()
	poison, fine := event(org, time.Now()), event(org, time.Now())
	publish(t, newPublisher(t, nc), []*schemas.AuditEvent{poison})

	// Earlier ingesters received it three times and never committed it.
	cons, err := js.CreateOrUpdateConsumer(context.Background(), schemas.StreamEvents, jetstream.ConsumerConfig{
		Durable: cfg.Durable, FilterSubject: schemas.SubjectAuditAll, AckPolicy: jetstream.AckExplicitPolicy, MaxDeliver: -1,
	})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < cfg.MaxDeliver; i++ {
		msgs, err := cons.Fetch(1, jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for m := range msgs.Messages() {
			n++
			if err := m.Nak(); err != nil {
				t.Fatal(err)
			}
		}
		if n != 1 {
			t.Fatalf("delivery %d: %d messages", i+1, n)
		}
	}
	publish(t, newPublisher(t, nc), []*schemas.AuditEvent{fine})
	in, _ := runIngester(t, nc, store, cfg)
	testenv.Eventually(t, 20*time.Second, "both handled", func() bool {
		ack, pending := consumerPending(t, js, cfg.Durable)
		return ack == 0 && pending == 0 && in.Stats().Received >= 2
	})
	checkExactlyOnce(t, store, org, []*schemas.AuditEvent{fine})
	b, _ := poison.Marshal()
	if reason := dlqReasons(t, js)[string(b)]; !contains(reason, "delivered 4 times") {
		t.Fatalf("DLQ reason %q", reason)
	}
}

// sizeRecorder records the largest batch (in data bytes) written.
type sizeRecorder struct {
	ingest.AuditWriter
	mu             sync.Mutex
	maxBytes, maxN int
}

func (s *sizeRecorder) WriteAudit(ctx context.Context, evs []schemas.AuditEvent) error {
	n := 0
	for i := range evs {
		n += len(evs[i].Data)
	}
	s.mu.Lock()
	s.maxBytes, s.maxN = max(s.maxBytes, n), max(s.maxN, len(evs))
	s.mu.Unlock()
	return s.AuditWriter.WriteAudit(ctx, evs)
}

// A batch is bounded by bytes as well as by count, so that large events
// cannot make ingest hold BatchSize of them at once.
func TestBatchBoundedByBytes(t *testing.T) {
	store := &sizeRecorder{AuditWriter: backends()[0].open(t)}
	_, nc, js := testenv.NATS(t)
	cfg := testConfig()
	cfg.BatchSize, cfg.MaxAckPending = 500, 2000
	cfg.BatchBytes = 64 << 10
	cfg.FlushInterval = 500 * time.Millisecond
	org := uuid.New()
	var evs []*schemas.AuditEvent
	for i := 0; i < 300; i++ {
		e := event(org, time.Now().Add(-time.Duration(i)*time.Millisecond))
		e.Data = bigData(4 << 10)
		evs = append(evs, e)
	}
	publish(t, newPublisher(t, nc), evs)
	in, _ := runIngester(t, nc, store, cfg)
	testenv.Eventually(t, 10*time.Second, "ingester ready", in.Ready)
	testenv.Eventually(t, 30*time.Second, "all committed", func() bool {
		ack, pending := consumerPending(t, js, cfg.Durable)
		return ack == 0 && pending == 0 && in.Stats().Stored == uint64(len(evs))
	})
	checkExactlyOnce(t, store.AuditWriter.(auditstore.Store), org, evs)
	// The payload is a little more than Data: the bound may be passed by one event.
	if limit := cfg.BatchBytes + 2*(4<<10); store.maxBytes > limit {
		t.Fatalf("a batch carried %d bytes of data (%d events), bound %d", store.maxBytes, store.maxN, cfg.BatchBytes)
	}
	t.Logf("largest batch: %d events, %d bytes of data", store.maxN, store.maxBytes)
}

// The delivery count is read from the reply subject by hand, in both forms
// the server writes, without allocating; anything else is not a count.
func TestNumDelivered(t *testing.T) {
	for _, tc := range []struct {
		reply string
		n     uint64
		ok    bool
		seq   uint64 // the stream sequence
		seqOK bool
	}{
		{"$JS.ACK.EVENTS.ingest.3.1047.1040.1732000000000000000.12", 3, true, 1047, true},
		{"$JS.ACK._.ACCHASH.EVENTS.ingest.21.1047.1040.1732000000000000000.12.xyz", 21, true, 1047, true},
		{"$JS.ACK.hub.ACCHASH.EVENTS.ingest.7.1048.1040.1732000000000000000.12", 7, true, 1048, true},
		{"$JS.ACK._.ACCHASH.EVENTS.ingest.18446744073709551615.1.1.1.0.r", 18446744073709551615, true, 1, true},
		{"$JS.ACK._.ACCHASH.EVENTS.ingest.18446744073709551616.1.1.1.0.r", 0, false, 1, true},
		{"$JS.ACK.EVENTS.ingest.x3.1047.1040.1732000000000000000.12", 0, false, 1047, true},
		{"$JS.ACK.EVENTS.ingest.3.x1047.1040.1732000000000000000.12", 3, true, 0, false},
		{"$JS.ACK.EVENTS.ingest..1047.1040.1732000000000000000.12", 0, false, 1047, true},
		{"$JS.ACK.EVENTS.ingest.3.1047.1040.1732000000000000000", 0, false, 0, false}, // 8 tokens
		{"$JS.ACK.a.b.EVENTS.ingest.3.1047.1040.17", 0, false, 0, false},              // 10 tokens
		{"_INBOX.abc.3.4.5.6.7.8.9", 0, false, 0, false},
		{"", 0, false, 0, false},
	} {
		n, ok := ingest.NumDelivered(tc.reply)
		if n != tc.n || ok != tc.ok {
			t.Errorf("NumDelivered(%q) = %d, %v; want %d, %v", tc.reply, n, ok, tc.n, tc.ok)
		}
		seq, ok := ingest.StreamSeq(tc.reply)
		if seq != tc.seq || ok != tc.seqOK {
			t.Errorf("StreamSeq(%q) = %d, %v; want %d, %v", tc.reply, seq, ok, tc.seq, tc.seqOK)
		}
	}
	if a := testing.AllocsPerRun(100, func() {
		_, _ = ingest.NumDelivered("$JS.ACK._.ACCHASH.EVENTS.ingest.21.1047.1040.1732000000000000000.12.xyz")
	}); a != 0 {
		t.Errorf("NumDelivered allocates %v times", a)
	}
}

// The soft memory limit grows with every bound of what is in flight and,
// with the defaults, leaves room under the 256 MiB RSS budget of make bench.
func TestMemoryLimit(t *testing.T) {
	d := ingest.DefaultConfig()
	if got := d.MemoryLimit(); got < 128<<20 || got > 224<<20 {
		t.Fatalf("default memory limit %d MiB, want 128..224", got>>20)
	}
	for _, tc := range []struct {
		name string
		mod  func(*ingest.Config)
	}{
		{"batch bytes", func(c *ingest.Config) { c.BatchBytes *= 2 }},
		{"writers", func(c *ingest.Config) { c.Writers++ }},
		{"insert rows", func(c *ingest.Config) { c.InsertRows *= 2 }},
	} {
		c := ingest.DefaultConfig()
		tc.mod(&c)
		if c.MemoryLimit() <= d.MemoryLimit() {
			t.Errorf("%s: memory limit %d not above the default %d", tc.name, c.MemoryLimit(), d.MemoryLimit())
		}
	}
	// The client buffer counts up to a batch's worth of messages.
	small := ingest.DefaultConfig()
	small.FetchSize = d.BatchSize / 4
	if small.MemoryLimit() >= d.MemoryLimit() {
		t.Errorf("a smaller client buffer: memory limit %d not below the default %d", small.MemoryLimit(), d.MemoryLimit())
	}
}

// commits records the rows of every commit an ingester reports.
type commits struct {
	mu   sync.Mutex
	rows []int
}

func (c *commits) ObserveCommit(_ time.Duration, rows int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.rows = append(c.rows, rows)
}

func (c *commits) largest() (most, n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, r := range c.rows {
		most = max(most, r)
	}
	return most, len(c.rows)
}

// A backlog drained into ClickHouse is written in inserts of several
// batches (streamed: ingest keeps only the acks of what it sent). A row
// the store refuses fails its whole insert: the insert's events are
// delivered again and written batch by batch, the refused row alone goes
// to the DLQ, and every other event is stored once.
func TestBacklogIsStreamedInFewInserts(t *testing.T) {
	store := backends()[1].open(t)
	_, nc, js := testenv.NATS(t)
	cfg := testConfig()
	cfg.InsertRows = 3000
	cfg.FlushInterval = 500 * time.Millisecond
	org := uuid.New()
	var evs, good []*schemas.AuditEvent
	var bad *schemas.AuditEvent
	for i := range 8000 {
		e := event(org, time.Now().Add(-time.Duration(i)*time.Millisecond))
		if i == 5321 {
			e.Data = bigData(rowLimit + 1)
			bad = e
		} else {
			good = append(good, e)
		}
		evs = append(evs, e)
	}
	publish(t, newPublisher(t, nc), evs) // the backlog, before ingest starts
	refused, _ := bad.Marshal()          // as published, with the salt the publisher gave
	in, err := ingest.NewAudit(nc, store, cfg, slog.New(slog.NewTextHandler(t.Output(), nil)))
	if err != nil {
		t.Fatal(err)
	}
	var seen commits
	in.ObserveWith(&seen)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- in.Run(ctx) }()
	defer func() { cancel(); <-done }()
	testenv.Eventually(t, 10*time.Second, "ingester ready", in.Ready)
	testenv.Eventually(t, 60*time.Second, "the backlog committed", func() bool {
		ack, pending := consumerPending(t, js, cfg.Durable)
		return ack == 0 && pending == 0 && in.Stats().Stored+in.Stats().DeadLettered >= uint64(len(evs))
	})
	checkExactlyOnce(t, store, org, good)
	if reason := dlqReasons(t, js)[string(refused)]; !contains(reason, "store refused") {
		t.Fatalf("the refused event's dead letter: %q", reason)
	}
	most, n := seen.largest()
	t.Logf("%d commits, the largest %d rows; stats %+v", n, most, in.Stats())
	if most <= cfg.BatchSize {
		t.Fatalf("the largest insert holds %d rows: no insert spanned batches of %d", most, cfg.BatchSize)
	}
	if st := in.Stats(); st.Refused != 1 || st.DeadLettered != 1 || st.Stored != uint64(len(good)) || st.Retries == 0 {
		t.Errorf("stats %+v: want 1 refused, %d stored, and the failed insert counted as a retry", st, len(good))
	}
}

// An ingester stopped while it drains a backlog into ClickHouse (streamed
// inserts open) commits what it holds; the next one stores the rest:
// every event once, nothing left pending.
func TestStopMidBacklogThenResume(t *testing.T) {
	store := backends()[1].open(t)
	_, nc, js := testenv.NATS(t)
	cfg := testConfig()
	cfg.InsertRows = 5000
	cfg.FlushInterval = 500 * time.Millisecond
	cfg.AckWait = 3 * time.Second // what the pull had in flight at the stop comes back soon
	org := uuid.New()
	var evs []*schemas.AuditEvent
	for i := range 30_000 {
		evs = append(evs, event(org, time.Now().Add(-time.Duration(i)*time.Millisecond)))
	}
	publish(t, newPublisher(t, nc), evs)
	first, stop := runIngester(t, nc, store, cfg)
	testenv.Eventually(t, 60*time.Second, "part of the backlog stored", func() bool { return first.Stats().Stored >= 3000 })
	stop()
	st := first.Stats()
	t.Logf("the first ingester stopped after %+v", st)
	if st.Received >= uint64(len(evs)) {
		t.Fatalf("the whole backlog was received before the stop (%+v): nothing was left to resume", st)
	}
	// A graceful stop commits the open inserts and the batch in hand.
	// (Messages the server sent as the pull stopped, which the client
	// never handed over, come back after AckWait: the second stores them.)
	if st.Stored != st.Received {
		t.Fatalf("after a graceful stop: %d of %d received stored", st.Stored, st.Received)
	}
	second, _ := runIngester(t, nc, store, cfg)
	testenv.Eventually(t, 90*time.Second, "the rest stored", func() bool {
		ack, pending := consumerPending(t, js, cfg.Durable)
		return ack == 0 && pending == 0 && first.Stats().Stored+second.Stats().Stored >= uint64(len(evs))
	})
	checkExactlyOnce(t, store, org, evs)
	if d := first.Stats().DeadLettered + second.Stats().DeadLettered; d != 0 {
		t.Fatalf("%d events dead-lettered", d)
	}
}
