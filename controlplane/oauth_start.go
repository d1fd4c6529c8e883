package controlplane

import (
	"bytes"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/google/uuid"

	"github.com/auditrail/auditrail/controlplane/cpstate"
	"github.com/auditrail/auditrail/internal/auth"
	"github.com/auditrail/auditrail/internal/oauthflow"
)

// The start page of a user's OAuth connection (issue 18): the link that
// the authorize route and AUTHORIZATION_REQUIRED answers hand out is
// <public URL>/api/v1/oauth/start/<sealed ticket>, a page of this platform,
// not the provider's URL. Its GET changes nothing and never redirects (link
// scanners open links): it shows, as text, which platform user, project
// and provider are being connected with which scopes. A click on
// "Continue" (a same-origin POST) binds the flow to that browser — a
// random value in a cookie, its SHA-256 in the sealed state — and only then
// redirects to the provider; the callback completes the flow only in the
// browser holding that cookie. A ticket made for a user (their API key or
// JWT, an admin acting for them) continues only in a browser signed in as
// that user: a minimal browser session, signed in on the page with the
// user's API key or JWT. A ticket made by an application (a project's
// service key, or the platform itself) needs no session: its end users
// have no platform credentials, and the application answers for who
// opens the link.

const (
	// sessionCookie holds a browserSession, sealed under sessionSealKey.
	sessionCookie = "auditrail_session"
	// bindCookie holds the browser binding of a started flow.
	bindCookie = "auditrail_oauth_bind"
	// csrfCookie holds the double-submit token of the start page's forms.
	csrfCookie = "auditrail_csrf"
	// sessionSealKey is the sealer's additional data of sessions: no other
	// sealed value (connection, secret, state, ticket) passes for one.
	sessionSealKey = "browser-session"
	// SessionTTL is how long a browser session lasts.
	SessionTTL = 12 * time.Hour
	// maxSession bounds the session cookie accepted.
	maxSession = 1024
	// maxForm caps the body of the start page's forms (a JWT fits).
	maxForm = 16 << 10
	// csrfLen is the encoded length of a double-submit token (32 bytes).
	csrfLen = 43
)

// browserSession says which platform user signed in in a browser, and with
// a credential of which organization (nil: a JWT, valid in every
// organization of its subject).
type browserSession struct {
	User      string     `json:"u"`
	Org       *uuid.UUID `json:"o,omitempty"`
	ExpiresAt time.Time  `json:"e"`
}

// sessionFits reports whether a browser session may continue a ticket made
// for a user: the session is that user's, of the ticket's organization (a
// JWT session: the user must be a member of it; an API key's: the key's
// organization).
func (s *Service) sessionFits(b browserSession, t oauthflow.Ticket) bool {
	if !b.fits(t) {
		return false
	}
	_, err := s.state.Get(cpstate.MemberKey(t.Org.String(), b.User), &cpstate.Member{})
	return err == nil
}

// fits reports whether the session may continue a ticket made for a user.
func (b browserSession) fits(t oauthflow.Ticket) bool {
	return b.User == t.User && (b.Org == nil || *b.Org == t.Org)
}

func (s *Service) sealSession(b browserSession) (string, error) {
	pt, err := json.Marshal(b)
	if err != nil {
		return "", fmt.Errorf("browser session: %w", err)
	}
	ct, err := s.sealer.Seal(sessionSealKey, pt)
	if err != nil {
		return "", fmt.Errorf("browser session: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(ct), nil
}

// openSession opens a session cookie; false unless this platform sealed it
// as a session, for a user, and it has not expired (nor lasts longer than
// SessionTTL from now).
func (s *Service) openSession(v string) (browserSession, bool) {
	if v == "" || len(v) > maxSession {
		return browserSession{}, false
	}
	ct, err := base64.RawURLEncoding.DecodeString(v)
	if err != nil {
		return browserSession{}, false
	}
	pt, err := s.sealer.Open(sessionSealKey, ct)
	if err != nil {
		return browserSession{}, false
	}
	var b browserSession
	if err := json.Unmarshal(pt, &b); err != nil || b.User == "" {
		return browserSession{}, false
	}
	now := s.now()
	if !now.Before(b.ExpiresAt) || b.ExpiresAt.After(now.Add(SessionTTL+time.Minute)) {
		return browserSession{}, false
	}
	return b, true
}

// oauthSite is where the flow's pages live, derived from the redirect URI
// (<public URL>/api/v1/oauth/callback).
type oauthSite struct {
	origin     string // scheme://host[:port], without a default port
	base       string // <public URL>/api/v1/oauth
	cookiePath string // the path of base, with a trailing slash
	secure     bool
}

func siteOf(redirectURL string) oauthSite {
	u, err := url.Parse(redirectURL)
	if err != nil {
		return oauthSite{}
	}
	host := strings.ToLower(u.Host)
	switch {
	case u.Scheme == "https" && strings.HasSuffix(host, ":443"):
		host = strings.TrimSuffix(host, ":443")
	case u.Scheme == "http" && strings.HasSuffix(host, ":80"):
		host = strings.TrimSuffix(host, ":80")
	}
	path := strings.TrimSuffix(u.Path, "/callback")
	return oauthSite{origin: strings.ToLower(u.Scheme) + "://" + host, base: strings.TrimSuffix(redirectURL, "/callback"),
		cookiePath: path + "/", secure: u.Scheme == "https"}
}

func (s *Service) site() oauthSite { return siteOf(s.flow.RedirectURL()) }

// startURL is the link of a ticket.
func (s *Service) startURL(ticket string) string { return s.site().base + "/start/" + ticket }

func (st oauthSite) cookie(name, value, path, sameSite string, maxAge time.Duration) *fiber.Cookie {
	c := &fiber.Cookie{Name: name, Value: value, Path: path, HTTPOnly: true, Secure: st.secure, SameSite: sameSite}
	if maxAge > 0 {
		c.MaxAge = int(maxAge / time.Second)
	} else {
		c.Expires = time.Unix(0, 0).UTC() // delete
	}
	return c
}

// sameOrigin reports whether a form POST comes from a page of this
// platform: its Origin, or without one its Referer, is the public URL's.
func (st oauthSite) sameOrigin(c *fiber.Ctx) bool {
	if o := c.Get(fiber.HeaderOrigin); o != "" {
		return strings.EqualFold(o, st.origin)
	}
	r, err := url.Parse(c.Get(fiber.HeaderReferer))
	if err != nil || r.Host == "" {
		return false
	}
	return siteOf(r.Scheme+"://"+r.Host+"/callback").origin == st.origin
}

func newCSRFToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// formAllowed checks a POST of the start page against login and click
// CSRF: same origin, and the double-submit token of the SameSite=Strict
// cookie echoed in the form.
func (st oauthSite) formAllowed(c *fiber.Ctx) bool {
	ck, form := c.Cookies(csrfCookie), c.FormValue("csrf")
	return st.sameOrigin(c) && len(ck) == csrfLen && subtle.ConstantTimeCompare([]byte(ck), []byte(form)) == 1
}

var startTemplate = template.Must(template.New("start").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>Connect {{.Provider}} · auditrail</title>
<style>body{font-family:system-ui,sans-serif;max-width:36rem;margin:4rem auto;padding:0 1rem;color:#222}
h1{font-size:1.4rem}dt{font-weight:600;margin-top:.5rem}dd{margin:0}p{line-height:1.5}.err{color:#b42318}
button{font-size:1rem;padding:.5rem 1rem;margin-top:1rem}input[type=password]{width:100%;font-size:1rem;padding:.4rem}</style></head>
<body><h1>Connect {{.Provider}}</h1>
<p>This links a {{.Provider}} account to a user of this platform: tools the platform runs for that user will act as that account.</p>
<dl><dt>Platform user</dt><dd>{{.User}}</dd>
<dt>Organization</dt><dd>{{.OrgName}} ({{.OrgID}})</dd>
<dt>Project</dt><dd>{{.ProjectName}} ({{.ProjectID}})</dd>
<dt>Provider</dt><dd>{{.Provider}}</dd>
<dt>Access asked</dt><dd>{{range $i, $s := .Scopes}}{{if $i}}, {{end}}{{$s}}{{end}}</dd>
<dt>Link valid until</dt><dd>{{.Expires}}</dd></dl>
{{if .Notice}}<p class="err">{{.Notice}}</p>{{end}}
{{if .ByApp}}<p>An application of the project made this link for user {{.User}}. Continue only if you are {{.User}}: whoever continues links their own {{.Provider}} account to {{.User}}.</p>
{{else if .SignedIn}}<p>Signed in as {{.SignedIn}}.</p>{{end}}
{{if .NeedSignIn}}<p>This link was made for user {{.User}}. To continue, sign in as {{.User}} in this browser with your API key or token (it stays in this platform; the session lasts at most 12 hours).</p>
<form method="post" action="{{.SignInAction}}"><input type="hidden" name="csrf" value="{{.CSRF}}">
<label for="credential">API key or token of {{.User}}</label>
<input type="password" id="credential" name="credential" autocomplete="off" required>
<button type="submit">Sign in</button></form>
{{else}}<form method="post" action="{{.Action}}"><input type="hidden" name="csrf" value="{{.CSRF}}">
<button type="submit">Continue to {{.Provider}}</button></form>
<p>You will choose the {{.Provider}} account there; this browser must finish the authorization.</p>{{end}}
</body></html>
`))

type startView struct {
	User, OrgName, OrgID, ProjectName, ProjectID, Provider string
	Scopes                                                 []string
	Expires                                                string
	ByApp, NeedSignIn                                      bool
	SignedIn, Notice, CSRF, Action, SignInAction           string
}

// originPattern is an origin fit for a Content-Security-Policy source.
var originPattern = regexp.MustCompile(`^https?://([A-Za-z0-9.\-]+|\[[0-9A-Fa-f:.]+\])(:[0-9]{1,5})?$`)

// writeStartPage answers the start page: no cache, no framing, no script,
// forms only to this platform and (after the redirect) the provider; the
// referrer goes to this platform only (so that the forms' Origin is sent).
func (s *Service) writeStartPage(c *fiber.Ctx, status int, v startView, providerOrigin string) error {
	var b bytes.Buffer
	if err := startTemplate.Execute(&b, v); err != nil {
		return err
	}
	formAction := "'self'"
	if originPattern.MatchString(providerOrigin) {
		formAction += " " + providerOrigin
	}
	c.Set(fiber.HeaderContentType, "text/html; charset=utf-8")
	c.Set(fiber.HeaderCacheControl, "no-store")
	c.Set("Pragma", "no-cache")
	c.Set("Referrer-Policy", "same-origin")
	c.Set(fiber.HeaderXFrameOptions, "DENY")
	c.Set(fiber.HeaderXContentTypeOptions, "nosniff")
	c.Set(fiber.HeaderContentSecurityPolicy, "default-src 'none'; style-src 'unsafe-inline'; form-action "+formAction+"; frame-ancestors 'none'; base-uri 'none'")
	return c.Status(status).Send(b.Bytes())
}

// openTicket opens the route's ticket, or answers the page that says why not.
func (s *Service) openTicket(c *fiber.Ctx) (oauthflow.Ticket, bool, error) {
	if s.flow == nil {
		return oauthflow.Ticket{}, false, failPage(c, fiber.StatusServiceUnavailable, "OAuth is not configured", "This platform runs without a public URL for the OAuth callback.")
	}
	t, err := s.flow.OpenTicket(c.Params("ticket"))
	switch {
	case errors.Is(err, oauthflow.ErrStateExpired):
		return t, false, failPage(c, fiber.StatusBadRequest, "Link expired", "This connection link is older than its time limit; ask the application for a new one.")
	case err != nil:
		s.log.Warn("OAuth start page with an invalid ticket", "client_ip", c.IP())
		return t, false, failPage(c, fiber.StatusBadRequest, "Invalid link", "This connection link was not issued by this platform, or was altered.")
	}
	return t, true, nil
}

// renderStart answers the start page of t with a notice; it sets the
// double-submit cookie when the browser has none.
func (s *Service) renderStart(c *fiber.Ctx, status int, t oauthflow.Ticket, notice string) error {
	var org cpstate.Org
	var project cpstate.Project
	if _, err := s.state.Get(cpstate.ProjectKey(t.Org.String(), t.Project.String()), &project); err != nil {
		return failPage(c, fiber.StatusBadRequest, "Project not found", "The project of this link no longer exists.")
	}
	_, _ = s.state.Get(cpstate.OrgKey(t.Org.String()), &org)
	st := s.site()
	csrf := c.Cookies(csrfCookie)
	if len(csrf) != csrfLen {
		csrf = newCSRFToken()
	}
	// Renewed on every view: SameSite=Strict, so that no other site's
	// page can have the browser send it.
	c.Cookie(st.cookie(csrfCookie, csrf, st.cookiePath, fiber.CookieSameSiteStrictMode, s.ticketLife(t)+time.Minute))
	v := startView{User: t.User, OrgName: org.Name, OrgID: t.Org.String(), ProjectName: project.Name, ProjectID: t.Project.String(),
		Provider: t.Provider, Scopes: t.Scopes, Expires: t.ExpiresAt.UTC().Format("2006-01-02 15:04 UTC"), ByApp: t.ByApp,
		Notice: notice, CSRF: csrf, Action: st.base + "/start/" + c.Params("ticket"), SignInAction: st.base + "/start/" + c.Params("ticket") + "/sign_in"}
	if sess, ok := s.openSession(c.Cookies(sessionCookie)); ok {
		v.SignedIn = sess.User
		v.NeedSignIn = !t.ByApp && !s.sessionFits(sess, t)
	} else {
		v.NeedSignIn = !t.ByApp
	}
	providerOrigin := ""
	if p, err := s.Provider(t.Org, t.Provider); err == nil {
		if u, err := url.Parse(p.AuthorizeURL); err == nil {
			providerOrigin = u.Scheme + "://" + u.Host
		}
	}
	return s.writeStartPage(c, status, v, providerOrigin)
}

// ticketLife is what remains of a ticket's time (at least a minute: the
// flow's clock decided it is not over).
func (s *Service) ticketLife(t oauthflow.Ticket) time.Duration {
	return max(t.ExpiresAt.Sub(s.now()), time.Minute)
}

// oauthStartPage: GET /api/v1/oauth/start/{ticket}. It changes nothing
// but the double-submit cookie.
func (s *Service) oauthStartPage(c *fiber.Ctx) error {
	t, ok, err := s.openTicket(c)
	if !ok {
		return err
	}
	return s.renderStart(c, fiber.StatusOK, t, "")
}

// checkForm answers the page that refuses a POST of the start page that is
// too large or not from this platform's page; true when it may proceed.
func (s *Service) checkForm(c *fiber.Ctx) (bool, error) {
	if len(c.Body()) > maxForm {
		return false, failPage(c, fiber.StatusRequestEntityTooLarge, "Request too large", "The form sent is larger than this page's forms.")
	}
	if s.flow != nil && !s.site().formAllowed(c) {
		s.log.Warn("OAuth start page: a form not sent from the platform's page refused", "client_ip", c.IP(), "origin", c.Get(fiber.HeaderOrigin))
		return false, writePage(c, fiber.StatusForbidden, page{Title: "Request refused",
			Message: "This form was not sent from this platform's page (another site, or an old page).",
			Hint:    "Nothing was changed. Open the connection link again."})
	}
	return true, nil
}

// oauthStartSignIn: POST /api/v1/oauth/start/{ticket}/sign_in with
// credential (the user's API key or JWT, authenticated as a bearer of the
// API is): a session of the ticket's user only. The credential is never
// echoed nor logged.
func (s *Service) oauthStartSignIn(c *fiber.Ctx) error {
	if ok, err := s.checkForm(c); !ok {
		return err
	}
	t, ok, err := s.openTicket(c)
	if !ok {
		return err
	}
	back := s.startURL(c.Params("ticket"))
	if t.ByApp {
		return c.Redirect(back, fiber.StatusSeeOther)
	}
	cred := strings.TrimSpace(c.FormValue("credential"))
	if cred == "" {
		return s.renderStart(c, fiber.StatusBadRequest, t, "Paste the API key or token of user "+t.User+".")
	}
	p, err := s.access.Authenticate(c.UserContext(), cred)
	switch {
	case errors.Is(err, auth.ErrUnauthenticated):
		s.log.Info("OAuth start page: sign-in with an invalid credential", "user", t.User, "client_ip", c.IP())
		return s.renderStart(c, fiber.StatusUnauthorized, t, "That API key or token is not valid. Nothing was signed in.")
	case err != nil:
		s.log.Warn("OAuth start page: sign-in failed", "user", t.User, "err", err)
		return failPage(c, fiber.StatusServiceUnavailable, "Try again", "The platform cannot sign you in right now.")
	}
	var notice string
	switch {
	case p.UserID == "":
		notice = fmt.Sprintf("That credential is not a user's (it is an application's or the platform's). This link was made for user %s: sign in with the API key or token of %s. Nothing was signed in.", t.User, t.User)
	case p.UserID != t.User:
		notice = fmt.Sprintf("This link was made for user %s, and the credential given is another user's. Nothing was signed in. Only %s can connect this account.", t.User, t.User)
	case p.OrgScope != nil && *p.OrgScope != t.Org:
		notice = fmt.Sprintf("That API key belongs to another organization. Sign in with an API key of this organization, or a token, of user %s. Nothing was signed in.", t.User)
	}
	if notice != "" {
		s.log.Warn("OAuth start page: sign-in as another principal than the link's user refused", "user", t.User, "principal", p.ID, "client_ip", c.IP())
		return s.renderStart(c, fiber.StatusForbidden, t, notice)
	}
	exp := s.now().Add(SessionTTL).UTC()
	sealed, err := s.sealSession(browserSession{User: p.UserID, Org: p.OrgScope, ExpiresAt: exp})
	if err != nil {
		return err
	}
	st := s.site()
	c.Cookie(st.cookie(sessionCookie, sealed, "/", fiber.CookieSameSiteLaxMode, SessionTTL))
	s.log.Info("OAuth start page: browser signed in", "user", p.UserID, "principal", p.ID, "client_ip", c.IP())
	c.Set(fiber.HeaderCacheControl, "no-store")
	return c.Redirect(back, fiber.StatusSeeOther)
}

// oauthStartContinue: POST /api/v1/oauth/start/{ticket}: binds a new flow
// to this browser and sends it to the provider.
func (s *Service) oauthStartContinue(c *fiber.Ctx) error {
	if ok, err := s.checkForm(c); !ok {
		return err
	}
	t, ok, err := s.openTicket(c)
	if !ok {
		return err
	}
	if !t.ByApp {
		sess, ok := s.openSession(c.Cookies(sessionCookie))
		if !ok || !s.sessionFits(sess, t) {
			s.log.Warn("OAuth start page: continue without a session of the link's user refused", "user", t.User, "client_ip", c.IP())
			return s.renderStart(c, fiber.StatusForbidden, t, "This link was made for user "+t.User+": sign in as "+t.User+" in this browser first. Nothing was started.")
		}
	}
	p, err := s.Provider(t.Org, t.Provider)
	if err != nil {
		return failPage(c, fiber.StatusBadRequest, "Provider not configured", fmt.Sprintf("The organization no longer has the auth provider %s.", t.Provider))
	}
	binding := oauthflow.NewBinding()
	authURL, state, err := s.flow.Start(p, t, binding)
	if err != nil {
		s.log.Warn("OAuth start page: flow not started", "provider", t.Provider, "user", t.User, "err", err)
		return failPage(c, fiber.StatusBadRequest, "Provider not usable", fmt.Sprintf("The auth provider %s cannot start an authorization.", t.Provider))
	}
	st := s.site()
	c.Cookie(st.cookie(bindCookie, binding, st.cookiePath, fiber.CookieSameSiteLaxMode, max(state.ExpiresAt.Sub(s.now()), time.Minute)))
	s.log.Info("OAuth flow started in a browser", "provider", t.Provider, "user", t.User, "org", t.Org, "by_app", t.ByApp, "client_ip", c.IP())
	c.Set(fiber.HeaderCacheControl, "no-store")
	c.Set("Referrer-Policy", "no-referrer")
	return c.Redirect(authURL, fiber.StatusSeeOther)
}
