package sqlite

import (
	"context"
	"database/sql"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/auditrail/auditrail/internal/auditstore"
)

var (
	//go:embed queries/log_head.sql
	logHeadSQL string
	//go:embed queries/log_leaves.sql
	logLeavesSQL string
	//go:embed queries/log_hashes.sql
	logHashesSQL string
	//go:embed queries/log_hash_range.sql
	logHashRangeSQL string
	//go:embed queries/log_leaf_indexes.sql
	logLeafIndexesSQL string
	//go:embed queries/log_leaf_range.sql
	logLeafRangeSQL string
	//go:embed queries/insert_log_leaf.sql
	insertLogLeafSQL string
	//go:embed queries/insert_log_hash.sql
	insertLogHashSQL string
	//go:embed queries/upsert_log_head.sql
	upsertLogHeadSQL string
	//go:embed queries/save_log_checkpoint.sql
	saveLogCheckpointSQL string
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

// querier is what the log's reads need: the pool, or the transaction of
// an append.
type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// SaveCheckpoints implements auditstore.CheckpointSaver: one
// SaveCheckpoint each.
func (s *Store) SaveCheckpoints(ctx context.Context, cps []auditstore.LogCheckpoint) []error {
	return auditstore.SaveEach(ctx, s, cps)
}

// AppendLogs implements auditstore.LogAppender: one AppendLog per log
// (each a transaction of its own; an append costs SQLite little).
func (s *Store) AppendLogs(ctx context.Context, appends []auditstore.LogAppend) error {
	return auditstore.AppendEach(ctx, s, appends)
}

// AppendLog implements auditstore.LogStore in one transaction of the
// writing connection: the head is read, the part already stored compared,
// the rest and the new head written, then committed (WAL, synchronous
// FULL: durable on return). SQLite has one writer at a time, so even two
// sequencers could not interleave a check and a write here.
func (s *Store) AppendLog(ctx context.Context, org uuid.UUID, kind auditstore.LogKind, leaves []auditstore.LogLeaf, hashes []auditstore.StoredHash) error {
	if err := auditstore.ValidateLog(org, kind); err != nil {
		return err
	}
	if len(leaves) == 0 && len(hashes) == 0 {
		return nil
	}
	tx, err := s.wdb.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("sqlite begin: %w", err)
	}
	defer tx.Rollback()
	logID, size, _, err := logHead(ctx, tx, org, kind)
	if err != nil {
		return err
	}
	plan, err := auditstore.PlanAppend(size, leaves, hashes)
	if err != nil {
		return err
	}
	if len(plan.Old) > 0 {
		stored, err := readLeaves(ctx, tx, logID, plan.Old[0].Index, size)
		if err != nil {
			return err
		}
		idx := make([]int64, len(plan.OldHashes))
		for i, h := range plan.OldHashes {
			idx[i] = h.Index
		}
		hs, err := readHashes(ctx, tx, org, kind, idx)
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
	ids := make([]uuid.UUID, len(plan.New))
	for i, l := range plan.New {
		ids[i] = l.EventID
	}
	dup, err := leafIndexes(ctx, tx, org, kind, ids)
	if err != nil {
		return err
	}
	for id, i := range dup {
		return fmt.Errorf("%w: event %s is leaf %d already", auditstore.ErrLogConflict, id, i)
	}
	// The head first: it numbers a new log (the transaction makes the
	// order of the writes invisible).
	last := plan.New[len(plan.New)-1]
	if err := tx.QueryRowContext(ctx, upsertLogHeadSQL, org.String(), int64(kind), last.Index+1, last.EventID.String(), int64(last.Key.Seq), last.Key.CreatedMS).Scan(&logID); err != nil {
		return fmt.Errorf("sqlite log head: %w", classify(err))
	}
	if err := execEach(ctx, tx, insertLogLeafSQL, len(plan.New), func(i int) []any {
		l := plan.New[i]
		return []any{logID, l.Index, l.EventID.String(), int64(l.Key.Seq), l.Key.CreatedMS}
	}); err != nil {
		return err
	}
	if err := execEach(ctx, tx, insertLogHashSQL, len(plan.NewHashes), func(i int) []any {
		h := plan.NewHashes[i]
		return []any{logID, h.Index, h.Hash[:]}
	}); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("sqlite commit log: %w", classify(err))
	}
	return nil
}

// rowsPerInsert is how many rows one INSERT of the log writes (a
// multi-row VALUES, a hundredth of the statements; at most 500 of
// SQLite's 32766 parameters).
const rowsPerInsert = 100

// execEach writes n rows in tx with the single-row insert query
// ("INSERT … VALUES (?, …)"), rowsPerInsert rows per statement.
func execEach(ctx context.Context, tx *sql.Tx, query string, n int, row func(i int) []any) error {
	at := strings.LastIndex(query, "VALUES")
	if at < 0 {
		return fmt.Errorf("sqlite log insert: no VALUES in %.40q", query)
	}
	prefix, tuple := query[:at+len("VALUES")], strings.TrimSpace(query[at+len("VALUES"):])
	stmts := map[int]*sql.Stmt{}
	defer func() {
		for _, st := range stmts {
			st.Close()
		}
	}()
	for lo := 0; lo < n; lo += rowsPerInsert {
		k := min(rowsPerInsert, n-lo)
		st := stmts[k]
		if st == nil {
			var err error
			st, err = tx.PrepareContext(ctx, prefix+" "+strings.TrimSuffix(strings.Repeat(tuple+", ", k), ", "))
			if err != nil {
				return fmt.Errorf("sqlite prepare: %w", err)
			}
			stmts[k] = st
		}
		var args []any
		for i := lo; i < lo+k; i++ {
			args = append(args, row(i)...)
		}
		if _, err := st.ExecContext(ctx, args...); err != nil {
			return fmt.Errorf("sqlite log insert: %w", classify(err))
		}
	}
	return nil
}

// LogHead implements auditstore.LogStore.
func (s *Store) LogHead(ctx context.Context, org uuid.UUID, kind auditstore.LogKind) (int64, auditstore.LogLeaf, error) {
	if err := auditstore.ValidateLog(org, kind); err != nil {
		return 0, auditstore.LogLeaf{}, err
	}
	_, size, last, err := logHead(ctx, s.db, org, kind)
	return size, last, err
}

// logHead returns the log's number (0: no log yet), size and last leaf.
func logHead(ctx context.Context, q querier, org uuid.UUID, kind auditstore.LogKind) (logID, size int64, last auditstore.LogLeaf, err error) {
	var (
		seq, created int64
		id           string
	)
	err = q.QueryRowContext(ctx, logHeadSQL, org.String(), int64(kind)).Scan(&logID, &size, &id, &seq, &created)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, 0, auditstore.LogLeaf{}, nil
	}
	if err != nil {
		return 0, 0, auditstore.LogLeaf{}, fmt.Errorf("sqlite log head: %w", err)
	}
	eid, err := uuid.Parse(id)
	if err != nil {
		return 0, 0, auditstore.LogLeaf{}, fmt.Errorf("sqlite log head: %w", err)
	}
	return logID, size, auditstore.LogLeaf{Index: size - 1, EventID: eid, Key: auditstore.FeedKey{Seq: uint64(seq), CreatedMS: created, EventID: eid}}, nil
}

// readLeaves returns the stored leaves lo <= idx < hi, in order.
func readLeaves(ctx context.Context, q querier, logID, lo, hi int64) ([]auditstore.LogLeaf, error) {
	rows, err := q.QueryContext(ctx, logLeavesSQL, logID, lo, hi)
	if err != nil {
		return nil, fmt.Errorf("sqlite log leaves: %w", err)
	}
	return scanLeaves(rows)
}

// scanLeaves reads leaves (idx, event_id, seq, created_ms) and closes
// rows.
func scanLeaves(rows *sql.Rows) ([]auditstore.LogLeaf, error) {
	defer rows.Close()
	var out []auditstore.LogLeaf
	for rows.Next() {
		var (
			l            auditstore.LogLeaf
			seq, created int64
			id           string
		)
		if err := rows.Scan(&l.Index, &id, &seq, &created); err != nil {
			return nil, fmt.Errorf("sqlite log leaves: %w", err)
		}
		eid, err := uuid.Parse(id)
		if err != nil {
			return nil, fmt.Errorf("sqlite log leaves: %w", err)
		}
		l.EventID = eid
		l.Key = auditstore.FeedKey{Seq: uint64(seq), CreatedMS: created, EventID: l.EventID}
		out = append(out, l)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite log leaves: %w", err)
	}
	return out, nil
}

// LeafRange implements auditstore.LogStore in one query: the log's
// number by the key of log_heads, then a range of log_leaves' primary
// key. A log's rows are written with its head in one transaction: every
// row is final.
func (s *Store) LeafRange(ctx context.Context, org uuid.UUID, kind auditstore.LogKind, lo, hi int64) ([]auditstore.LogLeaf, error) {
	if err := auditstore.ValidateLeafRange(org, kind, lo, hi); err != nil {
		return nil, err
	}
	if lo == hi {
		return nil, nil
	}
	rows, err := s.db.QueryContext(ctx, logLeafRangeSQL, org.String(), int64(kind), lo, hi)
	if err != nil {
		return nil, fmt.Errorf("sqlite leaf range: %w", err)
	}
	leaves, err := scanLeaves(rows)
	if err != nil {
		return nil, err
	}
	if err := auditstore.CheckLeafRange(leaves, lo, hi); err != nil {
		return nil, fmt.Errorf("sqlite leaf range %d..%d: %w", lo, hi, err)
	}
	return leaves, nil
}

// ReadLogHashes implements auditstore.LogStore: one query, points of the
// primary key.
func (s *Store) ReadLogHashes(ctx context.Context, org uuid.UUID, kind auditstore.LogKind, indexes []int64) ([][32]byte, error) {
	if err := auditstore.ValidateLog(org, kind); err != nil {
		return nil, err
	}
	return readHashes(ctx, s.db, org, kind, indexes)
}

func readHashes(ctx context.Context, q querier, org uuid.UUID, kind auditstore.LogKind, indexes []int64) ([][32]byte, error) {
	if len(indexes) == 0 {
		return nil, nil
	}
	list, err := json.Marshal(indexes)
	if err != nil {
		return nil, err
	}
	rows, err := q.QueryContext(ctx, logHashesSQL, org.String(), int64(kind), string(list))
	if err != nil {
		return nil, fmt.Errorf("sqlite log hashes: %w", err)
	}
	defer rows.Close()
	found := make(map[int64][32]byte, len(indexes))
	for rows.Next() {
		var (
			i int64
			h []byte
		)
		if err := rows.Scan(&i, &h); err != nil {
			return nil, fmt.Errorf("sqlite log hashes: %w", err)
		}
		if len(h) != 32 {
			return nil, fmt.Errorf("sqlite log hashes: hash %d of %d bytes", i, len(h))
		}
		found[i] = [32]byte(h)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite log hashes: %w", err)
	}
	return auditstore.HashesInOrder(indexes, found)
}

// LeafIndexes implements auditstore.LogStore: points of log_leaves_event.
func (s *Store) LeafIndexes(ctx context.Context, org uuid.UUID, kind auditstore.LogKind, eventIDs []uuid.UUID) (map[uuid.UUID]int64, error) {
	if err := auditstore.ValidateLog(org, kind); err != nil {
		return nil, err
	}
	if len(eventIDs) > auditstore.MaxLimit {
		return nil, fmt.Errorf("%w: %d event ids, at most %d", auditstore.ErrInvalidQuery, len(eventIDs), auditstore.MaxLimit)
	}
	return leafIndexes(ctx, s.db, org, kind, eventIDs)
}

func leafIndexes(ctx context.Context, q querier, org uuid.UUID, kind auditstore.LogKind, eventIDs []uuid.UUID) (map[uuid.UUID]int64, error) {
	out := map[uuid.UUID]int64{}
	if len(eventIDs) == 0 {
		return out, nil
	}
	list, err := json.Marshal(eventIDs) // uuid.UUID marshals as its string
	if err != nil {
		return nil, err
	}
	rows, err := q.QueryContext(ctx, logLeafIndexesSQL, org.String(), int64(kind), string(list))
	if err != nil {
		return nil, fmt.Errorf("sqlite leaf indexes: %w", err)
	}
	defer rows.Close()
	if err := auditstore.ScanIDInts[int64](rows, out); err != nil {
		return nil, fmt.Errorf("sqlite leaf indexes: %w", err)
	}
	return out, nil
}

// LeafTile implements auditstore.LogStore: the leaf index (a point of
// log_leaves_event), then the tile's hashes (a range of log_hashes'
// primary key). A log's rows are written with its head in one
// transaction: every row is final.
func (s *Store) LeafTile(ctx context.Context, org uuid.UUID, kind auditstore.LogKind, event uuid.UUID, size int64) (int64, []auditstore.StoredHash, bool, error) {
	if err := auditstore.ValidateLog(org, kind); err != nil {
		return 0, nil, false, err
	}
	m, err := leafIndexes(ctx, s.db, org, kind, []uuid.UUID{event})
	if err != nil {
		return 0, nil, false, err
	}
	leaf, ok := m[event]
	if !ok || leaf < 0 || leaf >= size {
		return 0, nil, false, nil
	}
	lo, hi := auditstore.TileHashRange(leaf, size)
	rows, err := s.db.QueryContext(ctx, logHashRangeSQL, org.String(), int64(kind), lo, hi)
	if err != nil {
		return 0, nil, false, fmt.Errorf("sqlite leaf tile: %w", err)
	}
	defer rows.Close()
	out := make([]auditstore.StoredHash, 0, hi-lo)
	for rows.Next() {
		var (
			h auditstore.StoredHash
			b []byte
		)
		if err := rows.Scan(&h.Index, &b); err != nil {
			return 0, nil, false, fmt.Errorf("sqlite leaf tile: %w", err)
		}
		if len(b) != 32 {
			return 0, nil, false, fmt.Errorf("sqlite leaf tile: hash %d of %d bytes", h.Index, len(b))
		}
		h.Hash = [32]byte(b)
		out = append(out, h)
	}
	if err := rows.Err(); err != nil {
		return 0, nil, false, fmt.Errorf("sqlite leaf tile: %w", err)
	}
	return leaf, out, true, nil
}

// SaveCheckpoint implements auditstore.LogStore: the root is checked
// against the stored tree, then the checkpoint is written (a newer one of
// the same size replaces the stored one).
func (s *Store) SaveCheckpoint(ctx context.Context, org uuid.UUID, kind auditstore.LogKind, cp auditstore.Checkpoint) error {
	if err := auditstore.ValidateLog(org, kind); err != nil {
		return err
	}
	logID, size, _, err := logHead(ctx, s.db, org, kind)
	if err != nil {
		return err
	}
	if err := auditstore.CheckCheckpoint(cp, size, auditstore.LogHashReader(ctx, s, org, kind)); err != nil {
		return err
	}
	note := cp.Note
	if note == nil {
		note = []byte{} // a blob, never NULL
	}
	if _, err := s.wdb.ExecContext(ctx, saveLogCheckpointSQL, logID, cp.Size, cp.Root[:], cp.Time.UnixMilli(), cp.KeyID, note); err != nil {
		return fmt.Errorf("sqlite save checkpoint: %w", classify(err))
	}
	return nil
}

// LatestCheckpoint implements auditstore.LogStore.
func (s *Store) LatestCheckpoint(ctx context.Context, org uuid.UUID, kind auditstore.LogKind) (auditstore.Checkpoint, bool, error) {
	if err := auditstore.ValidateLog(org, kind); err != nil {
		return auditstore.Checkpoint{}, false, err
	}
	return s.checkpoint(ctx, logCheckpointLatestSQL, org.String(), int64(kind))
}

// CheckpointAt implements auditstore.LogStore.
func (s *Store) CheckpointAt(ctx context.Context, org uuid.UUID, kind auditstore.LogKind, size int64) (auditstore.Checkpoint, bool, error) {
	if err := auditstore.ValidateLog(org, kind); err != nil {
		return auditstore.Checkpoint{}, false, err
	}
	return s.checkpoint(ctx, logCheckpointAtSQL, org.String(), int64(kind), size)
}

func (s *Store) checkpoint(ctx context.Context, query string, args ...any) (auditstore.Checkpoint, bool, error) {
	var (
		cp     auditstore.Checkpoint
		root   []byte
		timeMS int64
	)
	err := s.db.QueryRowContext(ctx, query, args...).Scan(&cp.Size, &root, &timeMS, &cp.KeyID, &cp.Note)
	if errors.Is(err, sql.ErrNoRows) {
		return auditstore.Checkpoint{}, false, nil
	}
	if err != nil {
		return auditstore.Checkpoint{}, false, fmt.Errorf("sqlite checkpoint: %w", err)
	}
	if len(root) != len(cp.Root) {
		return auditstore.Checkpoint{}, false, fmt.Errorf("sqlite checkpoint: root of %d bytes", len(root))
	}
	cp.Root = [32]byte(root)
	cp.Time = time.UnixMilli(timeMS).UTC()
	return cp, true, nil
}

// LogOrgs implements auditstore.LogStore (a scan of log_heads: one row
// per log).
func (s *Store) LogOrgs(ctx context.Context, kind auditstore.LogKind) ([]uuid.UUID, error) {
	if !kind.Valid() {
		return nil, fmt.Errorf("%w: unknown log kind %d", auditstore.ErrInvalidQuery, uint8(kind))
	}
	rows, err := s.db.QueryContext(ctx, logOrgsSQL, int64(kind))
	if err != nil {
		return nil, fmt.Errorf("sqlite log orgs: %w", err)
	}
	defer rows.Close()
	out, err := auditstore.ScanIDs(rows)
	if err != nil {
		return nil, fmt.Errorf("sqlite log orgs: %w", err)
	}
	return out, nil
}

// LogHeads implements auditstore.LogStore (a scan of log_heads: one row
// per log).
func (s *Store) LogHeads(ctx context.Context, kind auditstore.LogKind) (map[uuid.UUID]int64, error) {
	if !kind.Valid() {
		return nil, fmt.Errorf("%w: unknown log kind %d", auditstore.ErrInvalidQuery, uint8(kind))
	}
	rows, err := s.db.QueryContext(ctx, logHeadsSQL, int64(kind))
	if err != nil {
		return nil, fmt.Errorf("sqlite log heads: %w", err)
	}
	defer rows.Close()
	out := map[uuid.UUID]int64{}
	if err := auditstore.ScanIDInts[int64](rows, out); err != nil {
		return nil, fmt.Errorf("sqlite log heads: %w", err)
	}
	return out, nil
}
