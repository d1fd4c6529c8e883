// Package backend opens the audit store a process is given (ClickHouse,
// or dev's SQLite) and serves before it answers: Pending fails every call
// with ErrNotReady until the store is open.
package backend

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"path/filepath"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/auditrail/auditrail/internal/auditstore"
	"github.com/auditrail/auditrail/internal/auditstore/clickhouse"
	"github.com/auditrail/auditrail/internal/auditstore/sqlite"
	"github.com/auditrail/auditrail/internal/cli"
	"github.com/auditrail/auditrail/internal/redact"
	"github.com/auditrail/auditrail/internal/retry"
	"github.com/auditrail/auditrail/schemas"
	"github.com/auditrail/auditrail/schemas/apiitem"
)

// Store keeps audit entries and tool executions, looks them up by id
// (wait_for), counts them (stats), feeds them, and keeps the
// tamper-evidence logs: what every backend does.
type Store interface {
	auditstore.Store
	auditstore.ExecutionStore
	auditstore.StatsStore
	auditstore.LogStore
	// Many logs' appends and checkpoints in one write each (the
	// sequencer's and the checkpointer's rounds).
	auditstore.LogAppender
	auditstore.CheckpointSaver
	HasAudit(ctx context.Context, org uuid.UUID, project *uuid.UUID, id uuid.UUID) (bool, error)
	HasExecution(ctx context.Context, org uuid.UUID, project *uuid.UUID, id uuid.UUID) (bool, error)
	FeedAudit(ctx context.Context, q auditstore.FeedQuery) (auditstore.FeedPage, error)
	FeedExecutions(ctx context.Context, q auditstore.ExecFeedQuery) (auditstore.ExecFeedPage, error)
}

// Target is where a process keeps its audit store: ClickHouse when DSN
// is set (on Cluster when it is: --clickhouse-cluster), else the SQLite
// file in DataDir.
type Target struct {
	DSN, Cluster string
	// NoMigrate opens ClickHouse without DDL (--clickhouse-migrate=false):
	// the migrations must have run (auditrail migrate).
	NoMigrate bool
	// NoLeaves (ClickHouse): entries are stored without their leaf (the
	// sequencer computes it from the entry): ingest's --tlog-leaves=false,
	// for a deployment without the tlog role.
	NoLeaves bool
	DataDir  string
}

// Open opens the store of t.
func Open(ctx context.Context, t Target, log *slog.Logger) (Store, error) {
	dsn, cluster, dataDir := t.DSN, t.Cluster, t.DataDir
	timeout := 60 * time.Second
	if cluster != "" {
		// ON CLUSTER DDL waits for every node (distributed_ddl_task_timeout).
		timeout = 5 * time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if dsn != "" {
		opts := clickhouse.Options{Cluster: cluster, Leaves: apiitem.Leaves{}, NoMigrate: t.NoMigrate}
		if t.NoLeaves {
			opts.Leaves = nil
		}
		s, err := clickhouse.OpenWith(ctx, dsn, opts)
		if err != nil {
			return nil, redact.Error(err, dsn)
		}
		log.Info("audit store: clickhouse", "dsn", redact.URL(dsn), "cluster", cluster, "migrated", !t.NoMigrate)
		return s, nil
	}
	path := filepath.Join(dataDir, "audit.db")
	s, err := sqlite.Open(ctx, path)
	if err != nil {
		return nil, err
	}
	log.Info("audit store: sqlite", "path", path)
	return s, nil
}

// dsnPassword is the password in dsn, to be hidden from its errors.
func dsnPassword(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil || u.User == nil {
		return ""
	}
	pw, _ := u.User.Password()
	return pw
}

// ErrNotReady answers every call before the store has answered once.
var ErrNotReady = errors.New("audit store not ready")

// Pending is the audit store of a process that serves before its
// store answers: calls fail with ErrNotReady (so /healthz is 503)
// until open succeeds.
type Pending struct {
	Store // set once ready; methods not overridden below need it ready
	mu    sync.RWMutex
	s     Store
	last  error
	ready chan struct{}
}

// NewPending is a store that is not open yet.
func NewPending() *Pending { return &Pending{ready: make(chan struct{})} }

// Err is why the store is not ready (ErrNotReady, wrapping the latest
// attempt's error), or nil once it is.
func (p *Pending) Err() error {
	_, err := p.get()
	return err
}

func (p *Pending) get() (Store, error) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.s == nil {
		if p.last != nil {
			return nil, fmt.Errorf("%w: %v", ErrNotReady, p.last)
		}
		return nil, ErrNotReady
	}
	return p.s, nil
}

// OpenWithRetry opens the store (Open) until it answers, with back-off;
// a malformed DSN, or a user that may not run the migrations it was asked
// to run, is permanent. Migrations not run yet (--clickhouse-migrate=false)
// are waited for. It returns nil once the store is ready.
func (p *Pending) OpenWithRetry(ctx context.Context, t Target, log *slog.Logger) error {
	dsn := t.DSN
	policy := retry.Policy{Initial: 250 * time.Millisecond, Max: 5 * time.Second, Multiplier: 2, Jitter: 0.2}
	err := retry.Do(ctx, policy, func(ctx context.Context) error {
		s, err := Open(ctx, t, log)
		if errors.Is(err, clickhouse.ErrInvalidDSN) {
			return retry.Permanent(cli.Usage(err))
		}
		if errors.Is(err, clickhouse.ErrNoDDL) {
			return retry.Permanent(redact.Error(err, dsn, dsnPassword(dsn)))
		}
		if err == nil {
			p.Set(s)
		}
		return err
	}, func(err error, wait time.Duration) {
		p.mu.Lock()
		p.last = redact.Error(err, dsn, dsnPassword(dsn))
		p.mu.Unlock()
		log.Warn("audit store not answering; retrying", "err", redact.Error(err, dsn, dsnPassword(dsn)), "retry_in", wait.Round(time.Millisecond))
	})
	return err
}

// Set makes s the store; the waiters of Ready go on.
func (p *Pending) Set(s Store) {
	p.mu.Lock()
	p.s, p.Store = s, s
	p.mu.Unlock()
	close(p.ready)
}

// Ready is closed once the store answers.
func (p *Pending) Ready() <-chan struct{} { return p.ready }

func (p *Pending) WriteAudit(ctx context.Context, evs []schemas.AuditEvent) error {
	s, err := p.get()
	if err != nil {
		return err
	}
	return s.WriteAudit(ctx, evs)
}

// BeginAudit is the open store's streamed insert of audit events
// (auditstore.ErrNoInserts when it has none; ErrNotReady before it is open).
func (p *Pending) BeginAudit(ctx context.Context) (auditstore.Insert[schemas.AuditEvent], error) {
	s, err := p.get()
	if err != nil {
		return nil, err
	}
	if b, ok := s.(interface {
		BeginAudit(context.Context) (auditstore.Insert[schemas.AuditEvent], error)
	}); ok {
		return b.BeginAudit(ctx)
	}
	return nil, auditstore.ErrNoInserts
}

// BeginExecutions is BeginAudit for tool executions.
func (p *Pending) BeginExecutions(ctx context.Context) (auditstore.Insert[schemas.ExecutionEvent], error) {
	s, err := p.get()
	if err != nil {
		return nil, err
	}
	if b, ok := s.(interface {
		BeginExecutions(context.Context) (auditstore.Insert[schemas.ExecutionEvent], error)
	}); ok {
		return b.BeginExecutions(ctx)
	}
	return nil, auditstore.ErrNoInserts
}

func (p *Pending) ListAudit(ctx context.Context, q auditstore.Query) (auditstore.Page, error) {
	s, err := p.get()
	if err != nil {
		return auditstore.Page{}, err
	}
	return s.ListAudit(ctx, q)
}

func (p *Pending) WriteExecutions(ctx context.Context, evs []schemas.ExecutionEvent) error {
	s, err := p.get()
	if err != nil {
		return err
	}
	return s.WriteExecutions(ctx, evs)
}

func (p *Pending) ListExecutions(ctx context.Context, q auditstore.ExecQuery) (auditstore.ExecPage, error) {
	s, err := p.get()
	if err != nil {
		return auditstore.ExecPage{}, err
	}
	return s.ListExecutions(ctx, q)
}

func (p *Pending) HasAudit(ctx context.Context, org uuid.UUID, project *uuid.UUID, id uuid.UUID) (bool, error) {
	s, err := p.get()
	if err != nil {
		return false, err
	}
	return s.HasAudit(ctx, org, project, id)
}

func (p *Pending) HasExecution(ctx context.Context, org uuid.UUID, project *uuid.UUID, id uuid.UUID) (bool, error) {
	s, err := p.get()
	if err != nil {
		return false, err
	}
	return s.HasExecution(ctx, org, project, id)
}

func (p *Pending) Stats(ctx context.Context, q auditstore.StatsQuery) (auditstore.Stats, error) {
	s, err := p.get()
	if err != nil {
		return auditstore.Stats{}, err
	}
	return s.Stats(ctx, q)
}

func (p *Pending) FeedAudit(ctx context.Context, q auditstore.FeedQuery) (auditstore.FeedPage, error) {
	s, err := p.get()
	if err != nil {
		return auditstore.FeedPage{}, err
	}
	return s.FeedAudit(ctx, q)
}

func (p *Pending) FeedExecutions(ctx context.Context, q auditstore.ExecFeedQuery) (auditstore.ExecFeedPage, error) {
	s, err := p.get()
	if err != nil {
		return auditstore.ExecFeedPage{}, err
	}
	return s.FeedExecutions(ctx, q)
}

func (p *Pending) Ping(ctx context.Context) error {
	s, err := p.get()
	if err != nil {
		return err
	}
	return s.Ping(ctx)
}

func (p *Pending) Close() error {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.s == nil {
		return nil
	}
	return p.s.Close()
}

// The tamper-evidence logs' reads and writes: ErrNotReady until the
// store answers, like every other call.

// LeafFeed implements auditstore.LeafFeedHolder: the open store's leaf
// feed, when it keeps leaves (ClickHouse); none before it is open.
func (p *Pending) LeafFeed() (auditstore.LeafFeed, bool) {
	s, err := p.get()
	if err != nil {
		return nil, false
	}
	return auditstore.LeafFeedOf(s)
}

// LogHeadsOf implements auditstore.LogHeadsReader: the open store's, in
// one read where it reads several at once, else one LogHead a log.
func (p *Pending) LogHeadsOf(ctx context.Context, kind auditstore.LogKind, orgs []uuid.UUID) (map[uuid.UUID]auditstore.LogLeaf, error) {
	s, err := p.get()
	if err != nil {
		return nil, err
	}
	if r, ok := s.(auditstore.LogHeadsReader); ok {
		return r.LogHeadsOf(ctx, kind, orgs)
	}
	return auditstore.LogHeadsEach(ctx, s.LogHead, kind, orgs)
}

// ForgetLogWrites implements auditstore.LogWriteForgetter: the open
// store's, when it remembers its appends (before it is open, it has made
// none).
func (p *Pending) ForgetLogWrites() {
	if s, err := p.get(); err == nil {
		if f, ok := s.(auditstore.LogWriteForgetter); ok {
			f.ForgetLogWrites()
		}
	}
}

func (p *Pending) LogHead(ctx context.Context, org uuid.UUID, kind auditstore.LogKind) (int64, auditstore.LogLeaf, error) {
	s, err := p.get()
	if err != nil {
		return 0, auditstore.LogLeaf{}, err
	}
	return s.LogHead(ctx, org, kind)
}

func (p *Pending) ReadLogHashes(ctx context.Context, org uuid.UUID, kind auditstore.LogKind, indexes []int64) ([][32]byte, error) {
	s, err := p.get()
	if err != nil {
		return nil, err
	}
	return s.ReadLogHashes(ctx, org, kind, indexes)
}

func (p *Pending) LeafIndexes(ctx context.Context, org uuid.UUID, kind auditstore.LogKind, ids []uuid.UUID) (map[uuid.UUID]int64, error) {
	s, err := p.get()
	if err != nil {
		return nil, err
	}
	return s.LeafIndexes(ctx, org, kind, ids)
}

func (p *Pending) LeafTile(ctx context.Context, org uuid.UUID, kind auditstore.LogKind, event uuid.UUID, size int64) (int64, []auditstore.StoredHash, bool, error) {
	s, err := p.get()
	if err != nil {
		return 0, nil, false, err
	}
	return s.LeafTile(ctx, org, kind, event, size)
}

func (p *Pending) LeafRange(ctx context.Context, org uuid.UUID, kind auditstore.LogKind, lo, hi int64) ([]auditstore.LogLeaf, error) {
	s, err := p.get()
	if err != nil {
		return nil, err
	}
	return s.LeafRange(ctx, org, kind, lo, hi)
}

func (p *Pending) LatestCheckpoint(ctx context.Context, org uuid.UUID, kind auditstore.LogKind) (auditstore.Checkpoint, bool, error) {
	s, err := p.get()
	if err != nil {
		return auditstore.Checkpoint{}, false, err
	}
	return s.LatestCheckpoint(ctx, org, kind)
}

func (p *Pending) CheckpointAt(ctx context.Context, org uuid.UUID, kind auditstore.LogKind, size int64) (auditstore.Checkpoint, bool, error) {
	s, err := p.get()
	if err != nil {
		return auditstore.Checkpoint{}, false, err
	}
	return s.CheckpointAt(ctx, org, kind, size)
}

// The lifecycle's reads and writes (auditstore.LifecycleStore): ErrNotReady
// until the store answers, like every other call.

var _ auditstore.LifecycleStore = (*Pending)(nil)

func (p *Pending) lifecycle() (auditstore.LifecycleStore, error) {
	s, err := p.get()
	if err != nil {
		return nil, err
	}
	ls, ok := s.(auditstore.LifecycleStore)
	if !ok {
		return nil, fmt.Errorf("%w: the %T store keeps no lifecycle", auditstore.ErrInvalidQuery, s)
	}
	return ls, nil
}

func (p *Pending) ReadLogLeaves(ctx context.Context, org uuid.UUID, kind auditstore.LogKind, lo, hi int64) ([]auditstore.LogLeaf, error) {
	ls, err := p.lifecycle()
	if err != nil {
		return nil, err
	}
	return ls.ReadLogLeaves(ctx, org, kind, lo, hi)
}

func (p *Pending) CountThrough(ctx context.Context, org uuid.UUID, kind auditstore.LogKind, last auditstore.FeedKey, cutoffMS int64) (int64, int64, error) {
	ls, err := p.lifecycle()
	if err != nil {
		return 0, 0, err
	}
	return ls.CountThrough(ctx, org, kind, last, cutoffMS)
}

func (p *Pending) DeleteExpired(ctx context.Context, org uuid.UUID, kind auditstore.LogKind, last auditstore.FeedKey, cutoffMS int64, keep map[uuid.UUID]bool) (int64, error) {
	ls, err := p.lifecycle()
	if err != nil {
		return 0, err
	}
	return ls.DeleteExpired(ctx, org, kind, last, cutoffMS, keep)
}

func (p *Pending) SaveExpiry(ctx context.Context, org uuid.UUID, kind auditstore.LogKind, e auditstore.Expiry) error {
	ls, err := p.lifecycle()
	if err != nil {
		return err
	}
	return ls.SaveExpiry(ctx, org, kind, e)
}

// LatestExpiry answers none for a store that keeps no lifecycle (nothing
// expired there).
func (p *Pending) LatestExpiry(ctx context.Context, org uuid.UUID, kind auditstore.LogKind) (auditstore.Expiry, bool, error) {
	s, err := p.get()
	if err != nil {
		return auditstore.Expiry{}, false, err
	}
	ls, ok := s.(auditstore.LifecycleStore)
	if !ok {
		return auditstore.Expiry{}, false, nil
	}
	return ls.LatestExpiry(ctx, org, kind)
}

var _ auditstore.ErasureStore = (*Pending)(nil)

func (p *Pending) RewriteEntries(ctx context.Context, org uuid.UUID, kind auditstore.LogKind, rewrites []auditstore.Rewrite) error {
	s, err := p.get()
	if err != nil {
		return err
	}
	es, ok := s.(auditstore.ErasureStore)
	if !ok {
		return fmt.Errorf("%w: the %T store erases nothing", auditstore.ErrInvalidQuery, s)
	}
	return es.RewriteEntries(ctx, org, kind, rewrites)
}

// ErasedEntries answers none for a store that erases nothing.
func (p *Pending) ErasedEntries(ctx context.Context, org uuid.UUID, kind auditstore.LogKind, ids []uuid.UUID) (map[uuid.UUID]auditstore.ErasedEntry, error) {
	s, err := p.get()
	if err != nil {
		return nil, err
	}
	es, ok := s.(auditstore.ErasureStore)
	if !ok {
		return nil, nil
	}
	return es.ErasedEntries(ctx, org, kind, ids)
}
