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
}

// The reference webhook server runs from the binary with a policy file.
func TestHooksExampleCommand(t *testing.T) {
	port, _ := testenv.FreePort()
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	out := &lockedBuf{}
	cmd := exec.Command(binary(t), "hooks-example", "--listen", addr, "--policy", "../../hookproxy/example/testdata/policy.yaml", "--token", "t0k")
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Signal(syscall.SIGTERM); _ = cmd.Wait() }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if resp, err := http.Get("http://" + addr + "/health"); err == nil {
			resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("hooks-example did not start: %s", out)
		}
		time.Sleep(50 * time.Millisecond)
	}
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
