package sqlite

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/auditrail/auditrail/internal/auditstore"
	"github.com/auditrail/auditrail/internal/auditstore/search"
)

// The list queries seek: a page after a cursor is an index range on
// (organization_id[, project_id], time, event_id), not a scan of the
// organization's prefix filtered row by row (which made deep pages linear),
// and no listing sorts in a temporary B-tree. The event lookups of wait_for
// are point lookups on the primary key. since and until are part of the
// index range, whatever the search adds.
func TestListQueryPlans(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "plan.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	org, project := uuid.New(), uuid.New()
	after := &auditstore.Key{Timestamp: time.Now(), EventID: uuid.New()}
	ok, user := true, "u1"
	tests := []struct {
		name  string
		query string
		args  []any
		want  string
	}{
		{"audit org first page", "", nil, "USING INDEX audit_logs_org_time (organization_id=?)"},
		{"audit org deep page", "", nil, "USING INDEX audit_logs_org_time (organization_id=? AND (ts_ms,event_id)<(?,?))"},
		{"audit project first page", "", nil, "USING INDEX audit_logs_project_time (organization_id=? AND project_id=?)"},
		{"audit project deep page", "", nil, "USING INDEX audit_logs_project_time (organization_id=? AND project_id=? AND (ts_ms,event_id)<(?,?))"},
		{"executions org first page", "", nil, "USING INDEX tool_executions_org_time (organization_id=?)"},
		{"executions org deep page", "", nil, "USING INDEX tool_executions_org_time (organization_id=? AND (started_ms,event_id)<(?,?))"},
		{"executions project deep page", "", nil, "USING INDEX tool_executions_project_time (organization_id=? AND project_id=? AND (started_ms,event_id)<(?,?))"},
		{"audit org window and search", "", nil, "USING INDEX audit_logs_org_time (organization_id=? AND ts_ms>? AND ts_ms<?)"},
		// a range on both sides of the time: the planner seeks the org's index (the project is residual)
		{"audit project deep page in a window", "", nil, "USING INDEX audit_logs_org_time (organization_id=? AND ts_ms>? AND (ts_ms,event_id)<(?,?))"},
		{"executions org window and search", "", nil, "USING INDEX tool_executions_org_time (organization_id=? AND started_ms>? AND started_ms<?)"},
		{"audit lookup", hasAuditSQL, lookupArgs(org, nil, after.EventID), "SEARCH audit_logs USING PRIMARY KEY (organization_id=? AND event_id=?)"},
		{"audit lookup in a project", hasAuditSQL, lookupArgs(org, &project, after.EventID), "SEARCH audit_logs USING PRIMARY KEY (organization_id=? AND event_id=?)"},
		{"execution lookup in a project", hasExecutionSQL, lookupArgs(org, &project, after.EventID), "SEARCH tool_executions USING PRIMARY KEY (organization_id=? AND event_id=?)"},
	}
	tests[0].query, tests[0].args, _ = listAuditQuery(auditstore.Query{OrgID: org, Limit: 50})
	tests[1].query, tests[1].args, _ = listAuditQuery(auditstore.Query{OrgID: org, Limit: 50, After: after})
	tests[2].query, tests[2].args, _ = listAuditQuery(auditstore.Query{OrgID: org, ProjectID: &project, Limit: 50})
	tests[3].query, tests[3].args, _ = listAuditQuery(auditstore.Query{OrgID: org, ProjectID: &project, Limit: 50, After: after})
	tests[4].query, tests[4].args, _ = listExecutionsQuery(auditstore.ExecQuery{OrgID: org, Limit: 50, UserID: &user})
	tests[5].query, tests[5].args, _ = listExecutionsQuery(auditstore.ExecQuery{OrgID: org, Limit: 50, After: after, Success: &ok, UserID: &user})
	tests[6].query, tests[6].args, _ = listExecutionsQuery(auditstore.ExecQuery{OrgID: org, ProjectID: &project, Limit: 50, After: after})
	since, until := time.Now().Add(-time.Hour), time.Now()
	w := auditstore.Window{Since: &since, Until: &until}
	sq, err := search.Parse(search.Audit, `actor:a,b -ip:10.0.0.0/8 "free text" action:CREATED`)
	if err != nil {
		t.Fatal(err)
	}
	esq, err := search.Parse(search.Executions, `tool:a hook_decision:deny -success:true text`)
	if err != nil {
		t.Fatal(err)
	}
	tests[7].query, tests[7].args, _ = listAuditQuery(auditstore.Query{OrgID: org, Limit: 50, Filter: auditstore.Filter{Window: w, Search: sq}})
	tests[8].query, tests[8].args, _ = listAuditQuery(auditstore.Query{OrgID: org, ProjectID: &project, Limit: 50, After: after, Filter: auditstore.Filter{Window: auditstore.Window{Since: &since}, Search: sq}})
	tests[9].query, tests[9].args, _ = listExecutionsQuery(auditstore.ExecQuery{OrgID: org, Limit: 50, Window: w, Search: esq})
	// The feeds seek the same way, on (organization_id[, project_id], seq,
	// created_ms, event_id), whatever the filters and since add.
	feedAfter := auditstore.FeedKey{Seq: 42, CreatedMS: time.Now().UnixMilli(), EventID: uuid.New()}
	for _, f := range []struct {
		name string
		q    auditstore.FeedQuery
		want string
	}{
		{"audit org feed", auditstore.FeedQuery{OrgID: org, Limit: 100, Upto: 1 << 40, After: feedAfter},
			"USING INDEX audit_logs_org_feed (organization_id=? AND (seq,created_ms,event_id)>(?,?,?) AND seq<?)"},
		{"audit project feed with filters", auditstore.FeedQuery{OrgID: org, ProjectID: &project, Limit: 100, Upto: 1 << 40, CreatedSince: &since,
			Filter: auditstore.Filter{Search: sq}}, "USING INDEX audit_logs_project_feed (organization_id=? AND project_id=? AND (seq,created_ms,event_id)>(?,?,?) AND seq<?)"},
	} {
		query, args, err := feedAuditQuery(f.q)
		if err != nil {
			t.Fatal(err)
		}
		tests = append(tests, struct {
			name  string
			query string
			args  []any
			want  string
		}{f.name, query, args, f.want})
	}
	eq, eargs, err := feedExecutionsQuery(auditstore.ExecFeedQuery{OrgID: org, ProjectID: &project, Limit: 100, Upto: 1 << 40, After: feedAfter, Success: &ok, Search: esq})
	if err != nil {
		t.Fatal(err)
	}
	tests = append(tests, struct {
		name  string
		query string
		args  []any
		want  string
	}{"executions project feed", eq, eargs, "USING INDEX tool_executions_project_feed (organization_id=? AND project_id=? AND (seq,created_ms,event_id)>(?,?,?) AND seq<?)"})
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			plan := explain(t, s, tc.query, tc.args)
			if !strings.Contains(plan, tc.want) {
				t.Errorf("plan:\n%s\nwant it to contain %q", plan, tc.want)
			}
			if strings.Contains(plan, "TEMP B-TREE") {
				t.Errorf("plan sorts in a temporary B-tree:\n%s", plan)
			}
		})
	}
}

func explain(t *testing.T, s *Store, query string, args []any) string {
	t.Helper()
	rows, err := s.db.QueryContext(context.Background(), "EXPLAIN QUERY PLAN "+query, args...)
	if err != nil {
		t.Fatalf("explain: %v", err)
	}
	defer rows.Close()
	var lines []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		lines = append(lines, detail)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return strings.Join(lines, "\n")
}
