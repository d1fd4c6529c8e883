//go:build e2e

package bench

import (
	"context"
	"io"
	"os/exec"
	"testing"
	"time"

	"github.com/auditrail/auditrail/ingest"
	"github.com/auditrail/auditrail/internal/chserver"
	"github.com/auditrail/auditrail/internal/testenv"
)

// The benchmark harness itself works end to end, on a small load.
func TestIngestBenchmarkRuns(t *testing.T) {
	if _, err := chserver.Binary(); err != nil {
		testenv.Missing(t, "%v", err)
	}
	if _, err := exec.LookPath("clickhouse-client"); err != nil {
		testenv.Missing(t, "clickhouse-client: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// The benchmark measures the ingest role of the auditrail binary.
	SetAuditrail(testenv.Binaries(t, "github.com/auditrail/auditrail/cmd/auditrail"))
	defer SetAuditrail("")
	cfg := ingest.DefaultConfig()
	cfg.BatchSize, cfg.MaxAckPending = 1000, 2500
	r, err := Ingest(ctx, 3000, cfg, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if r.Pipeline <= 0 || r.CHClient <= 0 || r.JSConsume <= 0 || r.Publish <= 0 {
		t.Fatalf("missing timings: %+v", r)
	}
	// A Go process with NATS and ClickHouse clients takes more than 10 MiB.
	if r.PeakRSS < 10<<20 {
		t.Fatalf("peak RSS of the ingest process %d bytes", r.PeakRSS)
	}
	figs := r.Figures()
	if len(figs) != 3 || figs[0].Reference <= 0 || figs[0].Value <= 0 || figs[2].Value <= 0 {
		t.Fatalf("figures: %+v", figs)
	}
}
