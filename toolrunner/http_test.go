package toolrunner_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/auditrail/auditrail/internal/auth"
	"github.com/auditrail/auditrail/internal/httpapi"
	"github.com/auditrail/auditrail/toolrunner"
)

type allowAll struct{}

func (allowAll) Authenticate(_ context.Context, cred string) (auth.Principal, error) {
	if cred != "good" {
		return auth.Principal{}, auth.ErrUnauthenticated
	}
	return auth.Principal{ID: "k", UserID: "caller"}, nil
}

func (allowAll) AuthorizeRead(_ context.Context, _ auth.Principal, _ uuid.UUID, project *uuid.UUID) error {
	if project == nil || project.String() == "00000000-0000-0000-0000-00000000000f" {
		return auth.ErrForbidden
	}
	return nil
}

func TestHTTPAPI(t *testing.T) {
	e := newEnv(t, nil)
	app := httpapi.NewApp(nil)
	toolrunner.NewServer(e.runner, allowAll{}).Register(app)
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
	code, m := do("GET", base+"?user_id=u9", "good", "")
	items := m["data"].(map[string]any)["items"].([]any)
	first := items[0].(map[string]any)
	if code != 200 || len(items) != 6 || first["fully_qualified_name"] != "TestKit.Echo" || first["parameters"] == nil || first["output"] == nil ||
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
	if ev := e.lastEvent(t); ev.UserID != "caller" {
		t.Fatalf("default user: %q", ev.UserID)
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
		{"GET", "/api/v1/orgs/" + e.sc.Org.String() + "/projects/00000000-0000-0000-0000-00000000000f/tools", "good", "", 403, "not allowed"},
	} {
		code, m := do(tc.method, tc.path, tc.key, tc.body)
		if code != tc.status || !strings.Contains(m["msg"].(string), tc.msg) || m["data"] != nil {
			t.Errorf("%s %s %s: %d %v, want %d naming %s", tc.method, tc.path, tc.body, code, m["msg"], tc.status, tc.msg)
		}
	}
}
