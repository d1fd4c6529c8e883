package testenv

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/auditrail/auditrail/internal/natsx"
)

// TLSFiles is a throwaway PKI in a temp dir: a CA, a server certificate
// for 127.0.0.1 and localhost (also good for dialling another server), and
// a client certificate, each as PEM files.
type TLSFiles struct {
	CA, ServerCert, ServerKey, ClientCert, ClientKey string
	pool                                             *x509.CertPool
}

// NewTLSFiles writes a CA and a server and a client certificate signed by
// it (ECDSA P-256, valid for a day).
func NewTLSFiles(t testing.TB) *TLSFiles {
	t.Helper()
	dir := t.TempDir()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "auditrail test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	f := &TLSFiles{pool: x509.NewCertPool()}
	f.pool.AddCert(ca)
	write := func(name, typ string, der []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	f.CA = write("ca.pem", "CERTIFICATE", caDER)
	leaf := func(serial int64, name string, usage ...x509.ExtKeyUsage) (string, string) {
		key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: name},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: usage,
			DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		kder, _ := x509.MarshalECPrivateKey(key)
		return write(name+".pem", "CERTIFICATE", der), write(name+".key", "EC PRIVATE KEY", kder)
	}
	// The server's certificate serves clients and dials other servers
	// (routes of a cluster).
	f.ServerCert, f.ServerKey = leaf(2, "server", x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth)
	f.ClientCert, f.ClientKey = leaf(3, "client", x509.ExtKeyUsageClientAuth)
	return f
}

// ServerConfig is the server side: its certificate, and, with verify, the
// clients' certificates required and checked against the CA.
func (f *TLSFiles) ServerConfig(t testing.TB, verify bool) *tls.Config {
	t.Helper()
	cert, err := tls.LoadX509KeyPair(f.ServerCert, f.ServerKey)
	if err != nil {
		t.Fatal(err)
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if verify {
		cfg.ClientAuth, cfg.ClientCAs = tls.RequireAndVerifyClientCert, f.pool
	}
	return cfg
}

// NATSAuthTLS starts an embedded JetStream server in operator mode (as
// NATSAuth, without streams) that serves TLS only and verifies client
// certificates signed by pki's CA; the credentials of every role are in
// the returned directory. It stops when the test ends.
func NATSAuthTLS(t testing.TB, pki *TLSFiles) (*server.Server, *natsx.Auth, string) {
	t.Helper()
	dir := t.TempDir()
	auth, err := natsx.LoadOrCreateAuth(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := auth.WriteCreds(dir); err != nil {
		t.Fatal(err)
	}
	cfg := natsx.DefaultServerConfig()
	cfg.Listen, cfg.StoreDir, cfg.Auth, cfg.TLS = "127.0.0.1:0", t.TempDir(), auth, pki.ServerConfig(t, true)
	s, err := natsx.StartServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() }) // its goroutines gone before goleak looks
	return s, auth, dir
}
