package storetest

import (
	"context"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/auditrail/auditrail/internal/auditstore"
)

// BuildLog appends n leaves to the log (org, kind) of s, in appends of
// batch leaves (a sequencer's), and returns the model of the log.
func BuildLog(tb testing.TB, s auditstore.LogStore, org uuid.UUID, kind auditstore.LogKind, n, batch int) *LogModel {
	tb.Helper()
	m := NewLogModel()
	for len(m.Leaves) < n {
		leaves, hashes := m.Add(tb, min(batch, n-len(m.Leaves)))
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		err := s.AppendLog(ctx, org, kind, leaves, hashes)
		cancel()
		if err != nil {
			tb.Fatalf("AppendLog at %d: %v", leaves[0].Index, err)
		}
	}
	return m
}

// BenchReadLogHashes measures ReadLogHashes as the proof route calls it:
// each operation reads the hashes of the inclusion proof of a random leaf
// in the whole log of m (about log2(n) indexes: tlog.ProveRecord's one
// read), and checks them against the model. It reports the latency's p50
// and p99 (ms) and the indexes read per operation.
func BenchReadLogHashes(b *testing.B, s auditstore.LogStore, org uuid.UUID, kind auditstore.LogKind, m *LogModel) {
	n := int64(len(m.Leaves))
	rng := rand.New(rand.NewPCG(1, 2))
	lists := make([][]int64, 512)
	for i := range lists {
		var asked []int64
		rec := tlog.HashReaderFunc(func(idx []int64) ([]tlog.Hash, error) {
			asked = append(asked, idx...)
			return m.Reader().ReadHashes(idx)
		})
		if _, err := tlog.ProveRecord(n, rng.Int64N(n), rec); err != nil {
			b.Fatal(err)
		}
		lists[i] = asked
	}
	ctx := context.Background()
	lat := make([]time.Duration, 0, b.N)
	var read int
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		idx := lists[i%len(lists)]
		t0 := time.Now()
		hs, err := s.ReadLogHashes(ctx, org, kind, idx)
		lat = append(lat, time.Since(t0))
		if err != nil {
			b.Fatal(err)
		}
		for j, x := range idx {
			if tlog.Hash(hs[j]) != m.Hashes[x] {
				b.Fatalf("hash %d differs", x)
			}
		}
		read += len(idx)
	}
	b.StopTimer()
	slices.Sort(lat)
	ms := func(q float64) float64 { return float64(lat[int(q*float64(len(lat)-1))].Microseconds()) / 1000 }
	b.ReportMetric(ms(0.50), "p50-ms")
	b.ReportMetric(ms(0.99), "p99-ms")
	b.ReportMetric(float64(read)/float64(b.N), "hashes/op")
}
