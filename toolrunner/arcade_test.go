package toolrunner_test

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/auditrail/auditrail/hookproxy"
	"github.com/auditrail/auditrail/internal/oauthflow"
	"github.com/auditrail/auditrail/toolrunner"
)

// A hook of each contract through the runner: the requests have that
// contract's shapes (requirements.authorization[].oauth2 in both), and
// answers in Arcade's shape are applied: deny by {tools: {name: [versions]}},
// override.inputs, override.secrets as a list merged in order,
// override.output, a denial.
func TestHookContractsThroughTheRunner(t *testing.T) {
	type want struct {
		reqSecrets any // requirements.secrets of TestKit.NeedsSecret in the access request
		ctxSecrets any // context.secrets of its pre request
		ctxAuth    any // context.authorization of NeedsAuth's pre request
	}
	tests := []struct {
		contract hookproxy.Contract
		want     want
	}{
		{hookproxy.ContractAuditrail, want{
			reqSecrets: []any{"API_TOKEN"},
			ctxSecrets: map[string]any{"API_TOKEN": true},
			ctxAuth:    map[string]any{"google": map[string]any{"provider_type": "oauth2", "connected": true, "scopes": []any{"drive"}}},
		}},
		{hookproxy.ContractArcade, want{
			reqSecrets: []any{map[string]any{"name": "API_TOKEN"}},
			ctxSecrets: []any{"API_TOKEN"},
			ctxAuth:    []any{map[string]any{"provider_id": "google", "oauth2": map[string]any{"scopes": []any{"drive"}}}},
		}},
	}
	for _, tc := range tests {
		t.Run(string(tc.contract), func(t *testing.T) {
			e := newEnv(t, nil)
			e.src.secrets["API_TOKEN"] = "from-project"
			e.src.conns["u1/google"] = oauthflow.Connection{AccessToken: "ya29.token", Scopes: []string{"drive"}}
			var mu sync.Mutex
			reqs := map[string]map[string]any{} // "path tool" → request
			srv := newHookServer(t, func(path string, body []byte) string {
				var req map[string]any
				if err := json.Unmarshal(body, &req); err != nil {
					t.Errorf("%s: %v", path, err)
				}
				tool := ""
				if tl, ok := req["tool"].(map[string]any); ok {
					tool, _ = tl["name"].(string)
				}
				mu.Lock()
				reqs[path+" "+tool] = req
				mu.Unlock()
				switch {
				case path == "/access":
					return `{"deny":{"TestKit":{"tools":{"Panics":[{"version":"1.0.0"}],"Slow":[],"Upstream":[{"version":"0.1.0"}]}}}}`
				case path == "/pre" && tool == "Echo":
					return `{"code":"OK","override":{"inputs":{"text":"rewritten"}}}`
				case path == "/pre" && tool == "NeedsSecret":
					return `{"code":"OK","override":{"secrets":[{"API_TOKEN":"first"},{"API_TOKEN":"from-hook"}]}}`
				case path == "/pre" && tool == "OptionalSecret":
					return `{"code":"CHECK_FAILED","error_message":"not today"}`
				case path == "/post" && tool == "Echo":
					return `{"code":"OK","override":{"output":["filtered"]}}`
				}
				return `{"code":"OK"}`
			})
			h := hookOf("h-"+string(tc.contract), srv.srv.URL, hookproxy.Access, hookproxy.Pre, hookproxy.Post)
			h.Contract = tc.contract
			e.src.hooks = []hookproxy.Hook{h}
			ctx := context.Background()

			defs, _, err := e.runner.Visible(ctx, e.sc)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, d := range defs {
				names = append(names, d.Name)
			}
			// Panics (its version listed) and Slow (no versions) are denied;
			// Upstream is not (another version listed).
			if got := strings.Join(names, ","); strings.Contains(got, "Panics") || strings.Contains(got, "Slow") || !strings.Contains(got, "Upstream") {
				t.Fatalf("visible: %s", got)
			}
			if res, _ := e.runner.Execute(ctx, e.sc, "TestKit.Slow", nil); res.Success || res.Error.Kind != toolrunner.KindHookCheck {
				t.Fatalf("denied tool ran: %+v", res)
			}

			res, err := e.runner.Execute(ctx, e.sc, "TestKit.Echo", map[string]any{"text": "hello"})
			if err != nil || !res.Success || fmt.Sprint(res.Output) != "[filtered]" {
				t.Fatalf("echo: %+v %v", res, err)
			}
			if c := lastCall.Load().(toolrunner.Call); c.Inputs["text"] != "rewritten" {
				t.Fatalf("the tool saw %v", c.Inputs)
			}
			if res, err = e.runner.Execute(ctx, e.sc, "TestKit.NeedsSecret", nil); err != nil || !res.Success {
				t.Fatalf("secret: %+v %v", res, err)
			}
			if v := lastCall.Load().(toolrunner.Call).Secrets["API_TOKEN"]; v != "from-hook" {
				t.Fatalf("secret %q, want the last of the list", v)
			}
			if res, _ = e.runner.Execute(ctx, e.sc, "TestKit.OptionalSecret", nil); res.Success || res.Error.Kind != toolrunner.KindHookCheck || res.Error.Message != "not today" {
				t.Fatalf("denial: %+v", res)
			}
			if res, _ = e.runner.Execute(ctx, e.sc, "TestKit.NeedsAuth", nil); !res.Success {
				t.Fatalf("needs auth: %+v", res)
			}

			mu.Lock()
			defer mu.Unlock()
			access := reqs["/access "]["toolkits"].(map[string]any)["TestKit"].(map[string]any)["tools"].(map[string]any)
			secretReq := access["NeedsSecret"].([]any)[0].(map[string]any)["requirements"].(map[string]any)["secrets"]
			if !reflect.DeepEqual(secretReq, tc.want.reqSecrets) {
				t.Errorf("requirements.secrets %v, want %v", secretReq, tc.want.reqSecrets)
			}
			authReq := access["NeedsAuth"].([]any)[0].(map[string]any)["requirements"].(map[string]any)["authorization"]
			wantAuthReq := []any{map[string]any{"provider_type": "oauth2", "provider_id": "google", "scopes": []any{"drive"},
				"oauth2": map[string]any{"scopes": []any{"drive"}}}}
			if !reflect.DeepEqual(authReq, wantAuthReq) {
				t.Errorf("requirements.authorization %v, want %v", authReq, wantAuthReq)
			}
			for _, path := range []string{"/pre ", "/post "} {
				if got := reqs[path+"NeedsSecret"]["context"].(map[string]any)["secrets"]; !reflect.DeepEqual(got, tc.want.ctxSecrets) {
					t.Errorf("%s context.secrets %v, want %v", path, got, tc.want.ctxSecrets)
				}
				if got := reqs[path+"NeedsAuth"]["context"].(map[string]any)["authorization"]; !reflect.DeepEqual(got, tc.want.ctxAuth) {
					t.Errorf("%s context.authorization %v, want %v", path, got, tc.want.ctxAuth)
				}
			}
		})
	}
}
