// Command auditrail-bench runs the benchmarks of auditrail, each printing
// its figure beside a reference measured in the same run. It is a harness,
// not part of the product: the roles it measures run from the auditrail
// binary beside it (make bench builds both).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/auditrail/auditrail/bench"
	"github.com/auditrail/auditrail/ingest"
	"github.com/auditrail/auditrail/internal/cli"
	"github.com/auditrail/auditrail/internal/version"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := run(ctx, os.Args[1:])
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "auditrail-bench: %v\n", err)
		var ue cli.UsageError
		if errors.As(err, &ue) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	fs := cli.NewFlags("auditrail-bench")
	exeFlag := fs.String("auditrail", "AUDITRAIL_BENCH_AUDITRAIL", "", "the auditrail binary whose roles are measured (default: the one beside auditrail-bench)")
	which := fs.String("run", "", "decode,hooks,connections,mcp,ingest,query,executions,dashboard,feed,sqlite,docmd,docsedit,odata,mail,deliver,cluster,verify,tlog,proof,retention,cost", "benchmarks to run, comma-separated: docmd, docsedit, odata, mail, decode, hooks, connections, mcp, ingest, query, executions, dashboard, feed, sqlite, deliver, cluster, verify, tlog, proof, retention, cost")
	queryEvents := fs.Int("query-events", "AUDITRAIL_BENCH_QUERY_EVENTS", 10_000_000, "events (and executions) of the one tenant of the query, executions and dashboard benchmarks")
	dashSamples := fs.Int("dashboard-samples", "", 200, "timed samples of each route of the dashboard benchmark")
	dashRenders := fs.Int("dashboard-renders", "", 30, "timed page loads of the dashboard benchmark")
	feedEntries := fs.Int("feed-entries", "", 1_000_000, "entries of the tenant whose feed and list the feed benchmark walks")
	feedFor := fs.Duration("feed-duration", "", 20*time.Second, "how long the feed benchmark publishes 5000 events/s to measure the time to visible")
	dc := bench.DefaultClusterConfig("")
	clusterEvents := fs.Int("cluster-events", "", dc.Events, "events of the cluster benchmark's ingest into one server and into 2 shards x 2 replicas")
	clusterBatch := fs.Int("cluster-batch", "", dc.LargeBatch, "the cluster benchmark's large ingest batch (events), measured beside ingest's default")
	clusterRate := fs.Int("cluster-rate", "", dc.Rate, "events/s the cluster benchmark publishes into dev on one server, then on the cluster")
	clusterFor := fs.Duration("cluster-duration", "", dc.Duration, "how long the cluster benchmark publishes")
	sqliteEvents := fs.Int("sqlite-events", "AUDITRAIL_BENCH_SQLITE_EVENTS", 1_000_000, "events of the one tenant of the sqlite benchmark")
	events := fs.Int("events", "AUDITRAIL_BENCH_EVENTS", 1_000_000, "events of the ingest benchmark")
	verifyEntries := fs.Int("verify-entries", "", 1_000_000, "exported entries the verify benchmark writes and verifies offline")
	tlogEvents := fs.Int("tlog-events", "", 300_000, "events (of 10 organizations) the tlog benchmark ingests with the tamper-evidence log off, then on")
	proofLeaves := fs.Int("proof-leaves", "", 10_000_000, "leaves of the one log the proof benchmark writes into ClickHouse and proves random events of")
	proofSamples := fs.Int("proof-samples", "", 1000, "timed inclusion proofs of the proof benchmark")
	dr := bench.DefaultRetentionConfig("")
	retentionEntries := fs.Int("retention-entries", "AUDITRAIL_BENCH_RETENTION_ENTRIES", dr.Entries, "entries of the organization whose trail the retention benchmark expires while ingest runs")
	retentionStore := fs.String("retention-store", "", dr.Store, "the retention benchmark's store: clickhouse (a throwaway server) or sqlite (dev's own)")
	retentionRate := fs.Int("retention-rate", "", 0, "events/s the retention benchmark publishes into another organization during both runs (0: half the ingest capacity it measures)")
	retentionFor := fs.Duration("retention-duration", "", dr.Duration, "how long the retention benchmark's reference run publishes (the run with retention: as long, and until the expiry is done)")
	dcost := bench.DefaultCostConfig("")
	costRate := fs.Int("cost-rate", "", dcost.Rate, "events/s the cost benchmark publishes into dev on each store")
	costFor := fs.Duration("cost-duration", "", dcost.Duration, "how long the cost benchmark publishes into dev on each store")
	costOrgs := fs.Int("cost-orgs", "", dcost.Orgs, "organizations the cost benchmark's events are spread over")
	costDrain := fs.Int("cost-drain", "", dcost.Drain, "events the cost benchmark publishes first, then drains with ingest and tlog as separate processes (0: none)")
	costQueryLog := fs.Bool("cost-query-log", "", false, "the cost benchmark logs dev's queries on one server and prints the most frequent (the log costs the server CPU)")
	costProfiles := fs.String("cost-profiles", "", "", "a directory where the cost benchmark writes a CPU profile of each dev it runs")
	costLoad := fs.Duration("cost-load", "", dcost.LoadFor, "how long the cost benchmark holds dev at half, then 80%, of its capacity while a poller follows the feed (0: not measured)")
	costCapacity := fs.Duration("cost-capacity", "", dcost.CapacityFor, "how long the cost benchmark floods dev to measure its capacity")
	costCluster := fs.Bool("cost-cluster", "", dcost.Cluster, "the cost benchmark also runs dev on 2 shards x 2 replicas")
	costRoles := fs.Bool("cost-roles", "", dcost.Roles, "the cost benchmark also carries the steady load through ingest, tlog, query and controlplane as separate processes, with a feed poller and a page reader")
	deliverEvents := fs.Int("deliver-events", "AUDITRAIL_BENCH_DELIVER_EVENTS", 200_000, "events of the deliver benchmark")
	icfg := ingest.DefaultConfig()
	icfg.RegisterFlags(fs)
	cpuProfile := fs.String("cpuprofile", "", "", "write a CPU profile of the run to this file")
	results := fs.String("results", "AUDITRAIL_BENCH_RESULTS", "", "also write the figures into the results table of this Markdown file (make bench: docs/benchmarks.md), each replacing its earlier measurement")
	if err := fs.Parse(args); err != nil {
		return err
	}
	exe := *exeFlag
	if exe == "" {
		var err error
		if exe, err = bench.AuditrailBinary(); err != nil {
			return err
		}
	}
	bench.SetAuditrail(exe)
	stopProfile, err := cli.StartCPUProfile(*cpuProfile)
	if err != nil {
		return err
	}
	defer stopProfile()
	var figures []bench.Figure
	for _, name := range strings.Split(*which, ",") {
		switch strings.TrimSpace(name) {
		case "hooks":
			fmt.Println("== hooks: the hook path and the execution pipeline")
			figs, err := bench.HookFigures(ctx, os.Stdout)
			if err != nil {
				return fmt.Errorf("hooks benchmark: %w", err)
			}
			figures = append(figures, figs...)
		case "connections":
			fmt.Println("== connections: a tool execution needing a valid OAuth connection against one needing none")
			figs, err := bench.ConnectionFigures(ctx, os.Stdout)
			if err != nil {
				return fmt.Errorf("connections benchmark: %w", err)
			}
			figures = append(figures, figs...)
		case "mcp":
			fmt.Println("== mcp: a tool call over MCP (streamable HTTP) against the same call through the HTTP API")
			figs, err := bench.MCPFigures(ctx, os.Stdout)
			if err != nil {
				return fmt.Errorf("mcp benchmark: %w", err)
			}
			figures = append(figures, figs...)
		case "docmd":
			fmt.Println("== docmd: render a ~500-page document as DocMD")
			fig, err := bench.DocMD()
			if err != nil {
				return fmt.Errorf("docmd benchmark: %w", err)
			}
			figures = append(figures, fig)
		case "docsedit":
			fmt.Println("== docsedit: DocsToolkit.EditDocument with 100 requests against the Google emulator")
			fig, err := bench.DocsEdit(ctx)
			if err != nil {
				return fmt.Errorf("docsedit benchmark: %w", err)
			}
			figures = append(figures, fig)
		case "odata":
			fmt.Println("== odata: the Graph emulator's $filter evaluator over 100k generated messages")
			fmt.Printf("  $filter=%s\n", bench.ODataFilter)
			fig, err := bench.OData(100_000)
			if err != nil {
				return fmt.Errorf("odata benchmark: %w", err)
			}
			figures = append(figures, fig)
		case "mail":
			fmt.Println("== mail: MailToolkit.ListEmails of 100 messages through the tool runner against the Graph emulator")
			fig, err := bench.MailList(ctx)
			if err != nil {
				return fmt.Errorf("mail benchmark: %w", err)
			}
			figures = append(figures, fig)
		case "deliver":
			fmt.Printf("== deliver: %d events pushed to one destination on a local receiver, against publishing them\n", *deliverEvents)
			r, err := bench.Deliver(ctx, *deliverEvents, os.Stdout)
			if err != nil {
				return fmt.Errorf("deliver benchmark: %w", err)
			}
			fmt.Printf("  publish %s, deliver %s in %d POSTs\n", r.Publish.Round(time.Millisecond), r.Deliver.Round(time.Millisecond), r.Posts)
			figures = append(figures, r.Figures()...)
		case "verify":
			fmt.Printf("== verify: %d exported entries (JSONL with leaf_index and a signed checkpoint) verified offline, against decoding them with encoding/json\n", *verifyEntries)
			r, err := bench.Verify(ctx, *verifyEntries, os.Stdout)
			if err != nil {
				return fmt.Errorf("verify benchmark: %w", err)
			}
			fmt.Printf("  %.0f MB on %d workers: verify %s (CPU %s: %.0f entries per CPU second), decode %s; one verification allocated %.1f MB in %d allocations (%.4f per entry)\n",
				float64(r.FileBytes)/1e6, r.Workers, r.Verify.Round(time.Millisecond), r.CPU.Round(time.Millisecond), float64(r.Entries)/r.CPU.Seconds(),
				r.Decode.Round(time.Millisecond), float64(r.AllocBytes)/1e6, r.Allocs, float64(r.Allocs)/float64(r.Entries))
			figures = append(figures, r.Figures()...)
		case "tlog":
			fmt.Printf("== tlog: ingest of %d events into ClickHouse with the tamper-evidence log off, then on (the tlog role beside ingest)\n", *tlogEvents)
			r, err := bench.Tlog(ctx, *tlogEvents, 10, os.Stdout)
			if err != nil {
				return fmt.Errorf("tlog benchmark: %w", err)
			}
			figures = append(figures, r.Figures()...)
		case "proof":
			fmt.Printf("== proof: inclusion proofs of random events over HTTP from a log of %d leaves in ClickHouse, against a bare point SELECT\n", *proofLeaves)
			r, err := bench.Proof(ctx, int64(*proofLeaves), *proofSamples, os.Stdout)
			if err != nil {
				return fmt.Errorf("proof benchmark: %w", err)
			}
			figures = append(figures, r.Figures()...)
		case "cost":
			cfg := bench.DefaultCostConfig(exe)
			cfg.Rate, cfg.Duration, cfg.Orgs, cfg.Drain, cfg.Cluster, cfg.QueryLog, cfg.ProfileDir = *costRate, *costFor, *costOrgs, *costDrain, *costCluster, *costQueryLog, *costProfiles
			cfg.LoadFor, cfg.CapacityFor, cfg.Roles = *costLoad, *costCapacity, *costRoles
			fmt.Printf("== cost: CPU per event of every process, from /proc: dev under %d events/s for %s on ClickHouse, SQLite and the cluster; a bare clickhouse-client insert; the roles draining %d events\n",
				cfg.Rate, cfg.Duration, cfg.Drain)
			r, err := bench.Cost(ctx, cfg, os.Stdout)
			if err != nil {
				return fmt.Errorf("cost benchmark: %w", err)
			}
			figures = append(figures, r.Figures()...)
		case "decode":
			fmt.Println("== decode: audit/v1 payloads")
			figures = append(figures, bench.Decode())
		case "ingest":
			fmt.Printf("== ingest: %d events published, measured until all are committed in ClickHouse, beside Benthos v4.27 on the same stream and server\n", *events)
			if err := icfg.Validate(); err != nil {
				return cli.Usage(err)
			}
			r, err := bench.Ingest(ctx, *events, icfg, os.Stdout)
			if err != nil {
				return fmt.Errorf("ingest benchmark: %w", err)
			}
			fmt.Printf("  publish %s, ingest %s, Benthos %s, clickhouse-client %s, bare JetStream consume %s\n", r.Publish, r.Pipeline, r.Benthos, r.CHClient, r.JSConsume)
			figures = append(figures, r.Figures()...)
		case "query":
			fmt.Printf("== query: one tenant holding %d events in ClickHouse; API pages against the raw query\n", *queryEvents)
			rs, err := bench.Query(ctx, *queryEvents, os.Stdout)
			if err != nil {
				return fmt.Errorf("query benchmark: %w", err)
			}
			printQueryResults(rs)
			figures = append(figures, bench.QueryFigures("", rs)...)
		case "executions":
			fmt.Printf("== executions: one tenant holding %d tool executions in ClickHouse; API pages against the raw query\n", *queryEvents)
			rs, err := bench.QueryExecutions(ctx, *queryEvents, os.Stdout)
			if err != nil {
				return fmt.Errorf("executions benchmark: %w", err)
			}
			printQueryResults(rs)
			figures = append(figures, bench.QueryFigures("executions ", rs)...)
		case "dashboard":
			fmt.Printf("== dashboard: one tenant holding %d events in ClickHouse behind `auditrail dev`; search, stats, export and the page's first render\n", *queryEvents)
			cfg := bench.DefaultDashboardConfig(exe)
			cfg.Events, cfg.Samples, cfg.Renders = *queryEvents, *dashSamples, *dashRenders
			r, err := bench.Dashboard(ctx, cfg, os.Stdout)
			if err != nil {
				return fmt.Errorf("dashboard benchmark: %w", err)
			}
			fmt.Printf("  list p50 %.2f ms p99 %.2f ms | search rare p50 %.2f p99 %.2f | broad p50 %.2f p99 %.2f | stats p50 %.2f p99 %.2f ms\n",
				msf(r.List.P50), msf(r.List.P99), msf(r.SearchRare.P50), msf(r.SearchRare.P99), msf(r.SearchBroad.P50), msf(r.SearchBroad.P99), msf(r.Stats.P50), msf(r.Stats.P99))
			fmt.Printf("  export %d rows in %s, dev peak RSS +%.1f MB | first render p50 %.1f ms p99 %.1f ms (list fetch p50 %.1f ms)\n",
				r.ExportRows, r.ExportTime.Round(time.Millisecond), float64(r.RSSGrowth)/(1<<20), msf(r.Render.P50), msf(r.Render.P99), msf(r.RenderList.P50))
			figures = append(figures, r.Figures()...)
		case "feed":
			fmt.Printf("== feed: %d entries published through `auditrail dev` (ClickHouse), read by following the feed and by walking the list; publish to visible in dev (SQLite)\n", *feedEntries)
			cfg := bench.DefaultFeedConfig(exe)
			cfg.Entries, cfg.Duration = *feedEntries, *feedFor
			r, err := bench.Feed(ctx, cfg, os.Stdout)
			if err != nil {
				return fmt.Errorf("feed benchmark: %w", err)
			}
			figures = append(figures, r.Figures()...)
		case "cluster":
			fmt.Printf("== cluster: ingest of %d events into ClickHouse 2 shards x 2 replicas against one server; publish -> queryable at %d events/s on each\n", *clusterEvents, *clusterRate)
			cfg := bench.DefaultClusterConfig(exe)
			cfg.Events, cfg.LargeBatch, cfg.Rate, cfg.Duration = *clusterEvents, *clusterBatch, *clusterRate, *clusterFor
			r, err := bench.Cluster(ctx, cfg, os.Stdout)
			if err != nil {
				return fmt.Errorf("cluster benchmark: %w", err)
			}
			figures = append(figures, r.Figures()...)
		case "retention":
			cfg := bench.DefaultRetentionConfig(exe)
			cfg.Entries, cfg.Store, cfg.Rate, cfg.Duration = *retentionEntries, *retentionStore, *retentionRate, *retentionFor
			if cfg.Store != bench.StoreClickHouse && cfg.Store != bench.StoreSQLite {
				return cli.UsageErrorf("--retention-store: %q is neither %s nor %s", cfg.Store, bench.StoreClickHouse, bench.StoreSQLite)
			}
			load := "half its measured capacity"
			if cfg.Rate > 0 {
				load = fmt.Sprintf("%d events/s", cfg.Rate)
			}
			fmt.Printf("== retention: expiring %d entries of one organization (%s, through `auditrail dev`) while another's ingest runs at %s, against the same run without retention\n", cfg.Entries, cfg.Store, load)
			r, err := bench.Retention(ctx, cfg, os.Stdout)
			if err != nil {
				return fmt.Errorf("retention benchmark: %w", err)
			}
			figures = append(figures, r.Figures()...)
		case "sqlite":
			fmt.Printf("== sqlite: one tenant holding %d events in SQLite; a page at 90%% depth against the first page\n", *sqliteEvents)
			r, err := bench.SQLite(ctx, *sqliteEvents, os.Stdout)
			if err != nil {
				return fmt.Errorf("sqlite benchmark: %w", err)
			}
			fmt.Printf("  first page p50 %.2f ms p99 %.2f ms | deep 90%% p50 %.2f ms p99 %.2f ms | project deep 90%% p50 %.2f ms p99 %.2f ms\n",
				msf(r.First.P50), msf(r.First.P99), msf(r.Deep.P50), msf(r.Deep.P99), msf(r.ProjectDeep.P50), msf(r.ProjectDeep.P99))
			figures = append(figures, r.Figures()...)
		default:
			return cli.UsageErrorf("unknown benchmark %q", name)
		}
	}
	fmt.Println()
	for _, f := range figures {
		f.Print(os.Stdout)
	}
	if *results != "" && len(figures) > 0 {
		if err := bench.WriteResults(*results, bench.ThisMachine(version.String()), figures); err != nil {
			return err
		}
		fmt.Printf("wrote %d figures into %s\n", len(figures), *results)
	}
	return nil
}

func printQueryResults(rs []bench.QueryResult) {
	for _, r := range rs {
		fmt.Printf("  %-28s API p50 %7.2f ms p99 %7.2f ms | raw (same hours) p50 %7.2f ms p99 %7.2f ms | raw unbounded p50 %8.1f ms",
			r.Name, msf(r.API.P50), msf(r.API.P99), msf(r.RawBounded.P50), msf(r.RawBounded.P99), msf(r.RawNaive.P50))
		if r.ThroughputPerSec > 0 {
			fmt.Printf(" | %.0f pages/s (4 clients)", r.ThroughputPerSec)
		}
		fmt.Println()
	}
}

func msf(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
