package tlog

import (
	"cmp"
	"fmt"
	"slices"
)

// Compact ranges: a run of leaves [lo, hi) is covered by the fewest aligned
// complete subtrees (Pieces); a tree of size n is partitioned by any such covers of
// consecutive runs from 0 to n, and its root is computed from the
// partition alone. A delivery batch proves its entries this way: the
// receiver hashes the leaves it received, the batch gives the subtrees of
// everything else, and the root they make must be the checkpoint's.

// HashedNode is a complete subtree with its hash.
type HashedNode struct {
	Node
	Hash Hash
}

// MaxCompactNodes bounds the nodes RootOfNodes takes.
const MaxCompactNodes = 1 << 20

// RootOfNodes computes the root of the tree of size leaves from nodes
// that partition [0, size) (in any order): each must be an aligned
// subtree, together they must cover every leaf exactly once. The
// partition is merged into the tree's largest complete subtrees, which
// are folded from the right as RFC 6962 (and TreeHash) does.
func RootOfNodes(size int64, nodes []HashedNode) (Hash, error) {
	if size <= 0 {
		return Hash{}, fmt.Errorf("%w: a tree of %d leaves has no root to prove", ErrInvalidArgument, size)
	}
	if len(nodes) > MaxCompactNodes {
		return Hash{}, fmt.Errorf("%w: %d nodes (at most %d)", ErrTooLarge, len(nodes), MaxCompactNodes)
	}
	ns := slices.Clone(nodes)
	for _, n := range ns {
		if n.Level < 0 || n.Level > 62 || n.Index < 0 || n.Index > (size-1)>>n.Level {
			return Hash{}, fmt.Errorf("%w: node (level %d, index %d) is outside a tree of %d leaves", ErrProof, n.Level, n.Index, size)
		}
	}
	sortNodes(ns)
	stack, err := merge(ns, size)
	if err != nil {
		return Hash{}, err
	}
	// The stack is now the tree's largest complete subtrees, left to
	// right (Pieces(0, size)); fold them from the right.
	want := Pieces(0, size)
	if len(stack) != len(want) {
		return Hash{}, fmt.Errorf("%w: the nodes do not merge into the tree's subtrees", ErrProof)
	}
	for i := range want {
		if stack[i].Node != want[i] {
			return Hash{}, fmt.Errorf("%w: the nodes do not merge into the tree's subtrees", ErrProof)
		}
	}
	h := stack[len(stack)-1].Hash
	for i := len(stack) - 2; i >= 0; i-- {
		h = NodeHash(stack[i].Hash, h)
	}
	return h, nil
}

// Frontier returns the merged subtrees of the leaves [0, hi) among nodes
// (which must cover [0, hi) exactly and may go beyond): the nodes of
// Pieces(0, hi) with their hashes, what a receiver keeps to check that the
// next batch continues the same tree.
func Frontier(hi int64, nodes []HashedNode) ([]HashedNode, error) {
	var in []HashedNode
	for _, n := range nodes {
		if _, e := n.Range(); e <= hi {
			in = append(in, n)
		}
	}
	sortNodes(in)
	return merge(in, hi)
}

func sortNodes(ns []HashedNode) {
	slices.SortFunc(ns, func(a, b HashedNode) int {
		alo, _ := a.Range()
		blo, _ := b.Range()
		return cmp.Compare(alo, blo)
	})
}

// merge merges sorted nodes that must cover [0, hi) exactly, each
// right child into its left sibling, into the subtrees of Pieces(0, hi).
func merge(ns []HashedNode, hi int64) ([]HashedNode, error) {
	var stack []HashedNode
	next := int64(0)
	for _, n := range ns {
		lo, end := n.Range()
		switch {
		case lo < next:
			return nil, fmt.Errorf("%w: leaves %d..%d are covered twice", ErrProof, lo, min(next, end)-1)
		case lo > next:
			return nil, fmt.Errorf("%w: leaves %d..%d are not covered", ErrProof, next, lo-1)
		case end > hi:
			return nil, fmt.Errorf("%w: node (level %d, index %d) ends beyond leaf %d", ErrProof, n.Level, n.Index, hi-1)
		}
		next = end
		stack = append(stack, n)
		for len(stack) >= 2 {
			l, r := stack[len(stack)-2], stack[len(stack)-1]
			if l.Level != r.Level || l.Index%2 != 0 || r.Index != l.Index+1 {
				break
			}
			stack = append(stack[:len(stack)-2], HashedNode{Node{Level: l.Level + 1, Index: l.Index / 2}, NodeHash(l.Hash, r.Hash)})
		}
	}
	if next != hi {
		return nil, fmt.Errorf("%w: leaves %d..%d are not covered", ErrProof, next, hi-1)
	}
	return stack, nil
}
