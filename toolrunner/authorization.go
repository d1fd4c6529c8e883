package toolrunner

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/auditrail/auditrail/internal/auth"
	"github.com/auditrail/auditrail/internal/oauthflow"
	"github.com/auditrail/auditrail/schemas/hooksapi"
)

// AuthorizationRequest tells the caller how the user grants what a tool
// needs: open URL (the platform's start page of the flow, which leads to
// the provider's consent page), then run the tool again.
type AuthorizationRequest struct {
	// Provider is the auth provider's id in the organization (e.g. google).
	Provider string `json:"provider"`
	// Scopes are the scopes the tool needs that the user has not granted
	// (all of the tool's when the user is not connected). The URL asks for
	// them merged with those already granted.
	Scopes []string `json:"scopes"`
	// URL carries a sealed ticket bound to the organization, project, user
	// and provider; it completes in the browser that continues it, signed
	// in as the user unless a service key asked (then whoever completes it
	// attaches their account to this user), so it goes to the caller only.
	URL            string    `json:"url"`
	StateExpiresAt time.Time `json:"state_expires_at"`
}

// grant is, for one execution, the user's connection to one provider the
// tool needs.
type grant struct {
	provider, providerType string
	// scopes the tool needs from this provider (its requirements merged).
	scopes []string
	conn   oauthflow.Connection
	// err is Connection's.
	err error
}

// usable: connected, with every scope the tool needs.
func (g *grant) usable() bool { return g.err == nil && oauthflow.HasScopes(g.conn.Scopes, g.scopes) }

// missing is what the user has not granted of the scopes the tool needs.
func (g *grant) missing() []string {
	out := []string{}
	for _, s := range g.scopes {
		if g.err != nil || !slices.Contains(g.conn.Scopes, s) {
			out = append(out, s)
		}
	}
	return out
}

// providerKey names the provider of a requirement: its id, else its type.
func (a AuthRequirement) providerKey() string {
	if a.ProviderID != "" {
		return a.ProviderID
	}
	return a.ProviderType
}

// connections looks up the user's connection to every provider the tool
// needs: one Connection call per provider and no other lookup (the control
// plane keeps the unsealed tokens cached; a refresh happens there, only
// when the token expires within 60 s).
func (r *Runner) connections(ctx context.Context, sc Scope, def Definition) []grant {
	reqs := def.Requirements.Authorization
	if len(reqs) == 0 {
		return nil
	}
	grants := make([]grant, 0, len(reqs))
	for _, a := range reqs {
		p := a.providerKey()
		if i := slices.IndexFunc(grants, func(g grant) bool { return g.provider == p }); i >= 0 {
			grants[i].scopes = oauthflow.MergeScopes(grants[i].scopes, a.Scopes)
			continue
		}
		grants = append(grants, grant{provider: p, providerType: a.ProviderType, scopes: a.Scopes})
	}
	org, project := sc.Org.String(), sc.Project.String()
	for i := range grants {
		grants[i].conn, grants[i].err = r.conns.Connection(ctx, org, project, sc.UserID, grants[i].provider)
	}
	return grants
}

// hookAuthorization is the hooks' context.authorization: per provider,
// connected only when the tool will get a usable connection, and the
// scopes the user granted (of a connection lacking scopes, or one that is
// broken); never tokens.
func (r *Runner) hookAuthorization(sc Scope, grants []grant) map[string]hooksapi.AuthorizationInfo {
	auth := make(map[string]hooksapi.AuthorizationInfo, len(grants))
	for i := range grants {
		g := &grants[i]
		connected := g.usable()
		scopes := g.conn.Scopes
		if g.err != nil {
			// Only on the failure path: what is stored, without a refresh.
			_, scopes = r.conns.ConnectionStatus(sc.Org.String(), sc.Project.String(), sc.UserID, g.provider)
		}
		info := hooksapi.AuthorizationInfo{ProviderType: &g.providerType, Connected: &connected}
		if len(scopes) > 0 {
			s := slices.Clone(scopes)
			info.Scopes = &s
		}
		auth[g.provider] = info
	}
	return auth
}

// authorize returns nil when every connection the tool needs is usable;
// otherwise the error the execution ends with, and for
// AUTHORIZATION_REQUIRED how the user grants what is missing (the first
// provider that needs it; a retry asks for the next one).
func (r *Runner) authorize(ctx context.Context, sc Scope, def Definition, grants []grant) (*Error, *AuthorizationRequest) {
	org, project := sc.Org.String(), sc.Project.String()
	for i := range grants {
		g := &grants[i]
		if g.usable() {
			continue
		}
		if e := r.authorizationError(sc, def, g.provider, g.err); e != nil {
			return e, nil
		}
		url, expires, err := r.authorizationURL(sc)(ctx, org, project, sc.UserID, g.provider, g.scopes)
		if err != nil {
			return r.authorizationError(sc, def, g.provider, err), nil
		}
		missing := g.missing()
		var msg string
		if g.err != nil {
			msg = fmt.Sprintf("user %s has not connected %s, which %s needs", sc.UserID, g.provider, def.FullyQualifiedName())
		} else {
			msg = fmt.Sprintf("user %s has not granted %s the scopes %s that %s needs", sc.UserID, g.provider, strings.Join(missing, " "), def.FullyQualifiedName())
		}
		return Errorf(KindAuthorization, true, "%s: the user opens authorization.url, then the tool is run again", msg),
			&AuthorizationRequest{Provider: g.provider, Scopes: missing, URL: url, StateExpiresAt: expires.UTC()}
	}
	return nil, nil
}

// authorizationURL is how the link for sc is made: an application's link
// when a service key asked (or the platform itself) and the source makes
// them, else the user's own.
func (r *Runner) authorizationURL(sc Scope) func(ctx context.Context, org, project, user, provider string, scopes []string) (string, time.Time, error) {
	if t := sc.Actor.PrincipalType; t == auth.TypeServiceKey || t == auth.TypeSystem {
		if a, ok := r.conns.(AppLinks); ok {
			return a.AppAuthorizationURL
		}
	}
	return r.conns.AuthorizationURL
}

// authorizationError classifies an error of the connection source: nil for
// ErrNotConnected (the user is asked to connect), AUTH_PROVIDER_NOT_CONFIGURED
// for ErrNoProvider, AUTHORIZATION_FAILED (retry later) for anything else.
// The recorded message carries no URL.
func (r *Runner) authorizationError(sc Scope, def Definition, provider string, err error) *Error {
	switch {
	case errors.Is(err, oauthflow.ErrNoProvider):
		return Errorf(KindAuthProviderNotConfigured, false,
			"the organization has no auth provider %s, which %s needs: an owner or admin of the organization adds it (POST /api/v1/orgs/%s/auth_providers, or auditrail admin providers)",
			provider, def.FullyQualifiedName(), sc.Org)
	case err == nil, errors.Is(err, oauthflow.ErrNotConnected):
		return nil
	}
	cause := withoutURLs(err.Error())
	r.log.Warn("connection unusable", "org", sc.Org, "project", sc.Project, "user", sc.UserID, "provider", provider, "err", cause)
	return Errorf(KindAuthorizationFailed, true, "the connection of user %s to %s cannot be used now (%s); retry later", sc.UserID, provider, cause)
}

var urlPattern = regexp.MustCompile(`[A-Za-z][A-Za-z0-9+.-]*://[^\s"']*`)

// withoutURLs replaces every URL of s: an error of a token or authorization
// endpoint may name one, and a URL with a state or a token must reach no
// record.
func withoutURLs(s string) string { return urlPattern.ReplaceAllString(s, "<url>") }
