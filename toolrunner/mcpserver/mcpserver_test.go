package mcpserver_test

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/auditrail/auditrail/internal/testenv"
	"github.com/auditrail/auditrail/schemas"
	"github.com/auditrail/auditrail/toolrunner"
	"github.com/auditrail/auditrail/toolrunner/mcpserver"
)

func TestMain(m *testing.M) { testenv.MainNoLeaks(m) }

func i64(v int64) *int64 { return &v }

func TestParamSchema(t *testing.T) {
	for _, tc := range []struct {
		p    toolrunner.Param
		want string
	}{
		{toolrunner.Param{Name: "a", Type: toolrunner.TypeString, Description: "d"}, `{"description":"d","type":"string"}`},
		{toolrunner.Param{Name: "a", Type: toolrunner.TypeString, Enum: []string{"x", "y"}, Default: "x"}, `{"default":"x","enum":["x","y"],"type":"string"}`},
		{toolrunner.Param{Name: "a", Type: toolrunner.TypeString, Enum: []string{"x"}, Nullable: true}, `{"enum":["x",null],"type":["string","null"]}`},
		{toolrunner.Param{Name: "a", Type: toolrunner.TypeInteger, Minimum: i64(1), Maximum: i64(100), Default: 10}, `{"default":10,"maximum":100,"minimum":1,"type":"integer"}`},
		{toolrunner.Param{Name: "a", Type: toolrunner.TypeNumber}, `{"type":"number"}`},
		{toolrunner.Param{Name: "a", Type: toolrunner.TypeBoolean, Default: false}, `{"default":false,"type":"boolean"}`},
		{toolrunner.Param{Name: "a", Type: toolrunner.TypeJSON}, `{"type":"object"}`},
		{toolrunner.Param{Name: "a", Type: toolrunner.TypeArrayString}, `{"items":{"type":"string"},"type":"array"}`},
		{toolrunner.Param{Name: "a", Type: toolrunner.TypeArrayJSON, Nullable: true}, `{"items":{"type":"object"},"type":["array","null"]}`},
		{toolrunner.Param{Name: "a", Type: toolrunner.TypeArray}, `{"type":"array"}`},
		{toolrunner.Param{Name: "a", Type: "future<type>"}, `{}`},
	} {
		b, _ := json.Marshal(mcpserver.ParamSchema(tc.p))
		if string(b) != tc.want {
			t.Errorf("%+v:\n got %s\nwant %s", tc.p, b, tc.want)
		}
	}
}

var countDef = toolrunner.Definition{Toolkit: "Db", Name: "Count", Version: "1.0.0", Description: "Counts.",
	Parameters: []toolrunner.Param{
		{Name: "collection", Type: toolrunner.TypeString, Required: true, Description: "Collection."},
		{Name: "limit", Type: toolrunner.TypeInteger, Default: 5, Minimum: i64(1)},
	},
	Metadata: toolrunner.Metadata{Behavior: toolrunner.Behavior{ReadOnly: true, Idempotent: true}}}

func TestTool(t *testing.T) {
	tl := mcpserver.Tool(countDef)
	b, _ := json.Marshal(tl)
	want := `{"_meta":{"io.auditrail/toolkit":"Db","io.auditrail/version":"1.0.0"},` +
		`"annotations":{"destructiveHint":false,"idempotentHint":true,"openWorldHint":false,"readOnlyHint":true},"description":"Counts.",` +
		`"inputSchema":{"additionalProperties":false,"properties":{"collection":{"description":"Collection.","type":"string"},"limit":{"default":5,"minimum":1,"type":"integer"}},"required":["collection"],"type":"object"},` +
		`"name":"Db.Count"}`
	if string(b) != want {
		t.Fatalf("tool:\n got %s\nwant %s", b, want)
	}
	dep := countDef
	dep.Deprecated = true
	dep.Metadata.Behavior = toolrunner.Behavior{Destructive: true, OpenWorld: true}
	tl = mcpserver.Tool(dep)
	if tl.Meta[mcpserver.MetaDeprecated] != true || !strings.HasPrefix(tl.Description, "Deprecated: ") ||
		tl.Annotations.ReadOnlyHint || !*tl.Annotations.DestructiveHint || !*tl.Annotations.OpenWorldHint {
		t.Fatalf("deprecated destructive tool: %+v %+v", tl, tl.Annotations)
	}
}

// fakeRunner lists defs and answers Execute with result (or err),
// recording the scope and input of each call.
type fakeRunner struct {
	mu     sync.Mutex
	defs   []toolrunner.Definition
	result toolrunner.Result
	err    error
	calls  []toolrunner.Scope
	inputs []map[string]any
	rev    string
	// visibleErr fails Visible; visibleCalls counts its calls.
	visibleErr   error
	visibleCalls int
	// gate, when set, holds each Visible until it is closed; gated
	// counts the calls it held.
	gate  chan struct{}
	gated int
	// users are the user ids Visible was asked for, in order.
	users []string
}

func (f *fakeRunner) ListRevision(context.Context, uuid.UUID, uuid.UUID) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.rev, nil
}

func (f *fakeRunner) Visible(_ context.Context, sc toolrunner.Scope) ([]toolrunner.Definition, []schemas.HookCall, error) {
	f.mu.Lock()
	gate := f.gate
	if gate != nil {
		f.gated++
	}
	f.mu.Unlock()
	if gate != nil {
		<-gate
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.visibleCalls++
	f.users = append(f.users, sc.UserID)
	if f.visibleErr != nil {
		return nil, nil, f.visibleErr
	}
	return append([]toolrunner.Definition(nil), f.defs...), nil, nil
}

func (f *fakeRunner) Execute(_ context.Context, sc toolrunner.Scope, name string, in map[string]any) (toolrunner.Result, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls, f.inputs = append(f.calls, sc), append(f.inputs, in)
	if f.err != nil {
		return toolrunner.Result{}, f.err
	}
	r := f.result
	r.ToolName = name
	return r, nil
}

func connect(t *testing.T, f *fakeRunner, changed chan<- struct{}) *mcp.ClientSession {
	t.Helper()
	ctx := context.Background()
	sc := toolrunner.Scope{Org: uuid.New(), Project: uuid.New(), UserID: "u1", Actor: toolrunner.Actor{PrincipalID: "k1", PrincipalType: "API_KEY"}}
	srv, err := mcpserver.NewServer(ctx, f, sc, nil, &mcp.Implementation{Name: "auditrail", Version: "t"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	st, ct := mcp.NewInMemoryTransports()
	ss, err := srv.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	opts := &mcp.ClientOptions{}
	if changed != nil {
		opts.ToolListChangedHandler = func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} }
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test-client", Version: "1.2.3"}, opts).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close(); _ = ss.Wait() })
	return cs
}

// tools/list follows what the runner lists now, and a change is announced
// with notifications/tools/list_changed.
func TestListFollowsRunner(t *testing.T) {
	other := countDef
	other.Name = "Other"
	f := &fakeRunner{defs: []toolrunner.Definition{countDef, other}}
	changed := make(chan struct{}, 10)
	cs := connect(t, f, changed)
	names := func() []string {
		lt, err := cs.ListTools(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, tl := range lt.Tools {
			out = append(out, tl.Name)
		}
		return out
	}
	if got := names(); !reflect.DeepEqual(got, []string{"Db.Count", "Db.Other"}) {
		t.Fatalf("list %v", got)
	}
	f.mu.Lock()
	f.defs = f.defs[:1] // a hook now hides Other
	f.mu.Unlock()
	if got := names(); !reflect.DeepEqual(got, []string{"Db.Count"}) {
		t.Fatalf("after the change: %v", got)
	}
	select {
	case <-changed:
	case <-time.After(5 * time.Second):
		t.Fatal("no notifications/tools/list_changed")
	}
	// The hidden tool is unknown to the session now: a protocol error.
	if _, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "Db.Other"}); err == nil || !strings.Contains(err.Error(), "unknown tool") {
		t.Fatalf("hidden tool called: %v", err)
	}
}

func TestCall(t *testing.T) {
	expires := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name    string
		result  toolrunner.Result
		err     error
		args    any
		isError bool
		text    []string
	}{
		{name: "success, JSON output", result: toolrunner.Result{ExecutionID: "e1", Success: true, Output: map[string]any{"n": 48.0}},
			args: map[string]any{"collection": "orders"}, text: []string{`{"n":48}`}},
		{name: "success, text output", result: toolrunner.Result{ExecutionID: "e1", Success: true, Output: "hello"},
			args: map[string]any{"collection": "orders"}, text: []string{"hello"}},
		{name: "hook denial", result: toolrunner.Result{ExecutionID: "e2", Error: &toolrunner.Error{Kind: toolrunner.KindHookCheck, Message: "not today"}},
			args: map[string]any{"collection": "orders"}, isError: true, text: []string{"HOOK_CHECK_FAILED: not today", "retrying the same call will fail"}},
		{name: "rate limited", result: toolrunner.Result{ExecutionID: "e3", Error: &toolrunner.Error{Kind: toolrunner.KindHookRateLimits, Message: "slow down", CanRetry: true}},
			args: map[string]any{"collection": "orders"}, isError: true, text: []string{"HOOK_RATE_LIMITED: slow down", "a retry may succeed"}},
		{name: "authorization required", result: toolrunner.Result{ExecutionID: "e4",
			Error:         &toolrunner.Error{Kind: toolrunner.KindAuthorization, Message: "connect google", CanRetry: true},
			Authorization: &toolrunner.AuthorizationRequest{Provider: "google", Scopes: []string{"docs"}, URL: "https://x.example/start?t=1", StateExpiresAt: expires}},
			args: map[string]any{"collection": "orders"}, isError: true,
			text: []string{"AUTHORIZATION_REQUIRED: connect google", "authorize google (scopes: docs): open https://x.example/start?t=1 before 2026-11-26T12:00:00Z, then call the tool again"}},
		{name: "invalid input", err: fmt.Errorf("%w: limit: want an integer", toolrunner.ErrInvalidInput),
			args: map[string]any{"collection": "orders", "limit": "x"}, isError: true, text: []string{"TOOL_INPUT_INVALID: limit: want an integer"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeRunner{defs: []toolrunner.Definition{countDef}, result: tc.result, err: tc.err}
			cs := connect(t, f, nil)
			res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "Db.Count", Arguments: tc.args})
			if err != nil {
				t.Fatal(err)
			}
			var text string
			for _, c := range res.Content {
				text += c.(*mcp.TextContent).Text
			}
			if res.IsError != tc.isError {
				t.Fatalf("isError %v: %s", res.IsError, text)
			}
			for _, w := range tc.text {
				if !strings.Contains(text, w) {
					t.Errorf("text %q lacks %q", text, w)
				}
			}
			sc, _ := json.Marshal(res.StructuredContent)
			if tc.err == nil && !strings.Contains(string(sc), `"execution_id":"`+tc.result.ExecutionID+`"`) {
				t.Errorf("structured content %s", sc)
			}
			if tc.result.Error != nil && !strings.Contains(string(sc), `"kind":"`+tc.result.Error.Kind+`"`) {
				t.Errorf("structured content %s lacks the kind", sc)
			}
			f.mu.Lock()
			defer f.mu.Unlock()
			if len(f.calls) != 1 || f.calls[0].UserID != "u1" ||
				!reflect.DeepEqual(f.calls[0].Actor.Client, &schemas.ClientInfo{Protocol: "mcp", Name: "test-client", Version: "1.2.3"}) ||
				f.inputs[0]["collection"] != "orders" {
				t.Fatalf("runner called with %+v %v", f.calls, f.inputs)
			}
		})
	}
}

// Arguments that are not an object are a tool error; nothing runs.
func TestCallArgumentsNotAnObject(t *testing.T) {
	f := &fakeRunner{defs: []toolrunner.Definition{countDef}}
	cs := connect(t, f, nil)
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "Db.Count", Arguments: []int{1}})
	if err != nil {
		t.Fatal(err)
	}
	if !res.IsError || len(f.calls) != 0 {
		t.Fatalf("isError %v, calls %d", res.IsError, len(f.calls))
	}
}
