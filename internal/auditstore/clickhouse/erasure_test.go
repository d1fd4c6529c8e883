package clickhouse_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/auditrail/auditrail/internal/auditstore"
	"github.com/auditrail/auditrail/internal/auditstore/clickhouse"
	"github.com/auditrail/auditrail/internal/auditstore/search"
	"github.com/auditrail/auditrail/internal/auditstore/storetest"
	"github.com/auditrail/auditrail/internal/testenv"
	"github.com/auditrail/auditrail/schemas"
	"github.com/auditrail/auditrail/schemas/apiitem"
)

// An erasure leaves no trace of the old values in any table (entries,
// audit_stats, on every replica), keeps each entry's leaf (the column
// and feed_index), rewrites both copies of an entry written twice, takes
// a value over max_query_size, and the aggregates agree with the
// entries after it.
func TestErasureConsistent(t *testing.T) {
	dsn := verifyNoLeaks(t)
	s, err := clickhouse.OpenWith(context.Background(), dsn, clickhouse.Options{Leaves: apiitem.Leaves{}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	testErasureConsistent(t, s, []tableView{{conn: openConn(t, dsn)}})
}

func testErasureConsistent(t *testing.T, s *clickhouse.Store, views []tableView) {
	ctx := context.Background()
	conn := views[0].conn
	org, other := uuid.New(), uuid.New()
	projects := []uuid.UUID{uuid.New(), uuid.New()}
	base := auditstore.Millis(time.Now().Add(-72 * time.Hour))
	const pseudo = "erased-5f0c"

	// 120 entries over three days: alice is the principal of every 5th
	// and her document the resource of every 7th; the other organization
	// has entries of alice too.
	var evs, others []schemas.AuditEvent
	for i := range 120 {
		ts := base.Add(time.Duration(i) * 36 * time.Minute)
		e := storetest.Event(org, ts)
		if i%3 != 0 {
			e.ProjectID = &projects[i%2]
		}
		rt := schemas.ResourceType(1 + i%3)
		e.PrincipalID, e.ResourceType, e.ResourceID = fmt.Sprintf("p%d", i%4), &rt, ptr(fmt.Sprintf("r%d", i%5))
		if i%5 == 0 {
			e.PrincipalID, e.UserID, e.DisplayName = "alice", ptr("alice@example.com"), "Alice Smith"
		}
		if i%7 == 0 {
			e.ResourceID = ptr("alice-doc")
		}
		e.Stored = schemas.Persisted{Seq: uint64(i + 1), Time: ts}
		evs = append(evs, e)
		if i%10 == 0 {
			o := storetest.Event(other, ts)
			o.PrincipalID, o.ResourceID = "alice", ptr("alice-doc")
			o.Stored = schemas.Persisted{Seq: uint64(i + 1000), Time: ts}
			others = append(others, o)
		}
	}
	if err := s.WriteAudit(ctx, append(evs, others...)); err != nil {
		t.Fatal(err)
	}
	// An entry of alice written twice (racing inserts), of an organization
	// of its own: the views counted both copies, for good (0007), which
	// the aggregates compared below would not take. Written with another
	// one: a replicated table drops a block equal to one it stored.
	dup := uuid.New()
	twice, beside := storetest.Event(dup, base), storetest.Event(dup, base.Add(time.Second))
	twice.PrincipalID, twice.Stored = "alice", schemas.Persisted{Seq: 1, Time: base}
	if err := s.WriteAudit(ctx, []schemas.AuditEvent{twice, beside}); err != nil {
		t.Fatal(err)
	}
	cols := "organization_id, ts_ms, event_id, id, client_ip, action, source, display_name, customer_id, project_id, principal_id, user_id, " +
		"principal_type, resource_type, resource_id, resource_display, data, created_ms, ver, seq, leaf"
	if err := conn.Exec(ctx, "INSERT INTO audit_logs ("+cols+") SELECT "+cols+" FROM audit_logs WHERE organization_id = ? AND event_id = ?",
		dup.String(), twice.EventID.String()); err != nil {
		t.Fatal(err)
	}
	leavesBefore := leafColumns(t, views, org)
	if len(leavesBefore[0]) == 0 {
		t.Fatal("no leaves stored beside the entries: the test proves nothing")
	}

	// Her entries rewritten: principal, user and name to the pseudonym;
	// her document to NULL (even entries) or to the pseudonym (odd ones);
	// one entry's data to a value over max_query_size (quotes and
	// backslashes in it).
	big, err := json.Marshal(map[string]string{"note": strings.Repeat(`it's a \"quoted\" \ value `, 12_000)})
	if err != nil {
		t.Fatal(err)
	}
	erasure := uuid.New()
	var (
		rws     []auditstore.Rewrite
		erased  = map[uuid.UUID]bool{}
		bigID   uuid.UUID
		nullDoc = map[uuid.UUID]bool{}
	)
	for i, e := range evs {
		set := map[string]*string{}
		if i%5 == 0 {
			set["principal_id"], set["user_id"], set["display_name"] = ptr(pseudo), ptr(pseudo), ptr(pseudo)
		}
		if i%7 == 0 {
			if i%2 == 0 {
				set["resource_id"] = nil
				nullDoc[e.EventID] = true
			} else {
				set["resource_id"] = ptr(pseudo + "-doc")
			}
		}
		if len(set) == 0 {
			continue
		}
		if i == 15 {
			set["data"], bigID = ptr(string(big)), e.EventID
		}
		rws = append(rws, auditstore.Rewrite{EventID: e.EventID, Erasure: erasure, LeafHash: [32]byte{byte(i)}, Set: set})
		erased[e.EventID] = true
	}
	over := strings.Repeat("x", 1<<20+1)
	if err := s.RewriteEntries(ctx, org, auditstore.LogAudit, []auditstore.Rewrite{{EventID: evs[0].EventID, Erasure: erasure,
		Set: map[string]*string{"data": &over}}}); !errors.Is(err, auditstore.ErrInvalidQuery) {
		t.Fatalf("a data over the row limit: %v", err)
	}
	rws = append(rws, auditstore.Rewrite{EventID: uuid.New(), Erasure: erasure, Set: map[string]*string{"user_id": nil}}) // not stored
	start := time.Now()
	if err := s.RewriteEntries(ctx, org, auditstore.LogAudit, rws); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d entries rewritten (data of %d bytes in one) in %s", len(erased), len(big), time.Since(start).Round(time.Millisecond))

	// The entries as listed.
	got := listAll(t, s, org)
	if len(got) != len(evs) {
		t.Fatalf("%d entries listed, want %d", len(got), len(evs))
	}
	for _, e := range got {
		id := e.EventID
		switch {
		case !erased[id]:
			if e.PrincipalID == pseudo || e.DisplayName == pseudo {
				t.Fatalf("entry %s rewritten, not asked", id)
			}
			continue
		case e.PrincipalID == "alice" || (e.UserID != nil && *e.UserID == "alice@example.com") || e.DisplayName == "Alice Smith":
			t.Fatalf("entry %s still names alice: %+v", id, e.AuditEvent)
		case e.ResourceID != nil && *e.ResourceID == "alice-doc":
			t.Fatalf("entry %s still names her document", id)
		case nullDoc[id] && e.ResourceID != nil:
			t.Fatalf("entry %s: resource %q, want none", id, *e.ResourceID)
		case id == bigID && string(e.Data) != string(big):
			t.Fatalf("the data of %s is %d bytes, want the %d rewritten", id, len(e.Data), len(big))
		}
	}
	q, err := search.Parse(search.Audit, "actor:alice@example.com")
	if err != nil {
		t.Fatal(err)
	}
	if p, err := s.ListAudit(ctx, auditstore.Query{OrgID: org, Filter: auditstore.Filter{Search: q}, Limit: 10}); err != nil || len(p.Items) != 0 {
		t.Fatalf("the old value finds %d entries (%v)", len(p.Items), err)
	}
	m, err := s.ErasedEntries(ctx, org, auditstore.LogAudit, append([]uuid.UUID{rws[len(rws)-1].EventID}, keys(erased)...))
	if err != nil || len(m) != len(erased) || m[evs[10].EventID].Erasure != erasure || m[evs[10].EventID].LeafHash[0] != 10 {
		t.Fatalf("ErasedEntries = %d entries (%v), want %d", len(m), err, len(erased))
	}
	if err := s.RewriteEntries(ctx, dup, auditstore.LogAudit, []auditstore.Rewrite{{EventID: twice.EventID, Erasure: erasure,
		Set: map[string]*string{"principal_id": ptr(pseudo)}}}); err != nil {
		t.Fatal(err)
	}

	// No row of any table holds the old values, on any replica; the
	// leaves are those written; the aggregates agree with the entries.
	for _, v := range views {
		for _, c := range []struct{ table, where string }{
			{"audit_logs", "principal_id = 'alice' OR user_id = 'alice@example.com' OR display_name = 'Alice Smith' OR resource_id = 'alice-doc'"},
			{"audit_stats", "value IN ('alice', 'alice-doc')"},
		} {
			var n uint64
			if err := v.conn.QueryRow(ctx, "SELECT count() FROM "+c.table+v.suffix+" WHERE organization_id = ? AND ("+c.where+")", org.String()).Scan(&n); err != nil {
				t.Fatal(err)
			}
			if n != 0 {
				t.Errorf("%s%s%s: %d rows of the old values", v.name, c.table, v.suffix, n)
			}
		}
		var n, copies uint64
		if err := v.conn.QueryRow(ctx, "SELECT countIf(principal_id = ?), count() FROM audit_logs"+v.suffix+" WHERE organization_id = ? AND event_id = ?",
			pseudo, dup.String(), twice.EventID.String()).Scan(&n, &copies); err != nil || n != copies || (v.suffix == "" && copies == 0) {
			// Two copies, or one once a merge has folded them (the engine
			// replaces on its key): every copy left is rewritten.
			t.Errorf("%s%d of the %d copies of the entry written twice rewritten (%v), want all", v.name, n, copies, err)
		}
	}
	leavesAfter := leafColumns(t, views, org)
	for i := range views {
		for k, leaf := range leavesBefore[i] {
			if leavesAfter[i][k] != leaf {
				t.Fatalf("%s%s: the leaf changed", views[i].name, k)
			}
		}
		if len(leavesAfter[i]) != len(leavesBefore[i]) {
			t.Fatalf("%s%d leaves after, %d before", views[i].name, len(leavesAfter[i]), len(leavesBefore[i]))
		}
	}
	checkAggregates(t, conn, org)
	checkAggregates(t, conn, other)
	var n uint64
	if err := conn.QueryRow(ctx, "SELECT sum(n) FROM audit_stats WHERE organization_id = ? AND kind = 1 AND scope = '' AND value = 'alice'", other.String()).Scan(&n); err != nil || n != uint64(len(others)) {
		t.Fatalf("the other organization's stats count alice %d times (%v), want %d", n, err, len(others))
	}
	for _, v := range views[1:] {
		qs := auditAggregates(v.suffix)
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

	// Executions: their columns, no aggregate to count again.
	var xs []schemas.ExecutionEvent
	for i := range 6 {
		ts := base.Add(time.Duration(i) * 31 * time.Minute)
		id := uuid.NewString()
		xs = append(xs, schemas.ExecutionEvent{EventID: id, ExecutionID: id, OrganizationID: org.String(), UserID: "alice@example.com", PrincipalID: "key", PrincipalType: "PROJECT_SERVICE_KEY",
			Tool: schemas.ToolRef{Toolkit: "DocumentDbToolkit", Name: "FindDocuments", Version: "0.4.0"}, StartedAt: ts, EndedAt: ts.Add(time.Millisecond),
			Success: false, ExecutionCode: "DENIED", ExecutionError: "denied for alice@example.com", Stored: schemas.Persisted{Seq: uint64(1000 + i), Time: ts}})
	}
	if err := s.WriteExecutions(ctx, xs); err != nil {
		t.Fatal(err)
	}
	var xrws []auditstore.Rewrite
	for _, x := range xs[:4] {
		xrws = append(xrws, auditstore.Rewrite{EventID: uuid.MustParse(x.EventID), Erasure: erasure,
			Set: map[string]*string{"user_id": nil, "execution_error": ptr("denied for " + pseudo)}})
	}
	if err := s.RewriteEntries(ctx, org, auditstore.LogExecutions, xrws); err != nil {
		t.Fatal(err)
	}
	p, err := s.ListExecutions(ctx, auditstore.ExecQuery{OrgID: org, Limit: 10})
	if err != nil || len(p.Items) != 6 {
		t.Fatalf("ListExecutions = %d, %v", len(p.Items), err)
	}
	rewritten := 0
	for _, x := range p.Items {
		if x.UserID == "" && x.ExecutionError == "denied for "+pseudo {
			rewritten++
		} else if x.UserID != "alice@example.com" {
			t.Fatalf("execution %s half rewritten: %+v", x.EventID, x)
		}
	}
	if rewritten != 4 {
		t.Fatalf("%d executions rewritten, want 4", rewritten)
	}
	if d := aggregateDiff(t, conn, org, executionAggregates(""), true); d != "" {
		t.Error(d)
	}
}

// leafColumns reads, in each view, the leaf column of org's entries and
// its rows of feed_index (key: table/event_id/copy).
func leafColumns(t *testing.T, views []tableView, org uuid.UUID) []map[string]string {
	t.Helper()
	var out []map[string]string
	for _, v := range views {
		m := map[string]string{}
		for _, table := range []string{"audit_logs", "feed_index"} {
			rows, err := v.conn.Query(context.Background(), "SELECT event_id, leaf FROM "+table+v.suffix+" WHERE organization_id = ? ORDER BY event_id, leaf", org.String())
			if err != nil {
				t.Fatal(err)
			}
			for rows.Next() {
				var id, leaf string
				if err := rows.Scan(&id, &leaf); err != nil {
					t.Fatal(err)
				}
				k := table + "/" + id
				for i := 0; ; i++ {
					if _, ok := m[fmt.Sprintf("%s/%d", k, i)]; !ok {
						m[fmt.Sprintf("%s/%d", k, i)] = leaf
						break
					}
				}
			}
			if err := rows.Err(); err != nil {
				t.Fatal(err)
			}
			rows.Close()
		}
		out = append(out, m)
	}
	return out
}

func keys[K comparable, V any](m map[K]V) []K {
	out := make([]K, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
