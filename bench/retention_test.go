//go:build e2e

package bench

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/auditrail/auditrail/internal/chserver"
	"github.com/auditrail/auditrail/internal/testenv"
)

// The retention benchmark works end to end on a small organization, on
// both stores: its entries expire while the other's ingest runs, both runs
// are measured, and every figure has its reference (the harness works;
// its figures are meaningful at large sizes only, so no threshold here).
func TestRetentionBenchmarkRuns(t *testing.T) {
	exe := testenv.Binaries(t, "github.com/auditrail/auditrail/cmd/auditrail")
	for _, store := range []string{StoreSQLite, StoreClickHouse} {
		t.Run(store, func(t *testing.T) {
			if store == StoreClickHouse {
				if _, err := chserver.Binary(); err != nil {
					testenv.Missing(t, "%v", err)
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			cfg := DefaultRetentionConfig(exe)
			cfg.Store, cfg.Entries, cfg.CapacityFor, cfg.Duration, cfg.Interval = store, 3000, 2*time.Second, 3*time.Second, 500*time.Millisecond
			var out bytes.Buffer
			r, err := Retention(ctx, cfg, &out)
			if err != nil {
				t.Fatalf("%v\n%s", err, out.String())
			}
			if r.Expired < int64(cfg.Entries) || r.AAfter >= r.ABefore || r.ExpiryDelete <= 0 || r.Capacity <= 0 || r.Rate < 1 {
				t.Fatalf("the expiry: %+v\n%s", r, out.String())
			}
			for _, run := range []RetentionRun{r.Reference, r.Retention} {
				if run.Published == 0 || run.Stored <= 0 || run.DevCPU <= 0 || run.DevPeakRSS <= 0 {
					t.Fatalf("a run: %+v\n%s", run, out.String())
				}
				if store == StoreClickHouse && (run.CHCPU <= 0 || run.CHPeakRSS <= 0) {
					t.Fatalf("a run on ClickHouse: %+v\n%s", run, out.String())
				}
			}
			want := 3
			if store == StoreClickHouse {
				want = 5
				// One a table: audit_logs, event_index, feed_index,
				// feed_leaves and audit_stats (the hourly counts of the
				// entries are its kind 0).
				if r.Mutations < 5 || r.BytesRewritten <= 0 || len(r.Tables) == 0 {
					t.Fatalf("the deletion's cost: %d mutations, %d bytes, %+v\n%s", r.Mutations, r.BytesRewritten, r.Tables, out.String())
				}
			}
			figs := r.Figures()
			if len(figs) != want {
				t.Fatalf("%d figures, want %d: %+v", len(figs), want, figs)
			}
			for _, f := range figs {
				if f.Value <= 0 || f.Reference <= 0 || !strings.HasPrefix(f.Name, "retention, ") {
					t.Errorf("figure %+v", f)
				}
			}
			for _, line := range []string{"ingest beside the expiry:", "peak RSS: dev", "expiry: "} {
				if !strings.Contains(out.String(), line) {
					t.Errorf("no %q in:\n%s", line, out.String())
				}
			}
		})
	}
}
