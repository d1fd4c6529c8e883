package natsx

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// The files of the NATS servers' TLS, as ServerTLS writes them.
const (
	// CAFile is the CA certificate (public): the roles' --nats-tls-ca and
	// the servers' ca_file.
	CAFile = "ca.pem"
	// CAKeyFile is the CA's key, kept beside the operator seeds only.
	CAKeyFile = "nats-ca.key"
	// CACertFile is the CA certificate beside its key.
	CACertFile = "nats-ca.pem"
	// ServerCertFile and ServerKeyFile are the servers' certificate (for
	// every host name of the cluster) and key.
	ServerCertFile = "server.pem"
	ServerKeyFile  = "server.key"
)

// Validity of what ServerTLS issues; a server certificate that expires
// within renewBefore is issued again by the next run.
const (
	caValidity     = 10 * 365 * 24 * time.Hour
	serverValidity = 2 * 365 * 24 * time.Hour
	renewBefore    = 30 * 24 * time.Hour
)

// ServerTLS keeps the TLS files of a NATS cluster: a CA (its key and
// certificate in keysDir, created once) and, in outDir, the CA certificate
// and a server certificate and key for hosts, usable both to serve (client
// and cluster ports) and to dial the other servers (cluster routes with
// verify), so that only holders of a certificate of this CA join the
// cluster. The server certificate is kept while it names exactly hosts,
// was signed by the CA and is valid for more than 30 days; otherwise it is
// issued again. Keys are written 0600, certificates 0644. It returns
// whether the server certificate was (re)issued.
func ServerTLS(keysDir, outDir string, hosts []string, now time.Time) (issued bool, err error) {
	if len(hosts) == 0 {
		return false, fmt.Errorf("%w: the servers' certificate needs at least one host name", ErrInvalidOption)
	}
	for _, h := range hosts {
		if h == "" || strings.ContainsAny(h, " ,/") {
			return false, fmt.Errorf("%w: host name %q", ErrInvalidOption, h)
		}
	}
	for _, d := range []string{keysDir, outDir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return false, fmt.Errorf("nats tls: %w", err)
		}
	}
	ca, caKey, caPEM, err := loadOrCreateCA(keysDir, now)
	if err != nil {
		return false, err
	}
	if err := writeAtomic(filepath.Join(outDir, CAFile), caPEM, 0o644); err != nil {
		return false, err
	}
	if serverCertCurrent(outDir, ca, hosts, now) {
		return false, nil
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return false, fmt.Errorf("nats tls: %w", err)
	}
	tmpl := &x509.Certificate{SerialNumber: serial(), Subject: pkix.Name{CommonName: hosts[0], Organization: []string{"auditrail NATS"}},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(serverValidity),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return false, fmt.Errorf("nats tls: server certificate: %w", err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return false, fmt.Errorf("nats tls: %w", err)
	}
	// The key first: a certificate is never left beside another key.
	if err := writeAtomic(filepath.Join(outDir, ServerKeyFile), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		return false, err
	}
	if err := writeAtomic(filepath.Join(outDir, ServerCertFile), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		return false, err
	}
	return true, nil
}

// loadOrCreateCA returns the CA of keysDir, created when absent.
func loadOrCreateCA(keysDir string, now time.Time) (*x509.Certificate, *ecdsa.PrivateKey, []byte, error) {
	certPath, keyPath := filepath.Join(keysDir, CACertFile), filepath.Join(keysDir, CAKeyFile)
	certPEM, cerr := os.ReadFile(certPath)
	keyPEM, kerr := os.ReadFile(keyPath)
	if cerr == nil && kerr == nil {
		cert, key, err := parsePair(certPEM, keyPEM)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("nats tls: the CA in %s: %w", keysDir, err)
		}
		return cert, key, certPEM, nil
	}
	if (cerr == nil) != (kerr == nil) || cerr != nil && !os.IsNotExist(cerr) || kerr != nil && !os.IsNotExist(kerr) {
		return nil, nil, nil, fmt.Errorf("nats tls: the CA in %s is incomplete (%s, %s): %v %v", keysDir, CACertFile, CAKeyFile, cerr, kerr)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("nats tls: %w", err)
	}
	tmpl := &x509.Certificate{SerialNumber: serial(), Subject: pkix.Name{CommonName: "auditrail NATS CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(caValidity),
		IsCA: true, BasicConstraintsValid: true, MaxPathLenZero: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("nats tls: CA: %w", err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("nats tls: %w", err)
	}
	certPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	if err := writeAtomic(keyPath, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		return nil, nil, nil, err
	}
	if err := writeAtomic(certPath, certPEM, 0o644); err != nil {
		return nil, nil, nil, err
	}
	cert, _ := x509.ParseCertificate(der)
	return cert, key, certPEM, nil
}

// serverCertCurrent reports whether outDir holds a server certificate and
// key that match, signed by ca, for exactly hosts, valid beyond renewBefore.
func serverCertCurrent(outDir string, ca *x509.Certificate, hosts []string, now time.Time) bool {
	certPEM, err := os.ReadFile(filepath.Join(outDir, ServerCertFile))
	if err != nil {
		return false
	}
	keyPEM, err := os.ReadFile(filepath.Join(outDir, ServerKeyFile))
	if err != nil {
		return false
	}
	cert, _, err := parsePair(certPEM, keyPEM)
	if err != nil || cert.CheckSignatureFrom(ca) != nil || now.Add(renewBefore).After(cert.NotAfter) {
		return false
	}
	names := append([]string(nil), cert.DNSNames...)
	for _, ip := range cert.IPAddresses {
		names = append(names, ip.String())
	}
	want := append([]string(nil), hosts...)
	slices.Sort(names)
	slices.Sort(want)
	return slices.Equal(names, slices.Compact(want))
}

// parsePair parses a PEM certificate and its PEM EC key, checking that
// they belong together.
func parsePair(certPEM, keyPEM []byte) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	cb, _ := pem.Decode(certPEM)
	kb, _ := pem.Decode(keyPEM)
	if cb == nil || kb == nil {
		return nil, nil, fmt.Errorf("%w: not PEM", ErrInvalidOption)
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, nil, err
	}
	key, err := x509.ParseECPrivateKey(kb.Bytes)
	if err != nil {
		return nil, nil, err
	}
	pub, ok := cert.PublicKey.(*ecdsa.PublicKey)
	if !ok || !pub.Equal(&key.PublicKey) {
		return nil, nil, fmt.Errorf("%w: the certificate is not the key's", ErrInvalidOption)
	}
	return cert, key, nil
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	return n
}

// writeAtomic writes data to path through a temporary file and a rename,
// unless path already holds exactly data.
func writeAtomic(path string, data []byte, perm os.FileMode) error {
	if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, data) {
		return os.Chmod(path, perm)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, perm); err != nil {
		return fmt.Errorf("nats tls: %w", err)
	}
	if err := os.Chmod(tmp, perm); err != nil { // a tmp left by a crash keeps its mode
		return fmt.Errorf("nats tls: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("nats tls: %w", err)
	}
	return nil
}
