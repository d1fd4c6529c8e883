package sequencer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/sync/errgroup"

	"github.com/auditrail/auditrail/internal/auditstore"
	"github.com/auditrail/auditrail/schemas"
)

// Config configures a Runner.
type Config struct {
	// Instance names this process in the lease (one sequencer at a time).
	Instance string
	// Durable is the sequencer's consumer of the event stream (headers
	// only: it learns which organizations have new entries, then reads
	// them from the store).
	Durable string
	// Bucket holds the lease; LeaseTTL is how long a lease outlives its
	// holder's last renewal.
	Bucket   string
	LeaseTTL time.Duration
	// Fetch is how many messages one round takes at most.
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
	return Config{Durable: "auditrail-tlog", Bucket: "auditrail_tlog", LeaseTTL: 10 * time.Second, Fetch: 10_000,
		AuditDurable: "auditrail-ingest-audit", ExecutionDurable: "auditrail-ingest-execution", Idle: time.Second, Parallel: 4}
}

// ErrInvalidConfig is returned by Validate.
var ErrInvalidConfig = errors.New("invalid sequencer config")

// Validate checks the configuration.
func (c Config) Validate() error {
	switch {
	case c.Instance == "":
		return fmt.Errorf("%w: instance name is required", ErrInvalidConfig)
	case c.Durable == "" || c.Bucket == "" || c.AuditDurable == "" || c.ExecutionDurable == "":
		return fmt.Errorf("%w: durable, bucket and ingest durables are required", ErrInvalidConfig)
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

// Watermarks gives the watermark of an ingest durable.
type Watermarks interface {
	Watermark(ctx context.Context, durable string) (uint64, error)
}

// Runner sequences every organization's logs while it holds the lease.
type Runner struct {
	cfg  Config
	seq  *Sequencer
	js   jetstream.JetStream
	kv   jetstream.KeyValue
	wm   Watermarks
	log  *slog.Logger
	held time.Time // the lease is ours until then
}

// NewRunner returns a runner; kv is the lease bucket (Config.Bucket).
func NewRunner(cfg Config, seq *Sequencer, js jetstream.JetStream, kv jetstream.KeyValue, wm Watermarks, log *slog.Logger) (*Runner, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Runner{cfg: cfg, seq: seq, js: js, kv: kv, wm: wm, log: log}, nil
}

const leaseKey = "sequencer"

type leaseRecord struct {
	Owner string    `json:"owner"`
	Until time.Time `json:"until"`
}

// acquire takes or renews the lease: free, expired or already ours.
func (r *Runner) acquire(ctx context.Context) bool {
	until := time.Now().Add(r.cfg.LeaseTTL).UTC()
	b, _ := json.Marshal(leaseRecord{Owner: r.cfg.Instance, Until: until})
	e, err := r.kv.Get(ctx, leaseKey)
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
		_, err = r.kv.Create(ctx, leaseKey, b)
	case err != nil:
	default:
		var cur leaseRecord
		if json.Unmarshal(e.Value(), &cur) == nil && cur.Owner != r.cfg.Instance && time.Now().Before(cur.Until) {
			return false
		}
		_, err = r.kv.Update(ctx, leaseKey, b, e.Revision())
	}
	if err != nil {
		if !errors.Is(err, jetstream.ErrKeyExists) {
			r.log.Warn("sequencer: lease", "err", err)
		}
		return false
	}
	// Ours for the TTL minus a margin for clocks and the time this took.
	r.held = until.Add(-r.cfg.LeaseTTL / 4)
	return true
}

// Run sequences until ctx ends.
func (r *Runner) Run(ctx context.Context) error {
	for ctx.Err() == nil {
		if !r.acquire(ctx) {
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
	cons, err := r.js.CreateOrUpdateConsumer(ctx, schemas.StreamEvents, jetstream.ConsumerConfig{
		Durable:        r.cfg.Durable,
		FilterSubjects: []string{schemas.EventSubject("*", schemas.KindAudit), schemas.EventSubject("*", schemas.KindExecution)},
		AckPolicy:      jetstream.AckAllPolicy,
		HeadersOnly:    true,
		MaxAckPending:  -1,
		AckWait:        2 * r.cfg.LeaseTTL,
	})
	if err != nil {
		return fmt.Errorf("consumer %s: %w", r.cfg.Durable, err)
	}
	for ctx.Err() == nil {
		if time.Now().After(r.held) && !r.acquire(ctx) {
			return nil // lost: another instance sequences now
		}
		if err := r.round(ctx, cons); err != nil {
			return err
		}
	}
	return nil
}

type logID struct {
	org  uuid.UUID
	kind auditstore.LogKind
}

// round takes the messages waiting, waits for ingest to commit them, and
// sequences every log they touched; the messages are acknowledged after.
func (r *Runner) round(ctx context.Context, cons jetstream.Consumer) error {
	batch, err := cons.Fetch(r.cfg.Fetch, jetstream.FetchMaxWait(r.cfg.Idle))
	if err != nil {
		return fmt.Errorf("fetch: %w", err)
	}
	dirty := map[logID]bool{}
	var need [2]uint64 // highest stream sequence per kind
	var last jetstream.Msg
	for m := range batch.Messages() {
		last = m
		md, err := m.Metadata()
		if err != nil {
			continue
		}
		orgS, kindS, ok := schemas.ParseEventSubject(m.Subject())
		org, perr := uuid.Parse(orgS)
		if !ok || perr != nil {
			continue // not an event subject ingest would store
		}
		kind := auditstore.LogAudit
		if kindS == schemas.KindExecution {
			kind = auditstore.LogExecutions
		}
		dirty[logID{org, kind}] = true
		need[kind] = max(need[kind], md.Sequence.Stream)
	}
	if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) && !errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("fetch: %w", err)
	}
	if last == nil {
		return nil
	}
	var marks [2]uint64
	for kind, durable := range []string{r.cfg.AuditDurable, r.cfg.ExecutionDurable} {
		if need[kind] == 0 {
			continue
		}
		if marks[kind], err = r.waitFor(ctx, durable, need[kind]); err != nil {
			return err
		}
	}
	// Logs are independent: a few at once (each is one reader and one
	// writer of the store at a time).
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(r.cfg.Parallel)
	for id := range dirty {
		g.Go(func() error {
			res, err := r.seq.Sequence(gctx, id.org, id.kind, marks[id.kind])
			if err != nil {
				return err
			}
			if res.Appended > 0 {
				r.log.Debug("sequencer: appended", "org", id.org, "kind", id.kind, "leaves", res.Appended, "size", res.Size)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	return last.Ack()
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
		if time.Now().After(r.held) && !r.acquire(ctx) {
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
