package e2e_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/auditrail/auditrail/controlplane"
	"github.com/auditrail/auditrail/controlplane/cpstate"
	"github.com/auditrail/auditrail/controlplane/linkbrowser"
	"github.com/auditrail/auditrail/hookproxy"
	"github.com/auditrail/auditrail/ingest"
	"github.com/auditrail/auditrail/internal/auditstore"
	"github.com/auditrail/auditrail/internal/auditstore/clickhouse"
	"github.com/auditrail/auditrail/internal/auditstore/sqlite"
	"github.com/auditrail/auditrail/internal/auth"
	"github.com/auditrail/auditrail/internal/egress"
	"github.com/auditrail/auditrail/internal/emulators/oauth"
	"github.com/auditrail/auditrail/internal/httpapi"
	"github.com/auditrail/auditrail/internal/httpx"
	"github.com/auditrail/auditrail/internal/oauthflow"
	"github.com/auditrail/auditrail/internal/testenv"
	"github.com/auditrail/auditrail/producers"
	"github.com/auditrail/auditrail/schemas"
	"github.com/auditrail/auditrail/toolrunner"
)

const (
	bootKey      = "bootstrap-key-of-the-e2e-tests"
	clientID     = "e2e-client"
	clientSecret = "e2e-client-secret-5b1c0d"
	scopeRead    = "e2e.read"
	scopeWrite   = "e2e.write"
	// accessTTL is the emulator's access-token lifetime: a fresh token is
	// not due for refresh (the control plane refreshes within 60 s of the
	// expiry), one issued more than 2 s ago is.
	accessTTL = 62 * time.Second
	dueAfter  = 2500 * time.Millisecond
)

type noHooks struct{}

func (noHooks) Hooks(context.Context, uuid.UUID, uuid.UUID) ([]hookproxy.Hook, error) {
	return nil, nil
}

// recorder keeps what an http.ResponseWriter was given.
type recorder struct {
	http.ResponseWriter
	body bytes.Buffer
}

func (r *recorder) Write(p []byte) (int, error) { r.body.Write(p); return r.ResponseWriter.Write(p) }

// platform is the control plane and the tool runner, each on its own
// listener, with the OAuth emulator as the organization's provider google.
type platform struct {
	t              *testing.T
	nc             *nats.Conn
	js             jetstream.JetStream
	emu            *oauth.Server
	emuURL         string
	cpURL, trURL   string
	clock          *testenv.OffsetClock
	logs           *testenv.SyncBuffer
	org, project   string
	alice, bob     string // API keys: alice an org admin, bob a member
	carol          string
	refreshReqs    atomic.Int64
	tokensIssued   atomic.Int64
	toolToken      sync.Map // access tokens the tools received
	secretsMu      sync.Mutex
	secrets        map[string]string // value → what it is
	browser        *http.Client      // web's: no redirects, a cookie jar
	web            *linkbrowser.Browser
	keys           map[string]string // API keys by user
	svcConnections *controlplane.Service
}

func (p *platform) seen(what string, values ...string) {
	p.secretsMu.Lock()
	defer p.secretsMu.Unlock()
	for _, v := range values {
		if v != "" {
			p.secrets[v] = what
		}
	}
}

func (p *platform) secretList() map[string]string {
	p.secretsMu.Lock()
	defer p.secretsMu.Unlock()
	out := make(map[string]string, len(p.secrets))
	for k, v := range p.secrets {
		out[k] = v
	}
	return out
}

func serve(t *testing.T, app *fiber.App) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = app.Listener(ln) }()
	t.Cleanup(func() { _ = app.Shutdown(); <-done })
	return "http://" + ln.Addr().String()
}

func newPlatform(t *testing.T) *platform {
	t.Helper()
	_, nc, js := testenv.NATS(t)
	p := &platform{t: t, nc: nc, js: js, clock: &testenv.OffsetClock{}, logs: &testenv.SyncBuffer{}, secrets: map[string]string{}}
	log := slog.New(slog.NewTextHandler(p.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)

	// The provider.
	emu, err := oauth.New(oauth.Config{Clients: []oauth.Client{{ID: clientID, Secret: clientSecret}},
		Users:     []oauth.User{{ID: "u-bob", Email: "bob@corp.example", Name: "Bob"}, {ID: "u-carol", Email: "carol@corp.example", Name: "Carol"}},
		AccessTTL: accessTTL, RotateRefreshTokens: true, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	h := emu.Handler()
	emuSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/token" || r.Method != http.MethodPost {
			h.ServeHTTP(w, r)
			return
		}
		if r.ParseForm() == nil && r.PostForm.Get("grant_type") == "refresh_token" {
			p.refreshReqs.Add(1)
		}
		rec := &recorder{ResponseWriter: w}
		h.ServeHTTP(rec, r)
		var tok struct{ AccessToken, RefreshToken string }
		var raw map[string]any
		if json.Unmarshal(rec.body.Bytes(), &raw) == nil {
			tok.AccessToken, _ = raw["access_token"].(string)
			tok.RefreshToken, _ = raw["refresh_token"].(string)
			if tok.AccessToken != "" {
				p.tokensIssued.Add(1)
			}
			p.seen("an access token", tok.AccessToken)
			p.seen("a refresh token", tok.RefreshToken)
		}
	}))
	t.Cleanup(emuSrv.Close)
	p.emu, p.emuURL = emu, emuSrv.URL
	p.seen("the client secret", clientSecret)

	// The control plane.
	state, err := cpstate.OpenState(ctx, js, cpstate.DefaultStateConfig(), log)
	if err != nil {
		t.Fatal(err)
	}
	access := cpstate.NewAccess(state, auth.HashKey(bootKey), nil)
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	sealer, err := cpstate.NewSealer(key)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := producers.New(nc, producers.DefaultConfig(), log)
	if err != nil {
		t.Fatal(err)
	}
	svc, err := controlplane.NewService(controlplane.DefaultServiceConfig(), state, access, sealer, producers.NewRecorder(pub, 5*time.Second), httpx.TrustedProxies{}, log)
	if err != nil {
		t.Fatal(err)
	}
	svc.UseEgress(egress.AllowLoopback()) // the emulator is on 127.0.0.1
	runDone := make(chan struct{})
	go func() { defer close(runDone); _ = svc.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-runDone })
	p.svcConnections = svc

	cpApp := httpapi.NewApp(log)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p.cpURL = "http://" + ln.Addr().String()
	ocfg := oauthflow.DefaultConfig()
	ocfg.RedirectURL = p.cpURL + "/api/v1/oauth/callback"
	ocfg.HTTPClient = &http.Client{Timeout: 10 * time.Second}
	ocfg.Now = p.clock.Now
	if err := svc.ConfigureOAuth(ocfg); err != nil {
		t.Fatal(err)
	}
	svc.Register(cpApp)
	cpDone := make(chan struct{})
	go func() { defer close(cpDone); _ = cpApp.Listener(ln) }()
	t.Cleanup(func() { _ = cpApp.Shutdown(); <-cpDone })

	// The tool runner, with tools that use the token at the provider.
	userinfo := func(need ...string) toolrunner.Tool {
		d := toolrunner.Definition{Toolkit: "E2E", Name: "WhoAmI", Version: "1.0.0", Description: "the user's email at the provider",
			Output: toolrunner.Output{Type: "string"}}
		if slices.Contains(need, scopeWrite) {
			d.Name = "WhoAmIWrite"
		}
		d.Requirements.Authorization = []toolrunner.AuthRequirement{{ProviderType: "oauth2", ProviderID: "google", Scopes: need}}
		return tool{d, func(ctx context.Context, c toolrunner.Call) (any, error) {
			tok := c.Tokens["google"]
			p.toolToken.Store(tok, true)
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, p.emuURL+"/userinfo", nil)
			req.Header.Set("Authorization", "Bearer "+tok)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return nil, toolrunner.Errorf(toolrunner.KindUpstream, true, "userinfo: %v", err)
			}
			defer resp.Body.Close()
			var u struct{ Email string }
			if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&u) != nil {
				return nil, toolrunner.Errorf(toolrunner.KindUpstream, false, "userinfo: %s", resp.Status)
			}
			return u.Email, nil
		}}
	}
	reg := toolrunner.NewRegistry()
	if err := reg.Register(userinfo(scopeRead), userinfo(scopeWrite)); err != nil {
		t.Fatal(err)
	}
	hcfg := hookproxy.DefaultConfig()
	hcfg.Egress = egress.AllowLoopback()
	runner := toolrunner.New(toolrunner.DefaultConfig(), reg, hookproxy.New(hcfg, log), noHooks{}, svc, svc, pub, log)
	trApp := httpapi.NewApp(log)
	toolrunner.NewServer(runner, access, httpx.TrustedProxies{}).Register(trApp)
	p.trURL = serve(t, trApp)

	p.web = linkbrowser.New(nil)
	p.browser = p.web.HTTP
	t.Cleanup(p.browser.CloseIdleConnections)

	// The organization, its users and its provider, through the admin API.
	p.org = p.must(201, "POST", "/api/v1/orgs", bootKey, map[string]any{"name": "acme"})["id"].(string)
	p.project = p.must(201, "POST", "/api/v1/orgs/"+p.org+"/projects", bootKey, map[string]any{"name": "docs"})["id"].(string)
	for _, u := range []struct{ id, role string }{{"alice", "admin"}, {"bob", "member"}, {"carol", "member"}} {
		p.must(201, "PUT", "/api/v1/orgs/"+p.org+"/members/"+u.id, bootKey, map[string]any{"role": u.role})
		p.must(201, "PUT", "/api/v1/orgs/"+p.org+"/projects/"+p.project+"/members/"+u.id, bootKey, map[string]any{"role": "member"})
	}
	keyOf := func(user string) string {
		k := p.must(201, "POST", "/api/v1/orgs/"+p.org+"/api_keys", bootKey, map[string]any{"name": user, "user_id": user})["key"].(string)
		p.seen("an API key", k)
		return k
	}
	p.alice, p.bob, p.carol = keyOf("alice"), keyOf("bob"), keyOf("carol")
	p.keys = map[string]string{"alice": p.alice, "bob": p.bob, "carol": p.carol}
	p.must(201, "POST", "/api/v1/orgs/"+p.org+"/auth_providers", p.alice, map[string]any{"id": "google", "type": "google",
		"client_id": clientID, "client_secret": clientSecret, "authorize_url": p.emuURL + "/authorize", "token_url": p.emuURL + "/token",
		"revoke_url": p.emuURL + "/revoke", "userinfo_url": p.emuURL + "/userinfo", "scopes_default": []string{"openid", "email"}})
	return p
}

type tool struct {
	def toolrunner.Definition
	run func(context.Context, toolrunner.Call) (any, error)
}

func (t tool) Definition() toolrunner.Definition                       { return t.def }
func (t tool) Run(ctx context.Context, c toolrunner.Call) (any, error) { return t.run(ctx, c) }

// call sends a JSON request with a bearer key and returns the status and
// the envelope's data.
func (p *platform) call(method, u, key string, body any) (int, json.RawMessage) {
	p.t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, u, rd)
	if err != nil {
		p.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		p.t.Fatalf("%s %s: %v", method, u, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var env struct {
		Msg  string          `json:"msg"`
		Data json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(raw, &env); err != nil {
		p.t.Fatalf("%s %s: %d %s", method, u, resp.StatusCode, raw)
	}
	if resp.StatusCode >= 300 {
		return resp.StatusCode, json.RawMessage(fmt.Sprintf("%q", env.Msg))
	}
	return resp.StatusCode, env.Data
}

// must is call on the control plane, expecting status.
func (p *platform) must(status int, method, path, key string, body any) map[string]any {
	p.t.Helper()
	st, data := p.call(method, p.cpURL+path, key, body)
	if st != status {
		p.t.Fatalf("%s %s: %d, want %d: %s", method, path, st, status, data)
	}
	var m map[string]any
	_ = json.Unmarshal(data, &m)
	return m
}

type result struct {
	Success bool `json:"success"`
	Output  any  `json:"output"`
	Error   *struct {
		Kind     string `json:"kind"`
		CanRetry bool   `json:"can_retry"`
		Message  string `json:"message"`
	} `json:"error"`
	Authorization *struct {
		Provider       string    `json:"provider"`
		Scopes         []string  `json:"scopes"`
		URL            string    `json:"url"`
		StateExpiresAt time.Time `json:"state_expires_at"`
	} `json:"authorization"`
}

// execute runs a tool for bob through the tool runner's API; any answer
// but 200 fails the test (never a 5xx).
func (p *platform) execute(t *testing.T, name string) result {
	t.Helper()
	st, data := p.call("POST", p.trURL+"/api/v1/orgs/"+p.org+"/projects/"+p.project+"/tools/execute", p.bob,
		map[string]any{"tool_name": name, "input": map[string]any{}})
	if st != 200 {
		t.Fatalf("execute %s: %d %s", name, st, data)
	}
	var r result
	if err := json.Unmarshal(data, &r); err != nil {
		t.Fatal(err)
	}
	return r
}

// authorizationRequired checks the answer asks for scopes of google and
// returns its URL: the platform's start page (a ticket is in it).
func (p *platform) authorizationRequired(t *testing.T, r result, scopes ...string) string {
	t.Helper()
	if r.Success || r.Error == nil || r.Error.Kind != toolrunner.KindAuthorization || !r.Error.CanRetry || r.Authorization == nil {
		t.Fatalf("want AUTHORIZATION_REQUIRED, got %+v", r)
	}
	a := r.Authorization
	if a.Provider != "google" || !slices.Equal(a.Scopes, scopes) || !strings.HasPrefix(a.URL, p.cpURL+"/api/v1/oauth/start/") ||
		a.StateExpiresAt.Before(time.Now().Add(9*time.Minute)) || a.StateExpiresAt.After(time.Now().Add(11*time.Minute)) {
		t.Fatalf("authorization %+v, want google %v", a, scopes)
	}
	p.seen("an authorization URL", a.URL)
	return a.URL
}

// begin opens a start link in the browser, signed in with key when the
// page asks, and clicks Continue: the provider's authorization URL.
func (p *platform) begin(t *testing.T, startURL, key string) string {
	t.Helper()
	authURL, err := p.web.Continue(context.Background(), startURL, key)
	if err != nil || !strings.HasPrefix(authURL, p.emuURL+"/authorize?") {
		t.Fatalf("start page: %q %v", authURL, err)
	}
	u, _ := url.Parse(authURL)
	p.seen("a state", u.Query().Get("state"))
	p.seen("an authorization URL", authURL)
	return authURL
}

var csrfRe = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// consent goes through the start link in the browser (signed in as the
// user of key), chooses the account at the provider and allows; it returns
// where the provider sends the browser back.
func (p *platform) consent(t *testing.T, startURL, key, account string) string {
	t.Helper()
	return p.consentAt(t, p.browser, p.begin(t, startURL, key), account)
}

// consentAt is a browser at the provider's authorization URL, allowing as
// account.
func (p *platform) consentAt(t *testing.T, browser *http.Client, authURL, account string) string {
	t.Helper()
	resp, err := browser.Get(authURL)
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	m := csrfRe.FindSubmatch(page)
	if resp.StatusCode != 200 || m == nil || !strings.Contains(string(page), "Allow") {
		t.Fatalf("consent page: %d %s", resp.StatusCode, page)
	}
	resp, err = browser.PostForm(authURL, url.Values{"csrf": {string(m[1])}, "user": {account}, "decision": {"allow"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	loc := resp.Header.Get("Location")
	if (resp.StatusCode != http.StatusFound && resp.StatusCode != http.StatusSeeOther) || !strings.HasPrefix(loc, p.cpURL+"/api/v1/oauth/callback?") {
		t.Fatalf("consent: %d to %q", resp.StatusCode, loc)
	}
	q, _ := url.Parse(loc)
	p.seen("a code", q.Query().Get("code"))
	p.seen("a state", q.Query().Get("state"))
	return loc
}

// open is the browser opening a page of the platform.
func (p *platform) open(t *testing.T, u string) (int, string) {
	t.Helper()
	resp, err := p.browser.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

type connItem struct {
	Provider  string    `json:"provider"`
	Scopes    []string  `json:"scopes"`
	Connected bool      `json:"connected"`
	Status    string    `json:"status"`
	UpdatedAt time.Time `json:"updated_at"`
}

// connections is the listing of user's connections, as the user sees it;
// it fails when the listing shows a secret.
func (p *platform) connections(t *testing.T, user, key string) ([]connItem, string) {
	t.Helper()
	st, data := p.call("GET", p.cpURL+"/api/v1/orgs/"+p.org+"/projects/"+p.project+"/users/"+user+"/connections", key, nil)
	if st != 200 {
		t.Fatalf("listing: %d %s", st, data)
	}
	for s, what := range p.secretList() {
		if strings.Contains(string(data), s) {
			t.Fatalf("the listing shows %s: %s", what, data)
		}
	}
	var d struct{ Items []connItem }
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatal(err)
	}
	return d.Items, string(data)
}

// streamMessages returns every message of the events stream: audit and
// execution events alike.
func (p *platform) streamMessages(t *testing.T) []*jetstream.RawStreamMsg {
	t.Helper()
	ctx := context.Background()
	s, err := p.js.Stream(ctx, schemas.StreamEvents)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var out []*jetstream.RawStreamMsg
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, m)
	}
	return out
}

// TestE2EOAuth runs issue 10's flow over real HTTP end to end: the tool
// runner asks for authorization, the user consents at the provider, the
// control plane's callback stores the connection, the tool then uses the
// token at the provider; incremental scopes, a single refresh under 20
// concurrent executions, a revoked grant, refused callbacks, and no secret
// in any event, log line or stored row of either store.
func TestE2EOAuth(t *testing.T) {
	p := newPlatform(t)
	var firstCallback, bobCallback string

	step(t, "a link carried to another browser connects nothing", func(t *testing.T) {
		// bob's tool call asks him to connect; the link reaches carol.
		link := p.authorizationRequired(t, p.execute(t, "E2E.WhoAmI"), scopeRead)
		ctx := context.Background()
		carol := linkbrowser.New(nil)
		defer carol.HTTP.CloseIdleConnections()
		page, err := carol.Get(ctx, link)
		if err != nil || page.Status != 200 || page.Continue != "" || !strings.Contains(page.Body, "This link was made for user bob") {
			t.Fatalf("start page in carol's browser: %d %v", page.Status, err)
		}
		if page, err = carol.SignIn(ctx, link, p.carol); !errors.Is(err, linkbrowser.ErrUnexpected) || page.Status != 403 {
			t.Fatalf("carol signs in on bob's link: %d %v", page.Status, err)
		}
		if _, err := carol.Continue(ctx, link, ""); !errors.Is(err, linkbrowser.ErrUnexpected) {
			t.Fatalf("carol continues bob's link: %v", err)
		}
		// bob continues, and the provider's page is carried to carol, who
		// consents with her account: the callback in her browser is refused.
		authURL := p.begin(t, link, p.bob)
		cb := p.consentAt(t, carol.HTTP, authURL, "u-carol")
		page, err = carol.Get(ctx, cb)
		if err != nil || page.Status != 400 || !strings.Contains(page.Body, "started in another browser") || !strings.Contains(page.Body, "Nothing was connected") {
			t.Fatalf("callback in carol's browser: %d %v %s", page.Status, err, page.Body)
		}
		if items, _ := p.connections(t, "bob", p.bob); len(items) != 0 {
			t.Fatalf("bob is connected: %+v", items)
		}
		time.Sleep(200 * time.Millisecond)
		if n := len(p.connectionEvents(t)); n != 0 || p.emu.Stats().CodeGrants != 0 {
			t.Fatalf("%d connection events, %d codes exchanged", n, p.emu.Stats().CodeGrants)
		}
		if r := p.execute(t, "E2E.WhoAmI"); r.Success {
			t.Fatalf("bob's tool ran with carol's account: %+v", r)
		}
	})

	step(t, "a full flow", func(t *testing.T) {
		authURL := p.authorizationRequired(t, p.execute(t, "E2E.WhoAmI"), scopeRead)
		if items, _ := p.connections(t, "bob", p.bob); len(items) != 0 {
			t.Fatalf("connected before consenting: %+v", items)
		}
		firstCallback = p.consent(t, authURL, p.bob, "u-bob")
		if st, body := p.open(t, firstCallback); st != 200 || !strings.Contains(body, "Connected to google as Bob &lt;bob@corp.example&gt;, for platform user bob. You can close this window.") {
			t.Fatalf("callback: %d %s", st, body)
		}
		r := p.execute(t, "E2E.WhoAmI")
		if !r.Success || r.Output != "bob@corp.example" {
			t.Fatalf("after consenting: %+v", r)
		}
	})

	step(t, "a missing scope asks incrementally", func(t *testing.T) {
		link := p.authorizationRequired(t, p.execute(t, "E2E.WhoAmIWrite"), scopeWrite)
		authURL := p.begin(t, link, p.bob)
		u, _ := url.Parse(authURL)
		if asked := strings.Fields(u.Query().Get("scope")); !slices.Contains(asked, scopeRead) || !slices.Contains(asked, scopeWrite) {
			t.Fatalf("the URL asks for %v, want what was granted and %s", asked, scopeWrite)
		}
		bobCallback = p.consentAt(t, p.browser, authURL, "u-bob")
		if st, body := p.open(t, bobCallback); st != 200 || !strings.Contains(body, "Connected to google") {
			t.Fatalf("callback: %d %s", st, body)
		}
		items, _ := p.connections(t, "bob", p.bob)
		if len(items) != 1 || !items[0].Connected || !slices.Contains(items[0].Scopes, scopeRead) || !slices.Contains(items[0].Scopes, scopeWrite) {
			t.Fatalf("the connection does not hold both scopes: %+v", items)
		}
		for _, name := range []string{"E2E.WhoAmIWrite", "E2E.WhoAmI"} {
			if r := p.execute(t, name); !r.Success || r.Output != "bob@corp.example" {
				t.Fatalf("%s: %+v", name, r)
			}
		}
	})

	step(t, "one refresh for 20 concurrent executions", func(t *testing.T) {
		time.Sleep(dueAfter) // the access token now expires within 60 s
		before, reqs := p.emu.Stats().RefreshGrants, p.refreshReqs.Load()
		const n = 20
		var wg sync.WaitGroup
		start := make(chan struct{})
		res := make([]result, n)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				res[i] = p.execute(t, "E2E.WhoAmI")
			}()
		}
		close(start)
		wg.Wait()
		for i, r := range res {
			if !r.Success || r.Output != "bob@corp.example" {
				t.Fatalf("execution %d: %+v", i, r)
			}
		}
		if got, calls := p.emu.Stats().RefreshGrants-before, p.refreshReqs.Load()-reqs; got != 1 || calls != 1 {
			t.Fatalf("%d refresh grants (%d requests) for %d concurrent executions, want 1", got, calls, n)
		}
	})

	step(t, "refused callbacks store nothing", func(t *testing.T) {
		_, before := p.connections(t, "bob", p.bob)
		grants, events := p.emu.Stats().CodeGrants, len(p.connectionEvents(t))
		callback := p.cpURL + "/api/v1/oauth/callback?"
		stateOf := func(cb string) string { u, _ := url.Parse(cb); return u.Query().Get("state") }
		codeOf := func(cb string) string { u, _ := url.Parse(cb); return u.Query().Get("code") }
		forged := make([]byte, 96)
		_, _ = rand.Read(forged)
		// carol starts her own flow, through the admin API.
		authorize := func(user, key string) string {
			u := p.must(200, "POST", "/api/v1/orgs/"+p.org+"/projects/"+p.project+"/users/"+user+"/connections/google/authorize", key,
				map[string]any{"scopes": []string{scopeRead}})["url"].(string)
			p.seen("an authorization URL", u)
			return u
		}
		carolAuth := authorize("carol", p.carol)
		tests := []struct {
			name string
			url  func(t *testing.T) string
			says string
		}{
			// The callback spent the browser's bind cookie (the state's
			// nonce is spent too: controlplane's tests replay with the cookie).
			{"replayed", func(*testing.T) string { return bobCallback }, "Nothing was connected"},
			{"forged", func(*testing.T) string {
				return callback + url.Values{"code": {codeOf(firstCallback)}, "state": {base64.RawURLEncoding.EncodeToString(forged)}}.Encode()
			}, "Invalid authorization request"},
			{"expired", func(t *testing.T) string {
				cb := p.consent(t, authorize("bob", p.bob), p.bob, "u-bob")
				t.Cleanup(p.clock.Reset)
				p.clock.Advance(11 * time.Minute)
				return cb
			}, "expired"},
			{"cross-user", func(t *testing.T) string {
				// bob's code with carol's state: carol's PKCE verifier does
				// not fit the challenge of bob's flow.
				bobCB := p.consent(t, authorize("bob", p.bob), p.bob, "u-bob")
				carolCB := p.consent(t, carolAuth, p.carol, "u-carol")
				return callback + url.Values{"code": {codeOf(bobCB)}, "state": {stateOf(carolCB)}}.Encode()
			}, "refused this authorization code"},
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				if st, body := p.open(t, tc.url(t)); st != 400 || !strings.Contains(body, tc.says) {
					t.Fatalf("%d %s", st, body)
				}
			})
		}
		if _, after := p.connections(t, "bob", p.bob); after != before {
			t.Fatalf("bob's connection changed:\n%s\n%s", before, after)
		}
		if items, _ := p.connections(t, "carol", p.carol); len(items) != 0 {
			t.Fatalf("carol has a connection: %+v", items)
		}
		time.Sleep(200 * time.Millisecond)
		if g, ev := p.emu.Stats().CodeGrants, len(p.connectionEvents(t)); g != grants || ev != events {
			t.Fatalf("%d codes exchanged, %d connection events after refused callbacks", g-grants, ev-events)
		}
	})

	step(t, "a grant revoked at the provider", func(t *testing.T) {
		p.emu.RevokeUser("u-bob")
		time.Sleep(dueAfter)
		p.authorizationRequired(t, p.execute(t, "E2E.WhoAmI"), scopeRead)
		items, _ := p.connections(t, "bob", p.bob)
		if len(items) != 1 || items[0].Connected || items[0].Status != "broken" {
			t.Fatalf("listing after invalid_grant: %+v", items)
		}
	})

	// Every event of the stream, every log line and every stored row.
	msgs := p.streamMessages(t)
	var audits, execs int
	for _, m := range msgs {
		switch {
		case strings.HasSuffix(m.Subject, "."+string(schemas.KindExecution)):
			execs++
		default:
			audits++
		}
	}
	if execs < 26 || len(p.connectionEvents(t)) < 2 || p.tokensIssued.Load() < 3 {
		t.Fatalf("%d execution events, %d connection events, %d tokens issued: the scan would prove little",
			execs, len(p.connectionEvents(t)), p.tokensIssued.Load())
	}
	secrets := p.secretList()
	if n := countOf(secrets, "a refresh token"); n < 3 {
		t.Fatalf("%d refresh tokens seen", n)
	}
	// The tokens scanned for are those the tools used.
	p.toolToken.Range(func(k, _ any) bool {
		if secrets[k.(string)] != "an access token" {
			t.Fatalf("a tool used a token the provider's answers did not show")
		}
		return true
	})
	t.Run("no secret in any event or log line", func(t *testing.T) {
		for _, m := range msgs {
			hdr, _ := json.Marshal(m.Header)
			p.noSecret(t, "event "+m.Subject, string(m.Data)+string(hdr))
			// decoded too: the scan does not depend on the encoding.
			var decoded any
			var err error
			if strings.HasSuffix(m.Subject, "."+schemas.KindAudit) {
				decoded, err = schemas.UnmarshalAuditEvent(m.Data)
			} else {
				decoded, err = schemas.UnmarshalExecutionEvent(m.Data)
			}
			if err != nil {
				t.Fatalf("event %s: %v", m.Subject, err)
			}
			b, _ := json.Marshal(decoded)
			p.noSecret(t, "decoded event "+m.Subject, string(b))
		}
		p.noSecret(t, "the log", p.logs.String())
	})

	for _, b := range []struct {
		name string
		open func(t *testing.T) store
	}{
		{"sqlite", func(t *testing.T) store {
			s, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "audit.db"))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		}},
		{"clickhouse", func(t *testing.T) store {
			s, err := clickhouse.Open(context.Background(), testenv.ClickHouse(t))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		}},
	} {
		t.Run("no secret stored in "+b.name, func(t *testing.T) {
			s := b.open(t)
			p.ingest(t, s, b.name, audits, execs)
			org := uuid.MustParse(p.org)
			var rows []any
			q := auditstore.Query{OrgID: org, Limit: auditstore.MaxLimit}
			for {
				pg, err := s.ListAudit(context.Background(), q)
				if err != nil {
					t.Fatal(err)
				}
				for _, it := range pg.Items {
					rows = append(rows, it)
				}
				if !pg.HasMore {
					break
				}
				q.After = pg.Next()
			}
			eq := auditstore.ExecQuery{OrgID: org, Limit: auditstore.MaxLimit}
			var nexec int
			for {
				pg, err := s.ListExecutions(context.Background(), eq)
				if err != nil {
					t.Fatal(err)
				}
				for _, it := range pg.Items {
					rows = append(rows, it)
				}
				nexec += len(pg.Items)
				if !pg.HasMore {
					break
				}
				eq.After = pg.Next()
			}
			if nexec != execs {
				t.Fatalf("%d executions stored, want %d", nexec, execs)
			}
			for _, r := range rows {
				b, _ := json.Marshal(r)
				p.noSecret(t, "a stored row", string(b))
			}
			// The rows are what the scan claims: the connection's
			// scopes are in them, the authorization answers too.
			all, _ := json.Marshal(rows)
			if !strings.Contains(string(all), scopeWrite) || !strings.Contains(string(all), toolrunner.KindAuthorization) {
				t.Fatalf("the stored rows lack the connection or the refused executions")
			}
		})
	}
}

// step runs a subtest the next ones build on: the test stops when it fails.
func step(t *testing.T, name string, f func(t *testing.T)) {
	t.Helper()
	if !t.Run(name, f) {
		t.FailNow()
	}
}

type store interface {
	auditstore.Store
	auditstore.ExecutionStore
}

func countOf(m map[string]string, what string) int {
	n := 0
	for _, w := range m {
		if w == what {
			n++
		}
	}
	return n
}

func (p *platform) noSecret(t *testing.T, where, text string) {
	t.Helper()
	for s, what := range p.secretList() {
		if strings.Contains(text, s) {
			t.Errorf("%s holds %s (%.12s…)", where, what, s)
		}
	}
}

// connectionEvents are the USER_CONNECTION audit events of the stream.
func (p *platform) connectionEvents(t *testing.T) []schemas.AuditEvent {
	t.Helper()
	var out []schemas.AuditEvent
	for _, m := range p.streamMessages(t) {
		if !strings.HasSuffix(m.Subject, "."+schemas.KindAudit) {
			continue
		}
		ev, err := schemas.UnmarshalAuditEvent(m.Data)
		if err != nil {
			t.Fatalf("audit event: %v", err)
		}
		if ev.ResourceType != nil && *ev.ResourceType == schemas.ResourceTypeUserConnection {
			out = append(out, ev)
		}
	}
	return out
}

// ingest runs the audit and execution ingesters into s until it holds the
// organization's events, then stops them.
func (p *platform) ingest(t *testing.T, s store, name string, audits, execs int) {
	t.Helper()
	cfg := ingest.DefaultConfig()
	cfg.FlushInterval = 50 * time.Millisecond
	cfg.DrainTimeout = time.Second
	log := slog.New(slog.NewTextHandler(p.logs, nil))
	acfg, ecfg := cfg, cfg
	acfg.Durable, ecfg.Durable = "e2e-audit-"+name, "e2e-exec-"+name
	inA, err := ingest.NewAudit(p.nc, s, acfg, log)
	if err != nil {
		t.Fatal(err)
	}
	inE, err := ingest.NewExecution(p.nc, s, ecfg, log)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 2)
	go func() { done <- inA.Run(ctx) }()
	go func() { done <- inE.Run(ctx) }()
	defer func() {
		cancel()
		for range 2 {
			if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
				t.Errorf("ingester: %v", err)
			}
		}
	}()
	testenv.Eventually(t, 60*time.Second, func() string {
		return fmt.Sprintf("%s: audit %+v, executions %+v, want %d and %d", name, inA.Stats(), inE.Stats(), audits, execs)
	}, func() bool {
		return inA.Stats().Received >= uint64(audits) && inE.Stats().Received >= uint64(execs) &&
			inA.Stats().Stored+inE.Stats().Stored >= uint64(audits+execs)
	})
}
