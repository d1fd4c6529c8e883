package sqlite

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/uuid"
)

// The log's reads are points or ranges of a key, never scans: the log's
// number by (organization_id, kind), then the hashes of a proof and the
// leaf indexes of a page (IN over json_each), the head, the leaves
// compared on a retry, the checkpoints.
func TestLogQueryPlans(t *testing.T) {
	s, err := Open(context.Background(), filepath.Join(t.TempDir(), "plan.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	org := uuid.New().String()
	for _, tc := range []struct {
		name, query string
		args        []any
		want        string
	}{
		{"hashes", logHashesSQL, []any{org, 0, "[1,2,3]"}, "SEARCH h USING PRIMARY KEY (log_id=? AND idx=?)"},
		{"leaf indexes", logLeafIndexesSQL, []any{org, 0, `["` + org + `"]`}, "SEARCH f USING COVERING INDEX log_leaves_event (log_id=? AND event_id=?)"},
		{"hash range", logHashRangeSQL, []any{org, 0, 10, 20}, "SEARCH h USING PRIMARY KEY (log_id=? AND idx>? AND idx<?)"},
		{"leaves", logLeavesSQL, []any{1, 5, 10}, "SEARCH log_leaves USING PRIMARY KEY (log_id=? AND idx>? AND idx<?)"},
		{"head", logHeadSQL, []any{org, 0}, "SEARCH log_heads USING INDEX sqlite_autoindex_log_heads_1 (organization_id=? AND kind=?)"},
		{"checkpoint at", logCheckpointAtSQL, []any{org, 0, 5}, "SEARCH c USING PRIMARY KEY (log_id=? AND size=?)"},
		{"latest checkpoint", logCheckpointLatestSQL, []any{org, 0}, "SEARCH c USING PRIMARY KEY (log_id=?)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plan := explain(t, s, tc.query, tc.args)
			if !strings.Contains(plan, tc.want) {
				t.Errorf("plan:\n%s\nwant it to contain %q", plan, tc.want)
			}
			if !strings.Contains(plan, "INDEX sqlite_autoindex_log_heads_1 (organization_id=? AND kind=?)") && tc.name != "leaves" {
				t.Errorf("plan does not find the log by its key:\n%s", plan)
			}
			// (json_each is the list of ids or indexes itself.)
			if strings.Contains(plan, "TEMP B-TREE") || strings.Contains(strings.ReplaceAll(plan, "SCAN json_each", ""), "SCAN ") {
				t.Errorf("plan scans or sorts:\n%s", plan)
			}
		})
	}
}
