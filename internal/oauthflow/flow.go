package oauthflow

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/google/uuid"
	"golang.org/x/oauth2"

	"github.com/auditrail/auditrail/internal/provhttp"
)

var (
	// ErrStateInvalid: the state does not open (forged, tampered, garbage)
	// or belongs to another provider.
	ErrStateInvalid = errors.New("invalid oauth state")
	// ErrStateExpired: the state opened but its time is over.
	ErrStateExpired = errors.New("oauth state expired")
	// ErrInvalidGrant: the provider refused the code or refresh token
	// (invalid_grant: expired, revoked, already used, PKCE mismatch).
	ErrInvalidGrant = errors.New("invalid grant")
	// ErrProvider: the provider answered with another error or could not
	// be reached; worth retrying later.
	ErrProvider = errors.New("oauth provider error")
	// ErrInvalidProvider: the provider lacks a client id or an endpoint.
	ErrInvalidProvider = errors.New("invalid auth provider")
	// ErrInvalidConfig: New refused its Config.
	ErrInvalidConfig = errors.New("invalid oauthflow config")
)

// stateKey and ticketKey are the sealer keys (additional data) of states
// and start tickets: a sealed connection, secret or session cannot pass
// for either, nor one for the other.
const (
	stateKey  = "oauth-state"
	ticketKey = "oauth-start-ticket"
)

// maxState bounds the state and the ticket accepted by OpenState and
// OpenTicket.
// CallbackPath is the platform's OAuth redirect route (CONTRACT.md): a
// provider redirects to the public URL plus this path.
const CallbackPath = "/api/v1/oauth/callback"

const maxState = 4096

// maxAnswer caps a token, revoke or userinfo answer: the largest real ones
// are a few KiB (an id_token included).
const maxAnswer = 1 << 20

// bindLen is the length of a browser binding before encoding.
const bindLen = 32

// Sealer is cpstate.Sealer (AES-256-GCM; key = additional data).
type Sealer interface {
	Seal(key string, plaintext []byte) ([]byte, error)
	Open(key string, sealed []byte) ([]byte, error)
}

// Config of a Flow.
type Config struct {
	// RedirectURL is <public URL>/api/v1/oauth/callback.
	RedirectURL string
	// StateTTL is how long a started flow may be completed (default 10m).
	StateTTL time.Duration
	// HTTPClient makes the token, revoke and userinfo calls; the caller
	// passes an egress-guarded one. Its Transport and Timeout are used;
	// whatever its CheckRedirect, the flow follows no redirect of a token
	// endpoint, those of the revoke and userinfo endpoints on their own
	// host only, and caps every answer at 1 MiB (provhttp).
	HTTPClient *http.Client
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// DefaultConfig has a 10-minute state, a client with a 15 s timeout and
// time.Now; RedirectURL must still be set. Whatever client is configured,
// the flow never follows a redirect of the token endpoint, follows those
// of the revoke and userinfo endpoints only on their own host, and caps
// every answer (see New).
func DefaultConfig() Config {
	return Config{StateTTL: 10 * time.Minute, HTTPClient: provhttp.Client(nil, 15*time.Second, maxAnswer), Now: time.Now}
}

// Validate reports the first problem of the config.
func (c Config) Validate() error {
	u, err := url.Parse(c.RedirectURL)
	if c.RedirectURL == "" || err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%w: RedirectURL %q must be an absolute http(s) URL", ErrInvalidConfig, c.RedirectURL)
	}
	if c.StateTTL <= 0 {
		return fmt.Errorf("%w: StateTTL must be positive", ErrInvalidConfig)
	}
	if c.HTTPClient == nil {
		return fmt.Errorf("%w: HTTPClient is required", ErrInvalidConfig)
	}
	if c.Now == nil {
		return fmt.Errorf("%w: Now is required", ErrInvalidConfig)
	}
	return nil
}

// Provider is an organization's auth provider, its secret in plaintext
// (memory only).
type Provider struct {
	ID, Type, ClientID, ClientSecret string
	// PickerAPIKey is a google provider's browser API key for the Google
	// Picker (setDeveloperKey); empty when none is configured.
	PickerAPIKey string
	Endpoints
}

// WithDefaults fills the empty endpoint fields (and default scopes) from
// Defaults[p.Type].
func (p Provider) WithDefaults() Provider {
	d, ok := Defaults[p.Type]
	if !ok {
		return p
	}
	fill := func(dst *string, v string) {
		if *dst == "" {
			*dst = v
		}
	}
	fill(&p.AuthorizeURL, d.AuthorizeURL)
	fill(&p.TokenURL, d.TokenURL)
	fill(&p.RevokeURL, d.RevokeURL)
	fill(&p.UserinfoURL, d.UserinfoURL)
	fill(&p.APIBaseURL, d.APIBaseURL)
	if p.ScopesDefault == nil {
		p.ScopesDefault = append([]string(nil), d.ScopesDefault...)
	}
	return p
}

func (p Provider) validate() error {
	if p.ID == "" || p.ClientID == "" || p.AuthorizeURL == "" || p.TokenURL == "" {
		return fmt.Errorf("%w: %q needs an id, a client id, an authorize URL and a token URL", ErrInvalidProvider, p.ID)
	}
	return nil
}

// Ticket is what a start link carries (sealed, in the URL of the
// platform's start page): whose connection to which provider, with which
// scopes, until when, and who asked for it. It starts nothing by itself:
// Start turns it into a state, once per click of the start page, so it is
// not single use (the state's nonce is).
type Ticket struct {
	Nonce    string    `json:"n"`
	Org      uuid.UUID `json:"o"`
	Project  uuid.UUID `json:"p"`
	User     string    `json:"u"`
	Provider string    `json:"pr"`
	Scopes   []string  `json:"s"`
	// ByApp: an application asked for it (a project's service key, or the
	// platform itself), acting for an end user who has no platform
	// credentials: no platform session of User can be required.
	ByApp     bool      `json:"a,omitempty"`
	ExpiresAt time.Time `json:"e"`
}

// State is what the sealed state parameter carries through the provider.
type State struct {
	Nonce     string    `json:"n"`
	Org       uuid.UUID `json:"o"`
	Project   uuid.UUID `json:"p"`
	User      string    `json:"u"`
	Provider  string    `json:"pr"`
	Scopes    []string  `json:"s"`
	Verifier  string    `json:"v"`
	ExpiresAt time.Time `json:"e"`
	// Bind is SHA-256 of the browser binding that Start was given (the
	// value of a cookie of the browser that clicked the start page):
	// the callback completes the flow only in that browser (BoundTo).
	Bind []byte `json:"b"`
	// Ticket is the nonce of the start link the flow came from: the
	// platform spends the link once a flow of it completes, so that nobody
	// holding it can replace the connection afterwards.
	Ticket string `json:"t,omitempty"`
}

// NewBinding returns a fresh browser binding: 32 random bytes, base64url,
// for a cookie of the browser that starts a flow.
func NewBinding() string {
	b := make([]byte, bindLen)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
	return base64.RawURLEncoding.EncodeToString(b)
}

// bindHash is SHA-256 of a binding's bytes; false when it is not one.
func bindHash(binding string) ([]byte, bool) {
	if len(binding) != base64.RawURLEncoding.EncodedLen(bindLen) {
		return nil, false
	}
	b, err := base64.RawURLEncoding.DecodeString(binding)
	if err != nil || len(b) != bindLen {
		return nil, false
	}
	sum := sha256.Sum256(b)
	return sum[:], true
}

// BoundTo reports, in constant time, whether binding is the one the flow
// was started with; false for an empty or malformed binding.
func (st State) BoundTo(binding string) bool {
	h, ok := bindHash(binding)
	return ok && len(st.Bind) == sha256.Size && subtle.ConstantTimeCompare(h, st.Bind) == 1
}

// Token is a provider's token answer.
type Token struct {
	AccessToken, RefreshToken, TokenType string
	ExpiresAt                            *time.Time
	// Scopes granted: the answer's "scope" when present, else the requested
	// ones (nil after a refresh whose answer has no scope: keep the
	// connection's).
	Scopes []string
}

// Account is the provider's account of the user (from userinfo).
type Account struct {
	Subject string `json:"sub"`
	Email   string `json:"email"`
	Name    string `json:"name"`
}

// Flow runs the client side of the authorization-code flow. Safe for
// concurrent use.
type Flow struct {
	cfg    Config
	sealer Sealer

	// token makes the token endpoint's calls (no redirect followed, the
	// answer read whole within maxAnswer); api the revoke and userinfo
	// calls (redirects on the same host only, answers capped).
	token, api *http.Client

	mu      sync.Mutex
	configs map[configKey]*oauth2.Config // keeps x/oauth2's auth-style cache per provider
}

type configKey struct{ id, clientID, secret, authURL, tokenURL string }

// New returns a Flow; Now defaults to time.Now.
func New(cfg Config, sealer Sealer) (*Flow, error) {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if sealer == nil {
		return nil, fmt.Errorf("%w: a sealer is required", ErrInvalidConfig)
	}
	base := cfg.HTTPClient.Transport
	token := &http.Client{Transport: &readWhole{provhttp.LimitBody(base, maxAnswer)}, Timeout: cfg.HTTPClient.Timeout,
		CheckRedirect: refuseRedirects}
	api := &http.Client{Transport: provhttp.LimitBody(base, maxAnswer), Timeout: cfg.HTTPClient.Timeout,
		CheckRedirect: provhttp.CheckRedirect}
	return &Flow{cfg: cfg, sealer: sealer, token: token, api: api, configs: map[configKey]*oauth2.Config{}}, nil
}

// refuseRedirects is the token client's CheckRedirect: a token request
// carries the client secret, a code and its verifier or a refresh token in
// its body, which a 307 or 308 would send on; a token endpoint has no
// reason to redirect.
func refuseRedirects(req *http.Request, via []*http.Request) error {
	return fmt.Errorf("%w: the token endpoint %s answered a redirect (to %s://%s), which is never followed",
		provhttp.ErrRedirect, via[0].URL.Host, req.URL.Scheme, req.URL.Host)
}

// readWhole reads a token answer whole in the round trip, so that one
// longer than the cap fails the call with provhttp.ErrBodyTooLarge
// (x/oauth2 would read a prefix and report it unparsable).
type readWhole struct{ base http.RoundTripper }

func (t *readWhole) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(b))
	return resp, nil
}

func (t *readWhole) CloseIdleConnections() {
	if c, ok := t.base.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// oauthConfig is the x/oauth2 config of a provider, reused across calls so
// that the detected client-authentication style is remembered.
func (f *Flow) oauthConfig(p Provider) *oauth2.Config {
	k := configKey{p.ID, p.ClientID, p.ClientSecret, p.AuthorizeURL, p.TokenURL}
	f.mu.Lock()
	defer f.mu.Unlock()
	if c, ok := f.configs[k]; ok {
		return c
	}
	if len(f.configs) >= 1024 { // secrets rotated many times: start over
		clear(f.configs)
	}
	c := &oauth2.Config{
		ClientID:     p.ClientID,
		ClientSecret: p.ClientSecret,
		Endpoint:     oauth2.Endpoint{AuthURL: p.AuthorizeURL, TokenURL: p.TokenURL, AuthStyle: oauth2.AuthStyleAutoDetect},
		RedirectURL:  f.cfg.RedirectURL,
	}
	f.configs[k] = c
	return c
}

func (f *Flow) ctx(ctx context.Context) context.Context {
	return context.WithValue(ctx, oauth2.HTTPClient, f.token)
}

func newNonce() string {
	nonce := make([]byte, 16)
	_, _ = rand.Read(nonce) // crypto/rand.Read never fails (Go 1.24+)
	return base64.RawURLEncoding.EncodeToString(nonce)
}

// NewTicket makes the start ticket of a flow for the user: the scopes
// asked are the provider's defaults merged with scopes; it is sealed and
// expires after StateTTL. byApp says an application asked (Ticket.ByApp).
// It returns the sealed ticket (base64url, for a URL path) and the ticket.
func (f *Flow) NewTicket(p Provider, org, project uuid.UUID, user string, scopes []string, byApp bool) (string, Ticket, error) {
	p = p.WithDefaults()
	if err := p.validate(); err != nil {
		return "", Ticket{}, err
	}
	t := Ticket{Nonce: newNonce(), Org: org, Project: project, User: user, Provider: p.ID,
		Scopes: MergeScopes(p.ScopesDefault, scopes), ByApp: byApp,
		ExpiresAt: f.cfg.Now().Add(f.cfg.StateTTL).UTC().Truncate(time.Second)}
	sealed, err := f.seal(ticketKey, t)
	if err != nil {
		return "", Ticket{}, err
	}
	return sealed, t, nil
}

// OpenTicket opens a start ticket: ErrStateInvalid unless this platform
// sealed it as a ticket, ErrStateExpired after its time.
func (f *Flow) OpenTicket(ticket string) (Ticket, error) {
	var t Ticket
	if err := f.open(ticketKey, ticket, &t); err != nil {
		return Ticket{}, err
	}
	if t.Nonce == "" || t.Provider == "" || t.User == "" || t.ExpiresAt.IsZero() {
		return Ticket{}, ErrStateInvalid
	}
	if !f.cfg.Now().Before(t.ExpiresAt) {
		return Ticket{}, ErrStateExpired
	}
	return t, nil
}

func (f *Flow) seal(key string, v any) (string, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("oauthflow: encode %s: %w", key, err)
	}
	sealed, err := f.sealer.Seal(key, b)
	if err != nil {
		return "", fmt.Errorf("oauthflow: seal %s: %w", key, err)
	}
	return base64.RawURLEncoding.EncodeToString(sealed), nil
}

// open opens what seal made under key into v; ErrStateInvalid for
// anything else.
func (f *Flow) open(key, s string, v any) error {
	if s == "" || len(s) > maxState {
		return ErrStateInvalid
	}
	sealed, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return ErrStateInvalid
	}
	b, err := f.sealer.Open(key, sealed)
	if err != nil {
		return ErrStateInvalid
	}
	if err := json.Unmarshal(b, v); err != nil {
		return ErrStateInvalid
	}
	return nil
}

// Start begins the flow of a ticket in the browser that holds binding
// (NewBinding; the caller sets it as a cookie of that browser): a fresh
// single-use state, sealed, expiring with the ticket, carrying the
// binding's hash; PKCE S256; offline access (and, for Google, incremental
// authorization with a consent prompt so that a refresh token comes back).
// It returns the provider's authorization URL and the state it carries.
func (f *Flow) Start(p Provider, t Ticket, binding string) (string, State, error) {
	p = p.WithDefaults()
	if err := p.validate(); err != nil {
		return "", State{}, err
	}
	if t.Provider != p.ID {
		return "", State{}, fmt.Errorf("%w: ticket is for provider %q, not %q", ErrStateInvalid, t.Provider, p.ID)
	}
	bind, ok := bindHash(binding)
	if !ok {
		return "", State{}, fmt.Errorf("%w: malformed browser binding", ErrStateInvalid)
	}
	st := State{
		Nonce:    newNonce(),
		Org:      t.Org,
		Project:  t.Project,
		User:     t.User,
		Provider: p.ID,
		Scopes:   slices.Clone(t.Scopes),
		Verifier: oauth2.GenerateVerifier(),
		// The provider step gets the whole StateTTL, whenever in the life
		// of the link it starts.
		ExpiresAt: f.cfg.Now().Add(f.cfg.StateTTL),
		Bind:      bind,
		Ticket:    t.Nonce,
	}
	sealed, err := f.seal(stateKey, st)
	if err != nil {
		return "", State{}, err
	}
	c := oauth2.Config{ClientID: p.ClientID, Endpoint: oauth2.Endpoint{AuthURL: p.AuthorizeURL},
		RedirectURL: f.cfg.RedirectURL, Scopes: st.Scopes}
	opts := []oauth2.AuthCodeOption{oauth2.AccessTypeOffline, oauth2.S256ChallengeOption(st.Verifier)}
	if p.Type == TypeGoogle {
		opts = append(opts, oauth2.SetAuthURLParam("include_granted_scopes", "true"), oauth2.SetAuthURLParam("prompt", "consent"))
	}
	return c.AuthCodeURL(sealed, opts...), st, nil
}

// RedirectURL is the flow's redirect URI (<public URL>/api/v1/oauth/callback).
func (f *Flow) RedirectURL() string { return f.cfg.RedirectURL }

// OpenState opens a state from the callback: ErrStateInvalid unless it was
// sealed by this platform's key as a state, ErrStateExpired after its time.
func (f *Flow) OpenState(state string) (State, error) {
	var st State
	if err := f.open(stateKey, state, &st); err != nil {
		return State{}, err
	}
	if st.Nonce == "" || st.Verifier == "" || st.Provider == "" || st.User == "" || st.ExpiresAt.IsZero() || len(st.Bind) != sha256.Size {
		return State{}, ErrStateInvalid
	}
	if !f.cfg.Now().Before(st.ExpiresAt) {
		return State{}, ErrStateExpired
	}
	return st, nil
}

// Exchange trades the callback's code for tokens, proving the flow with the
// state's PKCE verifier. A code obtained by another flow fails
// (ErrInvalidGrant).
func (f *Flow) Exchange(ctx context.Context, p Provider, st State, code string) (Token, error) {
	p = p.WithDefaults()
	if err := p.validate(); err != nil {
		return Token{}, err
	}
	if st.Provider != p.ID {
		return Token{}, fmt.Errorf("%w: state is for provider %q, not %q", ErrStateInvalid, st.Provider, p.ID)
	}
	if code == "" {
		return Token{}, fmt.Errorf("%w: no code", ErrInvalidGrant)
	}
	tok, err := f.oauthConfig(p).Exchange(f.ctx(ctx), code, oauth2.VerifierOption(st.Verifier))
	if err != nil {
		return Token{}, tokenError("exchange", err)
	}
	return f.fromOAuth2(tok, st.Scopes), nil
}

// Refresh gets a new access token with a refresh token. The answer's
// RefreshToken is the new one when the provider rotated it, else the one
// given.
func (f *Flow) Refresh(ctx context.Context, p Provider, refreshToken string) (Token, error) {
	p = p.WithDefaults()
	if err := p.validate(); err != nil {
		return Token{}, err
	}
	if refreshToken == "" {
		return Token{}, fmt.Errorf("%w: no refresh token", ErrInvalidGrant)
	}
	ts := f.oauthConfig(p).TokenSource(f.ctx(ctx), &oauth2.Token{RefreshToken: refreshToken, Expiry: time.Unix(1, 0)})
	tok, err := ts.Token()
	if err != nil {
		return Token{}, tokenError("refresh", err)
	}
	return f.fromOAuth2(tok, nil), nil
}

// Revoke revokes a token at the provider (RFC 7009, client authentication
// by HTTP Basic). Nil without a RevokeURL.
func (f *Flow) Revoke(ctx context.Context, p Provider, token string) error {
	p = p.WithDefaults()
	if p.RevokeURL == "" {
		return nil
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.RevokeURL, strings.NewReader(url.Values{"token": {token}}.Encode()))
	if err != nil {
		return fmt.Errorf("%w: revoke: bad URL", ErrInvalidProvider)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if p.ClientID != "" {
		req.SetBasicAuth(url.QueryEscape(p.ClientID), url.QueryEscape(p.ClientSecret))
	}
	resp, err := f.api.Do(req)
	if err != nil {
		return fmt.Errorf("%w: revoke: %w", ErrProvider, err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%w: revoke: status %d", ErrProvider, resp.StatusCode)
	}
	return nil
}

// Userinfo reads the user's account at the provider; the zero Account
// without a UserinfoURL.
func (f *Flow) Userinfo(ctx context.Context, p Provider, accessToken string) (Account, error) {
	p = p.WithDefaults()
	if p.UserinfoURL == "" {
		return Account{}, nil
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.UserinfoURL, nil)
	if err != nil {
		return Account{}, fmt.Errorf("%w: userinfo: bad URL", ErrInvalidProvider)
	}
	req.Header.Set("Authorization", "Bearer "+accessToken)
	req.Header.Set("Accept", "application/json")
	resp, err := f.api.Do(req)
	if err != nil {
		return Account{}, fmt.Errorf("%w: userinfo: %w", ErrProvider, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		return Account{}, fmt.Errorf("%w: userinfo: status %d", ErrProvider, resp.StatusCode)
	}
	var a Account
	if err := json.NewDecoder(resp.Body).Decode(&a); errors.Is(err, provhttp.ErrBodyTooLarge) {
		return Account{}, fmt.Errorf("%w: userinfo: %w", ErrProvider, err)
	} else if err != nil {
		return Account{}, fmt.Errorf("%w: userinfo: undecodable answer", ErrProvider)
	}
	return a, nil
}

// fromOAuth2 converts x/oauth2's token; the expiry is expires_in on
// Config.Now (x/oauth2 reads it on the wall clock).
func (f *Flow) fromOAuth2(t *oauth2.Token, requested []string) Token {
	out := Token{AccessToken: t.AccessToken, RefreshToken: t.RefreshToken, TokenType: t.Type(), Scopes: requested}
	if secs, ok := expiresIn(t.Extra("expires_in")); ok {
		e := f.cfg.Now().Add(time.Duration(secs) * time.Second).UTC()
		out.ExpiresAt = &e
	} else if !t.Expiry.IsZero() {
		e := t.Expiry.UTC()
		out.ExpiresAt = &e
	}
	if s, ok := t.Extra("scope").(string); ok && strings.TrimSpace(s) != "" {
		out.Scopes = MergeScopes(strings.Fields(s))
	}
	return out
}

// expiresIn reads expires_in as x/oauth2 hands it over: a float64 from a
// JSON answer, an int64 or a string from a form-encoded one.
func expiresIn(v any) (int64, bool) {
	var n int64
	switch x := v.(type) {
	case float64:
		n = int64(x)
	case int64: // x/oauth2's reading of a form-encoded answer
		n = x
	case json.Number:
		i, err := x.Int64()
		if err != nil {
			return 0, false
		}
		n = i
	case string:
		i, err := strconv.ParseInt(x, 10, 64)
		if err != nil {
			return 0, false
		}
		n = i
	default:
		return 0, false
	}
	return n, n > 0 && n < 1<<31
}

// tokenError maps an x/oauth2 error without letting its text through: a
// RetrieveError's message carries the provider's raw answer.
func tokenError(op string, err error) error {
	var re *oauth2.RetrieveError
	if errors.As(err, &re) {
		status := 0
		if re.Response != nil {
			status = re.Response.StatusCode
		}
		// Only the status and the RFC 6749 error code: the description
		// and the body are the provider's free text.
		if re.ErrorCode == "invalid_grant" {
			return fmt.Errorf("%w: %s refused", ErrInvalidGrant, op)
		}
		return fmt.Errorf("%w: %s: status %d %s", ErrProvider, op, status, clean(re.ErrorCode))
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		// The token URL carries no token; the cause says unreachable, timeout…
		return fmt.Errorf("%w: %s: %s %s: %w", ErrProvider, op, ue.Op, redactURL(ue.URL), ue.Err)
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%w: %s: %w", ErrProvider, op, err)
	}
	// x/oauth2's own complaints ("server response missing access_token").
	return fmt.Errorf("%w: %s: malformed token answer", ErrProvider, op)
}

// clean keeps a provider's error code short and printable.
func clean(s string) string {
	s = strings.Map(func(r rune) rune {
		if unicode.IsPrint(r) {
			return r
		}
		return -1
	}, s)
	if len(s) > 64 {
		s = s[:64] + "…"
	}
	return s
}

func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(url)"
	}
	u.RawQuery, u.User, u.Fragment = "", nil, ""
	return u.String()
}
