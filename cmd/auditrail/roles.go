package main

import (
	"context"
	"io"
	"log/slog"
	"os"
	"runtime/debug"

	"github.com/google/uuid"

	"github.com/auditrail/auditrail/ingest"
	"github.com/auditrail/auditrail/internal/cli"
	"github.com/auditrail/auditrail/internal/datadir"
	"github.com/auditrail/auditrail/internal/natsx"
	"github.com/auditrail/auditrail/schemas"
)

// Each production role is its module and what that needs (process.go),
// with the flags it takes: the same modules dev runs all of.

// roleFlags are the flags every production role has.
type roleFlags struct {
	fs      *cli.Flags
	nats    cli.NATSFlags
	http    *string
	metrics *string
	mkLog   func(io.Writer) (*slog.Logger, error)
}

// newRoleFlags starts the flags of role: NATS (with --nats-replicas when
// replicas; the stream flags when it creates the streams), --http on
// defAddr (what it serves), --metrics; the caller adds its own, then
// parse.
func newRoleFlags(role, defAddr, what string, replicas, createsStreams bool) *roleFlags {
	f := &roleFlags{fs: cli.NewFlags("auditrail " + role)}
	f.nats = cli.AddNATSFlags(f.fs, "nats://127.0.0.1:4222", createsStreams)
	if replicas {
		f.nats = f.nats.WithReplicas(f.fs)
	}
	f.http = f.fs.String("http", "", defAddr, what)
	f.metrics = addMetricsFlag(f.fs)
	return f
}

// parse parses args and makes the logger: the settings every role shares.
func (f *roleFlags) parse(role string, args []string) (settings, error) {
	f.mkLog = f.fs.LogFlags("json")
	if err := f.fs.Parse(args); err != nil {
		return settings{}, err
	}
	log, err := f.mkLog(os.Stderr)
	if err != nil {
		return settings{}, err
	}
	return settings{name: role, log: log, nats: f.nats, http: *f.http, metrics: *f.metrics, ingest: ingest.DefaultConfig()}, nil
}

// runIngest is the production ingest role.
func runIngest(ctx context.Context, args []string) error {
	f := newRoleFlags("ingest", "127.0.0.1:8081", "listener of /healthz", false, false)
	sf := addRoleStoreFlags(f.fs)
	durable := f.fs.String("durable", "", ingest.DefaultConfig().Durable, "durable consumer name shared by the ingest instances")
	icfg := ingest.DefaultConfig()
	icfg.RegisterFlags(f.fs)
	gcPercent := f.fs.Int("gc-percent", "", defaultGCPercent, "GOGC of the process, unless GOGC is set")
	memLimit := f.fs.Int("memory-limit", "", 0, "soft limit of the Go heap in MiB, unless GOMEMLIMIT is set (0: derived from the batch bounds)")
	leaves := f.fs.Bool("tlog-leaves", "", true, "store each entry's tamper-evidence leaf beside it, which the tlog role reads; false: the tlog role computes it from the entry (for a deployment that runs no tlog role: ingest spends no CPU on leaves)")
	s, err := f.parse("ingest", args)
	if err != nil {
		return err
	}
	if s.store, err = sf.resolve(); err != nil {
		return err
	}
	s.store.NoLeaves = !*leaves
	icfg.Durable = *durable
	if err := icfg.Validate(); err != nil {
		return cli.Usage(err)
	}
	if *gcPercent < 1 || *memLimit < 0 {
		return cli.UsageErrorf("--gc-percent must be positive and --memory-limit not negative")
	}
	s.ingest, s.waitStreams = icfg, []string{}
	setGC(icfg, *gcPercent, int64(*memLimit)<<20, s.log)
	// A CPU profile of the role, for `auditrail-bench -run ingest`, whose
	// child process inherits the variable.
	stopProfile, err := cli.StartCPUProfile(os.Getenv("AUDITRAIL_INGEST_CPUPROFILE"))
	if err != nil {
		return err
	}
	defer stopProfile()
	return (&process{s: s}).run(ctx, modIngest)
}

// runQuery is the production query role: the audit API over ClickHouse,
// authenticating against the control-plane state in NATS.
func runQuery(ctx context.Context, args []string) error {
	f := newRoleFlags("query", "127.0.0.1:8080", "listener of the audit API", true, false)
	sf := addRoleStoreFlags(f.fs)
	af := addAccessFlags(f.fs)
	curKeys := f.fs.String("cursor-keys", "", "", "cursor signing keys, comma-separated base64, the first signs (required; share them across instances)")
	rate := auditLimit.add(f.fs)
	reads := addReadFlags(f.fs)
	feedDurable := addIngestDurableFlag(f.fs, "the feeds show what it has committed")
	s, err := f.parse("query", args)
	if err != nil {
		return err
	}
	if s.store, err = sf.resolve(); err != nil {
		return err
	}
	if _, err := datadir.Keys("cursor-keys", *curKeys, "", "", 0); err != nil {
		return err
	}
	s.access, s.cursorKeys, s.reads = &af, *curKeys, reads
	s.limits = map[limitFamily]*string{auditLimit: rate}
	s.ingest.Durable = *feedDurable
	return (&process{s: s}).run(ctx, modQuery)
}

// adminRoleFlags are the flags the controlplane and toolrunner roles
// share: they run the admin service.
func adminRoleFlags(f *roleFlags, limit limitFamily) func(s *settings) error {
	publicURL := addPublicURLFlag(f.fs, "")
	af := addAccessFlags(f.fs)
	secKeys := f.fs.String("secrets-keys", "", "", "keys of secrets at rest, comma-separated base64 of 32 bytes, the first seals (the control plane's; required)")
	rate := limit.add(f.fs)
	allowPrivate := addEgressFlag(f.fs)
	return func(s *settings) error {
		s.access, s.secretsKeys, s.allowPrivate = &af, *secKeys, *allowPrivate
		s.limits = map[limitFamily]*string{limit: rate}
		s.publicURL = *publicURL
		if s.publicURL == "" {
			s.publicURL = clientURL(s.http)
			s.log.Warn("--public-url not set: OAuth redirect URIs use the listener address, which providers outside this host cannot reach", "public_url", s.publicURL)
		}
		return nil
	}
}

// runControlPlane is the production admin API role.
func runControlPlane(ctx context.Context, args []string) error {
	f := newRoleFlags(natsx.RoleControlPlane, "127.0.0.1:8082", "listener of the API", true, true)
	streamKey := addStreamKeyFlag(f.fs)
	admin := adminRoleFlags(f, adminLimit)
	rf := addRetentionFlags(f.fs, false)
	sf := addOptionalStoreFlags(f.fs, "optional, read only: with it the legal holds' routes count what each hold holds, and an erasure of a held subject is refused at once (409)")
	s, err := f.parse(natsx.RoleControlPlane, args)
	if err != nil {
		return err
	}
	if err := admin(&s); err != nil {
		return err
	}
	if s.lifecycle.Bounds, err = rf.bounds(); err != nil {
		return err
	}
	s.writesState, s.streamKey = true, *streamKey
	targets := []string{modAdminAPI}
	if *sf.dsn != "" {
		if s.store, err = sf.resolve(); err != nil {
			return err
		}
		targets = append(targets, modStore)
	}
	return (&process{s: s}).run(ctx, targets...)
}

// runToolRunner is the production tool runner role: the tool runner API,
// hooks from the control-plane state, execution events to the stream.
func runToolRunner(ctx context.Context, args []string) error {
	f := newRoleFlags(natsx.RoleToolRunner, "127.0.0.1:8083", "listener of the API", true, false)
	mf := addMCPFlags(f.fs)
	outboxDir := f.fs.String("outbox", "", "./outbox", "directory of the durable outbox of execution events (one process each; events kept while NATS is unreachable are published from it)")
	pageKeys := f.fs.String("page-token-keys", "", "", "keys that sign the toolkits' pagination tokens, comma-separated base64 of at least 16 bytes, the first signs, all verify (required; give every instance the same keys)")
	admin := adminRoleFlags(f, toolLimit)
	s, err := f.parse(natsx.RoleToolRunner, args)
	if err != nil {
		return err
	}
	if err := admin(&s); err != nil {
		return err
	}
	if _, err := datadir.Keys("page-token-keys", *pageKeys, "", "", 0); err != nil {
		return err
	}
	if s.mcp, err = mf.config(s.publicURL); err != nil {
		return err
	}
	s.outboxDir, s.pageTokenKeys, s.waitStreams = *outboxDir, *pageKeys, []string{schemas.StreamEvents}
	return (&process{s: s}).run(ctx, modToolRunner)
}

// runDeliver is the production delivery role: push destinations.
func runDeliver(ctx context.Context, args []string) error {
	f := newRoleFlags("deliver", "127.0.0.1:8084", "listener of /healthz", true, false)
	secKeys := f.fs.String("secrets-keys", "", "", "keys of secrets at rest, comma-separated base64 of 32 bytes (the control plane's; required: they open the destinations' secrets)")
	allowPrivate := addEgressFlag(f.fs)
	df := addDeliverFlags(f.fs)
	sf := addOptionalStoreFlags(f.fs, "optional, read only: with it every JSON batch waits until its entries are in a signed checkpoint and carries their proof (a line {\"type\":\"batch\",…}: auditrail receive --verify checks it)")
	s, err := f.parse("deliver", args)
	if err != nil {
		return err
	}
	targets := []string{modDeliver}
	if *sf.dsn != "" {
		if s.store, err = sf.resolve(); err != nil {
			return err
		}
		s.deliverProofs = true
		targets = append(targets, modStore)
	}
	if s.deliver, err = df.config(); err != nil {
		return err
	}
	if _, err := datadir.Keys("secrets-keys", *secKeys, "", "", 32); err != nil {
		return err
	}
	s.deliver.Replicas = s.nats.Replicas()
	s.secretsKeys, s.allowPrivate, s.waitStreams = *secKeys, *allowPrivate, []string{schemas.StreamEvents}
	return (&process{s: s}).run(ctx, targets...)
}

// runTLog is the production tamper-evidence role: it appends every stored
// entry to its organization's log and signs checkpoints.
func runTLog(ctx context.Context, args []string) error {
	f := newRoleFlags("tlog", "127.0.0.1:8085", "listener of /healthz", true, false)
	sf := addRoleStoreFlags(f.fs)
	secKeys := f.fs.String("secrets-keys", "", "", "keys of secrets at rest, comma-separated base64 of 32 bytes (the control plane's; required: they seal the signing keys)")
	durable := addIngestDurableFlag(f.fs, "the logs take what it has committed")
	tf := addTLogFlags(f.fs)
	allowPrivate := addEgressFlag(f.fs)
	s, err := f.parse("tlog", args)
	if err != nil {
		return err
	}
	if s.store, err = sf.resolve(); err != nil {
		return err
	}
	if _, err := datadir.Keys("secrets-keys", *secKeys, "", "", 32); err != nil {
		return err
	}
	if s.tlog, err = tf.config(uuid.NewString()[:8]); err != nil {
		return err
	}
	s.secretsKeys, s.ingest.Durable, s.waitStreams, s.allowPrivate = *secKeys, *durable, []string{schemas.StreamEvents, schemas.StreamCommits}, *allowPrivate
	return (&process{s: s}).run(ctx, modTLog)
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
