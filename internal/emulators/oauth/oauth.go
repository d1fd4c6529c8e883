// Package oauth is a small but faithful OAuth 2.0 authorization server
// (RFC 6749 authorization-code and refresh-token grants, RFC 7636 PKCE with
// S256 only, RFC 7009 revocation) for the tests and for `auditrail dev
// --demo`. The Google and Microsoft Graph emulators beside it authenticate
// their API calls with its tokens through [Server.Verify] and
// [Server.Authenticate].
//
// Endpoints, relative to wherever [Server.Handler] is mounted:
//
//	GET  /authorize  response_type=code, client_id, redirect_uri, scope
//	                 (space separated), state, code_challenge and
//	                 code_challenge_method=S256 (required), login_hint,
//	                 access_type, prompt, include_granted_scopes. An unknown
//	                 client or a redirect_uri that is not registered is a 400
//	                 page (never a redirect to an unverified URI); any other
//	                 error is a redirect with error=… and the state. Renders
//	                 a consent page (application, account chooser, scopes,
//	                 Allow / Deny) unless AutoApprove is set.
//	POST /authorize  the consent form: its anti-CSRF token (bound to a cookie
//	                 and to the pending request), the chosen user and the
//	                 decision. Deny → redirect error=access_denied&state=…;
//	                 Allow → redirect code=…&state=….
//	POST /token      client authentication by HTTP Basic or client_id and
//	                 client_secret in the body (one of them);
//	                 grant_type=authorization_code (single-use code: a reused
//	                 code is refused and revokes every token issued from it,
//	                 RFC 6749 §10.5; redirect_uri must equal the authorize
//	                 one; code_verifier must match the S256 challenge) or
//	                 grant_type=refresh_token (optional narrower scope).
//	                 Answers {access_token, token_type, expires_in,
//	                 refresh_token, scope} with Cache-Control: no-store;
//	                 errors as RFC 6749 §5.2.
//	POST /revoke     RFC 7009 with client authentication; revoking a refresh
//	                 token revokes the whole grant (its access tokens too).
//	GET  /userinfo   bearer → {sub, email, email_verified, name}.
//
// Tokens are opaque random strings; the server keeps only their SHA-256, so
// the optional state file holds no usable token.
package oauth

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"
)

var (
	// ErrInvalidToken: the access token is unknown or revoked.
	ErrInvalidToken = errors.New("invalid access token")
	// ErrExpired: the access token has expired.
	ErrExpired = errors.New("access token expired")
	// ErrInsufficientScope: the token holds none of the scopes required.
	ErrInsufficientScope = errors.New("insufficient scope")
	// ErrInvalidConfig: New refused its Config.
	ErrInvalidConfig = errors.New("invalid oauth emulator config")
)

// Client is a registered OAuth client.
type Client struct {
	ID, Secret string
	// RedirectURIs registered; empty accepts any absolute http(s) URL.
	RedirectURIs []string
}

// User is an account of the emulated provider.
type User struct{ ID, Email, Name string }

// Config of the server.
type Config struct {
	Clients []Client
	Users   []User
	// AccessTTL is the lifetime of access tokens (default 1h).
	AccessTTL time.Duration
	// CodeTTL is the lifetime of authorization codes (default 60s).
	CodeTTL time.Duration
	// RotateRefreshTokens issues a new refresh token on each refresh grant;
	// the old one is then invalid.
	RotateRefreshTokens bool
	// AutoApprove skips the consent page: the request is approved as the
	// login_hint's user (by email or id), else as the first user.
	AutoApprove bool
	// Now is the clock (default time.Now).
	Now func() time.Time
	// StateFile, when set, keeps the grants and tokens (as hashes) across
	// restarts: JSON, mode 0600, written atomically.
	StateFile string
	// Logger reports state-file write failures (default slog.Default()).
	Logger *slog.Logger
}

// DefaultConfig is a Config with the default lifetimes and no client.
func DefaultConfig() Config {
	return Config{AccessTTL: time.Hour, CodeTTL: 60 * time.Second, Now: time.Now}
}

// Validate reports the first problem of the config.
func (c Config) Validate() error {
	if len(c.Clients) == 0 {
		return fmt.Errorf("%w: at least one client", ErrInvalidConfig)
	}
	if len(c.Users) == 0 {
		return fmt.Errorf("%w: at least one user", ErrInvalidConfig)
	}
	seen := map[string]bool{}
	for _, cl := range c.Clients {
		if cl.ID == "" || cl.Secret == "" {
			return fmt.Errorf("%w: client %q needs an id and a secret", ErrInvalidConfig, cl.ID)
		}
		if seen[cl.ID] {
			return fmt.Errorf("%w: client %q twice", ErrInvalidConfig, cl.ID)
		}
		seen[cl.ID] = true
		for _, u := range cl.RedirectURIs {
			if !validRedirect(u) {
				return fmt.Errorf("%w: client %q: redirect URI %q is not an absolute http(s) URL", ErrInvalidConfig, cl.ID, u)
			}
		}
	}
	users := map[string]bool{}
	for _, u := range c.Users {
		if u.ID == "" || u.Email == "" {
			return fmt.Errorf("%w: a user needs an id and an email", ErrInvalidConfig)
		}
		if users[u.ID] {
			return fmt.Errorf("%w: user %q twice", ErrInvalidConfig, u.ID)
		}
		users[u.ID] = true
	}
	if c.AccessTTL < 0 || c.CodeTTL < 0 {
		return fmt.Errorf("%w: negative lifetime", ErrInvalidConfig)
	}
	return nil
}

// Grant is what an access token stands for.
type Grant struct {
	UserID, Email, ClientID string
	Scopes                  []string
	ExpiresAt               time.Time
}

// Stats counts what the server did.
type Stats struct {
	CodesIssued   int64 // authorization codes issued
	CodeGrants    int64 // successful authorization_code grants
	RefreshGrants int64 // successful refresh_token grants
	Revocations   int64 // grants or access tokens revoked (revoke endpoint, RevokeUser, code reuse)
}

// Server is the authorization server. Safe for concurrent use.
type Server struct {
	cfg     Config
	clients map[string]Client

	mu      sync.Mutex
	st      state                  // grants and tokens (persisted)
	codes   map[string]*codeRec    // by code hash
	pending map[string]*pendingReq // consent pages, by CSRF token hash
	stats   Stats
	issued  int // tokens issued since the last sweep
}

// state is what the state file holds.
type state struct {
	Grants  map[string]*grantRec   `json:"grants"`
	Access  map[string]*accessRec  `json:"access"`
	Refresh map[string]*refreshRec `json:"refresh"`
}

type grantRec struct {
	UserID   string    `json:"user_id"`
	Email    string    `json:"email"`
	ClientID string    `json:"client_id"`
	Scopes   []string  `json:"scopes"`
	Created  time.Time `json:"created"`
}

type accessRec struct {
	Grant     string    `json:"grant"`
	Scopes    []string  `json:"scopes"`
	ExpiresAt time.Time `json:"expires_at"`
}

type refreshRec struct {
	Grant string `json:"grant"`
}

type codeRec struct {
	ClientID, RedirectURI, UserID, Challenge string
	Scopes                                   []string
	ExpiresAt                                time.Time
	Used                                     bool
	Grant                                    string // the grant issued from it, once exchanged
}

type authRequest struct {
	Client      Client
	RedirectURI string
	Scopes      []string
	State       string
	Challenge   string
	LoginHint   string
	// IncludeGranted: include_granted_scopes=true (incremental
	// authorization: the new grant also holds the scopes granted before).
	IncludeGranted bool
}

type pendingReq struct {
	req       authRequest
	session   string // hash of the browser's session cookie
	expiresAt time.Time
}

// New returns a server; it loads cfg.StateFile when it exists.
func New(cfg Config) (*Server, error) {
	def := DefaultConfig()
	if cfg.AccessTTL == 0 {
		cfg.AccessTTL = def.AccessTTL
	}
	if cfg.CodeTTL == 0 {
		cfg.CodeTTL = def.CodeTTL
	}
	if cfg.Now == nil {
		cfg.Now = def.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Server{
		cfg:     cfg,
		clients: make(map[string]Client, len(cfg.Clients)),
		st: state{
			Grants:  map[string]*grantRec{},
			Access:  map[string]*accessRec{},
			Refresh: map[string]*refreshRec{},
		},
		codes:   map[string]*codeRec{},
		pending: map[string]*pendingReq{},
	}
	for _, c := range cfg.Clients {
		s.clients[c.ID] = c
	}
	if cfg.StateFile != "" {
		if err := s.load(); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// Handler serves the endpoints; mount it at any base URL (with
// http.StripPrefix when below a path).
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /authorize", s.authorizeGet)
	mux.HandleFunc("POST /authorize", s.authorizePost)
	mux.HandleFunc("POST /token", s.token)
	mux.HandleFunc("POST /revoke", s.revoke)
	mux.HandleFunc("GET /userinfo", s.userinfo)
	mux.HandleFunc("POST /userinfo", s.userinfo)
	return mux
}

// Verify returns the grant of an access token.
func (s *Server) Verify(accessToken string) (Grant, error) {
	if accessToken == "" {
		return Grant{}, ErrInvalidToken
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	a, ok := s.st.Access[hash(accessToken)]
	if !ok {
		return Grant{}, ErrInvalidToken
	}
	g, ok := s.st.Grants[a.Grant]
	if !ok {
		return Grant{}, ErrInvalidToken
	}
	if !s.cfg.Now().Before(a.ExpiresAt) {
		return Grant{}, ErrExpired
	}
	return Grant{UserID: g.UserID, Email: g.Email, ClientID: g.ClientID,
		Scopes: slices.Clone(a.Scopes), ExpiresAt: a.ExpiresAt}, nil
}

// Authenticate verifies the request's bearer token and, when anyScope is
// given, that it holds at least one of those scopes. The status is 401 for a
// missing, unknown, revoked or expired token and 403 for a missing scope
// (0 with a nil error).
func (s *Server) Authenticate(r *http.Request, anyScope ...string) (Grant, int, error) {
	tok, ok := bearer(r)
	if !ok {
		return Grant{}, http.StatusUnauthorized, ErrInvalidToken
	}
	g, err := s.Verify(tok)
	if err != nil {
		return Grant{}, http.StatusUnauthorized, err
	}
	if len(anyScope) > 0 && !slices.ContainsFunc(anyScope, func(sc string) bool { return slices.Contains(g.Scopes, sc) }) {
		return g, http.StatusForbidden, fmt.Errorf("%w: one of %s", ErrInsufficientScope, strings.Join(anyScope, " "))
	}
	return g, 0, nil
}

// RevokeUser revokes every grant of the user: their access tokens stop
// verifying and the next refresh gets invalid_grant.
func (s *Server) RevokeUser(userID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for id, g := range s.st.Grants {
		if g.UserID == userID {
			s.revokeGrantLocked(id)
			n++
		}
	}
	if n > 0 {
		s.saveLocked()
	}
}

// Stats returns the counters.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stats
}

// revokeGrantLocked deletes a grant with its access and refresh tokens.
func (s *Server) revokeGrantLocked(id string) {
	if _, ok := s.st.Grants[id]; !ok {
		return
	}
	delete(s.st.Grants, id)
	for h, a := range s.st.Access {
		if a.Grant == id {
			delete(s.st.Access, h)
		}
	}
	for h, r := range s.st.Refresh {
		if r.Grant == id {
			delete(s.st.Refresh, h)
		}
	}
	s.stats.Revocations++
}

// sweepLocked drops expired access tokens, codes and consent pages, every
// 256 issuances.
func (s *Server) sweepLocked() {
	s.issued++
	if s.issued < 256 {
		return
	}
	s.issued = 0
	now := s.cfg.Now()
	for h, a := range s.st.Access {
		if now.After(a.ExpiresAt) {
			delete(s.st.Access, h)
		}
	}
	for h, c := range s.codes {
		// A used code is kept a while after its expiry so that its reuse
		// is still recognized (and revokes its tokens).
		if now.After(c.ExpiresAt.Add(10 * s.cfg.CodeTTL)) {
			delete(s.codes, h)
		}
	}
	for h, p := range s.pending {
		if now.After(p.expiresAt) {
			delete(s.pending, h)
		}
	}
}

func (s *Server) user(id string) (User, bool) {
	for _, u := range s.cfg.Users {
		if u.ID == id {
			return u, true
		}
	}
	return User{}, false
}

// hintedUser is the user named by login_hint (email or id), else the first.
func (s *Server) hintedUser(hint string) User {
	for _, u := range s.cfg.Users {
		if hint != "" && (strings.EqualFold(u.Email, hint) || u.ID == hint) {
			return u
		}
	}
	return s.cfg.Users[0]
}

// randomToken is 32 random bytes, base64url, after a prefix.
func randomToken(prefix string) string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
	return prefix + base64.RawURLEncoding.EncodeToString(b)
}

func hash(tok string) string {
	h := sha256.Sum256([]byte(tok))
	return hex.EncodeToString(h[:])
}

func bearer(r *http.Request) (string, bool) {
	h := r.Header.Get("Authorization")
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	tok = strings.TrimSpace(tok)
	return tok, tok != ""
}

func validRedirect(raw string) bool {
	u, err := url.Parse(raw)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != "" && u.Fragment == "" && u.User == nil
}

func splitScopes(s string) []string {
	out := strings.Fields(s)
	slices.Sort(out)
	return slices.Compact(out)
}

func isSubset(sub, of []string) bool {
	for _, s := range sub {
		if !slices.Contains(of, s) {
			return false
		}
	}
	return true
}
