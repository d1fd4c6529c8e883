package cpstate

// The states bucket (single-use OAuth and picker states, markers) and the
// tool runner's writes of refreshed connection tokens.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

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
		Description: "auditrail: used OAuth states (single use)", History: 1, TTL: StatesMaxAge, Storage: jetstream.FileStorage,
		Replicas: s.cfg.Replicas})
	if err != nil {
		return nil, fmt.Errorf("%w: OAuth states bucket %s: %w", ErrUnavailabe, s.statesBucket(), err)
	}
	s.states = kv
	return kv, nil
}

// ClaimState marks the state nonce used; false when it already was (a
// replay). Every instance shares the bucket.
func (s *State) ClaimState(ctx context.Context, nonce string) (bool, error) {
	return s.ClaimStateAs(ctx, nonce, []byte("used"))
}

// ClaimStateAs is claimState keeping value with the claim (stateClaim
// answers it while the claim is remembered, StatesMaxAge).
func (s *State) ClaimStateAs(ctx context.Context, nonce string, value []byte) (bool, error) {
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

// StateClaim returns the value kept with the claim of the state nonce, or
// ErrNotFound when it was never claimed (or its claim is forgotten).
func (s *State) StateClaim(ctx context.Context, nonce string) ([]byte, error) {
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

// ConnPrefix is the prefix of the users' connections.
const ConnPrefix = "conn."

// UpdateConn writes a connection key if it is still at rev (compare-and-set
// on the key's revision, ErrConflict otherwise) and applies it to the
// mirror at once. It is the narrow write path of the token refresh: one
// key, no outbox event (a refresh is not an administrative change). A
// read-only state writes nothing: the tool runner's credentials may not
// publish to the bucket at all (a KV stream takes rollups, and one message
// with Nats-Rollup: all would erase every key), so its refreshes go through
// the control plane (ServeConnRefresh).
func (s *State) UpdateConn(ctx context.Context, key string, v any, rev uint64) (uint64, error) {
	if s.cfg.ReadOnly {
		return 0, fmt.Errorf("%w: %s", ErrReadOnly, key)
	}
	if !strings.HasPrefix(key, ConnPrefix) {
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

// Refetch reads key from the server (not the mirror) and applies it: after
// a lost compare-and-set, the value another instance wrote.
func (s *State) Refetch(ctx context.Context, key string) error {
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

// PickerTTL is how long a picker URL may be claimed (its page's "Choose
// files" clicked).
const PickerTTL = 10 * time.Minute

// PickerReportTTL is how long after its state's expiry the page may still
// report what the user picked (the picker stays open while they choose).
const PickerReportTTL = time.Hour

// PickerMarkerTTL is how long the markers of a picker state live: its
// claim (states bucket, StatesMaxAge) and its report (a marker committed
// with the report's event). Both outlive the report window — a state is
// claimed at the earliest PickerTTL before it expires, and reported until
// PickerReportTTL after — by a margin for the clocks of the instances and
// the NATS servers: so a report is accepted exactly once within its
// window, and refused after it by the window itself.
const PickerMarkerTTL = PickerTTL + PickerReportTTL + 5*time.Minute
