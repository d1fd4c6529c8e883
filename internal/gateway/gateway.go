// Package gateway is the one origin in front of a deployment that runs
// each role apart: it routes every request by its path to the role that
// serves it (the audit API and the dashboard to query, the tool routes to
// toolrunner, the rest of /api/v1 to controlplane) and spreads the
// requests of a role over its instances, skipping an instance that
// refuses connections. It serves the admin CLI, the dashboard (whose page
// calls routes of several roles from one origin) and scripts through one
// base URL.
package gateway

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"regexp"
	"strings"
	"sync/atomic"
	"time"
)

// Role names a group of upstreams.
type Role string

// The roles a gateway routes to.
const (
	Query        Role = "query"
	ToolRunner   Role = "toolrunner"
	ControlPlane Role = "controlplane"
)

// ErrInvalidConfig is returned for a configuration that cannot work.
var ErrInvalidConfig = errors.New("invalid gateway configuration")

// Config lists the instances of each role.
type Config struct {
	// Upstreams are the base URLs (http://host:port) of each role's
	// instances; every role needs at least one.
	Upstreams map[Role][]string
	// DownFor is how long an instance that refused a connection is
	// skipped (default 5 s).
	DownFor time.Duration
	// DialTimeout bounds a connection to an instance (default 3 s).
	DialTimeout time.Duration
}

// Validate checks the configuration.
func (c Config) Validate() error {
	for _, r := range []Role{Query, ToolRunner, ControlPlane} {
		if len(c.Upstreams[r]) == 0 {
			return fmt.Errorf("%w: no %s instance", ErrInvalidConfig, r)
		}
		for _, u := range c.Upstreams[r] {
			p, err := url.Parse(u)
			if err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" || (p.Path != "" && p.Path != "/") {
				return fmt.Errorf("%w: %s instance %q is not a base URL like http://host:port", ErrInvalidConfig, r, u)
			}
		}
	}
	if c.DownFor < 0 || c.DialTimeout < 0 {
		return fmt.Errorf("%w: negative duration", ErrInvalidConfig)
	}
	return nil
}

// The routes of the query and toolrunner roles (and the query role's
// /api/v1/audit_keys, the public keys of the checkpoints); everything else
// goes to the control plane.
var (
	queryRoute = regexp.MustCompile(`^/api/v1/orgs/[^/]+(/projects/[^/]+)?/(audit_logs|tool_executions)(/|$)`)
	toolsRoute = regexp.MustCompile(`^/api/v1/orgs/[^/]+/projects/[^/]+/tools(/|$)`)
)

// RoleOf is the role that serves path.
func RoleOf(path string) Role {
	switch {
	case queryRoute.MatchString(path), path == "/dashboard" || strings.HasPrefix(path, "/dashboard/"), path == "/api/v1/audit_keys":
		return Query
	case toolsRoute.MatchString(path), strings.HasPrefix(path, "/mcp/"):
		return ToolRunner
	}
	return ControlPlane
}

// upstream is one instance.
type upstream struct {
	url       *url.URL
	downUntil atomic.Int64 // unix nanoseconds
}

// pool is a role's instances, taken in turn.
type pool struct {
	ups  []*upstream
	next atomic.Uint64
}

// Gateway is an http.Handler.
type Gateway struct {
	cfg   Config
	pools map[Role]*pool
	proxy *httputil.ReverseProxy
	log   *slog.Logger
}

type ctxKey struct{}

// New returns a Gateway.
func New(cfg Config, log *slog.Logger) (*Gateway, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.DownFor == 0 {
		cfg.DownFor = 5 * time.Second
	}
	if cfg.DialTimeout == 0 {
		cfg.DialTimeout = 3 * time.Second
	}
	if log == nil {
		log = slog.Default()
	}
	g := &Gateway{cfg: cfg, pools: map[Role]*pool{}, log: log}
	for r, us := range cfg.Upstreams {
		p := &pool{}
		for _, u := range us {
			pu, _ := url.Parse(strings.TrimSuffix(u, "/"))
			p.ups = append(p.ups, &upstream{url: pu})
		}
		g.pools[r] = p
	}
	base := &http.Transport{
		DialContext:           (&net.Dialer{Timeout: cfg.DialTimeout, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConnsPerHost:   64,
		IdleConnTimeout:       90 * time.Second,
		ResponseHeaderTimeout: 0, // exports and live streams answer slowly
	}
	g.proxy = &httputil.ReverseProxy{
		// The role is chosen in the transport, which can try another
		// instance; here the request keeps its path and gets the
		// X-Forwarded-* of the client (the roles trust this gateway's
		// address with --trusted-proxies).
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme, pr.Out.URL.Host = "http", "upstream.invalid"
			pr.SetXForwarded()
			pr.Out.Host = pr.In.Host
		},
		Transport:     &picker{g: g, base: base},
		FlushInterval: -1, // live streams (SSE) and exports pass through at once
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if !errors.Is(err, context.Canceled) {
				g.log.Warn("gateway: no instance answered", "role", RoleOf(r.URL.Path), "path", r.URL.Path, "err", err)
			}
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(`{"code":503,"msg":"no instance of the ` + string(RoleOf(r.URL.Path)) + ` role answers; retry shortly","data":null}`))
		},
	}
	return g, nil
}

// ServeHTTP routes r.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/gateway/healthz" {
		g.health(w)
		return
	}
	g.proxy.ServeHTTP(w, r)
}

// health answers 200 when every role has an instance not known down.
func (g *Gateway) health(w http.ResponseWriter) {
	now := time.Now().UnixNano()
	ok := true
	var b strings.Builder
	b.WriteString(`{"status":`)
	parts := []string{}
	for _, r := range []Role{Query, ToolRunner, ControlPlane} {
		up := 0
		for _, u := range g.pools[r].ups {
			if u.downUntil.Load() <= now {
				up++
			}
		}
		ok = ok && up > 0
		parts = append(parts, fmt.Sprintf(`"%s":%d`, r, up))
	}
	if ok {
		b.WriteString(`"ok"`)
	} else {
		b.WriteString(`"degraded"`)
	}
	b.WriteString(`,"instances_up":{` + strings.Join(parts, ",") + `}}`)
	w.Header().Set("Content-Type", "application/json")
	if !ok {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	_, _ = w.Write([]byte(b.String()))
}

// picker sends a request to an instance of its role, in turn, and to the
// next one when an instance refuses the connection (the request never
// reached it, so trying another is safe for any method).
type picker struct {
	g    *Gateway
	base *http.Transport
}

func (p *picker) RoundTrip(r *http.Request) (*http.Response, error) {
	pl := p.g.pools[RoleOf(r.URL.Path)]
	n := len(pl.ups)
	start := int(pl.next.Add(1) % uint64(n))
	now := time.Now().UnixNano()
	// Instances not known down first, then the others (all may be down).
	order := make([]*upstream, 0, n)
	for i := 0; i < n; i++ {
		if u := pl.ups[(start+i)%n]; u.downUntil.Load() <= now {
			order = append(order, u)
		}
	}
	for i := 0; i < n; i++ {
		if u := pl.ups[(start+i)%n]; u.downUntil.Load() > now {
			order = append(order, u)
		}
	}
	var last error
	for _, u := range order {
		out := r.Clone(r.Context())
		out.URL.Scheme, out.URL.Host = u.url.Scheme, u.url.Host
		if r.Body != nil && r.Body != http.NoBody {
			// The transport closes the body of a failed attempt; a refused
			// connection read none of it, so the next attempt sends it whole.
			out.Body = io.NopCloser(r.Body)
		}
		resp, err := p.base.RoundTrip(out)
		if err == nil {
			u.downUntil.Store(0)
			return resp, nil
		}
		last = err
		if !refused(err) || r.Context().Err() != nil {
			return nil, err
		}
		u.downUntil.Store(time.Now().Add(p.g.cfg.DownFor).UnixNano())
		p.g.log.Warn("gateway: instance refused the connection; trying another", "upstream", u.url.Host, "err", err)
	}
	return nil, last
}

// refused tells an error of the connection to an instance, before any of
// the request was sent.
func refused(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}
