package tlog_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	sumtlog "golang.org/x/mod/sumdb/tlog"

	"github.com/auditrail/auditrail/internal/tlog"
)

// memTree is a tree's stored hashes (x/mod numbering).
type memTree []sumtlog.Hash

func (m memTree) ReadHashes(ix []int64) ([]sumtlog.Hash, error) {
	out := make([]sumtlog.Hash, len(ix))
	for i, x := range ix {
		out[i] = m[x]
	}
	return out, nil
}

func buildTree(t *testing.T, n int64) memTree {
	t.Helper()
	var m memTree
	for i := int64(0); i < n; i++ {
		hs, err := sumtlog.StoredHashes(i, []byte(fmt.Sprint("leaf ", i)), m)
		if err != nil {
			t.Fatal(err)
		}
		m = append(m, hs...)
	}
	return m
}

func hashed(m memTree, ns []tlog.Node) []tlog.HashedNode {
	out := make([]tlog.HashedNode, len(ns))
	for i, n := range ns {
		out[i] = tlog.HashedNode{Node: n, Hash: m[n.StoredIndex()]}
	}
	return out
}

// Any partition of [0, size) into covers of runs (the batch's left
// frontier, its leaves, the subtrees of the leaves it skipped, the right
// part) makes x/mod's root; a partition with a gap, an overlap, a node
// beyond the tree or a wrong hash does not.
func TestRootOfNodes(t *testing.T) {
	const max = 1100
	m := buildTree(t, max)
	rng := rand.New(rand.NewPCG(1, 2))
	for _, size := range []int64{1, 2, 3, 7, 8, 255, 256, 257, 1000, max} {
		want, err := sumtlog.TreeHash(size, m)
		if err != nil {
			t.Fatal(err)
		}
		for trial := 0; trial < 20; trial++ {
			// Random cut points split [0, size) into runs; each run is
			// covered either leaf by leaf or by Pieces.
			var nodes []tlog.HashedNode
			lo := int64(0)
			for lo < size {
				hi := min(size, lo+1+rng.Int64N(size-lo))
				if rng.IntN(2) == 0 {
					for i := lo; i < hi; i++ {
						nodes = append(nodes, hashed(m, []tlog.Node{{Level: 0, Index: i}})...)
					}
				} else {
					nodes = append(nodes, hashed(m, tlog.Pieces(lo, hi))...)
				}
				lo = hi
			}
			rng.Shuffle(len(nodes), func(i, j int) { nodes[i], nodes[j] = nodes[j], nodes[i] })
			got, err := tlog.RootOfNodes(size, nodes)
			if err != nil || got != want {
				t.Fatalf("size %d: root %v %v, want %v", size, got, err, want)
			}
			// The frontier at a cut is Pieces(0, cut) with x/mod's hashes.
			cut := rng.Int64N(size + 1)
			var under []tlog.HashedNode
			for _, n := range nodes {
				if lo, hi := n.Range(); hi <= cut || lo >= cut {
					under = append(under, n)
				}
			}
			if fr, err := tlog.Frontier(cut, under); err == nil {
				for i, p := range tlog.Pieces(0, cut) {
					if fr[i].Node != p || fr[i].Hash != m[p.StoredIndex()] {
						t.Fatalf("size %d: frontier at %d differs at %d", size, cut, i)
					}
				}
			}
		}
	}
	leaves := hashed(m, tlog.Pieces(0, 10))
	bad := func(f func([]tlog.HashedNode) []tlog.HashedNode) []tlog.HashedNode {
		c := append([]tlog.HashedNode(nil), leaves...)
		return f(c)
	}
	for name, ns := range map[string][]tlog.HashedNode{
		"gap": bad(func(c []tlog.HashedNode) []tlog.HashedNode { return c[1:] }),
		"overlap": bad(func(c []tlog.HashedNode) []tlog.HashedNode {
			return append(c, hashed(m, []tlog.Node{{Level: 0, Index: 9}})...)
		}),
		"beyond": bad(func(c []tlog.HashedNode) []tlog.HashedNode {
			return append(c, hashed(m, []tlog.Node{{Level: 0, Index: 10}})...)
		}),
		"wrong hash": bad(func(c []tlog.HashedNode) []tlog.HashedNode { c[0].Hash[0] ^= 1; return c }),
	} {
		got, err := tlog.RootOfNodes(10, ns)
		want, _ := sumtlog.TreeHash(10, m)
		if err == nil && got == want {
			t.Errorf("%s: the root was made", name)
		}
		if err != nil && !errors.Is(err, tlog.ErrProof) {
			t.Errorf("%s: %v is not ErrProof", name, err)
		}
	}
}

func FuzzRootOfNodes(f *testing.F) {
	f.Add(int64(10), []byte{0, 1, 2, 3})
	f.Fuzz(func(t *testing.T, size int64, b []byte) {
		var ns []tlog.HashedNode
		for i := 0; i+1 < len(b) && len(ns) < 64; i += 2 {
			ns = append(ns, tlog.HashedNode{Node: tlog.Node{Level: int(b[i] % 70), Index: int64(b[i+1])}})
		}
		_, _ = tlog.RootOfNodes(size, ns) // never panics
		_, _ = tlog.Frontier(size, ns)
	})
}
