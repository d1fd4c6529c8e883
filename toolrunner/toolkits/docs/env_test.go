package docs

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"go.uber.org/goleak"
	gdocs "google.golang.org/api/docs/v1"
	"google.golang.org/api/drive/v3"
	"google.golang.org/api/option"

	"github.com/auditrail/auditrail/hookproxy"
	"github.com/auditrail/auditrail/internal/egress"
	"github.com/auditrail/auditrail/internal/emulators/google"
	"github.com/auditrail/auditrail/internal/emulators/oauth"
	"github.com/auditrail/auditrail/internal/emulators/oauth/oauthtest"
	"github.com/auditrail/auditrail/internal/oauthflow"
	"github.com/auditrail/auditrail/internal/testenv"
	"github.com/auditrail/auditrail/producers"
	"github.com/auditrail/auditrail/toolrunner"
	"github.com/auditrail/auditrail/toolrunner/toolrunnertest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// allScopes are what the demo connection grants: every scope a tool of
// the toolkit declares, nothing more.
var allScopes = []string{ScopeDriveFile, ScopeOpenID, ScopeEmail, ScopeProfile}

// noHooks and noSecrets: the project has no hook and the given secrets.
type noHooks struct{}

func (noHooks) Hooks(context.Context, uuid.UUID, uuid.UUID) ([]hookproxy.Hook, error) {
	return nil, nil
}

type secrets map[string]string

func (s secrets) SecretValue(_, _, name string) (string, error) {
	if v, ok := s[name]; ok {
		return v, nil
	}
	return "", oauthflow.ErrNotConnected // any not-found error
}

// pickerLinks records what GenerateGoogleFilePickerUrl asked for.
type pickerLinks struct {
	mu   sync.Mutex
	asks []string
}

func (p *pickerLinks) PickerURL(_ context.Context, org, project, user, provider string) (string, time.Time, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.asks = append(p.asks, org+"/"+project+"/"+user+"/"+provider)
	return "https://platform.example/picker/abc", time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC), nil
}

type env struct {
	oauth  *oauth.Server
	google *google.Server
	as, gs *httptest.Server
	conns  *toolrunnertest.Connections
	picker *pickerLinks
	tk     *Toolkit
	runner *toolrunner.Runner
	sc     toolrunner.Scope
	// sent records the bodies of the requests the toolkit sent.
	sent *recorder
}

// recorder is a transport that keeps request bodies.
type recorder struct {
	mu     sync.Mutex
	bodies []string
	base   http.RoundTripper
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		b, err := req.GetBody()
		if err == nil {
			var sb strings.Builder
			buf := make([]byte, 4096)
			for {
				n, err := b.Read(buf)
				sb.Write(buf[:n])
				if err != nil {
					break
				}
			}
			b.Close()
			r.mu.Lock()
			r.bodies = append(r.bodies, req.URL.Path+" "+sb.String())
			r.mu.Unlock()
		}
	}
	return r.base.RoundTrip(req)
}

// count answers how many requests went to paths ending so.
func (r *recorder) count(pathSuffix string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, b := range r.bodies {
		if p, _, _ := strings.Cut(b, " "); strings.HasSuffix(p, pathSuffix) {
			n++
		}
	}
	return n
}

func (r *recorder) last(pathSuffix string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := len(r.bodies) - 1; i >= 0; i-- {
		if p, body, _ := strings.Cut(r.bodies[i], " "); strings.HasSuffix(p, pathSuffix) {
			return body
		}
	}
	return ""
}

func newEnv(t testing.TB) *env {
	t.Helper()
	users := []oauth.User{{ID: "u1", Email: "ann@example.com", Name: "Ann Example"}, {ID: "u2", Email: "ben@example.com", Name: "Ben Example"}}
	o, err := oauth.New(oauth.Config{Clients: []oauth.Client{{ID: "app", Secret: "s", RedirectURIs: []string{"https://app.example/cb"}},
		{ID: "other-app", Secret: "s2", RedirectURIs: []string{"https://other.example/cb"}}},
		Users: users, AutoApprove: true})
	if err != nil {
		t.Fatal(err)
	}
	g, err := google.New(google.Config{Auth: o, Users: users})
	if err != nil {
		t.Fatal(err)
	}
	e := &env{oauth: o, google: g, as: httptest.NewServer(o.Handler()), gs: httptest.NewServer(g.Handler()), picker: &pickerLinks{}}
	t.Cleanup(func() { e.gs.Close(); e.as.Close() })
	e.conns = toolrunnertest.NewConnections(Provider)
	e.connect(t, "u1", allScopes...)
	e.connect(t, "u2", allScopes...)

	_, nc, _ := testenv.NATS(t)
	pub, err := producers.New(nc, producers.DefaultConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.DialContext = egress.AllowLoopback().Dialer(net.Dialer{Timeout: 5 * time.Second}).DialContext
	e.sent = &recorder{base: tr}
	cfg := DefaultConfig()
	cfg.HTTPClient = &http.Client{Transport: e.sent}
	cfg.Picker = e.picker
	e.tk, err = New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.CloseIdleConnections() })
	reg := toolrunner.NewRegistry()
	if err := reg.Register(e.tk.Tools()...); err != nil {
		t.Fatal(err)
	}
	rcfg := toolrunner.DefaultConfig()
	rcfg.ToolTimeout = 30 * time.Second
	e.runner = toolrunner.New(rcfg, reg, hookproxy.New(hookproxy.DefaultConfig(), nil), noHooks{}, secrets{}, e.conns, pub, nil)
	e.sc = toolrunner.Scope{Org: uuid.New(), Project: uuid.New(), UserID: "u1"}
	return e
}

// connect gives the user a connection holding a token of the real
// authorization-code flow with PKCE.
func (e *env) connect(t testing.TB, user string, scopes ...string) {
	t.Helper()
	tok := e.token(t, user, scopes...)
	e.conns.Set(user, oauthflow.Connection{AccessToken: tok, Scopes: scopes, APIBaseURL: e.gs.URL})
}

func (e *env) token(t testing.TB, user string, scopes ...string) string {
	t.Helper()
	return e.clientToken(t, "app", "s", "https://app.example/cb", user, scopes...)
}

// clientToken runs the flow for an OAuth client.
func (e *env) clientToken(t testing.TB, client, secret, redirect, user string, scopes ...string) string {
	t.Helper()
	return oauthtest.Token(t, e.as.URL, oauthtest.Client{ID: client, Secret: secret, RedirectURI: redirect}, user, scopes...)
}

// bearer adds a token to requests.
type bearer struct {
	tok  string
	base http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.tok)
	return b.base.RoundTrip(r)
}

// direct answers Docs and Drive clients of the emulator with a token (the
// test's own hands, not the toolkit's).
func (e *env) direct(t testing.TB, tok string) (*gdocs.Service, *drive.Service) {
	t.Helper()
	hc := &http.Client{Transport: bearer{tok, http.DefaultTransport}}
	t.Cleanup(hc.CloseIdleConnections)
	ds, err := gdocs.NewService(context.Background(), option.WithEndpoint(e.gs.URL+"/"), option.WithHTTPClient(hc))
	if err != nil {
		t.Fatal(err)
	}
	dr, err := drive.NewService(context.Background(), option.WithEndpoint(e.gs.URL+"/drive/v3/"), option.WithHTTPClient(hc))
	if err != nil {
		t.Fatal(err)
	}
	return ds, dr
}

func (e *env) scope(user string) toolrunner.Scope {
	sc := e.sc
	sc.UserID = user
	return sc
}

// run executes a tool as user u1.
func (e *env) run(t *testing.T, tool string, in map[string]any) toolrunner.Result {
	t.Helper()
	return e.runAs(t, "u1", tool, in)
}

func (e *env) runAs(t *testing.T, user, tool string, in map[string]any) toolrunner.Result {
	t.Helper()
	res, err := e.runner.Execute(context.Background(), e.scope(user), Name+"."+tool, in)
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	return res
}

func (e *env) ok(t *testing.T, tool string, in map[string]any) any {
	t.Helper()
	res := e.run(t, tool, in)
	if !res.Success {
		t.Fatalf("%s %v: %+v", tool, in, res.Error)
	}
	return res.Output
}

func (e *env) fails(t *testing.T, tool string, in map[string]any, kind string) *toolrunner.Error {
	t.Helper()
	res := e.run(t, tool, in)
	if res.Success || res.Error == nil || res.Error.Kind != kind {
		t.Fatalf("%s %v: want %s, got success=%v %+v", tool, in, kind, res.Success, res.Error)
	}
	return res.Error
}

func obj(t *testing.T, v any) map[string]any {
	t.Helper()
	m, ok := v.(map[string]any)
	if !ok {
		t.Fatalf("want an object, got %T %v", v, v)
	}
	return m
}
