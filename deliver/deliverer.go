package deliver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/auditrail/auditrail/controlplane/destination"
	"github.com/auditrail/auditrail/internal/natsx"
	"github.com/auditrail/auditrail/internal/retry"
	"github.com/auditrail/auditrail/schemas"
)

// Source lists the destinations with their secrets
// (cpstate.DestinationReader).
type Source interface {
	Destinations() ([]destination.ResolvedDestination, error)
	// Fresh returns nil while the list is confirmed current: consumers of
	// destinations missing from it are deleted only then.
	Fresh() error
}

// Guard makes the HTTP transport whose every connection passes the egress
// guard (egress.Guard).
type Guard interface {
	Transport(dialTimeout time.Duration) *http.Transport
}

// Deliverer runs the delivery of every destination this instance owns.
type Deliverer struct {
	cfg    Config
	js     jetstream.JetStream
	src    Source
	client *http.Client
	log    *slog.Logger
	kv     jetstream.KeyValue
	// logs, when set, proves JSON batches (ProveWith).
	logs Logs

	mu      sync.Mutex
	workers map[uuid.UUID]*worker
	ready   atomic.Bool

	// live is the instances seen alive at liveAt.
	live   []string
	liveAt time.Time
	// cleanedAt is the last sweep of stale consumers.
	cleanedAt time.Time

	delivered, failures, rejected atomic.Uint64
	obs                           Observer // nil: none
}

// Observer measures deliveries (metrics.Registry implements it). It has
// no destination label on purpose: destinations are made by tenants
// without bound, so the lag is a histogram of the process (instance), per
// event delivered.
type Observer interface {
	// Delivered reports a chunk taken by a destination (2xx): for each of
	// its events, the time since the stream stored it.
	Delivered(lags []time.Duration)
	// DeliveryFailed reports a failed attempt.
	DeliveryFailed()
	// DeliveryRejected reports an event that is not delivered, for reason
	// RejectUndecodable or RejectOrganizationMismatch.
	DeliveryRejected(reason string)
}

// The reasons of Observer.DeliveryRejected.
const (
	// RejectUndecodable: the payload does not decode.
	RejectUndecodable = "undecodable"
	// RejectOrganizationMismatch: the payload names another organization
	// than its subject (ErrOrganizationMismatch).
	RejectOrganizationMismatch = "organization_mismatch"
)

// reject logs and counts an event of subject that is not delivered (err
// from spec.encode). It is acknowledged with its batch: ingest sends such
// a message to the dead-letter stream, where the operator sees it.
func (d *Deliverer) reject(subject string, err error, log *slog.Logger) {
	reason := RejectUndecodable
	if errors.Is(err, ErrOrganizationMismatch) {
		reason = RejectOrganizationMismatch
	}
	d.rejected.Add(1)
	if d.obs != nil {
		d.obs.DeliveryRejected(reason)
	}
	log.Warn("deliver: event not delivered (ingest sends it to the dead-letter stream)", "subject", subject, "reason", reason, "err", err)
}

// ObserveWith reports deliveries to o; call it before Run.
func (d *Deliverer) ObserveWith(o Observer) { d.obs = o }

// New returns a Deliverer; Run delivers.
func New(js jetstream.JetStream, src Source, guard Guard, cfg Config, log *slog.Logger) (*Deliverer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.Default()
	}
	cfg = cfg.withDefaults()
	tr := guard.Transport(5 * time.Second)
	tr.MaxResponseHeaderBytes = 64 << 10
	tr.ResponseHeaderTimeout = cfg.RequestTimeout
	client := &http.Client{Transport: tr, Timeout: cfg.RequestTimeout,
		// A receiver's redirect is not followed (to another host or not):
		// a 3xx is a failed attempt.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	return &Deliverer{cfg: cfg, js: js, src: src, client: client, log: log.With("instance", cfg.Instance), workers: map[uuid.UUID]*worker{}}, nil
}

// Instance is this deliverer's name in leases and statuses.
func (d *Deliverer) Instance() string { return d.cfg.Instance }

// Ready reports whether the bucket is open and the first look at the
// destinations is done.
func (d *Deliverer) Ready() bool { return d.ready.Load() }

// Stats are the counters of /healthz.
func (d *Deliverer) Stats() map[string]any {
	d.mu.Lock()
	n := len(d.workers)
	d.mu.Unlock()
	return map[string]any{"instance": d.cfg.Instance, "destinations": n, "delivered": d.delivered.Load(), "failed_attempts": d.failures.Load(), "rejected": d.rejected.Load()}
}

// Run delivers until ctx ends; then it stops its workers (the batches in
// hand are handed back to the stream) and gives up its leases.
func (d *Deliverer) Run(ctx context.Context) error {
	err := retry.Do(ctx, retry.Policy{Initial: 100 * time.Millisecond, Max: 5 * time.Second}, func(ctx context.Context) error {
		kv, err := openBucket(ctx, d.js, d.cfg.Bucket, d.cfg.Replicas)
		if err != nil {
			return err
		}
		if _, err := d.js.Stream(ctx, schemas.StreamEvents); err != nil {
			return fmt.Errorf("stream %s: %w", schemas.StreamEvents, err)
		}
		d.kv = kv
		return nil
	}, func(err error, next time.Duration) {
		d.log.Info("deliver: waiting for the delivery bucket and the event stream", "err", err, "retry_in", next)
	})
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	t := time.NewTicker(d.cfg.Tick)
	defer t.Stop()
	for {
		d.safeStep(ctx)
		d.ready.Store(true)
		select {
		case <-ctx.Done():
			d.shutdown()
			return nil
		case <-t.C:
		}
	}
}

func openBucket(ctx context.Context, js jetstream.JetStream, bucket string, replicas int) (jetstream.KeyValue, error) {
	kv, err := js.KeyValue(ctx, bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		kv, err = js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: bucket, Description: "auditrail delivery: statuses, leases, instances",
			History: 1, Storage: jetstream.FileStorage, Replicas: replicas})
		if errors.Is(err, jetstream.ErrBucketExists) {
			kv, err = js.KeyValue(ctx, bucket)
		}
	}
	if err == nil {
		_, err = natsx.EnsureReplicas(ctx, js, "KV_"+bucket, replicas)
	}
	if err != nil {
		return nil, fmt.Errorf("delivery bucket %s: %w", bucket, err)
	}
	return kv, nil
}

// instanceRecord is an instance's heartbeat; leaseRecord a destination's lease.
type instanceRecord struct {
	At time.Time `json:"at"`
}

type leaseRecord struct {
	Owner string    `json:"owner"`
	Until time.Time `json:"until"`
}

// step looks at the destinations once: which this instance owns, their
// leases, their workers, and now and then the stale consumers.
func (d *Deliverer) step(ctx context.Context) {
	now := time.Now()
	if now.Sub(d.liveAt) >= d.cfg.LeaseTTL/3 {
		d.heartbeat(ctx, now)
	}
	dests, err := d.src.Destinations()
	if err != nil {
		d.log.Warn("deliver: destinations that cannot be read are skipped", "err", err)
	}
	all := make(map[uuid.UUID]destination.ResolvedDestination, len(dests))
	for _, dst := range dests {
		all[dst.ID] = dst
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for id, w := range d.workers {
		dst, exists := all[id]
		mine := exists && d.owner(id) == d.cfg.Instance
		switch {
		case w.ended():
			// A worker that stopped by itself (a panic, logged) is started
			// again below while the lease is held.
			delete(d.workers, id)
		case !exists:
			w.stop()
			delete(d.workers, id)
			if d.src.Fresh() == nil { // else the sweep deletes what is left, later
				d.forget(ctx, id, w.gen)
			}
		case dst.Err != nil, !mine || dst.Generation != w.gen:
			w.stop()
			delete(d.workers, id)
			if !mine || dst.Err != nil {
				d.release(ctx, id) // another instance may open its secrets
			}
		}
	}
	for id, dst := range all {
		if d.owner(id) != d.cfg.Instance || dst.Err != nil {
			continue
		}
		w := d.workers[id]
		if w != nil && time.Until(w.leaseUntil) > d.cfg.LeaseTTL/2 {
			w.update(dst, d.log)
			continue
		}
		l, ok := d.acquire(ctx, id)
		if !ok {
			if w != nil {
				w.stop()
				delete(d.workers, id)
			}
			continue
		}
		if w != nil {
			w.leaseUntil = l.until
			w.update(dst, d.log)
			continue
		}
		sp, err := newSpec(dst)
		if err != nil {
			d.log.Warn("deliver: destination skipped", "destination", id, "err", err)
			continue
		}
		w = newWorker(d, sp, l)
		d.workers[id] = w
		go w.run()
	}
	if now.Sub(d.cleanedAt) >= max(30*time.Second, 3*d.cfg.Tick) || d.cleanedAt.IsZero() {
		d.cleanedAt = now
		d.cleanup(ctx, all)
	}
}

// safeStep is step, a panic logged (the next tick tries again).
func (d *Deliverer) safeStep(ctx context.Context) {
	defer func() {
		if r := recover(); r != nil {
			d.log.Error("deliver: step panicked", "panic", r, "stack", string(debug.Stack()))
		}
	}()
	d.step(ctx)
}

// heartbeat says this instance is alive, and reads which others are.
func (d *Deliverer) heartbeat(ctx context.Context, now time.Time) {
	b, _ := json.Marshal(instanceRecord{At: now.UTC()})
	if _, err := d.kv.Put(ctx, "instance."+d.cfg.Instance, b); err != nil {
		d.log.Warn("deliver: heartbeat", "err", err)
	}
	live := []string{d.cfg.Instance}
	lister, err := d.kv.ListKeysFiltered(ctx, "instance.*")
	if err != nil {
		d.log.Warn("deliver: list instances", "err", err)
		d.live, d.liveAt = live, now
		return
	}
	var stale []string
	for k := range lister.Keys() {
		name := strings.TrimPrefix(k, "instance.")
		if name == d.cfg.Instance {
			continue
		}
		e, err := d.kv.Get(ctx, k)
		if err != nil {
			continue
		}
		var r instanceRecord
		if json.Unmarshal(e.Value(), &r) != nil || now.Sub(r.At) > d.cfg.LeaseTTL {
			if now.Sub(r.At) > 10*d.cfg.LeaseTTL {
				stale = append(stale, k)
			}
			continue
		}
		live = append(live, name)
	}
	for _, k := range stale {
		_ = d.kv.Delete(ctx, k)
	}
	d.live, d.liveAt = live, now
}

// owner is the live instance that rendezvous hashing gives destination id.
func (d *Deliverer) owner(id uuid.UUID) string {
	var best string
	var top uint64
	for _, inst := range d.live {
		h := fnv.New64a()
		h.Write([]byte(inst))
		h.Write(id[:])
		if s := h.Sum64(); best == "" || s > top {
			best, top = inst, s
		}
	}
	return best
}

func leaseKey(id uuid.UUID) string { return "lease." + id.String() }

// lease is a lease taken by acquire: its end, and whether it was taken
// over from another instance whose lease ran out (that instance may have
// died with a batch in hand) rather than found free (never taken, or
// released by an instance that handed its batch back).
type lease struct {
	until    time.Time
	takeover bool
}

// acquire takes or renews the lease of destination id: free, expired or
// already this instance's.
func (d *Deliverer) acquire(ctx context.Context, id uuid.UUID) (lease, bool) {
	l := lease{until: time.Now().Add(d.cfg.LeaseTTL).UTC()}
	b, _ := json.Marshal(leaseRecord{Owner: d.cfg.Instance, Until: l.until})
	e, err := d.kv.Get(ctx, leaseKey(id))
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
		_, err = d.kv.Create(ctx, leaseKey(id), b)
	case err != nil:
	default:
		var cur leaseRecord
		if json.Unmarshal(e.Value(), &cur) != nil {
			l.takeover = true // unreadable: assume the worst
		} else if cur.Owner != d.cfg.Instance {
			if time.Now().Before(cur.Until) {
				return lease{}, false // another instance's, still valid
			}
			l.takeover = true
		}
		_, err = d.kv.Update(ctx, leaseKey(id), b, e.Revision())
	}
	if err != nil {
		if !errors.Is(err, jetstream.ErrKeyExists) {
			d.log.Warn("deliver: lease", "destination", id, "err", err)
		}
		return lease{}, false
	}
	return l, true
}

// release gives up the lease of id if this instance holds it.
func (d *Deliverer) release(ctx context.Context, id uuid.UUID) {
	e, err := d.kv.Get(ctx, leaseKey(id))
	if err != nil {
		return
	}
	var cur leaseRecord
	if json.Unmarshal(e.Value(), &cur) == nil && cur.Owner == d.cfg.Instance {
		_ = d.kv.Delete(ctx, leaseKey(id), jetstream.LastRevision(e.Revision()))
	}
}

// forget removes what a deleted destination leaves: its consumer, status
// and lease.
func (d *Deliverer) forget(ctx context.Context, id uuid.UUID, gen int) {
	if err := d.js.DeleteConsumer(ctx, schemas.StreamEvents, consumerName(id, gen)); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
		d.log.Warn("deliver: delete the consumer of a deleted destination", "destination", id, "err", err)
	}
	_ = d.kv.Delete(ctx, destination.DeliveryStatusKey(id))
	d.release(ctx, id)
	d.log.Info("deliver: destination deleted", "destination", id)
}

// consumerName is the durable consumer of a destination's generation.
func consumerName(id uuid.UUID, gen int) string {
	return "deliver_" + id.String() + "_" + strconv.Itoa(gen)
}

// parseConsumerName reverses consumerName.
func parseConsumerName(name string) (uuid.UUID, int, bool) {
	rest, ok := strings.CutPrefix(name, "deliver_")
	if !ok {
		return uuid.Nil, 0, false
	}
	i := strings.LastIndexByte(rest, '_')
	if i < 0 {
		return uuid.Nil, 0, false
	}
	id, err := uuid.Parse(rest[:i])
	gen, err2 := strconv.Atoi(rest[i+1:])
	return id, gen, err == nil && err2 == nil
}

// cleanup deletes the consumers of destinations that no longer exist and
// of generations replaced by a replay, once older than CleanupAge, and
// only while the list of destinations is confirmed current.
func (d *Deliverer) cleanup(ctx context.Context, all map[uuid.UUID]destination.ResolvedDestination) {
	if d.src.Fresh() != nil {
		return
	}
	st, err := d.js.Stream(ctx, schemas.StreamEvents)
	if err != nil {
		return
	}
	lister := st.ListConsumers(ctx)
	for info := range lister.Info() {
		id, gen, ok := parseConsumerName(info.Name)
		if !ok || time.Since(info.Created) < d.cfg.CleanupAge {
			continue
		}
		if dst, exists := all[id]; exists && dst.Generation == gen {
			continue
		}
		if err := d.js.DeleteConsumer(ctx, schemas.StreamEvents, info.Name); err == nil {
			d.log.Info("deliver: stale consumer deleted", "consumer", info.Name)
		}
		if _, exists := all[id]; !exists {
			_ = d.kv.Delete(ctx, destination.DeliveryStatusKey(id))
		}
	}
	if err := lister.Err(); err != nil {
		d.log.Warn("deliver: list consumers", "err", err)
	}
}

// shutdown stops every worker and gives up the leases and the heartbeat.
func (d *Deliverer) shutdown() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	d.mu.Lock()
	defer d.mu.Unlock()
	for id, w := range d.workers {
		w.stop()
		d.release(ctx, id)
		delete(d.workers, id)
	}
	_ = d.kv.Delete(ctx, "instance."+d.cfg.Instance)
	d.client.CloseIdleConnections()
}
