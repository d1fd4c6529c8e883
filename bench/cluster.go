package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"

	"github.com/auditrail/auditrail/ingest"
	"github.com/auditrail/auditrail/internal/auditstore/clickhouse"
	"github.com/auditrail/auditrail/internal/chserver"
	"github.com/auditrail/auditrail/internal/synth"
	"github.com/auditrail/auditrail/producers"
)

// ClusterConfig says what the cluster benchmark runs.
type ClusterConfig struct {
	Exe string
	// Events are ingested into each store (the single server and the
	// cluster), spread over Orgs organizations, once with ingest's default
	// batches and once with batches of LargeBatch events.
	Events, Orgs, LargeBatch int
	// Rate (events/s) is published for Duration into dev on the single
	// server, then into dev on the cluster, while a poller follows the feed
	// and another reads the newest page.
	Rate     int
	Duration time.Duration
}

// DefaultClusterConfig is what `auditrail bench` runs.
func DefaultClusterConfig(exe string) ClusterConfig {
	return ClusterConfig{Exe: exe, Events: 200_000, Orgs: 50, LargeBatch: 50_000, Rate: 20_000, Duration: 20 * time.Second}
}

// ingestPair is one ingest of the same events into one server and into
// the cluster, with one batch size.
type ingestPair struct {
	Batch             int
	Single, Clustered time.Duration
	SingleRSS, RSS    int64 // peak RSS of the ingest process
}

// ClusterResult holds what the cluster benchmark measured.
type ClusterResult struct {
	Events int
	Ingest []ingestPair // default batches, then large ones
	Rate   int          // events/s asked of the publisher
	Load   []loadRun    // one server, then the cluster
}

type loadRun struct {
	Name          string
	Published     int
	Visible, Page Latency // publish → in the feed; the newest page
	PublishRate   float64 // events/s actually published
}

// Figures: ingest into the 2×2 cluster against one server with ingest's
// default flags (goal ≥ 0.8×, peak RSS ≤ 256 MiB), and with large batches
// (no goal); publish → queryable p99 ≤ 2
// s under the load, with the newest page p99 ≤ 50 ms at the same time, on
// one server and on the cluster.
func (r ClusterResult) Figures() []Figure {
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	var out []Figure
	for i, p := range r.Ingest {
		// With ingest's default flags: ≥ 0.8 of one server, within the
		// memory budget of ingest. Larger batches are a figure beside it.
		name, goal := fmt.Sprintf("ingest into 2 shards x 2 replicas, batches of %d (events/s)", p.Batch), NoRatioGoal
		if i == 0 {
			name, goal = "ingest into 2 shards x 2 replicas, default flags (events/s)", 0.8
		}
		out = append(out, Figure{Name: name, Value: rate(r.Events, p.Clustered), Unit: "ev/s",
			Reference: rate(r.Events, p.Single), RefName: "ingest into one server", Goal: goal})
		if i == 0 {
			out = append(out, Figure{Name: "ingest into 2 shards x 2 replicas, default flags: peak RSS (MiB)", Value: float64(p.RSS) / (1 << 20), Unit: "MiB",
				Reference: float64(p.SingleRSS) / (1 << 20), RefName: "into one server", Goal: NoRatioGoal, Lower: true, Max: 256})
		}
	}
	for _, l := range r.Load {
		out = append(out,
			Figure{Name: fmt.Sprintf("%s: publish -> queryable p99 at %.0f of %d ev/s asked (ms)", l.Name, l.PublishRate, r.Rate), Value: ms(l.Visible.P99), Unit: "ms",
				Reference: ms(l.Visible.P50), RefName: "its p50", Goal: NoRatioGoal, Lower: true, Max: 2000},
			Figure{Name: fmt.Sprintf("%s: newest page p99 under that load (ms)", l.Name), Value: ms(l.Page.P99), Unit: "ms",
				Reference: ms(l.Page.P50), RefName: "its p50", Goal: NoRatioGoal, Lower: true, Max: 50},
		)
		if l.PublishRate < 0.95*float64(r.Rate) {
			// The publisher could not keep the rate: the machine is saturated.
			out = append(out, Figure{Name: l.Name + ": events/s published (asked " + fmt.Sprint(r.Rate) + ")", Value: l.PublishRate, Unit: "ev/s",
				Reference: float64(r.Rate), RefName: "asked", Goal: 0.95})
		}
	}
	return out
}

// Cluster measures ingest into a ClickHouse cluster of 2 shards × 2
// replicas (ZooKeeper, four throwaway servers) against one server, the
// same events from the same stream, then publish → queryable on the
// cluster under a steady load.
func Cluster(ctx context.Context, cfg ClusterConfig, progress io.Writer) (r ClusterResult, err error) {
	if cfg.Exe == "" || cfg.Events < 1000 || cfg.Orgs < 1 || cfg.Rate < 1 || cfg.Duration <= 0 || cfg.LargeBatch < 1 {
		return r, fmt.Errorf("cluster benchmark: want a binary, at least 1000 events, an organization, a rate and a duration, got %+v", cfg)
	}
	say := func(format string, args ...any) { fmt.Fprintf(progress, "  "+format+"\n", args...) }
	dir, err := os.MkdirTemp("", "auditrail-bench-cluster-")
	if err != nil {
		return r, err
	}
	defer os.RemoveAll(dir)
	say("starting one ClickHouse server, and ZooKeeper with 2 shards x 2 replicas")
	single, err := chserver.Start(filepath.Join(dir, "single"))
	if err != nil {
		return r, err
	}
	defer single.Stop()
	const name = "bench"
	cl, err := chserver.StartCluster(filepath.Join(dir, "cluster"), name, 2, 2)
	if err != nil {
		return r, err
	}
	defer cl.Stop()
	bn, err := startNATS(ctx, filepath.Join(dir, "nats"))
	if err != nil {
		return r, err
	}
	defer bn.close()
	for _, batch := range []int{ingest.DefaultConfig().BatchSize, cfg.LargeBatch} { // the schemas, before the clock starts
		db := fmt.Sprintf("bench%d", batch)
		for _, st := range []struct {
			dsn string
			o   clickhouse.Options
		}{{single.DSN(db), clickhouse.Options{}}, {cl.DSN(db), clickhouse.Options{Cluster: name}}} {
			s, err := clickhouse.OpenWith(ctx, st.dsn, st.o)
			if err != nil {
				return r, err
			}
			s.Close()
		}
	}

	n := cfg.Events
	r.Events = n
	say("publishing %d events of %d organizations", n, cfg.Orgs)
	if _, err := publishOrgs(ctx, bn.nc, n, cfg.Orgs); err != nil {
		return r, err
	}

	for _, batch := range []int{ingest.DefaultConfig().BatchSize, cfg.LargeBatch} {
		icfg := ingest.DefaultConfig()
		if batch != icfg.BatchSize {
			// The bytes bound scales with the count (and the memory with it).
			icfg.BatchBytes = icfg.BatchBytes / icfg.BatchSize * batch
			icfg.BatchSize, icfg.FetchSize = batch, batch
		}
		p := ingestPair{Batch: batch}
		icfg.Durable = fmt.Sprintf("bench-single-%d", batch)
		say("ingest into one server, batches of %d: `auditrail ingest` in a child process", batch)
		if p.Single, p.SingleRSS, err = runIngestChild(ctx, icfg, bn.ns.ClientURL(), single.DSN(fmt.Sprintf("bench%d", batch)), bn.js, n, say); err != nil {
			return r, err
		}
		icfg.Durable = fmt.Sprintf("bench-cluster-%d", batch)
		say("ingest into the cluster, batches of %d: `auditrail ingest --clickhouse-cluster %s`", batch, name)
		if p.Clustered, p.RSS, err = runIngestChild(ctx, icfg, bn.ns.ClientURL(), cl.DSN(fmt.Sprintf("bench%d", batch)), bn.js, n, say, "--clickhouse-cluster", name); err != nil {
			return r, err
		}
		if err := verifyCount(single, fmt.Sprintf("bench%d", batch), n); err != nil {
			return r, fmt.Errorf("one server: %w", err)
		}
		if err := verifyCount(cl.Servers()[0], fmt.Sprintf("bench%d", batch), n); err != nil { // its Distributed table: every shard
			return r, fmt.Errorf("the cluster: %w", err)
		}
		say("ingest, batches of %d: one server %.0f events/s (peak RSS %d MiB), the cluster %.0f events/s (%d MiB)", batch,
			rate(n, p.Single), p.SingleRSS>>20, rate(n, p.Clustered), p.RSS>>20)
		r.Ingest = append(r.Ingest, p)
	}

	r.Rate = cfg.Rate
	for _, l := range []struct {
		name, dsn string
		args      []string
	}{{"one server", single.DSN("bench_load"), nil}, {"2 shards x 2 replicas", cl.DSN("bench_load"), []string{"--clickhouse-cluster", name}}} {
		say("publishing %d events/s for %s into dev on %s; a poller follows the feed, another reads the newest page", cfg.Rate, cfg.Duration, l.name)
		lr, err := latencyUnderLoad(ctx, cfg.Exe, filepath.Join(dir, "dev-"+strings.ReplaceAll(l.name, " ", "-")), l.dsn, l.args, cfg.Rate, cfg.Duration, true, say)
		if err != nil {
			return r, fmt.Errorf("%s: %w", l.name, err)
		}
		r.Load = append(r.Load, loadRun{Name: l.name, Published: lr.published, Visible: lr.visible, Page: lr.page, PublishRate: lr.rate})
	}
	return r, nil
}

// publishOrgs publishes n synthetic audit events of orgs new organizations
// (round robin, a week of timestamps) on nc and returns how many each got.
func publishOrgs(ctx context.Context, nc *nats.Conn, n, orgs int) (map[uuid.UUID]int64, error) {
	gens := make([]*synth.Generator, orgs)
	for i := range gens {
		gens[i] = synth.New(uuid.New(), 3, uint64(i+1))
	}
	counts := make(map[uuid.UUID]int64, orgs)
	now := time.Now()
	step := 7 * 24 * time.Hour / time.Duration(n)
	msgs := make([]*nats.Msg, n)
	for i := range msgs {
		e := gens[i%orgs].Event(now.Add(-time.Duration(i) * step))
		counts[e.OrganizationID]++
		var err error
		if msgs[i], err = producers.Message(&e); err != nil {
			return nil, err
		}
	}
	pub, err := producers.New(nc, producers.DefaultConfig(), slog.New(slog.DiscardHandler))
	if err != nil {
		return nil, err
	}
	if err := publishHalves(ctx, pub, msgs); err != nil {
		return nil, err
	}
	msgs = nil
	runtime.GC()
	return counts, nil
}
