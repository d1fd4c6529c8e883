package oauth

import (
	"crypto/sha256"
	"crypto/subtle"
	"embed"
	"encoding/base64"
	"encoding/json"
	"html/template"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

//go:embed templates/*.html
var templatesFS embed.FS

var pages = template.Must(template.ParseFS(templatesFS, "templates/*.html"))

const (
	maxForm        = 64 << 10
	consentTTL     = 10 * time.Minute
	sessionCookie  = "oauth_emulator_session"
	paramsAuthHint = "client_id and client_secret in the body, or HTTP Basic"
)

// authorizeParams may each appear at most once (RFC 6749 §3.1).
var authorizeParams = []string{"response_type", "client_id", "redirect_uri", "scope", "state",
	"code_challenge", "code_challenge_method", "login_hint", "access_type", "prompt", "include_granted_scopes"}

// authorizeGet validates the request and shows the consent page (or, with
// AutoApprove, approves it at once).
func (s *Server) authorizeGet(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	for _, p := range authorizeParams {
		if len(q[p]) > 1 && (p == "client_id" || p == "redirect_uri") {
			s.errorPage(w, http.StatusBadRequest, "Parameter "+p+" appears more than once.")
			return
		}
	}
	client, ok := s.clients[q.Get("client_id")]
	if !ok {
		s.errorPage(w, http.StatusBadRequest, "Unknown client.")
		return
	}
	redirect := q.Get("redirect_uri")
	if !s.redirectAllowed(client, redirect) {
		s.errorPage(w, http.StatusBadRequest, "The redirect_uri is not registered for this client.")
		return
	}
	// From here on, errors go back to the verified redirect URI.
	state := q.Get("state")
	fail := func(code, desc string) {
		redirectTo(w, r, redirect, url.Values{"error": {code}, "error_description": {desc}, "state": {state}}, http.StatusFound)
	}
	for _, p := range authorizeParams {
		if len(q[p]) > 1 {
			fail("invalid_request", p+" appears more than once")
			return
		}
	}
	if q.Get("response_type") != "code" {
		fail("unsupported_response_type", "only response_type=code is supported")
		return
	}
	if q.Get("code_challenge_method") != "S256" || !pkceString(q.Get("code_challenge")) {
		fail("invalid_request", "PKCE is required: code_challenge with code_challenge_method=S256")
		return
	}
	scopes := splitScopes(q.Get("scope"))
	if len(scopes) == 0 {
		fail("invalid_scope", "scope is required")
		return
	}
	req := authRequest{Client: client, RedirectURI: redirect, Scopes: scopes, State: state,
		Challenge: q.Get("code_challenge"), LoginHint: q.Get("login_hint")}
	if q.Get("include_granted_scopes") == "true" {
		req.IncludeGranted = true
	}
	if s.cfg.AutoApprove {
		s.approve(w, r, req, s.hintedUser(req.LoginHint), http.StatusFound)
		return
	}
	s.consentPage(w, r, req)
}

func (s *Server) redirectAllowed(c Client, redirect string) bool {
	if !validRedirect(redirect) {
		return false
	}
	return len(c.RedirectURIs) == 0 || slices.Contains(c.RedirectURIs, redirect)
}

type consentView struct {
	Client string
	Scopes []string
	Users  []consentUser
	CSRF   string
}

type consentUser struct {
	ID, Email, Name string
	Checked         bool
}

func (s *Server) consentPage(w http.ResponseWriter, r *http.Request, req authRequest) {
	session := ""
	if c, err := r.Cookie(sessionCookie); err == nil && len(c.Value) >= 32 {
		session = c.Value
	} else {
		session = randomToken("")
	}
	csrf := randomToken("")
	s.mu.Lock()
	s.sweepLocked()
	s.pending[hash(csrf)] = &pendingReq{req: req, session: hash(session), expiresAt: s.cfg.Now().Add(consentTTL)}
	s.mu.Unlock()

	hinted := s.hintedUser(req.LoginHint)
	v := consentView{Client: req.Client.ID, Scopes: req.Scopes, CSRF: csrf}
	for _, u := range s.cfg.Users {
		v.Users = append(v.Users, consentUser{ID: u.ID, Email: u.Email, Name: u.Name, Checked: u.ID == hinted.ID})
	}
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: session, Path: "/", HttpOnly: true,
		SameSite: http.SameSiteLaxMode, Secure: r.TLS != nil})
	securityHeaders(w)
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_ = pages.ExecuteTemplate(w, "consent.html", v)
}

// authorizePost is the consent form's answer.
func (s *Server) authorizePost(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, maxForm)
	if err := r.ParseForm(); err != nil {
		s.errorPage(w, http.StatusBadRequest, "Malformed form.")
		return
	}
	f := r.PostForm
	csrf := f.Get("csrf")
	s.mu.Lock()
	p, ok := s.pending[hash(csrf)]
	if ok {
		delete(s.pending, hash(csrf)) // single use
	}
	s.mu.Unlock()
	c, cerr := r.Cookie(sessionCookie)
	if csrf == "" || !ok || cerr != nil || subtle.ConstantTimeCompare([]byte(hash(c.Value)), []byte(p.session)) != 1 ||
		s.cfg.Now().After(p.expiresAt) {
		s.errorPage(w, http.StatusBadRequest, "This consent form has expired or was not issued to this browser. Start again from the application.")
		return
	}
	switch f.Get("decision") {
	case "deny":
		redirectTo(w, r, p.req.RedirectURI, url.Values{"error": {"access_denied"},
			"error_description": {"the user denied the request"}, "state": {p.req.State}}, http.StatusSeeOther)
	case "allow":
		u, ok := s.user(f.Get("user"))
		if !ok {
			s.errorPage(w, http.StatusBadRequest, "Choose an account.")
			return
		}
		s.approve(w, r, p.req, u, http.StatusSeeOther)
	default:
		s.errorPage(w, http.StatusBadRequest, "Choose Allow or Deny.")
	}
}

// approve issues an authorization code and redirects with it.
func (s *Server) approve(w http.ResponseWriter, r *http.Request, req authRequest, u User, status int) {
	code := randomToken("c_")
	s.mu.Lock()
	s.sweepLocked()
	scopes := req.Scopes
	if req.IncludeGranted {
		// Incremental authorization: the new grant also holds what the
		// user granted this client before.
		for _, g := range s.st.Grants {
			if g.UserID == u.ID && g.ClientID == req.Client.ID {
				scopes = append(slices.Clone(scopes), g.Scopes...)
			}
		}
		slices.Sort(scopes)
		scopes = slices.Compact(scopes)
	}
	s.codes[hash(code)] = &codeRec{ClientID: req.Client.ID, RedirectURI: req.RedirectURI, UserID: u.ID,
		Challenge: req.Challenge, Scopes: scopes, ExpiresAt: s.cfg.Now().Add(s.cfg.CodeTTL)}
	s.stats.CodesIssued++
	s.mu.Unlock()
	redirectTo(w, r, req.RedirectURI, url.Values{"code": {code}, "state": {req.State}}, status)
}

func redirectTo(w http.ResponseWriter, r *http.Request, target string, params url.Values, status int) {
	u, err := url.Parse(target)
	if err != nil {
		http.Error(w, "bad redirect", http.StatusBadRequest)
		return
	}
	q := u.Query()
	for k, v := range params {
		if len(v) == 1 && v[0] != "" {
			q.Set(k, v[0])
		}
	}
	u.RawQuery = q.Encode()
	w.Header().Set("Cache-Control", "no-store")
	http.Redirect(w, r, u.String(), status)
}

func securityHeaders(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Cache-Control", "no-store")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'")
	h.Set("Referrer-Policy", "no-referrer")
}

func (s *Server) errorPage(w http.ResponseWriter, status int, msg string) {
	securityHeaders(w)
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_ = pages.ExecuteTemplate(w, "error.html", msg)
}

// oauthError is an RFC 6749 §5.2 error answer.
type oauthError struct {
	status      int
	Code        string `json:"error"`
	Description string `json:"error_description,omitempty"`
}

func errInvalidRequest(desc string) *oauthError {
	return &oauthError{http.StatusBadRequest, "invalid_request", desc}
}
func errInvalidGrant(desc string) *oauthError {
	return &oauthError{http.StatusBadRequest, "invalid_grant", desc}
}

type tokenResponse struct {
	AccessToken  string `json:"access_token"`
	TokenType    string `json:"token_type"`
	ExpiresIn    int64  `json:"expires_in"`
	RefreshToken string `json:"refresh_token,omitempty"`
	Scope        string `json:"scope"`
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Pragma", "no-cache")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeOAuthError(w http.ResponseWriter, e *oauthError) {
	if e.status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Basic realm="oauth-emulator"`)
	}
	writeJSON(w, e.status, e)
}

// parseClientForm reads the form body and authenticates the client.
func (s *Server) parseClientForm(w http.ResponseWriter, r *http.Request) (url.Values, Client, *oauthError) {
	mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if mt != "application/x-www-form-urlencoded" {
		return nil, Client{}, errInvalidRequest("the body must be application/x-www-form-urlencoded")
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxForm)
	if err := r.ParseForm(); err != nil {
		return nil, Client{}, errInvalidRequest("malformed form body")
	}
	f := r.PostForm
	for k, v := range f {
		if len(v) > 1 {
			return nil, Client{}, errInvalidRequest(k + " appears more than once")
		}
	}
	id, secret, basic := r.BasicAuth()
	if basic {
		// RFC 6749 §2.3.1: both are form-urlencoded before Basic encoding.
		var err1, err2 error
		id, err1 = url.QueryUnescape(id)
		secret, err2 = url.QueryUnescape(secret)
		if err1 != nil || err2 != nil {
			return nil, Client{}, &oauthError{http.StatusUnauthorized, "invalid_client", "malformed Basic credentials"}
		}
		if f.Has("client_secret") {
			return nil, Client{}, errInvalidRequest("use one client authentication method: " + paramsAuthHint)
		}
		if f.Has("client_id") && f.Get("client_id") != id {
			return nil, Client{}, errInvalidRequest("client_id differs from the authenticated client")
		}
	} else {
		id, secret = f.Get("client_id"), f.Get("client_secret")
	}
	c, ok := s.clients[id]
	// Compare a digest so that the timing says nothing about the secret.
	want, got := sha256.Sum256([]byte(c.Secret)), sha256.Sum256([]byte(secret))
	if !ok || secret == "" || subtle.ConstantTimeCompare(want[:], got[:]) != 1 {
		return nil, Client{}, &oauthError{http.StatusUnauthorized, "invalid_client", "client authentication failed (" + paramsAuthHint + ")"}
	}
	return f, c, nil
}

// token is the token endpoint.
func (s *Server) token(w http.ResponseWriter, r *http.Request) {
	f, client, oerr := s.parseClientForm(w, r)
	if oerr != nil {
		writeOAuthError(w, oerr)
		return
	}
	var resp tokenResponse
	switch f.Get("grant_type") {
	case "authorization_code":
		resp, oerr = s.codeGrant(f, client)
	case "refresh_token":
		resp, oerr = s.refreshGrant(f, client)
	case "":
		oerr = errInvalidRequest("grant_type is required")
	default:
		oerr = &oauthError{http.StatusBadRequest, "unsupported_grant_type", "authorization_code or refresh_token"}
	}
	if oerr != nil {
		writeOAuthError(w, oerr)
		return
	}
	writeJSON(w, http.StatusOK, resp)
}

func (s *Server) codeGrant(f url.Values, client Client) (tokenResponse, *oauthError) {
	code := f.Get("code")
	if code == "" {
		return tokenResponse{}, errInvalidRequest("code is required")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.codes[hash(code)]
	if !ok || c.ClientID != client.ID {
		return tokenResponse{}, errInvalidGrant("unknown authorization code")
	}
	if c.Used {
		// RFC 6749 §10.5: a code used twice has leaked; revoke what it gave.
		if c.Grant != "" {
			s.revokeGrantLocked(c.Grant)
			c.Grant = ""
			s.saveLocked()
		}
		return tokenResponse{}, errInvalidGrant("authorization code already used")
	}
	c.Used = true // any attempt consumes the code
	if !s.cfg.Now().Before(c.ExpiresAt) {
		return tokenResponse{}, errInvalidGrant("authorization code expired")
	}
	if f.Get("redirect_uri") != c.RedirectURI {
		return tokenResponse{}, errInvalidGrant("redirect_uri differs from the authorization request")
	}
	v := f.Get("code_verifier")
	if !pkceString(v) {
		return tokenResponse{}, errInvalidGrant("code_verifier missing or malformed")
	}
	sum := sha256.Sum256([]byte(v))
	if subtle.ConstantTimeCompare([]byte(base64.RawURLEncoding.EncodeToString(sum[:])), []byte(c.Challenge)) != 1 {
		return tokenResponse{}, errInvalidGrant("code_verifier does not match the code_challenge")
	}
	u, _ := s.user(c.UserID)
	gid := hash(randomToken("g_"))
	s.st.Grants[gid] = &grantRec{UserID: u.ID, Email: u.Email, ClientID: client.ID, Scopes: c.Scopes, Created: s.cfg.Now()}
	c.Grant = gid
	resp := s.issueAccessLocked(gid, c.Scopes)
	resp.RefreshToken = randomToken("rt_")
	s.st.Refresh[hash(resp.RefreshToken)] = &refreshRec{Grant: gid}
	s.stats.CodeGrants++
	s.saveLocked()
	return resp, nil
}

func (s *Server) refreshGrant(f url.Values, client Client) (tokenResponse, *oauthError) {
	rt := f.Get("refresh_token")
	if rt == "" {
		return tokenResponse{}, errInvalidRequest("refresh_token is required")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	rec, ok := s.st.Refresh[hash(rt)]
	if !ok {
		return tokenResponse{}, errInvalidGrant("refresh token invalid, expired or revoked")
	}
	g, ok := s.st.Grants[rec.Grant]
	if !ok || g.ClientID != client.ID {
		return tokenResponse{}, errInvalidGrant("refresh token invalid, expired or revoked")
	}
	scopes := g.Scopes
	if f.Has("scope") {
		scopes = splitScopes(f.Get("scope"))
		if len(scopes) == 0 || !isSubset(scopes, g.Scopes) {
			return tokenResponse{}, &oauthError{http.StatusBadRequest, "invalid_scope", "the scope exceeds the grant"}
		}
	}
	resp := s.issueAccessLocked(rec.Grant, scopes)
	if s.cfg.RotateRefreshTokens {
		delete(s.st.Refresh, hash(rt))
		resp.RefreshToken = randomToken("rt_")
		s.st.Refresh[hash(resp.RefreshToken)] = &refreshRec{Grant: rec.Grant}
	}
	s.stats.RefreshGrants++
	s.saveLocked()
	return resp, nil
}

func (s *Server) issueAccessLocked(gid string, scopes []string) tokenResponse {
	s.sweepLocked()
	tok := randomToken("at_")
	s.st.Access[hash(tok)] = &accessRec{Grant: gid, Scopes: slices.Clone(scopes), ExpiresAt: s.cfg.Now().Add(s.cfg.AccessTTL)}
	return tokenResponse{AccessToken: tok, TokenType: "Bearer", ExpiresIn: int64(s.cfg.AccessTTL / time.Second),
		Scope: strings.Join(scopes, " ")}
}

// revoke is RFC 7009's endpoint: 200 whether or not the token was known.
func (s *Server) revoke(w http.ResponseWriter, r *http.Request) {
	f, client, oerr := s.parseClientForm(w, r)
	if oerr != nil {
		writeOAuthError(w, oerr)
		return
	}
	tok := f.Get("token")
	if tok == "" {
		writeOAuthError(w, errInvalidRequest("token is required"))
		return
	}
	h := hash(tok)
	s.mu.Lock()
	if rec, ok := s.st.Refresh[h]; ok {
		if g, ok := s.st.Grants[rec.Grant]; ok && g.ClientID == client.ID {
			s.revokeGrantLocked(rec.Grant)
			s.saveLocked()
		}
	} else if a, ok := s.st.Access[h]; ok {
		if g, ok := s.st.Grants[a.Grant]; ok && g.ClientID == client.ID {
			delete(s.st.Access, h)
			s.stats.Revocations++
			s.saveLocked()
		}
	}
	s.mu.Unlock()
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
}

type userinfoResponse struct {
	Sub           string `json:"sub"`
	Email         string `json:"email"`
	EmailVerified bool   `json:"email_verified"`
	Name          string `json:"name,omitempty"`
}

func (s *Server) userinfo(w http.ResponseWriter, r *http.Request) {
	g, status, err := s.Authenticate(r)
	if err != nil {
		w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token", error_description=`+strconv.Quote(err.Error()))
		writeJSON(w, status, oauthError{Code: "invalid_token", Description: err.Error()})
		return
	}
	u, ok := s.user(g.UserID)
	if !ok {
		u = User{ID: g.UserID, Email: g.Email}
	}
	writeJSON(w, http.StatusOK, userinfoResponse{Sub: u.ID, Email: u.Email, EmailVerified: true, Name: u.Name})
}

// pkceString reports whether s is a PKCE verifier or S256 challenge:
// 43 to 128 characters of [A-Za-z0-9-._~] (RFC 7636 §4.1).
func pkceString(s string) bool {
	if len(s) < 43 || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~') {
			return false
		}
	}
	return true
}
