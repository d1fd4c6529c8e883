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

	"github.com/auditrail/auditrail/schemas"
	"github.com/auditrail/auditrail/schemas/hooksapi"
)

// Error kinds of a denial, as the tool runner reports them.
const (
	KindCheckFailed = "HOOK_CHECK_FAILED"
	KindRateLimited = "HOOK_RATE_LIMITED"
)

// Config tunes a Proxy.
type Config struct {
	// MaxResponseBytes bounds a hook's answer.
	MaxResponseBytes int64
	// MaxIdleConnsPerHook keeps connections to each hook server warm.
	MaxIdleConnsPerHook int
}

// DefaultConfig: answers up to 1 MiB, 64 idle connections per hook.
func DefaultConfig() Config { return Config{MaxResponseBytes: 1 << 20, MaxIdleConnsPerHook: 64} }

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

	calls, failures, failOpen, failClosed, breakerOpen atomic.Uint64
}

// New returns a proxy.
func New(cfg Config, log *slog.Logger) *Proxy {
	if log == nil {
		log = slog.Default()
	}
	return &Proxy{cfg: cfg, log: log, states: map[stateKey]*pointState{}}
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
	return c.endpoint == o.endpoint && c.timeout == o.timeout && c.cert == o.cert && c.key == o.key && c.ca == o.ca
}

func confOf(h Hook, point Point) pointConf {
	pc := h.Points[point]
	return pointConf{endpoint: h.Endpoint, path: pc.Path, token: h.BearerToken, cert: h.ClientCertPEM, key: h.ClientKeyPEM,
		ca: h.CACertPEM, timeout: pc.Timeout, openFor: h.OpenFor, failures: h.ConsecutiveFailures}
}

// state returns the client and breaker of a hook point, made on first use.
// The point's timeout is the transport's ResponseHeaderTimeout (answers are
// small), so calls need no per-call deadline context: that keeps a call as
// cheap as a bare POST.
func (p *Proxy) state(h Hook, point Point) (*pointState, error) {
	k := stateKey{h.ID, h.Revision, point}
	conf := confOf(h, point)
	p.mu.Lock()
	defer p.mu.Unlock()
	if st, ok := p.states[k]; ok && st.conf == conf {
		return st, nil
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
	// Points of a hook with the same timeout share one client, so that the
	// pre and post calls of an execution reuse the same warm connections.
	var client *http.Client
	for ok, ost := range p.states {
		if ok.id == h.ID && ok.revision == h.Revision && ost.conf.sameTransport(conf) {
			client = ost.client
			break
		}
	}
	if client == nil {
		tr := &http.Transport{
			DialContext:           (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			TLSClientConfig:       tlsCfg,
			MaxIdleConns:          p.cfg.MaxIdleConnsPerHook * 4,
			MaxIdleConnsPerHost:   p.cfg.MaxIdleConnsPerHook,
			IdleConnTimeout:       90 * time.Second,
			ResponseHeaderTimeout: pc.Timeout,
			TLSHandshakeTimeout:   pc.Timeout,
		}
		client = &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	n := uint32(max(1, h.ConsecutiveFailures))
	st := &pointState{
		conf:   conf,
		url:    u,
		header: header,
		client: client,
		breaker: gobreaker.NewCircuitBreaker[struct{}](gobreaker.Settings{
			Name:        h.Name + "/" + string(point),
			MaxRequests: 1,
			Timeout:     h.OpenFor,
			ReadyToTrip: func(c gobreaker.Counts) bool { return c.ConsecutiveFailures >= n },
			OnStateChange: func(_ string, from, to gobreaker.State) {
				p.log.Warn("hook circuit breaker", "hook", h.Name, "point", point, "from", from.String(), "to", to.String())
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

// callError is why a hook call failed.
type callError struct {
	transient bool
	status    int
	reason    string
}

func (e *callError) Error() string { return e.reason }

// outcome is the result of calling one hook at one point.
type outcome struct {
	call schemas.HookCall
	body []byte // the answer, when the call succeeded
}

// invoke calls a hook: retries transient failures, counts the outcome in
// the hook's breaker, and skips the call while the breaker is open. ok is
// false when the hook failed (the caller applies the failure mode).
func (p *Proxy) invoke(ctx context.Context, h Hook, point Point, payload []byte, valid func([]byte) error) (outcome, bool) {
	o := outcome{call: schemas.HookCall{HookID: h.ID, HookName: h.Name, Point: string(point)}}
	start := time.Now()
	st, err := p.state(h, point)
	if err != nil {
		p.failures.Add(1)
		o.call.Failure = err.Error()
		return o, false
	}
	_, err = st.breaker.Execute(func() (struct{}, error) {
		body, err := p.attempts(ctx, h, point, st, payload, valid, &o.call)
		o.body = body
		return struct{}{}, err
	})
	o.call.LatencyMS = float64(time.Since(start).Microseconds()) / 1000
	if err == nil {
		return o, true
	}
	p.failures.Add(1)
	switch {
	case errors.Is(err, gobreaker.ErrOpenState) || errors.Is(err, gobreaker.ErrTooManyRequests):
		p.breakerOpen.Add(1)
		o.call.Failure = "circuit breaker open"
	default:
		o.call.Failure = err.Error()
	}
	return o, false
}

func (p *Proxy) attempts(ctx context.Context, h Hook, point Point, st *pointState, payload []byte, valid func([]byte) error, call *schemas.HookCall) ([]byte, error) {
	pc := h.Points[point]
	attempts := max(1, h.MaxAttempts)
	backoff := h.Backoff
	var last *callError
	for a := 1; a <= attempts; a++ {
		if a > 1 {
			select {
			case <-ctx.Done():
				return nil, &callError{reason: "cancelled: " + ctx.Err().Error()}
			case <-time.After(backoff):
			}
			backoff *= 2
		}
		call.Attempts = a
		p.calls.Add(1)
		body, cerr := p.once(ctx, st, pc, payload)
		if cerr == nil {
			call.HTTPStatus = http.StatusOK
			if err := valid(body); err != nil {
				return nil, &callError{status: http.StatusOK, reason: "malformed answer: " + err.Error()}
			}
			return body, nil
		}
		call.HTTPStatus = cerr.status
		last = cerr
		if !cerr.transient {
			break
		}
	}
	return nil, last
}

func (p *Proxy) once(ctx context.Context, st *pointState, pc PointConfig, payload []byte) ([]byte, *callError) {
	// The request is built from the point's parsed URL and fixed headers:
	// nothing is parsed or canonicalized per call.
	req := (&http.Request{Method: http.MethodPost, URL: st.url, Host: st.url.Host, Header: st.header, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Body: io.NopCloser(bytes.NewReader(payload)), ContentLength: int64(len(payload)),
		GetBody: func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(payload)), nil }}).WithContext(ctx)
	resp, err := st.client.Do(req)
	if err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return nil, &callError{transient: true, reason: fmt.Sprintf("timeout after %s", pc.Timeout)}
		}
		if ctx.Err() != nil {
			return nil, &callError{transient: true, reason: "cancelled: " + ctx.Err().Error()}
		}
		return nil, &callError{transient: true, reason: "connection: " + err.Error()}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, p.cfg.MaxResponseBytes+1))
	if err != nil {
		return nil, &callError{transient: true, status: resp.StatusCode, reason: "reading the answer: " + err.Error()}
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

// applyFailure decides a failed call by the point's failure mode.
func (p *Proxy) applyFailure(h Hook, point Point, call *schemas.HookCall) (allow bool) {
	mode := h.Points[point].FailureMode
	call.FailureModeApplied = string(mode)
	if mode == FailOpen {
		p.failOpen.Add(1)
		call.Decision = "allow"
		return true
	}
	p.failClosed.Add(1)
	call.Decision = "deny"
	return false
}

// DecodePreResponse decodes and checks the answer of a pre hook.
func DecodePreResponse(b []byte) (hooksapi.PreResponse, error) {
	var r hooksapi.PreResponse
	if err := strictDecode(b, &r); err != nil {
		return r, err
	}
	if !r.Code.Valid() {
		return r, fmt.Errorf("code %q is not OK, CHECK_FAILED or RATE_LIMIT_EXCEEDED", r.Code)
	}
	return r, nil
}

// DecodePostResponse decodes and checks the answer of a post hook.
func DecodePostResponse(b []byte) (hooksapi.PostResponse, error) {
	var r hooksapi.PostResponse
	if err := strictDecode(b, &r); err != nil {
		return r, err
	}
	if !r.Code.Valid() {
		return r, fmt.Errorf("code %q is not OK, CHECK_FAILED or RATE_LIMIT_EXCEEDED", r.Code)
	}
	return r, nil
}

// DecodeAccessResponse decodes the answer of an access hook.
func DecodeAccessResponse(b []byte) (hooksapi.AccessResponse, error) {
	var r hooksapi.AccessResponse
	err := strictDecode(b, &r)
	return r, err
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
