package clickhouse_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	ch "github.com/ClickHouse/clickhouse-go/v2"
	"github.com/google/uuid"
	"go.uber.org/goleak"

	"github.com/auditrail/auditrail/internal/auditstore"
	"github.com/auditrail/auditrail/internal/auditstore/clickhouse"
	"github.com/auditrail/auditrail/internal/auditstore/storetest"
	"github.com/auditrail/auditrail/internal/synth"
	"github.com/auditrail/auditrail/internal/testenv"
	"github.com/auditrail/auditrail/schemas"
	"github.com/auditrail/auditrail/schemas/apiitem"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// verifyNoLeaks returns the DSN of a fresh database and fails t if
// goroutines started during t outlive it. The shared ClickHouse server (and
// its process waiters) starts before the goroutines are taken stock of.
// openStore opens a store on a database of its own (verifyNoLeaks),
// closed after the test, and returns it with the database's DSN.
func openStore(t *testing.T) (*clickhouse.Store, string) {
	t.Helper()
	dsn := verifyNoLeaks(t)
	s, err := clickhouse.Open(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, dsn
}

func verifyNoLeaks(t *testing.T) string {
	dsn := testenv.ClickHouse(t)
	opts := []goleak.Option{goleak.IgnoreCurrent()}
	t.Cleanup(func() { goleak.VerifyNone(t, opts...) })
	return dsn
}

func TestConformance(t *testing.T) {
	verifyNoLeaks(t)
	storetest.Run(t, func(t *testing.T) storetest.Opener {
		dsn := testenv.ClickHouse(t)
		return func(t *testing.T) auditstore.Store {
			s, err := clickhouse.Open(context.Background(), dsn)
			if err != nil {
				t.Fatal(err)
			}
			return s
		}
	})
}

// Leaves stored beside the entries as ingest writes them (apiitem.Leaves),
// read by position; entries of a writer without Leaves listed unknown.
func TestLeafFeed(t *testing.T) {
	verifyNoLeaks(t)
	dsn := testenv.ClickHouse(t)
	open := func(l auditstore.Leaves) storetest.Opener {
		return func(t *testing.T) auditstore.Store {
			s, err := clickhouse.OpenWith(context.Background(), dsn, clickhouse.Options{Leaves: l})
			if err != nil {
				t.Fatal(err)
			}
			return s
		}
	}
	storetest.RunLeafFeed(t, open(nil), open(apiitem.Leaves{}), apiitem.Leaves{})
}

// A database created before executions carried the principal and kept
// hourly counts migrates in place: old rows read back with empty principal
// fields and are counted by the backfill, and a migration interrupted after
// some of its ADD COLUMNs (unrecorded) applies again.
func TestMigratesExecutionsWithoutPrincipal(t *testing.T) {
	dsn := verifyNoLeaks(t)
	ctx := context.Background()
	opts, err := ch.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := ch.Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	mustExec := func(q string) {
		t.Helper()
		if err := conn.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	ms, err := auditstore.LoadMigrations(schemas.ClickHouseDDL, "clickhouse")
	if err != nil {
		t.Fatal(err)
	}
	mustExec(`CREATE TABLE schema_migrations (name String, applied_ms Int64) ENGINE = MergeTree ORDER BY name`)
	record, err := conn.PrepareBatch(ctx, `INSERT INTO schema_migrations (name, applied_ms)`)
	if err != nil {
		t.Fatal(err)
	}
	var interrupted bool
	for _, m := range ms {
		if m.Name >= "0004" {
			if !interrupted { // the first ADD COLUMN of 0004 ran, unrecorded
				mustExec(m.Statements[0])
				interrupted = true
			}
			continue
		}
		for _, stmt := range m.Statements {
			mustExec(stmt)
		}
		if err := record.Append(m.Name, int64(0)); err != nil {
			t.Fatal(err)
		}
	}
	if err := record.Send(); err != nil {
		t.Fatal(err)
	}
	org, oldID := uuid.New(), uuid.NewString()
	started := time.Now().Add(-3 * time.Hour).UnixMilli()
	old, err := conn.PrepareBatch(ctx, `INSERT INTO tool_executions (organization_id, event_id, execution_id, project_id, user_id,
		toolkit, tool_name, tool_version, started_ms, ended_ms, duration_ms, success, execution_code, execution_error, error_kind,
		hooks, created_ms, ver)`)
	if err != nil {
		t.Fatal(err)
	}
	if err := old.Append(org.String(), oldID, oldID, "", "u1", "tk", "tool", "1", started, started, 1.5, uint8(1), "OK", "", "", "[]",
		started, uint64(1)); err != nil {
		t.Fatal(err)
	}
	if err := old.Send(); err != nil {
		t.Fatal(err)
	}

	s, err := clickhouse.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var counted uint64
	if err := conn.QueryRow(ctx, `SELECT sum(n) FROM execution_hours WHERE organization_id = ?`, org.String()).Scan(&counted); err != nil {
		t.Fatal(err)
	}
	if counted != 1 {
		t.Fatalf("execution_hours counts %d executions of the old rows, want 1", counted)
	}
	storetest.CheckMigratedExecutions(t, s, org, oldID)
	// Reopening applies nothing twice.
	s2, err := clickhouse.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	s2.Close()
}

// Executions listings read only the hours that hold their page, by the
// hourly counts, not every row of the organization (ClickHouse 18.16 cannot
// read the sort key in reverse). Rows read are counted from the server's
// progress packets.
func TestExecutionListingsReadBoundedHours(t *testing.T) {
	s, _ := openStore(t)
	ctx := context.Background()
	org := uuid.New()
	const total, perHour = 120_000, 60
	now := time.Now().Truncate(time.Hour).Add(30 * time.Minute)
	evs := make([]schemas.ExecutionEvent, 0, total)
	for i := 0; i < total; i++ {
		id := uuid.NewString()
		evs = append(evs, schemas.ExecutionEvent{EventID: id, ExecutionID: id, OrganizationID: org.String(), UserID: "u1",
			Tool:      schemas.ToolRef{Toolkit: "tk", Name: "tool"},
			StartedAt: now.Add(-time.Duration(i) * time.Hour / perHour), EndedAt: now, Success: i%3 != 0})
	}
	if err := s.WriteExecutions(ctx, evs); err != nil {
		t.Fatal(err)
	}
	failed := false
	mid := evs[total/2]
	midID, _ := uuid.Parse(mid.EventID)
	tests := []struct {
		name string
		q    auditstore.ExecQuery
	}{
		{"newest page", auditstore.ExecQuery{Limit: 50}},
		{"deep page", auditstore.ExecQuery{Limit: 50, After: &auditstore.Key{Timestamp: mid.StartedAt, EventID: midID}}},
		{"failed only", auditstore.ExecQuery{Limit: 50, Success: &failed}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var rows atomic.Uint64
			qctx := ch.Context(ctx, ch.WithProgress(func(p *ch.Progress) { rows.Add(p.Rows) }))
			q := tc.q
			q.OrgID = org
			page, err := s.ListExecutions(qctx, q)
			if err != nil {
				t.Fatal(err)
			}
			if len(page.Items) != 50 || !page.HasMore {
				t.Fatalf("%d items, has_more %v", len(page.Items), page.HasMore)
			}
			if rows.Load() == 0 || rows.Load() > total/4 {
				t.Fatalf("read %d rows for a page of 50 among %d executions", rows.Load(), total)
			}
		})
	}
}

// The newest page of a tenant writing a thousand entries a second reads a
// window inside the newest hour, not the whole hour (granules read, from
// the server's counters); it is the page a full sort gives, and a filtered
// page (whole hours) still finds its matches.
func TestNewestPageOfABusyHourReadsLittle(t *testing.T) {
	s, dsn := openStore(t)
	ctx := context.Background()
	conn := rawConn(t, dsn)
	org := uuid.New()
	const total = 100_000
	// 100k entries over the last 100 s, one a millisecond.
	now := time.Now().Truncate(time.Millisecond)
	gen := synth.New(org, 2, 11)
	evs := make([]schemas.AuditEvent, total)
	for i := range evs {
		evs[i] = gen.Event(now.Add(-time.Duration(i) * time.Millisecond))
	}
	// One insert (one part: a window reads a granule of each part it
	// touches), and the store's clock at the newest entry, as under a
	// steady load: the hourly counts are read as the entries arrive, not
	// seconds after the last (a busy machine took 15 granules in rounds
	// that grow from an empty first window).
	if err := s.WriteAudit(ctx, evs); err != nil {
		t.Fatal(err)
	}
	clickhouse.SetClock(s, func() time.Time { return now })
	created := schemas.AuditActionCreated
	for _, tc := range []struct {
		name string
		q    auditstore.Query
		keep func(*schemas.AuditEvent) bool
		most uint64 // granules read
	}{
		// One small window, then the page's rows.
		{"newest page", auditstore.Query{OrgID: org, Limit: 50}, func(*schemas.AuditEvent) bool { return true }, 4},
		// Whole hours: the 13 granules of the hour, the page's rows.
		{"newest page of an action", auditstore.Query{OrgID: org, Limit: 50, Filter: auditstore.Filter{Action: &created}},
			func(e *schemas.AuditEvent) bool { return e.Action == created }, 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var want []string
			for i := range evs { // newest first
				if tc.keep(&evs[i]) && len(want) < 50 {
					want = append(want, evs[i].EventID.String())
				}
			}
			// The granules (marks, of 8,192 rows) its queries read,
			// subqueries included (the query log leaves out the rows of
			// an IN's subquery): the server's count, which only this
			// test's queries move.
			selected := func() uint64 {
				var n uint64
				if err := conn.QueryRow(ctx, "SELECT value FROM system.events WHERE event = 'SelectedMarks'").Scan(&n); err != nil {
					t.Fatal(err)
				}
				return n
			}
			if _, err := s.ListAudit(ctx, tc.q); err != nil { // the hourly counts, cached
				t.Fatal(err)
			}
			before := selected()
			page, err := s.ListAudit(ctx, tc.q)
			if err != nil {
				t.Fatal(err)
			}
			marks := selected() - before
			if len(page.Items) != 50 || !page.HasMore {
				t.Fatalf("%d items, has_more %v", len(page.Items), page.HasMore)
			}
			for i, it := range page.Items {
				if it.EventID.String() != want[i] {
					t.Fatalf("item %d is %s, want %s", i, it.EventID, want[i])
				}
			}
			t.Logf("%d granules read for a page of 50 among %d entries", marks, total)
			if marks == 0 || marks > tc.most {
				t.Fatalf("read %d granules for a page of 50 among %d entries, want at most %d", marks, total, tc.most)
			}
		})
	}
}

// The event lookups of wait_for read only the granules of their time window
// (around the time of a UUIDv7 id, else the last hour), not the whole
// organization; an event outside the window is not found (the documented
// limit of this store). Rows read are counted from the progress packets.
func TestLookupReadsItsWindow(t *testing.T) {
	s, _ := openStore(t)
	ctx := context.Background()
	org := uuid.New()
	const total, perHour = 100_000, 50
	now := time.Now()
	audits := make([]schemas.AuditEvent, 0, total)
	execs := make([]schemas.ExecutionEvent, 0, total)
	for i := 0; i < total; i++ {
		at := now.Add(-time.Duration(i) * time.Hour / perHour)
		e := storetest.Event(org, at)
		e.EventID = storetest.V7At(at)
		audits = append(audits, e)
		id := e.EventID.String()
		execs = append(execs, schemas.ExecutionEvent{EventID: id, ExecutionID: id, OrganizationID: org.String(), UserID: "u1",
			Tool: schemas.ToolRef{Toolkit: "tk", Name: "tool"}, StartedAt: at, EndedAt: at, Success: true})
	}
	// A v4 id from 20 minutes ago, and a v7 id whose event is an hour from the id's time.
	recent := storetest.Event(org, now.Add(-20*time.Minute))
	drifted := storetest.Event(org, now.Add(-2*time.Hour))
	drifted.EventID = storetest.V7At(now.Add(-time.Hour))
	audits = append(audits, recent, drifted)
	for _, e := range []schemas.AuditEvent{recent, drifted} {
		execs = append(execs, schemas.ExecutionEvent{EventID: e.EventID.String(), ExecutionID: e.EventID.String(), OrganizationID: org.String(),
			Tool: schemas.ToolRef{Toolkit: "tk", Name: "tool"}, StartedAt: e.Timestamp, EndedAt: e.Timestamp})
	}
	if err := s.WriteAudit(ctx, audits); err != nil {
		t.Fatal(err)
	}
	if err := s.WriteExecutions(ctx, execs); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		id    uuid.UUID
		found bool
	}{
		{"newest v7", audits[0].EventID, true},
		{"v7 in the middle of the history", audits[total/2].EventID, true},
		{"oldest v7", audits[total-1].EventID, true},
		{"recent v4", recent.EventID, true},
		{"unknown v4", uuid.New(), false},
		{"v7 an hour from its event", drifted.EventID, false},
	}
	for _, tc := range tests {
		for kind, has := range map[string]func(context.Context, uuid.UUID, *uuid.UUID, uuid.UUID) (bool, error){
			"audit": s.HasAudit, "execution": s.HasExecution,
		} {
			t.Run(tc.name+"/"+kind, func(t *testing.T) {
				var rows atomic.Uint64
				qctx := ch.Context(ctx, ch.WithProgress(func(p *ch.Progress) { rows.Add(p.Rows) }))
				found, err := has(qctx, org, nil, tc.id)
				if err != nil {
					t.Fatal(err)
				}
				if found != tc.found {
					t.Fatalf("found %v, want %v", found, tc.found)
				}
				if rows.Load() > total/4 {
					t.Fatalf("read %d rows to look up one event among %d", rows.Load(), total)
				}
				t.Logf("read %d rows of %d", rows.Load(), total)
			})
		}
	}
}

// ReadLogHashes at 1M leaves (10k with -short): the reads of an inclusion
// proof, p50 and p99 (make bench's 10M is bench's job).
func BenchmarkReadLogHashes(b *testing.B) {
	n := 1_000_000
	if testing.Short() {
		n = 10_000
	}
	s, err := clickhouse.Open(context.Background(), testenv.ClickHouse(b))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	org := uuid.New()
	// Other organizations' logs around it, as in a shared table.
	for range 3 {
		storetest.BuildLog(b, s, uuid.New(), auditstore.LogAudit, n/10, 10_000)
	}
	t0 := time.Now()
	m := storetest.BuildLog(b, s, org, auditstore.LogAudit, n, 10_000)
	b.Logf("%d leaves appended in %v", n, time.Since(t0).Round(time.Millisecond))
	b.Run(fmt.Sprintf("leaves=%d", n), func(b *testing.B) {
		storetest.BenchReadLogHashes(b, s, org, auditstore.LogAudit, m)
	})
}

// NoMigrate runs no DDL: on a database without the migrations it fails
// with ErrNotMigrated (a role waits for `auditrail migrate`), and once
// they ran it opens; a schema_migrations missing one of this binary's
// migrations is ErrNotMigrated again.
func TestOpenNoMigrate(t *testing.T) {
	dsn := verifyNoLeaks(t)
	ctx := context.Background()
	steps := []struct {
		name    string
		prepare func(t *testing.T)
		want    error
	}{
		{"before the migrations", func(*testing.T) {}, clickhouse.ErrNotMigrated},
		{"after them", func(t *testing.T) {
			s, err := clickhouse.Open(ctx, dsn)
			if err != nil {
				t.Fatal(err)
			}
			s.Close()
		}, nil},
		{"a migration forgotten", func(t *testing.T) {
			opts, _ := ch.ParseDSN(dsn)
			c, err := ch.Open(opts)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			// 18.16 has no lightweight delete: the table is made again
			// without the last migration.
			for _, q := range []string{"RENAME TABLE schema_migrations TO schema_migrations_old",
				"CREATE TABLE schema_migrations (name String, applied_ms Int64) ENGINE = MergeTree ORDER BY name",
				"INSERT INTO schema_migrations SELECT * FROM schema_migrations_old WHERE name != (SELECT max(name) FROM schema_migrations_old)"} {
				if err := c.Exec(ctx, q); err != nil {
					t.Fatalf("%s: %v", q, err)
				}
			}
		}, clickhouse.ErrNotMigrated},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			st.prepare(t)
			s, err := clickhouse.OpenWith(ctx, dsn, clickhouse.Options{NoMigrate: true})
			if err == nil {
				s.Close()
			}
			if !errors.Is(err, st.want) || (st.want == nil) != (err == nil) {
				t.Fatalf("open without migrating: %v, want %v", err, st.want)
			}
		})
	}
}

// The leaves and the heads of several logs read at once are those read
// one log at a time.
func TestLeafFeeds(t *testing.T) {
	verifyNoLeaks(t)
	dsn := testenv.ClickHouse(t)
	storetest.RunLeafFeeds(t, func(t *testing.T) auditstore.Store {
		s, err := clickhouse.OpenWith(context.Background(), dsn, clickhouse.Options{Leaves: apiitem.Leaves{}})
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}
