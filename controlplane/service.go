// Package controlplane is the admin API of auditrail: it changes the
// administrative state — organizations, projects, members, API keys, hook
// configurations, secrets and user connections, held in a NATS KV bucket
// by controlplane/cpstate — and records every successful mutation as
// exactly one audit event. It also runs the OAuth 2.0 authorization-code
// flow of the users' connections (auth providers, the callback, refresh
// and revocation).
package controlplane

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"golang.org/x/sync/singleflight"

	"github.com/auditrail/auditrail/controlplane/cpstate"
	"github.com/auditrail/auditrail/internal/auth"
	"github.com/auditrail/auditrail/internal/httpapi"
	"github.com/auditrail/auditrail/internal/httpx"
	"github.com/auditrail/auditrail/internal/oauthflow"
	"github.com/auditrail/auditrail/producers"
	"github.com/auditrail/auditrail/schemas"
)

// Recorder builds the audit event of a mutation and publishes it.
type Recorder interface {
	// Prepare returns the event of m and the message that publishes it.
	Prepare(m producers.Mutation) (*schemas.AuditEvent, *nats.Msg, error)
	// Send returns nil once the audit stream has stored every message; a
	// message sent twice is stored once (Nats-Msg-Id).
	Send(ctx context.Context, msgs ...*nats.Msg) error
}

// HeaderSource lets a caller declare its channel: API (default), DASHBOARD, CLI or SDK.
const HeaderSource = "X-Auditrail-Source"

// Service serves the admin API. Every applied mutation is recorded as
// exactly one audit event, and no event is recorded for a change that was
// not applied: the change and its event are written together and the event
// is published from an outbox (see outbox.go). Start Run beside it.
type Service struct {
	cfg     ServiceConfig
	state   *cpstate.State
	access  *cpstate.Access
	sealer  *cpstate.Sealer
	rec     Recorder
	proxies httpx.TrustedProxies
	log     *slog.Logger
	now     func() time.Time
	locks   [64]sync.Mutex
	// inflight holds the ids of the events that requests are publishing
	// (the sweep leaves them alone).
	inflight sync.Map
	// egress checks hook endpoints and database hosts; monitor checks hook
	// servers' /health and reports their state (UseEgress, UseHookMonitor).
	egress  Egress
	monitor HookMonitor
	// flow runs the OAuth flow of the users' connections (UseOAuth);
	// refreshes lets one refresh per connection run at a time.
	flow *oauthflow.Flow
	// pickerOrigins are the origins trusted to serve the picker's script
	// (TrustPickerScripts).
	pickerMu      sync.Mutex
	pickerOrigins map[string]bool
	refreshes     singleflight.Group
	// streamCreds signs stream credentials (UseStreamCredentials);
	// sweptCreds are the revoked or expired ones whose consumer this
	// process has deleted.
	streamCreds StreamCredentials
	sweptCreds  sync.Map
	maxCreds    int // MaxStreamCredentials unless set (tests)
	// holdCounter counts the entries of the legal holds (UseHoldCounter).
	holdCounter HoldCounter
	// subjectHolds checks the legal holds of an erasure's subject
	// (UseSubjectHolds).
	subjectHolds SubjectHolds
}

// NewService returns the admin API.
func NewService(cfg ServiceConfig, state *cpstate.State, access *cpstate.Access, sealer *cpstate.Sealer, rec Recorder, proxies httpx.TrustedProxies, log *slog.Logger) (*Service, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.Default()
	}
	return &Service{cfg: cfg, state: state, access: access, sealer: sealer, rec: rec, proxies: proxies, log: log, now: time.Now}, nil
}

// Register mounts the admin routes behind the given middleware (the rate
// limit of the admin API).
func (s *Service) Register(r fiber.Router, mw ...fiber.Handler) {
	v := routes{r.Group("/api/v1"), mw}
	v.Get("/me", s.me)
	v.Get("/orgs", s.listOrgs)
	v.Post("/orgs", s.createOrg)
	v.Get("/orgs/:org_id", s.getOrg)
	v.Post("/orgs/:org_id/projects", s.createProject)
	v.Get("/orgs/:org_id/projects", s.listProjects)
	v.Get("/orgs/:org_id/members", s.listMembers)
	v.Put("/orgs/:org_id/members/:user_id", s.putMember)
	v.Delete("/orgs/:org_id/members/:user_id", s.deleteMember)
	v.Get("/orgs/:org_id/projects/:project_id/members", s.listProjectMembers)
	v.Put("/orgs/:org_id/projects/:project_id/members/:user_id", s.putProjectMember)
	v.Delete("/orgs/:org_id/projects/:project_id/members/:user_id", s.deleteProjectMember)
	v.Get("/orgs/:org_id/api_keys", s.listAPIKeys)
	v.Post("/orgs/:org_id/api_keys", s.createAPIKey)
	v.Post("/orgs/:org_id/api_keys/:key_id/disable", s.disableAPIKey)
	v.Delete("/orgs/:org_id/api_keys/:key_id", s.deleteAPIKey)
	v.Get("/orgs/:org_id/projects/:project_id/service_keys", s.listServiceKeys)
	v.Post("/orgs/:org_id/projects/:project_id/service_keys", s.createServiceKey)
	for _, base := range []string{"/orgs/:org_id/hooks", "/orgs/:org_id/projects/:project_id/hooks"} {
		v.Get(base, s.listHooks)
		v.Post(base, s.createHook)
		v.Get(base+"/:hook_id", s.getHook)
		v.Patch(base+"/:hook_id", s.patchHook)
		v.Post(base+"/:hook_id/disable", s.disableHook)
		v.Delete(base+"/:hook_id", s.deleteHook)
	}
	s.registerDestinations(v)
	s.registerWitnesses(v)
	v.Get("/orgs/:org_id/auth_providers", s.listProviders)
	v.Post("/orgs/:org_id/auth_providers", s.createProvider)
	v.Get("/orgs/:org_id/auth_providers/:provider_id", s.getProvider)
	v.Patch("/orgs/:org_id/auth_providers/:provider_id", s.patchProvider)
	v.Delete("/orgs/:org_id/auth_providers/:provider_id", s.deleteProvider)
	v.Get("/orgs/:org_id/projects/:project_id/secrets", s.listSecrets)
	v.Put("/orgs/:org_id/projects/:project_id/secrets/:name", s.putSecret)
	v.Delete("/orgs/:org_id/projects/:project_id/secrets/:name", s.deleteSecret)
	v.Get("/orgs/:org_id/projects/:project_id/users/:user_id/connections", s.listConnections)
	v.Put("/orgs/:org_id/projects/:project_id/users/:user_id/connections/:provider", s.putConnection)
	v.Post("/orgs/:org_id/projects/:project_id/users/:user_id/connections/:provider/authorize", s.authorizeConnection)
	// The OAuth redirect: no bearer (the sealed state says who), behind the
	// same rate limit.
	v.Get("/oauth/callback", s.oauthCallback)
	// The start page of the links handed out (oauth_start.go): the sealed
	// ticket says who; a user's ticket needs that user's browser session.
	v.Get("/oauth/start/:ticket", s.oauthStartPage)
	v.Post("/oauth/start/:ticket", s.oauthStartContinue)
	v.Post("/oauth/start/:ticket/sign_in", s.oauthStartSignIn)
	v.Get("/picker/:state", s.pickerPage) // the file picker: the sealed state says who (picker_page.go)
	v.Post("/picker/:state/claim", s.pickerClaim)
	v.Post("/picker/:state/picked", s.pickerPicked)
	v.Get("/picker/static/:file", s.pickerStaticFile)
	v.Delete("/orgs/:org_id/projects/:project_id/users/:user_id/connections/:provider", s.deleteConnection)
	s.registerStreamCredentials(v)
	s.registerLifecycle(v)
	s.registerErasures(v)
}

// routes mounts each handler behind the same middleware.
type routes struct {
	r  fiber.Router
	mw []fiber.Handler
}

func (rs routes) with(h fiber.Handler) []fiber.Handler {
	return append(append([]fiber.Handler{}, rs.mw...), h)
}

func (rs routes) Get(path string, h fiber.Handler)    { rs.r.Get(path, httpapi.With(rs.mw, h)...) }
func (rs routes) Post(path string, h fiber.Handler)   { rs.r.Post(path, httpapi.With(rs.mw, h)...) }
func (rs routes) Put(path string, h fiber.Handler)    { rs.r.Put(path, httpapi.With(rs.mw, h)...) }
func (rs routes) Patch(path string, h fiber.Handler)  { rs.r.Patch(path, httpapi.With(rs.mw, h)...) }
func (rs routes) Delete(path string, h fiber.Handler) { rs.r.Delete(path, httpapi.With(rs.mw, h)...) }

// call is an authenticated request.
type call struct {
	c      *fiber.Ctx
	p      auth.Principal
	source schemas.AuditSource
	ip     string
}

func (s *Service) begin(c *fiber.Ctx) (*call, error) {
	p, err := httpapi.Authenticate(c, s.access)
	if err != nil {
		return nil, err
	}
	src := schemas.AuditSourceAPI
	if p.Type == auth.TypeSystem {
		src = schemas.AuditSourceSystem
	} else if h := strings.TrimSpace(c.Get(HeaderSource)); h != "" {
		switch strings.ToUpper(h) {
		case "API":
		case "DASHBOARD":
			src = schemas.AuditSourceDashboard
		case "CLI":
			src = schemas.AuditSourceCLI
		case "SDK":
			src = schemas.AuditSourceSDK
		default:
			return nil, fiber.NewError(fiber.StatusBadRequest, HeaderSource+": "+fmt.Sprintf("%q is not one of API, DASHBOARD, CLI, SDK", h))
		}
	}
	peer, _ := netip.AddrFromSlice(c.Context().RemoteIP())
	ip := s.proxies.ClientIP(peer, c.Request().Header.PeekAll(fiber.HeaderXForwardedFor))
	return &call{c: c, p: p, source: src, ip: ip.String()}, nil
}

// httpError maps errors of this package to status codes.
func httpError(err error) error {
	var fe *fiber.Error
	switch {
	case err == nil:
		return nil
	case errors.As(err, &fe), errors.As(err, new(*httpx.StatusError)):
		return err
	case errors.Is(err, cpstate.ErrInvalid):
		return fiber.NewError(fiber.StatusBadRequest, strings.TrimPrefix(err.Error(), cpstate.ErrInvalid.Error()+": "))
	case errors.Is(err, auth.ErrForbidden):
		return fiber.NewError(fiber.StatusForbidden, err.Error())
	case errors.Is(err, cpstate.ErrNotFound):
		return fiber.NewError(fiber.StatusNotFound, err.Error())
	case errors.Is(err, cpstate.ErrConflict):
		return fiber.NewError(fiber.StatusConflict, err.Error())
	case errors.Is(err, ErrAuditLog), errors.Is(err, cpstate.ErrUnavailabe):
		return fiber.NewError(fiber.StatusServiceUnavailable, err.Error())
	}
	return err
}

func uuidParam(c *fiber.Ctx, name string) (uuid.UUID, error) {
	v := c.Params(name)
	u, err := uuid.Parse(v)
	if err != nil || len(v) != 36 {
		return uuid.Nil, fiber.NewError(fiber.StatusBadRequest, fmt.Sprintf("%s: %q is not a UUID", name, v))
	}
	return u, nil
}

// textParam returns a decoded path parameter that must be 1..256 printable characters.
func textParam(c *fiber.Ctx, name string) (string, error) {
	v, err := url.PathUnescape(c.Params(name))
	if err != nil || v == "" || len(v) > 256 || strings.ContainsAny(v, "\x00\r\n") {
		return "", fiber.NewError(fiber.StatusBadRequest, fmt.Sprintf("%s: must be 1 to 256 printable characters", name))
	}
	return v, nil
}

// decodeBody parses a JSON object strictly: unknown fields are errors.
func decodeBody(c *fiber.Ctx, v any) error {
	body := c.Body()
	if len(bytes.TrimSpace(body)) == 0 {
		return fiber.NewError(fiber.StatusBadRequest, "body: a JSON object is required")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fiber.NewError(fiber.StatusBadRequest, "body: "+err.Error())
	}
	if dec.More() {
		return fiber.NewError(fiber.StatusBadRequest, "body: trailing data after the JSON object")
	}
	return nil
}

// lock serializes mutations of one KV key on this instance.
func (s *Service) lock(key string) func() {
	h := fnv.New32a()
	h.Write([]byte(key))
	m := &s.locks[h.Sum32()%uint32(len(s.locks))]
	m.Lock()
	return m.Unlock
}

// orgFor authorizes cl in org (mutate or read) and returns the org: 403
// before 404, so that non-members learn nothing about other organizations.
func (s *Service) orgFor(cl *call, mutate bool) (cpstate.Org, error) {
	id, err := uuidParam(cl.c, "org_id")
	if err != nil {
		return cpstate.Org{}, err
	}
	if mutate {
		err = s.access.AuthorizeMutate(cl.p, id)
	} else {
		err = s.access.AuthorizeRead(cl.c.UserContext(), cl.p, id, nil)
	}
	if err != nil {
		return cpstate.Org{}, err
	}
	var o cpstate.Org
	if _, err := s.state.Get(cpstate.OrgKey(id.String()), &o); err != nil {
		return cpstate.Org{}, fmt.Errorf("%w: organization %s", cpstate.ErrNotFound, id)
	}
	return o, nil
}

func (s *Service) projectFor(cl *call, org cpstate.Org) (cpstate.Project, error) {
	id, err := uuidParam(cl.c, "project_id")
	if err != nil {
		return cpstate.Project{}, err
	}
	var p cpstate.Project
	if _, err := s.state.Get(cpstate.ProjectKey(org.ID.String(), id.String()), &p); err != nil {
		return cpstate.Project{}, fmt.Errorf("%w: project %s", cpstate.ErrNotFound, id)
	}
	return p, nil
}

func newAPIKeySecret() string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return "ak_" + base64.RawURLEncoding.EncodeToString(b)
}
