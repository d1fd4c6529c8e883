package storetest

import (
	"bytes"
	"errors"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/auditrail/auditrail/internal/auditstore"
)

// The tamper-evidence logs' storage (auditstore.LogStore): every backend
// keeps the leaves, stored hashes, heads and checkpoints of each
// organization's two logs apart, refuses what would rewrite a log, and
// answers proofs that golang.org/x/mod/sumdb/tlog checks.

func logStore(t *testing.T, s auditstore.Store) auditstore.LogStore {
	t.Helper()
	ls, ok := s.(auditstore.LogStore)
	if !ok {
		t.Fatalf("%T keeps no logs", s)
	}
	return ls
}

// LogModel is the reference of one log, in memory: the leaves and every
// stored hash, computed by tlog.StoredHashes.
type LogModel struct {
	Leaves []auditstore.LogLeaf
	Hashes []tlog.Hash
	base   time.Time
}

// NewLogModel returns an empty model.
func NewLogModel() *LogModel { return &LogModel{base: time.Now()} }

// Reader reads the model's hashes.
func (m *LogModel) Reader() tlog.HashReader {
	return tlog.HashReaderFunc(func(idx []int64) ([]tlog.Hash, error) {
		out := make([]tlog.Hash, len(idx))
		for i, x := range idx {
			if x < 0 || x >= int64(len(m.Hashes)) {
				return nil, errors.New("model: no such hash")
			}
			out[i] = m.Hashes[x]
		}
		return out, nil
	})
}

// Add adds n leaves of fresh event ids and returns them with the hashes
// they add (an AppendLog's arguments).
func (m *LogModel) Add(t testing.TB, n int) ([]auditstore.LogLeaf, []auditstore.StoredHash) {
	t.Helper()
	ids := make([]uuid.UUID, n)
	for i := range ids {
		ids[i] = uuid.New()
	}
	return m.AddEvents(t, ids...)
}

// AddEvents adds leaves of these event ids (see Add).
func (m *LogModel) AddEvents(t testing.TB, ids ...uuid.UUID) ([]auditstore.LogLeaf, []auditstore.StoredHash) {
	t.Helper()
	var leaves []auditstore.LogLeaf
	var hashes []auditstore.StoredHash
	for _, id := range ids {
		i := int64(len(m.Leaves))
		l := auditstore.LogLeaf{Index: i, EventID: id, Key: auditstore.FeedKey{Seq: uint64(i + 1), CreatedMS: m.base.UnixMilli() + i, EventID: id}}
		hs, err := tlog.StoredHashes(i, id[:], m.Reader())
		if err != nil {
			t.Fatal(err)
		}
		for _, h := range hs {
			hashes = append(hashes, auditstore.StoredHash{Index: int64(len(m.Hashes)), Hash: h})
			m.Hashes = append(m.Hashes, h)
		}
		m.Leaves = append(m.Leaves, l)
		leaves = append(leaves, l)
	}
	return leaves, hashes
}

// Fork returns a copy of the model.
func (m *LogModel) Fork() *LogModel {
	return &LogModel{Leaves: slices.Clone(m.Leaves), Hashes: slices.Clone(m.Hashes), base: m.base}
}

// Root is the tree hash of the first n leaves.
func (m *LogModel) Root(t testing.TB, n int64) tlog.Hash {
	t.Helper()
	h, err := tlog.TreeHash(n, m.Reader())
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// HashesOf returns the stored hashes that leaves lo..hi-1 added.
func (m *LogModel) HashesOf(lo, hi int64) []auditstore.StoredHash {
	var out []auditstore.StoredHash
	for x := tlog.StoredHashCount(lo); x < tlog.StoredHashCount(hi); x++ {
		out = append(out, auditstore.StoredHash{Index: x, Hash: m.Hashes[x]})
	}
	return out
}

func appendLog(t *testing.T, s auditstore.LogStore, org uuid.UUID, kind auditstore.LogKind, leaves []auditstore.LogLeaf, hashes []auditstore.StoredHash) {
	t.Helper()
	if err := s.AppendLog(ctx(t), org, kind, leaves, hashes); err != nil {
		t.Fatalf("AppendLog: %v", err)
	}
}

func checkHead(t *testing.T, s auditstore.LogStore, org uuid.UUID, kind auditstore.LogKind, m *LogModel) {
	t.Helper()
	size, last, err := s.LogHead(ctx(t), org, kind)
	if err != nil {
		t.Fatalf("LogHead: %v", err)
	}
	var want auditstore.LogLeaf
	if len(m.Leaves) > 0 {
		want = m.Leaves[len(m.Leaves)-1]
	}
	if size != int64(len(m.Leaves)) || last != want {
		t.Fatalf("LogHead = %d, %+v; want %d, %+v", size, last, len(m.Leaves), want)
	}
}

// testLogProofs: 1000 leaves appended in uneven batches; after each batch
// the head follows, and at the end the store's hashes give the model's
// tree hash for every size asked, and inclusion and consistency proofs
// made from the store check against the model's roots.
func testLogProofs(t *testing.T, open Opener) {
	s := logStore(t, mustOpen(t, open))
	org := uuid.New()
	m := NewLogModel()
	checkHead(t, s, org, auditstore.LogAudit, m)
	for _, n := range []int{1, 2, 5, 1, 64, 127, 300, 3, 250, 200, 47} { // 1000
		leaves, hashes := m.Add(t, n)
		appendLog(t, s, org, auditstore.LogAudit, leaves, hashes)
		checkHead(t, s, org, auditstore.LogAudit, m)
	}
	r := auditstore.LogHashReader(ctx(t), s, org, auditstore.LogAudit)
	for _, n := range []int64{1, 2, 3, 7, 8, 9, 100, 511, 512, 513, 999, 1000} {
		got, err := tlog.TreeHash(n, r)
		if err != nil {
			t.Fatalf("TreeHash(%d) from the store: %v", n, err)
		}
		if want := m.Root(t, n); got != want {
			t.Fatalf("TreeHash(%d) from the store = %v, want %v", n, got, want)
		}
	}
	for _, c := range []struct{ leaf, size int64 }{{0, 1}, {0, 1000}, {999, 1000}, {500, 1000}, {6, 7}, {255, 256}, {256, 513}, {42, 100}} {
		p, err := tlog.ProveRecord(c.size, c.leaf, r)
		if err != nil {
			t.Fatalf("ProveRecord(%d, %d): %v", c.size, c.leaf, err)
		}
		leaf := tlog.RecordHash(m.Leaves[c.leaf].EventID[:])
		if err := tlog.CheckRecord(p, c.size, m.Root(t, c.size), c.leaf, leaf); err != nil {
			t.Errorf("CheckRecord(leaf %d in %d): %v", c.leaf, c.size, err)
		}
		if err := tlog.CheckRecord(p, c.size, m.Root(t, c.size), c.leaf, tlog.RecordHash([]byte("other"))); err == nil {
			t.Errorf("CheckRecord(leaf %d in %d) accepts another leaf", c.leaf, c.size)
		}
	}
	for _, c := range []struct{ from, to int64 }{{1, 2}, {1, 1000}, {7, 8}, {300, 1000}, {512, 513}, {999, 1000}, {1000, 1000}} {
		p, err := tlog.ProveTree(c.to, c.from, r)
		if err != nil {
			t.Fatalf("ProveTree(%d, %d): %v", c.to, c.from, err)
		}
		if err := tlog.CheckTree(p, c.to, m.Root(t, c.to), c.from, m.Root(t, c.from)); err != nil {
			t.Errorf("CheckTree(%d → %d): %v", c.from, c.to, err)
		}
		if c.from != c.to {
			if err := tlog.CheckTree(p, c.to, m.Root(t, c.to), c.from, m.Root(t, c.from-1)); err == nil {
				t.Errorf("CheckTree(%d → %d) accepts another old root", c.from, c.to)
			}
		}
	}
	// The leaf hashes are the stored hashes of level 0.
	idx := []int64{tlog.StoredHashIndex(0, 0), tlog.StoredHashIndex(0, 999), tlog.StoredHashIndex(0, 500)}
	hs, err := s.ReadLogHashes(ctx(t), org, auditstore.LogAudit, idx)
	if err != nil {
		t.Fatal(err)
	}
	for i, leaf := range []int64{0, 999, 500} {
		if tlog.Hash(hs[i]) != tlog.RecordHash(m.Leaves[leaf].EventID[:]) {
			t.Errorf("stored leaf hash of %d differs", leaf)
		}
	}
	// Every leaf's index by its event id, in export-sized lookups.
	ids := make([]uuid.UUID, len(m.Leaves))
	for i, l := range m.Leaves {
		ids[i] = l.EventID
	}
	got, err := s.LeafIndexes(ctx(t), org, auditstore.LogAudit, ids)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(ids) {
		t.Fatalf("LeafIndexes found %d of %d", len(got), len(ids))
	}
	for i, id := range ids {
		if got[id] != int64(i) {
			t.Fatalf("LeafIndexes[%s] = %d, want %d", id, got[id], i)
		}
	}
}

// testLogIdempotent: appending again what the log holds (whole, or
// overlapping its end) writes nothing twice and moves the head only by
// the new leaves; the log's contents stay those of one append.
func testLogIdempotent(t *testing.T, open Opener) {
	s := logStore(t, mustOpen(t, open))
	org := uuid.New()
	m := NewLogModel()
	l10, h10 := m.Add(t, 10)
	appendLog(t, s, org, auditstore.LogAudit, l10, h10)
	appendLog(t, s, org, auditstore.LogAudit, l10, h10) // the whole batch again
	checkHead(t, s, org, auditstore.LogAudit, m)
	appendLog(t, s, org, auditstore.LogAudit, l10[9:], m.HashesOf(9, 10)) // its last leaf again
	checkHead(t, s, org, auditstore.LogAudit, m)
	m.Add(t, 5)
	appendLog(t, s, org, auditstore.LogAudit, m.Leaves[5:15], m.HashesOf(5, 15)) // overlapping: 5 old, 5 new
	checkHead(t, s, org, auditstore.LogAudit, m)
	if err := s.AppendLog(ctx(t), org, auditstore.LogAudit, nil, nil); err != nil {
		t.Fatalf("empty append: %v", err)
	}
	checkHead(t, s, org, auditstore.LogAudit, m)
	r := auditstore.LogHashReader(ctx(t), s, org, auditstore.LogAudit)
	if got, err := tlog.TreeHash(15, r); err != nil || got != m.Root(t, 15) {
		t.Fatalf("TreeHash(15) = %v, %v; want %v", got, err, m.Root(t, 15))
	}
	// A restart (the sequencer's, or the store's) resumes from the head.
	s2 := logStore(t, mustOpen(t, open))
	checkHead(t, s2, org, auditstore.LogAudit, m)
	appendLog(t, s2, org, auditstore.LogAudit, m.Leaves, m.HashesOf(0, 15))
	checkHead(t, s2, org, auditstore.LogAudit, m)
}

// testLogConflicts: an append that would change a stored leaf or hash,
// skip indexes, put an event in the log twice, or that is malformed, is
// refused as a whole: the head and the contents stay.
func testLogConflicts(t *testing.T, open Opener) {
	s := logStore(t, mustOpen(t, open))
	org := uuid.New()
	m := NewLogModel()
	leaves, hashes := m.Add(t, 10)
	appendLog(t, s, org, auditstore.LogAudit, leaves, hashes)
	next := m.Fork() // leaves 10..14 of the model, computed ahead
	more, _ := next.Add(t, 5)
	all := append(slices.Clone(leaves), more...)

	altered := func(f func(ls []auditstore.LogLeaf, hs []auditstore.StoredHash)) ([]auditstore.LogLeaf, []auditstore.StoredHash) {
		ls, hs := slices.Clone(all[5:15]), next.HashesOf(5, 15)
		f(ls, hs)
		return ls, hs
	}
	for _, tc := range []struct {
		name   string
		leaves []auditstore.LogLeaf
		hashes []auditstore.StoredHash
		want   error
	}{
		{"another event at a stored index", func() []auditstore.LogLeaf {
			ls, _ := altered(func(ls []auditstore.LogLeaf, _ []auditstore.StoredHash) { ls[1].EventID = uuid.New() })
			return ls
		}(), next.HashesOf(5, 15), auditstore.ErrLogConflict},
		{"another feed key at a stored index", func() []auditstore.LogLeaf {
			ls, _ := altered(func(ls []auditstore.LogLeaf, _ []auditstore.StoredHash) { ls[4].Key.Seq++ })
			return ls
		}(), next.HashesOf(5, 15), auditstore.ErrLogConflict},
		{"another hash at a stored index", all[5:15], func() []auditstore.StoredHash {
			_, hs := altered(func(_ []auditstore.LogLeaf, hs []auditstore.StoredHash) { hs[0].Hash[0] ^= 1 })
			return hs
		}(), auditstore.ErrLogConflict},
		{"a gap", all[11:15], next.HashesOf(11, 15), auditstore.ErrLogConflict},
		{"an event already in the log", func() []auditstore.LogLeaf {
			ls := slices.Clone(all[10:15])
			ls[2].EventID = all[3].EventID
			return ls
		}(), next.HashesOf(10, 15), auditstore.ErrLogConflict},
		{"an event twice in the batch", func() []auditstore.LogLeaf {
			ls := slices.Clone(all[10:15])
			ls[2].EventID = ls[1].EventID
			return ls
		}(), next.HashesOf(10, 15), auditstore.ErrLogConflict},
		{"a hash missing", all[10:15], next.HashesOf(10, 15)[1:], auditstore.ErrInvalidQuery},
		{"no hashes", all[10:15], nil, auditstore.ErrInvalidQuery},
		{"indexes not in a row", []auditstore.LogLeaf{all[10], all[12]}, next.HashesOf(10, 12), auditstore.ErrInvalidQuery},
		{"hashes without leaves", nil, next.HashesOf(10, 11), auditstore.ErrInvalidQuery},
		{"a nil event id", func() []auditstore.LogLeaf {
			ls := slices.Clone(all[10:15])
			ls[0].EventID = uuid.Nil
			return ls
		}(), next.HashesOf(10, 15), auditstore.ErrInvalidQuery},
	} {
		err := s.AppendLog(ctx(t), org, auditstore.LogAudit, tc.leaves, tc.hashes)
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: AppendLog = %v, want %v", tc.name, err, tc.want)
		}
		checkHead(t, s, org, auditstore.LogAudit, m)
		got, err := s.LeafIndexes(ctx(t), org, auditstore.LogAudit, []uuid.UUID{all[10].EventID, all[12].EventID})
		if err != nil || len(got) != 0 {
			t.Errorf("%s: leaves of the refused append are listed: %v, %v", tc.name, got, err)
		}
	}
	for _, tc := range []struct {
		name string
		org  uuid.UUID
		kind auditstore.LogKind
	}{{"nil organization", uuid.Nil, auditstore.LogAudit}, {"unknown kind", org, 2}} {
		if err := s.AppendLog(ctx(t), tc.org, tc.kind, more, next.HashesOf(10, 15)); !errors.Is(err, auditstore.ErrInvalidQuery) {
			t.Errorf("%s: AppendLog = %v", tc.name, err)
		}
		if _, _, err := s.LogHead(ctx(t), tc.org, tc.kind); !errors.Is(err, auditstore.ErrInvalidQuery) {
			t.Errorf("%s: LogHead = %v", tc.name, err)
		}
		if _, err := s.ReadLogHashes(ctx(t), tc.org, tc.kind, []int64{0}); !errors.Is(err, auditstore.ErrInvalidQuery) {
			t.Errorf("%s: ReadLogHashes = %v", tc.name, err)
		}
	}
	// The stored log is intact, and the correct continuation goes in.
	appendLog(t, s, org, auditstore.LogAudit, all[5:15], next.HashesOf(5, 15))
	checkHead(t, s, org, auditstore.LogAudit, next)
	r := auditstore.LogHashReader(ctx(t), s, org, auditstore.LogAudit)
	if got, err := tlog.TreeHash(15, r); err != nil || got != next.Root(t, 15) {
		t.Fatalf("TreeHash(15) = %v, %v; want %v", got, err, next.Root(t, 15))
	}
}

// testLogHashesMissing: a stored hash the log does not hold is
// ErrNotFound, in any position of the indexes asked; those it holds come
// back in the order asked, repeated ones included.
func testLogHashesMissing(t *testing.T, open Opener) {
	s := logStore(t, mustOpen(t, open))
	org := uuid.New()
	m := NewLogModel()
	leaves, hashes := m.Add(t, 20)
	appendLog(t, s, org, auditstore.LogAudit, leaves, hashes)
	n := int64(len(m.Hashes))
	for _, idx := range [][]int64{{n}, {0, n}, {n + 100, 0}, {1 << 40}} {
		if _, err := s.ReadLogHashes(ctx(t), org, auditstore.LogAudit, idx); !errors.Is(err, auditstore.ErrNotFound) {
			t.Errorf("ReadLogHashes(%v) = %v, want ErrNotFound", idx, err)
		}
	}
	if _, err := s.ReadLogHashes(ctx(t), uuid.New(), auditstore.LogAudit, []int64{0}); !errors.Is(err, auditstore.ErrNotFound) {
		t.Errorf("ReadLogHashes of an organization without a log = %v, want ErrNotFound", err)
	}
	if _, err := s.ReadLogHashes(ctx(t), org, auditstore.LogExecutions, []int64{0}); !errors.Is(err, auditstore.ErrNotFound) {
		t.Errorf("ReadLogHashes of the other kind = %v, want ErrNotFound", err)
	}
	idx := []int64{n - 1, 0, 7, 0, 3}
	got, err := s.ReadLogHashes(ctx(t), org, auditstore.LogAudit, idx)
	if err != nil {
		t.Fatal(err)
	}
	for i, x := range idx {
		if tlog.Hash(got[i]) != m.Hashes[x] {
			t.Errorf("hash %d (asked %d-th) differs", x, i)
		}
	}
	if got, err := s.ReadLogHashes(ctx(t), org, auditstore.LogAudit, nil); err != nil || len(got) != 0 {
		t.Errorf("ReadLogHashes(none) = %v, %v", got, err)
	}
}

// testLogLeafTile: LeafTile finds a leaf below the size asked with exactly
// the stored hashes of its tile cut at that size (full tiles, the partial
// last one, a tile of one leaf), which hold every hash below TileHeight
// that the leaf's inclusion proof asks for; an event not in the log, at
// or above the size, or in another log is not found.
func testLogLeafTile(t *testing.T, open Opener) {
	s := logStore(t, mustOpen(t, open))
	org, other := uuid.New(), uuid.New()
	m := NewLogModel()
	for _, n := range []int{300, 1, 255, 444} { // 1000
		leaves, hashes := m.Add(t, n)
		appendLog(t, s, org, auditstore.LogAudit, leaves, hashes)
	}
	om := NewLogModel()
	ol, oh := om.AddEvents(t, m.Leaves[7].EventID, uuid.New())
	appendLog(t, s, other, auditstore.LogAudit, ol, oh)
	for _, c := range []struct{ leaf, size int64 }{
		{0, 1}, {0, 1000}, {7, 8}, {255, 256}, {255, 1000}, {256, 257}, {300, 301}, {511, 512},
		{512, 1000}, {767, 768}, {768, 1000}, {999, 1000}, {900, 901}, {42, 300},
	} {
		id := m.Leaves[c.leaf].EventID
		got, hs, ok, err := s.LeafTile(ctx(t), org, auditstore.LogAudit, id, c.size)
		if err != nil || !ok || got != c.leaf {
			t.Fatalf("LeafTile(leaf %d, size %d) = %d, %v, %v", c.leaf, c.size, got, ok, err)
		}
		lo, hi := auditstore.TileHashRange(c.leaf, c.size)
		if int64(len(hs)) != hi-lo {
			t.Fatalf("LeafTile(leaf %d, size %d): %d hashes, want %d (%d..%d)", c.leaf, c.size, len(hs), hi-lo, lo, hi)
		}
		tile := map[int64]tlog.Hash{}
		for i, h := range hs {
			if h.Index != lo+int64(i) || tlog.Hash(h.Hash) != m.Hashes[h.Index] {
				t.Fatalf("LeafTile(leaf %d, size %d): hash %d is %d, differs: %v", c.leaf, c.size, i, h.Index, tlog.Hash(h.Hash) != m.Hashes[h.Index])
			}
			tile[h.Index] = tlog.Hash(h.Hash)
		}
		if tile[tlog.StoredHashIndex(0, c.leaf)] != tlog.RecordHash(id[:]) {
			t.Fatalf("LeafTile(leaf %d, size %d): no leaf hash", c.leaf, c.size)
		}
		// The proof's hashes over the tile's leaves are all in it (the
		// others are of the tree's upper levels, and of its right edge,
		// shared by every proof at this size).
		first := c.leaf &^ (1<<auditstore.TileHeight - 1)
		_, err = tlog.ProveRecord(c.size, c.leaf, tlog.HashReaderFunc(func(idx []int64) ([]tlog.Hash, error) {
			for _, x := range idx {
				if level, n := tlog.SplitStoredHashIndex(x); n<<level >= first && (n+1)<<level <= first+1<<auditstore.TileHeight {
					if _, ok := tile[x]; !ok {
						t.Errorf("LeafTile(leaf %d, size %d): the proof asks for hash %d (level %d), not in the tile", c.leaf, c.size, x, level)
					}
				}
			}
			return m.Reader().ReadHashes(idx)
		}))
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		name  string
		org   uuid.UUID
		kind  auditstore.LogKind
		event uuid.UUID
		size  int64
	}{
		{"an unknown event", org, auditstore.LogAudit, uuid.New(), 1000},
		{"a leaf at the size", org, auditstore.LogAudit, m.Leaves[500].EventID, 500},
		{"a leaf above the size", org, auditstore.LogAudit, m.Leaves[999].EventID, 10},
		{"size 0", org, auditstore.LogAudit, m.Leaves[0].EventID, 0},
		{"the other kind", org, auditstore.LogExecutions, m.Leaves[0].EventID, 1000},
		{"another organization's leaf", other, auditstore.LogAudit, m.Leaves[0].EventID, 2},
	} {
		if i, hs, ok, err := s.LeafTile(ctx(t), c.org, c.kind, c.event, c.size); err != nil || ok || len(hs) != 0 {
			t.Errorf("%s: LeafTile = %d, %d hashes, %v, %v; want not found", c.name, i, len(hs), ok, err)
		}
	}
	// The same event in another log: that log's leaf and hashes.
	if i, hs, ok, err := s.LeafTile(ctx(t), other, auditstore.LogAudit, m.Leaves[7].EventID, 2); err != nil || !ok || i != 0 || len(hs) != 3 || tlog.Hash(hs[0].Hash) != om.Hashes[0] {
		t.Errorf("LeafTile in the other log = %d, %v, %v, %v", i, hs, ok, err)
	}
	for _, c := range []struct {
		name string
		org  uuid.UUID
		kind auditstore.LogKind
	}{{"nil organization", uuid.Nil, auditstore.LogAudit}, {"unknown kind", org, 2}} {
		if _, _, _, err := s.LeafTile(ctx(t), c.org, c.kind, m.Leaves[0].EventID, 1); !errors.Is(err, auditstore.ErrInvalidQuery) {
			t.Errorf("%s: LeafTile = %v", c.name, err)
		}
	}
	t.Run("LeafRange", func(t *testing.T) { testLeafRange(t, s, org, m, other, om) })
}

// testLeafRange: LeafRange reads exactly the leaves of a range below the
// log's size, in order, with their feed positions (whole tiles, across
// the appends' batches and tiles, one leaf, none); a leaf the log does
// not hold (beyond its size, another kind's, an organization without a
// log) is ErrNotFound, and a range that is not one is ErrInvalidQuery.
// m is org's audit log (1000 leaves), om other's (2 leaves, the first
// an event of m as well).
func testLeafRange(t *testing.T, s auditstore.LogStore, org uuid.UUID, m *LogModel, other uuid.UUID, om *LogModel) {
	for _, c := range []struct {
		org    uuid.UUID
		m      *LogModel
		lo, hi int64
	}{
		{org, m, 0, 1}, {org, m, 0, 256}, {org, m, 255, 257}, {org, m, 256, 512}, {org, m, 299, 302},
		{org, m, 999, 1000}, {org, m, 744, 1000}, {org, m, 0, 1000}, {org, m, 7, 7}, {other, om, 0, 2},
	} {
		got, err := s.LeafRange(ctx(t), c.org, auditstore.LogAudit, c.lo, c.hi)
		if err != nil {
			t.Fatalf("LeafRange(%d, %d): %v", c.lo, c.hi, err)
		}
		if want := c.m.Leaves[c.lo:c.hi]; !slices.Equal(got, want) {
			t.Fatalf("LeafRange(%d, %d): %d leaves, differ from the %d appended", c.lo, c.hi, len(got), len(want))
		}
	}
	for _, c := range []struct {
		name   string
		org    uuid.UUID
		kind   auditstore.LogKind
		lo, hi int64
		want   error
	}{
		{"a range past the size", org, auditstore.LogAudit, 999, 1001, auditstore.ErrNotFound},
		{"a range at the size", org, auditstore.LogAudit, 1000, 1001, auditstore.ErrNotFound},
		{"another organization's size", other, auditstore.LogAudit, 0, 3, auditstore.ErrNotFound},
		{"the empty log of the other kind", org, auditstore.LogExecutions, 0, 1, auditstore.ErrNotFound},
		{"an organization without a log", uuid.New(), auditstore.LogAudit, 0, 1, auditstore.ErrNotFound},
		{"a negative start", org, auditstore.LogAudit, -1, 1, auditstore.ErrInvalidQuery},
		{"an end before the start", org, auditstore.LogAudit, 5, 4, auditstore.ErrInvalidQuery},
		{"too many leaves", org, auditstore.LogAudit, 0, auditstore.MaxLeafRange + 1, auditstore.ErrInvalidQuery},
		{"nil organization", uuid.Nil, auditstore.LogAudit, 0, 1, auditstore.ErrInvalidQuery},
		{"unknown kind", org, 2, 0, 1, auditstore.ErrInvalidQuery},
	} {
		if got, err := s.LeafRange(ctx(t), c.org, c.kind, c.lo, c.hi); !errors.Is(err, c.want) {
			t.Errorf("%s: LeafRange(%d, %d) = %d leaves, %v; want %v", c.name, c.lo, c.hi, len(got), err, c.want)
		}
	}
}

// testLogCheckpoints: checkpoints are kept per size (the newest of a
// size), found by size and as the latest; one whose root is not the
// stored tree's, or whose size is beyond the log, is refused.
func testLogCheckpoints(t *testing.T, open Opener) {
	s := logStore(t, mustOpen(t, open))
	org := uuid.New()
	m := NewLogModel()
	if _, ok, err := s.LatestCheckpoint(ctx(t), org, auditstore.LogAudit); err != nil || ok {
		t.Fatalf("LatestCheckpoint of no log = %v, %v", ok, err)
	}
	leaves, hashes := m.Add(t, 10)
	appendLog(t, s, org, auditstore.LogAudit, leaves, hashes)
	at := time.Now().Truncate(time.Millisecond).UTC()
	cp := func(size int64, dt time.Duration, key string) auditstore.Checkpoint {
		return auditstore.Checkpoint{Size: size, Root: m.Root(t, size), Time: at.Add(dt), KeyID: key, Note: []byte("note of " + key)}
	}
	save := func(c auditstore.Checkpoint) {
		t.Helper()
		if err := s.SaveCheckpoint(ctx(t), org, auditstore.LogAudit, c); err != nil {
			t.Fatalf("SaveCheckpoint(%d): %v", c.Size, err)
		}
	}
	expect := func(got auditstore.Checkpoint, ok bool, err error, want auditstore.Checkpoint) {
		t.Helper()
		if err != nil || !ok {
			t.Fatalf("checkpoint of size %d: %v, %v", want.Size, ok, err)
		}
		if got.Size != want.Size || got.Root != want.Root || !got.Time.Equal(want.Time) || got.KeyID != want.KeyID || !bytes.Equal(got.Note, want.Note) {
			t.Fatalf("checkpoint = %+v, want %+v", got, want)
		}
	}
	c5, c10 := cp(5, 0, "k1"), cp(10, time.Minute, "k1")
	save(c10)
	save(c5) // an older size saved later: the latest is still the largest
	save(c5) // again: a no-op
	got, ok, err := s.LatestCheckpoint(ctx(t), org, auditstore.LogAudit)
	expect(got, ok, err, c10)
	got, ok, err = s.CheckpointAt(ctx(t), org, auditstore.LogAudit, 5)
	expect(got, ok, err, c5)
	if _, ok, err := s.CheckpointAt(ctx(t), org, auditstore.LogAudit, 7); err != nil || ok {
		t.Fatalf("CheckpointAt(7) = %v, %v; none was saved", ok, err)
	}
	// The hourly checkpoint of an unchanged log replaces the stored one;
	// an older one of the same size does not.
	c10b := cp(10, time.Hour, "k2")
	save(c10b)
	save(cp(10, 30*time.Minute, "k3"))
	got, ok, err = s.LatestCheckpoint(ctx(t), org, auditstore.LogAudit)
	expect(got, ok, err, c10b)
	got, ok, err = s.CheckpointAt(ctx(t), org, auditstore.LogAudit, 10)
	expect(got, ok, err, c10b)

	forged := cp(8, 2*time.Hour, "k1")
	forged.Root[0] ^= 1
	beyond := cp(10, 2*time.Hour, "k1")
	beyond.Size = 11
	for name, c := range map[string]auditstore.Checkpoint{"another root": forged, "beyond the log": beyond} {
		if err := s.SaveCheckpoint(ctx(t), org, auditstore.LogAudit, c); !errors.Is(err, auditstore.ErrLogConflict) {
			t.Errorf("SaveCheckpoint(%s) = %v, want ErrLogConflict", name, err)
		}
		if _, ok, _ := s.CheckpointAt(ctx(t), org, auditstore.LogAudit, c.Size); ok {
			t.Errorf("SaveCheckpoint(%s) stored it", name)
		}
	}
	if err := s.SaveCheckpoint(ctx(t), uuid.New(), auditstore.LogAudit, c5); !errors.Is(err, auditstore.ErrLogConflict) {
		t.Errorf("SaveCheckpoint for an organization without a log = %v, want ErrLogConflict", err)
	}
	got, ok, err = s.LatestCheckpoint(ctx(t), org, auditstore.LogAudit)
	expect(got, ok, err, c10b)
	if _, ok, err := s.LatestCheckpoint(ctx(t), org, auditstore.LogExecutions); err != nil || ok {
		t.Fatalf("LatestCheckpoint of the other kind = %v, %v", ok, err)
	}
}

// testLogIsolation: each (organization, kind) is a log of its own: heads,
// hashes, leaf indexes, checkpoints and LogOrgs never mix them, even when
// the same event id is in two logs.
func testLogIsolation(t *testing.T, open Opener) {
	s := logStore(t, mustOpen(t, open))
	a, b := uuid.New(), uuid.New()
	type log struct {
		org  uuid.UUID
		kind auditstore.LogKind
		m    *LogModel
	}
	logs := []log{{a, auditstore.LogAudit, NewLogModel()}, {a, auditstore.LogExecutions, NewLogModel()}, {b, auditstore.LogAudit, NewLogModel()}}
	for i, l := range logs {
		leaves, hashes := l.m.Add(t, 5+3*i)
		appendLog(t, s, l.org, l.kind, leaves, hashes)
	}
	// The same event id as another log's leaf 0, as leaf 0 of b's executions.
	shared := NewLogModel()
	sl, sh := shared.Add(t, 1)
	sl[0].EventID, sl[0].Key.EventID = logs[0].m.Leaves[0].EventID, logs[0].m.Leaves[0].EventID
	sh[0].Hash = tlog.RecordHash(sl[0].EventID[:])
	shared.Leaves[0], shared.Hashes[0] = sl[0], sh[0].Hash
	appendLog(t, s, b, auditstore.LogExecutions, sl, sh)
	logs = append(logs, log{b, auditstore.LogExecutions, shared})

	for _, l := range logs {
		checkHead(t, s, l.org, l.kind, l.m)
		r := auditstore.LogHashReader(ctx(t), s, l.org, l.kind)
		n := int64(len(l.m.Leaves))
		if got, err := tlog.TreeHash(n, r); err != nil || got != l.m.Root(t, n) {
			t.Errorf("%s/%s: TreeHash = %v, %v", l.org, l.kind, got, err)
		}
		if _, err := s.ReadLogHashes(ctx(t), l.org, l.kind, []int64{int64(len(l.m.Hashes))}); !errors.Is(err, auditstore.ErrNotFound) {
			t.Errorf("%s/%s: a hash beyond its log is read: %v", l.org, l.kind, err)
		}
		var ids []uuid.UUID
		for _, o := range logs {
			for _, leaf := range o.m.Leaves {
				ids = append(ids, leaf.EventID)
			}
		}
		got, err := s.LeafIndexes(ctx(t), l.org, l.kind, ids)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(l.m.Leaves) {
			t.Errorf("%s/%s: LeafIndexes found %d ids, the log holds %d", l.org, l.kind, len(got), len(l.m.Leaves))
		}
		for _, leaf := range l.m.Leaves {
			if i, ok := got[leaf.EventID]; !ok || i != leaf.Index {
				t.Errorf("%s/%s: LeafIndexes[%s] = %d, %v; want %d", l.org, l.kind, leaf.EventID, i, ok, leaf.Index)
			}
		}
		c := auditstore.Checkpoint{Size: n, Root: l.m.Root(t, n), Time: time.Now(), KeyID: l.org.String() + l.kind.String()}
		if err := s.SaveCheckpoint(ctx(t), l.org, l.kind, c); err != nil {
			t.Fatal(err)
		}
	}
	for _, l := range logs {
		got, ok, err := s.LatestCheckpoint(ctx(t), l.org, l.kind)
		if err != nil || !ok || got.KeyID != l.org.String()+l.kind.String() || got.Size != int64(len(l.m.Leaves)) {
			t.Errorf("%s/%s: LatestCheckpoint = %+v, %v, %v", l.org, l.kind, got, ok, err)
		}
	}
	for _, kind := range []auditstore.LogKind{auditstore.LogAudit, auditstore.LogExecutions} {
		all, err := s.LogOrgs(ctx(t), kind)
		if err != nil {
			t.Fatal(err)
		}
		orgs := ours(all, a, b)
		slices.SortFunc(orgs, func(x, y uuid.UUID) int { return bytes.Compare(x[:], y[:]) })
		want := []uuid.UUID{a, b}
		slices.SortFunc(want, func(x, y uuid.UUID) int { return bytes.Compare(x[:], y[:]) })
		if !slices.Equal(orgs, want) {
			t.Errorf("LogOrgs(%s) = %v, want %v", kind, orgs, want)
		}
	}
	for _, kind := range []auditstore.LogKind{auditstore.LogAudit, auditstore.LogExecutions} {
		heads, err := s.LogHeads(ctx(t), kind)
		if err != nil {
			t.Fatal(err)
		}
		maps.DeleteFunc(heads, func(o uuid.UUID, _ int64) bool { return o != a && o != b })
		want := map[uuid.UUID]int64{}
		for _, l := range logs {
			if l.kind == kind {
				want[l.org] = int64(len(l.m.Leaves))
			}
		}
		if !maps.Equal(heads, want) {
			t.Errorf("LogHeads(%s) = %v, want %v", kind, heads, want)
		}
	}
	// A log that grows: LogHeads reads its new size (in ClickHouse, the
	// largest of the head rows of unmerged parts).
	more, moreHashes := logs[0].m.Add(t, 4)
	appendLog(t, s, logs[0].org, logs[0].kind, more, moreHashes)
	if heads, err := s.LogHeads(ctx(t), logs[0].kind); err != nil || heads[logs[0].org] != int64(len(logs[0].m.Leaves)) || heads[b] != int64(len(logs[2].m.Leaves)) {
		t.Errorf("LogHeads after an append = %v, %v; want %s at %d", heads, err, logs[0].org, len(logs[0].m.Leaves))
	}
	if _, err := s.LogHeads(ctx(t), 7); !errors.Is(err, auditstore.ErrInvalidQuery) {
		t.Errorf("LogHeads(7) = %v", err)
	}
	if _, err := s.LogOrgs(ctx(t), 7); !errors.Is(err, auditstore.ErrInvalidQuery) {
		t.Errorf("LogOrgs(7) = %v", err)
	}
	if _, err := s.LeafIndexes(ctx(t), a, auditstore.LogAudit, make([]uuid.UUID, auditstore.MaxLimit+1)); !errors.Is(err, auditstore.ErrInvalidQuery) {
		t.Errorf("LeafIndexes of %d ids = %v", auditstore.MaxLimit+1, err)
	}
}

// ours keeps of orgs those among mine (the location may be shared with
// other cases' organizations).
func ours(orgs []uuid.UUID, mine ...uuid.UUID) []uuid.UUID {
	return slices.DeleteFunc(slices.Clone(orgs), func(o uuid.UUID) bool { return !slices.Contains(mine, o) })
}

// testLogAppendMany: AppendLogs appends to several logs in one call, each
// as AppendLog would: a refused append (a gap, an event the log holds, a
// log twice) is named in the error and leaves its log as it was, while
// the others are written; a call repeated is a no-op, and one that
// repeats some leaves and adds others appends the new ones.
func testLogAppendMany(t *testing.T, open Opener) {
	s := logStore(t, mustOpen(t, open))
	la, ok := s.(auditstore.LogAppender)
	if !ok {
		t.Fatalf("%T appends to one log at a time only", s)
	}
	type log struct {
		org  uuid.UUID
		kind auditstore.LogKind
		m    *LogModel
	}
	logs := []*log{{uuid.New(), auditstore.LogAudit, NewLogModel()}, {uuid.New(), auditstore.LogAudit, NewLogModel()}}
	logs = append(logs, &log{logs[0].org, auditstore.LogExecutions, NewLogModel()})
	check := func() {
		t.Helper()
		for _, l := range logs {
			checkHead(t, s, l.org, l.kind, l.m)
			n := int64(len(l.m.Leaves))
			if n == 0 {
				continue
			}
			r := auditstore.LogHashReader(ctx(t), s, l.org, l.kind)
			if got, err := tlog.TreeHash(n, r); err != nil || got != l.m.Root(t, n) {
				t.Fatalf("log %s/%s: TreeHash(%d) = %v, %v; want the model's", l.org, l.kind, n, got, err)
			}
			got, err := s.LeafIndexes(ctx(t), l.org, l.kind, []uuid.UUID{l.m.Leaves[n-1].EventID})
			if err != nil || got[l.m.Leaves[n-1].EventID] != n-1 {
				t.Fatalf("log %s/%s: LeafIndexes of the last leaf = %v, %v", l.org, l.kind, got, err)
			}
		}
	}
	var first []auditstore.LogAppend
	for i, l := range logs {
		leaves, hashes := l.m.Add(t, 10+i*300) // one log past a tile of 256
		first = append(first, auditstore.LogAppend{Org: l.org, Kind: l.kind, Leaves: leaves, Hashes: hashes})
	}
	if err := la.AppendLogs(ctx(t), first); err != nil {
		t.Fatalf("AppendLogs: %v", err)
	}
	check()
	if err := la.AppendLogs(ctx(t), first); err != nil { // the same again
		t.Fatalf("AppendLogs again: %v", err)
	}
	check()

	// Log 0 grows; log 1 skips a leaf (a gap); log 2 appends an event it
	// holds already: only log 0 is written.
	a0, h0 := logs[0].m.Add(t, 7)
	gap := logs[1].m.Fork()
	gap.Add(t, 1)
	a1, h1 := gap.Add(t, 3)
	held := logs[2].m.Fork()
	a2, h2 := held.AddEvents(t, logs[2].m.Leaves[3].EventID)
	err := la.AppendLogs(ctx(t), []auditstore.LogAppend{
		{Org: logs[0].org, Kind: logs[0].kind, Leaves: a0, Hashes: h0},
		{Org: logs[1].org, Kind: logs[1].kind, Leaves: a1, Hashes: h1},
		{Org: logs[2].org, Kind: logs[2].kind, Leaves: a2, Hashes: h2},
	})
	if !errors.Is(err, auditstore.ErrLogConflict) {
		t.Fatalf("AppendLogs with a gap and a held event: %v, want ErrLogConflict", err)
	}
	for _, l := range logs[1:] {
		if !bytes.Contains([]byte(err.Error()), []byte(l.org.String())) {
			t.Errorf("the error does not name the log of %s: %v", l.org, err)
		}
	}
	check()

	// A log twice in one call is refused, the other written.
	b0, bh0 := logs[0].m.Add(t, 2)
	b1, bh1 := logs[1].m.Add(t, 2)
	err = la.AppendLogs(ctx(t), []auditstore.LogAppend{
		{Org: logs[1].org, Kind: logs[1].kind, Leaves: b1, Hashes: bh1},
		{Org: logs[1].org, Kind: logs[1].kind, Leaves: b1, Hashes: bh1},
		{Org: logs[0].org, Kind: logs[0].kind, Leaves: b0, Hashes: bh0},
	})
	if !errors.Is(err, auditstore.ErrInvalidQuery) {
		t.Fatalf("AppendLogs with a log twice: %v, want ErrInvalidQuery", err)
	}
	check()

	// Overlapping: log 0 repeats its last 5 leaves and adds 3; log 2 adds
	// its first after the refusal.
	old := int64(len(logs[0].m.Leaves))
	logs[0].m.Add(t, 3)
	c2, ch2 := logs[2].m.Add(t, 4)
	if err := la.AppendLogs(ctx(t), []auditstore.LogAppend{
		{Org: logs[0].org, Kind: logs[0].kind, Leaves: logs[0].m.Leaves[old-5:], Hashes: logs[0].m.HashesOf(old-5, old+3)},
		{Org: logs[2].org, Kind: logs[2].kind, Leaves: c2, Hashes: ch2},
	}); err != nil {
		t.Fatalf("AppendLogs overlapping: %v", err)
	}
	check()
}

// testLogCheckpointsMany: SaveCheckpoints stores the checkpoints of several
// logs at once, each as SaveCheckpoint would: one whose root is not the
// log's, whose size is above the log's, or of no log is refused, alone.
func testLogCheckpointsMany(t *testing.T, open Opener) {
	s := logStore(t, mustOpen(t, open))
	cs, ok := s.(auditstore.CheckpointSaver)
	if !ok {
		t.Fatalf("%T saves one checkpoint at a time only", s)
	}
	a, b := uuid.New(), uuid.New()
	ma, mb := NewLogModel(), NewLogModel()
	la, ha := ma.Add(t, 10)
	appendLog(t, s, a, auditstore.LogAudit, la, ha)
	lb, hb := mb.Add(t, 4)
	appendLog(t, s, b, auditstore.LogExecutions, lb, hb)
	at := time.Now().Truncate(time.Millisecond).UTC()
	cp := func(m *LogModel, size int64) auditstore.Checkpoint {
		return auditstore.Checkpoint{Size: size, Root: m.Root(t, size), Time: at, KeyID: "k", Note: []byte("note")}
	}
	wrong := cp(ma, 7)
	wrong.Root = ma.Root(t, 6)
	above := cp(mb, 4)
	above.Size = 5
	errs := cs.SaveCheckpoints(ctx(t), []auditstore.LogCheckpoint{
		{Org: a, Kind: auditstore.LogAudit, Checkpoint: cp(ma, 10)},
		{Org: b, Kind: auditstore.LogExecutions, Checkpoint: cp(mb, 3)},
		{Org: a, Kind: auditstore.LogAudit, Checkpoint: wrong},
		{Org: b, Kind: auditstore.LogExecutions, Checkpoint: above},
		{Org: uuid.Nil, Kind: auditstore.LogAudit, Checkpoint: cp(ma, 1)},
	})
	if len(errs) != 5 || errs[0] != nil || errs[1] != nil || !errors.Is(errs[2], auditstore.ErrLogConflict) ||
		!errors.Is(errs[3], auditstore.ErrLogConflict) || !errors.Is(errs[4], auditstore.ErrInvalidQuery) {
		t.Fatalf("SaveCheckpoints = %v", errs)
	}
	for _, c := range []struct {
		org  uuid.UUID
		kind auditstore.LogKind
		size int64
		want bool
	}{{a, auditstore.LogAudit, 10, true}, {b, auditstore.LogExecutions, 3, true}, {a, auditstore.LogAudit, 7, false}, {b, auditstore.LogExecutions, 5, false}} {
		got, ok, err := s.CheckpointAt(ctx(t), c.org, c.kind, c.size)
		if err != nil || ok != c.want || ok && (got.Note == nil || got.KeyID != "k") {
			t.Errorf("CheckpointAt(%s, %d) = %+v, %v, %v; want found %v", c.org, c.size, got, ok, err, c.want)
		}
	}
}
