// Package mcpserver serves a project's tools over the Model Context
// Protocol: one MCP server per (organization, project, user) session over
// the tool runner. tools/list is what the runner lists for the user (access
// hooks applied); tools/call runs the runner's whole pipeline (access, pre,
// secrets, connection, tool, post, execution event), recording the MCP
// client's name and version with the execution.
package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"unicode"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/auditrail/auditrail/schemas"
	"github.com/auditrail/auditrail/toolrunner"
)

// Runner is what the MCP server needs of the tool runner
// (*toolrunner.Runner).
type Runner interface {
	// Visible returns the definitions the access hooks leave visible to
	// the scope's user.
	Visible(ctx context.Context, sc toolrunner.Scope) ([]toolrunner.Definition, []schemas.HookCall, error)
	// Execute runs one tool through the pipeline and records the execution.
	Execute(ctx context.Context, sc toolrunner.Scope, toolName string, input map[string]any) (toolrunner.Result, error)
	// ListRevision changes when the project's list may have changed (a
	// registration, an access hook configuration); it calls no hook.
	ListRevision(ctx context.Context, org, project uuid.UUID) (string, error)
}

// ScopeFunc returns the scope of the request being served (each HTTP
// request is authenticated again: the actor's client IP is the current
// request's); ok false when the request carries none.
type ScopeFunc func(ctx context.Context, req mcp.Request) (toolrunner.Scope, bool)

// ProtocolMCP is the client protocol recorded with executions.
const ProtocolMCP = "mcp"

// session is the MCP server of one scope: its tools are the last list the
// runner gave for the scope.
type session struct {
	runner Runner
	base   toolrunner.Scope
	scope  ScopeFunc
	log    *slog.Logger
	srv    *mcp.Server
	// syncing serializes syncs (a list answered before another must not
	// be applied after it).
	syncing sync.Mutex
	// report receives the outcome of each list (nil error: listed).
	report func(sc toolrunner.Scope, err error)
	mu     sync.Mutex
	tools  map[string]string // name -> JSON of the tool, as registered
	// called: a tools/call reached a tool (the session is in use: the
	// longer idle timeout applies).
	called atomic.Bool
}

// NewServer returns the MCP server of the scope sc, its tools listed now.
// scope gives the scope of each request (nil: sc).
func NewServer(ctx context.Context, runner Runner, sc toolrunner.Scope, scope ScopeFunc, impl *mcp.Implementation, log *slog.Logger) (*mcp.Server, error) {
	s, err := newSession(ctx, runner, sc, scope, impl, log, nil)
	if err != nil {
		return nil, err
	}
	return s.srv, nil
}

// serverOptions are those of a project's MCP server.
func serverOptions(log *slog.Logger) *mcp.ServerOptions {
	return &mcp.ServerOptions{
		// The SDK logs every session's start and end at INFO.
		Logger:       slog.New(minLevel{log.Handler(), slog.LevelWarn}),
		Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{ListChanged: true}},
		Instructions: "Tools of one auditrail project. Every call passes the project's access, pre- and post-execution hooks and is recorded in the audit trail.",
	}
}

// newSession: report receives the outcome of each list (nil: a failure is
// logged as an error).
func newSession(ctx context.Context, runner Runner, sc toolrunner.Scope, scope ScopeFunc, impl *mcp.Implementation, log *slog.Logger, report func(toolrunner.Scope, error)) (*session, error) {
	if log == nil {
		log = slog.Default()
	}
	if report == nil {
		report = func(sc toolrunner.Scope, err error) {
			if err != nil {
				log.Error("mcp: tools not listed", "org", sc.Org.String(), "project", sc.Project.String(), "err", err)
			}
		}
	}
	s := &session{runner: runner, base: sc, scope: scope, log: log, report: report, tools: map[string]string{}}
	s.srv = mcp.NewServer(impl, serverOptions(log))
	if err := s.sync(ctx, sc); err != nil {
		return nil, err
	}
	s.srv.AddReceivingMiddleware(resyncing(func(ctx context.Context, req mcp.Request) error {
		return s.sync(ctx, s.requestScope(ctx, req))
	}, s.known))
	return s, nil
}

// requestScope is the scope of req: the request's own when it has one.
func (s *session) requestScope(ctx context.Context, req mcp.Request) toolrunner.Scope {
	if s.scope != nil {
		if sc, ok := s.scope(ctx, req); ok {
			return sc
		}
	}
	return s.base
}

// resyncing is the middleware of a server whose tools follow a source (the
// runner's list, or the upstream's): it lists them again (sync) before
// answering tools/list, so that the answer is the source's now and a
// change notifies the client (notifications/tools/list_changed), and
// before a tools/call of a tool the server does not know yet.
func resyncing(sync func(context.Context, mcp.Request) error, known func(name string) bool) mcp.Middleware {
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			switch method {
			case "tools/list":
				if err := sync(ctx, req); err != nil {
					return nil, err
				}
			case "tools/call":
				if p, ok := req.GetParams().(*mcp.CallToolParamsRaw); ok && !known(p.Name) {
					if err := sync(ctx, req); err != nil {
						return nil, err
					}
				}
			}
			return next(ctx, method, req)
		}
	}
}

func (s *session) known(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.tools[name]
	return ok
}

// sync makes the server's tools those the runner lists for sc now.
func (s *session) sync(ctx context.Context, sc toolrunner.Scope) error {
	s.syncing.Lock()
	defer s.syncing.Unlock()
	defs, _, err := s.runner.Visible(ctx, sc)
	s.report(sc, err)
	if err != nil {
		return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the project's tools cannot be listed now; try again"}
	}
	tools := make([]*mcp.Tool, len(defs))
	for i, d := range defs {
		tools[i] = Tool(d)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	setTools(s.srv, s.tools, tools, s.handler)
	return nil
}

// setTools makes srv's tools exactly tools: it adds (or replaces) those
// whose JSON differs from the one registered (registered: name -> JSON,
// updated) and removes the others. The SDK notifies the clients of a
// change (notifications/tools/list_changed); an unchanged list sends
// nothing.
func setTools(srv *mcp.Server, registered map[string]string, tools []*mcp.Tool, handler func(name string) mcp.ToolHandler) {
	want := make(map[string]bool, len(tools))
	for _, t := range tools {
		want[t.Name] = true
		b, _ := json.Marshal(t)
		if registered[t.Name] == string(b) {
			continue
		}
		registered[t.Name] = string(b)
		srv.AddTool(t, handler(t.Name))
	}
	var gone []string
	for name := range registered {
		if !want[name] {
			gone = append(gone, name)
			delete(registered, name)
		}
	}
	if len(gone) > 0 {
		srv.RemoveTools(gone...)
	}
}

// handler runs the tool name through the runner.
func (s *session) handler(name string) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		s.called.Store(true)
		sc := s.requestScope(ctx, req)
		if ip := req.Session.InitializeParams(); ip != nil && ip.ClientInfo != nil {
			sc.Actor.Client = &schemas.ClientInfo{Protocol: ProtocolMCP, Name: clip(ip.ClientInfo.Name), Version: clip(ip.ClientInfo.Version)}
		} else {
			sc.Actor.Client = &schemas.ClientInfo{Protocol: ProtocolMCP}
		}
		if r := declinedAuthorization(req.Params); r != nil {
			return r, nil
		}
		input, err := decodeArguments(req.Params.Arguments)
		if err != nil {
			return errorResult(&toolrunner.Error{Kind: toolrunner.KindInputInvalid, Message: err.Error()}, nil), nil
		}
		res, err := s.runner.Execute(ctx, sc, name, input)
		switch {
		case errors.Is(err, toolrunner.ErrInvalidInput):
			// As the HTTP API's 400: nothing ran, nothing is recorded; a
			// tool error lets the model correct its arguments.
			return errorResult(&toolrunner.Error{Kind: toolrunner.KindInputInvalid, Message: strings.TrimPrefix(err.Error(), toolrunner.ErrInvalidInput.Error()+": ")}, nil), nil
		case errors.Is(err, toolrunner.ErrUnknownTool):
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("unknown tool %q", name)}
		case err != nil:
			s.log.Error("mcp: tool not run", "tool", name, "err", err)
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the tool cannot be run now; try again"}
		}
		if !res.Success {
			if ask := askAuthorization(req.Session, req.Params, res.ExecutionID, res.Authorization); ask != nil {
				return ask, nil
			}
			return errorResult(res.Error, &res), nil
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: render(res.Output)}}, StructuredContent: res}, nil
	}
}

// decodeArguments reads a tools/call's arguments: a JSON object, or
// nothing (absent or null: no arguments).
func decodeArguments(raw json.RawMessage) (map[string]any, error) {
	input := map[string]any{}
	if len(raw) == 0 || string(raw) == "null" {
		return input, nil
	}
	if err := json.Unmarshal(raw, &input); err != nil {
		return nil, fmt.Errorf("arguments: want a JSON object: %w", err)
	}
	if input == nil {
		input = map[string]any{}
	}
	return input, nil
}

// clipMax bounds the bytes of a client's name and version.
const clipMax = 200

// clip makes what a client says of itself fit to be recorded and shown
// (tail, the dashboard): control characters and invalid UTF-8 dropped, at
// most clipMax bytes, cut on a rune boundary.
func clip(s string) string {
	var b strings.Builder
	for _, r := range s {
		if r == utf8.RuneError || unicode.IsControl(r) {
			continue // invalid UTF-8 decodes as RuneError
		}
		if b.Len()+utf8.RuneLen(r) > clipMax {
			break
		}
		b.WriteRune(r)
	}
	return b.String()
}

// render is the text of a tool's output: a string as it is, anything else
// as JSON.
func render(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// errorResult is an MCP tool error (isError): its text names the kind,
// the message and whether to retry; for AUTHORIZATION_REQUIRED, the URL
// the user must open. structuredContent is the execution result (res; nil
// when nothing ran: just the error).
func errorResult(e *toolrunner.Error, res *toolrunner.Result) *mcp.CallToolResult {
	if e == nil {
		e = &toolrunner.Error{Kind: toolrunner.KindRuntime, Message: "the tool failed"}
	}
	var text strings.Builder
	fmt.Fprintf(&text, "%s: %s", e.Kind, e.Message)
	if e.CanRetry {
		text.WriteString(" (a retry may succeed)")
	} else {
		text.WriteString(" (retrying the same call will fail the same way)")
	}
	var structured any = map[string]any{"success": false, "error": e}
	if res != nil {
		structured = *res
		if ar := res.Authorization; ar != nil {
			fmt.Fprintf(&text, "\nThe user must authorize %s", ar.Provider)
			if len(ar.Scopes) > 0 {
				fmt.Fprintf(&text, " (scopes: %s)", strings.Join(ar.Scopes, " "))
			}
			fmt.Fprintf(&text, ": open %s", ar.URL)
			if !ar.StateExpiresAt.IsZero() {
				fmt.Fprintf(&text, " before %s", ar.StateExpiresAt.UTC().Format("2006-01-02T15:04:05Z"))
			}
			text.WriteString(", then call the tool again.")
		}
	}
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: text.String()}}, StructuredContent: structured}
}
