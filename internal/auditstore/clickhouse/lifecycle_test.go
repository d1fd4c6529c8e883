package clickhouse_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	ch "github.com/ClickHouse/clickhouse-go/v2"
	"github.com/google/uuid"

	"github.com/auditrail/auditrail/internal/auditstore"
	"github.com/auditrail/auditrail/internal/auditstore/clickhouse"
	"github.com/auditrail/auditrail/internal/auditstore/storetest"
	"github.com/auditrail/auditrail/internal/testenv"
	"github.com/auditrail/auditrail/schemas"
	"github.com/auditrail/auditrail/schemas/apiitem"
)

// The lifecycle's conformance cases, the cases sharing one database (each
// writes organizations of its own).
func TestLifecycle(t *testing.T) {
	dsn := verifyNoLeaks(t)
	storetest.RunLifecycle(t, func(t *testing.T) storetest.Opener {
		return func(t *testing.T) auditstore.Store {
			s, err := clickhouse.Open(context.Background(), dsn)
			if err != nil {
				t.Fatal(err)
			}
			return s
		}
	})
}

// The erasure's conformance cases.
func TestErasure(t *testing.T) {
	dsn := verifyNoLeaks(t)
	storetest.RunErasure(t, func(t *testing.T) storetest.Opener {
		return func(t *testing.T) auditstore.Store {
			s, err := clickhouse.Open(context.Background(), dsn)
			if err != nil {
				t.Fatal(err)
			}
			return s
		}
	})
}

// An expiry leaves nothing of its entries and every route consistent: no
// row of them in event_index, feed_index or feed_leaves, and aggregates
// that agree with a count of the entries that stay (as the listing shows
// them: a copy written twice counts once); entries written while it runs
// are all there after.
func TestExpiryConsistent(t *testing.T) {
	dsn := verifyNoLeaks(t)
	s, err := clickhouse.OpenWith(context.Background(), dsn, clickhouse.Options{Leaves: apiitem.Leaves{}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	conn := openConn(t, dsn)
	testExpiryConsistent(t, s, []tableView{{conn: conn}})
}

// tableView is a connection through which the test reads the tables, and
// the suffix of their names there (_local: a cluster node's own tables).
type tableView struct {
	conn   ch.Conn
	suffix string
	name   string
}

func openConn(t *testing.T, dsn string) ch.Conn {
	t.Helper()
	opts, err := ch.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	c, err := ch.Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// openSyncConn is openConn whose inserts through Distributed tables
// return once the shards stored them.
func openSyncConn(t *testing.T, dsn string) ch.Conn {
	t.Helper()
	opts, err := ch.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	opts.Settings = ch.Settings{"insert_distributed_sync": 1}
	c, err := ch.Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func testExpiryConsistent(t *testing.T, s *clickhouse.Store, views []tableView) {
	ctx := context.Background()
	conn := views[0].conn                   // reads through the Distributed tables on a cluster
	defer clickhouse.SetKeepLiteralMax(2)() // the kept ids go through lifecycle_keep
	org, other := uuid.New(), uuid.New()
	projects := []uuid.UUID{uuid.New(), uuid.New()}
	now := time.Now()
	cutoff := now.Add(-time.Hour).UnixMilli()
	base := auditstore.Millis(now.Add(-50 * time.Hour))

	// 200 entries of org over 23 hours (some in projects, with principals
	// and resources), persisted at their time; the last 10 at or below
	// the expiry's key persisted now (after the cutoff).
	var evs, others []schemas.AuditEvent
	for i := range 200 {
		ts := base.Add(time.Duration(i) * 7 * time.Minute)
		e := storetest.Event(org, ts)
		if i%3 != 0 {
			e.ProjectID = &projects[i%2]
		}
		rt := schemas.ResourceType(1 + i%3)
		e.PrincipalID, e.ResourceType, e.ResourceID = fmt.Sprintf("p%d", i%5), &rt, ptr(fmt.Sprintf("r%d", i%7))
		e.Stored = schemas.Persisted{Seq: uint64(i+1) * 2, Time: ts}
		if i >= 170 && i < 180 {
			e.Stored.Time = now
		}
		evs = append(evs, e)
		o := storetest.Event(other, ts)
		o.Stored = schemas.Persisted{Seq: uint64(i+1)*2 + 1, Time: ts}
		others = append(others, o)
	}
	if err := s.WriteAudit(ctx, append(evs, others...)); err != nil {
		t.Fatal(err)
	}
	// Two copies written twice (racing inserts): one that expires, one kept.
	for _, e := range []schemas.AuditEvent{evs[20], evs[150]} {
		cols := "organization_id, ts_ms, event_id, id, client_ip, action, source, display_name, customer_id, project_id, principal_id, user_id, " +
			"principal_type, resource_type, resource_id, resource_display, data, created_ms, ver, seq, leaf"
		if err := conn.Exec(ctx, "INSERT INTO audit_logs ("+cols+") SELECT "+cols+" FROM audit_logs WHERE organization_id = ? AND event_id = ?",
			org.String(), e.EventID.String()); err != nil {
			t.Fatal(err)
		}
	}
	last := auditstore.FeedKey{Seq: evs[179].Stored.Seq, CreatedMS: now.UnixMilli(), EventID: evs[179].EventID}
	keep := map[uuid.UUID]bool{}
	for _, i := range []int{5, 50, 100, 150, 160} {
		keep[evs[i].EventID] = true
	}
	keep[uuid.New()] = true // not an entry of the log: ignored
	var doomed []uuid.UUID
	for _, e := range evs[:170] {
		if !keep[e.EventID] {
			doomed = append(doomed, e.EventID)
		}
	}
	if all, before, err := s.CountThrough(ctx, org, auditstore.LogAudit, last, cutoff); err != nil || all != 180 || before != 170 {
		t.Fatalf("CountThrough = %d, %d, %v; want 180, 170 (a copy counts once)", all, before, err)
	}
	if n := countIDs(t, conn, "(SELECT * FROM feed_index WHERE leaf != '')", org, doomed); n == 0 {
		t.Fatal("no leaves stored beside the entries: the test proves nothing")
	}

	// Entries written while the expiry runs.
	var (
		fresh   []uuid.UUID
		during  atomic.Int32
		running atomic.Bool
		stop    = make(chan struct{})
		wrote   = make(chan struct{}, 1)
		wg      sync.WaitGroup
		werr    error
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for b := 0; ; b++ {
			select {
			case <-stop:
				return
			default:
			}
			var batch []schemas.AuditEvent
			for j := range 10 {
				e := storetest.Event(org, now.Add(-time.Duration(b*10+j)*time.Second))
				e.Stored = schemas.Persisted{Seq: uint64(100_000 + b*10 + j)}
				batch = append(batch, e)
			}
			r := running.Load()
			if err := s.WriteAudit(ctx, batch); err != nil {
				werr = err
				return
			}
			for _, e := range batch {
				fresh = append(fresh, e.EventID)
			}
			if r && running.Load() {
				during.Add(1)
			}
			select {
			case wrote <- struct{}{}:
			default:
			}
		}
	}()
	<-wrote
	running.Store(true)
	var mutating []uuid.UUID // written after the last mutation was created, before it is waited for
	var keptRows uint64      // in lifecycle_keep while the mutations run
	defer clickhouse.OnExpiryMutating(func() {
		if err := conn.QueryRow(ctx, "SELECT count() FROM lifecycle_keep WHERE organization_id = ?", org.String()).Scan(&keptRows); err != nil {
			t.Error(err)
		}
		e := storetest.Event(org, now)
		e.Stored = schemas.Persisted{Seq: 99_999}
		if err := s.WriteAudit(ctx, []schemas.AuditEvent{e}); err != nil {
			t.Error(err)
		}
		mutating = append(mutating, e.EventID)
	})()
	n, err := s.DeleteExpired(ctx, org, auditstore.LogAudit, last, cutoff, keep)
	running.Store(false)
	close(stop)
	wg.Wait()
	if err != nil || n != int64(len(doomed)) {
		t.Fatalf("DeleteExpired = %d, %v; want %d", n, err, len(doomed))
	}
	if werr != nil {
		t.Fatal(werr)
	}
	t.Logf("%d batches of 10 entries written during the expiry", during.Load())
	if len(mutating) != 1 {
		t.Fatalf("%d entries written while the mutations ran, want 1", len(mutating))
	}
	fresh = append(fresh, mutating...)
	if keptRows != 5 {
		t.Fatalf("lifecycle_keep held %d ids during the mutations, want the 5 kept entries", keptRows)
	}
	testenv.Eventually(t, 30*time.Second, "the kept ids deleted from lifecycle_keep", func() bool {
		var n uint64
		if err := conn.QueryRow(ctx, "SELECT count() FROM lifecycle_keep WHERE organization_id = ?", org.String()).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n == 0
	})

	listed := map[uuid.UUID]bool{}
	for _, e := range listAll(t, s, org) {
		listed[e.EventID] = true
	}
	for _, id := range fresh {
		if !listed[id] {
			t.Fatalf("entry %s written during the expiry is lost", id)
		}
	}
	for _, id := range doomed {
		if listed[id] {
			t.Fatalf("expired entry %s still listed", id)
		}
	}
	if want := 200 - len(doomed) + len(fresh); len(listed) != want {
		t.Fatalf("%d entries listed, want %d", len(listed), want)
	}
	var keptIDs []uuid.UUID
	for id := range keep {
		keptIDs = append(keptIDs, id)
	}
	for _, v := range views {
		for _, table := range []string{"audit_logs", "event_index", "feed_index", "feed_leaves"} {
			if n := countIDs(t, v.conn, table+v.suffix, org, doomed); n != 0 {
				t.Errorf("%s%s%s: %d rows of expired entries", v.name, table, v.suffix, n)
			}
		}
	}
	if n := countIDs(t, conn, "event_index", org, keptIDs); n != len(keep)-1 {
		t.Errorf("%d kept entries in event_index, want %d", n, len(keep)-1)
	}
	checkAggregates(t, conn, org)
	checkAggregates(t, conn, other)
	if n := len(listAll(t, s, other)); n != 200 {
		t.Fatalf("the other organization has %d entries left, want 200", n)
	}
	if n, err := s.DeleteExpired(ctx, org, auditstore.LogAudit, last, cutoff, keep); err != nil || n != 0 {
		t.Fatalf("DeleteExpired again = %d, %v", n, err)
	}

	// Executions: their hourly counts too.
	var xs []schemas.ExecutionEvent
	for i := range 30 {
		ts := base.Add(time.Duration(i) * 31 * time.Minute)
		id := uuid.NewString()
		x := schemas.ExecutionEvent{EventID: id, ExecutionID: id, OrganizationID: org.String(), UserID: "u1", PrincipalID: "key", PrincipalType: "PROJECT_SERVICE_KEY",
			Tool: schemas.ToolRef{Toolkit: "DocumentDbToolkit", Name: "FindDocuments", Version: "0.4.0"}, StartedAt: ts, EndedAt: ts.Add(time.Millisecond),
			Success: true, ExecutionCode: "OK", Stored: schemas.Persisted{Seq: uint64(1000 + i), Time: ts}}
		if i%2 == 0 {
			x.ProjectID = projects[0].String()
		}
		xs = append(xs, x)
	}
	if err := s.WriteExecutions(ctx, xs); err != nil {
		t.Fatal(err)
	}
	xkept, _ := uuid.Parse(xs[3].EventID)
	xlast := auditstore.FeedKey{Seq: 1019, CreatedMS: xs[19].StartedAt.UnixMilli(), EventID: uuid.MustParse(xs[19].EventID)}
	if n, err := s.DeleteExpired(ctx, org, auditstore.LogExecutions, xlast, cutoff, map[uuid.UUID]bool{xkept: true}); err != nil || n != 19 {
		t.Fatalf("DeleteExpired(executions) = %d, %v; want 19", n, err)
	}
	var xdoomed []uuid.UUID
	for _, x := range xs[:20] {
		if id := uuid.MustParse(x.EventID); id != xkept {
			xdoomed = append(xdoomed, id)
		}
	}
	for _, v := range views {
		for _, table := range []string{"tool_executions", "event_index", "feed_index"} {
			if n := countIDs(t, v.conn, table+v.suffix, org, xdoomed); n != 0 {
				t.Errorf("%s%s: %d rows of expired executions", v.name, table+v.suffix, n)
			}
		}
	}
	if d := aggregateDiff(t, conn, org, executionAggregates(""), true); d != "" {
		t.Error(d)
	}
	// On a cluster, each replica's own tables agree too (once the counts
	// written through the Distributed tables reach every replica).
	for _, v := range views[1:] {
		qs := append(auditAggregates(v.suffix), executionAggregates(v.suffix))
		testenv.Eventually(t, 30*time.Second, func() string {
			var ds []string
			for _, q := range qs {
				if d := aggregateDiff(t, v.conn, org, q, false); d != "" {
					ds = append(ds, d)
				}
			}
			return v.name + ": " + strings.Join(ds, "\n")
		}, func() bool {
			for _, q := range qs {
				if aggregateDiff(t, v.conn, org, q, false) != "" {
					return false
				}
			}
			return true
		})
	}
}

// checkAggregates compares org's audit_stats with counts
// of its entries as listed.
func checkAggregates(t *testing.T, conn ch.Conn, org uuid.UUID) {
	t.Helper()
	for _, q := range auditAggregates("") {
		if d := aggregateDiff(t, conn, org, q, true); d != "" {
			t.Error(d)
		}
	}
}

// aggregateQuery is an aggregate table's counts and the same counted from
// the entries (key, count), of an organization.
type aggregateQuery struct{ what, got, want string }

// auditAggregates are the queries of audit_stats (its kind 0: the hourly
// counts of the listings), of the
// tables with the suffix (_local: a node's own).
func auditAggregates(suffix string) []aggregateQuery {
	const key = `concat(toString(kind), '|', scope, '|', toString(t), '|', value, '|', toString(action), '|', toString(source), '|', toString(resource_type))`
	return []aggregateQuery{{"audit_stats" + suffix,
		`SELECT ` + key + ` AS k, toUInt64(sum(n)) FROM audit_stats` + suffix + ` WHERE organization_id = ? GROUP BY k HAVING sum(n) > 0`,
		`SELECT ` + key + ` AS k, toUInt64(sum(c)) FROM (
		   SELECT arrayJoin([toUInt8(0), toUInt8(1), toUInt8(2)]) AS kind,
		          arrayJoin(if(isNull(project_id), [''], ['', ifNull(project_id, '')])) AS scope,
		          if(kind = 0, intDiv(ts_ms, 3600000) * 3600000, intDiv(ts_ms, 86400000) * 86400000) AS t,
		          multiIf(kind = 1, principal_id, kind = 2, ifNull(resource_id, ''), '') AS value,
		          if(kind = 2, toUInt8(0), action) AS action, if(kind = 2, toUInt8(0), source) AS source,
		          ifNull(resource_type, toUInt8(0)) AS resource_type, 1 AS c
		   FROM (SELECT * FROM audit_logs` + suffix + ` WHERE organization_id = ? LIMIT 1 BY event_id))
		 GROUP BY k`,
	}}
}

func executionAggregates(suffix string) aggregateQuery {
	return aggregateQuery{"execution_hours" + suffix,
		`SELECT concat(project_id, '|', toString(hour)) AS k, toUInt64(sum(n)) FROM execution_hours` + suffix + ` WHERE organization_id = ? GROUP BY k HAVING sum(n) > 0`,
		`SELECT concat(project_id, '|', toString(intDiv(started_ms, 3600000) * 3600000)) AS k, count() FROM (
			SELECT project_id, started_ms, event_id FROM tool_executions` + suffix + ` WHERE organization_id = ? LIMIT 1 BY event_id) GROUP BY k`}
}

// aggregateDiff tells how the two queries of q (key, count) differ for
// org ("": they agree); nonEmpty: no counts at all is a difference.
func aggregateDiff(t *testing.T, conn ch.Conn, org uuid.UUID, q aggregateQuery, nonEmpty bool) string {
	t.Helper()
	read := func(query string) map[string]uint64 {
		rows, err := conn.Query(context.Background(), query, org.String())
		if err != nil {
			t.Fatalf("%s: %v", query, err)
		}
		defer rows.Close()
		out := map[string]uint64{}
		for rows.Next() {
			var (
				k string
				n uint64
			)
			if err := rows.Scan(&k, &n); err != nil {
				t.Fatal(err)
			}
			out[k] = n
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return out
	}
	g, w := read(q.got), read(q.want)
	if len(w) == 0 && nonEmpty {
		return q.what + ": nothing to compare"
	}
	var diffs []string
	for k, n := range w {
		if g[k] != n {
			diffs = append(diffs, fmt.Sprintf("%s: %d, entries say %d", k, g[k], n))
		}
	}
	for k, n := range g {
		if _, ok := w[k]; !ok {
			diffs = append(diffs, fmt.Sprintf("%s: %d, no entries", k, n))
		}
	}
	if len(diffs) == 0 {
		return ""
	}
	slices.Sort(diffs)
	return fmt.Sprintf("%s of %s disagrees with the entries (%d keys):\n%s", q.what, org, len(diffs), strings.Join(diffs[:min(len(diffs), 20)], "\n"))
}

// countIDs counts the rows of org in table with one of the event ids.
func countIDs(t *testing.T, conn ch.Conn, table string, org uuid.UUID, ids []uuid.UUID) int {
	t.Helper()
	args := []any{org.String()}
	for _, id := range ids {
		args = append(args, id.String())
	}
	q := "SELECT count() FROM " + table + " WHERE organization_id = ? AND event_id IN (" + strings.TrimSuffix(strings.Repeat("?, ", len(ids)), ", ") + ")"
	var n uint64
	if err := conn.QueryRow(context.Background(), q, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return int(n)
}

func listAll(t *testing.T, s *clickhouse.Store, org uuid.UUID) []schemas.AuditEntry {
	t.Helper()
	var out []schemas.AuditEntry
	q := auditstore.Query{OrgID: org, Limit: auditstore.MaxLimit}
	for {
		p, err := s.ListAudit(context.Background(), q)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, p.Items...)
		if !p.HasMore {
			return out
		}
		q.After = p.Next()
	}
}

func ptr[T any](v T) *T { return &v }
