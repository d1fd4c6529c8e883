package producers

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
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
// once the stream has stored all of it. Events left by a crash are
// published when the next process opens the outbox. A segment published
// twice (a crash after publishing, before deleting) is stored once: the
// stream deduplicates by Nats-Msg-Id and the audit store by event_id.
//
// On disk, a segment is a sequence of records: a 4-byte big-endian length n,
// a 4-byte CRC-32C of the n bytes that follow, and n bytes holding the
// subject, the event id, the schema and the payload, each prefixed by its
// uvarint length. A torn last record (a crash while appending; its Publish
// never returned) is dropped when the segment is read.
type Outbox struct {
	cfg  OutboxConfig
	pub  *Publisher
	log  *slog.Logger
	lock *os.File

	mu      sync.Mutex
	cur     *os.File // segment being appended to, nil when none
	curSeq  uint64
	curRecs int
	nextSeq uint64

	pending atomic.Int64 // events in segments not yet published
	kept    atomic.Uint64
	drained atomic.Uint64
	wake    chan struct{}
}

// OpenOutbox opens (or creates) the outbox in cfg.Dir, locked for this
// process, and counts the events that an earlier process left in it.
func OpenOutbox(cfg OutboxConfig, pub *Publisher, log *slog.Logger) (*Outbox, error) {
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
	o := &Outbox{cfg: cfg, pub: pub, log: log, lock: lock, wake: make(chan struct{}, 1)}
	segs, err := o.segments()
	if err != nil {
		o.Close()
		return nil, err
	}
	for _, seq := range segs {
		msgs, err := o.read(seq)
		if err != nil {
			o.Close()
			return nil, err
		}
		o.pending.Add(int64(len(msgs)))
		o.nextSeq = seq + 1
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
// wrapping ErrOutbox means the event is lost.
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

// keep appends m to the current segment and syncs it.
func (o *Outbox) keep(m *nats.Msg) error {
	rec := encodeRecord(m)
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.cur == nil || o.curRecs >= o.cfg.SegmentRecords {
		if err := o.rotateLocked(); err != nil {
			return err
		}
	}
	if _, err := o.cur.Write(rec); err != nil {
		return fmt.Errorf("%w: append: %w", ErrOutbox, err)
	}
	if err := o.cur.Sync(); err != nil {
		return fmt.Errorf("%w: sync: %w", ErrOutbox, err)
	}
	o.curRecs++
	o.pending.Add(1)
	o.kept.Add(1)
	select {
	case o.wake <- struct{}{}:
	default:
	}
	return nil
}

// rotateLocked closes the current segment and starts the next one.
func (o *Outbox) rotateLocked() error {
	if o.cur != nil {
		if err := o.cur.Close(); err != nil {
			return fmt.Errorf("%w: close segment: %w", ErrOutbox, err)
		}
		o.cur = nil
	}
	seq := o.nextSeq
	f, err := os.OpenFile(o.path(seq), os.O_CREATE|os.O_EXCL|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("%w: new segment: %w", ErrOutbox, err)
	}
	if err := syncDir(o.cfg.Dir); err != nil {
		f.Close()
		return err
	}
	o.cur, o.curSeq, o.curRecs, o.nextSeq = f, seq, 0, seq+1
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

func (o *Outbox) publishSegment(ctx context.Context, seq uint64) error {
	msgs, err := o.read(seq)
	if err != nil {
		return err
	}
	if len(msgs) > 0 {
		err = retry.Do(ctx, o.cfg.Retry, func(ctx context.Context) error {
			pctx, cancel := context.WithTimeout(ctx, o.cfg.DirectTimeout+time.Duration(len(msgs))*time.Millisecond)
			defer cancel()
			err := o.pub.PublishMsgs(pctx, msgs)
			if errors.Is(err, ErrRejected) {
				return retry.Permanent(err)
			}
			return err
		}, func(err error, wait time.Duration) {
			o.log.Warn("outbox: stream unreachable; retrying", "segment", seq, "events", len(msgs), "wait", wait, "err", err)
		})
		if errors.Is(err, ErrRejected) {
			// Kept aside for the operator rather than blocking the rest.
			dst := o.path(seq) + ".rejected"
			o.log.Error("outbox: the stream refuses an event of this segment; set aside", "segment", dst, "err", err)
			if rerr := os.Rename(o.path(seq), dst); rerr != nil {
				return fmt.Errorf("%w: set aside: %w", ErrOutbox, rerr)
			}
			o.pending.Add(-int64(len(msgs)))
			return syncDir(o.cfg.Dir)
		}
		if err != nil {
			return err
		}
	}
	if err := os.Remove(o.path(seq)); err != nil {
		return fmt.Errorf("%w: remove segment: %w", ErrOutbox, err)
	}
	o.pending.Add(-int64(len(msgs)))
	o.drained.Add(uint64(len(msgs)))
	return syncDir(o.cfg.Dir)
}

// OutboxStats are the outbox's counters.
type OutboxStats struct {
	Pending int64  `json:"pending"`
	Kept    uint64 `json:"kept"`
	Drained uint64 `json:"drained"`
}

// Stats returns the counters.
func (o *Outbox) Stats() OutboxStats {
	return OutboxStats{Pending: o.pending.Load(), Kept: o.kept.Load(), Drained: o.drained.Load()}
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

const segSuffix = ".seg"

func (o *Outbox) path(seq uint64) string {
	return filepath.Join(o.cfg.Dir, fmt.Sprintf("%020d%s", seq, segSuffix))
}

// segments lists the sequence numbers of the segments, oldest first.
func (o *Outbox) segments() ([]uint64, error) {
	entries, err := os.ReadDir(o.cfg.Dir)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrOutbox, err)
	}
	var seqs []uint64
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), segSuffix)
		if !ok {
			continue
		}
		seq, err := strconv.ParseUint(name, 10, 64)
		if err != nil {
			continue
		}
		seqs = append(seqs, seq)
	}
	slices.Sort(seqs)
	return seqs, nil
}

// read decodes a segment; a torn or corrupt tail ends it.
func (o *Outbox) read(seq uint64) ([]*nats.Msg, error) {
	f, err := os.Open(o.path(seq))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrOutbox, err)
	}
	defer f.Close()
	msgs, torn := decodeRecords(bufio.NewReader(f))
	if torn != nil {
		o.log.Warn("outbox: segment ends in a torn record (a crash while appending); the rest is kept", "segment", o.path(seq), "events", len(msgs), "why", torn)
	}
	return msgs, nil
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// encodeRecord frames m as one outbox record.
func encodeRecord(m *nats.Msg) []byte {
	var body []byte
	for _, f := range [][]byte{[]byte(m.Subject), []byte(m.Header.Get(schemas.HeaderMsgID)), []byte(m.Header.Get(schemas.HeaderSchema)), m.Data} {
		body = binary.AppendUvarint(body, uint64(len(f)))
		body = append(body, f...)
	}
	rec := make([]byte, 8, 8+len(body))
	binary.BigEndian.PutUint32(rec[0:4], uint32(len(body)))
	binary.BigEndian.PutUint32(rec[4:8], crc32.Checksum(body, castagnoli))
	return append(rec, body...)
}

// maxRecord bounds one record (a NATS message is at most a few MiB).
const maxRecord = 64 << 20

// decodeRecords reads records until the end; torn says why it stopped early.
func decodeRecords(r io.Reader) (msgs []*nats.Msg, torn error) {
	var hdr [8]byte
	for {
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			if err == io.EOF {
				return msgs, nil
			}
			return msgs, fmt.Errorf("record header: %w", err)
		}
		n := binary.BigEndian.Uint32(hdr[0:4])
		if n > maxRecord {
			return msgs, fmt.Errorf("record of %d bytes", n)
		}
		body := make([]byte, n)
		if _, err := io.ReadFull(r, body); err != nil {
			return msgs, fmt.Errorf("record body: %w", err)
		}
		if crc32.Checksum(body, castagnoli) != binary.BigEndian.Uint32(hdr[4:8]) {
			return msgs, errors.New("record checksum mismatch")
		}
		var fields [4][]byte
		rest := body
		for i := range fields {
			l, k := binary.Uvarint(rest)
			if k <= 0 || l > uint64(len(rest)-k) {
				return msgs, errors.New("record field out of bounds")
			}
			fields[i], rest = rest[k:k+int(l)], rest[k+int(l):]
		}
		m := nats.NewMsg(string(fields[0]))
		m.Header.Set(schemas.HeaderMsgID, string(fields[1]))
		m.Header.Set(schemas.HeaderContentType, schemas.ContentMsgpack)
		m.Header.Set(schemas.HeaderSchema, string(fields[2]))
		m.Data = fields[3]
		msgs = append(msgs, m)
	}
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
