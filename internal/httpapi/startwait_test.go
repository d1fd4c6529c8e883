package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/auditrail/auditrail/internal/cli"
	"github.com/auditrail/auditrail/internal/testenv"
)

// Until the role's app is open, /healthz answers 503 naming what the role
// waits for and why, every other route 503 in the envelope; then every
// request, /healthz included, is the role's app's.
func TestStartWaitFront(t *testing.T) {
	w := NewStartWait(slog.New(slog.DiscardHandler))
	front := w.newFront()
	get := func(path string) (int, map[string]any, string) {
		t.Helper()
		resp, err := front.Test(httptest.NewRequest("GET", path, nil), -1)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		var body map[string]any
		if err := json.Unmarshal(raw, &body); err != nil {
			t.Fatalf("%s: not JSON: %s", path, raw)
		}
		return resp.StatusCode, body, resp.Header.Get(fiber.HeaderRetryAfter)
	}
	ctx, cancel := context.WithCancel(context.Background())
	calls := 0
	done := make(chan error, 1)
	go func() {
		done <- w.Until(ctx, "KV bucket b", func(context.Context) error { calls++; return errors.New("nats: bucket not found") })
	}()
	var last map[string]any
	testenv.Eventually(t, 10*time.Second, func() string { return fmt.Sprintf("healthz says why: %v", last) }, func() bool {
		status, body, _ := get("/healthz")
		last = body
		checks, _ := body["checks"].(map[string]any)
		if status != 503 || body[HealthWaitingFor] != "KV bucket b" {
			if status == 503 && body[HealthWaitingFor] == starting {
				return false // the wait has not begun yet
			}
			t.Fatalf("healthz while waiting: %d %v", status, body)
		}
		return checks[HealthStartup] == "waiting for KV bucket b: nats: bucket not found"
	})
	cancel()
	if err := <-done; err == nil || calls == 0 {
		t.Fatalf("until after cancel: %v (%d calls)", err, calls)
	}
	if status, body, retry := get("/api/v1/me"); status != 503 || body["code"] != float64(503) || retry != "1" {
		t.Fatalf("API while waiting: %d %v retry-after %q", status, body, retry)
	}
	// A usage error is not retried.
	usage := 0
	if err := w.Until(context.Background(), "x", func(context.Context) error { usage++; return cli.UsageErrorf("bad") }); usage != 1 || err == nil {
		t.Fatalf("usage error: %v after %d calls", err, usage)
	}

	app := NewApp(slog.New(slog.DiscardHandler))
	app.Get("/healthz", func(c *fiber.Ctx) error { return c.JSON(map[string]any{"status": "ok"}) })
	app.Get("/api/v1/me", func(c *fiber.Ctx) error { return Reply(c, 200, map[string]any{"me": true}) })
	w.Open(app)
	tests := []struct {
		path   string
		status int
	}{
		{"/healthz", 200},
		{"/api/v1/me", 200},
		{"/nope", 404}, // the role's app's own 404
	}
	for _, tc := range tests {
		if status, body, _ := get(tc.path); status != tc.status {
			t.Errorf("%s after open: %d %v, want %d", tc.path, status, body, tc.status)
		}
	}
}
