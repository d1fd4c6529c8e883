package controlplane

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/google/uuid"

	"github.com/auditrail/auditrail/controlplane/cpstate"
	"github.com/auditrail/auditrail/hookproxy"
	"github.com/auditrail/auditrail/internal/egress"
	"github.com/auditrail/auditrail/internal/testenv"
)

// names answers for a few names and asks the system for the others
// (localhost); the SRV name points at the metadata address.
type names map[string]string

func (n names) LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error) {
	if a, ok := n[host]; ok {
		return []netip.Addr{netip.MustParseAddr(a)}, nil
	}
	return net.DefaultResolver.LookupNetIP(ctx, network, host)
}

func (n names) LookupSRV(_ context.Context, _, _, name string) (string, []*net.SRV, error) {
	if name == "cluster.example.com" {
		return "", []*net.SRV{{Target: "metadata.example.com.", Port: 27017}}, nil
	}
	return "", nil, &net.DNSError{Err: "no such host", Name: name, IsNotFound: true}
}

var testNames = names{"hooks.example.com": "93.184.216.34", "inside.example.com": "127.0.0.1", "metadata.example.com": "169.254.169.254",
	"db.example.com": "93.184.216.35"}

// proxyMonitor is cmd/auditrail's wiring of the hook client, in short.
type proxyMonitor struct{ p *hookproxy.Proxy }

func (m proxyMonitor) CheckHealth(ctx context.Context, h cpstate.Hook, cfg cpstate.HookConfig) HookHealth {
	hk := hookproxy.Hook{ID: h.ID.String(), Name: cfg.Name, Revision: h.UpdatedAt.String(), Endpoint: cfg.Endpoint, BearerToken: cfg.Auth.Token,
		Points: map[hookproxy.Point]hookproxy.PointConfig{}}
	for name, p := range cfg.Points {
		hk.Points[hookproxy.Point(name)] = hookproxy.PointConfig{Path: p.Path, Timeout: time.Duration(p.TimeoutMS) * time.Millisecond}
	}
	r := m.p.CheckHealth(ctx, hk)
	return HookHealth{CheckedAt: r.At, OK: r.OK, Status: r.Status, HTTPStatus: r.HTTPStatus, Failure: r.Failure}
}

func (m proxyMonitor) HookStatus(id uuid.UUID) (HookStatus, bool) {
	st, ok := m.p.HookStatus(id.String())
	out := HookStatus{Calls: st.Calls, Failures: st.Failures, Breakers: map[string]HookBreakerStatus{}}
	if st.Health != nil {
		out.Health = &HookHealth{CheckedAt: st.Health.At, OK: st.Health.OK, Status: st.Health.Status, Failure: st.Health.Failure}
	}
	return out, ok
}

type adminAPI struct {
	t   *testing.T
	app *fiber.App
	key string
}

func (a adminAPI) do(method, path string, body any) (int, map[string]any) {
	a.t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = strings.NewReader(string(b))
	}
	req := httptest.NewRequest(method, path, rd)
	req.Header.Set("Authorization", "Bearer "+a.key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := a.app.Test(req, 30_000)
	if err != nil {
		a.t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

func data(m map[string]any) map[string]any { d, _ := m["data"].(map[string]any); return d }

// newAdmin serves the admin API over a real state bucket, with a guard and
// a real hook client that uses it.
func newAdmin(t *testing.T, mode egress.Mode) (adminAPI, string, string) {
	srv, _, _ := testenv.NATS(t)
	n := newNode(t, srv.ClientURL(), nodeOpts{})
	guard, err := egress.New(egress.Config{Mode: mode, Resolver: testNames}, nil)
	if err != nil {
		t.Fatal(err)
	}
	n.svc.UseEgress(guard)
	proxy := hookproxy.New(hookproxy.Config{Egress: guard}, nil)
	t.Cleanup(proxy.Close)
	n.svc.UseHookMonitor(proxyMonitor{proxy})
	a := adminAPI{t: t, app: n.app, key: bootKey}
	st, org := a.do("POST", "/api/v1/orgs", map[string]any{"name": "acme"})
	if st != 201 {
		t.Fatalf("create org: %d %v", st, org)
	}
	orgID := data(org)["id"].(string)
	st, p := a.do("POST", "/api/v1/orgs/"+orgID+"/projects", map[string]any{"name": "p"})
	if st != 201 {
		t.Fatalf("create project: %d %v", st, p)
	}
	return a, orgID, data(p)["id"].(string)
}

func hookBody(endpoint string) map[string]any {
	return map[string]any{"name": "policy", "endpoint": endpoint, "points": map[string]any{"pre": map[string]any{}},
		"auth": map[string]any{"type": "bearer", "token": "t"}, "timeout_ms": 1000}
}

func TestHookEndpointEgress(t *testing.T) {
	a, org, _ := newAdmin(t, egress.ModeStrict)
	hooks := "/api/v1/orgs/" + org + "/hooks"
	for _, endpoint := range []string{
		"http://127.0.0.1:4222", "http://169.254.169.254", "http://169.254.169.254/latest/meta-data/", "http://10.0.0.1",
		"http://[::ffff:127.0.0.1]:4222", "http://[::1]:8080", "http://0.0.0.0:4222", "http://100.64.0.1",
		"http://localhost:4222", "http://inside.example.com", "http://metadata.example.com",
	} {
		st, body := a.do("POST", hooks, hookBody(endpoint))
		if msg, _ := body["msg"].(string); st != 400 || !strings.HasPrefix(msg, "endpoint: ") {
			t.Errorf("%s: %d %v", endpoint, st, body)
		}
	}
	// A public name is accepted (disabled: no /health call leaves the
	// machine); a patch to a refused address is not.
	pub := hookBody("https://hooks.example.com")
	pub["enabled"] = false
	st, body := a.do("POST", hooks, pub)
	if st != 201 {
		t.Fatalf("public endpoint: %d %v", st, body)
	}
	id := data(body)["id"].(string)
	st, body = a.do("PATCH", hooks+"/"+id, map[string]any{"endpoint": "http://169.254.169.254"})
	if msg, _ := body["msg"].(string); st != 400 || !strings.HasPrefix(msg, "endpoint: ") {
		t.Fatalf("patch to metadata: %d %v", st, body)
	}
	// Retries: schema and validation agree (1..5, back-off 1..5000).
	for _, retries := range []map[string]any{{"max_attempts": 0}, {"max_attempts": 6}, {"max_attempts": 10}, {"backoff_ms": 0}, {"backoff_ms": 10000}} {
		b := hookBody("https://hooks.example.com")
		b["retries"] = retries
		st, body := a.do("POST", hooks, b)
		if msg, _ := body["msg"].(string); st != 400 || !strings.HasPrefix(msg, "retries.") {
			t.Errorf("retries %v: %d %v", retries, st, body)
		}
	}
}

func TestDBConnectionStringEgress(t *testing.T) {
	for _, mode := range []egress.Mode{egress.ModeStrict, egress.ModeDev} {
		a, org, project := newAdmin(t, mode)
		secret := func(name, value string) (int, string) {
			st, body := a.do("PUT", "/api/v1/orgs/"+org+"/projects/"+project+"/secrets/"+name, map[string]any{"value": value})
			msg, _ := body["msg"].(string)
			return st, msg
		}
		tests := []struct {
			uri         string
			strict, dev bool // accepted
		}{
			{"mongodb://app:s3cret@db.example.com:27017/shop", true, true},
			{"mongodb://app:s3cret@127.0.0.1:4222/shop", false, true},
			{"mongodb://app:s3cret@localhost/shop", false, true},
			{"mongodb://db.example.com,10.0.0.1:27017/?replicaSet=rs", false, false},
			{"mongodb://[::ffff:169.254.169.254]:27017", false, false},
			{"mongodb://%2Ftmp%2Fmongodb-27017.sock", false, true},
			{"mongodb+srv://app:s3cret@cluster.example.com/shop", false, false},
			{"not a connection string", true, true}, // no host: the toolkit refuses it when used
		}
		for _, tc := range tests {
			want := tc.strict
			if mode == egress.ModeDev {
				want = tc.dev
			}
			st, msg := secret("DB_CONNECTION_STRING", tc.uri)
			ok := st == 200 || st == 201
			if ok != want || (!ok && (st != 400 || !strings.HasPrefix(msg, "value: "))) {
				t.Errorf("%s %s: %d %q", mode, tc.uri, st, msg)
			}
			if strings.Contains(msg, "s3cret") {
				t.Errorf("the refusal shows the password: %q", msg)
			}
		}
		// Other secrets are not connection strings.
		if st, msg := secret("OTHER", "mongodb://127.0.0.1"); st != 201 {
			t.Errorf("other secret: %d %s", st, msg)
		}
	}
}

// Creating or enabling a hook calls its /health: a failure is a warning of
// the answer; GET shows the last health, breakers and counters.
func TestHookHealthOnCreateAndEnable(t *testing.T) {
	a, org, _ := newAdmin(t, egress.ModeDev)
	var healthy atomic.Bool
	var checks atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/health" {
			checks.Add(1)
			if !healthy.Load() {
				w.WriteHeader(http.StatusServiceUnavailable)
			}
		}
	}))
	defer srv.Close()
	hooks := "/api/v1/orgs/" + org + "/hooks"

	healthy.Store(true)
	st, body := a.do("POST", hooks, hookBody(srv.URL))
	if st != 201 || data(body)["warnings"] != nil || checks.Load() != 1 {
		t.Fatalf("healthy create: %d %v, %d checks", st, body, checks.Load())
	}
	id := data(body)["id"].(string)
	var got map[string]any
	for i := 0; i < 50; i++ { // the state mirror follows the write within milliseconds
		if st, got = a.do("GET", hooks+"/"+id, nil); st == 200 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	status, _ := data(got)["status"].(map[string]any)
	health, _ := status["health"].(map[string]any)
	if health["ok"] != true || status["breakers"] == nil {
		t.Fatalf("GET status: %v", got)
	}

	healthy.Store(false)
	st, body = a.do("POST", hooks, hookBody(srv.URL))
	w, _ := data(body)["warnings"].([]any)
	if st != 201 || len(w) != 1 || !strings.Contains(fmt.Sprint(w[0]), "status 503") {
		t.Fatalf("unhealthy create: %d %v", st, body)
	}
	// Disable, then enable by a patch: checked again.
	if st, body = a.do("POST", hooks+"/"+id+"/disable", nil); st != 200 {
		t.Fatalf("disable: %d %v", st, body)
	}
	before := checks.Load()
	st, body = a.do("PATCH", hooks+"/"+id, map[string]any{"enabled": true})
	w, _ = data(body)["warnings"].([]any)
	if st != 200 || checks.Load() != before+1 || len(w) != 1 {
		t.Fatalf("enable: %d %v, %d checks", st, body, checks.Load()-before)
	}
	// A patch that changes neither the state nor the address checks nothing.
	st, _ = a.do("PATCH", hooks+"/"+id, map[string]any{"priority": 3})
	if st != 200 || checks.Load() != before+1 {
		t.Fatalf("unrelated patch: %d, %d checks", st, checks.Load()-before)
	}
	// An unreachable server: the warning is generic.
	closed := httptest.NewServer(http.NotFoundHandler())
	u := closed.URL
	closed.Close()
	st, body = a.do("POST", hooks, hookBody(u))
	w, _ = data(body)["warnings"].([]any)
	if st != 201 || len(w) != 1 || !strings.Contains(fmt.Sprint(w[0]), hookproxy.FailureUnreachable) || strings.Contains(fmt.Sprint(w[0]), "refused") {
		t.Fatalf("unreachable create: %d %v", st, body)
	}
}
