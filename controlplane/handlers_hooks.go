package controlplane

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/google/uuid"

	"github.com/auditrail/auditrail/controlplane/cpstate"
	"github.com/auditrail/auditrail/internal/egress"
	"github.com/auditrail/auditrail/internal/httpapi"
	"github.com/auditrail/auditrail/producers"
	"github.com/auditrail/auditrail/schemas"
)

// Egress refuses destinations the platform must not call: loopback,
// private, link-local (cloud metadata), shared and multicast addresses
// (internal/egress.Guard). Errors wrap egress.ErrRefused for a refused
// address and egress.ErrUnresolved for a name that does not resolve.
type Egress interface {
	CheckURL(ctx context.Context, raw string) error
	CheckHost(ctx context.Context, host string) error
	CheckSRV(ctx context.Context, service, proto, name string) error
}

// HookMonitor is the hook client as the admin API needs it
// (hookproxy.Proxy, wired by cmd).
type HookMonitor interface {
	// CheckHealth calls the hook server's GET /health with the hook's
	// authentication (cfg holds its secrets) and remembers the outcome.
	CheckHealth(ctx context.Context, h cpstate.Hook, cfg cpstate.HookConfig) HookHealth
	// HookStatus is what the client knows of a hook; false when it has
	// neither called nor checked it.
	HookStatus(id uuid.UUID) (HookStatus, bool)
}

// HookHealth is the outcome of a /health call. Status is what the server
// said (healthy, degraded: OK with a warning, unhealthy; also for a 500 or
// 503), empty when it gave no health answer. Failure is generic ("endpoint
// not reachable", "timeout after 5s", "status 503", "degraded"): the
// detail is in the operator log.
type HookHealth struct {
	CheckedAt  time.Time `json:"checked_at"`
	OK         bool      `json:"ok"`
	Status     string    `json:"status,omitempty"`
	HTTPStatus int       `json:"http_status,omitempty"`
	Failure    string    `json:"failure,omitempty"`
}

// HookBreaker is the circuit breaker of one point.
type HookBreakerStatus struct {
	State               string `json:"state"`
	ConsecutiveFailures uint32 `json:"consecutive_failures"`
}

// HookStatus is a hook as this process's hook client sees it.
type HookStatus struct {
	Health        *HookHealth                  `json:"health"`
	Breakers      map[string]HookBreakerStatus `json:"breakers"`
	Calls         uint64                       `json:"calls"`
	Failures      uint64                       `json:"failures"`
	BreakerOpen   uint64                       `json:"breaker_open"`
	LastFailure   string                       `json:"last_failure,omitempty"`
	LastFailureAt *time.Time                   `json:"last_failure_at,omitempty"`
}

// UseEgress sets the guard of hook endpoints and database hosts (the
// default refuses every address that is not public). Call before Register.
func (s *Service) UseEgress(e Egress) { s.egress = e }

// UseHookMonitor sets the hook client that checks /health and reports
// hook state in GET …/hooks/{hook_id}. Call before Register.
func (s *Service) UseHookMonitor(m HookMonitor) { s.monitor = m }

func (s *Service) egressGuard() Egress {
	if s.egress == nil {
		return egress.Strict()
	}
	return s.egress
}

// checkEndpoint refuses (400, field "endpoint") an endpoint whose address,
// or any address its name resolves to now, is refused; a name that does
// not resolve is a warning. Every connection is checked again when made.
func (s *Service) checkEndpoint(ctx context.Context, endpoint string) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	err := s.egressGuard().CheckURL(ctx, endpoint)
	switch {
	case err == nil:
		return nil, nil
	case errors.Is(err, egress.ErrRefused):
		return nil, cpstate.Invalid("endpoint", "%v: hook servers must be on public addresses", err)
	case errors.Is(err, egress.ErrUnresolved):
		return []string{"endpoint: the host name does not resolve now"}, nil
	}
	return nil, cpstate.Invalid("endpoint", "%v", err)
}

// health checks a hook server after a create or an enable: a failure is a
// warning of the answer, not a refusal.
func (s *Service) health(ctx context.Context, h cpstate.Hook, cfg cpstate.HookConfig) []string {
	if s.monitor == nil {
		return nil
	}
	hl := s.monitor.CheckHealth(ctx, h, cfg)
	if hl.OK && hl.Failure != "" {
		return []string{"health: the hook server's GET /health says " + hl.Failure}
	}
	if hl.OK {
		return nil
	}
	return []string{"health: the hook server's GET /health failed: " + hl.Failure}
}

// hookReply is a hook as the API answers it: redacted, with the warnings
// of a create or enable, or (GET) its status in this process's hook client.
type hookReply struct {
	cpstate.Hook
	Status   *HookStatus `json:"status,omitempty"`
	Warnings []string    `json:"warnings,omitempty"`
}

// hookScope resolves the org, the project (nil for org hooks) and the KV scope token.
func (s *Service) hookScope(c *fiber.Ctx, mutate bool) (*call, cpstate.Org, *cpstate.Project, string, error) {
	withProject := c.Params("project_id") != ""
	cl, org, p, err := s.scope(c, mutate, withProject)
	if err != nil {
		return nil, cpstate.Org{}, nil, "", err
	}
	if p == nil {
		return cl, org, nil, "org", nil
	}
	return cl, org, p, p.ID.String(), nil
}

// sealHook moves the secret parts of cfg.Auth into SealedAuth.
func (s *Service) sealHook(key string, h *cpstate.Hook, cfg cpstate.HookConfig) error {
	secrets, _ := json.Marshal(cpstate.HookAuth{Token: cfg.Auth.Token, ClientKeyPEM: cfg.Auth.ClientKeyPEM})
	sealed, err := s.sealer.Seal(key, secrets)
	if err != nil {
		return err
	}
	// What is stored in the clear says which secrets exist, so that views
	// show a bearer token set beside mTLS.
	cfg.Auth.Token, cfg.Auth.ClientKeyPEM = redactedIfSet(cfg.Auth.Token), ""
	h.Config, h.SealedAuth = cfg, sealed
	return nil
}

func redactedIfSet(s string) string {
	if s == "" {
		return ""
	}
	return cpstate.Redacted
}

// unsealedConfig returns the configuration of a stored hook with its secrets.
func (s *Service) unsealedConfig(key string, h cpstate.Hook) (cpstate.HookConfig, error) {
	cfg := h.Config
	pt, err := s.sealer.Open(key, h.SealedAuth)
	if err != nil {
		return cfg, err
	}
	var a cpstate.HookAuth
	if err := json.Unmarshal(pt, &a); err != nil {
		return cfg, err
	}
	cfg.Auth.Token, cfg.Auth.ClientKeyPEM = a.Token, a.ClientKeyPEM
	return cfg, nil
}

// hookView is a hook as the API and audit events show it.
func hookView(h cpstate.Hook) any {
	h.Config = h.Config.Redacted()
	h.SealedAuth = nil
	return h
}

func (s *Service) listHooks(c *fiber.Ctx) error {
	_, org, _, scope, err := s.hookScope(c, false)
	if err != nil {
		return err
	}
	return listItems(s, c, "hook."+org.ID.String()+"."+scope+".", hookView)
}

func (s *Service) createHook(c *fiber.Ctx) error {
	cl, org, p, scope, err := s.hookScope(c, true)
	if err != nil {
		return err
	}
	var cfg cpstate.HookConfig
	if err := decodeBody(c, &cfg); err != nil {
		return err
	}
	if err := cfg.Normalize(); err != nil {
		return httpError(err)
	}
	warnings, err := s.checkEndpoint(c.UserContext(), cfg.Endpoint)
	if err != nil {
		return httpError(err)
	}
	now := s.now().UTC()
	h := cpstate.Hook{ID: uuid.New(), OrgID: org.ID, CreatedAt: now, UpdatedAt: now}
	if p != nil {
		h.ProjectID = &p.ID
	}
	key := cpstate.HookKey(org.ID.String(), scope, h.ID.String())
	if err := s.sealHook(key, &h, cfg); err != nil {
		return err
	}
	if err := s.commitRecorded(cl, producers.Mutation{Action: schemas.AuditActionCreated, ResourceType: schemas.ResourceTypeHook,
		ResourceID: h.ID.String(), ResourceDisplay: cfg.Name, OrgID: org.ID, ProjectID: h.ProjectID, After: hookView(h)},
		cpstate.SetKey(key, h, 0)); err != nil {
		return httpError(err)
	}
	if *cfg.Enabled {
		warnings = append(warnings, s.health(c.UserContext(), h, cfg)...)
	}
	return httpapi.Reply(c, fiber.StatusCreated, hookReply{Hook: hookView(h).(cpstate.Hook), Warnings: warnings})
}

// hookTarget resolves the hook of a hook route: its KV key and the
// mutation that names it.
func (s *Service) hookTarget(c *fiber.Ctx, mutate bool) (*call, string, producers.Mutation, error) {
	cl, org, p, scope, err := s.hookScope(c, mutate)
	if err != nil {
		return nil, "", producers.Mutation{}, err
	}
	id, err := uuidParam(c, "hook_id")
	if err != nil {
		return nil, "", producers.Mutation{}, err
	}
	key := cpstate.HookKey(org.ID.String(), scope, id.String())
	mut := producers.Mutation{ResourceType: schemas.ResourceTypeHook, ResourceID: id.String(), OrgID: org.ID}
	if p != nil {
		mut.ProjectID = &p.ID
	}
	var h cpstate.Hook
	if _, err := s.state.Get(key, &h); err != nil {
		return nil, "", producers.Mutation{}, httpError(fmt.Errorf("%w: hook %s", cpstate.ErrNotFound, id))
	}
	mut.ResourceDisplay = h.Config.Name
	return cl, key, mut, nil
}

func (s *Service) getHook(c *fiber.Ctx) error {
	_, key, _, err := s.hookTarget(c, false)
	if err != nil {
		return err
	}
	var h cpstate.Hook
	if _, err := s.state.Get(key, &h); err != nil {
		return httpError(fmt.Errorf("%w: hook", cpstate.ErrNotFound))
	}
	out := hookReply{Hook: hookView(h).(cpstate.Hook)}
	if s.monitor != nil {
		st, _ := s.monitor.HookStatus(h.ID)
		if st.Breakers == nil {
			st.Breakers = map[string]HookBreakerStatus{}
		}
		out.Status = &st
	}
	return httpapi.Reply(c, fiber.StatusOK, out)
}

// patchHook applies a JSON merge patch (RFC 7386) to the configuration.
func (s *Service) patchHook(c *fiber.Ctx) error {
	cl, key, mut, err := s.hookTarget(c, true)
	if err != nil {
		return err
	}
	var patch map[string]json.RawMessage
	if err := decodeBody(c, &patch); err != nil {
		return err
	}
	mut.Action = schemas.AuditActionUpdated
	// A patch that enables the hook, or moves or re-keys an enabled one,
	// checks the server's /health once stored.
	var (
		checkHealth bool
		after       cpstate.Hook
		unsealed    cpstate.HookConfig
		warnings    []string
	)
	err = updateRecorded(s, cl, key, "hook "+mut.ResourceID, mut, hookView, func(h cpstate.Hook) (cpstate.Hook, bool, error) {
		cur, err := s.unsealedConfig(key, h)
		if err != nil {
			return h, false, fmt.Errorf("open hook secrets: %w", err)
		}
		curJSON, _ := json.Marshal(cur)
		merged, err := mergePatch(curJSON, c.Body())
		if err != nil {
			return h, false, cpstate.Invalid("body", "%v", err)
		}
		var next cpstate.HookConfig
		dec := json.NewDecoder(bytes.NewReader(merged))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&next); err != nil {
			return h, false, cpstate.Invalid("body", "%v", err)
		}
		if err := next.Normalize(); err != nil {
			return h, false, err
		}
		if warnings, err = s.checkEndpoint(c.UserContext(), next.Endpoint); err != nil {
			return h, false, err
		}
		wasOn := h.Config.Enabled == nil || *h.Config.Enabled
		checkHealth = *next.Enabled && (!wasOn || next.Endpoint != cur.Endpoint || next.Auth != cur.Auth)
		after, unsealed = h, next
		after.UpdatedAt = s.now().UTC()
		return after, true, s.sealHook(key, &after, next)
	})
	if err != nil || (!checkHealth && len(warnings) == 0) {
		return err
	}
	if checkHealth {
		warnings = append(warnings, s.health(c.UserContext(), after, unsealed)...)
	}
	if len(warnings) == 0 {
		return nil
	}
	// The answer written by updateRecorded, with the warnings.
	return httpapi.Reply(c, fiber.StatusOK, hookReply{Hook: hookView(after).(cpstate.Hook), Warnings: warnings})
}

func (s *Service) disableHook(c *fiber.Ctx) error {
	cl, key, mut, err := s.hookTarget(c, true)
	if err != nil {
		return err
	}
	mut.Action = schemas.AuditActionDisabled
	return updateRecorded(s, cl, key, "hook "+mut.ResourceID, mut, hookView, func(h cpstate.Hook) (cpstate.Hook, bool, error) {
		if h.Config.Enabled != nil && !*h.Config.Enabled {
			return h, false, nil
		}
		f := false
		h.Config.Enabled = &f
		h.UpdatedAt = s.now().UTC()
		return h, true, nil
	})
}

func (s *Service) deleteHook(c *fiber.Ctx) error {
	cl, key, mut, err := s.hookTarget(c, true)
	if err != nil {
		return err
	}
	return deleteRecorded(s, cl, key, "hook "+mut.ResourceID, mut, hookView, nil)
}
