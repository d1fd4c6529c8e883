package toolrunner_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/auditrail/auditrail/hookproxy"
	"github.com/auditrail/auditrail/internal/auth"
	"github.com/auditrail/auditrail/internal/oauthflow"
	"github.com/auditrail/auditrail/toolrunner"
)

type hookAuth struct {
	connected bool
	scopes    []string // nil: none reported
}

// TestAuthorization: a tool needing a provider runs only with a usable
// connection holding its scopes; otherwise the answer says how the user
// grants them, the hooks were told the user is not connected, and neither
// the event nor a log line carries the authorization URL.
func TestAuthorization(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	pre := newHookServer(t, func(string, []byte) string { return `{"code":"OK"}` })
	e.src.hooks = []hookproxy.Hook{hookOf("h", pre.srv.URL, hookproxy.Pre)}
	full := func(scopes ...string) oauthflow.Connection {
		return oauthflow.Connection{AccessToken: "tok-" + strings.Join(scopes, "-"), Scopes: scopes}
	}
	unreachable := errors.New(`refresh: Post "https://oauth2.idp.test/token?refresh_token=rt-secret": dial tcp 127.0.0.1:9: connect: connection refused`)

	tests := []struct {
		name, user, tool string
		setup            func(s *sources)
		kind             string // "" for success
		retry            bool
		// the authorization asked for: provider, the missing scopes and
		// the scopes passed to AuthorizationURL.
		provider            string
		missing, asked      []string
		hooks               map[string]hookAuth
		connCalls, statuses int64
		msg                 string
	}{
		{name: "not connected", user: "u-none", tool: "TestKit.NeedsAuth",
			kind: toolrunner.KindAuthorization, retry: true, provider: "google", missing: []string{"drive"}, asked: []string{"drive"},
			hooks: map[string]hookAuth{"google": {false, nil}}, connCalls: 1, statuses: 1, msg: "has not connected google"},
		{name: "broken connection", user: "u-broken", tool: "TestKit.NeedsAuth",
			setup: func(s *sources) { s.broken["u-broken/google"] = []string{"drive"} },
			kind:  toolrunner.KindAuthorization, retry: true, provider: "google", missing: []string{"drive"}, asked: []string{"drive"},
			hooks: map[string]hookAuth{"google": {false, []string{"drive"}}}, connCalls: 1, statuses: 1},
		{name: "scope missing", user: "u-drive", tool: "TestKit.NeedsMore",
			setup: func(s *sources) {
				s.conns["u-drive/google"] = full("drive")
				s.conns["u-drive/microsoft"] = full("Mail.Read")
			},
			kind: toolrunner.KindAuthorization, retry: true, provider: "google", missing: []string{"docs"}, asked: []string{"docs", "drive"},
			hooks:     map[string]hookAuth{"google": {false, []string{"drive"}}, "microsoft": {true, []string{"Mail.Read"}}},
			connCalls: 2, msg: "has not granted google the scopes docs"},
		{name: "second provider not connected", user: "u-google", tool: "TestKit.NeedsMore",
			setup: func(s *sources) { s.conns["u-google/google"] = full("docs", "drive") },
			kind:  toolrunner.KindAuthorization, retry: true, provider: "microsoft", missing: []string{"Mail.Read"}, asked: []string{"Mail.Read"},
			hooks:     map[string]hookAuth{"google": {true, []string{"docs", "drive"}}, "microsoft": {false, nil}},
			connCalls: 2, statuses: 1},
		{name: "connected with every scope", user: "u-full", tool: "TestKit.NeedsMore",
			setup: func(s *sources) {
				s.conns["u-full/google"] = full("docs", "drive", "openid")
				s.conns["u-full/microsoft"] = full("Mail.Read")
			},
			hooks:     map[string]hookAuth{"google": {true, []string{"docs", "drive", "openid"}}, "microsoft": {true, []string{"Mail.Read"}}},
			connCalls: 2},
		{name: "no such provider", user: "u-none", tool: "TestKit.NeedsAuth",
			setup: func(s *sources) { delete(s.providers, "google") },
			kind:  toolrunner.KindAuthProviderNotConfigured, hooks: map[string]hookAuth{"google": {false, nil}}, connCalls: 1, statuses: 1,
			msg: "has no auth provider google"},
		{name: "connection source says no provider", user: "u-none", tool: "TestKit.NeedsAuth",
			setup: func(s *sources) { s.connErr = fmt.Errorf("org: %w", oauthflow.ErrNoProvider) },
			kind:  toolrunner.KindAuthProviderNotConfigured, hooks: map[string]hookAuth{"google": {false, nil}}, connCalls: 1, statuses: 1,
			msg: "auth_providers"},
		{name: "provider unreachable during a refresh", user: "u-exp", tool: "TestKit.NeedsAuth",
			setup: func(s *sources) {
				s.conns["u-exp/google"] = full("drive")
				s.connErr = unreachable
			},
			kind: toolrunner.KindAuthorizationFailed, retry: true,
			hooks: map[string]hookAuth{"google": {false, []string{"drive"}}}, connCalls: 1, statuses: 1, msg: "connection refused"},
		{name: "authorization URL cannot be issued", user: "u-none", tool: "TestKit.NeedsAuth",
			setup: func(s *sources) { s.urlErr = errors.New("kv: nats: timeout") },
			kind:  toolrunner.KindAuthorizationFailed, retry: true, hooks: map[string]hookAuth{"google": {false, nil}}, connCalls: 1, statuses: 1,
			msg: "nats: timeout"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e.src.mu.Lock()
			e.src.conns, e.src.broken, e.src.issued = map[string]oauthflow.Connection{}, map[string][]string{}, nil
			e.src.providers = map[string]bool{"google": true, "microsoft": true}
			e.src.connErr, e.src.urlErr = nil, nil
			if tc.setup != nil {
				tc.setup(e.src)
			}
			e.src.mu.Unlock()
			e.src.connCalls.Store(0)
			e.src.statusCalls.Store(0)
			lastCall.Store(toolrunner.Call{})
			sc := e.sc
			sc.UserID = tc.user

			res, err := e.runner.Execute(ctx, sc, tc.tool, nil)
			if err != nil {
				t.Fatal(err)
			}
			if got := e.src.connCalls.Load(); got != tc.connCalls {
				t.Errorf("Connection called %d times, want %d (once per provider)", got, tc.connCalls)
			}
			if got := e.src.statusCalls.Load(); got != tc.statuses {
				t.Errorf("ConnectionStatus called %d times, want %d", got, tc.statuses)
			}

			// What the pre hook was told.
			var preReq struct {
				Context struct {
					Authorization map[string]struct {
						ProviderType string    `json:"provider_type"`
						Connected    *bool     `json:"connected"`
						Scopes       *[]string `json:"scopes"`
					} `json:"authorization"`
				} `json:"context"`
			}
			body := <-pre.bodies
			if err := json.Unmarshal(body, &preReq); err != nil {
				t.Fatal(err)
			}
			if len(preReq.Context.Authorization) != len(tc.hooks) {
				t.Errorf("hook context.authorization %s, want %v", body, tc.hooks)
			}
			for p, want := range tc.hooks {
				got := preReq.Context.Authorization[p]
				if got.Connected == nil || *got.Connected != want.connected || got.ProviderType != "oauth2" ||
					(want.scopes == nil) != (got.Scopes == nil) || (got.Scopes != nil && !slices.Equal(*got.Scopes, want.scopes)) {
					t.Errorf("hook context.authorization.%s = %s, want %+v", p, body, want)
				}
			}
			if strings.Contains(string(body), "tok-") {
				t.Errorf("a token reached the hook: %s", body)
			}

			e.src.mu.Lock()
			issued := slices.Clone(e.src.issued)
			e.src.mu.Unlock()
			raw := e.lastEventRaw(t)
			ev := e.lastEvent(t)
			if tc.kind == "" {
				call := lastCall.Load().(toolrunner.Call)
				if !res.Success || res.Error != nil || res.Authorization != nil || res.Output != 2 || len(issued) != 0 {
					t.Fatalf("result %+v, %d URLs issued", res, len(issued))
				}
				if call.Tokens["google"] != "tok-docs-drive-openid" || call.Tokens["microsoft"] != "tok-Mail.Read" ||
					!slices.Equal(call.Connections["google"].Scopes, []string{"docs", "drive", "openid"}) {
					t.Fatalf("the tool got %+v", call)
				}
				if !ev.Success || ev.ErrorKind != "" || strings.Contains(string(raw), "tok-") {
					t.Fatalf("event %s", raw)
				}
				return
			}
			if res.Success || res.Error == nil || res.Error.Kind != tc.kind || res.Error.CanRetry != tc.retry || !strings.Contains(res.Error.Message, tc.msg) {
				t.Fatalf("result error %+v, want %s (retry %v) saying %q", res.Error, tc.kind, tc.retry, tc.msg)
			}
			if lastCall.Load().(toolrunner.Call).Inputs != nil || res.Output != nil {
				t.Fatal("the tool ran")
			}
			if ev.Success || ev.ErrorKind != tc.kind || ev.ExecutionCode != tc.kind || ev.ExecutionError != res.Error.Message || ev.ExecutionID != res.ExecutionID {
				t.Fatalf("event %+v", ev)
			}
			for _, leak := range []string{"://", "rt-secret", "tok-"} {
				if strings.Contains(res.Error.Message, leak) || strings.Contains(string(raw), leak) {
					t.Errorf("%q in the message %q or the event %s", leak, res.Error.Message, raw)
				}
			}
			if tc.kind != toolrunner.KindAuthorization {
				if res.Authorization != nil || len(issued) > 0 && tc.kind != toolrunner.KindAuthorizationFailed {
					t.Fatalf("authorization %+v, issued %v", res.Authorization, issued)
				}
				return
			}
			a := res.Authorization
			if len(issued) != 1 || a == nil {
				t.Fatalf("authorization %+v, issued %v", a, issued)
			}
			is := issued[0]
			if a.Provider != tc.provider || !slices.Equal(a.Scopes, tc.missing) || a.URL != is.url || !a.StateExpiresAt.Equal(is.expires) ||
				is.user != tc.user || is.provider != tc.provider || !slices.Equal(is.scopes, tc.asked) {
				t.Fatalf("authorization %+v from %+v, want provider %s missing %v asked %v", a, is, tc.provider, tc.missing, tc.asked)
			}
			if strings.Contains(string(raw), is.nonce) || strings.Contains(e.logs.String(), is.nonce) {
				t.Fatalf("the state of the authorization URL is in the event or the log:\n%s\n%s", raw, e.logs.String())
			}
		})
	}
	if strings.Contains(e.logs.String(), "rt-secret") || strings.Contains(e.logs.String(), "://") {
		t.Fatalf("a URL in the log: %s", e.logs.String())
	}
	if !strings.Contains(e.logs.String(), "connection unusable") {
		t.Fatalf("the unreachable provider was not logged: %s", e.logs.String())
	}
}

// TestAuthorizationLinkByPrincipal: the link of an AUTHORIZATION_REQUIRED
// answer is the user's own (it needs the user's platform session) unless a
// service key asked (an application acting for its end users) or the
// platform itself.
func TestAuthorizationLinkByPrincipal(t *testing.T) {
	e := newEnv(t, nil)
	tests := []struct {
		principalType string
		app           bool
	}{
		{auth.TypeAPIKey, false},
		{auth.TypeAccount, false},
		{auth.TypePlatformAdmin, false},
		{auth.TypeServiceKey, true},
		{auth.TypeSystem, true},
	}
	for _, tc := range tests {
		t.Run(tc.principalType, func(t *testing.T) {
			e.src.mu.Lock()
			e.src.issued = nil
			e.src.mu.Unlock()
			sc := e.sc
			sc.UserID = "u-none"
			sc.Actor = toolrunner.Actor{PrincipalID: "p", PrincipalType: tc.principalType}
			res, err := e.runner.Execute(context.Background(), sc, "TestKit.NeedsAuth", nil)
			if err != nil || res.Authorization == nil {
				t.Fatalf("%+v %v", res, err)
			}
			e.src.mu.Lock()
			defer e.src.mu.Unlock()
			if len(e.src.issued) != 1 || e.src.issued[0].app != tc.app || e.src.issued[0].url != res.Authorization.URL {
				t.Fatalf("issued %+v, want app %v", e.src.issued, tc.app)
			}
		})
	}
}

// TestAuthorizationAfterPreHook: a pre hook's denial wins over asking for
// authorization, and no authorization URL (a state) is issued for it.
func TestAuthorizationAfterPreHook(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	deny := newHookServer(t, func(string, []byte) string { return `{"code":"CHECK_FAILED","error_message":"not for interns"}` })
	e.src.hooks = []hookproxy.Hook{hookOf("d", deny.srv.URL, hookproxy.Pre)}
	res, err := e.runner.Execute(ctx, e.sc, "TestKit.NeedsAuth", nil)
	if err != nil || res.Success || res.Error.Kind != toolrunner.KindHookCheck || res.Authorization != nil {
		t.Fatalf("%+v %v", res, err)
	}
	var req map[string]any
	_ = json.Unmarshal(<-deny.bodies, &req)
	if c := req["context"].(map[string]any)["authorization"].(map[string]any)["google"].(map[string]any); c["connected"] != false {
		t.Fatalf("hook context %v", c)
	}
	if len(e.src.issued) != 0 {
		t.Fatalf("an authorization URL was issued for a refused execution: %v", e.src.issued)
	}
}
