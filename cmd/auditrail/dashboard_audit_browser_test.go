//go:build e2e

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/google/uuid"

	"github.com/auditrail/auditrail/internal/testenv"
	"github.com/auditrail/auditrail/internal/testenv/browser"
	"github.com/auditrail/auditrail/producers"
	"github.com/auditrail/auditrail/schemas"
)

// xssName is planted in resource names, display names and a project name:
// the page must show it as text and never run it.
const xssName = `<img src=x onerror="window.__xss=1">`

// auditTenant is what seedTenant made: ids of the API-made changes and
// counts of what it published.
type auditTenant struct {
	ciKey     string // id of the key "ci" that was disabled (its entry has a before/after diff)
	synthetic int    // synthetic audit entries, spread over the last day
	failOpen  int    // executions let through by a fail-open hook
	refused   int    // executions refused by a hook (deny or fail_closed)
	execs     int
}

// withTab is d on a tab of its own (each subtest starts signed out).
func (d *dash) withTab(t *testing.T) *dash {
	c := *d
	c.tab = browser.Tab(t)
	c.do(t, "1280×800", chromedp.EmulateViewport(1280, 800))
	return &c
}

// rawGet is a GET of the API with key, without the OpenAPI check (routes
// being added), answering the status and body.
func (d *dash) rawGet(t *testing.T, path, key string) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequest("GET", "http://"+d.p.http+path, nil)
	req.Header.Set("Authorization", "Bearer "+key)
	res, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(res.Body, 1<<20))
	return res.StatusCode, b
}

// seedTenant makes a realistic tenant: real changes through the API (a key
// created then disabled, a member, the XSS plant as a key and a project
// name) and, published to the stream as producers do, a day of varied
// audit entries and a few tool executions with hook calls. It waits until
// the listings hold them all.
func seedTenant(t *testing.T, d *dash, plant bool) auditTenant {
	t.Helper()
	var tn auditTenant
	base := "/api/v1/orgs/" + d.org
	r := d.c.call("POST", base+"/api_keys", d.boot, map[string]any{"name": "ci", "user_id": "alice"})
	if r.status != 201 {
		t.Fatalf("key ci: %d %s", r.status, r.raw)
	}
	tn.ciKey = r.data()["id"].(string)
	if r := d.c.call("POST", base+"/api_keys/"+tn.ciKey+"/disable", d.boot, nil); r.status/100 != 2 {
		t.Fatalf("disable ci: %d %s", r.status, r.raw)
	}
	if plant {
		if r := d.c.call("POST", base+"/api_keys", d.boot, map[string]any{"name": xssName, "user_id": "alice"}); r.status != 201 {
			t.Fatalf("xss key: %d %s", r.status, r.raw)
		}
		if r := d.c.call("POST", base+"/projects", d.boot, map[string]any{"name": xssName}); r.status != 201 {
			t.Fatalf("xss project: %d %s", r.status, r.raw)
		}
	}
	if r := d.c.call("PUT", base+"/members/bob", d.boot, map[string]any{"role": "member", "display_name": "Bob Martin"}); r.status/100 != 2 {
		t.Fatalf("member bob: %d %s", r.status, r.raw)
	}

	org := uuid.MustParse(d.org)
	project := uuid.MustParse(d.project)
	type actor struct{ id, user, name, ptype string }
	actors := []actor{
		{"k-alice", "alice", "Alice", "ACCOUNT"}, {"k-bob", "bob", "Bob Martin", "ACCOUNT"},
		{"svc-deploy", "", "deploy bot", "SERVICE_KEY"}, {"k-terraform", "", "terraform", "API_KEY"},
		{"k-carol", "carol", "Carol Diaz", "ACCOUNT"},
	}
	type res struct {
		rt      schemas.ResourceType
		id, dsp string
	}
	resources := []res{
		{schemas.ResourceTypeHook, "hook-pii", "pii-guard"}, {schemas.ResourceTypeSecret, "MONGO_URI", "MONGO_URI"},
		{schemas.ResourceTypeAPIKey, "key-ci", "ci"}, {schemas.ResourceTypeProjectMember, "bob", "Bob Martin"},
		{schemas.ResourceTypeDeployment, "dep-42", "billing-api v42"}, {schemas.ResourceTypeSetting, "retention", "retention"},
		{schemas.ResourceTypeAuthProvider, "google", "Google Workspace"}, {schemas.ResourceTypeUserConnection, "alice-google", "alice · google"},
	}
	sources := []schemas.AuditSource{schemas.AuditSourceAPI, schemas.AuditSourceDashboard, schemas.AuditSourceCLI, schemas.AuditSourceSDK, schemas.AuditSourceAPI}
	actions := []schemas.AuditAction{schemas.AuditActionCreated, schemas.AuditActionUpdated, schemas.AuditActionUpdated, schemas.AuditActionDeleted, schemas.AuditActionDisabled}
	rnd := rand.New(rand.NewSource(21))
	now := time.Now().UTC()
	var evs []producers.Event
	want := map[string]bool{}
	for i := 0; i < 64; i++ {
		a := actors[rnd.Intn(len(actors))]
		rs := resources[rnd.Intn(len(resources))]
		act := actions[rnd.Intn(len(actions))]
		before := map[string]any{"name": rs.dsp, "enabled": true, "timeout_ms": 500 + 100*rnd.Intn(5)}
		after := map[string]any{"name": rs.dsp, "enabled": act != schemas.AuditActionDisabled, "timeout_ms": 500 + 100*rnd.Intn(5)}
		data := map[string]any{"before": before, "after": after}
		switch act {
		case schemas.AuditActionCreated:
			data["before"] = nil
		case schemas.AuditActionDeleted:
			data["after"] = nil
		}
		raw, _ := json.Marshal(data)
		ip := fmt.Sprintf("203.0.113.%d", 10+rnd.Intn(40))
		ev := &schemas.AuditEvent{
			EventID: uuid.Must(uuid.NewV7()), Timestamp: now.Add(-time.Duration(i+1) * 20 * time.Minute).Add(-time.Duration(rnd.Intn(600)) * time.Second),
			ClientIP: &ip, Action: act, Source: sources[rnd.Intn(len(sources))], DisplayName: a.name, OrganizationID: org,
			PrincipalID: a.id, PrincipalType: a.ptype, ResourceType: schemas.Ptr(rs.rt), ResourceID: schemas.Ptr(rs.id),
			ResourceDisplay: schemas.Ptr(rs.dsp), Data: raw,
		}
		if i%3 != 0 {
			ev.ProjectID = &project
		}
		if a.user != "" {
			ev.UserID = schemas.Ptr(a.user)
		}
		if i == 7 && plant { // a hostile name from an event, not only from the API
			ev.DisplayName, ev.ResourceDisplay = xssName, schemas.Ptr(xssName)
		}
		evs = append(evs, ev)
		want[ev.EventID.String()] = true
	}
	tn.synthetic = len(evs)

	// Executions: allowed, denied, let through by fail-open, failed closed.
	type hk struct{ point, code, decision, failure, mode string }
	kinds := [][]hk{
		{{"access", "OK", "allow", "", ""}, {"pre", "OK", "allow", "", ""}},
		{{"pre", "CHECK_FAILED", "deny", "", ""}},
		{{"pre", "", "allow", "timeout after 2s", "fail_open"}, {"post", "OK", "allow", "", ""}},
		{{"access", "", "deny", "status 503", "fail_closed"}},
		{{"pre", "OK", "allow", "", ""}},
	}
	tools := []schemas.ToolRef{{Toolkit: "DocumentDbToolkit", Name: "CountDocuments", Version: "0.4.0"}, {Toolkit: "MailToolkit", Name: "SendEmail", Version: "1.2.0"},
		{Toolkit: "DocsToolkit", Name: "GetDocument", Version: "2.0.1"}}
	wantExec := map[string]bool{}
	for i := 0; i < 10; i++ {
		id := uuid.Must(uuid.NewV7()).String()
		k := kinds[i%len(kinds)]
		start := now.Add(-time.Duration(i+1) * 7 * time.Minute)
		ev := &schemas.ExecutionEvent{EventID: id, ExecutionID: id, OrganizationID: d.org, ProjectID: d.project, UserID: []string{"alice", "bob", "carol"}[i%3],
			PrincipalID: "svc-deploy", PrincipalType: "SERVICE_KEY", DisplayName: "deploy bot",
			Tool: tools[i%len(tools)], StartedAt: start, EndedAt: start.Add(time.Duration(20+i*13) * time.Millisecond),
			DurationMS: float64(20 + i*13), Success: true, ExecutionCode: "OK"}
		for _, c := range k {
			call := schemas.HookCall{HookID: "hook-" + c.point, HookName: "policy-" + c.point, Point: c.point, Code: c.code, Decision: c.decision,
				Failure: c.failure, FailureModeApplied: c.mode, Attempts: 1, LatencyMS: 0.8 + float64(i)}
			if c.failure == "" {
				call.HTTPStatus = 200
			} else {
				call.Attempts, call.LatencyMS = 3, 2000
			}
			ev.Hooks = append(ev.Hooks, call)
			if c.decision == "deny" {
				ev.Success, ev.ExecutionCode, ev.ErrorKind, ev.ExecutionError = false, "HOOK_CHECK_FAILED", "HOOK_CHECK_FAILED", "refused by "+call.HookName
			}
		}
		switch {
		case !ev.Success:
			tn.refused++
		case ev.Hooks[0].FailureModeApplied == "fail_open":
			tn.failOpen++
		}
		evs = append(evs, ev)
		wantExec[id] = true
	}
	tn.execs = len(wantExec)

	pub, err := producers.New(d.p.connect(t), producers.DefaultConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := pub.PublishBatch(context.Background(), evs); err != nil {
		t.Fatal(err)
	}
	d.waitIDs(t, base+"/audit_logs", want)
	d.waitIDs(t, base+"/tool_executions", wantExec)
	return tn
}

// waitIDs waits until the listing at path holds every event id of want.
func (d *dash) waitIDs(t *testing.T, path string, want map[string]bool) {
	t.Helper()
	seen := 0
	testenv.Eventually(t, 30*time.Second, func() string { return fmt.Sprintf("%s holds %d of the %d events published", path, seen, len(want)) }, func() bool {
		seen = 0
		cursor := ""
		for {
			p := path + "?limit=100"
			if cursor != "" {
				p += "&cursor=" + url.QueryEscape(cursor)
			}
			code, b := d.rawGet(t, p, d.boot)
			if code != 200 {
				t.Fatalf("GET %s: %d %s", p, code, b)
			}
			var env struct {
				Data struct {
					Items      []map[string]any `json:"items"`
					NextCursor string           `json:"next_cursor"`
					HasMore    bool             `json:"has_more"`
				} `json:"data"`
			}
			if err := json.Unmarshal(b, &env); err != nil {
				t.Fatal(err)
			}
			for _, it := range env.Data.Items {
				if want[fmt.Sprint(it["event_id"])] {
					seen++
				}
			}
			if !env.Data.HasMore {
				break
			}
			cursor = env.Data.NextCursor
		}
		return seen == len(want)
	})
}

// rows is the number of entry rows shown.
const rowsJS = `document.querySelectorAll("#entries tbody tr[data-id]").length`

// param is the page URL's parameter name.
func param(name string) string {
	return `new URL(location.href).searchParams.get(` + jsString(name) + `) || ""`
}

func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// TestDashboardAudit drives the audit log and tool executions views on one
// dev per store: search with q and a range, pages, an entry's diff, the
// histogram's zoom and top lists, the live tail, the exports, the XSS
// plant, executions with their hook calls, keyboard and phone width, and
// the error states (401 after the key is deleted, 429).
func TestDashboardAudit(t *testing.T) {
	t.Parallel()
	dashStores(t, func(t *testing.T, extra ...string) {
		d := openDashboard(t, append(extra, "--rate-limit", "600/60s")...)
		tn := seedTenant(t, d, true)
		t.Run("search_range_page", func(t *testing.T) { testSearchRangePage(t, d.withTab(t), tn) })
		t.Run("entry_diff_keyboard", func(t *testing.T) { testEntryDiff(t, d.withTab(t), tn) })
		t.Run("histogram_zoom", func(t *testing.T) { testHistogram(t, d.withTab(t)) })
		t.Run("live_tail", func(t *testing.T) { testLiveTail(t, d.withTab(t)) })
		t.Run("export", func(t *testing.T) { testExport(t, d.withTab(t)) })
		t.Run("xss_plant", func(t *testing.T) { testXSS(t, d.withTab(t)) })
		t.Run("executions", func(t *testing.T) { testExecutions(t, d.withTab(t), tn) })
		t.Run("phone_width", func(t *testing.T) { testPhone(t, d.withTab(t)) })
		t.Run("dark_mode", func(t *testing.T) { testDarkMode(t, d.withTab(t)) })
		t.Run("errors", func(t *testing.T) { testErrors(t, d.withTab(t)) })
	})
}

func testSearchRangePage(t *testing.T, d *dash, tn auditTenant) {
	d.signIn(t, d.alice, "?view=audit")
	d.do(t, "first page", chromedp.WaitVisible(chromedp.CSS("#more")))
	if n := value(t, d, "rows", chromedp.Evaluate[int](rowsJS)); n != 50 {
		t.Fatalf("first page: %d rows, want 50", n)
	}
	d.do(t, "load more", chromedp.Click(chromedp.CSS("#more")), until(`document.getElementById("end")`))
	all := value(t, d, "rows", chromedp.Evaluate[int](rowsJS))
	if all <= 50 || all < tn.synthetic {
		t.Fatalf("after load more: %d rows, want more than 50 and at least %d", all, tn.synthetic)
	}
	// Completion: keys, then the values of an enum key, chosen by keyboard.
	d.do(t, "complete a key",
		chromedp.Click(chromedp.CSS("#q")),
		chromedp.SendKeys(chromedp.CSS("#q"), "acti"),
		until(`[...document.querySelectorAll("ul.completions li")].some(li => li.textContent.startsWith("action:"))`),
		chromedp.KeyEvent(kb.ArrowDown), chromedp.KeyEvent(kb.Enter),
		until(`document.getElementById("q").value === "action:"`),
		chromedp.SendKeys(chromedp.CSS("#q"), "DIS"),
		until(`[...document.querySelectorAll("ul.completions li")].some(li => li.textContent.startsWith("DISABLED"))`),
		chromedp.KeyEvent(kb.ArrowDown), chromedp.KeyEvent(kb.Enter),
		until(`document.getElementById("q").value.trim() === "action:DISABLED"`),
		chromedp.Click(chromedp.CSS("#search-go")),
		until(param("q")+` === "action:DISABLED"`),
		until(rowsJS+` > 0`),
	)
	acts := value(t, d, "actions", chromedp.Evaluate[[]string](`[...document.querySelectorAll("#entries tbody tr td:nth-child(2)")].map(td => td.textContent)`))
	if len(acts) == 0 {
		t.Fatal("action:DISABLED: no rows")
	}
	for _, a := range acts {
		if a != "DISABLED" {
			t.Fatalf("action:DISABLED shows %q", acts)
		}
	}
	// A range: the last hour holds the API-made changes and few synthetic entries.
	d.do(t, "range 1h", chromedp.Click(chromedp.CSS(`.range button[data-range="1h"]`)),
		until(param("range")+` === "1h" && `+param("q")+` === "action:DISABLED"`),
		until(`document.getElementById("entries") || document.getElementById("empty")`))
	times := value(t, d, "times", chromedp.Evaluate[[]string](`[...document.querySelectorAll("#entries tbody tr time")].map(t => t.getAttribute("datetime"))`))
	if len(times) == 0 || len(times) >= len(acts) {
		t.Fatalf("action:DISABLED in 1h: %d rows (24h: %d)", len(times), len(acts))
	}
	for _, s := range times {
		ts, _ := time.Parse(time.RFC3339, s)
		if time.Since(ts) > time.Hour+time.Minute {
			t.Errorf("range 1h shows an entry of %s", s)
		}
	}
	// Back: the previous view (24h), from the URL alone.
	d.do(t, "back", chromedp.NavigateBack(), until(param("range")+` === "" && `+param("q")+` === "action:DISABLED"`),
		until(rowsJS+` === `+fmt.Sprint(len(acts))))
	// A link is a saved search: a new tab with the same URL shows the same rows.
	link := value(t, d, "url", chromedp.Evaluate[string](`location.href`))
	u, _ := url.Parse(link)
	d2 := d.withTab(t)
	d2.signIn(t, d.alice, "?"+u.RawQuery)
	d2.do(t, "saved search", until(rowsJS+` === `+fmt.Sprint(len(acts))))
	if got := value(t, d2, "q", chromedp.Evaluate[string](`document.getElementById("q").value`)); got != "action:DISABLED" {
		t.Errorf("saved search: box holds %q", got)
	}
	// A malformed search says which term is wrong.
	d.do(t, "bad q", until(`(document.getElementById("q").value = "action:NOPE", true)`), chromedp.Click(chromedp.CSS("#search-go")),
		until(`document.getElementById("list-error")`))
	if msg := value(t, d, "bad q", chromedp.Text(chromedp.CSS("#list-error"))); !strings.Contains(msg, "NOPE") {
		t.Errorf("bad q: %q", msg)
	}
}

func testEntryDiff(t *testing.T, d *dash, tn auditTenant) {
	d.signIn(t, d.alice, "?view=audit&q="+url.QueryEscape("resource_id:"+tn.ciKey+" action:DISABLED"))
	// Keyboard: / focuses the search, Esc leaves it, j moves to the first row, Enter opens.
	d.do(t, "rows", until(rowsJS+` === 1`),
		chromedp.KeyEvent("/"), until(`document.activeElement.id === "q"`),
		chromedp.KeyEvent(kb.Escape), chromedp.KeyEvent(kb.Escape), until(`document.activeElement.id !== "q"`),
		chromedp.KeyEvent("j"), until(`document.activeElement.matches("#entries tbody tr")`),
		chromedp.KeyEvent(kb.Enter),
		until(`document.getElementById("diff")`),
		until(param("open")+` !== ""`))
	diff := value(t, d, "diff", chromedp.Evaluate[[]string](`[...document.querySelectorAll("#diff > table.diff > tbody > tr")].map(tr => [...tr.cells].map(c => c.textContent).join("|"))`))
	if len(diff) != 1 || diff[0] != "~|disabled|false|true" {
		t.Errorf("diff of the disabled key: %q, want [~|disabled|false|true]", diff)
	}
	fields := value(t, d, "fields", chromedp.Text(chromedp.CSS("#detail dl.fields")))
	for _, f := range []string{"event_id", "principal_type", "resource_id", tn.ciKey, "created_time"} {
		if !strings.Contains(fields, f) {
			t.Errorf("detail lacks %q:\n%s", f, fields)
		}
	}
	if js := value(t, d, "data", chromedp.Text(chromedp.CSS("#detail pre.json"))); !strings.Contains(js, `"disabled": true`) {
		t.Errorf("data not pretty-printed: %s", js)
	}
	d.do(t, "Esc closes", chromedp.KeyEvent(kb.Escape), until(`!document.getElementById("detail") && `+param("open")+` === ""`),
		chromedp.NavigateBack(), until(`document.getElementById("diff")`))
}

// testHistogram draws, switches, filters from and zooms the histogram.
func testHistogram(t *testing.T, d *dash) {
	d.signIn(t, d.alice, "?view=audit")
	d.do(t, "histogram", until(`document.querySelector("#histogram svg rect.bar")`), until(`document.querySelector("#top-actors li button")`))
	total := value(t, d, "total", chromedp.Evaluate[string](`document.getElementById("stats-total").textContent`))
	if total == "0" {
		t.Fatal("histogram: no entry")
	}
	// The first page of entries is not slowed by the stats: they are asked
	// once it is in (a page opened with the credential in the session, as a
	// reload does).
	d.do(t, "reload", chromedp.Reload(), until(`document.querySelector("#histogram svg rect.bar")`))
	order := value(t, d, "request order", chromedp.Evaluate[[]float64](`(() => {
		const rs = performance.getEntriesByType("resource");
		const list = rs.find((e) => /\/audit_logs\?/.test(e.name)), st = rs.find((e) => /\/audit_logs\/stats\?/.test(e.name));
		return list && st ? [list.responseEnd, st.startTime] : [];
	})()`))
	if len(order) != 2 || order[1] < order[0] {
		t.Errorf("the stats were asked before the first page was in (list response end, stats start: %v)", order)
	}
	// By source: the legend names sources; a legend key is one click from a filter.
	d.do(t, "by source", chromedp.Click(chromedp.CSS(`.by button[data-by="source"]`)), until(param("by")+` === "source"`),
		until(`document.querySelector("#histogram ul.legend button")`))
	keys := value(t, d, "legend", chromedp.Evaluate[[]string](`[...document.querySelectorAll("#histogram ul.legend button")].map(b => b.dataset.key)`))
	for _, k := range keys {
		if !strings.HasPrefix(k, "AUDIT_SOURCE_") {
			t.Fatalf("by source, legend %q", keys)
		}
	}
	d.do(t, "legend filter", chromedp.Click(chromedp.CSS("#histogram ul.legend button")), until(param("q")+`.startsWith("source:")`),
		until(`document.querySelector("#histogram ul.legend button")`), chromedp.NavigateBack(), chromedp.NavigateBack(),
		until(param("by")+` === "" && `+param("q")+` === ""`), until(`document.querySelector("#histogram svg rect.bar")`))
	// Drag across the middle of the chart: the range becomes since–until.
	box := value(t, d, "svg box", chromedp.Evaluate[[]float64](`(() => { const r = document.querySelector("#histogram svg").getBoundingClientRect(); return [r.left, r.top, r.width, r.height]; })()`))
	x0, x1, y := box[0]+box[2]*0.3, box[0]+box[2]*0.7, box[1]+box[3]*0.5
	d.do(t, "drag", chromedp.DragAndDropXY(x0, y, x1, y, 8), until(param("since")+` !== "" && `+param("until")+` !== ""`),
		until(`document.querySelector("#histogram svg") || document.getElementById("stats-unavailable")`))
	since := value(t, d, "since", chromedp.Evaluate[string](param("since")))
	until_ := value(t, d, "until", chromedp.Evaluate[string](param("until")))
	s, err1 := time.Parse(time.RFC3339, since)
	u, err2 := time.Parse(time.RFC3339, until_)
	if err1 != nil || err2 != nil || !u.After(s) || u.Sub(s) > 11*time.Hour || u.Sub(s) < 8*time.Hour {
		t.Fatalf("zoomed to %s – %s, want ~40%% of 24 h", since, until_)
	}
	if n := value(t, d, "pressed", chromedp.Evaluate[int](`document.querySelectorAll(".range button[aria-pressed=true]").length`)); n != 0 {
		t.Errorf("a preset is still pressed after the zoom")
	}
	// A top actor is one click from a filter.
	actor := value(t, d, "actor", chromedp.Evaluate[string](`document.querySelector("#top-actors li button").dataset.value`))
	d.do(t, "top actor", chromedp.Click(chromedp.CSS("#top-actors li button")), until(param("q")+`.startsWith("actor:")`))
	if q := value(t, d, "q", chromedp.Evaluate[string](param("q"))); !strings.Contains(q, strings.Trim(actor, `"`)) {
		t.Errorf("top actor %q gave q %q", actor, q)
	}
}

func testLiveTail(t *testing.T, d *dash) {
	d.signIn(t, d.alice, "?view=audit")
	d.do(t, "live on", until(rowsJS+` > 0`), chromedp.Click(chromedp.CSS("#live")),
		until(`document.getElementById("live-state").dataset.state === "live"`))
	base := "/api/v1/orgs/" + d.org
	if r := d.c.call("POST", base+"/api_keys", d.boot, map[string]any{"name": "live one", "user_id": "alice"}); r.status != 201 {
		t.Fatalf("key: %d %s", r.status, r.raw)
	}
	d.do(t, "live entry", until(`document.querySelector("#entries tbody tr").textContent.includes("live one")`))
	// Paused: entries wait behind the button.
	d.do(t, "pause", chromedp.Click(chromedp.CSS("#pause")))
	if r := d.c.call("POST", base+"/api_keys", d.boot, map[string]any{"name": "live two", "user_id": "alice"}); r.status != 201 {
		t.Fatalf("key: %d %s", r.status, r.raw)
	}
	d.do(t, "paused", until(`document.getElementById("pause").textContent.includes("1 new")`))
	if top := value(t, d, "top", chromedp.Evaluate[string](`document.querySelector("#entries tbody tr").textContent`)); strings.Contains(top, "live two") {
		t.Fatal("paused, yet the entry was shown")
	}
	d.do(t, "resume", chromedp.Click(chromedp.CSS("#pause")), until(`document.querySelector("#entries tbody tr").textContent.includes("live two")`))
	// Off, a change, on again: the tail resumes after the last entry it saw
	// (Last-Event-ID), so the change made meanwhile arrives.
	d.do(t, "off", chromedp.Click(chromedp.CSS("#live")), until(`document.getElementById("live").getAttribute("aria-pressed") === "false"`))
	if r := d.c.call("POST", base+"/api_keys", d.boot, map[string]any{"name": "while off", "user_id": "alice"}); r.status != 201 {
		t.Fatalf("key: %d %s", r.status, r.raw)
	}
	d.do(t, "on again", chromedp.Sleep(300*time.Millisecond), chromedp.Click(chromedp.CSS("#live")),
		until(`document.querySelector("#entries tbody tr").textContent.includes("while off")`))
	if n := value(t, d, "rows", chromedp.Evaluate[int](`[...document.querySelectorAll("#entries tbody tr")].filter(tr => /live one|live two|while off/.test(tr.textContent)).length`)); n != 3 {
		t.Errorf("after the resume, %d rows of the live keys, want 3 (none twice)", n)
	}
}

func testExport(t *testing.T, d *dash) {
	d.signIn(t, d.alice, "?view=audit&q=action:DISABLED")
	n := 0
	d.do(t, "rows", until(rowsJS+` > 0`))
	n = value(t, d, "rows", chromedp.Evaluate[int](rowsJS))
	// Catch the Blob handed to the download link.
	d.do(t, "hook", until(`(window.__blobs = [], URL.createObjectURL = ((o) => (b) => (window.__blobs.push(b), o.call(URL, b)))(URL.createObjectURL), true)`),
		chromedp.Click(chromedp.CSS("#export-csv")), until(`window.__blobs.length === 1`),
		chromedp.Click(chromedp.CSS("#export-jsonl")), until(`window.__blobs.length === 2`))
	csv := value(t, d, "csv", chromedp.Evaluate[string](`window.__blobs[0].text()`, chromedp.EvalAwaitPromise))
	lines := strings.Split(strings.TrimSpace(csv), "\n")
	if !strings.HasPrefix(lines[0], "id,event_id,timestamp,client_ip,action,source") || len(lines) != n+1 {
		t.Fatalf("CSV: %d lines (want %d + header):\n%.400s", len(lines), n, csv)
	}
	for _, l := range lines[1:] {
		if !strings.Contains(l, "AUDIT_ACTION_DISABLED") {
			t.Fatalf("CSV row of another action: %s", l)
		}
	}
	jsonl := value(t, d, "jsonl", chromedp.Evaluate[string](`window.__blobs[1].text()`, chromedp.EvalAwaitPromise))
	jl := entryLines(jsonl)
	if len(jl) != n {
		t.Fatalf("JSONL: %d entries, want %d:\n%.600s", len(jl), n, jsonl)
	}
	var first map[string]any
	if err := json.Unmarshal([]byte(jl[0]), &first); err != nil || first["action"] != "AUDIT_ACTION_DISABLED" {
		t.Fatalf("JSONL first line: %v %s", err, jl[0])
	}
}

func testXSS(t *testing.T, d *dash) {
	d.signIn(t, d.alice, "?view=audit&q="+url.QueryEscape(`"`+strings.ReplaceAll(xssName, `"`, `\"`)+`"`))
	d.do(t, "rows", until(rowsJS+` >= 2`), chromedp.KeyEvent("j"), chromedp.KeyEvent(kb.Enter), until(`document.getElementById("detail")`))
	texts := value(t, d, "cells", chromedp.Evaluate[string](`document.getElementById("view").textContent`))
	if !strings.Contains(texts, xssName) {
		t.Errorf("the plant is not shown as text")
	}
	opts := value(t, d, "projects", chromedp.Evaluate[[]string](`[...document.querySelectorAll("#project option")].map(o => o.textContent)`))
	if !strings.Contains(strings.Join(opts, "\n"), xssName) {
		t.Errorf("project picker: %q", opts)
	}
	if n := value(t, d, "imgs", chromedp.Evaluate[int](`document.querySelectorAll("img").length`)); n != 0 {
		t.Errorf("%d <img> elements in the page", n)
	}
	if v := value(t, d, "xss", chromedp.Evaluate[string](`String(window.__xss)`)); v != "undefined" {
		t.Fatalf("window.__xss = %s: the plant ran", v)
	}
}

func testExecutions(t *testing.T, d *dash, tn auditTenant) {
	d.signIn(t, d.alice, "?view=executions")
	d.do(t, "rows", until(rowsJS+` === `+fmt.Sprint(tn.execs)))
	d.do(t, "fail-open", chromedp.Click(chromedp.CSS("#quick-fail-open")), until(param("q")+` === "hook_decision:fail_open"`),
		until(rowsJS+` === `+fmt.Sprint(tn.failOpen)))
	d.do(t, "open", clickStill("#entries tbody tr"), until(`document.getElementById("hook-calls")`))
	calls := value(t, d, "calls", chromedp.Evaluate[[]string](`[...document.querySelectorAll("#hook-calls tbody tr")].map(tr => [...tr.cells].map(c => c.textContent).join("|"))`))
	if len(calls) != 2 || calls[0] != "pre|policy-pre|allowfail_open appliedtimeout after 2s|no answer3 attempts · 2.00 s" {
		t.Errorf("hook calls: %q", calls)
	}
	d.do(t, "refused", chromedp.Click(chromedp.CSS("#quick-refused")), until(param("q")+` === "hook_decision:deny,fail_closed"`),
		until(rowsJS+` === `+fmt.Sprint(tn.refused)))
	// The export is of the view: the refused executions only.
	d.do(t, "export", until(`(window.__blobs = [], URL.createObjectURL = ((o) => (b) => (window.__blobs.push(b), o.call(URL, b)))(URL.createObjectURL), true)`),
		chromedp.Click(chromedp.CSS("#export-jsonl")), until(`window.__blobs.length === 1`))
	jsonl := value(t, d, "jsonl", chromedp.Evaluate[string](`window.__blobs[0].text()`, chromedp.EvalAwaitPromise))
	if lines := entryLines(jsonl); len(lines) != tn.refused || !strings.Contains(lines[0], `"success":false`) {
		t.Errorf("executions export: %d lines (want %d): %.300s", len(lines), tn.refused, jsonl)
	}
	outs := value(t, d, "outcomes", chromedp.Evaluate[[]string](`[...document.querySelectorAll("#entries tbody tr td:nth-child(6)")].map(td => td.textContent)`))
	for _, o := range outs {
		if !strings.Contains(o, "HOOK_CHECK_FAILED") {
			t.Errorf("refused by a hook shows %q", outs)
		}
	}
}

func testPhone(t *testing.T, d *dash) {
	d.do(t, "390 px", chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile))
	d.signIn(t, d.alice, "?view=audit")
	d.do(t, "rows", until(rowsJS+` > 0`))
	if w := value(t, d, "width", chromedp.Evaluate[int](`document.documentElement.scrollWidth`)); w > 392 {
		t.Errorf("at 390 px the page is %d px wide", w)
	}
	d.do(t, "open", clickStill("#entries tbody tr"), until(`document.getElementById("detail")`))
	if w := value(t, d, "detail", chromedp.Evaluate[int](`Math.round(document.getElementById("detail").getBoundingClientRect().width)`)); w > 390 || w < 300 {
		t.Errorf("detail at 390 px: %d px wide", w)
	}
}

// colorScheme emulates prefers-color-scheme (light or dark).
func colorScheme(scheme string) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
			Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: scheme}}})
		return err
	})
}

// testDarkMode: the page follows prefers-color-scheme — a dark background
// with light text in dark mode, the reverse in light mode — for the page
// and an entry's row.
func testDarkMode(t *testing.T, d *dash) {
	luminance := `(sel, prop) => { const m = getComputedStyle(document.querySelector(sel))[prop].match(/\d+/g).map(Number); return (0.2126*m[0] + 0.7152*m[1] + 0.0722*m[2]) / 255; }`
	d.signIn(t, d.alice, "?view=audit")
	d.do(t, "rows", until(rowsJS+` > 0`))
	for _, tc := range []struct {
		scheme string
		dark   bool
	}{{"dark", true}, {"light", false}, {"dark", true}} {
		d.do(t, tc.scheme, colorScheme(tc.scheme))
		lum := value(t, d, tc.scheme, chromedp.Evaluate[[]float64](`(() => { const l = `+luminance+`; return [l("body", "backgroundColor"), l("body", "color"), l("#entries tbody tr td", "color")]; })()`))
		bg, fg, cell := lum[0], lum[1], lum[2]
		if dark := bg < 0.3 && fg > 0.7 && cell > 0.5; dark != tc.dark || (!tc.dark && !(bg > 0.9 && fg < 0.3)) {
			t.Errorf("prefers-color-scheme %s: background %.2f, text %.2f, cell text %.2f", tc.scheme, bg, fg, cell)
		}
	}
}

// testErrors runs last: it spends the rate limit.
func testErrors(t *testing.T, d *dash) {
	base := "/api/v1/orgs/" + d.org
	// 403: alice owns Acme but is no member of billing.
	d.signIn(t, d.alice, "?view=audit&project="+d.project)
	d.do(t, "403", until(`!document.getElementById("banner").hidden && document.getElementById("list-error")`))
	if msg := value(t, d, "banner", chromedp.Text(chromedp.CSS("#banner"))); !strings.Contains(msg, "not a member of Acme or of its project billing with the role this needs") {
		t.Errorf("after a 403: %q", msg)
	}
	d.do(t, "sign out", chromedp.Click(chromedp.CSS("#signout")), chromedp.WaitVisible(chromedp.CSS("#credential")))
	r := d.c.call("POST", base+"/api_keys", d.boot, map[string]any{"name": "short-lived", "user_id": "alice"})
	if r.status != 201 {
		t.Fatalf("key: %d %s", r.status, r.raw)
	}
	key, id := r.data()["key"].(string), r.data()["id"].(string)
	d.signIn(t, key, "?view=audit")
	d.do(t, "rows", until(rowsJS+` > 0`), chromedp.Click(chromedp.CSS("#live")),
		until(`document.getElementById("live-state").dataset.state === "live"`))
	if r := d.c.call("DELETE", base+"/api_keys/"+id, d.boot, nil); r.status/100 != 2 {
		t.Fatalf("delete key: %d %s", r.status, r.raw)
	}
	// The open live tail ends with the key (the stream's error event) and
	// the page asks to sign in again, with nothing clicked.
	signIn := func() bool {
		return value(t, d, "form", chromedp.Evaluate[bool](`!!document.getElementById("credential")`))
	}
	testenv.Eventually(t, 6*time.Second, "the live tail of a deleted key ends and the page asks to sign in", signIn)
	// The next call of the page answers 401: sign in again.
	first := true
	testenv.Eventually(t, 10*time.Second, "a deleted key no longer reads the log", func() bool {
		if !first {
			d.do(t, "another q", until(`(document.getElementById("q").value = "x" + Date.now(), true)`))
		}
		first = false
		d.do(t, "search", until(`(document.getElementById("search-go") && document.getElementById("search-go").click(), true)`), chromedp.Sleep(150*time.Millisecond))
		return signIn()
	})
	if msg := value(t, d, "msg", chromedp.Text(chromedp.CSS("#signin-error"))); !strings.Contains(msg, "sign in again") {
		t.Errorf("after a 401: %q", msg)
	}
	// 429: spend the IP's budget, then the page says when to retry.
	d.signIn(t, d.alice, "?view=audit")
	d.do(t, "rows", until(rowsJS+` > 0`))
	// The window is a minute on the clock: spent too close to its end,
	// the page's search would fall in the next one; then spend the next.
	retryAfter := regexp.MustCompile(`retry after (\d+)s`)
	for attempt := 0; attempt < 3; attempt++ {
		left := 0
		for i := 0; i < 700; i++ {
			if code, body := d.rawGet(t, base+"/audit_logs?limit=0", d.alice); code == http.StatusTooManyRequests {
				if m := retryAfter.FindSubmatch(body); m != nil {
					left, _ = strconv.Atoi(string(m[1]))
				}
				break
			}
		}
		if left >= 20 {
			break
		}
		time.Sleep(time.Duration(left+1) * time.Second)
	}
	d.do(t, "rate limited", until(`(document.getElementById("q").value = "action:CREATED", true)`), chromedp.Click(chromedp.CSS("#search-go")),
		until(`!document.getElementById("banner").hidden`))
	if msg := value(t, d, "banner", chromedp.Text(chromedp.CSS("#banner"))); !strings.Contains(msg, "Rate limited: retry in") {
		t.Errorf("after a 429: %q", msg)
	}
}

// TestDashboardScreenshot takes the README's screenshot (docs/dashboard.png,
// 1280×800) when AUDITRAIL_SCREENSHOT=1.
func TestDashboardScreenshot(t *testing.T) {
	t.Parallel()
	if os.Getenv("AUDITRAIL_SCREENSHOT") != "1" {
		t.Skip("set AUDITRAIL_SCREENSHOT=1 to take docs/dashboard.png")
	}
	d := openDashboard(t, "--checkpoint-interval", "300ms")
	seedTenant(t, d, false)
	d.waitCovered(t, "audit_logs") // the opened entry shows its verification
	if r := d.c.call("PUT", "/api/v1/orgs/"+d.org+"/projects/"+d.project+"/members/alice", d.boot, map[string]any{"role": "member"}); r.status/100 != 2 {
		t.Fatalf("alice in billing: %d %s", r.status, r.raw)
	}
	d.do(t, "1280×800", chromedp.EmulateViewport(1280, 800))
	d.signIn(t, d.alice, "?view=audit&project="+d.project)
	d.do(t, "rows", until(rowsJS+` >= 30`), until(`document.querySelector("#histogram svg") || document.getElementById("stats-unavailable")`))
	id := value(t, d, "entry", chromedp.Evaluate[string](`[...document.querySelectorAll("#entries tbody tr")].find(tr => tr.textContent.includes("UPDATED")).dataset.id`))
	d.do(t, "open", clickStill(`#entries tbody tr[data-id="`+id+`"]`), until(`document.getElementById("diff")`), until(checked),
		until(`(document.activeElement.blur(), window.scrollTo(0, 0), true)`), chromedp.Sleep(700*time.Millisecond))
	png := value(t, d, "screenshot", chromedp.CaptureScreenshot())
	out := filepath.Join("..", "..", "docs", "dashboard.png")
	if err := os.WriteFile(out, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s (%d bytes)", out, len(png))
}

// entryLines are the lines of a JSONL export that are entries: not its
// last line {"checkpoint": …} (dev signs a checkpoint every second).
func entryLines(jsonl string) []string {
	var out []string
	for _, l := range strings.Split(strings.TrimSpace(jsonl), "\n") {
		if !strings.HasPrefix(l, `{"checkpoint":`) {
			out = append(out, l)
		}
	}
	return out
}
