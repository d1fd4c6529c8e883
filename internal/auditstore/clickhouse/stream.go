package clickhouse

import (
	"context"
	"fmt"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/google/uuid"

	"github.com/auditrail/auditrail/internal/auditstore"
	"github.com/auditrail/auditrail/schemas"
)

// A streamed insert is one INSERT whose rows travel in several blocks, one
// per ingest batch, as they arrive. The server squashes the blocks of an
// INSERT into one (min_insert_block_size_rows, a million rows by default)
// before its table and views see them, so the insert makes one part of
// each table, as one large batch would, while ingest holds no more than
// the batch it is sending. On a cluster every shard's insert is squashed
// so (the Distributed table forwards the blocks of one INSERT in one
// INSERT per shard). A part costs the server a fixed amount of work (its
// files, its merges, on a cluster its replication through ZooKeeper), so
// fewer larger parts cost less CPU per event.

// BeginAudit implements ingest's streamed write: an insert of audit
// events that commits when Commit is called. ctx bounds the insert's
// whole life (its connection is held until Commit or Abort).
func (s *Store) BeginAudit(ctx context.Context) (auditstore.Insert[schemas.AuditEvent], error) {
	return &streamInsert[schemas.AuditEvent]{s: s, ctx: ctx, sql: insertAuditSQL, kind: kindAudit,
		index: func(e *schemas.AuditEvent) (indexed, uuid.UUID, uuid.UUID) {
			return indexed{org: e.OrganizationID.String(), id: e.EventID.String(), ts: e.Timestamp.UnixMilli()}, e.OrganizationID, e.EventID
		},
		append: s.appendAuditRows, seen: map[[32]byte]struct{}{}, months: map[int]bool{}}, nil
}

// BeginExecutions is BeginAudit for tool executions.
func (s *Store) BeginExecutions(ctx context.Context) (auditstore.Insert[schemas.ExecutionEvent], error) {
	return &streamInsert[schemas.ExecutionEvent]{s: s, ctx: ctx, sql: insertExecutionSQL, kind: kindExecution,
		index: func(e *schemas.ExecutionEvent) (indexed, uuid.UUID, uuid.UUID) {
			r := indexed{org: e.OrganizationID, id: e.EventID, ts: e.StartedAt.UnixMilli()}
			return r, parseOrZero(e.OrganizationID), parseOrZero(e.EventID)
		},
		append: s.appendExecutionRows, seen: map[[32]byte]struct{}{}, months: map[int]bool{}}, nil
}

// parseOrZero is the UUID s names, or the zero UUID (the decoder has
// checked it; the zero value only weakens the in-insert copy check, which
// storedIDs and the table's sort key back).
func parseOrZero(s string) uuid.UUID {
	u, _ := uuid.Parse(s)
	return u
}

type streamInsert[T any] struct {
	s      *Store
	ctx    context.Context
	sql    string
	kind   uint8
	index  func(*T) (indexed, uuid.UUID, uuid.UUID)
	append func(driver.Batch, []T) error

	batch  driver.Batch // nil until the first rows
	seen   map[[32]byte]struct{}
	months map[int]bool // the partitions written (UTC months)
	rows   int
	failed error
}

func (in *streamInsert[T]) Rows() int { return in.rows }

// Write implements auditstore.Insert: the block's events not yet stored
// (storedIDs), nor written earlier in this insert, are sent as one block.
func (in *streamInsert[T]) Write(ctx context.Context, events []T) error {
	if in.failed != nil {
		return fmt.Errorf("clickhouse insert: an earlier block failed: %w", in.failed)
	}
	if len(events) == 0 {
		return nil
	}
	rows := make([]indexed, len(events))
	keys := make([][32]byte, len(events))
	for i := range events {
		var org, id uuid.UUID
		rows[i], org, id = in.index(&events[i])
		copy(keys[i][:16], org[:])
		copy(keys[i][16:], id[:])
	}
	stored, err := in.s.storedIDs(ctx, in.kind, rows)
	if err != nil {
		return in.fail(err)
	}
	fresh := make([]T, 0, len(events))
	added := map[[32]byte]struct{}{}
	months := map[int]bool{}
	for i := range events {
		if stored[rows[i].key()] {
			continue
		}
		if _, ok := in.seen[keys[i]]; ok {
			continue
		}
		if _, ok := added[keys[i]]; ok {
			continue
		}
		added[keys[i]] = struct{}{}
		fresh = append(fresh, events[i])
		if t := time.UnixMilli(rows[i].ts).UTC(); !in.months[t.Year()*100+int(t.Month())] {
			months[t.Year()*100+int(t.Month())] = true
		}
	}
	if len(fresh) == 0 {
		return nil
	}
	// One insert may touch at most maxPartitionsPerInsert-1 months (a month
	// in UTC may straddle two of the server's time zone): the blocks are
	// squashed into one.
	if len(in.months)+len(months) > maxPartitionsPerInsert-1 {
		return fmt.Errorf("%w: %d months in one insert", auditstore.ErrInsertFull, len(in.months)+len(months))
	}
	if in.batch == nil {
		if in.batch, err = in.s.conn.PrepareBatch(in.ctx, in.sql); err != nil {
			return in.fail(fmt.Errorf("clickhouse prepare batch: %w", err))
		}
	}
	if err := in.append(in.batch, fresh); err != nil {
		return in.fail(err)
	}
	if err := in.batch.Flush(); err != nil {
		return in.fail(fmt.Errorf("clickhouse send a block of %d rows: %w", len(fresh), classify(err)))
	}
	for k := range added {
		in.seen[k] = struct{}{}
	}
	for m := range months {
		in.months[m] = true
	}
	in.rows += len(fresh)
	return nil
}

func (in *streamInsert[T]) fail(err error) error {
	in.failed = err
	return err
}

// Commit implements auditstore.Insert: the INSERT ends, and the server
// writes its squashed block.
func (in *streamInsert[T]) Commit(context.Context) error {
	if in.failed != nil {
		return fmt.Errorf("clickhouse insert: an earlier block failed: %w", in.failed)
	}
	if in.batch == nil {
		return nil
	}
	if err := in.batch.Send(); err != nil {
		return in.fail(fmt.Errorf("clickhouse insert %d rows: %w", in.rows, classify(err)))
	}
	return nil
}

// Abort implements auditstore.Insert.
func (in *streamInsert[T]) Abort() {
	if in.batch != nil {
		_ = in.batch.Abort()
	}
}
