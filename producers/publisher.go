// Package producers publishes auditrail events to JetStream: encoded once
// (an event without a salt is given one then, see Message), with
// Nats-Msg-Id = event_id so that a re-publish is stored once, with a
// bounded number of unacknowledged messages, and never dropped: a call
// returns nil only once every event is stored in the stream.
package producers

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/auditrail/auditrail/internal/retry"
	"github.com/auditrail/auditrail/schemas"
)

// Sentinel errors.
var (
	ErrInvalidOption = errors.New("invalid option")
	// ErrEncode: an event could not be encoded; nothing of the call was published.
	ErrEncode = errors.New("cannot encode event")
	// ErrRejected: the stream refused a message for a reason that a retry cannot fix.
	ErrRejected = errors.New("event rejected by the stream")
)

// Event is what the publisher sends: schemas.AuditEvent and schemas.ExecutionEvent.
type Event interface {
	Key() string
	Subject() string
	Schema() string
	Marshal() ([]byte, error)
}

// Config tunes a Publisher.
type Config struct {
	// MaxInFlight bounds the messages published and not yet acknowledged,
	// across all calls of the publisher.
	MaxInFlight int
	// AckTimeout is how long one publish waits for its ack before it counts
	// as failed and is retried.
	AckTimeout time.Duration
	// RetryMin and RetryMax bound the exponential back-off between rounds of
	// retries of failed publishes.
	RetryMin, RetryMax time.Duration
}

// DefaultConfig returns 4096 in flight, a 5 s ack timeout and back-off from
// 50 ms to 2 s.
func DefaultConfig() Config {
	return Config{MaxInFlight: 4096, AckTimeout: 5 * time.Second, RetryMin: 50 * time.Millisecond, RetryMax: 2 * time.Second}
}

// Validate checks the configuration.
func (c Config) Validate() error {
	switch {
	case c.MaxInFlight < 1:
		return fmt.Errorf("%w: max in flight %d < 1", ErrInvalidOption, c.MaxInFlight)
	case c.AckTimeout <= 0:
		return fmt.Errorf("%w: ack timeout must be positive", ErrInvalidOption)
	case c.RetryMin <= 0 || c.RetryMax < c.RetryMin:
		return fmt.Errorf("%w: retry back-off %s..%s", ErrInvalidOption, c.RetryMin, c.RetryMax)
	}
	return nil
}

// Publisher publishes events. It is safe for concurrent use.
type Publisher struct {
	js  jetstream.JetStream
	cfg Config
	log *slog.Logger
	sem chan struct{}
}

// New returns a publisher on nc.
func New(nc *nats.Conn, cfg Config, log *slog.Logger) (*Publisher, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.Default()
	}
	js, err := jetstream.New(nc,
		jetstream.WithPublishAsyncMaxPending(2*cfg.MaxInFlight),
		jetstream.WithPublishAsyncTimeout(cfg.AckTimeout),
	)
	if err != nil {
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	return &Publisher{js: js, cfg: cfg, log: log, sem: make(chan struct{}, cfg.MaxInFlight)}, nil
}

// Publish publishes one event and waits until the stream has stored it,
// retrying transient failures until ctx ends.
func (p *Publisher) Publish(ctx context.Context, ev Event) error {
	return p.PublishBatch(ctx, []Event{ev})
}

// PublishBatch publishes events asynchronously and returns nil only when the
// stream has stored every one of them. Failed publishes are retried with the
// same Nats-Msg-Id, so a message whose ack was lost is still stored once. It
// returns an error when ctx ends first (some events may then be stored, none
// twice), when an event cannot be encoded (before anything is published), or
// when the stream rejects a message permanently.
func (p *Publisher) PublishBatch(ctx context.Context, evs []Event) error {
	msgs := make([]*nats.Msg, len(evs))
	for i, ev := range evs {
		m, err := Message(ev)
		if err != nil {
			return err
		}
		msgs[i] = m
	}
	return p.PublishMsgs(ctx, msgs)
}

// salted is an event that carries a salt (schemas.AuditEvent and
// schemas.ExecutionEvent): EnsureSalt gives it one when it has none.
type salted interface{ EnsureSalt() error }

// saltMu orders the salting of an event before every later read of its
// salt, so that an event encoded by several goroutines at once gets one.
var saltMu sync.Mutex

// Message encodes ev as the NATS message that the publisher sends. An
// event without a salt is given one first (16 bytes of crypto/rand, set
// on ev): the message, and any message of ev encoded later (a publish
// retried by the caller, a copy of the outbox), carries that same salt,
// and an event that has a salt keeps it. A copy of an event made after it
// was encoded carries its salt: clear Salt to publish the copy as a new
// event.
func Message(ev Event) (*nats.Msg, error) {
	if s, ok := ev.(salted); ok {
		saltMu.Lock()
		err := s.EnsureSalt()
		saltMu.Unlock()
		if err != nil {
			return nil, fmt.Errorf("%w %s: %w", ErrEncode, ev.Key(), err)
		}
	}
	b, err := ev.Marshal()
	if err != nil {
		return nil, fmt.Errorf("%w %s: %w", ErrEncode, ev.Key(), err)
	}
	m := nats.NewMsg(ev.Subject())
	m.Data = b
	m.Header.Set(schemas.HeaderMsgID, ev.Key())
	m.Header.Set(schemas.HeaderContentType, schemas.ContentMsgpack)
	m.Header.Set(schemas.HeaderSchema, ev.Schema())
	return m, nil
}

// PublishMsgs publishes prepared messages with the guarantees of PublishBatch.
func (p *Publisher) PublishMsgs(ctx context.Context, msgs []*nats.Msg) error {
	pending := make([]int, len(msgs))
	for i := range pending {
		pending[i] = i
	}
	policy := retry.Policy{Initial: p.cfg.RetryMin, Max: p.cfg.RetryMax}
	err := retry.Do(ctx, policy, func(ctx context.Context) error {
		failed, err := p.round(ctx, msgs, pending)
		if err != nil {
			return retry.Permanent(err) // refused by the stream, or ctx ended
		}
		pending = failed
		if len(pending) > 0 {
			return fmt.Errorf("%d of %d events unconfirmed", len(pending), len(msgs))
		}
		return nil
	}, func(err error, wait time.Duration) {
		p.log.Warn("retrying event publishes", "count", len(pending), "backoff", wait, "err", err)
	})
	if err != nil && ctx.Err() != nil && err == context.Cause(ctx) {
		// ctx ended between two rounds.
		return fmt.Errorf("publish: %d of %d events unconfirmed: %w", len(pending), len(msgs), err)
	}
	return err
}

type inflight struct {
	idx int
	f   jetstream.PubAckFuture
}

// round publishes msgs[pending] once and returns the indexes that failed transiently.
func (p *Publisher) round(ctx context.Context, msgs []*nats.Msg, pending []int) (failed []int, err error) {
	var queue []inflight
	// wait resolves the oldest message in flight of this call.
	wait := func() error {
		head := queue[0]
		queue = queue[1:]
		defer func() { <-p.sem }()
		select {
		case <-head.f.Ok():
			return nil
		case perr := <-head.f.Err():
			if permanent(perr) {
				return fmt.Errorf("%w: %s: %w", ErrRejected, msgs[head.idx].Subject, perr)
			}
			failed = append(failed, head.idx)
			return nil
		case <-ctx.Done():
			failed = append(failed, head.idx)
			return fmt.Errorf("publish: unconfirmed events: %w", ctx.Err())
		}
	}
	drain := func() {
		for range queue {
			<-p.sem
		}
		queue = nil
	}
	for _, i := range pending {
		// Take a slot; when none is free, free one of ours first, or wait
		// for another caller to free one.
		for acquired := false; !acquired; {
			select {
			case p.sem <- struct{}{}:
				acquired = true
			default:
				if len(queue) > 0 {
					if err := wait(); err != nil {
						drain()
						return nil, err
					}
					continue
				}
				select {
				case p.sem <- struct{}{}:
					acquired = true
				case <-ctx.Done():
					return nil, fmt.Errorf("publish: waiting for a slot: %w", ctx.Err())
				}
			}
		}
		f, perr := p.js.PublishMsgAsync(msgs[i])
		if perr != nil {
			<-p.sem
			if permanent(perr) {
				drain()
				return nil, fmt.Errorf("%w: %s: %w", ErrRejected, msgs[i].Subject, perr)
			}
			failed = append(failed, i)
			continue
		}
		queue = append(queue, inflight{idx: i, f: f})
	}
	for len(queue) > 0 {
		if err := wait(); err != nil {
			drain()
			return nil, err
		}
	}
	return failed, nil
}

// errCodeDuplicateInProcess (409) answers a publish whose Nats-Msg-Id is
// the one of a publish the stream has not yet stored: during a leader
// election the first attempt may still be proposed when the retry comes.
// The retry after it is answered as a duplicate (stored once) or stores it.
const errCodeDuplicateInProcess jetstream.ErrorCode = 10158

// permanent reports whether a publish error cannot be fixed by retrying: the
// server refused the message itself (too large, or an API error other than
// unavailability).
func permanent(err error) bool {
	if errors.Is(err, nats.ErrMaxPayload) || errors.Is(err, nats.ErrBadSubject) {
		return true
	}
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		switch apiErr.Code {
		case 503, 408, 429: // unavailable, timeout, too many requests
			return false
		}
		if apiErr.ErrorCode == errCodeDuplicateInProcess {
			return false
		}
		return apiErr.ErrorCode != jetstream.JSErrCodeJetStreamNotEnabled &&
			apiErr.ErrorCode != jetstream.JSErrCodeJetStreamNotEnabledForAccount
	}
	return false
}
