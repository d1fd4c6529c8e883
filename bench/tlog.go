package bench

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"time"

	chgo "github.com/ClickHouse/clickhouse-go/v2"
	"github.com/google/uuid"

	"github.com/auditrail/auditrail/ingest"
	"github.com/auditrail/auditrail/internal/auditstore"
	"github.com/auditrail/auditrail/internal/auditstore/clickhouse"
	"github.com/auditrail/auditrail/internal/chserver"
	"github.com/auditrail/auditrail/internal/natsx"
)

// TlogResult holds what the tamper-evidence log benchmark measured.
type TlogResult struct {
	Events      int
	Off, On     time.Duration // ingest of Events without and with the tlog role beside it
	LogCaughtUp time.Duration // from the start of the second ingest until every log held every entry
	// CPU time of each process, the log off then on (until every log was
	// complete and signed): the ingest child, the ClickHouse server, this
	// process (the NATS server) and, with the log on, the tlog role's
	// child (the sequencer and the checkpointer).
	CPUOff, CPUOn ProcCPU
}

// ProcCPU is the CPU time of the processes of a run.
type ProcCPU struct {
	Ingest, ClickHouse, Self, TLog time.Duration
}

// Total is their sum.
func (c ProcCPU) Total() time.Duration { return c.Ingest + c.ClickHouse + c.Self + c.TLog }

// perEvent is d per event, in µs.
func perEvent(d time.Duration, n int) float64 { return float64(d.Microseconds()) / float64(n) }

// Figures: ingest with the log on against off (goal ≥ 0.9×), how soon
// after the ingest the logs hold everything, and the CPU the log adds per
// event across every process (goal ≤ 15 µs).
func (r TlogResult) Figures() []Figure {
	added := perEvent(r.CPUOn.Total()-r.CPUOff.Total(), r.Events)
	return []Figure{
		{Name: "CPU the log adds per event (µs; goal ≤ 15)", Value: added, Unit: "µs", Reference: 15, RefName: "the goal", Goal: 1, Lower: true},
		{Name: "ingest with the tamper-evidence log on (events/s)", Value: rate(r.Events, r.On), Unit: "ev/s",
			Reference: rate(r.Events, r.Off), RefName: "the log off", Goal: 0.9},
		{Name: "the logs complete, from the ingest's start (events/s)", Value: rate(r.Events, r.LogCaughtUp), Unit: "ev/s",
			Reference: rate(r.Events, r.On), RefName: "ingest with the log on", Goal: 0.5},
	}
}

// TlogRounds is how many times Tlog measures ingest with the log off, then
// on: the figures are the median round's (by the CPU the log adds). On
// the shared machine one pair of runs varies by a third.
const TlogRounds = 3

// Tlog measures `auditrail ingest` into ClickHouse alone, then again into
// another database while `auditrail tlog` (a child process, as deployed:
// the sequencer and the checkpointer) appends every entry to its
// organization's log and signs, from the same published events;
// TlogRounds times, alternating.
func Tlog(ctx context.Context, n, orgs int, progress io.Writer) (r TlogResult, err error) {
	if n < 1000 || orgs < 1 {
		return r, fmt.Errorf("tlog benchmark: want at least 1000 events and an organization, got %d, %d", n, orgs)
	}
	say := func(format string, args ...any) { fmt.Fprintf(progress, "  "+format+"\n", args...) }
	dir, err := os.MkdirTemp("", "auditrail-bench-tlog-")
	if err != nil {
		return r, err
	}
	defer os.RemoveAll(dir)
	ch, err := chserver.Start(filepath.Join(dir, "clickhouse"))
	if err != nil {
		return r, err
	}
	defer ch.Stop()
	bn, err := startNATS(ctx, filepath.Join(dir, "nats"))
	if err != nil {
		return r, err
	}
	defer bn.close()
	say("publishing %d events of %d organizations", n, orgs)
	counts, err := publishOrgs(ctx, bn.nc, n, orgs)
	if err != nil {
		return r, err
	}
	chPID, err := findPID("--config-file=" + filepath.Join(ch.Dir, "config.xml"))
	if err != nil {
		return r, err
	}
	var rounds []TlogResult
	for i := range TlogRounds {
		say("round %d of %d", i+1, TlogRounds)
		ri, err := tlogRound(ctx, i, ch, chPID, bn, counts, n, say)
		if err != nil {
			return r, err
		}
		say("round %d: the log adds %.1f µs of CPU per event; ingest %.0f events/s with it off, %.0f on",
			i+1, perEvent(ri.CPUOn.Total()-ri.CPUOff.Total(), n), rate(n, ri.Off), rate(n, ri.On))
		rounds = append(rounds, ri)
	}
	slices.SortFunc(rounds, func(a, b TlogResult) int {
		return cmp.Compare(a.CPUOn.Total()-a.CPUOff.Total(), b.CPUOn.Total()-b.CPUOff.Total())
	})
	r = rounds[len(rounds)/2]
	say("the median round:")
	say("ingest: %.0f events/s with the log off, %.0f with it on; every log complete and signed after %s",
		rate(n, r.Off), rate(n, r.On), r.LogCaughtUp.Round(time.Millisecond))
	for _, p := range []struct {
		name    string
		off, on time.Duration
	}{{"ingest", r.CPUOff.Ingest, r.CPUOn.Ingest}, {"ClickHouse server", r.CPUOff.ClickHouse, r.CPUOn.ClickHouse},
		{"NATS", r.CPUOff.Self, r.CPUOn.Self}, {"tlog (the sequencer and the checkpointer)", r.CPUOff.TLog, r.CPUOn.TLog},
		{"all", r.CPUOff.Total(), r.CPUOn.Total()}} {
		say("CPU per event, %s: %.1f µs with the log off, %.1f µs on (+%.1f)", p.name, perEvent(p.off, n), perEvent(p.on, n), perEvent(p.on-p.off, n))
	}
	return r, nil
}

// tlogRound is one round of Tlog: ingest with the log off into database
// tlog_off_<i>, then on into tlog_on_<i> beside a sequencer and a
// checkpointer of their own (durable, bucket); both databases are dropped
// after it, so that their merges do not run into the next round.
func tlogRound(ctx context.Context, i int, ch *chserver.Server, chPID int, bn *benchNATS, counts map[uuid.UUID]int64, n int,
	say func(string, ...any)) (r TlogResult, err error) {
	r.Events = n
	offDB, onDB := fmt.Sprintf("tlog_off_%d", i), fmt.Sprintf("tlog_on_%d", i)
	stores := map[string]*clickhouse.Store{}
	for _, db := range []string{offDB, onDB} {
		s, err := clickhouse.Open(ctx, ch.DSN(db)) // the schemas, before the clock starts
		if err != nil {
			return r, err
		}
		defer s.Close()
		stores[db] = s
	}
	defer dropDatabases(ch, offDB, onDB)
	icfg := ingest.DefaultConfig()
	icfg.Durable = fmt.Sprintf("bench-tlog-off-%d", i)
	say("ingest with the log off: `auditrail ingest --tlog-leaves=false` in a child process (no leaves computed or stored)")
	ch0, self0, err := serverAndSelfCPU(chPID)
	if err != nil {
		return r, err
	}
	off, err := runIngestChildCPU(ctx, icfg, bn.ns.ClientURL(), ch.DSN(offDB), bn.js, n, say, "--tlog-leaves=false")
	if err != nil {
		return r, err
	}
	ch1, self1, err := serverAndSelfCPU(chPID)
	if err != nil {
		return r, err
	}
	r.Off, r.CPUOff = off.elapsed, ProcCPU{Ingest: off.cpu, ClickHouse: ch1 - ch0, Self: self1 - self0}

	icfg.Durable = fmt.Sprintf("bench-tlog-on-%d", i)
	say("ingest with the log on: the same, while `auditrail tlog` in a child process appends every entry to its organization's log and signs")
	lr, err := ingestWithLog(ctx, icfg, chPID, bn, stores[onDB], ch.DSN(onDB), counts, n, say)
	if err != nil {
		return r, err
	}
	r.On, r.LogCaughtUp, r.CPUOn = lr.ingest, lr.caughtUp, lr.cpu
	return r, nil
}

// loggedRun is what ingestWithLog measured.
type loggedRun struct {
	ingest   time.Duration                // ingest's drain
	caughtUp time.Duration                // from its start until every log was complete and signed
	cpu      ProcCPU                      // of every process, until then
	rss      struct{ Ingest, TLog int64 } // the children's peak RSS, bytes
}

// ingestWithLog drains the stream with `auditrail ingest` (icfg's durable)
// into the database dsn (on, a store of it opened before) while `auditrail
// tlog` (child processes both) appends every entry to its organization's
// log and signs, until every log holds counts' entries in a signed
// checkpoint; the CPU of every process (chPID: the ClickHouse server;
// this process: the NATS server) over that time. The tlog bucket is
// deleted after it, so that a later run's role starts afresh.
func ingestWithLog(ctx context.Context, icfg ingest.Config, chPID int, bn *benchNATS, on *clickhouse.Store, dsn string,
	counts map[uuid.UUID]int64, n int, say func(string, ...any)) (r loggedRun, err error) {
	ch0, self0, err := serverAndSelfCPU(chPID)
	if err != nil {
		return r, err
	}
	tl, err := startTLogChild(ctx, bn.ns.ClientURL(), dsn, icfg.Durable)
	if err != nil {
		return r, err
	}
	defer func() {
		if err := tl.stop(); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
		// The role's bucket (its lease, keys, seal and the checkpoints it
		// published) belongs to this run's database.
		if err := bn.js.DeleteKeyValue(context.WithoutCancel(ctx), natsx.TLogBucket); err != nil {
			fmt.Fprintf(os.Stderr, "delete the tlog bucket: %v\n", err)
		}
	}()
	start := time.Now()
	onRun, err := runIngestChildCPU(ctx, icfg, bn.ns.ClientURL(), dsn, bn.js, n, say)
	if err != nil {
		return r, err
	}
	r.ingest = onRun.elapsed
	// Until every log is complete and signed: one query of the heads a
	// poll, and the checkpoints only of the logs complete (this polling is
	// CPU of the ClickHouse server too: a query per log every few
	// milliseconds would be a cost of the measurement, not of the log).
	signed := map[uuid.UUID]bool{}
	for {
		heads, err := on.LogHeads(ctx, auditstore.LogAudit)
		if err != nil {
			return r, err
		}
		done := true
		for org, c := range counts {
			if size := heads[org]; size > c {
				return r, fmt.Errorf("the log of %s holds %d leaves for %d entries", org, size, c)
			} else if size < c {
				done = false
				continue
			}
			if !signed[org] {
				cp, ok, err := on.LatestCheckpoint(ctx, org, auditstore.LogAudit)
				if err != nil {
					return r, err
				}
				signed[org] = ok && cp.Size == c
				done = done && signed[org]
			}
		}
		if done {
			break
		}
		if time.Since(start) > 10*time.Minute {
			return r, fmt.Errorf("the logs did not catch up in 10 minutes")
		}
		select {
		case <-ctx.Done():
			return r, ctx.Err()
		case err := <-tl.exited:
			tl.exited <- err
			return r, tl.exitedEarly()
		case <-time.After(200 * time.Millisecond):
		}
	}
	r.caughtUp = time.Since(start)
	ch1, self1, err := serverAndSelfCPU(chPID)
	if err != nil {
		return r, err
	}
	tcpu, err := procCPU(tl.cmd.Process.Pid)
	if err != nil {
		return r, err
	}
	if r.rss.TLog, err = peakRSS(tl.cmd.Process.Pid); err != nil {
		return r, err
	}
	r.rss.Ingest = onRun.rss
	r.cpu = ProcCPU{Ingest: onRun.cpu, ClickHouse: ch1 - ch0, Self: self1 - self0, TLog: tcpu}
	return r, nil
}

// serverAndSelfCPU reads the CPU time of the ClickHouse server (chPID)
// and of this process (the NATS server).
func serverAndSelfCPU(chPID int) (chCPU, self time.Duration, err error) {
	if chCPU, err = procCPU(chPID); err != nil {
		return 0, 0, err
	}
	self, err = procCPU(os.Getpid())
	return chCPU, self, err
}

// startTLogChild starts `auditrail tlog` on the NATS server and the
// ClickHouse database, following ingest's durable, signing every second
// (dev's interval; the role's default is a minute: fewer checkpoints).
func startTLogChild(ctx context.Context, natsURL, dsn, ingestDurable string) (*roleChild, error) {
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, err
	}
	return startRole(ctx, "tlog", "--nats-url", natsURL, "--clickhouse", dsn, "--http", "127.0.0.1:0",
		"--ingest-durable", ingestDurable, "--secrets-keys", base64.StdEncoding.EncodeToString(key),
		"--checkpoint-interval", "1s", "--log-level", "warn")
}

// dropDatabases drops the databases of a round (a clean-up: an error is
// only a server that goes on merging them).
func dropDatabases(srv *chserver.Server, dbs ...string) {
	opts, err := chgo.ParseDSN(srv.DSN("default"))
	if err != nil {
		return
	}
	conn, err := chgo.Open(opts)
	if err != nil {
		return
	}
	defer conn.Close()
	for _, db := range dbs {
		_ = conn.Exec(context.Background(), "DROP DATABASE IF EXISTS "+db)
	}
}
