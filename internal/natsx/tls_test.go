package natsx_test

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/auditrail/auditrail/internal/natsx"
	"github.com/auditrail/auditrail/internal/testenv"
)

// A role reaches a TLS server that verifies clients only with the CA and
// its client certificate; each missing piece is refused with a hint.
func TestConnectTLS(t *testing.T) {
	pki := testenv.NewTLSFiles(t)
	s, _, dir := testenv.NATSAuthTLS(t, pki)
	url := strings.Replace(s.ClientURL(), "nats://", "tls://", 1)
	creds := natsx.CredsFile(dir, natsx.RoleAdmin)
	log := slog.New(slog.DiscardHandler)
	connect := func(f natsx.TLSFiles) (*nats.Conn, error) {
		opts, err := f.Options()
		if err != nil {
			return nil, err
		}
		return natsx.Connect(url, "tls-test", creds, log, append(opts, nats.MaxReconnects(0), nats.RetryOnFailedConnect(false))...)
	}
	nc, err := connect(natsx.TLSFiles{CA: pki.CA, Cert: pki.ClientCert, Key: pki.ClientKey})
	if err != nil {
		t.Fatalf("with the CA and a client certificate: %v", err)
	}
	if !nc.TLSRequired() {
		t.Error("the connection is not TLS")
	}
	if _, err := nc.Request("$JS.API.INFO", nil, 5*time.Second); err != nil {
		t.Fatalf("a request over TLS: %v", err)
	}
	nc.Close()
	for _, c := range []struct {
		name string
		f    natsx.TLSFiles
		want string
	}{
		{"no client certificate", natsx.TLSFiles{CA: pki.CA}, ""},
		{"the system's roots only", natsx.TLSFiles{Cert: pki.ClientCert, Key: pki.ClientKey}, "--nats-tls-ca"},
	} {
		t.Run(c.name, func(t *testing.T) {
			nc, err := connect(c.f)
			if err == nil {
				nc.Close()
				t.Fatal("connected")
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want the hint %q", err, c.want)
			}
		})
	}
	if _, err := (natsx.TLSFiles{Cert: pki.ClientCert}).Options(); err == nil {
		t.Error("a certificate without its key was accepted")
	}
	if _, err := (natsx.TLSFiles{CA: pki.ClientKey}).Options(); err == nil {
		t.Error("a CA file without a certificate was accepted")
	}
}

// Credentials rotate without a restart: a connection whose credentials
// file is replaced reconnects with the new user, and works on.
func TestCredentialsRotateWithoutRestart(t *testing.T) {
	old := natsx.CredsPollInterval
	natsx.CredsPollInterval = 50 * time.Millisecond
	t.Cleanup(func() { natsx.CredsPollInterval = old })
	pki := testenv.NewTLSFiles(t)
	s, auth, dir := testenv.NATSAuthTLS(t, pki)
	creds := filepath.Join(t.TempDir(), "admin.creds")
	b, err := os.ReadFile(natsx.CredsFile(dir, natsx.RoleAdmin))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(creds, b, 0o600); err != nil {
		t.Fatal(err)
	}
	opts, _ := natsx.TLSFiles{CA: pki.CA, Cert: pki.ClientCert, Key: pki.ClientKey}.Options()
	nc, err := natsx.Connect(s.ClientURL(), "rotate-test", creds, slog.New(slog.DiscardHandler), opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	user := func() string {
		cz, err := s.Connz(&server.ConnzOptions{Username: true})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range cz.Conns {
			if c.Name == "rotate-test" {
				return c.AuthorizedUser
			}
		}
		return ""
	}
	first := user()
	if first == "" {
		t.Fatal("the connection is not listed")
	}
	// A half-written file is skipped; the connection keeps its user.
	if err := os.WriteFile(creds, b[:len(b)/2], 0o600); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	if u := user(); u != first {
		t.Fatalf("a truncated credentials file was used: user %s", u)
	}
	next, err := auth.Creds(natsx.RoleAdmin)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(creds, next, 0o600); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, "connected as another user than "+first+" after the credentials changed", func() bool {
		u := user()
		return u != first && u != ""
	})
	if _, err := nc.Request("$JS.API.INFO", nil, 5*time.Second); err != nil {
		t.Fatalf("a request after the rotation: %v", err)
	}
}
