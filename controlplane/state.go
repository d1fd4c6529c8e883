package controlplane

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// DefaultBucket is the KV bucket of the control-plane state.
const DefaultBucket = "auditrail_controlplane"

// State is the control-plane state: a NATS KV bucket, mirrored in memory by
// a watcher so that every instance sees a change (a disabled API key, a new
// member) within milliseconds of its write. Reads come from memory; writes go
// to KV with compare-and-set on the revision and are applied locally at once.
type State struct {
	kv  jetstream.KeyValue
	log *slog.Logger

	mu      sync.RWMutex
	entries map[string]entry
	byHash  map[string]string // API key hash → KV key
	synced  chan struct{}
	err     error
}

type entry struct {
	rev   uint64
	value []byte
}

// OpenState creates (or opens) the bucket and mirrors it until ctx ends.
// It returns once the mirror holds every existing key.
func OpenState(ctx context.Context, js jetstream.JetStream, bucket string, log *slog.Logger) (*State, error) {
	if log == nil {
		log = slog.Default()
	}
	kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket:      bucket,
		Description: "auditrail control-plane state",
		History:     1,
		Storage:     jetstream.FileStorage,
	})
	if err != nil {
		return nil, fmt.Errorf("control-plane bucket %s: %w", bucket, err)
	}
	s := &State{kv: kv, log: log, entries: map[string]entry{}, byHash: map[string]string{}, synced: make(chan struct{})}
	w, err := kv.WatchAll(ctx)
	if err != nil {
		return nil, fmt.Errorf("watch %s: %w", bucket, err)
	}
	go s.watch(ctx, w)
	select {
	case <-s.synced:
		return s, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(30 * time.Second):
		return nil, fmt.Errorf("%w: initial sync of %s timed out", ErrUnavailabe, bucket)
	}
}

func (s *State) watch(ctx context.Context, w jetstream.KeyWatcher) {
	defer w.Stop()
	initial := true
	for {
		select {
		case <-ctx.Done():
			return
		case e, ok := <-w.Updates():
			if !ok {
				// The connection closed (a shutdown drains it before the
				// context ends); a live process keeps its watch through
				// reconnects.
				s.log.Info("control-plane watch stopped")
				return
			}
			if e == nil {
				if initial {
					initial = false
					close(s.synced)
				}
				continue
			}
			deleted := e.Operation() == jetstream.KeyValueDelete || e.Operation() == jetstream.KeyValuePurge
			s.apply(e.Key(), e.Revision(), e.Value(), deleted)
		}
	}
}

// apply records a change unless the mirror already holds a newer revision.
func (s *State) apply(key string, rev uint64, value []byte, deleted bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if cur, ok := s.entries[key]; ok && cur.rev > rev {
		return
	}
	if old, ok := s.entries[key]; ok && strings.HasPrefix(key, "apikey.") {
		if h := hashOf(old.value); h != "" {
			delete(s.byHash, h)
		}
	}
	if deleted {
		delete(s.entries, key)
		return
	}
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

// put writes v at key: rev 0 creates (ErrConflict if it exists), otherwise
// the write succeeds only if key is still at rev.
func (s *State) put(ctx context.Context, key string, v any, rev uint64) (uint64, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return 0, err
	}
	var newRev uint64
	if rev == 0 {
		newRev, err = s.kv.Create(ctx, key, b)
	} else {
		newRev, err = s.kv.Update(ctx, key, b, rev)
	}
	if err != nil {
		if errors.Is(err, jetstream.ErrKeyExists) || isWrongSequence(err) {
			return 0, fmt.Errorf("%w: %s changed concurrently, retry", ErrConflict, key)
		}
		return 0, fmt.Errorf("%w: write %s: %v", ErrUnavailabe, key, err)
	}
	s.apply(key, newRev, b, false)
	return newRev, nil
}

// remove deletes key if it is still at rev.
func (s *State) remove(ctx context.Context, key string, rev uint64) error {
	if err := s.kv.Delete(ctx, key, jetstream.LastRevision(rev)); err != nil {
		if isWrongSequence(err) {
			return fmt.Errorf("%w: %s changed concurrently, retry", ErrConflict, key)
		}
		return fmt.Errorf("%w: delete %s: %v", ErrUnavailabe, key, err)
	}
	s.mu.Lock()
	if e, ok := s.entries[key]; ok && e.rev <= rev {
		if h := hashOf(e.value); h != "" && strings.HasPrefix(key, "apikey.") {
			delete(s.byHash, h)
		}
		delete(s.entries, key)
	}
	s.mu.Unlock()
	return nil
}

func isWrongSequence(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence
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
