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

// The stats queries read the window as a range of the time index of the
// organization (or project), with or without filters and a search: never
// every row of the organization.
func TestStatsQueryPlans(t *testing.T) {
	s, err := Open(context.Background(), filepath.Join(t.TempDir(), "plan.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	org, project := uuid.New(), uuid.New()
	since, until := time.Now().Add(-24*time.Hour), time.Now()
	sq, err := search.Parse(search.Audit, `actor:a -ip:10.0.0.0/8 "free text"`)
	if err != nil {
		t.Fatal(err)
	}
	base := auditstore.StatsQuery{OrgID: org, Bucket: time.Hour, By: auditstore.ByResourceType, Top: 10,
		Filter: auditstore.Filter{Window: auditstore.Window{Since: &since, Until: &until}}}
	withProject, withSearch := base, base
	withProject.ProjectID = &project
	withSearch.Search = sq
	for _, c := range []struct {
		name string
		q    auditstore.StatsQuery
		want string
	}{
		{"org", base, "USING INDEX audit_logs_org_time (organization_id=? AND ts_ms>? AND ts_ms<?)"},
		{"project", withProject, "USING INDEX audit_logs_project_time (organization_id=? AND project_id=? AND ts_ms>? AND ts_ms<?)"},
		{"search", withSearch, "USING INDEX audit_logs_org_time (organization_id=? AND ts_ms>? AND ts_ms<?)"},
	} {
		for _, name := range []string{"buckets", "actors", "resources"} {
			t.Run(c.name+" "+name, func(t *testing.T) {
				query, args, err := statsQuery(c.q, name)
				if err != nil {
					t.Fatal(err)
				}
				if plan := explain(t, s, query, args); !strings.Contains(plan, c.want) {
					t.Errorf("plan:\n%s\nwant it to contain %q", plan, c.want)
				}
			})
		}
	}
}
