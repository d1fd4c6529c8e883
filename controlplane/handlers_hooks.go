package controlplane

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/gofiber/fiber/v2"
	"github.com/google/uuid"

	"github.com/auditrail/auditrail/internal/httpapi"
	"github.com/auditrail/auditrail/producers"
	"github.com/auditrail/auditrail/schemas"
)

// hookScope resolves the org, the project (nil for org hooks) and the KV scope token.
func (s *Service) hookScope(c *fiber.Ctx, mutate bool) (*call, Org, *Project, string, error) {
	withProject := c.Params("project_id") != ""
	cl, org, p, err := s.scope(c, mutate, withProject)
	if err != nil {
		return nil, Org{}, nil, "", err
	}
	if p == nil {
		return cl, org, nil, "org", nil
	}
	return cl, org, p, p.ID.String(), nil
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

// unsealedConfig returns the configuration of a stored hook with its secrets.
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
func hookView(h Hook) any {
	h.Config = h.Config.Redacted()
	h.SealedAuth = nil
	return h
}

func (s *Service) listHooks(c *fiber.Ctx) error {
	_, org, _, scope, err := s.hookScope(c, false)
	if err != nil {
		return err
	}
	return listItems(s, c, "hook."+org.ID.String()+"."+scope+".", hookView)
}

func (s *Service) createHook(c *fiber.Ctx) error {
	cl, org, p, scope, err := s.hookScope(c, true)
	if err != nil {
		return err
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
	if err := s.commitRecorded(cl, producers.Mutation{Action: schemas.AuditActionCreated, ResourceType: schemas.ResourceTypeHook,
		ResourceID: h.ID.String(), ResourceDisplay: cfg.Name, OrgID: org.ID, ProjectID: h.ProjectID, After: hookView(h)},
		setKey(key, h, 0)); err != nil {
		return httpError(err)
	}
	return httpapi.Reply(c, fiber.StatusCreated, hookView(h))
}

// hookTarget resolves the hook of a hook route: its KV key and the
// mutation that names it.
func (s *Service) hookTarget(c *fiber.Ctx, mutate bool) (*call, string, producers.Mutation, error) {
	cl, org, p, scope, err := s.hookScope(c, mutate)
	if err != nil {
		return nil, "", producers.Mutation{}, err
	}
	id, err := uuidParam(c, "hook_id")
	if err != nil {
		return nil, "", producers.Mutation{}, err
	}
	key := hookKey(org.ID.String(), scope, id.String())
	mut := producers.Mutation{ResourceType: schemas.ResourceTypeHook, ResourceID: id.String(), OrgID: org.ID}
	if p != nil {
		mut.ProjectID = &p.ID
	}
	var h Hook
	if _, err := s.state.get(key, &h); err != nil {
		return nil, "", producers.Mutation{}, httpError(fmt.Errorf("%w: hook %s", ErrNotFound, id))
	}
	mut.ResourceDisplay = h.Config.Name
	return cl, key, mut, nil
}

func (s *Service) getHook(c *fiber.Ctx) error {
	_, key, _, err := s.hookTarget(c, false)
	if err != nil {
		return err
	}
	var h Hook
	if _, err := s.state.get(key, &h); err != nil {
		return httpError(fmt.Errorf("%w: hook", ErrNotFound))
	}
	return httpapi.Reply(c, fiber.StatusOK, hookView(h))
}

// patchHook applies a JSON merge patch (RFC 7386) to the configuration.
func (s *Service) patchHook(c *fiber.Ctx) error {
	cl, key, mut, err := s.hookTarget(c, true)
	if err != nil {
		return err
	}
	var patch map[string]json.RawMessage
	if err := decodeBody(c, &patch); err != nil {
		return err
	}
	mut.Action = schemas.AuditActionUpdated
	return updateRecorded(s, cl, key, "hook "+mut.ResourceID, mut, hookView, func(h Hook) (Hook, bool, error) {
		cur, err := s.unsealedConfig(key, h)
		if err != nil {
			return h, false, fmt.Errorf("open hook secrets: %w", err)
		}
		curJSON, _ := json.Marshal(cur)
		merged, err := mergePatch(curJSON, c.Body())
		if err != nil {
			return h, false, invalid("body", "%v", err)
		}
		var next HookConfig
		dec := json.NewDecoder(bytes.NewReader(merged))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&next); err != nil {
			return h, false, invalid("body", "%v", err)
		}
		if err := next.Normalize(); err != nil {
			return h, false, err
		}
		after := h
		after.UpdatedAt = s.now().UTC()
		return after, true, s.sealHook(key, &after, next)
	})
}

func (s *Service) disableHook(c *fiber.Ctx) error {
	cl, key, mut, err := s.hookTarget(c, true)
	if err != nil {
		return err
	}
	mut.Action = schemas.AuditActionDisabled
	return updateRecorded(s, cl, key, "hook "+mut.ResourceID, mut, hookView, func(h Hook) (Hook, bool, error) {
		if h.Config.Enabled != nil && !*h.Config.Enabled {
			return h, false, nil
		}
		f := false
		h.Config.Enabled = &f
		h.UpdatedAt = s.now().UTC()
		return h, true, nil
	})
}

func (s *Service) deleteHook(c *fiber.Ctx) error {
	cl, key, mut, err := s.hookTarget(c, true)
	if err != nil {
		return err
	}
	return deleteRecorded(s, cl, key, "hook "+mut.ResourceID, mut, hookView, nil)
}
