package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/auditrail/auditrail/ingest"
	"github.com/auditrail/auditrail/producers"
	"github.com/auditrail/auditrail/query"
	"github.com/auditrail/auditrail/toolrunner"
)

// runIngest is the production ingest role.
func runIngest(ctx context.Context, args []string) error {
	fs := newFlags("ingest")
	nf := addNATSFlags(fs, "nats://127.0.0.1:4222")
	chDSN := fs.String("clickhouse", "AUDITRAIL_CLICKHOUSE_DSN", "", "clickhouse://host:9000/db (required)")
	httpAddr := fs.String("http", "", "127.0.0.1:8081", "listener of /healthz")
	durable := fs.String("durable", "", ingest.DefaultConfig().Durable, "durable consumer name shared by the ingest instances")
	inf := addIngestFlags(fs)
	mkLog := fs.logFlags("json")
	if err := fs.parse(args); err != nil {
		return err
	}
	log, err := mkLog(os.Stderr)
	if err != nil {
		return err
	}
	if *chDSN == "" {
		return usageErrorf("--clickhouse is required")
	}
	icfg := inf.config()
	icfg.Durable = *durable
	if err := icfg.Validate(); err != nil {
		return usageError{err}
	}
	nc, err := connectStreams(ctx, *nf.url, "auditrail-ingest", *nf.maxAge, log)
	if err != nil {
		return err
	}
	defer nc.Close()
	store, err := openStore(ctx, *chDSN, "", log)
	if err != nil {
		return err
	}
	defer store.Close()
	in, err := ingest.NewAudit(nc, store, icfg, log)
	if err != nil {
		return err
	}
	ecfg := icfg
	ecfg.Durable = *durable + "-execution"
	if *durable == ingest.DefaultConfig().Durable {
		ecfg.Durable = ingest.ExecutionDurable
	}
	inExec, err := ingest.NewExecution(nc, store, ecfg, log)
	if err != nil {
		return err
	}
	app := query.NewApp(log)
	app.Get("/healthz", healthHandler(roleChecks(nc, store, in, inExec), func() map[string]any {
		return map[string]any{"ingest": in.Stats(), "ingest_executions": inExec.Stats()}
	}))
	app.Use(query.NotFound)
	go func() {
		if err := serve(ctx, app, *httpAddr, log); err != nil {
			log.Error("health listener", "err", err)
		}
	}()
	done := make(chan error, 1)
	go func() { done <- inExec.Run(ctx) }()
	err = in.Run(ctx)
	if eerr := <-done; err == nil {
		err = eerr
	}
	_ = nc.Drain()
	return err
}

// runQuery is the production query role: the audit API over ClickHouse,
// authenticating against the control-plane state in NATS.
func runQuery(ctx context.Context, args []string) error {
	fs := newFlags("query")
	nf := addNATSFlags(fs, "nats://127.0.0.1:4222")
	chDSN := fs.String("clickhouse", "AUDITRAIL_CLICKHOUSE_DSN", "", "clickhouse://host:9000/db (required)")
	httpAddr := fs.String("http", "", "127.0.0.1:8080", "listener of the audit API")
	af := addAccessFlags(fs)
	curKeys := fs.String("cursor-keys", "", "", "cursor signing keys, comma-separated base64, the first signs (required; share them across instances)")
	rate := fs.String("rate-limit", "", "100/60s", "requests per window per client IP, shared by all instances")
	mkLog := fs.logFlags("json")
	if err := fs.parse(args); err != nil {
		return err
	}
	log, err := mkLog(os.Stderr)
	if err != nil {
		return err
	}
	if *chDSN == "" {
		return usageErrorf("--clickhouse is required")
	}
	keys, err := keyList("cursor-keys", *curKeys, "", "", 0)
	if err != nil {
		return err
	}
	nc, err := connectStreams(ctx, *nf.url, "auditrail-query", *nf.maxAge, log)
	if err != nil {
		return err
	}
	defer nc.Close()
	bg, stopBG := context.WithCancel(context.WithoutCancel(ctx))
	defer stopBG()
	cp, err := openControlPlane(bg, nc, af, "", log)
	if err != nil {
		return err
	}
	limiter, err := rateLimiter(bg, nc, *rate)
	if err != nil {
		return err
	}
	store, err := openStore(ctx, *chDSN, "", log)
	if err != nil {
		return err
	}
	defer store.Close()
	qs, err := query.New(query.Config{CursorKeys: keys, StoreTimeout: 10 * time.Second}, store, cp.access, log)
	if err != nil {
		return err
	}
	app := query.NewApp(log)
	app.Get("/healthz", healthHandler(roleChecks(nc, store), nil))
	qs.Register(app, query.RateLimit(limiter, cp.proxies, log))
	app.Use(query.NotFound)
	return serve(ctx, app, *httpAddr, log)
}

// runControlPlane is the production admin API role.
func runControlPlane(ctx context.Context, args []string) error {
	fs := newFlags("controlplane")
	nf := addNATSFlags(fs, "nats://127.0.0.1:4222")
	httpAddr := fs.String("http", "", "127.0.0.1:8082", "listener of the admin API")
	af := addAccessFlags(fs)
	secKeys := fs.String("secrets-keys", "", "", "keys that encrypt secrets at rest, comma-separated base64 of 32 bytes, the first seals (required)")
	mkLog := fs.logFlags("json")
	if err := fs.parse(args); err != nil {
		return err
	}
	log, err := mkLog(os.Stderr)
	if err != nil {
		return err
	}
	nc, err := connectStreams(ctx, *nf.url, "auditrail-controlplane", *nf.maxAge, log)
	if err != nil {
		return err
	}
	defer nc.Close()
	bg, stopBG := context.WithCancel(context.WithoutCancel(ctx))
	defer stopBG()
	cp, err := openControlPlane(bg, nc, af, "", log)
	if err != nil {
		return err
	}
	pub, err := producers.New(nc, producers.DefaultConfig(), log)
	if err != nil {
		return err
	}
	admin, err := cp.adminService(pub, *secKeys, "", log)
	if err != nil {
		return err
	}
	app := query.NewApp(log)
	app.Get("/healthz", healthHandler([]check{{"nats", func(context.Context) error {
		if !nc.IsConnected() {
			return fmt.Errorf("nats %s", nc.Status())
		}
		return nil
	}}}, nil))
	admin.Register(app)
	app.Use(query.NotFound)
	return serve(ctx, app, *httpAddr, log)
}

// runToolRunner is the production tool runner role: the tool runner API,
// hooks from the control-plane state, execution events to the stream.
func runToolRunner(ctx context.Context, args []string) error {
	fs := newFlags("toolrunner")
	nf := addNATSFlags(fs, "nats://127.0.0.1:4222")
	httpAddr := fs.String("http", "", "127.0.0.1:8083", "listener of the tool runner API")
	af := addAccessFlags(fs)
	secKeys := fs.String("secrets-keys", "", "", "keys that open secrets at rest, comma-separated base64 of 32 bytes (the control plane's)")
	mkLog := fs.logFlags("json")
	if err := fs.parse(args); err != nil {
		return err
	}
	log, err := mkLog(os.Stderr)
	if err != nil {
		return err
	}
	nc, err := connectStreams(ctx, *nf.url, "auditrail-toolrunner", *nf.maxAge, log)
	if err != nil {
		return err
	}
	defer nc.Close()
	bg, stopBG := context.WithCancel(context.WithoutCancel(ctx))
	defer stopBG()
	cp, err := openControlPlane(bg, nc, af, "", log)
	if err != nil {
		return err
	}
	pub, err := producers.New(nc, producers.DefaultConfig(), log)
	if err != nil {
		return err
	}
	admin, err := cp.adminService(pub, *secKeys, "", log)
	if err != nil {
		return err
	}
	reg, closeToolkits := toolkits()
	defer closeToolkits()
	runner, proxy := newToolRunner(reg, admin, pub, log)
	app := query.NewApp(log)
	app.Get("/healthz", healthHandler([]check{{"nats", func(context.Context) error {
		if !nc.IsConnected() {
			return fmt.Errorf("nats %s", nc.Status())
		}
		return nil
	}}}, func() map[string]any { return map[string]any{"hooks": proxy.Stats()} }))
	toolrunner.NewServer(runner, cp.access).Register(app)
	app.Use(query.NotFound)
	return serve(ctx, app, *httpAddr, log)
}
