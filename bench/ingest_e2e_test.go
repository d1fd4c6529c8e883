//go:build e2e

package bench

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/auditrail/auditrail/ingest"
	"github.com/auditrail/auditrail/internal/chserver"
	"github.com/auditrail/auditrail/internal/synth"
	"github.com/auditrail/auditrail/internal/testenv"
	"github.com/auditrail/auditrail/producers"
	"github.com/auditrail/auditrail/schemas"
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
	// The benchmark measures the ingest role of the auditrail binary,
	// beside Benthos v4.27 built from its module apart (bench/benthos).
	SetAuditrail(testenv.Binaries(t, "github.com/auditrail/auditrail/cmd/auditrail"))
	defer SetAuditrail("")
	SetBenthos(buildBenthos(t))
	defer SetBenthos("")
	cfg := ingest.DefaultConfig()
	cfg.BatchSize, cfg.MaxAckPending = 1000, 2500
	r, err := Ingest(ctx, 3000, cfg, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if r.Pipeline <= 0 || r.CHClient <= 0 || r.JSConsume <= 0 || r.Publish <= 0 || r.Benthos <= 0 {
		t.Fatalf("missing timings: %+v", r)
	}
	if r.IngestCPU <= 0 || r.ServerCPU <= 0 || r.BenthosCPU <= 0 || r.BenthosServerCPU <= 0 || r.BenthosRSS < 10<<20 {
		t.Fatalf("missing CPU or memory of ingest, Benthos or the server: %+v", r)
	}
	// A Go process with NATS and ClickHouse clients takes more than 10 MiB.
	if r.PeakRSS < 10<<20 {
		t.Fatalf("peak RSS of the ingest process %d bytes", r.PeakRSS)
	}
	figs := r.Figures()
	if len(figs) != 4 || figs[0].Reference <= 0 || figs[0].Value <= 0 || figs[2].Value <= 0 || figs[3].Reference <= 0 || figs[3].Goal != BenthosGoal {
		t.Fatalf("figures: %+v", figs)
	}
}

// buildBenthos builds bench/benthos (a module apart) into the test's
// directory.
func buildBenthos(t *testing.T) string {
	t.Helper()
	exe := filepath.Join(t.TempDir(), "benthos")
	if out, err := exec.Command("go", "-C", "benthos", "build", "-o", exe, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build bench/benthos: %v: %s", err, out)
	}
	return exe
}

// The generic pipeline's configuration is one Benthos v4.27 accepts
// (benthos lint), and its mapping turns an event of the stream into the
// row of audit_logs that ingest would store, field by field.
func TestBenthosPipelineMapsEvents(t *testing.T) {
	exe := buildBenthos(t)
	dir := t.TempDir()
	yaml, err := benthosYAML(ingest.DefaultConfig(), "nats://127.0.0.1:4222", "bench-benthos", &chserver.Server{HTTPPort: 8123}, "bench_benthos")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "benthos.yaml")
	if err := os.WriteFile(path, yaml, 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(exe, "lint", path).CombinedOutput(); err != nil {
		t.Fatalf("benthos lint: %v: %s", err, out)
	}
	// The pipeline's processors, run by Benthos over an event encoded as
	// the stream carries it, read from a file and written to stdout.
	pipeline := regexp.MustCompile(`(?s)\npipeline:\n.*?\n\n`).Find(yaml)
	if pipeline == nil {
		t.Fatalf("no pipeline in\n%s", yaml)
	}
	ev := synth.New(uuid.New(), 2, 7).Event(time.UnixMilli(1_700_000_000_123))
	ev.ResourceType = schemas.Ptr(schemas.ResourceType(1))
	msg, err := producers.Message(&ev)
	if err != nil {
		t.Fatal(err)
	}
	in := filepath.Join(dir, "event.msgpack")
	if err := os.WriteFile(in, msg.Data, 0o600); err != nil {
		t.Fatal(err)
	}
	// Metadata is an input's: the file input has no stream sequence.
	pipe := strings.ReplaceAll(string(pipeline), "@nats_sequence_stream.number()", "42")
	conf := "logger:\n  level: WARN\ninput:\n  file:\n    paths: [ \"" + in + "\" ]\n    scanner:\n      to_the_end: {}\n" + pipe + "output:\n  stdout:\n    codec: lines\n"
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(exe, "-c", path).Output()
	if err != nil {
		t.Fatalf("benthos: %v: %s", err, out)
	}
	var row map[string]any
	if err := json.Unmarshal(bytes.TrimSpace(out), &row); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	want := map[string]any{
		"organization_id": ev.OrganizationID.String(), "event_id": ev.EventID.String(), "ts_ms": float64(1_700_000_000_123),
		"action": float64(ev.Action), "source": float64(ev.Source), "display_name": ev.DisplayName, "principal_id": ev.PrincipalID,
		"principal_type": ev.PrincipalType, "resource_type": float64(1), "seq": float64(42), "salt": hex.EncodeToString(ev.Salt),
	}
	for k, v := range want {
		if row[k] != v {
			t.Errorf("%s: got %v (%T), want %v", k, row[k], row[k], v)
		}
	}
	if len(row["leaf"].(string)) != 64 || row["id"] == "" || row["created_ms"] == nil {
		t.Errorf("leaf, id or created_ms missing: %v", row)
	}
}
