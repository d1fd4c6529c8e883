package cpstate

// The witnesses an organization adds (C2SP tlog-witness): the admin API
// writes them, the tlog role's checkpointer reads them from its mirror and
// submits the organization's checkpoints to them. Their statuses, and the
// operator's witnesses, are what the checkpointer writes in the tlog bucket
// (natsx.TLogBucket), which the admin API reads (TLogValues).

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/auditrail/auditrail/internal/natsx"
)

// MaxWitnesses is how many witnesses an organization may add.
const MaxWitnesses = 8

// Witness is a witness an organization added: URL its submission prefix
// (add-checkpoint), VKey its cosigning key as C2SP note verifier key
// (name+hash+base64), Name the key's name.
type Witness struct {
	ID        uuid.UUID `json:"id"`
	OrgID     uuid.UUID `json:"organization_id"`
	URL       string    `json:"url"`
	VKey      string    `json:"vkey"`
	Name      string    `json:"name"`
	CreatedAt time.Time `json:"created_at"`
}

// OrgWitnesses is the value of WitnessesKey: the witnesses of one
// organization, in the order they were added. One key for all of them, so
// that a change replaces the list at its revision: two instances cannot
// both add the same key, nor both add the eighth.
type OrgWitnesses struct {
	Witnesses []Witness `json:"witnesses"`
}

// WitnessesKey is the key of an organization's witnesses.
func WitnessesKey(org string) string { return "witnesses." + org }

// WitnessesOf returns the witnesses of org (none when it added none) and
// the revision of their key (0: none).
func WitnessesOf(s *State, org uuid.UUID) ([]Witness, uint64, error) {
	var v OrgWitnesses
	rev, err := s.Get(WitnessesKey(org.String()), &v)
	if errors.Is(err, ErrNotFound) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, err
	}
	return v.Witnesses, rev, nil
}

// TLogValues returns the values of keys in the tlog bucket (those present;
// none when the bucket does not exist yet: no tlog role ran).
func (s *State) TLogValues(ctx context.Context, keys ...string) (map[string][]byte, error) {
	kv, err := s.js.KeyValue(ctx, natsx.TLogBucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return map[string][]byte{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%w: tlog bucket %s: %w", ErrUnavailabe, natsx.TLogBucket, err)
	}
	out := make(map[string][]byte, len(keys))
	for _, k := range keys {
		e, err := kv.Get(ctx, k)
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
			continue
		case err != nil:
			return nil, fmt.Errorf("%w: tlog bucket %s, key %s: %w", ErrUnavailabe, natsx.TLogBucket, k, err)
		}
		out[k] = e.Value()
	}
	return out, nil
}
