package sqlite_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/auditrail/auditrail/internal/auditstore"
	"github.com/auditrail/auditrail/internal/auditstore/sqlite"
	"github.com/auditrail/auditrail/internal/auditstore/storetest"
	"github.com/auditrail/auditrail/internal/testenv"
	"github.com/auditrail/auditrail/schemas"
)

func TestMain(m *testing.M) { testenv.MainNoLeaks(m) }

func TestConformance(t *testing.T) { storetest.Run(t, fresh) }

func TestLifecycleConformance(t *testing.T) { storetest.RunLifecycle(t, fresh) }

func TestErasureConformance(t *testing.T) { storetest.RunErasure(t, fresh) }

// fresh opens a store in a new file.
func fresh(t *testing.T) storetest.Opener {
	path := filepath.Join(t.TempDir(), "audit.db")
	return func(t *testing.T) auditstore.Store {
		s, err := sqlite.Open(context.Background(), path)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
}

// A database created before executions carried the principal migrates in
// place: old rows read back with empty principal fields, new rows keep theirs.
func TestMigratesExecutionsWithoutPrincipal(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "old.db")
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	ms, err := auditstore.LoadMigrations(schemas.SQLiteDDL, "sqlite")
	if err != nil {
		t.Fatal(err)
	}
	mustExec := func(q string, args ...any) {
		t.Helper()
		if _, err := db.ExecContext(ctx, q, args...); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	mustExec(`CREATE TABLE schema_migrations (name TEXT PRIMARY KEY, applied_ms INTEGER NOT NULL)`)
	for _, m := range ms {
		if m.Name >= "0003" {
			break
		}
		for _, stmt := range m.Statements {
			mustExec(stmt)
		}
		mustExec(`INSERT INTO schema_migrations (name, applied_ms) VALUES (?, 0)`, m.Name)
	}
	org, oldID := uuid.New(), uuid.NewString()
	started := time.Now().Add(-time.Minute).UnixMilli()
	mustExec(`INSERT INTO tool_executions (organization_id, event_id, execution_id, project_id, user_id, toolkit, tool_name, tool_version,
		started_ms, ended_ms, duration_ms, success, execution_code, execution_error, error_kind, hooks, created_ms)
		VALUES (?, ?, ?, '', 'u1', 'tk', 'tool', '1', ?, ?, 1.5, 1, 'OK', '', '', '[]', ?)`, org.String(), oldID, oldID, started, started, started)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	s, err := sqlite.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	storetest.CheckMigratedExecutions(t, s, org, oldID)
}

// ReadLogHashes at 1M leaves (10k with -short): the reads of an inclusion
// proof, p50 and p99 (make bench's 10M is bench's job).
func BenchmarkReadLogHashes(b *testing.B) {
	n := 1_000_000
	if testing.Short() {
		n = 10_000
	}
	path := filepath.Join(b.TempDir(), "audit.db")
	s, err := sqlite.Open(context.Background(), path)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	org := uuid.New()
	t0 := time.Now()
	m := storetest.BuildLog(b, s, org, auditstore.LogAudit, n, 10_000)
	b.Logf("%d leaves appended in %v (the model's hashes included)", n, time.Since(t0).Round(time.Millisecond))
	var pages, pageSize int64
	if err := sqlDB(b, path).QueryRow(`SELECT page_count, page_size FROM pragma_page_count(), pragma_page_size()`).Scan(&pages, &pageSize); err == nil {
		b.Logf("database: %d bytes, %d per leaf", pages*pageSize, pages*pageSize/int64(n))
	}
	b.Run(fmt.Sprintf("leaves=%d", n), func(b *testing.B) {
		storetest.BenchReadLogHashes(b, s, org, auditstore.LogAudit, m)
	})
}

func sqlDB(tb testing.TB, path string) *sql.DB {
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { db.Close() })
	return db
}

// Under steady retention the file stops growing: pages freed by an
// expiry are reused by the entries written after it.
func TestExpiryReusesPages(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "audit.db")
	s, err := sqlite.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	org := uuid.New()
	seq := uint64(0)
	round := func() {
		evs := make([]schemas.AuditEvent, 5000)
		for i := range evs {
			seq++
			evs[i] = storetest.Event(org, time.Now())
			evs[i].Data = []byte(`{"after":{"name":"an entry with some payload to take room on the pages"}}`)
			evs[i].Stored = schemas.Persisted{Seq: seq}
		}
		if err := s.WriteAudit(ctx, evs); err != nil {
			t.Fatal(err)
		}
	}
	expire := func() {
		if _, err := s.DeleteExpired(ctx, org, auditstore.LogAudit, auditstore.FeedKey{Seq: seq, CreatedMS: 1 << 62}, time.Now().Add(time.Hour).UnixMilli(), nil); err != nil {
			t.Fatal(err)
		}
	}
	size := func() int64 {
		// The WAL is checkpointed into the file as SQLite does on its own.
		db, err := sql.Open("sqlite", "file:"+path)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		if _, err := db.Exec(`PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
			t.Fatal(err)
		}
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		return fi.Size()
	}
	round()
	expire()
	round()
	first := size()
	for range 4 {
		expire()
		round()
	}
	last := size()
	t.Logf("file: %d bytes after the first rounds, %d after 4 more", first, last)
	if last > first+first/10 {
		t.Fatalf("the file grew from %d to %d bytes over 4 rounds of steady retention", first, last)
	}
}
