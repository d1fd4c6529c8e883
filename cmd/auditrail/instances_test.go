//go:build e2e

package main

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/auditrail/auditrail/internal/natsx"
	"github.com/auditrail/auditrail/internal/testenv"
)

// startQueryRole runs `auditrail query` and waits for its /healthz.
func startQueryRole(t *testing.T, args ...string) string {
	t.Helper()
	return startRole(t, "query", args...)
}

// startRole runs a production role and waits for its /healthz.
func startRole(t *testing.T, role string, args ...string) string {
	t.Helper()
	port, _ := testenv.FreePort()
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	out := &testenv.SyncBuffer{}
	cmd := exec.Command(binary(t), append([]string{role, "--http", addr}, args...)...)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("%s role output:\n%s", role, out)
		}
	})
	testenv.Eventually(t, 30*time.Second, func() string { return fmt.Sprintf("%s role healthy:\n%s", role, out) }, func() bool {
		resp, err := http.Get("http://" + addr + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
	return addr
}

// Two instances (dev and a separate query role) share the control-plane
// state and the rate limit through NATS, and the cursor keys.
func TestInstancesShareStateAndLimits(t *testing.T) {
	t.Parallel()
	dsn := testenv.ClickHouse(t)
	boot := "bootstrap-key-for-two-instances"
	cursorKey := base64.StdEncoding.EncodeToString([]byte("cursor-key-shared-by-instances!!"))
	common := []string{"--clickhouse", dsn, "--bootstrap-key", boot, "--cursor-keys", cursorKey, "--rate-limit", "6/1h", "--trusted-proxies", "127.0.0.1"}
	dev := startDev(t, t.TempDir(), common...)
	q := startQueryRole(t, append(dev.natsArgs(natsx.RoleQuery), common...)...)
	a, b := newAPIClient(t, dev.http), newAPIClient(t, q)

	// One limit over both instances.
	inOneRateWindow(time.Hour)
	path := "/api/v1/orgs/" + uuid.NewString() + "/audit_logs"
	for i := 0; i < 6; i++ {
		c := []*apiClient{a, b}[i%2]
		if r := c.call("GET", path, boot, nil, "X-Forwarded-For", "198.51.100.1"); r.status != 200 {
			t.Fatalf("request %d: %d", i, r.status)
		}
	}
	for _, c := range []*apiClient{a, b} {
		if r := c.call("GET", path, boot, nil, "X-Forwarded-For", "198.51.100.1"); r.status != 429 {
			t.Fatalf("7th request: %d, want 429 on every instance", r.status)
		}
	}

	// A key made on one instance works on the other; disabling it takes
	// effect there at once.
	org := a.call("POST", "/api/v1/orgs", boot, map[string]any{"name": "Acme"}).data()["id"].(string)
	a.call("PUT", "/api/v1/orgs/"+org+"/members/alice", boot, map[string]any{"role": "owner"})
	k := a.call("POST", "/api/v1/orgs/"+org+"/api_keys", boot, map[string]any{"name": "k", "user_id": "alice"})
	key, keyID := k.data()["key"].(string), k.data()["id"].(string)
	logs := "/api/v1/orgs/" + org + "/audit_logs?limit=1"
	// Every later request comes from its own client address, so that the
	// 6-request limit above does not interfere.
	n := 0
	ip := func() string { n++; return fmt.Sprintf("198.18.%d.%d", n/250, 1+n%250) }
	var last string
	testenv.Eventually(t, 5*time.Second, func() string { return "key usable on the second instance: " + last }, func() bool {
		r := b.call("GET", logs, key, nil, "X-Forwarded-For", ip())
		last = fmt.Sprintf("%d %s", r.status, r.raw)
		if r.status != 200 || len(r.data()["items"].([]any)) != 1 {
			return false
		}
		// A cursor of one instance pages on the other, once a second
		// entry is stored (the organization's three entries may be
		// stored in two batches, the key usable before the second).
		cur, ok := r.data()["next_cursor"].(string)
		if !ok {
			return false
		}
		if r2 := a.call("GET", logs+"&cursor="+url.QueryEscape(cur), key, nil, "X-Forwarded-For", ip()); r2.status != 200 {
			t.Fatalf("cursor of the other instance: %d %s", r2.status, r2.raw)
		}
		return true
	})
	// An export on the query role, with the role's own NATS credentials,
	// is recorded in the organization's audit log.
	req, _ := http.NewRequest("GET", "http://"+q+"/api/v1/orgs/"+org+"/audit_logs/export?format=jsonl", nil)
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("X-Forwarded-For", ip())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("export on the query role: %d", resp.StatusCode)
	}
	testenv.Eventually(t, 10*time.Second, func() string { return "the export in the audit log: " + last }, func() bool {
		r := a.call("GET", "/api/v1/orgs/"+org+"/audit_logs?limit=1", boot, nil, "X-Forwarded-For", ip())
		last = string(r.raw)
		items, _ := r.data()["items"].([]any)
		if len(items) != 1 {
			return false
		}
		it := items[0].(map[string]any)
		d, _ := it["data"].(map[string]any)
		if d == nil || it["principal_id"] != keyID {
			return false
		}
		after, _ := d["after"].(map[string]any)
		return after != nil && after["export"] != nil
	})
	if r := a.call("POST", "/api/v1/orgs/"+org+"/api_keys/"+keyID+"/disable", boot, nil); r.status != 200 {
		t.Fatalf("disable: %d", r.status)
	}
	start := time.Now()
	for b.call("GET", logs, key, nil, "X-Forwarded-For", ip()).status != 401 {
		if time.Since(start) > 500*time.Millisecond {
			t.Fatal("the disabled key still works on the other instance after 500 ms")
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Logf("disabled key refused by the other instance after %s", time.Since(start))
}

// The controlplane and toolrunner roles run alone against a NATS server.
func TestControlPlaneAndToolRunnerRoles(t *testing.T) {
	t.Parallel()
	dev := startDev(t, t.TempDir(), "--bootstrap-key", "bootstrap-key-of-the-roles-test")
	boot := "bootstrap-key-of-the-roles-test"
	secrets := base64.StdEncoding.EncodeToString([]byte("0123456789abcdef0123456789abcdef"))
	common := []string{"--bootstrap-key", boot, "--secrets-keys", secrets}
	cp := newAPIClient(t, startRole(t, "controlplane", append(dev.natsArgs(natsx.RoleControlPlane), common...)...))
	trArgs := append(dev.natsArgs(natsx.RoleToolRunner), append(common, "--outbox", t.TempDir())...)
	// The tool runner signs pagination tokens with keys every instance
	// shares: it does not start without them.
	out, err := exec.Command(binary(t), append([]string{"toolrunner", "--http", "127.0.0.1:0"}, trArgs...)...).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "--page-token-keys is required") {
		t.Fatalf("toolrunner without --page-token-keys: %v\n%s", err, out)
	}
	pageKeys := base64.StdEncoding.EncodeToString([]byte("page-token-key-shared-by-runners"))
	tr := newAPIClient(t, startRole(t, "toolrunner", append(trArgs, "--page-token-keys", pageKeys)...))
	org := cp.call("POST", "/api/v1/orgs", boot, map[string]any{"name": "Roles"})
	if org.status != 201 {
		t.Fatalf("create org on the controlplane role: %d %s", org.status, org.raw)
	}
	project := cp.call("POST", "/api/v1/orgs/"+org.data()["id"].(string)+"/projects", boot, map[string]any{"name": "p"}).data()["id"].(string)
	tools := tr.call("GET", "/api/v1/orgs/"+org.data()["id"].(string)+"/projects/"+project+"/tools?user_id=u", boot, nil)
	if tools.status != 200 || len(tools.data()["items"].([]any)) != 6+13+13 { // DocumentDbToolkit, DocsToolkit and MailToolkit
		t.Fatalf("tools on the toolrunner role: %d %s", tools.status, tools.raw)
	}
	// The role serves the MCP endpoint too: the same list.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := mcpConnect(t, ctx, "http://"+tr.base+"/mcp/v1/orgs/"+org.data()["id"].(string)+"/projects/"+project, bearer{key: boot, user: "u"}, "roles-test", "1")
	if err != nil {
		t.Fatalf("MCP on the toolrunner role: %v", err)
	}
	if lt, err := cs.ListTools(ctx, nil); err != nil || len(lt.Tools) != 6+13+13 {
		t.Fatalf("MCP tools/list on the toolrunner role: %v", err)
	}
}

// inOneRateWindow waits, when the current window of a rate limit of that
// length is about to end, until the next one starts. Windows are aligned
// to the clock: requests that straddle the end of one are counted in two,
// and a test of the limit then sees fewer refusals than it should.
func inOneRateWindow(window time.Duration) {
	if left := time.Until(time.Now().Truncate(window).Add(window)); left < 30*time.Second {
		time.Sleep(left + 100*time.Millisecond)
	}
}
