package query

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/auditrail/auditrail/internal/auditstore"
	"github.com/auditrail/auditrail/internal/auditstore/search"
	"github.com/auditrail/auditrail/internal/httpapi"
	"github.com/auditrail/auditrail/internal/natsx"
	"github.com/auditrail/auditrail/schemas"
	"github.com/auditrail/auditrail/schemas/apiitem"
)

// The live stream (GET …/audit_logs/stream): Server-Sent Events, one
// message per new audit entry of the scope that passes the listing's
// filters (action, source, resource_type, q), fed from the org's subject of
// the event stream through an ordered consumer, never by polling the store.
// Each message is "id: <event_id>" and "data: <the list item as JSON>";
// created_time is the time the event stream stored the event (the store's
// own created_time, set at ingest, follows it by the ingest latency).
//
// Resuming (Last-Event-ID, or last_event_id): the entry is looked up in the
// store (a UUIDv7 id near its time: auditstore.LookupWindow). Found, the stream starts at its timestamp minus ResumeMargin (a
// producer's clock may run ahead of the stream's), skips the messages up to
// and including it, and delivers what follows. Not in the store (not
// ingested yet, or unknown), it starts ResumeMargin before now and skips
// likewise. When the entry does not come by the time it must have (the
// stream has passed its created_time plus ResumeMargin, or now, or holds no
// more messages), everything from the start is delivered instead: at least
// once, event_id is the dedup key. Within the stream's retention, nothing
// after the entry is lost.

// Live stream defaults.
const (
	DefaultMaxStreams              = 256
	DefaultMaxStreamsPerOrg        = 32
	DefaultMaxStreamsPerCredential = 8
	DefaultStreamHeartbeat         = 15 * time.Second
	DefaultStreamBufferBytes       = 256 << 10
	DefaultStreamWrite             = 10 * time.Second
	DefaultResumeMargin            = time.Minute
	DefaultConsumerInactive        = 30 * time.Second
	DefaultStreamRecheck           = 2 * time.Second
	DefaultStreamLifetime          = time.Hour
)

// ContentTypeEventStream is the content type of a live stream.
const ContentTypeEventStream = "text/event-stream; charset=utf-8"

// The named SSE events that end a stream (besides the entries, which are
// unnamed "message" events): EventError carries {"code", "msg"} (401 or
// 403 when the credential no longer may read the scope: do not reconnect
// with it; 503: reconnect later); EventReconnect says the stream reached
// its lifetime: reconnect with Last-Event-ID (and so authenticate again).
const (
	EventError     = "error"
	EventReconnect = "reconnect"
)

// LiveConfig configures the live streams.
type LiveConfig struct {
	// MaxStreams bounds the streams open at once on this server; the next
	// one is refused with 503 and Retry-After.
	MaxStreams int
	// MaxStreamsPerOrg and MaxStreamsPerCredential bound the streams of
	// one organization and of one credential; the next is refused with 429
	// and Retry-After. The platform admin's streams do not count against
	// an organization's share.
	MaxStreamsPerOrg, MaxStreamsPerCredential int
	// Heartbeat is the interval of the ": ping" comments that keep proxies
	// from closing an idle stream.
	Heartbeat time.Duration
	// BufferBytes bounds the frames waiting for a slow client, in bytes;
	// one more and the client is disconnected (it may resume with
	// Last-Event-ID). A single frame larger than the bound still passes
	// when nothing else waits.
	BufferBytes int
	// WriteTimeout bounds each write to the client; a write that blocks
	// longer disconnects it.
	WriteTimeout time.Duration
	// ResumeMargin is how far before a resumed entry's timestamp (or
	// before now, when the store does not hold it) the stream is read
	// again; see the resume design above.
	ResumeMargin time.Duration
	// ConsumerInactive is the inactive threshold of each stream's consumer:
	// the server deletes the consumer of a stream that ended without
	// deleting it (a crash) after this long.
	ConsumerInactive time.Duration
	// Recheck is how often an open stream authorizes its caller again
	// (also at once on every change of the control-plane state, when the
	// access notifies them): a stream whose credential was revoked ends
	// with an EventError within this bound.
	Recheck time.Duration
	// MaxLifetime ends a stream with an EventReconnect after this long:
	// the client reconnects (with Last-Event-ID, nothing lost) and
	// authenticates again.
	MaxLifetime time.Duration
}

// DefaultLiveConfig returns the defaults.
func DefaultLiveConfig() LiveConfig {
	return LiveConfig{MaxStreams: DefaultMaxStreams, MaxStreamsPerOrg: DefaultMaxStreamsPerOrg, MaxStreamsPerCredential: DefaultMaxStreamsPerCredential,
		Heartbeat: DefaultStreamHeartbeat, BufferBytes: DefaultStreamBufferBytes, WriteTimeout: DefaultStreamWrite,
		ResumeMargin: DefaultResumeMargin, ConsumerInactive: DefaultConsumerInactive, Recheck: DefaultStreamRecheck,
		MaxLifetime: DefaultStreamLifetime}
}

// Validate checks the configuration.
func (c LiveConfig) Validate() error {
	if err := c.limits().Validate("live streams"); err != nil {
		return err
	}
	switch {
	case c.Heartbeat <= 0 || c.WriteTimeout <= 0 || c.ResumeMargin < 0:
		return errors.New("query: live streams: heartbeat and write timeout must be positive, resume margin not negative")
	case c.BufferBytes < 1:
		return errors.New("query: live streams: the buffer must hold at least one byte")
	case c.ConsumerInactive < time.Second:
		return errors.New("query: live streams: consumer inactive threshold below 1s")
	case c.Recheck <= 0 || c.Recheck > 5*time.Second:
		return fmt.Errorf("query: live streams: re-check interval %s not in (0, 5s]: a revoked credential must lose its stream within 5 s", c.Recheck)
	case c.MaxLifetime < time.Second:
		return errors.New("query: live streams: the lifetime must be at least 1s")
	}
	return nil
}

func (c LiveConfig) limits() Limits {
	return Limits{Max: c.MaxStreams, PerOrg: c.MaxStreamsPerOrg, PerCredential: c.MaxStreamsPerCredential}
}

// StreamParams are the query parameters of the live stream: the listing's
// filters, without since and until (a live stream starts now; resume with
// Last-Event-ID), and last_event_id, for clients that cannot set the
// header.
var StreamParams = []string{"action", "source", "resource_type", "q", "last_event_id"}

// HeaderLastEventID is the SSE reconnect header.
const HeaderLastEventID = "Last-Event-ID"

// live is the state of the live streams of a server.
type live struct {
	cfg   LiveConfig
	js    jetstream.JetStream
	ctx   context.Context // ends every stream
	slots *slots
	wg    sync.WaitGroup
}

// ServeLive enables the live stream routes: each stream reads js (an
// ordered consumer of AUDITRAIL_EVENTS filtered to its org) until the
// client goes away or ctx ends, which ends every stream. Without it the
// routes answer 503. Call it before serving; Wait returns once the
// streams have ended.
func (s *Server) ServeLive(ctx context.Context, js jetstream.JetStream, cfg LiveConfig) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	s.live = &live{cfg: cfg, js: js, ctx: ctx, slots: newSlots("live streams", cfg.limits())}
	return nil
}

// OpenStreams is how many live streams are open.
func (s *Server) OpenStreams() int {
	if s.live == nil {
		return 0
	}
	return s.live.slots.count()
}

// WaitStreams waits until every live stream has ended (after the ctx of
// ServeLive ended, they end within a write timeout).
func (s *Server) WaitStreams() {
	if s.live != nil {
		s.live.wg.Wait()
	}
}

// streamParams parses the parameters of a stream.
func streamParams(c *fiber.Ctx, withProject bool) (ListParams, *uuid.UUID, error) {
	path := func(n string) string { return c.Params(n) }
	query := func(n string) string { return c.Query(n) }
	if err := httpapi.CheckParams(c.Context().QueryArgs().VisitAll, StreamParams); err != nil {
		return ListParams{}, nil, err
	}
	p, err := ParseList(path, query, withProject)
	if err != nil {
		return p, nil, err
	}
	last := c.Get(HeaderLastEventID)
	name := HeaderLastEventID
	if last == "" {
		last, name = c.Query("last_event_id"), "last_event_id"
	}
	if last == "" {
		return p, nil, nil
	}
	id, err := parseUUID(name, last)
	if err != nil {
		return p, nil, err
	}
	return p, &id, nil
}

func (s *Server) streamAudit(withProject bool) fiber.Handler {
	return func(c *fiber.Ctx) error {
		p, last, perr := streamParams(c, withProject)
		principal, err := s.authorizeAs(c, p.OrgID, p.ProjectID, perr)
		if err != nil {
			return err
		}
		lv := s.live
		if lv == nil {
			return fiber.NewError(fiber.StatusServiceUnavailable, "live stream not configured")
		}
		if lv.ctx.Err() != nil {
			return fiber.NewError(fiber.StatusServiceUnavailable, "shutting down")
		}
		free, err := lv.slots.acquire(c, p.OrgID, principal)
		if err != nil {
			return err
		}
		lv.wg.Add(1)
		release := func() {
			free()
			lv.wg.Done()
		}
		st, err := s.openStream(c.UserContext(), p, last)
		if err != nil {
			release()
			s.log.Error("live stream refused", "org", p.OrgID.String(), "err", err)
			return fiber.NewError(fiber.StatusServiceUnavailable, "live stream unavailable, try again")
		}
		if last != nil && time.Since(st.start) > s.cfg.BulkReadAge {
			// A resume from far back reads the trail in bulk: recorded
			// like an export, before the first entry leaves.
			from := st.start.UTC().Format(time.RFC3339)
			if err := s.recordRead(c, principal, bulkRead{route: "audit_logs", how: readStream, org: p.OrgID, project: p.ProjectID,
				display: "audit_logs stream resumed from " + from,
				extra:   map[string]any{"last_event_id": last.String(), "from": from}}); err != nil {
				st.deleteConsumer()
				release()
				return err
			}
		}
		st.grant = s.grantOf(c, principal, p.OrgID, p.ProjectID)
		c.Set(fiber.HeaderContentType, ContentTypeEventStream)
		c.Set(fiber.HeaderCacheControl, "no-store")
		c.Set("X-Accel-Buffering", "no")
		c.Set("X-Content-Type-Options", "nosniff")
		c.Status(fiber.StatusOK)
		conn := c.Context().Conn()
		log := s.log
		c.Context().SetBodyStreamWriter(func(w *bufio.Writer) {
			defer release()
			defer func() {
				if r := recover(); r != nil {
					log.Error("live stream panicked", "org", p.OrgID.String(), "panic", r)
				}
			}()
			st.run(w, conn)
		})
		return nil
	}
}

// stream is one open live stream.
type stream struct {
	lv     *live
	log    *slog.Logger
	filter func(*schemas.AuditEvent) bool
	subj   string
	// resume state: skip the messages up to lastID (when set); the start
	// time of the consumer, and the stream time after which lastID can no
	// longer come.
	lastID *uuid.UUID
	start  time.Time
	bound  time.Time
	cons   jetstream.Consumer
	// grant is the caller's authorization, checked again while the
	// stream lasts.
	grant *grant
}

// openStream resolves the resume position and creates the first consumer
// (so that a failure is still a status, not a cut stream).
func (s *Server) openStream(ctx context.Context, p ListParams, last *uuid.UUID) (*stream, error) {
	lv := s.live
	st := &stream{lv: lv, log: s.log, subj: schemas.EventSubject(p.OrgID.String(), schemas.KindAudit),
		filter: streamFilter(p), lastID: last}
	if last != nil {
		now := time.Now()
		st.start, st.bound = now.Add(-lv.cfg.ResumeMargin), now.Add(lv.cfg.ResumeMargin)
		f := auditstore.Filter{Search: search.Query{Terms: []search.Term{{Key: search.KeyEventID, Values: []string{last.String()}}}}}
		if last.Version() == 7 {
			// Near the time in the id, so that a store keyed by time
			// (ClickHouse) prunes its scan; any other id is looked for in
			// the whole trail.
			lo, hi := auditstore.LookupWindow(*last, now)
			since, until := time.UnixMilli(lo).UTC(), time.UnixMilli(hi).UTC()
			f.Window = auditstore.Window{Since: &since, Until: &until}
		}
		qctx, cancel := context.WithTimeout(ctx, s.cfg.StoreTimeout)
		page, err := s.store.ListAudit(qctx, auditstore.Query{OrgID: p.OrgID, ProjectID: p.ProjectID, Limit: 1, Filter: f})
		cancel()
		if err != nil {
			return nil, fmt.Errorf("look up Last-Event-ID: %w", err)
		}
		if len(page.Items) == 1 {
			e := page.Items[0]
			st.start, st.bound = e.Timestamp.Add(-lv.cfg.ResumeMargin), e.CreatedTime.Add(lv.cfg.ResumeMargin)
		}
	}
	if err := st.consume(ctx, st.lastID != nil); err != nil {
		return nil, err
	}
	return st, nil
}

// consume creates the ordered consumer: from st.start when resuming (or
// redelivering), else from the next message.
func (st *stream) consume(ctx context.Context, resume bool) error {
	cfg := jetstream.OrderedConsumerConfig{FilterSubjects: []string{st.subj}, DeliverPolicy: jetstream.DeliverNewPolicy,
		InactiveThreshold: st.lv.cfg.ConsumerInactive}
	if resume {
		cfg.DeliverPolicy, cfg.OptStartTime = jetstream.DeliverByStartTimePolicy, &st.start
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	cons, err := st.lv.js.OrderedConsumer(ctx, schemas.StreamEvents, cfg)
	if err != nil {
		return fmt.Errorf("live stream consumer: %w", err)
	}
	st.cons = cons
	return nil
}

// deleteConsumer deletes the current consumer (the server would after
// ConsumerInactive).
func (st *stream) deleteConsumer() {
	info := st.cons.CachedInfo()
	if info == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := st.lv.js.DeleteConsumer(ctx, schemas.StreamEvents, info.Name); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
		st.log.Warn("live stream: delete consumer", "consumer", info.Name, "err", err)
	}
}

// streamFilter is the listing's filters (scope, action, source,
// resource_type, q) as a predicate on an event of the org.
func streamFilter(p ListParams) func(*schemas.AuditEvent) bool {
	return func(e *schemas.AuditEvent) bool {
		switch {
		case p.ProjectID != nil && (e.ProjectID == nil || *e.ProjectID != *p.ProjectID):
			return false
		case p.Action != nil && e.Action != *p.Action:
			return false
		case p.Source != nil && e.Source != *p.Source:
			return false
		case p.ResourceType != nil && (e.ResourceType == nil || *e.ResourceType != *p.ResourceType):
			return false
		}
		return p.Search.MatchAudit(e)
	}
}

// errSlowClient ends a stream whose client does not keep up.
var errSlowClient = errors.New("client too slow: buffer full")

// frameQueue holds the frames waiting for the client, bounded in bytes.
type frameQueue struct {
	mu     sync.Mutex
	frames [][]byte
	bytes  int
	max    int
	ready  chan struct{} // a token when frames were pushed since the last take
}

func newFrameQueue(max int) *frameQueue {
	return &frameQueue{max: max, ready: make(chan struct{}, 1)}
}

// push queues f, or reports false when it would pass the bound (a frame
// alone in the queue always passes).
func (q *frameQueue) push(f []byte) bool {
	q.mu.Lock()
	if len(q.frames) > 0 && q.bytes+len(f) > q.max {
		q.mu.Unlock()
		return false
	}
	q.frames = append(q.frames, f)
	q.bytes += len(f)
	q.mu.Unlock()
	select {
	case q.ready <- struct{}{}:
	default:
	}
	return true
}

// take returns every queued frame and empties the queue.
func (q *frameQueue) take() [][]byte {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := q.frames
	q.frames, q.bytes = nil, 0
	return out
}

// endFrame is a named event that ends a stream, its data a JSON object.
func endFrame(event string, data any) []byte {
	b, err := json.Marshal(data)
	if err != nil {
		b = []byte(`{}`)
	}
	return []byte("event: " + event + "\ndata: " + string(b) + "\n\n")
}

// run writes the stream until the client goes away, it is too slow, the
// server shuts down, the consumer fails, the caller's credential no longer
// reads the scope (an EventError) or the stream reaches its lifetime (an
// EventReconnect); the consumer is deleted and the reader goroutine has
// ended when it returns.
func (st *stream) run(w *bufio.Writer, conn net.Conn) {
	cfg := st.lv.cfg
	queue := newFrameQueue(cfg.BufferBytes)
	ended := make(chan error, 1)
	ctx, cancel := context.WithCancel(st.lv.ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer func() {
			if r := recover(); r != nil {
				ended <- fmt.Errorf("live stream reader panicked: %v", r)
			}
		}()
		ended <- st.read(ctx, queue)
	}()
	defer func() {
		cancel()
		wg.Wait()
		st.deleteConsumer()
	}()

	write := func(bs ...[]byte) error {
		if conn != nil {
			_ = conn.SetWriteDeadline(time.Now().Add(cfg.WriteTimeout))
		}
		for _, b := range bs {
			if _, err := w.Write(b); err != nil {
				return err
			}
		}
		return w.Flush()
	}
	if err := write([]byte(": ok\n\n")); err != nil {
		return
	}
	ping := time.NewTicker(cfg.Heartbeat)
	defer ping.Stop()
	recheck := time.NewTicker(cfg.Recheck)
	defer recheck.Stop()
	lifetime := time.NewTimer(cfg.MaxLifetime)
	defer lifetime.Stop()
	var changed <-chan struct{}
	if st.grant != nil {
		changed = st.grant.changed()
	}
	// revoked ends the stream when the grant no longer holds.
	revoked := func() bool {
		if st.grant == nil {
			return false
		}
		changed = st.grant.changed() // before the check: no change is missed
		cctx, ccancel := context.WithTimeout(ctx, 5*time.Second)
		ferr := st.grant.check(cctx)
		ccancel()
		if ferr == nil {
			return false
		}
		st.log.Info("live stream ended: the caller may no longer read it", "subject", st.subj, "principal", st.grant.principal.ID, "code", ferr.Code)
		// Whatever the reader queued was read under the old grant: dropped.
		_ = write(endFrame(EventError, map[string]any{"code": ferr.Code, "msg": ferr.Message}))
		return true
	}
	for {
		var err error
		select {
		case <-st.lv.ctx.Done():
			return
		case err = <-ended:
			if !errors.Is(err, context.Canceled) {
				st.log.Warn("live stream ended", "subject", st.subj, "err", err)
			}
			return
		case <-queue.ready:
			select {
			case <-changed: // the state changed: decide before sending more
				if revoked() {
					return
				}
			default:
			}
			err = write(queue.take()...)
		case <-ping.C:
			err = write([]byte(": ping\n\n"))
		case <-recheck.C:
			if revoked() {
				return
			}
		case <-changed:
			if revoked() {
				return
			}
		case <-lifetime.C:
			_ = write(endFrame(EventReconnect, map[string]any{"msg": fmt.Sprintf("the stream reached its lifetime (%s): reconnect with Last-Event-ID", cfg.MaxLifetime)}))
			return
		}
		if err != nil { // the client went away, or blocked a write past WriteTimeout
			st.log.Debug("live stream: client gone", "subject", st.subj, "err", err)
			return
		}
	}
}

// read moves the consumer's messages that pass the filter, as SSE frames,
// to queue, until ctx ends; a full queue ends it (errSlowClient).
func (st *stream) read(ctx context.Context, queue *frameQueue) error {
	skipping := st.lastID != nil
	if skipping {
		if info := st.cons.CachedInfo(); info != nil && info.NumPending == 0 {
			skipping = false // nothing since the start: all that comes is after the entry
		}
	}
	for {
		it, err := st.cons.Messages(jetstream.PullMaxMessages(128))
		if err != nil {
			return fmt.Errorf("live stream messages: %w", err)
		}
		stop := context.AfterFunc(ctx, it.Stop)
		restart, err := st.pump(ctx, it, queue, &skipping)
		stop()
		it.Stop()
		if !restart {
			return err
		}
		// The resumed entry did not come: deliver everything from the
		// start on a fresh consumer.
		st.deleteConsumer()
		if err := st.consume(ctx, true); err != nil {
			return err
		}
	}
}

// pump reads it; it answers restart when skipping ends without having
// seen lastID.
func (st *stream) pump(ctx context.Context, it jetstream.MessagesContext, queue *frameQueue, skipping *bool) (restart bool, err error) {
	last := ""
	if st.lastID != nil {
		last = st.lastID.String()
	}
	for {
		m, err := it.Next()
		if err != nil {
			if ctx.Err() != nil {
				return false, ctx.Err()
			}
			return false, fmt.Errorf("live stream next: %w", err)
		}
		if *skipping {
			meta, err := m.Metadata()
			if err != nil {
				return false, fmt.Errorf("live stream metadata: %w", err)
			}
			if id := m.Headers().Get(schemas.HeaderMsgID); id == last {
				*skipping = false
				continue
			}
			if meta.Timestamp.After(st.bound) || meta.NumPending == 0 {
				*skipping = false
				return true, nil
			}
			continue
		}
		ev, err := natsx.DecodeAudit(m)
		if err != nil {
			continue // a dead letter: never listed, never streamed
		}
		if !st.filter(&ev) {
			continue
		}
		f, err := frame(&ev, m)
		if err != nil {
			return false, err
		}
		if !queue.push(f) {
			return false, errSlowClient
		}
	}
}

// frame is the SSE message of an event: its id and its list item, with
// the stream's time as created_time.
func frame(ev *schemas.AuditEvent, m jetstream.Msg) ([]byte, error) {
	e := schemas.AuditEntry{ID: schemas.EntryID(ev.EventID), AuditEvent: *ev}
	e.Timestamp = auditstore.Millis(e.Timestamp)
	if meta, err := m.Metadata(); err == nil {
		e.CreatedTime = auditstore.Millis(meta.Timestamp)
	}
	b, err := json.Marshal(apiitem.NewItem(&e))
	if err != nil {
		return nil, fmt.Errorf("encode item: %w", err)
	}
	out := make([]byte, 0, len(b)+64)
	out = append(out, "id: "...)
	out = append(out, ev.EventID.String()...)
	out = append(out, "\ndata: "...)
	out = append(out, b...)
	return append(out, "\n\n"...), nil
}
