package controlplane

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/google/uuid"

	"github.com/auditrail/auditrail/internal/egress"
	"github.com/auditrail/auditrail/internal/httpapi"
	"github.com/auditrail/auditrail/internal/oauthflow"
	"github.com/auditrail/auditrail/producers"
	"github.com/auditrail/auditrail/schemas"
)

// secretView is a secret as shown: its name, never its value.
func secretView(sec Secret) any {
	return map[string]any{"organization_id": sec.OrgID, "project_id": sec.ProjectID, "name": sec.Name,
		"value": Redacted, "updated_at": sec.UpdatedAt}
}

func (s *Service) listSecrets(c *fiber.Ctx) error {
	_, org, p, err := s.scope(c, false, true)
	if err != nil {
		return err
	}
	return listItems(s, c, "secret."+org.ID.String()+"."+p.ID.String()+".", secretView)
}

func validSecretName(name string) error {
	if len(name) > 128 || strings.TrimFunc(name, func(r rune) bool {
		return r == '_' || r == '-' || r == '.' || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9')
	}) != "" {
		return invalid("name", "%q: use letters, digits, _ - . (at most 128)", name)
	}
	return nil
}

func (s *Service) secretTarget(c *fiber.Ctx) (*call, string, producers.Mutation, error) {
	cl, org, p, err := s.scope(c, true, true)
	if err != nil {
		return nil, "", producers.Mutation{}, err
	}
	name, err := textParam(c, "name")
	if err != nil {
		return nil, "", producers.Mutation{}, err
	}
	return cl, secretKey(org.ID.String(), p.ID.String(), name), producers.Mutation{ResourceType: schemas.ResourceTypeSecret,
		ResourceID: name, ResourceDisplay: name, OrgID: org.ID, ProjectID: &p.ID}, nil
}

func (s *Service) putSecret(c *fiber.Ctx) error {
	cl, key, mut, err := s.secretTarget(c)
	if err != nil {
		return err
	}
	if err := validSecretName(mut.ResourceID); err != nil {
		return httpError(err)
	}
	var body struct {
		Value *string `json:"value"`
	}
	if err := decodeBody(c, &body); err != nil {
		return err
	}
	if body.Value == nil || *body.Value == "" {
		return httpError(invalid("value", "required"))
	}
	if len(*body.Value) > 64<<10 {
		return httpError(invalid("value", "at most 64 KiB"))
	}
	if mut.ResourceID == DBConnectionSecret {
		if err := s.checkConnectionString(c.UserContext(), *body.Value); err != nil {
			return httpError(err)
		}
	}
	return putRecorded(s, cl, key, mut, secretView, func(Secret, bool, *producers.Mutation) (Secret, error) {
		sealed, err := s.sealer.Seal(key, []byte(*body.Value))
		return Secret{OrgID: mut.OrgID, ProjectID: *mut.ProjectID, Name: mut.ResourceID, Sealed: sealed, UpdatedAt: s.now().UTC()}, err
	})
}

// DBConnectionSecret is the secret of the DocumentDB toolkit: a MongoDB
// connection string whose hosts the platform connects to.
const DBConnectionSecret = "DB_CONNECTION_STRING"

// checkConnectionString refuses (400, field "value") a MongoDB connection
// string with a host on a refused address (loopback, private, link-local,
// metadata), directly, through its name or through its SRV targets. The
// message names the host, never the string (it holds the password). A
// value that is not a mongodb:// string is left to the toolkit (which
// refuses it when used); every connection passes the guard anyway.
func (s *Service) checkConnectionString(ctx context.Context, uri string) error {
	hosts, srv, err := mongoHosts(uri)
	if err != nil {
		// Not a connection string: the toolkit refuses it when used; there
		// is no host to reach.
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	g := s.egressGuard()
	for _, h := range hosts {
		switch {
		case strings.HasPrefix(h, "/"): // a Unix socket is a local address
			err = g.CheckHost(ctx, "127.0.0.1")
		case srv:
			err = g.CheckSRV(ctx, "mongodb", "tcp", h)
		default:
			err = g.CheckHost(ctx, h)
		}
		if errors.Is(err, egress.ErrRefused) {
			return invalid("value", "database host %s: %v: databases must be on public addresses", h, err)
		}
	}
	return nil
}

// mongoHosts returns the hosts of a mongodb:// or mongodb+srv:// string
// (without ports; Unix socket paths unescaped).
func mongoHosts(uri string) (hosts []string, srv bool, err error) {
	rest, ok := strings.CutPrefix(uri, "mongodb://")
	if !ok {
		if rest, ok = strings.CutPrefix(uri, "mongodb+srv://"); !ok {
			return nil, false, errors.New("not a mongodb:// or mongodb+srv:// connection string")
		}
		srv = true
	}
	if i := strings.IndexAny(rest, "/?"); i >= 0 {
		rest = rest[:i]
	}
	if i := strings.LastIndex(rest, "@"); i >= 0 {
		rest = rest[i+1:]
	}
	for _, hp := range strings.Split(rest, ",") {
		host := hp
		switch {
		case strings.HasPrefix(hp, "["):
			end := strings.Index(hp, "]")
			if end < 0 {
				return nil, false, errors.New("a host has an unclosed [")
			}
			host = hp[1:end]
		case strings.Count(hp, ":") == 1:
			host = hp[:strings.Index(hp, ":")]
		}
		if unesc, err := url.PathUnescape(host); err == nil {
			host = unesc
		}
		if host == "" {
			return nil, false, errors.New("a host is empty")
		}
		hosts = append(hosts, host)
	}
	return hosts, srv, nil
}

func (s *Service) deleteSecret(c *fiber.Ctx) error {
	cl, key, mut, err := s.secretTarget(c)
	if err != nil {
		return err
	}
	return deleteRecorded(s, cl, key, "secret "+mut.ResourceID, mut, secretView, nil)
}

// SecretValue returns the plaintext of a project secret, for the tool runner.
func (s *Service) SecretValue(org, project, name string) (string, error) {
	key := secretKey(org, project, name)
	var sec Secret
	if _, err := s.state.get(key, &sec); err != nil {
		return "", err
	}
	pt, err := s.sealer.Open(key, sec.Sealed)
	return string(pt), err
}

// connView is a connection as the API and audit events show it: never a
// token.
func (s *Service) connView(u UserConnection) any {
	connected := false
	if !u.Broken() {
		if u.ExpiresAt == nil || s.now().Before(*u.ExpiresAt) {
			connected = true
		} else if _, _, t, err := s.openConn(connKey(u.OrgID.String(), u.ProjectID.String(), u.UserID, u.Provider)); err == nil {
			connected = t.RefreshToken != ""
		}
	}
	status := ConnStatusConnected
	if u.Broken() {
		status = ConnStatusBroken
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
	return listItems(s, c, "conn."+org.ID.String()+"."+p.ID.String()+"."+enc(user)+".", s.connView)
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

func connMutation(cl *call, org Org, p Project, user string) (*call, string, string, string, producers.Mutation, error) {
	provider, err := textParam(cl.c, "provider")
	if err != nil {
		return nil, "", "", "", producers.Mutation{}, err
	}
	return cl, connKey(org.ID.String(), p.ID.String(), user, provider), user, provider, producers.Mutation{
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
		return httpError(invalid("access_token", "required"))
	}
	for _, sc := range body.Scopes {
		if err := validScope(sc); err != nil {
			return httpError(invalid("scopes", "%v", err))
		}
	}
	return putRecorded(s, cl, key, mut, s.connView, func(before UserConnection, _ bool, _ *producers.Mutation) (UserConnection, error) {
		sealed, err := s.sealTokens(key, ConnectionTokens{AccessToken: body.AccessToken, RefreshToken: body.RefreshToken})
		return UserConnection{OrgID: mut.OrgID, ProjectID: *mut.ProjectID, UserID: user, Provider: provider, Scopes: nonNil(oauthflow.MergeScopes(body.Scopes)),
			ExpiresAt: body.ExpiresAt, Status: ConnStatusConnected, Account: before.Account, Sealed: sealed, UpdatedAt: s.now().UTC()}, err
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
	if _, err := s.state.get(key, &UserConnection{}); err != nil {
		return httpError(fmt.Errorf("%w: connection %s of %s", ErrNotFound, provider, user))
	}
	revocation := s.revokeConnection(c.UserContext(), key, org.ID, provider)
	defer s.lock(key)()
	var before UserConnection
	rev, err := s.state.get(key, &before)
	if err != nil {
		return httpError(fmt.Errorf("%w: connection %s of %s", ErrNotFound, provider, user))
	}
	view := s.connView(before).(map[string]any)
	view["revoked"] = revocation == revocationDone
	mut.Action, mut.Before = schemas.AuditActionDeleted, view
	if err := s.commitRecorded(cl, mut, deleteKey(key, rev)); err != nil {
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
