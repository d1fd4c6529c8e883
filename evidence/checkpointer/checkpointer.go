// Package checkpointer signs and publishes the tamper-evidence logs'
// checkpoints (issue 24). One instance at a time holds its lease in the
// tlog bucket; every Interval it reads every log's size (one query per
// kind, however many organizations), and for each log that grew since its
// last checkpoint, or whose last checkpoint is older than Quiet, it
// computes the root over the stored hashes, signs a C2SP checkpoint with
// the current key of the Keyring, stores it and publishes it on the
// organization's subject auditrail.events.<org_id>.checkpoint.
package checkpointer

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	sumtlog "golang.org/x/mod/sumdb/tlog"

	"github.com/auditrail/auditrail/evidence/lease"
	"github.com/auditrail/auditrail/evidence/sequencer"
	"github.com/auditrail/auditrail/evidence/witness"
	"github.com/auditrail/auditrail/internal/auditstore"
	"github.com/auditrail/auditrail/internal/tlog"
	"github.com/auditrail/auditrail/schemas"
)

// ErrInvalidConfig is returned by Validate.
var ErrInvalidConfig = errors.New("invalid checkpointer config")

// Config configures a Checkpointer.
type Config struct {
	// Instance names this process in the lease (one checkpointer at a time).
	Instance string
	// LeaseTTL is how long the lease outlives its holder's last renewal
	// (the lease is the key "checkpointer" of the tlog bucket).
	LeaseTTL time.Duration
	// Interval is the time between rounds; Quiet is the age after which
	// the checkpoint of a log that did not grow is signed again.
	Interval, Quiet time.Duration
	// Prefix starts every origin (tlog.Origin): names the deployment.
	Prefix string
	// Keyring configures the signing keys.
	Keyring KeyringConfig
	// Witnesses cosign every organization's checkpoints (the operator's:
	// --witness); WitnessTimeout bounds one submission (and half
	// LeaseTTL does: the lease is renewed between logs), and
	// WitnessConcurrency how many logs are cosigned at once.
	Witnesses          []witness.Witness
	WitnessTimeout     time.Duration
	WitnessConcurrency int
}

// DefaultConfig returns the defaults.
func DefaultConfig() Config {
	return Config{LeaseTTL: 10 * time.Second, Interval: time.Minute, Quiet: time.Hour, Prefix: "auditrail", Keyring: DefaultKeyringConfig(),
		WitnessTimeout: 5 * time.Second, WitnessConcurrency: 8}
}

// Validate checks the configuration.
func (c Config) Validate() error {
	switch {
	case c.Instance == "":
		return fmt.Errorf("%w: instance name is required", ErrInvalidConfig)
	case c.LeaseTTL < time.Second:
		return fmt.Errorf("%w: lease TTL %s under 1s", ErrInvalidConfig, c.LeaseTTL)
	case c.Interval <= 0:
		return fmt.Errorf("%w: interval %s", ErrInvalidConfig, c.Interval)
	case c.Quiet < c.Interval:
		return fmt.Errorf("%w: quiet period %s under the interval %s", ErrInvalidConfig, c.Quiet, c.Interval)
	case c.WitnessTimeout <= 0:
		return fmt.Errorf("%w: witness timeout %s", ErrInvalidConfig, c.WitnessTimeout)
	case c.WitnessConcurrency < 1:
		return fmt.Errorf("%w: witness concurrency %d", ErrInvalidConfig, c.WitnessConcurrency)
	}
	seen := map[string]bool{}
	for _, w := range c.Witnesses {
		if k := w.Key.String(); seen[k] {
			return fmt.Errorf("%w: witness key %s given twice", ErrInvalidConfig, w.Key.Name)
		} else {
			seen[k] = true
		}
	}
	if p, _, _, ok := tlog.ParseOrigin(tlog.Origin(c.Prefix, uuid.New(), tlog.KindAudit)); !ok || p != c.Prefix || !printable(c.Prefix) {
		return fmt.Errorf("%w: origin prefix %q (printable ASCII, no spaces, no '+')", ErrInvalidConfig, c.Prefix)
	}
	return c.Keyring.Validate()
}

// printable: non-empty printable ASCII without spaces or '+' (tlog.Origin's
// rule for a prefix), at most 200 bytes.
func printable(s string) bool {
	if s == "" || len(s) > 200 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e || s[i] == '+' {
			return false
		}
	}
	return true
}

// Store is what the checkpointer reads and writes of the log store.
type Store interface {
	LogHeads(ctx context.Context, kind auditstore.LogKind) (map[uuid.UUID]int64, error)
	ReadLogHashes(ctx context.Context, org uuid.UUID, kind auditstore.LogKind, indexes []int64) ([][32]byte, error)
	LatestCheckpoint(ctx context.Context, org uuid.UUID, kind auditstore.LogKind) (auditstore.Checkpoint, bool, error)
	SaveCheckpoint(ctx context.Context, org uuid.UUID, kind auditstore.LogKind, cp auditstore.Checkpoint) error
	SaveCheckpoints(ctx context.Context, cps []auditstore.LogCheckpoint) []error
}

// Publisher publishes to JetStream (jetstream.JetStream).
type Publisher interface {
	PublishMsg(ctx context.Context, msg *nats.Msg, opts ...jetstream.PublishOpt) (*jetstream.PubAck, error)
}

// Observer receives the checkpointer's metrics (*metrics.Registry).
type Observer interface {
	// CheckpointSigned counts a checkpoint signed and stored, by kind
	// (audit_logs, tool_executions).
	CheckpointSigned(kind string)
	// CheckpointPublishFailed counts a checkpoint stored but not published.
	CheckpointPublishFailed(kind string)
	// CheckpointRound reports, per kind, when the last checkpoint of any
	// log of the kind was signed.
	CheckpointRound(kind string, last time.Time)
}

type nopObserver struct{}

func (nopObserver) CheckpointSigned(string)           {}
func (nopObserver) CheckpointPublishFailed(string)    {}
func (nopObserver) CheckpointRound(string, time.Time) {}

// Deps are the checkpointer's connections.
type Deps struct {
	Store Store
	// KV is the tlog bucket (lease and keys); JS publishes the checkpoints.
	KV jetstream.KeyValue
	JS Publisher
	// Sealer seals the private keys (cpstate.Sealer, the control
	// plane's --secrets-keys).
	Sealer   Sealer
	Observer Observer
	Log      *slog.Logger
	// Witness submits to the operator's witnesses (nil: a
	// witness.Client over the default transport); OrgWitnesses lists the
	// organizations' own (nil: none), which OrgWitness calls (it must
	// pass the egress guard: an organization chose them).
	Witness      WitnessClient
	OrgWitnesses OrgWitnesses
	OrgWitness   WitnessClient
	// Kept, when set, holds hashes of the logs kept in memory (the
	// sequencer's, in the same process): a log's root is computed from
	// them before the store (nil: from the store).
	Kept KeptHashes
	// Grown, when set, tells the logs that grew through the sequencer of
	// the same process: while it leads, a round looks at those logs alone
	// and reads every log's head at most every FullHeadsEvery (nil: every
	// round reads them all).
	Grown GrownLogs
}

// GrownLogs tells the logs of kind appended to since the last call, with
// the epoch of the appender's lead and whether it leads
// (sequencer.Sequencer).
type GrownLogs interface {
	Grown(kind auditstore.LogKind) (sizes map[uuid.UUID]int64, epoch uint64, leading bool)
}

// FullHeadsEvery is how often a checkpointer told of the logs that grew
// (Deps.Grown) still reads every log's head: the quiet logs are signed
// again (Config.Quiet) and a log that shrank is found within it.
const FullHeadsEvery = time.Minute

// KeptHashes gives the stored hashes of a log at a size kept in memory
// (sequencer.Sequencer), or nil when it keeps none at that size.
type KeptHashes interface {
	KeptHashes(org uuid.UUID, kind auditstore.LogKind, size int64) map[int64]sumtlog.Hash
}

// Checkpointer signs checkpoints while it holds the lease.
type Checkpointer struct {
	cfg   Config
	d     Deps
	keys  *Keyring
	lease *lease.Lease
	log   *slog.Logger
	now   func() time.Time

	mu       sync.Mutex
	last     map[logID]signed // the last checkpoint of each log, while leading
	lastKind [2]time.Time
	// heads: per kind, when every log's head was last read and the epoch
	// of Deps.Grown then (zero time: to read at the next round).
	headsAt    [2]time.Time
	headsEpoch [2]uint64
	pending    map[logID]*pendingCosign // checkpoints missing cosignatures
	wstate     map[witnessKey]witnessState
	orgLists   map[uuid.UUID][]OrgWitness // the last list read of each organization's witnesses
}

type logID struct {
	org  uuid.UUID
	kind auditstore.LogKind
}

type signed struct {
	size int64
	at   time.Time
}

const leaseKey = "checkpointer"

// New returns a checkpointer.
func New(cfg Config, d Deps) (*Checkpointer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if d.Store == nil || d.KV == nil || d.JS == nil || d.Sealer == nil {
		return nil, fmt.Errorf("%w: store, bucket, JetStream and sealer are required", ErrInvalidConfig)
	}
	if d.Log == nil {
		d.Log = slog.New(slog.DiscardHandler)
	}
	if d.Observer == nil {
		d.Observer = nopObserver{}
	}
	if d.Witness == nil {
		d.Witness = witness.NewClient(nil)
	}
	if d.OrgWitnesses != nil && d.OrgWitness == nil {
		return nil, fmt.Errorf("%w: organizations' witnesses need their own (guarded) client", ErrInvalidConfig)
	}
	keys, err := NewKeyring(d.KV, d.Sealer, cfg.Keyring, d.Log)
	if err != nil {
		return nil, err
	}
	return &Checkpointer{cfg: cfg, d: d, keys: keys, lease: lease.New(d.KV, leaseKey, cfg.Instance, cfg.LeaseTTL, d.Log),
		log: d.Log, now: time.Now, last: map[logID]signed{}, pending: map[logID]*pendingCosign{}, wstate: map[witnessKey]witnessState{},
		orgLists: map[uuid.UUID][]OrgWitness{}}, nil
}

// Keyring is the checkpointer's keyring.
func (c *Checkpointer) Keyring() *Keyring { return c.keys }

// Run signs checkpoints until ctx ends.
func (c *Checkpointer) Run(ctx context.Context) error {
	for ctx.Err() == nil {
		if !c.lease.Acquire(ctx) {
			sleep(ctx, c.cfg.LeaseTTL/3)
			continue
		}
		c.lead(ctx)
	}
	return nil
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// lead runs a round every Interval while the lease is held; the last
// checkpoints are forgotten when it is lost (another instance may sign).
func (c *Checkpointer) lead(ctx context.Context) {
	c.mu.Lock()
	c.last = map[logID]signed{}
	c.pending = map[logID]*pendingCosign{}
	c.wstate = map[witnessKey]witnessState{}
	c.headsAt = [2]time.Time{}
	c.mu.Unlock()
	// The leader makes the signing key at once (when none is current), so
	// that the public keys are listed before the first checkpoint: a
	// verifier pins them first.
	if _, _, _, err := c.keys.Current(ctx); err != nil && ctx.Err() == nil {
		c.log.Warn("checkpointer: no signing key yet", "err", err)
	}
	c.publishOperatorWitnesses(ctx)
	next := time.Now()
	for ctx.Err() == nil {
		if !c.lease.Keep(ctx) {
			return
		}
		if !time.Now().Before(next) {
			if err := c.round(ctx, c.lease.Keep); err != nil && ctx.Err() == nil {
				c.log.Warn("checkpointer: round failed", "err", err)
			}
			next = time.Now().Add(c.cfg.Interval)
		}
		// Wake to renew the lease in time, or for the next round.
		sleep(ctx, min(time.Until(next), c.cfg.LeaseTTL/4))
	}
}

// Round signs the checkpoints due now, without the lease (a one-shot run,
// tests); Run runs a round every Interval while it holds the lease.
func (c *Checkpointer) Round(ctx context.Context) error { return c.round(ctx, nil) }

// round runs a round; keep (nil: none) renews the lease between logs and
// stops the round when it is lost.
func (c *Checkpointer) round(ctx context.Context, keep func(context.Context) bool) error {
	var errs []error
	key := &roundKey{}
	// The seal is read before the logs' sizes: every size read after it
	// holds every entry it seals.
	if s, ok, err := sequencer.ReadSealed(ctx, c.d.KV); err != nil {
		c.log.Warn("checkpointer: seal not read", "err", err)
	} else if ok {
		key.sealed = s.Time
	}
	for _, kind := range []auditstore.LogKind{auditstore.LogAudit, auditstore.LogExecutions} {
		if err := c.roundKind(ctx, kind, keep, key); err != nil {
			// A log left unsigned is looked at again next round, grown
			// or not: every head is read.
			c.mu.Lock()
			c.headsAt[kind] = time.Time{}
			c.mu.Unlock()
			errs = append(errs, err)
		}
	}
	c.cosignRound(ctx, keep)
	return errors.Join(errs...)
}

// roundKey is the signing key of a round, read from the keyring once, when
// the round's first checkpoint is due (a key rotates only there).
type roundKey struct {
	priv tlog.PrivateKey
	pub  tlog.PublicKey
	ok   bool
	// sealed is the seal read at the round's start (zero: none).
	sealed time.Time
}

func (c *Checkpointer) roundKind(ctx context.Context, kind auditstore.LogKind, keep func(context.Context) bool, key *roundKey) error {
	heads, err := c.heads(ctx, kind)
	if err != nil {
		return fmt.Errorf("log heads: %w", err)
	}
	c.log.Debug("checkpointer: round", "kind", kind, "logs", len(heads))
	var errs []error
	fail := func(org uuid.UUID, err error) {
		if len(errs) < maxRoundErrors {
			errs = append(errs, fmt.Errorf("org %s %s: %w", org, kind, err))
		}
	}
	var due []dueCheckpoint
	for org, size := range heads {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if keep != nil && !keep(ctx) {
			return errors.New("checkpointer lease lost")
		}
		d, ok, err := c.sign(ctx, logID{org, kind}, size, key)
		if err != nil {
			if errors.Is(err, errKeyring) {
				return err // no key: no log of the round can be signed
			}
			fail(org, err)
			continue
		}
		if ok {
			due = append(due, d)
		}
	}
	// Stored together (one write of the store for the round's
	// checkpoints), then published one by one.
	for i, err := range c.save(ctx, due) {
		if err != nil {
			fail(due[i].id.org, fmt.Errorf("save checkpoint %d: %w", due[i].cp.Size, err))
			continue
		}
		if err := c.publishSaved(ctx, due[i]); err != nil {
			fail(due[i].id.org, err)
		}
	}
	c.mu.Lock()
	last := c.lastKind[kind]
	c.mu.Unlock()
	if !last.IsZero() {
		c.d.Observer.CheckpointRound(tlogKind(kind).String(), last)
	}
	return errors.Join(errs...)
}

// heads returns the sizes of the logs of kind a round looks at: those
// that grew through the sequencer of this process (Deps.Grown) while it
// has led since every head was last read, less than FullHeadsEvery ago;
// else every log's, read from the store.
func (c *Checkpointer) heads(ctx context.Context, kind auditstore.LogKind) (map[uuid.UUID]int64, error) {
	if c.d.Grown == nil {
		return c.d.Store.LogHeads(ctx, kind)
	}
	// Taken before the read: what grows after it is told next round.
	grown, epoch, leading := c.d.Grown.Grown(kind)
	c.mu.Lock()
	at, seen := c.headsAt[kind], c.headsEpoch[kind]
	c.mu.Unlock()
	if leading && epoch == seen && !at.IsZero() && c.now().Sub(at) < FullHeadsEvery {
		return grown, nil
	}
	heads, err := c.d.Store.LogHeads(ctx, kind)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.headsAt[kind], c.headsEpoch[kind] = c.now(), epoch
	if !leading {
		c.headsAt[kind] = time.Time{} // no sequencer here tells what grows
	}
	c.mu.Unlock()
	return heads, nil
}

// maxRoundErrors bounds the errors a round reports (one log line).
const maxRoundErrors = 10

// errKeyring: the round has no signing key.
var errKeyring = errors.New("no signing key")

// ErrLogShrank: a log's size is below its last checkpoint's (the store was
// rolled back or edited); it is not signed again at the smaller size.
var ErrLogShrank = errors.New("log is smaller than its last checkpoint")

func tlogKind(k auditstore.LogKind) tlog.Kind {
	if k == auditstore.LogExecutions {
		return tlog.KindExecutions
	}
	return tlog.KindAudit
}

// dueCheckpoint is a checkpoint signed in a round, to store and publish.
type dueCheckpoint struct {
	id  logID
	cp  auditstore.Checkpoint
	pub tlog.PublicKey
}

// sign signs a checkpoint of the log at size if one is due (false: none).
func (c *Checkpointer) sign(ctx context.Context, id logID, size int64, key *roundKey) (dueCheckpoint, bool, error) {
	c.mu.Lock()
	prev, known := c.last[id]
	c.mu.Unlock()
	if !known {
		// First look at this log since the lease was taken: its stored one.
		cp, ok, err := c.d.Store.LatestCheckpoint(ctx, id.org, id.kind)
		if err != nil {
			return dueCheckpoint{}, false, fmt.Errorf("latest checkpoint: %w", err)
		}
		if ok {
			prev, known = signed{size: cp.Size, at: cp.Time}, true
			c.remember(id, prev)
		}
	}
	now := c.now()
	if known && size < prev.size {
		return dueCheckpoint{}, false, fmt.Errorf("%w: size %d, checkpoint of size %d", ErrLogShrank, size, prev.size)
	}
	if known && size == prev.size && now.Sub(prev.at) < c.cfg.Quiet {
		return dueCheckpoint{}, false, nil
	}
	root, err := sumtlog.TreeHash(size, c.hashReader(ctx, id, size))
	if err != nil {
		return dueCheckpoint{}, false, fmt.Errorf("root at %d: %w", size, err)
	}
	if !key.ok {
		priv, pub, _, err := c.keys.Current(ctx)
		if err != nil {
			return dueCheckpoint{}, false, fmt.Errorf("%w: %w", errKeyring, err)
		}
		key.priv, key.pub, key.ok = priv, pub, true
	}
	priv, pub := key.priv, key.pub
	// The checkpoint's time: now, never before its key's not_before.
	at := c.now().UTC().Truncate(time.Millisecond)
	if at.Before(pub.NotBefore) {
		at = pub.NotBefore
	}
	cp := tlog.Checkpoint{Origin: tlog.Origin(c.cfg.Prefix, id.org, tlogKind(id.kind)), Size: size, Root: root, Time: at}
	if !key.sealed.IsZero() {
		cp.SealedUntil = key.sealed
		if cp.SealedUntil.After(at) {
			cp.SealedUntil = at
		}
	}
	msg, err := tlog.Sign(cp, priv)
	if err != nil {
		return dueCheckpoint{}, false, fmt.Errorf("sign: %w", err)
	}
	return dueCheckpoint{id: id, cp: auditstore.Checkpoint{Size: size, Root: root, Time: at, KeyID: pub.KeyID, Note: msg}, pub: pub}, true, nil
}

// hashReader reads the hashes of the log id at size: those kept in
// memory (Deps.Kept), then the store's.
func (c *Checkpointer) hashReader(ctx context.Context, id logID, size int64) sumtlog.HashReader {
	store := auditstore.LogHashReader(ctx, c.d.Store, id.org, id.kind)
	if c.d.Kept == nil {
		return store
	}
	kept := c.d.Kept.KeptHashes(id.org, id.kind, size)
	if len(kept) == 0 {
		return store
	}
	return sumtlog.HashReaderFunc(func(indexes []int64) ([]sumtlog.Hash, error) {
		out := make([]sumtlog.Hash, len(indexes))
		var missing []int64
		for i, x := range indexes {
			h, ok := kept[x]
			if !ok {
				missing = append(missing, x)
				continue
			}
			out[i] = h
		}
		if len(missing) == 0 {
			return out, nil
		}
		got, err := store.ReadHashes(missing)
		if err != nil {
			return nil, err
		}
		for i, j := 0, 0; i < len(indexes); i++ {
			if _, ok := kept[indexes[i]]; !ok {
				out[i] = got[j]
				j++
			}
		}
		return out, nil
	})
}

// save stores the round's checkpoints together.
func (c *Checkpointer) save(ctx context.Context, due []dueCheckpoint) []error {
	if len(due) == 0 {
		return nil
	}
	cps := make([]auditstore.LogCheckpoint, len(due))
	for i, d := range due {
		cps[i] = auditstore.LogCheckpoint{Org: d.id.org, Kind: d.id.kind, Checkpoint: d.cp}
	}
	return c.d.Store.SaveCheckpoints(ctx, cps)
}

// publishSaved publishes a stored checkpoint and queues it for the
// witnesses.
func (c *Checkpointer) publishSaved(ctx context.Context, d dueCheckpoint) error {
	kind := tlogKind(d.id.kind).String()
	c.d.Observer.CheckpointSigned(kind)
	if err := c.publish(ctx, d.id.org, d.cp.Note); err != nil {
		// Stored but not published: due again next round (a newer one of
		// the same size replaces it), so the stream gets one.
		c.d.Observer.CheckpointPublishFailed(kind)
		c.remember(d.id, signed{size: d.cp.Size})
		return err
	}
	c.remember(d.id, signed{size: d.cp.Size, at: d.cp.Time})
	c.mu.Lock()
	c.lastKind[d.id.kind] = d.cp.Time
	c.mu.Unlock()
	c.queueCosign(ctx, d.id, d.cp, d.pub)
	return nil
}

func (c *Checkpointer) remember(id logID, s signed) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.last[id] = s
}

// MsgID is the Nats-Msg-Id of a published checkpoint: the hex SHA-256 of
// its signed note (the same note published twice is one message).
func MsgID(note []byte) string {
	h := sha256.Sum256(note)
	return hex.EncodeToString(h[:])
}

// publish sends the signed note on auditrail.events.<org>.checkpoint.
func (c *Checkpointer) publish(ctx context.Context, org uuid.UUID, note []byte) error {
	m := nats.NewMsg(schemas.EventSubject(org.String(), schemas.KindCheckpoint))
	m.Data = note
	m.Header.Set(schemas.HeaderSchema, schemas.SchemaCheckpointV1)
	m.Header.Set(schemas.HeaderContentType, schemas.ContentTextPlain)
	m.Header.Set(schemas.HeaderMsgID, MsgID(note))
	if _, err := c.d.JS.PublishMsg(ctx, m); err != nil {
		return fmt.Errorf("publish checkpoint: %w", err)
	}
	return nil
}
