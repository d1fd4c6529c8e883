package cpstate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/auditrail/auditrail/internal/natsx"
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
// marker lifetime (PickerMarkerTTL), which outlives its report window, and
// far more than the 10 minutes of an OAuth state.
const StatesMaxAge = PickerMarkerTTL

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
	// Replicas of the buckets a writable state creates (1..5): an
	// existing bucket is raised or lowered to it.
	Replicas int
}

// DefaultStateConfig returns the writable DefaultBucket, a 30 s staleness
// bound and a reconnect back-off from 100 ms to 5 s.
func DefaultStateConfig() StateConfig {
	return StateConfig{Bucket: DefaultBucket, MaxStaleness: 30 * time.Second,
		Reconnect: retry.Policy{Initial: 100 * time.Millisecond, Max: 5 * time.Second}, StatesBucket: DefaultStatesBucket, Replicas: 1}
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
	case c.Replicas < 1 || c.Replicas > natsx.MaxReplicas:
		return fmt.Errorf("%w: replicas %d not in 1..%d", ErrInvalidOption, c.Replicas, natsx.MaxReplicas)
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
	pending map[string]PendingEvent // outbox: event id → record
	// watched is the last revision the watch delivered; confirmed the last
	// time the server confirmed the mirror current; target a last sequence
	// of the stream, read at targetAt, that the watch has not yet delivered.
	watched   uint64
	confirmed time.Time
	target    uint64
	targetAt  time.Time

	synced chan struct{}
	// changed is closed at the next change of an entry (a key, a member,
	// anything an authorization reads) and then replaced: Changed.
	changed chan struct{}
	// cut stops the current watch (tests cut it to prove it comes back).
	cutMu sync.Mutex
	cut   func()

	// states is the bucket of the used OAuth states, opened on first use.
	statesMu sync.Mutex
	states   jetstream.KeyValue

	// statuses is the delivery role's bucket, read for the destinations'
	// statuses (state_destinations.go).
	statuses deliveryStatuses
}

type entry struct {
	rev   uint64
	value []byte
}

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
		entries: map[string]entry{}, gone: map[string]uint64{}, byHash: map[string]string{}, pending: map[string]PendingEvent{},
		synced: make(chan struct{}), changed: make(chan struct{})}
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
// turns on what the outbox needs and sets its replicas; it never rewrites
// an existing bucket's other settings.
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
			Replicas:    cfg.Replicas,
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
	if _, err := natsx.EnsureReplicas(ctx, js, sc.Name, cfg.Replicas); err != nil {
		return nil, err
	}
	return kv, nil
}

// Get decodes key into v; it returns the revision, or ErrNotFound.
func (s *State) Get(key string, v any) (uint64, error) {
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

// Keys returns the keys under prefix, in no order.
func (s *State) Keys(prefix string) []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []string
	for k := range s.entries {
		if strings.HasPrefix(k, prefix) {
			out = append(out, k)
		}
	}
	return out
}

// ReadOnly reports whether this process may only read the state
// (StateConfig.ReadOnly).
func (s *State) ReadOnly() bool { return s.cfg.ReadOnly }

// Conn is the NATS connection of the state, for the requests the control
// plane's instances answer each other.
func (s *State) Conn() *nats.Conn { return s.nc }

// ListAs decodes the values under prefix, in key order, as T.
func ListAs[T any](s *State, prefix string) ([]T, error) {
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
