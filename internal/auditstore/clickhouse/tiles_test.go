package clickhouse

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/auditrail/auditrail/internal/auditstore"
	"github.com/auditrail/auditrail/internal/auditstore/storetest"
	"github.com/auditrail/auditrail/internal/testenv"
)

// A log written before log_tiles (0019) keeps its hashes in log_hashes,
// a row each: its tree hashes, proofs' tiles and further appends read
// them there where no segment covers them, and appends after it write
// segments, so that a tile may be part old rows, part segments.
func TestTilesOverOldHashes(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := Open(ctx, testenv.ClickHouse(t))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	org, kind := uuid.New(), auditstore.LogAudit
	m := storetest.NewLogModel()
	leaves, hashes := m.Add(t, 600)
	// As AppendLog wrote them before 0019: hashes, leaves, head.
	o, k, ver := org.String(), uint8(kind), uint64(time.Now().UnixNano())
	n := len(hashes)
	idx, hs := make([]int64, n), make([]string, n)
	for i, h := range hashes {
		idx[i], hs[i] = h.Index, string(h.Hash[:])
	}
	if err := s.insertColumns(ctx, "INSERT INTO log_hashes (organization_id, kind, idx, hash, ver)", n, repeat(o, n), repeat(k, n), idx, hs, repeat(ver, n)); err != nil {
		t.Fatal(err)
	}
	if err := s.writeLog(ctx, org, kind, auditstore.AppendPlan{New: leaves}, logWrite{ver: ver}, true); err != nil {
		t.Fatal(err)
	}
	check := func(size int64) {
		t.Helper()
		r := auditstore.LogHashReader(ctx, s, org, kind)
		for _, at := range []int64{1, 255, 256, 257, size / 2, size - 1, size} {
			if got, err := tlog.TreeHash(at, r); err != nil || got != m.Root(t, at) {
				t.Fatalf("TreeHash(%d) = %v, %v", at, got, err)
			}
		}
		for _, leaf := range []int64{0, 300, 599, size - 1} {
			i, got, ok, err := s.LeafTile(ctx, org, kind, m.Leaves[leaf].EventID, size)
			lo, hi := auditstore.TileHashRange(leaf, size)
			if err != nil || !ok || i != leaf || int64(len(got)) != hi-lo {
				t.Fatalf("LeafTile(%d) = %d, %d hashes, %v, %v; want %d hashes", leaf, i, len(got), ok, err, hi-lo)
			}
			for _, h := range got {
				if tlog.Hash(h.Hash) != m.Hashes[h.Index] {
					t.Fatalf("LeafTile(%d): hash %d is not the log's", leaf, h.Index)
				}
			}
		}
	}
	check(600)
	// Appended since: leaves 600.. share the tile of 512..767 with old rows.
	more, moreHashes := m.Add(t, 300)
	if err := s.AppendLog(ctx, org, kind, more, moreHashes); err != nil {
		t.Fatal(err)
	}
	check(900)
	if err := s.AppendLogs(ctx, []auditstore.LogAppend{{Org: org, Kind: kind, Leaves: func() []auditstore.LogLeaf { l, h := m.Add(t, 70); moreHashes = h; return l }(), Hashes: moreHashes}}); err != nil {
		t.Fatal(err)
	}
	check(970)
}

// segmentsOf keeps the hashes of the tiles' bottom levels, by tile, each
// from its position in the tile; a hash out of order is refused.
func TestSegmentsOf(t *testing.T) {
	m := storetest.NewLogModel()
	m.Add(t, 250)
	_, hashes := m.Add(t, 70000-250)
	segs, err := segmentsOf(hashes)
	if err != nil {
		t.Fatal(err)
	}
	want := map[tileKey][2]int{ // start, width
		{0, 0}: {250, 6}, {0, 1}: {0, 256}, {0, 273}: {0, 70000 - 273*256},
		{1, 0}: {0, 256}, {1, 1}: {0, 70000/256 - 256}, {2, 0}: {0, 1},
	}
	got := map[tileKey][2]int{}
	for _, s := range segs {
		got[s.tile] = [2]int{s.start, len(s.hashes) / tlog.HashSize}
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("segment of tile %v: start and width %v, want %v", k, got[k], w)
		}
	}
	if len(segs) != 273+1+2+1 {
		t.Errorf("%d segments, want %d", len(segs), 273+1+2+1)
	}
	for _, s := range segs {
		for p := range len(s.hashes) / tlog.HashSize {
			i := tlog.StoredHashIndex(s.tile.level*tileHeight, s.tile.n<<tileHeight+int64(s.start+p))
			if tlog.Hash(s.hashes[p*tlog.HashSize:(p+1)*tlog.HashSize]) != m.Hashes[i] {
				t.Fatalf("tile %v position %d is not hash %d", s.tile, s.start+p, i)
			}
		}
	}
	var leafHashes []auditstore.StoredHash
	for _, h := range hashes {
		if level, _ := tlog.SplitStoredHashIndex(h.Index); level == 0 {
			leafHashes = append(leafHashes, h)
		}
	}
	if _, err := segmentsOf([]auditstore.StoredHash{leafHashes[0], leafHashes[2]}); err == nil {
		t.Error("a gap in a tile taken")
	}
}
