package controlplane

import (
	"fmt"
	"strings"

	"github.com/gofiber/fiber/v2"
	"github.com/google/uuid"

	"github.com/auditrail/auditrail/controlplane/cpstate"
	"github.com/auditrail/auditrail/internal/auth"
	"github.com/auditrail/auditrail/internal/httpapi"
	"github.com/auditrail/auditrail/producers"
	"github.com/auditrail/auditrail/schemas"
)

func validName(field, v string) (string, error) {
	v = strings.TrimSpace(v)
	if v == "" || len(v) > 200 {
		return "", cpstate.Invalid(field, "required, 1 to 200 characters")
	}
	return v, nil
}

func nameBody(c *fiber.Ctx) (string, error) {
	var body struct {
		Name string `json:"name"`
	}
	if err := decodeBody(c, &body); err != nil {
		return "", err
	}
	name, err := validName("name", body.Name)
	return name, httpError(err)
}

// createOrg: the platform admin, or a user (JWT), who becomes its owner.
func (s *Service) createOrg(c *fiber.Ctx) error {
	cl, err := s.begin(c)
	if err != nil {
		return err
	}
	if !cl.p.PlatformAdmin && (cl.p.Type != auth.TypeAccount || cl.p.UserID == "") {
		return httpError(fmt.Errorf("%w: organizations are created by the platform admin or by a signed-in user", auth.ErrForbidden))
	}
	name, err := nameBody(c)
	if err != nil {
		return err
	}
	org := cpstate.Org{ID: uuid.New(), Name: name, CreatedAt: s.now().UTC()}
	after := map[string]any{"organization": org}
	var owner *cpstate.Member
	if !cl.p.PlatformAdmin {
		owner = &cpstate.Member{OrgID: org.ID, UserID: cl.p.UserID, Role: cpstate.RoleOwner, DisplayName: cl.p.DisplayName, UpdatedAt: org.CreatedAt}
		after["owner"] = owner
	}
	writes := []cpstate.Write{cpstate.SetKey(cpstate.OrgKey(org.ID.String()), org, 0)}
	if owner != nil {
		writes = append(writes, cpstate.SetKey(cpstate.MemberKey(org.ID.String(), owner.UserID), owner, 0))
	}
	if err := s.commitRecorded(cl, producers.Mutation{Action: schemas.AuditActionCreated, ResourceType: schemas.ResourceTypeOrganization,
		ResourceID: org.ID.String(), ResourceDisplay: org.Name, OrgID: org.ID, After: after}, writes...); err != nil {
		return httpError(err)
	}
	return httpapi.Reply(c, fiber.StatusCreated, org)
}

// orgWithRole is an organization with the caller's role in it.
type orgWithRole struct {
	cpstate.Org
	Role cpstate.Role `json:"role,omitempty"`
}

// listOrgs answers the organizations the caller may read: every one for the
// platform admin; for anyone else those they are a member of, with their
// role (a service key, member of none, sees none).
func (s *Service) listOrgs(c *fiber.Ctx) error {
	cl, err := s.begin(c)
	if err != nil {
		return err
	}
	orgs, err := cpstate.ListAs[cpstate.Org](s.state, "org.")
	if err != nil {
		return err
	}
	items := make([]any, 0, len(orgs))
	for _, o := range orgs {
		if cl.p.PlatformAdmin {
			items = append(items, orgWithRole{Org: o})
		} else if role, ok := s.access.Role(cl.p, o.ID); ok {
			items = append(items, orgWithRole{Org: o, Role: role})
		}
	}
	return httpapi.Reply(c, fiber.StatusOK, map[string]any{"items": items})
}

func (s *Service) getOrg(c *fiber.Ctx) error {
	_, org, _, err := s.scope(c, false, false)
	if err != nil {
		return err
	}
	return httpapi.Reply(c, fiber.StatusOK, org)
}

func (s *Service) createProject(c *fiber.Ctx) error {
	cl, org, _, err := s.scope(c, true, false)
	if err != nil {
		return err
	}
	name, err := nameBody(c)
	if err != nil {
		return err
	}
	p := cpstate.Project{ID: uuid.New(), OrgID: org.ID, Name: name, CreatedAt: s.now().UTC()}
	if err := s.commitRecorded(cl, producers.Mutation{Action: schemas.AuditActionCreated, ResourceType: schemas.ResourceTypeProject,
		ResourceID: p.ID.String(), ResourceDisplay: p.Name, OrgID: org.ID, ProjectID: &p.ID, After: p},
		cpstate.SetKey(cpstate.ProjectKey(org.ID.String(), p.ID.String()), p, 0)); err != nil {
		return httpError(err)
	}
	return httpapi.Reply(c, fiber.StatusCreated, p)
}

// listItems replies with the values under prefix, shown through view.
func listItems[T any](s *Service, c *fiber.Ctx, prefix string, view func(T) any) error {
	values, err := cpstate.ListAs[T](s.state, prefix)
	if err != nil {
		return err
	}
	items := make([]any, len(values))
	for i, v := range values {
		items[i] = view(v)
	}
	return httpapi.Reply(c, fiber.StatusOK, map[string]any{"items": items})
}

func (s *Service) listProjects(c *fiber.Ctx) error {
	_, org, _, err := s.scope(c, false, false)
	if err != nil {
		return err
	}
	return listItems(s, c, "project."+org.ID.String()+".", asIs[cpstate.Project])
}

func (s *Service) listMembers(c *fiber.Ctx) error {
	_, org, _, err := s.scope(c, false, false)
	if err != nil {
		return err
	}
	return listItems(s, c, "member."+org.ID.String()+".", asIs[cpstate.Member])
}

func (s *Service) putMember(c *fiber.Ctx) error {
	cl, org, _, err := s.scope(c, true, false)
	if err != nil {
		return err
	}
	user, err := textParam(c, "user_id")
	if err != nil {
		return err
	}
	var body struct {
		Role        string `json:"role"`
		DisplayName string `json:"display_name"`
	}
	if err := decodeBody(c, &body); err != nil {
		return err
	}
	role, err := cpstate.ParseRole("role", body.Role, true)
	if err != nil {
		return httpError(err)
	}
	if len(body.DisplayName) > 200 {
		return httpError(cpstate.Invalid("display_name", "at most 200 characters"))
	}
	return putRecorded(s, cl, cpstate.MemberKey(org.ID.String(), user),
		producers.Mutation{ResourceType: schemas.ResourceTypeUser, ResourceID: user, OrgID: org.ID}, asIs[cpstate.Member],
		func(before cpstate.Member, exists bool, mut *producers.Mutation) (cpstate.Member, error) {
			if exists && before.Role == cpstate.RoleOwner && role != cpstate.RoleOwner {
				if err := s.keepAnOwner(org.ID, user); err != nil {
					return cpstate.Member{}, err
				}
			}
			m := cpstate.Member{OrgID: org.ID, UserID: user, Role: role, DisplayName: strings.TrimSpace(body.DisplayName), UpdatedAt: s.now().UTC()}
			if m.DisplayName == "" {
				m.DisplayName = before.DisplayName
			}
			mut.ResourceDisplay = displayOr(m.DisplayName, user)
			return m, nil
		})
}

// keepAnOwner refuses a change that would leave org without an owner.
func (s *Service) keepAnOwner(org uuid.UUID, leaving string) error {
	members, err := cpstate.ListAs[cpstate.Member](s.state, "member."+org.String()+".")
	if err != nil {
		return err
	}
	for _, m := range members {
		if m.Role == cpstate.RoleOwner && m.UserID != leaving {
			return nil
		}
	}
	return fmt.Errorf("%w: %s is the last owner of the organization", cpstate.ErrConflict, leaving)
}

func displayOr(display, id string) string {
	if display != "" {
		return display
	}
	return id
}

func (s *Service) deleteMember(c *fiber.Ctx) error {
	cl, org, _, err := s.scope(c, true, false)
	if err != nil {
		return err
	}
	user, err := textParam(c, "user_id")
	if err != nil {
		return err
	}
	return deleteRecorded(s, cl, cpstate.MemberKey(org.ID.String(), user), "member "+user,
		producers.Mutation{ResourceType: schemas.ResourceTypeUser, ResourceID: user, OrgID: org.ID}, asIs[cpstate.Member],
		func(m cpstate.Member, mut *producers.Mutation) error {
			mut.ResourceDisplay = displayOr(m.DisplayName, user)
			if m.Role == cpstate.RoleOwner {
				return s.keepAnOwner(org.ID, user)
			}
			return nil
		})
}

func (s *Service) listProjectMembers(c *fiber.Ctx) error {
	_, org, p, err := s.scope(c, false, true)
	if err != nil {
		return err
	}
	return listItems(s, c, "pmember."+org.ID.String()+"."+p.ID.String()+".", asIs[cpstate.ProjectMember])
}

func (s *Service) putProjectMember(c *fiber.Ctx) error {
	cl, org, p, err := s.scope(c, true, true)
	if err != nil {
		return err
	}
	user, err := textParam(c, "user_id")
	if err != nil {
		return err
	}
	var body struct {
		Role string `json:"role"`
	}
	if err := decodeBody(c, &body); err != nil {
		return err
	}
	role, err := cpstate.ParseRole("role", body.Role, false)
	if err != nil {
		return httpError(err)
	}
	if _, err := s.state.Get(cpstate.MemberKey(org.ID.String(), user), &cpstate.Member{}); err != nil {
		return httpError(cpstate.Invalid("user_id", "%s is not a member of the organization", user))
	}
	return putRecorded(s, cl, cpstate.ProjectMemberKey(org.ID.String(), p.ID.String(), user),
		producers.Mutation{ResourceType: schemas.ResourceTypeProjectMember, ResourceID: user, ResourceDisplay: user + " in " + p.Name,
			OrgID: org.ID, ProjectID: &p.ID}, asIs[cpstate.ProjectMember],
		func(cpstate.ProjectMember, bool, *producers.Mutation) (cpstate.ProjectMember, error) {
			return cpstate.ProjectMember{OrgID: org.ID, ProjectID: p.ID, UserID: user, Role: role, UpdatedAt: s.now().UTC()}, nil
		})
}

func (s *Service) deleteProjectMember(c *fiber.Ctx) error {
	cl, org, p, err := s.scope(c, true, true)
	if err != nil {
		return err
	}
	user, err := textParam(c, "user_id")
	if err != nil {
		return err
	}
	return deleteRecorded(s, cl, cpstate.ProjectMemberKey(org.ID.String(), p.ID.String(), user), "project member "+user,
		producers.Mutation{ResourceType: schemas.ResourceTypeProjectMember, ResourceID: user, ResourceDisplay: user + " in " + p.Name,
			OrgID: org.ID, ProjectID: &p.ID}, asIs[cpstate.ProjectMember], nil)
}
