package query

// Long-lived answers (a live stream, an export, a listing that waits): the
// caller is authorized when the answer opens and again while it lasts, so
// that none outlives its credential (a key deleted or disabled, a member
// removed, a JWT past its exp); and the answers open at once are bounded
// globally, per organization and per credential, so that no member can take
// every slot.

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/google/uuid"

	"github.com/auditrail/auditrail/internal/auth"
	"github.com/auditrail/auditrail/internal/httpapi"
)

// ChangeNotifier is an Access whose decisions change with a state it
// mirrors (cpstate.Access): Changed returns a channel closed at the
// next change. A long-lived answer authorizes again when it fires, besides
// its periodic re-check.
type ChangeNotifier interface {
	Changed() <-chan struct{}
}

// grant is the authorization of one long-lived answer: the credential it
// was opened with and what it reads, to be checked again.
type grant struct {
	access    Access
	cred      string
	principal auth.Principal
	org       uuid.UUID
	project   *uuid.UUID
}

// grantOf is the grant of a request that authorizeAs has just authorized
// as p. The credential is copied: the request's memory is reused once the
// handler returns, and the answer outlives it.
func (s *Server) grantOf(c *fiber.Ctx, p auth.Principal, org uuid.UUID, project *uuid.UUID) *grant {
	token, _ := httpapi.BearerToken(c.Get(fiber.HeaderAuthorization))
	return &grant{access: s.access, cred: strings.Clone(token), principal: p, org: org, project: project}
}

// check authorizes the caller again: nil while the credential still
// authenticates as the same principal and may read the scope; otherwise a
// *fiber.Error: 401 (the credential no longer authenticates: deleted,
// disabled, expired), 403 (no longer a member), 503 (the state cannot tell
// now: a stale mirror fails closed, as at the door).
func (g *grant) check(ctx context.Context) *fiber.Error {
	p, err := g.access.Authenticate(ctx, g.cred)
	switch {
	case errors.Is(err, auth.ErrUnauthenticated):
		return fiber.NewError(fiber.StatusUnauthorized, "the credential is no longer valid (deleted, disabled or expired)")
	case err != nil:
		return fiber.NewError(fiber.StatusServiceUnavailable, "the credential cannot be checked now, try again")
	case p.ID != g.principal.ID || p.Type != g.principal.Type:
		return fiber.NewError(fiber.StatusUnauthorized, "the credential now names another principal")
	}
	err = g.access.AuthorizeRead(ctx, p, g.org, g.project)
	switch {
	case errors.Is(err, auth.ErrForbidden):
		return fiber.NewError(fiber.StatusForbidden, err.Error())
	case err != nil:
		return fiber.NewError(fiber.StatusServiceUnavailable, "the credential cannot be checked now, try again")
	}
	return nil
}

// changed is the access's change channel; nil (never ready) for an access
// that does not notify.
func (g *grant) changed() <-chan struct{} {
	if n, ok := g.access.(ChangeNotifier); ok {
		return n.Changed()
	}
	return nil
}

// revalidator re-checks a grant at most every interval, and at once after
// a change of the access's state: what an export asks between pages.
type revalidator struct {
	g        *grant
	interval time.Duration
	last     time.Time
	ch       <-chan struct{}
}

func newRevalidator(g *grant, interval time.Duration) *revalidator {
	return &revalidator{g: g, interval: interval, last: time.Now(), ch: g.changed()}
}

// check re-checks the grant when due (interval passed or the state
// changed); nil while it holds.
func (r *revalidator) check(ctx context.Context) *fiber.Error {
	due := time.Since(r.last) >= r.interval
	if !due && r.ch != nil {
		select {
		case <-r.ch:
			due = true
		default:
		}
	}
	if !due {
		return nil
	}
	r.ch, r.last = r.g.changed(), time.Now() // the channel before the check: no change is missed
	return r.g.check(ctx)
}

// Limits bounds long-lived answers open at once on a server: in all, per
// organization and per credential.
type Limits struct {
	Max, PerOrg, PerCredential int
}

// Validate checks the limits of what (named in the error).
func (l Limits) Validate(what string) error {
	if l.Max < 1 || l.PerOrg < 1 || l.PerCredential < 1 {
		return fmt.Errorf("query: %s: every limit must be at least 1 (max %d, per org %d, per credential %d)", what, l.Max, l.PerOrg, l.PerCredential)
	}
	return nil
}

// slots counts the answers open at once against Limits.
type slots struct {
	what   string // "live streams", "exports": named in refusals
	limits Limits
	mu     sync.Mutex
	open   int
	orgs   map[uuid.UUID]int
	creds  map[string]int
}

func newSlots(what string, l Limits) *slots {
	return &slots{what: what, limits: l, orgs: map[uuid.UUID]int{}, creds: map[string]int{}}
}

// retryAfterSeconds is the Retry-After of a refusal.
const retryAfterSeconds = 5

// acquire takes a slot for an answer of org by p, or refuses it: 429 with
// Retry-After over the credential's or the organization's share, 503 with
// Retry-After when the server is full. The platform admin is not counted
// against an organization's share (no member can keep the operator out);
// it has its own per-credential share. release gives the slot back (once).
func (s *slots) acquire(c *fiber.Ctx, org uuid.UUID, p auth.Principal) (release func(), err error) {
	cred := p.Type + ":" + p.ID
	s.mu.Lock()
	defer s.mu.Unlock()
	var refuse *fiber.Error
	switch {
	case s.creds[cred] >= s.limits.PerCredential:
		refuse = fiber.NewError(fiber.StatusTooManyRequests, fmt.Sprintf("too many %s open with this credential (%d); close one or retry later", s.what, s.limits.PerCredential))
	case !p.PlatformAdmin && s.orgs[org] >= s.limits.PerOrg:
		refuse = fiber.NewError(fiber.StatusTooManyRequests, fmt.Sprintf("too many %s open for this organization (%d); retry later", s.what, s.limits.PerOrg))
	case s.open >= s.limits.Max:
		refuse = fiber.NewError(fiber.StatusServiceUnavailable, fmt.Sprintf("too many %s on this server (%d); retry later", s.what, s.limits.Max))
	}
	if refuse != nil {
		c.Set(fiber.HeaderRetryAfter, strconv.Itoa(retryAfterSeconds))
		return nil, refuse
	}
	s.open++
	s.creds[cred]++
	if !p.PlatformAdmin {
		s.orgs[org]++
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			s.open--
			if s.creds[cred]--; s.creds[cred] == 0 {
				delete(s.creds, cred)
			}
			if !p.PlatformAdmin {
				if s.orgs[org]--; s.orgs[org] == 0 {
					delete(s.orgs, org)
				}
			}
		})
	}, nil
}

// count is how many answers are open.
func (s *slots) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.open
}
