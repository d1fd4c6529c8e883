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
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/auditrail/auditrail/internal/auditstore"
	"github.com/auditrail/auditrail/internal/natsx"
	"github.com/auditrail/auditrail/internal/retry"
	"github.com/auditrail/auditrail/schemas"
)

// AuditWriter is the store as ingest needs it.
type AuditWriter interface {
	// WriteAudit returns nil only after the batch is durably stored; writing
	// an event again must not make it visible twice.
	WriteAudit(ctx context.Context, events []schemas.AuditEvent) error
	// Ping reports whether the store answers: after a failed write, ingest
	// says whether a store that failed a write still answers (for the log).
	Ping(ctx context.Context) error
}

// Stats are the counters of an ingester.
type Stats struct {
	Received     uint64 `json:"received"`
	Stored       uint64 `json:"stored"`
	DeadLettered uint64 `json:"dead_lettered"`
	// Refused counts the events dead-lettered because the store refused them.
	Refused uint64 `json:"refused"`
	Batches uint64 `json:"batches"`
	Retries uint64 `json:"retries"`
	// SetAside counts messages that could be neither stored nor
	// dead-lettered: left in the stream, delivered again later.
	SetAside uint64 `json:"set_aside"`
}

// Ingester consumes one kind of event. Several instances with the same
// Durable share the stream.
type Ingester[T any] struct {
	nc     *nats.Conn
	js     jetstream.JetStream
	cfg    Config
	log    *slog.Logger
	policy retry.Policy
	filter string
	decode func(m jetstream.Msg) (T, error)
	// when returns the time of an event, named field in dead-letter reasons.
	when  func(*T) time.Time
	field string
	write func(ctx context.Context, batch []T) error
	ping  func(ctx context.Context) error
	// begin starts a streamed insert (nil: the store has none, and every
	// batch is its own write).
	begin func(ctx context.Context) (auditstore.Insert[T], error)
	// noInserts: begin answered auditstore.ErrNoInserts (the store behind
	// a wrapper takes none): every batch is its own write.
	noInserts atomic.Bool

	obs Observer // nil: none

	ready                                                               atomic.Bool
	received, stored, deadLettered, refused, batches, retries, setAside atomic.Uint64
}

// ExecutionWriter is the store of tool executions as ingest needs it.
type ExecutionWriter interface {
	// WriteExecutions returns nil only after the batch is durably stored.
	WriteExecutions(ctx context.Context, events []schemas.ExecutionEvent) error
	// Ping reports whether the store answers (see AuditWriter).
	Ping(ctx context.Context) error
}

// auditStreamer is a store that takes streamed inserts of audit events
// (ClickHouse): batches that arrive while a backlog waits are written as
// blocks of one insert, and ingest keeps only their acks.
type auditStreamer interface {
	BeginAudit(ctx context.Context) (auditstore.Insert[schemas.AuditEvent], error)
}

// executionStreamer is auditStreamer for tool executions.
type executionStreamer interface {
	BeginExecutions(ctx context.Context) (auditstore.Insert[schemas.ExecutionEvent], error)
}

// NewExecution returns the ingester of tool execution events
// (auditrail.events.*.execution); cfg.Durable should differ from the audit one.
func NewExecution(nc *nats.Conn, store ExecutionWriter, cfg Config, log *slog.Logger) (*Ingester[schemas.ExecutionEvent], error) {
	in, err := newIngester(nc, cfg, log, schemas.SubjectExecAll, natsx.DecodeExecution, "started_at",
		func(e *schemas.ExecutionEvent) time.Time { return e.StartedAt }, store.WriteExecutions, store.Ping)
	if st, ok := store.(executionStreamer); ok && err == nil {
		in.begin = st.BeginExecutions
	}
	return in, err
}

// NewAudit returns the ingester of audit events (auditrail.events.*.audit).
func NewAudit(nc *nats.Conn, store AuditWriter, cfg Config, log *slog.Logger) (*Ingester[schemas.AuditEvent], error) {
	in, err := newIngester(nc, cfg, log, schemas.SubjectAuditAll, natsx.DecodeAudit, "timestamp",
		func(e *schemas.AuditEvent) time.Time { return e.Timestamp }, store.WriteAudit, store.Ping)
	if st, ok := store.(auditStreamer); ok && err == nil {
		in.begin = st.BeginAudit
	}
	return in, err
}

func newIngester[T any](nc *nats.Conn, cfg Config, log *slog.Logger, filter string,
	decode func(jetstream.Msg) (T, error), field string, when func(*T) time.Time,
	write func(context.Context, []T) error, ping func(context.Context) error) (*Ingester[T], error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.Default()
	}
	// An async publish (a dead letter, a commit mark) whose ack never
	// comes (a stream leader lost with it) fails after a while, and the
	// commit is tried again, rather than waiting forever.
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncTimeout(asyncPublishTimeout))
	if err != nil {
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	return &Ingester[T]{nc: nc, js: js, cfg: cfg, log: log.With("consumer", cfg.Durable),
		policy: retry.Policy{Initial: cfg.RetryMin, Max: cfg.RetryMax}, filter: filter, decode: decode,
		field: field, when: when, write: write, ping: ping}, nil
}

// asyncPublishTimeout bounds the wait for the ack of a dead letter or a
// commit mark (a variable: the tests shorten it).
var asyncPublishTimeout = 10 * time.Second

// ErrRejected marks a message that is sent to the dead-letter stream
// (natsx.ErrRejected, the decoders' too).
var ErrRejected = natsx.ErrRejected

// Observer times the commits of an ingester (metrics.Registry's ingest
// observer implements it).
type Observer interface {
	// ObserveCommit reports a committed batch: the time its store write
	// and dead letters took, and the rows it stored.
	ObserveCommit(d time.Duration, rows int)
}

// ObserveWith reports each commit to o; call it before Run.
func (in *Ingester[T]) ObserveWith(o Observer) { in.obs = o }

// Ready reports whether the consumer exists and messages are flowing in.
func (in *Ingester[T]) Ready() bool { return in.ready.Load() }

// Stats returns the counters.
func (in *Ingester[T]) Stats() Stats {
	return Stats{Received: in.received.Load(), Stored: in.stored.Load(), DeadLettered: in.deadLettered.Load(),
		Refused: in.refused.Load(), Batches: in.batches.Load(), Retries: in.retries.Load(), SetAside: in.setAside.Load()}
}

// Run consumes until ctx ends, then commits and acknowledges the batch in
// hand (within DrainTimeout) and returns nil. A store outage is retried with
// back-off without acknowledging anything, so nothing is lost; rows that the
// store refuses while it answers are dead-lettered one by one. When the
// consumer itself fails (deleted, stream gone, connection closed), Run
// reports not ready, backs off and creates it again.
func (in *Ingester[T]) Run(ctx context.Context) error {
	bo := in.policy.Backoff()
	for {
		start := time.Now()
		err := in.consume(ctx)
		if ctx.Err() != nil {
			in.log.Info("ingest stopped", "stats", in.Stats())
			return nil
		}
		if time.Since(start) > in.cfg.RetryMax {
			bo.Reset() // it ran a while: start the back-off over
		}
		wait := bo.NextBackOff()
		in.log.Error("ingest consumer failed; creating it again", "backoff", wait, "err", err)
		if !retry.Sleep(ctx, wait) {
			in.log.Info("ingest stopped", "stats", in.Stats())
			return nil
		}
	}
}

// maxAckPending is Config.MaxAckPending, raised to what the batches in
// flight hold (Writers being written, one being received, the client
// buffer; with streamed inserts, each writer's insert holds up to
// InsertRows more): a lower bound would stall the batch being received.
func (in *Ingester[T]) maxAckPending() int {
	held := in.cfg.BatchSize
	if in.streams() {
		held += in.cfg.InsertRows
	}
	return max(in.cfg.MaxAckPending, in.cfg.Writers*held+in.cfg.BatchSize+min(in.cfg.FetchSize, in.cfg.BatchSize))
}

// streams reports whether batches are written as blocks of streamed inserts.
func (in *Ingester[T]) streams() bool { return in.begin != nil && in.cfg.InsertRows > 0 }

// consume creates the consumer and consumes until ctx ends or the consumer fails.
func (in *Ingester[T]) consume(ctx context.Context) error {
	cons, err := in.js.CreateOrUpdateConsumer(ctx, schemas.StreamEvents, jetstream.ConsumerConfig{
		Durable:       in.cfg.Durable,
		Description:   "auditrail ingest into the audit store",
		FilterSubject: in.filter,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       in.cfg.AckWait,
		MaxAckPending: in.maxAckPending(),
		// Unlimited: JetStream's own limit stops delivering a message
		// silently. Ingest counts deliveries itself and dead-letters a
		// message delivered more than Config.MaxDeliver times.
		MaxDeliver:    -1,
		DeliverPolicy: jetstream.DeliverAllPolicy,
	})
	if err != nil {
		return fmt.Errorf("create consumer %s: %w", in.cfg.Durable, err)
	}
	// A small client buffer: what is in flight is the two batches, bounded
	// by count and bytes. (PullMaxMessagesWithBytesLimit would bound each
	// pull request by bytes too, but with it nats.go v1.55 overflows its
	// buffer now and then: "slow consumer, messages dropped".)
	iter, err := cons.Messages(jetstream.PullMaxMessages(min(in.cfg.FetchSize, in.cfg.BatchSize)))
	if err != nil {
		return fmt.Errorf("consume %s: %w", in.cfg.Durable, err)
	}
	defer iter.Stop()
	in.ready.Store(true)
	defer in.ready.Store(false)
	in.log.Info("ingest started", "filter", in.filter, "batch_size", in.cfg.BatchSize, "batch_bytes", in.cfg.BatchBytes,
		"fetch_size", min(in.cfg.FetchSize, in.cfg.BatchSize), "flush_interval", in.cfg.FlushInterval, "streamed_insert_rows", in.streamedRows())

	// Two stages: this goroutine receives and decodes the next batch while
	// Writers committers store and acknowledge the previous ones (a store
	// write is mostly waiting for the store).
	batches := make(chan *batch[T])
	var committers sync.WaitGroup
	for w := range in.cfg.Writers {
		committers.Go(func() {
			if in.streams() {
				in.streamBatches(ctx, batches, w)
				return
			}
			for b := range batches {
				in.commitAndAck(ctx, b)
			}
		})
	}
	var runErr error
	for {
		b, err := in.collect(ctx, iter)
		if b != nil {
			in.handOver(batches, b)
		}
		if err != nil {
			if ctx.Err() == nil {
				runErr = err
			} else if rest := in.drain(iter); rest != nil {
				// Stopping: what was already delivered is committed too,
				// rather than left for redelivery after AckWait.
				in.handOver(batches, rest)
			}
			break
		}
	}
	close(batches)
	committers.Wait()
	// The acks are publications: sent before the run returns (and the
	// caller closes the connection), not left in the client's buffer.
	if err := in.nc.FlushTimeout(time.Second); err != nil {
		in.log.Warn("the last acks may not have reached NATS; their events will be delivered again and stored once", "err", err)
	}
	return runErr
}

// handOver passes a complete batch to the committer, keeping its messages
// alive until they are acknowledged.
func (in *Ingester[T]) handOver(batches chan<- *batch[T], b *batch[T]) {
	b.stopKeepAlive = in.keepAlive(b.replies)
	batches <- b
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
	// tries counts failed publications; after deadLetterTries the dead
	// letter is set aside (not acknowledged, redelivered later) so that it
	// does not hold up its batch.
	tries int
	sent  bool
	// setAside: could not be dead-lettered; left unacknowledged.
	setAside bool
}

// deadLetterTries is how often a dead letter is published before it is set
// aside, and setAsideDelay how long JetStream then waits to deliver its
// message again.
const (
	deadLetterTries = 3
	setAsideDelay   = 5 * time.Minute
)

// dlqHeaders are the headers of a dead message copied into its dead
// letter: only these, so that no header of the sender's (Nats-Rollup,
// Nats-Expected-*, Nats-TTL, …) can make the dead letter's publication fail
// or act on the DLQ stream. Its Nats-Msg-Id is kept as HeaderDLQMsgID.
var dlqHeaders = []string{schemas.HeaderContentType, schemas.HeaderSchema}

// maxDLQHeader bounds a copied header value.
const maxDLQHeader = 256

// span is the range [lo, hi) of a batch's good events.
type span struct{ lo, hi int }

// batch is a set of received messages, decoded, and the progress of its commit.
type batch[T any] struct {
	n        int             // messages
	replies  []string        // the reply subject of every message: its ack
	good     []T             // the events to store
	goodMsgs []jetstream.Msg // the message of each good event
	dead     []*deadLetter   // the messages to dead-letter
	bytes    int             // payload bytes of the messages
	// redelivered: a message of it was delivered before (an insert that
	// failed, an ingest that stopped): the batch is written on its own.
	redelivered bool
	// marks is the highest stream sequence of the good events of each
	// subject (set when the events are dropped; nil: read goodMsgs).
	marks map[string]uint64

	pending []span // good events not yet stored
	started bool   // pending was set
	marked  bool   // the commit marks were published
	// streamed: written as a block of a streamed insert, which commits it.
	streamed bool

	stopKeepAlive func()
}

// minTimestamp is the earliest event time ingest accepts.
var minTimestamp = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

func (b *batch[T]) add(in *Ingester[T], m jetstream.Msg) {
	in.received.Add(1)
	b.n++
	b.replies = append(b.replies, m.Reply())
	b.bytes += len(m.Data())
	delivered, _ := numDelivered(m.Reply()) // 0: not a JetStream reply
	if delivered > 1 {
		b.redelivered = true
	}
	v, err := in.accept(m, delivered)
	if err != nil {
		b.dead = append(b.dead, &deadLetter{msg: m, reason: err.Error()})
		return
	}
	b.good = append(b.good, v)
	b.goodMsgs = append(b.goodMsgs, m)
}

// accept decodes a message and checks what the decoder cannot: how often it
// was delivered (delivered, read from its reply subject; 0: unknown) and
// whether its time is plausible. An error means the DLQ.
func (in *Ingester[T]) accept(m jetstream.Msg, delivered uint64) (T, error) {
	var zero T
	if delivered > uint64(in.cfg.MaxDeliver) {
		return zero, fmt.Errorf("%w: delivered %d times without being committed (max deliver %d)", ErrRejected, delivered, in.cfg.MaxDeliver)
	}
	v, err := in.decode(m)
	if err != nil {
		return zero, err
	}
	ts := in.when(&v)
	if ts.Before(minTimestamp) {
		return zero, fmt.Errorf("%w: %s %s is before 2000-01-01", ErrRejected, in.field, ts.UTC().Format(time.RFC3339Nano))
	}
	if limit := time.Now().Add(in.cfg.MaxFuture); ts.After(limit) {
		return zero, fmt.Errorf("%w: %s %s is more than %s ahead of the ingest clock", ErrRejected, in.field, ts.UTC().Format(time.RFC3339Nano), in.cfg.MaxFuture)
	}
	return v, nil
}

// numDelivered reads the delivery count from the reply subject of a
// JetStream message, as Msg.Metadata does but without allocating (it was
// 4% of the CPU of ingest): $JS.ACK.<stream>.<consumer>.<delivered>.… (9
// tokens), or $JS.ACK.<domain>.<account hash>.<stream>.<consumer>.<delivered>.…
// (11 or more). ok is false when reply is not such a subject.
func numDelivered(reply string) (n uint64, ok bool) { return replyNumber(reply, 0) }

// streamSeq reads the stream sequence from the reply subject of a
// JetStream message, as numDelivered reads the delivery count.
func streamSeq(reply string) (n uint64, ok bool) { return replyNumber(reply, 1) }

// replyNumber reads the number at position at (0: the delivery count, 1:
// the stream sequence) after the consumer's name in a JetStream reply
// subject.
func replyNumber(reply string, at int) (n uint64, ok bool) {
	rest, found := strings.CutPrefix(reply, "$JS.ACK.")
	if !found {
		return 0, false
	}
	tokens := strings.Count(rest, ".") + 3
	var skip int
	switch {
	case tokens == 9:
		skip = 2 // <stream>.<consumer>
	case tokens >= 11:
		skip = 4 // <domain>.<account hash>.<stream>.<consumer>
	default:
		return 0, false
	}
	for range skip + at {
		_, rest, _ = strings.Cut(rest, ".")
	}
	tok, _, _ := strings.Cut(rest, ".")
	if tok == "" {
		return 0, false
	}
	for i := 0; i < len(tok); i++ {
		c := tok[i]
		if c < '0' || c > '9' || n > (1<<64-1-uint64(c-'0'))/10 {
			return 0, false
		}
		n = n*10 + uint64(c-'0')
	}
	return n, true
}

// collect returns up to BatchSize decoded messages (and about BatchBytes of
// payload): it waits for a first one, then gathers more for at most
// FlushInterval. A non-nil error ends the run (the batch, if any, is still
// to be committed).
func (in *Ingester[T]) collect(ctx context.Context, iter jetstream.MessagesContext) (*batch[T], error) {
	first, err := iter.Next(jetstream.NextContext(ctx))
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("next message: %w", err)
	}
	n := in.cfg.BatchSize
	b := &batch[T]{replies: make([]string, 0, n), good: make([]T, 0, n), goodMsgs: make([]jetstream.Msg, 0, n)}
	b.add(in, first)
	bctx, cancel := context.WithTimeout(ctx, in.cfg.FlushInterval)
	defer cancel()
	for b.n < in.cfg.BatchSize && b.bytes < in.cfg.BatchBytes {
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
	wctx, cancel := in.detach(ctx)
	defer cancel()

	t0 := time.Now()
	err := retry.Do(wctx, in.policy, func(ctx context.Context) error { return in.commit(ctx, b) },
		func(err error, wait time.Duration) {
			in.retries.Add(1)
			in.log.Error("storing batch failed; retrying", "events", b.n, "backoff", wait, "err", err)
		})
	b.stopKeepAlive()
	if err != nil {
		in.log.Warn("ingest ended before the batch was stored; it will be redelivered", "events", b.n, "err", err)
		return
	}
	t1 := time.Now()
	if in.obs != nil && !b.streamed { // a streamed insert is observed whole
		in.obs.ObserveCommit(t1.Sub(t0), b.n-len(b.dead))
	}
	aside := map[string]bool{}
	dead := 0
	for _, d := range b.dead {
		if d.setAside {
			aside[d.msg.Reply()] = true
			if err := d.msg.NakWithDelay(setAsideDelay); err != nil {
				in.log.Warn("nak of a message set aside failed; it is redelivered after the ack wait", "err", err)
			}
			continue
		}
		dead++
	}
	if len(aside) == 0 {
		in.ack(b.replies)
	} else {
		keep := make([]string, 0, b.n-len(aside))
		for _, r := range b.replies {
			if !aside[r] {
				keep = append(keep, r)
			}
		}
		in.ack(keep)
	}
	in.stored.Add(uint64(b.n - len(b.dead)))
	in.deadLettered.Add(uint64(dead))
	in.setAside.Add(uint64(len(aside)))
	in.batches.Add(1)
	in.log.Debug("batch committed", "events", b.n, "dead", len(b.dead), "store", t1.Sub(t0), "ack", time.Since(t1))
}

// detach returns a context for committing what is in hand: it outlives
// ctx by DrainTimeout.
func (in *Ingester[T]) detach(ctx context.Context) (context.Context, context.CancelFunc) {
	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stop := context.AfterFunc(ctx, func() {
		t := time.AfterFunc(in.cfg.DrainTimeout, cancel)
		context.AfterFunc(wctx, func() { t.Stop() })
	})
	return wctx, func() { stop(); cancel() }
}

// The JetStream acknowledgements, published to a message's reply subject
// (what jetstream.Msg's Ack, InProgress and Nak publish): a batch keeps
// its reply subjects, not its messages, so that a batch written into a
// streamed insert holds about a hundred bytes an event until it commits.
var (
	ackAck      = []byte("+ACK")
	ackProgress = []byte("+WPI")
	ackNak      = []byte("-NAK")
)

// keepAlive keeps the messages of replies from being redelivered while
// their batch waits for the committer or is being committed (a store
// outage, a long split, a streamed insert), with a progress ack every
// third of AckWait. The returned func stops it.
func (in *Ingester[T]) keepAlive(replies []string) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(in.cfg.AckWait / 3)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				for _, r := range replies {
					_ = in.nc.Publish(r, ackProgress)
				}
			}
		}
	})
	return func() { close(done); wg.Wait() }
}

// ack acknowledges every message of a committed batch. (AckAll would be
// cheaper but unsafe: it acknowledges what other instances sharing the
// durable still hold.)
func (in *Ingester[T]) ack(replies []string) {
	for _, r := range replies {
		if err := in.nc.Publish(r, ackAck); err != nil {
			in.log.Warn("ack failed; the event will be redelivered and deduplicated", "err", err)
		}
	}
}

// commit writes the batch's events not yet stored, then publishes its dead
// letters not yet published (waiting for their acks), then its commit
// marks. It picks up where an earlier failed attempt stopped.
func (in *Ingester[T]) commit(ctx context.Context, b *batch[T]) error {
	if !b.started {
		b.started = true
		if len(b.good) > 0 {
			b.pending = []span{{0, len(b.good)}}
		}
	}
	if err := in.writePending(ctx, b); err != nil {
		return err
	}
	if err := in.publishDead(ctx, b.dead); err != nil {
		return err
	}
	return in.markCommitted(ctx, b)
}

// markCommitted tells the tamper-evidence log's sequencer which
// organizations have entries stored by the batch: one message on
// schemas.CommitSubject per organization and kind, the highest stream
// sequence of its events in decimal (the stream keeps the newest of
// each), published after the store write and before the acks, so that
// every acknowledged event's organization is marked before ingest's
// watermark passes it (the sequencer's seals rely on it). Nothing is
// marked twice for one batch.
func (in *Ingester[T]) markCommitted(ctx context.Context, b *batch[T]) error {
	seqs := b.commitMarks()
	if b.marked || len(seqs) == 0 {
		return nil
	}
	futures := make([]jetstream.PubAckFuture, 0, len(seqs))
	for subj, seq := range seqs {
		org, kind, ok := schemas.ParseEventSubject(subj)
		if !ok {
			continue
		}
		f, err := in.js.PublishAsync(schemas.CommitSubject(org, kind), strconv.AppendUint(nil, seq, 10))
		if err != nil {
			return fmt.Errorf("mark the commit of %s: %w", subj, err)
		}
		futures = append(futures, f)
	}
	for _, f := range futures {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			return fmt.Errorf("mark a commit: %w", err)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	b.marked = true
	return nil
}

// commitMarks is the highest stream sequence of the good events of each
// subject: the sequencer waits for ingest's watermark to pass it.
func (b *batch[T]) commitMarks() map[string]uint64 {
	if b.marks != nil {
		return b.marks
	}
	seqs := make(map[string]uint64)
	for _, m := range b.goodMsgs {
		seq, _ := streamSeq(m.Reply())
		seqs[m.Subject()] = max(seqs[m.Subject()], seq)
	}
	return seqs
}

// writePending writes the pending spans of b. A write refused because of
// the rows themselves (auditstore.ErrRefused: what each store knows to be a
// property of a row, an allow-list) splits the span in halves until each
// refused event is alone; that event is dead-lettered and the others are
// stored. Every other failure — the store down, busy, out of disk, an I/O or
// network error, anything unclassified — is an outage: the batch waits and
// is written again (an error is returned, b keeping what is still to write),
// so that no valid event is dead-lettered because the store was unwell.
func (in *Ingester[T]) writePending(ctx context.Context, b *batch[T]) error {
	for len(b.pending) > 0 {
		s := b.pending[0]
		err := in.write(ctx, b.good[s.lo:s.hi])
		if err == nil {
			b.pending = b.pending[1:]
			continue
		}
		if ctx.Err() != nil || !errors.Is(err, auditstore.ErrRefused) {
			in.outage(ctx, err)
			return fmt.Errorf("write batch: %w", err)
		}
		if s.hi-s.lo > 1 {
			mid := (s.lo + s.hi) / 2
			in.log.Warn("the store refuses a batch; splitting it to find the events it refuses", "events", s.hi-s.lo, "err", err)
			b.pending = append([]span{{s.lo, mid}, {mid, s.hi}}, b.pending[1:]...)
			continue
		}
		b.pending = b.pending[1:]
		in.refused.Add(1)
		b.dead = append(b.dead, &deadLetter{msg: b.goodMsgs[s.lo], reason: "store refused the event: " + err.Error()})
	}
	return nil
}

// outage says in the log whether a store that failed a write still answers
// (a full disk, an I/O error) or not at all; either way the batch waits.
func (in *Ingester[T]) outage(ctx context.Context, err error) {
	if errors.Is(err, auditstore.ErrBusy) || ctx.Err() != nil {
		return
	}
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if perr := in.ping(pctx); perr != nil {
		in.log.Warn("the store does not answer; the batch waits", "err", perr)
		return
	}
	in.log.Warn("the store answers but failed the write (not a refusal of the rows: disk, I/O, network); the batch waits", "err", err)
}

// reasonReplacer keeps a reason on one header line.
var reasonReplacer = strings.NewReplacer("\r", " ", "\n", " ")

// maxReason bounds the length of a dead-letter reason.
const maxReason = 1024

func (in *Ingester[T]) publishDead(ctx context.Context, dead []*deadLetter) error {
	type pending struct {
		d *deadLetter
		f jetstream.PubAckFuture
	}
	futures := make([]pending, 0, len(dead))
	var failed error
	fail := func(d *deadLetter, err error) {
		d.tries++
		if d.tries >= deadLetterTries {
			d.setAside = true
			in.log.Error("a dead letter cannot be published; its message is left in the stream and delivered again later",
				"subject", d.msg.Subject(), "tries", d.tries, "redelivery_in", setAsideDelay, "reason", d.reason, "err", err)
			return
		}
		if failed == nil {
			failed = fmt.Errorf("publish dead letter: %w", err)
		}
	}
	for _, d := range dead {
		if d.sent || d.setAside {
			continue
		}
		out, err := in.deadLetterMsg(d)
		if err != nil {
			fail(d, err)
			continue
		}
		in.log.Warn("dead-lettering event", "subject", d.msg.Subject(), "stream_seq", out.Header.Get(schemas.HeaderDLQStreamSeq), "reason", out.Header.Get(schemas.HeaderDLQReason))
		f, err := in.js.PublishMsgAsync(out)
		if err != nil {
			fail(d, err)
			continue
		}
		futures = append(futures, pending{d, f})
	}
	for _, p := range futures {
		select {
		case <-p.f.Ok():
			p.d.sent = true
		case err := <-p.f.Err():
			fail(p.d, err)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return failed
}

// deadLetterMsg is the dead letter of d: its payload, the allow-listed
// headers of its message, and why.
func (in *Ingester[T]) deadLetterMsg(d *deadLetter) (*nats.Msg, error) {
	meta, err := d.msg.Metadata()
	if err != nil {
		return nil, fmt.Errorf("dead letter metadata: %w", err)
	}
	out := nats.NewMsg(schemas.DLQSubject(d.msg.Subject()))
	out.Data = d.msg.Data()
	h := d.msg.Headers()
	for _, k := range dlqHeaders {
		if v := h.Get(k); v != "" {
			out.Header.Set(k, clip(reasonReplacer.Replace(v), maxDLQHeader))
		}
	}
	if v := h.Get(schemas.HeaderMsgID); v != "" {
		out.Header.Set(schemas.HeaderDLQMsgID, clip(reasonReplacer.Replace(v), maxDLQHeader))
	}
	seq := strconv.FormatUint(meta.Sequence.Stream, 10)
	out.Header.Set(schemas.HeaderMsgID, "dlq-"+meta.Stream+"-"+seq)
	out.Header.Set(schemas.HeaderDLQReason, clip(reasonReplacer.Replace(d.reason), maxReason))
	out.Header.Set(schemas.HeaderDLQSubject, d.msg.Subject())
	out.Header.Set(schemas.HeaderDLQStreamSeq, seq)
	return out, nil
}

// clip cuts s to at most n bytes, on a rune boundary.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
