package controlplane

import (
	"github.com/gofiber/fiber/v2"
	"github.com/google/uuid"

	"github.com/auditrail/auditrail/controlplane/cpstate"
	"github.com/auditrail/auditrail/internal/auth"
	"github.com/auditrail/auditrail/internal/httpapi"
	"github.com/auditrail/auditrail/producers"
	"github.com/auditrail/auditrail/schemas"
)

func keyView(k cpstate.APIKey) any { return k.Public() }

func (s *Service) listAPIKeys(c *fiber.Ctx) error {
	_, org, _, err := s.scope(c, false, false)
	if err != nil {
		return err
	}
	return listItems(s, c, "apikey."+org.ID.String()+".", keyView)
}

// createAPIKey makes a key of 32 random bytes, returns it once and stores
// only its SHA-256.
func (s *Service) createAPIKey(c *fiber.Ctx) error {
	cl, org, _, err := s.scope(c, true, false)
	if err != nil {
		return err
	}
	var body struct {
		Name   string `json:"name"`
		UserID string `json:"user_id"`
	}
	if err := decodeBody(c, &body); err != nil {
		return err
	}
	name, err := validName("name", body.Name)
	if err != nil {
		return httpError(err)
	}
	if body.UserID == "" {
		return httpError(cpstate.Invalid("user_id", "required"))
	}
	if _, err := s.state.Get(cpstate.MemberKey(org.ID.String(), body.UserID), &cpstate.Member{}); err != nil {
		return httpError(cpstate.Invalid("user_id", "%s is not a member of the organization", body.UserID))
	}
	return s.issueKey(cl, cpstate.APIKey{OrgID: org.ID, Kind: cpstate.KeyKindUser, UserID: body.UserID, Name: name}, nil)
}

// issueKey completes k with a new id and secret (32 random bytes), records
// its creation, stores only its SHA-256 and returns the secret once.
func (s *Service) issueKey(cl *call, k cpstate.APIKey, project *uuid.UUID) error {
	secret := newAPIKeySecret()
	k.ID, k.Prefix, k.Hash, k.CreatedAt = uuid.New(), secret[:10], auth.HashKey(secret), s.now().UTC()
	if err := s.commitRecorded(cl, producers.Mutation{Action: schemas.AuditActionCreated, ResourceType: schemas.ResourceTypeAPIKey,
		ResourceID: k.ID.String(), ResourceDisplay: k.Name, OrgID: k.OrgID, ProjectID: project, After: k.Public()},
		cpstate.SetKey(cpstate.APIKeyKey(k.OrgID.String(), k.ID.String()), k, 0)); err != nil {
		return httpError(err)
	}
	return httpapi.Reply(cl.c, fiber.StatusCreated, struct {
		cpstate.APIKey
		Key string `json:"key"`
	}{k.Public(), secret})
}

// keyTarget resolves the key of a key route.
func (s *Service) keyTarget(c *fiber.Ctx) (*call, cpstate.Org, string, error) {
	cl, org, _, err := s.scope(c, true, false)
	if err != nil {
		return nil, cpstate.Org{}, "", err
	}
	id, err := uuidParam(c, "key_id")
	if err != nil {
		return nil, cpstate.Org{}, "", err
	}
	return cl, org, id.String(), nil
}

func (s *Service) keyMutation(org cpstate.Org, id string) producers.Mutation {
	m := producers.Mutation{ResourceType: schemas.ResourceTypeAPIKey, ResourceID: id, OrgID: org.ID}
	var k cpstate.APIKey
	if _, err := s.state.Get(cpstate.APIKeyKey(org.ID.String(), id), &k); err == nil {
		m.ResourceDisplay = k.Name
	}
	return m
}

func (s *Service) disableAPIKey(c *fiber.Ctx) error {
	cl, org, id, err := s.keyTarget(c)
	if err != nil {
		return err
	}
	mut := s.keyMutation(org, id)
	mut.Action = schemas.AuditActionDisabled
	return updateRecorded(s, cl, cpstate.APIKeyKey(org.ID.String(), id), "API key "+id, mut, keyView,
		func(k cpstate.APIKey) (cpstate.APIKey, bool, error) {
			changed := !k.Disabled // disabling a disabled key changes nothing and records nothing
			k.Disabled = true
			return k, changed, nil
		})
}

func (s *Service) deleteAPIKey(c *fiber.Ctx) error {
	cl, org, id, err := s.keyTarget(c)
	if err != nil {
		return err
	}
	return deleteRecorded(s, cl, cpstate.APIKeyKey(org.ID.String(), id), "API key "+id, s.keyMutation(org, id), keyView, nil)
}
