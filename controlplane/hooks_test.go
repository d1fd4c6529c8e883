package controlplane

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"math/big"
	"strings"
	"testing"
	"time"
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
	base := func() HookConfig {
		return HookConfig{Name: "policy", Endpoint: "https://hooks.example.com", Points: map[string]*HookPoint{"pre": {}},
			Auth: HookAuth{Type: "bearer", Token: "t"}}
	}
	c := base()
	c.Points["access"] = &HookPoint{TimeoutMS: 100}
	if err := c.Normalize(); err != nil {
		t.Fatal(err)
	}
	if p := c.Points["pre"]; p.Path != "/pre" || p.TimeoutMS != 5000 || p.FailureMode != FailClosed {
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
		mut   func(c *HookConfig)
	}{
		{"name", func(c *HookConfig) { c.Name = " " }},
		{"endpoint", func(c *HookConfig) { c.Endpoint = "hooks.example.com" }},
		{"points", func(c *HookConfig) { c.Points = nil }},
		{"points", func(c *HookConfig) { c.Points["during"] = &HookPoint{} }},
		{"points.pre.path", func(c *HookConfig) { c.Points["pre"].Path = "pre" }},
		{"points.pre.timeout_ms", func(c *HookConfig) { c.Points["pre"].TimeoutMS = 70_000 }},
		{"points.pre.failure_mode", func(c *HookConfig) { c.Points["pre"].FailureMode = "open" }},
		{"auth.type", func(c *HookConfig) { c.Auth.Type = "basic" }},
		{"auth.token", func(c *HookConfig) { c.Auth.Token = "" }},
		{"endpoint", func(c *HookConfig) {
			c.Auth = HookAuth{Type: "mtls", ClientCertPEM: cert, ClientKeyPEM: key}
			c.Endpoint = "http://h"
		}},
		{"auth.client_cert_pem", func(c *HookConfig) { c.Auth = HookAuth{Type: "mtls", ClientCertPEM: cert, ClientKeyPEM: "nope"} }},
		{"auth.ca_cert_pem", func(c *HookConfig) {
			c.Auth = HookAuth{Type: "mtls", ClientCertPEM: cert, ClientKeyPEM: key, CACertPEM: "x"}
		}},
		{"timeout_ms", func(c *HookConfig) { c.TimeoutMS = -1 }},
		{"retries.max_attempts", func(c *HookConfig) { c.Retries.MaxAttempts = ptr(11) }},
		{"retries.max_attempts", func(c *HookConfig) { c.Retries.MaxAttempts = ptr(6) }},
		{"retries.max_attempts", func(c *HookConfig) { c.Retries.MaxAttempts = ptr(0) }},
		{"retries.backoff_ms", func(c *HookConfig) { c.Retries.BackoffMS = ptr(-5) }},
		{"retries.backoff_ms", func(c *HookConfig) { c.Retries.BackoffMS = ptr(0) }},
		{"retries.backoff_ms", func(c *HookConfig) { c.Retries.BackoffMS = ptr(5001) }},
		{"breaker.consecutive_failures", func(c *HookConfig) { c.Breaker.ConsecutiveFailures = -1 }},
		{"breaker.open_ms", func(c *HookConfig) { c.Breaker.OpenMS = 50 }},
		{"phase", func(c *HookConfig) { c.Phase = "middle" }},
	}
	for _, tc := range tests {
		c := base()
		tc.mut(&c)
		err := c.Normalize()
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("%s: err = %v", tc.field, err)
		}
	}
	// The bounds themselves are accepted.
	b := base()
	b.Retries = HookRetries{MaxAttempts: ptr(MaxHookAttempts), BackoffMS: ptr(MaxHookBackoffMS)}
	if err := b.Normalize(); err != nil {
		t.Fatalf("retries at their bounds: %v", err)
	}
	m := base()
	m.Auth = HookAuth{Type: "mtls", ClientCertPEM: cert, ClientKeyPEM: key, CACertPEM: cert}
	if err := m.Normalize(); err != nil {
		t.Fatalf("mtls: %v", err)
	}
	r := m.Redacted()
	if r.Auth.ClientKeyPEM != Redacted || r.Auth.ClientCertPEM != cert {
		t.Errorf("redacted mtls: %+v", r.Auth)
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
