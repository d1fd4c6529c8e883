package cpstate

// The outbox: audit events committed with their change, published and
// then removed; pending ones are published again after a restart.

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// PendingEvent is an event of the outbox, not yet known to be stored in
// the audit stream.
type PendingEvent struct {
	ID    string
	rev   uint64
	Value []byte
}

// OutboxPrefix is the prefix of the outbox keys: outbox.<event_id>.
const OutboxPrefix = "outbox."

// PendingEvents returns the outbox entries in the order they were written.
func (s *State) PendingEvents() []PendingEvent {
	s.mu.RLock()
	out := make([]PendingEvent, 0, len(s.pending))
	for _, p := range s.pending {
		out = append(out, p)
	}
	s.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].rev < out[j].rev })
	return out
}

// PendingCount returns the number of outbox entries.
func (s *State) PendingCount() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.pending)
}

// OutboxDone removes an outbox entry whose event is stored: a purge whose
// marker expires after a minute (the bucket leaves nothing behind).
func (s *State) OutboxDone(ctx context.Context, id string) error {
	if err := s.kv.Purge(ctx, OutboxPrefix+id, jetstream.PurgeTTL(time.Minute)); err != nil {
		return fmt.Errorf("clear outbox entry %s: %w", id, err)
	}
	s.mu.Lock()
	delete(s.pending, id)
	s.mu.Unlock()
	return nil
}
