package producers

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/auditrail/auditrail/internal/retry"
	"github.com/auditrail/auditrail/internal/testenv"
	"github.com/auditrail/auditrail/schemas"
)

func execEvent(org string, i int) *schemas.ExecutionEvent {
	id := uuid.NewString()
	return &schemas.ExecutionEvent{EventID: id, ExecutionID: id, OrganizationID: org, UserID: fmt.Sprint("u", i),
		Tool: schemas.ToolRef{Toolkit: "T", Name: "N", Version: "1"}, StartedAt: time.Now().UTC(), EndedAt: time.Now().UTC()}
}

// storedIDs returns the Nats-Msg-Id of every execution message of org.
func storedIDs(t *testing.T, js jetstream.JetStream, org string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := js.OrderedConsumer(ctx, schemas.StreamEvents, jetstream.OrderedConsumerConfig{FilterSubjects: []string{schemas.EventSubject(org, schemas.KindExecution)}})
	if err != nil {
		t.Fatal(err)
	}
	info, err := c.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for n := info.NumPending; n > 0; n-- {
		m, err := c.Next(jetstream.FetchMaxWait(5 * time.Second))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, m.Headers().Get(schemas.HeaderMsgID))
	}
	return ids
}

func testOutboxConfig(dir string) OutboxConfig {
	cfg := DefaultOutboxConfig(dir)
	cfg.DirectTimeout = 300 * time.Millisecond
	cfg.SegmentRecords = 7 // several segments in the tests
	cfg.Retry = retry.Policy{Initial: 20 * time.Millisecond, Max: 200 * time.Millisecond}
	return cfg
}

// NATS down during executions: every event is kept on disk, and appears
// once in the stream after NATS returns.
func TestOutboxKeepsEventsWhileNATSIsDown(t *testing.T) {
	srv, nc, js := testenv.NewRestartableNATS(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	pub, err := New(nc, DefaultConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	ob, err := OpenOutbox(testOutboxConfig(t.TempDir()), pub, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ob.Close()
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- ob.Run(runCtx) }()
	defer func() { stop(); <-done }()

	org := uuid.NewString()
	want := map[string]bool{}
	publish := func(n int) {
		for i := 0; i < n; i++ {
			ev := execEvent(org, i)
			if err := ob.Publish(ctx, ev); err != nil {
				t.Fatalf("publish %d: %v", i, err)
			}
			want[ev.EventID] = true
		}
	}
	publish(5) // NATS up: published directly
	if st := ob.Stats(); st.Kept != 0 {
		t.Fatalf("kept %d events while NATS was up", st.Kept)
	}
	srv.Stop()
	start := time.Now()
	publish(30)
	if st := ob.Stats(); st.Kept != 30 || st.Pending != 30 {
		t.Fatalf("while NATS is down: %+v, want 30 kept and pending", st)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("30 publishes while NATS was down took %v: only the first should wait", d)
	}
	srv.Start()
	deadline := time.Now().Add(30 * time.Second)
	for ob.Stats().Pending > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("outbox not drained: %+v", ob.Stats())
		}
		time.Sleep(50 * time.Millisecond)
	}
	publish(3) // empty again: direct
	ids := storedIDs(t, js, org)
	got := map[string]int{}
	for _, id := range ids {
		got[id]++
	}
	for id := range want {
		if got[id] != 1 {
			t.Fatalf("event %s stored %d times", id, got[id])
		}
	}
	if len(ids) != len(want) {
		t.Fatalf("stored %d messages, want %d", len(ids), len(want))
	}
	if segs, _ := filepath.Glob(filepath.Join(ob.cfg.Dir, "*.seg")); len(segs) > 1 {
		t.Fatalf("drained segments left behind: %v", segs)
	}
}

// A process that dies with events in its outbox leaves them for the next
// one, which publishes them once; a torn last record is dropped.
func TestOutboxSurvivesRestartAndTornTail(t *testing.T) {
	_, nc, js := testenv.NATS(t)
	dir := t.TempDir()
	cfg := testOutboxConfig(dir)
	pub, err := New(nc, DefaultConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	ob, err := OpenOutbox(cfg, pub, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := OpenOutbox(cfg, pub, nil); err == nil || !errors.Is(err, ErrOutbox) {
		t.Fatalf("second process on one outbox: %v", err)
	}
	org := uuid.NewString()
	var want []string
	for i := 0; i < 20; i++ {
		ev := execEvent(org, i)
		m, err := Message(ev)
		if err != nil {
			t.Fatal(err)
		}
		if err := ob.keep(m); err != nil { // as when the direct publish failed
			t.Fatal(err)
		}
		want = append(want, ev.EventID)
	}
	ob.Close() // "crash": nothing drained
	segs, _ := filepath.Glob(filepath.Join(dir, "*.seg"))
	if len(segs) != 3 {
		t.Fatalf("segments %v, want 3 of at most 7 events", segs)
	}
	f, err := os.OpenFile(segs[len(segs)-1], os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte{0, 0, 1, 0, 9, 9}); err != nil { // a record cut short
		t.Fatal(err)
	}
	f.Close()

	ob2, err := OpenOutbox(cfg, pub, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ob2.Close()
	if st := ob2.Stats(); st.Pending != 20 {
		t.Fatalf("reopened outbox counts %d pending, want 20", st.Pending)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := ob2.drain(ctx); err != nil {
		t.Fatal(err)
	}
	if err := ob2.drain(ctx); err != nil { // nothing left: publishes nothing twice
		t.Fatal(err)
	}
	ids := storedIDs(t, js, org)
	if fmt.Sprint(ids) != fmt.Sprint(want) {
		t.Fatalf("stored %v\nwant   %v (in order, once each)", ids, want)
	}
	if st := ob2.Stats(); st.Pending != 0 || st.Drained != 20 {
		t.Fatalf("after draining: %+v", st)
	}
}

func TestOutboxConfigValidate(t *testing.T) {
	for _, mut := range []func(*OutboxConfig){
		func(c *OutboxConfig) { c.Dir = "" },
		func(c *OutboxConfig) { c.DirectTimeout = 0 },
		func(c *OutboxConfig) { c.SegmentRecords = 0 },
		func(c *OutboxConfig) { c.Retry.Initial = 0 },
	} {
		cfg := DefaultOutboxConfig("x")
		mut(&cfg)
		if err := cfg.Validate(); !errors.Is(err, ErrInvalidOption) {
			t.Fatalf("%+v: %v", cfg, err)
		}
	}
}

func FuzzDecodeRecords(f *testing.F) {
	m := nats.NewMsg("auditrail.events.o.execution")
	m.Header.Set(schemas.HeaderMsgID, "id")
	m.Header.Set(schemas.HeaderSchema, schemas.SchemaExecutionV1)
	m.Data = []byte{0x80}
	rec := encodeRecord(m)
	f.Add(rec)
	f.Add(append(append([]byte{}, rec...), rec[:5]...))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		msgs, _ := decodeRecords(bytes.NewReader(b))
		var again []byte
		for _, m := range msgs {
			again = append(again, encodeRecord(m)...)
		}
		// What decodes re-encodes to a prefix of the input.
		if !bytes.HasPrefix(b, again) {
			t.Fatalf("decoded records do not re-encode to the input")
		}
	})
}
