package controlplane

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/auditrail/auditrail/controlplane/cpstate"
	"github.com/auditrail/auditrail/internal/auth"
	"github.com/auditrail/auditrail/internal/oauthflow"
	"github.com/auditrail/auditrail/internal/retry"
)

// The users' connections in use: the tool runner asks the Service for a
// user's connection (Connection), its status (ConnectionStatus, for the
// hooks) and, when authorization is missing, the URL that starts the flow
// (AuthorizationURL). Connection reads the in-memory mirror of the state;
// it calls the provider only to refresh an access token that expires within
// RefreshBefore, once per connection at a time (single flight), and stores
// the new tokens with a compare-and-set on the key's revision so that every
// instance uses them. A read-only state (the tool runner's, whose NATS
// credentials may not write the bucket) does not refresh itself: it asks
// the control plane over NATS (ConnRefreshSubject, oauth_refresh.go).

// RefreshBefore is how long before its expiry an access token is refreshed.
const RefreshBefore = 60 * time.Second

// refreshTimeout bounds a refresh (the provider's answer and the write);
// it runs detached from the caller that started it, since other callers
// wait for the same result.
const refreshTimeout = 30 * time.Second

// brokenGrace is how long a refused refresh waits for another instance's
// concurrent refresh to land before marking the connection broken.
const brokenGrace = 250 * time.Millisecond

// ErrOAuthNotConfigured: the platform runs without an OAuth flow (no
// public URL): nothing can be authorized nor refreshed.
var ErrOAuthNotConfigured = errors.New("OAuth is not configured on this platform")

// ErrNotConnected is oauthflow.ErrNotConnected: the user has no usable
// connection to the provider.
var ErrNotConnected = oauthflow.ErrNotConnected

// UseOAuth sets the flow of the users' connections (its RedirectURL is this
// platform's /api/v1/oauth/callback). Without it the callback and the
// authorize route answer 503, and expiring tokens are not refreshed. Call
// before Register.
func (s *Service) UseOAuth(flow *oauthflow.Flow) { s.flow = flow }

// ConfigureOAuth builds the flow from cfg with the service's own sealer
// (the state is sealed with the secrets keys) and uses it.
func (s *Service) ConfigureOAuth(cfg oauthflow.Config) error {
	flow, err := oauthflow.New(cfg, s.sealer)
	if err != nil {
		return err
	}
	s.UseOAuth(flow)
	return nil
}

// Provider returns an organization's auth provider with its client secret
// opened and the defaults of its type applied; an error wrapping
// oauthflow.ErrNoProvider when there is none.
func (s *Service) Provider(org uuid.UUID, id string) (oauthflow.Provider, error) {
	key := cpstate.ProviderKey(org.String(), id)
	var p cpstate.AuthProvider
	if _, err := s.state.Get(key, &p); err != nil {
		return oauthflow.Provider{}, fmt.Errorf("%w: %q in organization %s", oauthflow.ErrNoProvider, id, org)
	}
	var secret string
	if len(p.SealedSecret) > 0 {
		pt, err := s.sealer.Open(key, p.SealedSecret)
		if err != nil {
			return oauthflow.Provider{}, fmt.Errorf("auth provider %s: %w", id, err)
		}
		secret = string(pt)
	}
	return oauthflow.Provider{ID: p.ID, Type: p.Type, ClientID: p.ClientID, ClientSecret: secret, PickerAPIKey: p.PickerAPIKey, Endpoints: oauthflow.Endpoints{
		AuthorizeURL: p.AuthorizeURL, TokenURL: p.TokenURL, RevokeURL: p.RevokeURL, UserinfoURL: p.UserinfoURL,
		APIBaseURL: p.APIBaseURL, ScopesDefault: slices.Clone(p.ScopesDefault)}}.WithDefaults(), nil
}

// openConn returns a stored connection, its revision and its tokens; an
// error wrapping ErrNotConnected when there is none.
func (s *Service) openConn(key string) (cpstate.UserConnection, uint64, cpstate.ConnectionTokens, error) {
	var u cpstate.UserConnection
	rev, err := s.state.Get(key, &u)
	if err != nil {
		return u, 0, cpstate.ConnectionTokens{}, fmt.Errorf("%w: no connection", ErrNotConnected)
	}
	pt, err := s.sealer.Open(key, u.Sealed)
	if err != nil {
		return u, 0, cpstate.ConnectionTokens{}, fmt.Errorf("connection tokens: %w", err)
	}
	var t cpstate.ConnectionTokens
	if err := json.Unmarshal(pt, &t); err != nil {
		return u, 0, cpstate.ConnectionTokens{}, fmt.Errorf("connection tokens: %w", err)
	}
	return u, rev, t, nil
}

func (s *Service) sealTokens(key string, t cpstate.ConnectionTokens) ([]byte, error) {
	b, err := json.Marshal(t)
	if err != nil {
		return nil, err
	}
	return s.sealer.Seal(key, b)
}

// usable reports whether a connection can be used now, possibly after a
// refresh: not broken, and not expired unless it has a refresh token.
func usable(u cpstate.UserConnection, t cpstate.ConnectionTokens, now time.Time) bool {
	return !u.Broken() && (u.ExpiresAt == nil || now.Before(*u.ExpiresAt) || t.RefreshToken != "")
}

// dueForRefresh reports whether the access token expires within RefreshBefore.
func dueForRefresh(u cpstate.UserConnection, now time.Time) bool {
	return u.ExpiresAt != nil && u.ExpiresAt.Sub(now) < RefreshBefore
}

func connOf(u cpstate.UserConnection, t cpstate.ConnectionTokens) oauthflow.Connection {
	return oauthflow.Connection{AccessToken: t.AccessToken, Scopes: slices.Clone(u.Scopes), ExpiresAt: u.ExpiresAt}
}

// Connection returns the user's usable connection to provider, refreshed
// first when its access token expires within RefreshBefore. The error wraps
// ErrNotConnected when there is none, it is broken, it expired without a
// refresh token, or the provider refused the refresh (invalid_grant: the
// connection is then marked broken for every instance). A provider that
// does not answer is an error that is not ErrNotConnected (the tool runner
// reports AUTHORIZATION_FAILED); so is a provider the organization no
// longer has (oauthflow.ErrNoProvider).
func (s *Service) Connection(ctx context.Context, org, project, user, provider string) (oauthflow.Connection, error) {
	c, err := s.connection(ctx, org, project, user, provider)
	if err != nil {
		return c, err
	}
	var p cpstate.AuthProvider
	if _, err := s.state.Get(cpstate.ProviderKey(org, provider), &p); err != nil {
		return oauthflow.Connection{}, fmt.Errorf("%w: %q in organization %s", oauthflow.ErrNoProvider, provider, org)
	}
	c.APIBaseURL = oauthflow.Provider{Type: p.Type, Endpoints: oauthflow.Endpoints{APIBaseURL: p.APIBaseURL}}.WithDefaults().APIBaseURL
	return c, nil
}

func (s *Service) connection(ctx context.Context, org, project, user, provider string) (oauthflow.Connection, error) {
	key := cpstate.ConnKey(org, project, user, provider)
	u, _, t, err := s.openConn(key)
	if err != nil {
		return oauthflow.Connection{}, err
	}
	now := s.now()
	switch {
	case u.Broken():
		return oauthflow.Connection{}, fmt.Errorf("%w: the %s connection is broken (its refresh was refused): authorize again", ErrNotConnected, provider)
	case !dueForRefresh(u, now):
		return connOf(u, t), nil
	case t.RefreshToken == "" && now.Before(*u.ExpiresAt):
		return connOf(u, t), nil // valid a little longer, and nothing to refresh with
	case t.RefreshToken == "":
		return oauthflow.Connection{}, fmt.Errorf("%w: the %s access token expired and there is no refresh token: authorize again", ErrNotConnected, provider)
	}
	orgID, err := uuid.Parse(org)
	if err != nil {
		return oauthflow.Connection{}, fmt.Errorf("%w: organization %q", ErrNotConnected, org)
	}
	ch := s.refreshes.DoChan(key, func() (any, error) {
		if s.state.ReadOnly() {
			// The tool runner may not write the bucket: the control plane
			// refreshes and stores the tokens for it.
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), refreshTimeout+refreshReplyMargin)
			defer cancel()
			return s.refreshByControlPlane(rctx, org, project, user, provider)
		}
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), refreshTimeout)
		defer cancel()
		return s.refresh(rctx, key, orgID, provider)
	})
	select {
	case r := <-ch:
		if r.Err != nil {
			return oauthflow.Connection{}, r.Err
		}
		return r.Val.(oauthflow.Connection), nil
	case <-ctx.Done():
		return oauthflow.Connection{}, ctx.Err()
	}
}

// refresh renews the access token of the connection at key (one call per
// key at a time on this instance) and persists it for every instance.
func (s *Service) refresh(ctx context.Context, key string, org uuid.UUID, provider string) (oauthflow.Connection, error) {
	u, rev, t, err := s.openConn(key)
	if err != nil {
		return oauthflow.Connection{}, err
	}
	now := s.now()
	if u.Broken() {
		return oauthflow.Connection{}, fmt.Errorf("%w: the %s connection is broken: authorize again", ErrNotConnected, provider)
	}
	if !dueForRefresh(u, now) { // refreshed by a call that finished meanwhile
		return connOf(u, t), nil
	}
	if s.flow == nil {
		return oauthflow.Connection{}, fmt.Errorf("refresh the %s token: %w", provider, ErrOAuthNotConfigured)
	}
	p, err := s.Provider(org, provider)
	if err != nil {
		return oauthflow.Connection{}, fmt.Errorf("refresh the %s token: %w", provider, err)
	}
	tok, err := s.flow.Refresh(ctx, p, t.RefreshToken)
	if errors.Is(err, oauthflow.ErrInvalidGrant) {
		return s.markBroken(ctx, key, provider, u, rev, t)
	}
	if err != nil {
		s.log.Warn("token refresh failed; the connection stays as it is", "provider", provider, "user", u.UserID, "err", err)
		return oauthflow.Connection{}, fmt.Errorf("refresh the %s token: %w", provider, err)
	}
	next := cpstate.ConnectionTokens{AccessToken: tok.AccessToken, RefreshToken: tok.RefreshToken}
	if next.RefreshToken == "" {
		next.RefreshToken = t.RefreshToken
	}
	after := u
	after.ExpiresAt, after.Status, after.UpdatedAt = tok.ExpiresAt, cpstate.ConnStatusConnected, now.UTC()
	if after.Sealed, err = s.sealTokens(key, next); err != nil {
		return oauthflow.Connection{}, err
	}
	_, err = s.state.UpdateConn(ctx, key, after, rev)
	if errors.Is(err, cpstate.ErrConflict) {
		// Another instance changed it meanwhile: theirs is at least as new.
		cur, curRev, curT, err := s.current(ctx, key)
		if err != nil {
			return oauthflow.Connection{}, err
		}
		if cur.Broken() && curT.RefreshToken == t.RefreshToken {
			// Broken by an instance whose refresh of the same token lost
			// to ours (a rotated refresh token): ours is the valid one.
			if _, err := s.state.UpdateConn(ctx, key, after, curRev); err == nil {
				return connOf(after, next), nil
			}
			if cur, _, curT, err = s.current(ctx, key); err != nil {
				return oauthflow.Connection{}, err
			}
		}
		if !usable(cur, curT, s.now()) {
			return oauthflow.Connection{}, fmt.Errorf("%w: the %s connection changed meanwhile and is not usable: authorize again", ErrNotConnected, provider)
		}
		return connOf(cur, curT), nil
	}
	if err != nil {
		// The provider gave a token, the store did not take it: use it now;
		// the next call refreshes again.
		s.log.Warn("refreshed token not persisted", "provider", provider, "user", u.UserID, "err", err)
	} else {
		s.log.Info("access token refreshed", "provider", provider, "user", u.UserID, "org", org, "expires_at", after.ExpiresAt)
	}
	return connOf(after, next), nil
}

// markBroken records that the provider refused the refresh token, unless
// another instance changed the connection meanwhile (then theirs is used).
func (s *Service) markBroken(ctx context.Context, key, provider string, u cpstate.UserConnection, rev uint64, t cpstate.ConnectionTokens) (oauthflow.Connection, error) {
	notConnected := fmt.Errorf("%w: %s refused the refresh (invalid_grant): authorize again", ErrNotConnected, provider)
	// Another instance may have refreshed with the same (rotating) refresh
	// token a moment before us, and be about to store its answer: give it
	// that moment, then use its tokens rather than break the connection.
	if retry.Sleep(ctx, brokenGrace) {
		if cur, curRev, curT, err := s.current(ctx, key); err == nil {
			if curRev != rev && curT.RefreshToken != t.RefreshToken && usable(cur, curT, s.now()) && !dueForRefresh(cur, s.now()) {
				return connOf(cur, curT), nil
			}
			u, rev = cur, curRev
		}
	}
	broken := u
	broken.Status, broken.UpdatedAt = cpstate.ConnStatusBroken, s.now().UTC()
	_, err := s.state.UpdateConn(ctx, key, broken, rev)
	switch {
	case err == nil:
		s.log.Warn("connection marked broken: the provider refused its refresh token", "provider", provider, "user", u.UserID)
		return oauthflow.Connection{}, notConnected
	case errors.Is(err, cpstate.ErrConflict):
		cur, _, curT, err := s.current(ctx, key)
		if err != nil {
			return oauthflow.Connection{}, err
		}
		if curT.RefreshToken != t.RefreshToken && usable(cur, curT, s.now()) && !dueForRefresh(cur, s.now()) {
			return connOf(cur, curT), nil // refreshed elsewhere: our token was rotated out
		}
		return oauthflow.Connection{}, notConnected
	default:
		s.log.Warn("connection could not be marked broken", "provider", provider, "user", u.UserID, "err", err)
		return oauthflow.Connection{}, notConnected
	}
}

// current reads key from the server after a lost compare-and-set.
func (s *Service) current(ctx context.Context, key string) (cpstate.UserConnection, uint64, cpstate.ConnectionTokens, error) {
	if err := s.state.Refetch(ctx, key); errors.Is(err, cpstate.ErrNotFound) {
		return cpstate.UserConnection{}, 0, cpstate.ConnectionTokens{}, fmt.Errorf("%w: the connection was deleted", ErrNotConnected)
	} else if err != nil {
		return cpstate.UserConnection{}, 0, cpstate.ConnectionTokens{}, err
	}
	return s.openConn(key)
}

// ConnectionStatus reports whether the user has a usable connection to
// provider and its granted scopes, for the hooks' context.authorization.
// It never refreshes and never fails.
func (s *Service) ConnectionStatus(org, project, user, provider string) (connected bool, scopes []string) {
	u, _, t, err := s.openConn(cpstate.ConnKey(org, project, user, provider))
	if err != nil {
		return false, nil
	}
	return usable(u, t, s.now()), slices.Clone(u.Scopes)
}

// AuthorizationURL makes the link that starts the flow for the user, who
// completes it in a browser signed in as themself (a user asked: their
// API key or JWT, or an admin for them): the URL of the platform's start
// page and when its ticket expires. The scopes asked are the provider's
// defaults, scopes, and those the user already granted (incremental). The
// error wraps oauthflow.ErrNoProvider when the organization has no such
// provider.
func (s *Service) AuthorizationURL(ctx context.Context, org, project, user, provider string, scopes []string) (string, time.Time, error) {
	return s.authorizationURL(org, project, user, provider, scopes, false)
}

// AppAuthorizationURL is AuthorizationURL for an application acting for its
// end users (a project's service key): the link needs no platform session,
// and the application answers for who opens it.
func (s *Service) AppAuthorizationURL(ctx context.Context, org, project, user, provider string, scopes []string) (string, time.Time, error) {
	return s.authorizationURL(org, project, user, provider, scopes, true)
}

func (s *Service) authorizationURL(org, project, user, provider string, scopes []string, app bool) (string, time.Time, error) {
	orgID, err1 := uuid.Parse(org)
	projectID, err2 := uuid.Parse(project)
	if err1 != nil || err2 != nil {
		return "", time.Time{}, fmt.Errorf("%w: organization or project is not a UUID", cpstate.ErrInvalid)
	}
	u, t, err := s.newTicket(orgID, projectID, user, provider, scopes, app)
	return u, t.ExpiresAt, err
}

// byApp reports whether a principal's links are an application's: a
// project's service key, or the platform itself (the demo set-up).
func byApp(p auth.Principal) bool { return p.IsServiceKey() || p.Type == auth.TypeSystem }

// newTicket is AuthorizationURL with the ticket its link carries.
func (s *Service) newTicket(org, project uuid.UUID, user, provider string, scopes []string, app bool) (string, oauthflow.Ticket, error) {
	if s.flow == nil {
		return "", oauthflow.Ticket{}, ErrOAuthNotConfigured
	}
	for _, sc := range scopes {
		if err := validScope(sc); err != nil {
			return "", oauthflow.Ticket{}, cpstate.Invalid("scopes", "%v", err)
		}
	}
	if user == "" {
		return "", oauthflow.Ticket{}, cpstate.Invalid("user_id", "required")
	}
	p, err := s.Provider(org, provider)
	if err != nil {
		return "", oauthflow.Ticket{}, err
	}
	var granted cpstate.UserConnection
	if _, err := s.state.Get(cpstate.ConnKey(org.String(), project.String(), user, provider), &granted); err == nil && !granted.Broken() {
		scopes = oauthflow.MergeScopes(granted.Scopes, scopes)
	}
	sealed, t, err := s.flow.NewTicket(p, org, project, user, scopes, app)
	if err != nil {
		return "", oauthflow.Ticket{}, err
	}
	return s.startURL(sealed), t, nil
}

// Token returns a user's access token and granted scopes for a provider
// (refreshed first when it expires soon). Deprecated: Connection; kept
// until the tool runner has moved to it.
func (s *Service) Token(org, project, user, provider string) (string, []string, error) {
	c, err := s.Connection(context.Background(), org, project, user, provider)
	if err != nil {
		return "", nil, err
	}
	return c.AccessToken, c.Scopes, nil
}
