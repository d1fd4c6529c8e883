// Package gatewaycmd is `auditrail gateway`: one origin in front of the roles run apart.
package gatewaycmd

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/auditrail/auditrail/internal/cli"
	"github.com/auditrail/auditrail/internal/gateway"
)

// Run is the one origin in front of the roles run apart: it routes
// each request by path to the query, toolrunner or controlplane instances.
func Run(ctx context.Context, args []string) error {
	fs := cli.NewFlags("auditrail gateway")
	addr := fs.String("http", "", "127.0.0.1:8000", "listener of the gateway (the one base URL of the APIs and the dashboard)")
	q := fs.String("query", "", "", "base URLs of the query instances, comma-separated (required)")
	tr := fs.String("toolrunner", "", "", "base URLs of the toolrunner instances, comma-separated (required)")
	cp := fs.String("controlplane", "", "", "base URLs of the controlplane instances, comma-separated (required)")
	mkLog := fs.LogFlags("json")
	if err := fs.Parse(args); err != nil {
		return err
	}
	log, err := mkLog(os.Stderr)
	if err != nil {
		return err
	}
	list := func(s string) []string {
		var out []string
		for _, p := range strings.Split(s, ",") {
			if p = strings.TrimSpace(p); p != "" {
				out = append(out, p)
			}
		}
		return out
	}
	g, err := gateway.New(gateway.Config{Upstreams: map[gateway.Role][]string{
		gateway.Query: list(*q), gateway.ToolRunner: list(*tr), gateway.ControlPlane: list(*cp)}}, log.With("role", "gateway"))
	if err != nil {
		return cli.Usage(fmt.Errorf("%w (give --query, --toolrunner and --controlplane)", err))
	}
	srv := &http.Server{Addr: *addr, Handler: g, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute, MaxHeaderBytes: 64 << 10}
	errc := make(chan error, 1)
	go func() { errc <- srv.ListenAndServe() }()
	log.Info("gateway listening", "http", *addr)
	select {
	case err := <-errc:
		return fmt.Errorf("listen %s: %w", *addr, err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return nil
}
