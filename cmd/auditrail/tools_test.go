package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/auditrail/auditrail/controlplane"
	"github.com/auditrail/auditrail/controlplane/cpstate"
	"github.com/auditrail/auditrail/hookproxy"
	"github.com/auditrail/auditrail/internal/auth"
	"github.com/auditrail/auditrail/internal/httpapi"
	"github.com/auditrail/auditrail/internal/httpx"
	"github.com/auditrail/auditrail/internal/testenv"
	"github.com/auditrail/auditrail/producers"
	"github.com/auditrail/auditrail/toolrunner/platform"
)

// Hooks configured through the admin API reach the hook client as configured.
func TestHookSourceFromControlPlane(t *testing.T) {
	_, nc, _ := testenv.NATS(t)
	js, _ := jetstream.New(nc)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	scfg := cpstate.DefaultStateConfig()
	scfg.Bucket = "cp_test"
	state, err := cpstate.OpenState(ctx, js, scfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	boot := "bootstrap-key-of-this-test"
	access := cpstate.NewAccess(state, auth.HashKey(boot), nil)
	sealer, _ := cpstate.NewSealer([]byte("0123456789abcdef0123456789abcdef"))
	pub, _ := producers.New(nc, producers.DefaultConfig(), nil)
	svc, err := controlplane.NewService(controlplane.DefaultServiceConfig(), state, access, sealer, producers.NewRecorder(pub, 5*time.Second), httpx.TrustedProxies{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	app := httpapi.NewApp(nil)
	svc.Register(app)
	call := func(method, path, body string) map[string]any {
		req := httptest.NewRequest(method, path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+boot)
		req.Header.Set("Content-Type", "application/json")
		resp, err := app.Test(req, -1)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		var m map[string]any
		_ = json.Unmarshal(b, &m)
		if resp.StatusCode >= 300 {
			t.Fatalf("%s %s: %s", method, path, b)
		}
		return m["data"].(map[string]any)
	}
	org := call("POST", "/api/v1/orgs", `{"name":"Acme"}`)["id"].(string)
	project := call("POST", "/api/v1/orgs/"+org+"/projects", `{"name":"p"}`)["id"].(string)
	call("POST", "/api/v1/orgs/"+org+"/hooks", `{"name":"org-policy","endpoint":"https://a.example","phase":"after","priority":3,"contract":"arcade",
		"points":{"access":{},"pre":{"timeout_ms":700,"failure_mode":"fail_open"}},"auth":{"type":"bearer","token":"tok-a"},
		"retries":{"max_attempts":3,"backoff_ms":20},"breaker":{"consecutive_failures":2,"open_ms":1500}}`)
	ph := call("POST", "/api/v1/orgs/"+org+"/projects/"+project+"/hooks", `{"name":"project-policy","endpoint":"https://b.example","points":{"post":{}},"auth":{"type":"bearer","token":"tok-b"}}`)
	disabled := call("POST", "/api/v1/orgs/"+org+"/hooks", `{"name":"off","endpoint":"https://c.example","points":{"pre":{}},"auth":{"type":"bearer","token":"x"}}`)
	call("POST", "/api/v1/orgs/"+org+"/hooks/"+disabled["id"].(string)+"/disable", ``)

	hooks, err := platform.HookSource{Svc: svc}.Hooks(ctx, uuid.MustParse(org), uuid.MustParse(project))
	if err != nil {
		t.Fatal(err)
	}
	if len(hooks) != 2 {
		t.Fatalf("%d hooks, want 2 (the disabled one left out)", len(hooks))
	}
	ordered := hookproxy.Order(hooks)
	a, b := ordered[1], ordered[0]
	if b.Name != "project-policy" || !b.Project || b.BearerToken != "tok-b" || b.Points[hookproxy.Post].Path != "/post" ||
		b.Points[hookproxy.Post].Timeout != 5*time.Second || b.Points[hookproxy.Post].FailureMode != hookproxy.FailClosed || b.ID != ph["id"] {
		t.Fatalf("project hook: %+v", b)
	}
	if a.Name != "org-policy" || a.Project || a.Phase != "after" || a.Priority != 3 || a.BearerToken != "tok-a" || a.MaxAttempts != 3 ||
		a.Backoff != 20*time.Millisecond || a.ConsecutiveFailures != 2 || a.OpenFor != 1500*time.Millisecond ||
		a.Points[hookproxy.Pre].Timeout != 700*time.Millisecond || a.Points[hookproxy.Pre].FailureMode != hookproxy.FailOpen ||
		a.Points[hookproxy.Access].Path != "/access" || a.Revision == "" || a.Contract != hookproxy.ContractArcade || b.Contract != hookproxy.ContractAuditrail {
		t.Fatalf("org hook: %+v", a)
	}
	// A change gives a new revision (new clients and breakers, access cache miss).
	call("PATCH", "/api/v1/orgs/"+org+"/hooks/"+a.ID, `{"timeout_ms":900}`)
	again, _ := platform.HookSource{Svc: svc}.Hooks(ctx, uuid.MustParse(org), uuid.MustParse(project))
	for _, h := range again {
		if h.ID == a.ID && h.Revision == a.Revision {
			t.Fatal("revision unchanged after a PATCH")
		}
	}
}

func TestCallbackURL(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"http://127.0.0.1:8080", "http://127.0.0.1:8080/api/v1/oauth/callback"},
		{"https://auditrail.example.com/", "https://auditrail.example.com/api/v1/oauth/callback"},
		{"ftp://example.com", ""},
		{"example.com", ""},
		{"https://example.com/base", ""},
		{"https://example.com?x=1", ""},
		{"https://example.com/#f", ""},
		{"https://user:s3cret@example.com", ""},
	} {
		got, err := callbackURL(c.in)
		if got != c.want || (c.want == "") != (err != nil) {
			t.Errorf("callbackURL(%q) = %q, %v; want %q", c.in, got, err, c.want)
		}
		if err != nil && strings.Contains(err.Error(), "s3cret") {
			t.Errorf("the error shows the password: %v", err)
		}
	}
}
