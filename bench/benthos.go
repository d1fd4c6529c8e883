package bench

import (
	"bytes"
	"context"
	_ "embed"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/template"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/auditrail/auditrail/ingest"
	"github.com/auditrail/auditrail/internal/auditstore/clickhouse"
	"github.com/auditrail/auditrail/internal/chserver"
	"github.com/auditrail/auditrail/schemas"
)

// The generic pipeline that the ingest benchmark runs beside ingest:
// Benthos v4.27 (bench/benthos, a module apart) reading the same stream
// with a durable consumer of its own, decoding each event from
// MessagePack, mapping it to a row of audit_logs with Bloblang, and
// POSTing batches as JSONEachRow to the same ClickHouse server, into a
// database of the same schema (its views included). It does less than
// ingest: no dedup read, no salted leaf (a SHA-256 of the message stands
// for it), no dead letters, no commit notices.
//
//go:embed testdata/benthos.yaml.tmpl
var benthosTemplate string

var benthosConfig = template.Must(template.New("benthos.yaml").Parse(benthosTemplate))

// benthosExe is the Benthos binary the ingest benchmark runs (SetBenthos;
// by default the one beside this executable, which make bench builds).
var benthosExe string

// SetBenthos names the Benthos binary the ingest benchmark runs beside
// ingest ("": the one beside this executable).
func SetBenthos(path string) { benthosExe = path }

// benthosBinary is the Benthos binary to run: SetBenthos's, or bin/benthos
// beside this executable.
func benthosBinary() (string, error) {
	if benthosExe != "" {
		return benthosExe, nil
	}
	return besideSelf("benthos", "the ingest benchmark runs Benthos v4.27 beside ingest (make bench builds it from bench/benthos)")
}

// benthosData is what the configuration is rendered from.
type benthosData struct {
	NATS, Subject, Durable, URL string
	MaxAckPending, Batch        int
	BatchBytes, InFlight        int
	Actions, Sources, Resources string // Bloblang objects: name → number
}

// benthosYAML renders the pipeline's configuration: what ingest's cfg
// bounds (batch count and bytes, batches in flight, unacknowledged
// messages) bounds Benthos alike, so that both run in the same memory
// (runBenthos also gives it ingest's soft limit of the Go heap).
func benthosYAML(cfg ingest.Config, natsURL, durable string, ch *chserver.Server, db string) ([]byte, error) {
	q := url.Values{"query": {"INSERT INTO " + db + ".audit_logs FORMAT JSONEachRow"}}
	d := benthosData{
		NATS: natsURL, Subject: schemas.SubjectAuditAll, Durable: durable,
		URL:           fmt.Sprintf("http://127.0.0.1:%d/?%s", ch.HTTPPort, q.Encode()),
		MaxAckPending: max(cfg.MaxAckPending, (cfg.Writers+1)*cfg.BatchSize+cfg.FetchSize),
		Batch:         cfg.BatchSize, BatchBytes: cfg.BatchBytes, InFlight: cfg.Writers,
		Actions:   enumObject(func(i int) (string, bool) { a := schemas.AuditAction(i); return a.String(), a.Valid() }),
		Sources:   enumObject(func(i int) (string, bool) { s := schemas.AuditSource(i); return s.String(), s.Valid() }),
		Resources: enumObject(func(i int) (string, bool) { r := schemas.ResourceType(i); return r.String(), r.Valid() }),
	}
	var b bytes.Buffer
	err := benthosConfig.Execute(&b, d)
	return b.Bytes(), err
}

// enumObject is a Bloblang object literal of an enum's names and numbers.
func enumObject(name func(int) (string, bool)) string {
	var b strings.Builder
	b.WriteString("{")
	for i := 0; i < 256; i++ {
		n, ok := name(i)
		if !ok {
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(strconv.Quote(n) + ": " + strconv.Itoa(i))
	}
	b.WriteString("}")
	return b.String()
}

// runBenthos has Benthos drain the n events of js's stream into db on ch
// (its schema made first), measured as runIngestChildCPU measures ingest.
func runBenthos(ctx context.Context, cfg ingest.Config, dir, natsURL string, ch *chserver.Server, db string, js jetstream.JetStream, n int,
	say func(string, ...any)) (ingestRun, error) {
	exe, err := benthosBinary()
	if err != nil {
		return ingestRun{}, err
	}
	store, err := clickhouse.Open(ctx, ch.DSN(db))
	if err != nil {
		return ingestRun{}, err
	}
	store.Close()
	const durable = "bench-benthos"
	yaml, err := benthosYAML(cfg, natsURL, durable, ch, db)
	if err != nil {
		return ingestRun{}, err
	}
	path := filepath.Join(dir, "benthos.yaml")
	if err := os.WriteFile(path, yaml, 0o600); err != nil {
		return ingestRun{}, err
	}
	// The Go heap's soft limit that ingest's bounds give ingest
	// (ingest.Config.MemoryLimit) bounds Benthos, a Go program too.
	env := []string{"GOMEMLIMIT=" + strconv.FormatInt(cfg.MemoryLimit(), 10)}
	child, err := startChild(ctx, exe, "benthos", true, env, "-c", path)
	if err != nil {
		return ingestRun{}, err
	}
	return drainedBy(ctx, child, js, durable, n, say)
}
