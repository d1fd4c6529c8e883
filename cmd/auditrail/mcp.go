package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/google/uuid"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/auditrail/auditrail/internal/apiclient"
	"github.com/auditrail/auditrail/internal/cli"
	"github.com/auditrail/auditrail/toolrunner/mcpserver"
)

// runMCP serves one project's tools over stdio (CONTRACT.md "MCP"): a
// proxy of the project's streamable HTTP endpoint, so that it needs no
// NATS; the upstream session is opened as the local client (its
// clientInfo is what the executions record).
func runMCP(ctx context.Context, args []string) error {
	fs := cli.NewFlags("auditrail mcp")
	base := fs.String("url", "", "http://127.0.0.1:8080", "base URL of the API (the tool runner, or the gateway)")
	key := fs.String("key", "", "", "API key or JWT (prefer the environment: a flag shows in the process list)")
	org := fs.String("org", "", "", "organization UUID (required)")
	project := fs.String("project", "", "", "project UUID (required)")
	user := fs.String("user", "", "", "the end user a service key acts for (sent as Auditrail-User-Id); a user's key acts as its user")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := apiclient.CheckBaseURL(*base); err != nil {
		return err
	}
	for _, f := range []struct{ name, v string }{{"org", *org}, {"project", *project}} {
		if _, err := uuid.Parse(f.v); err != nil || len(f.v) != 36 {
			return cli.UsageErrorf("--%s %q is not a UUID", f.name, f.v)
		}
	}
	if *key == "" {
		return cli.UsageErrorf("--key (or AUDITRAIL_KEY) is required")
	}
	// stdout carries the protocol: logs go to stderr.
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	endpoint := strings.TrimSuffix(*base, "/") + "/mcp/v1/orgs/" + *org + "/projects/" + *project
	srv, closeUp := mcpserver.NewProxy(mcpserver.HTTPDialer(endpoint, *key, *user, nil), &mcp.Implementation{Name: "auditrail", Version: buildVersion()}, log)
	defer func() { _ = closeUp() }()
	err := srv.Run(ctx, &mcp.StdioTransport{})
	if err != nil && !errors.Is(err, context.Canceled) && ctx.Err() == nil {
		return fmt.Errorf("mcp: %w", err)
	}
	return nil
}
