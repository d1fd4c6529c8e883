//go:build e2e

package main

import (
	"encoding/base64"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/auditrail/auditrail/internal/natsx"
	"github.com/auditrail/auditrail/internal/testenv"
)

// A role reaches NATS over TLS with a client certificate, from files; its
// credentials file is rotated while it runs and it reconnects with the new
// user, without a restart, and serves on. Without the client certificate it
// does not start, and says why.
func TestRoleOverTLSRotatesCredentials(t *testing.T) {
	t.Parallel()
	pki := testenv.NewTLSFiles(t)
	ns, auth, dir := testenv.NATSAuthTLS(t, pki)
	url := strings.Replace(ns.ClientURL(), "nats://", "tls://", 1)
	creds := filepath.Join(t.TempDir(), "controlplane.creds")
	b, err := os.ReadFile(natsx.CredsFile(dir, natsx.RoleControlPlane))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(creds, b, 0o600); err != nil {
		t.Fatal(err)
	}
	const boot = "bootstrap-key-of-the-tls-test"
	args := []string{"--nats-url", url, "--nats-creds", creds, "--nats-tls-ca", pki.CA, "--bootstrap-key", boot,
		"--secrets-keys", base64.StdEncoding.EncodeToString([]byte("0123456789abcdef0123456789abcdef"))}

	out, err := exec.Command(binary(t), append([]string{"controlplane", "--http", "127.0.0.1:0"}, args...)...).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "--nats-tls-cert") {
		t.Fatalf("without a client certificate: %v, want a refusal naming --nats-tls-cert\n%s", err, out)
	}

	cp := newAPIClient(t, startRole(t, "controlplane", append(args, "--nats-tls-cert", pki.ClientCert, "--nats-tls-key", pki.ClientKey, "--nats-creds-poll", "100ms")...))
	users := func() map[string]bool {
		cz, err := ns.Connz(&server.ConnzOptions{Username: true})
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]bool{}
		for _, c := range cz.Conns {
			if c.AuthorizedUser == "" {
				continue // not authenticated yet (a reconnect under way)
			}
			m[c.AuthorizedUser] = true
			if c.TLSVersion == "" {
				t.Errorf("connection %s is not TLS", c.Name)
			}
		}
		return m
	}
	before := users()
	if len(before) == 0 {
		t.Fatal("the role is not connected")
	}
	next, err := auth.Creds(natsx.RoleControlPlane)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(creds, next, 0o600); err != nil {
		t.Fatal(err)
	}
	var now map[string]bool
	testenv.Eventually(t, 15*time.Second, func() string { return fmt.Sprintf("only new users: before the rotation %v, now %v", before, now) }, func() bool {
		now = users()
		stale := false
		for u := range now {
			stale = stale || before[u]
		}
		return len(now) > 0 && !stale
	})
	if r := cp.call("POST", "/api/v1/orgs", boot, map[string]any{"name": "after the rotation"}); r.status != 201 {
		t.Fatalf("create an org after the rotation: %d %s", r.status, r.raw)
	}
}
