package toolrunner_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/auditrail/auditrail/hookproxy"
	"github.com/auditrail/auditrail/internal/egress"
	"github.com/auditrail/auditrail/internal/oauthflow"
	"github.com/auditrail/auditrail/internal/testenv"
	"github.com/auditrail/auditrail/producers"
	"github.com/auditrail/auditrail/schemas"
	"github.com/auditrail/auditrail/schemas/hooksapi"
	"github.com/auditrail/auditrail/toolrunner"
)

// testTool is a tool whose behaviour is a function.
type testTool struct {
	def toolrunner.Definition
	run func(ctx context.Context, c toolrunner.Call) (any, error)
}

func (t testTool) Definition() toolrunner.Definition { return t.def }
func (t testTool) Run(ctx context.Context, c toolrunner.Call) (any, error) {
	return t.run(ctx, c)
}

func def(name string, params ...toolrunner.Param) toolrunner.Definition {
	return toolrunner.Definition{Toolkit: "TestKit", Name: name, Version: "1.0.0", Description: name, Parameters: params,
		Output: toolrunner.Output{Type: "json"}}
}

var lastCall atomic.Value // toolrunner.Call

func registry(t *testing.T) *toolrunner.Registry {
	r := toolrunner.NewRegistry()
	echo := def("Echo", toolrunner.Param{Name: "text", Type: "string", Required: true}, toolrunner.Param{Name: "n", Type: "integer", Default: int64(3)})
	echo.Metadata = toolrunner.Metadata{Classification: toolrunner.Classification{ServiceDomains: []string{"testing"}},
		Behavior: toolrunner.Behavior{Operations: []string{"read"}, ReadOnly: true}}
	secret := def("NeedsSecret")
	secret.Requirements.Secrets = []toolrunner.SecretRequirement{{Name: "API_TOKEN", Type: "password"}}
	optional := def("OptionalSecret")
	optional.Requirements.Secrets = []toolrunner.SecretRequirement{{Name: "LLM_API_KEY", Type: "password", Optional: true}}
	authd := def("NeedsAuth")
	authd.Requirements.Authorization = []toolrunner.AuthRequirement{{ProviderType: "oauth2", ProviderID: "google", Scopes: []string{"drive"}}}
	more := def("NeedsMore")
	more.Requirements.Authorization = []toolrunner.AuthRequirement{
		{ProviderType: "oauth2", ProviderID: "google", Scopes: []string{"drive"}},
		{ProviderType: "oauth2", ProviderID: "google", Scopes: []string{"docs"}},
		{ProviderType: "oauth2", ProviderID: "microsoft", Scopes: []string{"Mail.Read"}},
	}
	err := r.Register(
		testTool{echo, func(_ context.Context, c toolrunner.Call) (any, error) { lastCall.Store(c); return c.Inputs, nil }},
		testTool{secret, func(_ context.Context, c toolrunner.Call) (any, error) { lastCall.Store(c); return "ok", nil }},
		testTool{optional, func(_ context.Context, c toolrunner.Call) (any, error) { lastCall.Store(c); return "ok", nil }},
		testTool{authd, func(_ context.Context, c toolrunner.Call) (any, error) { return c.Tokens["google"], nil }},
		testTool{more, func(_ context.Context, c toolrunner.Call) (any, error) {
			lastCall.Store(c)
			return len(c.Connections), nil
		}},
		testTool{def("Slow"), func(ctx context.Context, _ toolrunner.Call) (any, error) { <-ctx.Done(); return nil, ctx.Err() }},
		testTool{def("Panics"), func(context.Context, toolrunner.Call) (any, error) { panic("boom") }},
		testTool{def("Upstream"), func(context.Context, toolrunner.Call) (any, error) {
			return nil, toolrunner.Errorf(toolrunner.KindUpstream, true, "provider said 503")
		}},
	)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// sources is the runner's hooks, secrets and connections over maps; as a
// ConnectionSource it behaves as the interface says (the control plane's
// implementation is tested in controlplane and end to end).
type sources struct {
	mu      sync.Mutex
	hooks   []hookproxy.Hook
	secrets map[string]string
	// conns are the usable connections by user/provider; broken ones keep
	// their scopes but are not usable.
	conns  map[string]oauthflow.Connection
	broken map[string][]string
	// providers are the organization's auth providers.
	providers map[string]bool
	// connErr, when set, is Connection's answer (the provider unreachable,
	// …); urlErr AuthorizationURL's.
	connErr, urlErr error
	// issued are the authorization URLs handed out.
	issued []issued

	connCalls, statusCalls atomic.Int64
}

type issued struct {
	user, provider, url, nonce string
	scopes                     []string
	expires                    time.Time
	// app: made by AppAuthorizationURL (an application's link).
	app bool
}

func newSources() *sources {
	return &sources{secrets: map[string]string{}, conns: map[string]oauthflow.Connection{}, broken: map[string][]string{},
		providers: map[string]bool{"google": true, "microsoft": true}}
}

func (s *sources) Hooks(context.Context, uuid.UUID, uuid.UUID) ([]hookproxy.Hook, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]hookproxy.Hook(nil), s.hooks...), nil
}

func (s *sources) SecretValue(_, _, name string) (string, error) {
	if v, ok := s.secrets[name]; ok {
		return v, nil
	}
	return "", errors.New("not found")
}

func (s *sources) Connection(_ context.Context, _, _, user, provider string) (oauthflow.Connection, error) {
	s.connCalls.Add(1)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.connErr != nil {
		return oauthflow.Connection{}, s.connErr
	}
	if c, ok := s.conns[user+"/"+provider]; ok {
		c.Scopes = slices.Clone(c.Scopes)
		return c, nil
	}
	if _, ok := s.broken[user+"/"+provider]; ok {
		return oauthflow.Connection{}, fmt.Errorf("connection of %s to %s is broken: %w", user, provider, oauthflow.ErrNotConnected)
	}
	return oauthflow.Connection{}, fmt.Errorf("%s to %s: %w", user, provider, oauthflow.ErrNotConnected)
}

func (s *sources) ConnectionStatus(_, _, user, provider string) (bool, []string) {
	s.statusCalls.Add(1)
	s.mu.Lock()
	defer s.mu.Unlock()
	if c, ok := s.conns[user+"/"+provider]; ok {
		return true, slices.Clone(c.Scopes)
	}
	return false, slices.Clone(s.broken[user+"/"+provider])
}

func (s *sources) AuthorizationURL(ctx context.Context, org, project, user, provider string, scopes []string) (string, time.Time, error) {
	return s.link(user, provider, scopes, false)
}

func (s *sources) AppAuthorizationURL(ctx context.Context, org, project, user, provider string, scopes []string) (string, time.Time, error) {
	return s.link(user, provider, scopes, true)
}

func (s *sources) link(user, provider string, scopes []string, app bool) (string, time.Time, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.urlErr != nil {
		return "", time.Time{}, s.urlErr
	}
	if !s.providers[provider] {
		return "", time.Time{}, fmt.Errorf("%s: %w", provider, oauthflow.ErrNoProvider)
	}
	asked := oauthflow.MergeScopes(s.conns[user+"/"+provider].Scopes, scopes)
	is := issued{user: user, provider: provider, nonce: uuid.NewString(), scopes: slices.Clone(scopes), expires: time.Now().Add(10 * time.Minute), app: app}
	is.url = "https://idp.test/authorize?client_id=cid&scope=" + strings.Join(asked, "+") + "&state=" + is.nonce
	s.issued = append(s.issued, is)
	return is.url, is.expires, nil
}

type env struct {
	runner *toolrunner.Runner
	src    *sources
	js     jetstream.JetStream
	sc     toolrunner.Scope
	logs   *testenv.SyncBuffer // the runner's log lines
}

func newEnv(t *testing.T, mut func(*toolrunner.Config)) *env {
	_, nc, js := testenv.NATS(t)
	pub, err := producers.New(nc, producers.DefaultConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg := toolrunner.DefaultConfig()
	cfg.ToolTimeout = 200 * time.Millisecond
	if mut != nil {
		mut(&cfg)
	}
	src := newSources()
	hcfg := hookproxy.DefaultConfig()
	hcfg.Egress = egress.AllowLoopback() // the hook servers are on 127.0.0.1
	logs := &testenv.SyncBuffer{}
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	r := toolrunner.New(cfg, registry(t), hookproxy.New(hcfg, log), src, src, src, pub, log)
	return &env{runner: r, src: src, js: js, sc: toolrunner.Scope{Org: uuid.New(), Project: uuid.New(), UserID: "u1"}, logs: logs}
}

// hookServer answers pre and post with a handler and records request bodies.
type hookServer struct {
	srv    *httptest.Server
	bodies chan []byte
	calls  atomic.Int64
}

func newHookServer(t *testing.T, handle func(path string, body []byte) string) *hookServer {
	h := &hookServer{bodies: make(chan []byte, 100)}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.calls.Add(1)
		b, _ := io.ReadAll(r.Body)
		h.bodies <- b
		fmt.Fprint(w, handle(r.URL.Path, b))
	}))
	t.Cleanup(h.srv.Close)
	return h
}

func hookOf(id, url string, points ...hookproxy.Point) hookproxy.Hook {
	h := hookproxy.Hook{ID: id, Name: id, Revision: "1", Endpoint: url, Points: map[hookproxy.Point]hookproxy.PointConfig{},
		MaxAttempts: 1, ConsecutiveFailures: 5, OpenFor: time.Second}
	for _, p := range points {
		h.Points[p] = hookproxy.PointConfig{Path: "/" + string(p), Timeout: time.Second, FailureMode: hookproxy.FailClosed}
	}
	return h
}

func (e *env) lastEvent(t *testing.T) schemas.ExecutionEvent {
	t.Helper()
	ev, err := schemas.UnmarshalExecutionEvent(e.lastEventRaw(t))
	if err != nil {
		t.Fatal(err)
	}
	return ev
}

// lastEventRaw is the last execution event of the org as stored.
func (e *env) lastEventRaw(t *testing.T) []byte {
	t.Helper()
	s, err := e.js.Stream(context.Background(), schemas.StreamEvents)
	if err != nil {
		t.Fatal(err)
	}
	m, err := s.GetLastMsgForSubject(context.Background(), schemas.EventSubject(e.sc.Org.String(), schemas.KindExecution))
	if err != nil {
		t.Fatal(err)
	}
	if m.Header.Get("Auditrail-Schema") != "execution/v1" {
		t.Fatalf("schema header %q", m.Header.Get("Auditrail-Schema"))
	}
	return m.Data
}

func TestValidate(t *testing.T) {
	d := def("V",
		toolrunner.Param{Name: "s", Type: "string", Required: true, Enum: []string{"markdown", "plain"}},
		toolrunner.Param{Name: "i", Type: "integer", Default: int64(10)},
		toolrunner.Param{Name: "b", Type: "boolean"},
		toolrunner.Param{Name: "as", Type: "array<string>"},
		toolrunner.Param{Name: "aj", Type: "array<json>"},
	)
	ok, err := toolrunner.Validate(d, map[string]any{"s": "PLAIN", "b": true, "as": []any{"x"}, "aj": []any{map[string]any{"k": 1}}})
	if err != nil || ok["i"] != int64(10) || ok["as"].([]string)[0] != "x" {
		t.Fatalf("%v %v", ok, err)
	}
	tests := []struct {
		in    map[string]any
		param string
	}{
		{map[string]any{}, "s"},
		{map[string]any{"s": 1.0}, "s"},
		{map[string]any{"s": "html"}, "s"},
		{map[string]any{"s": "plain", "i": 1.5}, "i"},
		{map[string]any{"s": "plain", "i": "10"}, "i"},
		{map[string]any{"s": "plain", "b": "yes"}, "b"},
		{map[string]any{"s": "plain", "as": []any{1.0}}, "as"},
		{map[string]any{"s": "plain", "aj": []any{"x"}}, "aj"},
		{map[string]any{"s": "plain", "extra": 1}, "extra"},
	}
	for _, tc := range tests {
		_, err := toolrunner.Validate(d, tc.in)
		if !errors.Is(err, toolrunner.ErrInvalidInput) || !strings.Contains(err.Error(), tc.param+":") {
			t.Errorf("%v: err = %v, want one naming %s", tc.in, err, tc.param)
		}
	}
	// Nullable: an explicit null stays null; absent takes the default.
	n := def("N", toolrunner.Param{Name: "max", Type: "integer", Default: int64(5000), Nullable: true},
		toolrunner.Param{Name: "i", Type: "integer", Default: int64(10)})
	got, err := toolrunner.Validate(n, map[string]any{"max": nil, "i": nil})
	if v, present := got["max"]; err != nil || !present || v != nil || got["i"] != int64(10) {
		t.Fatalf("explicit null: %v %v", got, err)
	}
	if got, err = toolrunner.Validate(n, map[string]any{}); err != nil || got["max"] != int64(5000) {
		t.Fatalf("absent: %v %v", got, err)
	}
}

func TestPipelineOverridesAndEvent(t *testing.T) {
	e := newEnv(t, nil)
	e.src.secrets["API_TOKEN"] = "from-project"
	pre := newHookServer(t, func(path string, body []byte) string {
		if path == "/pre" && strings.Contains(string(body), `"name":"Echo"`) {
			return `{"code":"OK","override":{"inputs":{"text":"rewritten"}}}`
		}
		if path == "/pre" {
			return `{"code":"OK","override":{"secrets":{"API_TOKEN":"from-hook"}}}`
		}
		return `{"code":"OK","override":{"output":{"filtered":true}}}`
	})
	e.src.hooks = []hookproxy.Hook{hookOf("h1", pre.srv.URL, hookproxy.Pre, hookproxy.Post)}
	res, err := e.runner.Execute(context.Background(), e.sc, "TestKit.Echo", map[string]any{"text": "hello"})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Success || fmt.Sprint(res.Output) != "map[filtered:true]" || len(res.Hooks) != 2 || res.DurationMS <= 0 {
		t.Fatalf("result %+v", res)
	}
	call := lastCall.Load().(toolrunner.Call)
	if call.Inputs["text"] != "rewritten" || call.Inputs["n"] != int64(3) {
		t.Fatalf("the tool saw %v", call.Inputs)
	}
	preBody := <-pre.bodies
	var preReq map[string]any
	_ = json.Unmarshal(preBody, &preReq)
	tool := preReq["tool"].(map[string]any)
	if tool["name"] != "Echo" || tool["toolkit"] != "TestKit" || tool["metadata"].(map[string]any)["behavior"].(map[string]any)["read_only"] != true {
		t.Fatalf("pre request tool: %v", tool)
	}
	if preReq["execution_id"] != res.ExecutionID || preReq["context"].(map[string]any)["user_id"] != "u1" {
		t.Fatalf("pre request: %s", preBody)
	}
	postBody := <-pre.bodies
	var postReq map[string]any
	_ = json.Unmarshal(postBody, &postReq)
	if postReq["execution_id"] != res.ExecutionID || postReq["success"] != true || postReq["inputs"].(map[string]any)["text"] != "rewritten" {
		t.Fatalf("post request: %s", postBody)
	}
	ev := e.lastEvent(t)
	if ev.ExecutionID != res.ExecutionID || !ev.Success || ev.Tool.Name != "Echo" || len(ev.Hooks) != 2 || ev.Hooks[0].Point != "pre" || !ev.Hooks[1].Overridden {
		t.Fatalf("event %+v", ev)
	}

	// Secrets: names only in hook requests; hook overrides win over the project's.
	res, err = e.runner.Execute(context.Background(), e.sc, "TestKit.NeedsSecret", nil)
	if err != nil || !res.Success {
		t.Fatalf("%+v %v", res, err)
	}
	if v := lastCall.Load().(toolrunner.Call).Secrets["API_TOKEN"]; v != "from-hook" {
		t.Fatalf("secret %q", v)
	}
	body := <-pre.bodies
	<-pre.bodies
	if strings.Contains(string(body), "from-project") || !strings.Contains(string(body), `"secrets":{"API_TOKEN":true}`) {
		t.Fatalf("pre request carries secret values or lacks the names: %s", body)
	}
	// A tool without metadata sends none.
	if strings.Contains(string(body), `"metadata":{"classification"`) || strings.Contains(string(body), `"tool":{"metadata"`) {
		t.Fatalf("empty metadata sent: %s", body)
	}
}

func TestFailures(t *testing.T) {
	e := newEnv(t, nil)
	e.src.conns["u1/google"] = oauthflow.Connection{AccessToken: "ya29.token", Scopes: []string{"drive"}}
	ctx := context.Background()
	tests := []struct {
		tool, kind string
		retry      bool
	}{
		{"TestKit.Slow", toolrunner.KindTimeout, true},
		{"TestKit.Panics", toolrunner.KindRuntime, false},
		{"TestKit.Upstream", toolrunner.KindUpstream, true},
		{"TestKit.NeedsSecret", toolrunner.KindSecretMissing, false},
	}
	for _, tc := range tests {
		res, err := e.runner.Execute(ctx, e.sc, tc.tool, nil)
		if err != nil || res.Success || res.Error.Kind != tc.kind || res.Error.CanRetry != tc.retry {
			t.Errorf("%s: %+v %v", tc.tool, res.Error, err)
		}
		if ev := e.lastEvent(t); ev.Success || ev.ErrorKind != tc.kind || ev.ExecutionCode != tc.kind {
			t.Errorf("%s: event %+v", tc.tool, ev)
		}
	}
	if res, _ := e.runner.Execute(ctx, e.sc, "TestKit.NeedsAuth", nil); !res.Success || res.Output != "ya29.token" {
		t.Errorf("connected user: %+v", res)
	}
	other := e.sc
	other.UserID = "u2"
	if res, _ := e.runner.Execute(ctx, other, "TestKit.NeedsAuth", nil); res.Success || res.Error.Kind != toolrunner.KindAuthorization {
		t.Errorf("unconnected user: %+v", res.Error)
	}
	if _, err := e.runner.Execute(ctx, e.sc, "TestKit.Nope", nil); !errors.Is(err, toolrunner.ErrUnknownTool) {
		t.Errorf("unknown tool: %v", err)
	}
	if _, err := e.runner.Execute(ctx, e.sc, "TestKit.Echo", map[string]any{"text": 5.0}); !errors.Is(err, toolrunner.ErrInvalidInput) {
		t.Errorf("bad input: %v", err)
	}
	// Denials by hooks.
	deny := newHookServer(t, func(string, []byte) string { return `{"code":"RATE_LIMIT_EXCEEDED","error_message":"slow down"}` })
	e.src.hooks = []hookproxy.Hook{hookOf("d", deny.srv.URL, hookproxy.Pre)}
	res, _ := e.runner.Execute(ctx, e.sc, "TestKit.Echo", map[string]any{"text": "x"})
	if res.Success || res.Error.Kind != toolrunner.KindHookRateLimits || res.Error.Message != "slow down" || !res.Error.CanRetry {
		t.Errorf("rate-limited: %+v", res.Error)
	}
	if ev := e.lastEvent(t); len(ev.Hooks) != 1 || ev.Hooks[0].Code != "RATE_LIMIT_EXCEEDED" || ev.Hooks[0].Decision != "deny" {
		t.Errorf("event of a denial: %+v", ev.Hooks)
	}
}

// TestOptionalSecretAndTenant: an optional secret is passed when the
// project has it and its absence is no SECRET_MISSING; a required one
// still fails; the tool learns its tenant (Call.Org, Call.Project).
func TestOptionalSecretAndTenant(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	tests := []struct {
		name, tool string
		secrets    map[string]string
		wantKind   string
		wantSecret map[string]string
	}{
		{"optional absent", "TestKit.OptionalSecret", nil, "", map[string]string{}},
		{"optional present", "TestKit.OptionalSecret", map[string]string{"LLM_API_KEY": "sk-1"}, "", map[string]string{"LLM_API_KEY": "sk-1"}},
		{"required absent", "TestKit.NeedsSecret", nil, toolrunner.KindSecretMissing, nil},
		{"required present", "TestKit.NeedsSecret", map[string]string{"API_TOKEN": "t"}, "", map[string]string{"API_TOKEN": "t"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e.src.mu.Lock()
			e.src.secrets = map[string]string{}
			for k, v := range tc.secrets {
				e.src.secrets[k] = v
			}
			e.src.mu.Unlock()
			lastCall.Store(toolrunner.Call{})
			res, err := e.runner.Execute(ctx, e.sc, tc.tool, nil)
			if err != nil {
				t.Fatal(err)
			}
			if tc.wantKind != "" {
				if res.Success || res.Error.Kind != tc.wantKind {
					t.Fatalf("want %s, got %+v", tc.wantKind, res.Error)
				}
				return
			}
			if !res.Success {
				t.Fatalf("failed: %+v", res.Error)
			}
			c := lastCall.Load().(toolrunner.Call)
			if fmt.Sprint(c.Secrets) != fmt.Sprint(tc.wantSecret) {
				t.Errorf("secrets %v, want %v", c.Secrets, tc.wantSecret)
			}
			if c.Org != e.sc.Org.String() || c.Project != e.sc.Project.String() {
				t.Errorf("tenant %q/%q, want %s/%s", c.Org, c.Project, e.sc.Org, e.sc.Project)
			}
		})
	}
}

func TestAccessHookAndCache(t *testing.T) {
	e := newEnv(t, nil)
	acc := newHookServer(t, func(string, []byte) string { return `{"deny":{"TestKit":["Panics","Slow"]}}` })
	e.src.hooks = []hookproxy.Hook{hookOf("a", acc.srv.URL, hookproxy.Access)}
	ctx := context.Background()
	defs, _, err := e.runner.Visible(ctx, e.sc)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, d := range defs {
		names[d.Name] = true
	}
	if names["Panics"] || names["Slow"] || !names["Echo"] || len(defs) != 6 {
		t.Fatalf("visible: %v", names)
	}
	var req hooksapi.AccessRequest
	_ = json.Unmarshal(<-acc.bodies, &req)
	if req.UserId != "u1" || len(req.Toolkits["TestKit"].Tools) != 8 {
		t.Fatalf("access request: %+v", req)
	}
	res, _ := e.runner.Execute(ctx, e.sc, "TestKit.Panics", nil)
	if res.Success || res.Error.Kind != toolrunner.KindHookCheck || !strings.Contains(res.Error.Message, "access hook a") {
		t.Fatalf("hidden tool executed: %+v", res)
	}
	if acc.calls.Load() != 1 {
		t.Fatalf("access hook called %d times, want 1 (cached)", acc.calls.Load())
	}
	// The record of the refused execution names the refusing hook and says
	// that the decision came from the cache.
	ev := e.lastEvent(t)
	if len(ev.Hooks) != 1 || ev.Hooks[0].HookID != "a" || ev.Hooks[0].Decision != "deny" || !ev.Hooks[0].Cached || ev.Hooks[0].Attempts != 0 {
		t.Fatalf("cached refusal recorded as %+v", ev.Hooks)
	}
	// A fresh decision: the access call made for this execution says deny.
	e.src.mu.Lock()
	e.src.hooks[0].Revision = "1b"
	e.src.mu.Unlock()
	res, _ = e.runner.Execute(ctx, e.sc, "TestKit.Slow", nil)
	if res.Success || len(res.Hooks) != 1 || res.Hooks[0].Decision != "deny" || res.Hooks[0].Cached || res.Hooks[0].Attempts != 1 {
		t.Fatalf("fresh refusal recorded as %+v", res.Hooks)
	}
	// An allowed tool from the cache: the access call is allow, cached.
	res, _ = e.runner.Execute(ctx, e.sc, "TestKit.Echo", map[string]any{"text": "x"})
	if len(res.Hooks) < 1 || res.Hooks[0].Decision != "allow" || !res.Hooks[0].Cached {
		t.Fatalf("cached allowance recorded as %+v", res.Hooks)
	}
	if acc.calls.Load() != 2 {
		t.Fatalf("access hook called %d times, want 2", acc.calls.Load())
	}
	// A configuration change drops the cache at once.
	e.src.mu.Lock()
	e.src.hooks[0].Revision = "2"
	e.src.mu.Unlock()
	if _, _, err := e.runner.Visible(ctx, e.sc); err != nil || acc.calls.Load() != 3 {
		t.Fatalf("after a change: %d calls, %v", acc.calls.Load(), err)
	}
	// Another user is asked about separately.
	other := e.sc
	other.UserID = "u2"
	_, _, _ = e.runner.Visible(ctx, other)
	if acc.calls.Load() != 4 {
		t.Fatalf("other user: %d calls", acc.calls.Load())
	}
}
