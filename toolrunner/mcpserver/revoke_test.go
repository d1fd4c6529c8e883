package mcpserver_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/auditrail/auditrail/controlplane/cpstate"
	"github.com/auditrail/auditrail/controlplane/cptest"
	"github.com/auditrail/auditrail/internal/httpapi"
	"github.com/auditrail/auditrail/internal/httpx"
	"github.com/auditrail/auditrail/internal/testenv"
	"github.com/auditrail/auditrail/toolrunner"
	"github.com/auditrail/auditrail/toolrunner/mcpserver"
)

// controlPlane is the real control plane (its state on an embedded NATS,
// its Access, its admin API) deciding who may use a project's tools.
type controlPlane struct {
	t            *testing.T
	admin        *fiber.App
	access       *cpstate.Access
	boot         string
	real         *cptest.ControlPlane
	org, project string
}

func newControlPlane(t *testing.T) *controlPlane {
	t.Helper()
	_, nc, js := testenv.NATS(t)
	real := cptest.Start(t, nc, js, "cp_mcp_test")
	cp := &controlPlane{t: t, boot: cptest.Boot, access: real.Access, real: real}
	cp.admin = httpapi.NewApp(nil)
	real.Service.Register(cp.admin)
	cp.org = cp.call("POST", "/api/v1/orgs", `{"name":"Acme"}`)["id"].(string)
	cp.project = cp.call("POST", "/api/v1/orgs/"+cp.org+"/projects", `{"name":"p"}`)["id"].(string)
	return cp
}

// call is an admin API call as the platform admin; it fails the test
// unless it succeeds.
func (cp *controlPlane) call(method, path, body string) map[string]any {
	cp.t.Helper()
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+cp.boot)
	req.Header.Set("Content-Type", "application/json")
	resp, err := cp.admin.Test(req, -1)
	if err != nil {
		cp.t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 300 {
		cp.t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, b)
	}
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	data, _ := m["data"].(map[string]any)
	return data
}

// member makes user a member of the organization and the project.
func (cp *controlPlane) member(user string) {
	cp.call("PUT", "/api/v1/orgs/"+cp.org+"/members/"+user, `{"role":"member"}`)
	cp.call("PUT", "/api/v1/orgs/"+cp.org+"/projects/"+cp.project+"/members/"+user, `{"role":"member"}`)
}

// jwtFor signs a JWT of sub that expires at exp.
func (cp *controlPlane) jwtFor(sub string, exp time.Time) string {
	return cp.real.JWT(cp.t, sub, exp)
}

// eventStream opens the GET event stream of a session; the channel is
// closed when the stream ends.
func eventStream(t *testing.T, url string, h header) <-chan struct{} {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "text/event-stream")
	for k, v := range h {
		req.Header.Set(k, v)
	}
	resp, err := (&http.Client{Transport: transport}).Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		cancel()
		t.Fatalf("GET stream: %d %s", resp.StatusCode, b)
	}
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
	}()
	t.Cleanup(func() { cancel(); <-ended })
	return ended
}

// A session must not outlive its credential: once the key is disabled or
// deleted, the member removed from the project or the organization, or the
// JWT past exp (as the control plane's Access sees it), the session ends
// within 5 s: its GET event stream ends, its background lists (which call
// the access hooks) stop, and every further request is refused.
func TestSessionEndsWithItsCredential(t *testing.T) {
	cp := newControlPlane(t)
	scoper := toolrunner.NewServer(nil, cp.access, httpx.TrustedProxies{})
	orgPath := "/api/v1/orgs/" + cp.org
	serviceKey := func() (string, string) {
		k := cp.call("POST", orgPath+"/projects/"+cp.project+"/service_keys", `{"name":"agent"}`)
		return k["key"].(string), k["id"].(string)
	}
	userKey := func(user string) string {
		cp.member(user)
		return cp.call("POST", orgPath+"/api_keys", fmt.Sprintf(`{"name":"k","user_id":%q}`, user))["key"].(string)
	}
	const jwtLife = 3 * time.Second
	for _, tc := range []struct {
		name string
		// setup returns the credential, the user a service key names,
		// and the revocation (nil: the credential expires by itself at
		// the returned time).
		setup func() (cred, user string, revoke func(), expires time.Time)
	}{
		{"service key disabled", func() (string, string, func(), time.Time) {
			key, id := serviceKey()
			return key, "end-user", func() { cp.call("POST", orgPath+"/api_keys/"+id+"/disable", ``) }, time.Time{}
		}},
		{"service key deleted", func() (string, string, func(), time.Time) {
			key, id := serviceKey()
			return key, "end-user", func() { cp.call("DELETE", orgPath+"/api_keys/"+id, ``) }, time.Time{}
		}},
		{"user removed from the project", func() (string, string, func(), time.Time) {
			key := userKey("carol")
			return key, "", func() { cp.call("DELETE", orgPath+"/projects/"+cp.project+"/members/carol", ``) }, time.Time{}
		}},
		{"user removed from the organization", func() (string, string, func(), time.Time) {
			key := userKey("dave")
			return key, "", func() { cp.call("DELETE", orgPath+"/members/dave", ``) }, time.Time{}
		}},
		{"JWT past exp", func() (string, string, func(), time.Time) {
			cp.member("erin")
			// exp is in whole seconds (NumericDate): the token expires
			// at the second before.
			exp := time.Now().Add(jwtLife).Truncate(time.Second)
			return cp.jwtFor("erin", exp), "", nil, exp
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := mcpserver.DefaultConfig()
			cfg.ListCheck, cfg.ListRefresh = 50*time.Millisecond, 50*time.Millisecond // a list at every check
			f := &fakeRunner{defs: []toolrunner.Definition{countDef}}
			url := serveBase(t, f, cfg, scoper, nil) + "/mcp/v1/orgs/" + cp.org + "/projects/" + cp.project
			cred, user, revoke, expires := tc.setup()
			h := header{"Authorization": "Bearer " + cred}
			if user != "" {
				h[mcpserver.HeaderUserID] = user
			}
			// The credential works once the control plane's mirror has it.
			var id, last string
			testenv.Eventually(t, 10*time.Second, func() string { return "initialize: " + last }, func() bool {
				resp, body := rawRequest(t, http.MethodPost, url, initializeBody, h)
				id, last = resp.Header.Get("Mcp-Session-Id"), fmt.Sprintf("%d %s", resp.StatusCode, body)
				return resp.StatusCode == http.StatusOK && id != ""
			})
			session := header{"Mcp-Session-Id": id}
			for k, v := range h {
				session[k] = v
			}
			ended := eventStream(t, url, session)
			lists := func() int {
				f.mu.Lock()
				defer f.mu.Unlock()
				return f.visibleCalls
			}
			// The session lists in the background (the access hooks).
			n0 := lists()
			testenv.Eventually(t, 5*time.Second, "a list in the background", func() bool { return lists() >= n0+2 })
			from := expires
			if revoke != nil {
				revoke()
				from = time.Now()
			}
			select {
			case <-ended:
				t.Logf("the event stream ended %v after the revocation", time.Since(from).Round(time.Millisecond))
			case <-time.After(time.Until(from.Add(5 * time.Second))):
				t.Fatal("the GET event stream of the session outlived its credential by 5 s")
			}
			// No list any more, so no hook call, for the session.
			n := lists()
			time.Sleep(6 * cfg.ListCheck)
			if m := lists(); m != n {
				t.Fatalf("%d lists after the session ended", m-n)
			}
			// Every request is refused (401 or 403), the GET of a new
			// event stream too.
			for _, r := range []struct{ method, body string }{{http.MethodPost, pingBody}, {http.MethodGet, ""}, {http.MethodDelete, ""}} {
				hr := session
				if r.method == http.MethodGet {
					hr = header{"Accept": "text/event-stream"}
					for k, v := range session {
						hr[k] = v
					}
				}
				resp, body := rawRequest(t, r.method, url, r.body, hr)
				if resp.StatusCode != http.StatusUnauthorized && resp.StatusCode != http.StatusForbidden {
					t.Fatalf("%s after the revocation: %d %s", r.method, resp.StatusCode, body)
				}
			}
		})
	}
}

// A session keeps what its request said: the credential it checks again
// and the user its background lists are for. fasthttp reuses a request's
// memory for the next request on the same connection, so a session that
// kept strings pointing into it would check another request's credential
// and list (call the access hooks) for another request's user.
func TestSessionKeepsItsRequestsValues(t *testing.T) {
	cp := newControlPlane(t)
	scoper := toolrunner.NewServer(nil, cp.access, httpx.TrustedProxies{})
	orgPath := "/api/v1/orgs/" + cp.org
	key := func() string {
		return cp.call("POST", orgPath+"/projects/"+cp.project+"/service_keys", `{"name":"agent"}`)["key"].(string)
	}
	keyA, keyB := key(), key()
	cfg := mcpserver.DefaultConfig()
	cfg.ListCheck, cfg.ListRefresh = 50*time.Millisecond, 50*time.Millisecond
	f := &fakeRunner{defs: []toolrunner.Definition{countDef}}
	url := serveBase(t, f, cfg, scoper, nil) + "/mcp/v1/orgs/" + cp.org + "/projects/" + cp.project
	h := header{"Authorization": "Bearer " + keyA, mcpserver.HeaderUserID: "user-one-aaaa"}
	var id string
	testenv.Eventually(t, 10*time.Second, "initialize", func() bool {
		resp, _ := rawRequest(t, http.MethodPost, url, initializeBody, h)
		id = resp.Header.Get("Mcp-Session-Id")
		return resp.StatusCode == http.StatusOK && id != ""
	})
	// Another request on the same connection (the client keeps it
	// alive), another key and user of the same lengths: refused before
	// any session, as it names none.
	resp, body := rawRequest(t, http.MethodPost, url, pingBody, header{"Authorization": "Bearer " + keyB, mcpserver.HeaderUserID: "user-two-bbbb"})
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("a ping without a session: %d %s", resp.StatusCode, body)
	}
	f.mu.Lock()
	n0 := len(f.users)
	f.mu.Unlock()
	testenv.Eventually(t, 5*time.Second, "background lists", func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		return len(f.users) >= n0+3
	})
	f.mu.Lock()
	users := append([]string(nil), f.users...)
	f.mu.Unlock()
	for _, u := range users {
		if u != "user-one-aaaa" {
			t.Fatalf("the session listed for user %q (want user-one-aaaa): %q", u, users)
		}
	}
	session := header{"Mcp-Session-Id": id}
	for k, v := range h {
		session[k] = v
	}
	if resp, body := rawRequest(t, http.MethodPost, url, pingBody, session); resp.StatusCode != http.StatusOK {
		t.Fatalf("the session ended (its credential was read from another request?): %d %s", resp.StatusCode, body)
	}
}
