// Package healthcheck is `auditrail healthcheck`: ask a role's /healthz once (container healthchecks).
package healthcheck

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/auditrail/auditrail/internal/apiclient"
	"github.com/auditrail/auditrail/internal/cli"
)

// Run asks a role's /healthz once: exit 0 on 200, else 1. The
// image has no shell and no HTTP client; a container healthcheck runs this.
func Run(ctx context.Context, args []string) error {
	fs := cli.NewFlags("auditrail healthcheck")
	timeout := fs.Duration("timeout", "", 3*time.Second, "how long to wait for the answer")
	if err := fs.ParseKeepArgs(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return cli.UsageErrorf("usage: auditrail healthcheck [--timeout D] http://127.0.0.1:PORT/healthz")
	}
	u, err := url.Parse(fs.Arg(0))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return cli.UsageErrorf("%q is not an http(s) URL", fs.Arg(0))
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return err
	}
	client := apiclient.NoRedirect(0)
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s answered %d: %s", u.Redacted(), resp.StatusCode, body)
	}
	return nil
}
