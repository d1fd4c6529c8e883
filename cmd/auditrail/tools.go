package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/google/uuid"

	"github.com/auditrail/auditrail/controlplane"
	"github.com/auditrail/auditrail/hookproxy"
	"github.com/auditrail/auditrail/producers"
	"github.com/auditrail/auditrail/toolrunner"
	"github.com/auditrail/auditrail/toolrunner/toolkits/documentdb"
)

// hookSource lists a project's hooks from the control plane for the runner.
type hookSource struct{ svc *controlplane.Service }

func (h hookSource) Hooks(_ context.Context, org, project uuid.UUID) ([]hookproxy.Hook, error) {
	resolved, err := h.svc.EnabledHooks(org, project)
	if err != nil {
		return nil, err
	}
	out := make([]hookproxy.Hook, 0, len(resolved))
	for _, r := range resolved {
		c := r.Config
		hk := hookproxy.Hook{
			ID: r.ID.String(), Name: c.Name, Revision: r.Revision, Project: r.ProjectID != nil, Phase: c.Phase, Priority: c.Priority,
			Endpoint: c.Endpoint, Points: map[hookproxy.Point]hookproxy.PointConfig{},
			BearerToken: c.Auth.Token, ClientCertPEM: c.Auth.ClientCertPEM, ClientKeyPEM: c.Auth.ClientKeyPEM, CACertPEM: c.Auth.CACertPEM,
			MaxAttempts: c.Retries.MaxAttempts, Backoff: time.Duration(c.Retries.BackoffMS) * time.Millisecond,
			ConsecutiveFailures: c.Breaker.ConsecutiveFailures, OpenFor: time.Duration(c.Breaker.OpenMS) * time.Millisecond,
		}
		for name, p := range c.Points {
			hk.Points[hookproxy.Point(name)] = hookproxy.PointConfig{Path: p.Path, Timeout: time.Duration(p.TimeoutMS) * time.Millisecond,
				FailureMode: hookproxy.FailureMode(p.FailureMode)}
		}
		out = append(out, hk)
	}
	return out, nil
}

// newToolRunner wires the runner: the registered toolkits, the hook proxy,
// the control plane's hooks, secrets and connections, the event publisher.
func newToolRunner(reg *toolrunner.Registry, admin *controlplane.Service, pub toolrunner.EventPublisher, log *slog.Logger) (*toolrunner.Runner, *hookproxy.Proxy) {
	proxy := hookproxy.New(hookproxy.DefaultConfig(), log)
	return toolrunner.New(toolrunner.DefaultConfig(), reg, proxy, hookSource{admin}, admin, admin, pub, log), proxy
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
// a function that releases their connections.
func toolkits() (*toolrunner.Registry, func()) {
	reg := toolrunner.NewRegistry()
	docdb := documentdb.New(documentdb.DefaultConfig())
	if err := reg.Register(docdb.Tools()...); err != nil {
		panic(err) // the built-in definitions are checked by tests
	}
	return reg, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		docdb.Close(ctx)
	}
}
