package oauthflow_test

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"go.uber.org/goleak"

	emu "github.com/auditrail/auditrail/internal/emulators/oauth"
	"github.com/auditrail/auditrail/internal/oauthflow"
	"github.com/auditrail/auditrail/internal/provhttp"
	"github.com/auditrail/auditrail/internal/testenv"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testSealer is AES-256-GCM with the key as additional data, like
// cpstate.Sealer (which imports this package).
type testSealer struct{ aead cipher.AEAD }

func newSealer(t testing.TB) *testSealer {
	k := make([]byte, 32)
	_, _ = rand.Read(k)
	b, err := aes.NewCipher(k)
	if err != nil {
		t.Fatal(err)
	}
	a, err := cipher.NewGCM(b)
	if err != nil {
		t.Fatal(err)
	}
	return &testSealer{a}
}

func (s *testSealer) Seal(key string, pt []byte) ([]byte, error) {
	n := make([]byte, s.aead.NonceSize())
	_, _ = rand.Read(n)
	return s.aead.Seal(n, n, pt, []byte(key)), nil
}

func (s *testSealer) Open(key string, ct []byte) ([]byte, error) {
	if len(ct) < s.aead.NonceSize() {
		return nil, errors.New("short")
	}
	return s.aead.Open(nil, ct[:s.aead.NonceSize()], ct[s.aead.NonceSize():], []byte(key))
}

type callback struct {
	mu   sync.Mutex
	last url.Values
}

func (c *callback) get() url.Values { c.mu.Lock(); defer c.mu.Unlock(); return c.last }

// env is the emulator and the platform's flow, both on real HTTP.
type env struct {
	em       *emu.Server
	srv      *httptest.Server
	cb       *callback
	flow     *oauthflow.Flow
	sealer   *testSealer
	provider oauthflow.Provider
	clock    *testenv.ManualClock
	browser  *http.Client
}

func newEnv(t *testing.T, mod func(*emu.Config)) *env {
	t.Helper()
	e := &env{cb: &callback{}, clock: testenv.NewManualClock(time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC))}
	cbSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e.cb.mu.Lock()
		e.cb.last = r.URL.Query()
		e.cb.mu.Unlock()
		_, _ = io.WriteString(w, "callback")
	}))
	t.Cleanup(cbSrv.Close)
	redirect := cbSrv.URL + "/api/v1/oauth/callback"
	cfg := emu.Config{
		Clients:     []emu.Client{{ID: "auditrail", Secret: "s3cret/+ &=", RedirectURIs: []string{redirect}}},
		Users:       []emu.User{{ID: "u-alice", Email: "alice@example.com", Name: "Alice"}, {ID: "u-bob", Email: "bob@example.com", Name: "Bob"}},
		AccessTTL:   time.Hour,
		CodeTTL:     time.Minute,
		AutoApprove: true,
		Now:         e.clock.Now,
	}
	if mod != nil {
		mod(&cfg)
	}
	em, err := emu.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.em = em
	e.srv = httptest.NewServer(em.Handler())
	t.Cleanup(e.srv.Close)
	e.sealer = newSealer(t)
	fc := oauthflow.DefaultConfig()
	fc.RedirectURL = redirect
	fc.HTTPClient = &http.Client{Timeout: 5 * time.Second}
	fc.Now = e.clock.Now
	e.flow, err = oauthflow.New(fc, e.sealer)
	if err != nil {
		t.Fatal(err)
	}
	e.provider = oauthflow.Provider{ID: "emu", Type: oauthflow.TypeOAuth2, ClientID: "auditrail", ClientSecret: "s3cret/+ &=",
		Endpoints: oauthflow.Endpoints{
			AuthorizeURL: e.srv.URL + "/authorize", TokenURL: e.srv.URL + "/token",
			RevokeURL: e.srv.URL + "/revoke", UserinfoURL: e.srv.URL + "/userinfo",
			ScopesDefault: []string{"openid", "email"},
		}}
	jar, _ := cookiejar.New(nil)
	e.browser = &http.Client{Jar: jar, Timeout: 5 * time.Second}
	t.Cleanup(e.browser.CloseIdleConnections)
	t.Cleanup(fc.HTTPClient.CloseIdleConnections)
	return e
}

// start is what the platform's start page does on a click: a ticket for
// the user, turned into a flow bound to a fresh browser binding.
func start(flow *oauthflow.Flow, p oauthflow.Provider, org, project uuid.UUID, user string, scopes []string) (string, oauthflow.State, error) {
	_, t, err := flow.NewTicket(p, org, project, user, scopes, false)
	if err != nil {
		return "", oauthflow.State{}, err
	}
	return flow.Start(p, t, oauthflow.NewBinding())
}

// authorize starts a flow and follows the authorization URL (AutoApprove)
// to the callback; it returns the state and the code.
func (e *env) authorize(t *testing.T, user string, scopes ...string) (oauthflow.State, string) {
	t.Helper()
	u, st, err := start(e.flow, e.provider, uuid.New(), uuid.New(), user, scopes)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := e.browser.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	q := e.cb.get()
	if q.Get("code") == "" {
		t.Fatalf("no code at the callback: %v", q)
	}
	opened, err := e.flow.OpenState(q.Get("state"))
	if err != nil {
		t.Fatalf("OpenState: %v", err)
	}
	if opened.Nonce != st.Nonce {
		t.Fatalf("state round trip: %+v != %+v", opened, st)
	}
	return opened, q.Get("code")
}

func TestFullCodeFlow(t *testing.T) {
	e := newEnv(t, nil)
	org, project := uuid.New(), uuid.New()
	authURL, st, err := start(e.flow, e.provider, org, project, "user-1", []string{"docs.write"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(authURL, e.srv.URL+"/authorize?") {
		t.Fatalf("auth URL %s", authURL)
	}
	resp, err := e.browser.Get(authURL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	q := e.cb.get()
	got, err := e.flow.OpenState(q.Get("state"))
	if err != nil {
		t.Fatal(err)
	}
	if got.Org != org || got.Project != project || got.User != "user-1" || got.Provider != "emu" ||
		!slices.Equal(got.Scopes, []string{"docs.write", "email", "openid"}) || got.Verifier != st.Verifier {
		t.Fatalf("state %+v", got)
	}
	if want := e.clock.Now().Add(10 * time.Minute); !got.ExpiresAt.Equal(want) {
		t.Fatalf("expires %v, want %v", got.ExpiresAt, want)
	}
	tok, err := e.flow.Exchange(context.Background(), e.provider, got, q.Get("code"))
	if err != nil {
		t.Fatal(err)
	}
	if tok.AccessToken == "" || tok.RefreshToken == "" || tok.ExpiresAt == nil || !strings.EqualFold(tok.TokenType, "bearer") {
		t.Fatalf("token %+v", tok)
	}
	if !tok.ExpiresAt.Equal(e.clock.Now().Add(time.Hour)) {
		t.Fatalf("expiry %v", tok.ExpiresAt)
	}
	if !slices.Equal(tok.Scopes, []string{"docs.write", "email", "openid"}) {
		t.Fatalf("granted %v", tok.Scopes)
	}
	g, err := e.em.Verify(tok.AccessToken)
	if err != nil {
		t.Fatal(err)
	}
	if g.UserID != "u-alice" || g.ClientID != "auditrail" || !slices.Equal(g.Scopes, tok.Scopes) {
		t.Fatalf("grant %+v", g)
	}
	acc, err := e.flow.Userinfo(context.Background(), e.provider, tok.AccessToken)
	if err != nil {
		t.Fatal(err)
	}
	if acc != (oauthflow.Account{Subject: "u-alice", Email: "alice@example.com", Name: "Alice"}) {
		t.Fatalf("account %+v", acc)
	}
	if _, err := e.flow.Userinfo(context.Background(), e.provider, "at_forged"); !errors.Is(err, oauthflow.ErrProvider) {
		t.Fatalf("userinfo with a forged token: %v", err)
	}
	if s := e.em.Stats(); s.CodesIssued != 1 || s.CodeGrants != 1 {
		t.Fatalf("stats %+v", s)
	}
}

var csrfRe = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

func TestConsentPage(t *testing.T) {
	tests := []struct {
		name     string
		decision string
		user     string
		wantErr  string
		wantUser string
	}{
		{"allow as bob", "allow", "u-bob", "", "u-bob"},
		{"deny", "deny", "u-alice", "access_denied", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, func(c *emu.Config) { c.AutoApprove = false })
			authURL, st, err := start(e.flow, e.provider, uuid.New(), uuid.New(), "user-1", []string{"mail.read"})
			if err != nil {
				t.Fatal(err)
			}
			resp, err := e.browser.Get(authURL)
			if err != nil {
				t.Fatal(err)
			}
			page, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			m := csrfRe.FindSubmatch(page)
			if resp.StatusCode != 200 || m == nil || !strings.Contains(string(page), "mail.read") || !strings.Contains(string(page), "bob@example.com") {
				t.Fatalf("consent page %d: %s", resp.StatusCode, page)
			}
			if e.cb.get() != nil {
				t.Fatal("the callback was called before consent")
			}
			resp, err = e.browser.PostForm(authURL, url.Values{"csrf": {string(m[1])}, "user": {tt.user}, "decision": {tt.decision}})
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			q := e.cb.get()
			if q.Get("error") != tt.wantErr {
				t.Fatalf("callback %v", q)
			}
			opened, err := e.flow.OpenState(q.Get("state"))
			if err != nil || opened.Nonce != st.Nonce {
				t.Fatalf("state back: %v", err)
			}
			if tt.wantUser == "" {
				if q.Has("code") {
					t.Fatalf("code on denial: %v", q)
				}
				return
			}
			tok, err := e.flow.Exchange(context.Background(), e.provider, opened, q.Get("code"))
			if err != nil {
				t.Fatal(err)
			}
			if g, err := e.em.Verify(tok.AccessToken); err != nil || g.UserID != tt.wantUser {
				t.Fatalf("grant %+v %v", g, err)
			}
		})
	}
}

// A code obtained in one user's flow, presented with another flow's state
// (its PKCE verifier), is refused: an attacker cannot attach their account
// to a victim's pending flow.
func TestPKCEMismatchCrossUser(t *testing.T) {
	e := newEnv(t, nil)
	stA, _ := e.authorize(t, "victim")
	stB, codeB := e.authorize(t, "attacker")
	_, err := e.flow.Exchange(context.Background(), e.provider, stA, codeB)
	if !errors.Is(err, oauthflow.ErrInvalidGrant) {
		t.Fatalf("cross-user exchange: %v", err)
	}
	// The failed attempt consumed the code.
	if _, err := e.flow.Exchange(context.Background(), e.provider, stB, codeB); !errors.Is(err, oauthflow.ErrInvalidGrant) {
		t.Fatalf("the code should be spent: %v", err)
	}
	if s := e.em.Stats(); s.CodeGrants != 0 {
		t.Fatalf("tokens issued: %+v", s)
	}
}

func TestCodeReuseRevokesTokens(t *testing.T) {
	e := newEnv(t, nil)
	st, code := e.authorize(t, "u")
	tok, err := e.flow.Exchange(context.Background(), e.provider, st, code)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.em.Verify(tok.AccessToken); err != nil {
		t.Fatal(err)
	}
	_, err = e.flow.Exchange(context.Background(), e.provider, st, code)
	if !errors.Is(err, oauthflow.ErrInvalidGrant) {
		t.Fatalf("reuse: %v", err)
	}
	if _, err := e.em.Verify(tok.AccessToken); !errors.Is(err, emu.ErrInvalidToken) {
		t.Fatalf("the first access token still verifies: %v", err)
	}
	if _, err := e.flow.Refresh(context.Background(), e.provider, tok.RefreshToken); !errors.Is(err, oauthflow.ErrInvalidGrant) {
		t.Fatalf("the first refresh token still works: %v", err)
	}
}

func TestExpiredCode(t *testing.T) {
	e := newEnv(t, nil)
	st, code := e.authorize(t, "u")
	e.clock.Add(61 * time.Second)
	if _, err := e.flow.Exchange(context.Background(), e.provider, st, code); !errors.Is(err, oauthflow.ErrInvalidGrant) {
		t.Fatalf("expired code: %v", err)
	}
}

func TestRefresh(t *testing.T) {
	for _, rotate := range []bool{false, true} {
		t.Run(map[bool]string{false: "no rotation", true: "rotation"}[rotate], func(t *testing.T) {
			e := newEnv(t, func(c *emu.Config) { c.RotateRefreshTokens = rotate; c.AccessTTL = 30 * time.Second })
			st, code := e.authorize(t, "u", "docs")
			tok, err := e.flow.Exchange(context.Background(), e.provider, st, code)
			if err != nil {
				t.Fatal(err)
			}
			e.clock.Add(31 * time.Second)
			if _, err := e.em.Verify(tok.AccessToken); !errors.Is(err, emu.ErrExpired) {
				t.Fatalf("expired access token: %v", err)
			}
			nt, err := e.flow.Refresh(context.Background(), e.provider, tok.RefreshToken)
			if err != nil {
				t.Fatal(err)
			}
			if nt.AccessToken == tok.AccessToken || nt.ExpiresAt == nil || !nt.ExpiresAt.Equal(e.clock.Now().Add(30*time.Second)) {
				t.Fatalf("new token %+v", nt)
			}
			if g, err := e.em.Verify(nt.AccessToken); err != nil || !slices.Equal(g.Scopes, []string{"docs", "email", "openid"}) {
				t.Fatalf("refreshed: %+v %v", g, err)
			}
			if !slices.Equal(nt.Scopes, []string{"docs", "email", "openid"}) {
				t.Fatalf("scopes %v", nt.Scopes)
			}
			_, errOld := e.flow.Refresh(context.Background(), e.provider, tok.RefreshToken)
			if rotate {
				if nt.RefreshToken == tok.RefreshToken {
					t.Fatal("not rotated")
				}
				if !errors.Is(errOld, oauthflow.ErrInvalidGrant) {
					t.Fatalf("old refresh token after rotation: %v", errOld)
				}
				if _, err := e.flow.Refresh(context.Background(), e.provider, nt.RefreshToken); err != nil {
					t.Fatalf("new refresh token: %v", err)
				}
			} else {
				if nt.RefreshToken != tok.RefreshToken || errOld != nil {
					t.Fatalf("refresh token kept: %q %v", nt.RefreshToken, errOld)
				}
			}
			if s := e.em.Stats(); s.RefreshGrants < 2 {
				t.Fatalf("stats %+v", s)
			}
		})
	}
}

func TestRevokeUserInvalidGrant(t *testing.T) {
	e := newEnv(t, nil)
	st, code := e.authorize(t, "u")
	tok, err := e.flow.Exchange(context.Background(), e.provider, st, code)
	if err != nil {
		t.Fatal(err)
	}
	e.em.RevokeUser("u-alice")
	_, err = e.flow.Refresh(context.Background(), e.provider, tok.RefreshToken)
	if !errors.Is(err, oauthflow.ErrInvalidGrant) {
		t.Fatalf("refresh after RevokeUser: %v", err)
	}
	if strings.Contains(err.Error(), tok.RefreshToken) {
		t.Fatal("the error carries the refresh token")
	}
}

func TestRevoke(t *testing.T) {
	e := newEnv(t, nil)
	st, code := e.authorize(t, "u")
	tok, err := e.flow.Exchange(context.Background(), e.provider, st, code)
	if err != nil {
		t.Fatal(err)
	}
	bad := e.provider
	bad.ClientSecret = "wrong"
	if err := e.flow.Revoke(context.Background(), bad, tok.RefreshToken); !errors.Is(err, oauthflow.ErrProvider) {
		t.Fatalf("revoke with a wrong secret: %v", err)
	}
	if _, err := e.em.Verify(tok.AccessToken); err != nil {
		t.Fatalf("revoked by a wrong client: %v", err)
	}
	if err := e.flow.Revoke(context.Background(), e.provider, tok.RefreshToken); err != nil {
		t.Fatal(err)
	}
	if _, err := e.em.Verify(tok.AccessToken); !errors.Is(err, emu.ErrInvalidToken) {
		t.Fatalf("access token after revoking its refresh token: %v", err)
	}
	if _, err := e.flow.Refresh(context.Background(), e.provider, tok.RefreshToken); !errors.Is(err, oauthflow.ErrInvalidGrant) {
		t.Fatalf("refresh after revoke: %v", err)
	}
	noRevoke := e.provider
	noRevoke.RevokeURL = ""
	if err := e.flow.Revoke(context.Background(), noRevoke, "x"); err != nil {
		t.Fatalf("no revoke URL: %v", err)
	}
	if s := e.em.Stats(); s.Revocations != 1 {
		t.Fatalf("stats %+v", s)
	}
}

func TestProviderUnreachable(t *testing.T) {
	e := newEnv(t, nil)
	st, code := e.authorize(t, "u")
	tok, err := e.flow.Exchange(context.Background(), e.provider, st, code)
	if err != nil {
		t.Fatal(err)
	}
	e.srv.Close()
	_, err = e.flow.Refresh(context.Background(), e.provider, tok.RefreshToken)
	if !errors.Is(err, oauthflow.ErrProvider) || errors.Is(err, oauthflow.ErrInvalidGrant) {
		t.Fatalf("unreachable: %v", err)
	}
	if strings.Contains(err.Error(), tok.RefreshToken) {
		t.Fatal("the error carries the refresh token")
	}
}

func TestOpenStateRefuses(t *testing.T) {
	e := newEnv(t, nil)
	authURL, _, err := start(e.flow, e.provider, uuid.New(), uuid.New(), "u", nil)
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(authURL)
	good := u.Query().Get("state")
	raw, _ := base64.RawURLEncoding.DecodeString(good)
	flipped := slices.Clone(raw)
	flipped[len(flipped)/2] ^= 1

	other := newSealer(t) // another platform's key
	forged, _ := other.Seal("oauth-state", []byte(`{"n":"x","u":"u","pr":"emu","v":"v","e":"2030-01-01T00:00:00Z"}`))
	// A value sealed under this platform's key but for another purpose.
	wrongKey, _ := e.sealer.Seal("connection", []byte(`{"n":"x","u":"u","pr":"emu","v":"v","e":"2030-01-01T00:00:00Z"}`))
	incomplete, _ := e.sealer.Seal("oauth-state", []byte(`{"n":"x","e":"2030-01-01T00:00:00Z"}`))
	notJSON, _ := e.sealer.Seal("oauth-state", []byte(`hello`))

	tests := []struct {
		name  string
		state string
		want  error
	}{
		{"empty", "", oauthflow.ErrStateInvalid},
		{"garbage", "not a state!", oauthflow.ErrStateInvalid},
		{"tampered", base64.RawURLEncoding.EncodeToString(flipped), oauthflow.ErrStateInvalid},
		{"truncated", good[:len(good)-4], oauthflow.ErrStateInvalid},
		{"forged with another key", base64.RawURLEncoding.EncodeToString(forged), oauthflow.ErrStateInvalid},
		{"sealed for another purpose", base64.RawURLEncoding.EncodeToString(wrongKey), oauthflow.ErrStateInvalid},
		{"incomplete", base64.RawURLEncoding.EncodeToString(incomplete), oauthflow.ErrStateInvalid},
		{"not json", base64.RawURLEncoding.EncodeToString(notJSON), oauthflow.ErrStateInvalid},
		{"huge", strings.Repeat("A", 5000), oauthflow.ErrStateInvalid},
		{"good", good, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := e.flow.OpenState(tt.state)
			if !errors.Is(err, tt.want) || (tt.want == nil) != (err == nil) {
				t.Fatalf("got %v, want %v", err, tt.want)
			}
		})
	}
	e.clock.Add(10*time.Minute + time.Second)
	if _, err := e.flow.OpenState(good); !errors.Is(err, oauthflow.ErrStateExpired) {
		t.Fatalf("expired: %v", err)
	}
}

func TestExchangeOtherProvidersState(t *testing.T) {
	e := newEnv(t, nil)
	st, code := e.authorize(t, "u")
	other := e.provider
	other.ID = "other"
	if _, err := e.flow.Exchange(context.Background(), other, st, code); !errors.Is(err, oauthflow.ErrStateInvalid) {
		t.Fatalf("state of another provider: %v", err)
	}
}

func TestStartURL(t *testing.T) {
	tests := []struct {
		name       string
		typ        string
		wantParams map[string]string
		absent     []string
	}{
		{"oauth2", oauthflow.TypeOAuth2, map[string]string{"access_type": "offline", "code_challenge_method": "S256", "response_type": "code",
			"scope": "email extra openid", "client_id": "auditrail"}, []string{"include_granted_scopes", "prompt"}},
		{"google", oauthflow.TypeGoogle, map[string]string{"access_type": "offline", "code_challenge_method": "S256",
			"include_granted_scopes": "true", "prompt": "consent"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, nil)
			p := e.provider
			p.Type = tt.typ
			authURL, st, err := start(e.flow, p, uuid.New(), uuid.New(), "u", []string{"extra", "email"})
			if err != nil {
				t.Fatal(err)
			}
			u, _ := url.Parse(authURL)
			q := u.Query()
			for k, v := range tt.wantParams {
				if q.Get(k) != v {
					t.Errorf("%s = %q, want %q", k, q.Get(k), v)
				}
			}
			for _, k := range tt.absent {
				if q.Has(k) {
					t.Errorf("%s present", k)
				}
			}
			if len(q.Get("code_challenge")) != 43 || strings.Contains(authURL, st.Verifier) {
				t.Errorf("challenge %q (the verifier must not be in the URL)", q.Get("code_challenge"))
			}
			if q.Get("redirect_uri") == "" || strings.Contains(q.Get("state"), st.Nonce) {
				t.Errorf("redirect %q, state in clear", q.Get("redirect_uri"))
			}
		})
	}
}

func TestStartNonceUnique(t *testing.T) {
	e := newEnv(t, nil)
	seen := map[string]bool{}
	for range 100 {
		_, st, err := start(e.flow, e.provider, uuid.New(), uuid.New(), "u", nil)
		if err != nil {
			t.Fatal(err)
		}
		if seen[st.Nonce] || len(st.Nonce) != 22 {
			t.Fatalf("nonce %q", st.Nonce)
		}
		seen[st.Nonce] = true
	}
}

func TestWithDefaults(t *testing.T) {
	p := oauthflow.Provider{ID: "google", Type: oauthflow.TypeGoogle, Endpoints: oauthflow.Endpoints{TokenURL: "https://emu/token"}}.WithDefaults()
	if p.TokenURL != "https://emu/token" || p.AuthorizeURL != oauthflow.Defaults["google"].AuthorizeURL ||
		p.RevokeURL == "" || !slices.Equal(p.ScopesDefault, []string{"openid", "email"}) {
		t.Fatalf("%+v", p)
	}
	m := oauthflow.Provider{Type: oauthflow.TypeMicrosoft}.WithDefaults()
	if m.RevokeURL != "" || m.APIBaseURL != "https://graph.microsoft.com/v1.0" {
		t.Fatalf("%+v", m)
	}
	o := oauthflow.Provider{Type: oauthflow.TypeOAuth2}.WithDefaults()
	if o.AuthorizeURL != "" || o.ScopesDefault != nil {
		t.Fatalf("%+v", o)
	}
}

func TestConfigValidate(t *testing.T) {
	ok := oauthflow.DefaultConfig()
	ok.RedirectURL = "https://auditrail.example.com/api/v1/oauth/callback"
	tests := []struct {
		name string
		mod  func(*oauthflow.Config)
		ok   bool
	}{
		{"valid", func(*oauthflow.Config) {}, true},
		{"no redirect", func(c *oauthflow.Config) { c.RedirectURL = "" }, false},
		{"relative redirect", func(c *oauthflow.Config) { c.RedirectURL = "/api/v1/oauth/callback" }, false},
		{"ftp redirect", func(c *oauthflow.Config) { c.RedirectURL = "ftp://x/cb" }, false},
		{"zero ttl", func(c *oauthflow.Config) { c.StateTTL = 0 }, false},
		{"no client", func(c *oauthflow.Config) { c.HTTPClient = nil }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := ok
			tt.mod(&c)
			err := c.Validate()
			if (err == nil) != tt.ok || (err != nil && !errors.Is(err, oauthflow.ErrInvalidConfig)) {
				t.Fatalf("Validate: %v", err)
			}
		})
	}
	if _, err := oauthflow.New(ok, nil); err == nil {
		t.Fatal("New without a sealer")
	}
}

// fuzzFlow is the flow and provider the fuzz targets seal their inputs with.
func fuzzFlow(f *testing.F) (*oauthflow.Flow, oauthflow.Provider) {
	cfg := oauthflow.DefaultConfig()
	cfg.RedirectURL = "https://a.example/cb"
	flow, err := oauthflow.New(cfg, newSealer(f))
	if err != nil {
		f.Fatal(err)
	}
	return flow, oauthflow.Provider{ID: "p", Type: oauthflow.TypeOAuth2, ClientID: "c",
		Endpoints: oauthflow.Endpoints{AuthorizeURL: "https://a.example/auth", TokenURL: "https://a.example/token"}}
}

func FuzzOpenState(f *testing.F) {
	flow, p := fuzzFlow(f)
	authURL, _, err := start(flow, p, uuid.New(), uuid.New(), "u", []string{"x"})
	if err != nil {
		f.Fatal(err)
	}
	u, _ := url.Parse(authURL)
	f.Add(u.Query().Get("state"))
	f.Add("")
	f.Add("AAAA")
	f.Fuzz(func(t *testing.T, state string) {
		st, err := flow.OpenState(state)
		if err != nil {
			if !errors.Is(err, oauthflow.ErrStateInvalid) && !errors.Is(err, oauthflow.ErrStateExpired) {
				t.Fatalf("unexpected error %v", err)
			}
			return
		}
		if st.Nonce == "" || st.Verifier == "" || st.Provider != "p" {
			t.Fatalf("opened an incomplete state %+v", st)
		}
	})
}

// Token endpoint answers of other providers: errors never carry the answer's
// body (which may echo anything), invalid_grant is recognized, form-encoded
// answers work.
func TestTokenAnswers(t *testing.T) {
	tests := []struct {
		name    string
		status  int
		ctype   string
		body    string
		wantErr error
		check   func(t *testing.T, tok oauthflow.Token, now time.Time)
	}{
		{"server error with a body", 500, "text/plain", "LEAK rt_secret", oauthflow.ErrProvider, nil},
		{"invalid_grant", 400, "application/json", `{"error":"invalid_grant","error_description":"Token has been expired or revoked."}`, oauthflow.ErrInvalidGrant, nil},
		{"invalid_client", 401, "application/json", `{"error":"invalid_client","error_description":"LEAK"}`, oauthflow.ErrProvider, nil},
		{"no access token", 200, "application/json", `{"token_type":"Bearer","refresh_token":"LEAK"}`, oauthflow.ErrProvider, nil},
		{"form-encoded", 200, "application/x-www-form-urlencoded", "access_token=at1&token_type=bearer&expires_in=120&scope=a+b", nil,
			func(t *testing.T, tok oauthflow.Token, now time.Time) {
				if tok.AccessToken != "at1" || !slices.Equal(tok.Scopes, []string{"a", "b"}) || tok.RefreshToken != "rt-given" ||
					tok.ExpiresAt == nil || !tok.ExpiresAt.Equal(now.Add(2*time.Minute)) {
					t.Fatalf("%+v", tok)
				}
			}},
		{"no scope, no expiry", 200, "application/json", `{"access_token":"at2","token_type":"Bearer"}`, nil,
			func(t *testing.T, tok oauthflow.Token, _ time.Time) {
				if tok.Scopes != nil || tok.ExpiresAt != nil {
					t.Fatalf("%+v", tok)
				}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", tt.ctype)
				w.WriteHeader(tt.status)
				_, _ = io.WriteString(w, tt.body)
			}))
			defer srv.Close()
			e := newEnv(t, nil)
			p := e.provider
			p.TokenURL = srv.URL + "/token"
			tok, err := e.flow.Refresh(context.Background(), p, "rt-given")
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil) != (err == nil) {
				t.Fatalf("got %v, want %v", err, tt.wantErr)
			}
			if err != nil {
				if strings.Contains(err.Error(), "LEAK") || strings.Contains(err.Error(), "rt-given") {
					t.Fatalf("the error carries the answer: %v", err)
				}
				return
			}
			tt.check(t, tok, e.clock.Now())
		})
	}
}

// A start ticket opens as what it was made of and as nothing else; the
// state Start makes of it is bound to the browser binding it was given.
func TestTicketAndBinding(t *testing.T) {
	e := newEnv(t, nil)
	org, project := uuid.New(), uuid.New()
	sealed, tk, err := e.flow.NewTicket(e.provider, org, project, "user-1", []string{"docs.write"}, true)
	if err != nil {
		t.Fatal(err)
	}
	got, err := e.flow.OpenTicket(sealed)
	if err != nil {
		t.Fatal(err)
	}
	if got.Org != org || got.Project != project || got.User != "user-1" || got.Provider != "emu" || !got.ByApp ||
		!slices.Equal(got.Scopes, []string{"docs.write", "email", "openid"}) || !got.ExpiresAt.Equal(e.clock.Now().Add(10*time.Minute)) {
		t.Fatalf("ticket %+v", got)
	}
	if strings.Contains(sealed, tk.Nonce) || strings.Contains(sealed, "user-1") {
		t.Fatal("the ticket is readable")
	}
	binding := oauthflow.NewBinding()
	authURL, st, err := e.flow.Start(e.provider, got, binding)
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(authURL)
	state := u.Query().Get("state")
	if strings.Contains(authURL, binding) || strings.Contains(authURL, sealed) {
		t.Fatal("the authorization URL carries the binding or the ticket")
	}
	if st.Nonce == tk.Nonce || !st.ExpiresAt.Equal(tk.ExpiresAt) || !slices.Equal(st.Scopes, tk.Scopes) {
		t.Fatalf("state %+v of ticket %+v", st, tk)
	}
	// Neither passes for the other.
	if _, err := e.flow.OpenState(sealed); !errors.Is(err, oauthflow.ErrStateInvalid) {
		t.Fatalf("a ticket opened as a state: %v", err)
	}
	if _, err := e.flow.OpenTicket(state); !errors.Is(err, oauthflow.ErrStateInvalid) {
		t.Fatalf("a state opened as a ticket: %v", err)
	}
	opened, err := e.flow.OpenState(state)
	if err != nil {
		t.Fatal(err)
	}
	if opened.Ticket != tk.Nonce {
		t.Fatalf("the state names ticket %q, want %q", opened.Ticket, tk.Nonce)
	}
	// A flow started in the last seconds of its link still gets the whole
	// state time for the provider step.
	e.clock.Add(9*time.Minute + 50*time.Second)
	if _, late, err := e.flow.Start(e.provider, got, binding); err != nil || !late.ExpiresAt.Equal(e.clock.Now().Add(10*time.Minute)) {
		t.Fatalf("a late start: %v, state until %s (link until %s)", err, late.ExpiresAt, tk.ExpiresAt)
	}
	e.clock.Add(-(9*time.Minute + 50*time.Second))
	other := oauthflow.NewBinding()
	tests := []struct {
		name    string
		binding string
		want    bool
	}{
		{"the browser that started", binding, true},
		{"another browser", other, false},
		{"no cookie", "", false},
		{"not base64", strings.Repeat("*", len(binding)), false},
		{"short", binding[:20], false},
		{"the hash itself", base64.RawURLEncoding.EncodeToString(opened.Bind), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := opened.BoundTo(tt.binding); got != tt.want {
				t.Fatalf("BoundTo = %v", got)
			}
		})
	}
	if (oauthflow.State{}).BoundTo(binding) {
		t.Fatal("a state without a binding accepts a browser")
	}
	// Start refuses another provider's ticket and a malformed binding.
	p := e.provider
	p.ID = "other"
	if _, _, err := e.flow.Start(p, got, binding); !errors.Is(err, oauthflow.ErrStateInvalid) {
		t.Fatalf("another provider's ticket: %v", err)
	}
	if _, _, err := e.flow.Start(e.provider, got, "x"); !errors.Is(err, oauthflow.ErrStateInvalid) {
		t.Fatalf("malformed binding: %v", err)
	}
	// A state sealed without a binding (as before browser binding) is refused.
	unbound, _ := e.sealer.Seal("oauth-state", []byte(`{"n":"x","u":"u","pr":"emu","v":"v","e":"2030-01-01T00:00:00Z"}`))
	if _, err := e.flow.OpenState(base64.RawURLEncoding.EncodeToString(unbound)); !errors.Is(err, oauthflow.ErrStateInvalid) {
		t.Fatalf("unbound state: %v", err)
	}
	e.clock.Add(10*time.Minute + time.Second)
	if _, err := e.flow.OpenTicket(sealed); !errors.Is(err, oauthflow.ErrStateExpired) {
		t.Fatalf("expired ticket: %v", err)
	}
}

// receiver is another host: it records whatever reaches it.
type receiver struct {
	mu   sync.Mutex
	got  []string
	srv  *httptest.Server
	hits int
}

func newReceiver(t *testing.T) *receiver {
	r := &receiver{}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.hits++
		r.got = append(r.got, string(b)+" "+req.Header.Get("Authorization"))
		r.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"access_token":"stolen","token_type":"Bearer","sub":"x"}`)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) requests() (int, []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.hits, slices.Clone(r.got)
}

// Issue 18 point 6: the token endpoint's redirects are never followed (a
// 307/308 would carry the client secret, the code and verifier or the
// refresh token to wherever it points); the revoke and userinfo endpoints'
// are followed on their own host only.
func TestProviderRedirectsRefused(t *testing.T) {
	for _, status := range []int{http.StatusTemporaryRedirect, http.StatusPermanentRedirect, http.StatusFound} {
		t.Run(strconv.Itoa(status), func(t *testing.T) {
			e := newEnv(t, nil)
			elsewhere := newReceiver(t)
			var sameHost atomic.Int64
			redir := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/here" {
					sameHost.Add(1)
					w.WriteHeader(http.StatusOK)
					return
				}
				target := elsewhere.srv.URL + r.URL.Path
				if r.URL.Path == "/token-same" {
					target = "/here"
				}
				http.Redirect(w, r, target, status)
			}))
			defer redir.Close()
			st, code := e.authorize(t, "u")
			tok, err := e.flow.Exchange(context.Background(), e.provider, st, code)
			if err != nil {
				t.Fatal(err)
			}
			p := e.provider
			p.TokenURL, p.RevokeURL, p.UserinfoURL = redir.URL+"/token", redir.URL+"/revoke", redir.URL+"/userinfo"
			ctx := context.Background()
			if _, err := e.flow.Refresh(ctx, p, tok.RefreshToken); !errors.Is(err, provhttp.ErrRedirect) || !errors.Is(err, oauthflow.ErrProvider) {
				t.Fatalf("refresh through a redirect: %v", err)
			}
			st2, code2 := e.authorize(t, "u")
			if _, err := e.flow.Exchange(ctx, p, st2, code2); !errors.Is(err, provhttp.ErrRedirect) {
				t.Fatalf("exchange through a redirect: %v", err)
			}
			same := p
			same.TokenURL = redir.URL + "/token-same"
			if _, err := e.flow.Refresh(ctx, same, tok.RefreshToken); !errors.Is(err, provhttp.ErrRedirect) || sameHost.Load() != 0 {
				t.Fatalf("refresh through a same-host redirect: %v (%d followed)", err, sameHost.Load())
			}
			if err := e.flow.Revoke(ctx, p, tok.RefreshToken); !errors.Is(err, provhttp.ErrRedirect) {
				t.Fatalf("revoke through a redirect: %v", err)
			}
			if _, err := e.flow.Userinfo(ctx, p, tok.AccessToken); !errors.Is(err, provhttp.ErrRedirect) {
				t.Fatalf("userinfo through a redirect: %v", err)
			}
			if n, got := elsewhere.requests(); n != 0 {
				t.Fatalf("another host received %d requests: %q", n, got)
			}
		})
	}
}

// bigBody answers n bytes of a JSON string, streamed (no Content-Length)
// or declared; it counts what it could write.
func bigBody(n int64, declare bool, written *atomic.Int64) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if declare {
			w.Header().Set("Content-Length", strconv.FormatInt(n, 10))
		}
		chunk := []byte(strings.Repeat(" ", 64<<10))
		for sent := int64(0); sent < n; sent += int64(len(chunk)) {
			k, err := w.Write(chunk)
			written.Add(int64(k))
			if err != nil {
				return
			}
		}
	})
}

// Issue 18 point 6: an endpoint answering 100 MiB fails the call with
// provhttp.ErrBodyTooLarge once the cap is passed, instead of reading it.
func TestProviderAnswersCapped(t *testing.T) {
	const huge = 100 << 20
	for _, declare := range []bool{false, true} {
		t.Run(map[bool]string{false: "streamed", true: "declared"}[declare], func(t *testing.T) {
			e := newEnv(t, nil)
			var written atomic.Int64
			srv := httptest.NewServer(bigBody(huge, declare, &written))
			defer srv.Close()
			st, code := e.authorize(t, "u")
			p := e.provider
			p.TokenURL, p.UserinfoURL = srv.URL+"/token", srv.URL+"/userinfo"
			ctx := context.Background()
			if _, err := e.flow.Exchange(ctx, p, st, code); !errors.Is(err, provhttp.ErrBodyTooLarge) || !errors.Is(err, oauthflow.ErrProvider) {
				t.Fatalf("exchange of a huge answer: %v", err)
			}
			if _, err := e.flow.Refresh(ctx, p, "rt"); !errors.Is(err, provhttp.ErrBodyTooLarge) {
				t.Fatalf("refresh of a huge answer: %v", err)
			}
			if _, err := e.flow.Userinfo(ctx, p, "at"); !errors.Is(err, provhttp.ErrBodyTooLarge) {
				t.Fatalf("userinfo of a huge answer: %v", err)
			}
			srv.CloseClientConnections()
			if w := written.Load(); w >= 3*huge/2 {
				t.Fatalf("the server wrote %d bytes for three calls: the answers were read", w)
			}
		})
	}
}

func FuzzOpenTicket(f *testing.F) {
	flow, p := fuzzFlow(f)
	ticket, _, err := flow.NewTicket(p, uuid.New(), uuid.New(), "u", []string{"x"}, false)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(ticket, oauthflow.NewBinding())
	f.Add("", "")
	f.Add("AAAA", "AAAA")
	f.Fuzz(func(t *testing.T, ticket, binding string) {
		tk, err := flow.OpenTicket(ticket)
		if err != nil {
			if !errors.Is(err, oauthflow.ErrStateInvalid) && !errors.Is(err, oauthflow.ErrStateExpired) {
				t.Fatalf("unexpected error %v", err)
			}
			return
		}
		if tk.Nonce == "" || tk.User == "" || tk.Provider != "p" {
			t.Fatalf("opened an incomplete ticket %+v", tk)
		}
		// Any binding the fuzzer finds either starts a bound flow or is refused.
		_, st, err := flow.Start(p, tk, binding)
		if err != nil {
			if !errors.Is(err, oauthflow.ErrStateInvalid) {
				t.Fatalf("unexpected error %v", err)
			}
			return
		}
		if !st.BoundTo(binding) || st.BoundTo(oauthflow.NewBinding()) {
			t.Fatalf("binding %q not bound", binding)
		}
	})
}
