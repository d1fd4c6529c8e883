package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
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
	// cluster), spread over Orgs organizations.
	Events, Orgs int
	// Rate (events/s) is published for Duration into dev on the cluster
	// while a poller follows the feed and another reads the newest page.
	Rate     int
	Duration time.Duration
}

// DefaultClusterConfig is what `auditrail bench` runs.
func DefaultClusterConfig(exe string) ClusterConfig {
	return ClusterConfig{Exe: exe, Events: 200_000, Orgs: 50, Rate: 20_000, Duration: 20 * time.Second}
}

// ClusterResult holds what the cluster benchmark measured.
type ClusterResult struct {
	Events            int
	Single, Clustered time.Duration // ingest of Events
	Published         int
	Visible, Page     Latency // publish → in the feed; the newest page
	PublishRate       float64 // events/s actually published
}

// Figures: ingest into the 2×2 cluster against one server (goal ≥ 0.5×
// on this one machine); publish → queryable p99 ≤ 2 s under the load, with
// the newest page p99 ≤ 50 ms at the same time.
func (r ClusterResult) Figures() []Figure {
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	return []Figure{
		{Name: "ingest into 2 shards x 2 replicas (events/s)", Value: rate(r.Events, r.Clustered), Unit: "ev/s",
			Reference: rate(r.Events, r.Single), RefName: "ingest into one server", Goal: 0.5},
		{Name: fmt.Sprintf("publish -> queryable p99 at %.0f ev/s (ms)", r.PublishRate), Value: ms(r.Visible.P99), Unit: "ms",
			Reference: ms(r.Visible.P50), RefName: "its p50", Goal: 1e9, Lower: true, Max: 2000},
		{Name: "newest page p99 under that load (ms)", Value: ms(r.Page.P99), Unit: "ms",
			Reference: ms(r.Page.P50), RefName: "its p50", Goal: 1e9, Lower: true, Max: 50},
	}
}

// Cluster measures ingest into a ClickHouse cluster of 2 shards × 2
// replicas (ZooKeeper, four throwaway servers) against one server, the
// same events from the same stream, then publish → queryable on the
// cluster under a steady load.
func Cluster(ctx context.Context, cfg ClusterConfig, progress io.Writer) (r ClusterResult, err error) {
	if cfg.Exe == "" || cfg.Events < 1000 || cfg.Orgs < 1 || cfg.Rate < 1 || cfg.Duration <= 0 {
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
	for _, st := range []struct {
		dsn string
		o   clickhouse.Options
	}{{single.DSN("bench"), clickhouse.Options{}}, {cl.DSN("bench"), clickhouse.Options{Cluster: name}}} {
		s, err := clickhouse.OpenWith(ctx, st.dsn, st.o) // the schemas, before the clock starts
		if err != nil {
			return r, err
		}
		s.Close()
	}

	n := cfg.Events
	r.Events = n
	say("publishing %d events of %d organizations", n, cfg.Orgs)
	gens := make([]*synth.Generator, cfg.Orgs)
	for i := range gens {
		gens[i] = synth.New(uuid.New(), 3, uint64(i+1))
	}
	now := time.Now()
	step := 7 * 24 * time.Hour / time.Duration(n)
	msgs := make([]*nats.Msg, n)
	for i := range msgs {
		e := gens[i%cfg.Orgs].Event(now.Add(-time.Duration(i) * step))
		if msgs[i], err = producers.Message(&e); err != nil {
			return r, err
		}
	}
	pub, err := producers.New(bn.nc, producers.DefaultConfig(), slog.New(slog.DiscardHandler))
	if err != nil {
		return r, err
	}
	if err := publishHalves(ctx, pub, msgs); err != nil {
		return r, err
	}
	msgs = nil
	runtime.GC()

	icfg := ingest.DefaultConfig()
	icfg.Durable = "bench-single"
	say("ingest into one server: `auditrail ingest` in a child process")
	if r.Single, _, err = runIngestChild(ctx, icfg, bn.ns.ClientURL(), single.DSN("bench"), bn.js, n, say); err != nil {
		return r, err
	}
	icfg.Durable = "bench-cluster"
	say("ingest into the cluster: `auditrail ingest --clickhouse-cluster %s`", name)
	if r.Clustered, _, err = runIngestChild(ctx, icfg, bn.ns.ClientURL(), cl.DSN("bench"), bn.js, n, say, "--clickhouse-cluster", name); err != nil {
		return r, err
	}
	if err := verifyCount(single, "bench", n); err != nil {
		return r, fmt.Errorf("one server: %w", err)
	}
	if err := verifyCount(cl.Servers()[0], "bench", n); err != nil { // its Distributed table: every shard
		return r, fmt.Errorf("the cluster: %w", err)
	}
	say("ingest: one server %.0f events/s, the cluster %.0f events/s", rate(n, r.Single), rate(n, r.Clustered))

	say("publishing %d events/s for %s into dev on the cluster; a poller follows the feed, another reads the newest page", cfg.Rate, cfg.Duration)
	lr, err := latencyUnderLoad(ctx, cfg.Exe, filepath.Join(dir, "dev"), cl.DSN("bench_load"), []string{"--clickhouse-cluster", name}, cfg.Rate, cfg.Duration, true, say)
	if err != nil {
		return r, err
	}
	r.Published, r.Visible, r.Page, r.PublishRate = lr.published, lr.visible, lr.page, lr.rate
	return r, nil
}
