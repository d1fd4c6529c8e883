package controlplane

import (
	"context"
	"fmt"
	"time"

	"github.com/auditrail/auditrail/controlplane/cpstate"
	"github.com/auditrail/auditrail/internal/httpapi"
	"github.com/auditrail/auditrail/internal/oauthflow"
	"github.com/auditrail/auditrail/producers"
	"github.com/auditrail/auditrail/schemas"
	"github.com/gofiber/fiber/v2"
	"github.com/google/uuid"
)

// Users' provider connections: list, store, delete (revoking at the
// provider). The OAuth flow that creates them is in handlers_oauth.go.

// connView is a connection as the API and audit events show it: never a
// token.
func (s *Service) connView(u cpstate.UserConnection) any {
	connected := false
	if !u.Broken() {
		if u.ExpiresAt == nil || s.now().Before(*u.ExpiresAt) {
			connected = true
		} else if _, _, t, err := s.openConn(cpstate.ConnKey(u.OrgID.String(), u.ProjectID.String(), u.UserID, u.Provider)); err == nil {
			connected = t.RefreshToken != ""
		}
	}
	status := cpstate.ConnStatusConnected
	if u.Broken() {
		status = cpstate.ConnStatusBroken
	}
	return map[string]any{"organization_id": u.OrgID, "project_id": u.ProjectID, "user_id": u.UserID, "provider": u.Provider,
		"scopes": nonNil(u.Scopes), "connected": connected, "status": status, "account": u.Account, "expires_at": u.ExpiresAt,
		"updated_at": u.UpdatedAt}
}

func (s *Service) listConnections(c *fiber.Ctx) error {
	_, org, p, user, err := s.connScope(c, connRead)
	if err != nil {
		return err
	}
	return listItems(s, c, cpstate.UserConnPrefix(org.ID.String(), p.ID.String(), user), s.connView)
}

func (s *Service) connTarget(c *fiber.Ctx) (*call, string, string, string, producers.Mutation, error) {
	cl, org, p, err := s.scope(c, true, true)
	if err != nil {
		return nil, "", "", "", producers.Mutation{}, err
	}
	user, err := textParam(c, "user_id")
	if err != nil {
		return nil, "", "", "", producers.Mutation{}, err
	}
	return connMutation(cl, org, *p, user)
}

func connMutation(cl *call, org cpstate.Org, p cpstate.Project, user string) (*call, string, string, string, producers.Mutation, error) {
	provider, err := textParam(cl.c, "provider")
	if err != nil {
		return nil, "", "", "", producers.Mutation{}, err
	}
	return cl, cpstate.ConnKey(org.ID.String(), p.ID.String(), user, provider), user, provider, producers.Mutation{
		ResourceType: schemas.ResourceTypeUserConnection, ResourceID: user + "/" + provider,
		ResourceDisplay: provider + " for " + user, OrgID: org.ID, ProjectID: &p.ID}, nil
}

// putConnection stores raw tokens (a connection made elsewhere): org
// owners and admins only.
func (s *Service) putConnection(c *fiber.Ctx) error {
	cl, key, user, provider, mut, err := s.connTarget(c)
	if err != nil {
		return err
	}
	var body struct {
		AccessToken  string     `json:"access_token"`
		RefreshToken string     `json:"refresh_token"`
		Scopes       []string   `json:"scopes"`
		ExpiresAt    *time.Time `json:"expires_at"`
	}
	if err := decodeBody(c, &body); err != nil {
		return err
	}
	if body.AccessToken == "" {
		return httpError(cpstate.Invalid("access_token", "required"))
	}
	for _, sc := range body.Scopes {
		if err := validScope(sc); err != nil {
			return httpError(cpstate.Invalid("scopes", "%v", err))
		}
	}
	return putRecorded(s, cl, key, mut, s.connView, func(before cpstate.UserConnection, _ bool, _ *producers.Mutation) (cpstate.UserConnection, error) {
		sealed, err := s.sealTokens(key, cpstate.ConnectionTokens{AccessToken: body.AccessToken, RefreshToken: body.RefreshToken})
		return cpstate.UserConnection{OrgID: mut.OrgID, ProjectID: *mut.ProjectID, UserID: user, Provider: provider, Scopes: nonNil(oauthflow.MergeScopes(body.Scopes)),
			ExpiresAt: body.ExpiresAt, Status: cpstate.ConnStatusConnected, Account: before.Account, Sealed: sealed, UpdatedAt: s.now().UTC()}, err
	})
}

// Revocation outcomes of a deleted connection.
const (
	revocationDone        = "revoked"
	revocationFailed      = "failed"
	revocationUnsupported = "not_supported"
)

// deleteConnection revokes the grant at the provider when it has a revoke
// URL (with the refresh token, which revokes the whole grant, else the
// access token), then deletes the connection whatever the provider said.
func (s *Service) deleteConnection(c *fiber.Ctx) error {
	cl, org, p, user, err := s.connScope(c, connDelete)
	if err != nil {
		return err
	}
	cl, key, _, provider, mut, err := connMutation(cl, org, p, user)
	if err != nil {
		return err
	}
	if _, err := s.state.Get(key, &cpstate.UserConnection{}); err != nil {
		return httpError(fmt.Errorf("%w: connection %s of %s", cpstate.ErrNotFound, provider, user))
	}
	revocation := s.revokeConnection(c.UserContext(), key, org.ID, provider)
	defer s.lock(key)()
	var before cpstate.UserConnection
	rev, err := s.state.Get(key, &before)
	if err != nil {
		return httpError(fmt.Errorf("%w: connection %s of %s", cpstate.ErrNotFound, provider, user))
	}
	view := s.connView(before).(map[string]any)
	view["revoked"] = revocation == revocationDone
	mut.Action, mut.Before = schemas.AuditActionDeleted, view
	if err := s.commitRecorded(cl, mut, cpstate.DeleteKey(key, rev)); err != nil {
		return httpError(err)
	}
	return httpapi.Reply(c, fiber.StatusOK, map[string]any{"provider": provider, "revoked": revocation == revocationDone, "revocation": revocation})
}

func (s *Service) revokeConnection(ctx context.Context, key string, org uuid.UUID, provider string) string {
	if s.flow == nil {
		return revocationUnsupported
	}
	p, err := s.Provider(org, provider)
	if err != nil || p.RevokeURL == "" {
		return revocationUnsupported
	}
	_, _, t, err := s.openConn(key)
	if err != nil {
		return revocationFailed
	}
	tok := t.RefreshToken
	if tok == "" {
		tok = t.AccessToken
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := s.flow.Revoke(ctx, p, tok); err != nil {
		s.log.Warn("connection deleted without revocation: the provider did not confirm it", "provider", provider, "err", err)
		return revocationFailed
	}
	return revocationDone
}
