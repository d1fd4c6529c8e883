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
