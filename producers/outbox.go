package producers

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/auditrail/auditrail/internal/retry"
	"github.com/auditrail/auditrail/schemas"
)

// ErrOutbox is returned when an event can be neither published nor kept in
// the outbox: it is then lost, and the caller must say so.
var ErrOutbox = errors.New("outbox")

// MsgPublisher publishes prepared messages, returning nil only once the
// stream has stored every one (Publisher.PublishMsgs).
type MsgPublisher interface {
	PublishMsgs(ctx context.Context, msgs []*nats.Msg) error
}

// OutboxConfig tunes an Outbox.
type OutboxConfig struct {
	// Dir holds the segments; it is created, and locked for this process.
	Dir string
	// DirectTimeout bounds the direct publish that is tried first while the
	// outbox is empty; when it fails the event is kept in the outbox.
	DirectTimeout time.Duration
	// SegmentRecords is how many events a segment holds before a new one.
	SegmentRecords int
	// Retry is the back-off of the drainer while the stream is unreachable.
	Retry retry.Policy
}

// DefaultOutboxConfig keeps segments of 4096 events in dir, tries a direct
// publish for 2 s, and retries draining from 100 ms up to 5 s apart.
func DefaultOutboxConfig(dir string) OutboxConfig {
	return OutboxConfig{Dir: dir, DirectTimeout: 2 * time.Second, SegmentRecords: 4096, Retry: retry.Default()}
}

// Validate checks the configuration.
func (c OutboxConfig) Validate() error {
	switch {
	case c.Dir == "":
		return fmt.Errorf("%w: outbox directory is required", ErrInvalidOption)
	case c.DirectTimeout <= 0:
		return fmt.Errorf("%w: direct publish timeout must be positive", ErrInvalidOption)
	case c.SegmentRecords < 1:
		return fmt.Errorf("%w: segment records %d < 1", ErrInvalidOption, c.SegmentRecords)
	}
	if err := c.Retry.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidOption, err)
	}
	return nil
}

// Outbox makes publishing an event durable when the stream cannot take it
// at once: the event is appended to a segment file under Dir and fsynced
// before Publish returns, and a drainer (Run) publishes the segments in
// order, with their event ids as Nats-Msg-Id, deleting each segment only
// once the stream has stored every record of it that it accepts. Events
// left by a crash are published when the next process opens the outbox. A
// segment published twice (a crash after publishing, before deleting) is
// stored once: the stream deduplicates by Nats-Msg-Id and the audit store by
// event_id.
//
// A record that the stream refuses permanently (ErrRejected: too large for
// the stream, say) is set aside on its own: logged with its event id, and
// written to <segment>.seg.rejected in the segment's format for the
// operator; every other record of its segment is still published. A
// transient failure is retried until the stream takes the record.
//
// The record format (segment.go) carries a marker and checksums, so that a
// reader skips a torn or corrupt record and resynchronises on the next
// intact one. A failed append is truncated back to the last intact record;
// when that fails too (or the segment's sync failed), later appends go to a
// new segment.
type Outbox struct {
	cfg  OutboxConfig
	pub  MsgPublisher
	log  *slog.Logger
	lock *os.File
	// create makes a new segment file (a seam for tests).
	create func(path string) (segmentFile, error)

	mu      sync.Mutex
	cur     segmentFile // segment being appended to, nil when none
	curSeq  uint64
	curRecs int
	curSize int64 // bytes of intact records in cur
	nextSeq uint64
	// counted is how many events each segment added to pending.
	counted map[uint64]int64

	pending   atomic.Int64 // events in segments not yet published
	kept      atomic.Uint64
	drained   atomic.Uint64
	rejected  atomic.Uint64
	tornBytes atomic.Uint64
	wake      chan struct{}
}

// segmentFile is what the outbox needs of the segment it appends to.
type segmentFile interface {
	io.Writer
	Sync() error
	Truncate(size int64) error
	Close() error
}

// createSegment creates a segment file for appending.
func createSegment(path string) (segmentFile, error) {
	return os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY|os.O_APPEND, 0o600)
}

// OpenOutbox opens (or creates) the outbox in cfg.Dir, locked for this
// process, and counts the events that an earlier process left in it.
func OpenOutbox(cfg OutboxConfig, pub *Publisher, log *slog.Logger) (*Outbox, error) {
	return openOutbox(cfg, pub, log)
}

func openOutbox(cfg OutboxConfig, pub MsgPublisher, log *slog.Logger) (*Outbox, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.Default()
	}
	if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrOutbox, err)
	}
	lock, err := os.OpenFile(filepath.Join(cfg.Dir, "LOCK"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrOutbox, err)
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		lock.Close()
		return nil, fmt.Errorf("%w: %s is used by another process: %w", ErrOutbox, cfg.Dir, err)
	}
	o := &Outbox{cfg: cfg, pub: pub, log: log, lock: lock, create: createSegment,
		counted: map[uint64]int64{}, wake: make(chan struct{}, 1)}
	segs, next, err := o.scan()
	if err != nil {
		o.Close()
		return nil, err
	}
	o.nextSeq = next
	for _, seq := range segs {
		seg, err := o.read(seq)
		if err != nil {
			o.Close()
			return nil, err
		}
		o.counted[seq] = int64(len(seg.msgs))
		o.pending.Add(int64(len(seg.msgs)))
	}
	if n := o.pending.Load(); n > 0 {
		log.Warn("outbox: events left by an earlier process will be published", "events", n, "dir", cfg.Dir)
	}
	return o, nil
}

// Publish publishes ev, or keeps it in the outbox when the stream cannot
// take it within DirectTimeout (or while older events still wait there).
// nil means the event is stored in the stream or on local disk; ErrRejected
// and ErrEncode come back as they are (retrying cannot fix them); an error
// wrapping ErrOutbox means the event is not kept (should its bytes have
// reached the disk all the same, it is published later).
func (o *Outbox) Publish(ctx context.Context, ev Event) error {
	m, err := Message(ev)
	if err != nil {
		return err
	}
	if o.pending.Load() == 0 {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), o.cfg.DirectTimeout)
		err := o.pub.PublishMsgs(dctx, []*nats.Msg{m})
		cancel()
		if err == nil || errors.Is(err, ErrRejected) {
			return err
		}
		o.log.Warn("outbox: event kept on disk until the stream takes it", "event_id", ev.Key(), "err", err)
	}
	return o.keep(m)
}

// keep appends m to the current segment and syncs it. When the append
// fails, nothing of it stays in front of later appends (undoLocked).
func (o *Outbox) keep(m *nats.Msg) error {
	rec := encodeRecord(m)
	if len(rec)-recordHeader > maxRecord {
		return fmt.Errorf("%w: %s: %d bytes is more than a NATS message holds", ErrRejected, m.Subject, len(rec))
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.cur == nil || o.curRecs >= o.cfg.SegmentRecords {
		if err := o.rotateLocked(); err != nil {
			return err
		}
	}
	n, err := o.cur.Write(rec)
	if err == nil && n < len(rec) {
		err = io.ErrShortWrite
	}
	if err != nil {
		o.undoLocked(m, n, false, err)
		return fmt.Errorf("%w: append: %w", ErrOutbox, err)
	}
	if err := o.cur.Sync(); err != nil {
		o.undoLocked(m, n, true, err)
		return fmt.Errorf("%w: sync: %w", ErrOutbox, err)
	}
	o.curRecs++
	o.curSize += int64(len(rec))
	o.counted[o.curSeq]++
	o.pending.Add(1)
	o.kept.Add(1)
	select {
	case o.wake <- struct{}{}:
	default:
	}
	return nil
}

// undoLocked takes back an append that failed after writing n bytes: the
// segment is truncated to its last intact record, so that later appends
// follow that record, not a torn one. When the truncation fails, or the sync
// did (what the segment holds on disk is then unknown), the segment is closed
// and later appends go to a new one; the reader skips whatever torn bytes
// stay behind.
func (o *Outbox) undoLocked(m *nats.Msg, n int, syncFailed bool, cause error) {
	path := o.path(o.curSeq)
	terr := o.cur.Truncate(o.curSize)
	if terr == nil {
		terr = o.cur.Sync()
	}
	if terr == nil && !syncFailed {
		o.log.Warn("outbox: append failed; the segment is truncated to its last intact record",
			"event_id", m.Header.Get(schemas.HeaderMsgID), "segment", path, "written", n, "err", cause)
		return
	}
	o.log.Error("outbox: append failed; later events go to a new segment",
		"event_id", m.Header.Get(schemas.HeaderMsgID), "segment", path, "written", n, "err", cause, "truncate_err", terr)
	if err := o.cur.Close(); err != nil {
		o.log.Warn("outbox: close segment", "segment", path, "err", err)
	}
	o.cur = nil
}

// rotateLocked closes the current segment and starts the next one.
func (o *Outbox) rotateLocked() error {
	if o.cur != nil {
		if err := o.cur.Close(); err != nil {
			return fmt.Errorf("%w: close segment: %w", ErrOutbox, err)
		}
		o.cur = nil
	}
	// A number is never tried twice: a segment that could not be set up
	// must not make every later attempt fail on its name.
	seq := o.nextSeq
	o.nextSeq++
	f, err := o.create(o.path(seq))
	if err != nil {
		return fmt.Errorf("%w: new segment: %w", ErrOutbox, err)
	}
	if err := syncDir(o.cfg.Dir); err != nil {
		f.Close()
		os.Remove(o.path(seq))
		return err
	}
	o.cur, o.curSeq, o.curRecs, o.curSize = f, seq, 0, 0
	return nil
}

// Run drains the outbox until ctx ends: it publishes every closed segment,
// oldest first, and closes the current one to publish it too.
func (o *Outbox) Run(ctx context.Context) error {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		if err := o.drain(ctx); err != nil && ctx.Err() == nil {
			o.log.Error("outbox: draining failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-o.wake:
		case <-tick.C:
		}
	}
}

// drain publishes every segment present when it starts.
func (o *Outbox) drain(ctx context.Context) error {
	if o.pending.Load() == 0 {
		return nil
	}
	// Close the segment being appended to; segments started after this
	// point (seq >= boundary) wait for the next round.
	o.mu.Lock()
	boundary := o.nextSeq
	if o.cur != nil {
		err := o.cur.Close()
		o.cur = nil
		if err != nil {
			o.mu.Unlock()
			return fmt.Errorf("%w: close segment: %w", ErrOutbox, err)
		}
	}
	o.mu.Unlock()
	segs, err := o.segments()
	if err != nil {
		return err
	}
	for _, seq := range segs {
		if seq >= boundary {
			break
		}
		if err := o.publishSegment(ctx, seq); err != nil {
			return err
		}
	}
	return nil
}

// publishSegment publishes every intact record of segment seq, sets aside
// those the stream refuses, and removes the segment.
func (o *Outbox) publishSegment(ctx context.Context, seq uint64) error {
	seg, err := o.read(seq)
	if err != nil {
		return err
	}
	var rejected []*nats.Msg
	if len(seg.msgs) > 0 {
		if rejected, err = o.publishAll(ctx, seq, seg.msgs); err != nil {
			return err
		}
	}
	if len(rejected) > 0 {
		if err := o.setAside(seq, rejected); err != nil {
			return err
		}
	}
	if err := os.Remove(o.path(seq)); err != nil {
		return fmt.Errorf("%w: remove segment: %w", ErrOutbox, err)
	}
	o.mu.Lock()
	counted := o.counted[seq]
	delete(o.counted, seq)
	o.mu.Unlock()
	o.pending.Add(-counted)
	o.drained.Add(uint64(len(seg.msgs) - len(rejected)))
	o.rejected.Add(uint64(len(rejected)))
	o.tornBytes.Add(uint64(seg.skipped))
	return syncDir(o.cfg.Dir)
}

// publishAll publishes msgs in order, retrying transient failures until ctx
// ends, and returns the messages that the stream refuses permanently: a
// batch that holds one is halved until each refused message stands alone
// (the stream deduplicates what a retried half publishes again).
func (o *Outbox) publishAll(ctx context.Context, seq uint64, msgs []*nats.Msg) (rejected []*nats.Msg, err error) {
	err = retry.Do(ctx, o.cfg.Retry, func(ctx context.Context) error {
		pctx, cancel := context.WithTimeout(ctx, o.cfg.DirectTimeout+time.Duration(len(msgs))*time.Millisecond)
		defer cancel()
		err := o.pub.PublishMsgs(pctx, msgs)
		if errors.Is(err, ErrRejected) {
			return retry.Permanent(err)
		}
		return err
	}, func(err error, wait time.Duration) {
		o.log.Warn("outbox: stream unreachable; retrying", "segment", o.path(seq), "events", len(msgs), "wait", wait, "err", err)
	})
	if !errors.Is(err, ErrRejected) {
		return nil, err
	}
	if len(msgs) == 1 {
		o.log.Error("outbox: the stream refuses this event; set aside, the rest of its segment is published",
			"event_id", msgs[0].Header.Get(schemas.HeaderMsgID), "subject", msgs[0].Subject,
			"set_aside_in", o.path(seq)+rejectedSuffix, "err", err)
		return msgs, nil
	}
	half := len(msgs) / 2
	for _, part := range [][]*nats.Msg{msgs[:half], msgs[half:]} {
		r, err := o.publishAll(ctx, seq, part)
		if err != nil {
			return nil, err
		}
		rejected = append(rejected, r...)
	}
	return rejected, nil
}

// setAside writes the refused records of segment seq to its .rejected file,
// in the segment format, replacing what an interrupted earlier attempt left.
func (o *Outbox) setAside(seq uint64, msgs []*nats.Msg) error {
	dst := o.path(seq) + rejectedSuffix
	tmp := dst + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("%w: set aside: %w", ErrOutbox, err)
	}
	w := bufio.NewWriter(f)
	for _, m := range msgs {
		if _, err = w.Write(encodeRecord(m)); err != nil {
			break
		}
	}
	if err == nil {
		err = w.Flush()
	}
	if err == nil {
		err = f.Sync()
	}
	err = errors.Join(err, f.Close())
	if err == nil {
		err = os.Rename(tmp, dst)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("%w: set aside: %w", ErrOutbox, err)
	}
	return syncDir(o.cfg.Dir)
}

// OutboxStats are the outbox's counters.
type OutboxStats struct {
	// Pending events wait in segments.
	Pending int64 `json:"pending"`
	// Kept events were appended to a segment; Drained ones were then
	// published from it.
	Kept    uint64 `json:"kept"`
	Drained uint64 `json:"drained"`
	// Rejected events were refused by the stream and set aside in
	// <segment>.seg.rejected files.
	Rejected uint64 `json:"rejected"`
	// TornBytes were skipped in drained segments: torn or corrupt records.
	TornBytes uint64 `json:"torn_bytes"`
}

// Stats returns the counters.
func (o *Outbox) Stats() OutboxStats {
	return OutboxStats{Pending: o.pending.Load(), Kept: o.kept.Load(), Drained: o.drained.Load(),
		Rejected: o.rejected.Load(), TornBytes: o.tornBytes.Load()}
}

// Close closes the current segment and releases the directory; events not
// yet published stay on disk for the next process.
func (o *Outbox) Close() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	var err error
	if o.cur != nil {
		err = o.cur.Close()
		o.cur = nil
	}
	if o.lock != nil {
		err = errors.Join(err, o.lock.Close())
		o.lock = nil
	}
	return err
}

const (
	segSuffix      = ".seg"
	rejectedSuffix = ".rejected"
)

func (o *Outbox) path(seq uint64) string {
	return filepath.Join(o.cfg.Dir, fmt.Sprintf("%020d%s", seq, segSuffix))
}

// scan lists the sequence numbers of the segments, oldest first, and the
// number after every one in use (set-aside files included, so that a new
// segment never shares its number with one).
func (o *Outbox) scan() (segs []uint64, next uint64, err error) {
	entries, err := os.ReadDir(o.cfg.Dir)
	if err != nil {
		return nil, 0, fmt.Errorf("%w: %w", ErrOutbox, err)
	}
	for _, e := range entries {
		name, _, _ := strings.Cut(e.Name(), ".")
		seq, err := strconv.ParseUint(name, 10, 64)
		if err != nil || len(name) != 20 {
			continue
		}
		next = max(next, seq+1)
		if e.Name() == name+segSuffix {
			segs = append(segs, seq)
		}
	}
	slices.Sort(segs)
	return segs, next, nil
}

// segments lists the sequence numbers of the segments, oldest first.
func (o *Outbox) segments() ([]uint64, error) {
	segs, _, err := o.scan()
	return segs, err
}

// read decodes a segment: every intact record, past torn or corrupt ones.
func (o *Outbox) read(seq uint64) (segmentContents, error) {
	b, err := os.ReadFile(o.path(seq))
	if err != nil {
		return segmentContents{}, fmt.Errorf("%w: %w", ErrOutbox, err)
	}
	seg := decodeSegment(b)
	if seg.skipped > 0 {
		o.log.Warn("outbox: segment holds torn or corrupt bytes (a failed append, a crash while appending, a bad disk); they are skipped, every intact record is kept",
			"segment", o.path(seq), "events", len(seg.msgs), "skipped_bytes", seg.skipped, "why", seg.why)
	}
	if seg.legacy {
		o.log.Info("outbox: segment in the previous record format", "segment", o.path(seq), "events", len(seg.msgs))
	}
	return seg, nil
}

// syncDir makes a file's creation, rename or removal in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrOutbox, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("%w: sync %s: %w", ErrOutbox, dir, err)
	}
	return nil
}
