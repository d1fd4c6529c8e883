package controlplane

import (
	"strings"

	"github.com/gofiber/fiber/v2"

	"github.com/auditrail/auditrail/controlplane/cpstate"
	"github.com/auditrail/auditrail/producers"
	"github.com/auditrail/auditrail/schemas"
)

// secretView is a secret as shown: its name, never its value.
func secretView(sec cpstate.Secret) any {
	return map[string]any{"organization_id": sec.OrgID, "project_id": sec.ProjectID, "name": sec.Name,
		"value": cpstate.Redacted, "updated_at": sec.UpdatedAt}
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
		return cpstate.Invalid("name", "%q: use letters, digits, _ - . (at most 128)", name)
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
	return cl, cpstate.SecretKey(org.ID.String(), p.ID.String(), name), producers.Mutation{ResourceType: schemas.ResourceTypeSecret,
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
		return httpError(cpstate.Invalid("value", "required"))
	}
	if len(*body.Value) > 64<<10 {
		return httpError(cpstate.Invalid("value", "at most 64 KiB"))
	}
	if mut.ResourceID == DBConnectionSecret {
		if err := s.checkConnectionString(c.UserContext(), *body.Value); err != nil {
			return httpError(err)
		}
	}
	return putRecorded(s, cl, key, mut, secretView, func(cpstate.Secret, bool, *producers.Mutation) (cpstate.Secret, error) {
		sealed, err := s.sealer.Seal(key, []byte(*body.Value))
		return cpstate.Secret{OrgID: mut.OrgID, ProjectID: *mut.ProjectID, Name: mut.ResourceID, Sealed: sealed, UpdatedAt: s.now().UTC()}, err
	})
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
	key := cpstate.SecretKey(org, project, name)
	var sec cpstate.Secret
	if _, err := s.state.Get(key, &sec); err != nil {
		return "", err
	}
	pt, err := s.sealer.Open(key, sec.Sealed)
	return string(pt), err
}
