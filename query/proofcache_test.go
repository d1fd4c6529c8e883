package query

import (
	"testing"

	"github.com/google/uuid"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/auditrail/auditrail/internal/auditstore"
)

// The cache never counts more bytes than its bound, evicts the least
// recently used, and answers what it was given.
func TestProofCacheBound(t *testing.T) {
	for _, entries := range []int64{0, 1, 7, 100} {
		c := newProofCache(entries*cacheEntryBytes + cacheEntryBytes/2)
		org := uuid.New()
		for i := range int64(5000) {
			h := [32]byte{byte(i), byte(i >> 8)}
			c.addHash(org, auditstore.LogAudit, i, h)
			if i%3 == 0 {
				c.addLeaf(org, auditstore.LogExecutions, uuid.New(), i)
			}
			used, n := c.size()
			if used > c.max || int64(n) > entries || used != int64(n)*cacheEntryBytes {
				t.Fatalf("bound %d entries: %d bytes, %d entries after %d adds", entries, used, n, i)
			}
		}
		if entries == 0 {
			continue
		}
		// The last hash added is there; the first is long gone.
		out, found := make([][32]byte, 2), make([]bool, 2)
		c.hashes(org, auditstore.LogAudit, []int64{4999, 0}, out, found)
		if !found[0] || out[0] != [32]byte{byte(4999 % 256), byte(4999 >> 8)} || found[1] {
			t.Fatalf("bound %d: found %v", entries, found)
		}
	}
	// A hit keeps an entry: with room for 2, touching a keeps it over b.
	c := newProofCache(2 * cacheEntryBytes)
	org := uuid.New()
	c.addHash(org, auditstore.LogAudit, 1, [32]byte{1})
	c.addHash(org, auditstore.LogAudit, 2, [32]byte{2})
	out, found := make([][32]byte, 1), make([]bool, 1)
	c.hashes(org, auditstore.LogAudit, []int64{1}, out, found)
	c.addHash(org, auditstore.LogAudit, 3, [32]byte{3})
	c.hashes(org, auditstore.LogAudit, []int64{1}, out, found)
	if !found[0] {
		t.Fatal("the recently used entry was evicted")
	}
	// Heads only grow; the kinds do not mix.
	c.setHead(org, auditstore.LogAudit, 10)
	c.setHead(org, auditstore.LogAudit, 4)
	if c.head(org, auditstore.LogAudit) != 10 || c.head(org, auditstore.LogExecutions) != 0 {
		t.Fatalf("heads %d %d", c.head(org, auditstore.LogAudit), c.head(org, auditstore.LogExecutions))
	}
}

// An upper tile is the nodes of its 8 levels over its 256 base nodes (510
// hashes when full), holds the hash it is asked for, and in a tree whose
// size cuts it, only the nodes complete in that tree: hashes below
// tlog.StoredHashCount(size), which never change once the log reached it.
func TestUpperTile(t *testing.T) {
	for _, c := range []struct {
		level int
		n     int64
		size  int64
		want  int
	}{
		{8, 0, 1 << 16, 510},                       // the first level-1 tile, full
		{9, 200, 10_000_000, 510},                  // the tile of level-8 nodes 256..511
		{15, 0, 1 << 16, 510},                      // its top node
		{8, 300, 80_000, 56 + 28 + 14 + 7 + 3 + 1}, // level-8 nodes 256..311 complete, then 128..155 of level 9, …
		{16, 0, 10_000_000, 152 + 76 + 38 + 19 + 9 + 4 + 2 + 1},
		{8, 5, 6 << 8, 6 + 3 + 1},
	} {
		x := tlog.StoredHashIndex(c.level, c.n)
		got := upperTile(x, c.size)
		limit := tlog.StoredHashCount(c.size)
		has := false
		for _, y := range got {
			level, m := tlog.SplitStoredHashIndex(y)
			if y >= limit || (m+1)<<level > c.size || level/8 != c.level/8 {
				t.Errorf("tile of (%d, %d) at size %d holds (%d, %d)", c.level, c.n, c.size, level, m)
			}
			has = has || y == x
		}
		if !has {
			t.Errorf("tile of (%d, %d) at size %d does not hold it", c.level, c.n, c.size)
		}
		if c.want > 0 && len(got) != c.want {
			t.Errorf("tile of (%d, %d) at size %d: %d hashes, want %d", c.level, c.n, c.size, len(got), c.want)
		}
	}
}
