package clickhouse

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strings"
	"text/template"

	ch "github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/ext"
	"github.com/google/uuid"
	sumtlog "golang.org/x/mod/sumdb/tlog"

	"github.com/auditrail/auditrail/internal/auditstore"
)

var (
	//go:embed queries/log_heads_of.sql
	logHeadsOfSQL string
	//go:embed queries/log_leaf_indexes_of.sql
	logLeafIndexesOfSQL string
	//go:embed queries/log_above.sql
	logAboveTemplate string
	logAboveSQL      = template.Must(template.New("log_above.sql").Parse(logAboveTemplate))
)

var _ auditstore.LogAppender = (*Store)(nil)

// logsPerQuery bounds the logs of one log_above.sql query (its text grows
// by about a hundred bytes a log, far below max_query_size).
const logsPerQuery = 500

type logKey struct {
	org  uuid.UUID
	kind auditstore.LogKind
}

// AppendLogs implements auditstore.LogAppender: the heads of every log in
// one query, what a crash left above them in two, the events checked in
// one, then one insert of hashes, one of leaves (and its view's) and one
// of heads for all the logs, however many: a part of each table per round
// of the sequencer, not per log. A log whose append repeats leaves it
// holds, or above whose size a crash left leaves, takes AppendLog's way.
func (s *Store) AppendLogs(ctx context.Context, appends []auditstore.LogAppend) error {
	var errs []error
	var todo []auditstore.LogAppend
	seen := map[logKey]bool{}
	for _, a := range appends {
		k := logKey{a.Org, a.Kind}
		switch err := auditstore.ValidateLog(a.Org, a.Kind); {
		case err != nil:
			errs = append(errs, fmt.Errorf("log %s/%s: %w", a.Org, a.Kind, err))
		case seen[k]:
			errs = append(errs, fmt.Errorf("%w: log %s/%s appended twice in one call", auditstore.ErrInvalidQuery, a.Org, a.Kind))
		case len(a.Leaves) > 0 || len(a.Hashes) > 0:
			seen[k] = true
			todo = append(todo, a)
		}
	}
	if len(todo) == 0 {
		return errors.Join(errs...)
	}
	keys := make([]logKey, len(todo))
	for i, a := range todo {
		keys[i] = logKey{a.Org, a.Kind}
	}
	sizes, err := s.headsOf(ctx, keys)
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	var batch, single []planned
	for _, a := range todo {
		size := sizes[logKey{a.Org, a.Kind}]
		plan, err := auditstore.PlanAppend(size, a.Leaves, a.Hashes)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("log %s/%s: %w", a.Org, a.Kind, err))
		case len(plan.Old) > 0:
			single = append(single, planned{a, size, plan})
		case len(plan.New) > 0:
			batch = append(batch, planned{a, size, plan})
		}
	}
	// What crashed appends left above the sizes: a log with leaves there
	// takes AppendLog's way (which withdraws them); the version of this
	// append is above every row there. A log still at the size where this
	// store's own last append left it has nothing there (see wroteLog) and
	// is not read.
	var ver uint64
	if len(batch) > 0 {
		ver = uint64(s.now().UnixNano())
		var at []logAt
		for _, p := range batch {
			k := logKey{p.a.Org, p.a.Kind}
			if w, ok := s.wroteAt(k, p.size); ok {
				ver = max(ver, w.ver+2)
				continue
			}
			at = append(at, logAt{k, p.size})
		}
		leftLeaves, leavesVer, err := s.above(ctx, "log_leaves", at)
		if err != nil {
			return errors.Join(append(errs, err)...)
		}
		tilesVer, err := s.tilesAbove(ctx, at)
		if err != nil {
			return errors.Join(append(errs, err)...)
		}
		ver = max(ver, leavesVer+2, tilesVer+2)
		kept := batch[:0]
		for _, p := range batch {
			if leftLeaves[logKey{p.a.Org, p.a.Kind}] > 0 {
				single = append(single, p)
				continue
			}
			kept = append(kept, p)
		}
		batch = kept
	}
	// An event the log holds below its size is refused, as AppendLog does.
	if len(batch) > 0 {
		held, err := s.leafIDsOf(ctx, batch)
		if err != nil {
			return errors.Join(append(errs, err)...)
		}
		kept := batch[:0]
		for _, p := range batch {
			if err := refuseHeld(held, p.a.Org, p.a.Kind, p.plan.New, p.size); err != nil {
				errs = append(errs, err)
				continue
			}
			kept = append(kept, p)
		}
		batch = kept
	}
	if len(batch) > 0 {
		err := s.writeLogs(ctx, batch, ver)
		s.rememberWrites(batch, ver, err == nil)
		if err != nil {
			errs = append(errs, err) // the logs of AppendLog's way are still tried
		}
	}
	for _, p := range single {
		if err := s.AppendLog(ctx, p.a.Org, p.a.Kind, p.a.Leaves, p.a.Hashes); err != nil {
			errs = append(errs, fmt.Errorf("log %s/%s: %w", p.a.Org, p.a.Kind, err))
		}
	}
	return errors.Join(errs...)
}

// wroteLog is where this store's own last append left a log: its size
// and the append's version. That append's rows end at the size, and every
// row above the size that it found was withdrawn or lies below its
// version, so that an append at that size needs no read of what lies
// above: nothing does, as long as no other writer appended since. A
// writer that appended would have moved the head (another size: the log
// is read again); one that crashed before its head could only have done
// so while it held the sequencer's lease, and a sequencer that takes the
// lease calls ForgetLogWrites first.
type wroteLog struct {
	size int64
	ver  uint64
}

// maxWrote bounds the logs remembered; beyond it the memory starts afresh.
const maxWrote = 100_000

// wroteAt reports whether this store's own last append left the log at
// size.
func (s *Store) wroteAt(k logKey, size int64) (wroteLog, bool) {
	s.wroteMu.Lock()
	defer s.wroteMu.Unlock()
	w, ok := s.wrote[k]
	return w, ok && w.size == size
}

// rememberWrites records where an append of these logs left them (ok), or
// forgets them (a failed append may have left rows above their heads).
func (s *Store) rememberWrites(ps []planned, ver uint64, ok bool) {
	s.wroteMu.Lock()
	defer s.wroteMu.Unlock()
	if s.wrote == nil || len(s.wrote)+len(ps) > maxWrote {
		s.wrote = map[logKey]wroteLog{}
	}
	for _, p := range ps {
		k := logKey{p.a.Org, p.a.Kind}
		if ok {
			s.wrote[k] = wroteLog{size: p.plan.Size(p.size), ver: ver}
		} else {
			delete(s.wrote, k)
		}
	}
}

// forgetWrite forgets a log (AppendLog writes it its own way).
func (s *Store) forgetWrite(k logKey) {
	s.wroteMu.Lock()
	defer s.wroteMu.Unlock()
	delete(s.wrote, k)
}

var _ auditstore.LogWriteForgetter = (*Store)(nil)

// ForgetLogWrites implements auditstore.LogWriteForgetter: the next append
// of every log reads what crashed appends left above its head.
func (s *Store) ForgetLogWrites() {
	s.wroteMu.Lock()
	defer s.wroteMu.Unlock()
	s.wrote = nil
}

// refuseHeld is ErrLogConflict for a leaf whose event the log holds below
// its size (held: the mappings found, by log and event).
func refuseHeld(held map[logEvent]int64, org uuid.UUID, kind auditstore.LogKind, leaves []auditstore.LogLeaf, size int64) error {
	for _, l := range leaves {
		if i, ok := held[logEvent{logKey{org, kind}, l.EventID}]; ok && i >= 0 && i < size {
			return fmt.Errorf("log %s/%s: %w: event %s is leaf %d already", org, kind, auditstore.ErrLogConflict, l.EventID, i)
		}
	}
	return nil
}

type logAt struct {
	log  logKey
	from int64
}

type logEvent struct {
	log logKey
	id  uuid.UUID
}

// headsOf reads the sizes of these logs (absent: empty).
func (s *Store) headsOf(ctx context.Context, logs []logKey) (map[logKey]int64, error) {
	tbl, err := ext.NewTable("logs", ext.Column("organization_id", "String"), ext.Column("kind", "UInt8"))
	if err != nil {
		return nil, fmt.Errorf("clickhouse log heads: %w", err)
	}
	for _, l := range logs {
		if err := tbl.Append(l.org.String(), uint8(l.kind)); err != nil {
			return nil, fmt.Errorf("clickhouse log heads: %w", err)
		}
	}
	rows, err := s.conn.Query(ch.Context(ctx, ch.WithExternalTable(tbl)), logHeadsOfSQL)
	if err != nil {
		return nil, fmt.Errorf("clickhouse log heads: %w", err)
	}
	defer rows.Close()
	out := map[logKey]int64{}
	for rows.Next() {
		var (
			org  string
			kind uint8
			size uint64
		)
		if err := rows.Scan(&org, &kind, &size); err != nil {
			return nil, fmt.Errorf("clickhouse log heads: %w", err)
		}
		u, err := uuid.Parse(org)
		if err != nil {
			return nil, fmt.Errorf("clickhouse log heads: %w", err)
		}
		out[logKey{u, auditstore.LogKind(kind)}] = int64(size)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("clickhouse log heads: %w", err)
	}
	return out, nil
}

// above counts, per log, the rows of table (log_leaves, log_hashes) at or
// above its index from, and returns the newest version among all of them.
func (s *Store) above(ctx context.Context, table string, logs []logAt) (map[logKey]uint64, uint64, error) {
	counts := map[logKey]uint64{}
	var newest uint64
	if len(logs) > 0 {
		s.remnantReads.Add(1)
	}
	for lo := 0; lo < len(logs); lo += logsPerQuery {
		chunk := logs[lo:min(lo+logsPerQuery, len(logs))]
		conds := make([]string, len(chunk))
		args := make([]any, 0, 3*len(chunk))
		for i, l := range chunk {
			conds[i] = "(organization_id = ? AND kind = ? AND idx >= ?)"
			args = append(args, l.log.org.String(), uint8(l.log.kind), l.from)
		}
		var q strings.Builder
		if err := logAboveSQL.Execute(&q, struct{ Table, Logs string }{table, strings.Join(conds, " OR ")}); err != nil {
			return nil, 0, err
		}
		rows, err := s.conn.Query(ctx, q.String(), args...)
		if err != nil {
			return nil, 0, fmt.Errorf("clickhouse %s above the heads: %w", table, err)
		}
		for rows.Next() {
			var (
				org      string
				kind     uint8
				n, ver   uint64
				parseErr error
				u        uuid.UUID
			)
			if err := rows.Scan(&org, &kind, &n, &ver); err != nil {
				rows.Close()
				return nil, 0, fmt.Errorf("clickhouse %s above the heads: %w", table, err)
			}
			if u, parseErr = uuid.Parse(org); parseErr != nil {
				rows.Close()
				return nil, 0, fmt.Errorf("clickhouse %s above the heads: %w", table, parseErr)
			}
			counts[logKey{u, auditstore.LogKind(kind)}] = n
			newest = max(newest, ver)
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return nil, 0, fmt.Errorf("clickhouse %s above the heads: %w", table, err)
		}
	}
	return counts, newest, nil
}

// planned is an append of AppendLogs planned against its log's size.
type planned struct {
	a    auditstore.LogAppend
	size int64
	plan auditstore.AppendPlan
}

// leafIDsOf returns the newest mapping of every event of the planned
// leaves, by log and event (withdrawn ones as -1), in one query.
func (s *Store) leafIDsOf(ctx context.Context, ps []planned) (map[logEvent]int64, error) {
	tbl, err := ext.NewTable("leaf_ids",
		ext.Column("organization_id", "String"), ext.Column("kind", "UInt8"), ext.Column("event_id", "String"))
	if err != nil {
		return nil, fmt.Errorf("clickhouse leaf indexes: %w", err)
	}
	for _, p := range ps {
		o, kind := p.a.Org.String(), uint8(p.a.Kind)
		for _, l := range p.plan.New {
			if err := tbl.Append(o, kind, l.EventID.String()); err != nil {
				return nil, fmt.Errorf("clickhouse leaf indexes: %w", err)
			}
		}
	}
	rows, err := s.conn.Query(ch.Context(ctx, ch.WithExternalTable(tbl)), logLeafIndexesOfSQL)
	if err != nil {
		return nil, fmt.Errorf("clickhouse leaf indexes: %w", err)
	}
	defer rows.Close()
	out := map[logEvent]int64{}
	for rows.Next() {
		var (
			org, id string
			kind    uint8
			idx     int64
		)
		if err := rows.Scan(&org, &kind, &id, &idx); err != nil {
			return nil, fmt.Errorf("clickhouse leaf indexes: %w", err)
		}
		o, err1 := uuid.Parse(org)
		e, err2 := uuid.Parse(id)
		if err := errors.Join(err1, err2); err != nil {
			return nil, fmt.Errorf("clickhouse leaf indexes: %w", err)
		}
		out[logEvent{logKey{o, auditstore.LogKind(kind)}, e}] = idx
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("clickhouse leaf indexes: %w", err)
	}
	return out, nil
}

// writeLogs writes the planned appends' new hashes (as tile segments),
// then their leaves, then their heads, one insert each, at version ver.
func (s *Store) writeLogs(ctx context.Context, ps []planned, ver uint64) error {
	var nl int
	var tiles tileColumns
	for _, p := range ps {
		nl += len(p.plan.New)
		segs, err := segmentsOf(p.plan.NewHashes)
		if err != nil {
			return fmt.Errorf("log %s/%s: %w", p.a.Org, p.a.Kind, err)
		}
		tiles.add(p.a.Org.String(), uint8(p.a.Kind), segs)
	}
	if err := tiles.insert(ctx, s, ver); err != nil {
		return err
	}
	orgs, kinds, idx := make([]string, 0, nl), make([]uint8, 0, nl), make([]int64, 0, nl)
	ids, seqs, created := make([]string, 0, nl), make([]uint64, 0, nl), make([]int64, 0, nl)
	for _, p := range ps {
		o, k := p.a.Org.String(), uint8(p.a.Kind)
		for _, l := range p.plan.New {
			orgs, kinds, idx = append(orgs, o), append(kinds, k), append(idx, l.Index)
			ids, seqs, created = append(ids, l.EventID.String()), append(seqs, l.Key.Seq), append(created, l.Key.CreatedMS)
		}
	}
	if err := s.insertColumns(ctx, insertLogLeavesSQL, nl, orgs, kinds, idx, ids, seqs, created, repeat(ver, nl)); err != nil {
		return err
	}
	n := len(ps)
	orgs, kinds = make([]string, n), make([]uint8, n)
	sizes, ids, seqs, created := make([]uint64, n), make([]string, n), make([]uint64, n), make([]int64, n)
	for i, p := range ps {
		last := p.plan.New[len(p.plan.New)-1]
		orgs[i], kinds[i], sizes[i] = p.a.Org.String(), uint8(p.a.Kind), uint64(last.Index+1)
		ids[i], seqs[i], created[i] = last.EventID.String(), last.Key.Seq, last.Key.CreatedMS
	}
	return s.insertColumns(ctx, insertLogHeadSQL, n, orgs, kinds, sizes, ids, seqs, created)
}

var _ auditstore.CheckpointSaver = (*Store)(nil)

// SaveCheckpoints implements auditstore.CheckpointSaver: the heads in one
// query, each root checked against the stored tree (as SaveCheckpoint;
// the hashes of every checked tree in one query a kind), then one insert
// of those that hold.
func (s *Store) SaveCheckpoints(ctx context.Context, cps []auditstore.LogCheckpoint) []error {
	errs := make([]error, len(cps))
	keys := make([]logKey, 0, len(cps))
	for i, c := range cps {
		if errs[i] = auditstore.ValidateLog(c.Org, c.Kind); errs[i] == nil {
			keys = append(keys, logKey{c.Org, c.Kind})
		}
	}
	fail := func(err error) []error {
		for i := range errs {
			if errs[i] == nil {
				errs[i] = err
			}
		}
		return errs
	}
	if len(keys) == 0 {
		return errs
	}
	sizes, err := s.headsOf(ctx, keys)
	if err != nil {
		return fail(err)
	}
	trees, err := s.treeHashes(ctx, cps, errs)
	if err != nil {
		return fail(err)
	}
	var ok []int
	for i, c := range cps {
		if errs[i] != nil {
			continue
		}
		if errs[i] = auditstore.CheckCheckpoint(c.Checkpoint, sizes[logKey{c.Org, c.Kind}], trees[i]); errs[i] == nil {
			ok = append(ok, i)
		}
	}
	n := len(ok)
	orgs, kinds, sizesCol, roots := make([]string, n), make([]uint8, n), make([]int64, n), make([]string, n)
	times, keyIDs, notes := make([]uint64, n), make([]string, n), make([]string, n)
	for j, i := range ok {
		c := cps[i]
		orgs[j], kinds[j], sizesCol[j], roots[j] = c.Org.String(), uint8(c.Kind), c.Checkpoint.Size, string(c.Checkpoint.Root[:])
		times[j], keyIDs[j], notes[j] = uint64(max(c.Checkpoint.Time.UnixMilli(), 0)), c.Checkpoint.KeyID, string(c.Checkpoint.Note)
	}
	if err := s.insertColumns(ctx, insertLogCheckpointSQL, n, orgs, kinds, sizesCol, roots, times, keyIDs, notes); err != nil {
		for _, i := range ok {
			errs[i] = err
		}
	}
	return errs
}

// treeHashes reads, for each checkpoint not yet refused (errs), the
// stored hashes its tree's root is computed from, every log of a kind in
// one read (hashesFromTilesOf), and answers a reader of them per
// checkpoint (a hash not stored is ErrNotFound, as the store's reader
// says it).
func (s *Store) treeHashes(ctx context.Context, cps []auditstore.LogCheckpoint, errs []error) ([]sumtlog.HashReader, error) {
	need := map[auditstore.LogKind]map[uuid.UUID][]int64{}
	for i, c := range cps {
		if errs[i] != nil {
			continue
		}
		idx, err := treeHashIndexes(c.Checkpoint.Size)
		if err != nil {
			errs[i] = err
			continue
		}
		if need[c.Kind] == nil {
			need[c.Kind] = map[uuid.UUID][]int64{}
		}
		need[c.Kind][c.Org] = append(need[c.Kind][c.Org], idx...)
	}
	found := map[logKey]map[int64][32]byte{}
	for kind, byOrg := range need {
		m, err := s.hashesFromTilesOf(ctx, kind, byOrg)
		if err != nil {
			return nil, err
		}
		for org, hs := range m {
			found[logKey{org, kind}] = hs
		}
	}
	readers := make([]sumtlog.HashReader, len(cps))
	for i, c := range cps {
		readers[i] = auditstore.FoundHashReader(found[logKey{c.Org, c.Kind}])
	}
	return readers, nil
}

// treeHashIndexes are the stored hashes a tree's root at size is computed
// from (sumtlog.TreeHash's reads).
func treeHashIndexes(size int64) ([]int64, error) {
	var idx []int64
	_, err := sumtlog.TreeHash(size, sumtlog.HashReaderFunc(func(indexes []int64) ([]sumtlog.Hash, error) {
		idx = append(idx, indexes...)
		return make([]sumtlog.Hash, len(indexes)), nil
	}))
	return idx, err
}
