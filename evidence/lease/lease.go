// Package lease is the one-holder-at-a-time lease of the tamper-evidence
// log's workers (the sequencer, the checkpointer): a record in a NATS KV
// bucket that its holder renews before it expires, taken with Create
// (free) or Update at the read revision (expired or ours), so that two
// instances racing for it never both win.
package lease

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Lease is one instance's view of a lease key. Not safe for concurrent
// use: one worker loop owns it.
type Lease struct {
	kv    jetstream.KeyValue
	key   string
	owner string
	ttl   time.Duration
	log   *slog.Logger
	held  time.Time // ours until then
}

// New returns the lease key of kv for owner (the instance name); ttl is
// how long the lease outlives its holder's last renewal.
func New(kv jetstream.KeyValue, key, owner string, ttl time.Duration, log *slog.Logger) *Lease {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Lease{kv: kv, key: key, owner: owner, ttl: ttl, log: log}
}

type record struct {
	Owner string    `json:"owner"`
	Until time.Time `json:"until"`
}

// Acquire takes or renews the lease: free, expired or already ours.
func (l *Lease) Acquire(ctx context.Context) bool {
	until := time.Now().Add(l.ttl).UTC()
	b, _ := json.Marshal(record{Owner: l.owner, Until: until})
	e, err := l.kv.Get(ctx, l.key)
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
		_, err = l.kv.Create(ctx, l.key, b)
	case err != nil:
	default:
		var cur record
		if json.Unmarshal(e.Value(), &cur) == nil && cur.Owner != l.owner && time.Now().Before(cur.Until) {
			return false
		}
		_, err = l.kv.Update(ctx, l.key, b, e.Revision())
	}
	if err != nil {
		if !errors.Is(err, jetstream.ErrKeyExists) {
			l.log.Warn("lease", "key", l.key, "err", err)
		}
		return false
	}
	// Ours for the TTL minus a margin for clocks and the time this took.
	l.held = until.Add(-l.ttl / 4)
	return true
}

// Held reports whether the lease is still ours without renewing it.
func (l *Lease) Held() bool { return time.Now().Before(l.held) }

// Keep renews the lease when it is about to lapse; false: lost.
func (l *Lease) Keep(ctx context.Context) bool { return l.Held() || l.Acquire(ctx) }
