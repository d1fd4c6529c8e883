package hookproxy

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"
)

// hookSet is the control plane's list of existing hooks as a test keeps it.
type hookSet struct {
	mu  sync.Mutex
	ids map[string]bool
}

func (s *hookSet) set(id string, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ok {
		s.ids[id] = true
	} else {
		delete(s.ids, id)
	}
}

func (s *hookSet) existing() (map[string]bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]bool, len(s.ids))
	for id := range s.ids {
		out[id] = true
	}
	return out, nil
}

// entries is what the proxy keeps: point states and per-hook counters.
func (p *Proxy) entries() (states, hooks int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.states), len(p.hooks)
}

// Hooks created, called, health-checked and deleted in a loop: the proxy
// keeps the state of the live ones only, and its memory does not grow with
// the number of hooks ever created.
func TestDeletedHooksForgotten(t *testing.T) {
	f := newFakeHook(t, "ok")
	live := &hookSet{ids: map[string]bool{}}
	cfg := testConfig()
	cfg.Existing, cfg.SweepEvery = live.existing, time.Nanosecond
	p := New(cfg, nil)
	defer p.Close()

	keep := hook("kept", f.srv.URL, FailClosed)
	live.set(keep.ID, true)
	if res := p.Pre(context.Background(), []Hook{keep}, preReq()); !res.Allowed {
		t.Fatalf("kept hook denied: %+v", res)
	}
	for i := 0; i < 300; i++ {
		h := hook(fmt.Sprintf("h%d", i), f.srv.URL, FailClosed)
		live.set(h.ID, true)
		if res := p.Pre(context.Background(), []Hook{h}, preReq()); !res.Allowed {
			t.Fatalf("hook %d denied: %+v", i, res)
		}
		p.CheckHealth(context.Background(), h)
		live.set(h.ID, false) // deleted in the control plane
		if states, hooks := p.entries(); states > 6 || hooks > 3 {
			t.Fatalf("after %d hooks created and deleted the proxy keeps %d point states and %d hooks", i+1, states, hooks)
		}
	}
	if _, ok := p.HookStatus(keep.ID); !ok {
		t.Fatal("the live hook's counters were forgotten")
	}
	if st, _ := p.HookStatus(keep.ID); st.Calls != 1 {
		t.Fatalf("the live hook's counters were reset: %+v", st)
	}
	time.Sleep(time.Millisecond)
	p.Retain(func(id string) bool { return id == keep.ID })
	if states, hooks := p.entries(); states != 1 || hooks != 1 {
		t.Fatalf("after the last sweep: %d point states, %d hooks; want the kept hook's 1 and 1", states, hooks)
	}
	// A deleted hook called again (a stale list) starts afresh.
	p.Retain(func(string) bool { return false })
	if _, ok := p.HookStatus(keep.ID); ok {
		t.Fatal("Retain kept a hook it was told to forget")
	}
}

// Without Existing nothing is forgotten (and nothing is asked).
func TestNoSweepWithoutExisting(t *testing.T) {
	f := newFakeHook(t, "ok")
	p := New(testConfig(), nil)
	defer p.Close()
	for i := 0; i < 5; i++ {
		p.Pre(context.Background(), []Hook{hook(fmt.Sprintf("h%d", i), f.srv.URL, FailClosed)}, preReq())
	}
	if _, hooks := p.entries(); hooks != 5 {
		t.Fatalf("%d hooks kept, want 5", hooks)
	}
}
