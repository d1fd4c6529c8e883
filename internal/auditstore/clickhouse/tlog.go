package clickhouse

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"text/template"
	"time"

	ch "github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/ext"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/google/uuid"

	"github.com/auditrail/auditrail/internal/auditstore"
)

var (
	//go:embed queries/log_head.sql
	logHeadSQL string
	//go:embed queries/log_heads_many.sql
	logHeadsManySQL string
	//go:embed queries/log_leaves.sql
	logLeavesSQL string
	//go:embed queries/log_hashes.sql
	logHashesTemplate string
	logHashesSQL      = template.Must(template.New("log_hashes.sql").Parse(logHashesTemplate))
	//go:embed queries/log_leaf_indexes.sql
	logLeafIndexesSQL string
	//go:embed queries/log_leaf_tile.sql
	logLeafTileSQL string
	//go:embed queries/insert_log_leaves.sql
	insertLogLeavesSQL string
	//go:embed queries/insert_log_leaf_ids.sql
	insertLogLeafIDsSQL string
	//go:embed queries/insert_log_head.sql
	insertLogHeadSQL string
	//go:embed queries/insert_log_checkpoint.sql
	insertLogCheckpointSQL string
	//go:embed queries/log_checkpoint_at.sql
	logCheckpointAtSQL string
	//go:embed queries/log_checkpoint_latest.sql
	logCheckpointLatestSQL string
	//go:embed queries/log_orgs.sql
	logOrgsSQL string
	//go:embed queries/log_heads.sql
	logHeadsSQL string
)

var _ auditstore.LogStore = (*Store)(nil)

// hashesPerQuery bounds the integer literals of one ReadLogHashes query
// (about 20 KB of text, far below max_query_size): a proof asks for about
// log2(n) to 2·log2(n) (inclusion, consistency), under a hundred.
const hashesPerQuery = 1000

// withdrawn is the idx of a log_leaf_ids row that withdraws a mapping.
const withdrawn = -1

// AppendLog implements auditstore.LogStore. ClickHouse has no
// transactions: the head is read, the part already stored compared with
// the batch, and the rest written in three inserts, hashes, leaves (their
// view indexes them by event id) and last the new head; each insert is
// durable when it returns (on a cluster: insert_distributed_sync, one
// shard per organization). A crash before the head leaves rows above the
// size, which no reader trusts (LeafIndexes stops at the size; proofs ask
// for hashes below a checkpoint's size) and which the retry writes again
// with a newer ver. The check and the writes are not atomic: this is
// correct because a log has one writer (the sequencer holding the
// organization's lease), not for two concurrent ones.
func (s *Store) AppendLog(ctx context.Context, org uuid.UUID, kind auditstore.LogKind, leaves []auditstore.LogLeaf, hashes []auditstore.StoredHash) error {
	if err := auditstore.ValidateLog(org, kind); err != nil {
		return err
	}
	if len(leaves) == 0 && len(hashes) == 0 {
		return nil
	}
	s.forgetWrite(logKey{org, kind})
	size, _, err := s.LogHead(ctx, org, kind)
	if err != nil {
		return err
	}
	plan, err := auditstore.PlanAppend(size, leaves, hashes)
	if err != nil {
		return err
	}
	if len(plan.Old) > 0 {
		stored, _, err := s.readLeaves(ctx, org, kind, plan.Old[0].Index, size)
		if err != nil {
			return err
		}
		idx := make([]int64, len(plan.OldHashes))
		for i, h := range plan.OldHashes {
			idx[i] = h.Index
		}
		hs, err := s.ReadLogHashes(ctx, org, kind, idx)
		if err != nil {
			return fmt.Errorf("%w: %w", auditstore.ErrLogConflict, err)
		}
		if err := plan.CheckStored(stored, hs); err != nil {
			return err
		}
	}
	if len(plan.New) == 0 {
		return nil
	}
	w, err := s.planWrite(ctx, org, kind, size, plan)
	if err != nil {
		return err
	}
	return s.writeLog(ctx, org, kind, plan, w, true)
}

// logWrite is what an append writes besides the plan's rows: their
// version, and the withdrawals of leaves left above the size by an
// append that crashed and that this one replaces with other events.
type logWrite struct {
	ver      uint64
	withdraw []uuid.UUID
}

// planWrite refuses an event the log holds below its size, and chooses
// the version of the append above every row left above the size (so
// that it wins whatever the clocks of the writers), withdrawing the
// event ids of the leftover leaves it replaces with other events.
func (s *Store) planWrite(ctx context.Context, org uuid.UUID, kind auditstore.LogKind, size int64, plan auditstore.AppendPlan) (logWrite, error) {
	ids := make([]uuid.UUID, len(plan.New))
	for i, l := range plan.New {
		ids[i] = l.EventID
	}
	held, err := s.leafIDs(ctx, org, kind, ids)
	if err != nil {
		return logWrite{}, err
	}
	for id, i := range held {
		if i >= 0 && i < size {
			return logWrite{}, fmt.Errorf("%w: event %s is leaf %d already", auditstore.ErrLogConflict, id, i)
		}
	}
	left, maxVer, err := s.readLeaves(ctx, org, kind, size, 1<<62)
	if err != nil {
		return logWrite{}, err
	}
	tileVer, err := s.tilesAbove(ctx, []logAt{{logKey{org, kind}, size}})
	if err != nil {
		return logWrite{}, err
	}
	w := logWrite{ver: max(uint64(s.now().UnixNano()), maxVer+2, tileVer+2)}
	if len(left) == 0 {
		return w, nil
	}
	first := plan.New[0].Index
	var replaced []uuid.UUID
	for _, l := range left {
		if i := l.Index - first; i >= int64(len(plan.New)) || plan.New[i].EventID != l.EventID {
			replaced = append(replaced, l.EventID)
		}
	}
	now, err := s.leafIDs(ctx, org, kind, replaced)
	if err != nil {
		return logWrite{}, err
	}
	at := make(map[uuid.UUID]int64, len(left))
	for _, l := range left {
		at[l.EventID] = l.Index
	}
	for _, id := range replaced {
		// Only a mapping that still points at the replaced leaf: the event
		// may have been appended again elsewhere since.
		if i, ok := now[id]; ok && i == at[id] {
			w.withdraw = append(w.withdraw, id)
		}
	}
	return w, nil
}

// writeLog writes the plan's new hashes and leaves (and the withdrawals
// before them), then, when head is set, the new head.
func (s *Store) writeLog(ctx context.Context, org uuid.UUID, kind auditstore.LogKind, plan auditstore.AppendPlan, w logWrite, head bool) error {
	o, k := org.String(), uint8(kind)
	if len(w.withdraw) > 0 {
		if err := s.insertRows(ctx, insertLogLeafIDsSQL, len(w.withdraw), func(i int) []any {
			return []any{o, k, w.withdraw[i].String(), int64(withdrawn), w.ver - 1}
		}); err != nil {
			return err
		}
	}
	// The hashes as tile segments, the leaves column by column: an append
	// writes thousands of rows, and a row of values costs the driver a
	// reflection per value.
	segs, err := segmentsOf(plan.NewHashes)
	if err != nil {
		return err
	}
	var tiles tileColumns
	tiles.add(o, k, segs)
	if err := tiles.insert(ctx, s, w.ver); err != nil {
		return err
	}
	n := len(plan.New)
	idx, ids, seqs, created := make([]int64, n), make([]string, n), make([]uint64, n), make([]int64, n)
	for i, l := range plan.New {
		idx[i], ids[i], seqs[i], created[i] = l.Index, l.EventID.String(), l.Key.Seq, l.Key.CreatedMS
	}
	if err := s.insertColumns(ctx, insertLogLeavesSQL, n, repeat(o, n), repeat(k, n), idx, ids, seqs, created, repeat(w.ver, n)); err != nil {
		return err
	}
	if !head {
		return nil
	}
	last := plan.New[len(plan.New)-1]
	return s.insertRows(ctx, insertLogHeadSQL, 1, func(int) []any {
		return []any{o, k, uint64(last.Index + 1), last.EventID.String(), last.Key.Seq, last.Key.CreatedMS}
	})
}

// insertRows writes n rows in one batch insert.
func (s *Store) insertRows(ctx context.Context, query string, n int, row func(i int) []any) error {
	return s.insertBatch(ctx, query, n, func(b driver.Batch) error {
		for i := 0; i < n; i++ {
			if err := b.Append(row(i)...); err != nil {
				return fmt.Errorf("clickhouse append log row: %w", err)
			}
		}
		return nil
	})
}

// insertColumns writes n rows given column by column (a slice of n values
// per column of the query, in its order) in one batch insert: a row of
// values costs the driver a reflection per value, a column one.
func (s *Store) insertColumns(ctx context.Context, query string, n int, cols ...any) error {
	return s.insertBatch(ctx, query, n, func(b driver.Batch) error {
		for i, c := range cols {
			if err := b.Column(i).Append(c); err != nil {
				return fmt.Errorf("clickhouse append log column %d: %w", i, err)
			}
		}
		return nil
	})
}

// insertBatch writes n rows, filled in by fill, in one batch insert.
func (s *Store) insertBatch(ctx context.Context, query string, n int, fill func(driver.Batch) error) error {
	if n == 0 {
		return nil
	}
	batch, err := s.conn.PrepareBatch(ctx, query)
	if err != nil {
		return fmt.Errorf("clickhouse prepare log batch: %w", err)
	}
	defer batch.Abort()
	if err := fill(batch); err != nil {
		return err
	}
	if err := batch.Send(); err != nil {
		return fmt.Errorf("clickhouse insert %d log rows: %w", n, busyOnly(err))
	}
	return nil
}

// repeat is n copies of v: a column of one value.
func repeat[T any](v T, n int) []T {
	out := make([]T, n)
	for i := range out {
		out[i] = v
	}
	return out
}

// LogHead implements auditstore.LogStore: a point of log_heads.
func (s *Store) LogHead(ctx context.Context, org uuid.UUID, kind auditstore.LogKind) (int64, auditstore.LogLeaf, error) {
	if err := auditstore.ValidateLog(org, kind); err != nil {
		return 0, auditstore.LogLeaf{}, err
	}
	rows, err := s.conn.Query(ctx, logHeadSQL, org.String(), uint8(kind))
	if err != nil {
		return 0, auditstore.LogLeaf{}, fmt.Errorf("clickhouse log head: %w", err)
	}
	defer rows.Close()
	if !rows.Next() {
		return 0, auditstore.LogLeaf{}, rows.Err()
	}
	var (
		size, seq uint64
		created   int64
		id        string
	)
	if err := rows.Scan(&size, &id, &seq, &created); err != nil {
		return 0, auditstore.LogLeaf{}, fmt.Errorf("clickhouse log head: %w", err)
	}
	eid, err := uuid.Parse(id)
	if err != nil {
		return 0, auditstore.LogLeaf{}, fmt.Errorf("clickhouse log head: %w", err)
	}
	n := int64(size)
	return n, auditstore.LogLeaf{Index: n - 1, EventID: eid, Key: auditstore.FeedKey{Seq: seq, CreatedMS: created, EventID: eid}}, rows.Err()
}

var _ auditstore.LogHeadsReader = (*Store)(nil)

// LogHeadsOf implements auditstore.LogHeadsReader: the heads of the logs
// of kind of orgs in one read (log_heads_many.sql).
func (s *Store) LogHeadsOf(ctx context.Context, kind auditstore.LogKind, orgs []uuid.UUID) (map[uuid.UUID]auditstore.LogLeaf, error) {
	out := make(map[uuid.UUID]auditstore.LogLeaf, len(orgs))
	if len(orgs) == 0 {
		return out, nil
	}
	tbl, err := ext.NewTable("orgs", ext.Column("organization_id", "String"))
	if err != nil {
		return nil, fmt.Errorf("clickhouse log heads: %w", err)
	}
	for _, org := range orgs {
		if err := auditstore.ValidateLog(org, kind); err != nil {
			return nil, err
		}
		if err := tbl.Append(org.String()); err != nil {
			return nil, fmt.Errorf("clickhouse log heads: %w", err)
		}
	}
	rows, err := s.conn.Query(ch.Context(ctx, ch.WithExternalTable(tbl)), logHeadsManySQL, uint8(kind))
	if err != nil {
		return nil, fmt.Errorf("clickhouse log heads: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			org, id   string
			size, seq uint64
			created   int64
		)
		if err := rows.Scan(&org, &size, &id, &seq, &created); err != nil {
			return nil, fmt.Errorf("clickhouse log heads: %w", err)
		}
		o, err := uuid.Parse(org)
		if err != nil {
			return nil, fmt.Errorf("clickhouse log heads: %w", err)
		}
		eid, err := uuid.Parse(id)
		if err != nil {
			return nil, fmt.Errorf("clickhouse log heads: %w", err)
		}
		if size == 0 {
			continue
		}
		n := int64(size)
		out[o] = auditstore.LogLeaf{Index: n - 1, EventID: eid, Key: auditstore.FeedKey{Seq: seq, CreatedMS: created, EventID: eid}}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("clickhouse log heads: %w", err)
	}
	return out, nil
}

// readLeaves returns the leaves lo <= idx < hi, in order, and the newest
// version among them.
func (s *Store) readLeaves(ctx context.Context, org uuid.UUID, kind auditstore.LogKind, lo, hi int64) ([]auditstore.LogLeaf, uint64, error) {
	rows, err := s.conn.Query(ctx, logLeavesSQL, org.String(), uint8(kind), lo, hi)
	if err != nil {
		return nil, 0, fmt.Errorf("clickhouse log leaves: %w", err)
	}
	defer rows.Close()
	var (
		out    []auditstore.LogLeaf
		maxVer uint64
	)
	for rows.Next() {
		var (
			l       auditstore.LogLeaf
			id      string
			seq     uint64
			created int64
			ver     uint64
		)
		if err := rows.Scan(&l.Index, &id, &seq, &created, &ver); err != nil {
			return nil, 0, fmt.Errorf("clickhouse log leaves: %w", err)
		}
		if l.EventID, err = uuid.Parse(id); err != nil {
			return nil, 0, fmt.Errorf("clickhouse log leaves: %w", err)
		}
		l.Key = auditstore.FeedKey{Seq: seq, CreatedMS: created, EventID: l.EventID}
		out = append(out, l)
		maxVer = max(maxVer, ver)
	}
	if err := rows.Err(); err != nil {
		return nil, 0, fmt.Errorf("clickhouse log leaves: %w", err)
	}
	return out, maxVer, nil
}

// LeafRange implements auditstore.LogStore in one query
// (queries/log_leaves.sql): a range of log_leaves' primary key, the newest
// write of each leaf. The caller's hi is at most the head's size, so
// every row below it is final (an append that crashed left rows above the
// size only): no head read.
func (s *Store) LeafRange(ctx context.Context, org uuid.UUID, kind auditstore.LogKind, lo, hi int64) ([]auditstore.LogLeaf, error) {
	if err := auditstore.ValidateLeafRange(org, kind, lo, hi); err != nil {
		return nil, err
	}
	if lo == hi {
		return nil, nil
	}
	leaves, _, err := s.readLeaves(ctx, org, kind, lo, hi)
	if err != nil {
		return nil, err
	}
	if err := auditstore.CheckLeafRange(leaves, lo, hi); err != nil {
		return nil, fmt.Errorf("clickhouse leaf range %d..%d: %w", lo, hi, err)
	}
	return leaves, nil
}

// ReadLogHashes implements auditstore.LogStore: the tiles that hold the
// hashes, one query of points of log_tiles' primary key (per 500 tiles).
func (s *Store) ReadLogHashes(ctx context.Context, org uuid.UUID, kind auditstore.LogKind, indexes []int64) ([][32]byte, error) {
	if err := auditstore.ValidateLog(org, kind); err != nil {
		return nil, err
	}
	if len(indexes) == 0 {
		return nil, nil
	}
	return s.hashesFromTiles(ctx, org, kind, indexes)
}

func (s *Store) readHashes(ctx context.Context, query string, org uuid.UUID, kind auditstore.LogKind, found map[int64][32]byte, bounds ...int64) error {
	args := []any{org.String(), uint8(kind)}
	for _, b := range bounds {
		args = append(args, b)
	}
	rows, err := s.conn.Query(ctx, query, args...)
	if err != nil {
		return fmt.Errorf("clickhouse log hashes: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			i int64
			h [32]byte
		)
		if err := rows.Scan(&i, &h); err != nil {
			return fmt.Errorf("clickhouse log hashes: %w", err)
		}
		found[i] = h
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("clickhouse log hashes: %w", err)
	}
	return nil
}

// LeafIndexes implements auditstore.LogStore: the ids travel as external
// data matched on log_leaf_ids' primary key; mappings at or above the
// head's size (left by an append that crashed) and withdrawn ones are
// left out.
func (s *Store) LeafIndexes(ctx context.Context, org uuid.UUID, kind auditstore.LogKind, eventIDs []uuid.UUID) (map[uuid.UUID]int64, error) {
	if err := auditstore.ValidateLog(org, kind); err != nil {
		return nil, err
	}
	if len(eventIDs) > auditstore.MaxLimit {
		return nil, fmt.Errorf("%w: %d event ids, at most %d", auditstore.ErrInvalidQuery, len(eventIDs), auditstore.MaxLimit)
	}
	if len(eventIDs) == 0 {
		return map[uuid.UUID]int64{}, nil
	}
	size, _, err := s.LogHead(ctx, org, kind)
	if err != nil {
		return nil, err
	}
	held, err := s.leafIDs(ctx, org, kind, eventIDs)
	if err != nil {
		return nil, err
	}
	for id, i := range held {
		if i < 0 || i >= size {
			delete(held, id)
		}
	}
	return held, nil
}

// LeafTile implements auditstore.LogStore in two reads of keys: the leaf
// index by a point of log_leaf_ids' primary key
// (queries/log_leaf_tile.sql), then the tiles that hold its tile's
// hashes (ReadLogHashes: points of log_tiles' key). The caller's size is
// at most the head's, so every row below it is final: no head read.
func (s *Store) LeafTile(ctx context.Context, org uuid.UUID, kind auditstore.LogKind, event uuid.UUID, size int64) (int64, []auditstore.StoredHash, bool, error) {
	if err := auditstore.ValidateLog(org, kind); err != nil {
		return 0, nil, false, err
	}
	if size <= 0 {
		return 0, nil, false, nil
	}
	leaf, err := s.leafIndex(ctx, org, kind, event)
	if err != nil {
		return 0, nil, false, err
	}
	if leaf < 0 || leaf >= size {
		return 0, nil, false, nil
	}
	lo, hi := auditstore.TileHashRange(leaf, size)
	idx := make([]int64, 0, hi-lo)
	for i := lo; i < hi; i++ {
		idx = append(idx, i)
	}
	hs, err := s.hashesFromTiles(ctx, org, kind, idx)
	if errors.Is(err, auditstore.ErrNotFound) {
		return 0, nil, false, nil // not stored: no tile to prove from
	}
	if err != nil {
		return 0, nil, false, err
	}
	out := make([]auditstore.StoredHash, len(hs))
	for j, h := range hs {
		out[j] = auditstore.StoredHash{Index: idx[j], Hash: h}
	}
	return leaf, out, true, nil
}

// leafIndex is the newest mapping of one event in log_leaf_ids (-1:
// none, or withdrawn).
func (s *Store) leafIndex(ctx context.Context, org uuid.UUID, kind auditstore.LogKind, event uuid.UUID) (int64, error) {
	rows, err := s.conn.Query(ctx, logLeafTileSQL, org.String(), uint8(kind), event.String())
	if err != nil {
		return 0, fmt.Errorf("clickhouse leaf index: %w", err)
	}
	defer rows.Close()
	leaf := int64(-1)
	if rows.Next() {
		if err := rows.Scan(&leaf); err != nil {
			return 0, fmt.Errorf("clickhouse leaf index: %w", err)
		}
	}
	if err := rows.Err(); err != nil {
		return 0, fmt.Errorf("clickhouse leaf index: %w", err)
	}
	return leaf, nil
}

// leafIDs returns the newest mapping of each of the event ids found in
// log_leaf_ids, whatever the size (withdrawn ones as -1).
func (s *Store) leafIDs(ctx context.Context, org uuid.UUID, kind auditstore.LogKind, eventIDs []uuid.UUID) (map[uuid.UUID]int64, error) {
	out := map[uuid.UUID]int64{}
	if len(eventIDs) == 0 {
		return out, nil
	}
	tbl, err := ext.NewTable("leaf_ids",
		ext.Column("organization_id", "String"), ext.Column("kind", "UInt8"), ext.Column("event_id", "String"))
	if err != nil {
		return nil, fmt.Errorf("clickhouse leaf indexes: %w", err)
	}
	o, k := org.String(), uint8(kind)
	for _, id := range eventIDs {
		if err := tbl.Append(o, k, id.String()); err != nil {
			return nil, fmt.Errorf("clickhouse leaf indexes: %w", err)
		}
	}
	rows, err := s.conn.Query(ch.Context(ctx, ch.WithExternalTable(tbl)), logLeafIndexesSQL)
	if err != nil {
		return nil, fmt.Errorf("clickhouse leaf indexes: %w", err)
	}
	defer rows.Close()
	if err := auditstore.ScanIDInts[int64](rows, out); err != nil {
		return nil, fmt.Errorf("clickhouse leaf indexes: %w", err)
	}
	return out, nil
}

// SaveCheckpoint implements auditstore.LogStore: the root is checked
// against the stored tree (below the head's size), then the checkpoint is
// inserted; the newest of a size wins (ReplacingMergeTree on time_ms, and
// CheckpointAt's ORDER BY).
func (s *Store) SaveCheckpoint(ctx context.Context, org uuid.UUID, kind auditstore.LogKind, cp auditstore.Checkpoint) error {
	if err := auditstore.ValidateLog(org, kind); err != nil {
		return err
	}
	size, _, err := s.LogHead(ctx, org, kind)
	if err != nil {
		return err
	}
	if err := auditstore.CheckCheckpoint(cp, size, auditstore.LogHashReader(ctx, s, org, kind)); err != nil {
		return err
	}
	ms := max(cp.Time.UnixMilli(), 0)
	return s.insertRows(ctx, insertLogCheckpointSQL, 1, func(int) []any {
		return []any{org.String(), uint8(kind), cp.Size, cp.Root[:], uint64(ms), cp.KeyID, string(cp.Note)}
	})
}

// LatestCheckpoint implements auditstore.LogStore in one query
// (queries/log_checkpoint_latest.sql).
func (s *Store) LatestCheckpoint(ctx context.Context, org uuid.UUID, kind auditstore.LogKind) (auditstore.Checkpoint, bool, error) {
	if err := auditstore.ValidateLog(org, kind); err != nil {
		return auditstore.Checkpoint{}, false, err
	}
	o, k := org.String(), uint8(kind)
	return s.checkpoint(ctx, logCheckpointLatestSQL, o, k, o, k)
}

// CheckpointAt implements auditstore.LogStore.
func (s *Store) CheckpointAt(ctx context.Context, org uuid.UUID, kind auditstore.LogKind, size int64) (auditstore.Checkpoint, bool, error) {
	if err := auditstore.ValidateLog(org, kind); err != nil {
		return auditstore.Checkpoint{}, false, err
	}
	return s.checkpoint(ctx, logCheckpointAtSQL, org.String(), uint8(kind), size)
}

// checkpoint reads the one checkpoint query answers (false: none).
func (s *Store) checkpoint(ctx context.Context, query string, args ...any) (auditstore.Checkpoint, bool, error) {
	rows, err := s.conn.Query(ctx, query, args...)
	if err != nil {
		return auditstore.Checkpoint{}, false, fmt.Errorf("clickhouse checkpoint: %w", err)
	}
	defer rows.Close()
	if !rows.Next() {
		return auditstore.Checkpoint{}, false, rows.Err()
	}
	var (
		cp   auditstore.Checkpoint
		ms   uint64
		note string
	)
	if err := rows.Scan(&cp.Size, &cp.Root, &ms, &cp.KeyID, &note); err != nil {
		return auditstore.Checkpoint{}, false, fmt.Errorf("clickhouse checkpoint: %w", err)
	}
	cp.Time = time.UnixMilli(int64(ms)).UTC()
	cp.Note = []byte(note)
	return cp, true, rows.Err()
}

// LogOrgs implements auditstore.LogStore (a scan of log_heads: a row per
// log and unmerged part).
func (s *Store) LogOrgs(ctx context.Context, kind auditstore.LogKind) ([]uuid.UUID, error) {
	if !kind.Valid() {
		return nil, fmt.Errorf("%w: unknown log kind %d", auditstore.ErrInvalidQuery, uint8(kind))
	}
	rows, err := s.conn.Query(ctx, logOrgsSQL, uint8(kind))
	if err != nil {
		return nil, fmt.Errorf("clickhouse log orgs: %w", err)
	}
	defer rows.Close()
	out, err := auditstore.ScanIDs(rows)
	if err != nil {
		return nil, fmt.Errorf("clickhouse log orgs: %w", err)
	}
	return out, nil
}

// LogHeads implements auditstore.LogStore (a scan of log_heads: a row per
// log and unmerged part; the largest size of each log wins).
func (s *Store) LogHeads(ctx context.Context, kind auditstore.LogKind) (map[uuid.UUID]int64, error) {
	if !kind.Valid() {
		return nil, fmt.Errorf("%w: unknown log kind %d", auditstore.ErrInvalidQuery, uint8(kind))
	}
	rows, err := s.conn.Query(ctx, logHeadsSQL, uint8(kind))
	if err != nil {
		return nil, fmt.Errorf("clickhouse log heads: %w", err)
	}
	defer rows.Close()
	out := map[uuid.UUID]int64{}
	if err := auditstore.ScanIDInts[uint64](rows, out); err != nil {
		return nil, fmt.Errorf("clickhouse log heads: %w", err)
	}
	return out, nil
}
