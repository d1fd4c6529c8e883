package sqlite

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/uuid"
)

// The log's reads are points or ranges of a key, never scans: the hashes
// of a proof and the leaf indexes of a page (IN over json_each), the head,
// the leaves compared on a retry, the checkpoints.
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
		{"hashes", logHashesSQL, []any{org, 0, "[1,2,3]"}, "SEARCH log_hashes USING PRIMARY KEY (organization_id=? AND kind=? AND idx=?)"},
		{"leaf indexes", logLeafIndexesSQL, []any{org, 0, `["` + org + `"]`}, "SEARCH log_leaves USING COVERING INDEX log_leaves_event (organization_id=? AND kind=? AND event_id=?)"},
		{"leaves", logLeavesSQL, []any{org, 0, 5, 10}, "SEARCH log_leaves USING PRIMARY KEY (organization_id=? AND kind=? AND idx>? AND idx<?)"},
		{"head", logHeadSQL, []any{org, 0}, "SEARCH log_heads USING PRIMARY KEY (organization_id=? AND kind=?)"},
		{"checkpoint at", logCheckpointAtSQL, []any{org, 0, 5}, "SEARCH log_checkpoints USING PRIMARY KEY (organization_id=? AND kind=? AND size=?)"},
		{"latest checkpoint", logCheckpointLatestSQL, []any{org, 0}, "SEARCH log_checkpoints USING PRIMARY KEY (organization_id=? AND kind=?)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plan := explain(t, s, tc.query, tc.args)
			if !strings.Contains(plan, tc.want) {
				t.Errorf("plan:\n%s\nwant it to contain %q", plan, tc.want)
			}
			if strings.Contains(plan, "TEMP B-TREE") || strings.Contains(plan, "SCAN log_") {
				t.Errorf("plan scans or sorts:\n%s", plan)
			}
		})
	}
}
