package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/auditrail/auditrail/controlplane"
	"github.com/auditrail/auditrail/internal/cli"
	"github.com/auditrail/auditrail/internal/egress"
	"github.com/auditrail/auditrail/internal/httpx"
	"github.com/auditrail/auditrail/internal/oauthflow"
	"github.com/auditrail/auditrail/internal/provhttp"
	"github.com/auditrail/auditrail/internal/redact"
	"github.com/auditrail/auditrail/internal/version"
	"github.com/auditrail/auditrail/producers"
	"github.com/auditrail/auditrail/toolrunner"
	"github.com/auditrail/auditrail/toolrunner/mcpserver"
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

// buildVersion is the release of the binary (version.String).
func buildVersion() string { return version.String() }
