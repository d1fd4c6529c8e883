package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	ch "github.com/ClickHouse/clickhouse-go/v2"
	"github.com/google/uuid"

	"github.com/auditrail/auditrail/internal/auditstore"
	"github.com/auditrail/auditrail/internal/auditstore/clickhouse"
	"github.com/auditrail/auditrail/internal/auth"
	"github.com/auditrail/auditrail/internal/chserver"
	"github.com/auditrail/auditrail/internal/httpapi"
	"github.com/auditrail/auditrail/internal/synth"
	"github.com/auditrail/auditrail/query"
	"github.com/auditrail/auditrail/schemas"
)

// QueryResult holds the latencies of one page scenario.
type QueryResult struct {
	Name             string
	API, RawBounded  Latency
	RawNaive         Latency // the unbounded ORDER BY … LIMIT query (few samples: it is slow)
	ThroughputPerSec float64 // API pages/s with 4 concurrent clients (newest page only)
	Items            int
}

// Latency is a distribution summary.
type Latency struct{ P50, P99 time.Duration }

func summarize(d []time.Duration) Latency {
	if len(d) == 0 {
		return Latency{}
	}
	slices.Sort(d)
	return Latency{P50: d[len(d)/2], P99: d[min(len(d)-1, len(d)*99/100)]}
}

type benchAccess struct{ key string }

func (a benchAccess) Authenticate(_ context.Context, cred string) (auth.Principal, error) {
	if cred != a.key {
		return auth.Principal{}, auth.ErrUnauthenticated
	}
	return auth.Principal{ID: "bench", Type: auth.TypePlatformAdmin, PlatformAdmin: true}, nil
}

func (benchAccess) AuthorizeRead(context.Context, auth.Principal, uuid.UUID, *uuid.UUID) error {
	return nil
}

const rawColumns = `event_id, id, ts_ms, client_ip, action, source, display_name, customer_id,
       organization_id, project_id, principal_id, user_id, principal_type,
       resource_type, resource_id, resource_display, data, created_ms`

// QueryFigures returns the figures of the query benchmark.
func QueryFigures(rs []QueryResult) []Figure {
	var out []Figure
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	for _, r := range rs {
		out = append(out,
			Figure{Name: r.Name + " API p99 (ms)", Value: ms(r.API.P99), Unit: "ms", Reference: 50, RefName: "goal 50 ms", Goal: 1, Lower: true},
			Figure{Name: r.Name + " API p50 vs raw (ms)", Value: ms(r.API.P50), Unit: "ms", Reference: ms(r.RawBounded.P50), RefName: "raw ClickHouse query, same hours", Goal: 1.3, Lower: true},
		)
	}
	return out
}

// Query fills one tenant with n events in a throwaway ClickHouse and
// measures page latency through the HTTP API against the raw ClickHouse
// query for the same page, on the newest page, deep pages and a filter.
func Query(ctx context.Context, n int, progress io.Writer) ([]QueryResult, error) {
	say := func(format string, args ...any) { fmt.Fprintf(progress, "  "+format+"\n", args...) }
	dir, err := os.MkdirTemp("", "auditrail-bench-query-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	srv, err := chserver.Start(filepath.Join(dir, "clickhouse"))
	if err != nil {
		return nil, err
	}
	defer srv.Stop()
	dsn := srv.DSN("bench_query")
	store, err := clickhouse.Open(ctx, dsn)
	if err != nil {
		return nil, err
	}
	defer store.Close()

	org := uuid.New()
	gen := synth.New(org, 5, 9)
	now := time.Now()
	step := 30 * 24 * time.Hour / time.Duration(n)
	depths := map[string]int{"deep 10%": n / 10, "deep 50%": n / 2, "deep 90%": n * 9 / 10}
	keys := map[string]auditstore.Key{}
	say("writing %d events of one organization over 30 days", n)
	start := time.Now()
	const batch = 200_000
	buf := make([]schemas.AuditEvent, 0, batch)
	for i := 0; i < n; i++ {
		ev := gen.Event(now.Add(-time.Duration(i) * step))
		for name, d := range depths {
			if d == i {
				keys[name] = auditstore.Key{Timestamp: ev.Timestamp, EventID: ev.EventID}
			}
		}
		buf = append(buf, ev)
		if len(buf) == batch || i == n-1 {
			if err := store.WriteAudit(ctx, buf); err != nil {
				return nil, err
			}
			buf = buf[:0]
			if (i+1)%(n/10+1) < batch {
				say("  %d/%d written (%.0f/s)", i+1, n, float64(i+1)/time.Since(start).Seconds())
			}
		}
	}

	// The API over real HTTP.
	const apiKey = "bench-key-0123456789"
	cursorKey := []byte("bench-cursor-key-0123456789abcdef")
	qs, err := query.New(query.Config{CursorKeys: [][]byte{cursorKey}, StoreTimeout: 30 * time.Second}, store, benchAccess{apiKey}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		return nil, err
	}
	app := httpapi.NewApp(nil)
	qs.Register(app)
	port, err := chserver.FreePort()
	if err != nil {
		return nil, err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	go func() { _ = app.Listen(addr) }()
	defer app.Shutdown()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}}
	base := "http://" + addr + "/api/v1/orgs/" + org.String() + "/audit_logs?limit=50"
	for i := 0; ; i++ {
		if resp, err := client.Get("http://" + addr + "/nothing"); err == nil {
			resp.Body.Close()
			break
		}
		if i > 100 {
			return nil, fmt.Errorf("api did not start")
		}
		time.Sleep(20 * time.Millisecond)
	}
	codec, _ := query.NewCursorCodec(cursorKey)
	scope := query.Scope("audit_logs/org", org.String(), "", "", "", "")

	opts, err := ch.ParseDSN(dsn)
	if err != nil {
		return nil, err
	}
	raw, err := ch.Open(opts)
	if err != nil {
		return nil, err
	}
	defer raw.Close()

	type scenario struct {
		name   string
		url    string
		q      auditstore.Query
		filter string
	}
	dis := schemas.AuditActionDisabled
	scenarios := []scenario{{name: "newest page", url: base, q: auditstore.Query{OrgID: org, Limit: 50}}}
	for _, name := range []string{"deep 10%", "deep 50%", "deep 90%"} {
		k := keys[name]
		scenarios = append(scenarios, scenario{name: name + " page", url: base + "&cursor=" + url.QueryEscape(codec.Encode(k, scope)),
			q: auditstore.Query{OrgID: org, Limit: 50, After: &k}})
	}
	scenarios = append(scenarios, scenario{name: "filtered page (action)", url: base + "&action=AUDIT_ACTION_DISABLED",
		q: auditstore.Query{OrgID: org, Limit: 50, Filter: auditstore.Filter{Action: &dis}}, filter: " AND action = 4"})

	apiGet := func(u string) (int, error) {
		req, _ := http.NewRequestWithContext(ctx, "GET", u, nil)
		req.Header.Set("Authorization", "Bearer "+apiKey)
		resp, err := client.Do(req)
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 {
			return 0, fmt.Errorf("GET %s: %d %s", u, resp.StatusCode, body)
		}
		return strings.Count(string(body), `"event_id"`), nil
	}
	rawPage := func(sc scenario, bounded bool) error {
		q := `SELECT ` + rawColumns + ` FROM audit_logs WHERE organization_id = ?` + sc.filter
		args := []any{org.String()}
		if bounded {
			lo, hi, err := store.FirstWindow(ctx, sc.q)
			if err != nil {
				return err
			}
			q += ` AND ts_ms >= ? AND ts_ms < ?`
			args = append(args, lo, hi)
		}
		if sc.q.After != nil {
			q += ` AND (ts_ms < ? OR (ts_ms = ? AND event_id < ?))`
			ts := sc.q.After.Timestamp.UnixMilli()
			args = append(args, ts, ts, sc.q.After.EventID.String())
		}
		q += ` ORDER BY ts_ms DESC, event_id DESC, created_ms ASC LIMIT 1 BY event_id LIMIT 51`
		rows, err := raw.Query(ctx, q, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		_, err = auditstore.ReadPage(rows, 50)
		return err
	}
	timeIt := func(k int, f func() error) ([]time.Duration, error) {
		out := make([]time.Duration, 0, k)
		for i := 0; i < k; i++ {
			t0 := time.Now()
			if err := f(); err != nil {
				return nil, err
			}
			out = append(out, time.Since(t0))
		}
		return out, nil
	}

	var results []QueryResult
	for _, sc := range scenarios {
		say("measuring %s", sc.name)
		r := QueryResult{Name: sc.name}
		if r.Items, err = apiGet(sc.url); err != nil {
			return nil, err
		}
		if r.Items != 50 {
			return nil, fmt.Errorf("%s: %d items, want 50", sc.name, r.Items)
		}
		for i := 0; i < 20; i++ { // warm both paths
			_, _ = apiGet(sc.url)
			_ = rawPage(sc, true)
		}
		// Interleave the two so that both see the same machine.
		var apiD, rawD []time.Duration
		for i := 0; i < 300; i++ {
			d, err := timeIt(1, func() error { _, err := apiGet(sc.url); return err })
			if err != nil {
				return nil, err
			}
			apiD = append(apiD, d...)
			d, err = timeIt(1, func() error { return rawPage(sc, true) })
			if err != nil {
				return nil, err
			}
			rawD = append(rawD, d...)
		}
		r.API, r.RawBounded = summarize(apiD), summarize(rawD)
		naive, err := timeIt(5, func() error { return rawPage(sc, false) })
		if err != nil {
			return nil, err
		}
		r.RawNaive = summarize(naive)
		if sc.name == "newest page" {
			r.ThroughputPerSec = throughput(ctx, 4, 3*time.Second, func() error { _, err := apiGet(sc.url); return err })
		}
		results = append(results, r)
	}
	return results, nil
}

// throughput runs f from workers goroutines for d and returns the
// successful calls per second.
func throughput(ctx context.Context, workers int, d time.Duration, f func() error) float64 {
	var n atomic.Int64
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var wg sync.WaitGroup
	start := time.Now()
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				if f() == nil {
					n.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	return float64(n.Load()) / time.Since(start).Seconds()
}
