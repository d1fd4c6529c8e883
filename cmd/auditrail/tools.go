package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"runtime/debug"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/google/uuid"

	"github.com/auditrail/auditrail/controlplane"
	"github.com/auditrail/auditrail/hookproxy"
	"github.com/auditrail/auditrail/internal/cli"
	"github.com/auditrail/auditrail/internal/egress"
	"github.com/auditrail/auditrail/internal/httpx"
	"github.com/auditrail/auditrail/internal/oauthflow"
	"github.com/auditrail/auditrail/internal/provhttp"
	"github.com/auditrail/auditrail/internal/redact"
	"github.com/auditrail/auditrail/producers"
	"github.com/auditrail/auditrail/toolrunner"
	"github.com/auditrail/auditrail/toolrunner/mcpserver"
	"github.com/auditrail/auditrail/toolrunner/toolkits/docs"
	"github.com/auditrail/auditrail/toolrunner/toolkits/documentdb"
	"github.com/auditrail/auditrail/toolrunner/toolkits/mail"
)

// mcpFlags are the MCP endpoint's flags (dev and the toolrunner role).
type mcpFlags struct {
	origins                                        *string
	maxSessions, perProject, perPrincipal, perUser *int
	unusedTimeout                                  *time.Duration
}

// addMCPFlags adds --mcp-allowed-origins (the web origins besides the
// public URL's that may call the MCP endpoint), the session caps and the
// idle timeout of unused sessions.
func addMCPFlags(fs *cli.Flags) mcpFlags {
	def := mcpserver.DefaultConfig()
	return mcpFlags{
		origins: fs.String("mcp-allowed-origins", "", "",
			"origins (scheme://host[:port], comma-separated) of web pages allowed to call the MCP endpoint besides the origin of --public-url; a request with another Origin header gets 403 (requests without Origin, such as desktop clients', pass)"),
		maxSessions: fs.Int("mcp-max-sessions", "", def.MaxSessions,
			"live MCP sessions on this server; at the cap a new session ends the least recently used one"),
		perProject: fs.Int("mcp-max-sessions-per-project", "", def.MaxSessionsPerProject,
			"live MCP sessions of one project; at the cap a new session ends the project's least recently used one"),
		perPrincipal: fs.Int("mcp-max-sessions-per-principal", "", def.MaxSessionsPerPrincipal,
			"live MCP sessions of one credential (a service key, whatever users it names); at the cap a new session ends its least recently used one"),
		perUser: fs.Int("mcp-max-sessions-per-user", "", def.MaxSessionsPerUser,
			"live MCP sessions of one credential, project and user; at the cap a new session ends their least recently used one"),
		unusedTimeout: fs.Duration("mcp-unused-session-timeout", "", def.UnusedSessionTimeout,
			"an MCP session that has called no tool ends after this long without a request (one that has: after 30m)"),
	}
}

// config is the MCP endpoint's configuration, validated; publicURL is
// --public-url (the origin of its pages may call the endpoint).
func (f mcpFlags) config(publicURL string) (mcpserver.Config, error) {
	cfg := mcpserver.DefaultConfig()
	cfg.Version = buildVersion()
	cfg.PublicURL = publicURL
	cfg.AllowedOrigins = originList(*f.origins)
	cfg.MaxSessions, cfg.MaxSessionsPerProject, cfg.MaxSessionsPerPrincipal, cfg.MaxSessionsPerUser = *f.maxSessions, *f.perProject, *f.perPrincipal, *f.perUser
	cfg.UnusedSessionTimeout = *f.unusedTimeout
	switch {
	case cfg.MaxSessionsPerUser < 1:
		return cfg, cli.UsageErrorf("--mcp-max-sessions-per-user %d: want at least 1", cfg.MaxSessionsPerUser)
	case cfg.MaxSessionsPerPrincipal < cfg.MaxSessionsPerUser || cfg.MaxSessionsPerProject < cfg.MaxSessionsPerUser:
		return cfg, cli.UsageErrorf("--mcp-max-sessions-per-user %d: want at most --mcp-max-sessions-per-principal (%d) and --mcp-max-sessions-per-project (%d)",
			cfg.MaxSessionsPerUser, cfg.MaxSessionsPerPrincipal, cfg.MaxSessionsPerProject)
	case cfg.MaxSessions < cfg.MaxSessionsPerPrincipal || cfg.MaxSessions < cfg.MaxSessionsPerProject:
		return cfg, cli.UsageErrorf("--mcp-max-sessions %d: want at least --mcp-max-sessions-per-principal (%d) and --mcp-max-sessions-per-project (%d)",
			cfg.MaxSessions, cfg.MaxSessionsPerPrincipal, cfg.MaxSessionsPerProject)
	case cfg.UnusedSessionTimeout <= 0 || cfg.UnusedSessionTimeout > cfg.SessionTimeout:
		return cfg, cli.UsageErrorf("--mcp-unused-session-timeout %s: want more than 0 and at most %s", cfg.UnusedSessionTimeout, cfg.SessionTimeout)
	}
	if err := cfg.Validate(); err != nil {
		return cfg, cli.Usage(err)
	}
	return cfg, nil
}

// originList splits --mcp-allowed-origins.
func originList(s string) []string {
	var out []string
	for _, o := range strings.Split(s, ",") {
		if o = strings.TrimSpace(o); o != "" {
			out = append(out, o)
		}
	}
	return out
}

// addEgressFlag is --allow-private-egress, of every role that calls hook
// servers or databases or checks their addresses.
func addEgressFlag(fs *cli.Flags) *bool {
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

// addPublicURLFlag is --public-url of the roles that start or finish the
// OAuth flow of users' connections (its redirect URI is derived from it).
func addPublicURLFlag(fs *cli.Flags, def string) *string {
	return fs.String("public-url", "", def, "external base URL of the platform's APIs; the OAuth redirect URI registered at each provider is this plus "+oauthflow.CallbackPath)
}

// useOAuth gives the admin service the OAuth flow of users' connections:
// redirect URI publicURL + the callback route, sealed state, token calls
// through the egress guard (provider URLs are the tenant's choice).
func useOAuth(admin *controlplane.Service, publicURL string, guard *egress.Guard) error {
	redirect, err := callbackURL(publicURL)
	if err != nil {
		return err
	}
	cfg := oauthflow.DefaultConfig()
	cfg.RedirectURL = redirect
	// Whatever client it is given, the flow follows no redirect of a token
	// endpoint and those of the others on their own host only, and caps
	// every answer (provhttp).
	cfg.HTTPClient = provhttp.Client(&http.Transport{
		DialContext: guard.Dialer(net.Dialer{Timeout: 10 * time.Second}).DialContext, Proxy: nil,
		TLSHandshakeTimeout: 10 * time.Second, ResponseHeaderTimeout: 20 * time.Second, MaxIdleConnsPerHost: 4}, 30*time.Second, 1<<20)
	return admin.ConfigureOAuth(cfg)
}

// callbackURL is the OAuth redirect URI of a --public-url: an absolute
// http(s) URL without credentials, path, query or fragment, plus the
// callback route.
func callbackURL(publicURL string) (string, error) {
	u, err := url.Parse(publicURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil ||
		(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		return "", cli.UsageErrorf("--public-url %s: want an absolute http(s) URL without credentials, path or query", redact.URL(publicURL))
	}
	return strings.TrimSuffix(publicURL, "/") + oauthflow.CallbackPath, nil
}

// proxyHook is a control-plane hook as the hook client calls it.
func proxyHook(id uuid.UUID, project *uuid.UUID, revision string, c controlplane.HookConfig) hookproxy.Hook {
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

// newHookProxy is the hook client, behind the egress guard; the admin API
// checks endpoints with the same guard and reports hooks through it.
func newHookProxy(admin *controlplane.Service, guard *egress.Guard, log *slog.Logger) *hookproxy.Proxy {
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

// newToolRunner wires the runner: the registered toolkits, the hook proxy,
// the control plane's hooks, secrets and connections, the event publisher.
func newToolRunner(reg *toolrunner.Registry, admin *controlplane.Service, pub toolrunner.EventPublisher, guard *egress.Guard, log *slog.Logger) (*toolrunner.Runner, *hookproxy.Proxy) {
	proxy := newHookProxy(admin, guard, log)
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

// providerScopes answers, by auth provider id, every scope the registered
// tools need from it.
func providerScopes(reg *toolrunner.Registry) map[string][]string {
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

// toolkits returns the registry of the toolkits built into the binary and
// a function that releases their connections. Database connections and
// Google and Microsoft Graph API calls (to the provider's api_base_url)
// pass the egress guard; picker issues DocsToolkit's file picker URLs (the
// control plane); pageKeys sign both toolkits' pagination tokens (the
// first signs, all verify).
func toolkits(guard *egress.Guard, picker docs.PickerLinks, pageKeys [][]byte, log *slog.Logger) (*toolrunner.Registry, func()) {
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

// registerTools mounts the tool runner's routes and its MCP endpoint
// (CONTRACT.md "Tool runner API", "MCP") behind mw (the tool rate limit);
// the MCP event streams end with ctx; cfg is mcpFlags.config's.
func registerTools(ctx context.Context, app fiber.Router, runner *toolrunner.Runner, access toolrunner.Access, proxies httpx.TrustedProxies, cfg mcpserver.Config, log *slog.Logger, mw ...fiber.Handler) error {
	srv := toolrunner.NewServer(runner, access, proxies)
	srv.Register(app, mw...)
	h, err := mcpserver.NewHandler(ctx, cfg, runner, srv, log)
	if err != nil {
		return fmt.Errorf("mcp: %w", err)
	}
	h.Register(app, mw...)
	return nil
}

// buildVersion is the module version of the binary ("(devel)" in a build
// from a work tree).
func buildVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "(devel)"
}
