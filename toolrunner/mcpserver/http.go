package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/google/uuid"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	iauth "github.com/auditrail/auditrail/internal/auth"
	"github.com/auditrail/auditrail/internal/httpapi"
	"github.com/auditrail/auditrail/internal/httpstream"
	"github.com/auditrail/auditrail/toolrunner"
)

// HeaderUserID names the end user a project service key (or the platform
// admin) acts for over MCP, where a request has no body field for it; a
// user's key or JWT may leave it out or name its own user (CONTRACT.md "Who
// acts").
const HeaderUserID = "Auditrail-User-Id"

// Route is the streamable HTTP endpoint of a project (CONTRACT.md "MCP").
const Route = "/mcp/v1/orgs/:org_id/projects/:project_id"

// ErrInvalidConfig is wrapped by Config.Validate's errors.
var ErrInvalidConfig = errors.New("mcpserver: invalid config")

// Config of the HTTP endpoint.
type Config struct {
	// SessionTimeout closes a session that received no request for this
	// long once it has called a tool (its client starts a new one).
	SessionTimeout time.Duration
	// UnusedSessionTimeout closes sooner a session that has called no
	// tool and received no request for this long (a client that opens
	// sessions and leaves them holds memory and goroutines, and each
	// lists the tools again, calling the access hooks).
	UnusedSessionTimeout time.Duration
	// JSONResponse answers a POST with one JSON body instead of an event
	// stream; server-to-client messages then travel on the GET stream.
	JSONResponse bool
	// Heartbeat of idle event streams (see httpstream.Options).
	Heartbeat time.Duration
	// ListCheck is how often the open sessions are checked: the
	// credential of each must still authenticate and be allowed on its
	// project (else the session ends, its GET stream too), an unused one
	// idle past UnusedSessionTimeout ends, and a session whose project's
	// list may have changed (ListRevision: no hook is called) lists its
	// tools again and, when they differ, notifies its client
	// (notifications/tools/list_changed). At most MaxListCheck.
	ListCheck time.Duration
	// ListRefresh is how often an open session lists its tools again
	// anyway (an access hook may answer otherwise with no change of its
	// configuration).
	ListRefresh time.Duration
	// Version is the server's version in the initialize answer.
	Version string
	// PublicURL is the platform's external base URL (--public-url): web
	// pages of its origin may call the endpoint. The request's own Host
	// header is not trusted for that (DNS rebinding chooses it). Empty:
	// only AllowedOrigins.
	PublicURL string
	// AllowedOrigins are the origins (scheme://host[:port]) of the other
	// web pages that may call the endpoint: a request whose Origin header
	// is neither PublicURL's origin nor one of them is refused with 403
	// (DNS rebinding). A request without Origin (a desktop client, curl)
	// passes.
	AllowedOrigins []string
	// MaxSessionsPerUser, MaxSessionsPerPrincipal, MaxSessionsPerProject
	// and MaxSessions cap the live sessions of one binding (principal,
	// organization, project, user), of one principal (a credential: a
	// service key names any user it likes), of one project, and of the
	// endpoint. An initialize at a cap ends the least recently used
	// session of that scope (its client gets 404 and may start anew);
	// when none of them can be ended (every one is still starting), it is
	// answered 429 with Retry-After.
	MaxSessionsPerUser, MaxSessionsPerPrincipal, MaxSessionsPerProject, MaxSessions int
}

// MaxListCheck bounds Config.ListCheck: a session whose credential was
// revoked ends within it.
const MaxListCheck = 5 * time.Second

// DefaultConfig: sessions idle 30 minutes are closed (2 minutes while they
// have called no tool), JSON answers to POST, a heartbeat every 15 s,
// sessions checked every 2 s (credential, idleness, list revision) and
// the list asked again every 5 minutes, no origin allowed but the public
// URL's, at most 32 sessions per binding, 64 per principal, 256 per
// project and 1024 in all.
func DefaultConfig() Config {
	return Config{SessionTimeout: 30 * time.Minute, UnusedSessionTimeout: 2 * time.Minute, JSONResponse: true, Heartbeat: 15 * time.Second,
		ListCheck: 2 * time.Second, ListRefresh: 5 * time.Minute, Version: "dev",
		MaxSessionsPerUser: 32, MaxSessionsPerPrincipal: 64, MaxSessionsPerProject: 256, MaxSessions: 1024}
}

// Validate checks the config.
func (c Config) Validate() error {
	if c.SessionTimeout <= 0 {
		return fmt.Errorf("%w: SessionTimeout must be positive", ErrInvalidConfig)
	}
	if c.UnusedSessionTimeout <= 0 || c.UnusedSessionTimeout > c.SessionTimeout {
		return fmt.Errorf("%w: UnusedSessionTimeout must be positive and at most SessionTimeout", ErrInvalidConfig)
	}
	if c.Heartbeat <= 0 {
		return fmt.Errorf("%w: Heartbeat must be positive", ErrInvalidConfig)
	}
	if c.ListCheck <= 0 || c.ListCheck > MaxListCheck || c.ListRefresh < c.ListCheck {
		return fmt.Errorf("%w: ListCheck must be positive and at most %s, and ListRefresh at least ListCheck", ErrInvalidConfig, MaxListCheck)
	}
	if c.MaxSessionsPerUser < 1 || c.MaxSessionsPerPrincipal < c.MaxSessionsPerUser || c.MaxSessionsPerProject < c.MaxSessionsPerUser ||
		c.MaxSessions < c.MaxSessionsPerPrincipal || c.MaxSessions < c.MaxSessionsPerProject {
		return fmt.Errorf("%w: session caps: want 1 <= MaxSessionsPerUser <= MaxSessionsPerPrincipal, MaxSessionsPerProject <= MaxSessions (got %d, %d, %d, %d)",
			ErrInvalidConfig, c.MaxSessionsPerUser, c.MaxSessionsPerPrincipal, c.MaxSessionsPerProject, c.MaxSessions)
	}
	if c.PublicURL != "" {
		if _, err := publicOrigin(c.PublicURL); err != nil {
			return fmt.Errorf("%w: PublicURL: %w", ErrInvalidConfig, err)
		}
	}
	for _, o := range c.AllowedOrigins {
		if _, err := parseOrigin(o); err != nil {
			return fmt.Errorf("%w: AllowedOrigins: %w", ErrInvalidConfig, err)
		}
	}
	return nil
}

// publicOrigin is the canonical origin of a base URL (its path, if any,
// left out).
func publicOrigin(base string) (string, error) {
	u, err := url.Parse(base)
	if err != nil {
		return "", fmt.Errorf("public URL %q: %w", base, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
		return "", fmt.Errorf("public URL %q: want an absolute http(s) URL without credentials", base)
	}
	return parseOrigin(u.Scheme + "://" + u.Host)
}

// parseOrigin returns the canonical form of an absolute origin
// (scheme://host[:port], lower case, without the scheme's default port).
func parseOrigin(o string) (string, error) {
	u, err := url.Parse(o)
	if err != nil {
		return "", fmt.Errorf("origin %q: %w", o, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil ||
		(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" {
		return "", fmt.Errorf("origin %q: want scheme://host[:port] with scheme http or https", o)
	}
	return u.Scheme + "://" + withoutDefaultPort(u.Scheme, strings.ToLower(u.Host)), nil
}

func withoutDefaultPort(scheme, host string) string {
	if (scheme == "http" && strings.HasSuffix(host, ":80")) || (scheme == "https" && strings.HasSuffix(host, ":443")) {
		return host[:strings.LastIndexByte(host, ':')]
	}
	return host
}

// Scoper decides a request's scope as the tool routes do, and decides it
// again, without a request, for the sessions it started
// (*toolrunner.Server).
type Scoper interface {
	Scope(c *fiber.Ctx, userID string) (toolrunner.Scope, error)
	// Recheck returns nil while credential still holds sc (it
	// authenticates as sc's principal, which may use sc's project for
	// sc's user); an error wrapping auth.ErrUnauthenticated or
	// auth.ErrForbidden once it does not; another error when that cannot
	// be decided now.
	Recheck(ctx context.Context, credential string, sc toolrunner.Scope) error
}

// Handler serves the MCP endpoint of every project on the main listener.
type Handler struct {
	cfg    Config
	runner Runner
	scoper Scoper
	log    *slog.Logger
	sdkLog *slog.Logger
	mcp    http.Handler
	ctx    context.Context // ends at Close: open streams end
	cancel context.CancelFunc

	origins   map[string]bool // PublicURL's and AllowedOrigins, canonical
	discovery *mcp.Server     // the server of requests that start no session

	mu       sync.Mutex
	sessions map[*session]*watch
	byID     map[string]*session // by Mcp-Session-Id, once the SDK answered it
	pending  map[string]int      // capped scope -> sessions being started in it
	outage   map[uuid.UUID]bool  // projects whose last list failed (logged once)
}

// The scopes whose live sessions are capped, narrowest first.
const (
	capUser      = iota // the binding: principal, organization, project, user
	capPrincipal        // one credential
	capProject
	capAll
	numCaps
)

var capNames = [numCaps]string{"this credential, project and user", "this credential", "this project", "this server"}

func (c Config) caps() [numCaps]int {
	return [numCaps]int{c.MaxSessionsPerUser, c.MaxSessionsPerPrincipal, c.MaxSessionsPerProject, c.MaxSessions}
}

// capKeys names the capped scopes a session of sc belongs to.
func capKeys(sc toolrunner.Scope) [numCaps]string {
	return [numCaps]string{"user/" + binding(sc), "principal/" + sc.Actor.PrincipalType + "/" + sc.Actor.PrincipalID,
		"project/" + sc.Org.String() + "/" + sc.Project.String(), "all"}
}

// watch is what the watcher knows of a session.
type watch struct {
	binding string
	keys    [numCaps]string
	// credential is the bearer of the session's latest request (another
	// may have replaced the first: a JWT refreshed), checked again at
	// every ListCheck.
	credential string
	// id is the Mcp-Session-Id, once the SDK has answered the initialize.
	id string
	// lastUsed is the time of the session's latest POST (the least
	// recently used session is ended first at a cap).
	created, lastUsed, listed time.Time
	// started: the initialize request was served (its SDK session, if
	// any, exists); before, the session counts as live for startGrace.
	started bool
	rev     string
	// After a failed list, the session is not listed again before
	// retryAt; backoff doubles from ListCheck up to ListRefresh.
	backoff time.Duration
	retryAt time.Time
}

// startGrace is how long a session created for an initialize counts as
// live before its SDK session exists (and is kept by the list watcher).
const startGrace = 10 * time.Second

// Retry-After of the refusals (seconds).
const (
	retryAfterUnavailable = "5"
	retryAfterSessionCap  = "5"
)

// NewHandler returns the endpoint; its event streams end when ctx ends or
// at Close (so that a server shutdown does not wait for them).
func NewHandler(ctx context.Context, cfg Config, runner Runner, scoper Scoper, log *slog.Logger) (*Handler, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.Default()
	}
	h := &Handler{cfg: cfg, runner: runner, scoper: scoper, log: log, sessions: map[*session]*watch{}, byID: map[string]*session{},
		pending: map[string]int{}, outage: map[uuid.UUID]bool{}, origins: map[string]bool{}}
	for _, o := range cfg.AllowedOrigins {
		c, _ := parseOrigin(o) // validated
		h.origins[c] = true
	}
	if cfg.PublicURL != "" {
		c, _ := publicOrigin(cfg.PublicURL) // validated
		h.origins[c] = true
	}
	// The SDK logs every session's start and end at INFO: warnings only.
	h.sdkLog = slog.New(minLevel{log.Handler(), slog.LevelWarn})
	h.ctx, h.cancel = context.WithCancel(ctx)
	// The server/discover probe of a client of protocol 2026-07-28 is
	// answered by a server without tools (the SDK then closes its
	// session: this transport serves older protocols), and it gives the
	// SDK the protocol versions of the requests that start no session.
	h.discovery = mcp.NewServer(h.impl(), serverOptions(log))
	sh := mcp.NewStreamableHTTPHandler(h.server, &mcp.StreamableHTTPOptions{
		JSONResponse:   cfg.JSONResponse,
		SessionTimeout: cfg.SessionTimeout,
		Logger:         h.sdkLog,
		// The Origin header is checked before the SDK sees the request
		// (serve: DNS rebinding), and every request carries a bearer
		// credential; behind the gateway the Host header is the public
		// one while this role listens on loopback, which the SDK's own
		// check would refuse.
		DisableLocalhostProtection: true,
	})
	// The SDK binds a session to TokenInfo.UserID and refuses it to any
	// other: the binding is the principal and the whole scope.
	h.mcp = auth.RequireBearerToken(func(ctx context.Context, _ string, _ *http.Request) (*auth.TokenInfo, error) {
		st, ok := ctx.Value(stateKey{}).(*requestState)
		if !ok {
			return nil, fmt.Errorf("%w: no scope", auth.ErrInvalidToken)
		}
		return &auth.TokenInfo{UserID: binding(st.scope), Expiration: time.Now().Add(time.Hour), Extra: map[string]any{scopeExtra: st.scope}}, nil
	}, nil)(sh)
	go h.watchLists()
	return h, nil
}

// watchLists checks the open sessions every ListCheck (checkLists) until
// the handler's context ends.
func (h *Handler) watchLists() {
	t := time.NewTicker(h.cfg.ListCheck)
	defer t.Stop()
	for {
		select {
		case <-h.ctx.Done():
			return
		case <-t.C:
			h.checkLists()
		}
	}
}

// liveLocked reports whether s counts against the caps: its initialize is
// being served (for startGrace at most), or the SDK holds its session.
func liveLocked(s *session, w *watch, now time.Time) bool {
	return (!w.started && now.Sub(w.created) < startGrace) || hasSessions(s.srv)
}

// forgetLocked drops s from the watched sessions (h.mu held).
func (h *Handler) forgetLocked(s *session) {
	if w := h.sessions[s]; w != nil && w.id != "" && h.byID[w.id] == s {
		delete(h.byID, w.id)
	}
	delete(h.sessions, s)
}

// end closes the SDK session of s, which h no longer watches: its client's
// next request gets 404 and its GET stream ends. In the background, as a
// close waits for the requests in flight.
func (h *Handler) end(s *session) {
	go func() {
		defer func() {
			if p := recover(); p != nil {
				h.log.Error("mcp: ending a session panicked", "panic", p)
			}
		}()
		for ss := range s.srv.Sessions() {
			_ = ss.Close()
		}
	}()
}

// checkLists, at every ListCheck: ends the sessions whose credential no
// longer holds their scope (Scoper.Recheck: a key deleted or disabled, a
// JWT expired, a membership removed) and those unused past
// UnusedSessionTimeout; then lists the tools of the others again when
// their project's list may have changed, or every ListRefresh.
func (h *Handler) checkLists() {
	defer func() {
		if p := recover(); p != nil {
			h.log.Error("mcp: session check panicked", "panic", p)
		}
	}()
	now := time.Now()
	type check struct {
		s          *session
		w          *watch
		credential string
	}
	var checks []check
	var idle []*session
	h.mu.Lock()
	for s, w := range h.sessions {
		switch {
		case !liveLocked(s, w, now):
			h.forgetLocked(s) // its client is gone
		case !w.started:
			// Its initialize is being served, just authenticated.
		case !s.called.Load() && now.Sub(w.lastUsed) >= h.cfg.UnusedSessionTimeout:
			h.forgetLocked(s)
			idle = append(idle, s)
		default:
			checks = append(checks, check{s, w, w.credential})
		}
	}
	h.mu.Unlock()
	for _, s := range idle {
		h.log.Debug("mcp: unused session ended", "org", s.base.Org.String(), "project", s.base.Project.String(), "idle", h.cfg.UnusedSessionTimeout.String())
		h.end(s)
	}
	type project struct{ org, project uuid.UUID }
	byProject := map[project][]*session{}
	verdicts := map[string]error{} // credential and binding -> Recheck
	for _, c := range checks {
		k := c.credential + "\x00" + c.w.binding
		err, ok := verdicts[k]
		if !ok {
			ctx, cancel := context.WithTimeout(h.ctx, 10*time.Second)
			err = h.scoper.Recheck(ctx, c.credential, c.s.base)
			cancel()
			verdicts[k] = err
		}
		switch {
		case err == nil:
			k := project{c.s.base.Org, c.s.base.Project}
			byProject[k] = append(byProject[k], c.s)
		case errors.Is(err, iauth.ErrUnauthenticated) || errors.Is(err, iauth.ErrForbidden):
			h.mu.Lock()
			// A request may have brought another credential meanwhile:
			// that one is checked next time.
			revoked := h.sessions[c.s] == c.w && c.w.credential == c.credential
			if revoked {
				h.forgetLocked(c.s)
			}
			h.mu.Unlock()
			if revoked {
				h.log.Info("mcp: session ended: its credential no longer holds", "principal_type", c.s.base.Actor.PrincipalType,
					"principal_id", c.s.base.Actor.PrincipalID, "org", c.s.base.Org.String(), "project", c.s.base.Project.String(), "err", err)
				h.end(c.s)
			}
		default:
			// Undecided (the control-plane mirror is stale): no list, and
			// so no hook call, for it until it is decided; its requests
			// are refused meanwhile (Scope fails closed).
			h.log.Debug("mcp: session credential not checked", "org", c.s.base.Org.String(), "project", c.s.base.Project.String(), "err", err)
		}
	}
	for k, ss := range byProject {
		ctx, cancel := context.WithTimeout(h.ctx, 30*time.Second)
		rev, err := h.runner.ListRevision(ctx, k.org, k.project)
		if err != nil {
			cancel()
			h.log.Warn("mcp: tool list revision unknown", "org", k.org.String(), "project", k.project.String(), "err", err)
			continue
		}
		for _, s := range ss {
			h.mu.Lock()
			w := h.sessions[s]
			due := w != nil && !now.Before(w.retryAt) && (w.rev != rev || now.Sub(w.listed) >= h.cfg.ListRefresh)
			h.mu.Unlock()
			if !due {
				continue
			}
			if err := s.sync(ctx, s.base); err != nil {
				// Reported (syncDone); tried again after a backoff, so
				// that an access hook outage is not asked by every
				// session at every check.
				h.mu.Lock()
				w.backoff = min(max(2*w.backoff, h.cfg.ListCheck), h.cfg.ListRefresh)
				w.retryAt = now.Add(w.backoff)
				h.mu.Unlock()
				continue
			}
			h.mu.Lock()
			w.rev, w.listed, w.backoff, w.retryAt = rev, now, 0, time.Time{}
			h.mu.Unlock()
		}
		cancel()
	}
}

func hasSessions(srv *mcp.Server) bool {
	for range srv.Sessions() {
		return true
	}
	return false
}

// Close ends the open event streams.
func (h *Handler) Close() { h.cancel() }

// Register mounts POST, GET and DELETE of Route behind the middleware
// (the tool runner's rate limit).
func (h *Handler) Register(r fiber.Router, mw ...fiber.Handler) {
	r.Post(Route, httpapi.With(mw, h.serve)...)
	r.Get(Route, httpapi.With(mw, h.serve)...)
	r.Delete(Route, httpapi.With(mw, h.serve)...)
}

const scopeExtra = "auditrail.scope"

type stateKey struct{}

// requestState carries a request's scope to the SDK's callbacks, and the
// server built for an initialize (the SDK asks for it twice).
type requestState struct {
	scope   toolrunner.Scope
	server  *mcp.Server
	session *session // started for an initialize
	watch   *watch   // of session
}

// binding is what a session is bound to: who asks, for whom, where.
func binding(sc toolrunner.Scope) string {
	return sc.Actor.PrincipalType + "/" + sc.Actor.PrincipalID + "/" + sc.Org.String() + "/" + sc.Project.String() + "/" + sc.UserID
}

// headerSessionID is the streamable transport's session header.
const headerSessionID = "Mcp-Session-Id"

func (h *Handler) serve(c *fiber.Ctx) error {
	if !h.originAllowed(c) {
		return rpcError(c, fiber.StatusForbidden, nil, jsonrpc.CodeInvalidRequest, "Forbidden: origin "+strconv.Quote(c.Get(fiber.HeaderOrigin))+" not allowed")
	}
	// Every request is authenticated and authorized again, the GET of an
	// event stream too; the watcher checks the sessions in between.
	sc, err := h.scoper.Scope(c, c.Get(HeaderUserID))
	if err != nil {
		var fe *fiber.Error
		if errors.As(err, &fe) && fe.Code == fiber.StatusUnauthorized {
			c.Set(fiber.HeaderWWWAuthenticate, "Bearer")
		}
		return err
	}
	// Scope authenticated it. Copied: the session keeps it to check it
	// again, and fasthttp reuses the request's memory for the
	// connection's next request once this one is answered.
	credential, _ := httpapi.BearerToken(c.Get(fiber.HeaderAuthorization))
	credential = strings.Clone(credential)
	st := &requestState{scope: sc}
	if sid := c.Get(headerSessionID); sid != "" {
		h.touch(sid, binding(sc), credential, c.Method() == fiber.MethodPost)
	} else if c.Method() == fiber.MethodPost {
		// Only an initialize starts a session (and lists the tools: the
		// access hooks); anything else without a session is refused as
		// the SDK would, before any server is built.
		switch m, id := peekMethod(c.Body()); m {
		case "initialize":
			if err := h.start(c, st, id, credential); err != nil || st.server == nil {
				return err
			}
		case "server/discover":
			st.server = h.discovery
		default:
			return rpcError(c, fiber.StatusBadRequest, id, jsonrpc.CodeInvalidRequest, "Bad Request: session id required")
		}
	}
	ctx := context.WithValue(h.ctx, stateKey{}, st)
	err = httpstream.Serve(ctx, c, h.mcp, httpstream.Options{Heartbeat: h.cfg.Heartbeat, Log: h.log})
	if st.watch != nil {
		// The SDK has connected the session (or refused the request):
		// from now on the session is live while the SDK holds it.
		sid := string(c.Response().Header.Peek(headerSessionID))
		h.mu.Lock()
		st.watch.started = true
		if sid != "" && h.sessions[st.session] == st.watch {
			st.watch.id = sid
			h.byID[sid] = st.session
		}
		h.mu.Unlock()
	}
	return err
}

// touch notes a request of binding b to session id: credential is the one
// checked from now on, and a POST (use) makes the session the most
// recently used. A request of another binding is not the session's (the
// SDK refuses it with 403).
func (h *Handler) touch(id, b, credential string, use bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.byID[id]
	if s == nil {
		return
	}
	if w := h.sessions[s]; w != nil && w.binding == b {
		w.credential = credential
		if use {
			w.lastUsed = time.Now()
		}
	}
}

// eviction is a session ended to make room in a capped scope.
type eviction struct {
	s   *session
	cap int
}

// makeRoomLocked chooses the sessions to end so that a new session of the
// scopes keys fits every cap: in each scope at its cap, the least
// recently used sessions that can be ended (held by the SDK: not those
// still starting). It returns the scope where no room can be made, or -1.
func (h *Handler) makeRoomLocked(keys [numCaps]string, now time.Time) ([]eviction, int) {
	type entry struct {
		s         *session
		w         *watch
		evictable bool
	}
	var live []entry
	for s, w := range h.sessions {
		if liveLocked(s, w, now) {
			live = append(live, entry{s, w, w.started && hasSessions(s.srv)})
		}
	}
	chosen := map[*session]bool{}
	var out []eviction
	caps := h.cfg.caps()
	for i := range numCaps {
		n := h.pending[keys[i]]
		for _, e := range live {
			if e.w.keys[i] == keys[i] && !chosen[e.s] {
				n++
			}
		}
		for ; n >= caps[i]; n-- {
			var lru *entry
			for j := range live {
				e := &live[j]
				if e.evictable && !chosen[e.s] && e.w.keys[i] == keys[i] && (lru == nil || e.w.lastUsed.Before(lru.w.lastUsed)) {
					lru = e
				}
			}
			if lru == nil {
				return nil, i
			}
			chosen[lru.s] = true
			out = append(out, eviction{lru.s, i})
		}
	}
	return out, -1
}

// start builds the session of an initialize request into st.server, or
// answers: 429 when a cap is reached and no session of its scope can be
// ended (all are starting), 503 when the tools cannot be listed (an
// access hook outage). At a cap, the least recently used session of the
// scope is ended.
func (h *Handler) start(c *fiber.Ctx, st *requestState, id json.RawMessage, credential string) error {
	keys := capKeys(st.scope)
	now := time.Now()
	h.mu.Lock()
	evicted, full := h.makeRoomLocked(keys, now)
	if full >= 0 {
		h.mu.Unlock()
		c.Set(fiber.HeaderRetryAfter, retryAfterSessionCap)
		return rpcError(c, fiber.StatusTooManyRequests, id, jsonrpc.CodeInternalError,
			fmt.Sprintf("too many MCP sessions for %s (at most %d), all of them starting: try again shortly", capNames[full], h.cfg.caps()[full]))
	}
	for _, e := range evicted {
		h.forgetLocked(e.s)
	}
	for _, k := range keys {
		h.pending[k]++
	}
	h.mu.Unlock()
	for _, e := range evicted {
		h.log.Info("mcp: least recently used session ended: too many sessions", "scope", capNames[e.cap], "at_most", h.cfg.caps()[e.cap],
			"principal_type", e.s.base.Actor.PrincipalType, "principal_id", e.s.base.Actor.PrincipalID, "org", e.s.base.Org.String(), "project", e.s.base.Project.String())
		h.end(e.s)
	}
	// The revision before the list: a change in between is seen at the
	// next check.
	rev, _ := h.runner.ListRevision(h.ctx, st.scope.Org, st.scope.Project)
	s, err := newSession(h.ctx, h.runner, st.scope, scopeOf, h.impl(), h.log, h.syncDone)
	h.mu.Lock()
	for _, k := range keys {
		if h.pending[k]--; h.pending[k] == 0 {
			delete(h.pending, k)
		}
	}
	if err == nil {
		st.session = s
		st.watch = &watch{binding: binding(st.scope), keys: keys, credential: credential, created: now, lastUsed: now, listed: now, rev: rev}
		h.sessions[s] = st.watch
	}
	h.mu.Unlock()
	if err != nil {
		c.Set(fiber.HeaderRetryAfter, retryAfterUnavailable)
		return rpcError(c, fiber.StatusServiceUnavailable, id, jsonrpc.CodeInternalError,
			"the project's tools cannot be listed now (its access hook is unavailable): the session was not started; try again")
	}
	st.server = s.srv
	return nil
}

// syncDone reports a session's list: a failure is logged once per project
// until a list of the project succeeds again, then at debug level.
func (h *Handler) syncDone(sc toolrunner.Scope, err error) {
	h.mu.Lock()
	was := h.outage[sc.Project]
	if err != nil {
		h.outage[sc.Project] = true
	} else {
		delete(h.outage, sc.Project)
	}
	h.mu.Unlock()
	switch {
	case err != nil && !was:
		h.log.Error("mcp: tools not listed (logged once until the project's tools are listed again)", "org", sc.Org.String(), "project", sc.Project.String(), "err", err)
	case err != nil:
		h.log.Debug("mcp: tools not listed", "org", sc.Org.String(), "project", sc.Project.String(), "err", err)
	case was:
		h.log.Info("mcp: tools listed again", "org", sc.Org.String(), "project", sc.Project.String())
	}
}

func (h *Handler) impl() *mcp.Implementation {
	return &mcp.Implementation{Name: "auditrail", Version: h.cfg.Version}
}

// originAllowed: no Origin header, or the origin of the public URL or an
// allowed one. The request's Host is not compared: a page served by a
// rebound DNS name sends the Host it chose.
func (h *Handler) originAllowed(c *fiber.Ctx) bool {
	o := c.Get(fiber.HeaderOrigin)
	if o == "" {
		return true
	}
	co, err := parseOrigin(o)
	return err == nil && h.origins[co]
}

// peekMethod returns the method and id of a JSON-RPC message, or of the
// first initialize (else the first message) of a batch; "" when the body
// is no JSON-RPC request.
func peekMethod(body []byte) (string, json.RawMessage) {
	type msg struct {
		Method string          `json:"method"`
		ID     json.RawMessage `json:"id"`
	}
	var batch []msg
	if json.Unmarshal(body, &batch) == nil {
		for _, m := range batch {
			if m.Method == "initialize" {
				return m.Method, m.ID
			}
		}
		if len(batch) > 0 {
			return batch[0].Method, batch[0].ID
		}
		return "", nil
	}
	var m msg
	if json.Unmarshal(body, &m) != nil {
		return "", nil
	}
	return m.Method, m.ID
}

// rpcError answers status with a JSON-RPC error body (id null when
// unknown), as the spec asks of a refused request.
func rpcError(c *fiber.Ctx, status int, id json.RawMessage, code int64, msg string) error {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	b, err := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   jsonrpc.Error   `json:"error"`
	}{"2.0", id, jsonrpc.Error{Code: code, Message: msg}})
	if err != nil {
		return fmt.Errorf("mcp: error body: %w", err)
	}
	c.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSON)
	return c.Status(status).Send(b)
}

// server is the SDK's getServer: the session's server built by start for
// an initialize, else a server without tools (the SDK reads the protocol
// versions of it, and answers server/discover with it).
func (h *Handler) server(r *http.Request) *mcp.Server {
	if st, ok := r.Context().Value(stateKey{}).(*requestState); ok && st.server != nil {
		return st.server
	}
	return h.discovery
}

// scopeOf is the scope of the HTTP request that carried req.
func scopeOf(_ context.Context, req mcp.Request) (toolrunner.Scope, bool) {
	ex := req.GetExtra()
	if ex == nil || ex.TokenInfo == nil {
		return toolrunner.Scope{}, false
	}
	sc, ok := ex.TokenInfo.Extra[scopeExtra].(toolrunner.Scope)
	return sc, ok
}

// minLevel drops the records below its level.
type minLevel struct {
	slog.Handler
	level slog.Level
}

func (m minLevel) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= m.level && m.Handler.Enabled(ctx, l)
}

func (m minLevel) WithAttrs(as []slog.Attr) slog.Handler {
	return minLevel{m.Handler.WithAttrs(as), m.level}
}

func (m minLevel) WithGroup(name string) slog.Handler {
	return minLevel{m.Handler.WithGroup(name), m.level}
}
