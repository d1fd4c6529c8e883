package main

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/auditrail/auditrail/controlplane"
	"github.com/auditrail/auditrail/deliver"
	"github.com/auditrail/auditrail/internal/cli"
	"github.com/auditrail/auditrail/internal/egress"
	"github.com/auditrail/auditrail/internal/httpapi"
	"github.com/auditrail/auditrail/internal/natsx"
	"github.com/auditrail/auditrail/schemas"
)

// healthDeliver is the /healthz key of the delivery role.
const healthDeliver = "deliver"

// deliverFlags are the tuning flags of the delivery role (deliver, dev).
type deliverFlags struct {
	batch          *int
	requestTimeout *time.Duration
	lease          *time.Duration
}

func addDeliverFlags(fs *cli.Flags) deliverFlags {
	d := deliver.DefaultConfig()
	return deliverFlags{
		batch:          fs.Int("deliver-batch", "", d.BatchSize, "push destinations: most events per POST (and left unacknowledged) per destination"),
		requestTimeout: fs.Duration("deliver-timeout", "", d.RequestTimeout, "push destinations: longest POST, answer included"),
		lease: fs.Duration("deliver-lease", "", d.LeaseTTL, "push destinations: how long an instance's lease on a destination lasts "+
			"(renewed every third of it): a stopped instance's destinations move to the others after this, a new instance takes its share within a third of it; at least 3s"),
	}
}

func (f deliverFlags) config() (deliver.Config, error) {
	cfg := deliver.DefaultConfig()
	cfg.BatchSize, cfg.RequestTimeout, cfg.LeaseTTL = *f.batch, *f.requestTimeout, *f.lease
	if cfg.AckWait < 2*(cfg.Retry.Max+cfg.RequestTimeout) {
		cfg.AckWait = 2 * (cfg.Retry.Max + cfg.RequestTimeout)
	}
	if err := cfg.Validate(); err != nil {
		return cfg, cli.Usage(err)
	}
	return cfg, nil
}

// newDeliverer builds the delivery role on nc (its credentials: natsx.RoleDeliver)
// over the destinations of state, opened with the secrets keys.
func newDeliverer(nc *nats.Conn, state *controlplane.State, secretsKeys [][]byte, guard *egress.Guard, cfg deliver.Config, log *slog.Logger) (*deliver.Deliverer, error) {
	sealer, err := controlplane.NewSealer(secretsKeys...)
	if err != nil {
		return nil, cli.Usage(err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	return deliver.New(js, controlplane.NewDestinationReader(state, sealer), guard, cfg, log.With("role", "deliver"))
}

// deliverCheck fails until the deliverer runs.
func deliverCheck(d *deliver.Deliverer) check {
	return check{healthDeliver, func(context.Context) error {
		if !d.Ready() {
			return errors.New("not running yet")
		}
		return nil
	}}
}

// runDeliver is the production delivery role: push destinations.
func runDeliver(ctx context.Context, args []string) error {
	fs := cli.NewFlags("auditrail deliver")
	nf := addNATSFlags(fs, "nats://127.0.0.1:4222", false).withReplicas(fs)
	httpAddr := fs.String("http", "", "127.0.0.1:8084", "listener of /healthz")
	secKeys := fs.String("secrets-keys", "", "", "keys of secrets at rest, comma-separated base64 of 32 bytes (the control plane's; required: they open the destinations' secrets)")
	allowPrivate := addEgressFlag(fs)
	df := addDeliverFlags(fs)
	metricsAddr := addMetricsFlag(fs)
	mkLog := fs.LogFlags("json")
	if err := fs.Parse(args); err != nil {
		return err
	}
	log, err := mkLog(os.Stderr)
	if err != nil {
		return err
	}
	m, err := startMetrics(ctx, *metricsAddr, log)
	if err != nil {
		return err
	}
	cfg, err := df.config()
	if err != nil {
		return err
	}
	cfg.Replicas = nf.replicaCount()
	keys, err := keyList("secrets-keys", *secKeys, "", "", 32)
	if err != nil {
		return err
	}
	guard, err := newEgress(*allowPrivate, false, log)
	if err != nil {
		return err
	}
	nc, err := nf.connect("auditrail-deliver", log)
	if err != nil {
		return err
	}
	defer nc.Close()
	// Serve at once: /healthz is 503, naming what the role waits for,
	// until the stream and the control-plane bucket exist.
	ctx, listenFailed := context.WithCancel(ctx)
	defer listenFailed()
	sw := newStartWait(log)
	served := sw.serve(ctx, *httpAddr, listenFailed)
	err = sw.waitStreams(ctx, nc, schemas.StreamEvents)
	if err == nil {
		err = sw.waitBucket(ctx, nc, controlplane.DefaultBucket, natsx.RoleControlPlane)
	}
	if err != nil {
		return startFailed(ctx, served, err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	bg, stopBG := context.WithCancel(context.WithoutCancel(ctx))
	defer stopBG()
	scfg := controlplane.DefaultStateConfig()
	scfg.ReadOnly = true
	state, err := controlplane.OpenState(bg, js, scfg, log)
	if err != nil {
		return err
	}
	d, err := newDeliverer(nc, state, keys, guard, cfg, log)
	if err != nil {
		return err
	}
	observeDeliver(m, d)
	app := httpapi.NewApp(log)
	observeApp(m, app)
	app.Get("/healthz", healthHandler([]check{natsCheck(map[string]*nats.Conn{natsx.RoleDeliver: nc}), deliverCheck(d)}, func() map[string]any {
		return map[string]any{healthDeliver: d.Stats()}
	}))
	sw.open(app)
	err = d.Run(ctx)
	_ = nc.Drain()
	return err
}
