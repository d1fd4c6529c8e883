// Package hooksexample is `auditrail hooks-example`: the reference webhook server.
package hooksexample

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/auditrail/auditrail/hookproxy/example"
	"github.com/auditrail/auditrail/internal/cli"
)

// Run serves the reference webhook server.
func Run(ctx context.Context, args []string) error {
	fs := cli.NewFlags("auditrail hooks-example")
	listen := fs.String("listen", "AUDITRAIL_HOOKS_LISTEN", "127.0.0.1:9090", "listener of the webhook server")
	policyPath := fs.String("policy", "AUDITRAIL_HOOKS_POLICY", "", "YAML policy file (see hookproxy/example/testdata/policy.yaml); empty allows everything")
	token := fs.String("token", "AUDITRAIL_HOOKS_TOKEN", "", "bearer token the platform must send (the hook configuration's auth.token)")
	cert := fs.String("tls-cert", "", "", "server certificate (PEM); with --tls-key, serve HTTPS")
	key := fs.String("tls-key", "", "", "server private key (PEM)")
	clientCA := fs.String("client-ca", "", "", "CA of client certificates (PEM): require mTLS")
	mkLog := fs.LogFlags("text")
	if err := fs.Parse(args); err != nil {
		return err
	}
	log, err := mkLog(os.Stderr)
	if err != nil {
		return err
	}
	var policy example.Policy
	if *policyPath != "" {
		if policy, err = example.LoadPolicy(*policyPath); err != nil {
			return cli.Usage(err)
		}
	}
	if *token == "" && *clientCA == "" {
		log.Warn("no --token and no --client-ca: the webhook server accepts unauthenticated calls")
	}
	srv := &http.Server{Addr: *listen, Handler: example.New(policy, log).Handler(*token), ReadHeaderTimeout: 10 * time.Second}
	if *clientCA != "" {
		pem, err := os.ReadFile(*clientCA)
		if err != nil {
			return cli.UsageErrorf("--client-ca: %v", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return cli.UsageErrorf("--client-ca: no certificate in %s", *clientCA)
		}
		if *cert == "" || *key == "" {
			return cli.UsageErrorf("--client-ca needs --tls-cert and --tls-key")
		}
		srv.TLSConfig = &tls.Config{ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pool, MinVersion: tls.VersionTLS12}
	}
	// Bind first: "listening" is printed only once it is true, and a busy
	// port fails at once.
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("listen %s: %w", *listen, err)
	}
	errc := make(chan error, 1)
	go func() {
		if *cert != "" {
			errc <- srv.ServeTLS(ln, *cert, *key)
			return
		}
		errc <- srv.Serve(ln)
	}()
	fmt.Fprintf(os.Stdout, "hooks-example: listening on %s (contract 1.0: POST /access /pre /post, GET /health)\n", ln.Addr())
	select {
	case err := <-errc:
		if !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return srv.Shutdown(sctx)
}
