package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/auditrail/auditrail/ingest"
	"github.com/auditrail/auditrail/internal/auditstore"
	"github.com/auditrail/auditrail/internal/httpapi"
	"github.com/auditrail/auditrail/internal/natsx"
	"github.com/auditrail/auditrail/internal/redact"
	"github.com/auditrail/auditrail/producers"
	"github.com/auditrail/auditrail/query"
	"github.com/auditrail/auditrail/toolrunner"
)

// natsFlags are the NATS flags of every role.
type natsFlags struct {
	url, creds *string
	// maxAge is nil on the roles that do not create the streams.
	maxAge *time.Duration
}

// addNATSFlags adds --nats-url and --nats-creds, and --stream-max-age when
// the role creates the streams (controlplane, dev).
func addNATSFlags(fs *flags, defURL string, createsStreams bool) natsFlags {
	f := natsFlags{
		url:   fs.String("nats-url", "", defURL, "NATS server URL"),
		creds: fs.String("nats-creds", "", "", "NATS credentials file of this role (written by auditrail dev in DATA/nats, or by auditrail nats-setup)"),
	}
	if createsStreams {
		f.maxAge = fs.Duration("stream-max-age", "", 0, "retention of AUDITRAIL_EVENTS (0 keeps events until removed by hand)")
	}
	return f
}

// connect dials NATS with the role's credentials.
func (f natsFlags) connect(name string, log *slog.Logger) (*nats.Conn, error) {
	return natsx.Connect(*f.url, name, *f.creds, log)
}

// ensureStreams creates or updates the event and dead-letter streams: only
// the roles allowed to (controlplane, dev) do.
func ensureStreams(ctx context.Context, nc *nats.Conn, maxAge time.Duration) error {
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	cfg := natsx.DefaultStreamConfig()
	cfg.MaxAge = maxAge
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return natsx.EnsureStreams(sctx, js, cfg)
}

// waitStreams waits until the controlplane role has created the streams
// (all when names is empty).
func waitStreams(ctx context.Context, nc *nats.Conn, log *slog.Logger, names ...string) error {
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	return natsx.WaitStreams(ctx, js, log, names...)
}

type ingestFlags struct {
	batch, batchBytes, fetch, writers *int
	flush                             *time.Duration
	ackWait                           *time.Duration
}

func addIngestFlags(fs *flags) ingestFlags {
	d := ingest.DefaultConfig()
	return ingestFlags{
		batch:      fs.Int("batch-size", "", d.BatchSize, "most events per store batch"),
		batchBytes: fs.Int("batch-bytes", "", d.BatchBytes, "most payload bytes per store batch (bounds the memory of ingest)"),
		fetch:      fs.Int("fetch-size", "", d.FetchSize, "most messages the JetStream client buffers ahead of the batch being received"),
		writers:    fs.Int("writers", "", d.Writers, "batches written to the store at once, beside the one being received"),
		flush:      fs.Duration("flush-interval", "", d.FlushInterval, "longest wait for a batch to fill"),
		ackWait:    fs.Duration("ack-wait", "", d.AckWait, "JetStream redelivery timeout of unacknowledged events"),
	}
}

func (f ingestFlags) config() ingest.Config {
	cfg := ingest.DefaultConfig()
	cfg.BatchSize = *f.batch
	cfg.BatchBytes = *f.batchBytes
	cfg.FetchSize = *f.fetch
	cfg.Writers = *f.writers
	cfg.FlushInterval = *f.flush
	cfg.AckWait = *f.ackWait
	cfg.MaxAckPending = cfg.BatchSize * 5 / 2
	return cfg
}

func runDev(ctx context.Context, args []string) error {
	fs := newFlags("dev")
	httpAddr := fs.String("http", "", "127.0.0.1:8080", "one listener for every HTTP API")
	natsListen := fs.String("nats-listen", "", "127.0.0.1:4222", "client port of the embedded NATS server")
	nf := addNATSFlags(fs, "", true)
	data := fs.String("data", "", "./data", "JetStream store and embedded audit store")
	chDSN := fs.String("clickhouse", "AUDITRAIL_CLICKHOUSE_DSN", "", "clickhouse://host:9000/db: store in ClickHouse instead of SQLite")
	af := addAccessFlags(fs)
	curKeys := fs.String("cursor-keys", "", "", "cursor signing keys, comma-separated base64, the first signs (default: generated and kept in DATA)")
	pageKeys := fs.String("page-token-keys", "", "", "keys that sign the toolkits' pagination tokens, comma-separated base64 of at least 16 bytes, the first signs (default: generated and kept in DATA)")
	secKeys := fs.String("secrets-keys", "", "", "keys that encrypt secrets at rest, comma-separated base64 of 32 bytes, the first seals (default: generated and kept in DATA)")
	rate, adminRate, toolRate := auditLimit.add(fs), adminLimit.add(fs), toolLimit.add(fs)
	inf := addIngestFlags(fs)
	demo := fs.Bool("demo", "", false, "start a MongoDB-wire server with sample data, the OAuth provider emulator, and a demo organization, project, user (connected to the google and microsoft providers) and key, and print them")
	publicURL := addPublicURLFlag(fs, "")
	newKey := fs.Bool("new-key", "", false, "with --demo: mint and print a new demo API key (a restart otherwise reuses the one printed at the first start)")
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
	unlock, err := lockDataDir(*data)
	if err != nil {
		return err
	}
	defer unlock()
	if err := checkFree("--http", *httpAddr); err != nil {
		return err
	}
	if *nf.url == "" {
		if err := checkFree("--nats-listen", *natsListen); err != nil {
			return err
		}
	}

	// NATS: embedded unless --nats-url, in operator mode; each in-process
	// role connects with its own credentials (DATA/nats/<role>.creds), so
	// that every role runs with the permissions it has in production.
	url := *nf.url
	var ns *server.Server
	credsOf := func(string) string { return *nf.creds }
	if url == "" {
		keysDir := filepath.Join(*data, "nats")
		auth, err := natsx.LoadOrCreateAuth(keysDir)
		if err != nil {
			return err
		}
		if err := auth.WriteCreds(keysDir); err != nil {
			return err
		}
		credsOf = func(role string) string { return natsx.CredsFile(keysDir, role) }
		scfg := natsx.DefaultServerConfig()
		scfg.Listen = *natsListen
		scfg.StoreDir = filepath.Join(*data, "jetstream")
		scfg.Auth = auth
		if ns, err = natsx.StartServer(scfg); err != nil {
			return err
		}
		defer func() {
			ns.Shutdown()
			ns.WaitForShutdown()
		}()
		url = ns.ClientURL()
		fmt.Fprintf(os.Stdout, "nats credentials (admin: emit, tail, the nats CLI): %s\n", credsOf(natsx.RoleAdmin))
	}
	conns := map[string]*nats.Conn{}
	for _, role := range []string{natsx.RoleControlPlane, natsx.RoleToolRunner, natsx.RoleIngest, natsx.RoleQuery} {
		c, err := natsx.Connect(url, "auditrail-dev-"+role, credsOf(role), log.With("nats_role", role))
		if err != nil {
			return err
		}
		defer c.Close()
		conns[role] = c
	}
	nc := conns[natsx.RoleControlPlane]
	if err := ensureStreams(ctx, nc, *nf.maxAge); err != nil {
		return err
	}

	// The store: SQLite opens at once (its errors are not transient);
	// ClickHouse is retried in the background until it answers, while
	// HTTP serves and /healthz says 503.
	store := newPendingStore()
	defer store.Close()
	storeErr := make(chan error, 1)
	if *chDSN == "" {
		s, err := openStore(ctx, "", *data, log)
		if err != nil {
			return err
		}
		store.set(s)
	} else {
		go func() {
			if err := store.openWithRetry(ctx, *chDSN, "", log); err != nil && ctx.Err() == nil {
				storeErr <- err
			}
		}()
	}

	keys, err := keyList("cursor-keys", *curKeys, *data, cursorKeyFile, 0)
	if err != nil {
		return err
	}
	pageTokenKeys, err := keyList("page-token-keys", *pageKeys, *data, pageTokenKeyFile, 0)
	if err != nil {
		return err
	}
	// The control-plane mirror and the limiter live until the process drains.
	bg, stopBG := context.WithCancel(context.WithoutCancel(ctx))
	defer stopBG()
	cp, err := openControlPlane(bg, nc, af, *data, false, log)
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
	if *publicURL == "" {
		*publicURL = clientURL(*httpAddr)
	}
	err = useOAuth(admin, *publicURL, guard)
	if err != nil {
		return err
	}
	reg, closeToolkits := toolkits(guard, admin, pageTokenKeys, log)
	defer closeToolkits()
	execPub, err := producers.New(conns[natsx.RoleToolRunner], producers.DefaultConfig(), log)
	if err != nil {
		return err
	}
	outbox, stopOutbox, err := executionOutbox(filepath.Join(*data, "outbox", "execution"), execPub, log)
	if err != nil {
		return err
	}
	defer stopOutbox()
	runner, proxy := newToolRunner(reg, admin, outbox, guard, log)
	limiter, err := rateLimiter(bg, conns[natsx.RoleQuery], auditLimit, *rate, log)
	if err != nil {
		return err
	}
	adminLimiter, err := rateLimiter(bg, conns[natsx.RoleControlPlane], adminLimit, *adminRate, log)
	if err != nil {
		return err
	}
	toolLimiter, err := rateLimiter(bg, conns[natsx.RoleToolRunner], toolLimit, *toolRate, log)
	if err != nil {
		return err
	}

	in, err := ingest.NewAudit(conns[natsx.RoleIngest], store, icfg, log)
	if err != nil {
		return err
	}
	ecfg := icfg
	ecfg.Durable = ingest.ExecutionDurable
	inExec, err := ingest.NewExecution(conns[natsx.RoleIngest], store, ecfg, log)
	if err != nil {
		return err
	}
	ictx, stopIngest := context.WithCancel(context.WithoutCancel(ctx))
	defer stopIngest()
	ingestDone := make(chan error, 2)
	go func() {
		select {
		case <-store.Ready():
		case <-ictx.Done():
			ingestDone <- nil
			ingestDone <- nil
			return
		}
		go func() { ingestDone <- in.Run(ictx) }()
		ingestDone <- inExec.Run(ictx)
	}()

	qs, err := query.New(query.Config{CursorKeys: keys, StoreTimeout: 10 * time.Second}, store, cp.access, log)
	if err != nil {
		return err
	}
	qs.RecordExportsWith(producers.NewRecorder(pub, 5*time.Second)) // each export leaves an audit event
	app := httpapi.NewApp(log)
	app.Get("/healthz", healthHandler(roleChecks(conns, store, in, inExec), func() map[string]any {
		return map[string]any{"ingest": in.Stats(), "ingest_executions": inExec.Stats(), "hooks": proxy.Stats(), "execution_outbox": outbox.Stats(), "audit_outbox": map[string]int{"pending": admin.PendingEvents()}}
	}))
	qs.Register(app, httpapi.RateLimit(limiter, cp.proxies, log))
	admin.Register(app, httpapi.RateLimit(adminLimiter, cp.proxies, log))
	toolrunner.NewServer(runner, cp.access, cp.proxies).Register(app, httpapi.RateLimit(toolLimiter, cp.proxies, log))

	if *demo {
		env := demoEnv{API: strings.TrimSuffix(*publicURL, "/"), BootKey: cp.freshBootKey, Scopes: providerScopes(reg)}
		if ns != nil {
			env.NATS = ns.ClientURL()
			if env.AdminCreds, err = filepath.Abs(credsOf(natsx.RoleAdmin)); err != nil {
				return err
			}
		}
		stopDemo, err := startDemo(ctx, app, cp.access, *data, *newKey, env, os.Stdout, log)
		if err != nil {
			return fmt.Errorf("demo: %w", err)
		}
		defer stopDemo()
	}

	storeName := "sqlite " + filepath.Join(*data, "audit.db")
	if *chDSN != "" {
		storeName = "clickhouse " + redact.URL(*chDSN)
	}
	fmt.Fprintf(os.Stdout, "auditrail dev: http://%s  nats %s  store %s\n", *httpAddr, redact.URL(url), storeName)

	errc := make(chan error, 1)
	go func() { errc <- serve(ctx, app, *httpAddr, log) }()
	select {
	case err = <-errc: // HTTP ended: a signal drained it, or it failed to listen
	case err = <-storeErr:
		_ = app.ShutdownWithTimeout(5 * time.Second)
		return err
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
	for _, c := range conns {
		_ = c.Drain()
	}
	log.Info("auditrail dev stopped", "ingest", in.Stats(), "ingest_executions", inExec.Stats())
	return nil
}

// natsCheck fails while a connection (by role) is not up.
func natsCheck(conns map[string]*nats.Conn) check {
	return check{"nats", func(context.Context) error {
		for role, nc := range conns {
			if !nc.IsConnected() {
				return fmt.Errorf("nats (%s) %s", role, nc.Status())
			}
		}
		return nil
	}}
}

// roleChecks are the readiness checks of a process that ingests and serves.
func roleChecks(conns map[string]*nats.Conn, store auditstore.Store, ingesters ...interface{ Ready() bool }) []check {
	checks := []check{
		natsCheck(conns),
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
