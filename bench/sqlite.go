package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/google/uuid"

	"github.com/auditrail/auditrail/internal/auditstore"
	"github.com/auditrail/auditrail/internal/auditstore/sqlite"
	"github.com/auditrail/auditrail/internal/synth"
	"github.com/auditrail/auditrail/schemas"
)

// SQLiteResult holds the page latencies of the SQLite benchmark.
type SQLiteResult struct {
	Events int
	// First is the newest page; Deep the page at 90 % depth, after a cursor;
	// ProjectDeep the same depth of a project listing.
	First, Deep, ProjectDeep Latency
}

// Figures compares a deep page with the first page of the same listing:
// keyset pagination should seek, so depth should not cost.
func (r SQLiteResult) Figures() []Figure {
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	return []Figure{
		{Name: "sqlite deep 90% page p50 (ms)", Value: ms(r.Deep.P50), Unit: "ms", Reference: ms(r.First.P50), RefName: "first page", Goal: 2, Lower: true},
		{Name: "sqlite deep 90% project page p50 (ms)", Value: ms(r.ProjectDeep.P50), Unit: "ms", Reference: ms(r.First.P50), RefName: "first page", Goal: 2, Lower: true},
	}
}

// SQLite fills one organization of an embedded SQLite store with n audit
// events (through WriteAudit) and times pages of 50 through the store: the
// newest page against the page at 90 % depth of the organization listing
// and of a project listing, interleaved so that all see the same machine.
func SQLite(ctx context.Context, n int, progress io.Writer) (SQLiteResult, error) {
	say := func(format string, args ...any) { fmt.Fprintf(progress, "  "+format+"\n", args...) }
	dir, err := os.MkdirTemp("", "auditrail-bench-sqlite-")
	if err != nil {
		return SQLiteResult{}, err
	}
	defer os.RemoveAll(dir)
	store, err := sqlite.Open(ctx, filepath.Join(dir, "audit.db"))
	if err != nil {
		return SQLiteResult{}, err
	}
	defer store.Close()

	org := uuid.New()
	gen := synth.New(org, 1, 11)
	project := gen.Projects[0]
	now := time.Now()
	step := 30 * 24 * time.Hour / time.Duration(n)
	deepAt := n * 9 / 10
	var deep auditstore.Key
	say("writing %d events of one organization over 30 days", n)
	start := time.Now()
	const batch = 10_000
	buf := make([]schemas.AuditEvent, 0, batch)
	for i := 0; i < n; i++ {
		ev := gen.Event(now.Add(-time.Duration(i) * step))
		if i == deepAt {
			deep = auditstore.Key{Timestamp: ev.Timestamp, EventID: ev.EventID}
		}
		buf = append(buf, ev)
		if len(buf) == batch || i == n-1 {
			if err := store.WriteAudit(ctx, buf); err != nil {
				return SQLiteResult{}, err
			}
			buf = buf[:0]
			if (i+1)%(n/5+1) < batch {
				say("  %d/%d written (%.0f/s)", i+1, n, float64(i+1)/time.Since(start).Seconds())
			}
		}
	}
	// The project listing's key at the same depth: the project holds about
	// 3/4 of the events (synth), so its 90 % lies at the same time.
	projDeep := auditstore.Key{Timestamp: deep.Timestamp, EventID: uuid.Max}

	queries := []auditstore.Query{
		{OrgID: org, Limit: benchPage},
		{OrgID: org, Limit: benchPage, After: &deep},
		{OrgID: org, ProjectID: &project, Limit: benchPage, After: &projDeep},
	}
	get := func(q auditstore.Query) error {
		p, err := store.ListAudit(ctx, q)
		if err != nil {
			return err
		}
		if len(p.Items) != benchPage {
			return fmt.Errorf("sqlite page: %d items, want %d", len(p.Items), benchPage)
		}
		return nil
	}
	for i := 0; i < 20; i++ { // warm
		for _, q := range queries {
			if err := get(q); err != nil {
				return SQLiteResult{}, err
			}
		}
	}
	say("measuring the first page and pages at 90%% depth")
	samples := make([][]time.Duration, len(queries))
	for i := 0; i < pageSamples; i++ {
		for j, q := range queries {
			t0 := time.Now()
			if err := get(q); err != nil {
				return SQLiteResult{}, err
			}
			samples[j] = append(samples[j], time.Since(t0))
		}
	}
	return SQLiteResult{Events: n, First: summarize(samples[0]), Deep: summarize(samples[1]), ProjectDeep: summarize(samples[2])}, nil
}
