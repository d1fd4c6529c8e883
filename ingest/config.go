package ingest

import (
	"errors"
	"fmt"
	"time"

	"github.com/auditrail/auditrail/internal/cli"
	"github.com/auditrail/auditrail/schemas"
)

// ErrInvalidOption wraps every configuration error.
var ErrInvalidOption = errors.New("invalid option")

// Config tunes an Ingester.
type Config struct {
	// Durable is the name of the durable pull consumer; instances sharing it
	// share the work.
	Durable string
	// BatchSize is the most events written in one store batch.
	BatchSize int
	// BatchBytes closes a batch once its payloads reach this many bytes, so
	// that the memory of ingest is bounded by bytes whatever the size of the
	// events (a batch may pass it by its last event).
	BatchBytes int
	// Writers is the number of batches written to the store at once, beside
	// the one being received; each holds up to BatchSize events in memory.
	Writers int
	// FetchSize bounds the messages the JetStream client buffers ahead of
	// the batch being received (at most BatchSize are used). Buffered
	// messages are not in a batch yet, so nothing keeps them from being
	// redelivered after AckWait while the store is slow (a redelivered copy
	// is stored once), and they count in memory beside the batches.
	FetchSize int
	// FlushInterval is the longest a received event waits for its batch to fill.
	FlushInterval time.Duration
	// InsertRows is the most events of a streamed insert: while a backlog
	// waits, a store that takes inserts in blocks (ClickHouse) gets
	// several batches in one insert, and ingest keeps only their reply
	// subjects until it commits (see stream.go). 0: every batch is an
	// insert of its own.
	InsertRows int
	// MaxAckPending bounds the unacknowledged messages of the consumer; it
	// must exceed BatchSize, because a batch is acknowledged only after
	// commit, and is raised to (Writers+1)*BatchSize+FetchSize, what the
	// batches in flight hold (0: just that).
	MaxAckPending int
	// AckWait is how long JetStream waits for an ack before redelivering.
	// Batches held while the store is down are kept alive with progress acks.
	AckWait time.Duration
	// RetryMin and RetryMax bound the back-off while the store or the DLQ fail.
	RetryMin, RetryMax time.Duration
	// DrainTimeout bounds the time spent committing the last batch at shutdown.
	DrainTimeout time.Duration
	// MaxFuture is how far ahead of the ingest clock an event's time may be;
	// a later event (or one before 2000-01-01) goes to the DLQ, rather than
	// sorting first in its organization's log forever.
	MaxFuture time.Duration
	// MaxDeliver dead-letters a message delivered more times than this
	// without being committed (an ingest that crashes or hangs on it),
	// so that one message cannot hold a consumer forever.
	MaxDeliver int
}

// DefaultConfig fits ClickHouse, which wants few large inserts (batches of
// up to 10k events or 6 MiB, flushed at least every second, and while a
// backlog waits inserts of up to 50k events streamed batch by batch),
// within a bounded memory: two batches being stored, one being received, and a
// client buffer of one batch's count (10k messages: one pull request per
// batch — a tenth of that cost 0.1 of the throughput against a bare
// consumer in make bench). Draining a backlog, `auditrail ingest` then
// peaks at about 245 MiB RSS (make bench). The client buffer is bounded by
// count only (nats.go drops messages when a pull is bounded by bytes): with
// events far larger than the usual half kilobyte, lower --fetch-size.
func DefaultConfig() Config {
	return Config{
		Durable:       schemas.IngestAuditDurable,
		BatchSize:     10_000,
		BatchBytes:    6 << 20,
		FetchSize:     10_000,
		Writers:       2,
		FlushInterval: time.Second,
		InsertRows:    50_000,
		MaxAckPending: 40_000,
		AckWait:       30 * time.Second,
		RetryMin:      100 * time.Millisecond,
		RetryMax:      5 * time.Second,
		DrainTimeout:  10 * time.Second,
		MaxFuture:     5 * time.Minute,
		MaxDeliver:    20,
	}
}

// MemoryLimit is a soft limit for the Go heap of an ingest process with
// this configuration: a base for the clients and the runtime, plus a
// multiple of the payload the batches in flight hold (each event is held as
// its message, decoded, as store columns while written, and as garbage
// until collected), plus what each writer's streamed insert keeps of the
// events it sent (their reply subjects and ids, perStreamed bytes each).
// With the defaults it is 207 MiB, and draining a backlog `auditrail
// ingest` peaks at about 245 MiB RSS (make bench).
func (c Config) MemoryLimit() int64 {
	const base, perPayloadByte, perStreamed = 48 << 20, 6, 160
	perMsg := c.BatchBytes / c.BatchSize
	inFlight := int64(c.Writers+1)*int64(c.BatchBytes) + int64(min(c.FetchSize, c.BatchSize))*int64(perMsg)
	return base + perPayloadByte*inFlight + int64(c.Writers)*int64(c.InsertRows)*perStreamed
}

// ExecutionDurable is the default durable consumer of execution events.
const ExecutionDurable = schemas.IngestExecutionDurable

// ExecutionDurableFor is the durable consumer of execution events of the
// ingest whose audit durable is audit: ExecutionDurable beside the default,
// else audit + "-execution".
func ExecutionDurableFor(audit string) string {
	if audit == DefaultConfig().Durable {
		return ExecutionDurable
	}
	return audit + "-execution"
}

// RegisterFlags adds the flags that tune the batches to fs, each defaulting
// to c's value. MaxAckPending becomes 0: derived from the batch bounds
// (what the batches in flight hold).
func (c *Config) RegisterFlags(fs *cli.Flags) {
	fs.IntVar(&c.BatchSize, "batch-size", "", "most events per store batch")
	fs.IntVar(&c.BatchBytes, "batch-bytes", "", "most payload bytes per store batch (bounds the memory of ingest)")
	fs.IntVar(&c.FetchSize, "fetch-size", "", "most messages the JetStream client buffers ahead of the batch being received")
	fs.IntVar(&c.Writers, "writers", "", "batches written to the store at once, beside the one being received")
	fs.DurationVar(&c.FlushInterval, "flush-interval", "", "longest wait for a batch to fill")
	fs.IntVar(&c.InsertRows, "insert-rows", "", "most events of an insert spanning several batches while a backlog waits (ClickHouse; 0: an insert per batch)")
	fs.DurationVar(&c.AckWait, "ack-wait", "", "JetStream redelivery timeout of unacknowledged events")
	c.MaxAckPending = 0
}

// Validate checks the configuration.
func (c Config) Validate() error {
	switch {
	case c.Durable == "":
		return fmt.Errorf("%w: durable name is empty", ErrInvalidOption)
	case c.BatchSize < 1 || c.BatchSize > 1_000_000:
		return fmt.Errorf("%w: batch size %d not in 1..1000000", ErrInvalidOption, c.BatchSize)
	case c.FlushInterval <= 0:
		return fmt.Errorf("%w: flush interval must be positive", ErrInvalidOption)
	case c.BatchBytes < 1:
		return fmt.Errorf("%w: batch bytes %d < 1", ErrInvalidOption, c.BatchBytes)
	case c.Writers < 1 || c.Writers > 16:
		return fmt.Errorf("%w: writers %d not in 1..16", ErrInvalidOption, c.Writers)
	case c.InsertRows < 0 || c.InsertRows > 10_000_000:
		return fmt.Errorf("%w: insert rows %d not in 0..10000000", ErrInvalidOption, c.InsertRows)
	case c.FetchSize < 1:
		return fmt.Errorf("%w: fetch size %d < 1", ErrInvalidOption, c.FetchSize)
	case c.MaxAckPending != 0 && c.MaxAckPending <= c.BatchSize:
		return fmt.Errorf("%w: max ack pending %d must exceed batch size %d", ErrInvalidOption, c.MaxAckPending, c.BatchSize)
	case c.AckWait <= c.FlushInterval:
		return fmt.Errorf("%w: ack wait %s must exceed flush interval %s", ErrInvalidOption, c.AckWait, c.FlushInterval)
	case c.RetryMin <= 0 || c.RetryMax < c.RetryMin:
		return fmt.Errorf("%w: retry back-off %s..%s", ErrInvalidOption, c.RetryMin, c.RetryMax)
	case c.DrainTimeout <= 0:
		return fmt.Errorf("%w: drain timeout must be positive", ErrInvalidOption)
	case c.MaxFuture <= 0:
		return fmt.Errorf("%w: max future %s must be positive", ErrInvalidOption, c.MaxFuture)
	case c.MaxDeliver < 1:
		return fmt.Errorf("%w: max deliver %d < 1", ErrInvalidOption, c.MaxDeliver)
	}
	return nil
}
