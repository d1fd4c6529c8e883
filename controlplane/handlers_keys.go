package controlplane

import (
	"fmt"

	"github.com/gofiber/fiber/v2"
	"github.com/google/uuid"

	"github.com/auditrail/auditrail/internal/auth"
	"github.com/auditrail/auditrail/producers"
	"github.com/auditrail/auditrail/schemas"
)

func (s *Service) listAPIKeys(c *fiber.Ctx) error {
	cl, err := s.begin(c)
	if err != nil {
		return err
	}
	org, err := s.orgFor(cl, false)
	if err != nil {
		return httpError(err)
	}
	keys, err := listAs[APIKey](s.state, "apikey."+org.ID.String()+".")
	if err != nil {
		return err
	}
	for i := range keys {
		keys[i] = keys[i].Public()
	}
	return reply(c, fiber.StatusOK, map[string]any{"items": keys})
}

// createAPIKey makes a key of at least 32 random bytes, returns it once and
// stores only its SHA-256.
func (s *Service) createAPIKey(c *fiber.Ctx) error {
	cl, err := s.begin(c)
	if err != nil {
		return err
	}
	org, err := s.orgFor(cl, true)
	if err != nil {
		return httpError(err)
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
		return httpError(invalid("user_id", "required"))
	}
	if _, err := s.state.get(memberKey(org.ID.String(), body.UserID), &Member{}); err != nil {
		return httpError(invalid("user_id", "%s is not a member of the organization", body.UserID))
	}
	secret := newAPIKeySecret()
	k := APIKey{ID: uuid.New(), OrgID: org.ID, UserID: body.UserID, Name: name, Prefix: secret[:10],
		Hash: auth.HashKey(secret), CreatedAt: s.now().UTC()}
	if err := s.record(cl, producers.Mutation{Action: schemas.AuditActionCreated, ResourceType: schemas.ResourceTypeAPIKey,
		ResourceID: k.ID.String(), ResourceDisplay: k.Name, OrgID: org.ID, After: k.Public()}); err != nil {
		return httpError(err)
	}
	if _, err := s.state.put(c.UserContext(), apiKeyKey(org.ID.String(), k.ID.String()), k, 0); err != nil {
		return httpError(err)
	}
	return reply(c, fiber.StatusCreated, struct {
		APIKey
		Key string `json:"key"`
	}{k.Public(), secret})
}

func (s *Service) keyFor(cl *call, org Org) (string, APIKey, uint64, error) {
	id, err := uuidParam(cl.c, "key_id")
	if err != nil {
		return "", APIKey{}, 0, err
	}
	key := apiKeyKey(org.ID.String(), id.String())
	var k APIKey
	rev, err := s.state.get(key, &k)
	if err != nil {
		return "", APIKey{}, 0, fmt.Errorf("%w: API key %s", ErrNotFound, id)
	}
	return key, k, rev, nil
}

func (s *Service) disableAPIKey(c *fiber.Ctx) error {
	cl, err := s.begin(c)
	if err != nil {
		return err
	}
	org, err := s.orgFor(cl, true)
	if err != nil {
		return httpError(err)
	}
	key, k, rev, err := s.keyFor(cl, org)
	if err != nil {
		return httpError(err)
	}
	defer s.lock(key)()
	if k.Disabled {
		return reply(c, fiber.StatusOK, k.Public()) // already disabled: no change, no event
	}
	after := k
	after.Disabled = true
	if err := s.record(cl, producers.Mutation{Action: schemas.AuditActionDisabled, ResourceType: schemas.ResourceTypeAPIKey,
		ResourceID: k.ID.String(), ResourceDisplay: k.Name, OrgID: org.ID, Before: k.Public(), After: after.Public()}); err != nil {
		return httpError(err)
	}
	if _, err := s.state.put(c.UserContext(), key, after, rev); err != nil {
		return httpError(err)
	}
	return reply(c, fiber.StatusOK, after.Public())
}

func (s *Service) deleteAPIKey(c *fiber.Ctx) error {
	cl, err := s.begin(c)
	if err != nil {
		return err
	}
	org, err := s.orgFor(cl, true)
	if err != nil {
		return httpError(err)
	}
	key, k, rev, err := s.keyFor(cl, org)
	if err != nil {
		return httpError(err)
	}
	defer s.lock(key)()
	if err := s.record(cl, producers.Mutation{Action: schemas.AuditActionDeleted, ResourceType: schemas.ResourceTypeAPIKey,
		ResourceID: k.ID.String(), ResourceDisplay: k.Name, OrgID: org.ID, Before: k.Public()}); err != nil {
		return httpError(err)
	}
	if err := s.state.remove(c.UserContext(), key, rev); err != nil {
		return httpError(err)
	}
	return reply(c, fiber.StatusOK, nil)
}
