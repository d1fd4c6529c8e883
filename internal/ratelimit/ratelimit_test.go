package ratelimit_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/auditrail/auditrail/internal/ratelimit"
	"github.com/auditrail/auditrail/internal/testenv"
)

func TestParseSpec(t *testing.T) {
	good := map[string]ratelimit.Spec{"100/60s": {100, time.Minute}, " 5 / 1s ": {5, time.Second}, "1/24h": {1, 24 * time.Hour}}
	for in, want := range good {
		got, err := ratelimit.ParseSpec(in)
		if err != nil || got != want {
			t.Errorf("%q: %+v %v", in, got, err)
		}
	}
	for _, bad := range []string{"", "100", "0/60s", "-1/60s", "x/60s", "100/", "100/500ms", "100/48h", "100/abc"} {
		if _, err := ratelimit.ParseSpec(bad); !errors.Is(err, ratelimit.ErrInvalidSpec) {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

// Two limiters (two instances) on one bucket share the limit exactly, even
// under concurrent requests.
func TestSharedAcrossInstances(t *testing.T) {
	_, nc, _ := testenv.NATS(t)
	js, _ := jetstream.New(nc)
	ctx := context.Background()
	spec := ratelimit.Spec{Limit: 50, Window: time.Minute}
	// A fixed clock: the run may cross a minute boundary without changing
	// the window the requests are counted in.
	now := func() time.Time { return time.Date(2026, 11, 22, 10, 0, 30, 0, time.UTC) }
	a, err := ratelimit.New(ctx, js, "rl_test", spec, ratelimit.WithClock(now))
	if err != nil {
		t.Fatal(err)
	}
	b, err := ratelimit.New(ctx, js, "rl_test", spec, ratelimit.WithClock(now))
	if err != nil {
		t.Fatal(err)
	}
	var allowed atomic.Int32
	var wg sync.WaitGroup
	for i := 0; i < 80; i++ {
		wg.Add(1)
		go func(l *ratelimit.Limiter) {
			defer wg.Done()
			d, err := l.Allow(ctx, "203.0.113.5")
			if err != nil {
				t.Error(err)
				return
			}
			if d.Allowed {
				allowed.Add(1)
			}
			if d.Limit != 50 || !d.Reset.Equal(time.Date(2026, 11, 22, 10, 1, 0, 0, time.UTC)) {
				t.Errorf("decision %+v", d)
			}
		}([]*ratelimit.Limiter{a, b}[i%2])
	}
	wg.Wait()
	if allowed.Load() != 50 {
		t.Fatalf("%d requests allowed, want exactly 50", allowed.Load())
	}
	d, _ := a.Allow(ctx, "198.51.100.1")
	if !d.Allowed || d.Remaining != 49 {
		t.Fatalf("another client: %+v", d)
	}
}

// A new window starts a new count; the reset is the end of the window.
func TestWindows(t *testing.T) {
	_, nc, _ := testenv.NATS(t)
	js, _ := jetstream.New(nc)
	ctx := context.Background()
	clock := time.Date(2026, 11, 22, 10, 0, 58, 0, time.UTC)
	l, err := ratelimit.New(ctx, js, "rl_windows", ratelimit.Spec{Limit: 2, Window: time.Minute}, ratelimit.WithClock(func() time.Time { return clock }))
	if err != nil {
		t.Fatal(err)
	}
	for _, step := range []struct {
		at        time.Time
		allowed   bool
		remaining int
		reset     time.Time
	}{
		{clock, true, 1, clock.Truncate(time.Minute).Add(time.Minute)},
		{clock.Add(time.Second), true, 0, clock.Truncate(time.Minute).Add(time.Minute)},
		{clock.Add(1500 * time.Millisecond), false, 0, clock.Truncate(time.Minute).Add(time.Minute)},
		{clock.Add(2 * time.Second), true, 1, clock.Truncate(time.Minute).Add(2 * time.Minute)}, // 10:01:00, a new window
		{clock.Add(3 * time.Second), true, 0, clock.Truncate(time.Minute).Add(2 * time.Minute)},
		{clock.Add(4 * time.Second), false, 0, clock.Truncate(time.Minute).Add(2 * time.Minute)},
	} {
		clock = step.at
		d, err := l.Allow(ctx, "203.0.113.9")
		if err != nil {
			t.Fatal(err)
		}
		if d.Allowed != step.allowed || d.Remaining != step.remaining || !d.Reset.Equal(step.reset) {
			t.Fatalf("at %s: %+v, want allowed %v remaining %d reset %s", step.at.Format(time.TimeOnly), d, step.allowed, step.remaining, step.reset.Format(time.TimeOnly))
		}
	}
}
