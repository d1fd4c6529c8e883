package clickhouse_test

import (
	"context"
	"math/rand/v2"
	"sync/atomic"
	"testing"

	ch "github.com/ClickHouse/clickhouse-go/v2"
	"github.com/google/uuid"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/auditrail/auditrail/internal/auditstore"
	"github.com/auditrail/auditrail/internal/auditstore/clickhouse"
	"github.com/auditrail/auditrail/internal/auditstore/storetest"
)

// The log's hot reads are reads of the primary keys, not of the log: the
// hashes of a proof, the leaf indexes of a page (random v4 ids: a granule
// of 64 rows each), a proof's leaf and tile (LeafTile), the head, a
// checkpoint and the latest one read a few granules, of a
// log of 100k leaves (200k hashes, in about 400 tiles) beside another
// organization's.
func TestLogReadsByKey(t *testing.T) {
	dsn := verifyNoLeaks(t)
	ctx := context.Background()
	s, err := clickhouse.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const n = 100_000
	org := uuid.New()
	storetest.BuildLog(t, s, uuid.New(), auditstore.LogAudit, n/2, 10_000)
	m := storetest.BuildLog(t, s, org, auditstore.LogAudit, n, 10_000)
	if err := s.SaveCheckpoint(ctx, org, auditstore.LogAudit, auditstore.Checkpoint{Size: n, Root: m.Root(t, n)}); err != nil {
		t.Fatal(err)
	}
	// One part per table, so that the bounds are per part (a read by key
	// reads a granule or so per key asked in each part).
	opts, err := ch.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := ch.Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for _, table := range []string{"log_tiles", "log_leaf_ids", "log_heads", "log_checkpoints"} {
		if err := conn.Exec(ctx, "OPTIMIZE TABLE "+table+" FINAL"); err != nil {
			t.Fatal(err)
		}
	}
	rng := rand.New(rand.NewPCG(3, 4))
	var proof []int64
	rec := tlog.HashReaderFunc(func(idx []int64) ([]tlog.Hash, error) {
		proof = append(proof, idx...)
		return m.Reader().ReadHashes(idx)
	})
	if _, err := tlog.ProveRecord(n, rng.Int64N(n), rec); err != nil {
		t.Fatal(err)
	}
	// The proof's hashes are in a few tiles: a granule of log_tiles each (two
	// where its segments straddle a granule's end).
	tiles := map[[2]int64]bool{}
	for _, i := range proof {
		tl := tlog.TileForIndex(auditstore.TileHeight, i)
		tiles[[2]int64{int64(tl.L), tl.N}] = true
	}
	var page []uuid.UUID
	for range 100 {
		page = append(page, m.Leaves[rng.IntN(n)].EventID)
	}
	for _, tc := range []struct {
		name string
		max  uint64
		read func(ctx context.Context) error
	}{
		{"proof hashes", uint64(len(tiles)) * 2 * 256, func(ctx context.Context) error {
			_, err := s.ReadLogHashes(ctx, org, auditstore.LogAudit, proof)
			return err
		}},
		{"leaf indexes of a page", 100*64 + 256, func(ctx context.Context) error {
			got, err := s.LeafIndexes(ctx, org, auditstore.LogAudit, page)
			if err == nil && len(got) != len(page) {
				t.Errorf("found %d of %d", len(got), len(page))
			}
			return err
		}},
		// The leaf (a granule of log_leaf_ids), then the segments of the
		// tiles above it (a granule or two of log_tiles: 425 rows read
		// here).
		{"leaf tile", 64 + 2*256, func(ctx context.Context) error {
			leaf := rng.Int64N(n)
			i, hs, ok, err := s.LeafTile(ctx, org, auditstore.LogAudit, m.Leaves[leaf].EventID, n)
			if lo, hi := auditstore.TileHashRange(leaf, n); err == nil && (!ok || i != leaf || int64(len(hs)) != hi-lo) {
				t.Errorf("LeafTile = %d, %d hashes, %v", i, len(hs), ok)
			}
			return err
		}},
		{"latest checkpoint", 2 * 256, func(ctx context.Context) error {
			cp, ok, err := s.LatestCheckpoint(ctx, org, auditstore.LogAudit)
			if err == nil && (!ok || cp.Size != n) {
				t.Errorf("LatestCheckpoint = %d, %v", cp.Size, ok)
			}
			return err
		}},
		{"head", 256, func(ctx context.Context) error {
			_, _, err := s.LogHead(ctx, org, auditstore.LogAudit)
			return err
		}},
		{"checkpoint", 256, func(ctx context.Context) error {
			_, _, err := s.CheckpointAt(ctx, org, auditstore.LogAudit, n)
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var rows atomic.Uint64
			qctx := ch.Context(ctx, ch.WithProgress(func(p *ch.Progress) { rows.Add(p.Rows) }))
			if err := tc.read(qctx); err != nil {
				t.Fatal(err)
			}
			t.Logf("read %d rows", rows.Load())
			if rows.Load() > tc.max {
				t.Errorf("read %d rows, more than %d", rows.Load(), tc.max)
			}
		})
	}
}
