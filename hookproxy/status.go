package hookproxy

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/auditrail/auditrail/schemas/hooksapi"
)

// hookStats are the counters of one hook (all its points and revisions).
type hookStats struct {
	calls, failures, breakerOpen atomic.Uint64
	// born is when this proxy first made state for the hook.
	born time.Time

	mu            sync.Mutex
	lastFailure   string
	lastFailureAt time.Time
	health        *Health
}

func (s *hookStats) failed(reason string, at time.Time) {
	s.mu.Lock()
	s.lastFailure, s.lastFailureAt = reason, at.UTC()
	s.mu.Unlock()
}

// statsOf returns the counters of a hook; p.mu is held.
func (p *Proxy) statsOf(id string) *hookStats {
	s, ok := p.hooks[id]
	if !ok {
		s = &hookStats{born: time.Now()}
		p.hooks[id] = s
	}
	return s
}

// Health is the outcome of a call to a hook server's GET /health, read as
// both contracts define it: a 200 is healthy unless its status says
// degraded (healthy, with a warning) or unhealthy; a 500 or 503 is
// unhealthy; any other answer, or none, is a failure.
type Health struct {
	At time.Time
	// OK: the server is healthy or degraded.
	OK bool
	// Status is healthy, degraded or unhealthy; empty when the server did
	// not answer, or answered another status.
	Status     string
	HTTPStatus int
	// Failure is what a caller may see (FailureUnreachable, a timeout, a
	// status, "unhealthy" or "degraded"); the detail goes to the operator log.
	Failure string
}

// Health statuses.
const (
	HealthHealthy   = string(hooksapi.Healthy)
	HealthDegraded  = string(hooksapi.Degraded)
	HealthUnhealthy = string(hooksapi.Unhealthy)
)

// healthOf reads an answer of GET /health into res.
func healthOf(res *Health, status int, body []byte) {
	var hr hooksapi.HealthResponse
	said := ""
	if json.Unmarshal(body, &hr) == nil && hr.Status != nil {
		said = string(*hr.Status)
	}
	switch {
	case status/100 == 2 && said == HealthUnhealthy:
		res.Status, res.Failure = HealthUnhealthy, "unhealthy"
	case status/100 == 2 && said == HealthDegraded:
		res.OK, res.Status, res.Failure = true, HealthDegraded, "degraded"
	case status/100 == 2:
		// Healthy, or a server that says it otherwise ("ok").
		res.OK, res.Status = true, HealthHealthy
	case status == http.StatusInternalServerError || status == http.StatusServiceUnavailable:
		res.Status, res.Failure = HealthUnhealthy, fmt.Sprintf("status %d", status)
	default:
		res.Failure = fmt.Sprintf("status %d", status)
	}
}

// BreakerStatus is the circuit breaker of one point.
type BreakerStatus struct {
	State               string // closed, half-open, open
	ConsecutiveFailures uint32
}

// HookStatus is what this proxy knows of a hook.
type HookStatus struct {
	Calls, Failures, BreakerOpen uint64
	LastFailure                  string
	LastFailureAt                time.Time
	Breakers                     map[Point]BreakerStatus
	Health                       *Health
}

// HookStatus returns the counters, breakers and last health check of a
// hook; false when this proxy has neither called nor checked it.
func (p *Proxy) HookStatus(id string) (HookStatus, bool) {
	p.mu.Lock()
	s, ok := p.hooks[id]
	out := HookStatus{Breakers: map[Point]BreakerStatus{}}
	for k, st := range p.states {
		if k.id == id {
			c := st.breaker.Counts()
			out.Breakers[k.point] = BreakerStatus{State: st.breaker.State().String(), ConsecutiveFailures: c.ConsecutiveFailures}
		}
	}
	p.mu.Unlock()
	if !ok {
		return out, false
	}
	out.Calls, out.Failures, out.BreakerOpen = s.calls.Load(), s.failures.Load(), s.breakerOpen.Load()
	s.mu.Lock()
	out.LastFailure, out.LastFailureAt = s.lastFailure, s.lastFailureAt
	if s.health != nil {
		h := *s.health
		out.Health = &h
	}
	s.mu.Unlock()
	return out, true
}

// CheckHealth calls the hook server's GET /health with the hook's
// authentication, through the same guarded client as its calls, under the
// longest timeout of its points; the result is kept for HookStatus.
func (p *Proxy) CheckHealth(ctx context.Context, h Hook) Health {
	res := Health{At: time.Now().UTC()}
	point, timeout := Point(""), time.Duration(0)
	for _, pt := range []Point{Access, Pre, Post} {
		if pc, ok := h.Points[pt]; ok {
			if point == "" {
				point = pt
			}
			timeout = max(timeout, pc.Timeout)
		}
	}
	if timeout <= 0 {
		timeout = 5 * time.Second
	}
	p.sweep()
	defer func() {
		p.mu.Lock()
		s := p.statsOf(h.ID)
		p.mu.Unlock()
		s.mu.Lock()
		s.health = &res
		s.mu.Unlock()
	}()
	if point == "" {
		res.Failure = FailureConfig
		return res
	}
	st, err := p.state(h, point)
	if err != nil {
		p.log.Warn("hook health: hook not callable", "hook", h.Name, "hook_id", h.ID, "err", err)
		res.Failure = FailureConfig
		return res
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(cctx, http.MethodGet, strings.TrimRight(h.Endpoint, "/")+"/health", nil)
	if err != nil {
		res.Failure = FailureConfig
		return res
	}
	req.Header.Set("User-Agent", st.header.Get("User-Agent"))
	if a := st.header.Get("Authorization"); a != "" {
		req.Header.Set("Authorization", a)
	}
	resp, err := st.client.Do(req)
	var body []byte
	if err == nil {
		body, err = io.ReadAll(io.LimitReader(resp.Body, p.cfg.MaxResponseBytes))
		resp.Body.Close()
		res.HTTPStatus = resp.StatusCode
	}
	if err != nil {
		ce := transportError(ctx, cctx, timeout, res.HTTPStatus, err)
		res.Failure = ce.reason
		p.log.Warn("hook health check failed", "hook", h.Name, "hook_id", h.ID, "failure", ce.reason, "err", err)
		return res
	}
	healthOf(&res, resp.StatusCode, body)
	if res.Failure != "" {
		p.log.Warn("hook health check", "hook", h.Name, "hook_id", h.ID, "http_status", resp.StatusCode, "status", res.Status, "failure", res.Failure)
	}
	return res
}
