// Package ingest moves events from JetStream into the audit store: a durable
// pull consumer, batches by size and time, an ack only after the store has
// committed the batch, and a dead-letter stream for what cannot be stored.
package ingest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/auditrail/auditrail/schemas"
)

// AuditWriter is the store as ingest needs it.
type AuditWriter interface {
	// WriteAudit returns nil only after the batch is durably stored; writing
	// an event again must not make it visible twice.
	WriteAudit(ctx context.Context, events []schemas.AuditEvent) error
}

// Stats are the counters of an ingester.
type Stats struct {
	Received     uint64 `json:"received"`
	Stored       uint64 `json:"stored"`
	DeadLettered uint64 `json:"dead_lettered"`
	Batches      uint64 `json:"batches"`
	Retries      uint64 `json:"retries"`
}

// Ingester consumes one kind of event. Several instances with the same
// Durable share the stream.
type Ingester[T any] struct {
	nc     *nats.Conn
	js     jetstream.JetStream
	cfg    Config
	log    *slog.Logger
	filter string
	decode func(m jetstream.Msg) (T, error)
	write  func(ctx context.Context, batch []T) error

	ready                                            atomic.Bool
	received, stored, deadLettered, batches, retries atomic.Uint64
}

// ExecutionWriter is the store of tool executions as ingest needs it.
type ExecutionWriter interface {
	// WriteExecutions returns nil only after the batch is durably stored.
	WriteExecutions(ctx context.Context, events []schemas.ExecutionEvent) error
}

// NewExecution returns the ingester of tool execution events
// (auditrail.events.*.execution); cfg.Durable should differ from the audit one.
func NewExecution(nc *nats.Conn, store ExecutionWriter, cfg Config, log *slog.Logger) (*Ingester[schemas.ExecutionEvent], error) {
	return newIngester(nc, cfg, log, schemas.SubjectExecAll, DecodeExecution, store.WriteExecutions)
}

// DecodeExecution decodes an execution message and checks it against its
// subject and headers; an error means the message belongs in the DLQ.
func DecodeExecution(m jetstream.Msg) (schemas.ExecutionEvent, error) {
	if s := m.Headers().Get(schemas.HeaderSchema); s != "" && s != schemas.SchemaExecutionV1 {
		return schemas.ExecutionEvent{}, fmt.Errorf("%w: schema %q on an execution subject", ErrRejected, s)
	}
	ev, err := schemas.UnmarshalExecutionEvent(m.Data())
	if err != nil {
		return ev, err
	}
	org, _, ok := schemas.ParseEventSubject(m.Subject())
	if !ok || org != ev.OrganizationID {
		return schemas.ExecutionEvent{}, fmt.Errorf("%w: organization_id %s does not match subject %s", ErrRejected, ev.OrganizationID, m.Subject())
	}
	return ev, nil
}

// NewAudit returns the ingester of audit events (auditrail.events.*.audit).
func NewAudit(nc *nats.Conn, store AuditWriter, cfg Config, log *slog.Logger) (*Ingester[schemas.AuditEvent], error) {
	return newIngester(nc, cfg, log, schemas.SubjectAuditAll, DecodeAudit, store.WriteAudit)
}

func newIngester[T any](nc *nats.Conn, cfg Config, log *slog.Logger, filter string,
	decode func(jetstream.Msg) (T, error), write func(context.Context, []T) error) (*Ingester[T], error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.Default()
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	return &Ingester[T]{nc: nc, js: js, cfg: cfg, log: log.With("consumer", cfg.Durable), filter: filter, decode: decode, write: write}, nil
}

// ErrRejected marks a message that is sent to the dead-letter stream.
var ErrRejected = errors.New("rejected")

// DecodeAudit decodes an audit message and checks it against its subject and
// headers; an error means the message belongs in the DLQ.
func DecodeAudit(m jetstream.Msg) (schemas.AuditEvent, error) {
	if s := m.Headers().Get(schemas.HeaderSchema); s != "" && s != schemas.SchemaAuditV1 {
		return schemas.AuditEvent{}, fmt.Errorf("%w: schema %q on an audit subject", ErrRejected, s)
	}
	ev, err := schemas.UnmarshalAuditEvent(m.Data())
	if err != nil {
		return ev, err
	}
	org, _, ok := schemas.ParseEventSubject(m.Subject())
	if !ok || !sameUUID(org, ev.OrganizationID) {
		return schemas.AuditEvent{}, fmt.Errorf("%w: organization_id %s does not match subject %s", ErrRejected, ev.OrganizationID, m.Subject())
	}
	return ev, nil
}

// sameUUID compares a subject token with a UUID without allocating.
func sameUUID(token string, id uuid.UUID) bool {
	u, err := uuid.Parse(token)
	return err == nil && u == id
}

// Ready reports whether the consumer exists and messages are flowing in.
func (in *Ingester[T]) Ready() bool { return in.ready.Load() }

// Stats returns the counters.
func (in *Ingester[T]) Stats() Stats {
	return Stats{Received: in.received.Load(), Stored: in.stored.Load(), DeadLettered: in.deadLettered.Load(),
		Batches: in.batches.Load(), Retries: in.retries.Load()}
}

// Run consumes until ctx ends, then commits and acknowledges the batch in
// hand (within DrainTimeout) and returns nil. Store and DLQ failures are
// retried with back-off without acknowledging anything, so nothing is lost.
// When the consumer itself fails (deleted, stream gone, connection closed),
// Run reports not ready, backs off and creates it again.
func (in *Ingester[T]) Run(ctx context.Context) error {
	backoff := in.cfg.RetryMin
	for {
		start := time.Now()
		err := in.consume(ctx)
		if ctx.Err() != nil {
			in.log.Info("ingest stopped", "stats", in.Stats())
			return nil
		}
		if time.Since(start) > in.cfg.RetryMax {
			backoff = in.cfg.RetryMin
		}
		in.log.Error("ingest consumer failed; creating it again", "backoff", backoff, "err", err)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, in.cfg.RetryMax)
	}
}

// consume creates the consumer and consumes until ctx ends or the consumer fails.
func (in *Ingester[T]) consume(ctx context.Context) error {
	cons, err := in.js.CreateOrUpdateConsumer(ctx, schemas.StreamEvents, jetstream.ConsumerConfig{
		Durable:       in.cfg.Durable,
		Description:   "auditrail ingest into the audit store",
		FilterSubject: in.filter,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       in.cfg.AckWait,
		MaxAckPending: in.cfg.MaxAckPending,
		MaxDeliver:    -1,
		DeliverPolicy: jetstream.DeliverAllPolicy,
	})
	if err != nil {
		return fmt.Errorf("create consumer %s: %w", in.cfg.Durable, err)
	}
	iter, err := cons.Messages(jetstream.PullMaxMessages(in.cfg.BatchSize))
	if err != nil {
		return fmt.Errorf("consume %s: %w", in.cfg.Durable, err)
	}
	defer iter.Stop()
	in.ready.Store(true)
	defer in.ready.Store(false)
	in.log.Info("ingest started", "filter", in.filter, "batch_size", in.cfg.BatchSize, "flush_interval", in.cfg.FlushInterval)

	// Two stages: this goroutine receives and decodes the next batch while
	// the committer stores and acknowledges the previous one.
	batches := make(chan *batch[T], 1)
	committed := make(chan struct{})
	go func() {
		defer close(committed)
		for b := range batches {
			in.commitAndAck(ctx, b)
		}
	}()
	var runErr error
	for {
		b, err := in.collect(ctx, iter)
		if b != nil {
			batches <- b
		}
		if err != nil {
			if ctx.Err() == nil {
				runErr = err
			} else if rest := in.drain(iter); rest != nil {
				// Stopping: what was already delivered is committed too,
				// rather than left for redelivery after AckWait.
				batches <- rest
			}
			break
		}
	}
	close(batches)
	<-committed
	return runErr
}

// drain stops the iterator and returns the messages it had already
// received, as one batch (nil when there were none).
func (in *Ingester[T]) drain(iter jetstream.MessagesContext) *batch[T] {
	iter.Drain()
	var b *batch[T]
	for {
		m, err := iter.Next(jetstream.NextMaxWait(time.Second))
		if err != nil {
			break
		}
		if b == nil {
			b = &batch[T]{}
		}
		b.add(in, m)
	}
	return b
}

type deadLetter struct {
	msg    jetstream.Msg
	reason string
}

// batch is a set of received messages, decoded.
type batch[T any] struct {
	msgs []jetstream.Msg
	good []T
	dead []deadLetter
}

func (b *batch[T]) add(in *Ingester[T], m jetstream.Msg) {
	in.received.Add(1)
	b.msgs = append(b.msgs, m)
	v, err := in.decode(m)
	if err != nil {
		b.dead = append(b.dead, deadLetter{msg: m, reason: err.Error()})
		return
	}
	b.good = append(b.good, v)
}

// collect returns up to BatchSize decoded messages: it waits for a first
// one, then gathers more for at most FlushInterval. A non-nil error ends the
// run (the batch, if any, is still to be committed).
func (in *Ingester[T]) collect(ctx context.Context, iter jetstream.MessagesContext) (*batch[T], error) {
	first, err := iter.Next(jetstream.NextContext(ctx))
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("next message: %w", err)
	}
	b := &batch[T]{msgs: make([]jetstream.Msg, 0, in.cfg.BatchSize), good: make([]T, 0, in.cfg.BatchSize)}
	b.add(in, first)
	bctx, cancel := context.WithTimeout(ctx, in.cfg.FlushInterval)
	defer cancel()
	for len(b.msgs) < in.cfg.BatchSize {
		m, err := iter.Next(jetstream.NextContext(bctx))
		if err != nil {
			if bctx.Err() != nil {
				break // the batch is due, or the run is ending: flush what we have
			}
			return b, fmt.Errorf("next message: %w", err)
		}
		b.add(in, m)
	}
	return b, nil
}

// commitAndAck commits a batch and acknowledges it. It returns when the
// batch is committed and acknowledged, or when the run has ended and
// DrainTimeout passed during retries (then nothing is acknowledged and
// JetStream redelivers).
func (in *Ingester[T]) commitAndAck(ctx context.Context, b *batch[T]) {
	// After ctx ends, the batch in hand still gets DrainTimeout to commit.
	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	stop := context.AfterFunc(ctx, func() {
		t := time.AfterFunc(in.cfg.DrainTimeout, cancel)
		context.AfterFunc(wctx, func() { t.Stop() })
	})
	defer stop()

	t0 := time.Now()
	backoff := in.cfg.RetryMin
	lastProgress := time.Now()
	for attempt := 0; ; attempt++ {
		err := in.commit(wctx, b.good, b.dead)
		if err == nil {
			break
		}
		if wctx.Err() != nil {
			in.log.Warn("ingest ended before the batch was stored; it will be redelivered", "events", len(b.msgs), "err", err)
			return
		}
		in.retries.Add(1)
		in.log.Error("storing batch failed; retrying", "events", len(b.msgs), "attempt", attempt+1, "backoff", backoff, "err", err)
		select {
		case <-wctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, in.cfg.RetryMax)
		// Keep the held batch from being redelivered meanwhile.
		if time.Since(lastProgress) > in.cfg.AckWait/3 {
			for _, m := range b.msgs {
				_ = m.InProgress()
			}
			lastProgress = time.Now()
		}
	}
	t1 := time.Now()
	in.ack(b.msgs)
	in.stored.Add(uint64(len(b.good)))
	in.deadLettered.Add(uint64(len(b.dead)))
	in.batches.Add(1)
	in.log.Debug("batch committed", "events", len(b.msgs), "dead", len(b.dead), "store", t1.Sub(t0), "ack", time.Since(t1))
}

// ack acknowledges every message of a committed batch. (AckAll would be
// cheaper but unsafe: it acknowledges what other instances sharing the
// durable still hold.)
func (in *Ingester[T]) ack(msgs []jetstream.Msg) {
	for _, m := range msgs {
		if err := m.Ack(); err != nil {
			in.log.Warn("ack failed; the event will be redelivered and deduplicated", "err", err)
		}
	}
}

// commit sends the dead letters (waiting for their acks) and writes the batch.
func (in *Ingester[T]) commit(ctx context.Context, good []T, dead []deadLetter) error {
	if len(dead) > 0 {
		if err := in.publishDead(ctx, dead); err != nil {
			return err
		}
	}
	if len(good) > 0 {
		if err := in.write(ctx, good); err != nil {
			return fmt.Errorf("write batch: %w", err)
		}
	}
	return nil
}

func (in *Ingester[T]) publishDead(ctx context.Context, dead []deadLetter) error {
	futures := make([]jetstream.PubAckFuture, 0, len(dead))
	for _, d := range dead {
		meta, err := d.msg.Metadata()
		if err != nil {
			return fmt.Errorf("dead letter metadata: %w", err)
		}
		out := nats.NewMsg(schemas.DLQSubject(d.msg.Subject()))
		out.Data = d.msg.Data()
		for k, v := range d.msg.Headers() {
			out.Header[k] = v
		}
		seq := strconv.FormatUint(meta.Sequence.Stream, 10)
		out.Header.Set(schemas.HeaderMsgID, "dlq-"+meta.Stream+"-"+seq)
		out.Header.Set(schemas.HeaderDLQReason, d.reason)
		out.Header.Set(schemas.HeaderDLQSubject, d.msg.Subject())
		out.Header.Set(schemas.HeaderDLQStreamSeq, seq)
		in.log.Warn("dead-lettering event", "subject", d.msg.Subject(), "stream_seq", seq, "reason", d.reason)
		f, err := in.js.PublishMsgAsync(out)
		if err != nil {
			return fmt.Errorf("publish dead letter: %w", err)
		}
		futures = append(futures, f)
	}
	for _, f := range futures {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			return fmt.Errorf("publish dead letter: %w", err)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}
