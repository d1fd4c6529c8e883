// Package ratelimit counts requests per client in fixed windows kept in a
// NATS KV bucket, so that every instance of a service shares one limit.
// When the bucket cannot be reached or refuses writes, each instance counts
// in its own memory with the same limit until the bucket answers again: the
// limit is never lifted.
package ratelimit

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Errors of configuration.
var (
	// ErrInvalidSpec is returned for a limit that cannot be parsed.
	ErrInvalidSpec = errors.New("invalid rate limit")
	// ErrInvalidOption is returned for an option out of range.
	ErrInvalidOption = errors.New("invalid rate limiter option")
)

// Spec is N requests per window.
type Spec struct {
	Limit  int
	Window time.Duration
}

// ParseSpec parses "100/60s" (a count, a slash, a Go duration).
func ParseSpec(s string) (Spec, error) {
	n, d, ok := strings.Cut(s, "/")
	if !ok {
		return Spec{}, fmt.Errorf("%w: %q: want N/duration, e.g. 100/60s", ErrInvalidSpec, s)
	}
	limit, err := strconv.Atoi(strings.TrimSpace(n))
	if err != nil || limit < 1 {
		return Spec{}, fmt.Errorf("%w: %q: count must be a positive integer", ErrInvalidSpec, s)
	}
	window, err := time.ParseDuration(strings.TrimSpace(d))
	if err != nil || window < time.Second || window > 24*time.Hour {
		return Spec{}, fmt.Errorf("%w: %q: window must be a duration from 1s to 24h", ErrInvalidSpec, s)
	}
	return Spec{Limit: limit, Window: window}, nil
}

func (s Spec) String() string { return fmt.Sprintf("%d/%s", s.Limit, s.Window) }

// Decision is the outcome of one request.
type Decision struct {
	Allowed   bool
	Limit     int
	Remaining int
	// Reset is when the current window ends.
	Reset time.Time
	// Local reports that the request was counted in this process only: the
	// shared bucket could not be reached or refused the write.
	Local bool
}

// Defaults of the options.
const (
	DefaultStoreRetry = 5 * time.Second
	// DefaultLocalClients bounds the clients whose counts are kept in
	// memory per window (a copy of the bucket's counts, used while it is
	// down: some 10 MB at most); further clients share one count.
	DefaultLocalClients = 100_000
)

// Limiter is a fixed-window counter per client, shared through KV with
// compare-and-set, so concurrent instances never over-admit. When the
// bucket fails it counts locally (see the package comment).
type Limiter struct {
	js           jetstream.JetStream
	cfg          jetstream.KeyValueConfig
	replicas     int
	spec         Spec
	now          func() time.Time
	log          *slog.Logger
	storeTimeout time.Duration
	storeRetry   time.Duration

	// recreating is held by the one request that creates a lost bucket again.
	recreating sync.Mutex

	mu sync.Mutex
	kv jetstream.KeyValue
	// down is set while the bucket is failing: since when, and when it is
	// tried again (by one request; the others count locally meanwhile).
	down      bool
	downSince time.Time
	retryAt   time.Time
	local     localCounts
}

// Option configures a Limiter.
type Option func(*Limiter) error

// WithClock makes the limiter read the time from now (tests).
func WithClock(now func() time.Time) Option {
	return func(l *Limiter) error {
		if now == nil {
			return fmt.Errorf("%w: nil clock", ErrInvalidOption)
		}
		l.now = now
		return nil
	}
}

// WithLogger logs outages of the bucket (one line when it fails, one when
// it answers again) to log.
func WithLogger(log *slog.Logger) Option {
	return func(l *Limiter) error {
		if log == nil {
			return fmt.Errorf("%w: nil logger", ErrInvalidOption)
		}
		l.log = log
		return nil
	}
}

// WithStoreTimeout bounds each request's wait for the bucket (by default
// only the caller's context does); past it the request is counted locally.
func WithStoreTimeout(d time.Duration) Option {
	return func(l *Limiter) error {
		if d <= 0 {
			return fmt.Errorf("%w: store timeout %s must be positive", ErrInvalidOption, d)
		}
		l.storeTimeout = d
		return nil
	}
}

// WithStoreRetry is how long the bucket is left alone after it failed
// before one request tries it again (default DefaultStoreRetry).
func WithStoreRetry(d time.Duration) Option {
	return func(l *Limiter) error {
		if d <= 0 {
			return fmt.Errorf("%w: store retry %s must be positive", ErrInvalidOption, d)
		}
		l.storeRetry = d
		return nil
	}
}

// WithLocalClients bounds the clients counted apart in memory per window
// (default DefaultLocalClients).
func WithLocalClients(n int) Option {
	return func(l *Limiter) error {
		if n < 1 {
			return fmt.Errorf("%w: local clients %d must be positive", ErrInvalidOption, n)
		}
		l.local.max = n
		return nil
	}
}

// WithReplicas sets the replicas of the bucket (default 1; 3 or 5 in a
// JetStream cluster): an existing bucket is raised or lowered to it.
func WithReplicas(n int) Option {
	return func(l *Limiter) error {
		if n < 1 || n > 5 {
			return fmt.Errorf("%w: replicas %d not in 1..5", ErrInvalidOption, n)
		}
		l.replicas = n
		return nil
	}
}

// New returns a limiter on bucket (created if missing) whose counters
// expire two windows after they start.
func New(ctx context.Context, js jetstream.JetStream, bucket string, spec Spec, opts ...Option) (*Limiter, error) {
	l := &Limiter{js: js, spec: spec, now: time.Now, log: slog.New(slog.DiscardHandler),
		storeRetry: DefaultStoreRetry, local: localCounts{max: DefaultLocalClients}, replicas: 1}
	if spec.Limit < 1 || spec.Window < time.Second {
		return nil, fmt.Errorf("%w: %s", ErrInvalidSpec, spec)
	}
	for _, o := range opts {
		if err := o(l); err != nil {
			return nil, err
		}
	}
	l.cfg = jetstream.KeyValueConfig{
		Bucket:      bucket,
		Description: "auditrail rate-limit counters",
		History:     1,
		TTL:         2 * spec.Window,
		Storage:     jetstream.MemoryStorage,
		Replicas:    l.replicas,
	}
	kv, err := js.CreateOrUpdateKeyValue(ctx, l.cfg)
	if err != nil {
		return nil, fmt.Errorf("rate-limit bucket %s: %w", bucket, err)
	}
	l.kv = kv
	l.log = l.log.With("bucket", bucket)
	return l, nil
}

// missing reports whether err says that the bucket is gone: deleted, or
// lost with the memory of a restarted server.
func missing(err error) bool {
	return errors.Is(err, nats.ErrNoResponders) || errors.Is(err, jetstream.ErrNoStreamResponse) ||
		errors.Is(err, jetstream.ErrStreamNotFound) || errors.Is(err, jetstream.ErrBucketNotFound)
}

// errRecreating is the failure of the requests that find the bucket gone
// while another one creates it again.
var errRecreating = errors.New("rate-limit bucket is being created again")

// recreate creates the bucket again.
func (l *Limiter) recreate(ctx context.Context) (jetstream.KeyValue, error) {
	if !l.recreating.TryLock() {
		return nil, errRecreating
	}
	defer l.recreating.Unlock()
	kv, err := l.js.CreateOrUpdateKeyValue(ctx, l.cfg)
	if err != nil {
		return nil, fmt.Errorf("rate-limit bucket %s: recreate: %w", l.cfg.Bucket, err)
	}
	l.mu.Lock()
	l.kv = kv
	l.mu.Unlock()
	l.log.Info("rate-limit bucket was gone; created again")
	return kv, nil
}

// Spec returns the limit.
func (l *Limiter) Spec() Spec { return l.spec }

// Allow counts one request of client and says whether it is within the
// limit. It counts in the shared bucket, or, while that fails, in this
// process with the same limit; the error is always nil (the Decision says
// Local when the count was local).
func (l *Limiter) Allow(ctx context.Context, client string) (Decision, error) {
	now := l.now()
	start := now.Truncate(l.spec.Window)
	d := Decision{Limit: l.spec.Limit, Reset: start.Add(l.spec.Window)}
	key := base64.RawURLEncoding.EncodeToString([]byte(client)) + "." + strconv.FormatInt(start.Unix(), 10)

	l.mu.Lock()
	kv := l.kv
	useStore := !l.down || !now.Before(l.retryAt)
	if l.down && useStore {
		l.retryAt = now.Add(l.storeRetry) // this request tries; the others count locally meanwhile
	}
	l.mu.Unlock()
	if useStore {
		sctx, cancel := ctx, context.CancelFunc(func() {})
		if l.storeTimeout > 0 {
			sctx, cancel = context.WithTimeout(ctx, l.storeTimeout)
		}
		n, allowed, err := l.count(sctx, kv, key)
		if err != nil && missing(err) {
			if kv, err = l.recreate(sctx); err == nil {
				n, allowed, err = l.count(sctx, kv, key)
			}
		}
		cancel()
		if err == nil {
			l.up(now, key, start, n)
			d.Allowed = allowed
			d.Remaining = max(0, l.spec.Limit-n)
			return d, nil
		}
		l.fail(now, err, key, start, n)
	}
	n, allowed := l.localTake(key, start)
	d.Allowed, d.Remaining, d.Local = allowed, max(0, l.spec.Limit-n), true
	return d, nil
}

// floodRaces is how many compare-and-set races a request must lose before
// running out of time means a flood of its client rather than a slow
// bucket (a leader change: its few races and its timeout are the bucket's
// failure, counted in the process).
const floodRaces = 10

// count counts a request in the bucket and returns the count of the window
// with it, whether it is allowed, and on failure the last count read (0
// if none). Running out of time after losing floodRaces compare-and-set
// races is no failure of the bucket, which answered: the request is
// refused.
func (l *Limiter) count(ctx context.Context, kv jetstream.KeyValue, key string) (n int, allowed bool, err error) {
	for attempt := 0; attempt < 50; attempt++ {
		failed := func(err error) (int, bool, error) {
			if attempt >= floodRaces && ctx.Err() != nil {
				return l.spec.Limit, false, nil // raced out of time: a flood of this client
			}
			return n, false, fmt.Errorf("rate limit: %w", err)
		}
		if attempt > 0 {
			// Lost a compare-and-set race: back off a little, at random.
			time.Sleep(time.Duration(rand.Int64N(int64(attempt)*int64(200*time.Microsecond) + 1)))
		}
		e, err := kv.Get(ctx, key)
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
			if _, err := kv.Create(ctx, key, []byte("1")); err != nil {
				if errors.Is(err, jetstream.ErrKeyExists) {
					continue
				}
				return failed(err)
			}
			return 1, true, nil
		case err != nil:
			return failed(err)
		}
		n, _ = strconv.Atoi(string(e.Value()))
		if n >= l.spec.Limit {
			return n, false, nil
		}
		if _, err := kv.Update(ctx, key, []byte(strconv.Itoa(n+1)), e.Revision()); err != nil {
			var apiErr *jetstream.APIError
			if errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence {
				continue // another request counted first: count again
			}
			return failed(err)
		}
		return n + 1, true, nil
	}
	// So many concurrent requests of one client that the count cannot be
	// settled: that client is flooding; refuse this one.
	return l.spec.Limit, false, nil
}

// fail notes a failure of the bucket: the first of an outage is logged,
// and the count read before it (if any) carries over to the local count.
func (l *Limiter) fail(now time.Time, err error, key string, start time.Time, seen int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.down {
		l.down, l.downSince, l.retryAt = true, now, now.Add(l.storeRetry)
		l.log.Warn("rate-limit bucket unavailable; counting in this process with the same limit until it answers", "limit", l.spec.String(), "err", err)
	}
	l.local.seed(key, start, seen)
}

// up notes that the bucket answered with count n; the end of an outage is
// logged. The local count follows the bucket's, so that an outage
// continues the count rather than starting it again.
func (l *Limiter) up(now time.Time, key string, start time.Time, n int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.local.seed(key, start, n)
	if l.down {
		l.down = false
		l.log.Info("rate-limit bucket answers again; counting in it", "outage", now.Sub(l.downSince).Round(time.Millisecond).String())
	}
}

func (l *Limiter) localTake(key string, start time.Time) (int, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.local.take(key, start, l.spec.Limit)
}

// localCounts are the counts of one window in memory, for at most max
// clients; further clients share one count (bounded memory, still limited).
type localCounts struct {
	max   int
	start time.Time
	n     map[string]int
}

const overflowKey = "\x00overflow"

func (c *localCounts) at(start time.Time) {
	if c.n == nil || !c.start.Equal(start) {
		c.start, c.n = start, make(map[string]int)
	}
}

func (c *localCounts) slot(key string) string {
	if _, ok := c.n[key]; !ok && len(c.n) >= c.max {
		return overflowKey
	}
	return key
}

// take counts a request of key in the window of start.
func (c *localCounts) take(key string, start time.Time, limit int) (int, bool) {
	c.at(start)
	key = c.slot(key)
	if c.n[key] >= limit {
		return c.n[key], false
	}
	c.n[key]++
	return c.n[key], true
}

// seed raises key's count to n (a count read from the bucket), unless key
// is not counted apart (the shared count is not raised by one client's).
func (c *localCounts) seed(key string, start time.Time, n int) {
	if n <= 0 {
		return
	}
	c.at(start)
	if c.slot(key) == key {
		c.n[key] = max(c.n[key], n)
	}
}
