package controlplane

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"

	"github.com/auditrail/auditrail/internal/testenv"
	"github.com/auditrail/auditrail/schemas/openapitest"
)

// adminSpec checks answers of the control plane at a base URL against
// schemas/openapi/admin.yaml, and remembers the operations it checked.
type adminSpec struct {
	router  routers.Router
	checked map[string]bool
}

func newAdminSpec(t *testing.T, base string) *adminSpec {
	t.Helper()
	return &adminSpec{router: openapitest.Router(t, "admin.yaml", base), checked: map[string]bool{}}
}

// do sends req (redirects not followed), wants the status want, checks the
// answer against its operation in admin.yaml and answers its body.
func (a *adminSpec) do(t *testing.T, req *http.Request, want int) []byte {
	t.Helper()
	resp, err := noRedirect.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		t.Fatalf("%s %s: %d %s (want %d)", req.Method, req.URL, resp.StatusCode, raw, want)
	}
	route, params, err := a.router.FindRoute(req)
	if err != nil {
		t.Fatalf("%s %s is not described: %v", req.Method, req.URL, err)
	}
	in := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route,
			Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc}},
		Status: resp.StatusCode, Header: resp.Header, Body: io.NopCloser(bytes.NewReader(raw)),
		Options: &openapi3filter.Options{IncludeResponseStatus: true},
	}
	if err := openapi3filter.ValidateResponse(context.Background(), in); err != nil {
		t.Fatalf("%s %s: the answer does not match admin.yaml: %v\n%s", req.Method, req.URL, err, raw)
	}
	a.checked[route.Operation.OperationID] = true
	return raw
}

// The answers of the auth provider, connection and callback routes, over
// real HTTP, match schemas/openapi/admin.yaml.
func TestOAuthRoutesMatchOpenAPI(t *testing.T) {
	srv, _, _ := testenv.NATS(t)
	e := newOAuthEnv(t, srv.ClientURL())
	api := newAdminSpec(t, e.base)
	do := func(method, path, key string, body any, want int) []byte {
		t.Helper()
		var rd io.Reader
		if body != nil {
			j, _ := json.Marshal(body)
			rd = bytes.NewReader(j)
		}
		req, _ := http.NewRequest(method, path, rd)
		if body != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		for _, c := range e.web.HTTP.Jar.Cookies(req.URL) { // the users' browser's
			req.AddCookie(c)
		}
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		return api.do(t, req, want)
	}
	providers := e.base + e.providers()
	do("POST", providers, e.alice, map[string]any{"id": "google", "type": "google", "client_id": "c", "client_secret": "s"}, 201)
	do("POST", providers, e.alice, map[string]any{"id": "Bad", "type": "google", "client_id": "c"}, 400)
	do("GET", providers, e.alice, nil, 200)
	do("GET", providers+"/corp", e.alice, nil, 200)
	do("PATCH", providers+"/google", e.alice, map[string]any{"api_base_url": "https://docs.example.com"}, 200)
	do("DELETE", providers+"/google", e.alice, nil, 200)

	conns := e.base + e.connPath("bob")
	raw := do("POST", conns+"/corp/authorize", e.bob, map[string]any{"scopes": []string{"docs.read"}}, 200)
	do("POST", conns+"/nope/authorize", e.bob, nil, 404)
	var auth struct {
		Data struct {
			URL string `json:"url"`
		} `json:"data"`
	}
	_ = json.Unmarshal(raw, &auth)
	startURL := auth.Data.URL
	do("GET", startURL, "", nil, 200)
	cb := e.consent(startURL)
	// The start page's forms, as the users' browser (signed in as bob) sends them.
	form := func(u string, v url.Values, origin string, want int) {
		t.Helper()
		req, _ := http.NewRequest("POST", u, strings.NewReader(v.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", origin)
		for _, c := range e.web.HTTP.Jar.Cookies(req.URL) {
			req.AddCookie(c)
		}
		api.do(t, req, want)
	}
	csrf := e.cookie(csrfCookie)
	form(startURL, url.Values{"csrf": {csrf}}, e.base, 303)
	form(startURL, url.Values{"csrf": {csrf}}, "https://evil.example", 403)
	form(startURL+"/sign_in", url.Values{"csrf": {csrf}, "credential": {e.bob}}, e.base, 303)
	form(startURL+"/sign_in", url.Values{"csrf": {csrf}, "credential": {"ak_not-a-key"}}, e.base, 401)
	form(startURL+"/sign_in", url.Values{"csrf": {csrf}, "credential": {e.alice}}, e.base, 403)
	do("GET", e.base+"/api/v1/oauth/start/not-a-ticket", "", nil, 400)
	do("GET", cb, "", nil, 200)
	do("GET", cb, "", nil, 400) // replayed
	e.remember("bob")
	do("GET", conns, e.bob, nil, 200)
	do("PUT", e.base+e.connPath("carol")+"/corp", e.alice, map[string]any{"access_token": "raw-token-1", "scopes": []string{"a"}}, 201)
	e.seen("raw-token-1")
	do("DELETE", conns+"/corp", e.bob, nil, 200)
	for _, op := range []string{"createAuthProvider", "listAuthProviders", "getAuthProvider", "patchAuthProvider", "deleteAuthProvider",
		"authorizeConnection", "oauthCallback", "listConnections", "putConnection", "deleteConnection",
		"oauthStartPage", "oauthStartContinue", "oauthStartSignIn"} {
		if !api.checked[op] {
			t.Errorf("%s not checked", op)
		}
	}
	e.clean()
}
