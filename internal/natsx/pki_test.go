package natsx_test

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/auditrail/auditrail/internal/natsx"
)

// ServerTLS issues a CA once and a server certificate for the cluster's
// host names that serves and dials (routes), kept across runs while it
// still fits and issued again when the hosts change or it nears expiry;
// keys are 0600.
func TestServerTLS(t *testing.T) {
	keys, out := t.TempDir(), t.TempDir()
	hosts := []string{"nats-1", "nats-2", "nats-3"}
	now := time.Now()
	read := func(name string) []byte {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(out, name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	steps := []struct {
		name       string
		hosts      []string
		at         time.Time
		wantIssued bool
	}{
		{"first run", hosts, now, true},
		{"again: kept", hosts, now, false},
		{"same hosts in another order: kept", []string{"nats-3", "nats-1", "nats-2"}, now, false},
		{"a host added", append(hosts, "nats-4"), now, true},
		{"a year later: kept", append(hosts, "nats-4"), now.Add(365 * 24 * time.Hour), false},
		{"within 30 days of expiry: issued again", append(hosts, "nats-4"), now.Add(2*365*24*time.Hour - 10*24*time.Hour), true},
	}
	var caPEM []byte
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			before, _ := os.ReadFile(filepath.Join(out, natsx.ServerCertFile))
			issued, err := natsx.ServerTLS(keys, out, st.hosts, st.at)
			if err != nil {
				t.Fatal(err)
			}
			after := read(natsx.ServerCertFile)
			if issued != st.wantIssued || issued == (string(before) == string(after)) {
				t.Fatalf("issued %v (want %v); certificate changed %v", issued, st.wantIssued, string(before) != string(after))
			}
			if caPEM == nil {
				caPEM = read(natsx.CAFile)
			} else if string(read(natsx.CAFile)) != string(caPEM) {
				t.Fatal("the CA changed")
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(caPEM) {
				t.Fatal("ca.pem holds no certificate")
			}
			pair, err := tls.LoadX509KeyPair(filepath.Join(out, natsx.ServerCertFile), filepath.Join(out, natsx.ServerKeyFile))
			if err != nil {
				t.Fatal(err)
			}
			cert := pair.Leaf
			for _, h := range st.hosts {
				for _, usage := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
					if _, err := cert.Verify(x509.VerifyOptions{DNSName: h, Roots: pool, CurrentTime: st.at, KeyUsages: []x509.ExtKeyUsage{usage}}); err != nil {
						t.Errorf("%s, usage %v: %v", h, usage, err)
					}
				}
			}
			if _, err := cert.Verify(x509.VerifyOptions{DNSName: "other-host", Roots: pool, CurrentTime: st.at}); err == nil {
				t.Error("the certificate names a host it was not issued for")
			}
			for _, f := range []string{filepath.Join(out, natsx.ServerKeyFile), filepath.Join(keys, natsx.CAKeyFile)} {
				if fi, err := os.Stat(f); err != nil || fi.Mode().Perm() != 0o600 {
					t.Errorf("%s: %v %v", f, fi.Mode(), err)
				}
			}
			if _, err := os.Stat(filepath.Join(out, natsx.CAKeyFile)); !os.IsNotExist(err) {
				t.Error("the CA key is beside the server's files")
			}
		})
	}
	for _, bad := range [][]string{nil, {""}, {"a b"}, {"nats-1,nats-2"}} {
		if _, err := natsx.ServerTLS(keys, out, bad, now); !errors.Is(err, natsx.ErrInvalidOption) {
			t.Errorf("hosts %q: %v", bad, err)
		}
	}
	// Another CA's certificate in out is replaced.
	other := t.TempDir()
	if _, err := natsx.ServerTLS(other, out, hosts, now); err != nil {
		t.Fatal(err)
	}
	if issued, err := natsx.ServerTLS(keys, out, hosts, now); err != nil || !issued {
		t.Fatalf("a certificate of another CA is kept: %v %v", issued, err)
	}
}
