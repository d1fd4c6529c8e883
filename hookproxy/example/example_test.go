package example_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/auditrail/auditrail/hookproxy"
	"github.com/auditrail/auditrail/hookproxy/example"
	"github.com/auditrail/auditrail/internal/egress"
	"github.com/auditrail/auditrail/schemas/hooksapi"
)

func tool(tk, name string, domains []string, ops []string, destructive bool, extras map[string]any) hooksapi.Tool {
	md := &hooksapi.ToolMetadata{Classification: &hooksapi.ToolClassification{ServiceDomains: &domains},
		Behavior: &hooksapi.ToolBehavior{Operations: &ops, Destructive: &destructive}}
	if extras != nil {
		md.Extras = &extras
	}
	return hooksapi.Tool{Toolkit: tk, Name: name, Version: "1", Metadata: md}
}

// The reference server, called by the platform's own hook client with
// either contract's request shapes: the same decisions.
func TestReferenceServerPolicies(t *testing.T) {
	for _, c := range []hookproxy.Contract{hookproxy.ContractAuditrail, hookproxy.ContractArcade} {
		t.Run(string(c), func(t *testing.T) { referenceServerPolicies(t, c) })
	}
}

func referenceServerPolicies(t *testing.T, contract hookproxy.Contract) {
	policy, err := example.LoadPolicy("testdata/policy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(example.New(policy, nil).Handler("secret-token"))
	defer srv.Close()
	cfg := hookproxy.DefaultConfig()
	cfg.Egress = egress.AllowLoopback() // the server is on 127.0.0.1
	p := hookproxy.New(cfg, nil)
	h := hookproxy.Hook{ID: "ex", Name: "example", Revision: "1", Endpoint: srv.URL, BearerToken: "secret-token", MaxAttempts: 1, Contract: contract,
		ConsecutiveFailures: 5, OpenFor: time.Second, Points: map[hookproxy.Point]hookproxy.PointConfig{
			hookproxy.Access: {Path: "/access", Timeout: time.Second, FailureMode: hookproxy.FailClosed},
			hookproxy.Pre:    {Path: "/pre", Timeout: time.Second, FailureMode: hookproxy.FailClosed},
			hookproxy.Post:   {Path: "/post", Timeout: time.Second, FailureMode: hookproxy.FailClosed},
		}}
	user := "alice"
	pre := func(tl hooksapi.Tool) hookproxy.PreResult {
		secrets := map[string]bool{"API_KEY": true}
		scopes := []string{"docs"}
		auth := map[string]hooksapi.AuthorizationInfo{"google": {Scopes: &scopes}}
		return p.Pre(context.Background(), []hookproxy.Hook{h}, hooksapi.PreRequest{ExecutionId: "e", Tool: tl, Inputs: map[string]any{},
			Context: hooksapi.Context{UserId: &user, Secrets: &secrets, Authorization: &auth}})
	}
	tests := []struct {
		name string
		tool hooksapi.Tool
		kind string
	}{
		{"read tool", tool("DocsToolkit", "GetDocumentAsDocmd", []string{"documents"}, []string{"read"}, false, nil), ""},
		{"domain in upper case (seeds/002)", tool("DocsToolkit", "GetDocumentMetadata", []string{"DOCUMENTS"}, []string{"read"}, false, nil), ""},
		{"destructive", tool("DocsToolkit", "EditDocument", []string{"documents"}, []string{"read", "update"}, true, nil), hookproxy.KindCheckFailed},
		{"other domain", tool("CrmToolkit", "ListDeals", []string{"crm"}, []string{"read"}, false, nil), hookproxy.KindCheckFailed},
		{"denied tool", tool("MailToolkit", "CreateAndSendEmail", []string{"email"}, []string{"create"}, false, nil), hookproxy.KindCheckFailed},
		{"provider rule", tool("DocsToolkit", "WhoAmI", []string{"documents"}, []string{"read"}, false, map[string]any{"idp": "legacy-sso"}), hookproxy.KindCheckFailed},
		{"create 1", tool("DocsToolkit", "CreateBlankDocument", []string{"documents"}, []string{"create"}, false, nil), ""},
		{"create 2", tool("DocsToolkit", "CreateBlankDocument", []string{"documents"}, []string{"create"}, false, nil), ""},
		{"create 3: rate limited", tool("DocsToolkit", "CreateBlankDocument", []string{"documents"}, []string{"create"}, false, nil), hookproxy.KindRateLimited},
	}
	for _, tc := range tests {
		res := pre(tc.tool)
		if (tc.kind == "") != res.Allowed || res.Kind != tc.kind {
			t.Errorf("%s: %+v", tc.name, res.Verdict)
		}
	}

	// Access: one answer denying what pre would deny.
	catalog := map[string]hooksapi.ToolkitInfo{}
	for _, tc := range tests[:5] {
		info := catalog[tc.tool.Toolkit]
		if info.Tools == nil {
			info.Tools = map[string][]hooksapi.VersionInfo{}
		}
		info.Tools[tc.tool.Name] = []hooksapi.VersionInfo{{Version: "1", Metadata: tc.tool.Metadata,
			Requirements: hooksapi.Requirements{Secrets: &[]string{"API_KEY"}}}}
		catalog[tc.tool.Toolkit] = info
	}
	vis := p.Access(context.Background(), []hookproxy.Hook{h}, user, catalog).Visible
	if !vis["DocsToolkit"]["GetDocumentAsDocmd"] || vis["DocsToolkit"]["EditDocument"] || vis["CrmToolkit"]["ListDeals"] ||
		vis["MailToolkit"]["CreateAndSendEmail"] || vis["DocsToolkit"]["WhoAmI"] {
		t.Fatalf("visible: %v", vis)
	}

	// Post: redaction.
	post := p.Post(context.Background(), []hookproxy.Hook{h}, hooksapi.PostRequest{ExecutionId: "e", Success: true,
		Output: map[string]any{"name": "x", "ssn": "123", "rows": []any{map[string]any{"password": "p", "ok": true}}}})
	out := post.Output.(map[string]any)
	if _, ok := out["ssn"]; ok || out["rows"].([]any)[0].(map[string]any)["password"] != nil || out["name"] != "x" {
		t.Fatalf("redaction: %v", out)
	}

	// A wrong token is a 401: a failure of the hook, so its failure mode.
	h2 := h
	h2.ID, h2.BearerToken = "ex2", "wrong"
	if res := p.Pre(context.Background(), []hookproxy.Hook{h2}, hooksapi.PreRequest{ExecutionId: "e", Tool: tests[0].tool}); res.Allowed ||
		res.Calls[0].HTTPStatus != 401 || res.Calls[0].FailureModeApplied != "fail_closed" {
		t.Fatalf("wrong token: %+v", res)
	}
}

func TestParsePolicy(t *testing.T) {
	for _, bad := range []string{
		"deny_destructiv: true",
		"rate_limits: [{operation: read, max: 0, per: 1m}]",
		"rate_limits: [{operation: read, max: 1}]",
		"provider_rules: [{equals: x}]",
	} {
		if _, err := example.ParsePolicy([]byte(bad)); !errors.Is(err, example.ErrInvalidPolicy) {
			t.Errorf("%q: %v", bad, err)
		}
	}
	if p, err := example.ParsePolicy([]byte("")); err != nil || p.DenyDestructive {
		t.Errorf("empty policy: %+v %v", p, err)
	}
}
