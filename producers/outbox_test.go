package producers

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
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
	testenv.Eventually(t, 30*time.Second, func() string { return fmt.Sprintf("outbox drained: %+v", ob.Stats()) },
		func() bool { return ob.Stats().Pending == 0 })
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
// one, which publishes them once; torn records and garbage, at the end of a
// segment or amid its records, are skipped.
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
	// Torn and garbage bytes amid the records (issue 19, point 6: the
	// reader stopped at the first), and a torn last record.
	splice := func(path string, at int, insert []byte) {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		off := decodeSegment(b).offsets[at]
		if err := os.WriteFile(path, cat(b[:off], insert, b[off:]), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	first, err := os.ReadFile(segs[0])
	if err != nil {
		t.Fatal(err)
	}
	garbage := []byte("\x00\x00\x01\x00 not a record \xa7ob")
	splice(segs[0], 3, garbage)
	splice(segs[1], 5, first[:40]) // a record cut short
	f, err := os.OpenFile(segs[len(segs)-1], os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte{0, 0, 1, 0, 9, 9}); err != nil { // a record cut short
		t.Fatal(err)
	}
	f.Close()
	tornBytes := uint64(len(garbage) + 40 + 6)

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
	if st := ob2.Stats(); st.Pending != 0 || st.Drained != 20 || st.TornBytes != tornBytes {
		t.Fatalf("after draining: %+v, want 20 drained, %d torn bytes", st, tornBytes)
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

// flakyPublisher fails every other call transiently before handing it to
// the real publisher: a drain must wait and retry, never drop.
type flakyPublisher struct {
	MsgPublisher
	calls atomic.Int64
}

func (p *flakyPublisher) PublishMsgs(ctx context.Context, msgs []*nats.Msg) error {
	if p.calls.Add(1)%2 == 1 {
		return errors.New("injected transient failure")
	}
	return p.MsgPublisher.PublishMsgs(ctx, msgs)
}

// A record that the stream refuses costs that record only: every other
// record of its segment is stored once, in order, and the refused one is set
// aside in the segment's .rejected file (issue 19, point 5: the whole
// segment was set aside).
func TestOutboxSetsAsideOnlyRejectedRecords(t *testing.T) {
	for _, tc := range []struct {
		name  string
		flaky bool
	}{{"stream up", false}, {"transient failures", true}} {
		t.Run(tc.name, func(t *testing.T) {
			_, nc, js := testenv.NATS(t)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			// The server refuses messages over 16 KiB with a permanent API error.
			st, err := js.Stream(ctx, schemas.StreamEvents)
			if err != nil {
				t.Fatal(err)
			}
			scfg := st.CachedInfo().Config
			scfg.MaxMsgSize = 16 << 10
			if _, err := js.UpdateStream(ctx, scfg); err != nil {
				t.Fatal(err)
			}
			real, err := New(nc, DefaultConfig(), nil)
			if err != nil {
				t.Fatal(err)
			}
			var pub MsgPublisher = real
			if tc.flaky {
				pub = &flakyPublisher{MsgPublisher: real}
			}
			dir := t.TempDir()
			cfg := testOutboxConfig(dir) // 7 records a segment
			org := uuid.NewString()
			var want []string
			rejected := map[string]bool{}
			keepAll := func(ob *Outbox, n int, big ...int) {
				for i := 0; i < n; i++ {
					ev := execEvent(org, i)
					if slices.Contains(big, i) {
						ev.ExecutionError = strings.Repeat("x", 32<<10)
						rejected[ev.EventID] = true
					} else {
						want = append(want, ev.EventID)
					}
					m, err := Message(ev)
					if err != nil {
						t.Fatal(err)
					}
					if err := ob.keep(m); err != nil { // as when the direct publish failed
						t.Fatal(err)
					}
				}
			}
			ob, err := openOutbox(cfg, pub, nil)
			if err != nil {
				t.Fatal(err)
			}
			keepAll(ob, 14, 2, 3, 10) // segment 0: records 2 and 3 refused; segment 1: record 3
			if err := ob.drain(ctx); err != nil {
				t.Fatal(err)
			}
			if st := ob.Stats(); st.Pending != 0 || st.Drained != 11 || st.Rejected != 3 {
				t.Fatalf("after draining: %+v, want 11 drained and 3 rejected", st)
			}
			ob.Close()

			// A later process sets aside into a file of its own.
			ob2, err := openOutbox(cfg, pub, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer ob2.Close()
			keepAll(ob2, 3, 1)
			if err := ob2.drain(ctx); err != nil {
				t.Fatal(err)
			}
			if ids := storedIDs(t, js, org); fmt.Sprint(ids) != fmt.Sprint(want) {
				t.Fatalf("stored %v\nwant   %v (in order, once each)", ids, want)
			}
			files, _ := filepath.Glob(filepath.Join(dir, "*"))
			var aside []string
			for _, f := range files {
				switch {
				case strings.HasSuffix(f, segSuffix+rejectedSuffix):
					b, err := os.ReadFile(f)
					if err != nil {
						t.Fatal(err)
					}
					s := decodeSegment(b)
					if s.skipped != 0 || s.legacy {
						t.Fatalf("%s: %+v", f, s)
					}
					for _, m := range s.msgs {
						aside = append(aside, m.Header.Get(schemas.HeaderMsgID))
					}
				case filepath.Base(f) != "LOCK":
					t.Fatalf("left behind: %s", f)
				}
			}
			if len(aside) != len(rejected) {
				t.Fatalf("set aside %v, want the %d refused events", aside, len(rejected))
			}
			for _, id := range aside {
				if !rejected[id] {
					t.Fatalf("set aside %s, which the stream accepts", id)
				}
			}
		})
	}
}

// faultyFile is a segment file whose append number failWrite writes only
// partial bytes and fails, whose append number failSync fails its sync, and
// whose truncation fails when failTruncate.
type faultyFile struct {
	segmentFile
	f *faults
}

type faults struct {
	failWrite, partial, failSync int
	failTruncate                 bool
	writes, syncs                int
}

func (f *faultyFile) Write(b []byte) (int, error) {
	f.f.writes++
	if f.f.writes == f.f.failWrite {
		n, _ := f.segmentFile.Write(b[:f.f.partial])
		return n, errors.New("injected: no space left on device")
	}
	return f.segmentFile.Write(b)
}

func (f *faultyFile) Sync() error {
	f.f.syncs++
	if f.f.syncs == f.f.failSync {
		return errors.New("injected: sync failed")
	}
	return f.segmentFile.Sync()
}

func (f *faultyFile) Truncate(size int64) error {
	if f.f.failTruncate {
		return errors.New("injected: truncate failed")
	}
	return f.segmentFile.Truncate(size)
}

// An append that fails mid-write hides no other record: every record
// appended successfully, before and after it, is published by the next
// process (issue 19, point 6: the torn record stopped the reader, and later
// appends went after it).
func TestOutboxFailedAppendHidesNothing(t *testing.T) {
	const n, bad = 14, 3 // append number bad (1-based) fails
	tests := []struct {
		name      string
		faults    faults
		tornBytes uint64
	}{
		{"short write, truncated", faults{failWrite: bad, partial: 30}, 0},
		{"short write, truncation fails: new segment", faults{failWrite: bad, partial: 30, failTruncate: true}, 30},
		{"nothing written", faults{failWrite: bad, partial: 0}, 0},
		{"sync fails: truncated, new segment", faults{failSync: bad}, 0},
		// The record stays on disk: the caller heard it was not kept, but it
		// is published all the same (it was not counted as pending).
		{"sync and truncation fail: new segment", faults{failSync: bad, failTruncate: true}, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, nc, js := testenv.NATS(t)
			pub, err := New(nc, DefaultConfig(), nil)
			if err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			cfg := testOutboxConfig(dir)
			cfg.SegmentRecords = 100 // one segment unless a failure starts another
			ob, err := OpenOutbox(cfg, pub, nil)
			if err != nil {
				t.Fatal(err)
			}
			fl := tc.faults
			ob.create = func(path string) (segmentFile, error) {
				f, err := createSegment(path)
				if err != nil {
					return nil, err
				}
				return &faultyFile{segmentFile: f, f: &fl}, nil
			}
			org := uuid.NewString()
			var want []string
			for i := 1; i <= n; i++ {
				ev := execEvent(org, i)
				m, err := Message(ev)
				if err != nil {
					t.Fatal(err)
				}
				err = ob.keep(m)
				switch {
				case i == bad && !errors.Is(err, ErrOutbox):
					t.Fatalf("append %d: %v, want ErrOutbox", i, err)
				case i == bad && tc.faults.failSync != 0 && tc.faults.failTruncate:
					want = append(want, ev.EventID)
				case i == bad:
				case err != nil:
					t.Fatalf("append %d: %v", i, err)
				default:
					want = append(want, ev.EventID)
				}
			}
			if st := ob.Stats(); st.Kept != n-1 || st.Pending != n-1 {
				t.Fatalf("%+v, want %d kept and pending", st, n-1)
			}
			ob.Close() // "crash": nothing drained

			ob2, err := OpenOutbox(cfg, pub, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer ob2.Close()
			if st := ob2.Stats(); st.Pending != int64(len(want)) {
				t.Fatalf("reopened outbox counts %d pending, want %d", st.Pending, len(want))
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := ob2.drain(ctx); err != nil {
				t.Fatal(err)
			}
			if ids := storedIDs(t, js, org); fmt.Sprint(ids) != fmt.Sprint(want) {
				t.Fatalf("stored %v\nwant   %v (in order, once each)", ids, want)
			}
			if st := ob2.Stats(); st.Pending != 0 || st.Drained != uint64(len(want)) || st.TornBytes != tc.tornBytes {
				t.Fatalf("after draining: %+v, want %d drained, %d torn bytes", st, len(want), tc.tornBytes)
			}
		})
	}
}
