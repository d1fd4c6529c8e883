package sqlite_test

import (
	"context"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/auditrail/auditrail/internal/auditstore"
	"github.com/auditrail/auditrail/internal/auditstore/search"
	"github.com/auditrail/auditrail/internal/auditstore/sqlite"
	"github.com/auditrail/auditrail/internal/auditstore/storetest"
)

// FuzzMatchAuditAgreesWithSQL runs every expression that parses through
// this store's SQL and through search.Query.MatchAudit (the live stream's
// filter) over the search conformance entries: both must select the same
// entries, or the stream and the listing drift apart.
func FuzzMatchAuditAgreesWithSQL(f *testing.F) {
	ctx := context.Background()
	s, err := sqlite.Open(ctx, filepath.Join(f.TempDir(), "audit.db"))
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = s.Close() })
	org, p1, p2 := uuid.MustParse("0193a0b0-0000-7000-8000-000000000001"), uuid.MustParse("0193a0b0-0000-7000-8000-000000000002"), uuid.MustParse("0193a0b0-0000-7000-8000-000000000003")
	evs := storetest.SearchEvents(org, []uuid.UUID{p1, p2}, time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	if err := s.WriteAudit(ctx, evs); err != nil {
		f.Fatal(err)
	}
	for _, q := range storetest.RandomAuditSearches(evs, 7, 40) {
		f.Add(q)
	}
	for _, q := range []string{"", "ada", `"staging hook"`, "-ip:0.0.0.0/0,::/0", "actor:key_1 -resource_type:HOOK", "project:" + p1.String(),
		"project:" + p2.String(), "ip:::ffff:0:0/96", "ip:::/0", "ÉMILE", "ß", "İ", "event_id:" + evs[3].EventID.String()} {
		f.Add(q)
	}
	f.Fuzz(func(t *testing.T, expr string) {
		sq, err := search.Parse(search.Audit, expr)
		if err != nil {
			return
		}
		var got []uuid.UUID
		q := auditstore.Query{OrgID: org, Limit: auditstore.MaxLimit, Filter: auditstore.Filter{Search: sq}}
		for {
			p, err := s.ListAudit(ctx, q)
			if err != nil {
				t.Fatalf("q %q: %v", expr, err)
			}
			for _, e := range p.Items {
				got = append(got, e.EventID)
			}
			if !p.HasMore {
				break
			}
			q.After = p.Next()
		}
		var want []uuid.UUID
		for i := range evs {
			if sq.MatchAudit(&evs[i]) {
				want = append(want, evs[i].EventID)
			}
		}
		slices.SortFunc(got, func(a, b uuid.UUID) int { return slices.Compare(a[:], b[:]) })
		slices.SortFunc(want, func(a, b uuid.UUID) int { return slices.Compare(a[:], b[:]) })
		if !slices.Equal(got, want) {
			t.Fatalf("q %q: the store lists %d entries, MatchAudit holds for %d", expr, len(got), len(want))
		}
	})
}
