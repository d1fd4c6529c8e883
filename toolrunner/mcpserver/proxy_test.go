package mcpserver_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/auditrail/auditrail/toolrunner"
	"github.com/auditrail/auditrail/toolrunner/mcpserver"
)

// The proxy (auditrail mcp) serves the upstream endpoint's tools, opens it
// as its own client (whose name the execution records), passes calls and
// errors through and announces a changed list.
func TestProxy(t *testing.T) {
	other := countDef
	other.Name = "Other"
	f := &fakeRunner{defs: []toolrunner.Definition{countDef, other},
		result: toolrunner.Result{ExecutionID: "e", Error: &toolrunner.Error{Kind: toolrunner.KindHookCheck, Message: "no"}}}
	url := serveHTTP(t, f, mcpserver.DefaultConfig())
	ctx := context.Background()
	changed := make(chan struct{}, 10)
	cs := proxyClient(t, mcpserver.HTTPDialer(url, "good", "u7", &http.Client{Transport: transport}), &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} }})

	lt, err := cs.ListTools(ctx, nil)
	if err != nil || len(lt.Tools) != 2 || lt.Tools[0].Annotations == nil || !lt.Tools[0].Annotations.ReadOnlyHint {
		t.Fatalf("list: %v %+v", err, lt)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "Db.Count", Arguments: map[string]any{"collection": "c"}})
	if err != nil || !res.IsError || res.Content[0].(*mcp.TextContent).Text[:len("HOOK_CHECK_FAILED: no")] != "HOOK_CHECK_FAILED: no" {
		t.Fatalf("call: %v %+v", err, res)
	}
	f.mu.Lock()
	if c := f.calls[0]; c.UserID != "u7" || c.Actor.Client == nil || c.Actor.Client.Name != "desktop" || c.Actor.Client.Version != "2" {
		t.Fatalf("upstream scope %+v %+v", c, c.Actor.Client)
	}
	f.defs = f.defs[:1]
	f.mu.Unlock()
	if lt, err := cs.ListTools(ctx, nil); err != nil || len(lt.Tools) != 1 {
		t.Fatalf("list after the change: %v %+v", err, lt)
	}
	select {
	case <-changed:
	case <-time.After(5 * time.Second):
		t.Fatal("no list_changed from the proxy")
	}
}

// AUTHORIZATION_REQUIRED through the proxy: a client that shows URLs is
// asked to open it (an input-required result of protocol 2026-07-28, which
// the SDK's client answers and calls again): after "accept" the tool runs
// once more and its result is final, after "decline" nothing runs again. A
// client that does not show URLs gets the tool error, naming the URL, at
// once.
func TestProxyAsksAuthorization(t *testing.T) {
	ar := &toolrunner.AuthorizationRequest{Provider: "google", URL: "https://auth.example/start?t=3", StateExpiresAt: time.Now().Add(10 * time.Minute)}
	for _, tc := range []struct {
		name   string
		answer string // "": the client does not show URLs
		runs   int
		text   string
	}{
		{"accepted", "accept", 2, ar.URL},
		{"declined", "decline", 1, "did not open the authorization URL of execution e3"},
		{"client without URL elicitation", "", 1, ar.URL},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeRunner{defs: []toolrunner.Definition{countDef}, result: toolrunner.Result{ExecutionID: "e3", Authorization: ar,
				Error: &toolrunner.Error{Kind: toolrunner.KindAuthorization, Message: "connect google", CanRetry: true}}}
			url := serveHTTP(t, f, mcpserver.DefaultConfig())
			ctx := context.Background()
			asked := make(chan *mcp.ElicitParams, 2)
			opts := &mcp.ClientOptions{}
			if tc.answer != "" {
				opts.Capabilities = &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{URL: &mcp.URLElicitationCapabilities{}}}
				opts.ElicitationHandler = func(_ context.Context, r *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
					asked <- r.Params
					return &mcp.ElicitResult{Action: tc.answer}, nil
				}
			}
			cs := proxyClient(t, mcpserver.HTTPDialer(url, "good", "", &http.Client{Transport: transport}), opts)
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "Db.Count", Arguments: map[string]any{"collection": "c"}})
			if err != nil || !res.IsError || !strings.Contains(res.Content[0].(*mcp.TextContent).Text, tc.text) {
				t.Fatalf("call: %v %+v", err, res)
			}
			if len(asked) != min(1, len(tc.answer)) {
				t.Fatalf("asked %d times (answer %q)", len(asked), tc.answer)
			}
			if tc.answer != "" {
				if p := <-asked; p.Mode != "url" || p.URL != ar.URL || p.ElicitationID != "e3" {
					t.Fatalf("elicitation %+v", p)
				}
			}
			f.mu.Lock()
			defer f.mu.Unlock()
			if len(f.calls) != tc.runs {
				t.Fatalf("the tool ran %d times, want %d", len(f.calls), tc.runs)
			}
		})
	}
}

// The proxy opens a new upstream session when the server ended its own
// (idle past SessionTimeout) and sends the call again: the client sees no
// failure.
func TestProxyReconnects(t *testing.T) {
	cfg := mcpserver.DefaultConfig()
	cfg.SessionTimeout = 200 * time.Millisecond
	cfg.UnusedSessionTimeout = cfg.SessionTimeout
	f := &fakeRunner{defs: []toolrunner.Definition{countDef}, result: toolrunner.Result{ExecutionID: "e", Success: true, Output: 1.0}}
	url := serveHTTP(t, f, cfg)
	ctx := context.Background()
	cs := proxyClient(t, mcpserver.HTTPDialer(url, "good", "", &http.Client{Transport: transport}), nil)
	call := func() {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "Db.Count", Arguments: map[string]any{"collection": "c"}})
		if err != nil || res.IsError {
			t.Fatalf("call: %v %+v", err, res)
		}
	}
	call()
	for range 2 {
		time.Sleep(3 * cfg.SessionTimeout) // the upstream session ends
		call()
		if _, err := cs.ListTools(ctx, nil); err != nil {
			t.Fatalf("list: %v", err)
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.calls) != 3 {
		t.Fatalf("%d runs, want 3", len(f.calls))
	}
}

// An upstream failure that is not a JSON-RPC error reaches the client as
// one, with the internal error code (not 0).
func TestProxyUpstreamErrorCode(t *testing.T) {
	ctx := context.Background()
	dial := func(context.Context, *mcp.Implementation, *mcp.ClientOptions) (*mcp.ClientSession, error) {
		return nil, errors.New("connection refused")
	}
	cs := proxyClient(t, dial, nil)
	for _, call := range []func() error{
		func() error { _, err := cs.ListTools(ctx, nil); return err },
		func() error { _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "Db.Count"}); return err },
	} {
		var je *jsonrpc.Error
		if err := call(); !errors.As(err, &je) || je.Code != jsonrpc.CodeInternalError || !strings.Contains(je.Message, "connection refused") {
			t.Fatalf("error %v (%#v)", err, je)
		}
	}
}

// proxyClient serves the proxy of dial over an in-memory transport and
// connects a client ("desktop" 2) with opts; all is closed at the test's end.
func proxyClient(t *testing.T, dial mcpserver.Dialer, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	ctx := context.Background()
	srv, closeUp := mcpserver.NewProxy(dial, &mcp.Implementation{Name: "auditrail", Version: "t"}, nil)
	st, ct := mcp.NewInMemoryTransports()
	ss, err := srv.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "desktop", Version: "2"}, opts).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close(); _ = ss.Wait(); _ = closeUp() })
	return cs
}

// auditrail mcp follows no redirect: an endpoint answering 307 to another
// server does not get the key sent there (the other server sees no
// request at all), and the client gets a JSON-RPC error that says why.
func TestProxyRefusesRedirects(t *testing.T) {
	var seen []string // what the other server received
	var mu sync.Mutex
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Method+" auth="+r.Header.Get("Authorization")+" user="+r.Header.Get(mcpserver.HeaderUserID))
		mu.Unlock()
		w.WriteHeader(http.StatusNotFound)
	}))
	defer other.Close()
	for _, status := range []int{http.StatusTemporaryRedirect, http.StatusPermanentRedirect, http.StatusFound} {
		redirecting := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, other.URL+r.URL.Path+"?t=secret", status)
		}))
		endpoint := redirecting.URL + "/mcp/v1/orgs/o/projects/p"
		cs := proxyClient(t, mcpserver.HTTPDialer(endpoint, "the-users-key", "u7", &http.Client{Transport: transport}), nil)
		for _, call := range []func() error{
			func() error { _, err := cs.ListTools(context.Background(), nil); return err },
			func() error {
				_, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "Db.Count"})
				return err
			},
		} {
			err := call()
			var je *jsonrpc.Error
			if !errors.As(err, &je) || je.Code != jsonrpc.CodeInternalError || !strings.Contains(je.Message, "redirect") ||
				!strings.Contains(je.Message, other.URL) || strings.Contains(je.Message, "secret") {
				t.Fatalf("%d: error %v", status, err)
			}
			t.Logf("%d: %v", status, err)
		}
		redirecting.Close()
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) > 0 {
		t.Fatalf("the redirect target received %q", seen)
	}
}
