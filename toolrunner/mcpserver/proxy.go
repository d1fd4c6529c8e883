package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Dialer opens the upstream session of a proxy as the given client (the
// downstream client's clientInfo, so that executions record the program
// that really asked), with the given options.
type Dialer func(ctx context.Context, client *mcp.Implementation, opts *mcp.ClientOptions) (*mcp.ClientSession, error)

// ErrRedirected is the error of a request that the endpoint answered with
// a redirect: HTTPDialer's client follows none, so that the credential
// goes to the endpoint given and nowhere else.
var ErrRedirected = errors.New("the server answered with a redirect, which is not followed")

// HTTPDialer dials the project's streamable HTTP endpoint with a bearer
// key; user, when set, is sent as Auditrail-User-Id. Its client (hc, or
// the default one) follows no redirect (a redirect is the error
// ErrRedirected), and the key and user go only to the endpoint's scheme,
// host and port.
func HTTPDialer(endpoint, key, user string, hc *http.Client) Dialer {
	if hc == nil {
		hc = http.DefaultClient
	}
	var origin string
	if u, err := url.Parse(endpoint); err == nil {
		origin = u.Scheme + "://" + u.Host
	}
	return func(ctx context.Context, client *mcp.Implementation, opts *mcp.ClientOptions) (*mcp.ClientSession, error) {
		hc := *hc
		hc.Transport = authTransport{base: hc.Transport, origin: origin, key: key, user: user}
		hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
		return mcp.NewClient(client, opts).Connect(ctx, &mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: &hc}, nil)
	}
}

// bare is u without credentials, query or fragment (what a message may
// show).
func bare(u *url.URL) string {
	return (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path}).String()
}

// authTransport adds the credential to the requests to origin only, and
// makes a redirect an error (ErrRedirected) rather than an answer.
type authTransport struct {
	base              http.RoundTripper
	origin, key, user string
}

func (a authTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	if a.origin != "" && strings.EqualFold(r.URL.Scheme+"://"+r.URL.Host, a.origin) {
		r.Header.Set("Authorization", "Bearer "+a.key)
		if a.user != "" {
			r.Header.Set(HeaderUserID, a.user)
		}
	} else {
		r.Header.Del("Authorization")
		r.Header.Del(HeaderUserID)
	}
	base := a.base
	if base == nil {
		base = http.DefaultTransport
	}
	resp, err := base.RoundTrip(r)
	if err != nil || resp.StatusCode < 300 || resp.StatusCode > 399 || resp.StatusCode == http.StatusNotModified {
		return resp, err
	}
	_ = resp.Body.Close()
	to := "elsewhere"
	if loc, err := resp.Location(); err == nil {
		to = bare(loc)
	}
	return nil, fmt.Errorf("%w: %s answered %d, to %s; give the address to use with --url, if it is to be trusted with the key",
		ErrRedirected, bare(r.URL), resp.StatusCode, to)
}

// proxy is an MCP server whose tools are those of an upstream session.
type proxy struct {
	dial Dialer
	log  *slog.Logger
	srv  *mcp.Server
	// syncing serializes syncs.
	syncing sync.Mutex
	// wg counts the resyncs and the watchers of upstream sessions; Add
	// happens under wmu while !stopping, so that none follows close's Wait.
	wg       sync.WaitGroup
	wmu      sync.Mutex
	stopping bool

	mu     sync.Mutex
	up     *upstream
	closed bool
	tools  map[string]string // name -> JSON, as registered
}

// upstream is one upstream session; ended is closed when it has ended
// (the server closed it: idle, restarted).
type upstream struct {
	cs    *mcp.ClientSession
	ended chan struct{}
}

func (u *upstream) hasEnded() bool {
	select {
	case <-u.ended:
		return true
	default:
		return false
	}
}

// NewProxy returns an MCP server (for stdio) that serves the tools of the
// upstream session dial opens at the client's first tools request, with
// the client's own clientInfo. Every call goes upstream as it is; a change
// of the upstream list is passed on as notifications/tools/list_changed.
// An upstream session that the server ended (idle past its timeout, a
// restart) is opened again, and the request that met its end is sent
// once more. Close the upstream with the returned func.
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
	p.wmu.Lock()
	p.stopping = true
	p.wmu.Unlock()
	p.mu.Lock()
	p.closed = true
	up := p.up
	p.up = nil
	p.mu.Unlock()
	var err error
	if up != nil {
		err = up.cs.Close()
	}
	p.wg.Wait()
	return err
}

// spawn runs f in a goroutine that close waits for, unless the proxy is
// closing. It takes wmu only (not mu: the upstream's notifications call it
// while mu may be held by a dial that waits for the same connection).
func (p *proxy) spawn(f func()) {
	p.wmu.Lock()
	defer p.wmu.Unlock()
	if p.stopping {
		return
	}
	p.wg.Add(1)
	go func() { defer p.wg.Done(); f() }()
}

// upstream returns the upstream session, opened (again, when the last one
// ended) as the client of req.
func (p *proxy) upstream(ctx context.Context, req mcp.Request) (*upstream, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the proxy is closing"}
	}
	if p.up != nil && !p.up.hasEnded() {
		return p.up, nil
	}
	if p.up != nil {
		_ = p.up.cs.Close() // ended: releases what is left
		p.up = nil
	}
	client := &mcp.Implementation{Name: "auditrail-mcp", Version: "(unknown)"}
	if ss, ok := req.GetSession().(*mcp.ServerSession); ok {
		if ip := ss.InitializeParams(); ip != nil && ip.ClientInfo != nil {
			client = &mcp.Implementation{Name: ip.ClientInfo.Name, Version: ip.ClientInfo.Version}
		}
	}
	cs, err := p.dial(ctx, client, &mcp.ClientOptions{ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
		// Not in the notification's goroutine: listing waits for an
		// answer that the same connection delivers.
		p.spawn(p.resync)
	}})
	if err != nil {
		p.log.Error("mcp: upstream not reached", "err", err)
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the auditrail server cannot be reached: " + err.Error()}
	}
	u := &upstream{cs: cs, ended: make(chan struct{})}
	p.spawn(func() { _ = cs.Wait(); close(u.ended) })
	p.up = u
	return u, nil
}

// drop forgets u if it is still the upstream session.
func (p *proxy) drop(u *upstream) {
	p.mu.Lock()
	if p.up == u {
		p.up = nil
	}
	p.mu.Unlock()
	_ = u.cs.Close()
}

// do runs f on the upstream session; when the session turns out to have
// ended (the server no longer knows it: idle past its timeout, restarted),
// it opens a new one and runs f once more.
func (p *proxy) do(ctx context.Context, req mcp.Request, f func(*mcp.ClientSession) error) error {
	u, err := p.upstream(ctx, req)
	if err != nil {
		return err
	}
	err = f(u.cs)
	if err == nil || ctx.Err() != nil || !(errors.Is(err, mcp.ErrSessionMissing) || errors.Is(err, mcp.ErrConnectionClosed) || u.hasEnded()) {
		return err
	}
	p.log.Info("mcp: the upstream session ended; opening a new one", "err", err)
	p.drop(u)
	if u, err = p.upstream(ctx, req); err != nil {
		return err
	}
	return f(u.cs)
}

// rpcErr is err as a JSON-RPC error for the client: the upstream's own
// JSON-RPC error as it is, anything else an internal error.
func rpcErr(err error) error {
	var je *jsonrpc.Error
	if err == nil || errors.As(err, &je) {
		return err
	}
	return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "upstream: " + err.Error()}
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
	if err := p.syncFrom(ctx, up.cs); err != nil && !p.isClosed() {
		p.log.Warn("mcp: upstream tools not listed again", "err", err)
	}
}

// sync makes the served tools the upstream's.
func (p *proxy) sync(ctx context.Context, req mcp.Request) error {
	return rpcErr(p.do(ctx, req, func(cs *mcp.ClientSession) error { return p.syncFrom(ctx, cs) }))
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
		var args any
		if len(req.Params.Arguments) > 0 {
			args = req.Params.Arguments
		}
		var res *mcp.CallToolResult
		err := p.do(ctx, req, func(cs *mcp.ClientSession) error {
			var err error
			res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
			return err
		})
		if err != nil {
			return nil, rpcErr(err)
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
