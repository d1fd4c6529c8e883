package bench

import (
	"context"
	_ "embed"
	"fmt"
	"io"
	"math"
	"net/url"
	"time"

	"github.com/google/uuid"

	"github.com/auditrail/auditrail/internal/auditstore"
	"github.com/auditrail/auditrail/query"
)

//go:embed queries/gen_executions.sql
var genExecutionsSQL string

const rawExecColumns = `organization_id, event_id, execution_id, project_id, user_id,
       principal_id, principal_type, display_name, client_ip, toolkit, tool_name, tool_version,
       started_ms, ended_ms, duration_ms, success, execution_code, execution_error, error_kind, hooks, created_ms, client, salt`

// QueryExecutions fills one tenant with n tool executions over 30 days in a
// throwaway ClickHouse (generated on the server with INSERT … SELECT, which
// feeds the hourly counts' materialized view as ingest's inserts do) and
// measures page latency through the HTTP API against the raw ClickHouse
// query of the same page: the newest page, deep pages and filters.
func QueryExecutions(ctx context.Context, n int, progress io.Writer) ([]QueryResult, error) {
	say := func(format string, args ...any) { fmt.Fprintf(progress, "  "+format+"\n", args...) }
	env, err := startCHEnv(ctx, "bench_executions")
	if err != nil {
		return nil, err
	}
	defer env.close()
	store := env.store

	org := uuid.New()
	projects := make([]string, 5)
	for i := range projects {
		projects[i] = uuid.NewString()
	}
	nowMS, spanMS := time.Now().UnixMilli(), int64(30*24*time.Hour/time.Millisecond)
	created := time.Now().UnixMilli()
	users := min(max(n/1000, 1), 1000) // 10M executions: 10k per user
	say("generating %d executions of one organization over 30 days", n)
	start := time.Now()
	chunk := max(n/10, 1)
	for first := 0; first < n; first += chunk {
		count := min(chunk, n-first)
		if err := env.raw.Exec(ctx, genExecutionsSQL, org.String(), projects, nowMS, spanMS, int64(n), created,
			uint64(math.MaxInt64-created), uint64(users), uint64(first), uint64(count)); err != nil {
			return nil, fmt.Errorf("generate executions: %w", err)
		}
		say("  %d/%d generated (%.0f/s)", first+count, n, float64(first+count)/time.Since(start).Seconds())
	}
	// The key of row i (newest first): its start time is known, its event id is read back.
	keyAt := func(i int) (auditstore.Key, error) {
		ms := nowMS - int64(i)*spanMS/int64(n)
		var id string
		if err := env.raw.QueryRow(ctx, `SELECT event_id FROM tool_executions WHERE organization_id = ? AND started_ms = ? ORDER BY event_id DESC LIMIT 1`,
			org.String(), ms).Scan(&id); err != nil {
			return auditstore.Key{}, fmt.Errorf("key of row %d: %w", i, err)
		}
		u, err := uuid.Parse(id)
		return auditstore.Key{Timestamp: time.UnixMilli(ms).UTC(), EventID: u}, err
	}

	base := "/api/v1/orgs/" + org.String() + "/tool_executions?limit=50"
	// The cursor of k in the scope the API computes for these parameters.
	cursor := func(rawQuery string, k auditstore.Key) (string, error) {
		v, _ := url.ParseQuery(rawQuery)
		p, err := query.ParseExecList(func(string) string { return org.String() }, v.Get, false)
		return env.codec.Encode(k, p.Scope("tool_executions/org")), err
	}
	type page struct {
		q      auditstore.ExecQuery
		filter string
		args   []any
	}
	// rawPage reads the page with a hand-written query: over the whole
	// organization (window nil), or over the window's hours in the same two
	// phases as the store (the key columns ordered first, the wide columns
	// read for the page's rows only), the best query for the same page.
	rawPage := func(p page, window func() (int64, int64, error)) error {
		cond := ` WHERE organization_id = ?` + p.filter
		args := append([]any{org.String()}, p.args...)
		var lo, hi int64
		if window != nil {
			var err error
			if lo, hi, err = window(); err != nil {
				return err
			}
			cond += ` AND started_ms >= ? AND started_ms < ?`
			args = append(args, lo, hi)
		}
		if p.q.After != nil {
			cond += ` AND (started_ms < ? OR (started_ms = ? AND event_id < ?))`
			ts := p.q.After.Timestamp.UnixMilli()
			args = append(args, ts, ts, p.q.After.EventID.String())
		}
		q := pageSQL("tool_executions", "started_ms", rawExecColumns, cond, window != nil)
		if window != nil {
			args = append([]any{org.String(), lo, hi}, args...)
		}
		rows, err := env.raw.Query(ctx, q, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		_, err = auditstore.ReadExecPage(rows, benchPage)
		return err
	}
	firstWindow := func(p page) func() (int64, int64, error) {
		return func() (int64, int64, error) { return store.FirstExecWindow(ctx, p.q) }
	}
	scenario := func(name, params string, p page) (pageScenario, error) {
		p.q.OrgID, p.q.Limit = org, benchPage
		u := base + params
		if p.q.After != nil {
			c, err := cursor(params, *p.q.After)
			if err != nil {
				return pageScenario{}, err
			}
			u += "&cursor=" + url.QueryEscape(c)
		}
		return pageScenario{name: name, page: func() (int, error) { return env.apiGet(ctx, u) },
			raw: func(bounded bool) error {
				if bounded {
					return rawPage(p, firstWindow(p))
				}
				return rawPage(p, nil)
			}}, nil
	}
	newest, err := scenario("newest page", "", page{})
	if err != nil {
		return nil, err
	}
	newest.throughput = true
	scenarios := []pageScenario{newest}
	for _, d := range []struct {
		name string
		at   int
	}{{"deep 10% page", n / 10}, {"deep 50% page", n / 2}, {"deep 90% page", n * 9 / 10}} {
		k, err := keyAt(d.at)
		if err != nil {
			return nil, err
		}
		sc, err := scenario(d.name, "", page{q: auditstore.ExecQuery{After: &k}})
		if err != nil {
			return nil, err
		}
		scenarios = append(scenarios, sc)
	}
	failed := false
	sc, err := scenario("filtered page (failed)", "&success=false", page{q: auditstore.ExecQuery{Success: &failed}, filter: " AND success = 0"})
	if err != nil {
		return nil, err
	}
	scenarios = append(scenarios, sc)

	// One user among many: several rounds of hours. The raw reference reads
	// the hours that hold the page, from the start of the hour of its
	// oldest item.
	user := "user_7"
	uq := auditstore.ExecQuery{OrgID: org, Limit: benchPage, UserID: &user}
	up := page{q: uq, filter: " AND user_id = ?", args: []any{user}}
	first, err := store.ListExecutions(ctx, auditstore.ExecQuery{OrgID: org, Limit: benchPage + 1, UserID: &user})
	if err != nil {
		return nil, err
	}
	if len(first.Items) == 0 {
		return nil, fmt.Errorf("user filter: no execution of %s", user)
	}
	lo := first.Items[len(first.Items)-1].StartedAt.UnixMilli() / 3_600_000 * 3_600_000
	userURL := base + "&user_id=" + user
	scenarios = append(scenarios, pageScenario{name: "filtered page (user)", page: func() (int, error) { return env.apiGet(ctx, userURL) },
		raw: func(bounded bool) error {
			if bounded {
				return rawPage(up, func() (int64, int64, error) { return lo, math.MaxInt64, nil })
			}
			return rawPage(up, nil)
		}})
	return measurePages(ctx, scenarios, say)
}
