package modules

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/auditrail/auditrail/internal/testenv"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// recorder notes what the modules do, in order.
type recorder struct {
	mu  sync.Mutex
	log []string
}

func (r *recorder) note(s string) {
	r.mu.Lock()
	r.log = append(r.log, s)
	r.mu.Unlock()
}

func (r *recorder) got() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.log)
}

// mod is a module that notes its start, its loop's end and its stop.
func mod(r *recorder, name string, deps []string, loop bool) Module {
	m := Module{Name: name, Deps: deps,
		Start: func(context.Context) error { r.note("start " + name); return nil },
		Stop:  func() error { r.note("stop " + name); return nil }}
	if loop {
		m.Run = func(ctx context.Context) error { <-ctx.Done(); r.note("end " + name); return ctx.Err() }
	}
	return m
}

func TestOrder(t *testing.T) {
	var s Set
	r := &recorder{}
	s.Add(mod(r, "nats", nil, false))
	s.Add(mod(r, "store", nil, false))
	s.Add(mod(r, "state", []string{"nats"}, false))
	s.Add(mod(r, "ingest", []string{"nats", "store"}, true))
	s.Add(mod(r, "query", []string{"state", "store"}, false))
	s.Add(mod(r, "server", []string{"ingest", "query"}, true))
	s.Add(Module{Name: "a", Deps: []string{"b"}})
	s.Add(Module{Name: "b", Deps: []string{"a"}})
	s.Add(Module{Name: "c", Deps: []string{"nosuch"}})
	for _, tc := range []struct {
		targets []string
		want    string
		err     string
	}{
		{[]string{"ingest"}, "nats store ingest", ""},
		{[]string{"query"}, "nats state store query", ""},
		{[]string{"server"}, "nats store ingest state query server", ""},
		{[]string{"query", "ingest"}, "nats state store query ingest", ""},
		{[]string{"a"}, "", "dependency cycle [a b a]"},
		{[]string{"c"}, "", `c depends on unknown module "nosuch"`},
		{[]string{"nosuch"}, "", `unknown module "nosuch"`},
	} {
		got, err := s.Order(tc.targets...)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("Order(%v) = %v, %v; want error %q", tc.targets, got, err, tc.err)
			}
			continue
		}
		if err != nil || strings.Join(got, " ") != tc.want {
			t.Errorf("Order(%v) = %v, %v; want %s", tc.targets, got, err, tc.want)
		}
	}
}

// Modules start in order, loops run until the context ends, then each
// module's loop ends and it stops, last started first.
func TestRunStartsAndStopsInOrder(t *testing.T) {
	var s Set
	r := &recorder{}
	s.Add(mod(r, "nats", nil, false))
	s.Add(mod(r, "store", nil, false))
	s.Add(mod(r, "ingest", []string{"nats", "store"}, true))
	s.Add(mod(r, "server", []string{"ingest"}, true))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx, "server") }()
	testenv.Eventually(t, 5*time.Second, "the server started", func() bool { return slices.Contains(r.got(), "start server") })
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	want := "start nats,start store,start ingest,start server,end server,stop server,end ingest,stop ingest,stop store,stop nats"
	if got := strings.Join(r.got(), ","); got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}

// A failed start stops what started before it, in the reverse order (not
// itself: it releases what it made), and is the error; nothing after it
// starts.
func TestRunStartFails(t *testing.T) {
	var s Set
	r := &recorder{}
	s.Add(mod(r, "nats", nil, true))
	bad := mod(r, "store", []string{"nats"}, false)
	bad.Start = func(context.Context) error { r.note("start store"); return errors.New("no answer") }
	s.Add(bad)
	s.Add(mod(r, "ingest", []string{"store"}, true))
	err := s.Run(context.Background(), "ingest")
	if err == nil || err.Error() != "store: no answer" {
		t.Fatalf("Run = %v", err)
	}
	want := "start nats,start store,stop nats"
	if got := strings.Join(r.got(), ","); got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}

// A loop that ends by itself stops the process: its error leads; a loop
// that ends without an error is ErrStopped.
func TestRunLoopEnds(t *testing.T) {
	for _, tc := range []struct {
		loopErr error
		want    error
	}{{errors.New("store gone"), nil}, {nil, ErrStopped}} {
		var s Set
		r := &recorder{}
		s.Add(mod(r, "nats", nil, true))
		ing := mod(r, "ingest", []string{"nats"}, false)
		ing.Run = func(context.Context) error { r.note("end ingest"); return tc.loopErr }
		s.Add(ing)
		s.Add(mod(r, "server", []string{"ingest"}, true))
		err := s.Run(context.Background(), "server")
		want := tc.want
		if want == nil {
			want = tc.loopErr
		}
		if !errors.Is(err, want) || !strings.HasPrefix(err.Error(), "ingest: ") {
			t.Fatalf("Run = %v, want ingest: %v", err, want)
		}
		got := strings.Join(r.got(), ",")
		if !strings.HasSuffix(got, "end server,stop server,stop ingest,end nats,stop nats") {
			t.Fatalf("stop order: %s", got)
		}
	}
}

// A stop's error is returned when nothing failed before it.
func TestRunStopFails(t *testing.T) {
	var s Set
	s.Add(Module{Name: "x", Stop: func() error { return errors.New("flush failed") }})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.Run(ctx, "x"); err == nil || err.Error() != "stopping x: flush failed" {
		t.Fatalf("Run = %v", err)
	}
}

// A start that waits when the process is stopped ends without an error,
// after what started before it has stopped.
func TestRunStoppedWhileStarting(t *testing.T) {
	var s Set
	r := &recorder{}
	s.Add(mod(r, "nats", nil, true))
	s.Add(Module{Name: "state", Deps: []string{"nats"}, Start: func(ctx context.Context) error {
		r.note("waiting")
		<-ctx.Done()
		return ctx.Err()
	}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx, "state") }()
	testenv.Eventually(t, 5*time.Second, "the wait", func() bool { return slices.Contains(r.got(), "waiting") })
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run = %v", err)
	}
	if got := strings.Join(r.got(), ","); got != "start nats,waiting,stop nats" {
		t.Fatalf("got %s", got)
	}
}
