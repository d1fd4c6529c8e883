package controlplane

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"html/template"
	"net/netip"
	"regexp"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/google/uuid"

	"github.com/auditrail/auditrail/controlplane/cpstate"
	"github.com/auditrail/auditrail/internal/auth"
	"github.com/auditrail/auditrail/internal/httpapi"
	"github.com/auditrail/auditrail/internal/oauthflow"
	"github.com/auditrail/auditrail/producers"
	"github.com/auditrail/auditrail/schemas"
)

// The OAuth callback: GET /api/v1/oauth/callback, opened by the user's
// browser when the provider redirects back. No bearer: the sealed state
// says who started the flow (organization, project, user, provider,
// scopes), and completes only in the browser that clicked the start page
// (the SHA-256 of its bind cookie is in the state: a link or callback URL
// carried to another browser connects nothing), and works once — its
// nonce is created in the states bucket, an existing nonce is a replay.
// The code is exchanged with the state's PKCE verifier, so that a code
// obtained in another user's flow is refused by the provider. Nothing is
// stored on any failure; the pages echo neither code, state nor tokens,
// and say which provider account was linked to which platform user.

var pageTemplate = template.Must(template.New("page").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.Title}} · auditrail</title>
<style>body{font-family:system-ui,sans-serif;max-width:34rem;margin:4rem auto;padding:0 1rem;color:#222}
h1{font-size:1.4rem}.ok{color:#1a7f37}.err{color:#b42318}p{line-height:1.5}</style></head>
<body><h1 class="{{if .OK}}ok{{else}}err{{end}}">{{.Title}}</h1>
<p>{{.Message}}</p>{{if .Hint}}<p>{{.Hint}}</p>{{end}}</body></html>
`))

type page struct {
	OK                   bool
	Title, Message, Hint string
}

// writePage answers an HTML page that no cache keeps and no referrer leaks.
func writePage(c *fiber.Ctx, status int, p page) error {
	var b bytes.Buffer
	if err := pageTemplate.Execute(&b, p); err != nil {
		return err
	}
	c.Set(fiber.HeaderContentType, "text/html; charset=utf-8")
	c.Set(fiber.HeaderCacheControl, "no-store")
	c.Set("Pragma", "no-cache")
	c.Set("Referrer-Policy", "no-referrer")
	c.Set(fiber.HeaderXFrameOptions, "DENY")
	c.Set(fiber.HeaderXContentTypeOptions, "nosniff")
	c.Set(fiber.HeaderContentSecurityPolicy, "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'")
	return c.Status(status).Send(b.Bytes())
}

func failPage(c *fiber.Ctx, status int, title, msg string) error {
	return writePage(c, status, page{Title: title, Message: msg, Hint: "Nothing was connected. Start again from the application."})
}

// providerErrorCode keeps the provider's error code only when it looks like
// one (RFC 6749 4.1.2.1): it is shown on the page.
var providerErrorCode = regexp.MustCompile(`^[a-z_]{1,64}$`)

func (s *Service) oauthCallback(c *fiber.Ctx) error {
	if s.flow == nil {
		return failPage(c, fiber.StatusServiceUnavailable, "OAuth is not configured", "This platform runs without a public URL for the OAuth callback.")
	}
	ctx := c.UserContext()
	site := s.site()
	binding := c.Cookies(bindCookie)
	st, err := s.flow.OpenState(c.Query("state"))
	if err == nil {
		// One flow per bind cookie: once a state of ours came back, it is
		// spent whatever happens (a forged callback spends nothing).
		c.Cookie(site.cookie(bindCookie, "", site.cookiePath, fiber.CookieSameSiteLaxMode, 0))
	}
	switch {
	case errors.Is(err, oauthflow.ErrStateExpired):
		return failPage(c, fiber.StatusBadRequest, "Authorization expired", "This authorization request is older than its time limit.")
	case err != nil:
		s.log.Warn("OAuth callback with an invalid state", "client_ip", c.IP())
		return failPage(c, fiber.StatusBadRequest, "Invalid authorization request", "This authorization request was not issued by this platform, or was altered.")
	}
	if !st.BoundTo(binding) {
		s.log.Warn("OAuth callback from another browser than the one that started the flow refused",
			"provider", st.Provider, "user", st.User, "org", st.Org, "bind_cookie", binding != "", "client_ip", c.IP())
		return writePage(c, fiber.StatusBadRequest, page{Title: "Started in another browser",
			Message: "This authorization was started in another browser (or this browser no longer holds its cookie). Nothing was connected.",
			Hint:    "Open the link again in the browser where you started it."})
	}
	fresh, err := s.state.ClaimState(ctx, st.Nonce)
	if err != nil {
		s.log.Error("OAuth callback: cannot mark the state used", "err", err)
		return failPage(c, fiber.StatusServiceUnavailable, "Try again", "The platform cannot complete authorizations right now.")
	}
	if !fresh {
		s.log.Warn("OAuth callback: replayed state refused", "provider", st.Provider, "user", st.User, "org", st.Org)
		return failPage(c, fiber.StatusBadRequest, "Authorization already used", "This authorization request has been used already; each works once.")
	}
	if e := c.Query("error"); e != "" {
		code := "error"
		if providerErrorCode.MatchString(e) {
			code = e
		}
		s.log.Info("OAuth callback: the provider refused", "provider", st.Provider, "user", st.User, "error", code)
		msg := fmt.Sprintf("%s did not grant access (%s).", st.Provider, code)
		if code == "access_denied" {
			msg = fmt.Sprintf("Access to %s was denied (access_denied).", st.Provider)
		}
		return failPage(c, fiber.StatusBadRequest, "Not connected", msg)
	}
	code := c.Query("code")
	if code == "" {
		return failPage(c, fiber.StatusBadRequest, "Invalid authorization request", "The provider's answer has no code.")
	}
	// The link is spent by the first flow of it that comes back with a code:
	// whoever holds it cannot replace the connection afterwards.
	if st.Ticket != "" {
		fresh, err := s.state.ClaimState(ctx, "ticket."+st.Ticket)
		if err != nil {
			s.log.Error("OAuth callback: cannot mark the link used", "err", err)
			return failPage(c, fiber.StatusServiceUnavailable, "Try again", "The platform cannot complete authorizations right now.")
		}
		if !fresh {
			s.log.Warn("OAuth callback: a second flow of a link already used refused", "provider", st.Provider, "user", st.User, "org", st.Org, "client_ip", c.IP())
			return failPage(c, fiber.StatusBadRequest, "Link already used", "This connection link has been used already; each works once. Ask for a new one.")
		}
	}
	p, err := s.Provider(st.Org, st.Provider)
	if err != nil {
		return failPage(c, fiber.StatusBadRequest, "Provider not configured", fmt.Sprintf("The organization no longer has the auth provider %s.", st.Provider))
	}
	if _, err := s.state.Get(cpstate.ProjectKey(st.Org.String(), st.Project.String()), &cpstate.Project{}); err != nil {
		return failPage(c, fiber.StatusBadRequest, "Project not found", "The project of this authorization no longer exists.")
	}
	xctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	tok, err := s.flow.Exchange(xctx, p, st, code)
	switch {
	case errors.Is(err, oauthflow.ErrInvalidGrant), errors.Is(err, oauthflow.ErrStateInvalid):
		s.log.Warn("OAuth callback: the provider refused the code (expired, used, or from another flow)", "provider", st.Provider, "user", st.User, "err", err)
		return failPage(c, fiber.StatusBadRequest, "Authorization refused", fmt.Sprintf("%s refused this authorization code.", st.Provider))
	case err != nil:
		s.log.Warn("OAuth callback: code exchange failed", "provider", st.Provider, "user", st.User, "err", err)
		return failPage(c, fiber.StatusBadGateway, "Provider unavailable", fmt.Sprintf("%s did not complete the authorization.", st.Provider))
	}
	var account *cpstate.ConnectionAccount
	if p.UserinfoURL != "" {
		if a, err := s.flow.Userinfo(xctx, p, tok.AccessToken); err != nil {
			s.log.Warn("OAuth callback: userinfo failed; connected without the account", "provider", st.Provider, "user", st.User, "err", err)
		} else if a != (oauthflow.Account{}) {
			account = &cpstate.ConnectionAccount{Subject: a.Subject, Email: a.Email, Name: a.Name}
		}
	}
	if err := s.storeConnection(c, st, tok, account); err != nil {
		s.log.Error("OAuth callback: connection not stored", "provider", st.Provider, "user", st.User, "err", err)
		return failPage(c, fiber.StatusServiceUnavailable, "Try again", "The platform could not store the connection.")
	}
	msg := fmt.Sprintf("Connected to %s for platform user %s. You can close this window.", st.Provider, st.User)
	if account != nil {
		msg = fmt.Sprintf("Connected to %s as %s, for platform user %s. You can close this window.", st.Provider, accountLabel(account), st.User)
	}
	return writePage(c, fiber.StatusOK, page{OK: true, Title: "Connected", Message: msg})
}

// accountLabel names a provider account for a person: "Name <email>", or what
// there is of it.
func accountLabel(a *cpstate.ConnectionAccount) string {
	switch {
	case a.Name != "" && a.Email != "":
		return a.Name + " <" + a.Email + ">"
	case a.Email != "":
		return a.Email
	case a.Name != "":
		return a.Name
	}
	return a.Subject
}

// storeConnection stores the tokens of a completed flow, its scopes merged
// with those already granted, recorded as USER_CONNECTION CREATED or
// UPDATED by the user (principal type ACCOUNT).
func (s *Service) storeConnection(c *fiber.Ctx, st oauthflow.State, tok oauthflow.Token, account *cpstate.ConnectionAccount) error {
	org, project := st.Org.String(), st.Project.String()
	key := cpstate.ConnKey(org, project, st.User, st.Provider)
	peer, _ := netip.AddrFromSlice(c.Context().RemoteIP())
	cl := &call{c: c, source: schemas.AuditSourceAPI, ip: s.proxies.ClientIP(peer, c.Request().Header.PeekAll(fiber.HeaderXForwardedFor)).String(),
		p: auth.Principal{ID: st.User, Type: auth.TypeAccount, UserID: st.User, DisplayName: st.User}}
	projectID := st.Project
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		if err = s.putConnectionTokens(cl, key, st, projectID, tok, account); !errors.Is(err, cpstate.ErrConflict) {
			return err
		}
	}
	return err
}

func (s *Service) putConnectionTokens(cl *call, key string, st oauthflow.State, projectID uuid.UUID, tok oauthflow.Token, account *cpstate.ConnectionAccount) error {
	defer s.lock(key)()
	var before cpstate.UserConnection
	rev, err := s.state.Get(key, &before)
	if err != nil && err != cpstate.ErrNotFound {
		return err
	}
	scopes, refresh := tok.Scopes, tok.RefreshToken
	if rev != 0 && !before.Broken() {
		scopes = oauthflow.MergeScopes(before.Scopes, tok.Scopes)
		if refresh == "" {
			if _, _, t, err := s.openConn(key); err == nil {
				refresh = t.RefreshToken // providers send it on the first consent only
			}
		}
		if account == nil {
			account = before.Account
		}
	}
	after := cpstate.UserConnection{OrgID: st.Org, ProjectID: projectID, UserID: st.User, Provider: st.Provider, Scopes: nonNil(oauthflow.MergeScopes(scopes)),
		ExpiresAt: tok.ExpiresAt, Status: cpstate.ConnStatusConnected, Account: account, UpdatedAt: s.now().UTC()}
	if after.Sealed, err = s.sealTokens(key, cpstate.ConnectionTokens{AccessToken: tok.AccessToken, RefreshToken: refresh}); err != nil {
		return err
	}
	mut := producers.Mutation{ResourceType: schemas.ResourceTypeUserConnection, ResourceID: st.User + "/" + st.Provider,
		ResourceDisplay: st.Provider + " for " + st.User, OrgID: st.Org, ProjectID: &projectID,
		Action: schemas.AuditActionCreated, After: s.connView(after)}
	if rev != 0 {
		mut.Action, mut.Before = schemas.AuditActionUpdated, s.connView(before)
	}
	return s.commitRecorded(cl, mut, cpstate.SetKey(key, after, rev))
}

// Connection routes: who may act on user U's connections in a project.
type connOp int

const (
	connRead      connOp = iota // list
	connDelete                  // delete (and revoke)
	connAuthorize               // start the flow
)

// connScope authorizes a connection route and resolves its org, project
// and user: the platform admin; the organization's owners and admins; the
// project's admins; the user themself (a member acting with their own API
// key or JWT); for connAuthorize also the project's service keys (they act
// for the end users they name). 403 comes before 404.
func (s *Service) connScope(c *fiber.Ctx, op connOp) (*call, cpstate.Org, cpstate.Project, string, error) {
	cl, err := s.begin(c)
	if err != nil {
		return nil, cpstate.Org{}, cpstate.Project{}, "", err
	}
	orgID, err := uuidParam(c, "org_id")
	if err != nil {
		return nil, cpstate.Org{}, cpstate.Project{}, "", err
	}
	projectID, err := uuidParam(c, "project_id")
	if err != nil {
		return nil, cpstate.Org{}, cpstate.Project{}, "", err
	}
	user, err := textParam(c, "user_id")
	if err != nil {
		return nil, cpstate.Org{}, cpstate.Project{}, "", err
	}
	if !s.mayActOnConnections(cl.p, orgID, projectID, user, op) {
		return nil, cpstate.Org{}, cpstate.Project{}, "", httpError(fmt.Errorf("%w: only the user, the organization's owners and admins and the project's admins act on the user's connections", auth.ErrForbidden))
	}
	var org cpstate.Org
	if _, err := s.state.Get(cpstate.OrgKey(orgID.String()), &org); err != nil {
		return nil, cpstate.Org{}, cpstate.Project{}, "", httpError(fmt.Errorf("%w: organization %s", cpstate.ErrNotFound, orgID))
	}
	p, err := s.projectFor(cl, org)
	if err != nil {
		return nil, cpstate.Org{}, cpstate.Project{}, "", httpError(err)
	}
	return cl, org, p, user, nil
}

func (s *Service) mayActOnConnections(p auth.Principal, org, project uuid.UUID, user string, op connOp) bool {
	if p.PlatformAdmin || s.access.AuthorizeMutate(p, org) == nil {
		return true
	}
	if p.IsServiceKey() {
		return op == connAuthorize && p.OrgScope != nil && *p.OrgScope == org && p.ProjectScope != nil && *p.ProjectScope == project
	}
	if _, member := s.access.Role(p, org); !member {
		return false
	}
	if p.UserID == user {
		return true
	}
	var pm cpstate.ProjectMember
	_, err := s.state.Get(cpstate.ProjectMemberKey(org.String(), project.String(), p.UserID), &pm)
	return err == nil && pm.Role == cpstate.RoleAdmin
}

// authorizeConnection answers the link that starts the flow for a user:
// the platform's start page of a sealed ticket (oauth_start.go), bound to
// the user's browser session unless a service key asked.
func (s *Service) authorizeConnection(c *fiber.Ctx) error {
	cl, org, p, user, err := s.connScope(c, connAuthorize)
	if err != nil {
		return err
	}
	provider, err := textParam(c, "provider")
	if err != nil {
		return err
	}
	var body struct {
		Scopes []string `json:"scopes"`
	}
	if len(bytes.TrimSpace(c.Body())) > 0 {
		if err := decodeBody(c, &body); err != nil {
			return err
		}
	}
	if len(body.Scopes) > 100 {
		return httpError(cpstate.Invalid("scopes", "at most 100"))
	}
	url, st, err := s.newTicket(org.ID, p.ID, user, provider, body.Scopes, byApp(cl.p))
	switch {
	case errors.Is(err, ErrOAuthNotConfigured):
		return fiber.NewError(fiber.StatusServiceUnavailable, err.Error())
	case errors.Is(err, oauthflow.ErrNoProvider):
		return fiber.NewError(fiber.StatusNotFound, fmt.Sprintf("auth provider %q: the organization has none of that id (POST /api/v1/orgs/%s/auth_providers adds it)", provider, org.ID))
	case err != nil:
		return httpError(err)
	}
	return httpapi.Reply(c, fiber.StatusOK, map[string]any{"provider": provider, "scopes": nonNil(st.Scopes), "url": url, "state_expires_at": st.ExpiresAt})
}
