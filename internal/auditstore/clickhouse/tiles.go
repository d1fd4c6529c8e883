package clickhouse

import (
	"context"
	_ "embed"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/template"

	"github.com/google/uuid"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/auditrail/auditrail/internal/auditstore"
)

// The tree hashes are kept as tiles of height auditstore.TileHeight
// (schemas/clickhouse/0019_log_tiles.sql): an append writes a segment of
// each tile it adds hashes to; a tile is read as its segments.

var (
	//go:embed queries/insert_log_tiles.sql
	insertLogTilesSQL string
	//go:embed queries/log_tiles.sql
	logTilesTemplate string
	logTilesSQL      = template.Must(template.New("log_tiles.sql").Parse(logTilesTemplate))
	//go:embed queries/log_tiles_above.sql
	logTilesAboveTemplate string
	logTilesAboveSQL      = template.Must(template.New("log_tiles_above.sql").Parse(logTilesAboveTemplate))
)

const (
	tileHeight = auditstore.TileHeight
	tileWidth  = 1 << tileHeight
	// tilesPerQuery bounds the tiles of one log_tiles.sql query (a proof
	// or a consistency proof needs a few per level).
	tilesPerQuery = 500
)

// tileKey is a tile of one log: its level and number.
type tileKey struct {
	level int
	n     int64
}

// segment is the hashes an append adds to one tile, from position start.
type segment struct {
	tile   tileKey
	start  int
	hashes []byte
}

// segmentsOf returns the segments that stored hashes add (an append's:
// those from tlog.StoredHashCount(size) on, in order): the hashes of the
// tiles' bottom levels (0, 8, 16, …), grouped by tile; the others are
// computed from them.
func segmentsOf(hashes []auditstore.StoredHash) ([]segment, error) {
	var out []segment
	at := map[tileKey]int{}
	for _, h := range hashes {
		level, k := tlog.SplitStoredHashIndex(h.Index)
		if level%tileHeight != 0 {
			continue
		}
		key := tileKey{level / tileHeight, k >> tileHeight}
		pos := int(k & (tileWidth - 1))
		i, ok := at[key]
		if !ok {
			at[key] = len(out)
			out = append(out, segment{tile: key, start: pos})
			i = len(out) - 1
		}
		s := &out[i]
		if pos != s.start+len(s.hashes)/tlog.HashSize {
			return nil, fmt.Errorf("%w: hash %d is not next in its tile", auditstore.ErrInvalidQuery, h.Index)
		}
		s.hashes = append(s.hashes, h.Hash[:]...)
	}
	return out, nil
}

// tileColumns appends the columns of one log's segments (insert_log_tiles.sql
// but ver).
type tileColumns struct {
	orgs   []string
	kinds  []uint8
	levels []uint8
	ns     []int64
	starts []uint16
	hashes []string
}

func (c *tileColumns) add(org string, kind uint8, segs []segment) {
	for _, s := range segs {
		c.orgs, c.kinds = append(c.orgs, org), append(c.kinds, kind)
		c.levels, c.ns, c.starts = append(c.levels, uint8(s.tile.level)), append(c.ns, s.tile.n), append(c.starts, uint16(s.start))
		c.hashes = append(c.hashes, string(s.hashes))
	}
}

// insert writes the segments at version ver, one insert.
func (c *tileColumns) insert(ctx context.Context, s *Store, ver uint64) error {
	n := len(c.orgs)
	return s.insertColumns(ctx, insertLogTilesSQL, n, c.orgs, c.kinds, c.levels, c.ns, c.starts, c.hashes, repeat(ver, n))
}

// tilesFrom is the condition of the tile segments at or beyond a log's
// size: its tiles of level L from number size >> (8L+8) on, one range of
// the primary key per level whose first such tile is above 0, then one
// for every level above.
func tilesFrom(size int64) string {
	var b strings.Builder
	l := 0
	for ; l < 8 && size>>(tileHeight*(l+1)) > 0; l++ {
		fmt.Fprintf(&b, "(level = %d AND n >= %d) OR ", l, size>>(tileHeight*(l+1)))
	}
	fmt.Fprintf(&b, "level >= %d", l)
	return b.String()
}

// tilesAbove returns the newest version among the tile segments that
// appends that crashed left at or beyond each log's size.
func (s *Store) tilesAbove(ctx context.Context, logs []logAt) (uint64, error) {
	var newest uint64
	if len(logs) > 0 {
		s.remnantReads.Add(1)
	}
	for lo := 0; lo < len(logs); lo += logsPerQuery {
		chunk := logs[lo:min(lo+logsPerQuery, len(logs))]
		conds := make([]string, len(chunk))
		args := make([]any, 0, 2*len(chunk))
		for i, l := range chunk {
			conds[i] = "(organization_id = ? AND kind = ? AND (" + tilesFrom(l.from) + "))"
			args = append(args, l.log.org.String(), uint8(l.log.kind))
		}
		var q strings.Builder
		if err := logTilesAboveSQL.Execute(&q, strings.Join(conds, " OR ")); err != nil {
			return 0, err
		}
		rows, err := s.conn.Query(ctx, q.String(), args...)
		if err != nil {
			return 0, fmt.Errorf("clickhouse log tiles above the heads: %w", err)
		}
		for rows.Next() {
			var (
				org  string
				kind uint8
				ver  uint64
			)
			if err := rows.Scan(&org, &kind, &ver); err != nil {
				rows.Close()
				return 0, fmt.Errorf("clickhouse log tiles above the heads: %w", err)
			}
			newest = max(newest, ver)
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return 0, fmt.Errorf("clickhouse log tiles above the heads: %w", err)
		}
	}
	return newest, nil
}

// assemble puts a tile's segments (in order of start) together: the data
// from position 0 as far as the segments reach without a gap, a later
// segment overriding what an earlier one held from its start.
func assemble(data []byte, start int, hashes []byte) []byte {
	if start*tlog.HashSize > len(data) {
		return data // a gap: nothing beyond it is known
	}
	return append(data[:start*tlog.HashSize], hashes...)
}

// readTiles returns the data of the tiles of one log, each at least as
// wide as asked where the store has it: from log_tiles, and, for a tile
// it holds too little of (a log written before log_tiles), from
// log_hashes, the segments overriding.
func (s *Store) readTiles(ctx context.Context, org uuid.UUID, kind auditstore.LogKind, want map[tileKey]int) (map[tileKey][]byte, error) {
	out, err := s.readTilesOf(ctx, kind, map[uuid.UUID]map[tileKey]int{org: want})
	return out[org], err
}

// readTilesOf is readTiles of several logs of one kind: their segments in
// one query (up to tilesPerQuery tiles a query, whatever the logs).
func (s *Store) readTilesOf(ctx context.Context, kind auditstore.LogKind, wants map[uuid.UUID]map[tileKey]int) (map[uuid.UUID]map[tileKey][]byte, error) {
	type logTile struct {
		org uuid.UUID
		k   tileKey
	}
	var all []logTile
	for _, org := range slices.SortedFunc(maps.Keys(wants), func(a, b uuid.UUID) int { return strings.Compare(a.String(), b.String()) }) {
		for _, k := range slices.SortedFunc(maps.Keys(wants[org]), func(a, b tileKey) int {
			if a.level != b.level {
				return a.level - b.level
			}
			return int(a.n - b.n)
		}) {
			all = append(all, logTile{org, k})
		}
	}
	segs := map[uuid.UUID]map[tileKey][]segment{}
	for lo := 0; lo < len(all); lo += tilesPerQuery {
		chunk := all[lo:min(lo+tilesPerQuery, len(all))]
		conds := make([]string, len(chunk))
		for i, t := range chunk {
			conds[i] = "(organization_id = '" + t.org.String() + "' AND level = " + strconv.Itoa(t.k.level) + " AND n = " + strconv.FormatInt(t.k.n, 10) + ")"
		}
		var q strings.Builder
		if err := logTilesSQL.Execute(&q, strings.Join(conds, " OR ")); err != nil {
			return nil, err
		}
		rows, err := s.conn.Query(ctx, q.String(), uint8(kind))
		if err != nil {
			return nil, fmt.Errorf("clickhouse log tiles: %w", err)
		}
		for rows.Next() {
			var (
				org    string
				level  uint8
				n      int64
				start  uint16
				hashes string
			)
			if err := rows.Scan(&org, &level, &n, &start, &hashes); err != nil {
				rows.Close()
				return nil, fmt.Errorf("clickhouse log tiles: %w", err)
			}
			o, err := uuid.Parse(org)
			if err != nil {
				rows.Close()
				return nil, fmt.Errorf("clickhouse log tiles: %w", err)
			}
			k := tileKey{int(level), n}
			if segs[o] == nil {
				segs[o] = map[tileKey][]segment{}
			}
			segs[o][k] = append(segs[o][k], segment{tile: k, start: int(start), hashes: []byte(hashes)})
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return nil, fmt.Errorf("clickhouse log tiles: %w", err)
		}
	}
	out := make(map[uuid.UUID]map[tileKey][]byte, len(wants))
	old := map[uuid.UUID][]tileKey{}
	for _, t := range all {
		if out[t.org] == nil {
			out[t.org] = make(map[tileKey][]byte, len(wants[t.org]))
		}
		var data []byte
		for _, sg := range segs[t.org][t.k] { // in order of start (the query's)
			data = assemble(data, sg.start, sg.hashes)
		}
		out[t.org][t.k] = data
		if len(data) < wants[t.org][t.k]*tlog.HashSize {
			old[t.org] = append(old[t.org], t.k)
		}
	}
	for org, keys := range old {
		if err := s.readOldTiles(ctx, org, kind, keys, wants[org], segs[org], out[org]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// readOldTiles fills tiles from log_hashes (where logs written before
// log_tiles keep their hashes), the segments laid over them.
func (s *Store) readOldTiles(ctx context.Context, org uuid.UUID, kind auditstore.LogKind, keys []tileKey, want map[tileKey]int, segs map[tileKey][]segment, out map[tileKey][]byte) error {
	var idx []int64
	for _, k := range keys {
		for p := range want[k] {
			idx = append(idx, tlog.StoredHashIndex(k.level*tileHeight, k.n<<tileHeight+int64(p)))
		}
	}
	found := make(map[int64][32]byte, len(idx))
	for lo := 0; lo < len(idx); lo += hashesPerQuery {
		chunk := idx[lo:min(lo+hashesPerQuery, len(idx))]
		var list strings.Builder
		for i, x := range chunk {
			if i > 0 {
				list.WriteByte(',')
			}
			list.WriteString(strconv.FormatInt(x, 10))
		}
		var query strings.Builder
		if err := logHashesSQL.Execute(&query, list.String()); err != nil {
			return err
		}
		if err := s.readHashes(ctx, query.String(), org, kind, found); err != nil {
			return err
		}
	}
	for _, k := range keys {
		var data []byte
		for p := range want[k] {
			h, ok := found[tlog.StoredHashIndex(k.level*tileHeight, k.n<<tileHeight+int64(p))]
			if !ok {
				break
			}
			data = append(data, h[:]...)
		}
		for _, sg := range segs[k] {
			data = assemble(data, sg.start, sg.hashes)
		}
		if len(data) > len(out[k]) {
			out[k] = data
		}
	}
	return nil
}

// hashesFromTiles reads the stored hashes at indexes from the log's tiles.
func (s *Store) hashesFromTiles(ctx context.Context, org uuid.UUID, kind auditstore.LogKind, indexes []int64) ([][32]byte, error) {
	found, err := s.hashesFromTilesOf(ctx, kind, map[uuid.UUID][]int64{org: indexes})
	if err != nil {
		return nil, err
	}
	return auditstore.HashesInOrder(indexes, found[org])
}

// hashesFromTilesOf reads the stored hashes at each log's indexes from
// the logs' tiles, in one query (readTilesOf): those found, by index (a
// hash not stored is absent).
func (s *Store) hashesFromTilesOf(ctx context.Context, kind auditstore.LogKind, indexes map[uuid.UUID][]int64) (map[uuid.UUID]map[int64][32]byte, error) {
	wants := make(map[uuid.UUID]map[tileKey]int, len(indexes))
	for org, idx := range indexes {
		want := map[tileKey]int{}
		for _, i := range idx {
			if i < 0 {
				continue
			}
			t := tlog.TileForIndex(tileHeight, i)
			k := tileKey{t.L, t.N}
			want[k] = max(want[k], t.W)
		}
		wants[org] = want
	}
	tiles, err := s.readTilesOf(ctx, kind, wants)
	if err != nil {
		return nil, err
	}
	out := make(map[uuid.UUID]map[int64][32]byte, len(indexes))
	for org, idx := range indexes {
		found := make(map[int64][32]byte, len(idx))
		for _, i := range idx {
			if i < 0 {
				continue
			}
			t := tlog.TileForIndex(tileHeight, i)
			data := tiles[org][tileKey{t.L, t.N}]
			if len(data) < t.W*tlog.HashSize {
				continue // not stored: HashesInOrder says so
			}
			h, err := tlog.HashFromTile(t, data, i)
			if err != nil {
				return nil, fmt.Errorf("clickhouse log tiles: %w", err)
			}
			found[i] = h
		}
		out[org] = found
	}
	return out, nil
}
