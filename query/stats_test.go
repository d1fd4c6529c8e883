package query_test

import (
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/auditrail/auditrail/internal/auditstore"
	"github.com/auditrail/auditrail/internal/auditstore/search"
	"github.com/auditrail/auditrail/internal/auditstore/sqlite"
	"github.com/auditrail/auditrail/internal/auditstore/storetest"
	"github.com/auditrail/auditrail/internal/httpapi"
	"github.com/auditrail/auditrail/internal/httpx"
	"github.com/auditrail/auditrail/internal/ratelimit"
	"github.com/auditrail/auditrail/internal/testenv"
	"github.com/auditrail/auditrail/query"
	"github.com/auditrail/auditrail/schemas"
	"github.com/auditrail/auditrail/schemas/apiitem"
	"github.com/auditrail/auditrail/schemas/openapitest"
)

// checkStats checks a stats answer against the reference counts of q over
// evs: every bucket from the one of since to the one of until, oldest
// first, consecutive, those without entries with empty counts; counts by
// enum name; the top 10 actors and resources.
func checkStats(t *testing.T, data map[string]any, evs []schemas.AuditEvent, q auditstore.StatsQuery) {
	t.Helper()
	want := storetest.WantStats(evs, q)
	if len(want.Buckets) == 0 || len(want.Actors) == 0 || len(want.Resources) == 0 {
		t.Fatal("the case counts nothing")
	}
	name := func(k uint8) string {
		switch q.By {
		case auditstore.BySource:
			return schemas.AuditSource(k).String()
		case auditstore.ByResourceType:
			return schemas.ResourceType(k).String()
		}
		return schemas.AuditAction(k).String()
	}
	counts := map[string]map[string]float64{}
	for _, b := range want.Buckets {
		m := map[string]float64{}
		for k, n := range b.Counts {
			m[name(k)] = float64(n)
		}
		counts[b.Start.Format(apiitem.TimeFormat)] = m
	}
	step := q.Bucket
	start := q.Since.Truncate(step) // UTC: Truncate aligns on the zero time, as the epoch does for these steps
	var n int
	buckets, _ := data["buckets"].([]any)
	for at := start; at.Before(*q.Until); at = at.Add(step) {
		if n >= len(buckets) {
			t.Fatalf("%d buckets, want more (up to %s)", len(buckets), q.Until)
		}
		b := buckets[n].(map[string]any)
		if b["start"] != at.UTC().Format(apiitem.TimeFormat) {
			t.Fatalf("bucket %d starts at %v, want %s", n, b["start"], at.UTC().Format(apiitem.TimeFormat))
		}
		got := map[string]float64{}
		for k, v := range b["counts"].(map[string]any) {
			got[k] = v.(float64)
		}
		w := counts[b["start"].(string)]
		if len(got) != len(w) {
			t.Fatalf("bucket %v: counts %v, want %v", b["start"], got, w)
		}
		for k, v := range w {
			if got[k] != v {
				t.Fatalf("bucket %v: counts %v, want %v", b["start"], got, w)
			}
		}
		delete(counts, b["start"].(string))
		n++
	}
	if n != len(buckets) || len(counts) != 0 {
		t.Fatalf("%d buckets, want %d; uncounted %v", len(buckets), n, counts)
	}
	top := data["top"].(map[string]any)
	actors, resources := top["actors"].([]any), top["resources"].([]any)
	if len(actors) != len(want.Actors) || len(resources) != len(want.Resources) {
		t.Fatalf("top: %d actors, %d resources; want %d, %d", len(actors), len(resources), len(want.Actors), len(want.Resources))
	}
	// display: the name on the newest entries the one-click filter lists.
	display := func(g map[string]any) string { d, _ := g["display"].(string); return d }
	named := 0
	defer func() {
		if named == 0 {
			t.Errorf("no top actor or resource has a name: the check checks nothing")
		}
	}()
	for i, a := range want.Actors {
		g := actors[i].(map[string]any)
		if g["value"] != a.PrincipalID || g["count"] != float64(a.Count) {
			t.Fatalf("actor %d: %v, want %+v", i, g, a)
		}
		wantName := storetest.WantTopName(evs, q, search.Term{Key: "actor", Values: []string{a.PrincipalID}}, query.StatsNamesPeek,
			func(e schemas.AuditEvent) string {
				if e.PrincipalID != a.PrincipalID {
					return ""
				}
				return e.DisplayName
			})
		if wantName != "" {
			named++
		}
		if _, ok := g["display"]; !ok || display(g) != wantName {
			t.Errorf("actor %s: display %v, want %q", a.PrincipalID, g["display"], wantName)
		}
	}
	for i, r := range want.Resources {
		g := resources[i].(map[string]any)
		rt, _ := g["resource_type"].(string)
		wantRT := ""
		if r.ResourceType != 0 {
			wantRT = schemas.ResourceType(r.ResourceType).String()
		}
		if g["value"] != r.ResourceID || g["count"] != float64(r.Count) || rt != wantRT {
			t.Fatalf("resource %d: %v, want %+v", i, g, r)
		}
		wantName := storetest.WantTopName(evs, q, search.Term{Key: "resource_id", Values: []string{r.ResourceID}}, query.StatsNamesPeek,
			func(e schemas.AuditEvent) string {
				if e.ResourceID == nil || *e.ResourceID != r.ResourceID || e.ResourceDisplay == nil ||
					(r.ResourceType != 0 && (e.ResourceType == nil || uint8(*e.ResourceType) != r.ResourceType)) {
					return ""
				}
				return *e.ResourceDisplay
			})
		if _, ok := g["display"]; !ok || display(g) != wantName {
			t.Errorf("resource %s: display %v, want %q", r.ResourceID, g["display"], wantName)
		}
	}
}

// Both stats routes count what the store holds, with the listing's filters
// and the defaults documented in audit.yaml; bad parameters are 400s naming
// the parameter; a non-member gets 403, an anonymous caller 401, whatever
// the parameters.
func TestStats(t *testing.T) {
	e := newWaitEnv(t)
	base := time.Now().Add(-time.Minute)
	evs := storetest.StatsEvents(e.org, []uuid.UUID{e.project, e.otherProject}, base)
	if err := e.store.WriteAudit(context.Background(), evs); err != nil {
		t.Fatal(err)
	}
	orgStats := "/api/v1/orgs/" + e.org.String() + "/audit_logs/stats"
	projectStats := "/api/v1/orgs/" + e.org.String() + "/projects/" + e.project.String() + "/audit_logs/stats"
	since, until := base.Add(-40*time.Hour+17*time.Minute), base.Add(-3*time.Hour+5*time.Minute)
	rfc := func(t time.Time) string { return t.Format(time.RFC3339Nano) }
	cdt := schemas.AuditActionCreated
	for _, c := range []struct {
		name, path string
		params     url.Values
		q          auditstore.StatsQuery
	}{
		{"org by source per hour", orgStats, url.Values{"bucket": {"hour"}, "by": {"source"}, "since": {rfc(since)}, "until": {rfc(until)}},
			auditstore.StatsQuery{OrgID: e.org, Bucket: time.Hour, By: auditstore.BySource}},
		{"org by resource type per day", orgStats, url.Values{"bucket": {"day"}, "by": {"resource_type"}, "since": {rfc(base.Add(-100 * time.Hour))}, "until": {rfc(base.Add(time.Second))}},
			auditstore.StatsQuery{OrgID: e.org, Bucket: 24 * time.Hour, By: auditstore.ByResourceType}},
		{"project with filters per minute", projectStats, url.Values{"bucket": {"minute"}, "action": {"AUDIT_ACTION_CREATED"}, "q": {"-source:CLI"}, "since": {rfc(base.Add(-16 * time.Hour))}, "until": {rfc(base.Add(time.Minute))}},
			auditstore.StatsQuery{OrgID: e.org, ProjectID: &e.project, Bucket: time.Minute, By: auditstore.ByAction, Filter: auditstore.Filter{Action: &cdt}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := e.call("GET", c.path+"?"+c.params.Encode(), e.boot, "")
			if r.status != 200 {
				t.Fatalf("%d %s", r.status, r.raw)
			}
			s, _ := time.Parse(time.RFC3339Nano, c.params.Get("since"))
			u, _ := time.Parse(time.RFC3339Nano, c.params.Get("until"))
			c.q.Since, c.q.Until, c.q.Top = &s, &u, query.StatsTop
			sq, err := search.Parse(search.Audit, c.params.Get("q"))
			if err != nil {
				t.Fatal(err)
			}
			c.q.Search = sq
			checkStats(t, r.data(), evs, c.q)
		})
	}

	t.Run("defaults", func(t *testing.T) {
		for _, d := range []struct {
			query, bucket string
			window        time.Duration
		}{{"", "hour", 24 * time.Hour}, {"bucket=minute", "minute", time.Hour}, {"bucket=day&by=source", "day", 30 * 24 * time.Hour}} {
			before := time.Now()
			r := e.call("GET", orgStats+"?"+d.query, e.boot, "")
			if r.status != 200 {
				t.Fatalf("%s: %d %s", d.query, r.status, r.raw)
			}
			data := r.data()
			s, _ := time.Parse(time.RFC3339Nano, data["since"].(string))
			u, _ := time.Parse(time.RFC3339Nano, data["until"].(string))
			if data["bucket"] != d.bucket || u.Before(before.Add(-time.Millisecond)) || u.After(time.Now()) || u.Sub(s) != d.window {
				t.Fatalf("%q: bucket %v, since %v, until %v; want %s, until now, %s before", d.query, data["bucket"], data["since"], data["until"], d.bucket, d.window)
			}
			by := auditstore.ByAction
			if strings.Contains(d.query, "by=source") {
				by = auditstore.BySource
			}
			checkStats(t, data, evs, auditstore.StatsQuery{OrgID: e.org, Bucket: map[string]time.Duration{"minute": time.Minute, "hour": time.Hour, "day": 24 * time.Hour}[d.bucket],
				By: by, Top: query.StatsTop, Filter: auditstore.Filter{Window: auditstore.Window{Since: &s, Until: &u}}})
		}
	})

	t.Run("bad parameters", func(t *testing.T) {
		for _, b := range []struct{ path, query, msg string }{
			{orgStats, "bucket=week", `bucket: "week" is not minute, hour or day`},
			{orgStats, "by=actor", `by: "actor" is not action, source or resource_type`},
			{orgStats, "limit=5", "limit: unknown parameter (this route takes bucket, by, action, source, resource_type, since, until, q)"},
			{projectStats, "cursor=abc", "cursor: unknown parameter"},
			{orgStats, "bucket=", "bucket: empty"},
			{orgStats, "by=action&by=source", "by: given more than once"},
			{orgStats, "action=AUDIT_ACTION_NOPE", "action: "},
			{orgStats, "since=yesterday", `since: "yesterday" is not an RFC 3339 time`},
			{orgStats, "q=" + url.QueryEscape("actoor:x"), `q: term 1 "actoor:x": unknown key actoor`},
			{orgStats, "bucket=minute&since=" + url.QueryEscape(rfc(base.Add(-17*time.Hour))), "bucket: range too long for bucket=minute (10"},
			{projectStats, "bucket=day&since=2020-01-01T00:00:00Z&until=2026-01-01T00:00:00Z", "bucket: range too long for bucket=day (2192 buckets, at most 1000); use a shorter range"},
			{orgStats, "since=" + url.QueryEscape(rfc(time.Now().Add(time.Hour))), "since: "},
			{orgStats, "since=2026-01-02T00:00:00Z&until=2026-01-01T00:00:00Z", "until: "},
			{"/api/v1/orgs/not-a-uuid/audit_logs/stats", "", `org_id: "not-a-uuid" is not a UUID`},
		} {
			r := e.call("GET", b.path+"?"+b.query, e.boot, "")
			if r.status != 400 || !strings.Contains(r.msg(), b.msg) {
				t.Errorf("%s?%s: %d %q, want 400 with %q", b.path, b.query, r.status, r.msg(), b.msg)
			}
		}
	})

	t.Run("authorization", func(t *testing.T) {
		for _, a := range []struct {
			path, query, key string
			status           int
		}{
			{orgStats, "", e.alice, 403},
			{projectStats, "by=source", e.alice, 403},
			{orgStats, "", "", 401},
			{projectStats, "bucket=week", "", 401}, // authentication before parameters
			{orgStats, "", "not-a-key", 401},
			{"/api/v1/orgs/" + e.otherOrg.String() + "/audit_logs/stats", "", e.alice, 200},
		} {
			if r := e.call("GET", a.path+"?"+a.query, a.key, ""); r.status != a.status {
				t.Errorf("%s?%s as %q: %d %s, want %d", a.path, a.query, a.key, r.status, r.raw, a.status)
			}
		}
	})
}

// The stats answers (200, 400, 401, 403) match audit.yaml.
func TestStatsMatchesOpenAPI(t *testing.T) {
	router := openapitest.Router(t, "audit.yaml", "http://auditrail.test")
	e := newWaitEnv(t)
	base := time.Now().Add(-time.Minute)
	if err := e.store.WriteAudit(context.Background(), storetest.StatsEvents(e.org, []uuid.UUID{e.project}, base)); err != nil {
		t.Fatal(err)
	}
	org := "http://auditrail.test/api/v1/orgs/" + e.org.String()
	project := org + "/projects/" + e.project.String()
	checked := map[string]bool{}
	for _, tc := range []struct {
		path, key string
		status    int
	}{
		{org + "/audit_logs/stats", e.boot, 200},
		{org + "/audit_logs/stats?bucket=day&by=resource_type", e.boot, 200},
		{project + "/audit_logs/stats?bucket=minute&by=source&q=-actor:key_1&action=AUDIT_ACTION_UPDATED", e.boot, 200},
		{org + "/audit_logs/stats?bucket=week", e.boot, 400},
		{project + "/audit_logs/stats", e.alice, 403},
		{org + "/audit_logs/stats", "", 401},
	} {
		req := httptest.NewRequest("GET", tc.path, nil)
		if tc.key != "" {
			req.Header.Set("Authorization", "Bearer "+tc.key)
		}
		resp, err := e.app.Test(req, -1)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.status {
			t.Fatalf("%s: %d %s, want %d", tc.path, resp.StatusCode, raw, tc.status)
		}
		checked[openapitest.CheckResponse(t, router, req, resp.StatusCode, resp.Header, raw)] = true
	}
	for _, op := range []string{"statsOrgAuditLogs", "statsProjectAuditLogs"} {
		if !checked[op] {
			t.Errorf("%s not checked", op)
		}
	}
}

// The stats routes sit behind the listing's rate limit: with a limit of 2
// per minute, a listing and a stats request leave none, and the next stats
// request is refused (429).
func TestStatsRateLimited(t *testing.T) {
	_, _, js := testenv.NATS(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	limiter, err := ratelimit.New(ctx, js, "rl_stats_test", ratelimit.Spec{Limit: 2, Window: time.Minute}, ratelimit.WithClock(fixedClock))
	if err != nil {
		t.Fatal(err)
	}
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "audit.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	cfg := query.DefaultConfig()
	cfg.CursorKeys = [][]byte{[]byte("0123456789abcdef0123456789abcdef")}
	qs, err := query.New(cfg, st, allowAll{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	app := httpapi.NewApp(nil)
	qs.Register(app, httpapi.RateLimit(limiter, httpx.TrustedProxies{}, slog.New(slog.NewTextHandler(io.Discard, nil))))
	org := "/api/v1/orgs/" + uuid.NewString()
	for i, want := range []struct {
		path   string
		status int
	}{{org + "/audit_logs", 200}, {org + "/audit_logs/stats", 200}, {org + "/audit_logs/stats", 429}} {
		req := httptest.NewRequest("GET", want.path, nil)
		req.Header.Set("Authorization", "Bearer k")
		resp, err := app.Test(req, -1)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want.status {
			t.Fatalf("request %d (%s): %d, want %d", i+1, want.path, resp.StatusCode, want.status)
		}
	}
}

// fixedClock is the rate limiters' clock in tests: a fixed instant, so no
// window boundary falls inside a test and splits its counts.
func fixedClock() time.Time { return time.Date(2026, 11, 22, 10, 0, 30, 0, time.UTC) }
