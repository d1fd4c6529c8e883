package hookproxy

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"

	"github.com/auditrail/auditrail/schemas/hooksapi"
)

// answering is a hook server that answers body to every call.
func answering(t *testing.T, body string) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, body) }))
	t.Cleanup(srv.Close)
	return srv.URL
}

// Access answers in Arcade's shape ({toolkit: {tools: {name: [versions]}}})
// and mixed with the auditrail shape are accepted and applied, for hooks of
// either contract; a malformed one is a failure of the hook.
func TestAccessAnswersInBothShapes(t *testing.T) {
	catalog := map[string]hooksapi.ToolkitInfo{
		"Docs": {Tools: map[string][]hooksapi.VersionInfo{"Read": {{Version: "1.0.0"}}, "Edit": {{Version: "2.0.0"}}}},
		"Mail": {Tools: map[string][]hooksapi.VersionInfo{"Send": {{Version: "1.0.0"}}, "List": {{Version: "1.0.0"}}}},
	}
	const all = "Docs.Edit Docs.Read Mail.List Mail.Send"
	tests := []struct {
		name, answer, want string
		failed             bool
	}{
		{"deny tools", `{"deny":{"Docs":{"tools":{"Edit":[]}},"Mail":{"tools":{"Send":[{"version":"1.0.0"}]}}}}`, "Docs.Read Mail.List", false},
		{"deny: another version is not denied", `{"deny":{"Docs":{"tools":{"Edit":[{"version":"1.0.0"}]}}}}`, all, false},
		{"deny: one of the versions listed", `{"deny":{"Docs":{"tools":{"Edit":[{"version":"1.0.0"},{"version":"2.0.0"}]}}}}`, "Docs.Read Mail.List Mail.Send", false},
		{"deny: versions without version", `{"deny":{"Docs":{"tools":{"Edit":[{"requirements":{}}]}}}}`, "Docs.Read Mail.List Mail.Send", false},
		{"deny a whole toolkit: no tools", `{"deny":{"Mail":{}}}`, "Docs.Edit Docs.Read", false},
		{"deny a whole toolkit: empty tools", `{"deny":{"Mail":{"tools":{}}}}`, "Docs.Edit Docs.Read", false},
		{"deny a whole toolkit: null tools", `{"deny":{"Mail":{"tools":null}}}`, "Docs.Edit Docs.Read", false},
		{"only, Arcade's full version info", `{"only":{"Docs":{"tools":{"Read":[{"version":"1.0.0","requirements":{"secrets":[{"name":"K"}]},"metadata":{"extras":{"a":1}}}]}}}}`, "Docs.Read", false},
		{"only: another version is hidden", `{"only":{"Docs":{"tools":{"Read":[{"version":"9.9.9"}]}}}}`, "", false},
		{"only a whole toolkit", `{"only":{"Mail":{}}}`, "Mail.List Mail.Send", false},
		{"only, shapes mixed", `{"only":{"Docs":["Read"],"Mail":{"tools":{"List":[]}}}}`, "Docs.Read Mail.List", false},
		{"only wins over deny", `{"only":{"Docs":{"tools":{"Read":[]}}},"deny":{"Docs":{}}}`, "Docs.Read", false},
		{"unknown members ignored", `{"deny":{"Docs":{"tools":{"Edit":[]},"note":"x"}},"extra":true}`, "Docs.Read Mail.List Mail.Send", false},
		{"malformed: a number", `{"deny":{"Docs":3}}`, "", true},
		{"malformed: tools not an object", `{"deny":{"Docs":{"tools":["Edit"]}}}`, "", true},
		{"malformed: versions not a list", `{"deny":{"Docs":{"tools":{"Edit":"2.0.0"}}}}`, "", true},
		{"malformed: names not strings", `{"only":{"Docs":[1]}}`, "", true},
	}
	for _, contract := range []Contract{ContractAuditrail, ContractArcade} {
		for _, tc := range tests {
			t.Run(string(contract)+"/"+tc.name, func(t *testing.T) {
				h := allPoints(answering(t, tc.answer), contract)
				p := New(testConfig(), nil)
				defer p.Close()
				d := p.Access(context.Background(), []Hook{h}, "u1", catalog)
				if s := visibleString(d.Visible); s != tc.want {
					t.Errorf("visible %q, want %q", s, tc.want)
				}
				c := d.Calls[0]
				if failed := c.Failure != ""; failed != tc.failed {
					t.Errorf("call %+v, failed %v", c, tc.failed)
				}
				if tc.failed && c.FailureModeApplied != string(FailClosed) {
					t.Errorf("malformed answer: %+v", c)
				}
			})
		}
	}
}

// Pre and post answers in Arcade's shape (override.secrets a list of
// objects merged in order) are applied; denials carry the hook's message.
func TestPrePostAnswersInBothShapes(t *testing.T) {
	tests := []struct {
		name, answer string
		allowed      bool
		kind, msg    string
		inputs       map[string]any
		secrets      map[string]string
		failed       bool
	}{
		{name: "secrets as a list, merged in order", answer: `{"code":"OK","override":{"secrets":[{"API_KEY":"a","DB":"d"},{"API_KEY":"b"}]}}`,
			allowed: true, inputs: map[string]any{"a": 1.0}, secrets: map[string]string{"API_KEY": "b", "DB": "d"}},
		{name: "secrets as an object", answer: `{"code":"OK","override":{"secrets":{"API_KEY":"a"}}}`,
			allowed: true, inputs: map[string]any{"a": 1.0}, secrets: map[string]string{"API_KEY": "a"}},
		{name: "an empty list replaces no secret", answer: `{"code":"OK","override":{"secrets":[]}}`,
			allowed: true, inputs: map[string]any{"a": 1.0}, secrets: map[string]string{}},
		{name: "inputs and secrets", answer: `{"code":"OK","override":{"inputs":{"a":2},"secrets":[{"K":"v"}]}}`,
			allowed: true, inputs: map[string]any{"a": 2.0}, secrets: map[string]string{"K": "v"}},
		{name: "check failed", answer: `{"code":"CHECK_FAILED","error_message":"not on Sundays"}`, kind: KindCheckFailed, msg: "not on Sundays"},
		{name: "rate limited", answer: `{"code":"RATE_LIMIT_EXCEEDED","error_message":"slow down"}`, kind: KindRateLimited, msg: "slow down"},
		{name: "malformed secrets: a string", answer: `{"code":"OK","override":{"secrets":"K=v"}}`, kind: KindCheckFailed, failed: true},
		{name: "malformed secrets: a list of strings", answer: `{"code":"OK","override":{"secrets":["K"]}}`, kind: KindCheckFailed, failed: true},
		{name: "malformed secrets: a value not a string", answer: `{"code":"OK","override":{"secrets":[{"K":1}]}}`, kind: KindCheckFailed, failed: true},
	}
	for _, contract := range []Contract{ContractAuditrail, ContractArcade} {
		for _, tc := range tests {
			t.Run(string(contract)+"/"+tc.name, func(t *testing.T) {
				h := allPoints(answering(t, tc.answer), contract)
				p := New(testConfig(), nil)
				defer p.Close()
				r := p.Pre(context.Background(), []Hook{h}, preReq())
				if r.Allowed != tc.allowed || r.Kind != tc.kind || (tc.msg != "" && r.Message != tc.msg) {
					t.Fatalf("verdict %+v", r.Verdict)
				}
				if (r.Calls[0].Failure != "") != tc.failed {
					t.Fatalf("call %+v", r.Calls[0])
				}
				if !tc.allowed {
					return
				}
				if !reflect.DeepEqual(r.Inputs, tc.inputs) || !reflect.DeepEqual(r.Secrets, tc.secrets) || !r.Calls[0].Overridden {
					t.Fatalf("inputs %v secrets %v overridden %v", r.Inputs, r.Secrets, r.Calls[0].Overridden)
				}
			})
		}
	}
	post := []struct {
		name, answer string
		allowed      bool
		output       any
		kind         string
	}{
		{"output replaced", `{"code":"OK","override":{"output":{"redacted":true}}}`, true, map[string]any{"redacted": true}, ""},
		{"output replaced by a string", `{"code":"OK","override":{"output":"nothing to see"}}`, true, "nothing to see", ""},
		{"no override", `{"code":"OK"}`, true, "raw", ""},
		{"denied", `{"code":"CHECK_FAILED","error_message":"leaks PII"}`, false, nil, KindCheckFailed},
	}
	for _, contract := range []Contract{ContractAuditrail, ContractArcade} {
		for _, tc := range post {
			t.Run(string(contract)+"/post/"+tc.name, func(t *testing.T) {
				h := allPoints(answering(t, tc.answer), contract)
				p := New(testConfig(), nil)
				defer p.Close()
				r := p.Post(context.Background(), []Hook{h}, hooksapi.PostRequest{ExecutionId: "e", Output: "raw", Success: true})
				if r.Allowed != tc.allowed || r.Kind != tc.kind || (tc.allowed && !reflect.DeepEqual(r.Output, tc.output)) {
					t.Fatalf("post %+v output %v", r.Verdict, r.Output)
				}
			})
		}
	}
}
