package httpapi

import (
	"errors"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/auditrail/auditrail/internal/httpx"
	"github.com/auditrail/auditrail/internal/ratelimit"
)

type seen struct{ route, method, code string }

type recorder struct {
	mu      sync.Mutex
	reqs    []seen
	limited []string
}

func (r *recorder) ObserveRequest(route, method string, code int, _ time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reqs = append(r.reqs, seen{route, method, strconv.Itoa(code)})
}

func (r *recorder) RateLimited(route string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.limited = append(r.limited, route)
}

// Observe reports the route pattern (never the path), the method and the
// status actually sent — also for errors answered by the error handler, a
// 404 of no route, a 405 and a panic-free 500 — and marks rate-limit
// refusals.
func TestObserve(t *testing.T) {
	lim, _ := natsLimiter(t, ratelimit.Spec{Limit: 1, Window: time.Minute})
	proxies, err := httpx.ParseTrustedProxies("")
	if err != nil {
		t.Fatal(err)
	}
	app := NewApp(nil)
	rec := &recorder{}
	Observe(app, rec)
	app.Get("/api/v1/orgs/:org_id/audit_logs", func(c *fiber.Ctx) error { return Reply(c, 200, nil) })
	app.Post("/api/v1/orgs/:org_id/things", func(c *fiber.Ctx) error { return fiber.NewError(fiber.StatusBadRequest, "no") })
	app.Get("/boom", func(c *fiber.Ctx) error { return errors.New("secret detail") })
	app.Get("/limited/:id", RateLimit(lim, proxies, nil), func(c *fiber.Ctx) error { return c.SendString("ok") })

	for _, tc := range []struct {
		method, path string
		status       int
		want         seen
		limited      bool
	}{
		{"GET", "/api/v1/orgs/0b4b5bd6-8f5c-4a4e-a5c4-5c0f6f0f2e11/audit_logs", 200, seen{"/api/v1/orgs/:org_id/audit_logs", "GET", "200"}, false},
		{"POST", "/api/v1/orgs/x/things", 400, seen{"/api/v1/orgs/:org_id/things", "POST", "400"}, false},
		{"GET", "/boom", 500, seen{"/boom", "GET", "500"}, false},
		{"GET", "/no/such/route/with-a-tenant-id", 404, seen{RouteUnmatched, "GET", "404"}, false},
		{"DELETE", "/boom", 405, seen{RouteUnmatched, "DELETE", "405"}, false},
		{"GET", "/limited/a", 200, seen{"/limited/:id", "GET", "200"}, false},
		{"GET", "/limited/b", 429, seen{"/limited/:id", "GET", "429"}, true},
	} {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			rec.mu.Lock()
			rec.reqs, rec.limited = nil, nil
			rec.mu.Unlock()
			resp, err := app.Test(httptest.NewRequest(tc.method, tc.path, nil), 10000)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d", resp.StatusCode, tc.status)
			}
			rec.mu.Lock()
			defer rec.mu.Unlock()
			if len(rec.reqs) != 1 {
				t.Fatalf("observed %d requests: %v", len(rec.reqs), rec.reqs)
			}
			if got := rec.reqs[0]; got != tc.want {
				t.Fatalf("observed %+v, want %+v", got, tc.want)
			}
			if want := map[bool]int{true: 1, false: 0}[tc.limited]; len(rec.limited) != want || (want == 1 && rec.limited[0] != tc.want.route) {
				t.Fatalf("rate limited: %v", rec.limited)
			}
		})
	}
}
