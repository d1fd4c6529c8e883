package main

import (
	"context"
	"os"
	"time"

	"github.com/auditrail/auditrail/ingest"
	"github.com/auditrail/auditrail/internal/auditstore/clickhouse"
	"github.com/auditrail/auditrail/internal/cli"
)

// runDev runs every role in one process: embedded NATS (unless
// --nats-url) and SQLite (unless --clickhouse), every module of the
// production roles over one HTTP listener, until ctx ends; then it drains
// them in the reverse order (process.go).
// devCheckpointInterval is dev's --checkpoint-interval default.
const devCheckpointInterval = time.Second

func runDev(ctx context.Context, args []string) error {
	s, err := parseDevFlags(args)
	if err != nil {
		return err
	}
	p := &process{s: s}
	if err := p.run(ctx, modAll); err != nil {
		return err
	}
	if p.in != nil {
		s.log.Info("auditrail dev stopped", healthIngestAudit, p.in.Stats(), healthIngestExecutions, p.inExec.Stats())
	}
	return nil
}

// parseDevFlags parses the command line of dev and makes its logger.
func parseDevFlags(args []string) (settings, error) {
	fs := cli.NewFlags("auditrail dev")
	httpAddr := fs.String("http", "", "127.0.0.1:8080", "one listener for every HTTP API and the dashboard (/dashboard/)")
	natsListen := fs.String("nats-listen", "", "127.0.0.1:4222", "client port of the embedded NATS server")
	nf := cli.AddNATSFlags(fs, "", true).WithReplicas(fs)
	data := fs.String("data", "", "./data", "JetStream store and embedded audit store")
	chDSN := fs.String("clickhouse", "AUDITRAIL_CLICKHOUSE_DSN", "", "clickhouse://host:9000/db: store in ClickHouse instead of SQLite")
	chCreds := addClickHouseCredsFlags(fs)
	chCluster := addClusterFlag(fs)
	af := addAccessFlags(fs)
	cursorKeys := fs.String("cursor-keys", "", "", "cursor signing keys, comma-separated base64, the first signs (default: generated and kept in DATA)")
	pageTokenKeys := fs.String("page-token-keys", "", "", "keys that sign the toolkits' pagination tokens, comma-separated base64 of at least 16 bytes, the first signs (default: generated and kept in DATA)")
	secretsKeys := fs.String("secrets-keys", "", "", "keys that encrypt secrets at rest, comma-separated base64 of 32 bytes, the first seals (default: generated and kept in DATA)")
	limits := map[limitFamily]*string{auditLimit: auditLimit.add(fs), adminLimit: adminLimit.add(fs), toolLimit: toolLimit.add(fs)}
	reads := addReadFlags(fs)
	icfg := ingest.DefaultConfig()
	icfg.RegisterFlags(fs)
	df := addDeliverFlags(fs)
	tf := addTLogFlags(fs)
	// dev signs checkpoints every second: its JSON destinations wait for
	// the checkpoint that proves their batches.
	*tf.interval = devCheckpointInterval
	fs.Lookup("checkpoint-interval").DefValue = devCheckpointInterval.String()
	rf := addRetentionFlags(fs, true)
	demoFlag := fs.Bool("demo", "", false, "start a MongoDB-wire server with sample data, the OAuth provider emulator, and a demo organization, project, user (connected to the google and microsoft providers) and key, and print them")
	publicURL := addPublicURLFlag(fs, "")
	mf := addMCPFlags(fs)
	newKey := fs.Bool("new-key", "", false, "with --demo: mint and print a new demo API key (a restart otherwise reuses the one printed at the first start)")
	allowPrivate := addEgressFlag(fs)
	streamKey := addStreamKeyFlag(fs)
	metricsAddr := addMetricsFlag(fs)
	mkLog := fs.LogFlags("text")
	if err := fs.Parse(args); err != nil {
		return settings{}, err
	}
	log, err := mkLog(os.Stderr)
	if err != nil {
		return settings{}, err
	}
	s := settings{name: "dev", dev: true, log: log, http: *httpAddr, natsListen: *natsListen, nats: nf, dataDir: *data,
		access: &af, writesState: true, cursorKeys: *cursorKeys, pageTokenKeys: *pageTokenKeys, secretsKeys: *secretsKeys,
		limits: limits, reads: reads, ingest: icfg, demo: *demoFlag, newKey: *newKey, allowPrivate: *allowPrivate,
		streamKey: *streamKey, metrics: *metricsAddr, publicURL: *publicURL}
	if s.store.DSN, err = chCreds.withCredentials(*chDSN); err != nil {
		return s, err
	}
	s.store.Cluster = *chCluster
	if err := s.ingest.Validate(); err != nil {
		return s, cli.Usage(err)
	}
	if s.store.Cluster != "" && s.store.DSN == "" {
		return s, cli.UsageErrorf("--clickhouse-cluster needs --clickhouse")
	}
	if err := clickhouse.ValidateCluster(s.store.Cluster); err != nil {
		return s, cli.Usage(err)
	}
	if s.deliver, err = df.config(); err != nil {
		return s, err
	}
	s.deliver.Replicas = s.nats.Replicas()
	if s.tlog, err = tf.config("dev"); err != nil {
		return s, err
	}
	if s.lifecycle, err = rf.config(); err != nil {
		return s, err
	}
	if s.publicURL == "" {
		s.publicURL = clientURL(s.http)
	}
	if s.mcp, err = mf.config(s.publicURL); err != nil {
		return s, err
	}
	return s, nil
}
