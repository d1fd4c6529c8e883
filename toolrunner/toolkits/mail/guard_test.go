package mail

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/auditrail/auditrail/internal/oauthflow"
	"github.com/auditrail/auditrail/toolrunner"
)

// TestEgressAndBaseURL: the toolkit's own transport dials through the
// egress guard (strict by default: a loopback api_base_url is refused
// without naming the address); an api_base_url that is not http(s) is a
// configuration error.
func TestEgressAndBaseURL(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		t.Error("a request reached the loopback server")
	}))
	defer srv.Close()
	tk, err := New(DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer tk.Close()
	var listEmails toolrunner.Tool
	for _, x := range tk.Tools() {
		if x.Definition().Name == "ListEmails" {
			listEmails = x
		}
	}
	in, _ := toolrunner.Validate(listEmails.Definition(), map[string]any{})
	call := func(base string) *toolrunner.Error {
		_, err := listEmails.Run(context.Background(), toolrunner.Call{Inputs: in, UserID: "u1",
			Connections: map[string]oauthflow.Connection{Provider: {AccessToken: "tok", APIBaseURL: base}}})
		if err == nil {
			t.Fatalf("%s: no error", base)
		}
		return toolrunner.AsError(err)
	}
	if e := call(srv.URL); e.Kind != toolrunner.KindUpstream || !strings.Contains(e.Message, "egress") || strings.Contains(e.Message, "127.0.0.1") {
		t.Errorf("loopback: %+v", e)
	}
	if e := call("file:///etc/passwd"); e.Kind != "CONFIGURATION_ERROR" {
		t.Errorf("file URL: %+v", e)
	}
	_, err = listEmails.Run(context.Background(), toolrunner.Call{Inputs: in, UserID: "u1"})
	if e := toolrunner.AsError(err); e.Kind != toolrunner.KindAuthorization {
		t.Errorf("no connection: %+v", e)
	}
}

// TestGraphRefusalsAreClear: a Graph that still answers InefficientFilter
// (or any 400) gives the caller a clear input error, a 5xx a retryable
// upstream error: never a raw Graph answer, never a failure of the
// platform.
func TestGraphRefusalsAreClear(t *testing.T) {
	e := newEnv(t)
	answer := `{"error":{"code":"InefficientFilter","message":"The restriction or sort order is too complex for this operation.","innerError":{"request-id":"r"}}}`
	status := 400
	fake := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, answer)
	}))
	defer fake.Close()
	e.setBase("u1", fake.URL+"/v1.0")
	err := e.fails(t, "ListEmailsByProperty", map[string]any{"mail_property": "isRead", "operator": "eq", "value": "true", "sort_by": "importance"}, "TOOL_INPUT_INVALID")
	if !strings.Contains(err.Message, "sort by receivedDateTime or by the filtered property") {
		t.Errorf("%s", err.Message)
	}
	status, answer = 500, `{"error":{"code":"generalException","message":"boom"}}`
	if err := e.fails(t, "ListEmails", nil, "UPSTREAM_ERROR"); !err.CanRetry {
		t.Errorf("%+v", err)
	}
	status, answer = 200, `not json`
	e.fails(t, "ListEmails", nil, "UPSTREAM_ERROR")
}

// TestSearchChecksReadAndCategory: a Graph that ignores KQL's isread: and
// category: (not in its documented list) does not widen SearchEmails'
// answer.
func TestSearchChecksReadAndCategory(t *testing.T) {
	e := newEnv(t)
	fake := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"value":[
			{"id":"a","subject":"read finance","isRead":true,"categories":["Finance"],"sentDateTime":"2026-01-03T00:00:00Z"},
			{"id":"b","subject":"unread finance","isRead":false,"categories":["finance "],"sentDateTime":"2026-01-02T00:00:00Z"},
			{"id":"c","subject":"unread other","isRead":false,"categories":["Financial"],"sentDateTime":"2026-01-04T00:00:00Z"},
			{"id":"d","subject":"unread none","isRead":false,"categories":[],"sentDateTime":"2026-01-01T00:00:00Z"}]}`)
	}))
	defer fake.Close()
	e.setBase("u1", fake.URL+"/v1.0")
	tests := []struct {
		in   map[string]any
		want []string
	}{
		{map[string]any{"is_read": false, "category": "FINANCE"}, []string{"b"}},
		{map[string]any{"is_read": false}, []string{"c", "b", "d"}},
		{map[string]any{"category": "Finance"}, []string{"a", "b"}},
		{map[string]any{"keywords": []string{"x"}}, []string{"c", "a", "b", "d"}},
	}
	for _, tc := range tests {
		if got := ids(emails(t, e.ok(t, "SearchEmails", tc.in))); strings.Join(got, ",") != strings.Join(tc.want, ",") {
			t.Errorf("%v: %v, want %v", tc.in, got, tc.want)
		}
	}
}
