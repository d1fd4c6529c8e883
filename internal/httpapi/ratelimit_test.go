package httpapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/auditrail/auditrail/internal/httpx"
	"github.com/auditrail/auditrail/internal/ratelimit"
	"github.com/auditrail/auditrail/internal/testenv"
)

// limitedApp serves GET / behind RateLimit(l); fiber's app.Test connects
// from 0.0.0.0, which is the trusted proxy here.
func limitedApp(t *testing.T, l Limiter, log *slog.Logger) func(xff ...string) int {
	t.Helper()
	proxies, err := httpx.ParseTrustedProxies("0.0.0.0")
	if err != nil {
		t.Fatal(err)
	}
	app := NewApp(log)
	app.Get("/", RateLimit(l, proxies, log), func(c *fiber.Ctx) error { return c.SendString("ok") })
	return func(xff ...string) int {
		t.Helper()
		req := httptest.NewRequest("GET", "/", nil)
		for _, line := range xff {
			req.Header.Add("X-Forwarded-For", line) // one header line each
		}
		resp, err := app.Test(req, 10000)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
}

func natsLimiter(t *testing.T, spec ratelimit.Spec, opts ...ratelimit.Option) (*ratelimit.Limiter, *testenv.RestartableNATS) {
	t.Helper()
	r, _, js := testenv.NewRestartableNATS(t)
	// Day-long windows (a fixed clock): no window boundary splits a test.
	opts = append(opts, ratelimit.WithClock(func() time.Time { return time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC) }))
	l, err := ratelimit.New(context.Background(), js, "rl_httpapi", spec, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return l, r
}

// A client cannot choose its rate-limit key: behind a proxy that appends
// its own X-Forwarded-For line, the forged first line is not the key, and
// the addresses of one IPv6 /64 share one bucket.
func TestRateLimitKey(t *testing.T) {
	tests := []struct {
		name string
		// xff(i) are the header lines of the i-th request (0 … 100).
		xff  func(i int) []string
		want func(i int) int
	}{
		{"forged first line, proxy's line second",
			func(i int) []string { return []string{fmt.Sprintf("6.6.%d.%d", i/256, i%256), "198.51.100.7"} },
			func(i int) int { return map[bool]int{true: 200, false: 429}[i < 100] }},
		{"one IPv6 /64, a new address each request",
			func(i int) []string { return []string{fmt.Sprintf("2001:db8:1:2:%x::%x", i, i+1)} },
			func(i int) int { return map[bool]int{true: 200, false: 429}[i < 100] }},
		{"IPv4 clients each their own",
			func(i int) []string { return []string{fmt.Sprintf("198.51.%d.%d", i/256, i%256)} },
			func(int) int { return 200 }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l, _ := natsLimiter(t, ratelimit.Spec{Limit: 100, Window: 24 * time.Hour})
			get := limitedApp(t, l, slog.New(slog.DiscardHandler))
			for i := 0; i <= 100; i++ {
				if got := get(tc.xff(i)...); got != tc.want(i) {
					t.Fatalf("request %d (%q): %d, want %d", i+1, tc.xff(i), got, tc.want(i))
				}
			}
		})
	}
	t.Run("another /64 has its own bucket", func(t *testing.T) {
		l, _ := natsLimiter(t, ratelimit.Spec{Limit: 1, Window: 24 * time.Hour})
		get := limitedApp(t, l, slog.New(slog.DiscardHandler))
		if get("2001:db8:1:2::1") != 200 || get("2001:db8:1:2::2") != 429 || get("2001:db8:1:3::1") != 200 {
			t.Fatal("IPv6 /64 buckets")
		}
	})
}

// With the bucket's server stopped, requests are still limited (counted
// in the process), not let through.
func TestRateLimitStoreDown(t *testing.T) {
	l, r := natsLimiter(t, ratelimit.Spec{Limit: 3, Window: 24 * time.Hour}, ratelimit.WithStoreTimeout(300*time.Millisecond))
	get := limitedApp(t, l, slog.New(slog.DiscardHandler))
	if got := get("198.51.100.7"); got != 200 {
		t.Fatalf("before the outage: %d", got)
	}
	r.Stop()
	for i, want := range []int{200, 200, 429, 429} {
		if got := get("198.51.100.7"); got != want {
			t.Fatalf("request %d during the outage: %d, want %d", i+2, got, want)
		}
	}
}

type failingLimiter struct{ err error }

func (f *failingLimiter) Allow(context.Context, string) (ratelimit.Decision, error) {
	if f.err != nil {
		return ratelimit.Decision{}, f.err
	}
	return ratelimit.Decision{Allowed: true, Limit: 5, Remaining: 4, Reset: time.Now().Add(time.Minute)}, nil
}

// A limiter that cannot decide refuses the request (503), and the outage
// is logged once, not per request.
func TestRateLimitFailsClosed(t *testing.T) {
	var logs testenv.SyncBuffer
	f := &failingLimiter{err: errors.New("bucket unreachable")}
	get := limitedApp(t, f, slog.New(slog.NewTextHandler(&logs, nil)))
	for i := 0; i < 5; i++ {
		if got := get("198.51.100.7"); got != fiber.StatusServiceUnavailable {
			t.Fatalf("request %d with the limiter failing: %d, want 503", i, got)
		}
	}
	f.err = nil
	if got := get("198.51.100.7"); got != 200 {
		t.Fatalf("limiter back: %d", got)
	}
	if strings.Count(logs.String(), "rate limit unavailable") != 1 || strings.Count(logs.String(), "answers again") != 1 {
		t.Fatalf("want one line for the outage and one for the recovery:\n%s", logs.String())
	}
}
