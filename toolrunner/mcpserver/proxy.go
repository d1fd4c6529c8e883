package mcpserver

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Dialer opens the upstream session of a proxy as the given client (the
// downstream client's clientInfo, so that executions record the program
// that really asked), with the given options.
type Dialer func(ctx context.Context, client *mcp.Implementation, opts *mcp.ClientOptions) (*mcp.ClientSession, error)

// HTTPDialer dials the project's streamable HTTP endpoint with a bearer
// key; user, when set, is sent as Auditrail-User-Id.
func HTTPDialer(endpoint, key, user string, hc *http.Client) Dialer {
	if hc == nil {
		hc = http.DefaultClient
	}
	return func(ctx context.Context, client *mcp.Implementation, opts *mcp.ClientOptions) (*mcp.ClientSession, error) {
		hc := *hc
		hc.Transport = authTransport{base: hc.Transport, key: key, user: user}
		return mcp.NewClient(client, opts).Connect(ctx, &mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: &hc}, nil)
	}
}

type authTransport struct {
	base      http.RoundTripper
	key, user string
}

func (a authTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+a.key)
	if a.user != "" {
		r.Header.Set(HeaderUserID, a.user)
	}
	base := a.base
	if base == nil {
		base = http.DefaultTransport
	}
	return base.RoundTrip(r)
}

// proxy is an MCP server whose tools are those of an upstream session.
type proxy struct {
	dial Dialer
	log  *slog.Logger
	srv  *mcp.Server
	// syncing serializes syncs.
	syncing sync.Mutex
	wg      sync.WaitGroup // the resyncs

	mu     sync.Mutex
	up     *mcp.ClientSession
	closed bool
	tools  map[string]string // name -> JSON, as registered
}

// NewProxy returns an MCP server (for stdio) that serves the tools of the
// upstream session dial opens at the client's first tools request, with
// the client's own clientInfo. Every call goes upstream as it is; a change
// of the upstream list is passed on as notifications/tools/list_changed.
// Close the upstream with the returned func.
func NewProxy(dial Dialer, impl *mcp.Implementation, log *slog.Logger) (*mcp.Server, func() error) {
	if log == nil {
		log = slog.Default()
	}
	p := &proxy{dial: dial, log: log, tools: map[string]string{}}
	p.srv = mcp.NewServer(impl, &mcp.ServerOptions{
		Logger:       slog.New(minLevel{log.Handler(), slog.LevelWarn}),
		Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{ListChanged: true}},
	})
	p.srv.AddReceivingMiddleware(resyncing(p.sync, p.known))
	return p.srv, p.close
}

func (p *proxy) isClosed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.closed
}

func (p *proxy) close() error {
	p.mu.Lock()
	p.closed = true
	up := p.up
	p.mu.Unlock()
	var err error
	if up != nil {
		err = up.Close()
	}
	p.wg.Wait()
	return err
}

// upstream opens the upstream session once, as the client of req.
func (p *proxy) upstream(ctx context.Context, req mcp.Request) (*mcp.ClientSession, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.up != nil {
		return p.up, nil
	}
	client := &mcp.Implementation{Name: "auditrail-mcp", Version: "(unknown)"}
	if ss, ok := req.GetSession().(*mcp.ServerSession); ok {
		if ip := ss.InitializeParams(); ip != nil && ip.ClientInfo != nil {
			client = &mcp.Implementation{Name: ip.ClientInfo.Name, Version: ip.ClientInfo.Version}
		}
	}
	up, err := p.dial(ctx, client, &mcp.ClientOptions{ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
		// Not in the notification's goroutine: listing waits for an
		// answer that the same connection delivers.
		p.wg.Add(1)
		go func() { defer p.wg.Done(); p.resync() }()
	}})
	if err != nil {
		p.log.Error("mcp: upstream not reached", "err", err)
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the auditrail server cannot be reached: " + err.Error()}
	}
	p.up = up
	return up, nil
}

func (p *proxy) known(name string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	_, ok := p.tools[name]
	return ok
}

// resync lists the upstream tools again after it said they changed.
func (p *proxy) resync() {
	p.mu.Lock()
	up := p.up
	p.mu.Unlock()
	if up == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := p.syncFrom(ctx, up); err != nil && !p.isClosed() {
		p.log.Warn("mcp: upstream tools not listed again", "err", err)
	}
}

// sync makes the served tools the upstream's.
func (p *proxy) sync(ctx context.Context, req mcp.Request) error {
	up, err := p.upstream(ctx, req)
	if err != nil {
		return err
	}
	return p.syncFrom(ctx, up)
}

func (p *proxy) syncFrom(ctx context.Context, up *mcp.ClientSession) error {
	p.syncing.Lock()
	defer p.syncing.Unlock()
	var tools []*mcp.Tool
	for t, err := range up.Tools(ctx, nil) {
		if err != nil {
			return err
		}
		tools = append(tools, t)
	}
	for _, t := range tools {
		if t.InputSchema == nil {
			t.InputSchema = map[string]any{"type": "object"}
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	setTools(p.srv, p.tools, tools, p.call)
	return nil
}

// call passes a tools/call upstream as it is (AUTHORIZATION_REQUIRED
// asked of the client as the endpoint asks it: authorize.go).
func (p *proxy) call(name string) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if r := declinedAuthorization(req.Params); r != nil {
			return r, nil
		}
		up, err := p.upstream(ctx, req)
		if err != nil {
			return nil, err
		}
		var args any
		if len(req.Params.Arguments) > 0 {
			args = req.Params.Arguments
		}
		res, err := up.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil {
			return nil, fmt.Errorf("upstream: %w", err)
		}
		// The upstream session does not show URLs (it is no user's): the
		// proxy asks its own client, as the endpoint would.
		if execution, ar := authorizationOf(res); ar != nil {
			if ask := askAuthorization(req.Session, req.Params, execution, ar); ask != nil {
				return ask, nil
			}
		}
		return res, nil
	}
}
