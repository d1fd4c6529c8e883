package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/auditrail/auditrail/ingest"
	"github.com/auditrail/auditrail/internal/auditstore"
	"github.com/auditrail/auditrail/internal/natsx"
	"github.com/auditrail/auditrail/producers"
	"github.com/auditrail/auditrail/query"
	"github.com/auditrail/auditrail/toolrunner"
)

// natsFlags are the NATS flags of every role.
type natsFlags struct {
	url    *string
	maxAge *time.Duration
}

func addNATSFlags(fs *flags, defURL string) natsFlags {
	return natsFlags{
		url:    fs.String("nats-url", "", defURL, "NATS server URL"),
		maxAge: fs.Duration("stream-max-age", "", 0, "retention of AUDITRAIL_EVENTS (0 keeps events until removed by hand)"),
	}
}

// connectStreams connects to NATS and ensures the streams exist.
func connectStreams(ctx context.Context, url, name string, maxAge time.Duration, log *slog.Logger) (*nats.Conn, error) {
	nc, err := natsx.Connect(url, name, log)
	if err != nil {
		return nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, err
	}
	cfg := natsx.DefaultStreamConfig()
	cfg.MaxAge = maxAge
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := natsx.EnsureStreams(sctx, js, cfg); err != nil {
		nc.Close()
		return nil, err
	}
	return nc, nil
}

type ingestFlags struct {
	batch   *int
	flush   *time.Duration
	ackWait *time.Duration
}

func addIngestFlags(fs *flags) ingestFlags {
	d := ingest.DefaultConfig()
	return ingestFlags{
		batch:   fs.Int("batch-size", "", d.BatchSize, "most events per store batch"),
		flush:   fs.Duration("flush-interval", "", d.FlushInterval, "longest wait for a batch to fill"),
		ackWait: fs.Duration("ack-wait", "", d.AckWait, "JetStream redelivery timeout of unacknowledged events"),
	}
}

func (f ingestFlags) config() ingest.Config {
	cfg := ingest.DefaultConfig()
	cfg.BatchSize = *f.batch
	cfg.FlushInterval = *f.flush
	cfg.AckWait = *f.ackWait
	cfg.MaxAckPending = cfg.BatchSize * 5 / 2
	return cfg
}

func runDev(ctx context.Context, args []string) error {
	fs := newFlags("dev")
	httpAddr := fs.String("http", "", "127.0.0.1:8080", "one listener for every HTTP API and the dashboard")
	natsListen := fs.String("nats-listen", "", "127.0.0.1:4222", "client port of the embedded NATS server")
	nf := addNATSFlags(fs, "")
	data := fs.String("data", "", "./data", "JetStream store and embedded audit store")
	chDSN := fs.String("clickhouse", "AUDITRAIL_CLICKHOUSE_DSN", "", "clickhouse://host:9000/db: store in ClickHouse instead of SQLite")
	af := addAccessFlags(fs)
	curKeys := fs.String("cursor-keys", "", "", "cursor signing keys, comma-separated base64, the first signs (default: generated and kept in DATA)")
	secKeys := fs.String("secrets-keys", "", "", "keys that encrypt secrets at rest, comma-separated base64 of 32 bytes, the first seals (default: generated and kept in DATA)")
	rate := fs.String("rate-limit", "", "100/60s", "audit API requests per window per client IP, shared by all instances")
	inf := addIngestFlags(fs)
	demo := fs.Bool("demo", "", false, "start a MongoDB-wire server with sample data and a demo organization, project, user and key, and print them")
	allowPrivate := addEgressFlag(fs)
	mkLog := fs.logFlags("text")
	if err := fs.parse(args); err != nil {
		return err
	}
	log, err := mkLog(os.Stderr)
	if err != nil {
		return err
	}
	icfg := inf.config()
	if err := icfg.Validate(); err != nil {
		return usageError{err}
	}
	if err := os.MkdirAll(*data, 0o755); err != nil {
		return fmt.Errorf("data dir: %w", err)
	}

	// NATS: embedded unless --nats-url.
	url := *nf.url
	var ns *server.Server
	if url == "" {
		scfg := natsx.DefaultServerConfig()
		scfg.Listen = *natsListen
		scfg.StoreDir = filepath.Join(*data, "jetstream")
		if ns, err = natsx.StartServer(scfg); err != nil {
			return err
		}
		defer func() {
			ns.Shutdown()
			ns.WaitForShutdown()
		}()
		url = ns.ClientURL()
	}
	nc, err := connectStreams(ctx, url, "auditrail-dev", *nf.maxAge, log)
	if err != nil {
		return err
	}
	defer nc.Close()

	store, err := openStore(ctx, *chDSN, *data, log)
	if err != nil {
		return err
	}
	defer store.Close()

	keys, err := keyList("cursor-keys", *curKeys, *data, cursorKeyFile, 0)
	if err != nil {
		return err
	}
	// The control-plane mirror and the limiter live until the process drains.
	bg, stopBG := context.WithCancel(context.WithoutCancel(ctx))
	defer stopBG()
	cp, err := openControlPlane(bg, nc, af, *data, log)
	if err != nil {
		return err
	}
	pub, err := producers.New(nc, producers.DefaultConfig(), log)
	if err != nil {
		return err
	}
	admin, err := cp.adminService(pub, *secKeys, *data, log)
	if err != nil {
		return err
	}
	guard, err := newEgress(*allowPrivate, true, log)
	if err != nil {
		return err
	}
	reg, closeToolkits := toolkits(guard, log)
	defer closeToolkits()
	runner, proxy := newToolRunner(reg, admin, pub, guard, log)
	limiter, err := rateLimiter(bg, nc, *rate)
	if err != nil {
		return err
	}

	in, err := ingest.NewAudit(nc, store, icfg, log)
	if err != nil {
		return err
	}
	ecfg := icfg
	ecfg.Durable = ingest.ExecutionDurable
	inExec, err := ingest.NewExecution(nc, store, ecfg, log)
	if err != nil {
		return err
	}
	ictx, stopIngest := context.WithCancel(context.WithoutCancel(ctx))
	defer stopIngest()
	ingestDone := make(chan error, 2)
	go func() { ingestDone <- in.Run(ictx) }()
	go func() { ingestDone <- inExec.Run(ictx) }()

	qs, err := query.New(query.Config{CursorKeys: keys, StoreTimeout: 10 * time.Second}, store, cp.access, log)
	if err != nil {
		return err
	}
	app := query.NewApp(log)
	app.Get("/healthz", healthHandler(roleChecks(nc, store, in, inExec), func() map[string]any {
		return map[string]any{"ingest": in.Stats(), "ingest_executions": inExec.Stats(), "hooks": proxy.Stats()}
	}))
	qs.Register(app, query.RateLimit(limiter, cp.proxies, log))
	admin.Register(app)
	toolrunner.NewServer(runner, cp.access).Register(app)
	app.Use(query.NotFound)

	if *demo {
		stopDemo, err := startDemo(ctx, app, cp.access, *data, *httpAddr, os.Stdout, log)
		if err != nil {
			return fmt.Errorf("demo: %w", err)
		}
		defer stopDemo()
	}

	storeName := "sqlite " + filepath.Join(*data, "audit.db")
	if *chDSN != "" {
		storeName = "clickhouse " + redactDSN(*chDSN)
	}
	fmt.Fprintf(os.Stdout, "auditrail dev: http://%s  nats %s  store %s\n", *httpAddr, url, storeName)

	errc := make(chan error, 1)
	go func() { errc <- serve(ctx, app, *httpAddr, log) }()
	select {
	case err = <-errc: // HTTP ended: a signal drained it, or it failed to listen
	case err = <-ingestDone:
		if err == nil {
			err = errors.New("ingest stopped")
		}
		_ = app.ShutdownWithTimeout(5 * time.Second)
		return fmt.Errorf("ingest: %w", err)
	}
	// Drain in order: HTTP is done; ingest commits the batch in hand; then
	// the store, NATS and the embedded server close (deferred).
	stopIngest()
	for i := 0; i < 2; i++ {
		if ierr := <-ingestDone; ierr != nil {
			log.Warn("ingest", "err", ierr)
		}
	}
	if err != nil {
		return err
	}
	_ = nc.Drain()
	log.Info("auditrail dev stopped", "ingest", in.Stats(), "ingest_executions", inExec.Stats())
	return nil
}

// natsCheck fails while the connection is not up.
func natsCheck(nc *nats.Conn) check {
	return check{"nats", func(context.Context) error {
		if !nc.IsConnected() {
			return fmt.Errorf("nats %s", nc.Status())
		}
		return nil
	}}
}

// roleChecks are the readiness checks of a process that ingests and serves.
func roleChecks(nc *nats.Conn, store auditstore.Store, ingesters ...interface{ Ready() bool }) []check {
	checks := []check{
		natsCheck(nc),
		{"store", store.Ping},
	}
	for i, in := range ingesters {
		name := "ingest"
		if i > 0 {
			name = fmt.Sprintf("ingest_%d", i+1)
		}
		checks = append(checks, check{name, func(context.Context) error {
			if !in.Ready() {
				return errors.New("consumer not running")
			}
			return nil
		}})
	}
	return checks
}
