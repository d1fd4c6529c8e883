package controlplane

import (
	"encoding/json"
	"fmt"

	"github.com/gofiber/fiber/v2"
	"github.com/google/uuid"

	"github.com/auditrail/auditrail/producers"
	"github.com/auditrail/auditrail/schemas"
)

// hookScope returns the org, the project (nil for org hooks) and the KV scope token.
func (s *Service) hookScope(cl *call, mutate bool) (Org, *Project, string, error) {
	org, err := s.orgFor(cl, mutate)
	if err != nil {
		return Org{}, nil, "", err
	}
	if cl.c.Params("project_id") == "" {
		return org, nil, "org", nil
	}
	p, err := s.projectFor(cl, org)
	if err != nil {
		return Org{}, nil, "", err
	}
	return org, &p, p.ID.String(), nil
}

// sealHook moves the secret parts of cfg.Auth into SealedAuth.
func (s *Service) sealHook(key string, h *Hook, cfg HookConfig) error {
	secrets, _ := json.Marshal(HookAuth{Token: cfg.Auth.Token, ClientKeyPEM: cfg.Auth.ClientKeyPEM})
	sealed, err := s.sealer.Seal(key, secrets)
	if err != nil {
		return err
	}
	cfg.Auth.Token, cfg.Auth.ClientKeyPEM = "", ""
	h.Config, h.SealedAuth = cfg, sealed
	return nil
}

// UnsealedConfig returns the configuration of a stored hook with its secrets.
func (s *Service) unsealedConfig(key string, h Hook) (HookConfig, error) {
	cfg := h.Config
	pt, err := s.sealer.Open(key, h.SealedAuth)
	if err != nil {
		return cfg, err
	}
	var a HookAuth
	if err := json.Unmarshal(pt, &a); err != nil {
		return cfg, err
	}
	cfg.Auth.Token, cfg.Auth.ClientKeyPEM = a.Token, a.ClientKeyPEM
	return cfg, nil
}

// hookView is a hook as the API and audit events show it.
func hookView(h Hook) Hook {
	h.Config = h.Config.Redacted()
	h.SealedAuth = nil
	return h
}

func (s *Service) listHooks(c *fiber.Ctx) error {
	cl, err := s.begin(c)
	if err != nil {
		return err
	}
	org, _, scope, err := s.hookScope(cl, false)
	if err != nil {
		return httpError(err)
	}
	hooks, err := listAs[Hook](s.state, "hook."+org.ID.String()+"."+scope+".")
	if err != nil {
		return err
	}
	for i := range hooks {
		hooks[i] = hookView(hooks[i])
	}
	return reply(c, fiber.StatusOK, map[string]any{"items": hooks})
}

func (s *Service) createHook(c *fiber.Ctx) error {
	cl, err := s.begin(c)
	if err != nil {
		return err
	}
	org, p, scope, err := s.hookScope(cl, true)
	if err != nil {
		return httpError(err)
	}
	var cfg HookConfig
	if err := decodeBody(c, &cfg); err != nil {
		return err
	}
	if err := cfg.Normalize(); err != nil {
		return httpError(err)
	}
	now := s.now().UTC()
	h := Hook{ID: uuid.New(), OrgID: org.ID, CreatedAt: now, UpdatedAt: now}
	if p != nil {
		h.ProjectID = &p.ID
	}
	key := hookKey(org.ID.String(), scope, h.ID.String())
	if err := s.sealHook(key, &h, cfg); err != nil {
		return err
	}
	if err := s.record(cl, producers.Mutation{Action: schemas.AuditActionCreated, ResourceType: schemas.ResourceTypeHook,
		ResourceID: h.ID.String(), ResourceDisplay: cfg.Name, OrgID: org.ID, ProjectID: h.ProjectID, After: hookView(h)}); err != nil {
		return httpError(err)
	}
	if _, err := s.state.put(c.UserContext(), key, h, 0); err != nil {
		return httpError(err)
	}
	return reply(c, fiber.StatusCreated, hookView(h))
}

func (s *Service) hookFor(cl *call, mutate bool) (Org, string, Hook, uint64, error) {
	org, _, scope, err := s.hookScope(cl, mutate)
	if err != nil {
		return Org{}, "", Hook{}, 0, err
	}
	id, err := uuidParam(cl.c, "hook_id")
	if err != nil {
		return Org{}, "", Hook{}, 0, err
	}
	key := hookKey(org.ID.String(), scope, id.String())
	var h Hook
	rev, err := s.state.get(key, &h)
	if err != nil {
		return Org{}, "", Hook{}, 0, fmt.Errorf("%w: hook %s", ErrNotFound, id)
	}
	return org, key, h, rev, nil
}

func (s *Service) getHook(c *fiber.Ctx) error {
	cl, err := s.begin(c)
	if err != nil {
		return err
	}
	_, _, h, _, err := s.hookFor(cl, false)
	if err != nil {
		return httpError(err)
	}
	return reply(c, fiber.StatusOK, hookView(h))
}

// patchHook applies a JSON merge patch (RFC 7386) to the configuration.
func (s *Service) patchHook(c *fiber.Ctx) error {
	cl, err := s.begin(c)
	if err != nil {
		return err
	}
	org, key, h, rev, err := s.hookFor(cl, true)
	if err != nil {
		return httpError(err)
	}
	defer s.lock(key)()
	var patch map[string]json.RawMessage
	if err := decodeBody(c, &patch); err != nil {
		return err
	}
	cur, err := s.unsealedConfig(key, h)
	if err != nil {
		return fmt.Errorf("open hook secrets: %w", err)
	}
	curJSON, _ := json.Marshal(cur)
	merged, err := mergePatch(curJSON, c.Body())
	if err != nil {
		return httpError(invalid("body", "%v", err))
	}
	var next HookConfig
	if err := decodeStrict(merged, &next); err != nil {
		return httpError(invalid("body", "%v", err))
	}
	if err := next.Normalize(); err != nil {
		return httpError(err)
	}
	after := h
	after.UpdatedAt = s.now().UTC()
	if err := s.sealHook(key, &after, next); err != nil {
		return err
	}
	if err := s.record(cl, producers.Mutation{Action: schemas.AuditActionUpdated, ResourceType: schemas.ResourceTypeHook,
		ResourceID: h.ID.String(), ResourceDisplay: next.Name, OrgID: org.ID, ProjectID: h.ProjectID,
		Before: hookView(h), After: hookView(after)}); err != nil {
		return httpError(err)
	}
	if _, err := s.state.put(c.UserContext(), key, after, rev); err != nil {
		return httpError(err)
	}
	return reply(c, fiber.StatusOK, hookView(after))
}

func decodeStrict(b []byte, v any) error {
	dec := json.NewDecoder(bytesReader(b))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

func (s *Service) disableHook(c *fiber.Ctx) error {
	cl, err := s.begin(c)
	if err != nil {
		return err
	}
	org, key, h, rev, err := s.hookFor(cl, true)
	if err != nil {
		return httpError(err)
	}
	defer s.lock(key)()
	if h.Config.Enabled != nil && !*h.Config.Enabled {
		return reply(c, fiber.StatusOK, hookView(h))
	}
	after := h
	f := false
	after.Config.Enabled = &f
	after.UpdatedAt = s.now().UTC()
	if err := s.record(cl, producers.Mutation{Action: schemas.AuditActionDisabled, ResourceType: schemas.ResourceTypeHook,
		ResourceID: h.ID.String(), ResourceDisplay: h.Config.Name, OrgID: org.ID, ProjectID: h.ProjectID,
		Before: hookView(h), After: hookView(after)}); err != nil {
		return httpError(err)
	}
	if _, err := s.state.put(c.UserContext(), key, after, rev); err != nil {
		return httpError(err)
	}
	return reply(c, fiber.StatusOK, hookView(after))
}

func (s *Service) deleteHook(c *fiber.Ctx) error {
	cl, err := s.begin(c)
	if err != nil {
		return err
	}
	org, key, h, rev, err := s.hookFor(cl, true)
	if err != nil {
		return httpError(err)
	}
	defer s.lock(key)()
	if err := s.record(cl, producers.Mutation{Action: schemas.AuditActionDeleted, ResourceType: schemas.ResourceTypeHook,
		ResourceID: h.ID.String(), ResourceDisplay: h.Config.Name, OrgID: org.ID, ProjectID: h.ProjectID, Before: hookView(h)}); err != nil {
		return httpError(err)
	}
	if err := s.state.remove(c.UserContext(), key, rev); err != nil {
		return httpError(err)
	}
	return reply(c, fiber.StatusOK, nil)
}
