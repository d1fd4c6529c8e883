package ingest

import (
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// ErrInvalidOption wraps every configuration error.
var ErrInvalidOption = errors.New("invalid option")

// AckMode is how committed batches are acknowledged.
type AckMode string

const (
	// AckExplicit acknowledges every message: several ingest instances may
	// share the durable consumer.
	AckExplicit AckMode = "explicit"
	// AckAll acknowledges the last message of each committed batch, which
	// JetStream applies to every earlier one: about 1.5x cheaper, and correct
	// only while a single ingest instance consumes the durable (as in
	// `auditrail dev`). The ack policy of an existing consumer cannot change:
	// use another Durable to switch.
	AckAll AckMode = "all"
)

func (m AckMode) policy() jetstream.AckPolicy {
	if m == AckAll {
		return jetstream.AckAllPolicy
	}
	return jetstream.AckExplicitPolicy
}

// Config tunes an Ingester.
type Config struct {
	// AckMode: AckExplicit (default) or AckAll.
	AckMode AckMode
	// Durable is the name of the durable pull consumer; instances sharing it
	// share the work.
	Durable string
	// BatchSize is the most events written in one store batch.
	BatchSize int
	// FlushInterval is the longest a received event waits for its batch to fill.
	FlushInterval time.Duration
	// MaxAckPending bounds the unacknowledged messages of the consumer; it
	// must exceed BatchSize, because a batch is acknowledged only after commit.
	MaxAckPending int
	// AckWait is how long JetStream waits for an ack before redelivering.
	// Batches held while the store is down are kept alive with progress acks.
	AckWait time.Duration
	// RetryMin and RetryMax bound the back-off while the store or the DLQ fail.
	RetryMin, RetryMax time.Duration
	// DrainTimeout bounds the time spent committing the last batch at shutdown.
	DrainTimeout time.Duration
}

// DefaultConfig fits ClickHouse: 10k-event batches, flushed at least every second.
func DefaultConfig() Config {
	return Config{
		AckMode:       AckExplicit,
		Durable:       "auditrail-ingest-audit",
		BatchSize:     10_000,
		FlushInterval: time.Second,
		MaxAckPending: 40_000,
		AckWait:       30 * time.Second,
		RetryMin:      100 * time.Millisecond,
		RetryMax:      5 * time.Second,
		DrainTimeout:  10 * time.Second,
	}
}

// Validate checks the configuration.
func (c Config) Validate() error {
	switch {
	case c.AckMode != AckExplicit && c.AckMode != AckAll:
		return fmt.Errorf("%w: ack mode %q: want %q or %q", ErrInvalidOption, c.AckMode, AckExplicit, AckAll)
	case c.Durable == "":
		return fmt.Errorf("%w: durable name is empty", ErrInvalidOption)
	case c.BatchSize < 1 || c.BatchSize > 1_000_000:
		return fmt.Errorf("%w: batch size %d not in 1..1000000", ErrInvalidOption, c.BatchSize)
	case c.FlushInterval <= 0:
		return fmt.Errorf("%w: flush interval must be positive", ErrInvalidOption)
	case c.MaxAckPending <= c.BatchSize:
		return fmt.Errorf("%w: max ack pending %d must exceed batch size %d", ErrInvalidOption, c.MaxAckPending, c.BatchSize)
	case c.AckWait <= c.FlushInterval:
		return fmt.Errorf("%w: ack wait %s must exceed flush interval %s", ErrInvalidOption, c.AckWait, c.FlushInterval)
	case c.RetryMin <= 0 || c.RetryMax < c.RetryMin:
		return fmt.Errorf("%w: retry back-off %s..%s", ErrInvalidOption, c.RetryMin, c.RetryMax)
	case c.DrainTimeout <= 0:
		return fmt.Errorf("%w: drain timeout must be positive", ErrInvalidOption)
	}
	return nil
}
