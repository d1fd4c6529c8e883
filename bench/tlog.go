package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/auditrail/auditrail/evidence/sequencer"
	"github.com/auditrail/auditrail/ingest"
	"github.com/auditrail/auditrail/internal/auditstore"
	"github.com/auditrail/auditrail/internal/auditstore/clickhouse"
	"github.com/auditrail/auditrail/internal/chserver"
	"github.com/auditrail/auditrail/internal/natsx"
)

// TlogResult holds what the tamper-evidence log benchmark measured.
type TlogResult struct {
	Events      int
	Off, On     time.Duration // ingest of Events without and with the sequencer beside it
	LogCaughtUp time.Duration // from the start of the second ingest until every log held every entry
	// Delays: per append, the longest its entries waited from their
	// storing to their leaf's append (auditrail_tlog_sequencer_delay_seconds),
	// sorted: what `auditrail verify --pending-grace` must exceed.
	Delays []time.Duration
}

// delays is a sequencer.Observer that keeps the sequencing delays.
type delays struct {
	mu sync.Mutex
	d  []time.Duration
}

func (o *delays) SequencerAppended(string, int) {}
func (o *delays) SequencerLag(uint64)           {}
func (o *delays) SequencerDelay(_ string, d time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.d = append(o.d, d)
}

// Figures: ingest with the log on against off (goal ≥ 0.9×), and how soon
// after the ingest the logs hold everything.
func (r TlogResult) Figures() []Figure {
	return []Figure{
		{Name: "ingest with the tamper-evidence log on (events/s)", Value: rate(r.Events, r.On), Unit: "ev/s",
			Reference: rate(r.Events, r.Off), RefName: "the log off", Goal: 0.9},
		{Name: "the logs complete, from the ingest's start (events/s)", Value: rate(r.Events, r.LogCaughtUp), Unit: "ev/s",
			Reference: rate(r.Events, r.On), RefName: "ingest with the log on", Goal: 0.5},
	}
}

// Tlog measures `auditrail ingest` into ClickHouse alone, then again into
// another database while the sequencer (in this process: it is one
// goroutine of the tlog role) appends every entry to its organization's
// log, from the same published events.
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
	stores := map[string]*clickhouse.Store{}
	for _, db := range []string{"tlog_off", "tlog_on"} {
		s, err := clickhouse.Open(ctx, ch.DSN(db)) // the schemas, before the clock starts
		if err != nil {
			return r, err
		}
		defer s.Close()
		stores[db] = s
	}

	r.Events = n
	say("publishing %d events of %d organizations", n, orgs)
	counts, err := publishOrgs(ctx, bn.nc, n, orgs)
	if err != nil {
		return r, err
	}

	icfg := ingest.DefaultConfig()
	icfg.Durable = "bench-tlog-off"
	say("ingest with the log off: `auditrail ingest` in a child process")
	if r.Off, _, err = runIngestChild(ctx, icfg, bn.ns.ClientURL(), ch.DSN("tlog_off"), bn.js, n, say); err != nil {
		return r, err
	}

	icfg.Durable = "bench-tlog-on"
	on := stores["tlog_on"]
	kv, err := bn.js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: natsx.TLogBucket})
	if err != nil {
		return r, err
	}
	scfg := sequencer.DefaultConfig()
	scfg.Instance, scfg.AuditDurable, scfg.ExecutionDurable = "bench", icfg.Durable, ingest.ExecutionDurableFor(icfg.Durable)
	runner, err := sequencer.NewRunner(scfg, sequencer.New(on), bn.js, kv, natsx.NewWatermarks(bn.js, 0), slog.New(slog.DiscardHandler))
	if err != nil {
		return r, err
	}
	obs := &delays{}
	runner.WithObserver(obs)
	sctx, stopSeq := context.WithCancel(ctx)
	seqDone := make(chan error, 1)
	go func() { seqDone <- runner.Run(sctx) }()
	defer func() {
		stopSeq()
		<-seqDone
	}()
	say("ingest with the log on: the same, while the sequencer appends every entry to its organization's log")
	start := time.Now()
	if r.On, _, err = runIngestChild(ctx, icfg, bn.ns.ClientURL(), ch.DSN("tlog_on"), bn.js, n, say); err != nil {
		return r, err
	}
	for {
		done := true
		for org, c := range counts {
			size, _, err := on.LogHead(ctx, org, auditstore.LogAudit)
			if err != nil {
				return r, err
			}
			if size > c {
				return r, fmt.Errorf("the log of %s holds %d leaves for %d entries", org, size, c)
			}
			done = done && size == c
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
		case <-time.After(50 * time.Millisecond):
		}
	}
	r.LogCaughtUp = time.Since(start)
	obs.mu.Lock()
	r.Delays = slices.Clone(obs.d)
	obs.mu.Unlock()
	slices.Sort(r.Delays)
	say("ingest: %.0f events/s with the log off, %.0f with it on; every log complete after %s",
		rate(n, r.Off), rate(n, r.On), r.LogCaughtUp.Round(time.Millisecond))
	if len(r.Delays) > 0 {
		at := func(q float64) time.Duration {
			return r.Delays[int(q*float64(len(r.Delays)-1))].Round(time.Millisecond)
		}
		say("sequencing delay (created_time, the event stream's storing → leaf appended) over %d appends: p50 %s, p99 %s, max %s; the events were published before both ingests, so it includes ingest's backlog (auditrail verify --pending-grace must exceed the max; default 5m)",
			len(r.Delays), at(0.5), at(0.99), at(1))
	}
	return r, nil
}
