package hookproxy

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// hookStats are the counters of one hook (all its points and revisions).
type hookStats struct {
	calls, failures, breakerOpen atomic.Uint64

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
		s = &hookStats{}
		p.hooks[id] = s
	}
	return s
}

// Health is the outcome of a call to a hook server's GET /health.
type Health struct {
	At         time.Time
	OK         bool
	HTTPStatus int
	// Failure is what a caller may see (FailureUnreachable, a timeout or
	// a status); the detail goes to the operator log.
	Failure string
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
	if err == nil {
		_, err = io.Copy(io.Discard, io.LimitReader(resp.Body, p.cfg.MaxResponseBytes))
		resp.Body.Close()
		res.HTTPStatus = resp.StatusCode
	}
	switch {
	case err != nil:
		ce := transportError(ctx, cctx, timeout, res.HTTPStatus, err)
		res.Failure = ce.reason
		p.log.Warn("hook health check failed", "hook", h.Name, "hook_id", h.ID, "failure", ce.reason, "err", err)
	case resp.StatusCode/100 != 2:
		res.Failure = fmt.Sprintf("status %d", resp.StatusCode)
	default:
		res.OK = true
	}
	return res
}
