package bench

import (
	"bufio"
	"context"
	crand "crypto/rand"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/auditrail/auditrail/ingest"
	"github.com/auditrail/auditrail/internal/auditstore/clickhouse"
	"github.com/auditrail/auditrail/internal/chserver"
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
	// PeakRSS is the peak resident memory (VmHWM) of the `auditrail ingest`
	// child process, in bytes.
	PeakRSS int64
	// IngestCPU and ServerCPU are the CPU time of ingest and of the
	// ClickHouse server while ingest drained the stream.
	IngestCPU, ServerCPU time.Duration
	// Benthos is Benthos v4.27 draining the same stream into the same
	// server (bench/benthos.go): its time, peak RSS and CPU, and the
	// server's CPU meanwhile.
	Benthos                      time.Duration
	BenthosRSS                   int64
	BenthosCPU, BenthosServerCPU time.Duration
}

// BenthosGoal is how many times faster than Benthos v4.27 ingest drains
// the same stream into the same server.
const BenthosGoal = 5

// RSSBudget is the peak resident memory that `auditrail ingest` may use
// while it drains a backlog (issue 10): a budget, not a measured reference.
const RSSBudget = 256 << 20

// Figures returns the figures of the result: the end-to-end rate against
// the bare JetStream consume+ack rate (goal 0.75), against
// clickhouse-client inserting the same rows (goal 0.5) and against Benthos
// v4.27 draining the same stream into the same server (goal 5), all
// measured in the same run, and the peak RSS of the ingest process
// against its budget.
func (r IngestResult) Figures() []Figure {
	pipe := rate(r.Events, r.Pipeline)
	return []Figure{
		{Name: "ingest end to end vs bare JetStream", Value: pipe, Unit: "ev/s", Reference: rate(r.Events, r.JSConsume), RefName: "bare JetStream consume+ack", Goal: 0.75},
		{Name: "ingest end to end vs clickhouse-client", Value: pipe, Unit: "ev/s", Reference: rate(r.Events, r.CHClient), RefName: "clickhouse-client insert", Goal: 0.5},
		{Name: "ingest peak RSS (VmHWM, child process)", Value: float64(r.PeakRSS) / (1 << 20), Unit: "MiB", Reference: RSSBudget / (1 << 20), RefName: "budget", Goal: 1, Lower: true},
		{Name: "ingest end to end vs Benthos v4.27 (the same stream into the same server)", Value: pipe, Unit: "ev/s", Reference: rate(r.Events, r.Benthos),
			RefName: fmt.Sprintf("Benthos, %.1f µs of CPU an event (ingest %.1f), the server %.1f (under ingest %.1f), peak RSS %d MiB",
				perEvent(r.BenthosCPU, r.Events), perEvent(r.IngestCPU, r.Events), perEvent(r.BenthosServerCPU, r.Events), perEvent(r.ServerCPU, r.Events), r.BenthosRSS>>20),
			Goal: BenthosGoal},
	}
}

// auditrailExe is the auditrail binary whose roles the benchmarks run
// (SetAuditrail; by default the one beside this executable).
var auditrailExe string

// SetAuditrail names the auditrail binary whose roles (ingest, dev) the
// benchmarks run.
func SetAuditrail(path string) { auditrailExe = path }

// AuditrailBinary is the auditrail binary beside this executable (make
// bench builds bin/auditrail-bench beside bin/auditrail).
func AuditrailBinary() (string, error) {
	return besideSelf("auditrail", "the benchmarks run the roles of the auditrail binary (make bench builds both)")
}

// besideSelf is the executable name in this executable's directory, or an
// error that says why it is wanted.
func besideSelf(name, why string) (string, error) {
	self, err := os.Executable()
	if err != nil {
		return "", err
	}
	exe := filepath.Join(filepath.Dir(self), name)
	if _, err := os.Stat(exe); err != nil {
		return "", fmt.Errorf("%s, expected at %s: %w", why, exe, err)
	}
	return exe, nil
}

// ingestExe is the auditrail binary whose ingest role is measured: the
// one SetAuditrail named, or the one beside this executable.
func ingestExe() (string, error) {
	if auditrailExe != "" {
		return auditrailExe, nil
	}
	return AuditrailBinary()
}

// runIngestChild runs `auditrail ingest` against the NATS server and the
// ClickHouse database until it has acknowledged n audit events. It returns
// the time from the creation of its consumer to the last ack, and the
// peak RSS of the process (VmHWM from /proc/<pid>/status, read before it
// is stopped).
func runIngestChild(ctx context.Context, icfg ingest.Config, natsURL, dsn string, js jetstream.JetStream, n int,
	say func(string, ...any), extra ...string) (time.Duration, int64, error) {
	r, err := runIngestChildCPU(ctx, icfg, natsURL, dsn, js, n, say, extra...)
	return r.elapsed, r.rss, err
}

// ingestRun is what runIngestChildCPU measured of the child: the time to
// drain the stream, its peak RSS and the CPU time it used in all.
type ingestRun struct {
	elapsed time.Duration
	rss     int64
	cpu     time.Duration
}

// runIngestChildCPU is runIngestChild, with the child's CPU time.
func runIngestChildCPU(ctx context.Context, icfg ingest.Config, natsURL, dsn string, js jetstream.JetStream, n int,
	say func(string, ...any), extra ...string) (ingestRun, error) {
	args := []string{"--nats-url", natsURL, "--clickhouse", dsn, "--http", "127.0.0.1:0",
		"--durable", icfg.Durable, "--batch-size", strconv.Itoa(icfg.BatchSize), "--batch-bytes", strconv.Itoa(icfg.BatchBytes),
		"--fetch-size", strconv.Itoa(icfg.FetchSize), "--writers", strconv.Itoa(icfg.Writers), "--insert-rows", strconv.Itoa(icfg.InsertRows), "--flush-interval", icfg.FlushInterval.String(),
		"--ack-wait", icfg.AckWait.String(), "--log-level", "warn"}
	child, err := startRole(ctx, "ingest", append(args, extra...)...)
	if err != nil {
		return ingestRun{}, err
	}
	return drainedBy(ctx, child, js, icfg.Durable, n, say)
}

// drainedBy waits until child has acknowledged the n messages of js's
// stream through its durable consumer: the time from the consumer's
// creation to the last ack, the child's peak RSS (VmHWM, read before it is
// stopped) and its CPU time in all; then stops it.
func drainedBy(ctx context.Context, child *roleChild, js jetstream.JetStream, durable string, n int, say func(string, ...any)) (ingestRun, error) {
	stop := child.stop
	fail := func(err error) (ingestRun, error) {
		_ = stop()
		return ingestRun{}, err
	}

	// Polled every 5 ms until the consumer exists, then every 20 ms: each
	// poll is a request to the NATS server, whose CPU ingest needs.
	var start time.Time
	var c interface {
		Info(context.Context) (*jetstream.ConsumerInfo, error)
	} // a pull consumer (ingest's) or a push consumer (Benthos')
	lastReport := time.Now()
	for {
		poll := 20 * time.Millisecond
		if c == nil {
			poll = 5 * time.Millisecond
		}
		select {
		case err := <-child.exited:
			child.exited <- err
			return fail(child.exitedEarly())
		case <-ctx.Done():
			return fail(ctx.Err())
		case <-time.After(poll):
		}
		if c == nil {
			pull, err := js.Consumer(ctx, schemas.StreamEvents, durable)
			if err == nil {
				c = pull
			} else if push, perr := js.PushConsumer(ctx, schemas.StreamEvents, durable); perr == nil {
				c = push
			} else {
				if time.Since(lastReport) > time.Minute {
					return fail(fmt.Errorf("%s made no consumer %s in a minute: %v: %s", child.name, durable, err, tail(child.stderr.String(), 4000)))
				}
				continue // not created yet
			}
			start = time.Now()
		}
		info, err := c.Info(ctx)
		if err != nil {
			return fail(err)
		}
		if info.NumPending == 0 && info.NumAckPending == 0 && info.AckFloor.Stream >= uint64(n) {
			break
		}
		if time.Since(lastReport) > 2*time.Second {
			lastReport = time.Now()
			say("  %d/%d acknowledged", info.AckFloor.Stream, n)
		}
	}
	elapsed := time.Since(start)
	rss, err := peakRSS(child.cmd.Process.Pid)
	if err != nil {
		return fail(err)
	}
	cpu, err := procCPU(child.cmd.Process.Pid)
	if err != nil {
		return fail(err)
	}
	if err := stop(); err != nil {
		return ingestRun{}, err
	}
	if log := strings.TrimSpace(child.stderr.String()); log != "" {
		say("%s warned:\n%s", child.name, tail(log, 4000))
	}
	return ingestRun{elapsed: elapsed, rss: rss, cpu: cpu}, nil
}

// peakRSS reads VmHWM, the peak resident set size of a process, in bytes.
func peakRSS(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, fmt.Errorf("peak RSS: %w", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("peak RSS: %q: %w", line, err)
			}
			return kb << 10, nil
		}
	}
	return 0, fmt.Errorf("peak RSS: no VmHWM in /proc/%d/status", pid)
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
	bn, err := startNATS(ctx, filepath.Join(dir, "nats"))
	if err != nil {
		return res, err
	}
	defer bn.close()
	ns, nc, js := bn.ns, bn.nc, bn.js
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
	// Spread over 30 days, as a busy tenant's month. (Multiplying i by 30
	// days before dividing overflowed int64 above ~3,500 events, dating
	// events in the future: ingest now dead-letters those.)
	step := 30 * 24 * time.Hour / time.Duration(n)
	for i := range events {
		events[i] = gen.Event(now.Add(-time.Duration(i) * step))
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
	if err := publishHalves(ctx, pub, msgs); err != nil {
		return res, err
	}
	res.Publish = time.Since(start)
	// Measure ingest with the heap of an ingest process, not of this harness.
	msgs = nil
	runtime.GC()

	srvPID, err := serverPID(ch)
	if err != nil {
		return res, err
	}
	say("ingest: `auditrail ingest` in a child process consuming, storing and acknowledging %d events", n)
	var run ingestRun
	if res.ServerCPU, err = serverCPUOver(srvPID, func() (err error) {
		run, err = runIngestChildCPU(ctx, icfg, ns.ClientURL(), ch.DSN("bench"), js, n, say)
		return err
	}); err != nil {
		return res, err
	}
	res.Pipeline, res.PeakRSS, res.IngestCPU = run.elapsed, run.rss, run.cpu
	if err := verifyCount(ch, "bench", n); err != nil {
		return res, err
	}

	say("reference: Benthos v4.27 draining the same %d events into the same server, bounded as ingest is", n)
	if res.BenthosServerCPU, err = serverCPUOver(srvPID, func() (err error) {
		run, err = runBenthos(ctx, icfg, dir, ns.ClientURL(), ch, "bench_benthos", js, n, say)
		return err
	}); err != nil {
		return res, err
	}
	res.Benthos, res.BenthosRSS, res.BenthosCPU = run.elapsed, run.rss, run.cpu
	if err := verifyCount(ch, "bench_benthos", n); err != nil {
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

// serverCPUOver is the CPU time the process pid (a ClickHouse server)
// used while f ran.
func serverCPUOver(pid int, f func() error) (time.Duration, error) {
	c0, err := procCPU(pid)
	if err != nil {
		return 0, err
	}
	if err := f(); err != nil {
		return 0, err
	}
	c1, err := procCPU(pid)
	return c1 - c0, err
}

func verifyCount(ch *chserver.Server, db string, n int) error {
	return verifyCountIn(ch, db, "audit_logs", n)
}

// verifyCountIn checks that table of db holds n distinct events.
func verifyCountIn(ch *chserver.Server, db, table string, n int) error {
	out, err := exec.Command("clickhouse-client", "--port", strconv.Itoa(ch.TCPPort), "--database", db,
		"--query", "SELECT uniqExact(event_id) FROM "+table).CombinedOutput()
	if err != nil {
		return fmt.Errorf("count: %v: %s", err, out)
	}
	if got := strings.TrimSpace(string(out)); got != strconv.Itoa(n) {
		return fmt.Errorf("ClickHouse holds %s distinct events in %s.%s, want %d", got, db, table, n)
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

// writeTSV writes the rows that ingest would store, for clickhouse-client
// (clientInsertInto's columns): a salt and a leaf of random bytes, as
// long as ingest's, and the stream sequence.
func writeTSV(path string, events []schemas.AuditEvent) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	w := bufio.NewWriterSize(f, 1<<20)
	created := time.Now().UnixMilli()
	var salt [16]byte
	var leaf [32]byte
	for i := range events {
		crand.Read(salt[:])
		crand.Read(leaf[:])
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
			e.ResourceID, e.ResourceDisplay, data, str(strconv.FormatInt(created, 10)), str(string(salt[:])),
			str(strconv.FormatUint(uint64(1<<63-1-created), 10)), str(strconv.Itoa(i + 1)), str(string(leaf[:])),
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
	start := time.Now()
	if _, err := clientInsertInto(ctx, ch, path, "bench_ref", "audit_logs"); err != nil {
		return 0, err
	}
	d := time.Since(start)
	return d, verifyCount(ch, "bench_ref", n)
}

// clientInsertInto has clickhouse-client insert the rows of the TSV file
// at path (writeTSV) into table of db, and answers the client's CPU time.
func clientInsertInto(ctx context.Context, ch *chserver.Server, path, db, table string) (time.Duration, error) {
	in, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer in.Close()
	cmd := exec.CommandContext(ctx, "clickhouse-client", "--port", strconv.Itoa(ch.TCPPort), "--database", db,
		"--query", "INSERT INTO "+table+" (organization_id, ts_ms, event_id, id, client_ip, action, source, display_name, "+
			"customer_id, project_id, principal_id, user_id, principal_type, resource_type, resource_id, resource_display, "+
			"data, created_ms, salt, ver, seq, leaf) FORMAT TabSeparated")
	cmd.Stdin = in
	if out, err := cmd.CombinedOutput(); err != nil {
		return 0, fmt.Errorf("clickhouse-client insert: %v: %s", err, out)
	}
	return cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime(), nil
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}
