// Package retry is the one retry helper of auditrail: exponential back-off
// with jitter (cenkalti/backoff/v5) behind a small policy type, so that every
// loop that waits and tries again (publishing, ingest, hook calls, start-up
// waits) backs off the same way and stops on the same signals.
package retry

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cenkalti/backoff/v5"
)

// ErrInvalidPolicy is returned by Validate.
var ErrInvalidPolicy = errors.New("invalid retry policy")

// Policy says how to back off between attempts.
type Policy struct {
	// Initial is the first wait; each later wait is Multiplier times longer,
	// up to Max.
	Initial, Max time.Duration
	// Multiplier of the wait per attempt (default 2).
	Multiplier float64
	// Jitter spreads each wait by ±Jitter of its length (0..1; default 0.2,
	// a negative value disables it).
	Jitter float64
	// MaxAttempts bounds the attempts in all (0: unbounded).
	MaxAttempts int
	// MaxElapsed bounds the time spent (0: unbounded).
	MaxElapsed time.Duration
}

// Default is 100 ms doubling to 5 s with 20 % jitter, unbounded.
func Default() Policy { return Policy{Initial: 100 * time.Millisecond, Max: 5 * time.Second} }

// Validate checks the policy.
func (p Policy) Validate() error {
	switch {
	case p.Initial <= 0:
		return fmt.Errorf("%w: initial wait %v must be positive", ErrInvalidPolicy, p.Initial)
	case p.Max < p.Initial:
		return fmt.Errorf("%w: max wait %v below the initial %v", ErrInvalidPolicy, p.Max, p.Initial)
	case p.Multiplier != 0 && p.Multiplier < 1:
		return fmt.Errorf("%w: multiplier %v below 1", ErrInvalidPolicy, p.Multiplier)
	case p.Jitter > 1:
		return fmt.Errorf("%w: jitter %v above 1", ErrInvalidPolicy, p.Jitter)
	case p.MaxAttempts < 0 || p.MaxElapsed < 0:
		return fmt.Errorf("%w: negative bound", ErrInvalidPolicy)
	}
	return nil
}

// Backoff returns the sequence of waits of the policy (for loops that keep
// their own state between attempts; call Reset after a success).
func (p Policy) Backoff() *backoff.ExponentialBackOff {
	b := backoff.NewExponentialBackOff()
	b.InitialInterval = p.Initial
	b.MaxInterval = p.Max
	b.Multiplier = 2
	if p.Multiplier != 0 {
		b.Multiplier = p.Multiplier
	}
	switch {
	case p.Jitter < 0:
		b.RandomizationFactor = 0
	case p.Jitter == 0:
		b.RandomizationFactor = 0.2
	default:
		b.RandomizationFactor = p.Jitter
	}
	b.Reset()
	return b
}

// Permanent marks err as not worth retrying: Do returns it at once.
func Permanent(err error) error { return backoff.Permanent(err) }

// Do calls fn until it returns nil, a Permanent error, ctx ends, or the
// policy's bounds are reached; it returns fn's last error (unwrapped from
// Permanent), or ctx's error when ctx ended first. notify, when not nil, is
// told of each failure and the wait before the next attempt.
func Do(ctx context.Context, p Policy, fn func(ctx context.Context) error, notify func(err error, wait time.Duration)) error {
	opts := []backoff.RetryOption{backoff.WithBackOff(p.Backoff()), backoff.WithMaxElapsedTime(p.MaxElapsed)}
	if p.MaxAttempts > 0 {
		opts = append(opts, backoff.WithMaxTries(uint(p.MaxAttempts)))
	}
	if notify != nil {
		opts = append(opts, backoff.WithNotify(func(err error, d time.Duration) { notify(err, d) }))
	}
	_, err := backoff.Retry(ctx, func() (struct{}, error) { return struct{}{}, fn(ctx) }, opts...)
	if perm, ok := errors.AsType[*backoff.PermanentError](err); ok {
		return perm.Err
	}
	return err
}

// Sleep waits d or until ctx ends; it reports whether the whole wait passed.
func Sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
