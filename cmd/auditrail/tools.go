package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/google/uuid"

	"github.com/auditrail/auditrail/controlplane"
	"github.com/auditrail/auditrail/hookproxy"
	"github.com/auditrail/auditrail/internal/egress"
	"github.com/auditrail/auditrail/internal/oauthflow"
	"github.com/auditrail/auditrail/producers"
	"github.com/auditrail/auditrail/toolrunner"
	"github.com/auditrail/auditrail/toolrunner/toolkits/documentdb"
)

// addEgressFlag is --allow-private-egress, of every role that calls hook
// servers or databases or checks their addresses.
func addEgressFlag(fs *flags) *bool {
	return fs.Bool("allow-private-egress", "AUDITRAIL_ALLOW_PRIVATE_EGRESS", false,
		"let hook endpoints and database hosts be on loopback, private, link-local (169.254.169.254) and shared addresses (default: public addresses only; auditrail dev also allows loopback)")
}

// newEgress is the guard of hook and database connections: public
// addresses only, plus loopback in dev (for local hook servers and
// emulators), or everything with --allow-private-egress.
func newEgress(allowPrivate, dev bool, log *slog.Logger) (*egress.Guard, error) {
	cfg := egress.DefaultConfig()
	switch {
	case allowPrivate:
		cfg.Mode = egress.ModeAllowPrivate
	case dev:
		cfg.Mode = egress.ModeDev
	}
	return egress.New(cfg, log)
}

// proxyHook is a control-plane hook as the hook client calls it.
func proxyHook(id uuid.UUID, project *uuid.UUID, revision string, c controlplane.HookConfig) hookproxy.Hook {
	hk := hookproxy.Hook{
		ID: id.String(), Name: c.Name, Revision: revision, Project: project != nil, Phase: c.Phase, Priority: c.Priority,
		Endpoint: c.Endpoint, Points: map[hookproxy.Point]hookproxy.PointConfig{},
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

// hookSource lists a project's hooks from the control plane for the runner.
type hookSource struct{ svc *controlplane.Service }

func (h hookSource) Hooks(_ context.Context, org, project uuid.UUID) ([]hookproxy.Hook, error) {
	resolved, err := h.svc.EnabledHooks(org, project)
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

func (m hookMonitor) CheckHealth(ctx context.Context, h controlplane.Hook, cfg controlplane.HookConfig) controlplane.HookHealth {
	// The revision EnabledHooks gives, so that the check warms the client
	// that calls will use.
	r := m.p.CheckHealth(ctx, proxyHook(h.ID, h.ProjectID, h.UpdatedAt.Format(time.RFC3339Nano), cfg))
	return controlplane.HookHealth{CheckedAt: r.At, OK: r.OK, HTTPStatus: r.HTTPStatus, Failure: r.Failure}
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
		out.Health = &controlplane.HookHealth{CheckedAt: st.Health.At, OK: st.Health.OK, HTTPStatus: st.Health.HTTPStatus, Failure: st.Health.Failure}
	}
	for p, b := range st.Breakers {
		out.Breakers[string(p)] = controlplane.HookBreakerStatus{State: b.State, ConsecutiveFailures: b.ConsecutiveFailures}
	}
	return out, ok
}

// newHookProxy is the hook client, behind the egress guard; the admin API
// checks endpoints with the same guard and reports hooks through it.
func newHookProxy(admin *controlplane.Service, guard *egress.Guard, log *slog.Logger) *hookproxy.Proxy {
	cfg := hookproxy.DefaultConfig()
	cfg.Egress = guard
	proxy := hookproxy.New(cfg, log)
	admin.UseEgress(guard)
	admin.UseHookMonitor(hookMonitor{proxy})
	return proxy
}

// newToolRunner wires the runner: the registered toolkits, the hook proxy,
// the control plane's hooks, secrets and connections, the event publisher.
func newToolRunner(reg *toolrunner.Registry, admin *controlplane.Service, pub toolrunner.EventPublisher, guard *egress.Guard, log *slog.Logger) (*toolrunner.Runner, *hookproxy.Proxy) {
	proxy := newHookProxy(admin, guard, log)
	return toolrunner.New(toolrunner.DefaultConfig(), reg, proxy, hookSource{admin}, admin, connectionSource{admin}, pub, log), proxy
}

// connectionSource is TEMPORARY (issue 10): the runner's ConnectionSource
// over the control plane's stored raw tokens until the control plane
// implements it (then admin is passed as is). Without the OAuth flow no
// organization has an auth provider, hence ErrNoProvider.
type connectionSource struct{ admin *controlplane.Service }

func (c connectionSource) Connection(_ context.Context, org, project, user, provider string) (oauthflow.Connection, error) {
	tok, scopes, err := c.admin.Token(org, project, user, provider)
	if errors.Is(err, controlplane.ErrNotConnected) {
		return oauthflow.Connection{}, fmt.Errorf("%s: %w", provider, oauthflow.ErrNotConnected)
	}
	if err != nil {
		return oauthflow.Connection{}, err
	}
	return oauthflow.Connection{AccessToken: tok, Scopes: scopes}, nil
}

func (c connectionSource) ConnectionStatus(org, project, user, provider string) (bool, []string) {
	_, scopes, err := c.admin.Token(org, project, user, provider)
	return err == nil, scopes
}

func (connectionSource) AuthorizationURL(_ context.Context, _, _, _, provider string, _ []string) (string, time.Time, error) {
	return "", time.Time{}, fmt.Errorf("%s: %w", provider, oauthflow.ErrNoProvider)
}

// executionOutbox opens the durable outbox of execution events in dir
// (see producers.Outbox) and drains it in the background; stop ends the
// drainer and closes the outbox, leaving what is not yet published on disk
// for the next start.
func executionOutbox(dir string, pub *producers.Publisher, log *slog.Logger) (ob *producers.Outbox, stop func(), err error) {
	ob, err = producers.OpenOutbox(producers.DefaultOutboxConfig(dir), pub, log)
	if err != nil {
		return nil, nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = ob.Run(ctx)
	}()
	return ob, func() {
		cancel()
		<-done
		if err := ob.Close(); err != nil {
			log.Warn("outbox close", "err", err)
		}
	}, nil
}

// toolkits returns the registry of the toolkits built into the binary and
// a function that releases their connections. Database connections pass
// the egress guard.
func toolkits(guard *egress.Guard, log *slog.Logger) (*toolrunner.Registry, func()) {
	reg := toolrunner.NewRegistry()
	cfg := documentdb.DefaultConfig()
	cfg.Egress, cfg.Log = guard, log
	docdb := documentdb.New(cfg)
	if err := reg.Register(docdb.Tools()...); err != nil {
		panic(err) // the built-in definitions are checked by tests
	}
	return reg, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		docdb.Close(ctx)
	}
}
