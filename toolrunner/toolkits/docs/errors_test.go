package docs

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"google.golang.org/api/googleapi"

	"github.com/auditrail/auditrail/internal/egress"
	"github.com/auditrail/auditrail/internal/oauthflow"
	"github.com/auditrail/auditrail/toolrunner"
)

func TestAPIErrorMapping(t *testing.T) {
	scopeHeader := http.Header{"Www-Authenticate": {`Bearer realm="https://accounts.google.com/", error="insufficient_scope"`}}
	tests := []struct {
		name  string
		err   error
		kind  string
		retry bool
		msg   string
	}{
		{"not found", &googleapi.Error{Code: 404, Message: "Requested entity was not found."}, toolrunner.KindNotFound, false, "GenerateGoogleFilePickerUrl"},
		{"denied", &googleapi.Error{Code: 403, Message: "The caller does not have permission"}, toolrunner.KindNotFound, false, "retry (Google: The caller does not have permission)"},
		{"scope by message", &googleapi.Error{Code: 403, Message: "Request had insufficient authentication scopes."}, toolrunner.KindAuthorizationFailed, true, "reconnect"},
		{"scope by header", &googleapi.Error{Code: 403, Message: "x", Header: scopeHeader}, toolrunner.KindAuthorizationFailed, true, ""},
		{"scope by reason", &googleapi.Error{Code: 403, Errors: []googleapi.ErrorItem{{Reason: "insufficientPermissions"}}}, toolrunner.KindAuthorizationFailed, true, ""},
		{"rate limit by reason", &googleapi.Error{Code: 403, Message: "User rate limit exceeded.", Errors: []googleapi.ErrorItem{{Reason: "userRateLimitExceeded"}}}, toolrunner.KindUpstream, true, "rate"},
		{"unauthenticated", &googleapi.Error{Code: 401, Message: "Request had invalid authentication credentials."}, toolrunner.KindAuthorizationFailed, true, ""},
		{"bad request", &googleapi.Error{Code: 400, Message: "Invalid requests[0].insertText: Index 0 must be..."}, toolrunner.KindInputInvalid, false, "Invalid requests[0].insertText"},
		{"too many", &googleapi.Error{Code: 429, Message: "Quota exceeded"}, toolrunner.KindUpstream, true, "429"},
		{"server", &googleapi.Error{Code: 503, Message: "The service is currently unavailable."}, toolrunner.KindUpstream, true, "503"},
		{"egress", fmt.Errorf("dial: %w", &egress.RefusedError{Class: egress.Loopback}), toolrunner.KindUpstream, false, "egress policy"},
		{"deadline", fmt.Errorf("get: %w", context.DeadlineExceeded), toolrunner.KindTimeout, true, ""},
		{"network", errors.New("dial tcp 10.1.2.3:443: connect: connection refused"), toolrunner.KindUpstream, true, "cannot be reached"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			te := toolrunner.AsError(apiError(tc.err, `document "1abc"`))
			if te.Kind != tc.kind || te.CanRetry != tc.retry || !strings.Contains(te.Message, tc.msg) {
				t.Fatalf("got %+v", te)
			}
			if strings.Contains(te.Message, "10.1.2.3") {
				t.Error("a network address reached the caller")
			}
		})
	}
}

// TestEgressGuard: the api_base_url is chosen by a tenant; with the
// toolkit's own transport (strict guard) a loopback URL is refused, and the
// caller learns no more than that.
func TestEgressGuard(t *testing.T) {
	e := newEnv(t)
	tk, err := New(DefaultConfig()) // egress.Strict(), no HTTPClient
	if err != nil {
		t.Fatal(err)
	}
	defer tk.Close()
	conn, _ := e.conns.Get("u1")
	for _, tc := range []struct {
		base, kind, msg string
	}{
		{e.gs.URL, toolrunner.KindUpstream, "egress policy"},
		{"http://169.254.169.254/computeMetadata", toolrunner.KindUpstream, "egress policy"},
		{"file:///etc/passwd", "CONFIGURATION_ERROR", "not an http(s) URL"},
		{"gopher//x", "CONFIGURATION_ERROR", "not an http(s) URL"},
	} {
		c := conn
		c.APIBaseURL = tc.base
		var tool toolrunner.Tool
		for _, x := range tk.Tools() {
			if x.Definition().Name == "GetDocumentMetadata" {
				tool = x
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := tool.Run(ctx, toolrunner.Call{Inputs: map[string]any{"document_id": "1abc"}, UserID: "u1",
			Connections: map[string]oauthflow.Connection{Provider: c}})
		cancel()
		te := toolrunner.AsError(err)
		if te.Kind != tc.kind || !strings.Contains(te.Message, tc.msg) || regexp.MustCompile(`\d+\.\d+\.\d+\.\d+`).MatchString(te.Message) {
			t.Errorf("%s: %+v", tc.base, te)
		}
	}
}

// TestRevokedToken: a token Google no longer accepts is an authorization
// failure the caller may retry after reconnecting, never a 5xx or a panic.
func TestRevokedToken(t *testing.T) {
	e := newEnv(t)
	id := e.create(t, "Doc", "x")
	e.oauth.RevokeUser("u1")
	te := e.fails(t, "GetDocumentAsDocmd", map[string]any{"document_id": id}, toolrunner.KindAuthorizationFailed)
	if !te.CanRetry {
		t.Errorf("%+v", te)
	}
}
