//go:build e2e

package main

import (
	"os/exec"
	"regexp"
	"testing"

	"github.com/auditrail/auditrail/internal/testenv"
)

// TestBenchFeedRuns: `auditrail-bench --run feed` on a small tenant prints
// both figures of the feed with their references — the harness works end
// to end; its figures are meaningful at the defaults only.
func TestBenchFeedRuns(t *testing.T) {
	testenv.ClickHouse(t) // a missing clickhouse-server fails (or skips) here
	out, err := exec.Command(binaries(t), "--run", "feed", "--feed-entries", "5000", "--feed-duration", "2s").CombinedOutput()
	if err != nil {
		t.Fatalf("bench: %v\n%s", err, out)
	}
	for _, name := range []string{"feed, one poller (entries/s)", "feed, publish to visible p99 (ms)"} {
		if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + `.* reference +[0-9.]+ .*ratio [0-9.]+`).Match(out) {
			t.Errorf("no figure %q in:\n%s", name, out)
		}
	}
}
