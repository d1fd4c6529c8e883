package controlplane

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/auditrail/auditrail/controlplane/cpstate"
	"github.com/auditrail/auditrail/controlplane/linkbrowser"
	"github.com/auditrail/auditrail/internal/egress"
	"github.com/auditrail/auditrail/internal/emulators/oauth"
	"github.com/auditrail/auditrail/internal/oauthflow"
	"github.com/auditrail/auditrail/internal/testenv"
	"github.com/auditrail/auditrail/schemas"
)

func (e *oauthEnv) connPath(user string) string {
	return e.projectPath() + "/users/" + user + "/connections"
}
func (e *oauthEnv) projectPath() string { return "/api/v1/orgs/" + e.org + "/projects/" + e.project }

const emuClientSecret = "emulator-client-secret-9d8e"

// oauthEnv is a control plane served over real HTTP with an OAuth flow,
// and the OAuth emulator (auto-approve) configured as provider "corp".
type oauthEnv struct {
	*cpEnv
	t      *testing.T
	emu    *oauth.Server
	emuURL string
	base   string // the platform, http://127.0.0.1:port
	clock  *testenv.OffsetClock
	logs   *testenv.SyncBuffer
	// refreshCalls counts the refresh_token requests the provider received.
	refreshCalls atomic.Int64
	// secrets seen during the test, which no event nor log line may hold.
	seenMu  sync.Mutex
	secrets []string
	// carol's API key; keys of every user, by user id.
	carol string
	keys  map[string]string
	// web is the users' browser (one cookie jar): it signs in as the user
	// a link was made for.
	web *linkbrowser.Browser
}

func newOAuthEnv(t *testing.T, natsURL string, opts ...nodeOpts) *oauthEnv {
	t.Helper()
	logs := &testenv.SyncBuffer{}
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	var o nodeOpts
	if len(opts) > 0 {
		o = opts[0]
	}
	o.log = log
	e := &oauthEnv{t: t, cpEnv: newCPEnv(t, natsURL, egress.AllowLoopback(), o), clock: &testenv.OffsetClock{}, logs: logs}
	e.svc.log = log
	emu, err := oauth.New(oauth.Config{Clients: []oauth.Client{{ID: "corp-client", Secret: emuClientSecret}},
		Users: []oauth.User{{ID: "u-1", Email: "someone@corp.example", Name: "Some One"}}, AutoApprove: true, RotateRefreshTokens: true})
	if err != nil {
		t.Fatal(err)
	}
	h := emu.Handler()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/token" && r.Method == http.MethodPost && r.ParseForm() == nil && r.PostForm.Get("grant_type") == "refresh_token" {
			e.refreshCalls.Add(1) // attempts, successful or not
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	e.emu, e.emuURL = emu, srv.URL

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = e.app.Listener(ln) }()
	t.Cleanup(func() { _ = e.app.Shutdown(); <-done })
	e.base = "http://" + ln.Addr().String()
	flow, err := oauthflow.New(oauthflow.Config{RedirectURL: e.base + "/api/v1/oauth/callback", StateTTL: 10 * time.Minute,
		HTTPClient: &http.Client{Timeout: 5 * time.Second}, Now: e.clock.Now}, e.svc.sealer)
	if err != nil {
		t.Fatal(err)
	}
	e.svc.UseOAuth(flow)
	e.must(201, "POST", e.providers(), e.alice, map[string]any{"id": "corp", "type": "oauth2", "client_id": "corp-client",
		"client_secret": emuClientSecret, "authorize_url": e.emuURL + "/authorize", "token_url": e.emuURL + "/token",
		"revoke_url": e.emuURL + "/revoke", "userinfo_url": e.emuURL + "/userinfo", "api_base_url": e.emuURL + "/api",
		"scopes_default": []string{"openid", "email"}})
	e.seen(emuClientSecret)
	e.carol = e.must(201, "POST", "/api/v1/orgs/"+e.org+"/api_keys", bootKey, map[string]any{"name": "c", "user_id": "carol"}).field("key")
	e.keys = map[string]string{"alice": e.alice, "bob": e.bob, "carol": e.carol}
	e.seen(e.alice, e.bob, e.carol)
	e.web = linkbrowser.New(nil)
	t.Cleanup(e.web.HTTP.CloseIdleConnections)
	return e
}

func (e *oauthEnv) seen(s ...string) {
	e.seenMu.Lock()
	defer e.seenMu.Unlock()
	for _, v := range s {
		if v != "" {
			e.secrets = append(e.secrets, v)
		}
	}
}

// authorize asks for the link that starts the user's flow, with key: the
// platform's start page.
func (e *oauthEnv) authorize(user, key string, scopes ...string) (startURL string, asked []string) {
	e.t.Helper()
	r := e.must(200, "POST", e.connPath(user)+"/corp/authorize", key, map[string]any{"scopes": scopes})
	var d struct {
		URL            string    `json:"url"`
		Scopes         []string  `json:"scopes"`
		Provider       string    `json:"provider"`
		StateExpiresAt time.Time `json:"state_expires_at"`
	}
	if err := json.Unmarshal(r.Data, &d); err != nil || d.Provider != "corp" || d.StateExpiresAt.Before(time.Now().Add(9*time.Minute)) {
		e.t.Fatalf("authorize: %s %v", r.Data, err)
	}
	if !strings.HasPrefix(d.URL, e.base+"/api/v1/oauth/start/") {
		e.t.Fatalf("the link %s is not the platform's start page", d.URL)
	}
	e.seen(d.URL)
	return d.URL, d.Scopes
}

// ticketOf opens the ticket of a start link.
func (e *oauthEnv) ticketOf(startURL string) oauthflow.Ticket {
	e.t.Helper()
	t, err := e.svc.flow.OpenTicket(startURL[strings.LastIndex(startURL, "/")+1:])
	if err != nil {
		e.t.Fatalf("ticket of %s: %v", startURL, err)
	}
	return t
}

// begin opens a start link in the users' browser, signed in as the user
// it was made for, and clicks Continue: the provider's authorization URL.
func (e *oauthEnv) begin(startURL string) string {
	e.t.Helper()
	authURL, err := e.web.Continue(context.Background(), startURL, e.keys[e.ticketOf(startURL).User])
	if err != nil {
		e.t.Fatalf("start page: %v", err)
	}
	if strings.HasPrefix(authURL, e.base) || !strings.Contains(authURL, "/authorize?") {
		e.t.Fatalf("authorization URL %s is not the provider's", authURL)
	}
	u, _ := url.Parse(authURL)
	e.seen(u.Query().Get("state"))
	return authURL
}

var noRedirect = &http.Client{Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// consent goes through the start link and the emulator (which approves at
// once) and returns where the provider sends the browser back: the
// callback URL.
func (e *oauthEnv) consent(startURL string) string {
	e.t.Helper()
	return e.approve(e.begin(startURL))
}

// approve opens the provider's authorization URL; it returns the callback URL.
func (e *oauthEnv) approve(authURL string) string {
	e.t.Helper()
	resp, err := noRedirect.Get(authURL)
	if err != nil {
		e.t.Fatal(err)
	}
	resp.Body.Close()
	loc := resp.Header.Get("Location")
	if resp.StatusCode != http.StatusFound || !strings.HasPrefix(loc, e.base+"/api/v1/oauth/callback?") {
		e.t.Fatalf("consent: %d to %q", resp.StatusCode, loc)
	}
	u, _ := url.Parse(loc)
	e.seen(u.Query().Get("code"), u.Query().Get("state"))
	return loc
}

// browse opens a page of the platform in the users' browser.
func (e *oauthEnv) browse(u string) (int, string, http.Header) {
	e.t.Helper()
	p, err := e.web.Get(context.Background(), u)
	if err != nil {
		e.t.Fatal(err)
	}
	return p.Status, p.Body, p.Header
}

// connect runs the whole flow for user, started with key.
func (e *oauthEnv) connect(user, key string, scopes ...string) string {
	e.t.Helper()
	startURL, _ := e.authorize(user, key, scopes...)
	cb := e.consent(startURL)
	if st, body, _ := e.browse(cb); st != 200 || !strings.Contains(body, "for platform user "+user+". You can close this window.") {
		e.t.Fatalf("callback: %d %s", st, body)
	}
	e.remember(user)
	return cb
}

// cookie is the value of a cookie the users' browser sends to the
// callback ("" when none).
func (e *oauthEnv) cookie(name string) string {
	u, _ := url.Parse(e.base + "/api/v1/oauth/callback")
	for _, c := range e.web.HTTP.Jar.Cookies(u) {
		if c.Name == name {
			return c.Value
		}
	}
	return ""
}

func (e *oauthEnv) setCookie(name, value string) {
	u, _ := url.Parse(e.base + "/api/v1/oauth/")
	e.web.HTTP.Jar.SetCookies(u, []*http.Cookie{{Name: name, Value: value, Path: "/api/v1/oauth/"}})
}

// remember adds the user's stored tokens to the secrets to look for.
func (e *oauthEnv) remember(user string) cpstate.ConnectionTokens {
	_, _, t, err := e.svc.openConn(cpstate.ConnKey(e.org, e.project, user, "corp"))
	if err != nil {
		e.t.Fatalf("connection of %s: %v", user, err)
	}
	e.seen(t.AccessToken, t.RefreshToken)
	return t
}

type connItem struct {
	Provider  string                     `json:"provider"`
	Scopes    []string                   `json:"scopes"`
	Connected bool                       `json:"connected"`
	Status    string                     `json:"status"`
	Account   *cpstate.ConnectionAccount `json:"account"`
	ExpiresAt *time.Time                 `json:"expires_at"`
}

func (e *oauthEnv) list(user, key string) []connItem {
	e.t.Helper()
	r := e.must(200, "GET", e.connPath(user), key, nil)
	var d struct{ Items []connItem }
	if err := json.Unmarshal(r.Data, &d); err != nil {
		e.t.Fatal(err)
	}
	for _, tok := range e.secrets {
		if strings.Contains(string(r.Data), tok) {
			e.t.Fatalf("the listing shows a token: %s", r.Data)
		}
	}
	return d.Items
}

// expireSoon makes the stored access token expire in 30 s (it is valid for
// an hour at the emulator): the next Connection refreshes it.
func (e *oauthEnv) expireSoon(user string) {
	e.t.Helper()
	key := cpstate.ConnKey(e.org, e.project, user, "corp")
	var u cpstate.UserConnection
	rev, err := e.state.Get(key, &u)
	if err != nil {
		e.t.Fatal(err)
	}
	exp := time.Now().Add(30 * time.Second).UTC()
	u.ExpiresAt = &exp
	if _, err := e.state.UpdateConn(context.Background(), key, u, rev); err != nil {
		e.t.Fatal(err)
	}
}

// clean fails when an event or a log line holds a token, code, state or
// client secret seen during the test.
func (e *oauthEnv) clean() {
	e.t.Helper()
	e.seenMu.Lock()
	secrets := slices.Clone(e.secrets)
	e.seenMu.Unlock()
	noneHolds(e.t, e.nc, secrets...)
	logs := e.logs.String()
	for _, s := range secrets {
		if strings.Contains(logs, s) {
			e.t.Fatalf("a log line holds %q:\n%s", s, logs)
		}
	}
}

func (e *oauthEnv) connEvents() []schemas.AuditEvent {
	return eventsOf(e.t, e.nc, schemas.ResourceTypeUserConnection)
}

func TestOAuthFlowConnectsAndMergesScopes(t *testing.T) {
	srv, _, _ := testenv.NATS(t)
	e := newOAuthEnv(t, srv.ClientURL())
	ctx := context.Background()
	if ok, _ := e.svc.ConnectionStatus(e.org, e.project, "bob", "corp"); ok {
		t.Fatal("connected before any flow")
	}
	if _, err := e.svc.Connection(ctx, e.org, e.project, "bob", "corp"); !errors.Is(err, oauthflow.ErrNotConnected) {
		t.Fatalf("Connection before any flow: %v", err)
	}
	if _, _, err := e.svc.AuthorizationURL(ctx, e.org, e.project, "bob", "nope", nil); !errors.Is(err, oauthflow.ErrNoProvider) {
		t.Fatalf("AuthorizationURL of an unknown provider: %v", err)
	}

	// bob starts the flow for himself.
	startURL, asked := e.authorize("bob", e.bob, "docs.read")
	authURL := e.begin(startURL)
	if !slices.Equal(asked, []string{"docs.read", "email", "openid"}) || !strings.Contains(authURL, "code_challenge_method=S256") {
		t.Fatalf("asked %v at %s", asked, authURL)
	}
	cb := e.approve(authURL)
	binding := e.cookie(bindCookie)
	st, body, h := e.browse(cb)
	if st != 200 || !strings.Contains(body, "Connected to corp as Some One &lt;someone@corp.example&gt;, for platform user bob. You can close this window.") {
		t.Fatalf("callback: %d %s", st, body)
	}
	if h.Get("Content-Type") != "text/html; charset=utf-8" || h.Get("Cache-Control") != "no-store" || h.Get("Referrer-Policy") != "no-referrer" {
		t.Fatalf("page headers: %v", h)
	}
	q, _ := url.Parse(cb)
	if strings.Contains(body, q.Query().Get("code")) || strings.Contains(body, q.Query().Get("state")) {
		t.Fatal("the page echoes the code or the state")
	}
	first := e.remember("bob")
	items := e.list("bob", e.bob)
	if len(items) != 1 || !items[0].Connected || items[0].Status != "connected" || !slices.Equal(items[0].Scopes, asked) ||
		items[0].Account == nil || items[0].Account.Email != "someone@corp.example" || items[0].ExpiresAt == nil {
		t.Fatalf("listing: %+v", items)
	}
	if ok, scopes := e.svc.ConnectionStatus(e.org, e.project, "bob", "corp"); !ok || !slices.Equal(scopes, asked) {
		t.Fatalf("ConnectionStatus: %v %v", ok, scopes)
	}
	c, err := e.svc.Connection(ctx, e.org, e.project, "bob", "corp")
	if err != nil || c.AccessToken != first.AccessToken || c.APIBaseURL != e.emuURL+"/api" {
		t.Fatalf("Connection: %v (api base %q)", err, c.APIBaseURL)
	}
	if g, err := e.emu.Verify(c.AccessToken); err != nil || !slices.Contains(g.Scopes, "docs.read") {
		t.Fatalf("the provider does not know the token: %v", err)
	}

	// Incremental: asking for more merges with what bob granted.
	startURL, asked = e.authorize("bob", e.bob, "drive.file")
	if !slices.Equal(asked, []string{"docs.read", "drive.file", "email", "openid"}) {
		t.Fatalf("incremental ask: %v", asked)
	}
	if st, body, _ := e.browse(e.consent(startURL)); st != 200 {
		t.Fatalf("second callback: %d %s", st, body)
	}
	e.remember("bob")
	if items := e.list("bob", e.bob); len(items) != 1 || !slices.Equal(items[0].Scopes, asked) {
		t.Fatalf("merged scopes: %+v", items)
	}

	// A replayed callback stores nothing: the callback spent the bind
	// cookie, and with it put back the state's nonce is spent.
	if e.cookie(bindCookie) != "" || binding == "" {
		t.Fatal("the callback left the bind cookie")
	}
	if st, body, _ := e.browse(cb); st != 400 || !strings.Contains(body, "Nothing was connected") {
		t.Fatalf("replay without the cookie: %d %s", st, body)
	}
	e.setCookie(bindCookie, binding)
	if st, body, _ := e.browse(cb); st != 400 || !strings.Contains(body, "already used") {
		t.Fatalf("replay: %d %s", st, body)
	}
	var evs []schemas.AuditEvent
	testenv.Eventually(t, 10*time.Second, "two connection events", func() bool { evs = e.connEvents(); return len(evs) >= 2 })
	time.Sleep(100 * time.Millisecond)
	if evs = e.connEvents(); len(evs) != 2 || evs[0].Action != schemas.AuditActionCreated || evs[1].Action != schemas.AuditActionUpdated {
		t.Fatalf("events: %d", len(evs))
	}
	for _, ev := range evs {
		if ev.PrincipalID != "bob" || ev.PrincipalType != "ACCOUNT" || ev.UserID == nil || *ev.UserID != "bob" ||
			ev.Source != schemas.AuditSourceAPI || *ev.ResourceID != "bob/corp" || !strings.Contains(string(ev.Data), `"account"`) {
			t.Fatalf("event: %+v %s", ev, ev.Data)
		}
	}
	e.clean()
}

func TestOAuthCallbackRefusals(t *testing.T) {
	srv, _, _ := testenv.NATS(t)
	e := newOAuthEnv(t, srv.ClientURL())
	callback := e.base + "/api/v1/oauth/callback?"
	stateOf := func(cb string) string { u, _ := url.Parse(cb); return u.Query().Get("state") }
	codeOf := func(cb string) string { u, _ := url.Parse(cb); return u.Query().Get("code") }
	forged := make([]byte, 96)
	_, _ = rand.Read(forged)

	tests := []struct {
		name   string
		url    func() string
		status int
		says   string
	}{
		{"no state", func() string { return callback + "code=abc" }, 400, "Invalid authorization request"},
		{"forged state", func() string {
			return callback + url.Values{"code": {"abc"}, "state": {base64.RawURLEncoding.EncodeToString(forged)}}.Encode()
		}, 400, "Invalid authorization request"},
		{"tampered state", func() string {
			cb := e.consent(must(e.authorize("bob", e.bob)))
			st := []byte(stateOf(cb))
			i := len(st) / 2
			st[i] = map[bool]byte{true: 'A', false: 'B'}[st[i] != 'A']
			return callback + url.Values{"code": {codeOf(cb)}, "state": {string(st)}}.Encode()
		}, 400, "Invalid authorization request"},
		{"expired state", func() string {
			cb := e.consent(must(e.authorize("bob", e.bob)))
			e.clock.Advance(11 * time.Minute)
			return cb
		}, 400, "expired"},
		{"cross-user code", func() string {
			// carol's state with the code of bob's flow: the PKCE verifier
			// of carol's flow does not fit bob's challenge.
			bobCB := e.consent(must(e.authorize("bob", e.bob)))
			carolCB := e.consent(must(e.authorize("carol", e.alice)))
			return callback + url.Values{"code": {codeOf(bobCB)}, "state": {stateOf(carolCB)}}.Encode()
		}, 400, "refused this authorization code"},
		{"access denied", func() string {
			u, _ := url.Parse(e.begin(must(e.authorize("bob", e.bob))))
			return callback + url.Values{"error": {"access_denied"}, "state": {u.Query().Get("state")}}.Encode()
		}, 400, "denied"},
		{"provider error with markup", func() string {
			u, _ := url.Parse(e.begin(must(e.authorize("bob", e.bob))))
			return callback + url.Values{"error": {"<script>alert(1)</script>"}, "state": {u.Query().Get("state")}}.Encode()
		}, 400, "did not grant access (error)"},
		{"no code", func() string {
			u, _ := url.Parse(e.begin(must(e.authorize("bob", e.bob))))
			return callback + url.Values{"state": {u.Query().Get("state")}}.Encode()
		}, 400, "no code"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			defer e.clock.Reset()
			st, body, h := e.browse(tc.url())
			if st != tc.status || !strings.Contains(body, tc.says) || h.Get("Cache-Control") != "no-store" || strings.Contains(body, "<script>") {
				t.Fatalf("%d %s", st, body)
			}
		})
	}
	// Without a flow configured: 503.
	flow := e.svc.flow
	e.svc.flow = nil
	st, _, _ := e.browse(callback + "state=x&code=y")
	e.svc.flow = flow
	if st != 503 {
		t.Fatalf("without OAuth: %d", st)
	}
	// Nothing was stored nor recorded.
	for _, u := range []string{"bob", "carol"} {
		if items := e.list(u, e.alice); len(items) != 0 {
			t.Fatalf("%s has a connection: %+v", u, items)
		}
	}
	if evs := e.connEvents(); len(evs) != 0 {
		t.Fatalf("%d connection events", len(evs))
	}
	if s := e.emu.Stats(); s.CodeGrants != 0 {
		t.Fatalf("the provider granted %d codes", s.CodeGrants)
	}
	e.clean()
}

func must(u string, _ []string) string { return u }

func TestConnectionRefreshOnceUnderConcurrency(t *testing.T) {
	srv, _, _ := testenv.NATS(t)
	e := newOAuthEnv(t, srv.ClientURL())
	ctx := context.Background()
	e.connect("bob", e.bob, "docs.read")
	old := e.remember("bob")
	e.expireSoon("bob")

	const n = 20
	var (
		wg    sync.WaitGroup
		start = make(chan struct{})
		got   = make([]string, n)
		errs  = make([]error, n)
	)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			c, err := e.svc.Connection(ctx, e.org, e.project, "bob", "corp")
			got[i], errs[i] = c.AccessToken, err
		}()
	}
	close(start)
	wg.Wait()
	for i := range n {
		if errs[i] != nil || got[i] != got[0] || got[i] == old.AccessToken {
			t.Fatalf("call %d: %v (same as the others: %v, the old token: %v)", i, errs[i], got[i] == got[0], got[i] == old.AccessToken)
		}
	}
	if s := e.emu.Stats(); s.RefreshGrants != 1 || e.refreshCalls.Load() != 1 {
		t.Fatalf("%d refresh grants (%d requests) for %d concurrent calls, want 1", s.RefreshGrants, e.refreshCalls.Load(), n)
	}
	if _, err := e.emu.Verify(got[0]); err != nil {
		t.Fatalf("the refreshed token does not verify: %v", err)
	}
	// Persisted: the bucket (not only this instance's memory) holds it.
	if err := e.state.Refetch(ctx, cpstate.ConnKey(e.org, e.project, "bob", "corp")); err != nil {
		t.Fatal(err)
	}
	now := e.remember("bob")
	if now.AccessToken != got[0] || now.RefreshToken == old.RefreshToken {
		t.Fatal("the bucket does not hold the refreshed tokens (rotated refresh token)")
	}
	if ok, _ := e.svc.ConnectionStatus(e.org, e.project, "bob", "corp"); !ok {
		t.Fatal("not connected after the refresh")
	}
	e.clean()
}

// Two instances on one NATS: what one refreshes, the other uses (one of
// them a read-only state, as the tool runner opens it).
func TestConnectionRefreshSharedByInstances(t *testing.T) {
	srv, _, _ := testenv.NATS(t)
	e := newOAuthEnv(t, srv.ClientURL())
	ctx := context.Background()
	ro := newNode(t, srv.ClientURL(), nodeOpts{state: func(c *cpstate.StateConfig) { c.ReadOnly = true }})
	ro.svc.log = e.svc.log
	ro.svc.UseOAuth(e.svc.flow)
	e.connect("bob", e.bob)
	key := cpstate.ConnKey(e.org, e.project, "bob", "corp")

	// The writer refreshes; the reader sees the new token, refreshing nothing.
	e.expireSoon("bob")
	a, err := e.svc.Connection(ctx, e.org, e.project, "bob", "corp")
	if err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, "the reader's mirror holds the refreshed token", func() bool {
		_, _, tk, err := ro.svc.openConn(key)
		return err == nil && tk.AccessToken == a.AccessToken
	})
	if b, err := ro.svc.Connection(ctx, e.org, e.project, "bob", "corp"); err != nil || b.AccessToken != a.AccessToken {
		t.Fatalf("reader: %v", err)
	}
	// The read-only instance (the tool runner) gets a refresh too: the
	// control plane performs and stores it, the reader writes nothing.
	e.expireSoon("bob")
	testenv.Eventually(t, 10*time.Second, "the reader sees the expiry", func() bool {
		var u cpstate.UserConnection
		_, err := ro.state.Get(key, &u)
		return err == nil && dueForRefresh(u, time.Now())
	})
	b, err := ro.svc.Connection(ctx, e.org, e.project, "bob", "corp")
	if err != nil || b.AccessToken == a.AccessToken {
		t.Fatalf("read-only refresh: %v", err)
	}
	// Wait on the writer's mirror, not on Connection: a Connection call while
	// the mirror still holds the old, rotated refresh token would refresh
	// with it (refused, then resolved to the reader's token) and count a
	// third request.
	testenv.Eventually(t, 10*time.Second, "the writer's mirror holds the reader's token", func() bool {
		_, _, tk, err := e.svc.openConn(key)
		return err == nil && tk.AccessToken == b.AccessToken
	})
	if c, err := e.svc.Connection(ctx, e.org, e.project, "bob", "corp"); err != nil || c.AccessToken != b.AccessToken {
		t.Fatalf("writer: %v", err)
	}
	if s := e.emu.Stats(); s.RefreshGrants != 2 || e.refreshCalls.Load() != 2 {
		t.Fatalf("%d refresh grants (%d requests), want 2", s.RefreshGrants, e.refreshCalls.Load())
	}
	// A read-only state writes no key, not even a connection's.
	if _, err := ro.state.UpdateConn(ctx, cpstate.OrgKey(e.org), cpstate.Org{}, 1); !errors.Is(err, cpstate.ErrReadOnly) {
		t.Fatalf("read-only write of an org key: %v", err)
	}
	if _, err := ro.state.UpdateConn(ctx, key, cpstate.UserConnection{}, 1); !errors.Is(err, cpstate.ErrReadOnly) {
		t.Fatalf("read-only write of a connection key: %v", err)
	}
	e.remember("bob")
	e.clean()
}

func TestConnectionInvalidGrantMarksBroken(t *testing.T) {
	srv, _, _ := testenv.NATS(t)
	e := newOAuthEnv(t, srv.ClientURL())
	ctx := context.Background()
	e.connect("bob", e.bob, "docs.read")
	e.expireSoon("bob")
	e.emu.RevokeUser("u-1") // the user revoked the app at the provider
	_, err := e.svc.Connection(ctx, e.org, e.project, "bob", "corp")
	if !errors.Is(err, oauthflow.ErrNotConnected) {
		t.Fatalf("refused refresh: %v", err)
	}
	items := e.list("bob", e.bob)
	if len(items) != 1 || items[0].Connected || items[0].Status != "broken" {
		t.Fatalf("listing after invalid_grant: %+v", items)
	}
	if ok, _ := e.svc.ConnectionStatus(e.org, e.project, "bob", "corp"); ok {
		t.Fatal("ConnectionStatus says connected")
	}
	// Broken for every instance: the bucket holds it.
	if err := e.state.Refetch(ctx, cpstate.ConnKey(e.org, e.project, "bob", "corp")); err != nil {
		t.Fatal(err)
	}
	calls := e.refreshCalls.Load()
	if _, err := e.svc.Connection(ctx, e.org, e.project, "bob", "corp"); !errors.Is(err, oauthflow.ErrNotConnected) || !strings.Contains(err.Error(), "broken") {
		t.Fatalf("second call: %v", err)
	}
	if e.refreshCalls.Load() != calls {
		t.Fatal("a broken connection was refreshed again")
	}
	// Authorizing again repairs it, with the scopes asked now (not those of
	// the broken grant).
	authURL, asked := e.authorize("bob", e.bob)
	if slices.Contains(asked, "docs.read") {
		t.Fatalf("a broken connection's scopes are asked again: %v", asked)
	}
	if st, body, _ := e.browse(e.consent(authURL)); st != 200 {
		t.Fatalf("re-authorize: %d %s", st, body)
	}
	e.remember("bob")
	if items := e.list("bob", e.bob); !items[0].Connected || items[0].Status != "connected" || slices.Contains(items[0].Scopes, "docs.read") {
		t.Fatalf("after re-authorizing: %+v", items)
	}
	e.clean()
}

func TestConnectionProviderDownIsNotNotConnected(t *testing.T) {
	srv, _, _ := testenv.NATS(t)
	e := newOAuthEnv(t, srv.ClientURL())
	e.connect("bob", e.bob)
	e.expireSoon("bob")
	down := httptest.NewServer(http.NotFoundHandler())
	downURL := down.URL
	down.Close()
	e.must(200, "PATCH", e.providers()+"/corp", e.alice, map[string]any{"token_url": downURL + "/token"})
	_, err := e.svc.Connection(context.Background(), e.org, e.project, "bob", "corp")
	if err == nil || errors.Is(err, oauthflow.ErrNotConnected) || !errors.Is(err, oauthflow.ErrProvider) {
		t.Fatalf("provider down: %v", err)
	}
	if items := e.list("bob", e.bob); items[0].Status != "connected" {
		t.Fatalf("a provider outage broke the connection: %+v", items)
	}
	// A provider the organization removed: not "not connected" either.
	e.must(200, "DELETE", e.providers()+"/corp", e.alice, nil)
	if _, err := e.svc.Connection(context.Background(), e.org, e.project, "bob", "corp"); !errors.Is(err, oauthflow.ErrNoProvider) {
		t.Fatalf("removed provider: %v", err)
	}
	e.clean()
}

func TestConnectionSelfServiceAndRevocation(t *testing.T) {
	srv, _, _ := testenv.NATS(t)
	e := newOAuthEnv(t, srv.ClientURL())
	carol := e.must(201, "POST", "/api/v1/orgs/"+e.org+"/api_keys", bootKey, map[string]any{"name": "c", "user_id": "carol"}).field("key")
	e.connect("bob", e.bob)
	bobTokens := e.remember("bob")

	// carol, a plain member, acts on none of bob's connections.
	for _, tc := range []struct{ method, path string }{
		{"GET", e.connPath("bob")}, {"DELETE", e.connPath("bob") + "/corp"}, {"POST", e.connPath("bob") + "/corp/authorize"},
		{"PUT", e.connPath("bob") + "/corp"},
	} {
		if r := e.call(tc.method, tc.path, carol, map[string]any{"access_token": "x"}); r.status != 403 {
			t.Fatalf("carol %s %s: %d %s", tc.method, tc.path, r.status, r.Msg)
		}
	}
	// A project admin reads them; so does an org admin.
	e.must(200, "PUT", e.projectPath()+"/members/carol", bootKey, map[string]any{"role": "admin"})
	if items := e.list("bob", carol); len(items) != 1 {
		t.Fatalf("project admin: %+v", items)
	}
	if items := e.list("bob", e.alice); len(items) != 1 {
		t.Fatalf("org admin: %+v", items)
	}
	// A service key of the project starts flows for its end users.
	svcKey := e.must(201, "POST", e.projectPath()+"/service_keys", bootKey, map[string]any{"name": "app"}).field("key")
	e.authorize("end-user-7", svcKey)
	if r := e.call("GET", e.connPath("end-user-7"), svcKey, nil); r.status != 403 {
		t.Fatalf("service key lists connections: %d", r.status)
	}

	// bob deletes his own: revoked at the provider.
	r := e.must(200, "DELETE", e.connPath("bob")+"/corp", e.bob, nil)
	if !strings.Contains(string(r.Data), `"revoked":true`) || !strings.Contains(string(r.Data), `"revocation":"revoked"`) {
		t.Fatalf("delete: %s", r.Data)
	}
	if s := e.emu.Stats(); s.Revocations != 1 {
		t.Fatalf("%d revocations at the provider", s.Revocations)
	}
	if _, err := e.emu.Verify(bobTokens.AccessToken); err == nil {
		t.Fatal("the access token still verifies after the revocation")
	}
	if items := e.list("bob", e.bob); len(items) != 0 {
		t.Fatalf("after delete: %+v", items)
	}
	e.must(404, "DELETE", e.connPath("bob")+"/corp", e.bob, nil)

	// The provider does not answer the revocation: deleted all the same.
	e.connect("carol", carol)
	down := httptest.NewServer(http.NotFoundHandler())
	downURL := down.URL
	down.Close()
	e.must(200, "PATCH", e.providers()+"/corp", e.alice, map[string]any{"revoke_url": downURL + "/revoke"})
	r = e.must(200, "DELETE", e.connPath("carol")+"/corp", carol, nil)
	if !strings.Contains(string(r.Data), `"revoked":false`) || !strings.Contains(string(r.Data), `"revocation":"failed"`) {
		t.Fatalf("delete with the provider down: %s", r.Data)
	}
	if ok, _ := e.svc.ConnectionStatus(e.org, e.project, "carol", "corp"); ok {
		t.Fatal("still connected after delete")
	}
	var dels []schemas.AuditEvent
	testenv.Eventually(t, 10*time.Second, "the deletion events", func() bool {
		dels = dels[:0]
		for _, ev := range e.connEvents() {
			if ev.Action == schemas.AuditActionDeleted {
				dels = append(dels, ev)
			}
		}
		return len(dels) == 2
	})
	if dels[0].PrincipalID == "" || !strings.Contains(string(dels[0].Data), `"revoked":true`) || !strings.Contains(string(dels[1].Data), `"revoked":false`) {
		t.Fatalf("deletion events: %s / %s", dels[0].Data, dels[1].Data)
	}
	e.clean()
}
