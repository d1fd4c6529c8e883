package tlog_test

import (
	"crypto/sha256"
	"math/rand/v2"
	"testing"

	xtlog "golang.org/x/mod/sumdb/tlog"

	"github.com/auditrail/auditrail/internal/tlog"
)

// Pieces covers a range with complete subtrees, fewest first-fit.
func TestPieces(t *testing.T) {
	for _, tc := range []struct {
		lo, hi int64
		want   []tlog.Node
	}{
		{0, 0, nil},
		{0, 1, []tlog.Node{{0, 0}}},
		{0, 8, []tlog.Node{{3, 0}}},
		{0, 7, []tlog.Node{{2, 0}, {1, 2}, {0, 6}}},
		{5, 8, []tlog.Node{{0, 5}, {1, 3}}},
		{3, 13, []tlog.Node{{0, 3}, {2, 1}, {2, 2}, {0, 12}}},
	} {
		got := tlog.Pieces(tc.lo, tc.hi)
		if len(got) != len(tc.want) {
			t.Fatalf("Pieces(%d, %d) = %v, want %v", tc.lo, tc.hi, got, tc.want)
		}
		for i := range got {
			if got[i] != tc.want[i] {
				t.Fatalf("Pieces(%d, %d) = %v, want %v", tc.lo, tc.hi, got, tc.want)
			}
		}
	}
}

// The root of a log whose runs of leaves are replaced by the stored hashes
// of their pieces is the log's root, for any runs; a wrong piece changes it.
func TestRootWithNodes(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 200 {
		size := 1 + rng.Int64N(300)
		var stored []xtlog.Hash
		r := xtlog.HashReaderFunc(func(idx []int64) ([]xtlog.Hash, error) {
			out := make([]xtlog.Hash, len(idx))
			for i, x := range idx {
				out[i] = stored[x]
			}
			return out, nil
		})
		leaves := make([]tlog.Hash, size)
		for i := range leaves {
			leaves[i] = tlog.LeafHash(sha256.New().Sum([]byte{byte(i), byte(i >> 8)}))
			hs, err := xtlog.StoredHashesForRecordHash(int64(i), leaves[i], r)
			if err != nil {
				t.Fatal(err)
			}
			stored = append(stored, hs...)
		}
		want := tlog.RootOf(append([]tlog.Hash(nil), leaves...))
		lo := rng.Int64N(size)
		hi := lo + 1 + rng.Int64N(size-lo)
		nodes := map[tlog.Node]tlog.Hash{}
		for _, nd := range tlog.Pieces(lo, hi) {
			nodes[nd] = stored[nd.StoredIndex()]
		}
		in := append([]tlog.Hash(nil), leaves...)
		for i := lo; i < hi; i++ {
			in[i] = tlog.Hash{} // unknown
		}
		if got := tlog.RootWithNodes(append([]tlog.Hash(nil), in...), nodes); got != want {
			t.Fatalf("size %d, run %d..%d: root differs", size, lo, hi-1)
		}
		for nd := range nodes {
			nodes[nd] = tlog.Hash{1}
			break
		}
		if got := tlog.RootWithNodes(in, nodes); got == want {
			t.Fatalf("size %d, run %d..%d: a wrong piece kept the root", size, lo, hi-1)
		}
	}
}
