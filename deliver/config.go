// Package deliver is the push-destination role (`auditrail deliver`, also
// run inside `dev`): for each destination of the control-plane state, one
// JetStream durable pull consumer of AUDITRAIL_EVENTS filtered to its
// organization's subjects; batches of the events it selects (q) are POSTed
// to the destination as JSON Lines (or Splunk HEC envelopes), signed,
// acknowledged after a 2xx and retried with back-off until then, in order.
//
// Several instances share the destinations: each destination belongs to
// the live instance that rendezvous hashing picks, which holds a lease on
// it in the delivery bucket (DeliverBucket) while it delivers, so that one
// instance at a time pulls a destination's consumer and the order holds.
// The same bucket keeps each destination's status, which the control
// plane reads for GET …/destinations/{id}.
package deliver

import (
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/auditrail/auditrail/controlplane/destination"
	"github.com/auditrail/auditrail/internal/natsx"
	"github.com/auditrail/auditrail/internal/retry"
)

// DefaultBucket is the delivery bucket (destination.DeliverBucket).
const DefaultBucket = destination.DeliverBucket

// Config configures a Deliverer.
type Config struct {
	// Instance names this process in leases and statuses (default: a
	// random id per start).
	Instance string
	// Bucket is the delivery bucket (DefaultBucket).
	Bucket string
	// Replicas of the delivery bucket (1..5): an existing bucket is raised
	// or lowered to it.
	Replicas int
	// BatchSize is the most events fetched, and left unacknowledged, at a
	// time per destination.
	BatchSize int
	// MaxBodyBytes bounds a POST body; a batch that encodes larger is
	// sent in several POSTs, in order (an event larger alone goes alone).
	MaxBodyBytes int
	// FetchWait is the longest wait of a fetch for events.
	FetchWait time.Duration
	// RequestTimeout bounds one POST, answer included.
	RequestTimeout time.Duration
	// MaxResponseBytes is the most of an answer's body read (the rest is
	// dropped with the connection).
	MaxResponseBytes int64
	// Retry is the back-off between failed POSTs of a batch, retried
	// without bound while the stream keeps the events.
	Retry retry.Policy
	// AckWait is the consumers' redelivery timeout; a batch being retried
	// is kept in progress.
	AckWait time.Duration
	// LeaseTTL is how long a destination's lease, and an instance's
	// heartbeat, last without renewal.
	LeaseTTL time.Duration
	// Tick is how often the destinations, leases and pauses are looked at.
	Tick time.Duration
	// StatusEvery bounds how often a destination's status is written
	// while it delivers.
	StatusEvery time.Duration
	// CleanupAge: consumers of deleted destinations (or of replaced
	// generations) older than this are deleted.
	CleanupAge time.Duration
	// ProofWait bounds how long a JSON batch waits, with the logs
	// (Deliverer.ProveWith), for its entries to be in a checkpoint
	// (then those still missing go without a leaf); ProofPoll is how
	// often it looks.
	ProofWait, ProofPoll time.Duration
}

// DefaultConfig returns batches of 100 events and 1 MiB, 1 s fetches,
// 10 s requests, answers read up to 64 KiB, back-off from 1 s to 30 s,
// 2 min ack wait, 15 s leases, a 1 s tick, statuses every 2 s.
func DefaultConfig() Config {
	return Config{Bucket: DefaultBucket, Replicas: 1, BatchSize: 100, MaxBodyBytes: 1 << 20, FetchWait: time.Second,
		RequestTimeout: 10 * time.Second, MaxResponseBytes: 64 << 10,
		Retry:   retry.Policy{Initial: time.Second, Max: 30 * time.Second},
		AckWait: 2 * time.Minute, LeaseTTL: 15 * time.Second, Tick: time.Second, StatusEvery: 2 * time.Second,
		CleanupAge: time.Minute, ProofWait: 5 * time.Minute, ProofPoll: 250 * time.Millisecond}
}

// Validate checks the configuration.
func (c Config) Validate() error {
	switch {
	case c.Replicas < 1 || c.Replicas > natsx.MaxReplicas:
		return fmt.Errorf("%w: replicas %d not in 1..%d", ErrInvalidOption, c.Replicas, natsx.MaxReplicas)
	case c.Bucket == "":
		return fmt.Errorf("%w: bucket is empty", ErrInvalidOption)
	case c.ProofWait <= 0 || c.ProofPoll <= 0:
		return fmt.Errorf("%w: proof wait %s and poll %s must be positive", ErrInvalidOption, c.ProofWait, c.ProofPoll)
	case c.BatchSize < 1 || c.BatchSize > 10_000:
		return fmt.Errorf("%w: batch size %d not in 1..10000", ErrInvalidOption, c.BatchSize)
	case c.MaxBodyBytes < 1<<10:
		return fmt.Errorf("%w: max body %d below 1 KiB", ErrInvalidOption, c.MaxBodyBytes)
	case c.FetchWait < 10*time.Millisecond || c.RequestTimeout <= 0 || c.MaxResponseBytes < 0:
		return fmt.Errorf("%w: fetch wait, request timeout or max response bytes out of range", ErrInvalidOption)
	case c.LeaseTTL < 3*c.Tick || c.Tick <= 0 || c.StatusEvery <= 0 || c.CleanupAge <= 0:
		return fmt.Errorf("%w: the lease must last at least 3 ticks", ErrInvalidOption)
	case c.AckWait < 2*(c.Retry.Max+c.RequestTimeout):
		// A batch being retried is kept in progress at each failure: the
		// wait between two must stay well inside the ack wait.
		return fmt.Errorf("%w: ack wait %s below twice the longest back-off plus the request timeout", ErrInvalidOption, c.AckWait)
	}
	if err := c.Retry.Validate(); err != nil {
		return fmt.Errorf("%w: retry: %w", ErrInvalidOption, err)
	}
	return nil
}

func (c Config) withDefaults() Config {
	if c.Instance == "" {
		c.Instance = uuid.NewString()[:8]
	}
	return c
}
