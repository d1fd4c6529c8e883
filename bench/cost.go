package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
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
	"github.com/auditrail/auditrail/internal/synth"
	atlog "github.com/auditrail/auditrail/internal/tlog"
	"github.com/auditrail/auditrail/producers"
	"github.com/auditrail/auditrail/schemas"
)

// CostConfig says what the cost benchmark runs.
type CostConfig struct {
	// Exe is the auditrail binary (its dev, ingest and tlog roles).
	Exe string
	// Rate events/s of Orgs organizations are published for Duration into
	// `auditrail dev` on each store (one ClickHouse server, SQLite, and
	// with Cluster 2 shards × 2 replicas).
	Rate     int
	Duration time.Duration
	Orgs     int
	Cluster  bool
	// Drain events, published first, are drained by `auditrail ingest`
	// and `auditrail tlog` as separate processes into one server (0: not
	// run).
	Drain int
	// Roles: the steady load also runs through ingest, tlog, query and
	// controlplane as separate processes on one server, with a feed
	// poller and a page reader (see roles).
	Roles bool
	// QueryLog: dev's queries on one server are logged (system.query_log,
	// which costs the server CPU of its own) and the most frequent are
	// printed: where the server's CPU goes.
	QueryLog bool
	// ProfileDir, when set, receives a CPU profile of each dev run
	// (AUDITRAIL_CPUPROFILE), named after the run.
	ProfileDir string
	// LoadFor (0: not run): dev on one server is flooded for CapacityFor
	// (its capacity: events stored and signed a second, publishing
	// included), then
	// held at half and at 80 % of it for LoadFor each while a poller
	// follows the feed and another reads the newest page.
	LoadFor, CapacityFor time.Duration
}

// DefaultCostConfig is what `auditrail bench` runs.
func DefaultCostConfig(exe string) CostConfig {
	return CostConfig{Exe: exe, Rate: 3000, Duration: 40 * time.Second, Orgs: 20, Cluster: true, Drain: 1_000_000, Roles: true,
		LoadFor: time.Minute, CapacityFor: 15 * time.Second}
}

// CostGoalUS is the CPU that dev and its ClickHouse server may use per
// event together, log included (µs; the quarter of the CPU per event).
const CostGoalUS = 65

// CostServerRatio is the most ClickHouse may spend on an event under dev
// in its bare insert of the same row into a table without views.
const CostServerRatio = 5

// ProcCost is the CPU time one process used over a run.
type ProcCost struct {
	Name string
	CPU  time.Duration
	// Counted: part of the pipeline's cost. The benchmark's publisher is
	// not (it stands for the platform's producers).
	Counted bool
	// RSS is the process's peak resident set size (VmHWM) at the run's
	// end, in bytes (0: not read: the benchmark's own process). A
	// ClickHouse server's counts its caches, which fill as it is used.
	RSS int64
}

// CostRun is the CPU of every process of one run over Events events.
type CostRun struct {
	Name    string
	Events  int
	Elapsed time.Duration // from the first publish until every entry is listable and signed
	Rate    float64       // events/s published
	Procs   []ProcCost
	// Idle is the CPU of the same processes over IdleFor before the first
	// publish, dev started and nothing published: what the roles' timers
	// cost whatever the load.
	Idle    []ProcCost
	IdleFor time.Duration
}

// Total is the CPU of the counted processes.
func (r CostRun) Total() time.Duration {
	var t time.Duration
	for _, p := range r.Procs {
		if p.Counted {
			t += p.CPU
		}
	}
	return t
}

// CPU is the CPU of the processes whose name starts with prefix.
func (r CostRun) CPU(prefix string) time.Duration {
	var t time.Duration
	for _, p := range r.Procs {
		if strings.HasPrefix(p.Name, prefix) {
			t += p.CPU
		}
	}
	return t
}

// RSS is the peak RSS of the run's process named name (0: none read).
func (r CostRun) RSS(name string) int64 {
	for _, p := range r.Procs {
		if p.Name == name {
			return p.RSS
		}
	}
	return 0
}

// PerEvent is d per event of the run, in µs.
func (r CostRun) PerEvent(d time.Duration) float64 { return perEvent(d, r.Events) }

// CostResult holds what the cost benchmark measured.
type CostResult struct {
	// Dev: `dev --clickhouse` on one server, then dev on SQLite, then (with
	// Cluster) dev on 2 shards × 2 replicas.
	Dev []CostRun
	// Bare: clickhouse-client inserting the rows of the first run into a
	// table of audit_logs' structure without views: the server and the
	// client.
	Bare CostRun
	// Drain: the separate roles draining a backlog (no Events without it).
	Drain CostRun
	// Roles: the separate roles under the steady load (no Events without it).
	Roles CostRun
	// Capacity is dev's on one server (events/s stored and signed,
	// publishing included); Loads its latencies at half and at 80 % of it.
	Capacity float64
	Loads    []CostLoad
}

// CostLoad is dev's latency under a share of its capacity.
type CostLoad struct {
	Share float64 // of the capacity
	loadLatency
}

// CostLatencyGoalMS and CostPageGoalMS are the latency goals at half
// capacity: publish → queryable (and a feed poller's lag) p99, and the
// newest page p99.
const (
	CostLatencyGoalMS = 2000
	CostPageGoalMS    = 50
)

// Names of the processes the benchmark reads.
const (
	procDev       = "dev"
	procServer    = "ClickHouse server"
	procZooKeeper = "ZooKeeper"
	procPublisher = "the publisher (not counted)"
	procClient    = "clickhouse-client"
)

// Figures: dev and its ClickHouse server per event (goal ≤ 65 µs,
// beside the bare insert of the same rows), ClickHouse's own share
// against its bare insert (goal ≤ 5×), and, without a goal, dev on SQLite,
// dev on the cluster and the separate roles' drain, beside dev on one
// server.
func (r CostResult) Figures() []Figure {
	if len(r.Dev) == 0 {
		return nil
	}
	one := r.Dev[0]
	bareRef := r.Bare.PerEvent(r.Bare.Total())
	out := []Figure{
		{Name: "CPU per event, dev --clickhouse and its server, log included (µs)", Value: one.PerEvent(one.Total()), Unit: "µs",
			Reference: bareRef, RefName: "clickhouse-client's insert of the same rows into a table without views, server and client",
			Goal: NoRatioGoal, Lower: true, Max: CostGoalUS},
		{Name: "CPU per event, the ClickHouse server under dev (µs)", Value: one.PerEvent(one.CPU(procServer)), Unit: "µs",
			Reference: r.Bare.PerEvent(r.Bare.CPU(procServer)), RefName: "the server's share of that bare insert",
			Goal: CostServerRatio, Lower: true},
	}
	for _, run := range r.Dev[1:] {
		out = append(out, Figure{Name: "CPU per event, " + run.Name + " (µs)", Value: run.PerEvent(run.Total()), Unit: "µs",
			Reference: one.PerEvent(one.Total()), RefName: one.Name, Goal: NoRatioGoal, Lower: true})
	}
	if r.Drain.Events > 0 {
		out = append(out, Figure{Name: "CPU per event, " + r.Drain.Name + " (µs)", Value: r.Drain.PerEvent(r.Drain.Total()), Unit: "µs",
			Reference: one.PerEvent(one.Total()), RefName: one.Name, Goal: NoRatioGoal, Lower: true})
		// The roles' memory, for sizing, beside dev's (every role).
		mib := func(b int64) float64 { return float64(b) / (1 << 20) }
		for _, p := range r.Drain.Procs {
			if p.RSS > 0 && p.Name != procServer {
				out = append(out, Figure{Name: "peak RSS of " + p.Name + ", draining the backlog (MiB)", Value: mib(p.RSS), Unit: "MiB",
					Reference: mib(one.RSS(procDev)), RefName: "dev's, every role, under the steady load", Goal: NoRatioGoal, Lower: true})
			}
		}
	}
	if r.Roles.Events > 0 {
		out = append(out, Figure{Name: "CPU per event, " + r.Roles.Name + " (µs)", Value: r.Roles.PerEvent(r.Roles.Total()), Unit: "µs",
			Reference: one.PerEvent(one.Total()), RefName: one.Name, Goal: NoRatioGoal, Lower: true})
		for _, p := range r.Roles.Procs {
			if p.Counted && p.Name != procServer {
				out = append(out, Figure{Name: "CPU per event of " + p.Name + ", a separate process under the steady load (µs)", Value: r.Roles.PerEvent(p.CPU), Unit: "µs",
					Reference: one.PerEvent(one.CPU(procDev)), RefName: "dev's, every role", Goal: NoRatioGoal, Lower: true})
				out = append(out, Figure{Name: "peak RSS of " + p.Name + ", a separate process under the steady load (MiB)", Value: float64(p.RSS) / (1 << 20), Unit: "MiB",
					Reference: float64(one.RSS(procDev)) / (1 << 20), RefName: "dev's, every role, under the steady load", Goal: NoRatioGoal, Lower: true})
			}
		}
	}
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	for _, l := range r.Loads {
		// The rates in the reference's name: a figure's name stays the
		// same from run to run (its row of the results table).
		at := fmt.Sprintf("%.0f%% of dev's capacity", 100*l.Share)
		rates := fmt.Sprintf("; %.0f of %.0f ev/s", l.rate, r.Capacity)
		visible := Figure{Name: "publish -> queryable in a feed poller, p99, at " + at + " (ms)", Value: ms(l.visible.P99), Unit: "ms",
			Reference: ms(l.visible.P50), RefName: "its p50" + rates, Goal: NoRatioGoal, Lower: true}
		page := Figure{Name: "newest page p99, at " + at + " (ms)", Value: ms(l.page.P99), Unit: "ms",
			Reference: ms(l.page.P50), RefName: "its p50" + rates, Goal: NoRatioGoal, Lower: true}
		if l.Share == 0.5 {
			visible.Max, page.Max = CostLatencyGoalMS, CostPageGoalMS
		}
		out = append(out, visible, page)
	}
	return out
}

// print writes a run's CPU per event, process by process.
func (r CostRun) print(say func(string, ...any)) {
	rate := ""
	if r.Rate > 0 {
		rate = fmt.Sprintf(" at %.0f events/s", r.Rate)
	}
	if r.Rate > 0 {
		say("%s: %d events%s, everything listable and signed %s after the first publish; CPU per event:", r.Name, r.Events, rate, r.Elapsed.Round(time.Millisecond))
	} else {
		say("%s: %d events in %s; CPU per event:", r.Name, r.Events, r.Elapsed.Round(time.Millisecond))
	}
	for i, p := range r.Procs {
		idle := ""
		if i < len(r.Idle) && r.IdleFor > 0 {
			idle = fmt.Sprintf("  (idle before: %.1f ms of CPU a second)", float64(r.Idle[i].CPU.Microseconds())/1000/r.IdleFor.Seconds())
		}
		rss := ""
		if p.RSS > 0 {
			rss = fmt.Sprintf("  peak RSS %d MiB", p.RSS>>20)
		}
		say("  %-44s %7.1f µs%s%s", p.Name, r.PerEvent(p.CPU), rss, idle)
	}
	say("  %-44s %7.1f µs", "all counted", r.PerEvent(r.Total()))
}

// costBench is one run of Cost.
type costBench struct {
	cfg CostConfig
	dir string
	say func(string, ...any)
}

// Cost measures the CPU per event of every process of the pipeline, read
// from /proc: `auditrail dev` (every role, the log included, no
// destinations) under a steady publish on one ClickHouse server, on
// SQLite and on the cluster, from the first publish until every entry is
// listable and in a signed checkpoint; clickhouse-client's insert of the
// same rows into a table without views; dev's capacity and its latencies
// at half and 80 % of it; and the roles as separate processes (NATS,
// ingest, tlog) draining a backlog.
func Cost(ctx context.Context, cfg CostConfig, progress io.Writer) (r CostResult, err error) {
	if cfg.Exe == "" || cfg.Rate < 100 || cfg.Duration < time.Second || cfg.Orgs < 1 || cfg.Drain < 0 || cfg.Drain > 0 && cfg.Drain < 1000 ||
		cfg.LoadFor < 0 || cfg.LoadFor > 0 && (cfg.LoadFor < time.Second || cfg.CapacityFor < time.Second) {
		return r, fmt.Errorf("cost benchmark: want a binary, at least 100 events/s for a second, an organization, no drain or one of at least 1000 events, "+
			"and no load or one of a second at least after a capacity measured for a second at least, got %+v", cfg)
	}
	b := &costBench{cfg: cfg, say: func(format string, args ...any) { fmt.Fprintf(progress, "  "+format+"\n", args...) }}
	if b.dir, err = os.MkdirTemp("", "auditrail-bench-cost-"); err != nil {
		return r, err
	}
	defer os.RemoveAll(b.dir)

	srv, err := chserver.StartWith(filepath.Join(b.dir, "clickhouse"), chserver.Options{PartLog: cfg.QueryLog})
	if err != nil {
		return r, err
	}
	defer srv.Stop()
	srvPID, err := serverPID(srv)
	if err != nil {
		return r, err
	}
	const db = "bench_cost"
	b.say("dev --clickhouse on one server: %d events/s of %d organizations for %s", cfg.Rate, cfg.Orgs, cfg.Duration)
	dsn := srv.DSN(db)
	if cfg.QueryLog {
		dsn += "?log_queries=1"
	}
	one, events, err := b.steady(ctx, "dev --clickhouse and its server", "dev-clickhouse", dsn, nil, map[string]int{procServer: srvPID}, true)
	if err != nil {
		return r, err
	}
	if cfg.QueryLog {
		if err := b.topQueries(ctx, srv, 25, one.CPU(procServer)); err != nil {
			return r, err
		}
	}
	one.print(b.say)
	r.Dev = append(r.Dev, one)

	b.say("reference: clickhouse-client inserting the same %d rows into a table of audit_logs' structure without views", len(events))
	if r.Bare, err = b.bareInsert(ctx, srv, srvPID, db, events); err != nil {
		return r, err
	}
	events = nil
	r.Bare.print(b.say)

	if cfg.LoadFor > 0 {
		if err := b.loads(ctx, srv, srv.DSN("bench_load"), &r); err != nil {
			return r, err
		}
	}
	// Their merges would run into the drain's figures.
	dropDatabases(srv, db, "bench_bare", "bench_load", numbered("bench_load", 0), numbered("bench_load", 1))

	b.say("dev on SQLite: the same load")
	lite, _, err := b.steady(ctx, "dev on SQLite", "dev-sqlite", "", nil, nil, false)
	if err != nil {
		return r, err
	}
	lite.print(b.say)
	r.Dev = append(r.Dev, lite)

	if cfg.Drain > 0 {
		b.say("the roles as separate processes: %d events published, then drained by `auditrail ingest` and `auditrail tlog` into one server", cfg.Drain)
		if r.Drain, err = b.drain(ctx, srv, srvPID); err != nil {
			return r, err
		}
		r.Drain.print(b.say)
	}
	if cfg.Roles {
		b.say("the roles as separate processes under the same load: ingest, tlog, query (a feed poller, a page reader) and controlplane on one server")
		if r.Roles, err = b.roles(ctx, srv, srvPID); err != nil {
			return r, err
		}
		r.Roles.print(b.say)
	}
	srv.Stop()

	if cfg.Cluster {
		b.say("dev on 2 shards x 2 replicas (ZooKeeper, four servers): the same load")
		const name = "bench"
		cl, err := chserver.StartCluster(filepath.Join(b.dir, "cluster"), name, 2, 2)
		if err != nil {
			return r, err
		}
		defer cl.Stop()
		pids := map[string]int{procZooKeeper: cl.ZooKeeper.PID()}
		for i, s := range cl.Servers() {
			if pids[fmt.Sprintf("%s %d", procServer, i+1)], err = serverPID(s); err != nil {
				return r, err
			}
		}
		run, _, err := b.steady(ctx, "dev on 2 shards x 2 replicas, its 4 servers and ZooKeeper", "dev-cluster", cl.DSN(db),
			[]string{"--clickhouse-cluster", name}, pids, false)
		if err != nil {
			return r, err
		}
		run.print(b.say)
		r.Dev = append(r.Dev, run)
	}
	return r, nil
}

// loads measures dev's capacity on dsn (capacity), then its latencies under
// half and 80 % of it for LoadFor each (latencyUnderLoad: a poller
// follows the feed, another reads the newest page).
func (b *costBench) loads(ctx context.Context, srv *chserver.Server, dsn string, r *CostResult) error {
	c, err := b.capacity(ctx, dsn)
	if err != nil {
		return err
	}
	r.Capacity = c
	for i, share := range []float64{0.5, 0.8} {
		rate := int(share * r.Capacity)
		b.say("%.0f%% of it, %d events/s for %s, a poller following the feed and another reading the newest page", 100*share, rate, b.cfg.LoadFor)
		ldsn, start := numbered(dsn, i), time.Now()
		if b.cfg.QueryLog {
			ldsn += "?log_queries=1"
		}
		lr, err := latencyUnderLoad(ctx, b.cfg.Exe, filepath.Join(b.dir, fmt.Sprintf("dev-load-%d", i)), ldsn, nil, rate, b.cfg.LoadFor, true, b.say)
		if err != nil {
			return err
		}
		b.say("newest page p50 %s p99 %s", lr.page.P50.Round(time.Millisecond), lr.page.P99.Round(time.Millisecond))
		if b.cfg.QueryLog {
			if err := b.slowQueries(ctx, srv, start, 12); err != nil {
				return err
			}
		}
		r.Loads = append(r.Loads, CostLoad{Share: share, loadLatency: lr})
	}
	return nil
}

// capacity floods dev on dsn for CapacityFor: the events a second it
// stores and signs (publishing included, all on this machine): from the
// first publish until every event is in a signed checkpoint.
func (b *costBench) capacity(ctx context.Context, dsn string) (float64, error) {
	b.say("capacity: dev on one server flooded for %s, until every event is stored and in a signed checkpoint", b.cfg.CapacityFor)
	env, err := startFeedDev(ctx, b.cfg.Exe, filepath.Join(b.dir, "dev-capacity"), dsn, "Capacity")
	if err != nil {
		return 0, err
	}
	defer env.close()
	signed := newSignedSizes()
	sub, err := env.nc.Subscribe(schemas.SubjectCheckpointAll, signed.note)
	if err != nil {
		return 0, err
	}
	defer sub.Unsubscribe() //nolint:errcheck // the connection closes after
	// The organization's trail holds its creation: signed first, it is
	// the log's size before the events.
	if err := signed.wait(ctx, map[uuid.UUID]int64{env.org: 1}, time.Minute, b.say); err != nil {
		return 0, err
	}
	time.Sleep(2 * time.Second)
	signed.mu.Lock()
	before := signed.sizes[env.org]
	signed.mu.Unlock()
	start := time.Now()
	n, err := publishFlat(ctx, env.pub, env.org, 0, b.cfg.CapacityFor, func(int) time.Time { return time.Now() })
	if err != nil {
		return 0, err
	}
	if err := waitIngested(ctx, env.js, b.say); err != nil {
		return 0, err
	}
	stored := time.Since(start)
	if err := signed.wait(ctx, map[uuid.UUID]int64{env.org: before + int64(n)}, 10*time.Minute, b.say); err != nil {
		return 0, err
	}
	elapsed := time.Since(start)
	c := float64(n) / elapsed.Seconds()
	b.say("capacity: %d events stored in %s (%.0f/s), in a signed checkpoint in %s: %.0f events/s", n, stored.Round(time.Millisecond),
		float64(n)/stored.Seconds(), elapsed.Round(time.Millisecond), c)
	return c, nil
}

// numbered is a database's name, or a DSN ending with it, made apart for
// the i-th run.
func numbered(name string, i int) string { return fmt.Sprintf("%s_%d", name, i) }

// serverPID is the process id of a throwaway ClickHouse server.
func serverPID(s *chserver.Server) (int, error) {
	return findPID("--config-file=" + filepath.Join(s.Dir, "config.xml"))
}

// steady starts dev in its own directory on dsn (SQLite when empty) with
// more flags, publishes cfg.Rate events/s of cfg.Orgs new organizations
// into it for cfg.Duration, and waits until every organization's audit
// log has a signed checkpoint of all its events (they are stored before
// they are sequenced: listable). The CPU of dev and of the processes of
// others (by name) is read from the first publish until then; keep keeps
// the events published.
func (b *costBench) steady(ctx context.Context, name, dir, dsn string, devArgs []string, others map[string]int, keep bool) (CostRun, []schemas.AuditEvent, error) {
	run := CostRun{Name: name}
	if b.cfg.ProfileDir != "" { // inherited by the child started next
		prof := filepath.Join(b.cfg.ProfileDir, dir+".prof")
		if err := os.Setenv("AUDITRAIL_CPUPROFILE", prof); err != nil {
			return run, nil, err
		}
		defer os.Unsetenv("AUDITRAIL_CPUPROFILE")
		b.say("a CPU profile of dev: %s", prof)
	}
	dev, err := startDev(ctx, b.cfg.Exe, filepath.Join(b.dir, dir), dsn, devArgs...)
	if err != nil {
		return run, nil, err
	}
	defer dev.stop()
	nc, js, err := devJetStream(dev)
	if err != nil {
		return run, nil, err
	}
	defer nc.Close()
	pub, err := producers.New(nc, producers.DefaultConfig(), slog.New(slog.DiscardHandler))
	if err != nil {
		return run, nil, err
	}
	signed := newSignedSizes()
	sub, err := nc.Subscribe(schemas.SubjectCheckpointAll, signed.note)
	if err != nil {
		return run, nil, err
	}
	defer sub.Unsubscribe() //nolint:errcheck // the connection closes after
	if err := waitConsumer(ctx, js); err != nil {
		return run, nil, err
	}
	time.Sleep(time.Second) // dev's start done: its CPU is not the events'

	names := []string{procDev}
	pids := map[string]int{procDev: dev.cmd.Process.Pid, procPublisher: os.Getpid()}
	for n, pid := range others {
		names, pids[n] = append(names, n), pid
	}
	slices.Sort(names[1:])
	procs := procSet{names: append(names, procPublisher), pids: pids, uncounted: procPublisher}
	cpu0, err := procs.idle(&run)
	if err != nil {
		return run, nil, err
	}

	orgs := make([]uuid.UUID, b.cfg.Orgs)
	for i := range orgs {
		orgs[i] = uuid.New()
	}
	start := time.Now()
	counts, kept, err := b.publishSteady(ctx, pub, orgs, keep)
	if err != nil {
		return run, nil, err
	}
	for _, c := range counts {
		run.Events += int(c)
	}
	run.Rate = float64(run.Events) / time.Since(start).Seconds()
	if err := signed.wait(ctx, counts, 10*time.Minute, b.say); err != nil {
		return run, nil, fmt.Errorf("%s: %w", name, err)
	}
	run.Elapsed = time.Since(start)
	if err := procs.since(&run, cpu0); err != nil {
		return run, nil, err
	}
	if backlog, err := ingestBacklog(ctx, js); err != nil || backlog != 0 {
		return run, nil, fmt.Errorf("%s: every log signed, yet ingest's backlog is %d (%v)", name, backlog, err)
	}
	return run, kept, nil
}

// publishSteady publishes cfg.Rate events/s of orgs (round robin) for
// cfg.Duration, in a batch every 50 ms, and answers how many each got
// (and, with keep, the events).
func (b *costBench) publishSteady(ctx context.Context, pub *producers.Publisher, orgs []uuid.UUID, keep bool) (map[uuid.UUID]int64, []schemas.AuditEvent, error) {
	gens := make([]*synth.Generator, len(orgs))
	for i := range orgs {
		gens[i] = synth.New(orgs[i], 3, uint64(i+1))
	}
	counts := map[uuid.UUID]int64{}
	var kept []schemas.AuditEvent
	const tick = 50 * time.Millisecond
	per := max(1, b.cfg.Rate*int(tick/time.Millisecond)/1000)
	start := time.Now()
	published := 0
	for next := start; time.Since(start) < b.cfg.Duration; next = next.Add(tick) {
		time.Sleep(time.Until(next))
		evs := make([]producers.Event, per)
		for i := range evs {
			j := (published + i) % len(orgs)
			e := gens[j].Event(time.Now())
			counts[orgs[j]]++
			if keep {
				kept = append(kept, e)
			}
			evs[i] = &e
		}
		if err := pub.PublishBatch(ctx, evs); err != nil {
			return nil, nil, fmt.Errorf("publish: %w", err)
		}
		published += per
	}
	return counts, kept, nil
}

// procSet is the processes a run reads, by name; uncounted names the
// benchmark's own (its CPU not counted, its RSS not read).
type procSet struct {
	names     []string
	pids      map[string]int
	uncounted string
}

// cpus reads the CPU time of every process.
func (p procSet) cpus() (map[string]time.Duration, error) {
	m := map[string]time.Duration{}
	for _, n := range p.names {
		var err error
		if m[n], err = procCPU(p.pids[n]); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// idle measures the processes at rest for costIdle into run.Idle, and
// answers their CPU at its end: where the run's measurement starts.
func (p procSet) idle(run *CostRun) (map[string]time.Duration, error) {
	idle0, err := p.cpus()
	if err != nil {
		return nil, err
	}
	run.IdleFor = costIdle
	time.Sleep(costIdle)
	cpu0, err := p.cpus()
	if err != nil {
		return nil, err
	}
	for _, n := range p.names {
		run.Idle = append(run.Idle, ProcCost{Name: n, CPU: cpu0[n] - idle0[n], Counted: n != p.uncounted})
	}
	return cpu0, nil
}

// since appends to run.Procs the CPU every process used since cpu0, and
// its peak RSS.
func (p procSet) since(run *CostRun, cpu0 map[string]time.Duration) error {
	cpu1, err := p.cpus()
	if err != nil {
		return err
	}
	for _, n := range p.names {
		pc := ProcCost{Name: n, CPU: cpu1[n] - cpu0[n], Counted: n != p.uncounted}
		if n != p.uncounted {
			if pc.RSS, err = peakRSS(p.pids[n]); err != nil {
				return err
			}
		}
		run.Procs = append(run.Procs, pc)
	}
	return nil
}

// costIdle is how long steady measures dev at rest before it publishes.
const costIdle = 5 * time.Second

// waitConsumer waits until dev's ingest has made its durable consumer.
func waitConsumer(ctx context.Context, js jetstream.JetStream) error {
	for deadline := time.Now().Add(time.Minute); ; {
		if _, err := js.Consumer(ctx, schemas.StreamEvents, ingest.DefaultConfig().Durable); err == nil {
			return nil
		} else if time.Now().After(deadline) {
			return fmt.Errorf("dev's ingest made no consumer in a minute: %w", err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// signedSizes is the size of each organization's latest signed checkpoint
// of its audit log, as the checkpointer publishes them (no query of the
// store: its CPU would be the measurement's).
type signedSizes struct {
	mu    sync.Mutex
	sizes map[uuid.UUID]int64
}

func newSignedSizes() *signedSizes { return &signedSizes{sizes: map[uuid.UUID]int64{}} }

// note takes a checkpoint's signed note: its origin line names the log,
// the next its size (C2SP tlog-checkpoint).
func (s *signedSizes) note(m *nats.Msg) {
	lines := strings.SplitN(string(m.Data), "\n", 3)
	if len(lines) < 3 {
		return
	}
	_, org, kind, ok := atlog.ParseOrigin(lines[0])
	size, err := strconv.ParseInt(lines[1], 10, 64)
	if !ok || kind != atlog.KindAudit || err != nil {
		return
	}
	s.mu.Lock()
	s.sizes[org] = max(s.sizes[org], size)
	s.mu.Unlock()
}

// wait waits until every organization of counts has a signed checkpoint
// of at least its count.
func (s *signedSizes) wait(ctx context.Context, counts map[uuid.UUID]int64, within time.Duration, say func(string, ...any)) error {
	t0, last := time.Now(), time.Now()
	for {
		left := int64(0)
		s.mu.Lock()
		for org, c := range counts {
			left += max(0, c-s.sizes[org])
		}
		s.mu.Unlock()
		if left == 0 {
			return nil
		}
		if time.Since(t0) > within {
			return fmt.Errorf("%d entries not in a signed checkpoint after %s", left, within)
		}
		if time.Since(last) > 10*time.Second {
			last = time.Now()
			say("  %d entries left to sign", left)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// bareInsert has clickhouse-client insert the events' rows into a table
// of audit_logs' structure (its engine and key) without the views that
// dev's store feeds, and reads the CPU of the server and of the client.
func (b *costBench) bareInsert(ctx context.Context, srv *chserver.Server, srvPID int, db string, events []schemas.AuditEvent) (CostRun, error) {
	run := CostRun{Name: "clickhouse-client into a table without views", Events: len(events)}
	tsv := filepath.Join(b.dir, "rows.tsv")
	if err := writeTSV(tsv, events); err != nil {
		return run, err
	}
	defer os.Remove(tsv)
	for _, q := range []string{"CREATE DATABASE IF NOT EXISTS bench_bare", "CREATE TABLE bench_bare.plain AS " + db + ".audit_logs"} {
		if _, err := clientQuery(ctx, srv, q); err != nil {
			return run, err
		}
	}
	var client time.Duration
	start := time.Now()
	server, err := serverCPUOver(srvPID, func() (err error) {
		client, err = clientInsertInto(ctx, srv, tsv, "bench_bare", "plain")
		return err
	})
	if err != nil {
		return run, err
	}
	run.Elapsed = time.Since(start)
	run.Procs = []ProcCost{{Name: procServer, CPU: server, Counted: true}, {Name: procClient, CPU: client, Counted: true}}
	return run, verifyCountIn(srv, "bench_bare", "plain", len(events))
}

// drain publishes cfg.Drain events of cfg.Orgs organizations on a NATS
// server of this process, then has `auditrail ingest` and `auditrail
// tlog` drain them into one server until every log is signed: the CPU of
// each (this process's: the NATS server's, nothing being published).
func (b *costBench) drain(ctx context.Context, srv *chserver.Server, srvPID int) (CostRun, error) {
	run := CostRun{Name: "NATS, ingest and tlog as separate processes and the server, draining a backlog", Events: b.cfg.Drain}
	bn, err := startNATS(ctx, filepath.Join(b.dir, "nats"))
	if err != nil {
		return run, err
	}
	defer bn.close()
	const db = "bench_drain"
	store, err := clickhouse.Open(ctx, srv.DSN(db))
	if err != nil {
		return run, err
	}
	defer store.Close()
	counts, err := publishOrgs(ctx, bn.nc, b.cfg.Drain, b.cfg.Orgs)
	if err != nil {
		return run, err
	}
	icfg := ingest.DefaultConfig()
	icfg.Durable = "bench-cost-drain"
	lr, err := ingestWithLog(ctx, icfg, srvPID, bn, store, srv.DSN(db), counts, b.cfg.Drain, b.say)
	if err != nil {
		return run, err
	}
	run.Elapsed = lr.caughtUp
	srvRSS, err := peakRSS(srvPID)
	if err != nil {
		return run, err
	}
	run.Procs = []ProcCost{{Name: "NATS (this process)", CPU: lr.cpu.Self, Counted: true}, {Name: "ingest", CPU: lr.cpu.Ingest, Counted: true, RSS: lr.rss.Ingest},
		{Name: "tlog", CPU: lr.cpu.TLog, Counted: true, RSS: lr.rss.TLog}, {Name: procServer, CPU: lr.cpu.ClickHouse, Counted: true, RSS: srvRSS}}
	return run, nil
}

// queryKind is a query of the query log as the bench groups them: its
// first 100 characters, uuids made ? and spaces folded.
const queryKind = "substring(" + foldedQuery + ", 1, 100)"

// foldedQuery is the query of the query log with its uuids made ? and
// its spaces folded.
const foldedQuery = "replaceRegexpAll(replaceRegexpAll(query, '[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}', '?'), '[\\n ]+', ' ')"

// queryKindFrom is queryKind with, after its first 60 characters, 60 from
// its first FROM: queries that begin alike (the listing's and the feed's)
// stay apart.
const queryKindFrom = "concat(substring(" + foldedQuery + ", 1, 60), ' … ', substring(" + foldedQuery + ", position(" + foldedQuery + ", 'FROM'), 60))"

// slowQueries prints the n kinds of queries (queryKindFrom) run since
// that took the longest at their p99, with their count, p50 and max (ms):
// what a reader waits for under load.
func (b *costBench) slowQueries(ctx context.Context, srv *chserver.Server, since time.Time, n int) error {
	if _, err := clientQuery(ctx, srv, "SYSTEM FLUSH LOGS"); err != nil {
		return err
	}
	out, err := clientQuery(ctx, srv, fmt.Sprintf("SELECT count() AS c, quantile(0.5)(query_duration_ms) AS p50, quantile(0.99)(query_duration_ms) AS p99, max(query_duration_ms) AS mx, "+
		queryKindFrom+" AS q "+
		"FROM system.query_log WHERE type = 2 AND event_time >= toDateTime(%d) GROUP BY q ORDER BY p99 DESC LIMIT %d FORMAT TSV", since.Unix(), n))
	if err != nil {
		return err
	}
	b.sayLines("the slowest queries of that load, by their p99 (count, p50 ms, p99 ms, max ms, query):", out)
	return nil
}

// topQueries prints the n queries of the query log that cost the server
// the most CPU (its threads' user and system time, from the log's
// ProfileEvents), by kind (their first 100 characters, uuids made ?),
// with their count, CPU and rows; and the server's CPU they leave to its
// background work (merges), over the run.
func (b *costBench) topQueries(ctx context.Context, srv *chserver.Server, n int, serverCPU time.Duration) error {
	if _, err := clientQuery(ctx, srv, "SYSTEM FLUSH LOGS"); err != nil {
		return err
	}
	const cpu = "(ProfileEvents.Values[indexOf(ProfileEvents.Names, 'UserTimeMicroseconds')] + " +
		"ProfileEvents.Values[indexOf(ProfileEvents.Names, 'SystemTimeMicroseconds')])"
	out, err := clientQuery(ctx, srv, fmt.Sprintf("SELECT count() AS c, round(sum(%s) / 1000) AS cpu_ms, sum(read_rows) AS r, sum(written_rows) AS w, "+
		queryKind+" AS q "+
		"FROM system.query_log WHERE type = 2 GROUP BY q ORDER BY cpu_ms DESC LIMIT %d FORMAT TSV", cpu, n))
	if err != nil {
		return err
	}
	b.sayLines("the queries dev ran, by the server's CPU (count, CPU ms, rows read, rows written, query):", out)
	if out, err = clientQuery(ctx, srv, fmt.Sprintf("SELECT round(sum(%s) / 1000) FROM system.query_log WHERE type = 2", cpu)); err != nil {
		return err
	}
	ms, err := strconv.ParseFloat(out, 64)
	if err != nil {
		return fmt.Errorf("query log: %q: %w", out, err)
	}
	b.say("queries %.0f ms of CPU of the server's %d ms: %d ms in its background work (merges), the logging of the queries included",
		ms, serverCPU.Milliseconds(), serverCPU.Milliseconds()-int64(ms))
	// The merges by table, from the part log: their time is a merge
	// thread's, about its CPU (a merge reads and writes local files).
	out, err = clientQuery(ctx, srv, "SELECT table, countIf(event_type = 1) AS new_parts, sum(if(event_type = 1, rows, 0)) AS rows_written, countIf(event_type = 2) AS merges, "+
		"sum(if(event_type = 2, rows, 0)) AS rows_merged, sum(if(event_type = 2, duration_ms, 0)) AS merge_ms "+
		"FROM system.part_log WHERE database NOT IN ('system') GROUP BY table ORDER BY merge_ms DESC FORMAT TSV")
	if err != nil {
		return err
	}
	b.sayLines("the parts by table (table, parts written, rows written, merges, rows merged, ms merging):", out)
	return nil
}

// clientQuery runs q with clickhouse-client on srv and answers its output,
// trimmed.
func clientQuery(ctx context.Context, srv *chserver.Server, q string) (string, error) {
	out, err := exec.CommandContext(ctx, "clickhouse-client", "--port", strconv.Itoa(srv.TCPPort), "--query", q).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("%.80s: %v: %s", q, err, out)
	}
	return strings.TrimSpace(string(out)), nil
}

// sayLines says title, then each line of out indented.
func (b *costBench) sayLines(title, out string) {
	b.say("%s", title)
	for _, line := range strings.Split(out, "\n") {
		b.say("  %s", line)
	}
}
