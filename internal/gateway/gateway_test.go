package gateway_test

import (
	"bufio"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/auditrail/auditrail/internal/gateway"
	"github.com/auditrail/auditrail/internal/testenv"
)

func TestMain(m *testing.M) { testenv.MainNoLeaks(m) }

func TestRoleOf(t *testing.T) {
	for path, want := range map[string]gateway.Role{
		"/api/v1/orgs/o/audit_logs":                   gateway.Query,
		"/api/v1/orgs/o/audit_logs/export":            gateway.Query,
		"/api/v1/orgs/o/projects/p/audit_logs/stream": gateway.Query,
		"/api/v1/orgs/o/tool_executions/feed":         gateway.Query,
		"/api/v1/orgs/o/projects/p/tool_executions":   gateway.Query,
		"/dashboard/":                                       gateway.Query,
		"/api/v1/audit_keys":                                gateway.Query,
		"/api/v1/audit_keys/x":                              gateway.ControlPlane,
		"/dashboard/static/js/main.js":                      gateway.Query,
		"/api/v1/orgs/o/projects/p/tools":                   gateway.ToolRunner,
		"/api/v1/orgs/o/projects/p/tools/execute":           gateway.ToolRunner,
		"/mcp/v1/orgs/o/projects/p":                         gateway.ToolRunner,
		"/api/v1/me":                                        gateway.ControlPlane,
		"/api/v1/orgs":                                      gateway.ControlPlane,
		"/api/v1/orgs/o/api_keys":                           gateway.ControlPlane,
		"/api/v1/orgs/o/projects/p/hooks":                   gateway.ControlPlane,
		"/api/v1/orgs/o/audit_logsX":                        gateway.ControlPlane,
		"/api/v1/orgs/o/projects/p/toolsmith":               gateway.ControlPlane,
		"/dashboardish":                                     gateway.ControlPlane,
		"/api/v1/orgs/o/projects/p/x/audit_logs":            gateway.ControlPlane,
		"/api/v1/oauth/callback":                            gateway.ControlPlane,
		"/api/v1/orgs/o/projects/p/tools/../../../api_keys": gateway.ToolRunner, // a client's path is cleaned by the role, which answers 404
	} {
		if got := gateway.RoleOf(path); got != want {
			t.Errorf("%s: %s, want %s", path, got, want)
		}
	}
}

// backend answers with its name, the path and the body it got.
func backend(t *testing.T, name string) *httptest.Server {
	t.Helper()
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if r.URL.Path == "/api/v1/orgs/o/audit_logs/stream" {
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprint(w, "id: 1\ndata: {}\n\n")
			w.(http.Flusher).Flush()
			<-r.Context().Done()
			return
		}
		fmt.Fprintf(w, "%s %s %s %s", name, r.Method, r.URL.RequestURI(), b)
	}))
	t.Cleanup(s.Close)
	return s
}

// deadURL is an address where nothing listens.
func deadURL(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "http://" + addr
}

func TestGatewayRoutesAndFailsOver(t *testing.T) {
	q1, q2, tr, cp := backend(t, "q1"), backend(t, "q2"), backend(t, "tr"), backend(t, "cp")
	dead := deadURL(t)
	g, err := gateway.New(gateway.Config{Upstreams: map[gateway.Role][]string{
		gateway.Query: {q1.URL, q2.URL}, gateway.ToolRunner: {dead, tr.URL}, gateway.ControlPlane: {cp.URL}},
		DownFor: time.Minute}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	front := httptest.NewServer(g)
	defer front.Close()
	do := func(method, path, body string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, front.URL+path, strings.NewReader(body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	// The query instances take turns.
	seen := map[string]bool{}
	for i := 0; i < 4; i++ {
		_, b := do("GET", "/api/v1/orgs/o/audit_logs?limit=5", "")
		seen[strings.Fields(b)[0]] = true
		if !strings.HasSuffix(strings.TrimSpace(b), "/api/v1/orgs/o/audit_logs?limit=5") {
			t.Fatalf("the path or query changed: %s", b)
		}
	}
	if !seen["q1"] || !seen["q2"] {
		t.Fatalf("query instances used: %v", seen)
	}
	// A POST to the toolrunner: the dead instance refuses, the body goes
	// whole to the live one, every time.
	for i := 0; i < 3; i++ {
		if st, b := do("POST", "/api/v1/orgs/o/projects/p/tools/execute", `{"tool_name":"X"}`); st != 200 || b != `tr POST /api/v1/orgs/o/projects/p/tools/execute {"tool_name":"X"}` {
			t.Fatalf("tool call through a dead instance: %d %s", st, b)
		}
	}
	if st, b := do("PUT", "/api/v1/orgs/o/members/u", `{"role":"admin"}`); st != 200 || !strings.HasPrefix(b, "cp PUT") {
		t.Fatalf("admin route: %d %s", st, b)
	}
	// A live stream passes at once.
	resp, err := http.Get(front.URL + "/api/v1/orgs/o/audit_logs/stream")
	if err != nil {
		t.Fatal(err)
	}
	line := make(chan string, 1)
	go func() { l, _ := bufio.NewReader(resp.Body).ReadString('\n'); line <- l }()
	select {
	case l := <-line:
		if l != "id: 1\n" {
			t.Fatalf("stream line %q", l)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the stream's first event did not pass")
	}
	resp.Body.Close()
	// Every instance of a role down: 503 with Retry-After.
	cp.Close()
	if st, b := do("GET", "/api/v1/me", ""); st != 503 || !strings.Contains(b, "controlplane") {
		t.Fatalf("no control plane: %d %s", st, b)
	}
	if st, b := do("GET", "/gateway/healthz", ""); st != 503 || !strings.Contains(b, `"controlplane":0`) {
		t.Fatalf("healthz: %d %s", st, b)
	}
}

func TestGatewayConfig(t *testing.T) {
	for _, c := range []gateway.Config{
		{},
		{Upstreams: map[gateway.Role][]string{gateway.Query: {"http://q"}, gateway.ToolRunner: {"http://t"}}},
		{Upstreams: map[gateway.Role][]string{gateway.Query: {"q:8080"}, gateway.ToolRunner: {"http://t"}, gateway.ControlPlane: {"http://c"}}},
		{Upstreams: map[gateway.Role][]string{gateway.Query: {"http://q/api"}, gateway.ToolRunner: {"http://t"}, gateway.ControlPlane: {"http://c"}}},
	} {
		if err := c.Validate(); err == nil {
			t.Errorf("accepted %+v", c)
		}
	}
}
