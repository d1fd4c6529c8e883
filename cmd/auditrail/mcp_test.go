//go:build e2e

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go"

	"github.com/auditrail/auditrail/internal/testenv"
	"github.com/auditrail/auditrail/schemas"
	"github.com/auditrail/auditrail/schemas/openapitest"
)

// bearer adds a credential (and optionally the user a service key acts
// for) to every request of an MCP client.
type bearer struct {
	key, user string
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.key)
	if b.user != "" {
		r.Header.Set("Auditrail-User-Id", b.user)
	}
	return http.DefaultTransport.RoundTrip(r)
}

// mcpConnect opens an MCP session with the SDK's own client over the
// streamable HTTP transport.
func mcpConnect(t *testing.T, ctx context.Context, endpoint string, b bearer, name, version string, changed ...chan<- struct{}) (*mcp.ClientSession, error) {
	t.Helper()
	opts := &mcp.ClientOptions{}
	if len(changed) > 0 {
		opts.ToolListChangedHandler = func(context.Context, *mcp.ToolListChangedRequest) { changed[0] <- struct{}{} }
	}
	c := mcp.NewClient(&mcp.Implementation{Name: name, Version: version}, opts)
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: &http.Client{Transport: b}, MaxRetries: -1}, nil)
	if err == nil {
		t.Cleanup(func() { _ = cs.Close() })
	}
	return cs, err
}

// structured is a tool result's structuredContent (the execute route's
// data).
type structured struct {
	ExecutionID string `json:"execution_id"`
	Success     bool   `json:"success"`
	Output      any    `json:"output"`
	Error       *struct {
		Kind     string `json:"kind"`
		Message  string `json:"message"`
		CanRetry bool   `json:"can_retry"`
	} `json:"error"`
	Authorization *struct {
		Provider string `json:"provider"`
		URL      string `json:"url"`
	} `json:"authorization"`
	Hooks []schemas.HookCall `json:"hooks"`
}

func callTool(t *testing.T, ctx context.Context, cs *mcp.ClientSession, name string, args map[string]any) (*mcp.CallToolResult, structured) {
	t.Helper()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	var s structured
	b, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatalf("%s: structured content %s: %v", name, b, err)
	}
	return res, s
}

func text(res *mcp.CallToolResult) string {
	var out []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			out = append(out, tc.Text)
		}
	}
	return strings.Join(out, "\n")
}

// An MCP client (the SDK's own, streamable HTTP) uses the demo project of
// `dev --demo` as the HTTP API does: the same list, the same pipeline
// (hooks, connections), the same trail, with its name and version recorded.
func TestMCPInDev(t *testing.T) {
	t.Parallel()
	p, boot := devWithKey(t, "--demo")
	out := p.stdout.String()
	key, ids := demoKeyRe.FindStringSubmatch(out), demoIDsRe.FindStringSubmatch(out)
	if key == nil || ids == nil {
		t.Fatalf("demo not printed:\n%s", out)
	}
	org, project, demoKey := ids[1], ids[2], key[1]
	endpoint := "http://" + p.http + "/mcp/v1/orgs/" + org + "/projects/" + project
	projPath := "/api/v1/orgs/" + org + "/projects/" + project
	c := newAPIClient(t, p.http)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	changed := make(chan struct{}, 10)
	cs, err := mcpConnect(t, ctx, endpoint, bearer{key: demoKey}, "mcp-test-client", "9.8.7", changed)
	if err != nil {
		t.Fatalf("initialize: %v", err)
	}
	if ir := cs.InitializeResult(); ir == nil || ir.ServerInfo.Name != "auditrail" || ir.Capabilities.Tools == nil || !ir.Capabilities.Tools.ListChanged {
		t.Fatalf("initialize result: %+v", ir)
	}

	// tools/list is the HTTP list, with schemas and annotations.
	lt, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	httpList := c.call("GET", projPath+"/tools", demoKey, nil)
	var want []string
	for _, it := range httpList.data()["items"].([]any) {
		want = append(want, it.(map[string]any)["fully_qualified_name"].(string))
	}
	tools := map[string]*mcp.Tool{}
	var got []string
	for _, tl := range lt.Tools {
		tools[tl.Name] = tl
		got = append(got, tl.Name)
	}
	slices.Sort(want)
	slices.Sort(got)
	if len(want) < 30 || !slices.Equal(got, want) {
		t.Fatalf("tools/list %v\nHTTP list %v", got, want)
	}
	count := tools["DocumentDbToolkit.CountDocuments"]
	schema, _ := json.Marshal(count.InputSchema)
	var s struct {
		Type       string                    `json:"type"`
		Required   []string                  `json:"required"`
		Properties map[string]map[string]any `json:"properties"`
		Additional bool                      `json:"additionalProperties"`
	}
	_ = json.Unmarshal(schema, &s)
	if s.Type != "object" || !slices.Contains(s.Required, "database_name") || !slices.Contains(s.Required, "collection_name") ||
		s.Properties["database_name"]["type"] != "string" || s.Properties["database_name"]["description"] == "" || s.Additional {
		t.Fatalf("CountDocuments schema: %s", schema)
	}
	if a := count.Annotations; a == nil || !a.ReadOnlyHint || a.DestructiveHint == nil || *a.DestructiveHint {
		t.Fatalf("CountDocuments annotations: %+v", a)
	}
	if a := tools["DocsToolkit.CreateBlankDocument"].Annotations; a == nil || a.ReadOnlyHint {
		t.Fatalf("CreateBlankDocument annotations: %+v", a)
	}
	list, _ := json.Marshal(lt.Tools)
	for _, w := range []string{`"enum":[`, `"default":`, `"minimum":`, `"items":{"type":"string"}`} {
		if !strings.Contains(string(list), w) {
			t.Errorf("no tool schema has %s", w)
		}
	}

	// A tool of each toolkit, against FerretDB and the emulators.
	res, st := callTool(t, ctx, cs, "DocumentDbToolkit.CountDocuments", map[string]any{"database_name": "shop", "collection_name": "orders", "filter_dict": `{"status":"paid"}`})
	if res.IsError || !st.Success || st.Output != 48.0 || text(res) != "48" || st.ExecutionID == "" {
		t.Fatalf("CountDocuments: %s %+v", text(res), st)
	}
	mcpExecution := st.ExecutionID
	for _, tool := range []string{"DocsToolkit.WhoAmI", "MailToolkit.WhoAmI"} {
		if res, st := callTool(t, ctx, cs, tool, map[string]any{}); res.IsError || !st.Success || text(res) == "" {
			t.Fatalf("%s: %s %+v", tool, text(res), st)
		}
	}
	// Input that does not fit: a tool error naming the parameter.
	if res, _ := callTool(t, ctx, cs, "DocumentDbToolkit.CountDocuments", map[string]any{"database_name": "shop"}); !res.IsError ||
		!strings.Contains(text(res), "TOOL_INPUT_INVALID") || !strings.Contains(text(res), "collection_name") {
		t.Fatalf("missing collection_name: %s", text(res))
	}

	// The execution is in the trail; its event names the MCP client. One
	// asked over HTTP beside it names none.
	he := c.call("POST", projPath+"/tools/execute", demoKey, map[string]any{"tool_name": "DocsToolkit.WhoAmI", "input": map[string]any{}})
	httpExecution, _ := he.data()["execution_id"].(string)
	if he.status != 200 || httpExecution == "" {
		t.Fatalf("execute over HTTP: %d %s", he.status, he.raw)
	}
	var execs apiResp
	testenv.Eventually(t, 15*time.Second, func() string { return fmt.Sprintf("MCP execution %s listed: %s", mcpExecution, execs.raw) }, func() bool {
		execs = c.call("GET", projPath+"/tool_executions?limit=100", boot, nil)
		return strings.Contains(string(execs.raw), mcpExecution) && strings.Contains(string(execs.raw), httpExecution)
	})
	ev := executionEvent(t, p.connect(t), org, mcpExecution)
	if ev.Client == nil || *ev.Client != (schemas.ClientInfo{Protocol: "mcp", Name: "mcp-test-client", Version: "9.8.7"}) || ev.UserID != "demo-user" {
		t.Fatalf("execution event: client %+v user %q", ev.Client, ev.UserID)
	}
	// ...and so does its listing; the one asked over HTTP lists none.
	for _, it := range execs.data()["items"].([]any) {
		item := it.(map[string]any)
		client, _ := json.Marshal(item["client"])
		if item["execution_id"] == mcpExecution && string(client) != `{"name":"mcp-test-client","protocol":"mcp","version":"9.8.7"}` {
			t.Fatalf("MCP execution listed with client %s", client)
		}
		if item["execution_id"] == httpExecution && string(client) != "null" {
			t.Fatalf("HTTP execution listed with client %s", client)
		}
	}

	// The same over stdio: `auditrail mcp` proxies the endpoint as the
	// local client, whose name the execution records.
	cmd := exec.Command(binary(t), "mcp", "--url", "http://"+p.http, "--org", org, "--project", project)
	cmd.Env = append(os.Environ(), "AUDITRAIL_KEY="+demoKey)
	stdioChanged := make(chan struct{}, 10)
	stdio, err := mcp.NewClient(&mcp.Implementation{Name: "desktop-app", Version: "0.9"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { stdioChanged <- struct{}{} }}).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("auditrail mcp: %v", err)
	}
	if lt, err := stdio.ListTools(ctx, nil); err != nil || len(lt.Tools) != len(want) {
		t.Fatalf("stdio tools/list: %v, %d tools", err, len(lt.Tools))
	}
	res, st = callTool(t, ctx, stdio, "DocumentDbToolkit.CountDocuments", map[string]any{"database_name": "shop", "collection_name": "orders", "filter_dict": `{"status":"paid"}`})
	if res.IsError || st.Output != 48.0 {
		t.Fatalf("stdio CountDocuments: %s %+v", text(res), st)
	}
	if ev := executionEvent(t, p.connect(t), org, st.ExecutionID); ev.Client == nil || ev.Client.Name != "desktop-app" || ev.Client.Version != "0.9" {
		t.Fatalf("stdio execution's client: %+v", ev.Client)
	}
	stdioExecution := st.ExecutionID
	for _, tool := range []string{"DocsToolkit.WhoAmI", "MailToolkit.WhoAmI"} {
		if res, st := callTool(t, ctx, stdio, tool, map[string]any{}); res.IsError || !st.Success || text(res) == "" {
			t.Fatalf("stdio %s: %s %+v", tool, text(res), st)
		}
	}
	// Listed in tool_executions with the desktop client's name.
	var client []byte
	testenv.Eventually(t, 15*time.Second, func() string {
		return fmt.Sprintf("stdio execution %s listed with the desktop client (%s)", stdioExecution, client)
	}, func() bool {
		execs = c.call("GET", projPath+"/tool_executions?limit=100", boot, nil)
		client = nil
		for _, it := range execs.data()["items"].([]any) {
			if item := it.(map[string]any); item["execution_id"] == stdioExecution {
				client, _ = json.Marshal(item["client"])
			}
		}
		return string(client) == `{"name":"desktop-app","protocol":"mcp","version":"0.9"}`
	})

	// A pre hook that denies: an MCP tool error with the kind and message.
	deny := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path == "/pre" {
			fmt.Fprint(w, `{"code":"CHECK_FAILED","error_message":"no counting on audit day"}`)
			return
		}
		fmt.Fprint(w, `{"code":"OK"}`)
	}))
	defer deny.Close()
	hook := c.call("POST", projPath+"/hooks", boot, map[string]any{"name": "deny", "endpoint": deny.URL, "auth": map[string]any{"type": "bearer", "token": "t"}, "points": map[string]any{"pre": map[string]any{}}})
	if hook.status != 201 {
		t.Fatalf("create hook: %d %s", hook.status, hook.raw)
	}
	res, st = callTool(t, ctx, cs, "DocumentDbToolkit.CountDocuments", map[string]any{"database_name": "shop", "collection_name": "orders"})
	if !res.IsError || st.Error == nil || st.Error.Kind != "HOOK_CHECK_FAILED" || !strings.Contains(text(res), "HOOK_CHECK_FAILED: no counting on audit day") {
		t.Fatalf("denied call: %s %+v", text(res), st)
	}
	// The same denial over stdio: the proxy passes the tool error as it is.
	res, st = callTool(t, ctx, stdio, "DocumentDbToolkit.CountDocuments", map[string]any{"database_name": "shop", "collection_name": "orders"})
	if !res.IsError || st.Error == nil || st.Error.Kind != "HOOK_CHECK_FAILED" || st.ExecutionID == "" || !strings.Contains(text(res), "HOOK_CHECK_FAILED: no counting on audit day") {
		t.Fatalf("stdio denied call: %s %+v", text(res), st)
	}
	c.call("DELETE", projPath+"/hooks/"+hook.data()["id"].(string), boot, nil)

	// A fail-closed hook whose server is down: refused, the failure mode said.
	down := httptest.NewServer(http.NotFoundHandler())
	downURL := down.URL
	down.Close()
	hook = c.call("POST", projPath+"/hooks", boot, map[string]any{"name": "down", "endpoint": downURL, "timeout_ms": 500, "auth": map[string]any{"type": "bearer", "token": "t"},
		"points": map[string]any{"pre": map[string]any{"failure_mode": "fail_closed"}}})
	if hook.status != 201 {
		t.Fatalf("create hook: %d %s", hook.status, hook.raw)
	}
	res, st = callTool(t, ctx, cs, "DocumentDbToolkit.CountDocuments", map[string]any{"database_name": "shop", "collection_name": "orders"})
	if !res.IsError || st.Success || len(st.Hooks) == 0 || st.Hooks[len(st.Hooks)-1].FailureModeApplied != "fail_closed" {
		t.Fatalf("fail-closed outage: %s %+v", text(res), st)
	}
	res, st = callTool(t, ctx, stdio, "DocumentDbToolkit.CountDocuments", map[string]any{"database_name": "shop", "collection_name": "orders"})
	if !res.IsError || st.Success || len(st.Hooks) == 0 || st.Hooks[len(st.Hooks)-1].FailureModeApplied != "fail_closed" {
		t.Fatalf("stdio fail-closed outage: %s %+v", text(res), st)
	}
	c.call("DELETE", projPath+"/hooks/"+hook.data()["id"].(string), boot, nil)

	// An access hook that hides MailToolkit: the open session is told
	// (notifications/tools/list_changed, unasked) and lists it no more.
	hide := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path == "/access" {
			fmt.Fprint(w, `{"deny":{"MailToolkit":{}}}`)
			return
		}
		fmt.Fprint(w, `{"code":"OK"}`)
	}))
	defer hide.Close()
	for len(changed) > 0 {
		<-changed
	}
	for len(stdioChanged) > 0 {
		<-stdioChanged
	}
	hook = c.call("POST", projPath+"/hooks", boot, map[string]any{"name": "hide mail", "endpoint": hide.URL, "auth": map[string]any{"type": "bearer", "token": "t"},
		"points": map[string]any{"access": map[string]any{}}})
	if hook.status != 201 {
		t.Fatalf("create hook: %d %s", hook.status, hook.raw)
	}
	select {
	case <-changed:
	case <-time.After(15 * time.Second):
		t.Fatal("no notifications/tools/list_changed after an access hook was added")
	}
	lt, err = cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tl := range lt.Tools {
		if strings.HasPrefix(tl.Name, "MailToolkit.") {
			t.Fatalf("%s still listed", tl.Name)
		}
	}
	if len(lt.Tools) == 0 || len(lt.Tools) >= len(want) {
		t.Fatalf("%d tools listed with the access hook, %d without", len(lt.Tools), len(want))
	}
	// ...and over stdio: auditrail mcp passes the change on.
	select {
	case <-stdioChanged:
	case <-time.After(15 * time.Second):
		t.Fatal("no notifications/tools/list_changed over stdio after an access hook was added")
	}
	if slt, err := stdio.ListTools(ctx, nil); err != nil || len(slt.Tools) != len(lt.Tools) {
		t.Fatalf("stdio tools/list with the access hook: %v, %d tools (HTTP: %d)", err, len(slt.Tools), len(lt.Tools))
	}
	if err := stdio.Close(); err != nil {
		t.Errorf("auditrail mcp did not end cleanly: %v", err)
	}
	c.call("DELETE", projPath+"/hooks/"+hook.data()["id"].(string), boot, nil)

	// Who acts: a service key names the user in Auditrail-User-Id; a user
	// not connected to Google gets the URL to open.
	svc := c.call("POST", projPath+"/service_keys", boot, map[string]any{"name": "agent"}).data()["key"].(string)
	carol, err := mcpConnect(t, ctx, endpoint, bearer{key: svc, user: "carol"}, "agent", "1")
	if err != nil {
		t.Fatalf("service key for carol: %v", err)
	}
	res, st = callTool(t, ctx, carol, "DocsToolkit.WhoAmI", map[string]any{})
	if !res.IsError || st.Error == nil || st.Error.Kind != "AUTHORIZATION_REQUIRED" || st.Authorization == nil || st.Authorization.URL == "" ||
		!strings.Contains(text(res), "open "+st.Authorization.URL) {
		t.Fatalf("authorization required: %s %+v", text(res), st)
	}
	// The same through `auditrail mcp --user carol` for a desktop client
	// that shows URLs (protocol 2026-07-28: an input-required result): it is
	// asked to open the URL; declined, the tool does not run again.
	cmd = exec.Command(binary(t), "mcp", "--url", "http://"+p.http, "--org", org, "--project", project, "--user", "carol")
	cmd.Env = append(os.Environ(), "AUDITRAIL_KEY="+svc)
	asked := make(chan *mcp.ElicitParams, 2)
	desktop, err := mcp.NewClient(&mcp.Implementation{Name: "desktop-app", Version: "0.9"}, &mcp.ClientOptions{
		Capabilities: &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{URL: &mcp.URLElicitationCapabilities{}}},
		ElicitationHandler: func(_ context.Context, r *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			asked <- r.Params
			return &mcp.ElicitResult{Action: "decline"}, nil
		}}).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("auditrail mcp --user carol: %v", err)
	}
	res, _ = callTool(t, ctx, desktop, "DocsToolkit.WhoAmI", map[string]any{})
	if len(asked) != 1 || !res.IsError || !strings.Contains(text(res), "AUTHORIZATION_REQUIRED: the user did not open the authorization URL") {
		t.Fatalf("stdio authorization: asked %d times, %s", len(asked), text(res))
	}
	if q := <-asked; q.Mode != "url" || !strings.HasPrefix(q.URL, "http://"+p.http+"/") || !strings.Contains(q.Message, "google") {
		t.Fatalf("stdio elicitation %+v", q)
	}
	if err := desktop.Close(); err != nil {
		t.Errorf("auditrail mcp did not end cleanly: %v", err)
	}

	// The attacks: no key, a service key naming nobody, the demo user's key
	// acting for another user, another organization's project; a session
	// used by another credential.
	other := c.call("POST", "/api/v1/orgs", boot, map[string]any{"name": "other"}).data()["id"].(string)
	otherProject := c.call("POST", "/api/v1/orgs/"+other+"/projects", boot, map[string]any{"name": "p"}).data()["id"].(string)
	for _, tc := range []struct {
		name     string
		endpoint string
		b        bearer
		status   int
	}{
		{"no key", endpoint, bearer{}, 401},
		{"service key for nobody", endpoint, bearer{key: svc}, 400},
		{"demo key as another user", endpoint, bearer{key: demoKey, user: "carol"}, 403},
		{"another org's project", "http://" + p.http + "/mcp/v1/orgs/" + other + "/projects/" + otherProject, bearer{key: demoKey}, 403},
		{"service key in another project", "http://" + p.http + "/mcp/v1/orgs/" + other + "/projects/" + otherProject, bearer{key: svc, user: "carol"}, 403},
	} {
		st := postInitialize(t, tc.endpoint, tc.b, "")
		if st != tc.status {
			t.Errorf("%s: %d, want %d", tc.name, st, tc.status)
		}
		if _, err := mcpConnect(t, ctx, tc.endpoint, tc.b, "x", "1"); err == nil {
			t.Errorf("%s: the SDK client connected", tc.name)
		}
	}
	otherEndpoint := "http://" + p.http + "/mcp/v1/orgs/" + other + "/projects/" + otherProject
	for _, tc := range []struct {
		name, method, endpoint, sid string
		b                           bearer
		status                      int
	}{
		{"another credential posts in the demo user's session", "POST", endpoint, cs.ID(), bearer{key: svc, user: "demo-user"}, 403},
		{"another credential reads the demo user's session", "GET", endpoint, cs.ID(), bearer{key: svc, user: "demo-user"}, 403},
		{"another credential ends the demo user's session", "DELETE", endpoint, cs.ID(), bearer{key: svc, user: "demo-user"}, 403},
		{"a page of another origin (DNS rebinding)", "POST+origin", endpoint, "", bearer{key: demoKey}, 403},
		{"a body over the limit", "POST+big", endpoint, "", bearer{key: demoKey}, 413},
	} {
		if st := mcpRequest(t, tc.method, tc.endpoint, tc.b, tc.sid); st != tc.status {
			t.Errorf("%s: %d, want %d", tc.name, st, tc.status)
		}
	}
	if ss, err := cs.ListTools(ctx, nil); err != nil || len(ss.Tools) == 0 {
		t.Fatalf("the demo user's session after the attacks: %v", err)
	}
	// The same credential (the platform admin, acting for the demo user)
	// reusing its session on another project's path: the session is bound
	// to its project.
	admin := bearer{key: boot, user: "demo-user"}
	as, err := mcpConnect(t, ctx, endpoint, admin, "admin", "1")
	if err != nil {
		t.Fatalf("admin session: %v", err)
	}
	if st := mcpRequest(t, "POST", otherEndpoint, admin, as.ID()); st != 403 {
		t.Errorf("a session on another project's path: %d, want 403", st)
	}
	if st := mcpRequest(t, "GET", otherEndpoint, admin, as.ID()); st != 403 {
		t.Errorf("a session's stream on another project's path: %d, want 403", st)
	}
}

// postInitialize posts an initialize request (in session sid when set)
// and returns the status.
func postInitialize(t *testing.T, endpoint string, b bearer, sid string) int {
	t.Helper()
	return mcpRequest(t, "POST", endpoint, b, sid)
}

// mcpRequest sends one request of the streamable transport (in session
// sid when set) and returns the status: POST an initialize (POST+origin:
// from a page of another origin, POST+big: with a body over the limit),
// GET the event stream, DELETE the session.
func mcpRequest(t *testing.T, method, endpoint string, b bearer, sid string) int {
	t.Helper()
	body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}`
	var origin string
	switch method {
	case "POST+origin":
		method, origin = "POST", "http://evil.example"
	case "POST+big":
		return bigPost(t, endpoint, b)
	case "POST":
	default:
		body = ""
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, method, endpoint, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if origin != "" {
		req.Header.Set("Origin", origin)
	}
	if sid != "" {
		req.Header.Set("Mcp-Session-Id", sid)
	}
	var rt http.RoundTripper = b
	if b.key == "" {
		rt = http.DefaultTransport
	}
	resp, err := (&http.Client{Transport: rt}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode == 401 && !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer") {
		t.Errorf("401 without WWW-Authenticate: Bearer")
	}
	// Every answer is one tools.yaml describes.
	openapitest.CheckResponse(t, openapitest.Router(t, "tools.yaml", "http://"+req.URL.Host), req, resp.StatusCode, resp.Header, raw)
	return resp.StatusCode
}

// bigPost announces a body over the limit (3 MiB) and sends none of it:
// the server answers from Content-Length alone. (Sending it races the
// server's early answer: closing a socket with unread data resets it, and
// the client may lose the 413.)
func bigPost(t *testing.T, endpoint string, b bearer) int {
	t.Helper()
	req, _ := http.NewRequest("POST", endpoint, nil)
	conn, err := net.DialTimeout("tcp", req.URL.Host, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: %d\r\n\r\n",
		req.URL.RequestURI(), req.URL.Host, b.key, 3<<20)
	resp, err := http.ReadResponse(bufio.NewReader(conn), req)
	if err != nil {
		t.Fatalf("a body over the limit: %v", err)
	}
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	resp.Body.Close()
	openapitest.CheckResponse(t, openapitest.Router(t, "tools.yaml", "http://"+req.URL.Host), req, resp.StatusCode, resp.Header, raw)
	return resp.StatusCode
}

// executionEvent reads the execution event of id from the org's stream.
func executionEvent(t *testing.T, nc *nats.Conn, org, id string) schemas.ExecutionEvent {
	t.Helper()
	js, err := nc.JetStream()
	if err != nil {
		t.Fatal(err)
	}
	sub, err := js.SubscribeSync(schemas.EventSubject(org, schemas.KindExecution), nats.DeliverAll(), nats.AckNone())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	for {
		m, err := sub.NextMsg(5 * time.Second)
		if err != nil {
			t.Fatalf("execution %s not in the stream: %v", id, err)
		}
		ev, err := schemas.UnmarshalExecutionEvent(m.Data)
		if err != nil {
			t.Fatal(err)
		}
		if ev.ExecutionID == id {
			return ev
		}
	}
}
