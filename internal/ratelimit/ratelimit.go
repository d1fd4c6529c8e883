// Package ratelimit counts requests per client in fixed windows kept in a
// NATS KV bucket, so that every instance of a service shares one limit.
package ratelimit

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// ErrInvalidSpec is returned for a limit that cannot be parsed.
var ErrInvalidSpec = errors.New("invalid rate limit")

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
}

// Limiter is a fixed-window counter per client, shared through KV with
// compare-and-set, so concurrent instances never over-admit.
type Limiter struct {
	kv   jetstream.KeyValue
	spec Spec
	now  func() time.Time
}

// Option configures a Limiter.
type Option func(*Limiter)

// WithClock makes the limiter read the time from now (tests).
func WithClock(now func() time.Time) Option { return func(l *Limiter) { l.now = now } }

// New returns a limiter on bucket (created if missing) whose counters
// expire two windows after they start.
func New(ctx context.Context, js jetstream.JetStream, bucket string, spec Spec, opts ...Option) (*Limiter, error) {
	kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket:      bucket,
		Description: "auditrail rate-limit counters",
		History:     1,
		TTL:         2 * spec.Window,
		Storage:     jetstream.MemoryStorage,
	})
	if err != nil {
		return nil, fmt.Errorf("rate-limit bucket %s: %w", bucket, err)
	}
	l := &Limiter{kv: kv, spec: spec, now: time.Now}
	for _, o := range opts {
		o(l)
	}
	return l, nil
}

// Spec returns the limit.
func (l *Limiter) Spec() Spec { return l.spec }

// Allow counts one request of client and says whether it is within the limit.
func (l *Limiter) Allow(ctx context.Context, client string) (Decision, error) {
	now := l.now()
	start := now.Truncate(l.spec.Window)
	d := Decision{Limit: l.spec.Limit, Reset: start.Add(l.spec.Window)}
	key := base64.RawURLEncoding.EncodeToString([]byte(client)) + "." + strconv.FormatInt(start.Unix(), 10)
	for attempt := 0; attempt < 50; attempt++ {
		if attempt > 0 {
			// Lost a compare-and-set race: back off a little, at random.
			time.Sleep(time.Duration(rand.Int64N(int64(attempt)*int64(200*time.Microsecond) + 1)))
		}
		e, err := l.kv.Get(ctx, key)
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
			if _, err := l.kv.Create(ctx, key, []byte("1")); err != nil {
				if errors.Is(err, jetstream.ErrKeyExists) {
					continue
				}
				return d, fmt.Errorf("rate limit: %w", err)
			}
			d.Allowed, d.Remaining = true, l.spec.Limit-1
			return d, nil
		case err != nil:
			return d, fmt.Errorf("rate limit: %w", err)
		}
		n, _ := strconv.Atoi(string(e.Value()))
		if n >= l.spec.Limit {
			return d, nil
		}
		if _, err := l.kv.Update(ctx, key, []byte(strconv.Itoa(n+1)), e.Revision()); err != nil {
			var apiErr *jetstream.APIError
			if errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence {
				continue // another request counted first: count again
			}
			return d, fmt.Errorf("rate limit: %w", err)
		}
		d.Allowed, d.Remaining = true, l.spec.Limit-n-1
		return d, nil
	}
	// So many concurrent requests of one client that the count cannot be
	// settled: that client is flooding; refuse this one.
	return d, nil
}
