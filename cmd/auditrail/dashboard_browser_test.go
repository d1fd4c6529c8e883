//go:build e2e

package main

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/auditrail/auditrail/internal/testenv"
	"github.com/auditrail/auditrail/internal/testenv/browser"
	"github.com/auditrail/auditrail/query/dashboard"
)

// dash is a running `auditrail dev` with an organization "Acme", a project
// "billing", an owner alice with an API key, and a chromium tab.
type dash struct {
	p       *devProc
	c       *apiClient
	boot    string // the platform admin's bootstrap key
	org     string // Acme's id
	project string // billing's id
	alice   string // the API key of alice, owner of Acme
	tab     context.Context
}

// dashStores runs f on the embedded store and on ClickHouse.
func dashStores(t *testing.T, f func(t *testing.T, extra ...string)) {
	t.Run("sqlite", func(t *testing.T) { f(t) })
	t.Run("clickhouse", func(t *testing.T) { f(t, "--clickhouse", testenv.ClickHouse(t)) })
}

// openDashboard starts dev (extra: its flags), makes the tenant and opens a
// tab (not yet on the page).
func openDashboard(t *testing.T, extra ...string) *dash {
	t.Helper()
	tab := browser.Tab(t) // first: a missing chromium fails (or skips) before dev starts
	p, boot := devWithKey(t, extra...)
	d := &dash{p: p, c: newAPIClient(t, p.http), boot: boot, tab: tab}
	r := d.c.call("POST", "/api/v1/orgs", boot, map[string]any{"name": "Acme"})
	if r.status != 201 {
		t.Fatalf("create org: %d %s", r.status, r.raw)
	}
	d.org = r.data()["id"].(string)
	r = d.c.call("POST", "/api/v1/orgs/"+d.org+"/projects", boot, map[string]any{"name": "billing"})
	if r.status != 201 {
		t.Fatalf("create project: %d %s", r.status, r.raw)
	}
	d.project = r.data()["id"].(string)
	if r := d.c.call("PUT", "/api/v1/orgs/"+d.org+"/members/alice", boot, map[string]any{"role": "owner", "display_name": "Alice"}); r.status != 201 {
		t.Fatalf("member alice: %d %s", r.status, r.raw)
	}
	r = d.c.call("POST", "/api/v1/orgs/"+d.org+"/api_keys", boot, map[string]any{"name": "alice's key", "user_id": "alice"})
	if r.status != 201 {
		t.Fatalf("alice's key: %d %s", r.status, r.raw)
	}
	d.alice = r.data()["key"].(string)
	return d
}

// url is the dashboard's URL with a query ("" or "?view=…").
func (d *dash) url(query string) string { return "http://" + d.p.http + dashboard.Path + query }

// do runs chromedp steps on the tab; a failure fails the test with what
// the page shows.
func (d *dash) do(t *testing.T, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(d.tab, steps...); err != nil {
		body, _ := chromedp.Run(d.tab, chromedp.Text(chromedp.CSS("body")))
		t.Fatalf("%s: %v\npage text:\n%s", what, err, body)
	}
}

// value runs one action that answers a value on d's tab.
func value[T any](t *testing.T, d *dash, what string, a chromedp.Action[T]) T {
	t.Helper()
	v, err := chromedp.Run(d.tab, a)
	if err != nil {
		body, _ := chromedp.Run(d.tab, chromedp.Text(chromedp.CSS("body")))
		t.Fatalf("%s: %v\npage text:\n%s", what, err, body)
	}
	return v
}

// until waits (polling) until the JavaScript expression is truthy.
func until(expr string) chromedp.Action[chromedp.Void] {
	poll := chromedp.Poll[bool]("!!(" + expr + ")")
	return func(ctx context.Context, tg *chromedp.Target) (chromedp.Void, error) {
		_, err := poll(ctx, tg)
		return chromedp.Void{}, err
	}
}

// clickStill clicks sel once the page has stopped moving under it: the
// checkpoint line has its answer and sel's box has kept its place for 20
// polls in a row. A click aims at the box it measured, and the checkpoint
// line, which wraps at phone width, arrives after the rows and moves them.
func clickStill(sel string) chromedp.Action[chromedp.Void] {
	still := until(`(() => { const c = document.getElementById("checkpoint"); if (c && c.dataset.state === "checking") return false; ` +
		`const e = document.querySelector(` + strconv.Quote(sel) + `); if (!e) return false; ` +
		`const r = e.getBoundingClientRect(), k = [r.top, r.left, r.width, r.height].join(); ` +
		`if (window.__box !== k) { window.__box = k; window.__still = 0; return false; } return ++window.__still >= 20; })()`)
	click := chromedp.Click(chromedp.CSS(sel))
	return func(ctx context.Context, tg *chromedp.Target) (chromedp.Void, error) {
		if _, err := still(ctx, tg); err != nil {
			return chromedp.Void{}, err
		}
		return click(ctx, tg)
	}
}

// signIn opens the page at query and signs in with key.
func (d *dash) signIn(t *testing.T, key, query string) {
	t.Helper()
	d.do(t, "sign in",
		chromedp.Navigate(d.url(query)),
		chromedp.WaitVisible(chromedp.CSS("#credential")),
		chromedp.SendKeys(chromedp.CSS("#credential"), key),
		chromedp.Click(chromedp.CSS(`#signin button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS("#nav a")),
	)
}

// TestDashboardServed: the page, its modules and its headers — a CSP
// without inline script or eval, nothing sniffed, nothing framed — and
// no file outside the embedded ones.
func TestDashboardServed(t *testing.T) {
	t.Parallel()
	p := startDev(t, t.TempDir())
	get := func(path string, hdr ...string) (*http.Response, string) {
		t.Helper()
		req, _ := http.NewRequest("GET", "http://"+p.http+path, nil)
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }, Timeout: 10 * time.Second}
		res, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res, string(b)
	}
	res, body := get("/dashboard/?view=audit&q=action:CREATED")
	if res.StatusCode != 200 || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/html") || !strings.Contains(body, `type="module"`) {
		t.Fatalf("GET /dashboard/: %d %s\n%s", res.StatusCode, res.Header.Get("Content-Type"), body)
	}
	csp := res.Header.Get("Content-Security-Policy")
	for _, want := range []string{"default-src 'none'", "script-src 'self'", "frame-ancestors 'none'", "base-uri 'none'"} {
		if !strings.Contains(csp, want) {
			t.Errorf("CSP %q lacks %q", csp, want)
		}
	}
	for _, bad := range []string{"unsafe-inline", "unsafe-eval", "*", "http:", "https:"} {
		if strings.Contains(csp, bad) {
			t.Errorf("CSP %q allows %q", csp, bad)
		}
	}
	if strings.Contains(body, "<script>") || strings.Contains(body, " style=") || strings.Contains(body, " onclick=") {
		t.Errorf("index.html holds inline script or style:\n%s", body)
	}
	if got := res.Header.Get("X-Content-Type-Options"); got != "nosniff" {
		t.Errorf("X-Content-Type-Options = %q", got)
	}
	if res, _ := get("/dashboard"); res.StatusCode != http.StatusMovedPermanently || res.Header.Get("Location") != "/dashboard/" {
		t.Errorf("GET /dashboard: %d → %q", res.StatusCode, res.Header.Get("Location"))
	}
	res, body = get("/dashboard/static/js/main.js")
	if res.StatusCode != 200 || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/javascript") || !strings.Contains(body, "import") {
		t.Fatalf("main.js: %d %s", res.StatusCode, res.Header.Get("Content-Type"))
	}
	if res, _ := get("/dashboard/static/js/main.js", "If-None-Match", res.Header.Get("ETag")); res.StatusCode != http.StatusNotModified {
		t.Errorf("main.js revalidated with its ETag: %d, want 304", res.StatusCode)
	}
	for _, path := range []string{"/dashboard/static/../dashboard.go", "/dashboard/static/%2e%2e/dashboard.go", "/dashboard/static/nope.js", "/dashboard/static/index.html"} {
		if res, _ := get(path); res.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s: %d, want 404", path, res.StatusCode)
		}
	}
}

// TestDashboardSignIn: a wrong credential is refused on the form; a right
// one shows the organization and its projects from /api/v1/me and stays
// for a reload of the tab; signing out forgets it.
func TestDashboardSignIn(t *testing.T) {
	t.Parallel()
	d := openDashboard(t)
	d.do(t, "a wrong key",
		chromedp.Navigate(d.url("")),
		chromedp.WaitVisible(chromedp.CSS("#credential")),
		chromedp.SendKeys(chromedp.CSS("#credential"), "ak_not_a_key"),
		chromedp.Click(chromedp.CSS(`#signin button[type="submit"]`)),
		until(`document.getElementById("signin-error").textContent.length > 0`),
	)
	if msg := value(t, d, "error", chromedp.Text(chromedp.CSS("#signin-error"))); !strings.Contains(msg, "not valid") {
		t.Errorf("wrong key: %q", msg)
	}
	d.do(t, "alice's key",
		until(`(document.getElementById("credential").value = "", true)`),
		chromedp.SendKeys(chromedp.CSS("#credential"), d.alice),
		chromedp.Click(chromedp.CSS(`#signin button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS("#nav a")),
	)
	org := value(t, d, "org", chromedp.Evaluate[string](`document.querySelector("#org option:checked").textContent`))
	who := value(t, d, "who", chromedp.Text(chromedp.CSS("#who")))
	if org != "Acme" || who != "alice (alice's key)" {
		t.Errorf("signed in: org %q, who %q; want Acme, alice (alice's key)", org, who)
	}
	d.do(t, "reload keeps the session", chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS("#nav a")))
	if stored := value(t, d, "session", chromedp.Evaluate[string](`sessionStorage.getItem("auditrail.credential")`)); stored != d.alice {
		t.Errorf("sessionStorage holds %q", stored)
	}
	d.do(t, "sign out", chromedp.Click(chromedp.CSS("#signout")), chromedp.WaitVisible(chromedp.CSS("#credential")))
	if stored := value(t, d, "session", chromedp.Evaluate[string](`sessionStorage.getItem("auditrail.credential") || ""`)); stored != "" {
		t.Errorf("signed out, sessionStorage still holds %q", stored)
	}
}
