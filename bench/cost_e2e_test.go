//go:build e2e

package bench

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/auditrail/auditrail/internal/chserver"
	"github.com/auditrail/auditrail/internal/testenv"
)

// The cost benchmark runs end to end on a small load: dev on one server
// and on SQLite, the bare insert, the roles draining a backlog, the query
// log and a profile of each dev; every process it counts used CPU, and the
// bare insert is of the same rows.
func TestCostBenchmarkRuns(t *testing.T) {
	if _, err := chserver.Binary(); err != nil {
		testenv.Missing(t, "%v", err)
	}
	if _, err := exec.LookPath("clickhouse-client"); err != nil {
		testenv.Missing(t, "clickhouse-client: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	exe := testenv.Binaries(t, "github.com/auditrail/auditrail/cmd/auditrail")
	SetAuditrail(exe)
	defer SetAuditrail("")
	profiles := t.TempDir()
	cfg := CostConfig{Exe: exe, Rate: 300, Duration: 3 * time.Second, Orgs: 3, Drain: 3000, QueryLog: true, ProfileDir: profiles,
		LoadFor: 3 * time.Second, CapacityFor: 2 * time.Second, Roles: true}
	r, err := Cost(ctx, cfg, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Dev) != 2 || r.Drain.Events != cfg.Drain {
		t.Fatalf("%d dev runs, a drain of %d events", len(r.Dev), r.Drain.Events)
	}
	for _, run := range append(r.Dev, r.Drain, r.Bare, r.Roles) {
		if run.Events < 100 || run.Total() <= 0 {
			t.Fatalf("%s: %d events, %s of CPU", run.Name, run.Events, run.Total())
		}
		for _, p := range run.Procs {
			// clickhouse-client may take less than a clock tick of /proc
			// (10 ms), and so may, in this short run, the control plane
			// (no work under the load: it made the organizations before)
			// and the query role (two readers once a second; the run
			// fails when a read fails).
			if p.Counted && p.CPU <= 0 && p.Name != procClient && p.Name != procControlPlane && p.Name != procQuery {
				t.Errorf("%s: %s used no CPU", run.Name, p.Name)
			}
		}
	}
	if r.Bare.Events != r.Dev[0].Events || r.Dev[0].CPU(procServer) <= 0 || r.Dev[0].CPU(procDev) <= 0 {
		t.Fatalf("the bare insert of %d rows for %d events; dev %s, the server %s", r.Bare.Events, r.Dev[0].Events,
			r.Dev[0].CPU(procDev), r.Dev[0].CPU(procServer))
	}
	if r.Capacity < 100 || len(r.Loads) != 2 || r.Loads[0].Share != 0.5 || r.Loads[1].Share != 0.8 {
		t.Fatalf("capacity %.0f events/s, %d loads", r.Capacity, len(r.Loads))
	}
	for _, l := range r.Loads {
		if l.published < 100 || l.visible.P99 <= 0 || l.page.P99 <= 0 {
			t.Fatalf("at %.0f%%: %d published, visible p99 %s, page p99 %s", 100*l.Share, l.published, l.visible.P99, l.page.P99)
		}
	}
	// The separate roles: each of the four, and the server, worked.
	var roles []string
	for _, p := range r.Roles.Procs {
		if p.Counted && p.Name != procServer {
			roles = append(roles, p.Name)
		}
	}
	if r.Roles.Events < 100 || len(roles) != 4 {
		t.Fatalf("the separate roles: %d events, roles %q", r.Roles.Events, roles)
	}
	figs := r.Figures()
	// Dev and its server, the server's share, SQLite, the drain, the peak
	// RSS of ingest and of tlog, the separate roles (all, then each one's
	// CPU and RSS), the two loads' latencies.
	n := len(figs)
	if n != 19 || figs[0].Max != CostGoalUS || figs[1].Goal != CostServerRatio || figs[4].Unit != "MiB" || figs[5].Unit != "MiB" ||
		figs[6].Unit != "µs" || figs[14].Unit != "MiB" ||
		figs[n-4].Max != CostLatencyGoalMS || figs[n-3].Max != CostPageGoalMS || figs[n-2].Max != 0 {
		t.Fatalf("figures: %+v", figs)
	}
	// Every process started for a run has its peak RSS read (the
	// benchmark's own, the publisher's and the drain's NATS, has none).
	for _, run := range append(r.Dev, r.Drain, r.Roles) {
		for _, p := range run.Procs {
			if self := p.Name == procPublisher || strings.HasPrefix(p.Name, "NATS"); self != (p.RSS == 0) || p.RSS > 0 && p.RSS < 1<<20 {
				t.Errorf("%s: %s: peak RSS %d bytes", run.Name, p.Name, p.RSS)
			}
		}
	}
	for _, name := range []string{"dev-clickhouse.prof", "dev-sqlite.prof"} {
		if fi, err := os.Stat(filepath.Join(profiles, name)); err != nil || fi.Size() == 0 {
			t.Errorf("profile %s: %v", name, err)
		}
	}
}
