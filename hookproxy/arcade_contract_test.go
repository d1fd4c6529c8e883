package hookproxy_test

// Contract tests against Arcade's public logic-extensions schema (1.1.1-beta),
// as described in testdata/arcade/logic_extensions.yaml: every request the
// proxy sends to a hook is captured by a server generated from that
// description (internal/arcadehook) and validated with kin-openapi.

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/auditrail/auditrail/hookproxy"
	"github.com/auditrail/auditrail/internal/arcadehook"
	"github.com/auditrail/auditrail/internal/egress"
	"github.com/auditrail/auditrail/schemas/hooksapi"
)

const arcadeToken = "arcade-bearer-7c1"

// arcadeServer is a server generated from the description, recording every
// exchange, with the description loaded from the file to validate them.
type arcadeServer struct {
	srv      *httptest.Server
	hook     *arcadehook.Server
	rec      *arcadehook.Recorder
	contract *arcadehook.Contract
}

func newArcadeServer(t *testing.T, p arcadehook.Policy) *arcadeServer {
	t.Helper()
	c, err := arcadehook.LoadContract("testdata/arcade/logic_extensions.yaml")
	if err != nil {
		t.Fatal(err)
	}
	rec := &arcadehook.Recorder{}
	s, err := arcadehook.New(arcadehook.Config{Token: arcadeToken, Policy: p, Middlewares: []arcadehook.MiddlewareFunc{rec.Middleware}},
		slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	return &arcadeServer{srv: srv, hook: s, rec: rec, contract: c}
}

// hookOf is the server as a hook of every point, failing closed, not
// retried.
func (a *arcadeServer) hookOf(name string) hookproxy.Hook {
	pc := hookproxy.PointConfig{Timeout: 5 * time.Second, FailureMode: hookproxy.FailClosed}
	return hookproxy.Hook{ID: "h-" + name, Name: name, Revision: "1", Endpoint: a.srv.URL,
		Points:      map[hookproxy.Point]hookproxy.PointConfig{hookproxy.Access: withPath(pc, "/access"), hookproxy.Pre: withPath(pc, "/pre"), hookproxy.Post: withPath(pc, "/post")},
		BearerToken: arcadeToken, MaxAttempts: 1, ConsecutiveFailures: 100, OpenFor: time.Second}
}

func withPath(pc hookproxy.PointConfig, p string) hookproxy.PointConfig { pc.Path = p; return pc }

func newArcadeProxy(t *testing.T) *hookproxy.Proxy {
	t.Helper()
	cfg := hookproxy.DefaultConfig()
	cfg.Egress = egress.AllowLoopback()
	p := hookproxy.New(cfg, slog.New(slog.DiscardHandler))
	t.Cleanup(p.Close)
	return p
}

// The requests of an execution of Gmail.Send as the tool runner makes them
// (auditrail's own shapes, requirements.authorization[] with oauth2.scopes
// beside scopes; the proxy shapes them for each hook's contract): a tool
// that needs a secret and a google grant.
const (
	catalogJSON = `{
	  "Gmail": {"tools": {
	    "Send": [{"version": "1.2.0", "requirements": {"secrets": ["SMTP_PASSWORD"],
	              "authorization": [{"provider_type": "oauth2", "provider_id": "google", "scopes": ["mail.send"], "oauth2": {"scopes": ["mail.send"]}}]},
	              "metadata": {"behavior": {"operations": ["create"], "destructive": false}, "classification": {"service_domains": ["email"]}}}],
	    "Read": [{"version": "1.0.0", "requirements": {"authorization": [{"provider_type": "oauth2", "provider_id": "google", "scopes": ["mail.read"], "oauth2": {"scopes": ["mail.read"]}}]}}],
	    "Purge": [{"version": "1.0.0", "requirements": {}, "metadata": {"behavior": {"destructive": true}}}]}},
	  "Docs": {"tools": {"Create": [{"version": "0.1.0", "requirements": {}}]}}}`
	contextJSON = `{"secrets": {"SMTP_PASSWORD": true},
	  "authorization": {"google": {"provider_type": "oauth2", "connected": true, "scopes": ["mail.send", "openid"]}},
	  "metadata": {"organization_id": "o1", "project_id": "p1"}, "user_id": "bob"}`
	toolJSON = `{"name": "Send", "toolkit": "Gmail", "version": "1.2.0", "metadata": {"behavior": {"operations": ["create"]}}}`
)

func catalog(t *testing.T) map[string]hooksapi.ToolkitInfo {
	t.Helper()
	var c map[string]hooksapi.ToolkitInfo
	if err := json.Unmarshal([]byte(catalogJSON), &c); err != nil {
		t.Fatal(err)
	}
	return c
}

func preRequest(t *testing.T) hooksapi.PreRequest {
	t.Helper()
	var r hooksapi.PreRequest
	if err := json.Unmarshal([]byte(`{"execution_id": "0190-e1", "tool": `+toolJSON+`, "inputs": {"to": "a@corp.example", "body": "hi"}, "context": `+contextJSON+`}`), &r); err != nil {
		t.Fatal(err)
	}
	return r
}

func postRequest(t *testing.T, success bool) hooksapi.PostRequest {
	t.Helper()
	var r hooksapi.PostRequest
	body := `{"execution_id": "0190-e1", "tool": ` + toolJSON + `, "inputs": {"to": "a@corp.example"}, "success": true,
	  "output": {"id": "m-1", "thread": ["a", "b"]}, "execution_code": "OK", "context": ` + contextJSON + `}`
	if !success {
		body = `{"execution_id": "0190-e1", "tool": ` + toolJSON + `, "inputs": {"to": "a@corp.example"}, "success": false,
		  "execution_code": "UPSTREAM_ERROR", "execution_error": "smtp refused", "context": ` + contextJSON + `}`
	}
	if err := json.Unmarshal([]byte(body), &r); err != nil {
		t.Fatal(err)
	}
	return r
}

// callAll makes the proxy call every point of h once (plus its health
// check) and returns what the server received.
func callAll(t *testing.T, a *arcadeServer, h hookproxy.Hook) []arcadehook.Exchange {
	t.Helper()
	a.rec.Reset()
	p := newArcadeProxy(t)
	ctx := context.Background()
	p.Access(ctx, []hookproxy.Hook{h}, "bob", catalog(t))
	p.Pre(ctx, []hookproxy.Hook{h}, preRequest(t))
	p.Post(ctx, []hookproxy.Hook{h}, postRequest(t, true))
	p.Post(ctx, []hookproxy.Hook{h}, postRequest(t, false))
	p.CheckHealth(ctx, h)
	exs := a.rec.Exchanges()
	if len(exs) != 5 {
		t.Fatalf("%d requests reached the server, want 5", len(exs))
	}
	return exs
}

// The harness can fail: the requests of a hook in auditrail's default
// shape are not valid for the Arcade description, and the generated server
// refuses them (400) — a fail-closed hook then hides and denies everything.
func TestArcadeContractRefusesDefaultShape(t *testing.T) {
	a := newArcadeServer(t, arcadehook.Policy{})
	h := a.hookOf("default-shaped")
	exs := callAll(t, a, h)
	for _, ex := range exs {
		_, err := a.contract.ValidateRequest(ex)
		switch ex.Path {
		case "/health":
			if err != nil || ex.Status != 200 {
				t.Errorf("health: %d %v", ex.Status, err)
			}
		default:
			if err == nil {
				t.Errorf("%s: the default shape is valid for the Arcade description: %s", ex.Path, ex.Body)
			} else if !strings.Contains(err.Error(), "secrets") {
				t.Errorf("%s: invalid for another reason than secrets: %v", ex.Path, err)
			}
			if ex.Status != 400 {
				t.Errorf("%s: server answered %d, want 400", ex.Path, ex.Status)
			}
		}
	}
	p := newArcadeProxy(t)
	d := p.Access(context.Background(), []hookproxy.Hook{h}, "bob", catalog(t))
	for tk, tools := range d.Visible {
		if len(tools) > 0 {
			t.Errorf("toolkit %s still visible through a refusing fail-closed hook", tk)
		}
	}
	if pre := p.Pre(context.Background(), []hookproxy.Hook{h}, preRequest(t)); pre.Allowed {
		t.Error("pre allowed through a refusing fail-closed hook")
	}
}

// Every request the proxy sends to a hook whose contract is "arcade" is
// valid for the Arcade description and accepted by the generated server:
// access, pre, post (a success and a failure) and health, for a tool with
// secrets and a provider and for one with neither.
func TestArcadeContractRequestsValid(t *testing.T) {
	a := newArcadeServer(t, arcadehook.Policy{})
	h := a.hookOf("arcade")
	h.Contract = hookproxy.ContractArcade
	exs := callAll(t, a, h)

	// A tool without requirements, metadata or inputs; a tool whose
	// provider is not connected (no scopes granted); a null output.
	a.rec.Reset()
	p := newArcadeProxy(t)
	var bare hooksapi.PreRequest
	if err := json.Unmarshal([]byte(`{"execution_id": "e2", "tool": {"name": "Ping", "toolkit": "Net", "version": "1"}, "inputs": null, "context": {}}`), &bare); err != nil {
		t.Fatal(err)
	}
	p.Pre(context.Background(), []hookproxy.Hook{h}, bare)
	var unconnected hooksapi.PostRequest
	if err := json.Unmarshal([]byte(`{"execution_id": "e3", "tool": {"name": "Ping", "toolkit": "Net", "version": "1"}, "inputs": {}, "success": true,
	  "output": null, "execution_code": "OK", "context": {"authorization": {"google": {"provider_type": "oauth2", "connected": false}}, "user_id": "bob"}}`), &unconnected); err != nil {
		t.Fatal(err)
	}
	p.Post(context.Background(), []hookproxy.Hook{h}, unconnected)
	p.Access(context.Background(), []hookproxy.Hook{h}, "bob", map[string]hooksapi.ToolkitInfo{"Net": {Tools: map[string][]hooksapi.VersionInfo{"Ping": {{Version: "1"}}}}})
	exs = append(exs, a.rec.Exchanges()...)
	if len(exs) != 8 {
		t.Fatalf("%d exchanges, want 8", len(exs))
	}
	for _, ex := range exs {
		if err := a.contract.ValidateResponse(ex); err != nil {
			t.Errorf("%v\nrequest: %s", err, ex.Body)
		}
		if ex.Status != 200 {
			t.Errorf("%s: the generated server answered %d: %s", ex.Path, ex.Status, ex.RespBody)
		}
	}

	// The shapes themselves, as the Arcade server's generated types read them.
	var access arcadehook.AccessHookRequest
	var pre arcadehook.PreHookRequest
	var post arcadehook.PostHookRequest
	for _, ex := range exs[:3] {
		var err error
		switch ex.Path {
		case "/access":
			err = json.Unmarshal(ex.Body, &access)
		case "/pre":
			err = json.Unmarshal(ex.Body, &pre)
		case "/post":
			err = json.Unmarshal(ex.Body, &post)
		}
		if err != nil {
			t.Fatalf("%s: %v", ex.Path, err)
		}
	}
	send := (*access.Toolkits["Gmail"].Tools)["Send"][0].Requirements
	if send == nil || send.Secrets == nil || len(*send.Secrets) != 1 || (*send.Secrets)[0].Name != "SMTP_PASSWORD" ||
		send.Authorization == nil || (*send.Authorization)[0].Oauth2 == nil || strings.Join(*(*send.Authorization)[0].Oauth2.Scopes, " ") != "mail.send" {
		t.Errorf("access requirements of Gmail.Send: %s", exs[0].Body)
	}
	for name, c := range map[string]arcadehook.ToolContext{"pre": pre.Context, "post": post.Context} {
		if c.Secrets == nil || strings.Join(*c.Secrets, ",") != "SMTP_PASSWORD" || c.Authorization == nil || len(*c.Authorization) != 1 ||
			*(*c.Authorization)[0].ProviderId != "google" || strings.Join(*(*c.Authorization)[0].Oauth2.Scopes, " ") != "mail.send openid" ||
			c.UserId == nil || *c.UserId != "bob" {
			t.Errorf("%s context: %+v", name, c)
		}
	}
	if pre.ExecutionId != "0190-e1" || pre.Tool.Name != "Send" || pre.Inputs["to"] != "a@corp.example" || post.ExecutionId != pre.ExecutionId {
		t.Errorf("pre %+v post %+v", pre, post)
	}
}

// In one chain, each hook gets its own contract's shape: the auditrail hook's
// requests are valid for hooks.yaml, the arcade hook's for the Arcade
// description.
func TestArcadeContractMixedChain(t *testing.T) {
	own, err := arcadehook.LoadContract("../schemas/openapi/hooks.yaml")
	if err != nil {
		t.Fatal(err)
	}
	arc := newArcadeServer(t, arcadehook.Policy{})
	ownRec := &arcadehook.Recorder{}
	ownSrv := httptest.NewServer(ownRec.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path == "/access" {
			_, _ = w.Write([]byte(`{}`))
			return
		}
		_, _ = w.Write([]byte(`{"code":"OK"}`))
	})))
	t.Cleanup(ownSrv.Close)
	ha := arc.hookOf("arcade")
	ha.Contract, ha.Phase = hookproxy.ContractArcade, "after"
	ho := arc.hookOf("own")
	ho.ID, ho.Endpoint, ho.Contract = "h-own", ownSrv.URL, hookproxy.ContractAuditrail
	p := newArcadeProxy(t)
	ctx := context.Background()
	hooks := []hookproxy.Hook{ha, ho}
	if d := p.Access(ctx, hooks, "bob", catalog(t)); len(d.Visible["Gmail"]) != 3 {
		t.Fatalf("access: %v", d.Visible)
	}
	if r := p.Pre(ctx, hooks, preRequest(t)); !r.Allowed {
		t.Fatalf("pre: %+v", r)
	}
	if r := p.Post(ctx, hooks, postRequest(t, true)); !r.Allowed {
		t.Fatalf("post: %+v", r)
	}
	for name, c := range map[string]struct {
		rec      *arcadehook.Recorder
		contract *arcadehook.Contract
	}{"arcade": {arc.rec, arc.contract}, "auditrail": {ownRec, own}} {
		exs := c.rec.Exchanges()
		if len(exs) != 3 {
			t.Fatalf("%s: %d requests", name, len(exs))
		}
		for _, ex := range exs {
			if _, err := c.contract.ValidateRequest(ex); err != nil {
				t.Errorf("%s: %v\n%s", name, err, ex.Body)
			}
		}
	}
}

// The health of a server written to the Arcade schema is read as that
// schema defines it: healthy and degraded are up, unhealthy (503) is down;
// the check sends the bearer token, and its exchange is valid.
func TestArcadeHealthRead(t *testing.T) {
	for _, tc := range []struct {
		status arcadehook.HealthResponseStatus
		ok     bool
		http   int
	}{
		{arcadehook.Healthy, true, 200}, {arcadehook.Degraded, true, 200}, {arcadehook.Unhealthy, false, 503},
	} {
		t.Run(string(tc.status), func(t *testing.T) {
			a := newArcadeServer(t, arcadehook.Policy{Health: tc.status})
			h := a.hookOf("arcade")
			h.Contract = hookproxy.ContractArcade
			res := newArcadeProxy(t).CheckHealth(context.Background(), h)
			if res.OK != tc.ok || res.HTTPStatus != tc.http || res.Status != string(tc.status) {
				t.Fatalf("health %+v, want ok %v, %d %s", res, tc.ok, tc.http, tc.status)
			}
			exs := a.rec.Exchanges()
			if len(exs) != 1 || exs[0].Header.Get("Authorization") != "Bearer "+arcadeToken {
				t.Fatalf("exchanges %+v", exs)
			}
			if err := a.contract.ValidateResponse(exs[0]); err != nil {
				t.Fatal(err)
			}
		})
	}
}
