package hookproxy

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"
)

type observed struct{ point, outcome, breaker string }

type observer struct {
	mu       sync.Mutex
	calls    []observed
	failOpen []string
}

func (o *observer) HookCall(point, outcome, breaker string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.calls = append(o.calls, observed{point, outcome, breaker})
}

func (o *observer) HookFailOpen(point string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.failOpen = append(o.failOpen, point)
}

// take returns what was observed since the last take.
func (o *observer) take() ([]observed, []string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	c, f := o.calls, o.failOpen
	o.calls, o.failOpen = nil, nil
	return c, f
}

// The observer sees each call with its outcome and the breaker's state
// after it, through a breaker that opens and recovers; OpenBreakers counts
// the open one by point.
func TestObserver(t *testing.T) {
	p := New(testConfig(), nil)
	obs := &observer{}
	p.Observe(obs)
	f := newFakeHook(t, "5xx")
	h := hook("b", f.srv.URL, FailClosed)
	h.MaxAttempts, h.ConsecutiveFailures, h.OpenFor = 1, 2, 200*time.Millisecond
	ctx := context.Background()
	for _, step := range []struct {
		name     string
		mode     string
		failure  FailureMode
		sleep    time.Duration
		want     observed
		failOpen []string
		open     int
	}{
		{"first failure", "5xx", FailClosed, 0, observed{"pre", OutcomeFailedClosed, "closed"}, nil, 0},
		{"second failure trips", "5xx", FailClosed, 0, observed{"pre", OutcomeFailedClosed, "open"}, nil, 1},
		{"refused while open", "5xx", FailClosed, 0, observed{"pre", OutcomeFailedClosed, "open"}, nil, 1},
		{"fail open while open", "5xx", FailOpen, 0, observed{"pre", OutcomeFailedOpen, "open"}, []string{"pre"}, 1},
		{"half-open success closes", "ok", FailClosed, 250 * time.Millisecond, observed{"pre", OutcomeAllow, "closed"}, nil, 0},
		{"denial", "deny", FailClosed, 0, observed{"pre", OutcomeDeny, "closed"}, nil, 0},
	} {
		time.Sleep(step.sleep)
		f.mode.Store(step.mode)
		h.Points[Pre] = PointConfig{Path: "/pre", Timeout: 150 * time.Millisecond, FailureMode: step.failure}
		p.Pre(ctx, []Hook{h}, preReq())
		calls, failOpen := obs.take()
		if len(calls) != 1 || calls[0] != step.want || !slices.Equal(failOpen, step.failOpen) {
			t.Fatalf("%s: observed %v, fail-open %v; want %v, %v", step.name, calls, failOpen, step.want, step.failOpen)
		}
		if got := p.OpenBreakers(); got[Pre] != step.open || got[Post] != 0 || got[Access] != 0 {
			t.Fatalf("%s: open breakers %v, want %d at pre", step.name, got, step.open)
		}
	}
}
