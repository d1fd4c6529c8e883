//go:build e2e

package bench

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// The verify benchmark works end to end on a small export: the generated
// file verifies (timeVerify fails otherwise), both sides are timed, and the
// figure carries the absolute goal.
func TestVerifyBenchmarkRuns(t *testing.T) {
	var out bytes.Buffer
	r, err := Verify(context.Background(), 2_000, &out)
	if err != nil {
		t.Fatal(err)
	}
	figs := r.Figures()
	if len(figs) != 1 || figs[0].Value <= 0 || figs[0].Reference <= 0 || figs[0].Min != 500_000 || r.FileBytes == 0 || r.Allocs == 0 {
		t.Fatalf("%+v %+v", r, figs)
	}
	if !strings.Contains(out.String(), "wrote 2000 entries") {
		t.Fatalf("output: %s", out.String())
	}
}
