package bench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/auditrail/auditrail/ingest"
	"github.com/auditrail/auditrail/internal/auditstore/clickhouse"
	"github.com/auditrail/auditrail/internal/chserver"
	"github.com/auditrail/auditrail/internal/natsx"
	"github.com/auditrail/auditrail/internal/synth"
	"github.com/auditrail/auditrail/producers"
	"github.com/auditrail/auditrail/schemas"
)

// IngestResult holds the timings of the ingest benchmark.
type IngestResult struct {
	Events    int
	Publish   time.Duration // producers.Publisher putting the events on the stream (not in the ratio)
	Pipeline  time.Duration // ingest: JetStream → decode → ClickHouse → ack, until all committed
	CHClient  time.Duration // clickhouse-client inserting the same rows
	JSConsume time.Duration // bare JetStream pull consume + ack of the same messages
}

// Figures returns the figures of the result: end-to-end rate against the
// slower reference (goal 0.5) and against the absolute 100k events/s goal.
func (r IngestResult) Figures() []Figure {
	pipe := rate(r.Events, r.Pipeline)
	ch, js := rate(r.Events, r.CHClient), rate(r.Events, r.JSConsume)
	slower, name := ch, "clickhouse-client insert"
	if js < ch {
		slower, name = js, "bare JetStream consume+ack"
	}
	return []Figure{
		{Name: "ingest end to end (events/s)", Value: pipe, Unit: "ev/s", Reference: slower, RefName: name, Goal: 0.5},
		{Name: "ingest end to end vs 100k events/s", Value: pipe, Unit: "ev/s", Reference: 100_000, RefName: "goal", Goal: 1},
	}
}

// Ingest publishes n synthetic events through the whole pipeline into a
// throwaway ClickHouse, then measures both references on the same data.
func Ingest(ctx context.Context, n int, icfg ingest.Config, progress io.Writer) (IngestResult, error) {
	res := IngestResult{Events: n}
	dir, err := os.MkdirTemp("", "auditrail-bench-")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(dir)
	say := func(format string, args ...any) { fmt.Fprintf(progress, "  "+format+"\n", args...) }

	say("starting ClickHouse and NATS in %s", dir)
	ch, err := chserver.Start(filepath.Join(dir, "clickhouse"))
	if err != nil {
		return res, err
	}
	defer ch.Stop()
	scfg := natsx.DefaultServerConfig()
	scfg.Listen, scfg.StoreDir = "127.0.0.1:0", filepath.Join(dir, "nats")
	ns, err := natsx.StartServer(scfg)
	if err != nil {
		return res, err
	}
	defer ns.Shutdown()
	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		return res, err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return res, err
	}
	if err := natsx.EnsureStreams(ctx, js, natsx.DefaultStreamConfig()); err != nil {
		return res, err
	}
	store, err := clickhouse.Open(ctx, ch.DSN("bench"))
	if err != nil {
		return res, err
	}
	defer store.Close()

	say("generating %d events", n)
	gen := synth.New(uuid.New(), 5, 42)
	now := time.Now()
	events := make([]schemas.AuditEvent, n)
	msgs := make([]*nats.Msg, n)
	for i := range events {
		// Spread over 30 days, as a busy tenant's month.
		events[i] = gen.Event(now.Add(-time.Duration(i) * 30 * 24 * time.Hour / time.Duration(n)))
		if msgs[i], err = producers.Message(&events[i]); err != nil {
			return res, err
		}
	}
	tsv := filepath.Join(dir, "rows.tsv")
	if err := writeTSV(tsv, events); err != nil {
		return res, err
	}
	events = nil

	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	say("publishing %d events to JetStream", n)
	pub, err := producers.New(nc, producers.DefaultConfig(), quiet)
	if err != nil {
		return res, err
	}
	start := time.Now()
	var wg sync.WaitGroup
	pubErr := make(chan error, 2)
	for _, part := range [][]*nats.Msg{msgs[:n/2], msgs[n/2:]} {
		wg.Add(1)
		go func() { defer wg.Done(); pubErr <- pub.PublishMsgs(ctx, part) }()
	}
	wg.Wait()
	close(pubErr)
	for err := range pubErr {
		if err != nil {
			return res, err
		}
	}
	res.Publish = time.Since(start)
	// Measure ingest with the heap of an ingest process, not of this harness.
	msgs = nil
	runtime.GC()

	say("ingest: consuming, storing and acknowledging %d events", n)
	in, err := ingest.NewAudit(nc, store, icfg, quiet)
	if err != nil {
		return res, err
	}
	ictx, stopIngest := context.WithCancel(ctx)
	defer stopIngest()
	ingestDone := make(chan error, 1)
	if path := os.Getenv("AUDITRAIL_BENCH_INGEST_PROFILE"); path != "" {
		f, err := os.Create(path)
		if err != nil {
			return res, err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return res, err
		}
		defer pprof.StopCPUProfile()
	}
	start = time.Now()
	go func() { ingestDone <- in.Run(ictx) }()
	lastReport := time.Now()
	for in.Stats().Stored < uint64(n) {
		select {
		case err := <-ingestDone:
			return res, fmt.Errorf("ingest stopped: %v", err)
		case <-ctx.Done():
			return res, ctx.Err()
		case <-time.After(2 * time.Millisecond):
		}
		if time.Since(lastReport) > 2*time.Second {
			lastReport = time.Now()
			say("  %d/%d committed", in.Stats().Stored, n)
		}
	}
	res.Pipeline = time.Since(start)
	pprof.StopCPUProfile()
	stopIngest()
	<-ingestDone
	if err := verifyCount(ch, "bench", n); err != nil {
		return res, err
	}

	say("reference: bare JetStream consume + ack of the same %d messages", n)
	if res.JSConsume, err = bareConsume(ctx, js, n); err != nil {
		return res, err
	}

	say("reference: clickhouse-client inserting the same %d rows", n)
	if res.CHClient, err = clientInsert(ctx, ch, tsv, n); err != nil {
		return res, err
	}
	return res, nil
}

func verifyCount(ch *chserver.Server, db string, n int) error {
	out, err := exec.Command("clickhouse-client", "--port", strconv.Itoa(ch.TCPPort), "--database", db,
		"--query", "SELECT uniqExact(event_id) FROM audit_logs").CombinedOutput()
	if err != nil {
		return fmt.Errorf("count: %v: %s", err, out)
	}
	if got := strings.TrimSpace(string(out)); got != strconv.Itoa(n) {
		return fmt.Errorf("ClickHouse holds %s distinct events, want %d", got, n)
	}
	return nil
}

func bareConsume(ctx context.Context, js jetstream.JetStream, n int) (time.Duration, error) {
	cons, err := js.CreateOrUpdateConsumer(ctx, schemas.StreamEvents, jetstream.ConsumerConfig{
		Durable: "bench-bare", FilterSubject: schemas.SubjectAuditAll, AckPolicy: jetstream.AckExplicitPolicy,
		MaxAckPending: 40_000, DeliverPolicy: jetstream.DeliverAllPolicy,
	})
	if err != nil {
		return 0, err
	}
	start := time.Now()
	iter, err := cons.Messages(jetstream.PullMaxMessages(10_000))
	if err != nil {
		return 0, err
	}
	defer iter.Stop()
	for i := 0; i < n; i++ {
		m, err := iter.Next()
		if err != nil {
			return 0, err
		}
		if err := m.Ack(); err != nil {
			return 0, err
		}
	}
	return time.Since(start), nil
}

var tsvEscaper = strings.NewReplacer("\\", "\\\\", "\t", "\\t", "\n", "\\n", "\r", "\\r")

func tsvStr(w *bufio.Writer, s *string) {
	if s == nil {
		w.WriteString("\\N")
		return
	}
	w.WriteString(tsvEscaper.Replace(*s))
}

// writeTSV writes the rows that ingest would store, for clickhouse-client.
func writeTSV(path string, events []schemas.AuditEvent) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	w := bufio.NewWriterSize(f, 1<<20)
	created := time.Now().UnixMilli()
	for i := range events {
		e := &events[i]
		str := func(s string) *string { return &s }
		var rt, customer, project, data *string
		if e.ResourceType != nil {
			rt = str(strconv.Itoa(int(*e.ResourceType)))
		}
		if e.CustomerID != nil {
			customer = str(e.CustomerID.String())
		}
		if e.ProjectID != nil {
			project = str(e.ProjectID.String())
		}
		if e.Data != nil {
			data = str(string(e.Data))
		}
		cols := []*string{
			str(e.OrganizationID.String()), str(strconv.FormatInt(e.Timestamp.UnixMilli(), 10)), str(e.EventID.String()),
			str(schemas.EntryID(e.EventID).String()), e.ClientIP, str(strconv.Itoa(int(e.Action))), str(strconv.Itoa(int(e.Source))),
			str(e.DisplayName), customer, project, str(e.PrincipalID), e.UserID, str(e.PrincipalType), rt,
			e.ResourceID, e.ResourceDisplay, data, str(strconv.FormatInt(created, 10)), str(strconv.FormatUint(uint64(1<<63-1-created), 10)),
		}
		for j, c := range cols {
			if j > 0 {
				w.WriteByte('\t')
			}
			tsvStr(w, c)
		}
		w.WriteByte('\n')
	}
	return w.Flush()
}

func clientInsert(ctx context.Context, ch *chserver.Server, path string, n int) (time.Duration, error) {
	ref, err := clickhouse.Open(ctx, ch.DSN("bench_ref"))
	if err != nil {
		return 0, err
	}
	ref.Close()
	in, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer in.Close()
	cmd := exec.CommandContext(ctx, "clickhouse-client", "--port", strconv.Itoa(ch.TCPPort), "--database", "bench_ref",
		"--query", "INSERT INTO audit_logs (organization_id, ts_ms, event_id, id, client_ip, action, source, display_name, "+
			"customer_id, project_id, principal_id, user_id, principal_type, resource_type, resource_id, resource_display, "+
			"data, created_ms, ver) FORMAT TabSeparated")
	cmd.Stdin = in
	start := time.Now()
	if out, err := cmd.CombinedOutput(); err != nil {
		return 0, fmt.Errorf("clickhouse-client insert: %v: %s", err, out)
	}
	d := time.Since(start)
	return d, verifyCount(ch, "bench_ref", n)
}
