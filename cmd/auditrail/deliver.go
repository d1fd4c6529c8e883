package main

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/auditrail/auditrail/controlplane/cpstate"
	"github.com/auditrail/auditrail/deliver"
	"github.com/auditrail/auditrail/internal/cli"
	"github.com/auditrail/auditrail/internal/egress"
)

// healthDeliver is the /healthz key of the delivery role.
const healthDeliver = "deliver"

// deliverFlags are the tuning flags of the delivery role (deliver, dev).
type deliverFlags struct {
	batch          *int
	requestTimeout *time.Duration
	lease          *time.Duration
	proofWait      *time.Duration
}

func addDeliverFlags(fs *cli.Flags) deliverFlags {
	d := deliver.DefaultConfig()
	return deliverFlags{
		batch:          fs.Int("deliver-batch", "", d.BatchSize, "push destinations: most events per POST (and left unacknowledged) per destination"),
		requestTimeout: fs.Duration("deliver-timeout", "", d.RequestTimeout, "push destinations: longest POST, answer included"),
		lease: fs.Duration("deliver-lease", "", d.LeaseTTL, "push destinations: how long an instance's lease on a destination lasts "+
			"(renewed every third of it): a stopped instance's destinations move to the others after this, a new instance takes its share within a third of it; at least 3s"),
		proofWait: fs.Duration("deliver-proof-wait", "", d.ProofWait, "push destinations, with the store: longest a JSON batch waits for its entries to be in a signed checkpoint (it carries their proof); "+
			"entries still missing then (an event the store refused, no tlog role running) go without a leaf"),
	}
}

func (f deliverFlags) config() (deliver.Config, error) {
	cfg := deliver.DefaultConfig()
	cfg.BatchSize, cfg.RequestTimeout, cfg.LeaseTTL, cfg.ProofWait = *f.batch, *f.requestTimeout, *f.lease, *f.proofWait
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
func newDeliverer(nc *nats.Conn, state *cpstate.State, secretsKeys [][]byte, guard *egress.Guard, cfg deliver.Config, log *slog.Logger) (*deliver.Deliverer, error) {
	sealer, err := cpstate.NewSealer(secretsKeys...)
	if err != nil {
		return nil, cli.Usage(err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	return deliver.New(js, cpstate.NewDestinationReader(state, sealer), guard, cfg, log.With("role", "deliver"))
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
