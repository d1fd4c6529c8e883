package toolrunner_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/google/uuid"

	"github.com/auditrail/auditrail/internal/auth"
	"github.com/auditrail/auditrail/internal/httpapi"
	"github.com/auditrail/auditrail/internal/httpx"
	"github.com/auditrail/auditrail/internal/oauthflow"
	"github.com/auditrail/auditrail/schemas/openapitest"
	"github.com/auditrail/auditrail/toolrunner"
)

// allowAll knows a user key ("good", acting as user "caller"), a service
// key ("svc") and the platform admin ("root").
type allowAll struct{}

func (allowAll) Authenticate(_ context.Context, cred string) (auth.Principal, error) {
	switch cred {
	case "good":
		return auth.Principal{ID: "k", Type: auth.TypeAPIKey, UserID: "caller", DisplayName: "laptop"}, nil
	case "svc":
		return auth.Principal{ID: "s1", Type: auth.TypeServiceKey, DisplayName: "agent platform"}, nil
	case "root":
		return auth.Principal{ID: "bootstrap", Type: auth.TypePlatformAdmin, PlatformAdmin: true}, nil
	}
	return auth.Principal{}, auth.ErrUnauthenticated
}

func (allowAll) AuthorizeTools(_ context.Context, _ auth.Principal, _, project uuid.UUID) error {
	if project.String() == "00000000-0000-0000-0000-00000000000f" {
		return auth.ErrForbidden
	}
	return nil
}

func (allowAll) DisplayName(p auth.Principal, _ uuid.UUID) string { return "shown:" + p.ID }

func TestHTTPAPI(t *testing.T) {
	e := newEnv(t, nil)
	app := httpapi.NewApp(nil)
	toolrunner.NewServer(e.runner, allowAll{}, httpx.TrustedProxies{}).Register(app)
	base := "/api/v1/orgs/" + e.sc.Org.String() + "/projects/" + e.sc.Project.String() + "/tools"
	do := func(method, path, key, body string) (int, map[string]any) {
		t.Helper()
		req := httptest.NewRequest(method, path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		resp, err := app.Test(req, -1)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("%s %s: %s", method, path, b)
		}
		if int(m["code"].(float64)) != resp.StatusCode {
			t.Fatalf("envelope code %v, status %d", m["code"], resp.StatusCode)
		}
		return resp.StatusCode, m
	}
	code, m := do("GET", base+"?user_id=u9", "svc", "")
	items := m["data"].(map[string]any)["items"].([]any)
	first := items[0].(map[string]any)
	if code != 200 || len(items) != 8 || first["fully_qualified_name"] != "TestKit.Echo" || first["parameters"] == nil || first["output"] == nil ||
		first["metadata"] == nil || first["requirements"] == nil || first["deprecated"] != false {
		t.Fatalf("list: %d %v", code, first)
	}
	code, m = do("POST", base+"/execute", "good", `{"tool_name":"TestKit.Echo","input":{"text":"hi"}}`)
	data := m["data"].(map[string]any)
	if code != 200 || data["success"] != true || data["tool_name"] != "TestKit.Echo" || data["execution_id"] == "" || data["hooks"] == nil {
		t.Fatalf("execute: %d %v", code, m)
	}
	if out := data["output"].(map[string]any); out["text"] != "hi" || out["n"] != 3.0 {
		t.Fatalf("output %v", out)
	}
	// The answer names the event it recorded.
	req := httptest.NewRequest("POST", base+"/execute", strings.NewReader(`{"tool_name":"TestKit.Echo","input":{"text":"h"}}`))
	req.Header.Set("Authorization", "Bearer good")
	resp, err := app.Test(req, -1)
	if err != nil {
		t.Fatal(err)
	}
	if id := resp.Header.Get(httpapi.HeaderEventID); id == "" || id != e.lastEvent(t).EventID {
		t.Fatalf("%s %q, want the execution event's id %q", httpapi.HeaderEventID, id, e.lastEvent(t).EventID)
	}
	if ev := e.lastEvent(t); ev.UserID != "caller" || ev.PrincipalID != "k" || ev.PrincipalType != auth.TypeAPIKey ||
		ev.DisplayName != "shown:k" || ev.ClientIP != "0.0.0.0" {
		t.Fatalf("default user and principal: %+v", ev)
	}
	// Who acts (CONTRACT.md): a user's key acts as that user only; a service
	// key and the platform admin name the end user, and the record keeps
	// both the principal and the user.
	for _, tc := range []struct {
		key, body       string
		status          int
		msg             string
		user, principal string
	}{
		{"good", `{"tool_name":"TestKit.Echo","input":{"text":"x"},"user_id":"caller"}`, 200, "OK", "caller", "k"},
		{"good", `{"tool_name":"TestKit.Echo","input":{"text":"x"},"user_id":"victim"}`, 403, "acts as user caller only", "", ""},
		{"svc", `{"tool_name":"TestKit.Echo","input":{"text":"x"},"user_id":"end-user-7"}`, 200, "OK", "end-user-7", "s1"},
		{"svc", `{"tool_name":"TestKit.Echo","input":{"text":"x"}}`, 400, "user_id: required", "", ""},
		{"root", `{"tool_name":"TestKit.Echo","input":{"text":"x"},"user_id":"u5"}`, 200, "OK", "u5", "bootstrap"},
		{"svc", `{"tool_name":"TestKit.Echo","input":{"text":"x"},"user_id":"` + strings.Repeat("u", 257) + `"}`, 400, "user_id: at most 256", "", ""},
	} {
		code, m := do("POST", base+"/execute", tc.key, tc.body)
		if code != tc.status || !strings.Contains(m["msg"].(string), tc.msg) {
			t.Fatalf("%s %s: %d %v, want %d %q", tc.key, tc.body, code, m["msg"], tc.status, tc.msg)
		}
		if code != 200 {
			continue
		}
		if ev := e.lastEvent(t); ev.UserID != tc.user || ev.PrincipalID != tc.principal {
			t.Fatalf("%s acting for %s recorded user %q principal %q", tc.key, tc.user, ev.UserID, ev.PrincipalID)
		}
	}
	if code, m := do("GET", base+"?user_id=victim", "good", ""); code != 403 {
		t.Fatalf("listing another user's tools with a user key: %d %v", code, m)
	}
	code, m = do("POST", base+"/execute", "good", `{"tool_name":"TestKit.Upstream","input":{}}`)
	if d := m["data"].(map[string]any); code != 200 || d["success"] != false || d["error"].(map[string]any)["kind"] != "UPSTREAM_ERROR" || d["error"].(map[string]any)["can_retry"] != true {
		t.Fatalf("tool error: %d %v", code, m)
	}
	for _, tc := range []struct {
		method, path, key, body string
		status                  int
		msg                     string
	}{
		{"POST", base + "/execute", "", `{}`, 401, "bearer"},
		{"POST", base + "/execute", "good", `{"tool_name":"TestKit.Nope"}`, 404, "tool_name"},
		{"POST", base + "/execute", "good", `{"tool_name":"TestKit.Echo","input":{"text":1}}`, 400, "input.text"},
		{"POST", base + "/execute", "good", `{"tool_name":"TestKit.Echo","input":{}}`, 400, "input.text"},
		{"POST", base + "/execute", "good", `{"tool_name":"TestKit.Echo","input":{"text":"x","bogus":1}}`, 400, "input.bogus"},
		{"POST", base + "/execute", "good", `{"tool_name":`, 400, "body"},
		{"POST", base + "/execute", "good", `{"tool":"x"}`, 400, "body"},
		{"POST", base + "/execute", "good", `{"input":{}}`, 400, "tool_name"},
		{"GET", "/api/v1/orgs/nope/projects/" + e.sc.Project.String() + "/tools", "good", "", 400, "org_id"},
		{"GET", base + "?user_id=caller&limit=3", "good", "", 400, "limit: unknown parameter"},
		{"GET", base + "?user_id=caller&user_id=caller", "good", "", 400, "user_id: given more than once"},
		{"GET", base + "?user_id=", "svc", "", 400, "user_id"},
		{"GET", "/api/v1/orgs/" + e.sc.Org.String() + "/projects/00000000-0000-0000-0000-00000000000f/tools", "good", "", 403, "not allowed"},
	} {
		code, m := do(tc.method, tc.path, tc.key, tc.body)
		if code != tc.status || !strings.Contains(m["msg"].(string), tc.msg) || m["data"] != nil {
			t.Errorf("%s %s %s: %d %v, want %d naming %s", tc.method, tc.path, tc.body, code, m["msg"], tc.status, tc.msg)
		}
	}
}

// TestHTTPAuthorization: the execute answer carries data.authorization for
// AUTHORIZATION_REQUIRED and only then, as tools.yaml describes it (every
// answer is validated against the OpenAPI description).
func TestHTTPAuthorization(t *testing.T) {
	e := newEnv(t, nil)
	app := httpapi.NewApp(nil)
	toolrunner.NewServer(e.runner, allowAll{}, httpx.TrustedProxies{}).Register(app)
	router := openapitest.Router(t, "tools.yaml", "http://example.com")
	path := "/api/v1/orgs/" + e.sc.Org.String() + "/projects/" + e.sc.Project.String() + "/tools/execute"
	execute := func(tool string) map[string]any {
		t.Helper()
		req := httptest.NewRequest("POST", path, strings.NewReader(`{"tool_name":"`+tool+`"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer good")
		resp, err := app.Test(req, -1)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		route, params, err := router.FindRoute(req)
		if err != nil {
			t.Fatal(err)
		}
		in := &openapi3filter.ResponseValidationInput{
			RequestValidationInput: &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route},
			Status:                 resp.StatusCode, Header: resp.Header, Body: io.NopCloser(bytes.NewReader(raw)),
			Options: &openapi3filter.Options{IncludeResponseStatus: true},
		}
		if err := openapi3filter.ValidateResponse(context.Background(), in); err != nil {
			t.Fatalf("%s: the answer does not match tools.yaml: %v\n%s", tool, err, raw)
		}
		var m map[string]any
		if err := json.Unmarshal(raw, &m); err != nil || resp.StatusCode != 200 {
			t.Fatalf("%s: %d %s", tool, resp.StatusCode, raw)
		}
		return m["data"].(map[string]any)
	}

	// Not connected: AUTHORIZATION_REQUIRED with where to go.
	d := execute("TestKit.NeedsAuth")
	errm, _ := d["error"].(map[string]any)
	a, _ := d["authorization"].(map[string]any)
	if d["success"] != false || errm["kind"] != "AUTHORIZATION_REQUIRED" || errm["can_retry"] != true || a == nil {
		t.Fatalf("not connected: %v", d)
	}
	is := e.src.issued[0]
	exp, err := time.Parse(time.RFC3339Nano, fmt.Sprint(a["state_expires_at"]))
	if a["provider"] != "google" || fmt.Sprint(a["scopes"]) != "[drive]" || a["url"] != is.url || err != nil || !exp.Equal(is.expires) || is.user != "caller" {
		t.Fatalf("authorization %v, issued %+v", a, is)
	}

	// Connected with the scope: the tool gets the token, no authorization.
	e.src.mu.Lock()
	e.src.conns["caller/google"] = oauthflow.Connection{AccessToken: "ya29.caller", Scopes: []string{"docs", "drive", "email"}}
	e.src.mu.Unlock()
	if d := execute("TestKit.NeedsAuth"); d["success"] != true || d["output"] != "ya29.caller" || d["authorization"] != nil {
		t.Fatalf("connected: %v", d)
	}

	// No such provider in the organization: no authorization member.
	e.src.mu.Lock()
	delete(e.src.providers, "microsoft")
	e.src.mu.Unlock()
	d = execute("TestKit.NeedsMore")
	if errm, _ := d["error"].(map[string]any); d["success"] != false || errm["kind"] != "AUTH_PROVIDER_NOT_CONFIGURED" || errm["can_retry"] != false {
		t.Fatalf("no provider: %v", d)
	}
	if _, ok := d["authorization"]; ok {
		t.Fatalf("authorization without AUTHORIZATION_REQUIRED: %v", d)
	}
}
