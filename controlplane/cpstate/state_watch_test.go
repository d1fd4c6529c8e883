package cpstate

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/auditrail/auditrail/internal/retry"
	"github.com/auditrail/auditrail/internal/testenv"
)

// syncWriter is a bytes.Buffer that several goroutines write.
type syncWriter struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (w *syncWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *syncWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// A process that stops drains or closes its connection before (or without)
// ending the mirror's context: the watch ends quietly and is not
// re-created, since nothing went wrong.
func TestWatchQuietWhenItsConnectionCloses(t *testing.T) {
	srv, _, _ := testenv.NATS(t)
	tests := []struct {
		name  string
		close func(*nats.Conn)
	}{
		{"drain", func(nc *nats.Conn) { _ = nc.Drain() }},
		{"close", func(nc *nats.Conn) { nc.Close() }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			nc, err := nats.Connect(srv.ClientURL())
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			js, err := jetstream.New(nc)
			if err != nil {
				t.Fatal(err)
			}
			var logs syncWriter
			log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			cfg := DefaultStateConfig()
			cfg.Bucket = "cp_quiet_" + tt.name
			if _, err := OpenState(ctx, js, cfg, log); err != nil {
				t.Fatal(err)
			}
			tt.close(nc)
			deadline := time.Now().Add(2 * time.Second)
			for !nc.IsClosed() && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
			time.Sleep(500 * time.Millisecond) // a re-created watch would have warned by now
			if s := logs.String(); strings.Contains(s, "level=WARN") || strings.Contains(s, "level=ERROR") {
				t.Fatalf("closing the connection logged:\n%s", s)
			}
		})
	}
}

func TestStateConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		mut  func(*StateConfig)
		ok   bool
	}{
		{"default", func(*StateConfig) {}, true},
		{"read-only", func(c *StateConfig) { c.ReadOnly = true }, true},
		{"empty bucket", func(c *StateConfig) { c.Bucket = "" }, false},
		{"bucket with a dot", func(c *StateConfig) { c.Bucket = "a.b" }, false},
		{"staleness too short", func(c *StateConfig) { c.MaxStaleness = time.Millisecond }, false},
		{"bad reconnect", func(c *StateConfig) { c.Reconnect.Initial = 0 }, false},
		{"no states bucket (the default)", func(c *StateConfig) { c.StatesBucket = "" }, true},
		{"states bucket with a dot", func(c *StateConfig) { c.StatesBucket = "a.b" }, false},
		{"states bucket is the state's", func(c *StateConfig) { c.StatesBucket = c.Bucket }, false},
	}
	for _, tc := range tests {
		c := DefaultStateConfig()
		tc.mut(&c)
		if err := c.Validate(); (err == nil) != tc.ok || (err != nil && !errors.Is(err, ErrInvalidOption)) {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
}

// A watch that stops is re-created from the last revision it delivered: a
// key changed while it was down is applied once it is back, and later
// changes keep arriving.
func TestWatchReconnectsAndAppliesWhatItMissed(t *testing.T) {
	srv, _, _ := testenv.NATS(t)
	open := func(mut func(*StateConfig)) *State {
		t.Helper()
		nc, err := nats.Connect(srv.ClientURL())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		js, err := jetstream.New(nc)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		t.Cleanup(cancel)
		cfg := DefaultStateConfig()
		cfg.Bucket = "cp_watch"
		if mut != nil {
			mut(&cfg)
		}
		s, err := OpenState(ctx, js, cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	w := open(nil)
	r := open(func(c *StateConfig) {
		c.Reconnect = retry.Policy{Initial: 400 * time.Millisecond, Max: 400 * time.Millisecond, Jitter: -1}
	})
	ctx := context.Background()
	name := func(s *State) string {
		var o Org
		if _, err := s.Get(OrgKey("acme"), &o); err != nil {
			return ""
		}
		return o.Name
	}
	if err := w.Commit(ctx, []Write{SetKey(OrgKey("acme"), Org{Name: "Acme"}, 0)}, nil); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, "the reader holds the org", func() bool { return name(r) == "Acme" })

	r.cutMu.Lock()
	r.cut() // the watch stops, as when its subscription closes
	r.cutMu.Unlock()
	var o Org
	rev, err := w.Get(OrgKey("acme"), &o)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Commit(ctx, []Write{SetKey(OrgKey("acme"), Org{Name: "Acme 2"}, rev)}, nil); err != nil {
		t.Fatal(err)
	}
	if n := name(r); n != "Acme" {
		t.Fatalf("the cut watch saw the change already (%q): the test proves nothing", n)
	}
	testenv.Eventually(t, 10*time.Second, "the change is applied after the watch is back", func() bool { return name(r) == "Acme 2" })
	// The watch keeps following changes.
	if err := w.Commit(ctx, []Write{SetKey(MemberKey("acme", "alice"), Member{UserID: "alice", Role: RoleAdmin}, 0)}, nil); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, "later changes still arrive", func() bool {
		_, err := r.Get(MemberKey("acme", "alice"), &Member{})
		return err == nil
	})
}
