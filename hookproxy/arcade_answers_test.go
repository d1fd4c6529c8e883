package hookproxy_test

// Arcade-shaped answers (public logic-extensions schema 1.1.1-beta) are
// accepted and applied, whatever the hook's contract setting.

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/auditrail/auditrail/hookproxy"
	"github.com/auditrail/auditrail/internal/arcadehook"
)

// fixedArcade is a hook server of contract "arcade" that gives one answer,
// recording the exchanges.
func fixedArcade(t *testing.T, answer string) (hookproxy.Hook, *arcadehook.Recorder) {
	t.Helper()
	rec := &arcadehook.Recorder{}
	srv := httptest.NewServer(rec.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(answer))
	})))
	t.Cleanup(srv.Close)
	pc := hookproxy.PointConfig{Timeout: 5 * time.Second, FailureMode: hookproxy.FailClosed}
	return hookproxy.Hook{ID: "h-fixed", Name: "fixed", Revision: "1", Endpoint: srv.URL, Contract: hookproxy.ContractArcade,
		Points:      map[hookproxy.Point]hookproxy.PointConfig{hookproxy.Access: withPath(pc, "/access"), hookproxy.Pre: withPath(pc, "/pre"), hookproxy.Post: withPath(pc, "/post")},
		BearerToken: arcadeToken, MaxAttempts: 1, ConsecutiveFailures: 100, OpenFor: time.Second}, rec
}

// checkExchanges: the request and the answer of every exchange are valid
// for the Arcade description (so the table's answers are Arcade answers).
func checkExchanges(t *testing.T, rec *arcadehook.Recorder, n int) {
	t.Helper()
	c, err := arcadehook.LoadContract("testdata/arcade/logic_extensions.yaml")
	if err != nil {
		t.Fatal(err)
	}
	exs := rec.Exchanges()
	if len(exs) != n {
		t.Fatalf("%d exchanges, want %d", len(exs), n)
	}
	for _, ex := range exs {
		if err := c.ValidateResponse(ex); err != nil {
			t.Fatal(err)
		}
	}
}

// Arcade-shaped access answers are accepted and applied: only / deny per
// toolkit with tools and versions, a toolkit without tools (or with none)
// is the whole toolkit, a version that is not the tool's names nothing.
// Gmail has Send 1.2.0, Read 1.0.0, Purge 1.0.0; Docs has Create 0.1.0.
func TestArcadeAccessAnswersApplied(t *testing.T) {
	all := []string{"Docs.Create", "Gmail.Purge", "Gmail.Read", "Gmail.Send"}
	for _, tc := range []struct {
		name, answer string
		visible      []string
	}{
		{"neither", `{}`, all},
		{"deny a tool at its version", `{"deny":{"Gmail":{"tools":{"Purge":[{"version":"1.0.0"}]}}}}`, []string{"Docs.Create", "Gmail.Read", "Gmail.Send"}},
		{"deny two tools and a toolkit", `{"deny":{"Gmail":{"tools":{"Purge":[{"version":"1.0.0"}],"Send":[{"version":"1.2.0"}]}},"Docs":{}}}`, []string{"Gmail.Read"}},
		{"deny a toolkit without tools", `{"deny":{"Docs":{}}}`, []string{"Gmail.Purge", "Gmail.Read", "Gmail.Send"}},
		{"deny a toolkit with empty tools", `{"deny":{"Docs":{"tools":{}}}}`, []string{"Gmail.Purge", "Gmail.Read", "Gmail.Send"}},
		{"deny another version", `{"deny":{"Gmail":{"tools":{"Send":[{"version":"9.9.9"}]}}}}`, all},
		{"deny a tool, no versions listed", `{"deny":{"Gmail":{"tools":{"Send":[]}}}}`, []string{"Docs.Create", "Gmail.Purge", "Gmail.Read"}},
		{"deny a tool, versions without version", `{"deny":{"Gmail":{"tools":{"Send":[{}]}}}}`, []string{"Docs.Create", "Gmail.Purge", "Gmail.Read"}},
		{"deny one of the listed versions", `{"deny":{"Gmail":{"tools":{"Send":[{"version":"1.0.0"},{"version":"1.2.0"}]}}}}`, []string{"Docs.Create", "Gmail.Purge", "Gmail.Read"}},
		{"deny an unknown toolkit", `{"deny":{"Slack":{}}}`, all},
		{"only one tool", `{"only":{"Gmail":{"tools":{"Read":[{"version":"1.0.0"}]}}}}`, []string{"Gmail.Read"}},
		{"only a toolkit", `{"only":{"Docs":{}}}`, []string{"Docs.Create"}},
		{"only another version", `{"only":{"Gmail":{"tools":{"Read":[{"version":"2.0.0"}]}}}}`, nil},
		{"only wins over deny", `{"only":{"Gmail":{}},"deny":{"Gmail":{}}}`, []string{"Gmail.Purge", "Gmail.Read", "Gmail.Send"}},
		{"only nothing", `{"only":{}}`, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, rec := fixedArcade(t, tc.answer)
			d := newArcadeProxy(t).Access(context.Background(), []hookproxy.Hook{h}, "bob", catalog(t))
			checkExchanges(t, rec, 1)
			var got []string
			for tk, tools := range d.Visible {
				for tool := range tools {
					got = append(got, tk+"."+tool)
				}
			}
			slices.Sort(got)
			if !slices.Equal(got, tc.visible) {
				t.Fatalf("visible %v, want %v (calls %+v)", got, tc.visible, d.Calls)
			}
			if len(d.Calls) != 1 || d.Calls[0].Failure != "" {
				t.Fatalf("the answer was taken for a failure: %+v", d.Calls)
			}
		})
	}
}

// Arcade-shaped pre and post answers are accepted and applied: denials with
// their codes and messages, override.inputs, override.secrets as an array of
// maps merged in order, override.output of any JSON type.
func TestArcadePrePostAnswersApplied(t *testing.T) {
	for _, tc := range []struct {
		name, answer string
		allowed      bool
		kind, msg    string
		inputs       map[string]any
		secrets      map[string]string
	}{
		{"ok", `{"code":"OK"}`, true, "", "", map[string]any{"to": "a@corp.example", "body": "hi"}, nil},
		{"check failed", `{"code":"CHECK_FAILED","error_message":"no mail to outsiders"}`, false, hookproxy.KindCheckFailed, "no mail to outsiders", nil, nil},
		{"check failed, no message", `{"code":"CHECK_FAILED"}`, false, hookproxy.KindCheckFailed, "denied by hook fixed", nil, nil},
		{"rate limited", `{"code":"RATE_LIMIT_EXCEEDED","error_message":"10 a minute"}`, false, hookproxy.KindRateLimited, "10 a minute", nil, nil},
		{"override inputs", `{"code":"OK","override":{"inputs":{"to":"compliance@corp.example","cc":["audit@corp.example"]}}}`, true, "", "",
			map[string]any{"to": "compliance@corp.example", "cc": []any{"audit@corp.example"}}, nil},
		{"override secrets, merged in order", `{"code":"OK","override":{"secrets":[{"SMTP_PASSWORD":"first","RELAY":"r1"},{"SMTP_PASSWORD":"second"}]}}`, true, "", "",
			map[string]any{"to": "a@corp.example", "body": "hi"}, map[string]string{"SMTP_PASSWORD": "second", "RELAY": "r1"}},
		{"override secrets, empty list", `{"code":"OK","override":{"secrets":[]}}`, true, "", "", map[string]any{"to": "a@corp.example", "body": "hi"}, nil},
		{"override both", `{"code":"OK","override":{"inputs":{"to":"x@corp.example"},"secrets":[{"SMTP_PASSWORD":"v"}]}}`, true, "", "",
			map[string]any{"to": "x@corp.example"}, map[string]string{"SMTP_PASSWORD": "v"}},
	} {
		t.Run("pre "+tc.name, func(t *testing.T) {
			h, rec := fixedArcade(t, tc.answer)
			r := newArcadeProxy(t).Pre(context.Background(), []hookproxy.Hook{h}, preRequest(t))
			checkExchanges(t, rec, 1)
			if r.Allowed != tc.allowed || r.Kind != tc.kind || r.Message != tc.msg {
				t.Fatalf("allowed %v %s %q, want %v %s %q (calls %+v)", r.Allowed, r.Kind, r.Message, tc.allowed, tc.kind, tc.msg, r.Calls)
			}
			if !tc.allowed {
				return
			}
			gi, _ := json.Marshal(r.Inputs)
			wi, _ := json.Marshal(tc.inputs)
			if string(gi) != string(wi) {
				t.Errorf("inputs %s, want %s", gi, wi)
			}
			if len(r.Secrets) != len(tc.secrets) {
				t.Errorf("secrets %v, want %v", r.Secrets, tc.secrets)
			}
			for k, v := range tc.secrets {
				if r.Secrets[k] != v {
					t.Errorf("secret %s = %q, want %q", k, r.Secrets[k], v)
				}
			}
		})
	}
	for _, tc := range []struct {
		name, answer string
		allowed      bool
		kind, msg    string
		output       string // JSON
	}{
		{"ok", `{"code":"OK"}`, true, "", "", `{"id":"m-1","thread":["a","b"]}`},
		{"override with an object", `{"code":"OK","override":{"output":{"id":"m-1"}}}`, true, "", "", `{"id":"m-1"}`},
		{"override with a string", `{"code":"OK","override":{"output":"[redacted]"}}`, true, "", "", `"[redacted]"`},
		{"override with an array", `{"code":"OK","override":{"output":[1,"two"]}}`, true, "", "", `[1,"two"]`},
		{"override with a number", `{"code":"OK","override":{"output":42}}`, true, "", "", `42`},
		{"check failed", `{"code":"CHECK_FAILED","error_message":"output leaks a card number"}`, false, hookproxy.KindCheckFailed, "output leaks a card number", ``},
		{"rate limited", `{"code":"RATE_LIMIT_EXCEEDED"}`, false, hookproxy.KindRateLimited, "rate limit exceeded (hook fixed)", ``},
	} {
		t.Run("post "+tc.name, func(t *testing.T) {
			h, rec := fixedArcade(t, tc.answer)
			r := newArcadeProxy(t).Post(context.Background(), []hookproxy.Hook{h}, postRequest(t, true))
			checkExchanges(t, rec, 1)
			if r.Allowed != tc.allowed || r.Kind != tc.kind || r.Message != tc.msg {
				t.Fatalf("allowed %v %s %q, want %v %s %q (calls %+v)", r.Allowed, r.Kind, r.Message, tc.allowed, tc.kind, tc.msg, r.Calls)
			}
			if out, _ := json.Marshal(r.Output); tc.allowed && string(out) != tc.output {
				t.Fatalf("output %s, want %s", out, tc.output)
			}
		})
	}
}
