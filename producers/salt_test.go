package producers

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"

	"github.com/auditrail/auditrail/internal/testenv"
	"github.com/auditrail/auditrail/schemas"
)

func saltOf(t *testing.T, m *nats.Msg) []byte {
	t.Helper()
	if m.Header.Get(schemas.HeaderSchema) == schemas.SchemaExecutionV1 {
		ev, err := schemas.UnmarshalExecutionEvent(m.Data)
		if err != nil {
			t.Fatal(err)
		}
		return ev.Salt
	}
	ev, err := schemas.UnmarshalAuditEvent(m.Data)
	if err != nil {
		t.Fatal(err)
	}
	return ev.Salt
}

// An event without a salt is given 16 random bytes when it is first
// encoded, set on the event: every message of it carries that salt; two
// events have two salts; an event that has a salt keeps it.
func TestMessageSaltsAnEventOnce(t *testing.T) {
	org := uuid.New()
	audit := &schemas.AuditEvent{EventID: uuid.New(), OrganizationID: org, Timestamp: time.Now(),
		Action: schemas.AuditActionCreated, Source: schemas.AuditSourceAPI}
	for _, ev := range []Event{audit, execEvent(org.String(), 1)} {
		m1, err := Message(ev)
		if err != nil {
			t.Fatal(err)
		}
		m2, err := Message(ev)
		if err != nil {
			t.Fatal(err)
		}
		s1, s2 := saltOf(t, m1), saltOf(t, m2)
		if len(s1) != schemas.SaltBytes || !bytes.Equal(s1, s2) || !bytes.Equal(m1.Data, m2.Data) {
			t.Fatalf("%s: salts %x and %x of one event", ev.Schema(), s1, s2)
		}
	}
	other := &schemas.AuditEvent{EventID: uuid.New(), OrganizationID: org, Timestamp: time.Now(),
		Action: schemas.AuditActionCreated, Source: schemas.AuditSourceAPI}
	m, err := Message(other)
	if err != nil {
		t.Fatal(err)
	}
	if s := saltOf(t, m); bytes.Equal(s, audit.Salt) {
		t.Fatalf("two events with one salt %x", s)
	}
	fixed := []byte("0123456789abcdef")
	x := execEvent(org.String(), 2)
	x.Salt = bytes.Clone(fixed)
	if m, err = Message(x); err != nil {
		t.Fatal(err)
	}
	if s := saltOf(t, m); !bytes.Equal(s, fixed) {
		t.Fatalf("a salt set by the producer became %x", s)
	}
}

// Goroutines encoding one event at once agree on its salt (run with -race).
func TestMessageSaltConcurrent(t *testing.T) {
	ev := execEvent(uuid.NewString(), 0)
	salts := make([][]byte, 8)
	var wg sync.WaitGroup
	for i := range salts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m, err := Message(ev)
			if err != nil {
				t.Error(err)
				return
			}
			salts[i] = saltOf(t, m)
		}()
	}
	wg.Wait()
	for _, s := range salts[1:] {
		if !bytes.Equal(s, salts[0]) {
			t.Fatalf("salts %x and %x", salts[0], s)
		}
	}
}

// recordingPublisher fails the first calls transiently and keeps the
// payload of every message handed to it.
type recordingPublisher struct {
	mu    sync.Mutex
	fail  int
	sends [][]byte
	done  chan struct{}
}

func (p *recordingPublisher) PublishMsgs(ctx context.Context, msgs []*nats.Msg) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, m := range msgs {
		p.sends = append(p.sends, bytes.Clone(m.Data))
	}
	if p.fail > 0 {
		p.fail--
		return errors.New("injected transient failure")
	}
	select {
	case <-p.done:
	default:
		close(p.done)
	}
	return nil
}

// An event whose direct publish fails is kept in the outbox and published
// from there: both deliveries carry the salt the event was given.
func TestOutboxDeliveriesKeepTheSalt(t *testing.T) {
	pub := &recordingPublisher{fail: 2, done: make(chan struct{})}
	ob, err := openOutbox(testOutboxConfig(t.TempDir()), pub, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ob.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ev := execEvent(uuid.NewString(), 0)
	if err := ob.Publish(ctx, ev); err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() { ran <- ob.Run(runCtx) }()
	select {
	case <-pub.done:
	case <-ctx.Done():
		t.Fatal("the outbox did not publish the event")
	}
	stop()
	<-ran
	testenv.Eventually(t, 5*time.Second, func() string { return "outbox drained" }, func() bool { return ob.Stats().Pending == 0 })
	pub.mu.Lock()
	defer pub.mu.Unlock()
	if len(pub.sends) < 3 {
		t.Fatalf("%d deliveries, want the direct one and two from the outbox", len(pub.sends))
	}
	for i, b := range pub.sends {
		got, err := schemas.UnmarshalExecutionEvent(b)
		if err != nil {
			t.Fatal(err)
		}
		if len(ev.Salt) != schemas.SaltBytes || !bytes.Equal(got.Salt, ev.Salt) {
			t.Fatalf("delivery %d: salt %x, the event's %x", i, got.Salt, ev.Salt)
		}
	}
}
