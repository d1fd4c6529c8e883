//go:build e2e

package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/auditrail/auditrail/internal/testenv"
)

// axeVersion is the axe-core release the accessibility test runs.
const axeVersion = "4.10.3"

// axeViolation is what axe-core reports of one rule that fails.
type axeViolation struct {
	ID     string `json:"id"`
	Impact string `json:"impact"`
	Help   string `json:"help"`
	Nodes  []struct {
		Target []any  `json:"target"`
		HTML   string `json:"html"`
	} `json:"nodes"`
}

// TestDashboardAccessible runs axe-core (the npm package, in Chromium)
// over every view of the dashboard, signed in as an owner (so the admin
// views are there), with an entry and an execution opened: no WCAG 2.0 or
// 2.1 A/AA rule may fail. A view added to the navigation is checked too.
func TestDashboardAccessible(t *testing.T) {
	t.Parallel()
	axe, err := os.ReadFile(filepath.Join(testenv.NPMPackage(t, "axe-core", axeVersion), "axe.min.js"))
	if err != nil {
		t.Fatal(err)
	}
	d := openDashboard(t)
	seedTenant(t, d, false) // entries and executions of every kind in each list
	d.do(t, "1280×800", chromedp.EmulateViewport(1280, 800))
	d.signIn(t, d.alice, "?view=audit")
	views := value(t, d, "views", chromedp.Evaluate[[]string](`[...document.querySelectorAll("#nav a")].map(a => a.dataset.view)`))
	if len(views) < 4 {
		t.Fatalf("the navigation lists %v", views)
	}
	check := func(name string) {
		t.Helper()
		// Injected through DevTools (the page's CSP allows no script of
		// ours), then run on the whole document.
		d.do(t, "inject axe-core into "+name, chromedp.Evaluate[chromedp.Void](string(axe)+";void 0"))
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
	// The top actors and resources show names (the id in the tooltip).
	d.do(t, "top lists", until(`document.querySelector("#top-actors button") && document.querySelector("#top-resources button")`))
	for _, list := range []string{"top-actors", "top-resources"} {
		names := value(t, d, list, chromedp.Evaluate[[]string](`[...document.querySelectorAll("#`+list+` button")].map(b => b.dataset.value + " => " + b.textContent)`))
		named := 0
		for _, n := range names {
			id, text, _ := strings.Cut(n, " => ")
			if !strings.HasSuffix(text, id) {
				named++
			}
		}
		if named == 0 {
			t.Errorf("%s shows ids, no name: %q", list, names)
		}
	}
	// The time column shows the date and the time zone.
	d.do(t, "audit rows", until(`document.querySelector("#entries tbody tr[data-id] td.when time")`))
	cell := value(t, d, "time cell", chromedp.Evaluate[[]string](`(() => {
		const e = document.querySelector("#entries tbody tr[data-id] td.when time"), d = new Date(e.getAttribute("datetime"));
		const zone = new Intl.DateTimeFormat(undefined, {timeZoneName: "short"}).formatToParts(d).find(p => p.type === "timeZoneName").value;
		return [e.textContent, d.toLocaleString(undefined, {month: "short"}), String(d.getDate()), zone];
	})()`))
	for _, part := range cell[1:] {
		if !strings.Contains(cell[0], part) {
			t.Errorf("the time column shows %q: no %q (want the date and the time zone)", cell[0], part)
		}
	}
	for _, v := range views {
		d.do(t, "view "+v,
			chromedp.Click(chromedp.CSS(`#nav a[data-view="`+v+`"]`)),
			until(`document.querySelector('#nav a.active') && document.querySelector('#nav a.active').dataset.view === "`+v+`"`),
			until(`!document.querySelector("#view .loading")`),
		)
		time.Sleep(300 * time.Millisecond) // the view's first answers drawn
		check("view " + v)
		if v == "audit" || v == "executions" {
			// The first row opened (its panel, the diff and the verification).
			d.do(t, "open a row of "+v,
				until(`document.querySelector("#view tbody tr[data-id]")`),
				chromedp.KeyEvent("j"), chromedp.KeyEvent(kb.Enter),
				until(`document.getElementById("detail")`),
			)
			time.Sleep(300 * time.Millisecond)
			check("view " + v + " with a row opened")
			// Nothing of the panel is cut off at 1280 px: no element ends
			// beyond it, nothing inside scrolls sideways (a table too wide).
			clipped := value(t, d, "clipped", chromedp.Evaluate[[]string](`(() => {
				const a = document.getElementById("detail"), r = a.getBoundingClientRect(), out = [];
				if (r.right > innerWidth) out.push("the panel ends at " + r.right + " px");
				for (const e of a.querySelectorAll("*")) {
					const b = e.getBoundingClientRect();
					const scrolls = e.scrollWidth > e.clientWidth + 1 && getComputedStyle(e).overflowX !== "visible" && e.tagName !== "PRE";
					if (b.right > r.right + 1 || scrolls) out.push(e.tagName + "." + e.className + ": " + (e.textContent || "").slice(0, 40));
				}
				return out;
			})()`))
			if len(clipped) > 0 {
				t.Errorf("%s: the open panel is clipped at 1280 px: %q", v, clipped)
			}
			d.do(t, "close", chromedp.KeyEvent(kb.Escape))
		}
	}
	// A malformed search is said once: in the list, not again in a banner
	// or in place of the histogram.
	for _, v := range []string{"audit", "executions"} {
		d.do(t, "a malformed q in "+v, chromedp.Navigate(d.url("?view="+v+"&q=actoor%3Ax")), until(`document.getElementById("list-error")`))
		time.Sleep(500 * time.Millisecond) // the histogram's answer too
		errs := value(t, d, "errors", chromedp.Evaluate[[]string](`[...document.querySelectorAll('[role="alert"], .error, #stats-unavailable')].filter(e => !e.hidden && e.offsetParent !== null && !e.parentElement.closest('[role="alert"], .error')).map(e => e.id + ": " + e.textContent)`))
		if len(errs) != 1 {
			t.Errorf("%s with a malformed q shows %d errors, want 1: %q", v, len(errs), errs)
		}
		check("view " + v + " with a malformed search")
	}
	// The sign-in page, signed out.
	d.do(t, "sign out", chromedp.Click(chromedp.CSS("#signout")), chromedp.WaitVisible(chromedp.CSS("#credential")))
	check("sign-in")
}
