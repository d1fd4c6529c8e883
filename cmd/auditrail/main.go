// Command auditrail is the single binary of auditrail: every role and tool
// is a subcommand.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/auditrail/auditrail/commands/admin"
	"github.com/auditrail/auditrail/commands/dlq"
	emitcmd "github.com/auditrail/auditrail/commands/emit"
	"github.com/auditrail/auditrail/commands/gatewaycmd"
	"github.com/auditrail/auditrail/commands/healthcheck"
	"github.com/auditrail/auditrail/commands/hooksexample"
	"github.com/auditrail/auditrail/commands/natssetup"
	"github.com/auditrail/auditrail/commands/receive"
	"github.com/auditrail/auditrail/commands/tail"
	"github.com/auditrail/auditrail/commands/verifycmd"
	"github.com/auditrail/auditrail/internal/cli"
	"github.com/auditrail/auditrail/internal/redact"
)

type command struct {
	name  string
	short string
	run   func(ctx context.Context, args []string) error
}

func commands() []command {
	return []command{
		{"dev", "run every role in one process on embedded defaults", runDev},
		{"ingest", "consume events from JetStream into the audit store (production role)", runIngest},
		{"query", "serve the audit API (production role)", runQuery},
		{"controlplane", "serve the admin API (production role)", runControlPlane},
		{"toolrunner", "serve the tool runner API (production role)", runToolRunner},
		{"deliver", "push events to the organizations' destinations (production role)", runDeliver},
		{"tlog", "the tamper-evidence logs: append every stored entry to its organization's log, sign checkpoints (production role)", runTLog},
		{"lifecycle", "retention: expire what each organization's retention no longer keeps, from the store and the streams, recorded in its signed log (production role)", runLifecycle},
		{"gateway", "one origin in front of the roles run apart: routes by path to query, toolrunner and controlplane", gatewaycmd.Run},
		{"receive", "a receiver of push deliveries: verifies signatures, dedups by event_id, counts", receive.Run},
		{"admin", "the admin API from a terminal (source CLI)", admin.Run},
		{"emit", "publish synthetic audit events", emitcmd.Run},
		{"tail", "follow an organization's events (JSON lines or OCSF)", tail.Run},
		{"mcp", "serve one project's tools to a local MCP client over stdio, through the HTTP API", runMCP},
		{"verify", "verify an organization's log against pinned public keys: an export offline, or the organization online through the API", verifycmd.Run},
		{"dlq", "list the dead letters, and replay them once their cause is fixed", dlq.Run},
		{"hooks-example", "the reference webhook server (contract 1.0) with YAML policies", hooksexample.Run},
		{"nats-setup", "write the NATS server authentication include and the credentials of every role", natssetup.Run},
		{"migrate", "create the ClickHouse database and apply the migrations, then exit (run as a user with DDL rights)", runMigrate},
		{"healthcheck", "ask a role's /healthz once: exit 0 on 200 (container healthchecks; the image has no shell)", healthcheck.Run},
		{"version", "print the version, the commit and the Go version", runVersion},
	}
}

func usage(w io.Writer) {
	fmt.Fprintf(w, "usage: auditrail <command> [flags]\n\ncommands:\n")
	width := 0
	for _, c := range commands() {
		width = max(width, len(c.name))
	}
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-*s  %s\n", width, c.name, c.short)
	}
	fmt.Fprintf(w, "\nRun 'auditrail <command> -h' for the flags of a command; every flag has an AUDITRAIL_… environment twin.\n")
}

func main() {
	if len(os.Args) < 2 || os.Args[1] == "-h" || os.Args[1] == "--help" || os.Args[1] == "help" {
		if len(os.Args) < 2 {
			usage(os.Stderr)
			os.Exit(2)
		}
		usage(os.Stdout)
		return
	}
	if os.Args[1] == "--version" || os.Args[1] == "-version" {
		os.Args[1] = "version"
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	for _, c := range commands() {
		if c.name == os.Args[1] {
			err := c.run(ctx, os.Args[2:])
			if errors.Is(err, flag.ErrHelp) {
				return
			}
			if err != nil {
				// Last line of defence: no URL credential reaches the terminal.
				fmt.Fprintf(os.Stderr, "auditrail %s: %s\n", c.name, redact.String(err.Error()))
				var ue cli.UsageError
				if errors.As(err, &ue) {
					os.Exit(2)
				}
				os.Exit(1)
			}
			return
		}
	}
	fmt.Fprintf(os.Stderr, "auditrail: unknown command %q\n\n", os.Args[1])
	usage(os.Stderr)
	os.Exit(2)
}
