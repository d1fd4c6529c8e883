package example_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"

	"github.com/auditrail/auditrail/hookproxy"
	"github.com/auditrail/auditrail/hookproxy/example"
	"github.com/auditrail/auditrail/internal/egress"
	"github.com/auditrail/auditrail/internal/testenv"
	"github.com/auditrail/auditrail/schemas/hooksapi"
	"github.com/auditrail/auditrail/schemas/openapitest"
)

func TestMain(m *testing.M) { testenv.MainNoLeaks(m) }

// contractRouter loads hooks.yaml for a server at base.
func contractRouter(t *testing.T, base string) routers.Router {
	t.Helper()
	return openapitest.Router(t, "hooks.yaml", base)
}

// validating checks every request reaching next, and every answer of next,
// against hooks.yaml; what it saw is in the returned log.
type validating struct {
	t      *testing.T
	router routers.Router
	next   http.Handler

	mu   sync.Mutex
	seen []string // "METHOD path status"
}

func (v *validating) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	vr := r.Clone(r.Context())
	vr.URL.Scheme, vr.URL.Host = "http", r.Host
	route, params, err := v.router.FindRoute(vr)
	if err != nil {
		v.t.Errorf("%s %s is not in hooks.yaml: %v", r.Method, r.URL.Path, err)
		v.next.ServeHTTP(w, r)
		return
	}
	opts := &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc}
	in := &openapi3filter.RequestValidationInput{Request: vr, PathParams: params, Route: route, Options: opts}
	vr.Body = io.NopCloser(bytes.NewReader(body))
	reqErr := openapi3filter.ValidateRequest(context.Background(), in)
	rec := httptest.NewRecorder()
	v.next.ServeHTTP(rec, r)
	// A request the test made malformed (or unauthenticated) on purpose is
	// refused with 400 (or 401 first).
	if reqErr != nil && rec.Code != http.StatusBadRequest && rec.Code != http.StatusUnauthorized {
		v.t.Errorf("%s %s: the request does not match hooks.yaml: %v\n%s", r.Method, r.URL.Path, reqErr, body)
	}
	out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: rec.Code, Header: rec.Header(),
		Body: io.NopCloser(bytes.NewReader(rec.Body.Bytes())), Options: &openapi3filter.Options{IncludeResponseStatus: true}}
	if err := openapi3filter.ValidateResponse(context.Background(), out); err != nil {
		v.t.Errorf("%s %s: the answer (%d) does not match hooks.yaml: %v\n%s", r.Method, r.URL.Path, rec.Code, err, rec.Body.Bytes())
	}
	v.mu.Lock()
	v.seen = append(v.seen, r.Method+" "+r.URL.Path+" "+http.StatusText(rec.Code))
	v.mu.Unlock()
	for k, vals := range rec.Header() {
		w.Header()[k] = vals
	}
	w.WriteHeader(rec.Code)
	_, _ = w.Write(rec.Body.Bytes())
}

// The reference server and the platform's client, both held to hooks.yaml:
// every request hookproxy sends (auditrail contract) and every answer of
// the server — decisions, overrides, the 400 and 401 ErrorResponse and
// {"status":"healthy"} — match it.
func TestReferenceServerMatchesContract(t *testing.T) {
	policy, err := example.LoadPolicy("testdata/policy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	v := &validating{t: t, next: example.New(policy, nil).Handler("secret-token")}
	srv := httptest.NewServer(v)
	defer srv.Close()
	v.router = contractRouter(t, srv.URL)

	cfg := hookproxy.DefaultConfig()
	cfg.Egress = egress.AllowLoopback()
	p := hookproxy.New(cfg, nil)
	defer p.Close()
	h := hookproxy.Hook{ID: "ex", Name: "example", Revision: "1", Endpoint: srv.URL, BearerToken: "secret-token", MaxAttempts: 1,
		ConsecutiveFailures: 5, OpenFor: time.Second, Points: map[hookproxy.Point]hookproxy.PointConfig{
			hookproxy.Access: {Path: "/access", Timeout: time.Second, FailureMode: hookproxy.FailClosed},
			hookproxy.Pre:    {Path: "/pre", Timeout: time.Second, FailureMode: hookproxy.FailClosed},
			hookproxy.Post:   {Path: "/post", Timeout: time.Second, FailureMode: hookproxy.FailClosed},
		}}
	user := "alice"
	scopes := []string{"docs.read"}
	gid := "google"
	secrets := map[string]bool{"API_KEY": true}
	ptype, connected := "oauth2", true
	auth := map[string]hooksapi.AuthorizationInfo{"google": {ProviderType: &ptype, Connected: &connected, Scopes: &scopes}}
	hctx := hooksapi.Context{UserId: &user, Secrets: &secrets, Authorization: &auth}
	read := tool("DocsToolkit", "GetDocumentAsDocmd", []string{"documents"}, []string{"read"}, false, nil)
	edit := tool("DocsToolkit", "EditDocument", []string{"documents"}, []string{"update"}, true, nil)

	catalog := map[string]hooksapi.ToolkitInfo{"DocsToolkit": {Tools: map[string][]hooksapi.VersionInfo{
		read.Name: {{Version: "1", Metadata: read.Metadata, Requirements: hooksapi.Requirements{
			Authorization: &[]hooksapi.AuthorizationRequirement{{ProviderType: "oauth2", ProviderId: &gid, Scopes: &scopes,
				Oauth2: &hooksapi.OAuth2Scopes{Scopes: &scopes}}},
			Secrets: &[]string{"API_KEY"}}}},
		edit.Name: {{Version: "1", Metadata: edit.Metadata}},
	}}}
	if vis := p.Access(context.Background(), []hookproxy.Hook{h}, user, catalog).Visible; !vis["DocsToolkit"][read.Name] || vis["DocsToolkit"][edit.Name] {
		t.Fatalf("access: %v", vis)
	}
	if r := p.Pre(context.Background(), []hookproxy.Hook{h}, hooksapi.PreRequest{ExecutionId: "e", Tool: read, Inputs: map[string]any{}, Context: hctx}); !r.Allowed {
		t.Fatalf("pre: %+v", r.Verdict)
	}
	if r := p.Pre(context.Background(), []hookproxy.Hook{h}, hooksapi.PreRequest{ExecutionId: "e", Tool: edit, Inputs: map[string]any{}, Context: hctx}); r.Allowed {
		t.Fatalf("pre of a destructive tool: %+v", r.Verdict)
	}
	if r := p.Post(context.Background(), []hookproxy.Hook{h}, hooksapi.PostRequest{ExecutionId: "e", Tool: read, Inputs: map[string]any{},
		Success: true, ExecutionCode: "OK", Output: map[string]any{"ssn": "1", "ok": true}, Context: hctx}); !r.Allowed {
		t.Fatalf("post: %+v", r.Verdict)
	}
	if hl := p.CheckHealth(context.Background(), h); !hl.OK || hl.Status != hookproxy.HealthHealthy || hl.Failure != "" {
		t.Fatalf("health: %+v", hl)
	}

	// The errors, as a server answers them: ErrorResponse bodies.
	call := func(path, token, body string) (int, string) {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, tc := range []struct {
		name, path, token, body string
		status                  int
		says                    string
	}{
		{"no token", "/pre", "", `{}`, 401, `"error":"unauthorized`},
		{"wrong token", "/access", "nope", `{}`, 401, `"error":"unauthorized`},
		{"not JSON", "/pre", "secret-token", `{"execution_id":`, 400, `"error":"malformed request`},
		{"wrong shape", "/post", "secret-token", `{"tool":"Docs.Edit"}`, 400, `"error":"malformed request`},
	} {
		if st, b := call(tc.path, tc.token, tc.body); st != tc.status || !strings.Contains(b, tc.says) {
			t.Errorf("%s: %d %s", tc.name, st, b)
		}
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	want := "POST /access OK,POST /pre OK,POST /pre OK,POST /post OK,GET /health OK," +
		"POST /pre Unauthorized,POST /access Unauthorized,POST /pre Bad Request,POST /post Bad Request"
	if got := strings.Join(v.seen, ","); got != want {
		t.Errorf("calls seen:\n%s\nwant\n%s", got, want)
	}
}
