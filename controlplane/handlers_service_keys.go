package controlplane

import (
	"github.com/gofiber/fiber/v2"

	"github.com/auditrail/auditrail/controlplane/cpstate"
	"github.com/auditrail/auditrail/internal/httpapi"
)

// listServiceKeys lists the service keys of a project (members read).
func (s *Service) listServiceKeys(c *fiber.Ctx) error {
	_, org, p, err := s.scope(c, false, true)
	if err != nil {
		return err
	}
	keys, err := cpstate.ListAs[cpstate.APIKey](s.state, "apikey."+org.ID.String()+".")
	if err != nil {
		return err
	}
	items := make([]any, 0, len(keys))
	for _, k := range keys {
		if k.Kind == cpstate.KeyKindService && k.ProjectID != nil && *k.ProjectID == p.ID {
			items = append(items, k.Public())
		}
	}
	return httpapi.Reply(c, fiber.StatusOK, map[string]any{"items": items})
}

// createServiceKey makes a project service key (owners and admins of the
// organization): it may list and run the project's tools for the end user
// each call names, and nothing else. Disabled and deleted through the
// organization's api_keys routes.
func (s *Service) createServiceKey(c *fiber.Ctx) error {
	cl, org, p, err := s.scope(c, true, true)
	if err != nil {
		return err
	}
	var body struct {
		Name string `json:"name"`
	}
	if err := decodeBody(c, &body); err != nil {
		return err
	}
	name, err := validName("name", body.Name)
	if err != nil {
		return httpError(err)
	}
	project := p.ID
	return s.issueKey(cl, cpstate.APIKey{OrgID: org.ID, Kind: cpstate.KeyKindService, ProjectID: &project, Name: name}, &project)
}
