package clickhouse_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/auditrail/auditrail/internal/auditstore"
	"github.com/auditrail/auditrail/internal/synth"
	"github.com/auditrail/auditrail/schemas"
)

// A streamed insert takes its rows in several blocks and makes them
// visible together when it commits, as one part of audit_logs (the server
// squashes the blocks of one INSERT): events already stored, and copies
// of events written earlier in the same insert, are written once.
func TestStreamedInsert(t *testing.T) {
	s, dsn := openStore(t)
	ctx := context.Background()
	conn := rawConn(t, dsn)
	org := uuid.New()
	gen := synth.New(org, 2, 5)
	now := time.Now().Truncate(time.Millisecond)
	block := func(n int, from time.Time) []schemas.AuditEvent {
		evs := make([]schemas.AuditEvent, n)
		for i := range evs {
			evs[i] = gen.Event(from.Add(-time.Duration(i) * time.Millisecond))
		}
		return evs
	}
	count := func() int {
		var n uint64
		if err := conn.QueryRow(ctx, "SELECT count() FROM audit_logs WHERE organization_id = ?", org.String()).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return int(n)
	}
	// The parts its inserts made (level 0: not a merge's), the merged ones included.
	parts := func() int {
		var n uint64
		if err := conn.QueryRow(ctx, "SELECT count() FROM system.parts WHERE database = currentDatabase() AND table = 'audit_logs' AND level = 0").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return int(n)
	}

	pre := block(5, now.Add(-time.Hour))
	if err := s.WriteAudit(ctx, pre); err != nil {
		t.Fatal(err)
	}
	partsBefore := parts()
	b1, b2, b3 := block(1000, now), block(1000, now.Add(-time.Second)), block(1000, now.Add(-2*time.Second))
	// Block 2 carries copies of 10 events of block 1 and of the 5 stored ones.
	b2 = append(append(b2, b1[:10]...), pre...)
	ins, err := s.BeginAudit(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range [][]schemas.AuditEvent{b1, b2, b3} {
		if err := ins.Write(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	if ins.Rows() != 3000 {
		t.Fatalf("the insert wrote %d rows, want 3000", ins.Rows())
	}
	if n := count(); n != 5 {
		t.Fatalf("%d rows visible before the commit, want 5", n)
	}
	if err := ins.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if n := count(); n != 3005 {
		t.Fatalf("%d rows after the commit, want 3005", n)
	}
	if got := parts() - partsBefore; got != 1 {
		t.Fatalf("three blocks made %d parts of audit_logs, want 1", got)
	}
	page, err := s.ListAudit(ctx, auditstore.Query{OrgID: org, Limit: 1})
	if err != nil || len(page.Items) != 1 || page.Items[0].EventID != b1[0].EventID {
		t.Fatalf("newest entry %+v, %v; want %s", page.Items, err, b1[0].EventID)
	}

	// The listing's count: copies folded.
	listed := func() int {
		page, err := s.ListAudit(ctx, auditstore.Query{OrgID: org, Limit: auditstore.MaxLimit})
		if err != nil {
			t.Fatal(err)
		}
		return len(page.Items)
	}
	// An aborted insert may still be stored (ClickHouse 18.16 ends an
	// INSERT whose client goes away as if it had finished): its events,
	// written again, are listed once.
	t.Run("aborted", func(t *testing.T) {
		ins, err := s.BeginAudit(ctx)
		if err != nil {
			t.Fatal(err)
		}
		again := block(100, now.Add(-3*time.Second))
		if err := ins.Write(ctx, again); err != nil {
			t.Fatal(err)
		}
		ins.Abort()
		if err := s.WriteAudit(ctx, again); err != nil {
			t.Fatal(err)
		}
		if n := listed(); n != 3105 {
			t.Fatalf("%d entries listed, want 3105", n)
		}
	})

	// A block that would take the insert past the partitions one insert
	// may touch is refused whole; the insert still commits what it has.
	t.Run("full", func(t *testing.T) {
		ins, err := s.BeginAudit(ctx)
		if err != nil {
			t.Fatal(err)
		}
		month := func(k int) time.Time { return time.Date(2010, time.Month(1+k), 15, 0, 0, 0, 0, time.UTC) }
		var months []schemas.AuditEvent
		for k := range 99 {
			months = append(months, gen.Event(month(k)))
		}
		if err := ins.Write(ctx, months); err != nil {
			t.Fatal(err)
		}
		if err := ins.Write(ctx, []schemas.AuditEvent{gen.Event(month(99))}); !errors.Is(err, auditstore.ErrInsertFull) {
			t.Fatalf("a block of a 100th month: %v, want ErrInsertFull", err)
		}
		if ins.Rows() != 99 {
			t.Fatalf("%d rows written, want 99", ins.Rows())
		}
		if err := ins.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		if n := listed(); n != 3105+99 {
			t.Fatalf("%d entries listed, want %d", n, 3105+99)
		}
	})

	// A row over the row limit (0010_row_limits.sql) fails the insert as
	// a refusal, and nothing of it is stored.
	t.Run("refused", func(t *testing.T) {
		ins, err := s.BeginAudit(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer ins.Abort()
		bad := block(10, now.Add(-4*time.Second))
		bad[3].Data = []byte(`{"blob":"` + strings.Repeat("x", 1<<20) + `"}`)
		err = ins.Write(ctx, bad)
		if err == nil {
			err = ins.Commit(ctx)
		}
		if !errors.Is(err, auditstore.ErrRefused) {
			t.Fatalf("an insert with a row over the limit: %v, want ErrRefused", err)
		}
		if n := listed(); n != 3105+99 {
			t.Fatalf("%d entries listed after a refused insert, want %d", n, 3105+99)
		}
	})
}

// Tool executions stream the same way: blocks of one insert, visible at
// its commit, copies across blocks written once.
func TestStreamedInsertOfExecutions(t *testing.T) {
	s, _ := openStore(t)
	ctx := context.Background()
	org := uuid.New()
	now := time.Now().Truncate(time.Millisecond)
	block := func(n int, from time.Time) []schemas.ExecutionEvent {
		evs := make([]schemas.ExecutionEvent, n)
		for i := range evs {
			id := uuid.NewString()
			evs[i] = schemas.ExecutionEvent{EventID: id, ExecutionID: id, OrganizationID: org.String(), UserID: "u1",
				Tool:      schemas.ToolRef{Toolkit: "tk", Name: "tool"},
				StartedAt: from.Add(-time.Duration(i) * time.Millisecond), EndedAt: from, Success: true}
		}
		return evs
	}
	listed := func() int {
		page, err := s.ListExecutions(ctx, auditstore.ExecQuery{OrgID: org, Limit: auditstore.MaxLimit})
		if err != nil {
			t.Fatal(err)
		}
		return len(page.Items)
	}
	ins, err := s.BeginExecutions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	b1, b2 := block(300, now), block(300, now.Add(-time.Second))
	for _, b := range [][]schemas.ExecutionEvent{b1, append(b2, b1[:20]...)} {
		if err := ins.Write(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	if n := listed(); n != 0 {
		t.Fatalf("%d executions listed before the commit", n)
	}
	if err := ins.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if ins.Rows() != 600 || listed() != 600 {
		t.Fatalf("%d rows written, %d listed; want 600", ins.Rows(), listed())
	}
}
