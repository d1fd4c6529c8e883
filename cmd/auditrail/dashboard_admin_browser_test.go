//go:build e2e

package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/auditrail/auditrail/internal/testenv"
	"github.com/auditrail/auditrail/internal/testenv/browser"
)

// TestDashboardAdmin: alice, owner of Acme, manages keys and hooks from
// the admin pages — a key created and its secret shown once (it
// authenticates), disabled (it no longer does), another deleted, a
// service key created, a hook added with its health and breaker state,
// disabled and enabled again — and each change is in the audit log with
// source DASHBOARD; a key's name planted with markup shows as text; the
// pages fit a phone's width; bob, a plain member, sees no admin view and
// a forced one says he lacks the role.
func TestDashboardAdmin(t *testing.T) { dashStores(t, dashboardAdmin) }

func dashboardAdmin(t *testing.T, extra ...string) {
	d := openDashboard(t, extra...)
	orgPath := "/api/v1/orgs/" + d.org
	hookSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path == "/health" {
			_, _ = w.Write([]byte(`{"status":"healthy"}`))
			return
		}
		_, _ = w.Write([]byte(`{"code":"OK"}`))
	}))
	t.Cleanup(hookSrv.Close)

	// Made through the API (source API): a key to delete from the page and
	// a key whose name is markup.
	const plant = `<img src=x onerror="window.__xss=1">`
	for _, name := range []string{"old key", plant} {
		if r := d.c.call("POST", orgPath+"/api_keys", d.boot, map[string]any{"name": name, "user_id": "alice"}); r.status != 201 {
			t.Fatalf("key %q: %d %s", name, r.status, r.raw)
		}
	}
	if r := d.c.call("PUT", orgPath+"/members/bob", d.boot, map[string]any{"role": "member", "display_name": "Bob"}); r.status != 201 {
		t.Fatalf("member bob: %d %s", r.status, r.raw)
	}
	r := d.c.call("POST", orgPath+"/api_keys", d.boot, map[string]any{"name": "bob's key", "user_id": "bob"})
	if r.status != 201 {
		t.Fatalf("bob's key: %d %s", r.status, r.raw)
	}
	bob := r.data()["key"].(string)

	// Each part has a tab of its own (a tab's actions have 60 s in all).
	session := func(t *testing.T, key, query string) {
		t.Helper()
		d.tab = browser.Tab(t)
		d.signIn(t, key, query)
	}
	start := time.Now()
	session(t, d.alice, "?view=keys")
	if nav := value(t, d, "nav", chromedp.Evaluate[[]string](`[...document.querySelectorAll("#nav a")].map(a => a.dataset.view)`)); !slices.Contains(nav, "keys") || !slices.Contains(nav, "hooks") {
		t.Errorf("alice's nav: %v, want the admin views", nav)
	}

	// rows lists the names of a key table; press clicks a button of the
	// row named name and answers whether it was there.
	rows := func(table string) []string {
		t.Helper()
		return value(t, d, "rows", chromedp.Evaluate[[]string](`[...document.querySelectorAll("`+table+` tbody tr .name")].map(e => e.textContent)`))
	}
	row := func(table, name string) string {
		return `[...document.querySelectorAll("` + table + ` tbody tr")].find(r => r.querySelector(".name").textContent === ` + js(name) + `)`
	}
	press := func(table, name, button string) {
		t.Helper()
		if !value(t, d, "press "+button, chromedp.Evaluate[bool](`(() => { const r = `+row(table, name)+`; if (!r) return false; r.querySelector("button.`+button+`").click(); return true })()`)) {
			t.Fatalf("no row %q in %s: %v", name, table, rows(table))
		}
	}
	confirm := chromedp.Steps(chromedp.WaitVisible(chromedp.CSS("#confirm-yes")), chromedp.Click(chromedp.CSS("#confirm-yes")))

	t.Run("keys", func(t *testing.T) {
		d.do(t, "keys listed", until(`document.querySelectorAll("#keys-table tbody tr").length === 4`))
		if names := rows("#keys-table"); !slices.Contains(names, plant) {
			t.Errorf("key names %q lack the plant as text", names)
		}
		if xss := value(t, d, "xss", chromedp.Evaluate[bool](`window.__xss === 1 || !!document.querySelector("#view img")`)); xss {
			t.Error("a key's name was parsed as markup")
		}

		d.do(t, "create a key",
			until(`document.querySelector("#key-user option[value=alice]")`),
			chromedp.SendKeys(chromedp.CSS("#key-name"), "laptop"),
			chromedp.Click(chromedp.CSS(`#key-form button[type="submit"]`)),
			chromedp.WaitVisible(chromedp.CSS("#new-secret-value")),
			until(row("#keys-table", "laptop")),
		)
		secret := value(t, d, "secret", chromedp.Evaluate[string](`document.getElementById("new-secret-value").value`))
		if panel := value(t, d, "panel", chromedp.Text(chromedp.CSS("#new-secret"))); !strings.Contains(panel, "You will not see it again") {
			t.Errorf("the secret's panel says %q", panel)
		}
		if me := d.c.call("GET", "/api/v1/me", secret, nil); me.status != 200 || me.data()["principal"].(map[string]any)["user_id"] != "alice" {
			t.Fatalf("the key shown once: /me %d %s", me.status, me.raw)
		}
		d.do(t, "done with the secret",
			chromedp.Click(chromedp.CSS("#new-secret-done")),
			until(`!document.getElementById("new-secret") && ![...document.querySelectorAll("input")].some(i => i.value === `+js(secret)+`)`))

		press("#keys-table", "laptop", "disable")
		d.do(t, "disable the key", confirm, until(row("#keys-table", "laptop")+`?.dataset.state === "disabled"`))
		if me := d.c.call("GET", "/api/v1/me", secret, nil); me.status != 401 {
			t.Errorf("the disabled key: /me %d, want 401", me.status)
		}

		// Cancel keeps the key; confirming deletes it.
		press("#keys-table", "old key", "delete")
		d.do(t, "cancel", chromedp.WaitVisible(chromedp.CSS("#confirm-no")), chromedp.Click(chromedp.CSS("#confirm-no")), until(`!document.getElementById("confirm")`))
		press("#keys-table", "old key", "delete")
		d.do(t, "delete the key", confirm, until(`!`+row("#keys-table", "old key")))
	})

	t.Run("service keys", func(t *testing.T) {
		session(t, d.alice, "?view=service-keys&org="+d.org+"&project="+d.project)
		d.do(t, "service keys",
			chromedp.WaitVisible(chromedp.CSS("#service-key-name")),
			until(`document.querySelector("#service-keys-table, .admin-list .empty")`),
			chromedp.SendKeys(chromedp.CSS("#service-key-name"), "agent platform"),
			chromedp.Click(chromedp.CSS(`#service-key-form button[type="submit"]`)),
			chromedp.WaitVisible(chromedp.CSS("#new-secret-value")),
			until(row("#service-keys-table", "agent platform")),
		)
		secret := value(t, d, "secret", chromedp.Evaluate[string](`document.getElementById("new-secret-value").value`))
		if me := d.c.call("GET", "/api/v1/me", secret, nil); me.status != 200 || me.data()["principal"].(map[string]any)["type"] != "SERVICE_KEY" {
			t.Fatalf("the service key: /me %d %s", me.status, me.raw)
		}
	})

	t.Run("hooks", func(t *testing.T) {
		card := `document.querySelector("#hooks-org article.admin-hook")`
		session(t, d.alice, "?view=hooks&org="+d.org)
		d.do(t, "add a hook",
			chromedp.WaitVisible(chromedp.CSS("#hook-org-new summary")),
			until(`document.querySelector("#hooks-org .empty")`),
			chromedp.Click(chromedp.CSS("#hook-org-new summary")),
			chromedp.SendKeys(chromedp.CSS("#hook-org-name"), "policy"),
			chromedp.SendKeys(chromedp.CSS("#hook-org-endpoint"), hookSrv.URL),
			chromedp.SendKeys(chromedp.CSS("#hook-org-token"), "t0k"),
			chromedp.Click(chromedp.CSS(`#hook-org-form button[type="submit"]`)),
			until(card+`?.dataset.state === "enabled"`),
		)
		health := value(t, d, "health", chromedp.Text(chromedp.CSS("#hooks-org .health")))
		breaker := value(t, d, "breaker", chromedp.Text(chromedp.CSS(`#hooks-org tr[data-point="access"] .breaker`)))
		endpoint := value(t, d, "endpoint", chromedp.Text(chromedp.CSS("#hooks-org .endpoint")))
		if !strings.HasPrefix(health, "healthy") || !strings.Contains(health, "checked") || !strings.HasPrefix(breaker, "closed") || endpoint != hookSrv.URL {
			t.Errorf("hook shows health %q, breaker %q, endpoint %q", health, breaker, endpoint)
		}
		d.do(t, "disable the hook",
			chromedp.Click(chromedp.CSS("#hooks-org article button.disable")), confirm,
			until(card+`?.dataset.state === "disabled"`))
		d.do(t, "enable the hook",
			chromedp.Click(chromedp.CSS("#hooks-org article button.enable")),
			until(card+`?.dataset.state === "enabled"`),
			until(`document.getElementById("hooks-org-note").textContent.includes("enabled")`))

		// With a project picked, its hooks are listed under the organization's.
		d.do(t, "project hooks",
			chromedp.Navigate(d.url("?view=hooks&org="+d.org+"&project="+d.project)),
			until(`document.querySelector("#hooks-project .empty") && document.querySelector("#hooks-org article")`))
		// At a phone's width nothing is wider than the screen.
		d.do(t, "390 px", chromedp.EmulateViewport(390, 844))
		defer d.do(t, "reset viewport", chromedp.ResetViewport())
		for _, view := range []string{"hooks", "keys"} {
			d.do(t, view+" at 390 px",
				chromedp.Navigate(d.url("?view="+view+"&org="+d.org)),
				until(`document.querySelector("#hooks-org article, #keys-table")`))
			if w := value(t, d, "width", chromedp.Evaluate[int](`document.documentElement.scrollWidth`)); w > 390 {
				t.Errorf("%s at 390 px is %d px wide", view, w)
			}
		}
	})

	t.Run("audit log", func(t *testing.T) {
		type change struct{ action, resourceType, display string }
		want := []change{
			{"AUDIT_ACTION_CREATED", "RESOURCE_TYPE_API_KEY", "laptop"},
			{"AUDIT_ACTION_DISABLED", "RESOURCE_TYPE_API_KEY", "laptop"},
			{"AUDIT_ACTION_DELETED", "RESOURCE_TYPE_API_KEY", "old key"},
			{"AUDIT_ACTION_CREATED", "RESOURCE_TYPE_API_KEY", "agent platform"},
			{"AUDIT_ACTION_CREATED", "RESOURCE_TYPE_HOOK", "policy"},
			{"AUDIT_ACTION_DISABLED", "RESOURCE_TYPE_HOOK", "policy"},
			{"AUDIT_ACTION_UPDATED", "RESOURCE_TYPE_HOOK", "policy"},
		}
		var got, missing []change
		testenv.Eventually(t, 20*time.Second, func() string {
			return fmt.Sprintf("audit log with source DASHBOARD: %v\nmissing %v", got, missing)
		}, func() bool {
			got = nil
			cursor := ""
			for {
				p := orgPath + "/audit_logs?limit=100"
				if cursor != "" {
					p += "&cursor=" + url.QueryEscape(cursor)
				}
				r := d.c.call("GET", p, d.boot, nil)
				if r.status != 200 {
					t.Fatalf("GET %s: %d %s", p, r.status, r.raw)
				}
				for _, it := range r.data()["items"].([]any) {
					e := it.(map[string]any)
					if e["source"] == "AUDIT_SOURCE_DASHBOARD" {
						got = append(got, change{e["action"].(string), e["resource_type"].(string), e["resource_display"].(string)})
						if e["user_id"] != "alice" {
							t.Errorf("dashboard change %v made by %v, want alice", e["action"], e["user_id"])
						}
					}
				}
				if r.data()["has_more"] != true {
					break
				}
				cursor = r.data()["next_cursor"].(string)
			}
			missing = slices.DeleteFunc(slices.Clone(want), func(c change) bool { return slices.Contains(got, c) })
			return len(missing) == 0 && len(got) == len(want)
		})
	})

	t.Run("member", func(t *testing.T) {
		session(t, bob, "")
		nav := value(t, d, "nav", chromedp.Evaluate[[]string](`[...document.querySelectorAll("#nav a")].map(a => a.dataset.view)`))
		for _, v := range []string{"keys", "service-keys", "hooks"} {
			if slices.Contains(nav, v) {
				t.Errorf("bob's nav %v shows %s", nav, v)
			}
		}
		d.do(t, "forced keys view",
			chromedp.Navigate(d.url("?view=keys&org="+d.org)),
			chromedp.WaitVisible(chromedp.CSS("#banner")))
		if msg := value(t, d, "banner", chromedp.Text(chromedp.CSS("#banner"))); !strings.Contains(msg, "not a member of Acme with the role this needs") {
			t.Errorf("bob on the keys view: %q", msg)
		}
		if n := value(t, d, "forms", chromedp.Evaluate[int](`document.querySelectorAll("#view form, #keys-table").length`)); n != 0 {
			t.Errorf("bob sees %d admin forms or tables", n)
		}
	})
	t.Logf("pages driven in %s", time.Since(start).Round(time.Millisecond))
}

// js is s as a JavaScript string literal.
func js(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
