//go:build e2e

package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/auditrail/auditrail/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// binaries builds auditrail-bench and, beside it, the auditrail binary
// whose roles it runs; it returns auditrail-bench.
func binaries(t *testing.T) string {
	return testenv.Binaries(t, "github.com/auditrail/auditrail/cmd/auditrail-bench", "github.com/auditrail/auditrail/cmd/auditrail")
}

// Without the auditrail binary beside it, the harness says where it looked
// and how to build it, and an unknown benchmark is a usage error.
func TestBenchNeedsTheAuditrailBinary(t *testing.T) {
	bin := binaries(t)
	alone := filepath.Join(t.TempDir(), "auditrail-bench")
	b, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(alone, b, 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(alone, "--run", "decode").CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || !strings.Contains(string(out), "make bench builds both") {
		t.Fatalf("auditrail-bench without auditrail: %v\n%s", err, out)
	}
	out, err = exec.Command(bin, "--run", "nosuch").CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !strings.Contains(string(out), `unknown benchmark "nosuch"`) {
		t.Fatalf("an unknown benchmark: %v\n%s", err, out)
	}
	out, err = exec.Command(bin, "--run", "decode").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "== decode") {
		t.Fatalf("the decode benchmark: %v\n%s", err, out)
	}
}

// --results (make bench: docs/benchmarks.md) writes the run's figures into
// the document's results table, beside the rows of other benchmarks.
func TestBenchWritesResults(t *testing.T) {
	bin := binaries(t)
	raw, err := os.ReadFile("../../docs/benchmarks.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := filepath.Join(t.TempDir(), "benchmarks.md")
	if err := os.WriteFile(doc, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "--run", "decode", "--results", doc).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "wrote 1 figures into") {
		t.Fatalf("auditrail-bench --results: %v\n%s", err, out)
	}
	got, _ := os.ReadFile(doc)
	if strings.Count(string(got), "| audit/v1 decode (events/s, one core) |") != 1 || !strings.Contains(string(got), "CPUs") {
		t.Errorf("the decode row is not in the results table:\n%s", got)
	}
	if len(got) < len(raw)-400 {
		t.Errorf("the document lost text: %d bytes, was %d", len(got), len(raw))
	}
}
