package producers_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/auditrail/auditrail/internal/natsx"
	"github.com/auditrail/auditrail/internal/testenv"
	"github.com/auditrail/auditrail/producers"
	"github.com/auditrail/auditrail/schemas"
)

func event(org uuid.UUID) *schemas.AuditEvent {
	return &schemas.AuditEvent{EventID: uuid.New(), OrganizationID: org, Timestamp: time.Now(),
		Action: schemas.AuditActionCreated, Source: schemas.AuditSourceAPI, DisplayName: "t", PrincipalID: "p", PrincipalType: "ACCOUNT"}
}

func newPublisher(t *testing.T, nc *nats.Conn, mut func(*producers.Config)) *producers.Publisher {
	cfg := producers.DefaultConfig()
	if mut != nil {
		mut(&cfg)
	}
	p, err := producers.New(nc, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func streamMsgs(t *testing.T, js jetstream.JetStream) uint64 {
	s, err := js.Stream(context.Background(), schemas.StreamEvents)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Msgs
}

func TestPublishBatchStoresEveryEventWithHeaders(t *testing.T) {
	_, nc, js := testenv.NATS(t)
	p := newPublisher(t, nc, func(c *producers.Config) { c.MaxInFlight = 64 })
	org := uuid.New()
	var evs []producers.Event
	for i := 0; i < 5000; i++ {
		evs = append(evs, event(org))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// Concurrent callers share the in-flight bound.
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for _, part := range [][]producers.Event{evs[:2500], evs[2500:]} {
		wg.Add(1)
		go func() { defer wg.Done(); errs <- p.PublishBatch(ctx, part) }()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if n := streamMsgs(t, js); n != 5000 {
		t.Fatalf("stream holds %d messages, want 5000", n)
	}
	s, _ := js.Stream(ctx, schemas.StreamEvents)
	m, err := s.GetMsg(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if m.Subject != "auditrail.events."+org.String()+".audit" {
		t.Errorf("subject %s", m.Subject)
	}
	got, err := schemas.UnmarshalAuditEvent(m.Data)
	if err != nil {
		t.Fatal(err)
	}
	h := m.Header
	if h.Get("Nats-Msg-Id") != got.EventID.String() || h.Get("Content-Type") != "application/msgpack" || h.Get("Auditrail-Schema") != "audit/v1" {
		t.Errorf("headers %v", h)
	}
}

func TestRepublishIsStoredOnce(t *testing.T) {
	_, nc, js := testenv.NATS(t)
	p := newPublisher(t, nc, nil)
	ev := event(uuid.New())
	ctx := context.Background()
	for i := 0; i < 3; i++ {
		if err := p.Publish(ctx, ev); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.PublishBatch(ctx, []producers.Event{ev, ev}); err != nil {
		t.Fatal(err)
	}
	if n := streamMsgs(t, js); n != 1 {
		t.Fatalf("stream holds %d messages, want 1", n)
	}
}

// Until the stream exists, publishes fail with "no responders": the publisher
// retries and succeeds once the stream appears, losing nothing.
func TestRetriesUntilStreamAppears(t *testing.T) {
	_, nc := testenv.NATSWithoutStreams(t)
	p := newPublisher(t, nc, func(c *producers.Config) { c.AckTimeout = 200 * time.Millisecond; c.RetryMin = 20 * time.Millisecond })
	var evs []producers.Event
	for i := 0; i < 300; i++ {
		evs = append(evs, event(uuid.New()))
	}
	js, _ := jetstream.New(nc)
	go func() {
		time.Sleep(500 * time.Millisecond)
		_ = natsx.EnsureStreams(context.Background(), js, natsx.DefaultStreamConfig())
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := p.PublishBatch(ctx, evs); err != nil {
		t.Fatal(err)
	}
	if n := streamMsgs(t, js); n != 300 {
		t.Fatalf("stream holds %d, want 300", n)
	}
}

func TestErrors(t *testing.T) {
	_, nc, _ := testenv.NATS(t)
	p := newPublisher(t, nc, nil)

	big := event(uuid.New())
	big.DisplayName = strings.Repeat("x", 9<<20)
	if err := p.Publish(context.Background(), big); !errors.Is(err, producers.ErrRejected) {
		t.Errorf("oversized event: err = %v, want ErrRejected", err)
	}

	bad := event(uuid.New())
	bad.Data = []byte(`{not json`)
	if err := p.Publish(context.Background(), bad); !errors.Is(err, producers.ErrEncode) {
		t.Errorf("bad data: err = %v, want ErrEncode", err)
	}

	// No stream for this subject space: the call gives up only when ctx ends.
	_, nc2 := testenv.NATSWithoutStreams(t)
	p2 := newPublisher(t, nc2, func(c *producers.Config) { c.AckTimeout = 100 * time.Millisecond; c.RetryMin = 10 * time.Millisecond })
	ctx, cancel := context.WithTimeout(context.Background(), 700*time.Millisecond)
	defer cancel()
	if err := p2.Publish(ctx, event(uuid.New())); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("no stream: err = %v, want deadline exceeded", err)
	}

	for _, c := range []producers.Config{{}, {MaxInFlight: 1, AckTimeout: time.Second, RetryMin: 2, RetryMax: 1}} {
		if _, err := producers.New(nc, c, nil); !errors.Is(err, producers.ErrInvalidOption) {
			t.Errorf("config %+v: err = %v", c, err)
		}
	}
}

func TestMain(m *testing.M) { testenv.MainNoLeaks(m) }
