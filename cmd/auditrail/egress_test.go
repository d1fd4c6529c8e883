//go:build e2e

package main

import (
	"net"
	"strings"
	"testing"
)

// The binary's egress guard: dev allows loopback hook servers (with a
// /health warning when they do not answer) but refuses the metadata
// address and private ranges; a hook on a closed port fails with a
// generic failure; --allow-private-egress allows private ranges.
func TestHookEgressInDev(t *testing.T) {
	t.Parallel()
	p, boot := devWithKey(t)
	c := newAPIClient(t, p.http)
	org := c.call("POST", "/api/v1/orgs", boot, map[string]any{"name": "Acme"}).data()["id"].(string)
	project := c.call("POST", "/api/v1/orgs/"+org+"/projects", boot, map[string]any{"name": "p"}).data()["id"].(string)
	hooks := "/api/v1/orgs/" + org + "/projects/" + project + "/hooks"
	hook := func(endpoint string) map[string]any {
		return map[string]any{"name": "policy", "endpoint": endpoint, "points": map[string]any{"pre": map[string]any{"timeout_ms": 1000}},
			"auth": map[string]any{"type": "bearer", "token": "t"}}
	}
	for _, endpoint := range []string{"http://169.254.169.254", "http://10.0.0.1", "http://[::ffff:169.254.169.254]", "http://100.64.0.1"} {
		if r := c.call("POST", hooks, boot, hook(endpoint)); r.status != 400 || !strings.HasPrefix(r.msg(), "endpoint: ") {
			t.Errorf("%s: %d %s", endpoint, r.status, r.raw)
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().String()
	l.Close()
	r := c.call("POST", hooks, boot, hook("http://"+closed))
	if r.status != 201 || !strings.Contains(string(r.raw), "endpoint not reachable") {
		t.Fatalf("loopback hook in dev: %d %s", r.status, r.raw)
	}
	if r := c.call("PUT", "/api/v1/orgs/"+org+"/projects/"+project+"/secrets/DB_CONNECTION_STRING", boot,
		map[string]any{"value": "mongodb://u:p@169.254.169.254:27017"}); r.status != 400 || !strings.HasPrefix(r.msg(), "value: ") {
		t.Fatalf("metadata database: %d %s", r.status, r.raw)
	}
	res := c.call("POST", "/api/v1/orgs/"+org+"/projects/"+project+"/tools/execute", boot,
		map[string]any{"tool_name": "DocumentDbToolkit.DiscoverDatabases", "input": map[string]any{}, "user_id": "alice"})
	raw := string(res.raw)
	if res.status != 200 || !strings.Contains(raw, "endpoint not reachable") || strings.Contains(raw, closed) || strings.Contains(raw, "connection refused") {
		t.Fatalf("execution through a dead hook: %d %s", res.status, raw)
	}

	open, boot2 := devWithKey(t, "--allow-private-egress")
	c2 := newAPIClient(t, open.http)
	org2 := c2.call("POST", "/api/v1/orgs", boot2, map[string]any{"name": "Acme"}).data()["id"].(string)
	h := hook("http://10.0.0.1")
	h["enabled"] = false
	if r := c2.call("POST", "/api/v1/orgs/"+org2+"/hooks", boot2, h); r.status != 201 {
		t.Fatalf("private endpoint with --allow-private-egress: %d %s", r.status, r.raw)
	}
}
