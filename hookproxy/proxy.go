package hookproxy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sony/gobreaker/v2"

	"github.com/auditrail/auditrail/internal/egress"
	"github.com/auditrail/auditrail/internal/retry"
	"github.com/auditrail/auditrail/schemas"
	"github.com/auditrail/auditrail/schemas/hooksapi"
)

// Error kinds of a denial, as the tool runner reports them.
const (
	KindCheckFailed = "HOOK_CHECK_FAILED"
	KindRateLimited = "HOOK_RATE_LIMITED"
)

// Bounds of a hook's retries: at most MaxAttempts calls per point and
// execution, waits of at most MaxBackoff between them.
const (
	MaxAttempts = 5
	MaxBackoff  = 5 * time.Second
	// MaxResponseBytes is the largest answer a hook may give.
	MaxResponseBytes = 1 << 20
)

// Failures as callers see them: what a hook server or the network said in
// detail goes to the operator log only, so that the platform cannot be
// used to probe addresses and ports.
const (
	FailureUnreachable = "endpoint not reachable"
	FailureBreakerOpen = "circuit breaker open"
	FailureCancelled   = "cancelled"
	FailureConfig      = "invalid hook configuration"
)

// ErrInvalidConfig is returned by Config.Validate.
var ErrInvalidConfig = errors.New("invalid hook proxy config")

// Config tunes a Proxy.
type Config struct {
	// MaxResponseBytes bounds a hook's answer (1..MaxResponseBytes); a
	// larger answer is a failure of the hook.
	MaxResponseBytes int64
	// MaxIdleConnsPerHook keeps connections to each hook server warm.
	MaxIdleConnsPerHook int
	// Egress refuses hook servers on loopback, private and link-local
	// addresses, checked on every connection (nil: egress.Strict()).
	Egress *egress.Guard
	// Existing, when set, answers the ids of the hooks that still exist
	// (enabled or not): the proxy forgets the clients, breakers and
	// counters of every other hook, so that hooks created and deleted
	// without end cost no memory. It is asked at most every SweepEvery,
	// when the proxy makes new state, never with the proxy's lock held.
	Existing func() (map[string]bool, error)
	// SweepEvery spaces the sweeps (default DefaultSweepEvery).
	SweepEvery time.Duration
}

// Observer counts hook calls (metrics.Registry implements it). Its labels
// are bounded: point is access, pre or post; outcome one of the Outcome…
// constants; breaker the state of the hook point's circuit breaker after
// the call (closed, open, half-open).
type Observer interface {
	HookCall(point, outcome, breaker string)
	HookFailOpen(point string)
}

// The outcomes of a hook call as Observer sees them.
const (
	OutcomeAllow        = "allow"         // the hook answered and let the request on
	OutcomeDeny         = "deny"          // the hook answered and denied
	OutcomeFailedOpen   = "failed_open"   // the call failed, the point fails open: allowed
	OutcomeFailedClosed = "failed_closed" // the call failed, the point fails closed: denied
)

// DefaultSweepEvery is how often, at most, a proxy forgets deleted hooks.
const DefaultSweepEvery = time.Minute

// DefaultConfig: answers up to 1 MiB, 64 idle connections per hook, only
// public addresses.
func DefaultConfig() Config {
	return Config{MaxResponseBytes: MaxResponseBytes, MaxIdleConnsPerHook: 64, Egress: egress.Strict()}
}

// Validate checks the bounds.
func (c Config) Validate() error {
	switch {
	case c.MaxResponseBytes < 1 || c.MaxResponseBytes > MaxResponseBytes:
		return fmt.Errorf("%w: max response bytes %d not in 1..%d", ErrInvalidConfig, c.MaxResponseBytes, MaxResponseBytes)
	case c.MaxIdleConnsPerHook < 1:
		return fmt.Errorf("%w: max idle connections per hook %d below 1", ErrInvalidConfig, c.MaxIdleConnsPerHook)
	case c.SweepEvery < 0:
		return fmt.Errorf("%w: sweep interval %s is negative", ErrInvalidConfig, c.SweepEvery)
	}
	return nil
}

// Stats counts decisions.
type Stats struct {
	Calls         uint64 `json:"calls"`
	Failures      uint64 `json:"failures"`
	FailOpenAllow uint64 `json:"fail_open_allowed"`
	FailClosed    uint64 `json:"fail_closed_denied"`
	BreakerOpen   uint64 `json:"breaker_open"`
}

// Proxy calls hooks. It is safe for concurrent use.
type Proxy struct {
	cfg Config
	log *slog.Logger

	mu     sync.Mutex
	states map[stateKey]*pointState
	hooks  map[string]*hookStats

	// sweeping is held by the one goroutine that sweeps; swept is when
	// the last sweep started (unix nanoseconds).
	sweeping sync.Mutex
	swept    atomic.Int64

	calls, failures, failOpen, failClosed, breakerOpen atomic.Uint64
	obs                                                Observer // nil: none
}

// Observe reports every hook call to o (metrics); call it before the
// proxy is used.
func (p *Proxy) Observe(o Observer) { p.obs = o }

// New returns a proxy. Zero fields of cfg take their defaults; a nil
// Egress refuses every address that is not public.
func New(cfg Config, log *slog.Logger) *Proxy {
	if log == nil {
		log = slog.Default()
	}
	def := DefaultConfig()
	if cfg.MaxResponseBytes <= 0 || cfg.MaxResponseBytes > MaxResponseBytes {
		cfg.MaxResponseBytes = def.MaxResponseBytes
	}
	if cfg.MaxIdleConnsPerHook <= 0 {
		cfg.MaxIdleConnsPerHook = def.MaxIdleConnsPerHook
	}
	if cfg.Egress == nil {
		cfg.Egress = def.Egress
	}
	if cfg.SweepEvery <= 0 {
		cfg.SweepEvery = DefaultSweepEvery
	}
	return &Proxy{cfg: cfg, log: log, states: map[stateKey]*pointState{}, hooks: map[string]*hookStats{}}
}

// Close closes the idle connections of every hook client.
func (p *Proxy) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, st := range p.states {
		st.client.CloseIdleConnections()
	}
}

// Stats returns the counters.
func (p *Proxy) Stats() Stats {
	return Stats{Calls: p.calls.Load(), Failures: p.failures.Load(), FailOpenAllow: p.failOpen.Load(),
		FailClosed: p.failClosed.Load(), BreakerOpen: p.breakerOpen.Load()}
}

// pointState is what a hook point keeps between calls: its HTTP client
// and its circuit breaker, for one revision of the hook.
type pointState struct {
	conf    pointConf
	client  *http.Client
	breaker *gobreaker.CircuitBreaker[struct{}]
	url     *url.URL
	header  http.Header // sent with every call; never modified
	stats   *hookStats
}

type stateKey struct {
	id, revision string
	point        Point
}

// pointConf is what a point's state is built from: a state is rebuilt when
// any of it changes, even if a caller forgot to change the revision.
type pointConf struct {
	endpoint, path, token, cert, key, ca string
	timeout, openFor                     time.Duration
	failures                             int
}

// sameTransport reports whether two points can share a client.
func (c pointConf) sameTransport(o pointConf) bool {
	return c.endpoint == o.endpoint && c.cert == o.cert && c.key == o.key && c.ca == o.ca
}

func confOf(h Hook, point Point) pointConf {
	pc := h.Points[point]
	return pointConf{endpoint: h.Endpoint, path: pc.Path, token: h.BearerToken, cert: h.ClientCertPEM, key: h.ClientKeyPEM,
		ca: h.CACertPEM, timeout: pc.Timeout, openFor: h.OpenFor, failures: h.ConsecutiveFailures}
}

// state returns the client and breaker of a hook point, made on first use.
// Every connection of the client passes the egress guard; the deadline of
// a call is set per call (connect, headers and body).
func (p *Proxy) state(h Hook, point Point) (*pointState, error) {
	k := stateKey{h.ID, h.Revision, point}
	conf := confOf(h, point)
	p.mu.Lock()
	if st, ok := p.states[k]; ok && st.conf == conf {
		p.mu.Unlock()
		return st, nil
	}
	p.mu.Unlock()
	p.sweep()
	p.mu.Lock()
	defer p.mu.Unlock()
	if st, ok := p.states[k]; ok && st.conf == conf {
		return st, nil
	}
	if !h.Contract.Valid() {
		return nil, fmt.Errorf("%w: %s: contract %q is not auditrail or arcade", ErrInvalidHook, h.Name, h.Contract)
	}
	tlsCfg, err := h.tlsConfig()
	if err != nil {
		return nil, err
	}
	pc := h.Points[point]
	u, err := url.Parse(strings.TrimRight(h.Endpoint, "/") + pc.Path)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: endpoint: %v", ErrInvalidHook, h.Name, err)
	}
	header := http.Header{"Content-Type": {"application/json"}, "User-Agent": {"auditrail-hookproxy/1.0"}}
	if h.BearerToken != "" {
		header["Authorization"] = []string{"Bearer " + h.BearerToken}
	}
	// Points of a hook share one client, so that the pre and post calls of
	// an execution reuse the same warm connections.
	var client *http.Client
	for ok, ost := range p.states {
		if ok.id == h.ID && ok.revision == h.Revision && ost.conf.sameTransport(conf) {
			client = ost.client
			break
		}
	}
	if client == nil {
		tr := &http.Transport{
			DialContext:         p.cfg.Egress.Dialer(net.Dialer{KeepAlive: 30 * time.Second}).DialContext,
			TLSClientConfig:     tlsCfg,
			MaxIdleConns:        p.cfg.MaxIdleConnsPerHook * 4,
			MaxIdleConnsPerHost: p.cfg.MaxIdleConnsPerHook,
			IdleConnTimeout:     90 * time.Second,
		}
		client = &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	n := uint32(max(1, h.ConsecutiveFailures))
	st := &pointState{
		conf:   conf,
		url:    u,
		header: header,
		client: client,
		stats:  p.statsOf(h.ID),
		breaker: gobreaker.NewCircuitBreaker[struct{}](gobreaker.Settings{
			Name:        h.Name + "/" + string(point),
			MaxRequests: 1,
			Timeout:     h.OpenFor,
			ReadyToTrip: func(c gobreaker.Counts) bool { return c.ConsecutiveFailures >= n },
			// A request that could not be built says nothing of the hook.
			IsSuccessful: func(err error) bool { _, bad := err.(payloadError); return err == nil || bad },
			OnStateChange: func(_ string, from, to gobreaker.State) {
				p.log.Warn("hook circuit breaker", "hook", h.Name, "hook_id", h.ID, "point", point, "from", from.String(), "to", to.String())
			},
		}),
	}
	// A new revision (or configuration) replaces the state of older ones.
	for old, ost := range p.states {
		if old.id == h.ID && (old.revision != h.Revision || old.point == point) {
			if ost.client != client {
				ost.client.CloseIdleConnections()
			}
			delete(p.states, old)
		}
	}
	p.states[k] = st
	return st, nil
}

// sweep forgets the state and counters of every hook that no longer
// exists, at most once per SweepEvery; one goroutine sweeps, the others go
// on at once.
func (p *Proxy) sweep() {
	if p.cfg.Existing == nil || time.Since(time.Unix(0, p.swept.Load())) < p.cfg.SweepEvery || !p.sweeping.TryLock() {
		return
	}
	defer p.sweeping.Unlock()
	p.swept.Store(time.Now().UnixNano())
	existing, err := p.cfg.Existing()
	if err != nil {
		p.log.Warn("hook proxy: cannot list the existing hooks; nothing forgotten", "err", err)
		return
	}
	start := time.Unix(0, p.swept.Load())
	if n := p.retain(func(id string) bool { return existing[id] }, start); n > 0 {
		p.log.Debug("hook proxy: forgot deleted hooks", "hooks", n)
	}
}

// Retain forgets the clients, breakers and counters of every hook for which
// keep is false, closing their idle connections, and answers how many
// hooks it forgot. A hook called again later starts afresh.
func (p *Proxy) Retain(keep func(id string) bool) int { return p.retain(keep, time.Time{}) }

// retain is Retain, sparing the hooks of which this proxy made state after
// since (a sweep's list of existing hooks may predate a hook just created).
func (p *Proxy) retain(keep func(id string) bool, since time.Time) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	spared := map[string]bool{}
	if !since.IsZero() {
		for id, s := range p.hooks {
			if s.born.After(since) {
				spared[id] = true
			}
		}
	}
	gone := map[string]bool{}
	for id := range p.hooks {
		if !spared[id] && !keep(id) {
			gone[id] = true
		}
	}
	for k := range p.states {
		if !gone[k.id] && !spared[k.id] && !keep(k.id) {
			gone[k.id] = true
		}
	}
	for k, st := range p.states {
		if gone[k.id] {
			st.client.CloseIdleConnections() // clients are shared only within a hook
			delete(p.states, k)
		}
	}
	for id := range gone {
		delete(p.hooks, id)
	}
	return len(gone)
}

// callError is why a hook call failed: reason is what callers see, detail
// (the operator log's) what happened.
type callError struct {
	transient bool
	status    int
	reason    string
	detail    error
}

func (e *callError) Error() string { return e.reason }

// payloadError is a request that could not be encoded.
type payloadError struct{ err error }

func (e payloadError) Error() string { return e.err.Error() }

// outcome is the result of calling one hook at one point.
type outcome struct {
	call       schemas.HookCall
	breaker    string // state of the breaker after the call
	body       []byte // the answer, when the call succeeded
	payloadErr error  // the request could not be built
}

// invoke calls a hook: builds the request (not while the breaker is open),
// retries transient failures, counts the outcome in the hook's breaker. ok
// is false when the hook failed (the caller applies the failure mode).
func (p *Proxy) invoke(ctx context.Context, h Hook, point Point, payload func() ([]byte, error), valid func([]byte) error) (outcome, bool) {
	o := outcome{call: schemas.HookCall{HookID: h.ID, HookName: h.Name, Point: string(point)}}
	start := time.Now()
	st, err := p.state(h, point)
	if err != nil {
		p.failures.Add(1)
		p.log.Warn("hook not callable", "hook", h.Name, "hook_id", h.ID, "point", point, "err", err)
		o.call.Failure = FailureConfig
		o.breaker = gobreaker.StateClosed.String()
		return o, false
	}
	_, err = st.breaker.Execute(func() (struct{}, error) {
		b, err := payload()
		if err != nil {
			return struct{}{}, payloadError{err}
		}
		body, err := p.attempts(ctx, h, point, st, b, valid, &o.call)
		o.body = body
		return struct{}{}, err
	})
	end := time.Now()
	o.breaker = st.breaker.State().String()
	o.call.LatencyMS = float64(end.Sub(start).Microseconds()) / 1000
	if err == nil {
		return o, true
	}
	if pe, ok := err.(payloadError); ok {
		o.payloadErr = pe.err
		return o, false
	}
	p.failures.Add(1)
	st.stats.failures.Add(1)
	switch {
	case errors.Is(err, gobreaker.ErrOpenState) || errors.Is(err, gobreaker.ErrTooManyRequests):
		p.breakerOpen.Add(1)
		st.stats.breakerOpen.Add(1)
		o.call.Failure = FailureBreakerOpen
	default:
		o.call.Failure = err.Error()
		var ce *callError
		if errors.As(err, &ce) {
			p.log.Warn("hook call failed", "hook", h.Name, "hook_id", h.ID, "point", point, "attempts", o.call.Attempts,
				"http_status", ce.status, "failure", ce.reason, "err", ce.detail)
		}
	}
	st.stats.failed(o.call.Failure, end)
	return o, false
}

// retryPolicy is the back-off of a hook's retries, within the bounds.
func retryPolicy(h Hook) retry.Policy {
	return retry.Policy{Initial: min(max(h.Backoff, time.Millisecond), MaxBackoff), Max: MaxBackoff, MaxAttempts: min(max(1, h.MaxAttempts), MaxAttempts)}
}

// attempts calls a hook point up to its MaxAttempts, backing off (with
// jitter, internal/retry) between transient failures. The back-off is
// made only when a first attempt failed, so that a call that succeeds
// costs no more than the call.
func (p *Proxy) attempts(ctx context.Context, h Hook, point Point, st *pointState, payload []byte, valid func([]byte) error, call *schemas.HookCall) ([]byte, error) {
	pc := h.Points[point]
	pol := retryPolicy(h)
	var bo interface{ NextBackOff() time.Duration }
	for {
		call.Attempts++
		p.calls.Add(1)
		st.stats.calls.Add(1)
		b, cerr := p.once(ctx, st, pc, payload)
		if cerr == nil {
			call.HTTPStatus = http.StatusOK
			if err := valid(b); err != nil {
				return nil, &callError{status: http.StatusOK, reason: "malformed answer: " + err.Error()}
			}
			return b, nil
		}
		call.HTTPStatus = cerr.status
		if !cerr.transient || call.Attempts >= pol.MaxAttempts {
			return nil, cerr
		}
		if bo == nil {
			bo = pol.Backoff()
		}
		if !retry.Sleep(ctx, bo.NextBackOff()) {
			return nil, &callError{status: cerr.status, reason: FailureCancelled, detail: ctx.Err()}
		}
	}
}

// once makes one call under one deadline, the point's timeout, that covers
// connecting, the answer's headers and reading its body.
func (p *Proxy) once(ctx context.Context, st *pointState, pc PointConfig, payload []byte) ([]byte, *callError) {
	timeout := pc.Timeout
	if timeout <= 0 {
		timeout = 5 * time.Second
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	// The request is built from the point's parsed URL and fixed headers:
	// nothing is parsed or canonicalized per call.
	req := (&http.Request{Method: http.MethodPost, URL: st.url, Host: st.url.Host, Header: st.header, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Body: io.NopCloser(bytes.NewReader(payload)), ContentLength: int64(len(payload)),
		GetBody: func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(payload)), nil }}).WithContext(cctx)
	// Straight to the transport: redirects are never followed anyway (a
	// 3xx is a failure of the hook), and http.Client would copy the headers
	// of every request for them.
	resp, err := st.client.Transport.RoundTrip(req)
	if err != nil {
		return nil, transportError(ctx, cctx, timeout, 0, err)
	}
	defer resp.Body.Close()
	body, err := readBody(resp, p.cfg.MaxResponseBytes)
	if err != nil {
		return nil, transportError(ctx, cctx, timeout, resp.StatusCode, err)
	}
	switch {
	case resp.StatusCode >= 500:
		return nil, &callError{transient: true, status: resp.StatusCode, reason: fmt.Sprintf("status %d", resp.StatusCode)}
	case resp.StatusCode != http.StatusOK:
		return nil, &callError{status: resp.StatusCode, reason: fmt.Sprintf("status %d (not retried)", resp.StatusCode)}
	case int64(len(body)) > p.cfg.MaxResponseBytes:
		return nil, &callError{status: resp.StatusCode, reason: fmt.Sprintf("answer larger than %d bytes", p.cfg.MaxResponseBytes)}
	}
	return body, nil
}

// readBody reads at most max+1 bytes of an answer (more means too large):
// into one buffer of the announced length when there is one (the usual
// small answer costs one allocation), else as it comes.
func readBody(resp *http.Response, max int64) ([]byte, error) {
	if n := resp.ContentLength; n >= 0 && n <= max {
		body := make([]byte, n)
		if _, err := io.ReadFull(resp.Body, body); err != nil {
			return nil, err
		}
		return body, nil
	}
	return io.ReadAll(io.LimitReader(resp.Body, max+1))
}

// transportError classifies a failed exchange: the caller's context ended,
// the call's deadline passed, the egress guard refused the address (not
// retried), or the server could not be reached.
func transportError(ctx, cctx context.Context, timeout time.Duration, status int, err error) *callError {
	switch {
	case ctx.Err() != nil:
		return &callError{status: status, reason: FailureCancelled, detail: err}
	case errors.Is(cctx.Err(), context.DeadlineExceeded) || isTimeout(err):
		return &callError{transient: true, status: status, reason: fmt.Sprintf("timeout after %s", timeout), detail: err}
	case errors.Is(err, egress.ErrRefused):
		return &callError{status: status, reason: FailureUnreachable, detail: err}
	}
	return &callError{transient: true, status: status, reason: FailureUnreachable, detail: err}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// applyFailure decides a failed call by the point's failure mode.
func (p *Proxy) applyFailure(h Hook, point Point, call *schemas.HookCall) (allow bool) {
	mode := h.Points[point].FailureMode
	call.FailureModeApplied = string(mode)
	if mode == FailOpen {
		p.failOpen.Add(1)
		if p.obs != nil {
			p.obs.HookFailOpen(string(point))
		}
		call.Decision = "allow"
		return true
	}
	p.failClosed.Add(1)
	call.Decision = "deny"
	return false
}

// observe reports a finished call to the observer.
func (p *Proxy) observe(point Point, o outcome, call schemas.HookCall) {
	if p.obs == nil {
		return
	}
	res := OutcomeAllow
	switch {
	case call.Failure != "" && call.Decision == "allow":
		res = OutcomeFailedOpen
	case call.Failure != "":
		res = OutcomeFailedClosed
	case call.Decision == "deny":
		res = OutcomeDeny
	}
	p.obs.HookCall(string(point), res, o.breaker)
}

// OpenBreakers counts the circuit breakers not closed (open or half-open),
// by point, among the hooks the proxy keeps state for.
func (p *Proxy) OpenBreakers() map[Point]int {
	out := map[Point]int{Access: 0, Pre: 0, Post: 0}
	p.mu.Lock()
	defer p.mu.Unlock()
	for k, st := range p.states {
		if st.breaker.State() != gobreaker.StateClosed {
			out[k.point]++
		}
	}
	return out
}

// strictDecode decodes one JSON object; unknown fields are allowed (later
// contract versions may add them), trailing data is not.
func strictDecode(b []byte, v any) error {
	if okAnswer(b) {
		// The common answer, decoded without reflection.
		switch r := v.(type) {
		case *hooksapi.PreResponse:
			r.Code = hooksapi.OK
			return nil
		case *hooksapi.PostResponse:
			r.Code = hooksapi.OK
			return nil
		}
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("not a JSON answer: %v", err)
	}
	return nil
}

// okAnswer reports whether b is exactly {"code":"OK"} (spaces around allowed).
func okAnswer(b []byte) bool {
	return string(bytes.TrimSpace(b)) == `{"code":"OK"}`
}
