package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/auditrail/auditrail/controlplane"
	"github.com/auditrail/auditrail/controlplane/cpstate"
	"github.com/auditrail/auditrail/deliver"
	"github.com/auditrail/auditrail/demo"
	"github.com/auditrail/auditrail/evidence/checkpointer"
	"github.com/auditrail/auditrail/hookproxy"
	"github.com/auditrail/auditrail/ingest"
	"github.com/auditrail/auditrail/internal/auditstore/backend"
	"github.com/auditrail/auditrail/internal/cli"
	"github.com/auditrail/auditrail/internal/datadir"
	"github.com/auditrail/auditrail/internal/egress"
	"github.com/auditrail/auditrail/internal/httpapi"
	"github.com/auditrail/auditrail/internal/metrics"
	"github.com/auditrail/auditrail/internal/modules"
	"github.com/auditrail/auditrail/internal/natsx"
	"github.com/auditrail/auditrail/internal/ratelimit"
	"github.com/auditrail/auditrail/internal/redact"
	"github.com/auditrail/auditrail/lifecycle"
	"github.com/auditrail/auditrail/producers"
	"github.com/auditrail/auditrail/query"
	"github.com/auditrail/auditrail/query/dashboard"
	"github.com/auditrail/auditrail/schemas"
	"github.com/auditrail/auditrail/toolrunner"
	"github.com/auditrail/auditrail/toolrunner/mcpserver"
	"github.com/auditrail/auditrail/toolrunner/platform"
)

// The modules of a process, by name. A production role runs its module
// and what that needs; dev runs all of them (allModules), over the same
// definitions (newModules).
const (
	modData       = "data"         // dev: the locked DATA directory
	modMetrics    = "metrics"      // --metrics
	modNATS       = "nats"         // the connections (dev: the embedded server too)
	modListen     = "listen"       // the HTTP listener: 503 naming what the process waits for, until open
	modStreams    = "streams"      // the event streams: created (controlplane, dev) or waited for
	modStore      = "store"        // the audit store, opened in the background until it answers
	modState      = "state"        // the control-plane state mirror and the caller authentication
	modAdmin      = "admin"        // the admin service, its OAuth flows and the hook client
	modAdminAPI   = "admin-api"    // the admin API's routes (controlplane)
	modToolRunner = "toolrunner"   // the toolkits, the runner, its API and MCP endpoint
	modIngest     = "ingest"       // the audit and execution consumers into the store
	modDeliver    = "deliver"      // the push destinations
	modTLog       = "tlog"         // the tamper-evidence logs: the sequencer and the checkpointer
	modLifecycle  = "lifecycle"    // the retention cycles
	modQuery      = "query"        // the audit API, its live streams and feeds, the dashboard
	modDemo       = "demo"         // dev --demo: the demo tenant and its servers
	modOpen       = "open"         // hands the requests to the process's routes; HTTP drains first
	modAll        = "all-services" // every service (dev)
)

// allModules are the services of dev, in the order they start when
// nothing else orders them.
var allModules = []string{modAdminAPI, modToolRunner, modIngest, modDeliver, modTLog, modLifecycle, modQuery, modDemo}

// settings are what a process's command line says: what its modules read.
// A flag the command lacks leaves its field at its zero value.
type settings struct {
	name string // the command: the NATS connection is "auditrail-"+name
	dev  bool   // every module on embedded defaults, keys kept in DATA
	log  *slog.Logger

	metrics, http, publicURL string
	// dataDir is dev's DATA (keys, the bootstrap key, the demo); natsListen
	// its embedded server's port.
	dataDir, natsListen string
	nats                cli.NATSFlags
	// waitStreams are the streams a role that does not create them waits
	// for (nil: none; empty: every stream).
	waitStreams []string
	store       backend.Target
	// deliverProofs: the delivery module reads the store to prove its JSON
	// batches (dev; deliver with --clickhouse).
	deliverProofs bool
	// access authenticates callers (nil: the process serves no API).
	access *accessFlags
	// writesState: the process writes the control-plane state and creates
	// the streams (controlplane, dev).
	writesState                            bool
	secretsKeys, cursorKeys, pageTokenKeys string
	limits                                 map[limitFamily]*string
	reads                                  readFlags
	ingest                                 ingest.Config
	deliver                                deliver.Config
	tlog                                   checkpointer.Config
	lifecycle                              lifecycle.Config
	mcp                                    mcpserver.Config
	allowPrivate                           bool
	streamKey, outboxDir                   string
	demo, newKey                           bool
}

// The query role finds its log routes by this interface: a method missing
// from the store would turn them off.
var _ query.LogReader = (*backend.Pending)(nil)

// process is one running auditrail: what its modules share.
type process struct {
	s settings
	m *metrics.Registry // nil without --metrics

	unlock func()        // of DATA (dev)
	demo   *demo.Servers // dev --demo: the demo's servers

	ns      *server.Server      // the embedded NATS server (dev)
	signer  *natsx.StreamSigner // signs stream credentials (embedded NATS)
	natsURL string
	conns   map[string]*nats.Conn // by role (dev); one under "" otherwise

	sw       *httpapi.StartWait
	app      *fiber.App
	served   <-chan error
	stopHTTP context.CancelFunc

	mu     sync.Mutex
	checks []check
	extras []func(map[string]any)

	store     *backend.Pending
	storeErr  chan error
	bg        context.Context // the life of the state mirror and the limiters
	stopBG    context.CancelFunc
	cp        *controlPlane
	state     *cpstate.State // deliver without access
	pub       *producers.Publisher
	admin     *controlplane.Service
	guard     *egress.Guard
	proxy     *hookproxy.Proxy
	reg       *toolrunner.Registry
	outbox    *producers.Outbox
	in        *ingest.Ingester[schemas.AuditEvent]
	inExec    *ingest.Ingester[schemas.ExecutionEvent]
	deliverer *deliver.Deliverer
}

// conn is the NATS connection of role: its own in dev, the process's
// otherwise.
func (p *process) conn(role string) *nats.Conn {
	if c, ok := p.conns[role]; ok {
		return c
	}
	return p.conns[""]
}

// addHealth adds a readiness check and, when extra is set, counters to
// /healthz.
func (p *process) addHealth(c *check, extra func(map[string]any)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if c != nil {
		p.checks = append(p.checks, *c)
	}
	if extra != nil {
		p.extras = append(p.extras, extra)
	}
}

// health answers /healthz from the checks and counters the modules added.
func (p *process) health(c *fiber.Ctx) error {
	p.mu.Lock()
	checks, extras := slices.Clone(p.checks), slices.Clone(p.extras)
	p.mu.Unlock()
	return healthHandler(checks, func() map[string]any {
		m := map[string]any{}
		for _, e := range extras {
			e(m)
		}
		return m
	})(c)
}

// limiter builds the rate limiter of an API family, waiting for its bucket.
func (p *process) limiter(ctx context.Context, f limitFamily, role string) (fiber.Handler, error) {
	var l *ratelimit.Limiter
	if err := p.sw.Until(ctx, "the rate-limit bucket "+f.bucket, func(context.Context) (err error) {
		l, err = rateLimiter(p.bg, p.conn(role), f, p.s.nats.Replicas(), *p.s.limits[f], p.s.log)
		return err
	}); err != nil {
		return nil, err
	}
	return httpapi.RateLimit(l, p.cp.proxies, p.s.log), nil
}

// keys are the keys of flag: given, or (dev) kept in DATA/file.
func (p *process) keys(flag, given, file string, exact int) ([][]byte, error) {
	return datadir.Keys(flag, given, p.s.dataDir, file, exact)
}

// run starts the targets' modules and runs them until ctx ends or one
// fails, then stops them in the reverse order.
func (p *process) run(ctx context.Context, targets ...string) error {
	// A CPU profile of the whole process, every role it runs (dev's
	// included), written when it stops: where its CPU per event goes.
	if name := os.Getenv("AUDITRAIL_CPUPROFILE"); name != "" {
		stop, err := cli.StartCPUProfile(name)
		if err != nil {
			return err
		}
		defer stop()
	}
	err := p.modules().Run(ctx, append(targets, modOpen)...)
	if p.demo != nil {
		p.demo.Stop()
	}
	return err
}

// modules are every module of auditrail over p.
func (p *process) modules() *modules.Set {
	s, log := &p.s, p.s.log
	set := modules.Set{Log: log}
	set.Add(modules.Module{Name: modData,
		Start: func(context.Context) error {
			if s.dataDir == "" {
				return nil
			}
			if err := os.MkdirAll(s.dataDir, 0o755); err != nil {
				return fmt.Errorf("data dir: %w", err)
			}
			unlock, err := datadir.Lock(s.dataDir)
			p.unlock = unlock
			if err != nil {
				return err
			}
			if s.dev && *s.nats.URL == "" {
				if err := cli.CheckFree("--nats-listen", s.natsListen); err != nil {
					unlock()
					p.unlock = nil
					return err
				}
			}
			return nil
		},
		Stop: func() error {
			if p.unlock != nil {
				p.unlock()
			}
			return nil
		}})
	set.Add(modules.Module{Name: modMetrics, Deps: []string{modData},
		Start: func(ctx context.Context) (err error) {
			p.m, err = startMetrics(ctx, s.metrics, log)
			return err
		}})
	set.Add(modules.Module{Name: modNATS, Deps: []string{modMetrics}, Start: p.startNATS, Stop: p.stopNATS})
	set.Add(modules.Module{Name: modListen, Deps: []string{modNATS},
		Start: func(ctx context.Context) error {
			ln, err := net.Listen("tcp", s.http)
			if err != nil {
				if strings.Contains(err.Error(), "address already in use") {
					return fmt.Errorf("--http %s: address already in use", s.http)
				}
				return fmt.Errorf("--http %s: %w", s.http, err)
			}

			p.sw = httpapi.NewStartWait(log)
			p.app = httpapi.NewApp(log)
			observeApp(p.m, p.app)
			p.app.Get("/healthz", p.health)
			hctx, stop := context.WithCancel(context.WithoutCancel(ctx))
			p.stopHTTP = stop
			p.served = p.sw.ServeListener(hctx, ln)
			return nil
		},
		Stop: func() error {
			p.stopHTTP()
			<-p.served
			return nil
		}})
	set.Add(modules.Module{Name: modStreams, Deps: []string{modListen},
		Start: func(ctx context.Context) error {
			switch {
			case s.writesState:
				return p.sw.Until(ctx, "JetStream to create the streams", func(ctx context.Context) error {
					return cli.EnsureStreams(ctx, p.conn(natsx.RoleControlPlane), *s.nats.MaxAge, s.nats.Replicas())
				})
			case s.waitStreams != nil:
				return waitStreamsOf(ctx, p.sw, p.conn(""), log, s.waitStreams...)
			}
			return nil
		}})
	set.Add(modules.Module{Name: modStore, Deps: []string{modListen}, Start: p.startStore,
		Run: func(ctx context.Context) error {
			select {
			case err := <-p.storeErr:
				return err
			case <-ctx.Done():
				return nil
			}
		},
		Stop: func() error { return p.store.Close() }})
	set.Add(modules.Module{Name: modState, Deps: []string{modStreams}, Start: p.startState,
		Stop: func() error {
			if p.stopBG != nil {
				p.stopBG()
			}
			return nil
		}})
	set.Add(modules.Module{Name: modAdmin, Deps: []string{modState}, Start: p.startAdmin})
	set.Add(modules.Module{Name: modAdminAPI, Deps: []string{modAdmin}, Start: p.startAdminAPI})
	var stopToolRunner []func()
	set.Add(modules.Module{Name: modToolRunner, Deps: []string{modAdmin},
		Start: func(ctx context.Context) error { return p.startToolRunner(ctx, &stopToolRunner) },
		Stop: func() error {
			for i := len(stopToolRunner) - 1; i >= 0; i-- {
				stopToolRunner[i]()
			}
			return nil
		}})
	set.Add(modules.Module{Name: modIngest, Deps: []string{modStreams, modStore}, Start: p.startIngest,
		Run: func(ctx context.Context) error {
			select {
			case <-p.store.Ready():
			case <-ctx.Done():
				return nil
			}
			done := make(chan error, 1)
			go func() { done <- p.inExec.Run(ctx) }()
			err := p.in.Run(ctx)
			return errors.Join(err, <-done)
		}})
	deliverDeps := []string{modState}
	if p.s.dev || p.s.deliverProofs {
		deliverDeps = append(deliverDeps, modStore)
	}
	set.Add(modules.Module{Name: modDeliver, Deps: deliverDeps, Start: p.startDeliver,
		Run: func(ctx context.Context) error { return p.deliverer.Run(ctx) }})
	var tlogRun *tlogRole
	var tlogMu sync.Mutex
	set.Add(modules.Module{Name: modTLog, Deps: []string{modStreams, modStore},
		Start: func(context.Context) error {
			p.addHealth(&check{healthTLog, func(context.Context) error {
				tlogMu.Lock()
				defer tlogMu.Unlock()
				if tlogRun == nil {
					return nil
				}
				return tlogRun.check().fn(context.Background())
			}}, nil)
			return nil
		},
		Run: func(ctx context.Context) error {
			keys, err := p.keys("secrets-keys", s.secretsKeys, datadir.SecretsKeyFile, 32)
			if err != nil {
				return err
			}
			select {
			case <-p.store.Ready():
			case <-ctx.Done():
				return nil
			}
			// The organizations' witnesses are called through the egress
			// guard of the command (dev: loopback; --allow-private-egress).
			guard, err := newEgress(s.allowPrivate, s.dev, log)
			if err != nil {
				return err
			}
			t, err := startTLog(ctx, p.conn(natsx.RoleTLog), p.store, keys, s.tlog, s.nats.Replicas(), guard, s.ingest.Durable, p.m, log)
			if err != nil {
				if ctx.Err() != nil {
					return nil
				}
				return err
			}
			tlogMu.Lock()
			tlogRun = t
			tlogMu.Unlock()
			<-ctx.Done()
			return t.stop()
		}})
	set.Add(modules.Module{Name: modLifecycle, Deps: []string{modState, modStore}, Run: p.runLifecycleModule})
	set.Add(modules.Module{Name: modQuery, Deps: []string{modState, modStore}, Start: p.startQuery})
	set.Add(modules.Module{Name: modDemo, Deps: []string{modQuery, modAdminAPI, modToolRunner},
		Start: func(ctx context.Context) (err error) {
			if s.demo {
				p.demo, err = p.startDemo(ctx)
			}
			return err
		},
		Stop: func() error {
			// The servers are asked to end now and waited for once every
			// module has stopped (run): FerretDB waits up to 3 s for its
			// clients, the toolkit's connections, which close with the
			// toolrunner module, after this one.
			if p.demo != nil {
				p.demo.Close()
			}
			return nil
		}})
	set.Add(modules.Module{Name: modAll, Deps: allModules})
	set.Add(modules.Module{Name: modOpen,
		Start: func(context.Context) error {
			if s.dev {
				p.banner()
			}
			p.sw.Open(p.app)
			return nil
		},
		// HTTP drains first: the last module started, the first stopped.
		Run: func(ctx context.Context) error {
			select {
			case err := <-p.served:
				return err
			case <-ctx.Done():
			}
			p.stopHTTP()
			return nil
		}})
	return &set
}

// startNATS starts dev's embedded NATS server unless --nats-url, in
// operator mode, and connects each in-process role with its own
// credentials (DATA/nats/<role>.creds), so that every role runs with the
// permissions it has in production; a role connects once.
func (p *process) startNATS(context.Context) error {
	s := &p.s
	if !s.dev {
		nc, err := s.nats.Connect("auditrail-"+s.name, s.log)
		if err != nil {
			return err
		}
		p.conns = map[string]*nats.Conn{"": nc}
		c := natsCheck(map[string]*nats.Conn{s.name: nc})
		p.addHealth(&c, nil)
		return nil
	}
	p.natsURL = *s.nats.URL
	credsOf := func(string) string { return *s.nats.Creds }
	if p.natsURL == "" {
		keysDir := filepath.Join(s.dataDir, "nats")
		auth, err := natsx.LoadOrCreateAuth(keysDir)
		if err != nil {
			return err
		}
		if err := auth.WriteCreds(keysDir); err != nil {
			return err
		}
		credsOf = func(role string) string { return natsx.CredsFile(keysDir, role) }
		p.signer = auth.StreamSigner()
		scfg := natsx.DefaultServerConfig()
		scfg.Listen = s.natsListen
		scfg.StoreDir = filepath.Join(s.dataDir, "jetstream")
		scfg.Auth = auth
		ns, err := natsx.StartServer(scfg)
		if err != nil {
			return err
		}
		p.ns = ns
		p.natsURL = ns.ClientURL()
		fmt.Fprintf(os.Stdout, "nats credentials (admin: emit, tail, the nats CLI): %s\n", credsOf(natsx.RoleAdmin))
	}
	s.nats.SetCredsPoll()
	var opts []nats.Option
	if p.ns == nil { // an external server: TLS as asked
		var err error
		if opts, err = s.nats.TLS.Files().Options(); err != nil {
			return cli.Usage(err)
		}
	}
	p.conns = map[string]*nats.Conn{}
	ok := false
	defer func() {
		if !ok { // a failed start releases what it made
			_ = p.stopNATS()
		}
	}()
	for _, role := range []string{natsx.RoleControlPlane, natsx.RoleToolRunner, natsx.RoleIngest, natsx.RoleQuery, natsx.RoleDeliver, natsx.RoleTLog, natsx.RoleLifecycle} {
		c, err := natsx.Connect(p.natsURL, "auditrail-dev-"+role, credsOf(role), s.log.With("nats_role", role), opts...)
		if err != nil {
			return err
		}
		p.conns[role] = c
	}
	c := natsCheck(maps.Clone(p.conns))
	p.addHealth(&c, nil)
	p.conns[""] = p.conns[natsx.RoleControlPlane]
	ok = true
	return nil
}

// stopNATS drains the connections, then stops the embedded server.
func (p *process) stopNATS() error {
	seen := map[*nats.Conn]bool{}
	for _, c := range p.conns {
		if !seen[c] {
			seen[c] = true
			_ = c.Drain()
		}
	}
	for c := range seen {
		c.Close()
	}
	if p.ns != nil {
		p.ns.Shutdown()
		p.ns.WaitForShutdown()
	}
	return nil
}

// startStore opens the audit store: dev's SQLite at once (its errors are
// not transient); ClickHouse is retried in the background until it
// answers, while HTTP serves and /healthz says 503 (a permanent error, a
// malformed DSN, stops the process: Run).
func (p *process) startStore(ctx context.Context) error {
	s := &p.s
	p.store = backend.NewPending()
	p.storeErr = make(chan error, 1)
	p.addHealth(&check{healthStore, p.store.Ping}, func(m map[string]any) {
		select {
		case <-p.store.Ready():
		default:
			if _, waiting := m[httpapi.HealthWaitingFor]; !waiting {
				m[httpapi.HealthWaitingFor] = "the audit store"
			}
		}
	})
	if s.store.DSN == "" {
		st, err := backend.Open(ctx, backend.Target{DataDir: s.dataDir}, s.log)
		if err != nil {
			return err
		}
		p.store.Set(st)
		return nil
	}
	go func() {
		if err := p.store.OpenWithRetry(ctx, s.store, s.log); err != nil && ctx.Err() == nil {
			p.storeErr <- err
		}
	}()
	return nil
}

// startState mirrors the control-plane state (writable by the control
// plane and dev only; a role that cannot create its bucket waits for it)
// and builds the caller authentication.
func (p *process) startState(ctx context.Context) error {
	s := &p.s
	if !s.writesState {
		if err := waitBucket(ctx, p.sw, p.conn(""), cpstate.DefaultBucket, natsx.RoleControlPlane); err != nil {
			return err
		}
	}
	p.bg, p.stopBG = context.WithCancel(context.WithoutCancel(ctx))
	if s.access == nil { // deliver: the destinations only
		js, err := jetstream.New(p.conn(natsx.RoleDeliver))
		if err != nil {
			return err
		}
		scfg := cpstate.DefaultStateConfig()
		scfg.ReadOnly = true
		p.state, err = cpstate.OpenState(p.bg, js, scfg, s.log)
		return err
	}
	var err error
	p.cp, err = openControlPlane(p.bg, p.conn(natsx.RoleControlPlane), *s.access, s.dataDir, !s.writesState, s.nats.Replicas(), s.log)
	if err == nil {
		p.state = p.cp.state
	}
	return err
}

// startAdmin builds the admin service (with its outbox of audit events),
// the egress guard, the OAuth flows and the hook client.
func (p *process) startAdmin(context.Context) error {
	s := &p.s
	var err error
	if p.pub, err = producers.New(p.conn(natsx.RoleControlPlane), producers.DefaultConfig(), s.log); err != nil {
		return err
	}
	if p.admin, err = p.cp.adminService(p.pub, s.secretsKeys, s.dataDir, s.lifecycle.Bounds, s.log); err != nil {
		return err
	}
	if p.guard, err = newEgress(s.allowPrivate, s.dev, s.log); err != nil {
		return err
	}
	// Both roles need the flow: the control plane finishes it (callback,
	// authorize route) and refreshes tokens (for the tool runners too, over
	// NATS: their credentials may not write the bucket), the tool runner
	// starts it (connection links).
	if err := useOAuth(p.admin, s.publicURL, p.guard); err != nil {
		return err
	}
	p.proxy = platform.NewHookProxy(p.admin, p.guard, s.log) // endpoint checks and /health on create and enable
	return nil
}

// startAdminAPI serves the admin API and the stream credentials.
func (p *process) startAdminAPI(ctx context.Context) error {
	s := &p.s
	var err error
	if p.signer != nil {
		err = useStreamCredentials(p.bg, p.admin, p.signer, p.conn(natsx.RoleControlPlane), s.log)
	} else {
		err = loadStreamCredentials(p.bg, p.admin, s.streamKey, p.conn(natsx.RoleControlPlane), s.log)
	}
	if err != nil {
		return err
	}
	observeAuditOutbox(p.m, p.admin)
	p.addHealth(nil, func(m map[string]any) { m[healthAuditOutbox] = map[string]int{"pending": p.admin.PendingEvents()} })
	limit, err := p.limiter(ctx, adminLimit, natsx.RoleControlPlane)
	if err != nil {
		return err
	}
	if s.dev || s.store.DSN != "" {
		// The store is dev's own, or the control plane's --clickhouse (its
		// module starts before HTTP opens); without one, held is null and
		// the lifecycle refuses an erasure of a held subject later.
		p.admin.UseHoldCounter(storeHoldCounter{p})
		p.admin.UseSubjectHolds(storeSubjectHolds{p})
	}
	p.admin.Register(p.app, limit)
	return nil
}

// startToolRunner builds the toolkits, the durable outbox of execution
// events and the tool runner with its hooks, and serves its API and MCP
// endpoint; stops are what Stop runs, last first.
func (p *process) startToolRunner(ctx context.Context, stops *[]func()) error {
	s := &p.s
	pageKeys, err := p.keys("page-token-keys", s.pageTokenKeys, datadir.PageTokenKeyFile, 0)
	if err != nil {
		return err
	}
	reg, closeToolkits := platform.Toolkits(p.guard, p.admin, pageKeys, s.log)
	p.reg = reg
	*stops = append(*stops, closeToolkits)
	execPub := p.pub // the tool runner's own credentials (dev), else the process's
	if nc := p.conn(natsx.RoleToolRunner); nc != p.conn(natsx.RoleControlPlane) {
		if execPub, err = producers.New(nc, producers.DefaultConfig(), s.log); err != nil {
			return err
		}
	}
	outboxDir := s.outboxDir
	if s.dev {
		outboxDir = filepath.Join(s.dataDir, "outbox", "execution")
	}
	outbox, stopOutbox, err := executionOutbox(outboxDir, execPub, s.log)
	if err != nil {
		return err
	}
	p.outbox = outbox
	*stops = append(*stops, stopOutbox)
	runner := toolrunner.New(toolrunner.DefaultConfig(), reg, p.proxy, platform.HookSource{Svc: p.admin}, p.admin, p.admin, outbox, s.log)
	observeToolRunner(p.m, runner, p.proxy, outbox)
	p.addHealth(nil, func(m map[string]any) {
		m[healthHooks], m[healthExecutionOutbox] = p.proxy.Stats(), outbox.Stats()
	})
	limit, err := p.limiter(ctx, toolLimit, natsx.RoleToolRunner)
	if err != nil {
		return err
	}
	return registerTools(ctx, p.app, runner, p.cp.access, p.cp.proxies, s.mcp, s.log, limit)
}

// startIngest builds the audit and execution consumers; they run (Run)
// once the store answers.
func (p *process) startIngest(context.Context) error {
	s := &p.s
	nc := p.conn(natsx.RoleIngest)
	var err error
	if p.in, err = ingest.NewAudit(nc, p.store, s.ingest, s.log); err != nil {
		return err
	}
	ecfg := s.ingest
	ecfg.Durable = ingest.ExecutionDurableFor(s.ingest.Durable)
	if p.inExec, err = ingest.NewExecution(nc, p.store, ecfg, s.log); err != nil {
		return err
	}
	if err := observeIngest(p.m, nc, p.in, p.inExec, s.ingest.Durable, ecfg.Durable); err != nil {
		return err
	}
	cs := ingestConsumers(p.in, p.inExec)
	for _, c := range consumerChecks(cs) {
		p.addHealth(&c, nil)
	}
	p.addHealth(nil, func(m map[string]any) { cs.counters(m) })
	return nil
}

// startDeliver builds the delivery role (push destinations) over the
// state's destinations, opened with the secrets keys.
func (p *process) startDeliver(context.Context) error {
	s := &p.s
	keys, err := p.keys("secrets-keys", s.secretsKeys, datadir.SecretsKeyFile, 32)
	if err != nil {
		return err
	}
	if p.guard == nil { // deliver alone; the admin module's otherwise
		if p.guard, err = newEgress(s.allowPrivate, s.dev, s.log); err != nil {
			return err
		}
	}
	if p.deliverer, err = newDeliverer(p.conn(natsx.RoleDeliver), p.state, keys, p.guard, s.deliver, s.log); err != nil {
		return err
	}
	if s.dev || s.deliverProofs {
		// JSON batches wait for their entries' checkpoint and carry their
		// proof (deliver.BatchItem).
		p.deliverer.ProveWith(p.store)
	}
	observeDeliver(p.m, p.deliverer)
	c := deliverCheck(p.deliverer)
	p.addHealth(&c, func(m map[string]any) { m[healthDeliver] = p.deliverer.Stats() })
	return nil
}

// startQuery serves the audit API over the store: lists, exports (each
// bulk read recorded), live streams, feeds, the log's keys, the dashboard.
func (p *process) startQuery(ctx context.Context) error {
	s := &p.s
	nc := p.conn(natsx.RoleQuery)
	keys, err := p.keys("cursor-keys", s.cursorKeys, datadir.CursorKeyFile, 0)
	if err != nil {
		return err
	}
	limit, err := p.limiter(ctx, auditLimit, natsx.RoleQuery)
	if err != nil {
		return err
	}
	qcfg, err := s.reads.queryConfig(keys, p.cp.proxies)
	if err != nil {
		return err
	}
	qs, err := query.New(qcfg, p.store, p.cp.access, s.log)
	if err != nil {
		return err
	}
	// Each bulk read (an export, a feed from its start, a stream resumed
	// far back) leaves an audit event.
	pub, err := producers.New(nc, producers.DefaultConfig(), s.log)
	if err != nil {
		return err
	}
	qs.RecordExportsWith(producers.NewRecorder(pub, 5*time.Second))
	// Live streams follow the event stream with the query role's
	// credentials until the process is stopped, before HTTP drains.
	if err := s.reads.serveLive(ctx, qs, nc); err != nil {
		return err
	}
	if err := serveAuditKeys(qs, nc); err != nil {
		return err
	}
	if err := serveFeeds(qs, nc, s.ingest.Durable); err != nil {
		return err
	}
	qs.Register(p.app, limit)
	// The dashboard: its page also calls /api/v1/me and the admin routes of
	// the controlplane role, so a deployment that splits the roles puts one
	// origin in front that routes by path.
	dashboard.Register(p.app)
	return nil
}

// startDemo starts the demo's servers (auditrail-demo) and sets up the
// demo organization.
func (p *process) startDemo(ctx context.Context) (*demo.Servers, error) {
	s := &p.s
	env := demo.Env{API: strings.TrimSuffix(s.publicURL, "/"), BootKey: p.cp.freshBootKey, Scopes: platform.ProviderScopes(p.reg),
		TrustPickerScripts: p.admin.TrustPickerScripts}
	if p.ns != nil {
		env.NATS = p.ns.ClientURL()
		var err error
		if env.AdminCreds, err = filepath.Abs(natsx.CredsFile(filepath.Join(s.dataDir, "nats"), natsx.RoleAdmin)); err != nil {
			return nil, err
		}
	}
	exe, err := demo.ServersBinary()
	if err != nil {
		return nil, err
	}
	srv, err := demo.Start(ctx, demo.Config{App: p.app, Access: p.cp.access, DataDir: s.dataDir, NewKey: s.newKey,
		Env: env, ServersBinary: exe, Out: os.Stdout, Log: s.log})
	if err != nil {
		return nil, fmt.Errorf("demo: %w", err)
	}
	return srv, nil
}

// banner prints where dev serves.
func (p *process) banner() {
	s := &p.s
	storeName := "sqlite " + filepath.Join(s.dataDir, "audit.db")
	if s.store.DSN != "" {
		storeName = "clickhouse " + redact.URL(s.store.DSN)
	}
	fmt.Fprintf(os.Stdout, "auditrail dev: http://%s  nats %s  store %s\n", s.http, redact.URL(p.natsURL), storeName)
	fmt.Fprintf(os.Stdout, "dashboard: %s%s (sign in with an API key)\n", strings.TrimSuffix(s.publicURL, "/"), dashboard.Path)
}
