package clickhouse_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	ch "github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/google/uuid"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/auditrail/auditrail/internal/auditstore"
	"github.com/auditrail/auditrail/internal/auditstore/storetest"
)

// The log's hot reads are reads of the primary keys, not of the log: the
// hashes of a proof, the leaf indexes of a page (random v4 ids: a granule
// of 64 rows each), a proof's leaf and tile (LeafTile), the head, a
// checkpoint and the latest one read a few granules, of a
// log of 100k leaves (200k hashes, in about 400 tiles) beside another
// organization's.
func TestLogReadsByKey(t *testing.T) {
	s, dsn := openStore(t)
	ctx := context.Background()
	const n = 100_000
	org := uuid.New()
	storetest.BuildLog(t, s, uuid.New(), auditstore.LogAudit, n/2, 10_000)
	m := storetest.BuildLog(t, s, org, auditstore.LogAudit, n, 10_000)
	if err := s.SaveCheckpoint(ctx, org, auditstore.LogAudit, auditstore.Checkpoint{Size: n, Root: m.Root(t, n)}); err != nil {
		t.Fatal(err)
	}
	// One part per table, so that the bounds are per part (a read by key
	// reads a granule or so per key asked in each part).
	conn := rawConn(t, dsn)
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

// The checkpoints of a round, many logs, are checked against their stored
// trees in one read of log_tiles (one query per log read the same granule
// once each: a third of the server's reads under a steady load); a wrong
// root among them is refused, the others stored.
func TestSaveCheckpointsReadsTilesOnce(t *testing.T) {
	s, dsn := openStore(t)
	ctx := context.Background()
	const logs, n = 30, 300
	var cps []auditstore.LogCheckpoint
	for i := range logs {
		org := uuid.New()
		m := storetest.BuildLog(t, s, org, auditstore.LogAudit, n, n)
		root := m.Root(t, n-int64(i))
		if i == 7 {
			root[0] ^= 1
		}
		cps = append(cps, auditstore.LogCheckpoint{Org: org, Kind: auditstore.LogAudit,
			Checkpoint: auditstore.Checkpoint{Size: n - int64(i), Root: root, Time: time.Now().UTC().Truncate(time.Millisecond)}})
	}
	conn := rawConn(t, dsn)
	if err := conn.Exec(ctx, "OPTIMIZE TABLE log_tiles FINAL"); err != nil {
		t.Fatal(err)
	}
	var rows atomic.Uint64
	qctx := ch.Context(ctx, ch.WithProgress(func(p *ch.Progress) { rows.Add(p.Rows) }))
	errs := s.SaveCheckpoints(qctx, cps)
	for i, err := range errs {
		if (i == 7) != errors.Is(err, auditstore.ErrLogConflict) || i != 7 && err != nil {
			t.Fatalf("checkpoint %d: %v", i, err)
		}
	}
	for i, c := range cps {
		got, ok, err := s.LatestCheckpoint(ctx, c.Org, c.Kind)
		if err != nil || ok != (i != 7) || ok && got.Root != c.Checkpoint.Root {
			t.Fatalf("checkpoint %d stored: %v, %v", i, ok, err)
		}
	}
	// The heads (a granule), the tiles (a granule or two: every log's
	// tiles are in the first of this part), the insert.
	t.Logf("read %d rows", rows.Load())
	if max := uint64(4 * 256); rows.Load() > max {
		t.Errorf("read %d rows, more than %d: the logs' tiles read one query each", rows.Load(), max)
	}
}

// rawConn is a connection of the test to the server at dsn, closed after
// it.
func rawConn(t *testing.T, dsn string) driver.Conn {
	t.Helper()
	opts, err := ch.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := ch.Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}
