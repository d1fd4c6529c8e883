// Package lifecycle applies each organization's retention to its two logs
// (audit entries, tool executions): a cycle, every Config.Interval, finds
// for each log the prefix of leaves whose entries were persisted before
// the cutoff (now minus the retention in force), records the expiry as an
// audit entry of the organization's audit log, waits until a signed
// checkpoint covers that record, and only then deletes the expired
// entries — except those a legal hold keeps — from the store, and their
// messages from the event stream and the dead-letter stream. The log
// itself (leaves and hashes) stays: proofs of what remains still verify,
// and the verifier accepts the missing leaves because the signed record
// says they expired (internal/tlog/lifecycle.go).
//
// Nothing is deleted that a record does not authorise: the plan is saved
// beside the log (auditstore.Expiry) before the deletion starts, and a
// cycle that finds a plan not done (a crash mid-way) finishes it with the
// same arguments before planning anew.
package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/google/uuid"

	"github.com/auditrail/auditrail/controlplane/cpstate"
	"github.com/auditrail/auditrail/internal/auditstore"
	"github.com/auditrail/auditrail/internal/tlog"
	"github.com/auditrail/auditrail/producers"
)

// Errors.
var (
	// ErrInvalidConfig is returned for a configuration that cannot run.
	ErrInvalidConfig = errors.New("lifecycle: invalid configuration")
	// ErrTampered: entries a record kept are gone; the log's expiries
	// stop until they are back.
	ErrTampered = errors.New("lifecycle: kept entries are missing")
)

// Config configures the cycles.
type Config struct {
	// Interval is the time between the starts of two cycles.
	Interval time.Duration
	// Bounds are the operator's retention limits and grace period.
	Bounds cpstate.RetentionBounds
	// RecordWait bounds how long a cycle waits for its record to be
	// sequenced and covered by a signed checkpoint (then the organization
	// is left for the next cycle).
	RecordWait time.Duration
	// Poll is how often it looks meanwhile.
	Poll time.Duration
	// MaxHeld bounds the entries a log's legal holds may keep below one
	// expiry (they are held in memory while it runs).
	MaxHeld int
	// DeleteStep bounds the leaves one deletion covers: an expiry of more
	// deletes in steps of at most DeleteStep leaves, oldest first, so that
	// what a store holds for one deletion (ClickHouse: the set of the
	// event ids it matches in event_index) stays bounded however large
	// the expiry.
	DeleteStep int64
}

// DefaultConfig is an hourly cycle, the default bounds, a 10 minute wait
// for a record, at most a million held entries per log and deletions of
// at most a million leaves.
func DefaultConfig() Config {
	return Config{Interval: time.Hour, Bounds: cpstate.DefaultRetentionBounds(), RecordWait: 10 * time.Minute,
		Poll: 250 * time.Millisecond, MaxHeld: 1_000_000, DeleteStep: 1_000_000}
}

// Validate checks the configuration.
func (c Config) Validate() error {
	switch {
	case c.Interval < 100*time.Millisecond:
		return fmt.Errorf("%w: interval %s below 100ms", ErrInvalidConfig, c.Interval)
	case c.RecordWait < time.Second:
		return fmt.Errorf("%w: record wait %s below 1s", ErrInvalidConfig, c.RecordWait)
	case c.Poll <= 0:
		return fmt.Errorf("%w: poll %s", ErrInvalidConfig, c.Poll)
	case c.MaxHeld < 1:
		return fmt.Errorf("%w: max held %d", ErrInvalidConfig, c.MaxHeld)
	case c.DeleteStep < 1:
		return fmt.Errorf("%w: delete step %d", ErrInvalidConfig, c.DeleteStep)
	}
	if err := c.Bounds.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	return nil
}

// Store is what a cycle needs of the audit store.
type Store interface {
	auditstore.LifecycleStore
	ListAudit(ctx context.Context, q auditstore.Query) (auditstore.Page, error)
	ListExecutions(ctx context.Context, q auditstore.ExecQuery) (auditstore.ExecPage, error)
	LogOrgs(ctx context.Context, kind auditstore.LogKind) ([]uuid.UUID, error)
	LogHead(ctx context.Context, org uuid.UUID, kind auditstore.LogKind) (int64, auditstore.LogLeaf, error)
	LeafIndexes(ctx context.Context, org uuid.UUID, kind auditstore.LogKind, eventIDs []uuid.UUID) (map[uuid.UUID]int64, error)
	LatestCheckpoint(ctx context.Context, org uuid.UUID, kind auditstore.LogKind) (auditstore.Checkpoint, bool, error)
}

// Settings are the organizations' lifecycle settings (the control-plane
// state).
type Settings interface {
	// Retention is the organization's setting, nil when it has none.
	Retention(org uuid.UUID) (*cpstate.Retention, error)
	// LegalHolds are the organization's holds, active and released.
	LegalHolds(org uuid.UUID) ([]cpstate.LegalHold, error)
}

// Publisher publishes the records (producers.Publisher).
type Publisher interface {
	Publish(ctx context.Context, ev producers.Event) error
}

// Streams removes expired messages from the event streams.
type Streams interface {
	// PurgeThrough removes the messages of subject in the events stream
	// with a stream sequence at or below seq.
	PurgeThrough(ctx context.Context, subject string, seq uint64) error
	// PurgeBefore removes the messages of subject in the dead-letter
	// stream stored before t.
	PurgeBefore(ctx context.Context, subject string, t time.Time) error
}

// Runner runs the cycles.
type Runner struct {
	cfg      Config
	store    Store
	settings Settings
	pub      Publisher
	streams  Streams
	erasures Erasures
	msgs     MessageEraser
	outbox   Outbox
	lease    Lease
	renew    time.Duration
	log      *slog.Logger
	now      func() time.Time
}

// UseErasures has the cycles apply the pending erasures of e (the store
// must be an EraseStore); msgs, when not nil, deletes their messages from
// the streams.
func (r *Runner) UseErasures(e Erasures, msgs MessageEraser) { r.erasures, r.msgs = e, msgs }

// Lease is the one-at-a-time lease of the cycles (evidence/lease): two
// lifecycle instances never plan at once.
type Lease interface {
	// Keep takes or renews the lease; false: another instance holds it.
	Keep(ctx context.Context) bool
}

// UseLease has the runner run a cycle only while it holds l, renewed every
// renew during the cycle; a cycle whose lease is lost stops (its plan,
// saved, is resumed by whoever holds the lease next).
func (r *Runner) UseLease(l Lease, renew time.Duration) { r.lease, r.renew = l, renew }

// UseOutbox has an erasure wait (stay pending) while events that name its
// subject wait in the control plane's outbox.
func (r *Runner) UseOutbox(o Outbox) { r.outbox = o }

// New returns a runner; streams may be nil (nothing purged: tests of the
// store alone).
func New(cfg Config, store Store, settings Settings, pub Publisher, streams Streams, log *slog.Logger) (*Runner, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if store == nil || settings == nil || pub == nil {
		return nil, fmt.Errorf("%w: a store, the settings and a publisher are required", ErrInvalidConfig)
	}
	if log == nil {
		log = slog.Default()
	}
	return &Runner{cfg: cfg, store: store, settings: settings, pub: pub, streams: streams, log: log, now: time.Now}, nil
}

// Run runs a cycle at once and then every Interval until ctx ends.
func (r *Runner) Run(ctx context.Context) error {
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		start := time.Now()
		cctx, stop, ok := r.leased(ctx)
		if !ok {
			t.Reset(r.cfg.Interval)
			continue
		}
		rep, err := r.Cycle(cctx)
		stop()
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil:
			r.log.Error("lifecycle cycle", "err", err, "took", time.Since(start))
		case rep.Expired > 0 || rep.Failed > 0:
			r.log.Info("lifecycle cycle", "logs", rep.Logs, "expired", rep.Expired, "failed", rep.Failed, "took", time.Since(start))
		}
		t.Reset(r.cfg.Interval)
	}
}

// leased returns the context of a cycle: without a lease, ctx; with one,
// false when another instance holds it, else a context that ends when a
// renewal fails (and stop, which ends the renewals).
func (r *Runner) leased(ctx context.Context) (context.Context, func(), bool) {
	if r.lease == nil {
		return ctx, func() {}, true
	}
	if !r.lease.Keep(ctx) {
		return nil, nil, false
	}
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		tk := time.NewTicker(r.renew)
		defer tk.Stop()
		for {
			select {
			case <-cctx.Done():
				return
			case <-tk.C:
				if !r.lease.Keep(cctx) {
					r.log.Warn("lifecycle: the lease was lost during a cycle; it stops, its plan resumes where the lease goes")
					cancel()
					return
				}
			}
		}
	}()
	return cctx, func() { cancel(); <-done }, true
}

// Report is what a cycle did.
type Report struct {
	// Logs counts the logs looked at; Expired the entries deleted; Failed
	// the logs left for the next cycle after an error.
	Logs, Expired, Failed int64
}

// Cycle applies the retention in force to every log once.
func (r *Runner) Cycle(ctx context.Context) (Report, error) {
	var rep Report
	r.eraseAll(ctx, &rep)
	for _, kind := range []auditstore.LogKind{auditstore.LogAudit, auditstore.LogExecutions} {
		orgs, err := r.store.LogOrgs(ctx, kind)
		if err != nil {
			return rep, fmt.Errorf("lifecycle: list the logs: %w", err)
		}
		for _, org := range orgs {
			if ctx.Err() != nil {
				return rep, ctx.Err()
			}
			rep.Logs++
			n, err := r.expire(ctx, org, kind)
			rep.Expired += n
			if err != nil {
				rep.Failed++
				r.log.Warn("lifecycle: expiry left for the next cycle", "org", org.String(), "log", LogName(kind), "err", err)
			}
		}
	}
	return rep, nil
}

// LogName is the log's name in records and in the API.
func LogName(kind auditstore.LogKind) string {
	if kind == auditstore.LogExecutions {
		return tlog.LogNameExecutions
	}
	return tlog.LogNameAudit
}

func settingKind(kind auditstore.LogKind) string {
	if kind == auditstore.LogExecutions {
		return cpstate.RetentionToolExecutions
	}
	return cpstate.RetentionAuditLogs
}
