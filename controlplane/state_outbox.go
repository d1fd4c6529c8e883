package controlplane

// The outbox: audit events committed with their change, published and
// then removed; pending ones are published again after a restart.

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// pendingEvent is an event of the outbox, not yet known to be stored in
// the audit stream.
type pendingEvent struct {
	id    string
	rev   uint64
	value []byte
}

// outboxPrefix is the prefix of the outbox keys: outbox.<event_id>.
const outboxPrefix = "outbox."

// pendingEvents returns the outbox entries in the order they were written.
func (s *State) pendingEvents() []pendingEvent {
	s.mu.RLock()
	out := make([]pendingEvent, 0, len(s.pending))
	for _, p := range s.pending {
		out = append(out, p)
	}
	s.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].rev < out[j].rev })
	return out
}

// pendingCount returns the number of outbox entries.
func (s *State) pendingCount() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.pending)
}

// outboxDone removes an outbox entry whose event is stored: a purge whose
// marker expires after a minute (the bucket leaves nothing behind).
func (s *State) outboxDone(ctx context.Context, id string) error {
	if err := s.kv.Purge(ctx, outboxPrefix+id, jetstream.PurgeTTL(time.Minute)); err != nil {
		return fmt.Errorf("clear outbox entry %s: %w", id, err)
	}
	s.mu.Lock()
	delete(s.pending, id)
	s.mu.Unlock()
	return nil
}
