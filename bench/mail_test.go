//go:build e2e

package bench

import (
	"context"
	"testing"
	"time"
)

// The ListEmails benchmark works end to end, on a few samples.
func TestMailListBenchmarkRuns(t *testing.T) {
	old := mailListSamples
	mailListSamples = 3
	t.Cleanup(func() { mailListSamples = old })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	f, err := MailList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if f.Value <= 0 || f.Reference <= 0 || f.Unit != "ms" {
		t.Fatalf("figure %+v", f)
	}
}
