package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/google/uuid"
	"github.com/modelcontextprotocol/go-sdk/auth"
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
}

// DefaultConfig: sessions idle 30 minutes are closed, JSON answers to
// POST, a heartbeat every 15 s, list changes checked every 2 s and the
// list asked again every 5 minutes.
func DefaultConfig() Config {
	return Config{SessionTimeout: 30 * time.Minute, JSONResponse: true, Heartbeat: 15 * time.Second,
		ListCheck: 2 * time.Second, ListRefresh: 5 * time.Minute, Version: "dev"}
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
	return nil
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

	mu       sync.Mutex
	sessions map[*session]*watch
}

// watch is what the list watcher knows of a session.
type watch struct {
	created, listed time.Time
	rev             string
}

// NewHandler returns the endpoint; its event streams end when ctx ends or
// at Close (so that a server shutdown does not wait for them).
func NewHandler(ctx context.Context, cfg Config, runner Runner, scoper Scoper, log *slog.Logger) (*Handler, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.Default()
	}
	h := &Handler{cfg: cfg, runner: runner, scoper: scoper, log: log, sessions: map[*session]*watch{}}
	// The SDK logs every session's start and end at INFO: warnings only.
	h.sdkLog = slog.New(minLevel{log.Handler(), slog.LevelWarn})
	h.ctx, h.cancel = context.WithCancel(ctx)
	sh := mcp.NewStreamableHTTPHandler(h.server, &mcp.StreamableHTTPOptions{
		JSONResponse:   cfg.JSONResponse,
		SessionTimeout: cfg.SessionTimeout,
		Logger:         h.sdkLog,
		// Every request carries a bearer credential, checked before the
		// SDK sees it (a page that rebinds DNS to a local server has no
		// key to send); behind the gateway the Host header is the
		// public one while this role listens on loopback.
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
		if now.Sub(w.created) > time.Minute && !hasSessions(s.srv) {
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
			due := w != nil && (w.rev != rev || now.Sub(w.listed) >= h.cfg.ListRefresh)
			h.mu.Unlock()
			if !due {
				continue
			}
			if err := s.sync(ctx, s.base); err != nil {
				continue // logged; tried again at the next check
			}
			h.mu.Lock()
			w.rev, w.listed = rev, now
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
// server built for it (the SDK asks for it twice per new session).
type requestState struct {
	scope  toolrunner.Scope
	once   sync.Once
	server *mcp.Server
}

// binding is what a session is bound to: who asks, for whom, where.
func binding(sc toolrunner.Scope) string {
	return sc.Actor.PrincipalType + "/" + sc.Actor.PrincipalID + "/" + sc.Org.String() + "/" + sc.Project.String() + "/" + sc.UserID
}

func (h *Handler) serve(c *fiber.Ctx) error {
	sc, err := h.scoper.Scope(c, c.Get(HeaderUserID))
	if err != nil {
		var fe *fiber.Error
		if errors.As(err, &fe) && fe.Code == fiber.StatusUnauthorized {
			c.Set(fiber.HeaderWWWAuthenticate, "Bearer")
		}
		return err
	}
	ctx := context.WithValue(h.ctx, stateKey{}, &requestState{scope: sc})
	return httpstream.Serve(ctx, c, h.mcp, httpstream.Options{Heartbeat: h.cfg.Heartbeat, Log: h.log})
}

// server is the SDK's getServer: the MCP server of the request's scope for
// a new session; nil for a request of an existing session (then the SDK
// only reads the default protocol versions from it).
func (h *Handler) server(r *http.Request) *mcp.Server {
	if r.Header.Get("Mcp-Session-Id") != "" {
		return nil
	}
	st, ok := r.Context().Value(stateKey{}).(*requestState)
	if !ok {
		return nil
	}
	st.once.Do(func() {
		// The revision before the list: a change in between is seen at
		// the next check.
		rev, _ := h.runner.ListRevision(r.Context(), st.scope.Org, st.scope.Project)
		s, err := newSession(r.Context(), h.runner, st.scope, scopeOf, &mcp.Implementation{Name: "auditrail", Version: h.cfg.Version}, h.log)
		if err != nil {
			h.log.Error("mcp: session not started", "err", err)
			return
		}
		now := time.Now()
		h.mu.Lock()
		h.sessions[s] = &watch{created: now, listed: now, rev: rev}
		h.mu.Unlock()
		st.server = s.srv
	})
	return st.server
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
