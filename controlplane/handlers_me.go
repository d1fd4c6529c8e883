package controlplane

import (
	"cmp"
	"slices"

	"github.com/gofiber/fiber/v2"
	"github.com/google/uuid"

	"github.com/auditrail/auditrail/controlplane/cpstate"
	"github.com/auditrail/auditrail/internal/auth"
	"github.com/auditrail/auditrail/internal/httpapi"
)

// MePrincipal is the caller, as GET /api/v1/me shows it.
type MePrincipal struct {
	ID          string  `json:"id"`
	Type        string  `json:"type"`
	DisplayName string  `json:"display_name"`
	UserID      *string `json:"user_id"`
}

// MeOrg is an organization the caller may read, with their role and the
// projects they may read in it.
type MeOrg struct {
	ID       uuid.UUID    `json:"id"`
	Name     string       `json:"name"`
	Role     cpstate.Role `json:"role"`
	Projects []MeProject  `json:"projects"`
}

// MeProject is a project the caller may read, with their role.
type MeProject struct {
	ID   uuid.UUID    `json:"id"`
	Name string       `json:"name"`
	Role cpstate.Role `json:"role"`
}

// Me is the data of GET /api/v1/me.
type Me struct {
	Principal     MePrincipal `json:"principal"`
	Organizations []MeOrg     `json:"organizations"`
}

// me answers GET /api/v1/me: who the caller is and the organizations and
// projects they may read, with their roles. The platform admin has no
// membership and sees every organization and project with role "" (its
// principal type, PLATFORM_ADMIN or SYSTEM, says why); a project service
// key sees its organization and project with role "" (it is no member); a
// user sees the organizations they are a member of (through an API key:
// the key's organization only) with their role, and in each the projects
// they are a member of with their project role; owners and admins also
// see every other project of the organization, with their organization
// role (they manage every project).
func (s *Service) me(c *fiber.Ctx) error {
	cl, err := s.begin(c)
	if err != nil {
		return err
	}
	me, err := s.whoIs(cl.p)
	if err != nil {
		return httpError(err)
	}
	return httpapi.Reply(c, fiber.StatusOK, me)
}

// whoIs builds the answer of GET /api/v1/me for p from the state.
func (s *Service) whoIs(p auth.Principal) (Me, error) {
	me := Me{
		Principal:     MePrincipal{ID: p.ID, Type: p.Type, DisplayName: p.DisplayName},
		Organizations: []MeOrg{},
	}
	if p.UserID != "" {
		u := p.UserID
		me.Principal.UserID = &u
	}
	orgs, err := cpstate.ListAs[cpstate.Org](s.state, "org.")
	if err != nil {
		return Me{}, err
	}
	byName := func(a, b string, x, y uuid.UUID) int {
		return cmp.Or(cmp.Compare(a, b), slices.Compare(x[:], y[:]))
	}
	slices.SortFunc(orgs, func(a, b cpstate.Org) int { return byName(a.Name, b.Name, a.ID, b.ID) })
	for _, o := range orgs {
		var role cpstate.Role
		switch {
		case p.PlatformAdmin:
		case p.IsServiceKey():
			if p.OrgScope == nil || *p.OrgScope != o.ID {
				continue
			}
		default:
			r, ok := s.access.Role(p, o.ID)
			if !ok {
				continue
			}
			role = r
		}
		projects, err := cpstate.ListAs[cpstate.Project](s.state, "project."+o.ID.String()+".")
		if err != nil {
			return Me{}, err
		}
		slices.SortFunc(projects, func(a, b cpstate.Project) int { return byName(a.Name, b.Name, a.ID, b.ID) })
		mo := MeOrg{ID: o.ID, Name: o.Name, Role: role, Projects: []MeProject{}}
		for _, pr := range projects {
			var prole cpstate.Role
			switch {
			case p.PlatformAdmin:
			case p.IsServiceKey():
				if p.ProjectScope == nil || *p.ProjectScope != pr.ID {
					continue
				}
			default:
				var pm cpstate.ProjectMember
				if _, err := s.state.Get(cpstate.ProjectMemberKey(o.ID.String(), pr.ID.String(), p.UserID), &pm); err == nil {
					prole = pm.Role
				} else if role.CanMutate() {
					prole = role
				} else {
					continue
				}
			}
			mo.Projects = append(mo.Projects, MeProject{ID: pr.ID, Name: pr.Name, Role: prole})
		}
		me.Organizations = append(me.Organizations, mo)
	}
	return me, nil
}
