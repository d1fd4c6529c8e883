package query_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/gofiber/fiber/v2"
	"github.com/google/uuid"
	xtlog "golang.org/x/mod/sumdb/tlog"

	"github.com/auditrail/auditrail/internal/auditstore"
	"github.com/auditrail/auditrail/internal/auditstore/sqlite"
	"github.com/auditrail/auditrail/internal/httpapi"
	"github.com/auditrail/auditrail/query"
)

// proofReads counts a store's reads of the logs, and plays a log whose
// size (head) is below what it holds: the hashes above its size differ
// from the stored ones (what an append that crashed leaves in ClickHouse
// before the next one overwrites it).
type proofReads struct {
	*sqlite.Store
	size                         atomic.Int64
	tiles, hashes, leaves, heads atomic.Int64
	checkpoints                  atomic.Int64
}

func (p *proofReads) LogHead(ctx context.Context, org uuid.UUID, kind auditstore.LogKind) (int64, auditstore.LogLeaf, error) {
	p.heads.Add(1)
	return p.size.Load(), auditstore.LogLeaf{}, nil
}

func (p *proofReads) ReadLogHashes(ctx context.Context, org uuid.UUID, kind auditstore.LogKind, idx []int64) ([][32]byte, error) {
	p.hashes.Add(1)
	hs, err := p.Store.ReadLogHashes(ctx, org, kind, idx)
	for i, x := range idx {
		if err == nil && x >= xtlog.StoredHashCount(p.size.Load()) {
			hs[i][0] ^= 0xff // a leftover above the size
		}
	}
	return hs, err
}

func (p *proofReads) LeafTile(ctx context.Context, org uuid.UUID, kind auditstore.LogKind, event uuid.UUID, size int64) (int64, []auditstore.StoredHash, bool, error) {
	p.tiles.Add(1)
	return p.Store.LeafTile(ctx, org, kind, event, size)
}

func (p *proofReads) LeafIndexes(ctx context.Context, org uuid.UUID, kind auditstore.LogKind, ids []uuid.UUID) (map[uuid.UUID]int64, error) {
	p.leaves.Add(1)
	m, err := p.Store.LeafIndexes(ctx, org, kind, ids)
	for id, i := range m {
		if i >= p.size.Load() {
			delete(m, id)
		}
	}
	return m, err
}

func (p *proofReads) LatestCheckpoint(ctx context.Context, org uuid.UUID, kind auditstore.LogKind) (auditstore.Checkpoint, bool, error) {
	p.checkpoints.Add(1)
	return p.Store.LatestCheckpoint(ctx, org, kind)
}

func (p *proofReads) reset() {
	for _, c := range []*atomic.Int64{&p.tiles, &p.hashes, &p.leaves, &p.heads, &p.checkpoints} {
		c.Store(0)
	}
}

func proofApp(t *testing.T, st any, cacheBytes int64) *fiber.App {
	t.Helper()
	cfg := query.DefaultConfig()
	cfg.CursorKeys = [][]byte{[]byte("0123456789abcdef0123456789abcdef")}
	cfg.ProofCacheBytes = cacheBytes
	qs, err := query.New(cfg, st.(query.Reader), allowAll{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	app := httpapi.NewApp(nil)
	qs.Register(app)
	return app
}

// A log of 70,000 leaves (a full upper tile and a partial one): once the
// cache is warm (the upper tiles, which the first misses fetch whole, and
// the tree's right edge), the proof of an event not asked before is one
// store read (LeafTile: the leaf index and its tile) and nothing else.
// Every answer, errors included, is byte for byte the answer of a server
// without a cache and of one with a cache of 100 hashes that keeps
// evicting; proofs at an older size and after the log grows too. The
// store holds hashes above the log's size that differ (leftovers): none
// is ever served, before or after the log grows over them.
func TestProofOneReadWhenWarm(t *testing.T) {
	t.Parallel() // among the slowest of the package: they share nothing
	const n, grown = 70_000, 70_500
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "audit.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	org := uuid.New()
	ids := buildLog(t, st, org, grown)
	store := &proofReads{Store: st}
	store.size.Store(n)
	apps := map[string]*fiber.App{
		"cache":       proofApp(t, store, query.DefaultProofCacheBytes),
		"small cache": proofApp(t, store, 100*176),
		"no cache":    proofApp(t, store, -1),
	}
	get := func(name, path string) (int, string) {
		t.Helper()
		e := &logEnv{app: apps[name], nocheck: true}
		code, body := e.get(t, path)
		return code, string(body)
	}
	base := "/api/v1/orgs/" + org.String() + "/audit_logs/proof?event_id="
	same := func(path string, want int) {
		t.Helper()
		code, body := get("cache", path)
		if code != want {
			t.Fatalf("%s: %d %s, want %d", path, code, body, want)
		}
		for _, name := range []string{"small cache", "no cache"} {
			if c, b := get(name, path); c != code || b != body {
				t.Fatalf("%s:\ncache: %d %s\n%s: %d %s", path, code, body, name, c, b)
			}
		}
	}
	rng := rand.New(rand.NewPCG(5, 6))
	perm := rng.Perm(n)
	next := 0
	fresh := func() uuid.UUID { next++; return ids[perm[next-1]] }
	for range 150 { // warm
		same(fmt.Sprintf("%s%s&size=%d", base, fresh(), n), 200)
	}
	store.reset()
	const k = 100
	for range k {
		code, body := get("cache", fmt.Sprintf("%s%s&size=%d", base, fresh(), n))
		if code != 200 {
			t.Fatalf("%d %s", code, body)
		}
	}
	if store.tiles.Load() != k || store.hashes.Load() != 0 || store.leaves.Load() != 0 || store.heads.Load() != 0 {
		t.Fatalf("%d proofs read %d tiles, %d hash lists, %d leaf indexes, %d heads; want one tile each and nothing else",
			k, store.tiles.Load(), store.hashes.Load(), store.leaves.Load(), store.heads.Load())
	}
	// Errors: an unknown event (404), a size beyond the log (400), a leaf
	// beyond the size asked (400), a leaf above the log's size (404).
	same(base+uuid.NewString()+"&size=100", 404)
	same(fmt.Sprintf("%s%s&size=%d", base, ids[5], n+1), 400)
	same(fmt.Sprintf("%s%s&size=%d", base, ids[6000], 6000), 400)
	same(fmt.Sprintf("%s%s&size=%d", base, ids[n+10], n), 404)
	// Older sizes, then the log grows over the leftovers.
	for _, size := range []int64{1, 255, 256, 257, 65_536, 65_537, 69_999} {
		for range 5 {
			same(fmt.Sprintf("%s%s&size=%d", base, ids[rng.Int64N(size)], size), 200)
		}
	}
	store.size.Store(grown)
	for range 50 {
		same(fmt.Sprintf("%s%s&size=%d", base, ids[rng.IntN(grown)], grown), 200)
	}
	same(fmt.Sprintf("%s%s&size=%d", base, ids[grown-1], grown), 200)
}
