package natsx

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/auditrail/auditrail/schemas"
)

// Watermarks tells readers of the feed how far the store is complete: the
// watermark of a durable is the stream sequence below which every message
// it consumes has been committed. Ingest acknowledges a message only after
// the batch holding it is committed, and JetStream's ack floor is the
// highest sequence up to which every message of the consumer is
// acknowledged; so every entry with a sequence up to the floor is stored
// (or dead-lettered), whichever instance committed it and in whatever
// order concurrent batches committed. An entry above the floor may be
// stored already; the feed does not show it until the floor passes it,
// since a slower batch may still fill a gap below it. A message set aside
// (neither stored nor dead-lettered) holds the floor, and the feed, until
// it is resolved: late, never skipped.
//
// The floor is read from the consumer's info, at most once per MaxAge per
// durable however many feeds ask.
type Watermarks struct {
	js     jetstream.JetStream
	maxAge time.Duration
	now    func() time.Time

	mu    sync.Mutex
	cache map[string]*watermark
}

type watermark struct {
	mu  sync.Mutex // one reader of the consumer info at a time
	at  time.Time
	seq uint64
}

// DefaultWatermarkAge bounds how stale a watermark may be: what it adds to
// the time from publish to visible in a feed.
const DefaultWatermarkAge = 100 * time.Millisecond

// NewWatermarks reads the watermarks of the durables of js's stream of
// events.
func NewWatermarks(js jetstream.JetStream, maxAge time.Duration) *Watermarks {
	if maxAge <= 0 {
		maxAge = DefaultWatermarkAge
	}
	return &Watermarks{js: js, maxAge: maxAge, now: time.Now, cache: map[string]*watermark{}}
}

// Watermark returns the watermark of the durable consumer: 0 when it does
// not exist yet (nothing was committed through it).
func (w *Watermarks) Watermark(ctx context.Context, durable string) (uint64, error) {
	w.mu.Lock()
	m, ok := w.cache[durable]
	if !ok {
		m = &watermark{}
		w.cache[durable] = m
	}
	w.mu.Unlock()

	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.at.IsZero() && w.now().Sub(m.at) < w.maxAge {
		return m.seq, nil
	}
	info, err := w.consumerInfo(ctx, durable)
	switch {
	case errors.Is(err, jetstream.ErrConsumerNotFound):
		m.seq = 0
	case err != nil:
		return 0, fmt.Errorf("watermark of %s: %w", durable, err)
	default:
		// Never back: a consumer deleted and made again restarts its floor
		// at 0 and redelivers; the entries up to the old floor stay stored.
		m.seq = max(m.seq, info.AckFloor.Stream)
	}
	m.at = w.now()
	return m.seq, nil
}

func (w *Watermarks) consumerInfo(ctx context.Context, durable string) (*jetstream.ConsumerInfo, error) {
	c, err := w.js.Consumer(ctx, schemas.StreamEvents, durable)
	if err != nil {
		return nil, err
	}
	return c.CachedInfo(), nil
}

// Complete returns a stream sequence up to which every message the durable
// consumes is committed, read now (never cached): its ack floor, or last
// (the stream's last sequence, read before the call) when the durable has
// nothing left to deliver nor to be acknowledged, since then everything of
// its filter up to last is. A durable that does not exist yet gives 0.
func (w *Watermarks) Complete(ctx context.Context, durable string, last uint64) (uint64, error) {
	c, err := w.js.Consumer(ctx, schemas.StreamEvents, durable)
	switch {
	case errors.Is(err, jetstream.ErrConsumerNotFound):
		return 0, nil
	case err != nil:
		return 0, fmt.Errorf("watermark of %s: %w", durable, err)
	}
	info := c.CachedInfo()
	floor := info.AckFloor.Stream
	if info.NumPending == 0 && info.NumAckPending == 0 {
		floor = max(floor, last)
	}
	return floor, nil
}
