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
	// long (its client starts a new one).
	SessionTimeout time.Duration
	// JSONResponse answers a POST with one JSON body instead of an event
	// stream; server-to-client messages then travel on the GET stream.
	JSONResponse bool
	// Heartbeat of idle event streams (see httpstream.Options).
	Heartbeat time.Duration
	// ListCheck is how often the open sessions check whether their
	// project's list may have changed (ListRevision: no hook is called);
	// a session whose project changed lists its tools again and, when
	// they differ, notifies its client (notifications/tools/list_changed).
	ListCheck time.Duration
	// ListRefresh is how often an open session lists its tools again
	// anyway (an access hook may answer otherwise with no change of its
	// configuration).
	ListRefresh time.Duration
	// Version is the server's version in the initialize answer.
	Version string
	// AllowedOrigins are the origins (scheme://host[:port]) of the web
	// pages that may call the endpoint besides the endpoint's own host: a
	// request whose Origin header is neither is refused with 403 (DNS
	// rebinding). A request without Origin (a desktop client, curl) passes.
	AllowedOrigins []string
	// MaxSessionsPerUser bounds the live sessions of one binding
	// (principal, organization, project, user); an initialize above it is
	// answered 429 with Retry-After.
	MaxSessionsPerUser int
}

// DefaultConfig: sessions idle 30 minutes are closed, JSON answers to
// POST, a heartbeat every 15 s, list changes checked every 2 s and the
// list asked again every 5 minutes, no other origin than the endpoint's
// own, 32 sessions per binding.
func DefaultConfig() Config {
	return Config{SessionTimeout: 30 * time.Minute, JSONResponse: true, Heartbeat: 15 * time.Second,
		ListCheck: 2 * time.Second, ListRefresh: 5 * time.Minute, Version: "dev", MaxSessionsPerUser: 32}
}

// Validate checks the config.
func (c Config) Validate() error {
	if c.SessionTimeout <= 0 {
		return fmt.Errorf("%w: SessionTimeout must be positive", ErrInvalidConfig)
	}
	if c.Heartbeat <= 0 {
		return fmt.Errorf("%w: Heartbeat must be positive", ErrInvalidConfig)
	}
	if c.ListCheck <= 0 || c.ListRefresh < c.ListCheck {
		return fmt.Errorf("%w: ListCheck must be positive and ListRefresh at least ListCheck", ErrInvalidConfig)
	}
	if c.MaxSessionsPerUser < 1 {
		return fmt.Errorf("%w: MaxSessionsPerUser must be at least 1", ErrInvalidConfig)
	}
	for _, o := range c.AllowedOrigins {
		if _, err := parseOrigin(o); err != nil {
			return fmt.Errorf("%w: AllowedOrigins: %w", ErrInvalidConfig, err)
		}
	}
	return nil
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

// Scoper decides a request's scope as the tool routes do
// (*toolrunner.Server).
type Scoper interface {
	Scope(c *fiber.Ctx, userID string) (toolrunner.Scope, error)
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

	origins   map[string]bool // AllowedOrigins, canonical
	discovery *mcp.Server     // the server of requests that start no session

	mu       sync.Mutex
	sessions map[*session]*watch
	pending  map[string]int     // binding -> sessions being started
	outage   map[uuid.UUID]bool // projects whose last list failed (logged once)
}

// watch is what the list watcher knows of a session.
type watch struct {
	binding         string
	created, listed time.Time
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
	retryAfterSessionCap  = "60"
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
	h := &Handler{cfg: cfg, runner: runner, scoper: scoper, log: log, sessions: map[*session]*watch{},
		pending: map[string]int{}, outage: map[uuid.UUID]bool{}, origins: map[string]bool{}}
	for _, o := range cfg.AllowedOrigins {
		c, _ := parseOrigin(o) // validated
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

// watchLists lists the tools of the open sessions again when their
// project's list may have changed, or every ListRefresh, until the
// handler's context ends.
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

func (h *Handler) checkLists() {
	now := time.Now()
	type project struct{ org, project uuid.UUID }
	byProject := map[project][]*session{}
	h.mu.Lock()
	for s, w := range h.sessions {
		if (w.started || now.Sub(w.created) > startGrace) && !hasSessions(s.srv) {
			delete(h.sessions, s) // its client is gone
			continue
		}
		k := project{s.base.Org, s.base.Project}
		byProject[k] = append(byProject[k], s)
	}
	h.mu.Unlock()
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
	scope  toolrunner.Scope
	server *mcp.Server
	watch  *watch // of the session started for an initialize
}

// binding is what a session is bound to: who asks, for whom, where.
func binding(sc toolrunner.Scope) string {
	return sc.Actor.PrincipalType + "/" + sc.Actor.PrincipalID + "/" + sc.Org.String() + "/" + sc.Project.String() + "/" + sc.UserID
}

func (h *Handler) serve(c *fiber.Ctx) error {
	if !h.originAllowed(c) {
		return rpcError(c, fiber.StatusForbidden, nil, jsonrpc.CodeInvalidRequest, "Forbidden: origin "+strconv.Quote(c.Get(fiber.HeaderOrigin))+" not allowed")
	}
	sc, err := h.scoper.Scope(c, c.Get(HeaderUserID))
	if err != nil {
		var fe *fiber.Error
		if errors.As(err, &fe) && fe.Code == fiber.StatusUnauthorized {
			c.Set(fiber.HeaderWWWAuthenticate, "Bearer")
		}
		return err
	}
	st := &requestState{scope: sc}
	if c.Method() == fiber.MethodPost && c.Get("Mcp-Session-Id") == "" {
		// Only an initialize starts a session (and lists the tools: the
		// access hooks); anything else without a session is refused as
		// the SDK would, before any server is built.
		switch m, id := peekMethod(c.Body()); m {
		case "initialize":
			if err := h.start(c, st, id); err != nil || st.server == nil {
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
		h.mu.Lock()
		st.watch.started = true
		h.mu.Unlock()
	}
	return err
}

// start builds the session of an initialize request into st.server, or
// answers: 429 above the binding's session cap, 503 when the tools cannot
// be listed (an access hook outage).
func (h *Handler) start(c *fiber.Ctx, st *requestState, id json.RawMessage) error {
	b := binding(st.scope)
	now := time.Now()
	h.mu.Lock()
	live := h.pending[b]
	for s, w := range h.sessions {
		if w.binding == b && ((!w.started && now.Sub(w.created) < startGrace) || hasSessions(s.srv)) {
			live++
		}
	}
	if live >= h.cfg.MaxSessionsPerUser {
		h.mu.Unlock()
		c.Set(fiber.HeaderRetryAfter, retryAfterSessionCap)
		return rpcError(c, fiber.StatusTooManyRequests, id, jsonrpc.CodeInternalError,
			fmt.Sprintf("too many open MCP sessions for this credential, project and user (at most %d): close one (DELETE) or wait until one expires", h.cfg.MaxSessionsPerUser))
	}
	h.pending[b]++
	h.mu.Unlock()
	// The revision before the list: a change in between is seen at the
	// next check.
	rev, _ := h.runner.ListRevision(h.ctx, st.scope.Org, st.scope.Project)
	s, err := newSession(h.ctx, h.runner, st.scope, scopeOf, h.impl(), h.log, h.syncDone)
	h.mu.Lock()
	if h.pending[b]--; h.pending[b] == 0 {
		delete(h.pending, b)
	}
	if err == nil {
		st.watch = &watch{binding: b, created: now, listed: now, rev: rev}
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

// originAllowed: no Origin header, the request's own host, or an allowed
// origin.
func (h *Handler) originAllowed(c *fiber.Ctx) bool {
	o := c.Get(fiber.HeaderOrigin)
	if o == "" {
		return true
	}
	co, err := parseOrigin(o)
	if err != nil {
		return false
	}
	if h.origins[co] {
		return true
	}
	scheme, host, _ := strings.Cut(co, "://")
	return host == withoutDefaultPort(scheme, strings.ToLower(string(c.Request().Host())))
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
