package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/auditrail/auditrail/controlplane/cpstate"
	"github.com/auditrail/auditrail/evidence/checkpointer"
	"github.com/auditrail/auditrail/evidence/sequencer"
	"github.com/auditrail/auditrail/evidence/witness"
	"github.com/auditrail/auditrail/ingest"
	"github.com/auditrail/auditrail/internal/cli"
	"github.com/auditrail/auditrail/internal/egress"
	"github.com/auditrail/auditrail/internal/httpapi"
	"github.com/auditrail/auditrail/internal/metrics"
	"github.com/auditrail/auditrail/internal/natsx"
	"github.com/auditrail/auditrail/internal/retry"
)

// healthTLog is the /healthz key of the tamper-evidence log role.
const healthTLog = "tlog"

// tlogFlags configure the tamper-evidence logs (tlog, dev).
type tlogFlags struct {
	prefix      *string
	interval    *time.Duration
	keyLifetime *time.Duration
	keyName     *string
	witnesses   *[]string
}

func addTLogFlags(fs *cli.Flags) tlogFlags {
	c := checkpointer.DefaultConfig()
	return tlogFlags{
		prefix:      fs.String("tlog-origin", "", c.Prefix, "tamper evidence: the start of every checkpoint's origin (<prefix>/orgs/<org_id>/audit_logs): name the deployment"),
		interval:    fs.Duration("checkpoint-interval", "", c.Interval, "tamper evidence: how often the logs that grew get a signed checkpoint"),
		keyLifetime: fs.Duration("signing-key-lifetime", "", c.Keyring.KeyLifetime, "tamper evidence: how long a signing key is current before it is rotated"),
		keyName:     fs.String("signing-key-name", "", c.Keyring.Name, "tamper evidence: the signer name of the checkpoints' keys"),
		witnesses: fs.Strings("witness", "", "tamper evidence: a C2SP tlog-witness that cosigns every checkpoint, as URL,VKEY "+
			"(its add-checkpoint prefix and its cosignature/v1 verifier key)"),
	}
}

func (f tlogFlags) config(instance string) (checkpointer.Config, error) {
	c := checkpointer.DefaultConfig()
	c.Instance, c.Prefix, c.Interval = instance, *f.prefix, *f.interval
	c.Keyring.KeyLifetime, c.Keyring.Name = *f.keyLifetime, *f.keyName
	for _, s := range *f.witnesses {
		w, err := witness.Parse(s)
		if err != nil {
			return c, cli.Usage(fmt.Errorf("--witness: %w", err))
		}
		c.Witnesses = append(c.Witnesses, w)
	}
	if err := c.Validate(); err != nil {
		return c, cli.Usage(err)
	}
	return c, nil
}

// tlogStore is what the sequencer and the checkpointer need of the store.
type tlogStore interface {
	sequencer.Store
	checkpointer.Store
}

// tlogRole is the sequencer and the checkpointer of one process.
type tlogRole struct {
	runner *sequencer.Runner
	cp     *checkpointer.Checkpointer
	wg     sync.WaitGroup
	cancel context.CancelFunc
	mu     sync.Mutex
	err    error
}

// startTLog starts the sequencer and the checkpointer on nc (credentials of
// natsx.RoleTLog) over st; ingestDurable is ingest's audit durable (the
// execution one follows from it). stop ends both and waits.
func startTLog(ctx context.Context, nc *nats.Conn, st tlogStore, secretsKeys [][]byte, cfg checkpointer.Config, replicas int, guard *egress.Guard,
	ingestDurable string, m *metrics.Registry, log *slog.Logger) (*tlogRole, error) {
	sealer, err := cpstate.NewSealer(secretsKeys...)
	if err != nil {
		return nil, cli.Usage(err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	// Retried, each attempt bounded: two instances creating the same
	// replicated bucket at once may both wait for an answer that never
	// comes, although the bucket is made (cli.NATSAttemptTimeout).
	var kv jetstream.KeyValue
	err = retry.Do(ctx, httpapi.StartPolicy, func(ctx context.Context) error {
		actx, cancel := context.WithTimeout(ctx, cli.NATSAttemptTimeout)
		defer cancel()
		var err error
		kv, err = js.CreateOrUpdateKeyValue(actx, jetstream.KeyValueConfig{Bucket: natsx.TLogBucket, Replicas: max(1, replicas),
			Description: "auditrail tamper evidence: the sequencer's and the checkpointer's leases, the signing keys (sealed)"})
		return err
	}, func(err error, next time.Duration) {
		log.Info("waiting for the tlog bucket", "err", err, "retry_in", next.Round(time.Millisecond))
	})
	if err != nil {
		return nil, fmt.Errorf("tlog bucket %s: %w", natsx.TLogBucket, err)
	}
	scfg := sequencer.DefaultConfig()
	scfg.Instance = cfg.Instance
	scfg.AuditDurable, scfg.ExecutionDurable = ingestDurable, ingest.ExecutionDurableFor(ingestDurable)
	seq := sequencer.New(st)
	runner, err := sequencer.NewRunner(scfg, seq, js, kv, natsx.NewWatermarks(js, 0), log.With("role", "tlog"))
	if err != nil {
		return nil, cli.Usage(err)
	}
	// The organizations' own witnesses: from the control-plane state,
	// called through the egress guard.
	owClient := orgWitnessClient(guard)
	ows := &orgWitnesses{log: log.With("role", "tlog")}
	deps := checkpointer.Deps{Store: st, KV: kv, JS: js, Sealer: sealer, Log: log.With("role", "tlog"), OrgWitnesses: ows, OrgWitness: owClient,
		Kept:  seq, // the roots of the logs the sequencer appended to, without reading their hashes
		Grown: seq} // and which logs grew, without reading every head each round
	if m != nil {
		o := m.TLog()
		runner.WithObserver(o)
		deps.Observer = o
	}
	cp, err := checkpointer.New(cfg, deps)
	if err != nil {
		return nil, cli.Usage(err)
	}
	t := &tlogRole{runner: runner, cp: cp}
	ctx, t.cancel = context.WithCancel(ctx)
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		ows.mirror(ctx, js)
	}()
	for name, run := range map[string]func(context.Context) error{"sequencer": runner.Run, "checkpointer": cp.Run} {
		t.wg.Add(1)
		go func() {
			defer t.wg.Done()
			if err := run(ctx); err != nil && !errors.Is(err, context.Canceled) {
				log.Error("tlog: "+name+" stopped", "err", err)
				t.mu.Lock()
				t.err = fmt.Errorf("%s: %w", name, err)
				t.mu.Unlock()
			}
		}()
	}
	return t, nil
}

// stop ends the sequencer and the checkpointer and waits for them.
func (t *tlogRole) stop() error {
	t.cancel()
	t.wg.Wait()
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.err
}

// check fails once either stopped on an error.
func (t *tlogRole) check() check {
	return check{healthTLog, func(context.Context) error {
		t.mu.Lock()
		defer t.mu.Unlock()
		return t.err
	}}
}
