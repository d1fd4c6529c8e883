package controlplane

import (
	"fmt"
	"strings"

	"github.com/gofiber/fiber/v2"
	"github.com/google/uuid"

	"github.com/auditrail/auditrail/internal/auth"
	"github.com/auditrail/auditrail/producers"
	"github.com/auditrail/auditrail/schemas"
)

func validName(field, v string) (string, error) {
	v = strings.TrimSpace(v)
	if v == "" || len(v) > 200 {
		return "", invalid(field, "required, 1 to 200 characters")
	}
	return v, nil
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
	org := Org{ID: uuid.New(), Name: name, CreatedAt: s.now().UTC()}
	after := map[string]any{"organization": org}
	var owner *Member
	if !cl.p.PlatformAdmin {
		owner = &Member{OrgID: org.ID, UserID: cl.p.UserID, Role: RoleOwner, DisplayName: cl.p.DisplayName, UpdatedAt: org.CreatedAt}
		after["owner"] = owner
	}
	if err := s.record(cl, producers.Mutation{Action: schemas.AuditActionCreated, ResourceType: schemas.ResourceTypeOrganization,
		ResourceID: org.ID.String(), ResourceDisplay: org.Name, OrgID: org.ID, After: after}); err != nil {
		return httpError(err)
	}
	if _, err := s.state.put(c.UserContext(), orgKey(org.ID.String()), org, 0); err != nil {
		return httpError(err)
	}
	if owner != nil {
		if _, err := s.state.put(c.UserContext(), memberKey(org.ID.String(), owner.UserID), owner, 0); err != nil {
			return httpError(err)
		}
	}
	return reply(c, fiber.StatusCreated, org)
}

func (s *Service) getOrg(c *fiber.Ctx) error {
	cl, err := s.begin(c)
	if err != nil {
		return err
	}
	org, err := s.orgFor(cl, false)
	if err != nil {
		return httpError(err)
	}
	return reply(c, fiber.StatusOK, org)
}

func (s *Service) createProject(c *fiber.Ctx) error {
	cl, err := s.begin(c)
	if err != nil {
		return err
	}
	org, err := s.orgFor(cl, true)
	if err != nil {
		return httpError(err)
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
	p := Project{ID: uuid.New(), OrgID: org.ID, Name: name, CreatedAt: s.now().UTC()}
	if err := s.record(cl, producers.Mutation{Action: schemas.AuditActionCreated, ResourceType: schemas.ResourceTypeProject,
		ResourceID: p.ID.String(), ResourceDisplay: p.Name, OrgID: org.ID, ProjectID: &p.ID, After: p}); err != nil {
		return httpError(err)
	}
	if _, err := s.state.put(c.UserContext(), projectKey(org.ID.String(), p.ID.String()), p, 0); err != nil {
		return httpError(err)
	}
	return reply(c, fiber.StatusCreated, p)
}

func (s *Service) listProjects(c *fiber.Ctx) error {
	cl, err := s.begin(c)
	if err != nil {
		return err
	}
	org, err := s.orgFor(cl, false)
	if err != nil {
		return httpError(err)
	}
	items, err := listAs[Project](s.state, "project."+org.ID.String()+".")
	if err != nil {
		return err
	}
	return reply(c, fiber.StatusOK, map[string]any{"items": items})
}

func (s *Service) listMembers(c *fiber.Ctx) error {
	cl, err := s.begin(c)
	if err != nil {
		return err
	}
	org, err := s.orgFor(cl, false)
	if err != nil {
		return httpError(err)
	}
	items, err := listAs[Member](s.state, "member."+org.ID.String()+".")
	if err != nil {
		return err
	}
	return reply(c, fiber.StatusOK, map[string]any{"items": items})
}

func (s *Service) putMember(c *fiber.Ctx) error {
	cl, err := s.begin(c)
	if err != nil {
		return err
	}
	org, err := s.orgFor(cl, true)
	if err != nil {
		return httpError(err)
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
	role, err := parseRole("role", body.Role, true)
	if err != nil {
		return httpError(err)
	}
	if len(body.DisplayName) > 200 {
		return httpError(invalid("display_name", "at most 200 characters"))
	}
	key := memberKey(org.ID.String(), user)
	defer s.lock(key)()
	var before Member
	rev, err := s.state.get(key, &before)
	if err != nil && err != ErrNotFound {
		return err
	}
	if rev != 0 && before.Role == RoleOwner && role != RoleOwner {
		if err := s.keepAnOwner(org.ID, user); err != nil {
			return httpError(err)
		}
	}
	m := Member{OrgID: org.ID, UserID: user, Role: role, DisplayName: strings.TrimSpace(body.DisplayName), UpdatedAt: s.now().UTC()}
	if m.DisplayName == "" {
		m.DisplayName = before.DisplayName
	}
	mut := producers.Mutation{Action: schemas.AuditActionCreated, ResourceType: schemas.ResourceTypeUser, ResourceID: user,
		ResourceDisplay: displayOr(m.DisplayName, user), OrgID: org.ID, After: m}
	status := fiber.StatusCreated
	if rev != 0 {
		mut.Action, mut.Before, status = schemas.AuditActionUpdated, before, fiber.StatusOK
	}
	if err := s.record(cl, mut); err != nil {
		return httpError(err)
	}
	if _, err := s.state.put(c.UserContext(), key, m, rev); err != nil {
		return httpError(err)
	}
	return reply(c, status, m)
}

// keepAnOwner refuses a change that would leave org without an owner.
func (s *Service) keepAnOwner(org uuid.UUID, leaving string) error {
	members, err := listAs[Member](s.state, "member."+org.String()+".")
	if err != nil {
		return err
	}
	for _, m := range members {
		if m.Role == RoleOwner && m.UserID != leaving {
			return nil
		}
	}
	return fmt.Errorf("%w: %s is the last owner of the organization", ErrConflict, leaving)
}

func displayOr(display, id string) string {
	if display != "" {
		return display
	}
	return id
}

func (s *Service) deleteMember(c *fiber.Ctx) error {
	cl, err := s.begin(c)
	if err != nil {
		return err
	}
	org, err := s.orgFor(cl, true)
	if err != nil {
		return httpError(err)
	}
	user, err := textParam(c, "user_id")
	if err != nil {
		return err
	}
	key := memberKey(org.ID.String(), user)
	defer s.lock(key)()
	var before Member
	rev, err := s.state.get(key, &before)
	if err != nil {
		return httpError(fmt.Errorf("%w: member %s", ErrNotFound, user))
	}
	if before.Role == RoleOwner {
		if err := s.keepAnOwner(org.ID, user); err != nil {
			return httpError(err)
		}
	}
	if err := s.record(cl, producers.Mutation{Action: schemas.AuditActionDeleted, ResourceType: schemas.ResourceTypeUser,
		ResourceID: user, ResourceDisplay: displayOr(before.DisplayName, user), OrgID: org.ID, Before: before}); err != nil {
		return httpError(err)
	}
	if err := s.state.remove(c.UserContext(), key, rev); err != nil {
		return httpError(err)
	}
	return reply(c, fiber.StatusOK, nil)
}

func (s *Service) listProjectMembers(c *fiber.Ctx) error {
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
	items, err := listAs[ProjectMember](s.state, "pmember."+org.ID.String()+"."+p.ID.String()+".")
	if err != nil {
		return err
	}
	return reply(c, fiber.StatusOK, map[string]any{"items": items})
}

func (s *Service) putProjectMember(c *fiber.Ctx) error {
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
	var body struct {
		Role string `json:"role"`
	}
	if err := decodeBody(c, &body); err != nil {
		return err
	}
	role, err := parseRole("role", body.Role, false)
	if err != nil {
		return httpError(err)
	}
	if _, err := s.state.get(memberKey(org.ID.String(), user), &Member{}); err != nil {
		return httpError(invalid("user_id", "%s is not a member of the organization", user))
	}
	key := pmemberKey(org.ID.String(), p.ID.String(), user)
	defer s.lock(key)()
	var before ProjectMember
	rev, err := s.state.get(key, &before)
	if err != nil && err != ErrNotFound {
		return err
	}
	m := ProjectMember{OrgID: org.ID, ProjectID: p.ID, UserID: user, Role: role, UpdatedAt: s.now().UTC()}
	mut := producers.Mutation{Action: schemas.AuditActionCreated, ResourceType: schemas.ResourceTypeProjectMember, ResourceID: user,
		ResourceDisplay: user + " in " + p.Name, OrgID: org.ID, ProjectID: &p.ID, After: m}
	status := fiber.StatusCreated
	if rev != 0 {
		mut.Action, mut.Before, status = schemas.AuditActionUpdated, before, fiber.StatusOK
	}
	if err := s.record(cl, mut); err != nil {
		return httpError(err)
	}
	if _, err := s.state.put(c.UserContext(), key, m, rev); err != nil {
		return httpError(err)
	}
	return reply(c, status, m)
}

func (s *Service) deleteProjectMember(c *fiber.Ctx) error {
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
	key := pmemberKey(org.ID.String(), p.ID.String(), user)
	defer s.lock(key)()
	var before ProjectMember
	rev, err := s.state.get(key, &before)
	if err != nil {
		return httpError(fmt.Errorf("%w: project member %s", ErrNotFound, user))
	}
	if err := s.record(cl, producers.Mutation{Action: schemas.AuditActionDeleted, ResourceType: schemas.ResourceTypeProjectMember,
		ResourceID: user, ResourceDisplay: user + " in " + p.Name, OrgID: org.ID, ProjectID: &p.ID, Before: before}); err != nil {
		return httpError(err)
	}
	if err := s.state.remove(c.UserContext(), key, rev); err != nil {
		return httpError(err)
	}
	return reply(c, fiber.StatusOK, nil)
}
