package mcpserver_test

import (
	"context"
	"net/http"
	"testing"
	"time"

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
	srv, closeUp := mcpserver.NewProxy(mcpserver.HTTPDialer(url, "good", "u7", &http.Client{Transport: transport}), &mcp.Implementation{Name: "auditrail", Version: "t"}, nil)
	st, ct := mcp.NewInMemoryTransports()
	ss, err := srv.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	changed := make(chan struct{}, 10)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "desktop", Version: "2"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} }}).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cs.Close(); _ = ss.Wait(); _ = closeUp() }()

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
