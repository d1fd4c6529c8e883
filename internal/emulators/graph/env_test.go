package graph_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/auditrail/auditrail/internal/emulators/graph"
	"github.com/auditrail/auditrail/internal/emulators/oauth"
	"github.com/auditrail/auditrail/internal/emulators/oauth/oauthtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Scopes of a token that may do everything.
var allScopes = []string{"Mail.ReadWrite", "Mail.Send", "User.Read", "MailboxSettings.Read"}

// env is the OAuth emulator and the Graph emulator mounted at /microsoft
// (as the demo mounts it), with ann (u1, seeded) and ben (u2) and a clock
// advancing a second per reading.
type env struct {
	g    *graph.Server
	api  string // the API base: <server>/microsoft
	auth *httptest.Server
	mu   sync.Mutex
	now  time.Time
	hc   *http.Client
}

func newEnv(t *testing.T, mod ...func(*graph.Config)) *env {
	t.Helper()
	cb := []string{"https://app.example/cb"}
	o, err := oauth.New(oauth.Config{Clients: []oauth.Client{{ID: "app", Secret: "s", RedirectURIs: cb}},
		Users: []oauth.User{{ID: "u1", Email: "ann@contoso.com", Name: "Ann Lee"}, {ID: "u2", Email: "ben@contoso.com", Name: "Ben Ode"},
			{ID: "u3", Email: "cy@contoso.com"}},
		AutoApprove: true})
	if err != nil {
		t.Fatal(err)
	}
	e := &env{now: time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)}
	cfg := graph.Config{Auth: o, Now: e.clock, Users: []oauth.User{{ID: "u1", Email: "ann@contoso.com", Name: "Ann Lee"}, {ID: "u2", Email: "ben@contoso.com", Name: "Ben Ode"}}}
	for _, f := range mod {
		f(&cfg)
	}
	g, err := graph.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.SeedSample("u1", "ann@contoso.com"); err != nil {
		t.Fatal(err)
	}
	g.AddMailbox("u2", "ben@contoso.com", "Ben Ode")
	mux := http.NewServeMux()
	mux.Handle("/microsoft/", http.StripPrefix("/microsoft", g.Handler()))
	as := httptest.NewServer(o.Handler())
	gs := httptest.NewServer(mux)
	e.hc = &http.Client{}
	t.Cleanup(func() { e.hc.CloseIdleConnections(); gs.Close(); as.Close() })
	e.g, e.api, e.auth = g, gs.URL+"/microsoft", as
	return e
}

func (e *env) clock() time.Time {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.now = e.now.Add(time.Second)
	return e.now
}

// token runs the real authorization-code flow with PKCE for the user.
func (e *env) token(t *testing.T, user string, scopes ...string) string {
	t.Helper()
	return oauthtest.Token(t, e.auth.URL, oauthtest.Client{ID: "app", Secret: "s", RedirectURI: "https://app.example/cb"}, user, scopes...)
}

// resp is a decoded answer.
type resp struct {
	status int
	header http.Header
	body   map[string]any
	raw    []byte
}

// code answers error.code of a Graph error answer.
func (r resp) code() string {
	e, _ := r.body["error"].(map[string]any)
	c, _ := e["code"].(string)
	return c
}

func (r resp) items() []map[string]any {
	v, _ := r.body["value"].([]any)
	out := make([]map[string]any, 0, len(v))
	for _, x := range v {
		out = append(out, x.(map[string]any))
	}
	return out
}

// do calls the API: path relative to the API base (or an absolute URL), a
// body marshalled to JSON, headers as name/value pairs.
func (e *env) do(t *testing.T, tok, method, path string, body any, hdr ...string) resp {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	u := path
	if !strings.HasPrefix(path, "http") {
		u = e.api + path
	}
	req, err := http.NewRequest(method, u, rd)
	if err != nil {
		t.Fatal(err)
	}
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	res, err := e.hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	out := resp{status: res.StatusCode, header: res.Header, raw: raw}
	if len(bytes.TrimSpace(raw)) > 0 {
		if err := json.Unmarshal(raw, &out.body); err != nil {
			t.Fatalf("%s %s: %d not JSON: %s", method, path, res.StatusCode, raw)
		}
	}
	return out
}

// must is do that fails the test unless the status is want.
func (e *env) must(t *testing.T, want int, tok, method, path string, body any, hdr ...string) resp {
	t.Helper()
	r := e.do(t, tok, method, path, body, hdr...)
	if r.status != want {
		t.Fatalf("%s %s: status %d, want %d: %s", method, path, r.status, want, r.raw)
	}
	return r
}

// all follows @odata.nextLink from path and answers every item.
func (e *env) all(t *testing.T, tok, path string, hdr ...string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for next := path; next != ""; {
		r := e.must(t, 200, tok, http.MethodGet, next, nil, hdr...)
		out = append(out, r.items()...)
		next, _ = r.body["@odata.nextLink"].(string)
		if len(out) > 5000 {
			t.Fatal("paging does not end")
		}
	}
	return out
}

func str(m map[string]any, path ...string) string {
	var cur any = m
	for _, p := range path {
		mm, ok := cur.(map[string]any)
		if !ok {
			return ""
		}
		cur = mm[p]
	}
	s, _ := cur.(string)
	return s
}

func addrs(m map[string]any, prop string) []string {
	var out []string
	list, _ := m[prop].([]any)
	for _, x := range list {
		out = append(out, str(x.(map[string]any), "emailAddress", "address"))
	}
	return out
}

func rcpts(a ...string) []map[string]any {
	out := []map[string]any{}
	for _, x := range a {
		out = append(out, map[string]any{"emailAddress": map[string]any{"address": x}})
	}
	return out
}
