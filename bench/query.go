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
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/gofiber/fiber/v2"
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

// interleave runs each of fs in turn, warm+n times, and returns the
// durations of the last n runs of each (in the order of fs): interleaved,
// so that every one sees the same machine; the first warm runs of each
// warm caches and connections up. The first error ends it.
func interleave(n, warm int, fs ...func() error) ([][]time.Duration, error) {
	out := make([][]time.Duration, len(fs))
	for i := range out {
		out[i] = make([]time.Duration, 0, n)
	}
	for i := 0; i < warm+n; i++ {
		for j, f := range fs {
			t0 := time.Now()
			if err := f(); err != nil {
				return nil, err
			}
			if i >= warm {
				out[j] = append(out[j], time.Since(t0))
			}
		}
	}
	return out, nil
}

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
       resource_type, resource_id, resource_display, data, created_ms, salt`

// QueryFigures returns the figures of the query benchmarks (audit or
// executions); prefix names the listing.
func QueryFigures(prefix string, rs []QueryResult) []Figure {
	var out []Figure
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	for _, r := range rs {
		out = append(out,
			Figure{Name: prefix + r.Name + " API p99 (ms)", Value: ms(r.API.P99), Unit: "ms", Reference: 50, RefName: "goal 50 ms", Goal: 1, Lower: true},
			Figure{Name: prefix + r.Name + " API p50 vs raw (ms)", Value: ms(r.API.P50), Unit: "ms", Reference: ms(r.RawBounded.P50), RefName: "raw ClickHouse query, same hours", Goal: 1.3, Lower: true},
		)
	}
	return out
}

// chEnv is a throwaway ClickHouse holding one store, a raw connection to
// the same database and the query API over real HTTP.
type chEnv struct {
	dir    string
	srv    *chserver.Server
	store  *clickhouse.Store
	raw    driver.Conn
	app    *fiber.App
	client *http.Client
	addr   string
	codec  *query.CursorCodec
}

const (
	benchAPIKey = "bench-key-0123456789"
	benchPage   = 50
)

var benchCursorKey = []byte("bench-cursor-key-0123456789abcdef")

// startCHEnv starts the server, opens the database db and serves the API.
func startCHEnv(ctx context.Context, db string) (_ *chEnv, err error) {
	e := &chEnv{}
	defer func() {
		if err != nil {
			e.close()
		}
	}()
	if e.dir, err = os.MkdirTemp("", "auditrail-bench-query-"); err != nil {
		return nil, err
	}
	if e.srv, err = chserver.Start(filepath.Join(e.dir, "clickhouse")); err != nil {
		return nil, err
	}
	dsn := e.srv.DSN(db)
	if e.store, err = clickhouse.Open(ctx, dsn); err != nil {
		return nil, err
	}
	opts, err := ch.ParseDSN(dsn)
	if err != nil {
		return nil, err
	}
	if e.raw, err = ch.Open(opts); err != nil {
		return nil, err
	}
	qs, err := query.New(query.Config{CursorKeys: [][]byte{benchCursorKey}, StoreTimeout: 30 * time.Second}, e.store, benchAccess{benchAPIKey}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		return nil, err
	}
	if e.codec, err = query.NewCursorCodec(benchCursorKey); err != nil {
		return nil, err
	}
	app := httpapi.NewApp(nil)
	qs.Register(app)
	port, err := chserver.FreePort()
	if err != nil {
		return nil, err
	}
	e.addr = fmt.Sprintf("127.0.0.1:%d", port)
	e.app = app
	go func() { _ = app.Listen(e.addr) }()
	e.client = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}}
	for i := 0; ; i++ {
		if resp, err := e.client.Get("http://" + e.addr + "/nothing"); err == nil {
			resp.Body.Close()
			break
		}
		if i > 100 {
			return nil, fmt.Errorf("api did not start")
		}
		time.Sleep(20 * time.Millisecond)
	}
	return e, nil
}

func (e *chEnv) close() {
	if e.app != nil {
		_ = e.app.Shutdown()
	}
	if e.client != nil {
		e.client.CloseIdleConnections()
	}
	if e.raw != nil {
		e.raw.Close()
	}
	if e.store != nil {
		e.store.Close()
	}
	if e.srv != nil {
		e.srv.Stop()
	}
	if e.dir != "" {
		os.RemoveAll(e.dir)
	}
}

// apiGet fetches a listing page and returns the number of its items.
func (e *chEnv) apiGet(ctx context.Context, path string) (int, error) {
	u := "http://" + e.addr + path
	status, body, err := getAPI(ctx, e.client, u)
	if err != nil {
		return 0, err
	}
	if status != http.StatusOK {
		return 0, fmt.Errorf("GET %s: %d %s", u, status, body)
	}
	return strings.Count(string(body), `"event_id"`), nil
}

// getAPI GETs url with the bench's API key: the status and the body.
func getAPI(ctx context.Context, client *http.Client, url string) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+benchAPIKey)
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, body, err
}

// pageScenario is one page measured two ways: page (through the API or
// the store) and raw, the hand-written ClickHouse query of the same page,
// bounded to the hours the store scans first or not.
type pageScenario struct {
	name       string
	page       func() (int, error)
	raw        func(bounded bool) error
	throughput bool
}

// pageSamples is the number of timed samples of each page (tests lower it).
var pageSamples = 300

// measurePages times every scenario: pageSamples interleaved samples of the
// page and its bounded raw query (both see the same machine), 5 of the
// unbounded raw query.
func measurePages(ctx context.Context, scs []pageScenario, say func(string, ...any)) ([]QueryResult, error) {
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
	for _, sc := range scs {
		say("measuring %s", sc.name)
		r := QueryResult{Name: sc.name}
		var err error
		if r.Items, err = sc.page(); err != nil {
			return nil, err
		}
		if r.Items != benchPage {
			return nil, fmt.Errorf("%s: %d items, want %d", sc.name, r.Items, benchPage)
		}
		for i := 0; i < 20; i++ { // warm both paths
			_, _ = sc.page()
			_ = sc.raw(true)
		}
		page := func() error { _, err := sc.page(); return err }
		var apiD, rawD []time.Duration
		for i := 0; i < pageSamples; i++ {
			d, err := timeIt(1, page)
			if err != nil {
				return nil, err
			}
			apiD = append(apiD, d...)
			d, err = timeIt(1, func() error { return sc.raw(true) })
			if err != nil {
				return nil, err
			}
			rawD = append(rawD, d...)
		}
		r.API, r.RawBounded = summarize(apiD), summarize(rawD)
		naive, err := timeIt(5, func() error { return sc.raw(false) })
		if err != nil {
			return nil, err
		}
		r.RawNaive = summarize(naive)
		if sc.throughput {
			r.ThroughputPerSec = throughput(ctx, 4, 3*time.Second, page)
		}
		results = append(results, r)
	}
	return results, nil
}

// Query fills one tenant with n events in a throwaway ClickHouse and
// measures page latency through the HTTP API against the raw ClickHouse
// query for the same page, on the newest page, deep pages and a filter.
func Query(ctx context.Context, n int, progress io.Writer) ([]QueryResult, error) {
	say := func(format string, args ...any) { fmt.Fprintf(progress, "  "+format+"\n", args...) }
	env, err := startCHEnv(ctx, "bench_query")
	if err != nil {
		return nil, err
	}
	defer env.close()
	store := env.store

	org := uuid.New()
	gen := synth.New(org, 5, 9)
	now := time.Now()
	depths := map[string]int{"deep 10%": n / 10, "deep 50%": n / 2, "deep 90%": n * 9 / 10}
	keys := map[string]auditstore.Key{}
	say("writing %d events of one organization over 30 days", n)
	err = fillAudit(ctx, store, gen, n, now, say, func(i int, ev *schemas.AuditEvent) {
		for name, d := range depths {
			if d == i {
				keys[name] = auditstore.Key{Timestamp: ev.Timestamp, EventID: ev.EventID}
			}
		}
	})
	if err != nil {
		return nil, err
	}

	base := "/api/v1/orgs/" + org.String() + "/audit_logs?limit=50"
	scope := query.Scope("audit_logs/org", org.String(), "", "", "", "")
	type page struct {
		url    string
		q      auditstore.Query
		filter string
	}
	rawPage := func(p page, bounded bool) error {
		cond := ` WHERE organization_id = ?` + p.filter
		args := []any{org.String()}
		var lo, hi int64
		if bounded {
			var err error
			if lo, hi, err = store.FirstWindow(ctx, p.q); err != nil {
				return err
			}
			cond += ` AND ts_ms >= ? AND ts_ms < ?`
			args = append(args, lo, hi)
		}
		if p.q.After != nil {
			cond += ` AND (ts_ms < ? OR (ts_ms = ? AND event_id < ?))`
			ts := p.q.After.Timestamp.UnixMilli()
			args = append(args, ts, ts, p.q.After.EventID.String())
		}
		q := pageSQL("audit_logs", "ts_ms", rawColumns, cond, bounded)
		if bounded {
			args = append([]any{org.String(), lo, hi}, args...)
		}
		rows, err := env.raw.Query(ctx, q, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		_, err = auditstore.ReadPage(rows, benchPage)
		return err
	}
	scenario := func(name string, p page) pageScenario {
		return pageScenario{name: name, page: func() (int, error) { return env.apiGet(ctx, p.url) },
			raw: func(bounded bool) error { return rawPage(p, bounded) }}
	}
	newest := scenario("newest page", page{url: base, q: auditstore.Query{OrgID: org, Limit: benchPage}})
	newest.throughput = true
	scenarios := []pageScenario{newest}
	for _, name := range []string{"deep 10%", "deep 50%", "deep 90%"} {
		k := keys[name]
		scenarios = append(scenarios, scenario(name+" page", page{url: base + "&cursor=" + url.QueryEscape(env.codec.Encode(k, scope)),
			q: auditstore.Query{OrgID: org, Limit: benchPage, After: &k}}))
	}
	dis := schemas.AuditActionDisabled
	scenarios = append(scenarios, scenario("filtered page (action)", page{url: base + "&action=AUDIT_ACTION_DISABLED",
		q: auditstore.Query{OrgID: org, Limit: benchPage, Filter: auditstore.Filter{Action: &dis}}, filter: " AND action = 4"}))
	return measurePages(ctx, scenarios, say)
}

// fillAudit writes n events of gen's organization, one every 30 days / n
// back from now, newest first, in batches of 200k; seen, when set, sees
// each event with its index before it is written.
func fillAudit(ctx context.Context, store *clickhouse.Store, gen *synth.Generator, n int, now time.Time, say func(string, ...any), seen func(int, *schemas.AuditEvent)) error {
	step := 30 * 24 * time.Hour / time.Duration(n)
	start := time.Now()
	const batch = 200_000
	buf := make([]schemas.AuditEvent, 0, min(batch, n))
	for i := 0; i < n; i++ {
		ev := gen.Event(now.Add(-time.Duration(i) * step))
		if seen != nil {
			seen(i, &ev)
		}
		buf = append(buf, ev)
		if len(buf) == batch || i == n-1 {
			if err := store.WriteAudit(ctx, buf); err != nil {
				return err
			}
			buf = buf[:0]
			if (i+1)%(n/10+1) < batch {
				say("  %d/%d written (%.0f/s)", i+1, n, float64(i+1)/time.Since(start).Seconds())
			}
		}
	}
	return nil
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

// pageSQL is the hand-written query of one page of table whose time column
// is ts, under cond (a WHERE clause): over the whole organization, or, when
// windowed, over the window's hours in the store's two phases (the key
// columns ordered first, the wide columns read for the page's rows only) —
// the best query for the same page. A windowed query takes the arguments
// org, lo, hi before those of cond.
func pageSQL(table, ts, columns, cond string, windowed bool) string {
	order := ` ORDER BY ` + ts + ` DESC, event_id DESC, created_ms ASC LIMIT 1 BY event_id LIMIT 51`
	if !windowed {
		return `SELECT ` + columns + ` FROM ` + table + cond + order
	}
	return `SELECT ` + columns + ` FROM ` + table + ` WHERE organization_id = ? AND ` + ts + ` >= ? AND ` + ts + ` < ?` +
		` AND (` + ts + `, event_id) IN (SELECT ` + ts + `, event_id FROM ` + table + cond +
		` ORDER BY ` + ts + ` DESC, event_id DESC LIMIT 1 BY event_id LIMIT 51)` + order
}
