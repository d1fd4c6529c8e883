package ingest

import (
	"context"
	"errors"
	"time"

	"github.com/auditrail/auditrail/internal/auditstore"
)

// Streamed inserts. While a backlog waits in the stream (draining after an
// outage or a burst, or a steady rate above what one insert a batch
// keeps up with), a store that takes inserts in blocks (ClickHouse) gets
// several batches as the blocks of one insert, up to InsertRows events:
// each part the store makes costs it a fixed amount of work (on a
// replicated cluster, a ZooKeeper round and a fetch by every replica), so
// fewer larger inserts drain faster. Once a batch is sent, ingest drops
// its events and messages and keeps their reply subjects (to acknowledge
// them when the insert commits), so the insert's size does not grow the
// memory of ingest by more than about a hundred bytes an event. When no
// backlog waits, every batch is an insert of its own, committed at once:
// the latency is the batch's.
//
// Nothing is acknowledged before its insert commits. An insert that fails
// (the store down, a row refused) cannot be written again, since its
// events were dropped: its messages are negatively acknowledged, and
// JetStream delivers them again at once. A batch holding a message
// delivered before is written on its own, whole, as without streamed
// inserts (retried through an outage, split to find a refused row).

// openInsert is a streamed insert and the batches it holds.
type openInsert[T any] struct {
	ins     auditstore.Insert[T]
	cancel  context.CancelFunc
	ctx     context.Context
	batches []*batch[T]
	events  int           // messages of its batches
	busy    time.Duration // time spent writing its blocks
}

// streamedRows is the most events of a streamed insert (0: none).
func (in *Ingester[T]) streamedRows() int {
	if !in.streams() {
		return 0
	}
	return in.cfg.InsertRows
}

// streamBatches is a committer with streamed inserts: it writes the
// batches it receives into its open insert, and commits the insert when
// no backlog waits behind its last batch, when it holds InsertRows events,
// or when no batch came for FlushInterval. The first insert of a backlog
// holds (w+1)/Writers of InsertRows for writer w, so that the writers'
// inserts commit in turn, not all at once while nobody sends.
func (in *Ingester[T]) streamBatches(ctx context.Context, batches <-chan *batch[T], w int) {
	var open *openInsert[T]
	first := max(1, in.cfg.InsertRows*(w+1)/in.cfg.Writers)
	limit := first
	idle := time.NewTimer(time.Hour)
	idle.Stop()
	defer idle.Stop()
	for {
		var due <-chan time.Time
		if open != nil {
			due = idle.C
		}
		select {
		case b, ok := <-batches:
			if !ok {
				if open != nil {
					in.finish(ctx, open)
				}
				return
			}
			var full bool
			if open, full = in.stream(ctx, open, b, limit); full {
				limit = in.cfg.InsertRows // the backlog goes on: the writers are staggered
			} else if open == nil {
				limit = first
			}
			if open != nil {
				idle.Reset(in.cfg.FlushInterval)
			}
		case <-due:
			in.finish(ctx, open)
			open, limit = nil, first
		}
	}
}

// stream writes b into open (a new insert when nil) and returns the insert
// still open after it (nil: committed, or b was written on its own); the
// insert commits once it holds limit events (full).
func (in *Ingester[T]) stream(ctx context.Context, open *openInsert[T], b *batch[T], limit int) (_ *openInsert[T], full bool) {
	if b.redelivered || len(b.good) == 0 || in.noInserts.Load() {
		in.commitAndAck(ctx, b)
		return open, false
	}
	for range 2 {
		if open == nil {
			var err error
			if open, err = in.beginInsert(ctx); err != nil {
				if errors.Is(err, auditstore.ErrNoInserts) {
					in.noInserts.Store(true) // the store behind a wrapper has none (SQLite)
				} else {
					in.log.Warn("a streamed insert cannot start; the batch is written on its own", "err", err)
				}
				in.commitAndAck(ctx, b)
				return nil, false
			}
		}
		t0 := time.Now()
		err := open.ins.Write(open.ctx, b.good)
		open.busy += time.Since(t0)
		switch {
		case err == nil:
			b.sent()
			open.batches = append(open.batches, b)
			open.events += b.n
			if full = open.events >= limit; full || !backlogBehind(b, in.cfg.BatchSize) {
				in.finish(ctx, open)
				return nil, full
			}
			return open, false
		case errors.Is(err, auditstore.ErrInsertFull) && open.ins.Rows() > 0:
			in.finish(ctx, open) // and b goes into a new insert
			open = nil
		default:
			// b is still whole: written on its own (retried, split). What
			// the insert held is delivered again.
			in.abandon(open, err)
			in.commitAndAck(ctx, b)
			return nil, false
		}
	}
	in.commitAndAck(ctx, b) // unreachable: a new insert is never full
	return nil, false
}

// beginInsert starts a streamed insert whose context outlives ctx by
// DrainTimeout (what is in hand at shutdown is still committed).
func (in *Ingester[T]) beginInsert(ctx context.Context) (*openInsert[T], error) {
	ictx, cancel := in.detach(ctx)
	ins, err := in.begin(ictx)
	if err != nil {
		cancel()
		return nil, err
	}
	return &openInsert[T]{ins: ins, ctx: ictx, cancel: cancel}, nil
}

// backlogBehind reports whether at least a batch of messages waited for
// the consumer when b's last message was delivered (the pending count of
// its reply subject).
func backlogBehind[T any](b *batch[T], batchSize int) bool {
	if len(b.replies) == 0 {
		return false
	}
	n, ok := replyNumber(b.replies[len(b.replies)-1], 4)
	return ok && n >= uint64(batchSize)
}

// sent drops the events and messages of a batch written into a streamed
// insert: it keeps its reply subjects, its dead letters and its commit
// marks.
func (b *batch[T]) sent() {
	b.marks = b.commitMarks()
	b.good, b.goodMsgs = nil, nil
	b.started, b.pending, b.streamed = true, nil, true
}

// finish commits an insert, then publishes each batch's dead letters and
// commit marks and acknowledges its messages; or, when the commit fails,
// has its messages delivered again.
func (in *Ingester[T]) finish(ctx context.Context, open *openInsert[T]) {
	defer open.cancel()
	t0 := time.Now()
	if err := open.ins.Commit(open.ctx); err != nil {
		in.abandon(open, err)
		return
	}
	if in.obs != nil {
		in.obs.ObserveCommit(open.busy+time.Since(t0), open.ins.Rows())
	}
	for _, b := range open.batches {
		in.commitAndAck(ctx, b)
	}
}

// abandon drops a failed insert: its messages are negatively
// acknowledged, so that JetStream delivers them again at once (to be
// written batch by batch, whole).
func (in *Ingester[T]) abandon(open *openInsert[T], err error) {
	open.ins.Abort()
	open.cancel()
	if len(open.batches) == 0 {
		return
	}
	in.retries.Add(1)
	in.log.Warn("a streamed insert failed; its events are delivered again and written batch by batch",
		"events", open.events, "batches", len(open.batches), "err", err)
	for _, b := range open.batches {
		b.stopKeepAlive()
		for _, r := range b.replies {
			_ = in.nc.Publish(r, ackNak)
		}
	}
}
