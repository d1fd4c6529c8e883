//go:build e2e

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/auditrail/auditrail/internal/testenv"
	"github.com/auditrail/auditrail/internal/testenv/browser"
)

// TestDashboardLifecycle: the platform admin, on the lifecycle view of
// Acme, sets the audit log's retention to 30d through the form (the API
// answers it, and its audit event has source DASHBOARD), sees the API's
// message by the field for "40x", places a legal hold (listed with its
// count) and releases it, asks an erasure of a member (listed, then done
// after a Refresh, never showing the value); an admin of Acme who is no
// owner sees the API's 403 on the erasure form. No console error, no
// uncaught exception.
func TestDashboardLifecycle(t *testing.T) {
	t.Parallel()
	start := time.Now()
	d := openDashboard(t, "--retention-interval", "300ms", "--retention-grace", "0s", "--checkpoint-interval", "200ms")
	orgPath := "/api/v1/orgs/" + d.org
	const member = "bob@example.com"
	if r := d.c.call("PUT", orgPath+"/members/"+member, d.boot, map[string]any{"role": "member", "display_name": "Bob Builder"}); r.status != 201 {
		t.Fatalf("member bob: %d %s", r.status, r.raw)
	}
	if r := d.c.call("PUT", orgPath+"/members/carol", d.boot, map[string]any{"role": "admin", "display_name": "Carol"}); r.status != 201 {
		t.Fatalf("member carol: %d %s", r.status, r.raw)
	}
	r := d.c.call("POST", orgPath+"/api_keys", d.boot, map[string]any{"name": "carol's key", "user_id": "carol"})
	if r.status != 201 {
		t.Fatalf("carol's key: %d %s", r.status, r.raw)
	}
	carol := r.data()["key"].(string)

	consoleErrors := watchConsole(t, d.tab)
	d.signIn(t, d.boot, "?view=lifecycle&org="+d.org)
	d.do(t, "the lifecycle view",
		chromedp.WaitVisible(chromedp.CSS(`#nav a[data-view="lifecycle"].active`)),
		until(`document.querySelector("#retention-table") && !document.querySelector("#view .loading")`))
	confirm := chromedp.Steps(chromedp.WaitVisible(chromedp.CSS("#confirm-yes")), chromedp.Click(chromedp.CSS("#confirm-yes")))
	text := func(what, expr string) string {
		t.Helper()
		return value(t, d, what, chromedp.Evaluate[string](`(() => { const e = `+expr+`; return e ? e.textContent.trim() : "<none>" })()`))
	}

	t.Run("retention", func(t *testing.T) {
		was := d.c.call("GET", orgPath+"/retention", d.boot, nil).data()
		if got := text("set", `document.querySelector('#retention-table tr[data-log="audit_logs"] .set')`); got != show(was["audit_logs"]) {
			t.Errorf("the view shows audit_logs %q, the API %v", got, was["audit_logs"])
		}
		for _, b := range []string{"min", "max", "default", "grace"} {
			if got := text(b, `document.querySelector("#retention-bounds .`+b+`")`); got == "<none>" || got == "" {
				t.Errorf("bound %s not shown", b)
			}
		}
		// Without a setting, the operator's default (dev: keep forever).
		forever := value(t, d, "keep forever", chromedp.Evaluate[bool](`document.getElementById("retention-audit_logs-forever").checked`))
		if forever != (was["audit_logs"] == nil) {
			t.Errorf("keep forever checked: %v; the API answers audit_logs %v", forever, was["audit_logs"])
		}
		if forever {
			d.do(t, "uncheck keep forever", chromedp.Click(chromedp.CSS("#retention-audit_logs-forever")), until(`!document.getElementById("retention-audit_logs").disabled`))
		}
		d.do(t, "set 30d",
			until(`(document.getElementById("retention-audit_logs").value = "", true)`),
			chromedp.SendKeys(chromedp.CSS("#retention-audit_logs"), "30d"),
			chromedp.Click(chromedp.CSS(`#retention-form button[type="submit"]`)),
			until(`document.querySelector('#retention-table tr[data-log="audit_logs"] .set').textContent === "30d"`))
		got := d.c.call("GET", orgPath+"/retention", d.boot, nil).data()
		if got["audit_logs"] != "30d" || fmt.Sprint(got["tool_executions"]) != fmt.Sprint(was["tool_executions"]) {
			t.Fatalf("the API answers %v after the form set audit_logs 30d (was %v)", got, was)
		}
		if eff := text("effective", `document.querySelector('#retention-table tr[data-log="audit_logs"] .effective')`); eff != show(got["effective"].(map[string]any)["audit_logs"]) {
			t.Errorf("in force now: the view shows %q, the API %v", eff, got["effective"])
		}
		var events []map[string]any
		testenv.Eventually(t, 15*time.Second, func() string { return fmt.Sprintf("retention events: %v", events) }, func() bool {
			events = nil
			for _, it := range d.c.call("GET", orgPath+"/audit_logs?limit=100", d.boot, nil).data()["items"].([]any) {
				if e := it.(map[string]any); e["resource_type"] == "RESOURCE_TYPE_SETTING" && e["resource_id"] == "retention" {
					events = append(events, e)
				}
			}
			return len(events) == 1
		})
		if e := events[0]; e["source"] != "AUDIT_SOURCE_DASHBOARD" || !strings.Contains(fmt.Sprint(e["data"]), "30d") {
			b, _ := json.Marshal(e)
			t.Errorf("the retention's audit event: %s", b)
		}

		d.do(t, "set 40x",
			until(`(document.getElementById("retention-audit_logs").value = "", true)`),
			chromedp.SendKeys(chromedp.CSS("#retention-audit_logs"), "40x"),
			chromedp.Click(chromedp.CSS(`#retention-form button[type="submit"]`)),
			until(`document.getElementById("retention-audit_logs-error").textContent !== ""`))
		msg := text("error", `document.getElementById("retention-audit_logs-error")`)
		api := d.c.call("PUT", orgPath+"/retention", d.boot, map[string]any{"audit_logs": "40x"})
		if api.status != 400 || msg != api.msg() {
			t.Errorf("40x: the view says %q; the API answers %d %q", msg, api.status, api.msg())
		}
		if v := d.c.call("GET", orgPath+"/retention", d.boot, nil).data()["audit_logs"]; v != "30d" {
			t.Errorf("after 40x the API answers audit_logs %v", v)
		}
	})

	t.Run("legal hold", func(t *testing.T) {
		row := `document.querySelector("#holds-table tbody tr")`
		d.do(t, "place a hold",
			chromedp.SendKeys(chromedp.CSS("#hold-name"), "dispute 42"),
			chromedp.SendKeys(chromedp.CSS("#hold-q"), "actor:someone"),
			chromedp.SetValue(chromedp.CSS("#hold-since"), "2024-01-02T03:04"),
			chromedp.Click(chromedp.CSS(`#hold-form button[type="submit"]`)),
			until(row+`?.dataset.status === "active"`))
		if got := text("name", row+`.querySelector(".name")`); got != "dispute 42" {
			t.Errorf("the hold's name: %q", got)
		}
		if got := text("q", row+`.querySelector(".q")`); got != "actor:someone" {
			t.Errorf("the hold's q: %q", got)
		}
		held := text("held", row+`.querySelector(".held")`)
		if !regexp.MustCompile(`^\d+$`).MatchString(held) {
			t.Errorf("an active hold shows held %q, want its count", held)
		}
		holds := d.c.call("GET", orgPath+"/legal_holds", d.boot, nil).data()["items"].([]any)
		if len(holds) != 1 {
			t.Fatalf("holds: %v", holds)
		}
		hold := holds[0].(map[string]any)
		if fmt.Sprint(hold["held"]) != held {
			t.Errorf("the view shows held %q, the API %v", held, hold["held"])
		}
		// since: the datetime-local of the viewer's zone, sent in UTC.
		want := value(t, d, "since", chromedp.Evaluate[string](`new Date("2024-01-02T03:04").toISOString()`))
		wt, _ := time.Parse(time.RFC3339, want)
		gt, err := time.Parse(time.RFC3339, fmt.Sprint(hold["since"]))
		if err != nil || !gt.Equal(wt) || hold["until"] != nil || hold["q"] != "actor:someone" {
			t.Errorf("the hold the API answers: since %v (want %s), until %v, q %v", hold["since"], want, hold["until"], hold["q"])
		}
		d.do(t, "release it",
			chromedp.Click(chromedp.CSS("#holds-table tbody tr button.release")), confirm,
			until(row+`?.dataset.status === "released"`))
		if got := text("status", row+`.querySelector(".status")`); got != "released" {
			t.Errorf("released hold's status: %q", got)
		}
		if n := value(t, d, "release buttons", chromedp.Evaluate[int](`document.querySelectorAll("#holds-table button.release").length`)); n != 0 {
			t.Errorf("a released hold has %d release buttons", n)
		}
	})

	t.Run("erasure", func(t *testing.T) {
		row := `document.querySelector("#erasures-table tbody tr")`
		d.do(t, "ask an erasure",
			chromedp.SetValue(chromedp.CSS("#erasure-kind"), "user_id"),
			chromedp.SendKeys(chromedp.CSS("#erasure-value"), member),
			chromedp.SendKeys(chromedp.CSS("#erasure-reason"), "GDPR article 17 request"),
			chromedp.Click(chromedp.CSS(`#erasure-form button[type="submit"]`)),
			chromedp.WaitVisible(chromedp.CSS("#confirm-yes")))
		if q := text("question", `document.getElementById("confirm-msg")`); !strings.Contains(q, "cannot be undone") || !strings.Contains(q, member) {
			t.Errorf("the confirmation asks %q", q)
		}
		d.do(t, "confirm the erasure", confirm, until(row))
		status := text("status", row+`.querySelector(".status")`)
		if status != "pending" && status != "done" {
			t.Errorf("a new erasure shows status %q", status)
		}
		ers := d.c.call("GET", orgPath+"/erasures", d.boot, nil).data()["items"].([]any)
		if len(ers) != 1 {
			t.Fatalf("erasures: %v", ers)
		}
		er := ers[0].(map[string]any)
		if got := text("id", row+`.querySelector(".id")`); got != er["id"] {
			t.Errorf("the row shows id %q, the API %v", got, er["id"])
		}
		if got := text("pseudonym", row+`.querySelector(".pseudonym")`); got != er["pseudonym"] {
			t.Errorf("the row shows pseudonym %q, the API %v", got, er["pseudonym"])
		}
		// Refresh until the lifecycle has done it.
		testenv.Eventually(t, 20*time.Second, func() string { return "erasure status " + text("status", row+`.querySelector(".status")`) }, func() bool {
			d.do(t, "refresh",
				chromedp.Click(chromedp.CSS("#erasures-refresh")),
				until(`!document.getElementById("erasures-refresh").disabled`))
			return text("status", row+`.querySelector(".status")`) == "done"
		})
		er = d.c.call("GET", orgPath+"/erasures/"+er["id"].(string), d.boot, nil).data()
		if got := text("entries", row+`.querySelector(".entries")`); er["status"] != "done" || got != fmt.Sprint(er["entries"]) || er["entries"].(float64) < 1 {
			t.Errorf("done: the row shows %q entries, the API %v", got, er)
		}
		if done := text("done", row+`.querySelector('td[data-label="Done"] time')`); done == "<none>" {
			t.Error("a done erasure shows no done_at")
		}
		if page := value(t, d, "page", chromedp.Evaluate[string](`document.getElementById("view").textContent + [...document.querySelectorAll("#view input")].map(i => i.value).join(" ")`)); strings.Contains(page, member) {
			t.Error("the page still shows the erased value")
		}
	})

	// Filled (a released hold, a done erasure, the 40x message): no WCAG
	// A/AA rule fails, and at a phone's width nothing is wider than it.
	t.Run("accessible", func(t *testing.T) {
		axeCheck(t, d, "the lifecycle view")
		d.do(t, "390 px", chromedp.EmulateViewport(390, 844))
		defer d.do(t, "reset viewport", chromedp.ResetViewport())
		if w := value(t, d, "width", chromedp.Evaluate[int](`document.documentElement.scrollWidth`)); w > 390 {
			t.Errorf("the lifecycle view at 390 px is %d px wide", w)
		}
	})

	t.Run("admin refused", func(t *testing.T) {
		d.tab = browser.Tab(t)
		adminErrors := watchConsole(t, d.tab)
		d.signIn(t, carol, "?view=lifecycle&org="+d.org)
		d.do(t, "ask an erasure as an admin",
			until(`document.querySelector("#retention-table") && !document.querySelector("#view .loading")`),
			chromedp.SendKeys(chromedp.CSS("#erasure-value"), "someone"),
			chromedp.SendKeys(chromedp.CSS("#erasure-reason"), "asked by mail"),
			chromedp.Click(chromedp.CSS(`#erasure-form button[type="submit"]`)),
			confirm,
			until(`document.getElementById("erasure-error").textContent !== ""`))
		msg := text("error", `document.getElementById("erasure-error")`)
		api := d.c.call("POST", orgPath+"/erasures", carol, map[string]any{"subject": map[string]any{"user_id": "someone"}, "reason": "asked by mail"})
		if api.status != 403 || msg != api.msg() {
			t.Errorf("as an admin the view says %q; the API answers %d %q", msg, api.status, api.msg())
		}
		if errs := adminErrors(); len(errs) > 0 {
			t.Errorf("console errors as an admin:\n%s", strings.Join(errs, "\n"))
		}
	})

	if errs := consoleErrors(); len(errs) > 0 {
		t.Errorf("console errors:\n%s", strings.Join(errs, "\n"))
	}
	t.Logf("done in %s", time.Since(start).Round(time.Millisecond))
}

// axeCheck runs axe-core over the page of d's tab (WCAG 2.0 and 2.1 A/AA).
func axeCheck(t *testing.T, d *dash, name string) {
	t.Helper()
	axe, err := os.ReadFile(filepath.Join(testenv.NPMPackage(t, "axe-core", axeVersion), "axe.min.js"))
	if err != nil {
		t.Fatal(err)
	}
	d.do(t, "inject axe-core", chromedp.Evaluate[chromedp.Void](string(axe)+";void 0"))
	raw := value(t, d, "axe on "+name, chromedp.Evaluate[string](`axe.run(document, {runOnly: {type: "tag", values: ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"]}}).then(r => JSON.stringify(r.violations))`, chromedp.EvalAwaitPromise))
	var vs []axeViolation
	if err := json.Unmarshal([]byte(raw), &vs); err != nil {
		t.Fatalf("axe on %s: %v %s", name, err, raw)
	}
	for _, v := range vs {
		var where []string
		for _, n := range v.Nodes {
			b, _ := json.Marshal(n.Target)
			where = append(where, string(b)+" "+n.HTML)
		}
		t.Errorf("%s: %s (%s): %s\n  %s", name, v.ID, v.Impact, v.Help, strings.Join(where, "\n  "))
	}
}

// show is a retention value as the view shows it (null: forever).
func show(v any) string {
	if v == nil {
		return "forever"
	}
	return fmt.Sprint(v)
}

// watchConsole collects the console errors and uncaught exceptions of the
// tab from now on; the answer lists those seen so far. The browser's own
// report of an HTTP error the test provokes (a 400, a 403) is no error of
// the page.
func watchConsole(t *testing.T, tab context.Context) func() []string {
	t.Helper()
	var mu sync.Mutex
	var errs []string
	ctx, cancel := context.WithCancel(tab)
	t.Cleanup(cancel)
	messages := chromedp.Console(ctx)
	go func() {
		for m, err := range messages {
			if err != nil {
				return
			}
			if m.Type != chromedp.ConsoleError && !m.IsException() {
				continue
			}
			if m.Source == "network" && regexp.MustCompile(`status of 40[03]`).MatchString(m.Text) {
				continue
			}
			mu.Lock()
			errs = append(errs, m.String())
			mu.Unlock()
		}
	}()
	return func() []string {
		time.Sleep(200 * time.Millisecond) // the last events read
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), errs...)
	}
}
