package main

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/chromedp"
)

// Scratch (not committed): fakes stats and stream in the page's fetch.
const fakeJS = `(() => {
  const real = window.fetch;
  window.__streamCtl = null; window.__streamHeaders = [];
  window.fetch = async (url, init) => {
    const u = new URL(String(url), location.href);
    if (u.pathname.endsWith("/audit_logs/stats")) {
      const since = new Date(u.searchParams.get("since")).getTime();
      const step = {minute: 60e3, hour: 3600e3, day: 86400e3}[u.searchParams.get("bucket")];
      const buckets = [];
      for (let t = Math.floor(since/step)*step, i = 0; t < Date.now(); t += step, i++) buckets.push({start: new Date(t).toISOString(), counts: {AUDIT_ACTION_CREATED: i % 5, AUDIT_ACTION_UPDATED: (i*7) % 4, AUDIT_ACTION_DELETED: i % 2}});
      return new Response(JSON.stringify({code: 200, msg: "ok", data: {buckets, top: {actors: [{value: "k-alice", count: 12}, {value: "deploy bot", count: 5}], resources: [{value: "hook-pii", count: 7}]}}}), {status: 200, headers: {"Content-Type": "application/json"}});
    }
    if (u.pathname.endsWith("/audit_logs/stream")) {
      window.__streamHeaders.push((init.headers || {})["Last-Event-ID"] || "");
      const body = new ReadableStream({ start(c) { window.__streamCtl = c; c.enqueue(new TextEncoder().encode(": hello\n\n")); } });
      return new Response(body, {status: 200, headers: {"Content-Type": "text/event-stream"}});
    }
    return real(url, init);
  };
  window.__push = (id, name) => window.__streamCtl.enqueue(new TextEncoder().encode("id: " + id + "\ndata: " + JSON.stringify({id, event_id: id, timestamp: new Date().toISOString(), action: "AUDIT_ACTION_CREATED", source: "AUDIT_SOURCE_API", display_name: "Alice", principal_id: "k-alice", principal_type: "ACCOUNT", resource_type: "RESOURCE_TYPE_API_KEY", resource_id: id, resource_display: name, data: null, created_time: new Date().toISOString()}) + "\n\n"));
})()`

func TestDashboardScratch(t *testing.T) {
	d := openDashboard(t)
	d = d.withTab(t)
	d.do(t, "inject", chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: fakeJS})
		return err
	}))
	d.signIn(t, d.alice, "?view=audit")
	d.do(t, "histogram", until(`document.querySelector("#histogram svg rect.bar")`), until(`document.querySelector("#top-actors li button")`))
	box := value(t, d, "svg box", chromedp.Evaluate[[]float64](`(() => { const r = document.querySelector("#histogram svg").getBoundingClientRect(); return [r.left, r.top, r.width, r.height]; })()`))
	t.Logf("svg box %v", box)
	png := value(t, d, "shot", chromedp.CaptureScreenshot())
	_ = writeFile("/tmp/scratch1.png", png)
	x0, x1, y := box[0]+box[2]*0.3, box[0]+box[2]*0.7, box[1]+box[3]*0.5
	d.do(t, "drag", chromedp.DragAndDropXY(x0, y, x1, y, 8), until(param("since")+` !== "" && `+param("until")+` !== ""`), until(`document.querySelector("#histogram svg rect.bar")`))
	t.Logf("after zoom: %s %s", value(t, d, "s", chromedp.Evaluate[string](param("since"))), value(t, d, "u", chromedp.Evaluate[string](param("until"))))
	png = value(t, d, "shot", chromedp.CaptureScreenshot())
	_ = writeFile("/tmp/scratch2.png", png)
	d.do(t, "back", chromedp.NavigateBack(), until(`document.querySelector("#histogram svg rect.bar")`),
		chromedp.Click(chromedp.CSS("#top-actors li button")), until(param("q")+` === "actor:k-alice"`),
		chromedp.Click(chromedp.CSS("#live")), until(`document.getElementById("live-state").dataset.state === "live"`),
		until(`(window.__push("e-1", "pushed one"), true)`),
		until(`document.querySelector("#entries tbody tr").textContent.includes("pushed one")`),
		chromedp.Click(chromedp.CSS("#pause")),
		until(`(window.__push("e-2", "pushed two"), true)`),
		until(`document.getElementById("pause").textContent.includes("1 new")`),
		chromedp.Click(chromedp.CSS("#pause")),
		until(`document.querySelector("#entries tbody tr").textContent.includes("pushed two")`),
		// the stream ends: reconnect with Last-Event-ID
		until(`(window.__streamCtl.close(), true)`),
		until(`window.__streamHeaders.length === 2`),
		chromedp.Sleep(300*time.Millisecond),
	)
	t.Logf("headers %v", value(t, d, "h", chromedp.Evaluate[[]string](`window.__streamHeaders`)))
	png = value(t, d, "shot", chromedp.CaptureScreenshot())
	_ = writeFile("/tmp/scratch3.png", png)
}

func writeFile(p string, b []byte) error { return os.WriteFile(p, b, 0o644) }
