package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/auditrail/auditrail/controlplane"
	"github.com/auditrail/auditrail/controlplane/cpstate"
	"github.com/auditrail/auditrail/internal/arcadehook"
	"github.com/auditrail/auditrail/internal/auth"
	"github.com/auditrail/auditrail/internal/egress"
	"github.com/auditrail/auditrail/internal/httpapi"
	"github.com/auditrail/auditrail/internal/httpx"
	"github.com/auditrail/auditrail/internal/testenv"
	"github.com/auditrail/auditrail/producers"
	"github.com/auditrail/auditrail/toolrunner"
	"github.com/auditrail/auditrail/toolrunner/platform"
)

// arcadeTool is a tool of the test toolkit; it keeps the calls it got.
type arcadeTool struct {
	def   toolrunner.Definition
	out   any
	mu    *sync.Mutex
	calls *[]toolrunner.Call
}

func (a arcadeTool) Definition() toolrunner.Definition { return a.def }
func (a arcadeTool) Run(_ context.Context, c toolrunner.Call) (any, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	*a.calls = append(*a.calls, c)
	return a.out, nil
}

// A webhook server generated from the public Arcade schema, registered
// through the admin API as an organization hook with "contract": "arcade",
// in the production wiring (hookSource, proxyHook, the hook proxy behind
// the egress guard): the tool runner's listing and executions go through
// it, every request it receives is valid for the Arcade description and
// none is refused, and its decisions apply — access hides, pre denies and
// overrides inputs and secrets, post overrides output.
func TestArcadeHookServerEndToEnd(t *testing.T) {
	// The customer's server and its policy.
	contract, err := arcadehook.LoadContract("../../hookproxy/testdata/arcade/logic_extensions.yaml")
	if err != nil {
		t.Fatal(err)
	}
	rec := &arcadehook.Recorder{}
	const hookToken = "arcade-e2e-bearer-41f"
	hookSrv, err := arcadehook.New(arcadehook.Config{Token: hookToken, Middlewares: []arcadehook.MiddlewareFunc{rec.Middleware},
		Policy: arcadehook.Policy{
			HideDestructive: true,
			Hide:            []string{"Mailer.Legacy@0.9.0"},
			Deny:            map[string]string{"Mailer.Archive": "archiving is frozen during the audit"},
			RateLimit:       map[string]string{"Mailer.Forward": "3 forwards a minute"},
			Inputs:          map[string]map[string]any{"Mailer.Send": {"to": "compliance@corp.example"}},
			Secrets:         map[string][]map[string]string{"Mailer.Send": {{"SMTP_PASSWORD": "first"}, {"SMTP_PASSWORD": "from-the-vault", "UNUSED": "x"}}},
			Output:          map[string]any{"Mailer.Read": map[string]any{"subject": "[redacted by policy]"}},
		}}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	hooks := httptest.NewServer(hookSrv.Handler())
	t.Cleanup(hooks.Close)

	// The platform: control plane and tool runner as cmd/auditrail wires them.
	_, nc, _ := testenv.NATS(t)
	js, _ := jetstream.New(nc)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	scfg := cpstate.DefaultStateConfig()
	scfg.Bucket = "cp_arcade"
	state, err := cpstate.OpenState(ctx, js, scfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	const boot = "bootstrap-key-of-the-arcade-test"
	access := cpstate.NewAccess(state, auth.HashKey(boot), nil)
	sealer, _ := cpstate.NewSealer([]byte("0123456789abcdef0123456789abcdef"))
	pub, err := producers.New(nc, producers.DefaultConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	svc, err := controlplane.NewService(controlplane.DefaultServiceConfig(), state, access, sealer, producers.NewRecorder(pub, 5*time.Second), httpx.TrustedProxies{}, log)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var calls []toolrunner.Call
	tool := func(name, version string, destructive bool, out any, secrets ...string) arcadeTool {
		d := toolrunner.Definition{Toolkit: "Mailer", Name: name, Version: version, Description: name,
			Parameters: []toolrunner.Param{{Name: "to", Type: "string"}, {Name: "body", Type: "string"}}, Output: toolrunner.Output{Type: "json"},
			Metadata: toolrunner.Metadata{Classification: toolrunner.Classification{ServiceDomains: []string{"email"}},
				Behavior: toolrunner.Behavior{Operations: []string{"create"}, Destructive: destructive}}}
		d.Requirements.Authorization = []toolrunner.AuthRequirement{{ProviderType: "oauth2", ProviderID: "google", Scopes: []string{"mail.send"}}}
		for _, s := range secrets {
			d.Requirements.Secrets = append(d.Requirements.Secrets, toolrunner.SecretRequirement{Name: s})
		}
		return arcadeTool{def: d, out: out, mu: &mu, calls: &calls}
	}
	reg := toolrunner.NewRegistry()
	if err := reg.Register(
		tool("Send", "1.2.0", false, map[string]any{"sent": true}, "SMTP_PASSWORD"),
		tool("Read", "1.0.0", false, map[string]any{"subject": "Q3 numbers", "from": "cfo@corp.example"}),
		tool("Archive", "1.0.0", false, "archived"),
		tool("Forward", "1.0.0", false, "forwarded"),
		tool("Purge", "1.0.0", true, "purged"),
		tool("Legacy", "0.9.0", false, "legacy"),
	); err != nil {
		t.Fatal(err)
	}
	runner, proxy := platform.NewRunner(reg, svc, pub, egress.AllowLoopback(), log)
	defer proxy.Close()
	cp := httpapi.NewApp(log)
	svc.Register(cp)
	tr := httpapi.NewApp(log)
	toolrunner.NewServer(runner, access, httpx.TrustedProxies{}).Register(tr)
	cpURL, trURL := serveApp(t, cp), serveApp(t, tr)

	call := func(method, url string, body any) (int, map[string]any) {
		t.Helper()
		b, _ := json.Marshal(body)
		req, _ := http.NewRequest(method, url, bytes.NewReader(b))
		req.Header.Set("Authorization", "Bearer "+boot)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		var env struct {
			Data map[string]any `json:"data"`
		}
		_ = json.Unmarshal(raw, &env)
		if resp.StatusCode >= 300 {
			t.Logf("%s %s: %d %s", method, url, resp.StatusCode, raw)
		}
		return resp.StatusCode, env.Data
	}
	must := func(status int, method, path string, body any) map[string]any {
		t.Helper()
		st, data := call(method, cpURL+path, body)
		if st != status {
			t.Fatalf("%s %s: %d, want %d", method, path, st, status)
		}
		return data
	}
	org := must(201, "POST", "/api/v1/orgs", map[string]any{"name": "acme"})["id"].(string)
	project := must(201, "POST", "/api/v1/orgs/"+org+"/projects", map[string]any{"name": "mail"})["id"].(string)
	orgPath, projPath := "/api/v1/orgs/"+org, "/api/v1/orgs/"+org+"/projects/"+project
	must(201, "PUT", projPath+"/secrets/SMTP_PASSWORD", map[string]any{"value": "stored-password"})
	must(201, "POST", orgPath+"/auth_providers", map[string]any{"id": "google", "type": "oauth2", "client_id": "c",
		"authorize_url": "https://idp.example/authorize", "token_url": "https://idp.example/token"})
	must(201, "PUT", projPath+"/users/bob/connections/google", map[string]any{"access_token": "ya29.bob", "refresh_token": "r",
		"scopes": []string{"mail.send", "openid"}, "expires_at": time.Now().Add(time.Hour).UTC().Format(time.RFC3339)})
	hook := must(201, "POST", orgPath+"/hooks", map[string]any{"name": "existing-arcade-server", "endpoint": hooks.URL, "contract": "arcade",
		"points": map[string]any{"access": map[string]any{}, "pre": map[string]any{}, "post": map[string]any{}},
		"auth":   map[string]any{"type": "bearer", "token": hookToken}})
	if cfg, _ := hook["config"].(map[string]any); cfg == nil || cfg["contract"] != "arcade" {
		t.Fatalf("hook as created: %v", hook)
	}
	// The health check made on creation read the server's answer.
	view := must(200, "GET", orgPath+"/hooks/"+hook["id"].(string), nil)
	if st, _ := view["status"].(map[string]any); st == nil || st["health"] == nil ||
		st["health"].(map[string]any)["status"] != "healthy" || st["health"].(map[string]any)["ok"] != true {
		t.Fatalf("hook view: %v", view)
	}

	// Access: the destructive tool and the legacy version are hidden.
	st, list := call("GET", trURL+projPath+"/tools?user_id=bob", nil)
	if st != 200 {
		t.Fatalf("list: %d", st)
	}
	var names []string
	for _, it := range list["items"].([]any) {
		names = append(names, it.(map[string]any)["name"].(string))
	}
	slices.Sort(names)
	if want := []string{"Archive", "Forward", "Read", "Send"}; !slices.Equal(names, want) {
		t.Fatalf("visible %v, want %v", names, want)
	}

	type result struct {
		Success bool           `json:"success"`
		Output  any            `json:"output"`
		Error   map[string]any `json:"error"`
		Hooks   []struct {
			Point, Code, Decision string
			Overridden            bool
		} `json:"hooks"`
	}
	execute := func(name string, input map[string]any) result {
		t.Helper()
		st, data := call("POST", trURL+projPath+"/tools/execute", map[string]any{"tool_name": "Mailer." + name, "input": input, "user_id": "bob"})
		if st != 200 {
			t.Fatalf("execute %s: %d", name, st)
		}
		b, _ := json.Marshal(data)
		var r result
		_ = json.Unmarshal(b, &r)
		return r
	}
	for _, tc := range []struct {
		tool      string
		success   bool
		kind, msg string
		output    any
		calls     string // the recorded hook calls: point:code:decision[:overridden]
	}{
		{"Purge", false, toolrunner.KindHookCheck, "not available to user bob", nil, "access:OK:deny"},
		{"Legacy", false, toolrunner.KindHookCheck, "not available to user bob", nil, "access:OK:deny"},
		{"Archive", false, toolrunner.KindHookCheck, "archiving is frozen during the audit", nil, "access:OK:allow pre:CHECK_FAILED:deny"},
		{"Forward", false, toolrunner.KindHookRateLimits, "3 forwards a minute", nil, "access:OK:allow pre:RATE_LIMIT_EXCEEDED:deny"},
		{"Read", true, "", "", map[string]any{"subject": "[redacted by policy]"}, "access:OK:allow pre:OK:allow post:OK:allow:overridden"},
		{"Send", true, "", "", map[string]any{"sent": true}, "access:OK:allow pre:OK:allow:overridden post:OK:allow"},
	} {
		mu.Lock()
		calls = nil
		mu.Unlock()
		r := execute(tc.tool, map[string]any{"to": "someone@else.example", "body": "hello"})
		var got []string
		for _, c := range r.Hooks {
			s := c.Point + ":" + c.Code + ":" + c.Decision
			if c.Overridden && c.Point != "access" {
				s += ":overridden"
			}
			got = append(got, s)
		}
		if strings.Join(got, " ") != tc.calls {
			t.Errorf("%s: hook calls %v, want %s", tc.tool, got, tc.calls)
		}
		if r.Success != tc.success {
			t.Errorf("%s: success %v, want %v: %+v", tc.tool, r.Success, tc.success, r)
			continue
		}
		if !tc.success {
			if r.Error["kind"] != tc.kind || !strings.Contains(r.Error["message"].(string), tc.msg) {
				t.Errorf("%s: error %v, want %s %q", tc.tool, r.Error, tc.kind, tc.msg)
			}
			mu.Lock()
			if len(calls) != 0 {
				t.Errorf("%s ran though denied", tc.tool)
			}
			mu.Unlock()
			continue
		}
		out, _ := json.Marshal(r.Output)
		want, _ := json.Marshal(tc.output)
		if !bytes.Equal(out, want) {
			t.Errorf("%s: output %s, want %s", tc.tool, out, want)
		}
	}
	// Send ran with the inputs and the secret the pre hook gave (the maps
	// of override.secrets merged in order).
	mu.Lock()
	if len(calls) != 1 || calls[0].Inputs["to"] != "compliance@corp.example" || calls[0].Inputs["body"] != "hello" ||
		calls[0].Secrets["SMTP_PASSWORD"] != "from-the-vault" {
		t.Fatalf("Send ran with %+v", calls)
	}
	mu.Unlock()

	// Every request the server got is valid for the Arcade description,
	// none was refused, and every answer is valid too.
	exs := rec.Exchanges()
	seen := map[string]int{}
	for _, ex := range exs {
		seen[ex.Path]++
		if ex.Status != 200 {
			t.Errorf("%s answered %d: %s (request %s)", ex.Path, ex.Status, ex.RespBody, ex.Body)
		}
		if err := contract.ValidateResponse(ex); err != nil {
			t.Errorf("%v\nrequest: %s", err, ex.Body)
		}
		if ex.Path != "/health" && ex.Header.Get("Authorization") != "Bearer "+hookToken {
			t.Errorf("%s without the bearer token", ex.Path)
		}
	}
	// access: one batched call (then the cache); pre: Archive, Forward,
	// Read, Send; post: Read, Send; health on creation.
	if seen["/access"] < 1 || seen["/pre"] != 4 || seen["/post"] != 2 || seen["/health"] != 1 {
		t.Errorf("requests by path: %v", seen)
	}
	// The access request carried the requirements in Arcade's shapes, and
	// the pre request the context.
	for _, ex := range exs {
		if ex.Path != "/access" {
			continue
		}
		var acc arcadehook.AccessHookRequest
		if err := json.Unmarshal(ex.Body, &acc); err != nil {
			t.Fatal(err)
		}
		send := (*acc.Toolkits["Mailer"].Tools)["Send"]
		if len(send) != 1 || send[0].Requirements == nil || send[0].Requirements.Secrets == nil || (*send[0].Requirements.Secrets)[0].Name != "SMTP_PASSWORD" ||
			send[0].Requirements.Authorization == nil || (*send[0].Requirements.Authorization)[0].Oauth2 == nil ||
			!slices.Equal(*(*send[0].Requirements.Authorization)[0].Oauth2.Scopes, []string{"mail.send"}) {
			t.Errorf("access request: %s", ex.Body)
		}
	}
	for _, ex := range exs {
		if ex.Path != "/pre" || !bytes.Contains(ex.Body, []byte(`"name":"Send"`)) {
			continue
		}
		var pre arcadehook.PreHookRequest
		if err := json.Unmarshal(ex.Body, &pre); err != nil {
			t.Fatal(err)
		}
		c := pre.Context
		if c.Secrets == nil || !slices.Equal(*c.Secrets, []string{"SMTP_PASSWORD"}) || c.Authorization == nil || len(*c.Authorization) != 1 ||
			*(*c.Authorization)[0].ProviderId != "google" || (*c.Authorization)[0].Oauth2 == nil || !slices.Contains(*(*c.Authorization)[0].Oauth2.Scopes, "mail.send") {
			t.Errorf("pre context: %s", ex.Body)
		}
		if bytes.Contains(ex.Body, []byte("stored-password")) || bytes.Contains(ex.Body, []byte("ya29.bob")) {
			t.Errorf("a secret value or token reached the hook: %s", ex.Body)
		}
	}
}

func serveApp(t *testing.T, app *fiber.App) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = app.Listener(ln) }()
	t.Cleanup(func() { _ = app.Shutdown(); <-done })
	return "http://" + ln.Addr().String()
}
