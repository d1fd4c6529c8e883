package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/auditrail/auditrail/controlplane"
	"github.com/auditrail/auditrail/deliver"
	"github.com/auditrail/auditrail/demo"
	"github.com/auditrail/auditrail/hookproxy"
	"github.com/auditrail/auditrail/ingest"
	"github.com/auditrail/auditrail/internal/auditstore/clickhouse"
	"github.com/auditrail/auditrail/internal/cli"
	"github.com/auditrail/auditrail/internal/egress"
	"github.com/auditrail/auditrail/internal/httpapi"
	"github.com/auditrail/auditrail/internal/metrics"
	"github.com/auditrail/auditrail/internal/natsx"
	"github.com/auditrail/auditrail/internal/redact"
	"github.com/auditrail/auditrail/producers"
	"github.com/auditrail/auditrail/query"
	"github.com/auditrail/auditrail/query/dashboard"
	"github.com/auditrail/auditrail/schemas"
	"github.com/auditrail/auditrail/toolrunner"
	"github.com/auditrail/auditrail/toolrunner/mcpserver"
)

// natsFlags are the NATS flags of every role.
type natsFlags struct {
	url, creds *string
	credsPoll  *time.Duration
	// maxAge is nil on the roles that do not create the streams.
	maxAge *time.Duration
	tls    natsTLSFlags
	// replicas is nil on the roles that create neither streams nor buckets.
	replicas *int
}

// natsTLSFlags are the PEM files of the TLS connection to NATS.
type natsTLSFlags struct{ ca, cert, key *string }

func addNATSTLSFlags(fs *cli.Flags) natsTLSFlags {
	return natsTLSFlags{
		ca:   fs.String("nats-tls-ca", "AUDITRAIL_NATS_TLS_CA", "", "PEM file of the CA that signed the NATS servers' certificates (turns TLS on; empty with a tls:// URL: the system's roots)"),
		cert: fs.String("nats-tls-cert", "AUDITRAIL_NATS_TLS_CERT", "", "PEM file of this role's client certificate, for NATS servers that verify clients (with --nats-tls-key)"),
		key:  fs.String("nats-tls-key", "AUDITRAIL_NATS_TLS_KEY", "", "PEM file of the key of --nats-tls-cert"),
	}
}

func (f natsTLSFlags) files() natsx.TLSFiles {
	return natsx.TLSFiles{CA: *f.ca, Cert: *f.cert, Key: *f.key}
}

// addNATSFlags adds --nats-url and --nats-creds, and --stream-max-age when
// the role creates the streams (controlplane, dev).
func addNATSFlags(fs *cli.Flags, defURL string, createsStreams bool) natsFlags {
	f := natsFlags{
		url:   fs.String("nats-url", "", defURL, "NATS server URL"),
		creds: fs.String("nats-creds", "", "", "NATS credentials file of this role (written by auditrail dev in DATA/nats, or by auditrail nats-setup; read again when it changes)"),
	}
	f.credsPoll = fs.Duration("nats-creds-poll", "", natsx.CredsPollInterval, "how often the credentials file is looked at; a change reconnects with the new credentials (rotation without a restart)")
	f.tls = addNATSTLSFlags(fs)
	if createsStreams {
		f.maxAge = fs.Duration("stream-max-age", "", 0, "retention of AUDITRAIL_EVENTS (0 keeps events until removed by hand)")
	}
	return f
}

// withReplicas adds --nats-replicas, for the roles that create streams or
// KV buckets.
func (f natsFlags) withReplicas(fs *cli.Flags) natsFlags {
	f.replicas = fs.Int("nats-replicas", "", 1, "replicas of every stream and KV bucket this role creates, 1..5 (3 in a JetStream cluster); an existing one is raised or lowered to it")
	return f
}

// replicaCount is --nats-replicas (1 where the role has no such flag).
func (f natsFlags) replicaCount() int {
	if f.replicas == nil {
		return 1
	}
	return *f.replicas
}

// connect dials NATS with the role's credentials.
func (f natsFlags) connect(name string, log *slog.Logger) (*nats.Conn, error) {
	if err := natsx.ValidateReplicas(f.replicaCount()); err != nil {
		return nil, cli.UsageErrorf("--nats-replicas: %v", err)
	}
	opts, err := f.tls.files().Options()
	if err != nil {
		return nil, cli.Usage(err)
	}
	f.setCredsPoll()
	return natsx.Connect(*f.url, name, *f.creds, log, opts...)
}

// setCredsPoll applies --nats-creds-poll (one setting per process).
func (f natsFlags) setCredsPoll() {
	if *f.credsPoll > 0 {
		natsx.CredsPollInterval = *f.credsPoll
	}
}

// ensureStreams creates or updates the event and dead-letter streams with
// replicas each: only the roles allowed to (controlplane, dev) do.
func ensureStreams(ctx context.Context, nc *nats.Conn, maxAge time.Duration, replicas int) error {
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	cfg := natsx.DefaultStreamConfig()
	cfg.MaxAge = maxAge
	cfg.Replicas = replicas
	sctx, cancel := context.WithTimeout(ctx, natsAttemptTimeout)
	defer cancel()
	return natsx.EnsureStreams(sctx, js, cfg)
}

// natsAttemptTimeout bounds one attempt to create or update streams and
// buckets; the callers retry. On a JetStream cluster, two instances
// creating the same replicated stream at once may both wait for an answer
// that never comes although the stream is made: a bounded attempt lets the
// next one find it.
const natsAttemptTimeout = 10 * time.Second

// waitStreams waits until the controlplane role has created the streams
// (all when names is empty).
func waitStreams(ctx context.Context, nc *nats.Conn, log *slog.Logger, names ...string) error {
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	return natsx.WaitStreams(ctx, js, log, names...)
}

// runDev runs every role in one process: embedded NATS (unless
// --nats-url) and SQLite (unless --clickhouse), the control plane, the
// tool runner, ingest and the query API on one listener, until ctx ends;
// then it drains them in order.
func runDev(ctx context.Context, args []string) error {
	f, err := parseDevFlags(args)
	if err != nil {
		return err
	}
	d := &devProcess{f: f}
	defer d.close()
	steps := []func(context.Context) error{
		d.prepare,
		d.startNATS,
		d.openStore,
		d.startControlPlane,
		d.startToolRunner,
		d.startIngest,
		d.startDeliver,
		d.startTLog,
		d.buildAPI,
		d.startDemo,
	}
	for _, step := range steps {
		if err := step(ctx); err != nil {
			return err
		}
	}
	return d.serve(ctx)
}

// devFlags are the flags of `auditrail dev`.
type devFlags struct {
	http, natsListen, data, clickhouse     *string
	chCreds                                chCredsFlags
	chCluster                              *string
	nats                                   natsFlags
	access                                 accessFlags
	cursorKeys, pageTokenKeys, secretsKeys *string
	rate, adminRate, toolRate              *string
	reads                                  readFlags
	ingest                                 ingest.Config
	deliver                                deliver.Config
	tlog                                   tlogFlags
	demo, newKey, allowPrivate             *bool
	publicURL                              *string
	mcp                                    mcpFlags
	mcpConfig                              mcpserver.Config
	streamKey                              *string // with --nats-url
	metrics                                *string
	log                                    *slog.Logger
}

// parseDevFlags parses the command line of dev and makes its logger.
func parseDevFlags(args []string) (devFlags, error) {
	fs := cli.NewFlags("auditrail dev")
	f := devFlags{
		http:       fs.String("http", "", "127.0.0.1:8080", "one listener for every HTTP API and the dashboard (/dashboard/)"),
		natsListen: fs.String("nats-listen", "", "127.0.0.1:4222", "client port of the embedded NATS server"),
		nats:       addNATSFlags(fs, "", true).withReplicas(fs),
		data:       fs.String("data", "", "./data", "JetStream store and embedded audit store"),
		clickhouse: fs.String("clickhouse", "AUDITRAIL_CLICKHOUSE_DSN", "", "clickhouse://host:9000/db: store in ClickHouse instead of SQLite"),
		chCreds:    addClickHouseCredsFlags(fs),
		chCluster:  addClusterFlag(fs),
		access:     addAccessFlags(fs),
	}
	f.cursorKeys = fs.String("cursor-keys", "", "", "cursor signing keys, comma-separated base64, the first signs (default: generated and kept in DATA)")
	f.pageTokenKeys = fs.String("page-token-keys", "", "", "keys that sign the toolkits' pagination tokens, comma-separated base64 of at least 16 bytes, the first signs (default: generated and kept in DATA)")
	f.secretsKeys = fs.String("secrets-keys", "", "", "keys that encrypt secrets at rest, comma-separated base64 of 32 bytes, the first seals (default: generated and kept in DATA)")
	f.rate, f.adminRate, f.toolRate = auditLimit.add(fs), adminLimit.add(fs), toolLimit.add(fs)
	f.reads = addReadFlags(fs)
	f.ingest = ingest.DefaultConfig()
	f.ingest.RegisterFlags(fs)
	df := addDeliverFlags(fs)
	f.tlog = addTLogFlags(fs)
	f.demo = fs.Bool("demo", "", false, "start a MongoDB-wire server with sample data, the OAuth provider emulator, and a demo organization, project, user (connected to the google and microsoft providers) and key, and print them")
	f.publicURL = addPublicURLFlag(fs, "")
	f.mcp = addMCPFlags(fs)
	f.newKey = fs.Bool("new-key", "", false, "with --demo: mint and print a new demo API key (a restart otherwise reuses the one printed at the first start)")
	f.allowPrivate = addEgressFlag(fs)
	f.streamKey = addStreamKeyFlag(fs)
	f.metrics = addMetricsFlag(fs)
	mkLog := fs.LogFlags("text")
	if err := fs.Parse(args); err != nil {
		return f, err
	}
	var err error
	if f.log, err = mkLog(os.Stderr); err != nil {
		return f, err
	}
	if *f.clickhouse, err = f.chCreds.withCredentials(*f.clickhouse); err != nil {
		return f, err
	}
	if err := f.ingest.Validate(); err != nil {
		return f, cli.Usage(err)
	}
	if *f.chCluster != "" && *f.clickhouse == "" {
		return f, cli.UsageErrorf("--clickhouse-cluster needs --clickhouse")
	}
	if err := clickhouse.ValidateCluster(*f.chCluster); err != nil {
		return f, cli.Usage(err)
	}
	if f.deliver, err = df.config(); err != nil {
		return f, err
	}
	f.deliver.Replicas = f.nats.replicaCount()
	if *f.publicURL == "" {
		*f.publicURL = clientURL(*f.http)
	}
	if f.mcpConfig, err = f.mcp.config(*f.publicURL); err != nil {
		return f, err
	}
	return f, nil
}

// devProcess is what runDev has started; close stops it in reverse order.
type devProcess struct {
	f       devFlags
	closers []func()
	m       *metrics.Registry // nil without --metrics

	ns      *server.Server
	stream  *natsx.StreamSigner // signs stream credentials (embedded NATS)
	url     string              // of NATS
	credsOf func(string) string // NATS credentials file by role
	conns   map[string]*nats.Conn

	store    *pendingStore
	storeErr chan error // the store could not be opened (ClickHouse)

	// bg is the life of the control-plane mirror and the limiters, which
	// last until the process drains.
	bg            context.Context
	stopBG        context.CancelFunc
	cp            *controlPlane
	admin         *controlplane.Service
	pub           *producers.Publisher // the control plane's: admin changes and exports
	guard         *egress.Guard
	reg           *toolrunner.Registry
	outbox        *producers.Outbox
	runner        *toolrunner.Runner
	proxy         *hookproxy.Proxy
	pageTokenKeys [][]byte

	in         *ingest.Ingester[schemas.AuditEvent]
	inExec     *ingest.Ingester[schemas.ExecutionEvent]
	stopIngest context.CancelFunc
	ingestDone chan error         // one value per consumer
	stopLive   context.CancelFunc // ends the live streams

	deliverer   *deliver.Deliverer
	stopDeliver func() // ends the delivery and waits for it
	stopTLog    func() // ends the sequencer and the checkpointer and waits

	app *fiber.App
}

// later adds fn to what close runs, last first.
func (d *devProcess) later(fn func()) { d.closers = append(d.closers, fn) }

// close runs the closers, last added first.
func (d *devProcess) close() {
	for i := len(d.closers) - 1; i >= 0; i-- {
		d.closers[i]()
	}
}

// prepare makes and locks the data directory and checks the listeners.
func (d *devProcess) prepare(ctx context.Context) error {
	if err := os.MkdirAll(*d.f.data, 0o755); err != nil {
		return fmt.Errorf("data dir: %w", err)
	}
	unlock, err := lockDataDir(*d.f.data)
	if err != nil {
		return err
	}
	d.later(unlock)
	if err := cli.CheckFree("--http", *d.f.http); err != nil {
		return err
	}
	if d.m, err = startMetrics(ctx, *d.f.metrics, d.f.log); err != nil {
		return err
	}
	if *d.f.nats.url == "" {
		return cli.CheckFree("--nats-listen", *d.f.natsListen)
	}
	return nil
}

// startNATS starts the embedded NATS server unless --nats-url, in operator
// mode, and connects each in-process role with its own credentials
// (DATA/nats/<role>.creds), so that every role runs with the permissions
// it has in production; then it creates the streams.
func (d *devProcess) startNATS(ctx context.Context) error {
	d.url = *d.f.nats.url
	d.credsOf = func(string) string { return *d.f.nats.creds }
	if d.url == "" {
		keysDir := filepath.Join(*d.f.data, "nats")
		auth, err := natsx.LoadOrCreateAuth(keysDir)
		if err != nil {
			return err
		}
		if err := auth.WriteCreds(keysDir); err != nil {
			return err
		}
		d.credsOf = func(role string) string { return natsx.CredsFile(keysDir, role) }
		d.stream = auth.StreamSigner()
		scfg := natsx.DefaultServerConfig()
		scfg.Listen = *d.f.natsListen
		scfg.StoreDir = filepath.Join(*d.f.data, "jetstream")
		scfg.Auth = auth
		ns, err := natsx.StartServer(scfg)
		if err != nil {
			return err
		}
		d.ns = ns
		d.later(func() {
			ns.Shutdown()
			ns.WaitForShutdown()
		})
		d.url = ns.ClientURL()
		fmt.Fprintf(os.Stdout, "nats credentials (admin: emit, tail, the nats CLI): %s\n", d.credsOf(natsx.RoleAdmin))
	}
	d.f.nats.setCredsPoll()
	var opts []nats.Option
	if d.ns == nil { // an external server: TLS as asked
		var err error
		if opts, err = d.f.nats.tls.files().Options(); err != nil {
			return cli.Usage(err)
		}
	}
	d.conns = map[string]*nats.Conn{}
	for _, role := range []string{natsx.RoleControlPlane, natsx.RoleToolRunner, natsx.RoleIngest, natsx.RoleQuery, natsx.RoleDeliver, natsx.RoleTLog} {
		c, err := natsx.Connect(d.url, "auditrail-dev-"+role, d.credsOf(role), d.f.log.With("nats_role", role), opts...)
		if err != nil {
			return err
		}
		d.later(c.Close)
		d.conns[role] = c
	}
	return ensureStreams(ctx, d.conns[natsx.RoleControlPlane], *d.f.nats.maxAge, d.f.nats.replicaCount())
}

// openStore opens the audit store: SQLite at once (its errors are not
// transient); ClickHouse is retried in the background until it answers,
// while HTTP serves and /healthz says 503.
func (d *devProcess) openStore(ctx context.Context) error {
	d.store = newPendingStore()
	d.later(func() { _ = d.store.Close() })
	d.storeErr = make(chan error, 1)
	if *d.f.clickhouse == "" {
		s, err := openStore(ctx, storeTarget{dataDir: *d.f.data}, d.f.log)
		if err != nil {
			return err
		}
		d.store.set(s)
		return nil
	}
	go func() {
		if err := d.store.openWithRetry(ctx, storeTarget{dsn: *d.f.clickhouse, cluster: *d.f.chCluster}, d.f.log); err != nil && ctx.Err() == nil {
			d.storeErr <- err
		}
	}()
	return nil
}

// startControlPlane opens the control-plane mirror and the admin service
// with its OAuth flows.
func (d *devProcess) startControlPlane(ctx context.Context) error {
	bg, stopBG := context.WithCancel(context.WithoutCancel(ctx))
	d.bg, d.stopBG = bg, stopBG
	d.later(stopBG)
	nc := d.conns[natsx.RoleControlPlane]
	var err error
	if d.cp, err = openControlPlane(bg, nc, d.f.access, *d.f.data, false, d.f.nats.replicaCount(), d.f.log); err != nil {
		return err
	}
	if d.pub, err = producers.New(nc, producers.DefaultConfig(), d.f.log); err != nil {
		return err
	}
	if d.admin, err = d.cp.adminService(d.pub, *d.f.secretsKeys, *d.f.data, d.f.log); err != nil {
		return err
	}
	if d.guard, err = newEgress(*d.f.allowPrivate, true, d.f.log); err != nil {
		return err
	}
	if d.stream != nil {
		err = useStreamCredentials(bg, d.admin, d.stream, nc, d.f.log)
	} else {
		err = loadStreamCredentials(bg, d.admin, *d.f.streamKey, nc, d.f.log)
	}
	if err != nil {
		return err
	}
	return useOAuth(d.admin, *d.f.publicURL, d.guard)
}

// startToolRunner builds the toolkits, the durable outbox of execution
// events and the tool runner with its hooks.
func (d *devProcess) startToolRunner(context.Context) error {
	var err error
	if d.pageTokenKeys, err = keyList("page-token-keys", *d.f.pageTokenKeys, *d.f.data, pageTokenKeyFile, 0); err != nil {
		return err
	}
	reg, closeToolkits := toolkits(d.guard, d.admin, d.pageTokenKeys, d.f.log)
	d.reg = reg
	d.later(closeToolkits)
	execPub, err := producers.New(d.conns[natsx.RoleToolRunner], producers.DefaultConfig(), d.f.log)
	if err != nil {
		return err
	}
	outbox, stopOutbox, err := executionOutbox(filepath.Join(*d.f.data, "outbox", "execution"), execPub, d.f.log)
	if err != nil {
		return err
	}
	d.outbox = outbox
	d.later(stopOutbox)
	d.runner, d.proxy = newToolRunner(reg, d.admin, outbox, d.guard, d.f.log)
	observeToolRunner(d.m, d.runner, d.proxy, d.outbox)
	return nil
}

// startIngest starts the audit and execution consumers once the store is
// ready; each sends its end on ingestDone.
func (d *devProcess) startIngest(ctx context.Context) error {
	nc := d.conns[natsx.RoleIngest]
	var err error
	if d.in, err = ingest.NewAudit(nc, d.store, d.f.ingest, d.f.log); err != nil {
		return err
	}
	ecfg := d.f.ingest
	ecfg.Durable = ingest.ExecutionDurable
	if d.inExec, err = ingest.NewExecution(nc, d.store, ecfg, d.f.log); err != nil {
		return err
	}
	if err := observeIngest(d.m, nc, d.in, d.inExec, d.f.ingest.Durable, ecfg.Durable); err != nil {
		return err
	}
	ictx, stopIngest := context.WithCancel(context.WithoutCancel(ctx))
	d.stopIngest = stopIngest
	d.later(stopIngest)
	d.ingestDone = make(chan error, 2)
	go func() {
		select {
		case <-d.store.Ready():
		case <-ictx.Done():
			d.ingestDone <- nil
			d.ingestDone <- nil
			return
		}
		go func() { d.ingestDone <- d.in.Run(ictx) }()
		d.ingestDone <- d.inExec.Run(ictx)
	}()
	return nil
}

// startDeliver starts the delivery role (push destinations) with its own
// NATS credentials over the control plane's mirror of the state.
func (d *devProcess) startDeliver(ctx context.Context) error {
	keys, err := keyList("secrets-keys", *d.f.secretsKeys, *d.f.data, secretsKeyFile, 32)
	if err != nil {
		return err
	}
	if d.deliverer, err = newDeliverer(d.conns[natsx.RoleDeliver], d.cp.state, keys, d.guard, d.f.deliver, d.f.log); err != nil {
		return err
	}
	observeDeliver(d.m, d.deliverer)
	dctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := d.deliverer.Run(dctx); err != nil {
			d.f.log.Error("deliver", "err", err)
		}
	}()
	var once sync.Once
	d.stopDeliver = func() { once.Do(func() { cancel(); <-done }) }
	d.later(d.stopDeliver)
	return nil
}

// startTLog starts the tamper-evidence logs (the sequencer and the
// checkpointer) with the tlog role's credentials once the store answers.
func (d *devProcess) startTLog(ctx context.Context) error {
	keys, err := keyList("secrets-keys", *d.f.secretsKeys, *d.f.data, secretsKeyFile, 32)
	if err != nil {
		return err
	}
	cfg, err := d.f.tlog.config("dev")
	if err != nil {
		return err
	}
	tctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	go func() {
		defer close(done)
		select {
		case <-d.store.Ready():
		case <-tctx.Done():
			return
		}
		t, err := startTLog(tctx, d.conns[natsx.RoleTLog], d.store, keys, cfg, d.f.nats.replicaCount(), d.f.ingest.Durable, d.m, d.f.log)
		if err != nil {
			d.f.log.Error("tlog", "err", err)
			return
		}
		<-tctx.Done()
		if err := t.stop(); err != nil {
			d.f.log.Warn("tlog", "err", err)
		}
	}()
	var once sync.Once
	d.stopTLog = func() { once.Do(func() { cancel(); <-done }) }
	d.later(d.stopTLog)
	return nil
}

// buildAPI puts /healthz and the query, admin and tool runner APIs, each
// with its rate limit, on one app.
func (d *devProcess) buildAPI(ctx context.Context) error {
	keys, err := keyList("cursor-keys", *d.f.cursorKeys, *d.f.data, cursorKeyFile, 0)
	if err != nil {
		return err
	}
	limiter, err := rateLimiter(d.bg, d.conns[natsx.RoleQuery], auditLimit, d.f.nats.replicaCount(), *d.f.rate, d.f.log)
	if err != nil {
		return err
	}
	adminLimiter, err := rateLimiter(d.bg, d.conns[natsx.RoleControlPlane], adminLimit, d.f.nats.replicaCount(), *d.f.adminRate, d.f.log)
	if err != nil {
		return err
	}
	toolLimiter, err := rateLimiter(d.bg, d.conns[natsx.RoleToolRunner], toolLimit, d.f.nats.replicaCount(), *d.f.toolRate, d.f.log)
	if err != nil {
		return err
	}
	qcfg, err := d.f.reads.queryConfig(keys, d.cp.proxies)
	if err != nil {
		return err
	}
	qs, err := query.New(qcfg, d.store, d.cp.access, d.f.log)
	if err != nil {
		return err
	}
	qs.RecordExportsWith(producers.NewRecorder(d.pub, 5*time.Second)) // each bulk read leaves an audit event
	// Live streams follow the event stream with the query role's
	// credentials until ctx ends (a signal), before HTTP drains.
	liveCtx, stopLive := context.WithCancel(ctx)
	d.stopLive = stopLive
	d.later(stopLive)
	if err := d.f.reads.serveLive(liveCtx, qs, d.conns[natsx.RoleQuery]); err != nil {
		return err
	}
	if err := serveAuditKeys(qs, d.conns[natsx.RoleQuery]); err != nil {
		return err
	}
	if err := serveFeeds(qs, d.conns[natsx.RoleQuery], ingest.DefaultConfig().Durable); err != nil {
		return err
	}
	log, proxies := d.f.log, d.cp.proxies
	d.app = httpapi.NewApp(log)
	observeApp(d.m, d.app)
	observeAuditOutbox(d.m, d.admin)
	cs := ingestConsumers(d.in, d.inExec)
	d.app.Get("/healthz", healthHandler(append(roleChecks(d.conns, d.store, cs), deliverCheck(d.deliverer)), func() map[string]any {
		return cs.counters(map[string]any{healthHooks: d.proxy.Stats(), healthExecutionOutbox: d.outbox.Stats(), healthAuditOutbox: map[string]int{"pending": d.admin.PendingEvents()},
			healthDeliver: d.deliverer.Stats()})
	}))
	qs.Register(d.app, httpapi.RateLimit(limiter, proxies, log))
	d.admin.Register(d.app, httpapi.RateLimit(adminLimiter, proxies, log))
	if err := registerTools(ctx, d.app, d.runner, d.cp.access, proxies, d.f.mcpConfig, log, httpapi.RateLimit(toolLimiter, proxies, log)); err != nil {
		return err
	}
	dashboard.Register(d.app)
	return nil
}

// startDemo, with --demo, starts the demo's servers (auditrail-demo) and
// sets up the demo organization.
func (d *devProcess) startDemo(ctx context.Context) error {
	if !*d.f.demo {
		return nil
	}
	env := demo.Env{API: strings.TrimSuffix(*d.f.publicURL, "/"), BootKey: d.cp.freshBootKey, Scopes: providerScopes(d.reg),
		TrustPickerScripts: d.admin.TrustPickerScripts}
	if d.ns != nil {
		env.NATS = d.ns.ClientURL()
		var err error
		if env.AdminCreds, err = filepath.Abs(d.credsOf(natsx.RoleAdmin)); err != nil {
			return err
		}
	}
	exe, err := demo.ServersBinary()
	if err != nil {
		return err
	}
	stopDemo, err := demo.Start(ctx, demo.Config{App: d.app, Access: d.cp.access, DataDir: *d.f.data, NewKey: *d.f.newKey,
		Env: env, ServersBinary: exe, Out: os.Stdout, Log: d.f.log})
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	d.later(stopDemo)
	return nil
}

// serve serves HTTP until ctx ends (or the store or ingest fails), then
// drains in order: HTTP is done; ingest commits the batch in hand; the
// control-plane watches and limiters end; then the connections drain, and
// the store, NATS and the embedded server close (close).
func (d *devProcess) serve(ctx context.Context) error {
	storeName := "sqlite " + filepath.Join(*d.f.data, "audit.db")
	if *d.f.clickhouse != "" {
		storeName = "clickhouse " + redact.URL(*d.f.clickhouse)
	}
	fmt.Fprintf(os.Stdout, "auditrail dev: http://%s  nats %s  store %s\n", *d.f.http, redact.URL(d.url), storeName)
	fmt.Fprintf(os.Stdout, "dashboard: %s%s (sign in with an API key)\n", strings.TrimSuffix(*d.f.publicURL, "/"), dashboard.Path)

	log := d.f.log
	errc := make(chan error, 1)
	go func() { errc <- serve(ctx, d.app, *d.f.http, log) }()
	var err error
	select {
	case err = <-errc: // HTTP ended: a signal drained it, or it failed to listen
	case err = <-d.storeErr:
		d.stopLive()
		_ = d.app.ShutdownWithTimeout(5 * time.Second)
		return err
	case err = <-d.ingestDone:
		if err == nil {
			err = errors.New("ingest stopped")
		}
		d.stopLive()
		_ = d.app.ShutdownWithTimeout(5 * time.Second)
		return fmt.Errorf("ingest: %w", err)
	}
	d.stopIngest()
	for range 2 {
		if ierr := <-d.ingestDone; ierr != nil {
			log.Warn("ingest", "err", ierr)
		}
	}
	d.stopDeliver()
	d.stopTLog()
	if err != nil {
		return err
	}
	d.stopBG()
	for _, c := range d.conns {
		_ = c.Drain()
	}
	log.Info("auditrail dev stopped", healthIngestAudit, d.in.Stats(), healthIngestExecutions, d.inExec.Stats())
	return nil
}
