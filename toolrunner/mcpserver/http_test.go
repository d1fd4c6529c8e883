package mcpserver_test

import (
	"context"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/google/uuid"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/auditrail/auditrail/toolrunner"
	"github.com/auditrail/auditrail/toolrunner/mcpserver"
)

// keyScoper accepts the key "good" (acting as u1, or the user named) and
// refuses anything else with 401.
type keyScoper struct{ org, project uuid.UUID }

func (k keyScoper) Scope(c *fiber.Ctx, user string) (toolrunner.Scope, error) {
	if c.Get("Authorization") != "Bearer good" {
		return toolrunner.Scope{}, fiber.NewError(fiber.StatusUnauthorized, "bad key")
	}
	if user == "" {
		user = "u1"
	}
	return toolrunner.Scope{Org: k.org, Project: k.project, UserID: user, Actor: toolrunner.Actor{PrincipalID: "k", PrincipalType: "API_KEY"}}, nil
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
	ctx, cancel := context.WithCancel(context.Background())
	h, err := mcpserver.NewHandler(ctx, cfg, f, keyScoper{}, nil)
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
	return "http://" + ln.Addr().String() + "/mcp/v1/orgs/" + uuid.NewString() + "/projects/" + uuid.NewString()
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
