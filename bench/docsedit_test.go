//go:build e2e

package bench

import (
	"context"
	"testing"
	"time"
)

// The EditDocument benchmark works end to end, on a few samples.
func TestDocsEditBenchmarkRuns(t *testing.T) {
	old := docsEditSamples
	docsEditSamples = 3
	t.Cleanup(func() { docsEditSamples = old })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	f, err := DocsEdit(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if f.Value <= 0 || f.Reference <= 0 || f.Unit != "ms" {
		t.Fatalf("figure %+v", f)
	}
}
