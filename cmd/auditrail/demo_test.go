//go:build e2e

package main

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/auditrail/auditrail/internal/testenv"
)

var (
	demoKeyRe = regexp.MustCompile(`API key of demo-user \(kept in [^)]*; --new-key replaces it\): (ak_[A-Za-z0-9_-]+)`)
	exportRe  = regexp.MustCompile(`(?m)^export ORG=\S+ PROJECT=\S+ KEY=(ak_\S+)\nexport AUDITRAIL_URL=\S+ AUDITRAIL_KEY=(ark_\S+) `)
	demoIDsRe = regexp.MustCompile(`demo: organization ([0-9a-f-]{36}), project ([0-9a-f-]{36})`)
)

// Right after `auditrail dev --demo` (make run) a newcomer can call the
// DocumentDbToolkit through the API with the printed key.
func TestDemo(t *testing.T) {
	t.Parallel()
	data := t.TempDir()
	p := startDev(t, data, "--demo")
	boot := keyRe.FindString(p.stdout.String())
	var key, previous []string
	for round := 0; round < 3; round++ {
		out := p.stdout.String()
		previous, key = key, demoKeyRe.FindStringSubmatch(out)
		ids := demoIDsRe.FindStringSubmatch(out)
		if key == nil || ids == nil {
			t.Fatalf("demo not printed:\n%s", out)
		}
		// Every start prints both export lines in full (a new shell after
		// a restart can follow the README), with the keys that work.
		exports := exportRe.FindStringSubmatch(out)
		if exports == nil || exports[1] != key[1] || exports[2] != boot {
			t.Fatalf("round %d: export lines without the demo key and the bootstrap key:\n%s", round, out)
		}
		c := newAPIClient(t, p.http)
		switch round {
		case 1: // a plain restart keeps the key
			if key[1] != previous[1] {
				t.Fatalf("a restart replaced the demo key")
			}
		case 2: // --new-key replaced it: the old one stops working
			if key[1] == previous[1] {
				t.Fatal("--new-key printed the same key")
			}
			if r := c.call("GET", "/api/v1/orgs/"+ids[1]+"/audit_logs", previous[1], nil); r.status != 401 {
				t.Fatalf("the replaced demo key still works: %d", r.status)
			}
		}
		base := "/api/v1/orgs/" + ids[1] + "/projects/" + ids[2]
		r := c.call("POST", base+"/tools/execute", key[1], map[string]any{"tool_name": "DocumentDbToolkit.DiscoverCollections", "input": map[string]any{"database_name": "shop"}})
		if r.status != 200 || r.data()["success"] != true || strings.Join(toStrings(r.data()["output"]), ",") != "customers,orders,products" {
			t.Fatalf("round %d: DiscoverCollections: %s", round, r.raw)
		}
		r = c.call("POST", base+"/tools/execute", key[1], map[string]any{"tool_name": "DocumentDbToolkit.CountDocuments",
			"input": map[string]any{"database_name": "shop", "collection_name": "orders", "filter_dict": `{"status":"paid"}`}})
		if r.status != 200 || r.data()["output"] != 48.0 {
			t.Fatalf("CountDocuments: %s", r.raw)
		}
		// Bad input is a tool error, never a 5xx; out-of-range limits are 400.
		r = c.call("POST", base+"/tools/execute", key[1], map[string]any{"tool_name": "DocumentDbToolkit.FindDocuments",
			"input": map[string]any{"database_name": "shop", "collection_name": "orders", "filter_dict": `{"status":`}})
		if r.status != 200 || r.data()["success"] != false || r.data()["error"].(map[string]any)["kind"] != "TOOL_INPUT_INVALID" {
			t.Fatalf("malformed filter: %s", r.raw)
		}
		if r := c.call("POST", base+"/tools/execute", key[1], map[string]any{"tool_name": "DocumentDbToolkit.FindDocuments",
			"input": map[string]any{"database_name": "shop", "collection_name": "orders", "limit": 5000}}); r.status != 400 || !strings.Contains(r.msg(), "input.limit") {
			t.Fatalf("limit 5000: %d %s", r.status, r.raw)
		}
		// The executions and the set-up (source SYSTEM) are in the trail.
		var last string
		testenv.Eventually(t, 15*time.Second, func() string {
			return "executions and set-up in the trail (each set-up once): " + last
		}, func() bool {
			ex := c.call("GET", base+"/tool_executions", key[1], nil)
			logs := c.call("GET", "/api/v1/orgs/"+ids[1]+"/audit_logs?source=AUDIT_SOURCE_SYSTEM&resource_type=RESOURCE_TYPE_SECRET", boot, nil)
			providers := c.call("GET", "/api/v1/orgs/"+ids[1]+"/audit_logs?resource_type=RESOURCE_TYPE_AUTH_PROVIDER", boot, nil)
			conns := c.call("GET", "/api/v1/orgs/"+ids[1]+"/audit_logs?resource_type=RESOURCE_TYPE_USER_CONNECTION", boot, nil)
			// The secret is set once, the two providers made and connected
			// once: restarts add no audit events.
			last = fmt.Sprintf("%s / %s / %s / %s", ex.raw, logs.raw, providers.raw, conns.raw)
			return ex.status == 200 && len(ex.data()["items"].([]any)) >= 3*(round+1) && logs.status == 200 && len(logs.data()["items"].([]any)) == 1 &&
				len(providers.data()["items"].([]any)) == 2 && len(conns.data()["items"].([]any)) == 2
		})
		if round < 2 {
			// A restart keeps the demo tenant; --new-key prints a new key.
			p.stop(t)
			args := []string{"--demo"}
			if round == 1 {
				args = append(args, "--new-key")
			}
			p = startDev(t, data, args...)
			if ids2 := demoIDsRe.FindStringSubmatch(p.stdout.String()); ids2 == nil || ids2[1] != ids[1] {
				t.Fatalf("demo tenant not kept across a restart:\n%s", p.stdout)
			}
		}
	}
}

func toStrings(v any) []string {
	var out []string
	for _, e := range v.([]any) {
		out = append(out, e.(string))
	}
	return out
}

func TestClientURL(t *testing.T) {
	t.Parallel()
	for listen, want := range map[string]string{
		"127.0.0.1:8080": "http://127.0.0.1:8080",
		":8080":          "http://127.0.0.1:8080",
		"0.0.0.0:9000":   "http://127.0.0.1:9000",
		"[::]:9000":      "http://[::1]:9000",
		"10.1.2.3:80":    "http://10.1.2.3:80",
		"localhost:8080": "http://localhost:8080",
	} {
		if got := clientURL(listen); got != want {
			t.Errorf("clientURL(%q) = %q, want %q", listen, got, want)
		}
	}
}
