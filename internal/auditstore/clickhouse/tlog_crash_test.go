package clickhouse

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/auditrail/auditrail/internal/auditstore"
	"github.com/auditrail/auditrail/internal/auditstore/storetest"
	"github.com/auditrail/auditrail/internal/testenv"
)

// An append that crashed after writing its hashes and leaves but before
// the head leaves rows above the size: no reader trusts them, and the
// retry — with the same leaves, or with other ones, and even when the
// crashed writer's clock was an hour ahead — makes the log exactly the
// retry's: tree hashes, leaf indexes (the crashed leaves' events are not
// in the log, unless appended again later) and head. The same through
// AppendLogs, beside another log's appends.
func TestLogAppendAfterCrash(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	s, err := Open(ctx, testenv.ClickHouse(t))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	t.Run("AppendLog", func(t *testing.T) {
		testAppendAfterCrash(ctx, t, s, func(org uuid.UUID, kind auditstore.LogKind, leaves []auditstore.LogLeaf, hashes []auditstore.StoredHash) error {
			return s.AppendLog(ctx, org, kind, leaves, hashes)
		})
	})
	t.Run("AppendLogs", func(t *testing.T) {
		other, om := uuid.New(), storetest.NewLogModel()
		testAppendAfterCrash(ctx, t, s, func(org uuid.UUID, kind auditstore.LogKind, leaves []auditstore.LogLeaf, hashes []auditstore.StoredHash) error {
			ol, oh := om.Add(t, 3)
			if err := s.AppendLogs(ctx, []auditstore.LogAppend{{Org: other, Kind: kind, Leaves: ol, Hashes: oh}, {Org: org, Kind: kind, Leaves: leaves, Hashes: hashes}}); err != nil {
				return err
			}
			if size, _, err := s.LogHead(ctx, other, kind); err != nil || size != int64(len(om.Leaves)) {
				t.Fatalf("the other log's head: %d, %v; want %d", size, err, len(om.Leaves))
			}
			if got, err := tlog.TreeHash(int64(len(om.Leaves)), auditstore.LogHashReader(ctx, s, other, kind)); err != nil || got != om.Root(t, int64(len(om.Leaves))) {
				t.Fatalf("the other log's tree hash: %v", err)
			}
			return nil
		})
	})
}

func testAppendAfterCrash(ctx context.Context, t *testing.T, s *Store, appendLog func(uuid.UUID, auditstore.LogKind, []auditstore.LogLeaf, []auditstore.StoredHash) error) {
	org, kind := uuid.New(), auditstore.LogAudit
	m := storetest.NewLogModel()
	leaves, hashes := m.Add(t, 10)
	if err := appendLog(org, kind, leaves, hashes); err != nil {
		t.Fatal(err)
	}
	crash := func(leaves []auditstore.LogLeaf, hashes []auditstore.StoredHash, ver uint64) {
		t.Helper()
		if err := s.writeLog(ctx, org, kind, auditstore.AppendPlan{New: leaves, NewHashes: hashes}, logWrite{ver: ver}, false); err != nil {
			t.Fatal(err)
		}
		// Another writer crashed: it held the sequencer's lease, which
		// the next sequencer takes, forgetting where its own appends
		// left the logs.
		s.ForgetLogWrites()
	}
	check := func(m *storetest.LogModel, in, out []uuid.UUID) {
		t.Helper()
		n := int64(len(m.Leaves))
		size, last, err := s.LogHead(ctx, org, kind)
		if err != nil || size != n || last != m.Leaves[n-1] {
			t.Fatalf("LogHead = %d, %+v, %v; want %d, %+v", size, last, err, n, m.Leaves[n-1])
		}
		r := auditstore.LogHashReader(ctx, s, org, kind)
		for _, k := range []int64{1, n / 2, n - 1, n} {
			if got, err := tlog.TreeHash(k, r); err != nil || got != m.Root(t, k) {
				t.Fatalf("TreeHash(%d) = %v, %v; want %v", k, got, err, m.Root(t, k))
			}
		}
		got, err := s.LeafIndexes(ctx, org, kind, append(append([]uuid.UUID{}, in...), out...))
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range in {
			want := int64(-1)
			for _, l := range m.Leaves {
				if l.EventID == id {
					want = l.Index
				}
			}
			if i, ok := got[id]; !ok || i != want {
				t.Errorf("LeafIndexes[%s] = %d, %v; want %d", id, i, ok, want)
			}
		}
		for _, id := range out {
			if i, ok := got[id]; ok {
				t.Errorf("LeafIndexes[%s] = %d: not in the log", id, i)
			}
		}
		// LeafTile (the proof route's read) agrees: the retry's leaves
		// with the retry's hashes, never a crashed row's.
		for _, id := range in {
			i, hs, ok, err := s.LeafTile(ctx, org, kind, id, n)
			if err != nil || !ok || i != got[id] {
				t.Fatalf("LeafTile(%s) = %d, %v, %v; want %d", id, i, ok, err, got[id])
			}
			lo, hi := auditstore.TileHashRange(i, n)
			if int64(len(hs)) != hi-lo {
				t.Fatalf("LeafTile(%s): %d hashes, want %d", id, len(hs), hi-lo)
			}
			for _, h := range hs {
				if tlog.Hash(h.Hash) != m.Hashes[h.Index] {
					t.Fatalf("LeafTile(%s): hash %d is not the log's", id, h.Index)
				}
			}
		}
		for _, id := range out {
			if i, _, ok, err := s.LeafTile(ctx, org, kind, id, n); err != nil || ok {
				t.Errorf("LeafTile(%s) = %d, %v, %v: not in the log", id, i, ok, err)
			}
		}
	}
	ids := func(ls []auditstore.LogLeaf) []uuid.UUID {
		out := make([]uuid.UUID, len(ls))
		for i, l := range ls {
			out[i] = l.EventID
		}
		return out
	}

	// The same leaves again: the retry completes the log.
	same, sameHashes := m.Add(t, 5)
	crash(same, sameHashes, uint64(time.Now().UnixNano()))
	if size, _, _ := s.LogHead(ctx, org, kind); size != 10 {
		t.Fatalf("a crashed append moved the head to %d", size)
	}
	if got, _ := s.LeafIndexes(ctx, org, kind, ids(same)); len(got) != 0 {
		t.Fatalf("leaves above the size are listed: %v", got)
	}
	if i, _, ok, err := s.LeafTile(ctx, org, kind, same[0].EventID, 10); err != nil || ok {
		t.Fatalf("LeafTile finds a leaf above the size: %d, %v, %v", i, ok, err)
	}
	if err := appendLog(org, kind, same, sameHashes); err != nil {
		t.Fatal(err)
	}
	check(m, ids(m.Leaves), nil)

	// Other leaves (X1..X5 at 15..19), written by a clock an hour ahead.
	crashed := m.Fork()
	x, xHashes := crashed.Add(t, 5)
	crash(x, xHashes, uint64(time.Now().Add(time.Hour).UnixNano()))
	// The log goes on with Y1..Y3, then X5 (an event that the crashed
	// append had at 19) at 18, W at 19 and X2 at 20.
	y, yHashes := m.Add(t, 3)
	if err := appendLog(org, kind, y, yHashes); err != nil {
		t.Fatal(err)
	}
	check(m, ids(m.Leaves), ids(x))
	x5, x5Hashes := m.AddEvents(t, x[4].EventID)
	if err := appendLog(org, kind, x5, x5Hashes); err != nil {
		t.Fatal(err)
	}
	check(m, ids(m.Leaves), ids(x[:4]))
	w, wHashes := m.Add(t, 1)
	x2, x2Hashes := m.AddEvents(t, x[1].EventID)
	if err := appendLog(org, kind, append(w, x2...), append(wHashes, x2Hashes...)); err != nil {
		t.Fatal(err)
	}
	check(m, ids(m.Leaves), []uuid.UUID{x[0].EventID, x[2].EventID, x[3].EventID})
	// Only hashes written (a crash between the inserts), by a clock an
	// hour ahead, then other leaves: the retry's hashes win.
	hcrashed := m.Fork()
	_, hHashes := hcrashed.Add(t, 4)
	crash(nil, hHashes, uint64(time.Now().Add(time.Hour).UnixNano()))
	v, vHashes := m.Add(t, 4)
	if err := appendLog(org, kind, v, vHashes); err != nil {
		t.Fatal(err)
	}
	check(m, ids(m.Leaves), []uuid.UUID{x[0].EventID, x[2].EventID, x[3].EventID})
	// And the whole log appended again is a no-op.
	if err := appendLog(org, kind, m.Leaves, m.HashesOf(0, int64(len(m.Leaves)))); err != nil {
		t.Fatal(err)
	}
	check(m, ids(m.Leaves), []uuid.UUID{x[0].EventID, x[2].EventID, x[3].EventID})
}
