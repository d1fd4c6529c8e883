package main

import (
	"context"
	"log/slog"
	"os"
	"runtime/debug"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/nats-io/nats.go"

	"github.com/auditrail/auditrail/controlplane"
	"github.com/auditrail/auditrail/ingest"
	"github.com/auditrail/auditrail/internal/cli"
	"github.com/auditrail/auditrail/internal/egress"
	"github.com/auditrail/auditrail/internal/httpapi"
	"github.com/auditrail/auditrail/internal/metrics"
	"github.com/auditrail/auditrail/internal/natsx"
	"github.com/auditrail/auditrail/internal/ratelimit"
	"github.com/auditrail/auditrail/producers"
	"github.com/auditrail/auditrail/query"
	"github.com/auditrail/auditrail/query/dashboard"
	"github.com/auditrail/auditrail/schemas"
)

// runIngest is the production ingest role.
func runIngest(ctx context.Context, args []string) error {
	fs := cli.NewFlags("auditrail ingest")
	nf := addNATSFlags(fs, "nats://127.0.0.1:4222", false)
	sf := addRoleStoreFlags(fs)
	httpAddr := fs.String("http", "", "127.0.0.1:8081", "listener of /healthz")
	durable := fs.String("durable", "", ingest.DefaultConfig().Durable, "durable consumer name shared by the ingest instances")
	icfg := ingest.DefaultConfig()
	icfg.RegisterFlags(fs)
	gcPercent := fs.Int("gc-percent", "", defaultGCPercent, "GOGC of the process, unless GOGC is set")
	memLimit := fs.Int("memory-limit", "", 0, "soft limit of the Go heap in MiB, unless GOMEMLIMIT is set (0: derived from the batch bounds)")
	metricsAddr := addMetricsFlag(fs)
	mkLog := fs.LogFlags("json")
	if err := fs.Parse(args); err != nil {
		return err
	}
	log, err := mkLog(os.Stderr)
	if err != nil {
		return err
	}
	chStore, err := sf.resolve()
	if err != nil {
		return err
	}
	icfg.Durable = *durable
	if err := icfg.Validate(); err != nil {
		return cli.Usage(err)
	}
	if *gcPercent < 1 || *memLimit < 0 {
		return cli.UsageErrorf("--gc-percent must be positive and --memory-limit not negative")
	}
	setGC(icfg, *gcPercent, int64(*memLimit)<<20, log)
	m, err := startMetrics(ctx, *metricsAddr, log)
	if err != nil {
		return err
	}
	// A CPU profile of the role, for `auditrail-bench -run ingest`, whose
	// child process inherits the variable.
	stopProfile, err := cli.StartCPUProfile(os.Getenv("AUDITRAIL_INGEST_CPUPROFILE"))
	if err != nil {
		return err
	}
	defer stopProfile()
	nc, err := nf.connect("auditrail-ingest", log)
	if err != nil {
		return err
	}
	defer nc.Close()
	// Serve /healthz at once (503 until the streams and the store answer).
	store := newPendingStore()
	defer store.Close()
	in, err := ingest.NewAudit(nc, store, icfg, log)
	if err != nil {
		return err
	}
	ecfg := icfg
	ecfg.Durable = ingest.ExecutionDurableFor(*durable)
	inExec, err := ingest.NewExecution(nc, store, ecfg, log)
	if err != nil {
		return err
	}
	if err := observeIngest(m, nc, in, inExec, icfg.Durable, ecfg.Durable); err != nil {
		return err
	}
	app := httpapi.NewApp(log)
	observeApp(m, app)
	cs := ingestConsumers(in, inExec)
	sw := newStartWait(log)
	app.Get("/healthz", healthHandler(append(roleChecks(map[string]*nats.Conn{natsx.RoleIngest: nc}, store, cs), sw.check()), func() map[string]any {
		return sw.extra(cs.counters(map[string]any{}))
	}))
	go func() {
		if err := serve(ctx, app, *httpAddr, log); err != nil {
			log.Error("health listener", "err", err)
		}
	}()
	if err := sw.waitStreams(ctx, nc); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	sw.set("the audit store")
	if err := store.openWithRetry(ctx, chStore, log); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	sw.set("")
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
	fs := cli.NewFlags("auditrail query")
	nf := addNATSFlags(fs, "nats://127.0.0.1:4222", false).withReplicas(fs)
	sf := addRoleStoreFlags(fs)
	httpAddr := fs.String("http", "", "127.0.0.1:8080", "listener of the audit API")
	af := addAccessFlags(fs)
	curKeys := fs.String("cursor-keys", "", "", "cursor signing keys, comma-separated base64, the first signs (required; share them across instances)")
	rate := auditLimit.add(fs)
	reads := addReadFlags(fs)
	feedDurable := addIngestDurableFlag(fs, "the feeds show what it has committed")
	metricsAddr := addMetricsFlag(fs)
	mkLog := fs.LogFlags("json")
	if err := fs.Parse(args); err != nil {
		return err
	}
	log, err := mkLog(os.Stderr)
	if err != nil {
		return err
	}
	chStore, err := sf.resolve()
	if err != nil {
		return err
	}
	keys, err := keyList("cursor-keys", *curKeys, "", "", 0)
	if err != nil {
		return err
	}
	m, err := startMetrics(ctx, *metricsAddr, log)
	if err != nil {
		return err
	}
	nc, err := nf.connect("auditrail-query", log)
	if err != nil {
		return err
	}
	defer nc.Close()
	// Serve at once: /healthz is 503, naming what the role waits for,
	// until the control-plane bucket exists; then the API's, 503 until
	// the store answers.
	ctx, listenFailed := context.WithCancel(ctx)
	defer listenFailed()
	sw := newStartWait(log)
	served := sw.serve(ctx, *httpAddr, listenFailed)
	if err := sw.waitBucket(ctx, nc, controlplane.DefaultBucket, natsx.RoleControlPlane); err != nil {
		return startFailed(ctx, served, err)
	}
	bg, stopBG := context.WithCancel(context.WithoutCancel(ctx))
	defer stopBG()
	cp, err := openControlPlane(bg, nc, af, "", true, 1, log)
	if err != nil {
		return err
	}
	// Several instances may create the bucket at once on a cluster still
	// placing its replicas: the role waits for it, as for the others.
	var limiter *ratelimit.Limiter
	if err := sw.until(ctx, "the rate-limit bucket "+auditLimit.bucket, func(context.Context) (err error) {
		limiter, err = rateLimiter(bg, nc, auditLimit, nf.replicaCount(), *rate, log)
		return err
	}); err != nil {
		return startFailed(ctx, served, err)
	}
	store := newPendingStore()
	defer store.Close()
	storeErr := make(chan error, 1)
	go func() {
		if err := store.openWithRetry(ctx, chStore, log); err != nil && ctx.Err() == nil {
			storeErr <- err
		}
	}()
	qcfg, err := reads.queryConfig(keys, cp.proxies)
	if err != nil {
		return err
	}
	qs, err := query.New(qcfg, store, cp.access, log)
	if err != nil {
		return err
	}
	// Each bulk read (an export, a feed from its start, a stream resumed
	// far back) leaves an audit event: the query role publishes audit
	// events (natsx.RoleQuery), nothing else.
	pub, err := producers.New(nc, producers.DefaultConfig(), log)
	if err != nil {
		return err
	}
	qs.RecordExportsWith(producers.NewRecorder(pub, 5*time.Second))
	// Live streams follow the event stream (ordered consumers, natsx.RoleQuery)
	// until ctx ends, before HTTP drains.
	liveCtx, stopLive := context.WithCancel(ctx)
	defer stopLive()
	if err := reads.serveLive(liveCtx, qs, nc); err != nil {
		return err
	}
	if err := serveAuditKeys(qs, nc); err != nil {
		return err
	}
	if err := serveFeeds(qs, nc, *feedDurable); err != nil {
		return err
	}
	app := httpapi.NewApp(log)
	observeApp(m, app)
	app.Get("/healthz", healthHandler(roleChecks(map[string]*nats.Conn{natsx.RoleQuery: nc}, store, nil), nil))
	qs.Register(app, httpapi.RateLimit(limiter, cp.proxies, log))
	// The dashboard: its page also calls /api/v1/me and the admin routes of
	// the controlplane role, so a deployment that splits the roles puts one
	// origin in front that routes by path.
	dashboard.Register(app)
	sw.open(app)
	select {
	case err := <-served:
		return err
	case err := <-storeErr:
		stopLive()
		_ = sw.front.ShutdownWithTimeout(5 * time.Second)
		return err
	}
}

// adminRole is what the controlplane and toolrunner roles share: NATS,
// the control-plane state and access, the publisher and the admin service.
type adminRole struct {
	nc    *nats.Conn
	cp    *controlPlane
	pub   *producers.Publisher
	admin *controlplane.Service
	guard *egress.Guard
	log   *slog.Logger
	limit fiber.Handler     // the rate limit of the role's API
	m     *metrics.Registry // nil without --metrics
	// publicURL is --public-url (defaulted to the listener's URL).
	publicURL string
	stop      func()
	// sw serves from the start; the role opens it with its app, then
	// waits for served.
	sw     *startWait
	served <-chan error
}

// startAdminRole parses the role's flags (addr is its default listener)
// and connects it; the caller defers stop.
func startAdminRole(ctx context.Context, name, defAddr string, limit limitFamily, args []string, more ...func(*cli.Flags)) (*adminRole, string, error) {
	fs := cli.NewFlags("auditrail " + name)
	for _, add := range more {
		add(fs)
	}
	nf := addNATSFlags(fs, "nats://127.0.0.1:4222", name == natsx.RoleControlPlane).withReplicas(fs)
	httpAddr := fs.String("http", "", defAddr, "listener of the API")
	publicURL := addPublicURLFlag(fs, "")
	af := addAccessFlags(fs)
	secKeys := fs.String("secrets-keys", "", "", "keys of secrets at rest, comma-separated base64 of 32 bytes, the first seals (the control plane's; required)")
	rate := limit.add(fs)
	allowPrivate := addEgressFlag(fs)
	metricsAddr := addMetricsFlag(fs)
	mkLog := fs.LogFlags("json")
	if err := fs.Parse(args); err != nil {
		return nil, "", err
	}
	log, err := mkLog(os.Stderr)
	if err != nil {
		return nil, "", err
	}
	m, err := startMetrics(ctx, *metricsAddr, log)
	if err != nil {
		return nil, "", err
	}
	nc, err := nf.connect("auditrail-"+name, log)
	if err != nil {
		return nil, "", err
	}
	// Serve at once: /healthz is 503, naming what the role waits for,
	// until the role's app is open.
	ctx, listenFailed := context.WithCancel(ctx)
	sw := newStartWait(log)
	served := sw.serve(ctx, *httpAddr, listenFailed)
	bg, stopBG := context.WithCancel(context.WithoutCancel(ctx))
	r := &adminRole{nc: nc, log: log, m: m, sw: sw, served: served, stop: func() { stopBG(); listenFailed(); nc.Close() }}
	fail := func(err error) (*adminRole, string, error) {
		err = startFailed(ctx, served, err)
		r.stop()
		_ = sw.front.ShutdownWithTimeout(time.Second)
		return nil, "", err
	}
	// The control plane creates the streams (JetStream may still be
	// electing its leaders); the tool runner waits for them and for the
	// control-plane bucket.
	if nf.maxAge != nil {
		err = sw.until(ctx, "JetStream to create the streams", func(ctx context.Context) error {
			return ensureStreams(ctx, nc, *nf.maxAge, nf.replicaCount())
		})
	} else if err = sw.waitStreams(ctx, nc, schemas.StreamEvents); err == nil {
		err = sw.waitBucket(ctx, nc, controlplane.DefaultBucket, natsx.RoleControlPlane)
	}
	if err != nil {
		return fail(err)
	}
	if r.cp, err = openControlPlane(bg, nc, af, "", name != natsx.RoleControlPlane, nf.replicaCount(), log); err != nil {
		return fail(err)
	}
	if r.pub, err = producers.New(nc, producers.DefaultConfig(), log); err != nil {
		return fail(err)
	}
	if r.admin, err = r.cp.adminService(r.pub, *secKeys, "", log); err != nil {
		return fail(err)
	}
	var limiter *ratelimit.Limiter
	if err := sw.until(ctx, "the rate-limit bucket "+limit.bucket, func(context.Context) (err error) {
		limiter, err = rateLimiter(bg, nc, limit, nf.replicaCount(), *rate, log)
		return err
	}); err != nil {
		return fail(err)
	}
	r.limit = httpapi.RateLimit(limiter, r.cp.proxies, log)
	if r.guard, err = newEgress(*allowPrivate, false, log); err != nil {
		return fail(err)
	}
	// Both roles need the flow: the control plane finishes it (callback,
	// authorize route) and refreshes tokens (for the tool runners too, over
	// NATS: their credentials may not write the bucket), the tool runner
	// starts it (connection links).
	if *publicURL == "" {
		*publicURL = clientURL(*httpAddr)
		log.Warn("--public-url not set: OAuth redirect URIs use the listener address, which providers outside this host cannot reach", "public_url", *publicURL)
	}
	if err := useOAuth(r.admin, *publicURL, r.guard); err != nil {
		return fail(err)
	}
	r.publicURL = *publicURL
	return r, *httpAddr, nil
}

// runControlPlane is the production admin API role.
func runControlPlane(ctx context.Context, args []string) error {
	var streamKey *string
	r, _, err := startAdminRole(ctx, "controlplane", "127.0.0.1:8082", adminLimit, args, func(fs *cli.Flags) { streamKey = addStreamKeyFlag(fs) })
	if err != nil {
		return err
	}
	defer r.stop()
	if err := loadStreamCredentials(ctx, r.admin, *streamKey, r.nc, r.log); err != nil {
		return err
	}
	observeAuditOutbox(r.m, r.admin)
	app := httpapi.NewApp(r.log)
	observeApp(r.m, app)
	app.Get("/healthz", healthHandler([]check{natsCheck(map[string]*nats.Conn{"": r.nc})}, func() map[string]any {
		return map[string]any{healthAuditOutbox: map[string]int{"pending": r.admin.PendingEvents()}}
	}))
	newHookProxy(r.admin, r.guard, r.log) // endpoint checks and /health on create and enable
	r.admin.Register(app, r.limit)
	r.sw.open(app)
	return <-r.served
}

// runToolRunner is the production tool runner role: the tool runner API,
// hooks from the control-plane state, execution events to the stream.
func runToolRunner(ctx context.Context, args []string) error {
	var outboxDir, pageKeys *string
	var mf mcpFlags
	r, _, err := startAdminRole(ctx, "toolrunner", "127.0.0.1:8083", toolLimit, args, func(fs *cli.Flags) {
		mf = addMCPFlags(fs)
		outboxDir = fs.String("outbox", "", "./outbox", "directory of the durable outbox of execution events (one process each; events kept while NATS is unreachable are published from it)")
		pageKeys = fs.String("page-token-keys", "", "", "keys that sign the toolkits' pagination tokens, comma-separated base64 of at least 16 bytes, the first signs, all verify (required; give every instance the same keys)")
	})
	if err != nil {
		return err
	}
	defer r.stop()
	pageTokenKeys, err := keyList("page-token-keys", *pageKeys, "", "", 0)
	if err != nil {
		return err
	}
	mcpConfig, err := mf.config(r.publicURL)
	if err != nil {
		return err
	}
	outbox, stopOutbox, err := executionOutbox(*outboxDir, r.pub, r.log)
	if err != nil {
		return err
	}
	defer stopOutbox()
	reg, closeToolkits := toolkits(r.guard, r.admin, pageTokenKeys, r.log)
	defer closeToolkits()
	runner, proxy := newToolRunner(reg, r.admin, outbox, r.guard, r.log)
	observeToolRunner(r.m, runner, proxy, outbox)
	app := httpapi.NewApp(r.log)
	observeApp(r.m, app)
	app.Get("/healthz", healthHandler([]check{natsCheck(map[string]*nats.Conn{"": r.nc})}, func() map[string]any {
		return map[string]any{healthHooks: proxy.Stats(), healthExecutionOutbox: outbox.Stats()}
	}))
	if err := registerTools(ctx, app, runner, r.cp.access, r.cp.proxies, mcpConfig, r.log, r.limit); err != nil {
		return err
	}
	r.sw.open(app)
	return <-r.served
}

// defaultGCPercent is the GOGC of the ingest role. Its live heap is the
// batches in flight, which the default 100 made it collect several times
// per batch (15% of its CPU); the memory limit bounds the heap instead.
const defaultGCPercent = 400

// setGC sets GOGC and a soft memory limit for the ingest role, each unless
// its environment variable (GOGC, GOMEMLIMIT) is set: with a higher GOGC the
// collector runs less often, and the limit, derived from what the batches
// in flight hold (ingest.Config.MemoryLimit), keeps the heap, and so the
// RSS, bounded all the same.
func setGC(cfg ingest.Config, percent int, limit int64, log *slog.Logger) {
	if _, ok := os.LookupEnv("GOGC"); !ok {
		debug.SetGCPercent(percent)
	}
	if _, ok := os.LookupEnv("GOMEMLIMIT"); !ok {
		if limit == 0 {
			limit = cfg.MemoryLimit()
		}
		debug.SetMemoryLimit(limit)
	}
	gogc := debug.SetGCPercent(-1)
	debug.SetGCPercent(gogc)
	log.Info("garbage collector", "gogc", gogc, "memory_limit_mib", debug.SetMemoryLimit(-1)>>20)
}
