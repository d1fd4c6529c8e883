package cpstate

// The mirror: a watch of every key of the bucket, re-created when it
// stops, and checked against the server so that a stale mirror is known.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/auditrail/auditrail/internal/httpx"
	"github.com/auditrail/auditrail/internal/retry"
)

// openWatch watches every key from the revision after the last one delivered.
func (s *State) openWatch(ctx context.Context) (jetstream.KeyWatcher, error) {
	s.mu.RLock()
	from := s.watched
	s.mu.RUnlock()
	var opts []jetstream.WatchOpt
	if from > 0 {
		opts = append(opts, jetstream.ResumeFromRevision(from+1))
	}
	w, err := s.kv.WatchAll(ctx, opts...)
	if err != nil {
		return nil, err
	}
	s.cutMu.Lock()
	s.cut = func() { _ = w.Stop() }
	s.cutMu.Unlock()
	return w, nil
}

// run applies the watch until ctx ends, re-creates it when it stops or
// falls behind, and probes the stream to confirm the mirror current.
func (s *State) run(ctx context.Context, w jetstream.KeyWatcher) {
	probe := time.NewTicker(s.cfg.MaxStaleness / 4)
	defer probe.Stop()
	bo := s.cfg.Reconnect.Backoff()
	started, initial := s.now(), true
	for {
		if w == nil {
			if !retry.Sleep(ctx, bo.NextBackOff()) {
				return
			}
			var err error
			if w, err = s.openWatch(ctx); err != nil {
				if s.closing(ctx) {
					return
				}
				s.log.Warn("control-plane watch: cannot re-create it", "err", err)
				w = nil
				continue
			}
			started = s.now()
			s.log.Info("control-plane watch re-created")
		}
		select {
		case <-ctx.Done():
			_ = w.Stop()
			return
		case e, ok := <-w.Updates():
			if !ok {
				if s.closing(ctx) {
					return
				}
				s.log.Warn("control-plane watch stopped; re-creating it")
				w = nil
				continue
			}
			if e == nil {
				// The watch delivered everything the stream held when it
				// started: the mirror was current then.
				s.mu.Lock()
				s.confirmed = maxTime(s.confirmed, started)
				if s.target != 0 && started.After(s.targetAt) {
					s.target = 0
				}
				s.mu.Unlock()
				bo.Reset()
				if initial {
					initial = false
					close(s.synced)
				}
				continue
			}
			deleted := e.Operation() == jetstream.KeyValueDelete || e.Operation() == jetstream.KeyValuePurge
			s.mu.Lock()
			s.applyLocked(e.Key(), e.Revision(), e.Value(), deleted)
			s.watched = max(s.watched, e.Revision())
			if s.target != 0 && s.watched >= s.target {
				s.confirmed, s.target = maxTime(s.confirmed, s.targetAt), 0
			}
			s.mu.Unlock()
		case <-probe.C:
			if s.probe(ctx) {
				s.log.Warn("control-plane watch fell behind the stream; re-creating it")
				stopWatch(w)
				w = nil
			}
		}
	}
}

// closing reports whether the watch ends because its owner is closing it:
// ctx ended, or the connection is draining or closed (a process stopping
// drains its connections). Such an end is no news and is not re-created.
func (s *State) closing(ctx context.Context) bool {
	return ctx.Err() != nil || s.nc.IsDraining() || s.nc.IsClosed()
}

// stopWatch stops w and drains what it still delivers, so that its
// delivery goroutine never blocks on a channel nobody reads.
func stopWatch(w jetstream.KeyWatcher) {
	_ = w.Stop()
	go func() {
		for range w.Updates() {
		}
	}()
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// probe reads the last sequence of the stream: the mirror is current once
// the watch has delivered it. It reports whether the watch is stuck: a
// sequence read half the staleness bound ago is still not delivered.
func (s *State) probe(ctx context.Context) (stuck bool) {
	at := s.now()
	pctx, cancel := context.WithTimeout(ctx, s.cfg.MaxStaleness/4)
	defer cancel()
	last, err := s.lastSeq(pctx)
	if err != nil {
		s.log.Debug("control-plane probe failed", "err", err)
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.watched >= last:
		s.confirmed, s.target = maxTime(s.confirmed, at), 0
	case s.target == 0:
		s.target, s.targetAt = last, at
	default:
		// Keep the oldest unmet target: it says how long the watch has lagged.
		return at.Sub(s.targetAt) > s.cfg.MaxStaleness/2
	}
	return false
}

// lastSeq returns the sequence of the newest message of the bucket (0 when
// empty), by a direct get that any replica answers.
func (s *State) lastSeq(ctx context.Context) (uint64, error) {
	req, _ := json.Marshal(map[string]string{"last_by_subj": s.prefix + ">"})
	m, err := s.nc.RequestWithContext(ctx, "$JS.API.DIRECT.GET."+s.stream, req)
	if err != nil {
		return 0, err
	}
	if st := m.Header.Get("Status"); st == "404" {
		return 0, nil
	} else if st != "" {
		return 0, fmt.Errorf("direct get: status %s %s", st, m.Header.Get("Description"))
	}
	return strconv.ParseUint(m.Header.Get(jetstream.SequenceHeader), 10, 64)
}

// Fresh returns nil while the mirror was confirmed current within
// MaxStaleness; otherwise an error that is ErrStale and an httpx.StatusError 503.
func (s *State) Fresh() error {
	s.mu.RLock()
	c := s.confirmed
	s.mu.RUnlock()
	if age := s.now().Sub(c); age > s.cfg.MaxStaleness {
		msg := fmt.Sprintf("%s: not confirmed current for %s (bound %s)", ErrStale, age.Round(time.Millisecond), s.cfg.MaxStaleness)
		return fmt.Errorf("%w: %w", &httpx.StatusError{Code: http.StatusServiceUnavailable, Msg: msg}, ErrStale)
	}
	return nil
}

// applyLocked records a change unless the mirror already holds it or a
// newer revision.
func (s *State) applyLocked(key string, rev uint64, value []byte, deleted bool) {
	if strings.HasPrefix(key, MarkerPrefix) {
		return
	}
	if id, ok := strings.CutPrefix(key, OutboxPrefix); ok {
		if p, ok := s.pending[id]; ok && p.rev > rev {
			return
		}
		if deleted {
			delete(s.pending, id)
		} else {
			s.pending[id] = PendingEvent{ID: id, rev: rev, Value: value}
		}
		return
	}
	if cur, ok := s.entries[key]; ok && cur.rev >= rev {
		return
	}
	if g, ok := s.gone[key]; ok && g >= rev {
		return
	}
	if old, ok := s.entries[key]; ok && strings.HasPrefix(key, "apikey.") {
		if h := hashOf(old.value); h != "" {
			delete(s.byHash, h)
		}
	}
	close(s.changed) // whoever holds a decision made on the old entry decides again
	s.changed = make(chan struct{})
	if deleted {
		delete(s.entries, key)
		s.gone[key] = rev
		return
	}
	delete(s.gone, key)
	s.entries[key] = entry{rev: rev, value: value}
	if strings.HasPrefix(key, "apikey.") {
		if h := hashOf(value); h != "" {
			s.byHash[h] = key
		}
	}
}

// Changed returns a channel that is closed at the next change the mirror
// applies to an entry (an API key disabled or deleted, a member removed,
// …): a long-lived answer (a live stream, an export) that authorized its
// caller once waits on it and authorizes again.
func (s *State) Changed() <-chan struct{} {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.changed
}

func hashOf(v []byte) string {
	var k struct {
		Hash string `json:"hash"`
	}
	_ = json.Unmarshal(v, &k)
	return k.Hash
}
