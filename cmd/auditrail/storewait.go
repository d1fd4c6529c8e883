package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/auditrail/auditrail/internal/auditstore"
	"github.com/auditrail/auditrail/internal/auditstore/clickhouse"
	"github.com/auditrail/auditrail/internal/cli"
	"github.com/auditrail/auditrail/internal/redact"
	"github.com/auditrail/auditrail/internal/retry"
	"github.com/auditrail/auditrail/query"
	"github.com/auditrail/auditrail/schemas"
)

// The query role finds its log routes by this interface: a method missing
// here would turn them off.
var _ query.LogReader = (*pendingStore)(nil)

// errStoreNotReady answers every call before the store has answered once.
var errStoreNotReady = errors.New("audit store not ready")

// pendingStore is the audit store of a process that serves before its
// store answers: calls fail with errStoreNotReady (so /healthz is 503)
// until open succeeds.
type pendingStore struct {
	store // set once ready; methods not overridden below need it ready
	mu    sync.RWMutex
	s     store
	last  error
	ready chan struct{}
}

func newPendingStore() *pendingStore { return &pendingStore{ready: make(chan struct{})} }

func (p *pendingStore) get() (store, error) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.s == nil {
		if p.last != nil {
			return nil, fmt.Errorf("%w: %v", errStoreNotReady, p.last)
		}
		return nil, errStoreNotReady
	}
	return p.s, nil
}

// openWithRetry opens the store (openStore) until it answers, with back-off;
// a malformed DSN, or a user that may not run the migrations it was asked
// to run, is permanent. Migrations not run yet (--clickhouse-migrate=false)
// are waited for. It returns nil once the store is ready.
func (p *pendingStore) openWithRetry(ctx context.Context, t storeTarget, log *slog.Logger) error {
	dsn := t.dsn
	policy := retry.Policy{Initial: 250 * time.Millisecond, Max: 5 * time.Second, Multiplier: 2, Jitter: 0.2}
	err := retry.Do(ctx, policy, func(ctx context.Context) error {
		s, err := openStore(ctx, t, log)
		if errors.Is(err, clickhouse.ErrInvalidDSN) {
			return retry.Permanent(cli.Usage(err))
		}
		if errors.Is(err, clickhouse.ErrNoDDL) {
			return retry.Permanent(redact.Error(err, dsn, dsnPassword(dsn)))
		}
		if err == nil {
			p.set(s)
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

// set makes s the store; the waiters of Ready go on.
func (p *pendingStore) set(s store) {
	p.mu.Lock()
	p.s, p.store = s, s
	p.mu.Unlock()
	close(p.ready)
}

// Ready is closed once the store answers.
func (p *pendingStore) Ready() <-chan struct{} { return p.ready }

func (p *pendingStore) WriteAudit(ctx context.Context, evs []schemas.AuditEvent) error {
	s, err := p.get()
	if err != nil {
		return err
	}
	return s.WriteAudit(ctx, evs)
}

func (p *pendingStore) ListAudit(ctx context.Context, q auditstore.Query) (auditstore.Page, error) {
	s, err := p.get()
	if err != nil {
		return auditstore.Page{}, err
	}
	return s.ListAudit(ctx, q)
}

func (p *pendingStore) WriteExecutions(ctx context.Context, evs []schemas.ExecutionEvent) error {
	s, err := p.get()
	if err != nil {
		return err
	}
	return s.WriteExecutions(ctx, evs)
}

func (p *pendingStore) ListExecutions(ctx context.Context, q auditstore.ExecQuery) (auditstore.ExecPage, error) {
	s, err := p.get()
	if err != nil {
		return auditstore.ExecPage{}, err
	}
	return s.ListExecutions(ctx, q)
}

func (p *pendingStore) HasAudit(ctx context.Context, org uuid.UUID, project *uuid.UUID, id uuid.UUID) (bool, error) {
	s, err := p.get()
	if err != nil {
		return false, err
	}
	return s.HasAudit(ctx, org, project, id)
}

func (p *pendingStore) HasExecution(ctx context.Context, org uuid.UUID, project *uuid.UUID, id uuid.UUID) (bool, error) {
	s, err := p.get()
	if err != nil {
		return false, err
	}
	return s.HasExecution(ctx, org, project, id)
}

func (p *pendingStore) Stats(ctx context.Context, q auditstore.StatsQuery) (auditstore.Stats, error) {
	s, err := p.get()
	if err != nil {
		return auditstore.Stats{}, err
	}
	return s.Stats(ctx, q)
}

func (p *pendingStore) FeedAudit(ctx context.Context, q auditstore.FeedQuery) (auditstore.FeedPage, error) {
	s, err := p.get()
	if err != nil {
		return auditstore.FeedPage{}, err
	}
	return s.FeedAudit(ctx, q)
}

func (p *pendingStore) FeedExecutions(ctx context.Context, q auditstore.ExecFeedQuery) (auditstore.ExecFeedPage, error) {
	s, err := p.get()
	if err != nil {
		return auditstore.ExecFeedPage{}, err
	}
	return s.FeedExecutions(ctx, q)
}

func (p *pendingStore) Ping(ctx context.Context) error {
	s, err := p.get()
	if err != nil {
		return err
	}
	return s.Ping(ctx)
}

func (p *pendingStore) Close() error {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.s == nil {
		return nil
	}
	return p.s.Close()
}

// The tamper-evidence logs' reads and writes: errStoreNotReady until the
// store answers, like every other call.

func (p *pendingStore) LogHead(ctx context.Context, org uuid.UUID, kind auditstore.LogKind) (int64, auditstore.LogLeaf, error) {
	s, err := p.get()
	if err != nil {
		return 0, auditstore.LogLeaf{}, err
	}
	return s.LogHead(ctx, org, kind)
}

func (p *pendingStore) ReadLogHashes(ctx context.Context, org uuid.UUID, kind auditstore.LogKind, indexes []int64) ([][32]byte, error) {
	s, err := p.get()
	if err != nil {
		return nil, err
	}
	return s.ReadLogHashes(ctx, org, kind, indexes)
}

func (p *pendingStore) LeafIndexes(ctx context.Context, org uuid.UUID, kind auditstore.LogKind, ids []uuid.UUID) (map[uuid.UUID]int64, error) {
	s, err := p.get()
	if err != nil {
		return nil, err
	}
	return s.LeafIndexes(ctx, org, kind, ids)
}

func (p *pendingStore) LeafTile(ctx context.Context, org uuid.UUID, kind auditstore.LogKind, event uuid.UUID, size int64) (int64, []auditstore.StoredHash, bool, error) {
	s, err := p.get()
	if err != nil {
		return 0, nil, false, err
	}
	return s.LeafTile(ctx, org, kind, event, size)
}

func (p *pendingStore) LatestCheckpoint(ctx context.Context, org uuid.UUID, kind auditstore.LogKind) (auditstore.Checkpoint, bool, error) {
	s, err := p.get()
	if err != nil {
		return auditstore.Checkpoint{}, false, err
	}
	return s.LatestCheckpoint(ctx, org, kind)
}

func (p *pendingStore) CheckpointAt(ctx context.Context, org uuid.UUID, kind auditstore.LogKind, size int64) (auditstore.Checkpoint, bool, error) {
	s, err := p.get()
	if err != nil {
		return auditstore.Checkpoint{}, false, err
	}
	return s.CheckpointAt(ctx, org, kind, size)
}
