package backend_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/auditrail/auditrail/internal/auditstore"
	"github.com/auditrail/auditrail/internal/auditstore/backend"
	"github.com/auditrail/auditrail/internal/auditstore/clickhouse"
	"github.com/auditrail/auditrail/internal/auditstore/sqlite"
	"github.com/auditrail/auditrail/internal/synth"
	"github.com/auditrail/auditrail/internal/testenv"
	"github.com/auditrail/auditrail/schemas"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// The store every role holds (Pending) hands out the streamed inserts of
// the store it opened: ClickHouse's, which ingest then uses; SQLite has
// none (auditstore.ErrNoInserts), and before the store is open there is
// none either.
func TestPendingStreamedInserts(t *testing.T) {
	ctx := context.Background()
	p := backend.NewPending()
	if _, err := p.BeginAudit(ctx); !errors.Is(err, backend.ErrNotReady) {
		t.Fatalf("before the store is open: %v, want ErrNotReady", err)
	}

	lite, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "audit.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer lite.Close()
	onLite := backend.NewPending()
	onLite.Set(lite)
	if _, err := onLite.BeginAudit(ctx); !errors.Is(err, auditstore.ErrNoInserts) {
		t.Fatalf("on SQLite: %v, want ErrNoInserts", err)
	}
	if _, err := onLite.BeginExecutions(ctx); !errors.Is(err, auditstore.ErrNoInserts) {
		t.Fatalf("executions on SQLite: %v, want ErrNoInserts", err)
	}

	ch, err := clickhouse.Open(ctx, testenv.ClickHouse(t))
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	p.Set(ch)
	org := uuid.New()
	gen := synth.New(org, 1, 3)
	now := time.Now()
	evs := []schemas.AuditEvent{gen.Event(now), gen.Event(now.Add(-time.Second))}
	ins, err := p.BeginAudit(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := ins.Write(ctx, evs); err != nil {
		t.Fatal(err)
	}
	if err := ins.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	page, err := p.ListAudit(ctx, auditstore.Query{OrgID: org, Limit: 10})
	if err != nil || len(page.Items) != 2 {
		t.Fatalf("listed %d entries (%v), want 2", len(page.Items), err)
	}
	x, err := p.BeginExecutions(ctx)
	if err != nil {
		t.Fatalf("executions on ClickHouse: %v", err)
	}
	x.Abort()
}
