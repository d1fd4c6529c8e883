package controlplane

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/auditrail/auditrail/controlplane/cpstate"
	"github.com/auditrail/auditrail/internal/httpapi"
	"github.com/auditrail/auditrail/internal/retry"
	"github.com/auditrail/auditrail/producers"
	"github.com/auditrail/auditrail/schemas"
)

// The outbox: how every applied change gets exactly one audit event.
//
//  1. A mutation builds its audit event (a UUIDv7 event_id) and the NATS
//     message that publishes it (Nats-Msg-Id = event_id).
//  2. One atomic batch on the bucket's stream stores the changed keys, each
//     with its expected last revision (compare-and-set; a deletion is a KV
//     delete marker), and the message under outbox.<event_id>. Either all
//     are stored or none: a 409 or 503 leaves neither change nor event.
//  3. The event is published and, once the audit stream has stored it, the
//     outbox entry is purged (its purge marker expires after a minute).
//  4. Run republishes, on start and then every SweepInterval, every outbox
//     entry that is still there (except those that a request of this
//     process is publishing): a process killed between 2 and 3 loses
//     nothing. A republish within the stream's dedup window (20 minutes) is
//     dropped by Nats-Msg-Id; a later one is stored in the stream again but
//     the audit store keeps one row per event_id.
//
// When the audit stream is unavailable the change is still applied and
// answered as usual: its event waits in the outbox and is published when
// the stream returns. While MaxPending events wait, further mutations are
// refused with 503 (the outbox does not grow without bound).
//
// All keys live in the bucket (outbox.<event_id> beside the resources), so
// the control-plane role needs no subject beyond the bucket's and the
// audit events'.

// HeaderEventID carries the id of the audit event that a mutation recorded.
const HeaderEventID = httpapi.HeaderEventID

// ServiceConfig tunes the admin API's outbox.
type ServiceConfig struct {
	// SweepInterval is how often the outbox entries are republished (a
	// sweep of an empty outbox costs nothing: it reads the mirror).
	SweepInterval time.Duration
	// MaxPending is how many events may wait for the audit stream before
	// mutations are refused (503).
	MaxPending int
	// Retention are the operator's bounds of the organizations' retention
	// (the retention routes check and show them).
	Retention cpstate.RetentionBounds

	// stopAfterWrite simulates a crash between the write and the publish
	// (tests only).
	stopAfterWrite bool
}

// DefaultServiceConfig returns a 1 s sweep, at most 1000 waiting events
// and the default retention bounds (cpstate.DefaultRetentionBounds).
func DefaultServiceConfig() ServiceConfig {
	return ServiceConfig{SweepInterval: time.Second, MaxPending: 1000, Retention: cpstate.DefaultRetentionBounds()}
}

// Validate checks the configuration.
func (c ServiceConfig) Validate() error {
	switch {
	case c.SweepInterval < 10*time.Millisecond:
		return fmt.Errorf("%w: sweep interval %s below 10ms", cpstate.ErrInvalidOption, c.SweepInterval)
	case c.MaxPending < 1:
		return fmt.Errorf("%w: max pending %d < 1", cpstate.ErrInvalidOption, c.MaxPending)
	}
	if err := c.Retention.Validate(); err != nil {
		return err
	}
	return nil
}

// errCrashed is what a request answers when stopAfterWrite stopped it.
var errCrashed = errors.New("stopped between write and publish (test)")

// outboxRecord is the value of an outbox entry: the message to publish.
type outboxRecord struct {
	Subject string      `json:"subject"`
	Header  nats.Header `json:"header"`
	Data    []byte      `json:"data"`
}

func (r outboxRecord) msg() *nats.Msg {
	m := nats.NewMsg(r.Subject)
	m.Header, m.Data = r.Header, r.Data
	return m
}

// commitRecorded applies writes together with the audit event of mut (see
// the outbox above), sets the Auditrail-Event-Id header and publishes the
// event. Errors are of this package (httpError maps them).
func (s *Service) commitRecorded(cl *call, mut producers.Mutation, writes ...cpstate.Write) error {
	if n := s.state.PendingCount(); n >= s.cfg.MaxPending {
		return fmt.Errorf("%w: %d events wait for the audit log; changes are refused until it takes them", ErrAuditLog, n)
	}
	mut.Source = cl.source
	mut.PrincipalID, mut.PrincipalType, mut.UserID = cl.p.ID, cl.p.Type, cl.p.UserID
	mut.DisplayName = s.access.DisplayName(cl.p, mut.OrgID)
	mut.ClientIP = cl.ip
	ev, msg, err := s.rec.Prepare(mut)
	if err != nil {
		return fmt.Errorf("audit event: %w", err)
	}
	id := ev.EventID.String()
	rec, err := json.Marshal(outboxRecord{Subject: msg.Subject, Header: msg.Header, Data: msg.Data})
	if err != nil {
		return fmt.Errorf("audit event %s: %w", id, err)
	}
	ctx := cl.c.UserContext()
	s.inflight.Store(id, struct{}{})
	defer s.inflight.Delete(id)
	if err := s.state.Commit(ctx, writes, &cpstate.PendingEvent{ID: id, Value: rec}); err != nil {
		return err
	}
	cl.c.Set(HeaderEventID, id)
	if s.cfg.stopAfterWrite {
		return errCrashed
	}
	if err := s.rec.Send(ctx, msg); err != nil {
		s.log.Warn("audit event pending: the change is applied and the outbox publishes its event when the audit log takes it",
			"event_id", id, "resource_type", mut.ResourceType.String(), "resource_id", mut.ResourceID, "err", err)
		return nil
	}
	if err := s.state.OutboxDone(ctx, id); err != nil {
		s.log.Warn("audit event stored; its outbox entry stays until the next sweep", "event_id", id, "err", err)
	}
	return nil
}

// PendingEvents is how many audit events of applied changes wait in the
// outbox for the audit stream (shown on /healthz).
func (s *Service) PendingEvents() int { return s.state.PendingCount() }

// Run republishes the events left in the outbox: at once (those of a
// process that stopped between a write and its publish), then every
// SweepInterval, backing off after a failed sweep; meanwhile it serves the
// tool runners' connection refreshes (ServeConnRefresh). It returns when
// ctx ends; a read-only state has no outbox to sweep.
func (s *Service) Run(ctx context.Context) error {
	if s.state.ReadOnly() {
		return nil
	}
	served := make(chan struct{})
	go func() {
		defer close(served)
		if err := s.ServeConnRefresh(ctx); err != nil {
			s.log.Warn("the tool runners' connection refreshes are not served", "err", err)
		}
	}()
	defer func() { <-served }()
	bo := retry.Policy{Initial: min(200*time.Millisecond, s.cfg.SweepInterval), Max: s.cfg.SweepInterval}.Backoff()
	for {
		wait := s.cfg.SweepInterval
		if err := s.sweep(ctx); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			wait = bo.NextBackOff()
			s.log.Warn("outbox: events still wait for the audit log", "pending", s.state.PendingCount(), "retry_in", wait, "err", err)
		} else {
			bo.Reset()
		}
		if !retry.Sleep(ctx, wait) {
			return nil
		}
	}
}

// sweep publishes the outbox entries, in the order they were written,
// but those that a request of this process is publishing, and clears each
// once stored.
func (s *Service) sweep(ctx context.Context) error {
	pending := s.state.PendingEvents()
	if len(pending) == 0 {
		return nil
	}
	msgs := make([]*nats.Msg, 0, len(pending))
	ids := make([]string, 0, len(pending))
	for _, p := range pending {
		if _, busy := s.inflight.Load(p.ID); busy {
			continue
		}
		var r outboxRecord
		if err := json.Unmarshal(p.Value, &r); err != nil || r.Subject == "" || r.Header.Get(schemas.HeaderMsgID) != p.ID {
			s.log.Error("outbox: undecodable entry left in place", "event_id", p.ID, "err", err)
			continue
		}
		msgs, ids = append(msgs, r.msg()), append(ids, p.ID)
	}
	if len(msgs) == 0 {
		return nil
	}
	if err := s.rec.Send(ctx, msgs...); err != nil {
		return fmt.Errorf("republish %d events: %w", len(msgs), err)
	}
	s.log.Info("outbox: republished pending audit events", "count", len(msgs))
	var errs []error
	for _, id := range ids {
		if err := s.state.OutboxDone(ctx, id); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
