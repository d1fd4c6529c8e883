package controlplane

// Push destinations as stored, as the delivery role reads them (secrets
// opened), and their delivery status, which the delivery role writes in a
// bucket of its own (DeliverBucket) and the admin API reads.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"
)

// Destination types and formats (CONTRACT.md "Delivery to pollers and SIEMs").
const (
	DestHTTPS     = "https"
	DestSplunkHEC = "splunk_hec"
	FormatJSON    = "json"
	FormatOCSF    = "ocsf"
)

// Destination is an organization's push destination. The secret (https:
// the HMAC key of Auditrail-Signature) and the token (splunk_hec) are
// sealed in Sealed and never returned.
type Destination struct {
	ID     uuid.UUID `json:"id"`
	OrgID  uuid.UUID `json:"organization_id"`
	Name   string    `json:"name"`
	Type   string    `json:"type"`
	URL    string    `json:"url"`
	Format string    `json:"format"`
	Q      string    `json:"q"`
	Paused bool      `json:"paused"`
	// Generation counts the replays: the delivery role keeps one consumer
	// per generation, starting at StartAt (the creation, then each
	// replay's since).
	Generation int       `json:"generation"`
	StartAt    time.Time `json:"start_at"`
	// SecretSet and TokenSet say which secrets are sealed.
	SecretSet bool      `json:"secret_set"`
	TokenSet  bool      `json:"token_set"`
	Sealed    []byte    `json:"sealed,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// DestinationSecrets are the sealed part of a Destination.
type DestinationSecrets struct {
	Secret string `json:"secret,omitempty"`
	Token  string `json:"token,omitempty"`
}

func destinationKey(org, id string) string { return "dest." + org + "." + id }

// destinationPrefix is the prefix of every destination's key.
const destinationPrefix = "dest."

// ResolvedDestination is a destination with its secrets opened, for the
// delivery role. Err is set (and the secrets empty) when they do not open
// here (a key this process lacks): the destination exists, but this
// process cannot deliver it.
type ResolvedDestination struct {
	Destination
	Secret, Token string
	Err           error
}

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
func (r *DestinationReader) Destinations() ([]ResolvedDestination, error) {
	var errs []error
	var out []ResolvedDestination
	for _, k := range r.state.keys(destinationPrefix) {
		var d Destination
		if _, err := r.state.get(k, &d); err != nil {
			errs = append(errs, err)
			continue
		}
		sec, err := openDestination(r.sealer, k, d)
		if err != nil {
			err = fmt.Errorf("destination %s: %w", d.ID, err)
			errs = append(errs, err)
			out = append(out, ResolvedDestination{Destination: d, Err: err})
			continue
		}
		out = append(out, ResolvedDestination{Destination: d, Secret: sec.Secret, Token: sec.Token})
	}
	return out, errors.Join(errs...)
}

// Fresh returns nil while the mirror is confirmed current (State.Fresh).
func (r *DestinationReader) Fresh() error { return r.state.Fresh() }

func openDestination(sealer *Sealer, key string, d Destination) (DestinationSecrets, error) {
	var sec DestinationSecrets
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

// DeliverBucket is the KV bucket that the delivery role alone writes
// (natsx.DeliverBucket): status.<destination id>, lease.<destination id>,
// instance.<instance id>.
const DeliverBucket = "auditrail_deliver"

// DeliveryStatusKey is the key of a destination's status in DeliverBucket.
func DeliveryStatusKey(id uuid.UUID) string { return "status." + id.String() }

// Delivery states of DeliveryStatus.State.
const (
	DeliveryActive  = "active"  // delivering, or caught up
	DeliveryFailing = "failing" // the last attempt failed; retried with back-off
	DeliveryPaused  = "paused"
	// DeliveryStarting: no delivery instance has reported on it yet.
	DeliveryStarting = "starting"
)

// DeliveryStatus is what the delivery role reports of a destination.
// Pending counts the events matching the destination's subjects that are
// not yet acknowledged by the receiver (before the q filter); OldestPending
// is the stream time of the first of them. Failures counts the failed
// attempts since the last success; LastError is generic (a status code, a
// timeout, a refused address), never a body or a secret.
type DeliveryStatus struct {
	State           string     `json:"state"`
	Generation      int        `json:"generation"`
	Instance        string     `json:"instance"`
	LastDeliveredAt *time.Time `json:"last_delivered_at"`
	Pending         uint64     `json:"pending"`
	OldestPending   *time.Time `json:"oldest_pending,omitempty"`
	Failures        int        `json:"failures"`
	LastError       string     `json:"last_error"`
	Delivered       uint64     `json:"delivered"`
	UpdatedAt       time.Time  `json:"updated_at"`
}

// deliveryStatuses reads the statuses the delivery role writes; the
// bucket is opened on first use (it exists once a delivery role ran).
type deliveryStatuses struct {
	mu sync.Mutex
	kv jetstream.KeyValue
}

// deliveryStatus returns the status of destination id, or nil when no
// delivery instance has written one (or the bucket does not exist yet).
func (s *State) deliveryStatus(ctx context.Context, id uuid.UUID) (*DeliveryStatus, error) {
	s.statuses.mu.Lock()
	kv := s.statuses.kv
	if kv == nil {
		var err error
		kv, err = s.js.KeyValue(ctx, DeliverBucket)
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
	e, err := kv.Get(ctx, DeliveryStatusKey(id))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var st DeliveryStatus
	if err := json.Unmarshal(e.Value(), &st); err != nil {
		return nil, fmt.Errorf("status of destination %s: %w", id, err)
	}
	return &st, nil
}
