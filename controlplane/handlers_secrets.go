package controlplane

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/auditrail/auditrail/producers"
	"github.com/auditrail/auditrail/schemas"
)

func bytesReader(b []byte) *bytes.Reader { return bytes.NewReader(b) }

// secretView is a secret as shown: its name, never its value.
func secretView(sec Secret) map[string]any {
	return map[string]any{"organization_id": sec.OrgID, "project_id": sec.ProjectID, "name": sec.Name,
		"value": Redacted, "updated_at": sec.UpdatedAt}
}

func (s *Service) listSecrets(c *fiber.Ctx) error {
	cl, err := s.begin(c)
	if err != nil {
		return err
	}
	org, err := s.orgFor(cl, false)
	if err != nil {
		return httpError(err)
	}
	p, err := s.projectFor(cl, org)
	if err != nil {
		return httpError(err)
	}
	secrets, err := listAs[Secret](s.state, "secret."+org.ID.String()+"."+p.ID.String()+".")
	if err != nil {
		return err
	}
	items := make([]map[string]any, len(secrets))
	for i, sec := range secrets {
		items[i] = secretView(sec)
	}
	return reply(c, fiber.StatusOK, map[string]any{"items": items})
}

func validSecretName(name string) error {
	if len(name) > 128 || strings.TrimFunc(name, func(r rune) bool {
		return r == '_' || r == '-' || r == '.' || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9')
	}) != "" {
		return invalid("name", "%q: use letters, digits, _ - . (at most 128)", name)
	}
	return nil
}

func (s *Service) putSecret(c *fiber.Ctx) error {
	cl, err := s.begin(c)
	if err != nil {
		return err
	}
	org, err := s.orgFor(cl, true)
	if err != nil {
		return httpError(err)
	}
	p, err := s.projectFor(cl, org)
	if err != nil {
		return httpError(err)
	}
	name, err := textParam(c, "name")
	if err != nil {
		return err
	}
	if err := validSecretName(name); err != nil {
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
	key := secretKey(org.ID.String(), p.ID.String(), name)
	defer s.lock(key)()
	var before Secret
	rev, err := s.state.get(key, &before)
	if err != nil && err != ErrNotFound {
		return err
	}
	sealed, err := s.sealer.Seal(key, []byte(*body.Value))
	if err != nil {
		return err
	}
	sec := Secret{OrgID: org.ID, ProjectID: p.ID, Name: name, Sealed: sealed, UpdatedAt: s.now().UTC()}
	mut := producers.Mutation{Action: schemas.AuditActionCreated, ResourceType: schemas.ResourceTypeSecret, ResourceID: name,
		ResourceDisplay: name, OrgID: org.ID, ProjectID: &p.ID, After: secretView(sec)}
	status := fiber.StatusCreated
	if rev != 0 {
		mut.Action, mut.Before, status = schemas.AuditActionUpdated, secretView(before), fiber.StatusOK
	}
	if err := s.record(cl, mut); err != nil {
		return httpError(err)
	}
	if _, err := s.state.put(c.UserContext(), key, sec, rev); err != nil {
		return httpError(err)
	}
	return reply(c, status, secretView(sec))
}

func (s *Service) deleteSecret(c *fiber.Ctx) error {
	cl, err := s.begin(c)
	if err != nil {
		return err
	}
	org, err := s.orgFor(cl, true)
	if err != nil {
		return httpError(err)
	}
	p, err := s.projectFor(cl, org)
	if err != nil {
		return httpError(err)
	}
	name, err := textParam(c, "name")
	if err != nil {
		return err
	}
	key := secretKey(org.ID.String(), p.ID.String(), name)
	defer s.lock(key)()
	var before Secret
	rev, err := s.state.get(key, &before)
	if err != nil {
		return httpError(fmt.Errorf("%w: secret %s", ErrNotFound, name))
	}
	if err := s.record(cl, producers.Mutation{Action: schemas.AuditActionDeleted, ResourceType: schemas.ResourceTypeSecret,
		ResourceID: name, ResourceDisplay: name, OrgID: org.ID, ProjectID: &p.ID, Before: secretView(before)}); err != nil {
		return httpError(err)
	}
	if err := s.state.remove(c.UserContext(), key, rev); err != nil {
		return httpError(err)
	}
	return reply(c, fiber.StatusOK, nil)
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

func connView(u UserConnection) map[string]any {
	return map[string]any{"organization_id": u.OrgID, "project_id": u.ProjectID, "user_id": u.UserID, "provider": u.Provider,
		"scopes": u.Scopes, "expires_at": u.ExpiresAt, "access_token": Redacted, "refresh_token": Redacted, "updated_at": u.UpdatedAt}
}

func (s *Service) listConnections(c *fiber.Ctx) error {
	cl, err := s.begin(c)
	if err != nil {
		return err
	}
	org, err := s.orgFor(cl, false)
	if err != nil {
		return httpError(err)
	}
	p, err := s.projectFor(cl, org)
	if err != nil {
		return httpError(err)
	}
	user, err := textParam(c, "user_id")
	if err != nil {
		return err
	}
	conns, err := listAs[UserConnection](s.state, "conn."+org.ID.String()+"."+p.ID.String()+"."+enc(user)+".")
	if err != nil {
		return err
	}
	items := make([]map[string]any, len(conns))
	for i, u := range conns {
		items[i] = connView(u)
	}
	return reply(c, fiber.StatusOK, map[string]any{"items": items})
}

func (s *Service) putConnection(c *fiber.Ctx) error {
	cl, err := s.begin(c)
	if err != nil {
		return err
	}
	org, err := s.orgFor(cl, true)
	if err != nil {
		return httpError(err)
	}
	p, err := s.projectFor(cl, org)
	if err != nil {
		return httpError(err)
	}
	user, err := textParam(c, "user_id")
	if err != nil {
		return err
	}
	provider, err := textParam(c, "provider")
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
	key := connKey(org.ID.String(), p.ID.String(), user, provider)
	defer s.lock(key)()
	var before UserConnection
	rev, err := s.state.get(key, &before)
	if err != nil && err != ErrNotFound {
		return err
	}
	tokens, _ := json.Marshal(ConnectionTokens{AccessToken: body.AccessToken, RefreshToken: body.RefreshToken})
	sealed, err := s.sealer.Seal(key, tokens)
	if err != nil {
		return err
	}
	if body.Scopes == nil {
		body.Scopes = []string{}
	}
	u := UserConnection{OrgID: org.ID, ProjectID: p.ID, UserID: user, Provider: provider, Scopes: body.Scopes,
		ExpiresAt: body.ExpiresAt, Sealed: sealed, UpdatedAt: s.now().UTC()}
	mut := producers.Mutation{Action: schemas.AuditActionCreated, ResourceType: schemas.ResourceTypeUserConnection,
		ResourceID: user + "/" + provider, ResourceDisplay: provider + " for " + user, OrgID: org.ID, ProjectID: &p.ID, After: connView(u)}
	status := fiber.StatusCreated
	if rev != 0 {
		mut.Action, mut.Before, status = schemas.AuditActionUpdated, connView(before), fiber.StatusOK
	}
	if err := s.record(cl, mut); err != nil {
		return httpError(err)
	}
	if _, err := s.state.put(c.UserContext(), key, u, rev); err != nil {
		return httpError(err)
	}
	return reply(c, status, connView(u))
}

func (s *Service) deleteConnection(c *fiber.Ctx) error {
	cl, err := s.begin(c)
	if err != nil {
		return err
	}
	org, err := s.orgFor(cl, true)
	if err != nil {
		return httpError(err)
	}
	p, err := s.projectFor(cl, org)
	if err != nil {
		return httpError(err)
	}
	user, err := textParam(c, "user_id")
	if err != nil {
		return err
	}
	provider, err := textParam(c, "provider")
	if err != nil {
		return err
	}
	key := connKey(org.ID.String(), p.ID.String(), user, provider)
	defer s.lock(key)()
	var before UserConnection
	rev, err := s.state.get(key, &before)
	if err != nil {
		return httpError(fmt.Errorf("%w: connection %s of %s", ErrNotFound, provider, user))
	}
	if err := s.record(cl, producers.Mutation{Action: schemas.AuditActionDeleted, ResourceType: schemas.ResourceTypeUserConnection,
		ResourceID: user + "/" + provider, ResourceDisplay: provider + " for " + user, OrgID: org.ID, ProjectID: &p.ID, Before: connView(before)}); err != nil {
		return httpError(err)
	}
	if err := s.state.remove(c.UserContext(), key, rev); err != nil {
		return httpError(err)
	}
	return reply(c, fiber.StatusOK, nil)
}
