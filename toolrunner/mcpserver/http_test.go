package mcpserver_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/google/uuid"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/auditrail/auditrail/internal/auth"
	"github.com/auditrail/auditrail/internal/testenv"
	"github.com/auditrail/auditrail/toolrunner"
	"github.com/auditrail/auditrail/toolrunner/mcpserver"
)

// keyScoper accepts the key "good" (principal k, acting as u1 or the
// user named) and "good-X" (principal kX) on the project of the path, and
// refuses anything else with 401.
type keyScoper struct{}

func (keyScoper) Scope(c *fiber.Ctx, user string) (toolrunner.Scope, error) {
	key, ok := strings.CutPrefix(c.Get("Authorization"), "Bearer ")
	if !ok || (key != "good" && !strings.HasPrefix(key, "good-")) {
		return toolrunner.Scope{}, fiber.NewError(fiber.StatusUnauthorized, "bad key")
	}
	if user == "" {
		user = "u1"
	}
	org, _ := uuid.Parse(c.Params("org_id"))
	project, _ := uuid.Parse(c.Params("project_id"))
	return toolrunner.Scope{Org: org, Project: project, UserID: user,
		Actor: toolrunner.Actor{PrincipalID: "k" + strings.TrimPrefix(key, "good"), PrincipalType: "API_KEY"}}, nil
}

// Recheck: the good keys hold for ever.
func (keyScoper) Recheck(_ context.Context, credential string, _ toolrunner.Scope) error {
	if credential != "good" && !strings.HasPrefix(credential, "good-") {
		return auth.ErrUnauthenticated
	}
	return nil
}

type header map[string]string

func (h header) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range h {
		r.Header.Set(k, v)
	}
	return transport.RoundTrip(r)
}

// transport is the tests' client transport: its idle connections are
// closed after each test (goleak).
var transport = &http.Transport{}

// serveHTTP serves the endpoint of f on a fiber app; it returns the URL of
// one project.
func serveHTTP(t testing.TB, f mcpserver.Runner, cfg mcpserver.Config) string {
	t.Helper()
	return serveHTTPLog(t, f, cfg, nil)
}

func serveHTTPLog(t testing.TB, f mcpserver.Runner, cfg mcpserver.Config, log *slog.Logger) string {
	t.Helper()
	return serveBase(t, f, cfg, keyScoper{}, log) + "/mcp/v1/orgs/" + uuid.NewString() + "/projects/" + uuid.NewString()
}

// serveBase serves the endpoint of f, scoped by scoper, on a fiber app; it
// returns the app's base URL.
func serveBase(t testing.TB, f mcpserver.Runner, cfg mcpserver.Config, scoper mcpserver.Scoper, log *slog.Logger) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	h, err := mcpserver.NewHandler(ctx, cfg, f, scoper, log)
	if err != nil {
		t.Fatal(err)
	}
	app := fiber.New(fiber.Config{DisableStartupMessage: true})
	h.Register(app)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = app.Listener(ln) }()
	t.Cleanup(func() {
		transport.CloseIdleConnections()
		cancel() // ends the GET streams, so that the shutdown does not wait
		_ = app.ShutdownWithTimeout(5 * time.Second)
		<-done
	})
	return "http://" + ln.Addr().String()
}

func httpClient(t testing.TB, url string, h header, changed chan<- struct{}) (*mcp.ClientSession, error) {
	opts := &mcp.ClientOptions{}
	if changed != nil {
		opts.ToolListChangedHandler = func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} }
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "c", Version: "1"}, opts).Connect(context.Background(),
		&mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: h}, MaxRetries: -1}, nil)
	if err == nil {
		t.Cleanup(func() { _ = cs.Close() })
	}
	return cs, err
}

// Over HTTP, in both answer modes: calls are answered, and the
// notification of a changed list reaches the client on the GET event
// stream (which the bridge streams).
func TestHTTPTransport(t *testing.T) {
	for _, jsonResponse := range []bool{true, false} {
		cfg := mcpserver.DefaultConfig()
		cfg.JSONResponse = jsonResponse
		other := countDef
		other.Name = "Other"
		f := &fakeRunner{defs: []toolrunner.Definition{countDef, other}, result: toolrunner.Result{ExecutionID: "e", Success: true, Output: 1.0}}
		url := serveHTTP(t, f, cfg)
		if _, err := httpClient(t, url, header{"Authorization": "Bearer bad"}, nil); err == nil {
			t.Fatal("a bad key connected")
		}
		changed := make(chan struct{}, 10)
		cs, err := httpClient(t, url, header{"Authorization": "Bearer good", mcpserver.HeaderUserID: "u2"}, changed)
		if err != nil {
			t.Fatal(err)
		}
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "Db.Count", Arguments: map[string]any{"collection": "c"}})
		if err != nil || res.IsError {
			t.Fatalf("json %v: call: %v %+v", jsonResponse, err, res)
		}
		f.mu.Lock()
		if f.calls[0].UserID != "u2" || f.calls[0].Actor.Client.Name != "c" {
			t.Fatalf("json %v: scope %+v", jsonResponse, f.calls[0])
		}
		f.defs = f.defs[:1]
		f.mu.Unlock()
		if _, err := cs.ListTools(context.Background(), nil); err != nil {
			t.Fatal(err)
		}
		select {
		case <-changed:
		case <-time.After(5 * time.Second):
			t.Fatalf("json %v: no list_changed on the event stream", jsonResponse)
		}
	}
}

// A change of the project's list (a hook added: a new revision) reaches
// an open session as notifications/tools/list_changed without the client
// asking; a revision that changes nothing visible sends nothing.
func TestListChangedPushed(t *testing.T) {
	cfg := mcpserver.DefaultConfig()
	cfg.ListCheck = 20 * time.Millisecond
	other := countDef
	other.Name = "Other"
	f := &fakeRunner{defs: []toolrunner.Definition{countDef, other}, rev: "r1"}
	changed := make(chan struct{}, 10)
	cs, err := httpClient(t, serveHTTP(t, f, cfg), header{"Authorization": "Bearer good"}, changed)
	if err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	f.rev = "r2" // a new revision, the same list
	f.mu.Unlock()
	select {
	case <-changed:
		t.Fatal("list_changed without a change")
	case <-time.After(300 * time.Millisecond):
	}
	f.mu.Lock()
	f.defs, f.rev = f.defs[:1], "r3"
	f.mu.Unlock()
	select {
	case <-changed:
	case <-time.After(5 * time.Second):
		t.Fatal("no list_changed after the change")
	}
	lt, err := cs.ListTools(context.Background(), nil)
	if err != nil || len(lt.Tools) != 1 {
		t.Fatalf("list: %v %+v", err, lt)
	}
}

// AUTHORIZATION_REQUIRED: a client that supports URL elicitation is asked
// to show the URL (elicitation/create, mode url, sent by the SDK for a
// client of protocol 2025-11-25), over HTTP; after "accept" the tool runs
// once more, and ends in the tool error that carries the URL.
func TestAuthorizationElicitsURL(t *testing.T) {
	ar := &toolrunner.AuthorizationRequest{Provider: "google", Scopes: []string{"docs"}, URL: "https://auth.example/start?t=9", StateExpiresAt: time.Now().Add(10 * time.Minute)}
	f := &fakeRunner{defs: []toolrunner.Definition{countDef}, result: toolrunner.Result{ExecutionID: "e9", Authorization: ar,
		Error: &toolrunner.Error{Kind: toolrunner.KindAuthorization, Message: "connect google", CanRetry: true}}}
	url := serveHTTP(t, f, mcpserver.DefaultConfig())
	asked := make(chan *mcp.ElicitParams, 1)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "c", Version: "1"}, &mcp.ClientOptions{
		Capabilities: &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{URL: &mcp.URLElicitationCapabilities{}}},
		ElicitationHandler: func(_ context.Context, r *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			asked <- r.Params
			return &mcp.ElicitResult{Action: "accept"}, nil
		}}).Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: header{"Authorization": "Bearer good"}}, MaxRetries: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "Db.Count", Arguments: map[string]any{"collection": "c"}})
	if err != nil || !res.IsError {
		t.Fatalf("call: %v %+v", err, res)
	}
	select {
	case p := <-asked:
		if p.Mode != "url" || p.URL != ar.URL || p.ElicitationID != "e9" {
			t.Fatalf("elicitation %+v", p)
		}
	default:
		t.Fatal("no URL elicitation before the answer")
	}
	// Accepted: the tool ran once more, and its answer was final.
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.calls) != 2 {
		t.Fatalf("the tool ran %d times, want 2", len(f.calls))
	}
}

// BenchmarkHTTPCall is one tools/call over the streamable HTTP transport
// through the fiber bridge: answered as one JSON body, or as an event
// stream.
func BenchmarkHTTPCall(b *testing.B) {
	for _, mode := range []struct {
		name string
		json bool
	}{{"json", true}, {"sse", false}} {
		b.Run(mode.name, func(b *testing.B) {
			cfg := mcpserver.DefaultConfig()
			cfg.JSONResponse = mode.json
			f := &fakeRunner{defs: []toolrunner.Definition{countDef}, result: toolrunner.Result{ExecutionID: "e", Success: true, Output: 1.0}}
			cs, err := httpClient(b, serveHTTP(b, f, cfg), header{"Authorization": "Bearer good"}, nil)
			if err != nil {
				b.Fatal(err)
			}
			params := &mcp.CallToolParams{Name: "Db.Count", Arguments: map[string]any{"collection": "c"}}
			b.ResetTimer()
			for b.Loop() {
				if _, err := cs.CallTool(context.Background(), params); err != nil {
					b.Fatal(err)
				}
				f.mu.Lock()
				f.calls, f.inputs = f.calls[:0], f.inputs[:0]
				f.mu.Unlock()
			}
		})
	}
}

const initializeBody = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`

// rawRequest sends one request to the endpoint as a client would (bearer
// "good", the streamable transport's Accept), with extra headers h.
func rawRequest(t *testing.T, method, url, body string, h header) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer good")
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range h {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := (&http.Client{Transport: transport}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if id := resp.Header.Get("Mcp-Session-Id"); id != "" && method == http.MethodPost && h["Mcp-Session-Id"] == "" {
		// A session started: ended before the server (goleak), by its
		// own credential and user.
		del := header{"Mcp-Session-Id": id}
		for _, k := range []string{"Authorization", mcpserver.HeaderUserID} {
			if h[k] != "" {
				del[k] = h[k]
			}
		}
		t.Cleanup(func() { rawRequest(t, http.MethodDelete, url, "", del) })
	}
	return resp, string(b)
}

// rpcErrorOf is the JSON-RPC error of a refusal's body.
func rpcErrorOf(t *testing.T, body string) (code int64, msg string) {
	t.Helper()
	var r struct {
		JSONRPC string `json:"jsonrpc"`
		Error   *struct {
			Code    int64  `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(body), &r); err != nil || r.JSONRPC != "2.0" || r.Error == nil {
		t.Fatalf("not a JSON-RPC error: %q (%v)", body, err)
	}
	return r.Error.Code, r.Error.Message
}

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*mcpserver.Config)
		ok   bool
	}{
		{"default", func(*mcpserver.Config) {}, true},
		{"origins", func(c *mcpserver.Config) {
			c.AllowedOrigins = []string{"https://app.example", "http://localhost:3000", "https://x.example/"}
		}, true},
		{"origin without scheme", func(c *mcpserver.Config) { c.AllowedOrigins = []string{"app.example"} }, false},
		{"origin with a path", func(c *mcpserver.Config) { c.AllowedOrigins = []string{"https://app.example/x"} }, false},
		{"origin of another scheme", func(c *mcpserver.Config) { c.AllowedOrigins = []string{"ftp://app.example"} }, false},
		{"null origin", func(c *mcpserver.Config) { c.AllowedOrigins = []string{"null"} }, false},
		{"no session", func(c *mcpserver.Config) { c.MaxSessionsPerUser = 0 }, false},
		{"caps in order", func(c *mcpserver.Config) {
			c.MaxSessionsPerUser, c.MaxSessionsPerPrincipal, c.MaxSessionsPerProject, c.MaxSessions = 1, 1, 1, 1
		}, true},
		{"user cap above the principal's", func(c *mcpserver.Config) { c.MaxSessionsPerUser = c.MaxSessionsPerPrincipal + 1 }, false},
		{"user cap above the project's", func(c *mcpserver.Config) { c.MaxSessionsPerProject = c.MaxSessionsPerUser - 1 }, false},
		{"principal cap above the server's", func(c *mcpserver.Config) { c.MaxSessions = c.MaxSessionsPerPrincipal - 1 }, false},
		{"project cap above the server's", func(c *mcpserver.Config) { c.MaxSessionsPerProject = c.MaxSessions + 1 }, false},
		{"no unused timeout", func(c *mcpserver.Config) { c.UnusedSessionTimeout = 0 }, false},
		{"unused timeout above the timeout", func(c *mcpserver.Config) { c.UnusedSessionTimeout = c.SessionTimeout + time.Second }, false},
		{"checks too rare for revocations", func(c *mcpserver.Config) { c.ListCheck = 6 * time.Second }, false},
		{"public URL", func(c *mcpserver.Config) { c.PublicURL = "https://auditrail.example/" }, true},
		{"public URL with a path", func(c *mcpserver.Config) { c.PublicURL = "https://auditrail.example/base" }, true},
		{"public URL without a scheme", func(c *mcpserver.Config) { c.PublicURL = "auditrail.example" }, false},
		{"public URL with credentials", func(c *mcpserver.Config) { c.PublicURL = "https://u:p@auditrail.example" }, false},
	} {
		cfg := mcpserver.DefaultConfig()
		tc.edit(&cfg)
		if err := cfg.Validate(); (err == nil) != tc.ok || (err != nil && !errors.Is(err, mcpserver.ErrInvalidConfig)) {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
}

// DNS rebinding: a request whose Origin is neither the public URL's
// origin nor an allowed one is refused with 403 and a JSON-RPC error,
// whatever its Host says (a rebound name sends its own); no Origin passes.
func TestOrigin(t *testing.T) {
	cfg := mcpserver.DefaultConfig()
	cfg.AllowedOrigins = []string{"https://app.example"}
	cfg.PublicURL = "https://auditrail.example/"
	f := &fakeRunner{defs: []toolrunner.Definition{countDef}}
	url := serveHTTP(t, f, cfg)
	self := url[:strings.Index(url, "/mcp/")] // http://127.0.0.1:port
	for _, tc := range []struct {
		host, origin string
		status       int
	}{
		{"", "", http.StatusOK},
		{"attacker.example", "", http.StatusOK},
		{"", "https://auditrail.example", http.StatusOK},
		{"", "https://auditrail.example:443", http.StatusOK},
		{"", "https://app.example", http.StatusOK},
		{"", "https://APP.example:443", http.StatusOK},
		// The listener's own address is no public URL.
		{"", self, http.StatusForbidden},
		// A rebound name: Host and Origin agree, and are the attacker's.
		{"attacker.example", "http://attacker.example", http.StatusForbidden},
		{"auditrail.example", "http://auditrail.example", http.StatusForbidden}, // another scheme
		{"", "http://evil.example", http.StatusForbidden},
		{"", "http://evil.example:" + self[strings.LastIndex(self, ":")+1:], http.StatusForbidden},
		{"", "https://app.example:8443", http.StatusForbidden},
		{"", "null", http.StatusForbidden},
	} {
		h := header{}
		if tc.origin != "" {
			h["Origin"] = tc.origin
		}
		if tc.host != "" {
			h["Host"] = tc.host
		}
		resp, body := rawRequest(t, http.MethodPost, url, initializeBody, h)
		if resp.StatusCode != tc.status {
			t.Fatalf("host %q origin %q: %d %s", tc.host, tc.origin, resp.StatusCode, body)
		}
		if tc.status == http.StatusForbidden {
			if _, msg := rpcErrorOf(t, body); !strings.Contains(msg, "origin") {
				t.Fatalf("origin %q: %s", tc.origin, body)
			}
		}
	}
}

// Only an initialize starts a session: a GET, a DELETE or another POST
// without Mcp-Session-Id is refused (400) without listing the tools (no
// access hook is asked); a client's connection lists them once.
func TestNoSessionWithoutInitialize(t *testing.T) {
	f := &fakeRunner{defs: []toolrunner.Definition{countDef}}
	url := serveHTTP(t, f, mcpserver.DefaultConfig())
	for _, tc := range []struct {
		method, body, want string
	}{
		{http.MethodGet, "", "GET requires an Mcp-Session-Id"},
		{http.MethodDelete, "", "DELETE requires an Mcp-Session-Id"},
		{http.MethodPost, `{"jsonrpc":"2.0","id":7,"method":"tools/list"}`, "session id required"},
		{http.MethodPost, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, "session id required"},
		{http.MethodPost, `[{"jsonrpc":"2.0","id":1,"method":"ping"}]`, "session id required"},
		{http.MethodPost, `not json`, "session id required"},
	} {
		h := header{}
		if tc.method == http.MethodGet {
			h["Accept"] = "text/event-stream"
		}
		resp, body := rawRequest(t, tc.method, url, tc.body, h)
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, tc.want) {
			t.Fatalf("%s %s: %d %s", tc.method, tc.body, resp.StatusCode, body)
		}
	}
	f.mu.Lock()
	n := f.visibleCalls
	f.mu.Unlock()
	if n != 0 {
		t.Fatalf("the tools were listed %d times for requests that start no session", n)
	}
	// The SDK's client probes with server/discover (no session) and then
	// initializes: one list.
	if _, err := httpClient(t, url, header{"Authorization": "Bearer good"}, nil); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	n = f.visibleCalls
	f.mu.Unlock()
	if n != 1 {
		t.Fatalf("a connection listed the tools %d times, want 1", n)
	}
}

// An initialize while the access hook is out (the tools cannot be listed)
// is answered 503 with Retry-After, not the SDK's 400.
func TestInitializeDuringOutage(t *testing.T) {
	f := &fakeRunner{defs: []toolrunner.Definition{countDef}, visibleErr: errors.New("access hook: connection refused")}
	url := serveHTTP(t, f, mcpserver.DefaultConfig())
	resp, body := rawRequest(t, http.MethodPost, url, initializeBody, nil)
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("%d %q %s", resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
	if code, msg := rpcErrorOf(t, body); code != -32603 || !strings.Contains(msg, "cannot be listed now") || !strings.Contains(body, `"id":1`) {
		t.Fatalf("body %s", body)
	}
	if _, err := httpClient(t, url, header{"Authorization": "Bearer good"}, nil); err == nil {
		t.Fatal("connected during the outage")
	}
}

// During an access hook outage, the sessions due for a list back off
// (from ListCheck, doubling up to ListRefresh) instead of asking at every
// check, and the failure is logged once for the project; a success ends
// the outage.
func TestListBackoffDuringOutage(t *testing.T) {
	cfg := mcpserver.DefaultConfig()
	cfg.ListCheck, cfg.ListRefresh = 10*time.Millisecond, 160*time.Millisecond
	f := &fakeRunner{defs: []toolrunner.Definition{countDef}, rev: "r1"}
	var logs testenv.SyncBuffer
	url := serveHTTPLog(t, f, cfg, slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	const sessions = 3
	for range sessions {
		if _, err := httpClient(t, url, header{"Authorization": "Bearer good"}, nil); err != nil {
			t.Fatal(err)
		}
	}
	f.mu.Lock()
	f.visibleErr, f.rev, f.visibleCalls = errors.New("access hook down"), "r2", 0
	f.mu.Unlock()
	const window = 800 * time.Millisecond
	time.Sleep(window)
	f.mu.Lock()
	calls := f.visibleCalls
	f.visibleErr = nil
	f.mu.Unlock()
	// Without backoff: a list per session per check (about 80 each). With
	// it: 10+20+40+80+160+160+160... ms apart, 8 each at most.
	if calls == 0 || calls > sessions*8 {
		t.Fatalf("%d lists by %d sessions in %v", calls, sessions, window)
	}
	if n := strings.Count(logs.String(), "level=ERROR msg=\"mcp: tools not listed"); n != 1 {
		t.Fatalf("the outage logged %d errors, want 1:\n%s", n, logs.String())
	}
	testenv.Eventually(t, 5*time.Second, "recovery after the outage", func() bool { return strings.Contains(logs.String(), "tools listed again") })
}

// A session keeps the context of its initialize request, with the
// MCP-Protocol-Version it carried, for its whole life (the SDK derives the
// context of every later message from it), and reads that version to
// choose the HTTP status of an error answer (400 for invalid params from
// 2026-07-28 on, else 200). fasthttp reuses a request's memory for the
// next request on the same connection: the bridge must give the SDK
// copies, or the session answers by whatever version a later request on
// the initialize's connection names.
func TestSessionKeepsItsInitializesProtocolVersion(t *testing.T) {
	f := &fakeRunner{defs: []toolrunner.Definition{countDef}}
	url := serveHTTP(t, f, mcpserver.DefaultConfig())
	resp, body := rawRequest(t, http.MethodPost, url, initializeBody, header{"Mcp-Protocol-Version": "2025-06-18"})
	id := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != http.StatusOK || id == "" {
		t.Fatalf("initialize: %d %s", resp.StatusCode, body)
	}
	// The next request on the initialize's connection (the client keeps
	// it alive), the same headers, another version of the same length:
	// refused before any session, as it names none.
	if resp, body := rawRequest(t, http.MethodPost, url, pingBody, header{"Mcp-Protocol-Version": "2026-07-28"}); resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("a ping without a session: %d %s", resp.StatusCode, body)
	}
	// The session, on a connection of its own, as the initialize said.
	other := &http.Transport{}
	defer other.CloseIdleConnections()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"nope","arguments":{}}}`))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{"Authorization": "Bearer good", "Content-Type": "application/json", "Accept": "application/json, text/event-stream",
		"Mcp-Session-Id": id, "Mcp-Protocol-Version": "2025-06-18"} {
		req.Header.Set(k, v)
	}
	resp, err = (&http.Client{Transport: other}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), `"code":-32602`) {
		t.Fatalf("an unknown tool in a 2025-06-18 session: %d %s (want 200 and the JSON-RPC error: the session read another request's protocol version?)", resp.StatusCode, b)
	}
}
