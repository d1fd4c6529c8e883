package main

import (
	"context"
	"os"
	"time"

	"github.com/auditrail/auditrail/ingest"
	"github.com/auditrail/auditrail/query"
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
	app := query.NewApp(log)
	app.Get("/healthz", healthHandler(roleChecks(nc, store, in), func() map[string]any { return map[string]any{"ingest": in.Stats()} }))
	app.Use(query.NotFound)
	go func() {
		if err := serve(ctx, app, *httpAddr, log); err != nil {
			log.Error("health listener", "err", err)
		}
	}()
	err = in.Run(ctx)
	_ = nc.Drain()
	return err
}

// runQuery is the production query role.
func runQuery(ctx context.Context, args []string) error {
	fs := newFlags("query")
	chDSN := fs.String("clickhouse", "AUDITRAIL_CLICKHOUSE_DSN", "", "clickhouse://host:9000/db (required)")
	httpAddr := fs.String("http", "", "127.0.0.1:8080", "listener of the audit API")
	bootKey := fs.String("bootstrap-key", "", "", "platform-admin API key (required)")
	curKeys := fs.String("cursor-keys", "", "", "cursor signing keys, comma-separated base64, the first signs (required; share them across instances)")
	mkLog := fs.logFlags("json")
	if err := fs.parse(args); err != nil {
		return err
	}
	log, err := mkLog(os.Stderr)
	if err != nil {
		return err
	}
	if *chDSN == "" || *bootKey == "" {
		return usageErrorf("--clickhouse and --bootstrap-key are required")
	}
	keys, err := cursorKeys(*curKeys, "")
	if err != nil {
		return err
	}
	store, err := openStore(ctx, *chDSN, "", log)
	if err != nil {
		return err
	}
	defer store.Close()
	hash, err := bootstrapKey(*bootKey, "", os.Stdout)
	if err != nil {
		return err
	}
	qs, err := query.New(query.Config{CursorKeys: keys, StoreTimeout: 10 * time.Second}, store, query.BootstrapAccess{KeyHash: hash}, log)
	if err != nil {
		return err
	}
	app := query.NewApp(log)
	app.Get("/healthz", healthHandler([]check{{"store", store.Ping}}, nil))
	qs.Register(app)
	app.Use(query.NotFound)
	return serve(ctx, app, *httpAddr, log)
}
