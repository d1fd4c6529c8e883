package ratelimit_test

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"
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

// When the bucket cannot be reached or refuses writes, requests are
// counted in the process with the same limit: never let through unlimited.
// One line is logged when the outage starts and one when it ends, not one
// per request. A bucket that is gone (deleted, or lost with a restarted
// server's memory) is created again.
func TestStoreDownStillLimits(t *testing.T) {
	const bucket = "rl_down"
	tests := []struct {
		name string
		// before counts requests in the bucket before the outage; a local
		// count carries over the count it read.
		before, allowedAfter int
		local                bool
		outage               func(t *testing.T, r *testenv.RestartableNATS, js jetstream.JetStream)
		restart              bool
	}{
		{"server stopped", 0, 10, true, func(t *testing.T, r *testenv.RestartableNATS, _ jetstream.JetStream) { r.Stop() }, false},
		{"bucket refuses writes", 4, 6, true, func(t *testing.T, _ *testenv.RestartableNATS, js jetstream.JetStream) {
			ctx := context.Background()
			s, err := js.Stream(ctx, "KV_"+bucket)
			if err != nil {
				t.Fatal(err)
			}
			cfg := s.CachedInfo().Config
			cfg.Sealed = true // reads answer, writes are refused
			if _, err := js.UpdateStream(ctx, cfg); err != nil {
				t.Fatal(err)
			}
		}, false},
		{"bucket deleted: created again", 4, 10, false, func(t *testing.T, _ *testenv.RestartableNATS, js jetstream.JetStream) {
			if err := js.DeleteKeyValue(context.Background(), bucket); err != nil {
				t.Fatal(err)
			}
		}, false},
		{"server restarted", 0, 10, true, func(t *testing.T, r *testenv.RestartableNATS, _ jetstream.JetStream) { r.Stop() }, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, nc, js := testenv.NewRestartableNATS(t)
			var logs testenv.SyncBuffer
			clock := testenv.NewManualClock(time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC))
			ctx := context.Background()
			l, err := ratelimit.New(ctx, js, bucket, ratelimit.Spec{Limit: 10, Window: time.Hour},
				ratelimit.WithClock(clock.Now), ratelimit.WithStoreTimeout(300*time.Millisecond), ratelimit.WithStoreRetry(time.Second),
				ratelimit.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
			if err != nil {
				t.Fatal(err)
			}
			for i := 0; i < tc.before; i++ {
				if d, err := l.Allow(ctx, "203.0.113.5"); err != nil || !d.Allowed || d.Local {
					t.Fatalf("before the outage: %+v %v", d, err)
				}
			}
			tc.outage(t, r, js)
			allowed := 0
			for i := 0; i < 15; i++ {
				d, err := l.Allow(ctx, "203.0.113.5")
				if err != nil {
					t.Fatalf("request %d: %v", i, err)
				}
				if d.Allowed {
					allowed++
				}
				if d.Local != tc.local || d.Limit != 10 {
					t.Fatalf("request %d: %+v, want local %v", i, d, tc.local)
				}
				clock.Add(100 * time.Millisecond) // also walks past the retry: the bucket is tried again
			}
			if allowed != tc.allowedAfter {
				t.Fatalf("%d requests allowed during the outage, want %d", allowed, tc.allowedAfter)
			}
			if n := strings.Count(logs.String(), "rate-limit bucket unavailable"); tc.local && n != 1 || !tc.local && n != 0 {
				t.Fatalf("outage logged %d times:\n%s", n, logs.String())
			}
			if !tc.restart {
				return
			}
			r.Start()
			testenv.Eventually(t, 10*time.Second, "reconnected", nc.IsConnected)
			var d ratelimit.Decision
			testenv.Eventually(t, 10*time.Second, "a count by the server", func() bool {
				clock.Add(time.Second)
				d, _ = l.Allow(ctx, "198.51.100.9")
				return !d.Local
			})
			if d.Local || !d.Allowed || d.Remaining != 9 {
				t.Fatalf("the server is back but the count is local: %+v", d)
			}
			if strings.Count(logs.String(), "answers again") != 1 || strings.Count(logs.String(), "unavailable") != 1 {
				t.Fatalf("want one line for the outage and one for the recovery:\n%s", logs.String())
			}
		})
	}
}

// Local counts keep a bounded memory: past the bound, new clients share
// one count, still limited.
func TestLocalClientsBounded(t *testing.T) {
	r, _, js := testenv.NewRestartableNATS(t)
	ctx := context.Background()
	now := func() time.Time { return time.Date(2026, 11, 22, 10, 0, 30, 0, time.UTC) }
	l, err := ratelimit.New(ctx, js, "rl_bounded", ratelimit.Spec{Limit: 3, Window: time.Minute},
		ratelimit.WithClock(now), ratelimit.WithStoreTimeout(200*time.Millisecond), ratelimit.WithLocalClients(2))
	if err != nil {
		t.Fatal(err)
	}
	r.Stop()
	allowed := 0
	for i := 0; i < 20; i++ {
		if d, _ := l.Allow(ctx, "client-"+strconv.Itoa(i)); d.Allowed {
			allowed++
		}
	}
	if allowed != 2+3 { // two clients counted apart, the others share 3
		t.Fatalf("%d allowed, want 5", allowed)
	}
}

func TestOptionsValidate(t *testing.T) {
	_, _, js := testenv.NATS(t)
	spec := ratelimit.Spec{Limit: 1, Window: time.Second}
	for name, o := range map[string]ratelimit.Option{
		"nil clock":        ratelimit.WithClock(nil),
		"nil logger":       ratelimit.WithLogger(nil),
		"zero timeout":     ratelimit.WithStoreTimeout(0),
		"negative retry":   ratelimit.WithStoreRetry(-time.Second),
		"no local clients": ratelimit.WithLocalClients(0),
		"no replica":       ratelimit.WithReplicas(0),
		"six replicas":     ratelimit.WithReplicas(6),
	} {
		if _, err := ratelimit.New(context.Background(), js, "rl_opts", spec, o); !errors.Is(err, ratelimit.ErrInvalidOption) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := ratelimit.New(context.Background(), js, "rl_opts", ratelimit.Spec{}); !errors.Is(err, ratelimit.ErrInvalidSpec) {
		t.Errorf("zero spec: %v", err)
	}
}
