package controlplane

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/auditrail/auditrail/internal/retry"
)

// DefaultBucket is the KV bucket of the control-plane state.
const DefaultBucket = "auditrail_controlplane"

// DefaultStatesBucket is the KV bucket of the used OAuth and picker states:
// the callback (the picker's claim) creates a key per state nonce, so that a
// state works once. Its keys expire after StatesMaxAge (longer than a state
// lives).
const DefaultStatesBucket = "auditrail_oauth_states"

// StatesMaxAge is how long a used state is remembered: the picker's
// marker lifetime (pickerMarkerTTL), which outlives its report window, and
// far more than the 10 minutes of an OAuth state.
const StatesMaxAge = pickerMarkerTTL

// Errors of the state.
var (
	// ErrInvalidOption: a StateConfig or ServiceConfig is not valid.
	ErrInvalidOption = errors.New("invalid option")
	// ErrStale: the server has not confirmed for longer than
	// StateConfig.MaxStaleness that the mirror is current.
	ErrStale = errors.New("control-plane state is stale")
	// ErrReadOnly: a write on a read-only state.
	ErrReadOnly = errors.New("control-plane state is read-only in this process")
)

// StateConfig says which bucket holds the control-plane state and how this
// process uses it.
type StateConfig struct {
	// Bucket is the KV bucket (DefaultBucket).
	Bucket string
	// ReadOnly processes (query, toolrunner) look the bucket up instead of
	// creating it and refuse every write: they need only read permissions.
	ReadOnly bool
	// MaxStaleness bounds how long the mirror may go without the server
	// confirming that it holds every change; past it, the credentials that
	// the state decides (API keys, JWT members) are refused with 503.
	MaxStaleness time.Duration
	// Reconnect is the back-off between attempts to re-create a lost watch.
	Reconnect retry.Policy
	// StatesBucket is the KV bucket of the used OAuth states
	// (DefaultStatesBucket when empty); a writable state creates it.
	StatesBucket string
}

// DefaultStateConfig returns the writable DefaultBucket, a 30 s staleness
// bound and a reconnect back-off from 100 ms to 5 s.
func DefaultStateConfig() StateConfig {
	return StateConfig{Bucket: DefaultBucket, MaxStaleness: 30 * time.Second,
		Reconnect: retry.Policy{Initial: 100 * time.Millisecond, Max: 5 * time.Second}, StatesBucket: DefaultStatesBucket}
}

var bucketName = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// Validate checks the configuration.
func (c StateConfig) Validate() error {
	switch {
	case !bucketName.MatchString(c.Bucket):
		return fmt.Errorf("%w: bucket %q is not a valid KV bucket name", ErrInvalidOption, c.Bucket)
	case c.StatesBucket != "" && (!bucketName.MatchString(c.StatesBucket) || c.StatesBucket == c.Bucket):
		return fmt.Errorf("%w: states bucket %q is not a valid KV bucket name of its own", ErrInvalidOption, c.StatesBucket)
	case c.MaxStaleness < 100*time.Millisecond:
		return fmt.Errorf("%w: max staleness %s below 100ms", ErrInvalidOption, c.MaxStaleness)
	}
	if err := c.Reconnect.Validate(); err != nil {
		return fmt.Errorf("%w: reconnect: %w", ErrInvalidOption, err)
	}
	return nil
}

// State is the control-plane state: a NATS KV bucket, mirrored in memory by
// a watcher so that every instance sees a change (a disabled API key, a new
// member) within milliseconds of its write. Reads come from memory; writes go
// to KV with compare-and-set on the revision and are applied locally at once.
//
// The watch is re-created, from the last revision it delivered, whenever it
// stops or falls behind. Every MaxStaleness/4 the state asks the server for
// the last sequence of the bucket's stream (one direct get); the mirror is
// confirmed current once the watch has delivered that sequence. Fresh fails
// when no confirmation is more recent than MaxStaleness, and Access then
// refuses the credentials the state decides (fail closed, 503).
//
// Writes are atomic batches on the bucket's stream (AllowAtomicPublish):
// the changed keys, each with its expected last revision, and the pending
// audit event of the change under outbox.<event_id>, all stored or none
// (see Service for the outbox).
type State struct {
	cfg    StateConfig
	kv     jetstream.KeyValue
	js     jetstream.JetStream
	nc     *nats.Conn
	log    *slog.Logger
	now    func() time.Time
	prefix string // subject prefix of the keys: $KV.<bucket>.
	stream string // KV_<bucket>
	sem    chan struct{}

	mu      sync.RWMutex
	entries map[string]entry
	gone    map[string]uint64       // revision of the delete marker of deleted keys
	byHash  map[string]string       // API key hash → KV key
	pending map[string]pendingEvent // outbox: event id → record
	// watched is the last revision the watch delivered; confirmed the last
	// time the server confirmed the mirror current; target a last sequence
	// of the stream, read at targetAt, that the watch has not yet delivered.
	watched   uint64
	confirmed time.Time
	target    uint64
	targetAt  time.Time

	synced chan struct{}
	// cut stops the current watch (tests cut it to prove it comes back).
	cutMu sync.Mutex
	cut   func()

	// states is the bucket of the used OAuth states, opened on first use.
	statesMu sync.Mutex
	states   jetstream.KeyValue
}

type entry struct {
	rev   uint64
	value []byte
}

// pendingEvent is an event of the outbox, not yet known to be stored in
// the audit stream.
type pendingEvent struct {
	id    string
	rev   uint64
	value []byte
}

// outboxPrefix is the prefix of the outbox keys: outbox.<event_id>.
const outboxPrefix = "outbox."

// commitConcurrency bounds the atomic batches in flight from one process
// (the server allows 50 per stream).
const commitConcurrency = 16

// OpenState opens the bucket (a writable state creates it, and enables
// atomic batches and per-message TTLs on its stream) and mirrors it until
// ctx ends. It returns once the mirror holds every existing key.
func OpenState(ctx context.Context, js jetstream.JetStream, cfg StateConfig, log *slog.Logger) (*State, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.Default()
	}
	kv, err := openBucket(ctx, js, cfg)
	if err != nil {
		return nil, fmt.Errorf("control-plane bucket %s: %w", cfg.Bucket, err)
	}
	s := &State{cfg: cfg, kv: kv, js: js, nc: js.Conn(), log: log, now: time.Now,
		prefix: "$KV." + cfg.Bucket + ".", stream: "KV_" + cfg.Bucket, sem: make(chan struct{}, commitConcurrency),
		entries: map[string]entry{}, gone: map[string]uint64{}, byHash: map[string]string{}, pending: map[string]pendingEvent{},
		synced: make(chan struct{})}
	w, err := s.openWatch(ctx)
	if err != nil {
		return nil, fmt.Errorf("watch %s: %w", cfg.Bucket, err)
	}
	go s.run(ctx, w)
	if !cfg.ReadOnly {
		// The callback opens it again if this fails (credentials of an
		// older setup): only the OAuth callback depends on it.
		if _, err := s.oauthStates(ctx); err != nil {
			log.Warn("OAuth states bucket unavailable; the OAuth callback answers 503 until it is", "bucket", s.statesBucket(), "err", err)
		}
	}
	select {
	case <-s.synced:
		return s, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(30 * time.Second):
		return nil, fmt.Errorf("%w: initial sync of %s timed out", ErrUnavailabe, cfg.Bucket)
	}
}

// openBucket looks the bucket up, and for a writable state creates it or
// turns on what the outbox needs; it never rewrites an existing bucket's
// other settings.
func openBucket(ctx context.Context, js jetstream.JetStream, cfg StateConfig) (jetstream.KeyValue, error) {
	kv, err := js.KeyValue(ctx, cfg.Bucket)
	if cfg.ReadOnly || (err != nil && !errors.Is(err, jetstream.ErrBucketNotFound)) {
		return kv, err
	}
	if err != nil {
		kv, err = js.CreateKeyValue(ctx, jetstream.KeyValueConfig{
			Bucket:      cfg.Bucket,
			Description: "auditrail control-plane state",
			History:     1,
			Storage:     jetstream.FileStorage,
		})
		if errors.Is(err, jetstream.ErrBucketExists) {
			kv, err = js.KeyValue(ctx, cfg.Bucket)
		}
		if err != nil {
			return nil, err
		}
	}
	st, err := js.Stream(ctx, "KV_"+cfg.Bucket)
	if err != nil {
		return nil, err
	}
	sc := st.CachedInfo().Config
	if !sc.AllowAtomicPublish || !sc.AllowMsgTTL {
		sc.AllowAtomicPublish, sc.AllowMsgTTL = true, true
		if _, err := js.UpdateStream(ctx, sc); err != nil {
			return nil, fmt.Errorf("enable atomic batches: %w", err)
		}
	}
	return kv, nil
}

// openWatch watches every key from the revision after the last one delivered.
func (s *State) openWatch(ctx context.Context) (jetstream.KeyWatcher, error) {
	s.mu.RLock()
	from := s.watched
	s.mu.RUnlock()
	var opts []jetstream.WatchOpt
	if from > 0 {
		opts = append(opts, jetstream.ResumeFromRevision(from+1))
	}
	w, err := s.kv.WatchAll(ctx, opts...)
	if err != nil {
		return nil, err
	}
	s.cutMu.Lock()
	s.cut = func() { _ = w.Stop() }
	s.cutMu.Unlock()
	return w, nil
}

// run applies the watch until ctx ends, re-creates it when it stops or
// falls behind, and probes the stream to confirm the mirror current.
func (s *State) run(ctx context.Context, w jetstream.KeyWatcher) {
	probe := time.NewTicker(s.cfg.MaxStaleness / 4)
	defer probe.Stop()
	bo := s.cfg.Reconnect.Backoff()
	started, initial := s.now(), true
	for {
		if w == nil {
			if !retry.Sleep(ctx, bo.NextBackOff()) {
				return
			}
			var err error
			if w, err = s.openWatch(ctx); err != nil {
				s.log.Warn("control-plane watch: cannot re-create it", "err", err)
				w = nil
				continue
			}
			started = s.now()
			s.log.Info("control-plane watch re-created")
		}
		select {
		case <-ctx.Done():
			_ = w.Stop()
			return
		case e, ok := <-w.Updates():
			if !ok {
				if ctx.Err() != nil {
					return
				}
				s.log.Warn("control-plane watch stopped; re-creating it")
				w = nil
				continue
			}
			if e == nil {
				// The watch delivered everything the stream held when it
				// started: the mirror was current then.
				s.mu.Lock()
				s.confirmed = maxTime(s.confirmed, started)
				if s.target != 0 && started.After(s.targetAt) {
					s.target = 0
				}
				s.mu.Unlock()
				bo.Reset()
				if initial {
					initial = false
					close(s.synced)
				}
				continue
			}
			deleted := e.Operation() == jetstream.KeyValueDelete || e.Operation() == jetstream.KeyValuePurge
			s.mu.Lock()
			s.applyLocked(e.Key(), e.Revision(), e.Value(), deleted)
			s.watched = max(s.watched, e.Revision())
			if s.target != 0 && s.watched >= s.target {
				s.confirmed, s.target = maxTime(s.confirmed, s.targetAt), 0
			}
			s.mu.Unlock()
		case <-probe.C:
			if s.probe(ctx) {
				s.log.Warn("control-plane watch fell behind the stream; re-creating it")
				stopWatch(w)
				w = nil
			}
		}
	}
}

// stopWatch stops w and drains what it still delivers, so that its
// delivery goroutine never blocks on a channel nobody reads.
func stopWatch(w jetstream.KeyWatcher) {
	_ = w.Stop()
	go func() {
		for range w.Updates() {
		}
	}()
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// probe reads the last sequence of the stream: the mirror is current once
// the watch has delivered it. It reports whether the watch is stuck: a
// sequence read half the staleness bound ago is still not delivered.
func (s *State) probe(ctx context.Context) (stuck bool) {
	at := s.now()
	pctx, cancel := context.WithTimeout(ctx, s.cfg.MaxStaleness/4)
	defer cancel()
	last, err := s.lastSeq(pctx)
	if err != nil {
		s.log.Debug("control-plane probe failed", "err", err)
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.watched >= last:
		s.confirmed, s.target = maxTime(s.confirmed, at), 0
	case s.target == 0:
		s.target, s.targetAt = last, at
	default:
		// Keep the oldest unmet target: it says how long the watch has lagged.
		return at.Sub(s.targetAt) > s.cfg.MaxStaleness/2
	}
	return false
}

// lastSeq returns the sequence of the newest message of the bucket (0 when
// empty), by a direct get that any replica answers.
func (s *State) lastSeq(ctx context.Context) (uint64, error) {
	req, _ := json.Marshal(map[string]string{"last_by_subj": s.prefix + ">"})
	m, err := s.nc.RequestWithContext(ctx, "$JS.API.DIRECT.GET."+s.stream, req)
	if err != nil {
		return 0, err
	}
	if st := m.Header.Get("Status"); st == "404" {
		return 0, nil
	} else if st != "" {
		return 0, fmt.Errorf("direct get: status %s %s", st, m.Header.Get("Description"))
	}
	return strconv.ParseUint(m.Header.Get(jetstream.SequenceHeader), 10, 64)
}

// Fresh returns nil while the mirror was confirmed current within
// MaxStaleness; otherwise an error that is ErrStale and a 503 fiber error.
func (s *State) Fresh() error {
	s.mu.RLock()
	c := s.confirmed
	s.mu.RUnlock()
	if age := s.now().Sub(c); age > s.cfg.MaxStaleness {
		msg := fmt.Sprintf("%s: not confirmed current for %s (bound %s)", ErrStale, age.Round(time.Millisecond), s.cfg.MaxStaleness)
		return fmt.Errorf("%w: %w", fiber.NewError(fiber.StatusServiceUnavailable, msg), ErrStale)
	}
	return nil
}

// applyLocked records a change unless the mirror already holds it or a
// newer revision.
func (s *State) applyLocked(key string, rev uint64, value []byte, deleted bool) {
	if strings.HasPrefix(key, markerPrefix) {
		return
	}
	if id, ok := strings.CutPrefix(key, outboxPrefix); ok {
		if p, ok := s.pending[id]; ok && p.rev > rev {
			return
		}
		if deleted {
			delete(s.pending, id)
		} else {
			s.pending[id] = pendingEvent{id: id, rev: rev, value: value}
		}
		return
	}
	if cur, ok := s.entries[key]; ok && cur.rev >= rev {
		return
	}
	if g, ok := s.gone[key]; ok && g >= rev {
		return
	}
	if old, ok := s.entries[key]; ok && strings.HasPrefix(key, "apikey.") {
		if h := hashOf(old.value); h != "" {
			delete(s.byHash, h)
		}
	}
	if deleted {
		delete(s.entries, key)
		s.gone[key] = rev
		return
	}
	delete(s.gone, key)
	s.entries[key] = entry{rev: rev, value: value}
	if strings.HasPrefix(key, "apikey.") {
		if h := hashOf(value); h != "" {
			s.byHash[h] = key
		}
	}
}

func hashOf(v []byte) string {
	var k struct {
		Hash string `json:"hash"`
	}
	_ = json.Unmarshal(v, &k)
	return k.Hash
}

// get decodes key into v; it returns the revision, or ErrNotFound.
func (s *State) get(key string, v any) (uint64, error) {
	s.mu.RLock()
	e, ok := s.entries[key]
	s.mu.RUnlock()
	if !ok {
		return 0, ErrNotFound
	}
	if err := json.Unmarshal(e.value, v); err != nil {
		return 0, fmt.Errorf("decode %s: %w", key, err)
	}
	return e.rev, nil
}

// list returns the values under prefix in key order.
func (s *State) list(prefix string) [][]byte {
	s.mu.RLock()
	keys := make([]string, 0)
	for k := range s.entries {
		if strings.HasPrefix(k, prefix) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	out := make([][]byte, len(keys))
	for i, k := range keys {
		out[i] = s.entries[k].value
	}
	s.mu.RUnlock()
	return out
}

func listAs[T any](s *State, prefix string) ([]T, error) {
	raw := s.list(prefix)
	out := make([]T, 0, len(raw))
	for _, b := range raw {
		var v T
		if err := json.Unmarshal(b, &v); err != nil {
			return nil, fmt.Errorf("decode under %s: %w", prefix, err)
		}
		out = append(out, v)
	}
	return out, nil
}

// write is one key of an atomic commit: value at key, or its deletion,
// provided key is still at rev (0: key does not exist); a marker's value
// expires after ttl.
type write struct {
	key   string
	value any
	del   bool
	rev   uint64
	ttl   time.Duration
}

// markerPrefix is the prefix of the markers: keys written only to be
// created once (a single-use claim committed together with its event),
// that expire after their TTL. The mirror does not hold them: their
// compare-and-set is decided by the server.
const markerPrefix = "marker."

// setMarker creates the marker key (markerPrefix added), which expires
// after ttl; the commit fails with ErrConflict while it exists.
func setMarker(key string, ttl time.Duration) write {
	return write{key: markerPrefix + key, value: true, ttl: ttl}
}

// setKey writes v at key if key is still at rev (0: creates it).
func setKey(key string, v any, rev uint64) write { return write{key: key, value: v, rev: rev} }

// deleteKey deletes key if it is still at rev.
func deleteKey(key string, rev uint64) write { return write{key: key, del: true, rev: rev} }

// batchAck is the server's answer to the commit of an atomic batch.
type batchAck struct {
	Error *jetstream.APIError `json:"error,omitempty"`
	Seq   uint64              `json:"seq"`
	Count int                 `json:"count"`
}

// commit stores writes and, when ev is not nil, the pending event under
// outbox.<ev.id> as one atomic batch: all of them or none. A key changed
// since its expected revision fails the whole batch with ErrConflict. On
// success the mirror holds the writes at once.
func (s *State) commit(ctx context.Context, writes []write, ev *pendingEvent) error {
	if s.cfg.ReadOnly {
		return fmt.Errorf("%w: %w", ErrUnavailabe, ErrReadOnly)
	}
	keys := make([]string, 0, len(writes)+1)
	values := make([][]byte, 0, len(writes)+1)
	msgs := make([]*nats.Msg, 0, len(writes)+1)
	s.mu.RLock()
	for _, w := range writes {
		m := nats.NewMsg(s.prefix + w.key)
		if w.del {
			m.Header.Set("KV-Operation", "DEL")
		} else {
			b, err := json.Marshal(w.value)
			if err != nil {
				s.mu.RUnlock()
				return fmt.Errorf("encode %s: %w", w.key, err)
			}
			m.Data = b
		}
		exp := w.rev
		if exp == 0 {
			exp = s.gone[w.key] // a deleted key is created over its delete marker
		}
		m.Header.Set(jetstream.ExpectedLastSubjSeqHeader, strconv.FormatUint(exp, 10))
		if w.ttl > 0 {
			m.Header.Set(jetstream.MsgTTLHeader, w.ttl.String())
		}
		keys, values, msgs = append(keys, w.key), append(values, m.Data), append(msgs, m)
	}
	s.mu.RUnlock()
	if ev != nil {
		m := nats.NewMsg(s.prefix + outboxPrefix + ev.id)
		m.Data = ev.value
		m.Header.Set(jetstream.ExpectedLastSubjSeqHeader, "0")
		keys, values, msgs = append(keys, outboxPrefix+ev.id), append(values, ev.value), append(msgs, m)
	}
	if len(msgs) == 0 {
		return nil
	}
	last, err := s.publishBatch(ctx, msgs)
	if err != nil {
		return err
	}
	s.mu.Lock()
	first := last - uint64(len(msgs)) + 1
	for i, k := range keys {
		del := i < len(writes) && writes[i].del
		s.applyLocked(k, first+uint64(i), values[i], del)
	}
	s.mu.Unlock()
	return nil
}

// publishBatch sends msgs as one atomic batch and returns the stream
// sequence of the last one.
func (s *State) publishBatch(ctx context.Context, msgs []*nats.Msg) (uint64, error) {
	select {
	case s.sem <- struct{}{}:
		defer func() { <-s.sem }()
	case <-ctx.Done():
		return 0, fmt.Errorf("%w: %w", ErrUnavailabe, ctx.Err())
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
	}
	id := uuid.NewString()
	for i, m := range msgs {
		m.Header.Set("Nats-Batch-Id", id)
		m.Header.Set("Nats-Batch-Sequence", strconv.Itoa(i+1))
	}
	commit := msgs[len(msgs)-1]
	commit.Header.Set("Nats-Batch-Commit", "1")
	for _, m := range msgs[:len(msgs)-1] {
		if err := s.nc.PublishMsg(m); err != nil {
			return 0, fmt.Errorf("%w: write %s: %w", ErrUnavailabe, m.Subject, err)
		}
	}
	resp, err := s.nc.RequestMsgWithContext(ctx, commit)
	if err != nil {
		// The batch may or may not be stored; if it is, its outbox event
		// is published by the sweep.
		return 0, fmt.Errorf("%w: write %s: %w", ErrUnavailabe, commit.Subject, err)
	}
	var ack batchAck
	if err := json.Unmarshal(resp.Data, &ack); err != nil {
		return 0, fmt.Errorf("%w: write: bad answer %q: %w", ErrUnavailabe, resp.Data, err)
	}
	if ack.Error != nil {
		if ack.Error.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence {
			return 0, fmt.Errorf("%w: changed concurrently, retry", ErrConflict)
		}
		return 0, fmt.Errorf("%w: write: %w", ErrUnavailabe, ack.Error)
	}
	if ack.Count != len(msgs) || ack.Seq < uint64(len(msgs)) {
		return 0, fmt.Errorf("%w: write: batch of %d acknowledged as %d at %d", ErrUnavailabe, len(msgs), ack.Count, ack.Seq)
	}
	return ack.Seq, nil
}

// pendingEvents returns the outbox entries in the order they were written.
func (s *State) pendingEvents() []pendingEvent {
	s.mu.RLock()
	out := make([]pendingEvent, 0, len(s.pending))
	for _, p := range s.pending {
		out = append(out, p)
	}
	s.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].rev < out[j].rev })
	return out
}

// pendingCount returns the number of outbox entries.
func (s *State) pendingCount() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.pending)
}

// outboxDone removes an outbox entry whose event is stored: a purge whose
// marker expires after a minute (the bucket leaves nothing behind).
func (s *State) outboxDone(ctx context.Context, id string) error {
	if err := s.kv.Purge(ctx, outboxPrefix+id, jetstream.PurgeTTL(time.Minute)); err != nil {
		return fmt.Errorf("clear outbox entry %s: %w", id, err)
	}
	s.mu.Lock()
	delete(s.pending, id)
	s.mu.Unlock()
	return nil
}

// keyByHash returns the KV key of the API key with this hash.
func (s *State) keyByHash(hash string) (string, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	k, ok := s.byHash[hash]
	return k, ok
}

// enc makes any string safe as a KV key token.
func enc(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }

// KV keys of each kind of resource.
func orgKey(org string) string              { return "org." + org }
func projectKey(org, p string) string       { return "project." + org + "." + p }
func memberKey(org, user string) string     { return "member." + org + "." + enc(user) }
func pmemberKey(org, p, user string) string { return "pmember." + org + "." + p + "." + enc(user) }
func apiKeyKey(org, id string) string       { return "apikey." + org + "." + id }
func hookKey(org, scope, id string) string  { return "hook." + org + "." + scope + "." + id }
func secretKey(org, p, name string) string  { return "secret." + org + "." + p + "." + enc(name) }
func connKey(org, p, user, prov string) string {
	return "conn." + org + "." + p + "." + enc(user) + "." + enc(prov)
}
func providerKey(org, id string) string { return "provider." + org + "." + enc(id) }

func (s *State) statesBucket() string {
	if s.cfg.StatesBucket == "" {
		return DefaultStatesBucket
	}
	return s.cfg.StatesBucket
}

// oauthStates opens (a writable state creates) the bucket of used states.
func (s *State) oauthStates(ctx context.Context) (jetstream.KeyValue, error) {
	s.statesMu.Lock()
	defer s.statesMu.Unlock()
	if s.states != nil {
		return s.states, nil
	}
	if s.cfg.ReadOnly {
		return nil, fmt.Errorf("%w: %w", ErrUnavailabe, ErrReadOnly)
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	kv, err := s.js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: s.statesBucket(),
		Description: "auditrail: used OAuth states (single use)", History: 1, TTL: StatesMaxAge, Storage: jetstream.FileStorage})
	if err != nil {
		return nil, fmt.Errorf("%w: OAuth states bucket %s: %w", ErrUnavailabe, s.statesBucket(), err)
	}
	s.states = kv
	return kv, nil
}

// claimState marks the state nonce used; false when it already was (a
// replay). Every instance shares the bucket.
func (s *State) claimState(ctx context.Context, nonce string) (bool, error) {
	return s.claimStateAs(ctx, nonce, []byte("used"))
}

// claimStateAs is claimState keeping value with the claim (stateClaim
// answers it while the claim is remembered, StatesMaxAge).
func (s *State) claimStateAs(ctx context.Context, nonce string, value []byte) (bool, error) {
	kv, err := s.oauthStates(ctx)
	if err != nil {
		return false, err
	}
	if _, err := kv.Create(ctx, nonce, value); err != nil {
		if errors.Is(err, jetstream.ErrKeyExists) {
			return false, nil
		}
		return false, fmt.Errorf("%w: mark the OAuth state used: %w", ErrUnavailabe, err)
	}
	return true, nil
}

// stateClaim returns the value kept with the claim of the state nonce, or
// ErrNotFound when it was never claimed (or its claim is forgotten).
func (s *State) stateClaim(ctx context.Context, nonce string) ([]byte, error) {
	kv, err := s.oauthStates(ctx)
	if err != nil {
		return nil, err
	}
	e, err := kv.Get(ctx, nonce)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("%w: read the state claim: %w", ErrUnavailabe, err)
	}
	return e.Value(), nil
}

// connPrefix is the prefix of the users' connections: the only keys that a
// read-only state (the tool runner) may write, to persist refreshed tokens.
const connPrefix = "conn."

// updateConn writes a connection key if it is still at rev (compare-and-set
// on the key's revision, ErrConflict otherwise) and applies it to the
// mirror at once. It is the narrow write path of the token refresh: one
// key, no outbox event (a refresh is not an administrative change), allowed
// to read-only states too.
func (s *State) updateConn(ctx context.Context, key string, v any, rev uint64) (uint64, error) {
	if !strings.HasPrefix(key, connPrefix) {
		return 0, fmt.Errorf("%w: %s is not a connection key", ErrReadOnly, key)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return 0, fmt.Errorf("encode %s: %w", key, err)
	}
	newRev, err := s.kv.Update(ctx, key, b, rev)
	if err != nil {
		var apiErr *jetstream.APIError
		if errors.Is(err, jetstream.ErrKeyExists) || (errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence) {
			return 0, fmt.Errorf("%w: %s changed concurrently", ErrConflict, key)
		}
		return 0, fmt.Errorf("%w: write %s: %w", ErrUnavailabe, key, err)
	}
	s.mu.Lock()
	s.applyLocked(key, newRev, b, false)
	s.mu.Unlock()
	return newRev, nil
}

// refetch reads key from the server (not the mirror) and applies it: after
// a lost compare-and-set, the value another instance wrote.
func (s *State) refetch(ctx context.Context, key string) error {
	e, err := s.kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("%w: read %s: %w", ErrUnavailabe, key, err)
	}
	s.mu.Lock()
	s.applyLocked(key, e.Revision(), e.Value(), false)
	s.mu.Unlock()
	return nil
}
