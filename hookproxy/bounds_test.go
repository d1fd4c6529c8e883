package hookproxy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/auditrail/auditrail/internal/egress"
	"github.com/auditrail/auditrail/internal/testenv"
	"github.com/auditrail/auditrail/schemas/hooksapi"
)

func logTo(b *testenv.SyncBuffer) *slog.Logger { return slog.New(slog.NewTextHandler(b, nil)) }

// rebinding resolves every name to a public address until flipped, then
// to loopback.
type rebinding struct{ flipped atomic.Bool }

func (r *rebinding) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if r.flipped.Load() {
		return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
	}
	return []netip.Addr{netip.MustParseAddr("93.184.216.34")}, nil
}

func (r *rebinding) LookupSRV(context.Context, string, string, string) (string, []*net.SRV, error) {
	return "", nil, fmt.Errorf("no SRV")
}

// Hook servers on loopback, private and metadata addresses are refused
// when the connection is made; the caller sees a generic failure, the
// operator log the detail; a refusal is not retried.
func TestEgressRefusedAtDial(t *testing.T) {
	f := newFakeHook(t, "ok")
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(f.srv.URL, "http://"))
	rb := &rebinding{}
	guard, err := egress.New(egress.Config{Mode: egress.ModeStrict, Resolver: rb}, nil)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, endpoint string
	}{
		{"loopback", f.srv.URL},
		{"nats port", "http://127.0.0.1:4222"},
		{"mapped loopback", "http://[::ffff:127.0.0.1]:" + port},
		{"metadata", "http://169.254.169.254"},
		{"private", "http://10.0.0.1"},
		{"rebound name", "http://rebind.example.com:" + port},
	}
	// Configure-time the name is public; when dialled it is loopback.
	if err := guard.CheckURL(context.Background(), "http://rebind.example.com:"+port); err != nil {
		t.Fatalf("configure-time check: %v", err)
	}
	rb.flipped.Store(true)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var logs testenv.SyncBuffer
			cfg := DefaultConfig()
			cfg.Egress = guard
			p := New(cfg, logTo(&logs))
			defer p.Close()
			res := p.Pre(context.Background(), []Hook{hook("h", tc.endpoint, FailClosed)}, preReq())
			call := res.Calls[0]
			if res.Allowed || call.Failure != FailureUnreachable || call.Attempts != 1 {
				t.Fatalf("refused endpoint: allowed %v, call %+v", res.Allowed, call)
			}
			for _, leak := range []string{"127.0.0.1", "169.254", "10.0.0.1", "refused", "4222", port} {
				if strings.Contains(call.Failure+res.Message, leak) {
					t.Fatalf("caller sees %q: %q / %q", leak, call.Failure, res.Message)
				}
			}
			if !strings.Contains(logs.String(), " address") || !strings.Contains(logs.String(), "hook call failed") {
				t.Fatalf("operator log lacks the detail: %s", logs.String())
			}
		})
	}
	if n := f.calls.Load(); n != 0 {
		t.Fatalf("the loopback server was called %d times", n)
	}
}

// A closed port: the caller sees "endpoint not reachable", not the
// dialler's "connection refused 127.0.0.1:port".
func TestUnreachableIsGeneric(t *testing.T) {
	var logs testenv.SyncBuffer
	p := New(testConfig(), logTo(&logs))
	defer p.Close()
	u := closedURL(t)
	h := hook("h", u, FailClosed)
	h.MaxAttempts = 2
	res := p.Pre(context.Background(), []Hook{h}, preReq())
	call := res.Calls[0]
	if call.Failure != FailureUnreachable || call.Attempts != 2 {
		t.Fatalf("call %+v", call)
	}
	host := strings.TrimPrefix(u, "http://")
	if strings.Contains(res.Message, host) || strings.Contains(res.Message, "connection refused") {
		t.Fatalf("denial leaks the detail: %q", res.Message)
	}
	if !strings.Contains(logs.String(), "connection refused") || !strings.Contains(logs.String(), host) {
		t.Fatalf("operator log lacks the detail: %s", logs.String())
	}
}

// One deadline covers the body: a server that sends its headers at once
// and then trickles the body is cut off at the point's timeout.
func TestDeadlineCoversBody(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
		fmt.Fprint(w, `{"code":`)
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	p := New(testConfig(), nil)
	defer p.Close()
	h := hook("slow-body", srv.URL, FailOpen)
	h.MaxAttempts = 1
	start := time.Now()
	res := p.Pre(context.Background(), []Hook{h}, preReq())
	took := time.Since(start)
	call := res.Calls[0]
	if !strings.HasPrefix(call.Failure, "timeout after 150ms") || call.FailureModeApplied != "fail_open" {
		t.Fatalf("slow body: %+v", call)
	}
	if took > time.Second {
		t.Fatalf("a 150 ms deadline took %s", took)
	}
}

// Answers above 1 MiB fail (and the failure mode decides); 1 MiB passes.
func TestAnswerCap(t *testing.T) {
	answer := func(n int) string {
		head, tail := `{"code":"OK","pad":"`, `"}`
		return head + strings.Repeat("x", n-len(head)-len(tail)) + tail
	}
	for _, tc := range []struct {
		size int
		ok   bool
	}{{MaxResponseBytes, true}, {MaxResponseBytes + 1, false}, {8 << 20, false}} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, answer(tc.size)) }))
		for _, mode := range []FailureMode{FailOpen, FailClosed} {
			p := New(testConfig(), nil)
			h := hook("big", srv.URL, mode)
			h.Points[Pre] = PointConfig{Path: "/pre", Timeout: 5 * time.Second, FailureMode: mode}
			res := p.Pre(context.Background(), []Hook{h}, preReq())
			call := res.Calls[0]
			if tc.ok {
				if !res.Allowed || call.Failure != "" {
					t.Errorf("%d bytes: %+v", tc.size, call)
				}
			} else if call.Failure != "answer larger than 1048576 bytes" || call.Attempts != 1 || res.Allowed != (mode == FailOpen) {
				t.Errorf("%d bytes, %s: allowed %v, %+v", tc.size, mode, res.Allowed, call)
			}
			p.Close()
		}
		srv.Close()
	}
}

// A configuration that asks for 50 attempts and an hour of back-off gets
// at most MaxAttempts calls, MaxBackoff apart at most.
func TestRetriesBounded(t *testing.T) {
	f := newFakeHook(t, "5xx")
	p := New(testConfig(), nil)
	defer p.Close()
	h := hook("r", f.srv.URL, FailClosed)
	h.MaxAttempts, h.Backoff = 50, time.Millisecond
	res := p.Pre(context.Background(), []Hook{h}, preReq())
	if res.Calls[0].Attempts != MaxAttempts || f.calls.Load() != MaxAttempts {
		t.Fatalf("%d attempts recorded, %d made; want %d", res.Calls[0].Attempts, f.calls.Load(), MaxAttempts)
	}
	// The back-off is capped: a 1 h back-off waits at most MaxBackoff
	// (plus jitter) before the second attempt; cancelling ends the wait.
	h.MaxAttempts, h.Backoff = 2, time.Hour
	ctx, cancel := context.WithTimeout(context.Background(), MaxBackoff*3/2)
	defer cancel()
	start := time.Now()
	res = p.Pre(ctx, []Hook{h}, preReq())
	if took := time.Since(start); took > MaxBackoff*13/10 || res.Calls[0].Attempts != 2 {
		t.Fatalf("back-off of 1 h: %d attempts in %s", res.Calls[0].Attempts, took)
	}
}

func TestAccessDecisionRecord(t *testing.T) {
	catalog := map[string]hooksapi.ToolkitInfo{
		"Docs": {Tools: map[string][]hooksapi.VersionInfo{"Read": {{Version: "1"}}, "Edit": {{Version: "1"}}}},
	}
	allow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, `{}`) }))
	defer allow.Close()
	deny := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, `{"deny":{"Docs":["Edit"]}}`) }))
	defer deny.Close()
	mk := func(name, url string, prio int) Hook {
		h := hook(name, url, FailClosed)
		h.Priority = prio
		h.Points = map[Point]PointConfig{Access: {Path: "/access", Timeout: time.Second, FailureMode: FailClosed}}
		return h
	}
	p := New(testConfig(), nil)
	defer p.Close()
	d := p.Access(context.Background(), []Hook{mk("first", allow.URL, 1), mk("censor", deny.URL, 2)}, "u1", catalog)
	if by, ok := d.HiddenBy("Docs", "Edit"); !ok || by != "censor" {
		t.Fatalf("hidden by %q %v", by, ok)
	}
	if _, ok := d.HiddenBy("Docs", "Read"); ok {
		t.Fatal("Read reported hidden")
	}
	rec := d.Record("Docs", "Edit", false)
	if len(rec) != 2 || rec[0].Decision != "allow" || rec[1].Decision != "deny" || rec[1].HookName != "censor" ||
		rec[1].Cached || rec[1].Attempts != 1 || !strings.Contains(rec[1].ErrorMessage, "Docs.Edit") {
		t.Fatalf("record of a refused execution: %+v", rec)
	}
	if d.Calls[1].Decision != "allow" {
		t.Fatal("Record changed the decision's own calls")
	}
	rec = d.Record("Docs", "Read", true)
	if rec[0].Decision != "allow" || rec[1].Decision != "allow" || !rec[0].Cached || !rec[1].Cached || rec[1].Attempts != 0 || rec[1].LatencyMS != 0 {
		t.Fatalf("record of an allowed, cached execution: %+v", rec)
	}
	// A failing hook that fails closed hides everything: it is the refuser.
	dead := mk("dead", closedURL(t), 3)
	dead.MaxAttempts = 1
	d = p.Access(context.Background(), []Hook{mk("first", allow.URL, 1), dead}, "u1", catalog)
	if by, _ := d.HiddenBy("Docs", "Read"); by != "dead" {
		t.Fatalf("fail-closed hider %q", by)
	}
	if rec := d.Record("Docs", "Read", false); rec[1].Decision != "deny" || rec[1].Failure != FailureUnreachable {
		t.Fatalf("fail-closed record %+v", rec)
	}
}

func TestHealthAndStatus(t *testing.T) {
	var healthAuth atomic.Value
	healthAuth.Store("")
	var status atomic.Int64
	status.Store(http.StatusOK)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/health":
			healthAuth.Store(r.Header.Get("Authorization"))
			w.WriteHeader(int(status.Load()))
		default:
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	var logs testenv.SyncBuffer
	p := New(testConfig(), logTo(&logs))
	defer p.Close()
	h := hook("hs", srv.URL, FailOpen)
	h.MaxAttempts, h.ConsecutiveFailures = 1, 2
	if _, ok := p.HookStatus(h.ID); ok {
		t.Fatal("status of a hook never seen")
	}
	if hl := p.CheckHealth(context.Background(), h); !hl.OK || hl.HTTPStatus != 200 || healthAuth.Load() != "Bearer tok-hs" {
		t.Fatalf("health %+v, auth %v", hl, healthAuth.Load())
	}
	status.Store(http.StatusInternalServerError)
	if hl := p.CheckHealth(context.Background(), h); hl.OK || hl.Failure != "status 500" {
		t.Fatalf("failing health %+v", hl)
	}
	for i := 0; i < 3; i++ {
		p.Pre(context.Background(), []Hook{h}, preReq())
	}
	st, ok := p.HookStatus(h.ID)
	if !ok || st.Calls != 2 || st.Failures != 3 || st.BreakerOpen != 1 || st.Breakers[Pre].State != "open" ||
		st.LastFailure != FailureBreakerOpen || st.Health == nil || st.Health.OK {
		t.Fatalf("status %+v", st)
	}
	dead := hook("dead", closedURL(t), FailOpen)
	if hl := p.CheckHealth(context.Background(), dead); hl.OK || hl.Failure != FailureUnreachable {
		t.Fatalf("closed port health %+v", hl)
	}
	strict := New(DefaultConfig(), nil)
	defer strict.Close()
	if hl := strict.CheckHealth(context.Background(), h); hl.OK || hl.Failure != FailureUnreachable {
		t.Fatalf("health of a refused address %+v", hl)
	}
}

func TestConfigValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	for _, mut := range []func(*Config){
		func(c *Config) { c.MaxResponseBytes = MaxResponseBytes + 1 },
		func(c *Config) { c.MaxResponseBytes = 0 },
		func(c *Config) { c.MaxIdleConnsPerHook = 0 },
	} {
		c := DefaultConfig()
		mut(&c)
		if err := c.Validate(); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%+v: %v", c, err)
		}
	}
	// New never raises the answer cap above 1 MiB.
	if p := New(Config{MaxResponseBytes: 8 << 20}, nil); p.cfg.MaxResponseBytes != MaxResponseBytes || p.cfg.Egress.Mode() != egress.ModeStrict {
		t.Fatalf("New: %+v", p.cfg)
	}
}
