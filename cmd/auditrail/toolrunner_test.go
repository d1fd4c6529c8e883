//go:build e2e

package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/auditrail/auditrail/internal/testenv"
)

// The tool runner API is served by dev with the rules of every /api/v1 route.
func TestToolRunnerAPIInDev(t *testing.T) {
	t.Parallel()
	p, boot := devWithKey(t)
	c := newAPIClient(t, p.http)
	org := c.call("POST", "/api/v1/orgs", boot, map[string]any{"name": "Acme"}).data()["id"].(string)
	project := c.call("POST", "/api/v1/orgs/"+org+"/projects", boot, map[string]any{"name": "p"}).data()["id"].(string)
	base := "/api/v1/orgs/" + org + "/projects/" + project + "/tools"
	if r := c.call("GET", base+"?user_id=alice", boot, nil); r.status != 200 || r.data()["items"] == nil {
		t.Fatalf("list: %d %s", r.status, r.raw)
	}
	if r := c.call("POST", base+"/execute", boot, map[string]any{"tool_name": "NoSuchToolkit.Tool", "input": map[string]any{}, "user_id": "alice"}); r.status != 404 {
		t.Fatalf("unknown tool: %d %s", r.status, r.raw)
	}
	if r := c.call("POST", base+"/execute", "", map[string]any{"tool_name": "X.Y"}); r.status != 401 {
		t.Fatalf("anonymous: %d", r.status)
	}

	// Who acts: alice's key acts as alice only; the project's service key
	// names the end user, and is good for nothing but this project's tools.
	orgPath := "/api/v1/orgs/" + org
	c.call("PUT", orgPath+"/members/alice", boot, map[string]any{"role": "member", "display_name": "Alice"})
	c.call("PUT", orgPath+"/projects/"+project+"/members/alice", boot, map[string]any{"role": "member"})
	alice := c.call("POST", orgPath+"/api_keys", boot, map[string]any{"name": "a", "user_id": "alice"}).data()["key"].(string)
	svc := c.call("POST", orgPath+"/projects/"+project+"/service_keys", boot, map[string]any{"name": "agent platform"})
	if svc.status != 201 || svc.data()["kind"] != "service" || svc.data()["project_id"] != project {
		t.Fatalf("create service key: %d %s", svc.status, svc.raw)
	}
	svcKey := svc.data()["key"].(string)
	other := c.call("POST", orgPath+"/projects", boot, map[string]any{"name": "other"}).data()["id"].(string)
	run := map[string]any{"tool_name": "DocumentDbToolkit.DiscoverDatabases", "input": map[string]any{}}
	with := func(user string) map[string]any {
		m := map[string]any{"user_id": user}
		for k, v := range run {
			m[k] = v
		}
		return m
	}
	for _, tc := range []struct {
		name, method, path, key string
		body                    map[string]any
		status                  int
	}{
		{"alice as herself", "POST", base + "/execute", alice, run, 200},
		{"alice as bob", "POST", base + "/execute", alice, with("bob"), 403},
		{"alice lists bob's tools", "GET", base + "?user_id=bob", alice, nil, 403},
		{"service key for bob", "POST", base + "/execute", svcKey, with("bob"), 200},
		{"service key for nobody", "POST", base + "/execute", svcKey, run, 400},
		{"service key in another project", "POST", orgPath + "/projects/" + other + "/tools/execute", svcKey, with("bob"), 403},
		{"service key reads the audit log", "GET", orgPath + "/audit_logs", svcKey, nil, 403},
		{"service key reads the project's audit log", "GET", orgPath + "/projects/" + project + "/audit_logs", svcKey, nil, 403},
		{"service key mints a key", "POST", orgPath + "/api_keys", svcKey, map[string]any{"name": "x", "user_id": "alice"}, 403},
		{"service key mints a service key", "POST", orgPath + "/projects/" + project + "/service_keys", svcKey, map[string]any{"name": "x"}, 403},
	} {
		if r := c.call(tc.method, tc.path, tc.key, tc.body); r.status != tc.status {
			t.Errorf("%s: %d %s, want %d", tc.name, r.status, r.raw, tc.status)
		}
	}
	// The executions record who asked and for whom; the listing filters by user.
	execs := orgPath + "/projects/" + project + "/tool_executions?user_id="
	for _, want := range []struct{ user, principal, ptype, name string }{
		{"bob", svc.data()["id"].(string), "SERVICE_KEY", "agent platform"},
		{"alice", "", "API_KEY", "Alice"},
	} {
		var last string
		testenv.Eventually(t, 15*time.Second, func() string { return "one execution for " + want.user + ": " + last }, func() bool {
			r := c.call("GET", execs+want.user, boot, nil)
			last = fmt.Sprintf("%d %s", r.status, r.raw)
			items, _ := r.data()["items"].([]any)
			if len(items) > 1 {
				t.Fatalf("executions for %s: %s", want.user, last)
			}
			if r.status != 200 || len(items) != 1 {
				return false
			}
			e := items[0].(map[string]any)
			if e["user_id"] != want.user || e["principal_type"] != want.ptype || e["display_name"] != want.name ||
				e["client_ip"] != "127.0.0.1" || (want.principal != "" && e["principal_id"] != want.principal) {
				t.Fatalf("execution for %s: %v", want.user, e)
			}
			return true
		})
	}

	// The creation is in the audit log as an API key of the project.
	var last []byte
	testenv.Eventually(t, 15*time.Second, func() string { return fmt.Sprintf("service key creation in the audit log: %s", last) }, func() bool {
		logs := c.call("GET", orgPath+"/audit_logs?resource_type=RESOURCE_TYPE_API_KEY&limit=100", boot, nil)
		last = logs.raw
		for _, it := range logs.data()["items"].([]any) {
			e := it.(map[string]any)
			if e["resource_display"] == "agent platform" && e["action"] == "AUDIT_ACTION_CREATED" && e["project_id"] == project {
				return true
			}
		}
		return false
	})
}

// The reference webhook server runs from the binary with a policy file.
func TestHooksExampleCommand(t *testing.T) {
	t.Parallel()
	port, _ := testenv.FreePort()
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	out := &testenv.SyncBuffer{}
	cmd := exec.Command(binary(t), "hooks-example", "--listen", addr, "--policy", "../../hookproxy/example/testdata/policy.yaml", "--token", "t0k")
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Signal(syscall.SIGTERM); _ = cmd.Wait() }()
	testenv.Eventually(t, 10*time.Second, func() string { return "hooks-example starts: " + out.String() }, func() bool {
		resp, err := http.Get("http://" + addr + "/health")
		if err != nil {
			return false
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || strings.TrimSpace(string(b)) != `{"status":"healthy"}` {
			t.Fatalf("health: %d %s", resp.StatusCode, b)
		}
		return true
	})
	post := func(token, body string) (int, map[string]any) {
		req, _ := http.NewRequest("POST", "http://"+addr+"/pre", bytes.NewReader([]byte(body)))
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var m map[string]any
		_ = json.Unmarshal(b, &m)
		return resp.StatusCode, m
	}
	destructive := `{"execution_id":"e","tool":{"name":"EditDocument","toolkit":"DocsToolkit","version":"6.0.0","metadata":{"classification":{"service_domains":["documents"]},"behavior":{"destructive":true}}},"inputs":{},"context":{"user_id":"u"}}`
	if code, m := post("t0k", destructive); code != 200 || m["code"] != "CHECK_FAILED" || !strings.Contains(fmt.Sprint(m["error_message"]), "destructive") {
		t.Fatalf("destructive tool: %d %v", code, m)
	}
	if code, _ := post("wrong", destructive); code != 401 {
		t.Fatalf("wrong token: %d", code)
	}
}
