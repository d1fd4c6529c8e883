//go:build e2e

package bench

import (
	"context"
	"io"
	"testing"
	"time"
)

// The deliver benchmark works end to end on a few thousand events: the
// receiver verifies and holds every one, in 100-event POSTs.
func TestDeliverBenchmarkRuns(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r, err := Deliver(ctx, 2000, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	figs := r.Figures()
	if len(figs) != 1 || figs[0].Value <= 0 || figs[0].Reference <= 0 || r.Posts < 20 {
		t.Fatalf("result %+v, figures %+v", r, figs)
	}
}
