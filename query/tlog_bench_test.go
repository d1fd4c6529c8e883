package query_test

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/auditrail/auditrail/internal/auditstore"
	"github.com/auditrail/auditrail/internal/auditstore/clickhouse"
	"github.com/auditrail/auditrail/internal/auditstore/sqlite"
	"github.com/auditrail/auditrail/internal/httpapi"
	"github.com/auditrail/auditrail/internal/testenv"
	"github.com/auditrail/auditrail/internal/tlog"
	"github.com/auditrail/auditrail/query"
)

// BenchmarkExportJSONL measures the JSONL export of a sequenced log of
// 50,000 entries from SQLite, through the route (rows/s reported).
func BenchmarkExportJSONL(b *testing.B) {
	const n = 50_000
	e := newLogEnv(b, n)
	for _, format := range []string{"jsonl", "csv"} {
		b.Run(format, func(b *testing.B) {
			for b.Loop() {
				req := httptest.NewRequest("GET", "/api/v1/orgs/"+e.org.String()+"/audit_logs/export?format="+format, nil)
				req.Header.Set("Authorization", "Bearer k")
				resp, err := e.app.Test(req, -1)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := io.Copy(io.Discard, resp.Body); err != nil {
					b.Fatal(err)
				}
				resp.Body.Close()
			}
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
		})
	}
}

// proofStore is a store with logs that the query server serves.
type proofStore interface {
	query.Reader
	auditstore.LogStore
}

// buildLog appends n leaves (random event ids) to org's audit log, as the
// sequencer would, and answers their event ids; no entries are written
// (the proof route reads only the log).
func buildLog(b testing.TB, st auditstore.LogStore, org uuid.UUID, n int) []uuid.UUID {
	ctx := context.Background()
	var mem tlog.MemoryLog
	ids := make([]uuid.UUID, n)
	const batch = 20_000
	for lo := 0; lo < n; lo += batch {
		hi := min(lo+batch, n)
		leaves := make([]auditstore.LogLeaf, 0, hi-lo)
		var hashes []auditstore.StoredHash
		next := tlog.StoredHashIndex(int64(lo))
		for i := lo; i < hi; i++ {
			ids[i] = uuid.New()
			leaves = append(leaves, auditstore.LogLeaf{Index: int64(i), EventID: ids[i], Key: auditstore.FeedKey{Seq: uint64(i + 1), EventID: ids[i]}})
			hs, err := mem.Append(tlog.LeafHash(ids[i][:]))
			if err != nil {
				b.Fatal(err)
			}
			for _, h := range hs {
				hashes = append(hashes, auditstore.StoredHash{Index: next, Hash: h})
				next++
			}
		}
		if err := st.AppendLog(ctx, org, auditstore.LogAudit, leaves, hashes); err != nil {
			b.Fatal(err)
		}
	}
	return ids
}

// BenchmarkProofRoute measures the inclusion proof route on a log of
// AUDITRAIL_BENCH_LEAVES leaves (default 1M): random events against the
// log's size, with the cache (its steady state: the upper levels cached,
// a random leaf's lower levels not) and without; p50/p99 reported.
func BenchmarkProofRoute(b *testing.B) {
	n := 1_000_000
	if v, err := strconv.Atoi(os.Getenv("AUDITRAIL_BENCH_LEAVES")); err == nil && v > 0 {
		n = v
	}
	stores := map[string]func(b *testing.B) proofStore{
		"sqlite": func(b *testing.B) proofStore {
			st, err := sqlite.Open(context.Background(), filepath.Join(b.TempDir(), "audit.db"))
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { st.Close() })
			return st
		},
		"clickhouse": func(b *testing.B) proofStore {
			st, err := clickhouse.Open(context.Background(), testenv.ClickHouse(b))
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { st.Close() })
			return st
		},
	}
	for _, name := range []string{"sqlite", "clickhouse"} {
		b.Run(name, func(b *testing.B) {
			st := stores[name](b)
			org := uuid.New()
			start := time.Now()
			ids := buildLog(b, st, org, n)
			b.Logf("%s: %d leaves appended in %s", name, n, time.Since(start).Round(time.Millisecond))
			for _, cache := range []int64{-1, query.DefaultProofCacheBytes} {
				b.Run(fmt.Sprintf("cache=%d", max(cache, 0)), func(b *testing.B) {
					cfg := query.DefaultConfig()
					cfg.CursorKeys = [][]byte{[]byte("0123456789abcdef0123456789abcdef")}
					cfg.ProofCacheBytes = cache
					qs, err := query.New(cfg, st, allowAll{}, nil)
					if err != nil {
						b.Fatal(err)
					}
					app := httpapi.NewApp(nil)
					qs.Register(app)
					get := func(id uuid.UUID) time.Duration {
						req := httptest.NewRequest("GET", fmt.Sprintf("/api/v1/orgs/%s/audit_logs/proof?event_id=%s&size=%d", org, id, n), nil)
						req.Header.Set("Authorization", "Bearer k")
						t0 := time.Now()
						resp, err := app.Test(req, -1)
						if err != nil {
							b.Fatal(err)
						}
						_, _ = io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
						if resp.StatusCode != 200 {
							b.Fatalf("proof: %d", resp.StatusCode)
						}
						return time.Since(t0)
					}
					// random: any leaf of the log (the worst case); recent: the
					// newest 10,000 (what a dashboard lists and verifies).
					for _, pick := range []string{"random", "recent"} {
						b.Run(pick, func(b *testing.B) {
							rng := rand.New(rand.NewPCG(1, 2))
							event := func() uuid.UUID {
								if pick == "recent" {
									return ids[n-1-rng.IntN(min(n, 10_000))]
								}
								return ids[rng.IntN(n)]
							}
							for range 2000 { // warm the cache: its steady state
								get(event())
							}
							var lat []time.Duration
							b.ResetTimer()
							for b.Loop() {
								lat = append(lat, get(event()))
							}
							slices.Sort(lat)
							b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
							b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
						})
					}
				})
			}
		})
	}
}
