//go:build e2e

package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/google/uuid"

	"github.com/auditrail/auditrail/internal/testenv"
	"github.com/auditrail/auditrail/internal/tlog"
)

// TestDashboardWitnessed: with a witness (litewitness, torchwood v0.6.1)
// cosigning the log's checkpoints, the page checks the cosignature in the
// browser (WebCrypto Ed25519, cosignature/v1) for the witnesses the API
// lists, and says "verified by 1 witness" beside the checkpoint and on a
// verified entry.
func TestDashboardWitnessed(t *testing.T) {
	t.Parallel()
	lw := testenv.StartLitewitness(t, "witness.example/dashboard")
	d := openDashboard(t, "--checkpoint-interval", "300ms", "--witness", lw.URL+","+lw.VKey)
	var keys struct {
		Data []struct {
			VKey string `json:"vkey"`
		} `json:"data"`
	}
	if err := json.Unmarshal(d.c.call("GET", "/api/v1/audit_keys", d.boot, nil).raw, &keys); err != nil || len(keys.Data) == 0 {
		t.Fatalf("audit_keys: %v", err)
	}
	lw.AddLog(tlog.Origin("auditrail", uuid.MustParse(d.org), tlog.KindAudit), keys.Data[0].VKey)
	seedTenant(t, d, false) // entries after the witness knows the log
	audit := d.waitCovered(t, "audit_logs")
	wkey, err := tlog.ParseWitnessKey(lw.VKey)
	if err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, "a cosigned checkpoint covering the entries", func() bool {
		r := d.c.call("GET", "/api/v1/orgs/"+d.org+"/audit_logs/checkpoint", d.boot, nil)
		note, _ := r.data()["note"].(string)
		got, _, _ := tlog.Cosignatures([]byte(note), []tlog.WitnessKey{wkey})
		size, _ := r.data()["size"].(float64)
		return len(got) == 1 && int64(size) >= audit.cp.Size
	})
	it := audit.items[0]
	d.signIn(t, d.alice, "?view=audit&open="+it.id)
	d.do(t, "verified", until(checked))
	d.do(t, "checkpoint", until(`document.querySelector("#checkpoint[data-state=verified][data-witnesses]")`))
	n := value(t, d, "witnesses", chromedp.Evaluate[string](`document.getElementById("checkpoint").dataset.witnesses`))
	panel := value(t, d, "panel", chromedp.Text(chromedp.CSS("#checkpoint")))
	badge := value(t, d, "badge", chromedp.Text(chromedp.CSS("#verify")))
	if n != "1" || !strings.Contains(panel, "verified by 1 witness (witness.example/dashboard)") {
		t.Fatalf("checkpoint panel (data-witnesses %q): %q", n, panel)
	}
	if !strings.Contains(badge, "verified by 1 witness") {
		t.Fatalf("entry badge: %q", badge)
	}
}
