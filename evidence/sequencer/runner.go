package sequencer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/auditrail/auditrail/evidence/lease"
	"github.com/auditrail/auditrail/internal/auditstore"
	"github.com/auditrail/auditrail/internal/natsx"
	"github.com/auditrail/auditrail/schemas"
)

// Config configures a Runner.
type Config struct {
	// Instance names this process in the lease (one sequencer at a time).
	Instance string
	// Durable is the sequencer's consumer of the commit marks
	// (schemas.StreamCommits: it learns which organizations have new
	// entries, then reads them from the store).
	Durable string
	// LeaseTTL is how long the lease (in the bucket given to NewRunner)
	// outlives its holder's last renewal.
	LeaseTTL time.Duration
	// Fetch is how many commit marks one round takes at most.
	Fetch int
	// AuditDurable and ExecutionDurable are ingest's consumers, whose
	// watermarks bound what may be sequenced.
	AuditDurable, ExecutionDurable string
	// Idle is how long a round waits for messages.
	Idle time.Duration
	// Parallel is how many logs are appended to at once.
	Parallel int
}

// DefaultConfig returns the defaults.
func DefaultConfig() Config {
	return Config{Durable: natsx.TLogDurable, LeaseTTL: 10 * time.Second, Fetch: 50_000,
		AuditDurable: schemas.IngestAuditDurable, ExecutionDurable: schemas.IngestExecutionDurable, Idle: time.Second, Parallel: 4}
}

// ErrInvalidConfig is returned by Validate.
var ErrInvalidConfig = errors.New("invalid sequencer config")

// Validate checks the configuration.
func (c Config) Validate() error {
	switch {
	case c.Instance == "":
		return fmt.Errorf("%w: instance name is required", ErrInvalidConfig)
	case c.Durable == "" || c.AuditDurable == "" || c.ExecutionDurable == "":
		return fmt.Errorf("%w: durable and ingest durables are required", ErrInvalidConfig)
	case c.LeaseTTL < time.Second:
		return fmt.Errorf("%w: lease TTL %s under 1s", ErrInvalidConfig, c.LeaseTTL)
	case c.Fetch < 1:
		return fmt.Errorf("%w: fetch %d", ErrInvalidConfig, c.Fetch)
	case c.Parallel < 1:
		return fmt.Errorf("%w: parallel %d", ErrInvalidConfig, c.Parallel)
	case c.Idle <= 0 || c.Idle >= c.LeaseTTL/2:
		return fmt.Errorf("%w: idle wait %s must be positive and under half the lease TTL", ErrInvalidConfig, c.Idle)
	}
	return nil
}

// Watermarks gives the watermark of an ingest durable (*natsx.Watermarks).
type Watermarks interface {
	Watermark(ctx context.Context, durable string) (uint64, error)
	// Complete is the watermark read now, or last when the durable has
	// nothing pending.
	Complete(ctx context.Context, durable string, last uint64) (uint64, error)
}

// Runner sequences every organization's logs while it holds the lease.
type Runner struct {
	cfg   Config
	seq   *Sequencer
	js    jetstream.JetStream
	wm    Watermarks
	log   *slog.Logger
	lease *lease.Lease
	obs   Observer
	kv    jetstream.KeyValue
	// sealed is the last seal written (while leading).
	sealed time.Time
	// subjects remembers the log of each commit mark's subject (logOf).
	subjects map[string]subjectLog
	// dropped: the durable of the event stream from before 0.12 is gone;
	// catchUp: it was there, so the next round looks at every log.
	dropped, catchUp bool
}

// SealedKey is the tlog bucket's key of the logs' seal (Sealed, JSON):
// after each round, every entry of the event stream up to a sequence is
// in its organization's log.
const SealedKey = "sealed"

// Sealed says up to where every log is complete: every audit entry and
// tool execution whose stream sequence is at most Seq, and so (the
// stream's times never go back) whose created_time is at most Time, is in
// its organization's log. The checkpointer signs it as a checkpoint's
// sealed_until; the feed serves it.
type Sealed struct {
	Seq  uint64    `json:"seq"`
	Time time.Time `json:"time"`
}

// Observer receives the sequencer's metrics (*metrics.TLogObserver).
type Observer interface {
	// SequencerAppended counts leaves appended to a log of the kind
	// (audit_logs, tool_executions).
	SequencerAppended(kind string, n int)
	// SequencerDelay is the longest an entry of an append waited between
	// its storing in the event stream (created_time) and its leaf's
	// append: ingest's delay and the sequencer's.
	SequencerDelay(kind string, d time.Duration)
	// SequencerLag is how many messages of the event stream the
	// sequencer's consumer has not taken yet, after a round.
	SequencerLag(pending uint64)
}

type nopObserver struct{}

func (nopObserver) SequencerAppended(string, int)        {}
func (nopObserver) SequencerDelay(string, time.Duration) {}
func (nopObserver) SequencerLag(uint64)                  {}

// WithObserver sets the observer of the runner's metrics (before Run).
func (r *Runner) WithObserver(o Observer) *Runner {
	if o != nil {
		r.obs = o
	}
	return r
}

// NewRunner returns a runner; kv is the bucket of its lease (natsx.TLogBucket).
func NewRunner(cfg Config, seq *Sequencer, js jetstream.JetStream, kv jetstream.KeyValue, wm Watermarks, log *slog.Logger) (*Runner, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Runner{cfg: cfg, seq: seq, js: js, wm: wm, log: log, lease: lease.New(kv, leaseKey, cfg.Instance, cfg.LeaseTTL, log), obs: nopObserver{}, kv: kv, subjects: map[string]subjectLog{}}, nil
}

const leaseKey = "sequencer"

// Run sequences until ctx ends.
func (r *Runner) Run(ctx context.Context) error {
	for ctx.Err() == nil {
		if !r.lease.Acquire(ctx) {
			select {
			case <-ctx.Done():
			case <-time.After(r.cfg.LeaseTTL / 3):
			}
			continue
		}
		if err := r.lead(ctx); err != nil && ctx.Err() == nil {
			r.log.Warn("sequencer: round failed; retrying", "err", err)
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
		}
	}
	return nil
}

// lead runs rounds while the lease is held.
func (r *Runner) lead(ctx context.Context) error {
	// Another instance may have led meanwhile, and crashed in an append;
	// the logs grow through this one until the lead ends.
	r.seq.Lead()
	defer r.seq.Unlead()
	if s, ok, err := ReadSealed(ctx, r.kv); err == nil && ok {
		r.sealed = s.Time // a seal never goes back, whoever wrote it
	}
	r.dropEventDurable(ctx)
	events, err := r.js.Stream(ctx, schemas.StreamEvents)
	if err != nil {
		return fmt.Errorf("stream %s: %w", schemas.StreamEvents, err)
	}
	cons, err := r.js.CreateOrUpdateConsumer(ctx, schemas.StreamCommits, jetstream.ConsumerConfig{
		Durable: r.cfg.Durable,
		// The commit marks (one message per organization and kind, the
		// newest), not the events: a message per batch and organization
		// rather than per event (following every event cost the NATS
		// server and this process about 12 µs an event).
		FilterSubject: schemas.SubjectCommitsAll,
		AckPolicy:     jetstream.AckAllPolicy,
		MaxAckPending: -1,
		AckWait:       2 * r.cfg.LeaseTTL,
	})
	if err != nil {
		return fmt.Errorf("consumer %s: %w", r.cfg.Durable, err)
	}
	for ctx.Err() == nil {
		if !r.lease.Keep(ctx) {
			return nil // lost: another instance sequences now
		}
		if err := r.round(ctx, cons, events); err != nil {
			return err
		}
	}
	return nil
}

// dropEventDurable deletes the durable that the sequencer kept on the
// event stream before it followed the commit marks (once a process: it
// would hold every event since as pending, for nothing).
func (r *Runner) dropEventDurable(ctx context.Context) {
	if r.dropped {
		return
	}
	err := r.js.DeleteConsumer(ctx, schemas.StreamEvents, r.cfg.Durable)
	switch {
	case err == nil:
		// What it still held is marked nowhere: every log is looked at
		// once (an upgrade's ingest marks what it stores from its start).
		r.catchUp = true
		r.log.Info("sequencer: deleted its old durable of the event stream; every log is looked at once", "durable", r.cfg.Durable)
	case errors.Is(err, jetstream.ErrConsumerNotFound):
	default:
		r.log.Warn("sequencer: its old durable of the event stream not deleted", "durable", r.cfg.Durable, "err", err)
		return
	}
	r.dropped = true
}

type logID struct {
	org  uuid.UUID
	kind auditstore.LogKind
}

// maxSubjects bounds the subjects whose log is remembered.
const maxSubjects = 100_000

// logOf returns the log of a commit mark's subject (false: not an audit
// entry's or a tool execution's), remembered per subject.
func (r *Runner) logOf(subject string) (logID, bool) {
	if l, ok := r.subjects[subject]; ok {
		return l.id, l.ok
	}
	var l subjectLog
	orgS, kindS, ok := schemas.ParseCommitSubject(subject)
	org, err := uuid.Parse(orgS)
	if ok && err == nil && (kindS == schemas.KindAudit || kindS == schemas.KindExecution) {
		l.ok, l.id = true, logID{org, auditstore.LogAudit}
		if kindS == schemas.KindExecution {
			l.id.kind = auditstore.LogExecutions
		}
	}
	if len(r.subjects) >= maxSubjects {
		clear(r.subjects)
	}
	r.subjects[subject] = l
	return l.id, l.ok
}

type subjectLog struct {
	id logID
	ok bool
}

// round reads how far ingest has committed, takes the commit marks
// waiting, waits for ingest's watermark to pass the sequence each mark
// names, and sequences every log marked; the marks are acknowledged after.
// A round that took every mark waiting seals the logs up to what ingest had
// committed before the marks were read: each event committed by then was
// marked before its acknowledgement, so before that reading.
func (r *Runner) round(ctx context.Context, cons jetstream.Consumer, events jetstream.Stream) error {
	complete, err := r.complete(ctx, events)
	if err != nil {
		return err
	}
	batch, err := cons.Fetch(r.cfg.Fetch, jetstream.FetchMaxWait(r.cfg.Idle))
	if err != nil {
		return fmt.Errorf("fetch: %w", err)
	}
	dirty := map[logID]bool{}
	var need [2]uint64 // the highest sequence marked per kind
	var last jetstream.Msg
	for m := range batch.Messages() {
		last = m
		id, ok := r.logOf(m.Subject())
		if !ok {
			continue
		}
		dirty[id] = true
		if seq, err := strconv.ParseUint(string(m.Data()), 10, 64); err == nil {
			need[id.kind] = max(need[id.kind], seq)
		}
	}
	if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) && !errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("fetch: %w", err)
	}
	var pending uint64
	if last != nil {
		md, err := last.Metadata()
		if err != nil {
			return fmt.Errorf("metadata of %s: %w", last.Subject(), err)
		}
		pending = md.NumPending
	}
	if r.catchUp {
		if err := r.everyLog(ctx, dirty); err != nil {
			return err
		}
	}
	if len(dirty) > 0 {
		if err := r.sequence(ctx, dirty, need); err != nil {
			return err
		}
	}
	r.catchUp = false
	if last != nil {
		if err := last.Ack(); err != nil {
			return err
		}
	}
	r.obs.SequencerLag(pending)
	if pending == 0 && complete.ok {
		r.sealAt(ctx, events, complete)
	}
	return nil
}

// everyLog adds every non-empty log of the store to dirty.
func (r *Runner) everyLog(ctx context.Context, dirty map[logID]bool) error {
	for _, kind := range []auditstore.LogKind{auditstore.LogAudit, auditstore.LogExecutions} {
		orgs, err := r.seq.store.LogOrgs(ctx, kind)
		if err != nil {
			return fmt.Errorf("the logs of kind %s: %w", kind, err)
		}
		for _, o := range orgs {
			dirty[logID{o, kind}] = true
		}
	}
	return nil
}

// sequence sequences the marked logs up to their kind's watermark, once
// it passes the sequence the marks name.
func (r *Runner) sequence(ctx context.Context, dirty map[logID]bool, need [2]uint64) error {
	var marks [2]uint64
	var err error
	for kind, durable := range []string{r.cfg.AuditDurable, r.cfg.ExecutionDurable} {
		if marks[kind], err = r.waitFor(ctx, durable, need[kind]); err != nil {
			return err
		}
	}
	// Logs are independent: read a few at once, their appends written
	// together (one write of the store per pass, not one per log).
	targets := make([]Target, 0, len(dirty))
	for id := range dirty {
		targets = append(targets, Target{Org: id.org, Kind: id.kind, Upto: marks[id.kind]})
	}
	results, err := r.seq.SequenceAll(ctx, targets, r.cfg.Parallel)
	if err != nil {
		return err
	}
	for i, res := range results {
		if res.Appended == 0 {
			continue
		}
		kind := "audit_logs"
		if targets[i].Kind == auditstore.LogExecutions {
			kind = "tool_executions"
		}
		r.obs.SequencerAppended(kind, res.Appended)
		r.obs.SequencerDelay(kind, time.Since(res.Oldest))
		r.log.Debug("sequencer: appended", "org", targets[i].Org, "kind", targets[i].Kind, "leaves", res.Appended, "size", res.Size)
	}
	return nil
}

// completeness is how far ingest had committed before a round read the
// marks: every event up to seq is stored; last is the stream's last
// sequence then, and at the server's time of that reading.
type completeness struct {
	ok   bool
	seq  uint64
	last uint64
	at   time.Time
}

// complete reads the stream's last sequence, then how far each ingest
// durable has committed (up to that sequence when it has nothing pending).
func (r *Runner) complete(ctx context.Context, events jetstream.Stream) (completeness, error) {
	info, err := events.Info(ctx)
	if err != nil {
		return completeness{}, fmt.Errorf("stream %s: %w", schemas.StreamEvents, err)
	}
	c := completeness{ok: !info.TimeStamp.IsZero(), seq: info.State.LastSeq, last: info.State.LastSeq, at: info.TimeStamp}
	for _, durable := range []string{r.cfg.AuditDurable, r.cfg.ExecutionDurable} {
		w, err := r.wm.Complete(ctx, durable, c.last)
		if err != nil {
			return completeness{}, err
		}
		c.seq = min(c.seq, w)
	}
	return c, nil
}

// sealAt seals up to c: every event up to c.seq is in its log, so every
// entry stored before the next event (c.seq+1 or the first after it that
// remains) is; none after c.last: every entry stored before c.at is.
func (r *Runner) sealAt(ctx context.Context, events jetstream.Stream, c completeness) {
	if c.seq >= c.last {
		r.seal(ctx, Sealed{Seq: c.seq, Time: c.at})
		return
	}
	next, err := events.GetMsg(ctx, c.seq+1, jetstream.WithGetMsgSubject(schemas.SubjectEventsAll))
	if err != nil {
		if ctx.Err() == nil {
			r.log.Warn("sequencer: seal not written: the time of the next event", "seq", c.seq+1, "err", err)
		}
		return
	}
	r.seal(ctx, Sealed{Seq: c.seq, Time: next.Time})
}

// seal writes the seal of a round: every message up to s.Seq is in its
// log, so every entry whose time is before s.Time (a later message has a
// time at or after it) is: s.Time minus a millisecond, the precision of
// created_time. A seal never goes back.
func (r *Runner) seal(ctx context.Context, s Sealed) {
	s.Time = s.Time.UTC().Truncate(time.Millisecond).Add(-time.Millisecond)
	if !s.Time.After(r.sealed) {
		return
	}
	b, err := json.Marshal(s)
	if err == nil {
		_, err = r.kv.Put(ctx, SealedKey, b)
	}
	if err != nil {
		if ctx.Err() == nil {
			r.log.Warn("sequencer: seal not written", "err", err)
		}
		return
	}
	r.sealed = s.Time
}

// ReadSealed reads the seal from the tlog bucket (false: none yet).
func ReadSealed(ctx context.Context, kv jetstream.KeyValue) (Sealed, bool, error) {
	e, err := kv.Get(ctx, SealedKey)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return Sealed{}, false, nil
	}
	if err != nil {
		return Sealed{}, false, fmt.Errorf("seal: %w", err)
	}
	var s Sealed
	if err := json.Unmarshal(e.Value(), &s); err != nil {
		return Sealed{}, false, fmt.Errorf("seal: %w", err)
	}
	return s, true, nil
}

// waitFor waits until the durable's watermark reaches seq (ingest has
// committed or dead-lettered everything up to it), renewing the lease.
func (r *Runner) waitFor(ctx context.Context, durable string, seq uint64) (uint64, error) {
	for {
		w, err := r.wm.Watermark(ctx, durable)
		if err != nil {
			return 0, fmt.Errorf("watermark of %s: %w", durable, err)
		}
		if w >= seq {
			return w, nil
		}
		if !r.lease.Keep(ctx) {
			return 0, errLeaseLost
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

var errLeaseLost = errors.New("sequencer lease lost")
