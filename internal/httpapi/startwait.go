package httpapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/valyala/fasthttp"

	"github.com/auditrail/auditrail/internal/cli"
	"github.com/auditrail/auditrail/internal/retry"
)

// HealthStartup is the /healthz check (and the key beside it) that names
// what a starting role waits for.
// HealthStartup is the /healthz check, and HealthWaitingFor the key
// beside it, that name what a starting role waits for.
const (
	HealthStartup    = "startup"
	HealthWaitingFor = "waiting_for"
)

// StartWait is the start of a role that serves before what it needs
// exists: its front app answers /healthz with 503 and the JSON naming what
// the role waits for, and every other route with 503, until open hands the
// requests to the role's own app.
type StartWait struct {
	log     *slog.Logger
	mu      sync.Mutex
	waiting string
	last    error // of the latest attempt
	inner   atomic.Pointer[fasthttp.RequestHandler]
	front   *fiber.App
}

// StartPolicy is the back-off of every wait of a starting role.
var StartPolicy = retry.Policy{Initial: 100 * time.Millisecond, Max: 2 * time.Second, Multiplier: 2, Jitter: 0.2}

// NewStartWait is the start of a role that logs on log.
func NewStartWait(log *slog.Logger) *StartWait {
	return &StartWait{log: log, waiting: starting}
}

// newFront is the app that serve listens with.
func (w *StartWait) newFront() *fiber.App {
	front := NewApp(w.log)
	front.Use(func(c *fiber.Ctx) error {
		if h := w.inner.Load(); h != nil {
			(*h)(c.Context())
			return nil
		}
		w.mu.Lock()
		what, why := w.waiting, w.reason()
		w.mu.Unlock()
		if what == "" { // between two waits, or done and not open yet
			what, why = starting, "waiting for "+starting
		}
		if c.Path() == "/healthz" {
			return c.Status(fiber.StatusServiceUnavailable).JSON(map[string]any{"status": "unavailable", HealthWaitingFor: what,
				"checks": map[string]string{HealthStartup: why}})
		}
		c.Set(fiber.HeaderRetryAfter, "1")
		return c.Status(fiber.StatusServiceUnavailable).JSON(Envelope{Code: fiber.StatusServiceUnavailable,
			Msg: "starting: waiting for " + what})
	})
	return front
}

func (w *StartWait) WaitingFor() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.waiting
}

func (w *StartWait) Set(what string) {
	w.mu.Lock()
	w.waiting, w.last = what, nil
	w.mu.Unlock()
}

// starting is what a role waits for between its waits.
const starting = "the role to start"

// reason says what the role waits for and why (the latest attempt's
// error), or "" (w.mu held).
func (w *StartWait) reason() string {
	switch {
	case w.waiting == "":
		return ""
	case w.last != nil:
		return fmt.Sprintf("waiting for %s: %v", w.waiting, w.last)
	}
	return "waiting for " + w.waiting
}

// until calls fn until it succeeds (usage errors are not retried), saying
// meanwhile that the role waits for what.
func (w *StartWait) Until(ctx context.Context, what string, fn func(ctx context.Context) error) error {
	w.Set(what)
	err := retry.Do(ctx, StartPolicy, func(ctx context.Context) error {
		err := fn(ctx)
		if _, usage := errors.AsType[cli.UsageError](err); usage {
			return retry.Permanent(err)
		}
		return err
	}, func(err error, next time.Duration) {
		w.mu.Lock()
		w.last = err
		w.mu.Unlock()
		w.log.Info("waiting for "+what, "err", err, "retry_in", next.Round(time.Millisecond))
	})
	if err == nil {
		w.Set("")
	}
	return err
}

// open hands every request to app from now on.
func (w *StartWait) Open(app *fiber.App) {
	h := app.Handler()
	w.Set("")
	w.inner.Store(&h)
}

// serveListener runs the front app on ln until ctx ends, then drains it;
// the channel has the listener's error, or nil.
func (w *StartWait) ServeListener(ctx context.Context, ln net.Listener) <-chan error {
	w.front = w.newFront()
	done := make(chan error, 1)
	go func() {
		errc := make(chan error, 1)
		go func() { errc <- w.front.Listener(ln) }()
		select {
		case err := <-errc:
			done <- fmt.Errorf("listen %s: %w", ln.Addr(), err)
			return
		case <-ctx.Done():
		}
		w.log.Info("http: draining")
		if err := w.front.ShutdownWithTimeout(10 * time.Second); err != nil {
			w.log.Warn("http shutdown", "err", err)
		}
		done <- nil
	}()
	return done
}
