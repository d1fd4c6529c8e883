package mail

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"go.uber.org/goleak"

	"github.com/auditrail/auditrail/hookproxy"
	"github.com/auditrail/auditrail/internal/egress"
	"github.com/auditrail/auditrail/internal/emulators/graph"
	"github.com/auditrail/auditrail/internal/emulators/oauth"
	"github.com/auditrail/auditrail/internal/emulators/oauth/oauthtest"
	"github.com/auditrail/auditrail/internal/oauthflow"
	"github.com/auditrail/auditrail/internal/retry"
	"github.com/auditrail/auditrail/internal/testenv"
	"github.com/auditrail/auditrail/producers"
	"github.com/auditrail/auditrail/toolrunner"
	"github.com/auditrail/auditrail/toolrunner/toolrunnertest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// allScopes are what the demo connection grants: every scope a tool of
// the toolkit declares, nothing more.
var allScopes = []string{ScopeMailRead, ScopeMailReadWrite, ScopeMailSend, ScopeUserRead, ScopeMailboxSettingsRead}

type noHooks struct{}

func (noHooks) Hooks(context.Context, uuid.UUID, uuid.UUID) ([]hookproxy.Hook, error) {
	return nil, nil
}

type noSecrets struct{}

func (noSecrets) SecretValue(_, _, _ string) (string, error) { return "", oauthflow.ErrNotConnected }

// recorder is a transport that keeps every request's method, path and
// query as sent.
type recorder struct {
	mu   sync.Mutex
	reqs []*http.Request
	base http.RoundTripper
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	r.mu.Lock()
	r.reqs = append(r.reqs, req.Clone(context.Background()))
	r.mu.Unlock()
	return r.base.RoundTrip(req)
}

func (r *recorder) reset() {
	r.mu.Lock()
	r.reqs = nil
	r.mu.Unlock()
}

func (r *recorder) all() []*http.Request {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*http.Request(nil), r.reqs...)
}

// env is the OAuth and Graph emulators (Graph mounted at /microsoft as the
// demo mounts it), ann (u1, the sample mailbox) and ben (u2, empty), and a
// runner with the toolkit.
type env struct {
	oauth  *oauth.Server
	graph  *graph.Server
	as, gs *httptest.Server
	api    string
	conns  *toolrunnertest.Connections
	tk     *Toolkit
	runner *toolrunner.Runner
	sc     toolrunner.Scope
	sent   *recorder
	// throttle, when set, answers the emulator's Config.Throttle.
	throttle func(r *http.Request) time.Duration
	thMu     sync.Mutex
}

var users = []oauth.User{{ID: "u1", Email: "ann@contoso.com", Name: "Ann Lee"}, {ID: "u2", Email: "ben@contoso.com", Name: "Ben Ode"}}

func newEnv(t testing.TB) *env {
	t.Helper()
	o, err := oauth.New(oauth.Config{Clients: []oauth.Client{{ID: "app", Secret: "s", RedirectURIs: []string{"https://app.example/cb"}}},
		Users: users, AutoApprove: true})
	if err != nil {
		t.Fatal(err)
	}
	e := &env{oauth: o}
	g, err := graph.New(graph.Config{Auth: o, Users: users, Throttle: func(r *http.Request, _ oauth.Grant) time.Duration {
		e.thMu.Lock()
		defer e.thMu.Unlock()
		if e.throttle == nil {
			return 0
		}
		return e.throttle(r)
	}})
	if err != nil {
		t.Fatal(err)
	}
	if err := g.SeedSample("u1", "ann@contoso.com"); err != nil {
		t.Fatal(err)
	}
	g.AddMailbox("u2", "ben@contoso.com", "Ben Ode")
	mux := http.NewServeMux()
	mux.Handle("/microsoft/", http.StripPrefix("/microsoft", g.Handler()))
	e.graph, e.as, e.gs = g, httptest.NewServer(o.Handler()), httptest.NewServer(mux)
	e.api = e.gs.URL + "/microsoft"
	t.Cleanup(func() { e.gs.Close(); e.as.Close() })
	e.conns = toolrunnertest.NewConnections(Provider)
	e.connect(t, "u1", allScopes...)
	e.connect(t, "u2", allScopes...)

	_, nc, _ := testenv.NATS(t)
	pub, err := producers.New(nc, producers.DefaultConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.DialContext = egress.AllowLoopback().Dialer(net.Dialer{Timeout: 5 * time.Second}).DialContext
	e.sent = &recorder{base: tr}
	cfg := DefaultConfig()
	cfg.HTTPClient = &http.Client{Transport: e.sent}
	cfg.Retry = retry.Policy{Initial: 5 * time.Millisecond, Max: 20 * time.Millisecond, MaxAttempts: 3}
	cfg.MaxRetryAfter = 2 * time.Second
	e.tk, err = New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.CloseIdleConnections() })
	reg := toolrunner.NewRegistry()
	if err := reg.Register(e.tk.Tools()...); err != nil {
		t.Fatal(err)
	}
	rcfg := toolrunner.DefaultConfig()
	rcfg.ToolTimeout = 30 * time.Second
	e.runner = toolrunner.New(rcfg, reg, hookproxy.New(hookproxy.DefaultConfig(), nil), noHooks{}, noSecrets{}, e.conns, pub, nil)
	e.sc = toolrunner.Scope{Org: uuid.New(), Project: uuid.New(), UserID: "u1"}
	return e
}

// connect gives the user a connection holding a token of the real
// authorization-code flow with PKCE.
func (e *env) connect(t testing.TB, user string, scopes ...string) {
	t.Helper()
	tok := e.token(t, user, scopes...)
	e.conns.Set(user, oauthflow.Connection{AccessToken: tok, Scopes: scopes, APIBaseURL: e.api})
}

func (e *env) setBase(user, base string) {
	e.conns.Update(user, func(c *oauthflow.Connection) { c.APIBaseURL = base })
}

func (e *env) token(t testing.TB, user string, scopes ...string) string {
	t.Helper()
	return oauthtest.Token(t, e.as.URL, oauthtest.Client{ID: "app", Secret: "s", RedirectURI: "https://app.example/cb"}, user, scopes...)
}

// direct is a GET of the emulator with the user's own token (the test's
// hands, not the toolkit's); prefer adds a Prefer header.
func (e *env) direct(t testing.TB, user, rel string, prefer ...string) map[string]any {
	t.Helper()
	cn, _ := e.conns.Get(user)
	tok := cn.AccessToken
	req, _ := http.NewRequest(http.MethodGet, e.api+rel, nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Prefer", strings.Join(append([]string{`IdType="ImmutableId"`}, prefer...), ", "))
	c := &http.Client{}
	defer c.CloseIdleConnections()
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("GET %s: %d %s", rel, resp.StatusCode, b)
	}
	return m
}

// mailbox answers every message of the user as the emulator stores it
// (read directly, all folders, text bodies).
func (e *env) mailbox(t testing.TB, user string) []map[string]any {
	t.Helper()
	m := e.direct(t, user, "/me/messages?$top=1000", `outlook.body-content-type="text"`)
	var out []map[string]any
	for _, v := range m["value"].([]any) {
		out = append(out, v.(map[string]any))
	}
	return out
}

func (e *env) scope(user string) toolrunner.Scope {
	sc := e.sc
	sc.UserID = user
	return sc
}

func (e *env) run(t testing.TB, tool string, in map[string]any) toolrunner.Result {
	t.Helper()
	return e.runAs(t, "u1", tool, in)
}

func (e *env) runAs(t testing.TB, user, tool string, in map[string]any) toolrunner.Result {
	t.Helper()
	// Inputs as a JSON client sends them (numbers as float64).
	b, _ := json.Marshal(in)
	var norm map[string]any
	_ = json.Unmarshal(b, &norm)
	res, err := e.runner.Execute(context.Background(), e.scope(user), Name+"."+tool, norm)
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	return res
}

func (e *env) ok(t testing.TB, tool string, in map[string]any) map[string]any {
	t.Helper()
	return e.okAs(t, "u1", tool, in)
}

func (e *env) okAs(t testing.TB, user, tool string, in map[string]any) map[string]any {
	t.Helper()
	res := e.runAs(t, user, tool, in)
	if !res.Success {
		t.Fatalf("%s %v: %+v", tool, in, res.Error)
	}
	// As the API's client sees it.
	b, err := json.Marshal(res.Output)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("%s answered %s", tool, b)
	}
	return m
}

func (e *env) fails(t testing.TB, tool string, in map[string]any, kind string) *toolrunner.Error {
	t.Helper()
	return e.failsAs(t, "u1", tool, in, kind)
}

func (e *env) failsAs(t testing.TB, user, tool string, in map[string]any, kind string) *toolrunner.Error {
	t.Helper()
	res := e.runAs(t, user, tool, in)
	if res.Success || res.Error == nil || res.Error.Kind != kind {
		t.Fatalf("%s %v: want %s, got success=%v %+v", tool, in, kind, res.Success, res.Error)
	}
	return res.Error
}

func emails(t testing.TB, out map[string]any) []map[string]any {
	t.Helper()
	v, ok := out["emails"].([]any)
	if !ok {
		t.Fatalf("no emails in %v", out)
	}
	res := make([]map[string]any, len(v))
	for i, x := range v {
		res[i] = x.(map[string]any)
	}
	return res
}

func ids(ms []map[string]any) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i], _ = m["id"].(string)
	}
	return out
}

// post is a POST to the emulator with the user's own token (the test's
// hands): it answers the status and the decoded body.
func (e *env) post(t testing.TB, user, rel string, body any) (int, map[string]any) {
	t.Helper()
	cn, _ := e.conns.Get(user)
	tok := cn.AccessToken
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest(http.MethodPost, e.api+rel, strings.NewReader(string(b)))
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Prefer", `IdType="ImmutableId"`)
	c := &http.Client{}
	defer c.CloseIdleConnections()
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	rb, _ := io.ReadAll(resp.Body)
	var m map[string]any
	_ = json.Unmarshal(rb, &m)
	return resp.StatusCode, m
}

// find answers the user's first message whose subject is s.
func (e *env) find(t testing.TB, user, subject string) map[string]any {
	t.Helper()
	for _, m := range e.mailbox(t, user) {
		if m["subject"] == subject {
			return m
		}
	}
	t.Fatalf("%s has no message %q", user, subject)
	return nil
}
