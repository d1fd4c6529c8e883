package natsx

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/nats-io/nats.go"
)

// TLSFiles are the PEM files of a role's TLS connection to NATS: CA
// verifies the servers (empty: the system's roots), Cert and Key are the
// role's client certificate, for servers that verify clients (both or
// neither). All empty: no TLS unless the URL asks for it (tls://).
type TLSFiles struct {
	CA, Cert, Key string
}

// Enabled reports whether any file is given.
func (f TLSFiles) Enabled() bool { return f.CA != "" || f.Cert != "" || f.Key != "" }

// Config loads the files into a client TLS configuration (TLS 1.2 at
// least), checking each now, so that a missing or malformed file is an
// error at start and not a reconnect loop.
func (f TLSFiles) Config() (*tls.Config, error) {
	if (f.Cert == "") != (f.Key == "") {
		return nil, fmt.Errorf("%w: a client certificate needs both --nats-tls-cert and --nats-tls-key", ErrInvalidOption)
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if f.CA != "" {
		pem, err := os.ReadFile(f.CA)
		if err != nil {
			return nil, fmt.Errorf("nats tls ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%w: nats tls ca %s holds no PEM certificate", ErrInvalidOption, f.CA)
		}
		cfg.RootCAs = pool
	}
	if f.Cert != "" {
		cert, err := tls.LoadX509KeyPair(f.Cert, f.Key)
		if err != nil {
			return nil, fmt.Errorf("nats tls client certificate: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}

// Options are the nats.go options of f (none when f is empty).
func (f TLSFiles) Options() ([]nats.Option, error) {
	if !f.Enabled() {
		return nil, nil
	}
	cfg, err := f.Config()
	if err != nil {
		return nil, err
	}
	return []nats.Option{nats.Secure(cfg)}, nil
}

// errTLS tells a TLS failure in a connection error (for the hint).
func errTLS(err error) bool {
	var uae x509.UnknownAuthorityError
	var cie x509.CertificateInvalidError
	var hne x509.HostnameError
	var rhe tls.RecordHeaderError
	return errors.As(err, &uae) || errors.As(err, &cie) || errors.As(err, &hne) || errors.As(err, &rhe) ||
		errors.Is(err, nats.ErrSecureConnRequired) || errors.Is(err, nats.ErrSecureConnWanted) ||
		// an alert of the server ("remote error: tls: certificate required",
		// its type is not exported) or nats.go's "tls error: …"
		strings.Contains(err.Error(), "tls: ") || strings.Contains(err.Error(), "tls error")
}
