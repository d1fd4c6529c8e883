//go:build e2e

package main

import (
	"os/exec"
	"regexp"
	"testing"

	"github.com/auditrail/auditrail/internal/testenv"
)

// TestBenchDashboardRuns: `auditrail-bench --run dashboard` on a small
// tenant prints every figure of the dashboard (search, stats, export,
// first render), each with its reference — the harness works end to end;
// its figures are meaningful at the default 10M events only.
func TestBenchDashboardRuns(t *testing.T) {
	testenv.ClickHouse(t) // a missing clickhouse-server fails (or skips) here
	testenv.Chromium(t)
	out, err := exec.Command(binaries(t), "--run", "dashboard", "--query-events", "2000",
		"--dashboard-samples", "3", "--dashboard-renders", "2").CombinedOutput()
	if err != nil {
		t.Fatalf("bench: %v\n%s", err, out)
	}
	for _, name := range []string{"search free text 30 d, rare, p99", "search free text 30 d, broad, p99", "stats 30 d by hour p50",
		"export CSV", "export peak RSS growth", "dashboard first render p50"} {
		if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + `.* reference +[0-9.]+ .*ratio [0-9.]+`).Match(out) {
			t.Errorf("no figure %q in:\n%s", name, out)
		}
	}
	if m := regexp.MustCompile(`export (\d+) rows`).FindSubmatch(out); m == nil || string(m[1]) == "0" {
		t.Errorf("the export wrote no rows:\n%s", out)
	}
}
