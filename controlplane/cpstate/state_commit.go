package cpstate

// Writes: atomic batches on the bucket's stream, each key at the revision
// it was read at, with the outbox entry of the change's audit event.

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// commitConcurrency bounds the atomic batches in flight from one process
// (the server allows 50 per stream).
const commitConcurrency = 16

// Write is one key of an atomic commit: value at key, or its deletion,
// provided key is still at rev (0: key does not exist); a marker's value
// expires after ttl.
type Write struct {
	key   string
	value any
	del   bool
	rev   uint64
	ttl   time.Duration
}

// MarkerPrefix is the prefix of the markers: keys written only to be
// created once (a single-use claim committed together with its event),
// that expire after their TTL. The mirror does not hold them: their
// compare-and-set is decided by the server.
const MarkerPrefix = "marker."

// SetMarker creates the marker key (MarkerPrefix added), which expires
// after ttl; the commit fails with ErrConflict while it exists.
func SetMarker(key string, ttl time.Duration) Write {
	return Write{key: MarkerPrefix + key, value: true, ttl: ttl}
}

// SetKey writes v at key if key is still at rev (0: creates it).
func SetKey(key string, v any, rev uint64) Write { return Write{key: key, value: v, rev: rev} }

// DeleteKey deletes key if it is still at rev.
func DeleteKey(key string, rev uint64) Write { return Write{key: key, del: true, rev: rev} }

// batchAck is the server's answer to the commit of an atomic batch.
type batchAck struct {
	Error *jetstream.APIError `json:"error,omitempty"`
	Seq   uint64              `json:"seq"`
	Count int                 `json:"count"`
}

// Commit stores writes and, when ev is not nil, the pending event under
// outbox.<ev.ID> as one atomic batch: all of them or none. A key changed
// since its expected revision fails the whole batch with ErrConflict. On
// success the mirror holds the writes at once.
func (s *State) Commit(ctx context.Context, writes []Write, ev *PendingEvent) error {
	if s.cfg.ReadOnly {
		return fmt.Errorf("%w: %w", ErrUnavailabe, ErrReadOnly)
	}
	keys := make([]string, 0, len(writes)+1)
	values := make([][]byte, 0, len(writes)+1)
	msgs := make([]*nats.Msg, 0, len(writes)+1)
	s.mu.RLock()
	for _, w := range writes {
		m := nats.NewMsg(s.prefix + w.key)
		if w.del {
			m.Header.Set("KV-Operation", "DEL")
		} else {
			b, err := json.Marshal(w.value)
			if err != nil {
				s.mu.RUnlock()
				return fmt.Errorf("encode %s: %w", w.key, err)
			}
			m.Data = b
		}
		exp := w.rev
		if exp == 0 {
			exp = s.gone[w.key] // a deleted key is created over its delete marker
		}
		m.Header.Set(jetstream.ExpectedLastSubjSeqHeader, strconv.FormatUint(exp, 10))
		if w.ttl > 0 {
			m.Header.Set(jetstream.MsgTTLHeader, w.ttl.String())
		}
		keys, values, msgs = append(keys, w.key), append(values, m.Data), append(msgs, m)
	}
	s.mu.RUnlock()
	if ev != nil {
		m := nats.NewMsg(s.prefix + OutboxPrefix + ev.ID)
		m.Data = ev.Value
		m.Header.Set(jetstream.ExpectedLastSubjSeqHeader, "0")
		keys, values, msgs = append(keys, OutboxPrefix+ev.ID), append(values, ev.Value), append(msgs, m)
	}
	if len(msgs) == 0 {
		return nil
	}
	last, err := s.publishBatch(ctx, msgs)
	if err != nil {
		return err
	}
	s.mu.Lock()
	first := last - uint64(len(msgs)) + 1
	for i, k := range keys {
		del := i < len(writes) && writes[i].del
		s.applyLocked(k, first+uint64(i), values[i], del)
	}
	s.mu.Unlock()
	return nil
}

// publishBatch sends msgs as one atomic batch and returns the stream
// sequence of the last one.
func (s *State) publishBatch(ctx context.Context, msgs []*nats.Msg) (uint64, error) {
	select {
	case s.sem <- struct{}{}:
		defer func() { <-s.sem }()
	case <-ctx.Done():
		return 0, fmt.Errorf("%w: %w", ErrUnavailabe, ctx.Err())
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
	}
	id := uuid.NewString()
	for i, m := range msgs {
		m.Header.Set("Nats-Batch-Id", id)
		m.Header.Set("Nats-Batch-Sequence", strconv.Itoa(i+1))
	}
	commit := msgs[len(msgs)-1]
	commit.Header.Set("Nats-Batch-Commit", "1")
	for _, m := range msgs[:len(msgs)-1] {
		if err := s.nc.PublishMsg(m); err != nil {
			return 0, fmt.Errorf("%w: write %s: %w", ErrUnavailabe, m.Subject, err)
		}
	}
	resp, err := s.nc.RequestMsgWithContext(ctx, commit)
	if err != nil {
		// The batch may or may not be stored; if it is, its outbox event
		// is published by the sweep.
		return 0, fmt.Errorf("%w: write %s: %w", ErrUnavailabe, commit.Subject, err)
	}
	var ack batchAck
	if err := json.Unmarshal(resp.Data, &ack); err != nil {
		return 0, fmt.Errorf("%w: write: bad answer %q: %w", ErrUnavailabe, resp.Data, err)
	}
	if ack.Error != nil {
		if ack.Error.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence {
			return 0, fmt.Errorf("%w: changed concurrently, retry", ErrConflict)
		}
		return 0, fmt.Errorf("%w: write: %w", ErrUnavailabe, ack.Error)
	}
	if ack.Count != len(msgs) || ack.Seq < uint64(len(msgs)) {
		return 0, fmt.Errorf("%w: write: batch of %d acknowledged as %d at %d", ErrUnavailabe, len(msgs), ack.Count, ack.Seq)
	}
	return ack.Seq, nil
}
