package tlog_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"testing"

	xtlog "golang.org/x/mod/sumdb/tlog"

	"github.com/auditrail/auditrail/internal/tlog"
)

func h(s string) tlog.Hash {
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != 32 {
		panic(s)
	}
	return tlog.Hash(b)
}

// The RFC 6962 test tree of certificate-transparency (as published in
// transparency-dev/merkle's proof tests): leaf inputs, the roots of the
// first 1..8 leaves, and inclusion and consistency proofs. Indexes here
// are 0-based (the source lists leaves 1-based).
var (
	rfcLeaves = []string{"", "00", "10", "2021", "3031", "40414243", "5051525354555657", "606162636465666768696a6b6c6d6e6f"}
	rfcRoots  = []tlog.Hash{
		h("6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d"),
		h("fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125"),
		h("aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77"),
		h("d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"),
		h("4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4"),
		h("76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef"),
		h("ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c"),
		h("5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328"),
	}
	rfcInclusion = []struct {
		index, size int64
		proof       []tlog.Hash
	}{
		{0, 8, []tlog.Hash{h("96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7"), h("5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e"), h("6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4")}},
		{5, 8, []tlog.Hash{h("bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b"), h("ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0"), h("d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7")}},
		{2, 3, []tlog.Hash{h("fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125")}},
		{1, 5, []tlog.Hash{h("6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d"), h("5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e"), h("bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b")}},
		{0, 1, []tlog.Hash{}},
	}
	rfcConsistency = []struct {
		from, to int64
		proof    []tlog.Hash
	}{
		{1, 8, []tlog.Hash{h("96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7"), h("5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e"), h("6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4")}},
		{6, 8, []tlog.Hash{h("0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a"), h("ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0"), h("d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7")}},
		{2, 5, []tlog.Hash{h("5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e"), h("bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b")}},
		{6, 7, []tlog.Hash{h("0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a"), h("b08693ec2e721597130641e8211e7eedccb4c26413963eee6c1e2ed16ffb1a5f"), h("d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7")}},
	}
)

func rfcLog(t *testing.T) *tlog.MemoryLog {
	t.Helper()
	var m tlog.MemoryLog
	for i, s := range rfcLeaves {
		b, _ := hex.DecodeString(s)
		if _, err := m.Append(tlog.LeafHash(b)); err != nil {
			t.Fatal(err)
		}
		if got := m.Root(); got != rfcRoots[i] {
			t.Fatalf("root of %d leaves %x, want %x", i+1, got, rfcRoots[i])
		}
	}
	return &m
}

func TestRFC6962Vectors(t *testing.T) {
	ctx := context.Background()
	m := rfcLog(t)
	if tlog.EmptyRoot != h("e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855") {
		t.Fatal("empty root")
	}
	for _, tc := range rfcInclusion {
		t.Run(fmt.Sprintf("inclusion %d of %d", tc.index, tc.size), func(t *testing.T) {
			p, err := tlog.InclusionProof(ctx, m, tc.size, tc.index)
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(p) != fmt.Sprint(tc.proof) {
				t.Fatalf("proof %v, want %v", p, tc.proof)
			}
			b, _ := hex.DecodeString(rfcLeaves[tc.index])
			leaf := tlog.LeafHash(b)
			root := rfcRoots[tc.size-1]
			if err := tlog.VerifyInclusion(tc.size, root, tc.index, leaf, tc.proof); err != nil {
				t.Fatal(err)
			}
			// Each corruption fails.
			bad := map[string]func() error{
				"other index": func() error { return tlog.VerifyInclusion(tc.size, root, (tc.index+1)%tc.size, leaf, tc.proof) },
				"other leaf": func() error {
					return tlog.VerifyInclusion(tc.size, root, tc.index, tlog.LeafHash([]byte("x")), tc.proof)
				},
				"other root": func() error { return tlog.VerifyInclusion(tc.size, tlog.EmptyRoot, tc.index, leaf, tc.proof) },
				"extra hash": func() error {
					return tlog.VerifyInclusion(tc.size, root, tc.index, leaf, append(clone(tc.proof), root))
				},
				"index out": func() error { return tlog.VerifyInclusion(tc.size, root, tc.size, leaf, tc.proof) },
			}
			if len(tc.proof) > 0 {
				bad["flipped bit"] = func() error {
					p := clone(tc.proof)
					p[0][0] ^= 8
					return tlog.VerifyInclusion(tc.size, root, tc.index, leaf, p)
				}
				bad["short"] = func() error { return tlog.VerifyInclusion(tc.size, root, tc.index, leaf, tc.proof[1:]) }
			}
			for name, f := range bad {
				if tc.size == 1 && name == "other index" {
					continue
				}
				if err := f(); err == nil {
					t.Errorf("%s: verified", name)
				}
			}
		})
	}
	for _, tc := range rfcConsistency {
		t.Run(fmt.Sprintf("consistency %d to %d", tc.from, tc.to), func(t *testing.T) {
			p, err := tlog.ConsistencyProof(ctx, m, tc.from, tc.to)
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(p) != fmt.Sprint(tc.proof) {
				t.Fatalf("proof %v, want %v", p, tc.proof)
			}
			r1, r2 := rfcRoots[tc.from-1], rfcRoots[tc.to-1]
			if err := tlog.VerifyConsistency(tc.from, r1, tc.to, r2, tc.proof); err != nil {
				t.Fatal(err)
			}
			p2 := clone(tc.proof)
			p2[len(p2)-1][3] ^= 16
			for name, err := range map[string]error{
				"swapped roots": tlog.VerifyConsistency(tc.from, r2, tc.to, r1, tc.proof),
				"empty proof":   tlog.VerifyConsistency(tc.from, r1, tc.to, r2, nil),
				"flipped bit":   tlog.VerifyConsistency(tc.from, r1, tc.to, r2, p2),
				"other from":    tlog.VerifyConsistency(tc.from-1, r1, tc.to, r2, tc.proof),
				"rolled back":   tlog.VerifyConsistency(tc.to, r2, tc.from, r1, tc.proof),
			} {
				if err == nil {
					t.Errorf("%s: verified", name)
				}
			}
		})
	}
}

func clone(p []tlog.Hash) []tlog.Hash { return append([]tlog.Hash(nil), p...) }

// RootOf, ParallelRootOf, MemoryLog and x/mod's TreeHash agree on every
// size up to 300 and on sizes around the parallel chunking; every
// inclusion and consistency proof of a small log verifies.
func TestRootsAgree(t *testing.T) {
	ctx := context.Background()
	var m tlog.MemoryLog
	var leaves []tlog.Hash
	sizes := map[int]bool{1<<15 + 1: true, 1 << 16: true, 3<<15 + 7: true}
	for n := 1; n <= 3<<15+7; n++ {
		leaf := tlog.Hash(sha256.Sum256(fmt.Appendf(nil, "%d", n)))
		leaves = append(leaves, leaf)
		if _, err := m.Append(leaf); err != nil {
			t.Fatal(err)
		}
		if n > 300 && !sizes[n] {
			continue
		}
		want, err := xtlog.TreeHash(int64(n), xtlog.HashReaderFunc(func(ix []int64) ([]xtlog.Hash, error) { return m.ReadHashes(ctx, ix) }))
		if err != nil {
			t.Fatal(err)
		}
		if got := m.Root(); got != want {
			t.Fatalf("%d: MemoryLog root", n)
		}
		if got := tlog.RootOf(clone(leaves)); got != want {
			t.Fatalf("%d: RootOf", n)
		}
		if got := tlog.ParallelRootOf(clone(leaves), 3); got != want {
			t.Fatalf("%d: ParallelRootOf", n)
		}
		if got, _ := tlog.TreeHash(ctx, &m, int64(n)); got != want {
			t.Fatalf("%d: TreeHash", n)
		}
	}
	roots := make([]tlog.Hash, 40)
	for n := range roots {
		roots[n], _ = tlog.TreeHash(ctx, &m, int64(n))
	}
	for size := int64(1); size < 40; size++ {
		for i := range size {
			p, err := tlog.InclusionProof(ctx, &m, size, i)
			if err != nil {
				t.Fatal(err)
			}
			if err := tlog.VerifyInclusion(size, roots[size], i, leaves[i], p); err != nil {
				t.Fatalf("inclusion %d of %d: %v", i, size, err)
			}
		}
		for from := range size + 1 {
			p, err := tlog.ConsistencyProof(ctx, &m, from, size)
			if err != nil {
				t.Fatal(err)
			}
			if err := tlog.VerifyConsistency(from, roots[from], size, roots[size], p); err != nil {
				t.Fatalf("consistency %d to %d: %v", from, size, err)
			}
		}
	}
	if _, err := tlog.InclusionProof(ctx, &m, 5, 5); !errors.Is(err, tlog.ErrInvalidArgument) {
		t.Fatalf("inclusion of leaf 5 in 5: %v", err)
	}
	if _, err := tlog.ConsistencyProof(ctx, &m, 6, 5); !errors.Is(err, tlog.ErrInvalidArgument) {
		t.Fatalf("consistency 6 to 5: %v", err)
	}
}

// StoredHashes over a HashReader store gives the same stored hashes as the
// MemoryLog: what a store keeps beside its entries.
func TestStoredHashes(t *testing.T) {
	ctx := context.Background()
	var m tlog.MemoryLog
	var stored []tlog.Hash
	r := readerFunc(func(ix []int64) ([]tlog.Hash, error) {
		out := make([]tlog.Hash, len(ix))
		for i, x := range ix {
			out[i] = stored[x]
		}
		return out, nil
	})
	for n := range int64(100) {
		leaf := tlog.LeafHash(fmt.Appendf(nil, "entry %d", n))
		if tlog.StoredHashIndex(n) != int64(len(stored)) {
			t.Fatalf("StoredHashIndex(%d) = %d, have %d", n, tlog.StoredHashIndex(n), len(stored))
		}
		hs, err := tlog.StoredHashes(ctx, r, n, leaf)
		if err != nil {
			t.Fatal(err)
		}
		stored = append(stored, hs...)
		mh, _ := m.Append(leaf)
		if fmt.Sprint(hs) != fmt.Sprint(mh) {
			t.Fatalf("%d: stored hashes differ", n)
		}
	}
	root, _ := tlog.TreeHash(ctx, r, 100)
	if root != m.Root() {
		t.Fatal("roots differ")
	}
}

type readerFunc func([]int64) ([]tlog.Hash, error)

func (f readerFunc) ReadHashes(_ context.Context, ix []int64) ([]tlog.Hash, error) { return f(ix) }
