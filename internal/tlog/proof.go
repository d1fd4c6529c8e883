package tlog

import (
	"context"
	"fmt"
	"sync"

	"golang.org/x/mod/sumdb/tlog"
)

// HashReader reads a log's stored hashes, numbered as
// golang.org/x/mod/sumdb/tlog.StoredHashIndex numbers them. ReadHashes
// returns one hash per index, in the order asked, or an error; never a
// partial answer.
type HashReader interface {
	ReadHashes(ctx context.Context, indexes []int64) ([]Hash, error)
}

// EmptyRoot is the root of the empty tree: SHA-256 of nothing (RFC 6962
// §2.1).
var EmptyRoot = sha256Empty

// NodeHash is SHA-256(0x01 ‖ left ‖ right).
func NodeHash(left, right Hash) Hash { return tlog.NodeHash(left, right) }

// StoredHashes returns the hashes to store when the leaf of index n (the
// log then has n leaves) is appended, their indexes being
// tlog.StoredHashIndex(0, n) and up: store them beside the entry.
func StoredHashes(ctx context.Context, r HashReader, n int64, leaf Hash) ([]Hash, error) {
	return tlog.StoredHashesForRecordHash(n, leaf, bind(ctx, r))
}

// StoredHashIndex is the index of the first stored hash of leaf n (the
// leaf hash itself); StoredHashes' hashes follow it.
func StoredHashIndex(n int64) int64 { return tlog.StoredHashIndex(0, n) }

// TreeHash is the root of the log's first size leaves.
func TreeHash(ctx context.Context, r HashReader, size int64) (Hash, error) {
	if size < 0 {
		return Hash{}, fmt.Errorf("%w: size %d", ErrInvalidArgument, size)
	}
	return tlog.TreeHash(size, bind(ctx, r))
}

// InclusionProof proves that leaf index is in the tree of size leaves.
func InclusionProof(ctx context.Context, r HashReader, size, index int64) ([]Hash, error) {
	if index < 0 || index >= size {
		return nil, fmt.Errorf("%w: leaf %d of a tree of %d", ErrInvalidArgument, index, size)
	}
	p, err := tlog.ProveRecord(size, index, bind(ctx, r))
	if err != nil {
		return nil, fmt.Errorf("tlog: inclusion proof: %w", err)
	}
	return p, nil
}

// ConsistencyProof proves that the tree of from leaves is a prefix of the
// tree of to leaves (empty when from == to or from == 0).
func ConsistencyProof(ctx context.Context, r HashReader, from, to int64) ([]Hash, error) {
	if from < 0 || from > to {
		return nil, fmt.Errorf("%w: consistency from %d to %d", ErrInvalidArgument, from, to)
	}
	if from == 0 || from == to {
		return []Hash{}, nil
	}
	p, err := tlog.ProveTree(to, from, bind(ctx, r))
	if err != nil {
		return nil, fmt.Errorf("tlog: consistency proof: %w", err)
	}
	return p, nil
}

// VerifyInclusion checks that proof shows leaf at index in the tree of
// size leaves with root root.
func VerifyInclusion(size int64, root Hash, index int64, leaf Hash, proof []Hash) error {
	if index < 0 || index >= size {
		return fmt.Errorf("%w: leaf %d of a tree of %d", ErrInvalidArgument, index, size)
	}
	if err := tlog.CheckRecord(proof, size, root, index, leaf); err != nil {
		return fmt.Errorf("%w: inclusion of leaf %d in the tree of %d: %w", ErrProof, index, size, err)
	}
	return nil
}

// VerifyConsistency checks that proof shows the tree of from leaves (root
// fromRoot) to be a prefix of the tree of to leaves (root toRoot). From 0
// (the empty tree, whose root is EmptyRoot) every tree is consistent; from
// == to needs equal roots and an empty proof.
func VerifyConsistency(from int64, fromRoot Hash, to int64, toRoot Hash, proof []Hash) error {
	switch {
	case from < 0 || from > to:
		return fmt.Errorf("%w: consistency from %d to %d", ErrInvalidArgument, from, to)
	case from == 0:
		if fromRoot != EmptyRoot || len(proof) != 0 {
			return fmt.Errorf("%w: the empty tree's root or proof", ErrProof)
		}
		return nil
	case from == to:
		if fromRoot != toRoot || len(proof) != 0 {
			return fmt.Errorf("%w: two trees of %d leaves with different roots", ErrProof, from)
		}
		return nil
	}
	if err := tlog.CheckTree(proof, to, toRoot, from, fromRoot); err != nil {
		return fmt.Errorf("%w: consistency from %d to %d: %w", ErrProof, from, to, err)
	}
	return nil
}

// bind adapts r to x/mod's HashReader, which takes no context.
func bind(ctx context.Context, r HashReader) tlog.HashReader {
	return tlog.HashReaderFunc(func(indexes []int64) ([]Hash, error) {
		hs, err := r.ReadHashes(ctx, indexes)
		if err != nil {
			return nil, err
		}
		if len(hs) != len(indexes) {
			return nil, fmt.Errorf("tlog: ReadHashes: %d hashes for %d indexes", len(hs), len(indexes))
		}
		return hs, nil
	})
}

// MemoryLog is a log held in memory: tests, and the verifier's recomputed
// trees. It is safe for concurrent use.
type MemoryLog struct {
	mu     sync.RWMutex
	size   int64
	stored []Hash
}

// Append adds leaf and returns the hashes it stored (as StoredHashes).
func (m *MemoryLog) Append(leaf Hash) ([]Hash, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	hs, err := tlog.StoredHashesForRecordHash(m.size, leaf, tlog.HashReaderFunc(m.readLocked))
	if err != nil {
		return nil, err
	}
	m.stored = append(m.stored, hs...)
	m.size++
	return hs, nil
}

// Size is the number of leaves.
func (m *MemoryLog) Size() int64 {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.size
}

// Root is the root of the whole log.
func (m *MemoryLog) Root() Hash {
	m.mu.RLock()
	defer m.mu.RUnlock()
	h, err := tlog.TreeHash(m.size, tlog.HashReaderFunc(m.readLocked))
	if err != nil {
		panic("tlog: MemoryLog lost a hash: " + err.Error())
	}
	return h
}

// ReadHashes implements HashReader.
func (m *MemoryLog) ReadHashes(_ context.Context, indexes []int64) ([]Hash, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.readLocked(indexes)
}

func (m *MemoryLog) readLocked(indexes []int64) ([]Hash, error) {
	out := make([]Hash, len(indexes))
	for i, x := range indexes {
		if x < 0 || x >= int64(len(m.stored)) {
			return nil, fmt.Errorf("%w: stored hash %d of %d", ErrInvalidArgument, x, len(m.stored))
		}
		out[i] = m.stored[x]
	}
	return out, nil
}

// RootOf computes the root of the tree whose leaves are leaves, in place:
// leaves is overwritten. It is TreeHash without stored hashes (RFC 6962's
// MTH, built bottom-up: the last node of an odd level moves up as it is).
func RootOf(leaves []Hash) Hash {
	n := len(leaves)
	if n == 0 {
		return EmptyRoot
	}
	for n > 1 {
		half := n / 2
		for i := range half {
			leaves[i] = tlog.NodeHash(leaves[2*i], leaves[2*i+1])
		}
		if n%2 == 1 {
			leaves[half] = leaves[n-1]
			half++
		}
		n = half
	}
	return leaves[0]
}

// ParallelRootOf is RootOf on workers goroutines: chunks of a power of two
// leaves each have their subtree computed apart, then the chunk roots are
// combined (the same tree: a chunk's root is the node RootOf reaches at that
// level). leaves is overwritten.
func ParallelRootOf(leaves []Hash, workers int) Hash {
	const chunk = 1 << 14
	if workers <= 1 || len(leaves) <= 2*chunk {
		return RootOf(leaves)
	}
	nChunks := (len(leaves) + chunk - 1) / chunk
	roots := make([]Hash, nChunks)
	var wg sync.WaitGroup
	next := make(chan int, nChunks)
	for i := range nChunks {
		next <- i
	}
	close(next)
	for range workers {
		wg.Go(func() {
			for i := range next {
				roots[i] = RootOf(leaves[i*chunk : min((i+1)*chunk, len(leaves))])
			}
		})
	}
	wg.Wait()
	return RootOf(roots)
}
