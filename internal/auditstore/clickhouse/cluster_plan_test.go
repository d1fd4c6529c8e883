package clickhouse

import (
	"regexp"
	"strings"
	"testing"

	"github.com/auditrail/auditrail/internal/auditstore"
	"github.com/auditrail/auditrail/schemas"
)

// Every embedded migration has a cluster form: tables replicated under
// their _local names with a Distributed table each, views reading and
// writing local tables only, DDL ON CLUSTER; a statement of another shape
// is refused rather than run unsharded.
func TestClusterPlanCoversMigrations(t *testing.T) {
	ms, err := auditstore.LoadMigrations(schemas.ClickHouseDDL, "clickhouse")
	if err != nil {
		t.Fatal(err)
	}
	plan, err := clusterPlan(ms, "c1", "db")
	if err != nil {
		t.Fatal(err)
	}
	distributed := map[string]bool{}
	views, drops := 0, 0
	for i, steps := range plan {
		if len(steps) == 0 {
			t.Errorf("%s: no steps", ms[i].Name)
		}
		for _, st := range steps {
			if st.distributed != "" {
				distributed[st.distributed] = true
				continue
			}
			sql := stripLeadingComments(st.sql)
			switch {
			case strings.HasPrefix(sql, "CREATE TABLE"):
				if !strings.Contains(sql, "_local` ON CLUSTER `c1`") || !regexp.MustCompile(`ENGINE = Replicated\w+MergeTree\('/clickhouse/tables/\{shard\}/db\.\w+_local', '\{replica\}'`).MatchString(sql) {
					t.Errorf("%s: table not replicated on the cluster:\n%s", ms[i].Name, sql)
				}
			case strings.HasPrefix(sql, "CREATE MATERIALIZED VIEW"):
				views++
				if !strings.Contains(sql, "ON CLUSTER `c1` TO `db`.`") || strings.Count(sql, "_local`") != 2 {
					t.Errorf("%s: view not local to each shard:\n%s", ms[i].Name, sql)
				}
			case strings.HasPrefix(sql, "DROP TABLE IF EXISTS"):
				drops++
				if !strings.HasSuffix(sql, "_mv` ON CLUSTER `c1`") || st.view == "" {
					t.Errorf("%s: drop not of a view on the cluster:\n%s", ms[i].Name, sql)
				}
			case strings.HasPrefix(sql, "ALTER TABLE"):
				if !strings.Contains(sql, "_local` ON CLUSTER `c1` ADD COLUMN") {
					t.Errorf("%s: alter not of the local tables on the cluster:\n%s", ms[i].Name, sql)
				}
			case strings.HasPrefix(sql, "INSERT INTO"):
				if strings.Contains(sql, "_local") {
					t.Errorf("%s: backfill not through the Distributed tables:\n%s", ms[i].Name, sql)
				}
			default:
				t.Errorf("%s: unexpected step %s", ms[i].Name, sql)
			}
		}
	}
	for _, name := range []string{"audit_logs", "audit_hours", "tool_executions", "execution_hours", "event_index", "audit_stats", "feed_index",
		"log_leaves", "log_leaf_ids", "log_hashes", "log_heads", "log_checkpoints", "feed_leaves", "log_expiries", "lifecycle_keep", "entry_erasures"} {
		if !distributed[name] {
			t.Errorf("no Distributed table for %s", name)
		}
	}
	// The four views 0018 drops and the one 0020 drops are never made on
	// a cluster (0002 makes none, 0008 and 0013 make their others only);
	// 0018 and 0020 drop them where a cluster made before has them.
	if views != 7 || drops != 5 {
		t.Errorf("%d views made and %d dropped, want 7 and 5", views, drops)
	}

	for _, bad := range []string{
		"CREATE TABLE IF NOT EXISTS x (a String) ENGINE = MergeTree ORDER BY a", // nothing to shard by
		"CREATE MATERIALIZED VIEW IF NOT EXISTS v TO nowhere AS SELECT 1",       // unknown target
		"DROP TABLE audit_logs",                                                    // another shape
		"DROP TABLE IF EXISTS audit_logs",                                          // a table, not a view
		"DROP TABLE IF EXISTS feed_index_audit_mv2",                                // no such view
		"CREATE TABLE IF NOT EXISTS y ENGINE = Memory AS SELECT * FROM audit_logs", // another shape
	} {
		if _, err := clusterPlan([]auditstore.Migration{{Name: "bad", Statements: []string{bad}}}, "c1", "db"); err == nil {
			t.Errorf("accepted in cluster mode: %s", bad)
		}
	}
}

// On a cluster, a query with an IN subquery reads each shard's local table
// (the listings, the feed); other queries are sent as written.
func TestLocalProduct(t *testing.T) {
	for _, tc := range []struct {
		query string
		local bool
	}{
		{listAuditTemplate, true},
		{"SELECT x FROM t WHERE (a, b) IN (\n  SELECT a, b FROM t)", true},
		{"SELECT hour, sum(n) AS n FROM audit_hours WHERE organization_id = ?", false},
		{"SELECT count() FROM t WHERE action IN (?, ?)", false},
	} {
		got := localProduct(tc.query)
		if strings.HasSuffix(got, "SETTINGS distributed_product_mode = 'local'") != tc.local {
			t.Errorf("localProduct(%.60q) = %.60q…", tc.query, got)
		}
	}
}
