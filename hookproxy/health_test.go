package hookproxy

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/auditrail/auditrail/schemas/hooksapi"
)

// GET /health read as both contracts define it.
func TestHealthStatuses(t *testing.T) {
	tests := []struct {
		name     string
		status   int
		body     string
		ok       bool
		health   string
		failure  string
		httpCode int
	}{
		{"healthy", 200, `{"status":"healthy"}`, true, HealthHealthy, "", 200},
		{"degraded: healthy with a warning", 200, `{"status":"degraded"}`, true, HealthDegraded, "degraded", 200},
		{"unhealthy in a 200", 200, `{"status":"unhealthy"}`, false, HealthUnhealthy, "unhealthy", 200},
		{"no body (older servers)", 200, ``, true, HealthHealthy, "", 200},
		{"another word (older servers)", 200, `{"status":"ok"}`, true, HealthHealthy, "", 200},
		{"503 unhealthy", 503, `{"status":"unhealthy"}`, false, HealthUnhealthy, "status 503", 503},
		{"503 saying healthy is still unhealthy", 503, `{"status":"healthy"}`, false, HealthUnhealthy, "status 503", 503},
		{"500 with an ErrorResponse", 500, `{"error":"db down"}`, false, HealthUnhealthy, "status 500", 500},
		{"404: not a health answer", 404, ``, false, "", "status 404", 404},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != "/health" || r.Method != http.MethodGet {
					w.WriteHeader(http.StatusTeapot)
					return
				}
				w.WriteHeader(tc.status)
				fmt.Fprint(w, tc.body)
			}))
			defer srv.Close()
			p := New(testConfig(), nil)
			defer p.Close()
			hl := p.CheckHealth(context.Background(), hook("h", srv.URL, FailClosed))
			if hl.OK != tc.ok || hl.Status != tc.health || hl.Failure != tc.failure || hl.HTTPStatus != tc.httpCode {
				t.Fatalf("health %+v", hl)
			}
			st, _ := p.HookStatus("h")
			if st.Health == nil || st.Health.Status != tc.health {
				t.Fatalf("kept health %+v", st.Health)
			}
		})
	}
}

// A hook with both a bearer token and a client certificate sends both on
// every call, /health included; the server refuses a call lacking either.
func TestBearerWithMTLS(t *testing.T) {
	caPEM, sc, sk, cc, ck := certs(t)
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM([]byte(caPEM))
	serverPair, err := tls.X509KeyPair([]byte(sc), []byte(sk))
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	seen := map[string]string{} // path → "peer|authorization"
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		peer := ""
		if len(r.TLS.PeerCertificates) > 0 {
			peer = r.TLS.PeerCertificates[0].Subject.CommonName
		}
		mu.Lock()
		seen[r.URL.Path] = peer + "|" + r.Header.Get("Authorization")
		mu.Unlock()
		if r.Header.Get("Authorization") != "Bearer both-tok" {
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprint(w, `{"error":"unauthorized"}`)
			return
		}
		switch r.URL.Path {
		case "/access":
			fmt.Fprint(w, `{}`)
		case "/health":
			fmt.Fprint(w, `{"status":"healthy"}`)
		default:
			fmt.Fprint(w, `{"code":"OK"}`)
		}
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{serverPair}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pool}
	srv.StartTLS()
	defer srv.Close()

	h := allPoints(srv.URL, ContractArcade)
	h.ID, h.BearerToken, h.ClientCertPEM, h.ClientKeyPEM, h.CACertPEM = "both", "both-tok", cc, ck, caPEM
	p := New(testConfig(), nil)
	defer p.Close()
	catalog := map[string]hooksapi.ToolkitInfo{"K": {Tools: map[string][]hooksapi.VersionInfo{"T": {{Version: "1"}}}}}
	if d := p.Access(context.Background(), []Hook{h}, "u", catalog); !d.Visible["K"]["T"] {
		t.Fatalf("access: %+v", d.Calls)
	}
	if r := p.Pre(context.Background(), []Hook{h}, preReq()); !r.Allowed {
		t.Fatalf("pre: %+v", r)
	}
	if r := p.Post(context.Background(), []Hook{h}, hooksapi.PostRequest{ExecutionId: "e1", Tool: preReq().Tool}); !r.Allowed {
		t.Fatalf("post: %+v", r)
	}
	if hl := p.CheckHealth(context.Background(), h); !hl.OK || hl.Status != HealthHealthy {
		t.Fatalf("health: %+v", hl)
	}
	for _, path := range []string{"/access", "/pre", "/post", "/health"} {
		if got := seen[path]; got != "auditrail|Bearer both-tok" {
			t.Errorf("%s reached the server with %q, want the client certificate and the token", path, got)
		}
	}

	// Either one missing: refused, the failure mode applies.
	noToken := h
	noToken.ID, noToken.BearerToken = "no-token", ""
	if r := p.Pre(context.Background(), []Hook{noToken}, preReq()); r.Allowed || r.Calls[0].HTTPStatus != http.StatusUnauthorized {
		t.Fatalf("without the token: %+v", r)
	}
	noCert := h
	noCert.ID, noCert.ClientCertPEM, noCert.ClientKeyPEM = "no-cert", "", ""
	noCert.Points = map[Point]PointConfig{Pre: {Path: "/pre", Timeout: time.Second, FailureMode: FailClosed}}
	if r := p.Pre(context.Background(), []Hook{noCert}, preReq()); r.Allowed || r.Calls[0].FailureModeApplied != "fail_closed" {
		t.Fatalf("without the certificate: %+v", r)
	}
}
