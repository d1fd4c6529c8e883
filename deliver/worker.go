package deliver

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"runtime/debug"
	"slices"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/auditrail/auditrail/controlplane/destination"
	"github.com/auditrail/auditrail/internal/auditstore"
	"github.com/auditrail/auditrail/internal/egress"
	"github.com/auditrail/auditrail/internal/redact"
	"github.com/auditrail/auditrail/internal/retry"
	"github.com/auditrail/auditrail/schemas"
)

// worker delivers one destination's generation while this instance holds
// its lease: it alone pulls the generation's consumer, one batch at a time.
type worker struct {
	d          *Deliverer
	id         uuid.UUID
	gen        int
	spec       atomic.Pointer[spec]
	leaseUntil time.Time // the manager's (under Deliverer.mu)
	takeover   bool      // the lease ran out on another instance
	ctx        context.Context
	cancel     context.CancelFunc
	done       chan struct{}
	log        *slog.Logger

	// The status, written by the worker's goroutine only.
	st        destination.DeliveryStatus
	writtenAt time.Time
	// marks are where the proofs of each log stand (proofs.go).
	marks [2]proofMark
}

func newWorker(d *Deliverer, sp *spec, l lease) *worker {
	ctx, cancel := context.WithCancel(context.Background())
	w := &worker{d: d, id: sp.ID, gen: sp.Generation, leaseUntil: l.until, takeover: l.takeover, ctx: ctx, cancel: cancel, done: make(chan struct{}),
		log: d.log.With("destination", sp.ID, "generation", sp.Generation)}
	w.spec.Store(sp)
	w.st = destination.DeliveryStatus{State: destination.DeliveryActive, Generation: sp.Generation, Instance: d.cfg.Instance}
	return w
}

// update takes a changed destination (pause, URL, secret, q, format).
func (w *worker) update(dst destination.ResolvedDestination, log *slog.Logger) {
	cur := w.spec.Load()
	if cur.UpdatedAt.Equal(dst.UpdatedAt) && cur.Paused == dst.Paused {
		return
	}
	sp, err := newSpec(dst)
	if err != nil {
		log.Warn("deliver: destination change skipped", "destination", dst.ID, "err", err)
		return
	}
	w.spec.Store(sp)
}

// stop ends the worker and waits for it: the batch in hand is handed back.
func (w *worker) stop() {
	w.cancel()
	<-w.done
}

func (w *worker) ended() bool {
	select {
	case <-w.done:
		return true
	default:
		return false
	}
}

// errHeld stops the retries of a batch: the destination is paused or
// replayed, or the worker stops.
var errHeld = errors.New("delivery held")

func (w *worker) run() {
	defer close(w.done)
	defer func() {
		if r := recover(); r != nil {
			w.log.Error("deliver: worker panicked; it starts again at the next tick", "panic", r, "stack", string(debug.Stack()))
		}
	}()
	cons := w.consumer()
	if cons == nil || w.takeover && !w.waitInFlight(cons) {
		return
	}
	w.loadMarks()
	bo := w.d.cfg.Retry.Backoff()
	for w.ctx.Err() == nil {
		if sp := w.spec.Load(); sp.Paused {
			w.setStatus(destination.DeliveryPaused, false)
			retry.Sleep(w.ctx, w.d.cfg.Tick)
			continue
		}
		batch, err := cons.Fetch(w.d.cfg.BatchSize, jetstream.FetchMaxWait(w.d.cfg.FetchWait))
		if err != nil {
			w.log.Warn("deliver: fetch", "err", err)
			retry.Sleep(w.ctx, bo.NextBackOff())
			continue
		}
		var msgs []jetstream.Msg
		for m := range batch.Messages() {
			msgs = append(msgs, m)
		}
		if err := batch.Error(); err != nil && len(msgs) == 0 {
			w.log.Warn("deliver: fetch", "err", err)
			retry.Sleep(w.ctx, bo.NextBackOff())
			continue
		}
		bo.Reset()
		if len(msgs) == 0 {
			w.st.Pending, w.st.OldestPending = 0, nil
			w.setStatus(destination.DeliveryActive, false)
			continue
		}
		w.deliver(msgs)
	}
}

// consumer creates (or finds) the durable consumer of the generation,
// retrying until the worker stops; it deletes the previous generation's.
func (w *worker) consumer() jetstream.Consumer {
	sp := w.spec.Load()
	start := sp.StartAt
	cfg := jetstream.ConsumerConfig{
		Durable:       consumerName(sp.ID, sp.Generation),
		Description:   "auditrail destination " + sp.ID.String(),
		FilterSubject: schemas.EventSubject(sp.OrgID.String(), ">"),
		DeliverPolicy: jetstream.DeliverByStartTimePolicy,
		OptStartTime:  &start,
		// Each message is acknowledged: with AckAll, acknowledging a batch
		// would also acknowledge an earlier message a fetch lost in flight.
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       w.d.cfg.AckWait,
		MaxAckPending: w.d.cfg.BatchSize,
		MaxDeliver:    -1,
	}
	var cons jetstream.Consumer
	err := retry.Do(w.ctx, w.d.cfg.Retry, func(ctx context.Context) error {
		// The consumer as it exists (another instance, or this one before
		// a restart, made it), else created.
		var err error
		cons, err = w.d.js.Consumer(ctx, schemas.StreamEvents, cfg.Durable)
		if errors.Is(err, jetstream.ErrConsumerNotFound) {
			cons, err = w.d.js.CreateConsumer(ctx, schemas.StreamEvents, cfg)
		}
		return err
	}, func(err error, next time.Duration) {
		w.log.Warn("deliver: create the consumer", "err", err, "retry_in", next)
	})
	if err != nil {
		return nil
	}
	if sp.Generation > 0 {
		err := w.d.js.DeleteConsumer(w.ctx, schemas.StreamEvents, consumerName(sp.ID, sp.Generation-1))
		if err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
			w.log.Warn("deliver: delete the replaced generation's consumer (the sweep retries)", "err", err)
		}
	}
	return cons
}

// waitInFlight keeps the order after a takeover from an instance that
// died with a batch in hand: that batch stays unacknowledged until its ack
// wait ends, and a fetch before then would get the events after it first.
// So while the consumer has messages in flight, the worker waits until the
// last delivery's ack wait has passed (the server then redelivers them
// first). False when the worker stops first.
//
// Only a lease that ran out calls for it: an instance that stops or gives
// a destination up hands its batch back (nak) and deletes the lease, and
// the server redelivers what was handed back before anything else. The
// consumer's info cannot tell the two apart (a nak'd message stays in
// NumAckPending until it is delivered again), so waiting after a clean
// hand-over would delay the destination by a whole ack wait.
func (w *worker) waitInFlight(cons jetstream.Consumer) bool {
	const margin = 500 * time.Millisecond
	for w.ctx.Err() == nil {
		ctx, cancel := context.WithTimeout(w.ctx, 5*time.Second)
		info, err := cons.Info(ctx)
		cancel()
		switch {
		case err != nil:
			w.log.Warn("deliver: consumer info", "err", err)
		case info.NumAckPending == 0:
			return true
		case info.Delivered.Last == nil || time.Since(*info.Delivered.Last) > info.Config.AckWait+margin:
			return true
		default:
			wait := time.Until(info.Delivered.Last.Add(info.Config.AckWait + margin))
			w.log.Info("deliver: a batch of a stopped instance is in flight; waiting for its redelivery", "pending_acks", info.NumAckPending, "wait", wait.Round(time.Millisecond))
			retry.Sleep(w.ctx, wait)
			continue
		}
		retry.Sleep(w.ctx, w.d.cfg.Tick)
	}
	return false
}

// chunk is a run of a batch's messages sent in one POST (lines may be
// empty: none selected) and acknowledged once it is taken.
type chunk struct {
	msgs  []jetstream.Msg
	body  []byte
	lines int
	// leaves are the leaves of the entries delivered, per log (proofs).
	leaves [2][]int64
	// events counts the lines that are events (a checkpoint's line is
	// not): what the status and the metrics count as delivered.
	events int
	// eventMsgs are the messages of those lines (their lags).
	eventMsgs []jetstream.Msg
}

// deliver sends a batch in order, chunk after chunk, each acknowledged
// once a 2xx took it. When the worker stops,
// or the destination is paused or replayed, what is left is handed back to
// the stream (nak: redelivered first).
func (w *worker) deliver(msgs []jetstream.Msg) {
	sp := w.spec.Load()
	proves := w.proves(sp)
	var leaves []leafOf
	var cps [2]auditstore.Checkpoint
	if proves {
		var ok bool
		if leaves, cps, ok = w.awaitLeaves(sp, msgs); !ok {
			w.handBack([]chunk{{msgs: msgs}})
			return
		}
	}
	var chunks []chunk
	cur := chunk{}
	for i, m := range msgs {
		meta, _ := m.Metadata()
		var created time.Time
		if meta != nil {
			created = meta.Timestamp
		}
		var leaf *int64
		if proves && leaves[i].ok {
			leaf = &leaves[i].leaf
		}
		line, err := sp.encode(m.Subject(), m.Data(), created, leaf)
		if err != nil {
			w.d.reject(m.Subject(), err, w.log)
		}
		if line != nil && cur.lines > 0 && len(cur.body)+len(line)+1 > w.d.cfg.MaxBodyBytes {
			chunks = append(chunks, cur)
			cur = chunk{}
		}
		cur.msgs = append(cur.msgs, m)
		if line != nil {
			cur.body = append(append(cur.body, line...), '\n')
			cur.lines++
			if _, kind, _ := schemas.ParseEventSubject(m.Subject()); kind != schemas.KindCheckpoint {
				cur.events++
				cur.eventMsgs = append(cur.eventMsgs, m)
			}
			if leaf != nil {
				cur.leaves[leaves[i].kind] = append(cur.leaves[leaves[i].kind], *leaf)
			}
		}
	}
	chunks = append(chunks, cur)
	done := 0 // messages of the batch acknowledged
	for i, c := range chunks {
		w.notePending(msgs, done)
		var marks [2]proofMark
		if proves && c.lines > 0 {
			lines, m, err := w.batchLines(sp.OrgID, c.leaves, cps)
			if err != nil {
				w.log.Warn("deliver: batch proof", "err", err)
				w.handBack(chunks[i:])
				retry.Sleep(w.ctx, w.d.cfg.Tick)
				return
			}
			marks = m
			body := slices.Clip(c.body)
			for _, l := range lines {
				body = append(append(body, l...), '\n')
			}
			c.body = body
		}
		if c.lines > 0 {
			if err := w.post(sp, c, msgs); err != nil {
				w.handBack(chunks[i:])
				retry.Sleep(w.ctx, w.d.cfg.Tick)
				return
			}
		}
		if !w.ack(c.msgs) {
			w.handBack(chunks[i:])
			return
		}
		if proves && c.lines > 0 && marks != w.marks {
			w.marks = marks
			w.saveMarks()
		}
		done += len(c.msgs)
		now := time.Now().UTC()
		if c.lines > 0 {
			w.st.LastDeliveredAt = &now
		}
		w.st.Delivered += uint64(c.events)
		w.d.delivered.Add(uint64(c.events))
		if w.d.obs != nil && c.events > 0 {
			w.d.obs.Delivered(lags(c, now))
		}
		w.st.Failures, w.st.LastError = 0, ""
	}
	last, _ := msgs[len(msgs)-1].Metadata()
	if last != nil {
		w.st.Pending = last.NumPending
	}
	if w.st.Pending == 0 {
		w.st.OldestPending = nil
	}
	w.setStatus(destination.DeliveryActive, w.st.Pending == 0)
}

// lags are the times since the stream stored the events delivered in c,
// at now.
func lags(c chunk, now time.Time) []time.Duration {
	out := make([]time.Duration, 0, c.events)
	for _, m := range c.eventMsgs {
		if meta, err := m.Metadata(); err == nil {
			out = append(out, now.Sub(meta.Timestamp))
		}
	}
	return out
}

// notePending sets the status's pending events (those of the batch from
// done on, and those the stream holds after it) and the stream time of
// the oldest.
func (w *worker) notePending(batch []jetstream.Msg, done int) {
	last, _ := batch[len(batch)-1].Metadata()
	first, _ := batch[done].Metadata()
	if last == nil || first == nil {
		return
	}
	w.st.Pending = last.NumPending + uint64(len(batch)-done)
	t := first.Timestamp.UTC()
	w.st.OldestPending = &t
}

// ack acknowledges msgs, the last one confirmed by the server (after the
// others, sent before it on the same connection), retrying until the
// worker stops.
func (w *worker) ack(msgs []jetstream.Msg) bool {
	for _, m := range msgs[:len(msgs)-1] {
		if err := m.Ack(); err != nil {
			w.log.Warn("deliver: acknowledge", "err", err)
		}
	}
	m := msgs[len(msgs)-1]
	err := retry.Do(w.ctx, w.d.cfg.Retry, func(ctx context.Context) error {
		actx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		return m.DoubleAck(actx)
	}, func(err error, next time.Duration) {
		w.log.Warn("deliver: acknowledge", "err", err, "retry_in", next)
	})
	return err == nil
}

// handBack naks the messages of chunks, so that they come again first.
func (w *worker) handBack(chunks []chunk) {
	for _, c := range chunks {
		for _, m := range c.msgs {
			_ = m.Nak()
		}
	}
}

// post sends one chunk until a 2xx takes it, backing off between
// attempts; each failure is counted in the status and keeps the batch in
// progress. It returns errHeld (or the worker's end) when the delivery
// must stop.
func (w *worker) post(sp *spec, c chunk, batch []jetstream.Msg) error {
	deliveryID := uuid.NewString()
	attempt := func(ctx context.Context) error {
		if cur := w.spec.Load(); cur.Paused || cur.Generation != w.gen {
			return retry.Permanent(errHeld)
		}
		if cur := w.spec.Load(); cur != sp {
			sp = cur // a new URL, secret or token applies to the next attempt
		}
		return w.send(ctx, sp, deliveryID, c.body)
	}
	notify := func(err error, next time.Duration) {
		w.d.failures.Add(1)
		if w.d.obs != nil {
			w.d.obs.DeliveryFailed()
		}
		w.st.Failures++
		w.st.LastError = describe(err, w.d.cfg.RequestTimeout)
		w.setStatus(destination.DeliveryFailing, true)
		w.log.Warn("deliver: attempt failed", "err", redact.Error(err, sp.Secret, sp.Token), "failures", w.st.Failures, "retry_in", next)
		for _, m := range batch {
			_ = m.InProgress()
		}
	}
	err := retry.Do(w.ctx, w.d.cfg.Retry, attempt, notify)
	if err != nil && w.ctx.Err() == nil && !errors.Is(err, errHeld) {
		return fmt.Errorf("%w: %w", errHeld, err)
	}
	return err
}

// statusError is an answer that is not a 2xx.
type statusError struct{ code int }

func (e statusError) Error() string {
	if e.code >= 300 && e.code < 400 {
		return fmt.Sprintf("status %d (redirects are not followed)", e.code)
	}
	return fmt.Sprintf("status %d", e.code)
}

// send POSTs body once. At most MaxResponseBytes of the answer are read.
func (w *worker) send(ctx context.Context, sp *spec, deliveryID string, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, sp.URL, bytes.NewReader(body))
	if err != nil {
		return retry.Permanent(err)
	}
	req.Header.Set("Content-Type", sp.contentType())
	req.Header.Set("User-Agent", "auditrail-deliver")
	req.Header.Set(HeaderDeliveryID, deliveryID)
	if sp.Secret != "" {
		req.Header.Set(HeaderSignature, Sign([]byte(sp.Secret), time.Now(), body))
	}
	if sp.Type == destination.DestSplunkHEC {
		req.Header.Set("Authorization", "Splunk "+sp.Token)
	}
	resp, err := w.d.client.Do(req)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, w.d.cfg.MaxResponseBytes))
	resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return statusError{resp.StatusCode}
	}
	return nil
}

// describe is the generic last_error of a failed attempt: no URL, body or
// secret.
func describe(err error, timeout time.Duration) string {
	var se statusError
	var re *egress.RefusedError
	var ne net.Error
	switch {
	case errors.As(err, &se):
		return se.Error()
	case errors.As(err, &re):
		return "refused by the egress guard: " + string(re.Class) + " address"
	case errors.Is(err, egress.ErrRefused):
		return "refused by the egress guard"
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return fmt.Sprintf("timeout after %s", timeout)
	}
	var dnsErr *net.DNSError
	var tlsErr *tls.CertificateVerificationError
	var recErr tls.RecordHeaderError
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "connection closed by the endpoint"
	case errors.As(err, &dnsErr):
		return "host name does not resolve"
	case errors.As(err, &tlsErr), errors.As(err, &recErr):
		return "TLS handshake failed"
	}
	// The detail (addresses, the URL) is in the operator log only.
	return "endpoint not reachable"
}

// setStatus records the state and writes the status when forced or due.
func (w *worker) setStatus(state string, force bool) {
	force = force || state != w.st.State || w.writtenAt.IsZero()
	w.st.State = state
	if !force && time.Since(w.writtenAt) < w.d.cfg.StatusEvery {
		return
	}
	w.writtenAt = time.Now()
	w.st.UpdatedAt = w.writtenAt.UTC()
	b, _ := json.Marshal(w.st)
	ctx, cancel := context.WithTimeout(w.ctx, 5*time.Second)
	defer cancel()
	if _, err := w.d.kv.Put(ctx, destination.DeliveryStatusKey(w.id), b); err != nil && w.ctx.Err() == nil {
		w.log.Warn("deliver: write status", "err", err)
	}
}
