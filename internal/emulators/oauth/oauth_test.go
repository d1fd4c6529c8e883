package oauth_test

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/auditrail/auditrail/internal/emulators/oauth"
	"github.com/auditrail/auditrail/internal/testenv"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const (
	clientID = "app"
	secret   = "app-secret"
	redirect = "https://app.example/cb"
	verifier = "dBjftJeZ4CVP-mJ92K9X0CQR1eQyZ7P1Lh4dXYkZ3kQ-verifier"
)

func challenge(v string) string {
	s := sha256.Sum256([]byte(v))
	return base64.RawURLEncoding.EncodeToString(s[:])
}

type harness struct {
	s     *oauth.Server
	srv   *httptest.Server
	clock *testenv.ManualClock
	// noFollow does not follow redirects: the Location is the answer.
	noFollow *http.Client
}

func newHarness(t testing.TB, mod func(*oauth.Config)) *harness {
	t.Helper()
	h := &harness{clock: testenv.NewManualClock(time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC))}
	cfg := oauth.Config{
		Clients: []oauth.Client{{ID: clientID, Secret: secret, RedirectURIs: []string{redirect}},
			{ID: "other", Secret: "other-secret"}},
		Users:       []oauth.User{{ID: "u1", Email: "ann@example.com", Name: "Ann"}, {ID: "u2", Email: "ben@example.com", Name: "Ben"}},
		AutoApprove: true,
		Now:         h.clock.Now,
	}
	if mod != nil {
		mod(&cfg)
	}
	s, err := oauth.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	h.s = s
	h.srv = httptest.NewServer(s.Handler())
	t.Cleanup(h.srv.Close)
	jar, _ := cookiejar.New(nil)
	h.noFollow = &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	t.Cleanup(h.noFollow.CloseIdleConnections)
	return h
}

func authorizeQuery(mod func(url.Values)) url.Values {
	q := url.Values{"response_type": {"code"}, "client_id": {clientID}, "redirect_uri": {redirect},
		"scope": {"docs mail"}, "state": {"st-1"}, "code_challenge": {challenge(verifier)}, "code_challenge_method": {"S256"},
		"access_type": {"offline"}}
	if mod != nil {
		mod(q)
	}
	return q
}

// get answers the status and the Location's query (nil without redirect).
func (h *harness) get(t testing.TB, q url.Values) (int, url.Values, string) {
	t.Helper()
	resp, err := h.noFollow.Get(h.srv.URL + "/authorize?" + q.Encode())
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	loc := resp.Header.Get("Location")
	if loc == "" {
		return resp.StatusCode, nil, string(body)
	}
	u, err := url.Parse(loc)
	if err != nil {
		t.Fatal(err)
	}
	if u.Scheme+"://"+u.Host+u.Path != redirect {
		t.Fatalf("redirected to %s", loc)
	}
	return resp.StatusCode, u.Query(), string(body)
}

func (h *harness) code(t testing.TB, mod func(url.Values)) string {
	t.Helper()
	status, q, body := h.get(t, authorizeQuery(mod))
	if status != http.StatusFound || q.Get("code") == "" {
		t.Fatalf("authorize: %d %v %s", status, q, body)
	}
	return q.Get("code")
}

type tokenAnswer struct {
	Status       int
	Header       http.Header
	AccessToken  string `json:"access_token"`
	TokenType    string `json:"token_type"`
	ExpiresIn    int    `json:"expires_in"`
	RefreshToken string `json:"refresh_token"`
	Scope        string `json:"scope"`
	Error        string `json:"error"`
}

// post sends a form to path, with HTTP Basic unless basic is nil.
func (h *harness) post(t testing.TB, path string, form url.Values, basic []string) tokenAnswer {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, h.srv.URL+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if basic != nil {
		req.SetBasicAuth(url.QueryEscape(basic[0]), url.QueryEscape(basic[1]))
	}
	resp, err := h.noFollow.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	a := tokenAnswer{Status: resp.StatusCode, Header: resp.Header}
	b, _ := io.ReadAll(resp.Body)
	if len(b) > 0 {
		if err := json.Unmarshal(b, &a); err != nil {
			t.Fatalf("%s answered %d %q: %v", path, resp.StatusCode, b, err)
		}
	}
	return a
}

func codeForm(code string) url.Values {
	return url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {redirect}, "code_verifier": {verifier}}
}

var creds = []string{clientID, secret}

func TestAuthorizeErrors(t *testing.T) {
	tests := []struct {
		name      string
		mod       func(url.Values)
		wantPage  bool   // a 400 page, no redirect
		wantError string // the error of the redirect
	}{
		{"unknown client", func(q url.Values) { q.Set("client_id", "nobody") }, true, ""},
		{"unregistered redirect", func(q url.Values) { q.Set("redirect_uri", "https://evil.example/cb") }, true, ""},
		{"redirect with a suffix", func(q url.Values) { q.Set("redirect_uri", redirect+"/../x") }, true, ""},
		{"no redirect", func(q url.Values) { q.Del("redirect_uri") }, true, ""},
		{"client_id twice", func(q url.Values) { q.Add("client_id", "other") }, true, ""},
		{"no PKCE", func(q url.Values) { q.Del("code_challenge"); q.Del("code_challenge_method") }, false, "invalid_request"},
		{"plain PKCE", func(q url.Values) { q.Set("code_challenge_method", "plain") }, false, "invalid_request"},
		{"short challenge", func(q url.Values) { q.Set("code_challenge", "abc") }, false, "invalid_request"},
		{"token response type", func(q url.Values) { q.Set("response_type", "token") }, false, "unsupported_response_type"},
		{"no scope", func(q url.Values) { q.Del("scope") }, false, "invalid_scope"},
		{"state twice", func(q url.Values) { q.Add("state", "b") }, false, "invalid_request"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, nil)
			status, q, body := h.get(t, authorizeQuery(tt.mod))
			if tt.wantPage {
				if status != http.StatusBadRequest || q != nil || !strings.Contains(body, "Authorization error") {
					t.Fatalf("want a 400 page, got %d %v", status, q)
				}
				return
			}
			if status != http.StatusFound || q.Get("error") != tt.wantError || q.Has("code") {
				t.Fatalf("got %d %v", status, q)
			}
			if tt.name != "state twice" && q.Get("state") != "st-1" {
				t.Fatalf("state not returned: %v", q)
			}
		})
	}
	if s := newHarness(t, nil).s.Stats(); s.CodesIssued != 0 {
		t.Fatalf("stats %+v", s)
	}
}

func TestAnyRedirectWhenNoneRegistered(t *testing.T) {
	h := newHarness(t, nil)
	q := authorizeQuery(func(q url.Values) { q.Set("client_id", "other"); q.Set("redirect_uri", "http://127.0.0.1:9/cb?x=1") })
	resp, err := h.noFollow.Get(h.srv.URL + "/authorize?" + q.Encode())
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	loc, _ := url.Parse(resp.Header.Get("Location"))
	if resp.StatusCode != http.StatusFound || loc.Host != "127.0.0.1:9" || loc.Query().Get("x") != "1" || loc.Query().Get("code") == "" {
		t.Fatalf("%d %s", resp.StatusCode, loc)
	}
	q.Set("redirect_uri", "javascript:alert(1)")
	if status, _, _ := h.get(t, q); status != http.StatusBadRequest {
		t.Fatalf("javascript redirect: %d", status)
	}
}

var csrfRe = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

func TestConsentCSRF(t *testing.T) {
	h := newHarness(t, func(c *oauth.Config) { c.AutoApprove = false })
	page := func(client *http.Client) string {
		resp, err := client.Get(h.srv.URL + "/authorize?" + authorizeQuery(func(q url.Values) { q.Set("login_hint", "ben@example.com") }).Encode())
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.Header.Get("X-Frame-Options") != "DENY" || !strings.Contains(resp.Header.Get("Content-Security-Policy"), "frame-ancestors 'none'") {
			t.Fatal("the consent page can be framed")
		}
		if !regexp.MustCompile(`value="u2" checked`).Match(b) {
			t.Fatalf("login_hint not preselected: %s", b)
		}
		return string(csrfRe.FindStringSubmatch(string(b))[1])
	}
	post := func(client *http.Client, form url.Values) (int, url.Values) {
		resp, err := client.PostForm(h.srv.URL+"/authorize", form)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if loc := resp.Header.Get("Location"); loc != "" {
			u, _ := url.Parse(loc)
			return resp.StatusCode, u.Query()
		}
		return resp.StatusCode, nil
	}
	jar2, _ := cookiejar.New(nil)
	attacker := &http.Client{Jar: jar2, CheckRedirect: h.noFollow.CheckRedirect}
	defer attacker.CloseIdleConnections()

	csrf := page(h.noFollow)
	_ = page(attacker) // the attacker's browser has a session of its own
	tests := []struct {
		name   string
		client *http.Client
		form   url.Values
		status int
		want   url.Values
	}{
		{"no token", h.noFollow, url.Values{"user": {"u1"}, "decision": {"allow"}}, 400, nil},
		{"forged token", h.noFollow, url.Values{"csrf": {"forged"}, "user": {"u1"}, "decision": {"allow"}}, 400, nil},
		{"token from another browser", attacker, url.Values{"csrf": {csrf}, "user": {"u1"}, "decision": {"allow"}}, 400, nil},
		// The attempt above spent the token: even its own browser cannot use it now.
		{"spent token", h.noFollow, url.Values{"csrf": {csrf}, "user": {"u1"}, "decision": {"allow"}}, 400, nil},
		{"unknown user", h.noFollow, url.Values{"csrf": {page(h.noFollow)}, "user": {"u9"}, "decision": {"allow"}}, 400, nil},
		{"deny", h.noFollow, url.Values{"csrf": {page(h.noFollow)}, "user": {"u1"}, "decision": {"deny"}}, 303,
			url.Values{"error": {"access_denied"}, "error_description": {"the user denied the request"}, "state": {"st-1"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, q := post(tt.client, tt.form)
			if status != tt.status || (tt.want != nil && q.Encode() != tt.want.Encode()) {
				t.Fatalf("got %d %v", status, q)
			}
		})
	}
	if s := h.s.Stats(); s.CodesIssued != 0 {
		t.Fatalf("codes issued: %+v", s)
	}
	status, q := post(h.noFollow, url.Values{"csrf": {page(h.noFollow)}, "user": {"u2"}, "decision": {"allow"}})
	if status != 303 || q.Get("code") == "" || q.Get("state") != "st-1" {
		t.Fatalf("allow: %d %v", status, q)
	}
	tok := h.post(t, "/token", codeForm(q.Get("code")), creds)
	if g, err := h.s.Verify(tok.AccessToken); err != nil || g.UserID != "u2" || g.Email != "ben@example.com" {
		t.Fatalf("grant %+v %v", g, err)
	}
	// The consent page expires.
	csrf = page(h.noFollow)
	h.clock.Add(11 * time.Minute)
	if status, _ := post(h.noFollow, url.Values{"csrf": {csrf}, "user": {"u1"}, "decision": {"allow"}}); status != 400 {
		t.Fatalf("expired consent: %d", status)
	}
}

func TestTokenCodeGrant(t *testing.T) {
	tests := []struct {
		name       string
		form       func(code string) url.Values
		basic      []string
		wantStatus int
		wantError  string
	}{
		{"basic auth", codeForm, creds, 200, ""},
		{"body auth", func(c string) url.Values {
			f := codeForm(c)
			f.Set("client_id", clientID)
			f.Set("client_secret", secret)
			return f
		}, nil, 200, ""},
		{"two auth methods", func(c string) url.Values { f := codeForm(c); f.Set("client_secret", secret); return f }, creds, 400, "invalid_request"},
		{"wrong secret", codeForm, []string{clientID, "nope"}, 401, "invalid_client"},
		{"no client auth", codeForm, nil, 401, "invalid_client"},
		{"another client's code", codeForm, []string{"other", "other-secret"}, 400, "invalid_grant"},
		{"wrong verifier", func(c string) url.Values {
			f := codeForm(c)
			f.Set("code_verifier", strings.Repeat("a", 43))
			return f
		}, creds, 400, "invalid_grant"},
		{"no verifier", func(c string) url.Values { f := codeForm(c); f.Del("code_verifier"); return f }, creds, 400, "invalid_grant"},
		{"other redirect_uri", func(c string) url.Values { f := codeForm(c); f.Set("redirect_uri", redirect+"2"); return f }, creds, 400, "invalid_grant"},
		{"unknown code", func(string) url.Values { return codeForm("c_nope") }, creds, 400, "invalid_grant"},
		{"no code", func(string) url.Values { f := codeForm(""); return f }, creds, 400, "invalid_request"},
		{"password grant", func(c string) url.Values { f := codeForm(c); f.Set("grant_type", "password"); return f }, creds, 400, "unsupported_grant_type"},
		{"code twice in the form", func(c string) url.Values { f := codeForm(c); f.Add("code", c); return f }, creds, 400, "invalid_request"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, nil)
			a := h.post(t, "/token", tt.form(h.code(t, nil)), tt.basic)
			if a.Status != tt.wantStatus || a.Error != tt.wantError {
				t.Fatalf("got %d %q", a.Status, a.Error)
			}
			if a.Header.Get("Cache-Control") != "no-store" {
				t.Fatalf("Cache-Control %q", a.Header.Get("Cache-Control"))
			}
			if a.Status == 401 && a.Header.Get("WWW-Authenticate") == "" {
				t.Fatal("401 without WWW-Authenticate")
			}
			if tt.wantStatus != 200 {
				if a.AccessToken != "" || h.s.Stats().CodeGrants != 0 {
					t.Fatal("a token was issued")
				}
				return
			}
			if a.TokenType != "Bearer" || a.ExpiresIn != 3600 || a.Scope != "docs mail" || a.RefreshToken == "" || len(a.AccessToken) < 40 {
				t.Fatalf("answer %+v", a)
			}
		})
	}
}

func TestRefreshTokenOnlyOffline(t *testing.T) {
	tests := []struct {
		name        string
		mod         func(url.Values)
		wantRefresh bool
	}{
		{"access_type=offline", nil, true},
		{"online", func(q url.Values) { q.Del("access_type") }, false},
		{"offline_access scope", func(q url.Values) { q.Del("access_type"); q.Set("scope", "mail offline_access") }, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, nil)
			a := h.post(t, "/token", codeForm(h.code(t, tt.mod)), creds)
			if a.Status != 200 || (a.RefreshToken != "") != tt.wantRefresh {
				t.Fatalf("%+v", a)
			}
		})
	}
}

func TestCodeReuseAndExpiry(t *testing.T) {
	h := newHarness(t, nil)
	code := h.code(t, nil)
	first := h.post(t, "/token", codeForm(code), creds)
	if first.Status != 200 {
		t.Fatal(first.Error)
	}
	if a := h.post(t, "/token", codeForm(code), creds); a.Error != "invalid_grant" {
		t.Fatalf("reuse: %+v", a)
	}
	if _, err := h.s.Verify(first.AccessToken); !errors.Is(err, oauth.ErrInvalidToken) {
		t.Fatalf("tokens of a reused code survive: %v", err)
	}
	if a := h.post(t, "/token", url.Values{"grant_type": {"refresh_token"}, "refresh_token": {first.RefreshToken}}, creds); a.Error != "invalid_grant" {
		t.Fatalf("refresh of a reused code: %+v", a)
	}
	late := h.code(t, nil)
	h.clock.Add(61 * time.Second)
	if a := h.post(t, "/token", codeForm(late), creds); a.Error != "invalid_grant" {
		t.Fatalf("expired code: %+v", a)
	}
}

func TestRefreshGrant(t *testing.T) {
	tests := []struct {
		name      string
		scope     string
		wantError string
		wantScope string
	}{
		{"all scopes", "", "", "docs mail"},
		{"narrower", "docs", "", "docs"},
		{"wider", "docs admin", "invalid_scope", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, func(c *oauth.Config) { c.AccessTTL = 10 * time.Second })
			tok := h.post(t, "/token", codeForm(h.code(t, nil)), creds)
			form := url.Values{"grant_type": {"refresh_token"}, "refresh_token": {tok.RefreshToken}}
			if tt.scope != "" {
				form.Set("scope", tt.scope)
			}
			a := h.post(t, "/token", form, creds)
			if a.Error != tt.wantError || a.Scope != tt.wantScope {
				t.Fatalf("got %+v", a)
			}
			if tt.wantError != "" {
				return
			}
			if a.RefreshToken != "" {
				t.Fatal("a refresh token without rotation")
			}
			g, err := h.s.Verify(a.AccessToken)
			if err != nil || strings.Join(g.Scopes, " ") != tt.wantScope {
				t.Fatalf("%+v %v", g, err)
			}
			h.clock.Add(10 * time.Second)
			if _, err := h.s.Verify(a.AccessToken); !errors.Is(err, oauth.ErrExpired) {
				t.Fatalf("after its TTL: %v", err)
			}
			if a := h.post(t, "/token", form, []string{"other", "other-secret"}); a.Error != "invalid_grant" {
				t.Fatalf("another client's refresh token: %+v", a)
			}
		})
	}
}

func TestIncludeGrantedScopes(t *testing.T) {
	h := newHarness(t, nil)
	h.post(t, "/token", codeForm(h.code(t, func(q url.Values) { q.Set("scope", "docs") })), creds)
	tests := []struct {
		include bool
		want    string
	}{{false, "drive"}, {true, "docs drive"}}
	for _, tt := range tests {
		a := h.post(t, "/token", codeForm(h.code(t, func(q url.Values) {
			q.Set("scope", "drive")
			if tt.include {
				q.Set("include_granted_scopes", "true")
			}
		})), creds)
		if a.Scope != tt.want {
			t.Fatalf("include=%v: %q", tt.include, a.Scope)
		}
	}
}

func TestRevokeEndpoint(t *testing.T) {
	h := newHarness(t, nil)
	t1 := h.post(t, "/token", codeForm(h.code(t, nil)), creds)
	t2 := h.post(t, "/token", codeForm(h.code(t, nil)), creds)
	// Another client cannot revoke the token; the answer says nothing.
	if a := h.post(t, "/revoke", url.Values{"token": {t1.AccessToken}}, []string{"other", "other-secret"}); a.Status != 200 {
		t.Fatalf("%+v", a)
	}
	if a := h.post(t, "/revoke", url.Values{"token": {t1.AccessToken}}, []string{clientID, "x"}); a.Status != 401 {
		t.Fatalf("unauthenticated revoke: %+v", a)
	}
	if a := h.post(t, "/revoke", url.Values{}, creds); a.Error != "invalid_request" {
		t.Fatalf("no token: %+v", a)
	}
	if _, err := h.s.Verify(t1.AccessToken); err != nil {
		t.Fatal(err)
	}
	// Revoking an access token leaves its refresh token.
	if a := h.post(t, "/revoke", url.Values{"token": {t1.AccessToken}, "token_type_hint": {"access_token"}}, creds); a.Status != 200 {
		t.Fatalf("%+v", a)
	}
	if _, err := h.s.Verify(t1.AccessToken); !errors.Is(err, oauth.ErrInvalidToken) {
		t.Fatal(err)
	}
	if a := h.post(t, "/token", url.Values{"grant_type": {"refresh_token"}, "refresh_token": {t1.RefreshToken}}, creds); a.Status != 200 {
		t.Fatalf("refresh after revoking the access token: %+v", a)
	}
	// Revoking a refresh token revokes its access tokens; the other grant stays.
	if a := h.post(t, "/revoke", url.Values{"token": {t1.RefreshToken}}, creds); a.Status != 200 {
		t.Fatal(a)
	}
	if a := h.post(t, "/token", url.Values{"grant_type": {"refresh_token"}, "refresh_token": {t1.RefreshToken}}, creds); a.Error != "invalid_grant" {
		t.Fatalf("%+v", a)
	}
	if _, err := h.s.Verify(t2.AccessToken); err != nil {
		t.Fatalf("the other grant was revoked: %v", err)
	}
	if s := h.s.Stats(); s.Revocations != 2 || s.CodeGrants != 2 || s.RefreshGrants != 1 {
		t.Fatalf("stats %+v", s)
	}
	h.s.RevokeUser("u1")
	if _, err := h.s.Verify(t2.AccessToken); !errors.Is(err, oauth.ErrInvalidToken) {
		t.Fatalf("after RevokeUser: %v", err)
	}
}

func TestUserinfoAndAuthenticate(t *testing.T) {
	h := newHarness(t, nil)
	tok := h.post(t, "/token", codeForm(h.code(t, func(q url.Values) { q.Set("login_hint", "u2") })), creds)
	get := func(auth string) (int, http.Header, map[string]any) {
		req, _ := http.NewRequest(http.MethodGet, h.srv.URL+"/userinfo", nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := h.noFollow.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var m map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&m)
		return resp.StatusCode, resp.Header, m
	}
	status, _, m := get("Bearer " + tok.AccessToken)
	if status != 200 || m["sub"] != "u2" || m["email"] != "ben@example.com" || m["email_verified"] != true || m["name"] != "Ben" {
		t.Fatalf("%d %v", status, m)
	}
	for _, auth := range []string{"", "Bearer", "Basic " + tok.AccessToken, "Bearer at_forged"} {
		status, hdr, _ := get(auth)
		if status != 401 || !strings.Contains(hdr.Get("WWW-Authenticate"), `error="invalid_token"`) {
			t.Fatalf("%q: %d %v", auth, status, hdr)
		}
	}
	req := httptest.NewRequest(http.MethodGet, "/v1/documents", nil)
	req.Header.Set("Authorization", "bearer "+tok.AccessToken)
	tests := []struct {
		scopes []string
		status int
		err    error
	}{
		{nil, 0, nil},
		{[]string{"admin", "docs"}, 0, nil},
		{[]string{"admin"}, 403, oauth.ErrInsufficientScope},
	}
	for _, tt := range tests {
		g, status, err := h.s.Authenticate(req, tt.scopes...)
		if status != tt.status || !errors.Is(err, tt.err) || (err == nil && g.UserID != "u2") {
			t.Fatalf("%v: %d %v", tt.scopes, status, err)
		}
	}
	h.clock.Add(time.Hour)
	if _, status, err := h.s.Authenticate(req); status != 401 || !errors.Is(err, oauth.ErrExpired) {
		t.Fatalf("expired: %d %v", status, err)
	}
}

func TestStateFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "oauth.json")
	mod := func(c *oauth.Config) { c.StateFile = file }
	h := newHarness(t, mod)
	tok := h.post(t, "/token", codeForm(h.code(t, nil)), creds)
	fi, err := os.Stat(file)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v", fi.Mode())
	}
	b, _ := os.ReadFile(file)
	if strings.Contains(string(b), tok.AccessToken) || strings.Contains(string(b), tok.RefreshToken) {
		t.Fatal("the state file holds a usable token")
	}
	// A restarted server knows the grant.
	h2 := newHarness(t, mod)
	if g, err := h2.s.Verify(tok.AccessToken); err != nil || g.UserID != "u1" {
		t.Fatalf("after restart: %+v %v", g, err)
	}
	if a := h2.post(t, "/token", url.Values{"grant_type": {"refresh_token"}, "refresh_token": {tok.RefreshToken}}, creds); a.Status != 200 {
		t.Fatalf("refresh after restart: %+v", a)
	}
	h2.s.RevokeUser("u1")
	h3 := newHarness(t, mod)
	if _, err := h3.s.Verify(tok.AccessToken); !errors.Is(err, oauth.ErrInvalidToken) {
		t.Fatalf("revocation lost on restart: %v", err)
	}
	if err := os.WriteFile(file, []byte("{garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := oauth.New(oauth.Config{Clients: []oauth.Client{{ID: "a", Secret: "b"}}, Users: []oauth.User{{ID: "u", Email: "e"}}, StateFile: file}); err == nil {
		t.Fatal("a corrupt state file was accepted")
	}
}

func TestConfigValidate(t *testing.T) {
	base := func() oauth.Config {
		return oauth.Config{Clients: []oauth.Client{{ID: "a", Secret: "b"}}, Users: []oauth.User{{ID: "u", Email: "e"}}}
	}
	tests := []struct {
		name string
		mod  func(*oauth.Config)
		ok   bool
	}{
		{"valid", func(*oauth.Config) {}, true},
		{"no client", func(c *oauth.Config) { c.Clients = nil }, false},
		{"no user", func(c *oauth.Config) { c.Users = nil }, false},
		{"client without secret", func(c *oauth.Config) { c.Clients[0].Secret = "" }, false},
		{"duplicate client", func(c *oauth.Config) { c.Clients = append(c.Clients, c.Clients[0]) }, false},
		{"relative redirect", func(c *oauth.Config) { c.Clients[0].RedirectURIs = []string{"/cb"} }, false},
		{"negative ttl", func(c *oauth.Config) { c.AccessTTL = -time.Second }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := base()
			tt.mod(&c)
			_, err := oauth.New(c)
			if (err == nil) != tt.ok || (err != nil && !errors.Is(err, oauth.ErrInvalidConfig)) {
				t.Fatalf("%v", err)
			}
		})
	}
}

// Concurrent refreshes, verifications and revocations (run with -race).
func TestConcurrent(t *testing.T) {
	h := newHarness(t, func(c *oauth.Config) { c.RotateRefreshTokens = true })
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tok := h.post(t, "/token", codeForm(h.code(t, nil)), creds)
			rt := tok.RefreshToken
			for range 5 {
				a := h.post(t, "/token", url.Values{"grant_type": {"refresh_token"}, "refresh_token": {rt}}, creds)
				if a.Status != 200 {
					t.Errorf("refresh: %+v", a)
					return
				}
				if _, err := h.s.Verify(a.AccessToken); err != nil {
					t.Error(err)
				}
				rt = a.RefreshToken
			}
			if i%2 == 0 {
				h.post(t, "/revoke", url.Values{"token": {rt}}, creds)
			}
		}()
	}
	wg.Wait()
	if s := h.s.Stats(); s.CodeGrants != 20 || s.RefreshGrants != 100 || s.Revocations != 10 {
		t.Fatalf("stats %+v", s)
	}
}

// FuzzTokenForm: whatever the body, the token endpoint answers a JSON
// error or a token, never panics, and issues nothing without the right
// client and a valid code.
func FuzzTokenForm(f *testing.F) {
	h := newHarness(f, nil)
	f.Add("grant_type=authorization_code&code=c_x&redirect_uri=https%3A%2F%2Fapp.example%2Fcb&code_verifier="+verifier, true)
	f.Add("grant_type=refresh_token&refresh_token=rt_x&scope=docs", false)
	f.Add("client_id=app&client_secret=app-secret&grant_type=refresh_token&refresh_token=%zz", false)
	f.Add("grant_type=authorization_code&code=a&code=b", true)
	f.Fuzz(func(t *testing.T, body string, basic bool) {
		req, _ := http.NewRequest(http.MethodPost, h.srv.URL+"/token", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if basic {
			req.SetBasicAuth(clientID, secret)
		}
		resp, err := h.noFollow.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var a tokenAnswer
		if err := json.NewDecoder(resp.Body).Decode(&a); err != nil {
			t.Fatalf("%d: not JSON: %v", resp.StatusCode, err)
		}
		switch resp.StatusCode {
		case 400, 401:
			if a.Error == "" || a.AccessToken != "" {
				t.Fatalf("%d %+v", resp.StatusCode, a)
			}
		default:
			t.Fatalf("status %d for %q (%+v)", resp.StatusCode, body, a)
		}
	})
}

// FuzzAuthorizeQuery: whatever the query, /authorize answers a page or
// redirects, and only ever to the client's registered redirect URI.
func FuzzAuthorizeQuery(f *testing.F) {
	h := newHarness(f, nil)
	f.Add(authorizeQuery(nil).Encode())
	f.Add(authorizeQuery(func(q url.Values) { q.Set("redirect_uri", "https://evil.example/") }).Encode())
	f.Add("client_id=app&redirect_uri=https://app.example/cb&redirect_uri=https://evil.example/")
	f.Add("client_id=other&redirect_uri=https://x.example/%zz")
	f.Add("%")
	f.Fuzz(func(t *testing.T, rawQuery string) {
		req, err := http.NewRequest(http.MethodGet, h.srv.URL+"/authorize", nil)
		if err != nil {
			return // not a request: nothing to check
		}
		req.URL.RawQuery = rawQuery
		resp, err := h.noFollow.Do(req)
		if err != nil {
			return // the client refused to send it: it never reaches the server
		}
		resp.Body.Close()
		switch resp.StatusCode {
		case 200, 400:
		case 302:
			loc, err := url.Parse(resp.Header.Get("Location"))
			if err != nil {
				t.Fatalf("Location %q", resp.Header.Get("Location"))
			}
			q, _ := url.ParseQuery(rawQuery)
			target := loc.Scheme + "://" + loc.Host + loc.Path
			switch q.Get("client_id") {
			case clientID:
				if target != redirect {
					t.Fatalf("redirected to %s", loc)
				}
			case "other": // no registered URI: exactly the one asked for
				ru, err := url.Parse(q.Get("redirect_uri"))
				if err != nil || target != ru.Scheme+"://"+ru.Host+ru.Path {
					t.Fatalf("redirected to %s, not %q", loc, q.Get("redirect_uri"))
				}
			default:
				t.Fatalf("unknown client redirected to %s", loc)
			}
		default:
			t.Fatalf("status %d", resp.StatusCode)
		}
	})
}

// Mounted below a path, the consent form posts back to the page's own URL.
func TestMountedUnderPrefix(t *testing.T) {
	s, err := oauth.New(oauth.Config{Clients: []oauth.Client{{ID: clientID, Secret: secret, RedirectURIs: []string{redirect}}},
		Users: []oauth.User{{ID: "u1", Email: "ann@example.com"}}})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/oauth/", http.StripPrefix("/oauth", s.Handler()))
	srv := httptest.NewServer(mux)
	defer srv.Close()
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	defer c.CloseIdleConnections()
	pageURL := srv.URL + "/oauth/authorize?" + authorizeQuery(nil).Encode()
	resp, err := c.Get(pageURL)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(b), `<form method="post">`) {
		t.Fatalf("the form must post to the page URL: %s", b)
	}
	resp, err = c.PostForm(pageURL, url.Values{"csrf": {csrfRe.FindStringSubmatch(string(b))[1]}, "user": {"u1"}, "decision": {"allow"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	loc, _ := url.Parse(resp.Header.Get("Location"))
	if resp.StatusCode != http.StatusSeeOther || loc.Query().Get("code") == "" {
		t.Fatalf("%d %v", resp.StatusCode, loc)
	}
}
