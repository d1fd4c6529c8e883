package controlplane

import (
	"fmt"

	"github.com/gofiber/fiber/v2"

	"github.com/auditrail/auditrail/controlplane/cpstate"
	"github.com/auditrail/auditrail/internal/httpapi"
	"github.com/auditrail/auditrail/producers"
	"github.com/auditrail/auditrail/schemas"
)

// scope authenticates a request and resolves its organization (authorized
// to read, or to mutate) and, when withProject, its project.
func (s *Service) scope(c *fiber.Ctx, mutate, withProject bool) (*call, cpstate.Org, *cpstate.Project, error) {
	cl, err := s.begin(c)
	if err != nil {
		return nil, cpstate.Org{}, nil, err
	}
	org, err := s.orgFor(cl, mutate)
	if err != nil {
		return nil, cpstate.Org{}, nil, httpError(err)
	}
	if !withProject {
		return cl, org, nil, nil
	}
	if !mutate {
		// Project-scoped reads (members, secret names, hooks, service keys):
		// the project rule of the audit routes, and the organization's
		// owners and admins, who manage every project (and may make
		// themselves members of any). 403 before 404, as for the org.
		id, err := uuidParam(c, "project_id")
		if err != nil {
			return nil, cpstate.Org{}, nil, err
		}
		if s.access.AuthorizeMutate(cl.p, org.ID) != nil {
			if err := s.access.AuthorizeRead(c.UserContext(), cl.p, org.ID, &id); err != nil {
				return nil, cpstate.Org{}, nil, httpError(err)
			}
		}
	}
	p, err := s.projectFor(cl, org)
	if err != nil {
		return nil, cpstate.Org{}, nil, httpError(err)
	}
	return cl, org, &p, nil
}

// putRecorded creates or replaces the resource at key: next computes it from
// what is there (exists false for a creation); the event is CREATED or
// UPDATED, with before and after shown through view; the reply is 201 or 200
// with the view of the new value. The change and its event are committed
// together (commitRecorded): a conflict (409) or an unavailable store (503)
// records nothing.
// next may complete mut (a display name that depends on the value).
func putRecorded[T any](s *Service, cl *call, key string, mut producers.Mutation, view func(T) any, next func(before T, exists bool, mut *producers.Mutation) (T, error)) error {
	defer s.lock(key)()
	var before T
	rev, err := s.state.Get(key, &before)
	if err != nil && err != cpstate.ErrNotFound {
		return err
	}
	after, err := next(before, rev != 0, &mut)
	if err != nil {
		return httpError(err)
	}
	mut.Action, mut.After = schemas.AuditActionCreated, view(after)
	status := fiber.StatusCreated
	if rev != 0 {
		mut.Action, mut.Before, status = schemas.AuditActionUpdated, view(before), fiber.StatusOK
	}
	if err := s.commitRecorded(cl, mut, cpstate.SetKey(key, after, rev)); err != nil {
		return httpError(err)
	}
	return httpapi.Reply(cl.c, status, view(after))
}

// deleteRecorded removes the resource at key (what names it in a 404),
// after check allows it (check may also complete mut), recording DELETED
// with the view of what it held.
func deleteRecorded[T any](s *Service, cl *call, key, what string, mut producers.Mutation, view func(T) any, check func(before T, mut *producers.Mutation) error) error {
	defer s.lock(key)()
	var before T
	rev, err := s.state.Get(key, &before)
	if err != nil {
		return httpError(fmt.Errorf("%w: %s", cpstate.ErrNotFound, what))
	}
	if check != nil {
		if err := check(before, &mut); err != nil {
			return httpError(err)
		}
	}
	mut.Action, mut.Before = schemas.AuditActionDeleted, view(before)
	if err := s.commitRecorded(cl, mut, cpstate.DeleteKey(key, rev)); err != nil {
		return httpError(err)
	}
	return httpapi.Reply(cl.c, fiber.StatusOK, nil)
}

// updateRecorded changes an existing resource (disable, patch) with action.
// A change that leaves it as it was is answered without an event.
func updateRecorded[T any](s *Service, cl *call, key, what string, mut producers.Mutation, view func(T) any, change func(before T) (T, bool, error)) error {
	defer s.lock(key)()
	var before T
	rev, err := s.state.Get(key, &before)
	if err != nil {
		return httpError(fmt.Errorf("%w: %s", cpstate.ErrNotFound, what))
	}
	after, changed, err := change(before)
	if err != nil {
		return httpError(err)
	}
	if !changed {
		return httpapi.Reply(cl.c, fiber.StatusOK, view(before))
	}
	mut.Before, mut.After = view(before), view(after)
	if err := s.commitRecorded(cl, mut, cpstate.SetKey(key, after, rev)); err != nil {
		return httpError(err)
	}
	return httpapi.Reply(cl.c, fiber.StatusOK, view(after))
}

func asIs[T any](v T) any { return v }
