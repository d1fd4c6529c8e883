package hookproxy

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/auditrail/auditrail/internal/egress"
	"github.com/auditrail/auditrail/internal/testenv"
	"github.com/auditrail/auditrail/schemas/hooksapi"
)

func TestMain(m *testing.M) { testenv.MainNoLeaks(m) }

// testConfig allows the hook servers of the tests, on 127.0.0.1.
func testConfig() Config {
	cfg := DefaultConfig()
	cfg.Egress = egress.AllowLoopback()
	return cfg
}

// fakeHook is a webhook server whose behaviour a test sets.
type fakeHook struct {
	srv   *httptest.Server
	calls atomic.Int64
	mode  atomic.Value // string
	auth  atomic.Value // string
}

func newFakeHook(t *testing.T, mode string) *fakeHook {
	f := &fakeHook{}
	f.mode.Store(mode)
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeHook) serve(w http.ResponseWriter, r *http.Request) {
	f.calls.Add(1)
	f.auth.Store(r.Header.Get("Authorization"))
	switch f.mode.Load().(string) {
	case "ok":
		fmt.Fprint(w, `{"code":"OK"}`)
	case "deny":
		fmt.Fprint(w, `{"code":"CHECK_FAILED","error_message":"no way"}`)
	case "ratelimit":
		fmt.Fprint(w, `{"code":"RATE_LIMIT_EXCEEDED"}`)
	case "timeout":
		time.Sleep(300 * time.Millisecond)
		fmt.Fprint(w, `{"code":"OK"}`)
	case "slow":
		time.Sleep(40 * time.Millisecond)
		fmt.Fprint(w, `{"code":"OK"}`)
	case "5xx":
		w.WriteHeader(http.StatusServiceUnavailable)
	case "4xx":
		w.WriteHeader(http.StatusBadRequest)
	case "malformed":
		fmt.Fprint(w, `{"code": "OK"`)
	case "badcode":
		fmt.Fprint(w, `{"code":"MAYBE"}`)
	}
}

func hook(name, endpoint string, mode FailureMode) Hook {
	return Hook{ID: name, Name: name, Revision: "1", Endpoint: endpoint, BearerToken: "tok-" + name,
		Points:      map[Point]PointConfig{Pre: {Path: "/pre", Timeout: 150 * time.Millisecond, FailureMode: mode}, Post: {Path: "/post", Timeout: 150 * time.Millisecond, FailureMode: mode}},
		MaxAttempts: 3, Backoff: 5 * time.Millisecond, ConsecutiveFailures: 100, OpenFor: time.Minute}
}

func preReq() hooksapi.PreRequest {
	return hooksapi.PreRequest{ExecutionId: "e1", Tool: hooksapi.Tool{Name: "T", Toolkit: "K", Version: "1"}, Inputs: map[string]any{"a": 1.0}}
}

func closedURL(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := "http://" + l.Addr().String()
	l.Close()
	return u
}

func TestFaultMatrix(t *testing.T) {
	tests := []struct {
		fault        string
		wantAttempts int64 // at the server; -1 for connection refused
		failure      bool
	}{
		{"ok", 1, false},
		{"slow", 1, false},
		{"timeout", 3, true},
		{"5xx", 3, true},
		{"4xx", 1, true},
		{"malformed", 1, true},
		{"badcode", 1, true},
		{"refused", -1, true},
	}
	for _, tc := range tests {
		for _, mode := range []FailureMode{FailOpen, FailClosed} {
			t.Run(tc.fault+"/"+string(mode), func(t *testing.T) {
				p := New(testConfig(), nil)
				var f *fakeHook
				endpoint := closedURL(t)
				if tc.fault != "refused" {
					f = newFakeHook(t, tc.fault)
					endpoint = f.srv.URL
				}
				res := p.Pre(context.Background(), []Hook{hook("h", endpoint, mode)}, preReq())
				wantAllowed := !tc.failure || mode == FailOpen
				if res.Allowed != wantAllowed {
					t.Fatalf("allowed %v, want %v (%+v)", res.Allowed, wantAllowed, res)
				}
				call := res.Calls[0]
				if tc.failure {
					if call.FailureModeApplied != string(mode) || call.Failure == "" {
						t.Errorf("call %+v does not record the failure mode", call)
					}
					if !res.Allowed && (res.Kind != KindCheckFailed || !strings.Contains(res.Message, "fails closed")) {
						t.Errorf("denial %q %q", res.Kind, res.Message)
					}
				} else if call.FailureModeApplied != "" || call.Code != "OK" {
					t.Errorf("call %+v", call)
				}
				if f != nil {
					if got := f.calls.Load(); got != tc.wantAttempts {
						t.Errorf("server saw %d attempts, want %d", got, tc.wantAttempts)
					}
					if f.auth.Load() != "Bearer tok-h" {
						t.Errorf("authorization %q", f.auth.Load())
					}
				}
				st := p.Stats()
				if tc.failure && mode == FailOpen && st.FailOpenAllow != 1 {
					t.Errorf("fail-open allowances %d", st.FailOpenAllow)
				}
			})
		}
	}
}

func TestDenialsAndCodes(t *testing.T) {
	p := New(testConfig(), nil)
	for mode, want := range map[string]string{"deny": KindCheckFailed, "ratelimit": KindRateLimited} {
		f := newFakeHook(t, mode)
		res := p.Pre(context.Background(), []Hook{hook(mode, f.srv.URL, FailOpen)}, preReq())
		if res.Allowed || res.Kind != want {
			t.Errorf("%s: %+v", mode, res.Verdict)
		}
	}
}

func TestBreakerOpensAndRecovers(t *testing.T) {
	p := New(testConfig(), nil)
	f := newFakeHook(t, "5xx")
	h := hook("b", f.srv.URL, FailClosed)
	h.MaxAttempts, h.ConsecutiveFailures, h.OpenFor = 1, 2, 200*time.Millisecond
	ctx := context.Background()
	for i := 0; i < 2; i++ {
		p.Pre(ctx, []Hook{h}, preReq())
	}
	before := f.calls.Load()
	res := p.Pre(ctx, []Hook{h}, preReq())
	if f.calls.Load() != before || res.Allowed || res.Calls[0].Failure != "circuit breaker open" {
		t.Fatalf("open breaker still called the hook or allowed: %+v", res)
	}
	h.Points[Pre] = PointConfig{Path: "/pre", Timeout: 150 * time.Millisecond, FailureMode: FailOpen} // the failure mode is read per call
	if res := p.Pre(ctx, []Hook{h}, preReq()); !res.Allowed || res.Calls[0].FailureModeApplied != "fail_open" {
		t.Fatalf("open breaker with fail_open: %+v", res)
	}
	time.Sleep(250 * time.Millisecond)
	f.mode.Store("ok")
	if res := p.Pre(ctx, []Hook{h}, preReq()); !res.Allowed || res.Calls[0].Code != "OK" {
		t.Fatalf("half-open call: %+v", res)
	}
	if res := p.Pre(ctx, []Hook{h}, preReq()); res.Calls[0].Failure != "" {
		t.Fatalf("breaker did not close: %+v", res)
	}
	if p.Stats().BreakerOpen != 2 {
		t.Errorf("breaker-open decisions %d", p.Stats().BreakerOpen)
	}
}

// overriding hooks record their name in inputs.trail and in the output.
func trailServer(t *testing.T, name string, deny bool, calls *atomic.Int64) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		if deny {
			fmt.Fprintf(w, `{"code":"CHECK_FAILED","error_message":"%s says no"}`, name)
			return
		}
		switch r.URL.Path {
		case "/pre":
			var req hooksapi.PreRequest
			_ = json.NewDecoder(r.Body).Decode(&req)
			trail, _ := req.Inputs["trail"].(string)
			req.Inputs["trail"] = trail + "/" + name
			var secrets hooksapi.PreOverride_Secrets
			_ = secrets.FromSecretValues(hooksapi.SecretValues{"KEY_" + name: "v"})
			_ = json.NewEncoder(w).Encode(hooksapi.PreResponse{Code: hooksapi.OK, Override: &hooksapi.PreOverride{Inputs: &req.Inputs,
				Secrets: &secrets}})
		case "/post":
			var req hooksapi.PostRequest
			_ = json.NewDecoder(r.Body).Decode(&req)
			out, _ := req.Output.(string)
			_ = json.NewEncoder(w).Encode(hooksapi.PostResponse{Code: hooksapi.OK, Override: &hooksapi.PostOverride{Output: out + "/" + name}})
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestOrderAndOverrides(t *testing.T) {
	var calls atomic.Int64
	mk := func(name string, project bool, phase string, prio int, deny bool) Hook {
		h := hook(name, trailServer(t, name, deny, &calls).URL, FailClosed)
		h.Project, h.Phase, h.Priority = project, phase, prio
		return h
	}
	hooks := []Hook{
		mk("after", false, "after", -5, false),
		mk("project2", true, "", 2, false),
		mk("before", false, "before", 9, false),
		mk("project1", true, "", 1, false),
	}
	p := New(testConfig(), nil)
	req := preReq()
	req.Inputs["trail"] = ""
	res := p.Pre(context.Background(), hooks, req)
	if !res.Allowed || res.Inputs["trail"] != "/before/project1/project2/after" {
		t.Fatalf("pre chain: %+v", res)
	}
	if len(res.Secrets) != 4 || res.Secrets["KEY_after"] != "v" {
		t.Fatalf("secret overrides: %v", res.Secrets)
	}
	post := p.Post(context.Background(), hooks, hooksapi.PostRequest{ExecutionId: "e1", Output: "out", Success: true})
	if !post.Allowed || post.Output != "out/before/project1/project2/after" || !post.Calls[3].Overridden {
		t.Fatalf("post chain: %+v", post)
	}
	// A denial stops the chain.
	calls.Store(0)
	hooks[1] = mk("project2", true, "", 2, true)
	res = p.Pre(context.Background(), hooks, req)
	if res.Allowed || res.Message != "project2 says no" || len(res.Calls) != 3 {
		t.Fatalf("denial: %+v", res)
	}
	if calls.Load() != 3 {
		t.Fatalf("%d hooks called after a denial, want 3", calls.Load())
	}
}

func TestAccessOnlyDenyNeither(t *testing.T) {
	catalog := map[string]hooksapi.ToolkitInfo{
		"Docs": {Tools: map[string][]hooksapi.VersionInfo{"Read": {{Version: "1"}}, "Edit": {{Version: "1"}}}},
		"Mail": {Tools: map[string][]hooksapi.VersionInfo{"Send": {{Version: "1"}}, "List": {{Version: "1"}}}},
	}
	tests := []struct {
		answer string
		want   string
	}{
		{`{}`, "Docs.Edit Docs.Read Mail.List Mail.Send"},
		{`{"only":{"Docs":["Read"],"Mail":[]}}`, "Docs.Read Mail.List Mail.Send"},
		{`{"only":{"Docs":["Read"]},"deny":{"Docs":["Read"]}}`, "Docs.Read"},
		{`{"deny":{"Mail":["Send"],"Docs":[]}}`, "Mail.List"},
	}
	for _, tc := range tests {
		var got hooksapi.AccessRequest
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_ = json.NewDecoder(r.Body).Decode(&got)
			fmt.Fprint(w, tc.answer)
		}))
		h := hook("a", srv.URL, FailClosed)
		h.Points = map[Point]PointConfig{Access: {Path: "/access", Timeout: time.Second, FailureMode: FailClosed}}
		d := New(testConfig(), nil).Access(context.Background(), []Hook{h}, "u1", catalog)
		vis, calls := d.Visible, d.Calls
		srv.Close()
		if s := visibleString(vis); s != tc.want {
			t.Errorf("answer %s: visible %s, want %s", tc.answer, s, tc.want)
		}
		if got.UserId != "u1" || len(got.Toolkits) != 2 || len(calls) != 1 {
			t.Errorf("one batched request for all toolkits: %+v", got)
		}
	}
	// Failing access hooks: closed hides everything, open changes nothing.
	for mode, want := range map[FailureMode]string{FailClosed: "", FailOpen: "Docs.Edit Docs.Read Mail.List Mail.Send"} {
		h := hook("a", closedURL(t), mode)
		h.Points = map[Point]PointConfig{Access: {Path: "/access", Timeout: time.Second, FailureMode: mode}}
		h.MaxAttempts = 1
		vis := New(testConfig(), nil).Access(context.Background(), []Hook{h}, "u1", catalog).Visible
		if s := visibleString(vis); s != want {
			t.Errorf("%s: %q", mode, s)
		}
	}
}

func visibleString(v Visible) string {
	var out []string
	for tk, tools := range v {
		for tool := range tools {
			out = append(out, tk+"."+tool)
		}
	}
	sortStrings(out)
	return strings.Join(out, " ")
}

func sortStrings(s []string) {
	for i := range s {
		for j := i + 1; j < len(s); j++ {
			if s[j] < s[i] {
				s[i], s[j] = s[j], s[i]
			}
		}
	}
}

// certs makes a CA, a server certificate for 127.0.0.1 and a client certificate.
func certs(t *testing.T) (caPEM, serverCert, serverKey, clientCert, clientKey string) {
	t.Helper()
	mk := func(tmpl, parent *x509.Certificate, parentKey *ecdsa.PrivateKey) (string, string, *x509.Certificate, *ecdsa.PrivateKey) {
		key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if parent == nil {
			parent, parentKey = tmpl, key
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
		if err != nil {
			t.Fatal(err)
		}
		cert, _ := x509.ParseCertificate(der)
		kder, _ := x509.MarshalECPrivateKey(key)
		return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})), string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})), cert, key
	}
	now := time.Now()
	caPEM, _, ca, caKey := mk(&x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"}, NotBefore: now.Add(-time.Hour),
		NotAfter: now.Add(time.Hour), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}, nil, nil)
	serverCert, serverKey, _, _ = mk(&x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "hooks"}, NotBefore: now.Add(-time.Hour),
		NotAfter: now.Add(time.Hour), IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}, ca, caKey)
	clientCert, clientKey, _, _ = mk(&x509.Certificate{SerialNumber: big.NewInt(3), Subject: pkix.Name{CommonName: "auditrail"}, NotBefore: now.Add(-time.Hour),
		NotAfter: now.Add(time.Hour), ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}, ca, caKey)
	return
}

func TestMTLS(t *testing.T) {
	caPEM, sc, sk, cc, ck := certs(t)
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM([]byte(caPEM))
	serverPair, err := tls.X509KeyPair([]byte(sc), []byte(sk))
	if err != nil {
		t.Fatal(err)
	}
	var peer atomic.Value
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		peer.Store(r.TLS.PeerCertificates[0].Subject.CommonName)
		fmt.Fprint(w, `{"code":"OK"}`)
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{serverPair}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pool}
	srv.StartTLS()
	defer srv.Close()

	h := hook("m", srv.URL, FailClosed)
	h.BearerToken, h.ClientCertPEM, h.ClientKeyPEM, h.CACertPEM, h.MaxAttempts = "", cc, ck, caPEM, 1
	p := New(testConfig(), nil)
	if res := p.Pre(context.Background(), []Hook{h}, preReq()); !res.Allowed || peer.Load() != "auditrail" {
		t.Fatalf("mTLS call: %+v (peer %v)", res, peer.Load())
	}
	// Without the client certificate the server refuses the handshake.
	h2 := h
	h2.ID, h2.ClientCertPEM, h2.ClientKeyPEM = "m2", "", ""
	if res := p.Pre(context.Background(), []Hook{h2}, preReq()); res.Allowed || res.Calls[0].FailureModeApplied != "fail_closed" {
		t.Fatalf("call without client certificate: %+v", res)
	}
	// Without the CA the server certificate is not trusted.
	h3 := h
	h3.ID, h3.CACertPEM = "m3", ""
	if res := p.Pre(context.Background(), []Hook{h3}, preReq()); res.Allowed {
		t.Fatalf("untrusted server accepted: %+v", res)
	}
}

func FuzzDecodeResponses(f *testing.F) {
	f.Add([]byte(`{"code":"OK","override":{"inputs":{"a":1},"secrets":{"K":"v"}}}`))
	f.Add([]byte(`{"code":"CHECK_FAILED","error_message":"x"}`))
	f.Add([]byte(`{"only":{"Docs":["A"]}}`))
	f.Add([]byte(`null`))
	// Arcade's shapes.
	f.Add([]byte(`{"code":"OK","override":{"secrets":[{"K":"v"},{"K":"w","L":"x"}]}}`))
	f.Add([]byte(`{"deny":{"Docs":{"tools":{"A":[{"version":"1.0.0"}],"B":[]}},"Mail":{}}}`))
	f.Add([]byte(`{"only":{"Docs":{"tools":null}},"deny":{"Docs":3}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		if r, err := DecodePreResponse(b); err == nil {
			if !r.Code.Valid() {
				t.Fatalf("pre answer accepted with code %q", r.Code)
			}
			if (r.Secrets != nil) && (r.Override == nil || r.Override.Secrets == nil) {
				t.Fatalf("secrets %v out of nowhere", r.Secrets)
			}
		}
		if r, err := DecodePostResponse(b); err == nil && !r.Code.Valid() {
			t.Fatalf("post answer accepted with code %q", r.Code)
		}
		if a, err := DecodeAccessResponse(b); err == nil {
			for _, sel := range []Selection{a.Only, a.Deny} {
				for tk, p := range sel {
					if p.All == (p.Tools != nil) {
						t.Fatalf("%s: pick %+v selects both everything and a list", tk, p)
					}
				}
			}
		}
	})
}

// Concurrent calls share a point's client, URL and headers safely.
func TestConcurrentCalls(t *testing.T) {
	f := newFakeHook(t, "ok")
	p := New(testConfig(), nil)
	h := hook("c", f.srv.URL, FailClosed)
	h.Points[Pre] = PointConfig{Path: "/pre", Timeout: 5 * time.Second, FailureMode: FailClosed} // no retries under load
	done := make(chan bool, 16)
	for i := 0; i < 16; i++ {
		go func() {
			ok := true
			for j := 0; j < 20; j++ {
				ok = ok && p.Pre(context.Background(), []Hook{h}, preReq()).Allowed
			}
			done <- ok
		}()
	}
	for i := 0; i < 16; i++ {
		if !<-done {
			t.Fatal("a concurrent call was denied")
		}
	}
	if f.calls.Load() != 320 || f.auth.Load() != "Bearer tok-c" {
		t.Fatalf("%d calls, auth %v", f.calls.Load(), f.auth.Load())
	}
}
