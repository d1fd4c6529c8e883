package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/valyala/fasthttp"

	"github.com/auditrail/auditrail/internal/cli"
	"github.com/auditrail/auditrail/internal/httpapi"
	"github.com/auditrail/auditrail/internal/retry"
)

// healthStartup is the /healthz check (and the key beside it) that names
// what a starting role waits for.
const (
	healthStartup    = "startup"
	healthWaitingFor = "waiting_for"
)

// startWait is the start of a role that serves before what it needs
// exists: its front app answers /healthz with 503 and the JSON naming what
// the role waits for, and every other route with 503, until open hands the
// requests to the role's own app.
type startWait struct {
	log     *slog.Logger
	mu      sync.Mutex
	waiting string
	last    error // of the latest attempt
	inner   atomic.Pointer[fasthttp.RequestHandler]
	front   *fiber.App
}

// startPolicy is the back-off of every wait of a starting role.
var startPolicy = retry.Policy{Initial: 100 * time.Millisecond, Max: 2 * time.Second, Multiplier: 2, Jitter: 0.2}

func newStartWait(log *slog.Logger) *startWait {
	return &startWait{log: log, waiting: starting}
}

// newFront is the app that serve listens with.
func (w *startWait) newFront() *fiber.App {
	front := httpapi.NewApp(w.log)
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
			return c.Status(fiber.StatusServiceUnavailable).JSON(map[string]any{"status": "unavailable", healthWaitingFor: what,
				"checks": map[string]string{healthStartup: why}})
		}
		c.Set(fiber.HeaderRetryAfter, "1")
		return c.Status(fiber.StatusServiceUnavailable).JSON(httpapi.Envelope{Code: fiber.StatusServiceUnavailable,
			Msg: "starting: waiting for " + what})
	})
	return front
}

func (w *startWait) waitingFor() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.waiting
}

func (w *startWait) set(what string) {
	w.mu.Lock()
	w.waiting, w.last = what, nil
	w.mu.Unlock()
}

// starting is what a role waits for between its waits.
const starting = "the role to start"

// reason says what the role waits for and why (the latest attempt's
// error), or "" (w.mu held).
func (w *startWait) reason() string {
	switch {
	case w.waiting == "":
		return ""
	case w.last != nil:
		return fmt.Sprintf("waiting for %s: %v", w.waiting, w.last)
	}
	return "waiting for " + w.waiting
}

// checkErr is reason as an error, or nil.
func (w *startWait) checkErr() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if r := w.reason(); r != "" {
		return errors.New(r)
	}
	return nil
}

// until calls fn until it succeeds (usage errors are not retried), saying
// meanwhile that the role waits for what.
func (w *startWait) until(ctx context.Context, what string, fn func(ctx context.Context) error) error {
	w.set(what)
	err := retry.Do(ctx, startPolicy, func(ctx context.Context) error {
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
		w.set("")
	}
	return err
}

// check fails while the role waits (for roles whose own app serves from
// the start).
func (w *startWait) check() check {
	return check{healthStartup, func(context.Context) error { return w.checkErr() }}
}

// extra adds waiting_for to a /healthz body while the role waits.
func (w *startWait) extra(m map[string]any) map[string]any {
	if what := w.waitingFor(); what != "" {
		m[healthWaitingFor] = what
	}
	return m
}

// open hands every request to app from now on.
func (w *startWait) open(app *fiber.App) {
	h := app.Handler()
	w.set("")
	w.inner.Store(&h)
}

// serve runs the front app on addr until ctx ends; a listener that fails
// calls failed. A role whose own app serves from the start (ingest) uses
// check and extra instead.
func (w *startWait) serve(ctx context.Context, addr string, failed func()) <-chan error {
	w.front = w.newFront()
	done := make(chan error, 1)
	go func() {
		err := serve(ctx, w.front, addr, w.log)
		if err != nil {
			failed()
		}
		done <- err
	}()
	return done
}

// waitBucket waits until the KV bucket exists (a read-only role cannot
// create it).
func (w *startWait) waitBucket(ctx context.Context, nc *nats.Conn, bucket, creator string) error {
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	return w.until(ctx, fmt.Sprintf("KV bucket %s (the %s role creates it)", bucket, creator), func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		_, err := js.KeyValue(ctx, bucket)
		return err
	})
}

// waitStreams waits until the streams exist (all when names is empty).
func (w *startWait) waitStreams(ctx context.Context, nc *nats.Conn, names ...string) error {
	what := "streams AUDITRAIL_EVENTS and AUDITRAIL_DLQ"
	if len(names) == 1 {
		what = "stream " + names[0]
	}
	w.set(what + " (the controlplane role creates them)")
	defer func() {
		if w.waitingFor() == what+" (the controlplane role creates them)" {
			w.set("")
		}
	}()
	return waitStreams(ctx, nc, w.log, names...)
}

// startFailed is what a role returns when a wait ends with err: the
// listener's error if it failed, nothing when the process was stopped.
func startFailed(ctx context.Context, served <-chan error, err error) error {
	if ctx.Err() != nil {
		select {
		case lerr := <-served:
			return lerr
		case <-time.After(15 * time.Second):
		}
		return nil
	}
	return err
}
