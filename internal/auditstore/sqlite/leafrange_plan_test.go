package sqlite

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/uuid"
)

// LeafRange is one query of key ranges, never a scan: the log's number by
// (organization_id, kind), then a range of log_leaves' primary key.
func TestLeafRangePlan(t *testing.T) {
	s, err := Open(context.Background(), filepath.Join(t.TempDir(), "plan.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	plan := explain(t, s, logLeafRangeSQL, []any{uuid.NewString(), 0, 256, 512})
	for _, want := range []string{
		"INDEX sqlite_autoindex_log_heads_1 (organization_id=? AND kind=?)",
		"SEARCH f USING PRIMARY KEY (log_id=? AND idx>? AND idx<?)",
	} {
		if !strings.Contains(plan, want) {
			t.Errorf("plan:\n%s\nwant it to contain %q", plan, want)
		}
	}
	if strings.Contains(plan, "TEMP B-TREE") || strings.Contains(plan, "SCAN ") {
		t.Errorf("plan scans or sorts:\n%s", plan)
	}
}
