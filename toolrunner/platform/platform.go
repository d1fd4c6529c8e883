// Package platform assembles the tool runner on the platform's control
// plane: the built-in toolkits, the hook client behind the egress guard,
// the project's hooks from the control-plane state and their health in the
// admin API.
package platform

import (
	"context"
	"log/slog"
	"time"

	"github.com/google/uuid"

	"github.com/auditrail/auditrail/controlplane"
	"github.com/auditrail/auditrail/controlplane/cpstate"
	"github.com/auditrail/auditrail/hookproxy"
	"github.com/auditrail/auditrail/internal/egress"
	"github.com/auditrail/auditrail/internal/oauthflow"
	"github.com/auditrail/auditrail/toolrunner"
	"github.com/auditrail/auditrail/toolrunner/toolkits/docs"
	"github.com/auditrail/auditrail/toolrunner/toolkits/documentdb"
	"github.com/auditrail/auditrail/toolrunner/toolkits/mail"
)

// proxyHook is a control-plane hook as the hook client calls it.
func proxyHook(id uuid.UUID, project *uuid.UUID, revision string, c cpstate.HookConfig) hookproxy.Hook {
	hk := hookproxy.Hook{
		ID: id.String(), Name: c.Name, Revision: revision, Project: project != nil, Phase: c.Phase, Priority: c.Priority,
		Endpoint: c.Endpoint, Points: map[hookproxy.Point]hookproxy.PointConfig{}, Contract: hookproxy.Contract(c.Contract),
		BearerToken: c.Auth.Token, ClientCertPEM: c.Auth.ClientCertPEM, ClientKeyPEM: c.Auth.ClientKeyPEM, CACertPEM: c.Auth.CACertPEM,
		// Hooks stored before the bounds existed are held to them too.
		MaxAttempts: min(c.Retries.Attempts(), hookproxy.MaxAttempts), Backoff: min(time.Duration(c.Retries.Backoff())*time.Millisecond, hookproxy.MaxBackoff),
		ConsecutiveFailures: c.Breaker.ConsecutiveFailures, OpenFor: time.Duration(c.Breaker.OpenMS) * time.Millisecond,
	}
	for name, p := range c.Points {
		hk.Points[hookproxy.Point(name)] = hookproxy.PointConfig{Path: p.Path, Timeout: time.Duration(p.TimeoutMS) * time.Millisecond,
			FailureMode: hookproxy.FailureMode(p.FailureMode)}
	}
	return hk
}

// HookSource lists a project's hooks from the control plane for the runner.
type HookSource struct{ Svc *controlplane.Service }

func (h HookSource) Hooks(_ context.Context, org, project uuid.UUID) ([]hookproxy.Hook, error) {
	resolved, err := h.Svc.EnabledHooks(org, project)
	if err != nil {
		return nil, err
	}
	out := make([]hookproxy.Hook, 0, len(resolved))
	for _, r := range resolved {
		out = append(out, proxyHook(r.ID, r.ProjectID, r.Revision, r.Config))
	}
	return out, nil
}

// hookMonitor is the hook proxy as the admin API sees it: /health checks
// on create and enable, and each hook's state in GET.
type hookMonitor struct{ p *hookproxy.Proxy }

func (m hookMonitor) CheckHealth(ctx context.Context, h cpstate.Hook, cfg cpstate.HookConfig) controlplane.HookHealth {
	// The revision EnabledHooks gives, so that the check warms the client
	// that calls will use.
	r := m.p.CheckHealth(ctx, proxyHook(h.ID, h.ProjectID, h.UpdatedAt.Format(time.RFC3339Nano), cfg))
	return controlplane.HookHealth{CheckedAt: r.At, OK: r.OK, Status: r.Status, HTTPStatus: r.HTTPStatus, Failure: r.Failure}
}

func (m hookMonitor) HookStatus(id uuid.UUID) (controlplane.HookStatus, bool) {
	st, ok := m.p.HookStatus(id.String())
	out := controlplane.HookStatus{Calls: st.Calls, Failures: st.Failures, BreakerOpen: st.BreakerOpen, LastFailure: st.LastFailure,
		Breakers: map[string]controlplane.HookBreakerStatus{}}
	if !st.LastFailureAt.IsZero() {
		at := st.LastFailureAt
		out.LastFailureAt = &at
	}
	if st.Health != nil {
		out.Health = &controlplane.HookHealth{CheckedAt: st.Health.At, OK: st.Health.OK, Status: st.Health.Status, HTTPStatus: st.Health.HTTPStatus,
			Failure: st.Health.Failure}
	}
	for p, b := range st.Breakers {
		out.Breakers[string(p)] = controlplane.HookBreakerStatus{State: b.State, ConsecutiveFailures: b.ConsecutiveFailures}
	}
	return out, ok
}

// NewHookProxy is the hook client, behind the egress guard; the admin API
// checks endpoints with the same guard and reports hooks through it.
func NewHookProxy(admin *controlplane.Service, guard *egress.Guard, log *slog.Logger) *hookproxy.Proxy {
	cfg := hookproxy.DefaultConfig()
	cfg.Egress = guard
	cfg.Existing = admin.HookIDs // deleted hooks cost no memory
	proxy := hookproxy.New(cfg, log)
	admin.UseEgress(guard)
	admin.UseHookMonitor(hookMonitor{proxy})
	return proxy
}

// The control plane makes application links for service-key executions
// (whose end users have no platform session to sign in with).
var _ toolrunner.AppLinks = (*controlplane.Service)(nil)

// NewRunner wires the runner: the registered toolkits, the hook proxy,
// the control plane's hooks, secrets and connections, the event publisher.
func NewRunner(reg *toolrunner.Registry, admin *controlplane.Service, pub toolrunner.EventPublisher, guard *egress.Guard, log *slog.Logger) (*toolrunner.Runner, *hookproxy.Proxy) {
	proxy := NewHookProxy(admin, guard, log)
	return toolrunner.New(toolrunner.DefaultConfig(), reg, proxy, HookSource{admin}, admin, admin, pub, log), proxy
}

// ProviderScopes answers, by auth provider id, every scope the registered
// tools need from it.
func ProviderScopes(reg *toolrunner.Registry) map[string][]string {
	out := map[string][]string{}
	for _, d := range reg.Definitions() {
		for _, a := range d.Requirements.Authorization {
			id := a.ProviderID
			if id == "" {
				id = a.ProviderType
			}
			out[id] = oauthflow.MergeScopes(out[id], a.Scopes)
		}
	}
	return out
}

// Toolkits returns the registry of the toolkits built into the binary and
// a function that releases their connections. Database connections and
// Google and Microsoft Graph API calls (to the provider's api_base_url)
// pass the egress guard; picker issues DocsToolkit's file picker URLs (the
// control plane); pageKeys sign both toolkits' pagination tokens (the
// first signs, all verify).
func Toolkits(guard *egress.Guard, picker docs.PickerLinks, pageKeys [][]byte, log *slog.Logger) (*toolrunner.Registry, func()) {
	reg := toolrunner.NewRegistry()
	cfg := documentdb.DefaultConfig()
	cfg.Egress, cfg.Log = guard, log
	docdb := documentdb.New(cfg)
	dcfg := docs.DefaultConfig()
	dcfg.Egress, dcfg.Picker, dcfg.Log, dcfg.PageTokenKeys = guard, picker, log, pageKeys
	gdocs, err := docs.New(dcfg)
	if err != nil {
		panic(err) // the default config is valid, the keys checked by keyList
	}
	mcfg := mail.DefaultConfig()
	mcfg.Egress, mcfg.Log, mcfg.PageTokenKeys = guard, log, pageKeys
	outlook, err := mail.New(mcfg)
	if err != nil {
		panic(err) // the default config is valid, the keys checked by keyList
	}
	if err := reg.Register(append(append(docdb.Tools(), gdocs.Tools()...), outlook.Tools()...)...); err != nil {
		panic(err) // the built-in definitions are checked by tests
	}
	return reg, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		docdb.Close(ctx)
		gdocs.Close()
		outlook.Close()
	}
}
