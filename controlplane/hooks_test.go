package controlplane

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/auditrail/auditrail/controlplane/cpstate"
	"github.com/auditrail/auditrail/internal/egress"
	"github.com/auditrail/auditrail/internal/testenv"
	"github.com/auditrail/auditrail/schemas"
)

func selfSigned(t *testing.T) (certPEM, keyPEM string) {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "client"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, _ := x509.MarshalECPrivateKey(key)
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})),
		string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}))
}

func ptr(n int) *int { return &n }

func TestHookConfigNormalize(t *testing.T) {
	cert, key := selfSigned(t)
	base := func() cpstate.HookConfig {
		return cpstate.HookConfig{Name: "policy", Endpoint: "https://hooks.example.com", Points: map[string]*cpstate.HookPoint{"pre": {}},
			Auth: cpstate.HookAuth{Type: "bearer", Token: "t"}}
	}
	c := base()
	c.Points["access"] = &cpstate.HookPoint{TimeoutMS: 100}
	if err := c.Normalize(); err != nil {
		t.Fatal(err)
	}
	if p := c.Points["pre"]; p.Path != "/pre" || p.TimeoutMS != 5000 || p.FailureMode != cpstate.FailClosed {
		t.Errorf("pre defaults: %+v", p)
	}
	if p := c.Points["access"]; p.Path != "/access" || p.TimeoutMS != 100 {
		t.Errorf("access: %+v", p)
	}
	if c.TimeoutMS != 5000 || c.Retries.Attempts() != 1 || c.Retries.Backoff() != 100 || *c.Retries.MaxAttempts != 1 || c.Breaker.ConsecutiveFailures != 5 || c.Breaker.OpenMS != 30000 ||
		c.Phase != "before" || c.Enabled == nil || !*c.Enabled {
		t.Errorf("hook defaults: %+v", c)
	}

	tests := []struct {
		field string
		mut   func(c *cpstate.HookConfig)
	}{
		{"name", func(c *cpstate.HookConfig) { c.Name = " " }},
		{"endpoint", func(c *cpstate.HookConfig) { c.Endpoint = "hooks.example.com" }},
		{"points", func(c *cpstate.HookConfig) { c.Points = nil }},
		{"points", func(c *cpstate.HookConfig) { c.Points["during"] = &cpstate.HookPoint{} }},
		{"points.pre.path", func(c *cpstate.HookConfig) { c.Points["pre"].Path = "pre" }},
		{"points.pre.timeout_ms", func(c *cpstate.HookConfig) { c.Points["pre"].TimeoutMS = 70_000 }},
		{"points.pre.failure_mode", func(c *cpstate.HookConfig) { c.Points["pre"].FailureMode = "open" }},
		{"auth.type", func(c *cpstate.HookConfig) { c.Auth.Type = "basic" }},
		{"auth.token", func(c *cpstate.HookConfig) { c.Auth.Token = "" }},
		{"endpoint", func(c *cpstate.HookConfig) {
			c.Auth = cpstate.HookAuth{Type: "mtls", ClientCertPEM: cert, ClientKeyPEM: key}
			c.Endpoint = "http://h"
		}},
		{"auth.client_cert_pem", func(c *cpstate.HookConfig) {
			c.Auth = cpstate.HookAuth{Type: "mtls", ClientCertPEM: cert, ClientKeyPEM: "nope"}
		}},
		{"auth.ca_cert_pem", func(c *cpstate.HookConfig) {
			c.Auth = cpstate.HookAuth{Type: "mtls", ClientCertPEM: cert, ClientKeyPEM: key, CACertPEM: "x"}
		}},
		{"timeout_ms", func(c *cpstate.HookConfig) { c.TimeoutMS = -1 }},
		{"retries.max_attempts", func(c *cpstate.HookConfig) { c.Retries.MaxAttempts = ptr(11) }},
		{"retries.max_attempts", func(c *cpstate.HookConfig) { c.Retries.MaxAttempts = ptr(6) }},
		{"retries.max_attempts", func(c *cpstate.HookConfig) { c.Retries.MaxAttempts = ptr(0) }},
		{"retries.backoff_ms", func(c *cpstate.HookConfig) { c.Retries.BackoffMS = ptr(-5) }},
		{"retries.backoff_ms", func(c *cpstate.HookConfig) { c.Retries.BackoffMS = ptr(0) }},
		{"retries.backoff_ms", func(c *cpstate.HookConfig) { c.Retries.BackoffMS = ptr(5001) }},
		{"breaker.consecutive_failures", func(c *cpstate.HookConfig) { c.Breaker.ConsecutiveFailures = -1 }},
		{"breaker.open_ms", func(c *cpstate.HookConfig) { c.Breaker.OpenMS = 50 }},
		{"phase", func(c *cpstate.HookConfig) { c.Phase = "middle" }},
	}
	for _, tc := range tests {
		c := base()
		tc.mut(&c)
		err := c.Normalize()
		if !errors.Is(err, cpstate.ErrInvalid) || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("%s: err = %v", tc.field, err)
		}
	}
	// The bounds themselves are accepted.
	b := base()
	b.Retries = cpstate.HookRetries{MaxAttempts: ptr(cpstate.MaxHookAttempts), BackoffMS: ptr(cpstate.MaxHookBackoffMS)}
	if err := b.Normalize(); err != nil {
		t.Fatalf("retries at their bounds: %v", err)
	}
	m := base()
	m.Auth = cpstate.HookAuth{Type: "mtls", ClientCertPEM: cert, ClientKeyPEM: key, CACertPEM: cert}
	if err := m.Normalize(); err != nil {
		t.Fatalf("mtls: %v", err)
	}
	r := m.Redacted()
	if r.Auth.ClientKeyPEM != cpstate.Redacted || r.Auth.ClientCertPEM != cert {
		t.Errorf("redacted mtls: %+v", r.Auth)
	}
	// A hook stored before the contract setting shows the default.
	if old := (cpstate.HookConfig{Auth: cpstate.HookAuth{Type: "bearer"}}).Redacted(); old.Contract != cpstate.ContractAuditrail {
		t.Errorf("contract of an older hook: %q", old.Contract)
	}
}

func TestMergePatch(t *testing.T) {
	tests := []struct{ doc, patch, want string }{
		{`{"a":1,"b":{"c":2,"d":3}}`, `{"b":{"c":null,"e":4}}`, `{"a":1,"b":{"d":3,"e":4}}`},
		{`{"a":[1,2]}`, `{"a":[3]}`, `{"a":[3]}`},
		{`{"a":1}`, `{"a":null}`, `{}`},
		{`{"a":{"b":1}}`, `{"a":"x"}`, `{"a":"x"}`},
	}
	for _, tc := range tests {
		got, err := mergePatch(json.RawMessage(tc.doc), json.RawMessage(tc.patch))
		if err != nil {
			t.Fatal(err)
		}
		var g, w any
		_ = json.Unmarshal(got, &g)
		_ = json.Unmarshal([]byte(tc.want), &w)
		gj, _ := json.Marshal(g)
		wj, _ := json.Marshal(w)
		if string(gj) != string(wj) {
			t.Errorf("patch %s on %s = %s, want %s", tc.patch, tc.doc, gj, wj)
		}
	}
}

// contract: auditrail by default, arcade on request, anything else a 400
// naming it; mTLS keeps a bearer token beside the certificate.
func TestHookConfigContractAndBearerWithMTLS(t *testing.T) {
	cert, key := selfSigned(t)
	tests := []struct {
		name         string
		mut          func(c *cpstate.HookConfig)
		field        string // "" when valid
		contract     string
		token, ckey  string
		redactedAuth cpstate.HookAuth
	}{
		{name: "default contract", mut: func(c *cpstate.HookConfig) {}, contract: cpstate.ContractAuditrail, token: "t",
			redactedAuth: cpstate.HookAuth{Type: "bearer", Token: cpstate.Redacted}},
		{name: "arcade", mut: func(c *cpstate.HookConfig) { c.Contract = "arcade" }, contract: cpstate.ContractArcade, token: "t",
			redactedAuth: cpstate.HookAuth{Type: "bearer", Token: cpstate.Redacted}},
		{name: "unknown contract", mut: func(c *cpstate.HookConfig) { c.Contract = "soap" }, field: "contract"},
		{name: "contract in another case", mut: func(c *cpstate.HookConfig) { c.Contract = "Arcade" }, field: "contract"},
		{name: "mtls with bearer", mut: func(c *cpstate.HookConfig) {
			c.Auth = cpstate.HookAuth{Type: "mtls", Token: "both", ClientCertPEM: cert, ClientKeyPEM: key}
		}, contract: cpstate.ContractAuditrail, token: "both", ckey: key,
			redactedAuth: cpstate.HookAuth{Type: "mtls", Token: cpstate.Redacted, ClientCertPEM: cert, ClientKeyPEM: cpstate.Redacted}},
		{name: "mtls alone", mut: func(c *cpstate.HookConfig) {
			c.Auth = cpstate.HookAuth{Type: "mtls", ClientCertPEM: cert, ClientKeyPEM: key}
		}, contract: cpstate.ContractAuditrail, ckey: key,
			redactedAuth: cpstate.HookAuth{Type: "mtls", ClientCertPEM: cert, ClientKeyPEM: cpstate.Redacted}},
		{name: "the placeholder as a token", mut: func(c *cpstate.HookConfig) { c.Auth.Token = cpstate.Redacted }, field: "auth.token"},
		{name: "the placeholder beside mtls", mut: func(c *cpstate.HookConfig) {
			c.Auth = cpstate.HookAuth{Type: "mtls", Token: cpstate.Redacted, ClientCertPEM: cert, ClientKeyPEM: key}
		}, field: "auth.token"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := cpstate.HookConfig{Name: "policy", Endpoint: "https://hooks.example.com", Points: map[string]*cpstate.HookPoint{"pre": {}},
				Auth: cpstate.HookAuth{Type: "bearer", Token: "t"}}
			tc.mut(&c)
			err := c.Normalize()
			if tc.field != "" {
				if !errors.Is(err, cpstate.ErrInvalid) || !strings.Contains(err.Error(), ": "+tc.field+": ") {
					t.Fatalf("err = %v, want one naming %s", err, tc.field)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.Contract != tc.contract || c.Auth.Token != tc.token || c.Auth.ClientKeyPEM != tc.ckey {
				t.Fatalf("normalized: contract %q token %q key set %v", c.Contract, c.Auth.Token, c.Auth.ClientKeyPEM != "")
			}
			if r := c.Redacted(); r.Auth != tc.redactedAuth {
				t.Fatalf("redacted auth %+v, want %+v", r.Auth, tc.redactedAuth)
			}
		})
	}
}

// Over the API: a hook with mTLS and a bearer token keeps both sealed (the
// view and audit events show each as [REDACTED], the hook client gets the
// real ones), its contract is stored and shown, and a patch naming an
// unknown contract is a 400 naming contract.
func TestHookContractAndMTLSBearerStored(t *testing.T) {
	cert, key := selfSigned(t)
	srv, _, js := testenv.NATS(t)
	n := newNode(t, srv.ClientURL(), nodeOpts{})
	guard, err := egress.New(egress.Config{Mode: egress.ModeDev, Resolver: testNames}, nil)
	if err != nil {
		t.Fatal(err)
	}
	n.svc.UseEgress(guard) // no hook monitor: no /health call leaves the machine
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
	hooks := "/api/v1/orgs/" + orgID + "/hooks"
	st, body := a.do("POST", hooks, map[string]any{"name": "arcade", "endpoint": "https://hooks.example.com", "contract": "arcade",
		"points": map[string]any{"pre": map[string]any{}},
		"auth":   map[string]any{"type": "mtls", "token": "bearer-too", "client_cert_pem": cert, "client_key_pem": key}})
	if st != 201 {
		t.Fatalf("create: %d %v", st, body)
	}
	id := data(body)["id"].(string)
	// The audit event of the creation: the contract, the placeholders,
	// never the secrets.
	stream, err := js.Stream(context.Background(), schemas.StreamEvents)
	if err != nil {
		t.Fatal(err)
	}
	m, err := stream.GetLastMsgForSubject(context.Background(), schemas.EventSubject(orgID, schemas.KindAudit))
	if err != nil {
		t.Fatal(err)
	}
	if ev := string(m.Data); !strings.Contains(ev, id) || !strings.Contains(ev, "arcade") || strings.Count(ev, cpstate.Redacted) < 2 ||
		strings.Contains(ev, "bearer-too") || strings.Contains(ev, "PRIVATE KEY") {
		t.Fatalf("audit event of the creation: %q", ev)
	}
	view := func() map[string]any {
		t.Helper()
		for i := 0; i < 50; i++ { // the state mirror follows the write within milliseconds
			if st, got := a.do("GET", hooks+"/"+id, nil); st == 200 {
				return data(got)["config"].(map[string]any)
			}
			time.Sleep(20 * time.Millisecond)
		}
		t.Fatal("hook not found")
		return nil
	}
	for _, cfg := range []map[string]any{data(body)["config"].(map[string]any), view()} {
		auth := cfg["auth"].(map[string]any)
		if cfg["contract"] != "arcade" || auth["token"] != cpstate.Redacted || auth["client_key_pem"] != cpstate.Redacted || auth["client_cert_pem"] != cert {
			t.Fatalf("view: %v", cfg)
		}
	}
	resolved := func() cpstate.HookConfig {
		t.Helper()
		orgUUID, projUUID := uuid.MustParse(orgID), uuid.MustParse(data(p)["id"].(string))
		hs, err := n.svc.EnabledHooks(orgUUID, projUUID)
		if err != nil || len(hs) != 1 {
			t.Fatalf("enabled hooks: %v %v", hs, err)
		}
		return hs[0].Config
	}
	if c := resolved(); c.Auth.Token != "bearer-too" || c.Auth.ClientKeyPEM != key || c.Contract != cpstate.ContractArcade {
		t.Fatalf("resolved: contract %q token %q", c.Contract, c.Auth.Token)
	}

	st, body = a.do("PATCH", hooks+"/"+id, map[string]any{"contract": "soap"})
	if msg, _ := body["msg"].(string); st != 400 || !strings.HasPrefix(msg, "contract: ") {
		t.Fatalf("unknown contract: %d %v", st, body)
	}
	// Dropping the token leaves mTLS alone; the contract back to the default.
	st, body = a.do("PATCH", hooks+"/"+id, map[string]any{"contract": nil, "auth": map[string]any{"token": nil}})
	if st != 200 {
		t.Fatalf("patch: %d %v", st, body)
	}
	for i := 0; i < 50; i++ {
		if c := resolved(); c.Auth.Token == "" {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if c := resolved(); c.Auth.Token != "" || c.Auth.ClientKeyPEM != key || c.Contract != cpstate.ContractAuditrail {
		t.Fatalf("after patch: contract %q token %q", c.Contract, c.Auth.Token)
	}
	if auth := view()["auth"].(map[string]any); auth["token"] != nil || auth["client_key_pem"] != cpstate.Redacted {
		t.Fatalf("view after patch: %v", auth)
	}
}

// A create checks GET /health as both contracts define it: degraded is
// accepted with a warning, unhealthy (in a 200, or a 500/503) too; GET
// shows the status the server gave.
func TestHookHealthStatusesOnCreate(t *testing.T) {
	a, org, _ := newAdmin(t, egress.ModeDev)
	tests := []struct {
		name    string
		status  int
		body    string
		warning string // "" for none
		health  string
		ok      bool
	}{
		{"healthy", 200, `{"status":"healthy"}`, "", "healthy", true},
		{"degraded", 200, `{"status":"degraded"}`, "says degraded", "degraded", true},
		{"unhealthy", 200, `{"status":"unhealthy"}`, "failed: unhealthy", "unhealthy", false},
		{"503", 503, `{"status":"unhealthy"}`, "failed: status 503", "unhealthy", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(tc.status)
				fmt.Fprint(w, tc.body)
			}))
			defer srv.Close()
			st, body := a.do("POST", "/api/v1/orgs/"+org+"/hooks", hookBody(srv.URL))
			w, _ := data(body)["warnings"].([]any)
			if st != 201 || (tc.warning == "") != (len(w) == 0) || (tc.warning != "" && !strings.Contains(fmt.Sprint(w), tc.warning)) {
				t.Fatalf("create: %d %v", st, body)
			}
			id := data(body)["id"].(string)
			var got map[string]any
			for i := 0; i < 50; i++ {
				if st, got = a.do("GET", "/api/v1/orgs/"+org+"/hooks/"+id, nil); st == 200 {
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
			status, _ := data(got)["status"].(map[string]any)
			health, _ := status["health"].(map[string]any)
			if health["status"] != tc.health || health["ok"] != tc.ok {
				t.Fatalf("GET health: %v", health)
			}
		})
	}
}
