package cpstate

// Push destinations as stored, as the delivery role reads them (secrets
// opened), and their delivery status, which the delivery role writes in a
// bucket of its own (destination.DeliverBucket) and the admin API reads.

import (
	"github.com/auditrail/auditrail/controlplane/destination"

	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"
)

func DestinationKey(org, id string) string { return "dest." + org + "." + id }

// DestinationPrefix is the prefix of every destination's key.
const DestinationPrefix = "dest."

// DestinationReader lists the destinations of every organization with
// their secrets, from a (read-only) mirror of the control-plane state.
type DestinationReader struct {
	state  *State
	sealer *Sealer
}

// NewDestinationReader reads the destinations of state with sealer's keys.
func NewDestinationReader(state *State, sealer *Sealer) *DestinationReader {
	return &DestinationReader{state: state, sealer: sealer}
}

// Destinations returns every destination with its secrets opened. One
// whose secrets do not open has Err set, and is reported in the error too;
// one that does not decode is only reported.
func (r *DestinationReader) Destinations() ([]destination.ResolvedDestination, error) {
	var errs []error
	var out []destination.ResolvedDestination
	for _, k := range r.state.Keys(DestinationPrefix) {
		var d destination.Destination
		if _, err := r.state.Get(k, &d); err != nil {
			errs = append(errs, err)
			continue
		}
		sec, err := OpenDestination(r.sealer, k, d)
		if err != nil {
			err = fmt.Errorf("destination %s: %w", d.ID, err)
			errs = append(errs, err)
			out = append(out, destination.ResolvedDestination{Destination: d, Err: err})
			continue
		}
		out = append(out, destination.ResolvedDestination{Destination: d, Secret: sec.Secret, Token: sec.Token})
	}
	return out, errors.Join(errs...)
}

// Fresh returns nil while the mirror is confirmed current (State.Fresh).
func (r *DestinationReader) Fresh() error { return r.state.Fresh() }

func OpenDestination(sealer *Sealer, key string, d destination.Destination) (destination.DestinationSecrets, error) {
	var sec destination.DestinationSecrets
	if len(d.Sealed) == 0 {
		return sec, nil
	}
	pt, err := sealer.Open(key, d.Sealed)
	if err != nil {
		return sec, err
	}
	err = json.Unmarshal(pt, &sec)
	return sec, err
}

// deliveryStatuses reads the statuses the delivery role writes; the
// bucket is opened on first use (it exists once a delivery role ran).
type deliveryStatuses struct {
	mu sync.Mutex
	kv jetstream.KeyValue
}

// DeliveryStatus returns the status of destination id, or nil when no
// delivery instance has written one (or the bucket does not exist yet).
func (s *State) DeliveryStatus(ctx context.Context, id uuid.UUID) (*destination.DeliveryStatus, error) {
	s.statuses.mu.Lock()
	kv := s.statuses.kv
	if kv == nil {
		var err error
		kv, err = s.js.KeyValue(ctx, destination.DeliverBucket)
		if err != nil {
			s.statuses.mu.Unlock()
			if errors.Is(err, jetstream.ErrBucketNotFound) {
				return nil, nil
			}
			return nil, err
		}
		s.statuses.kv = kv
	}
	s.statuses.mu.Unlock()
	e, err := kv.Get(ctx, destination.DeliveryStatusKey(id))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var st destination.DeliveryStatus
	if err := json.Unmarshal(e.Value(), &st); err != nil {
		return nil, fmt.Errorf("status of destination %s: %w", id, err)
	}
	return &st, nil
}
