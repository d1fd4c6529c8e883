// Command auditrail-demo runs the servers of `auditrail dev --demo`, apart
// from the product: the provider emulators (OAuth, Google Docs/Drive,
// Microsoft Graph) with sample content, and a MongoDB-wire server
// (FerretDB) with the sample database "shop". dev starts it and writes its
// configuration (demo.ServersConfig) as one JSON line on its standard
// input; it answers with one JSON line (demo.Answer) once both serve, and
// stops when its standard input closes (dev stops it, or dev has ended) or
// on SIGINT/SIGTERM.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/auditrail/auditrail/demo"
	"github.com/auditrail/auditrail/internal/cli"
	"github.com/auditrail/auditrail/internal/ferret"
)

func main() {
	if len(os.Args) > 1 {
		fmt.Fprintf(os.Stdout, "usage: %s (started by `auditrail dev --demo`, which writes its configuration on its standard input)\n", demo.ServersName)
		if os.Args[1] == "-h" || os.Args[1] == "--help" {
			return
		}
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})).With("process", demo.ServersName)
	if err := run(ctx, os.Stdin, os.Stdout, log); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", demo.ServersName, err)
		os.Exit(1)
	}
}

// run reads the configuration, starts the servers, answers, and serves
// until in closes or ctx ends.
func run(ctx context.Context, in io.Reader, out io.Writer, log *slog.Logger) error {
	r := bufio.NewReader(io.LimitReader(in, 1<<20))
	line, err := r.ReadBytes('\n')
	if err != nil {
		return fmt.Errorf("reading the configuration: %w", err)
	}
	var cfg demo.ServersConfig
	if err := json.Unmarshal(line, &cfg); err != nil {
		return fmt.Errorf("the configuration: %w", err)
	}
	if cfg.Data == "" || cfg.Redirect == "" {
		return fmt.Errorf("the configuration needs data and redirect")
	}
	// FerretDB logs at WARN every command it does not implement (the
	// driver's endSessions at each disconnect, with the whole message):
	// noise in dev's terminal. Its errors still show.
	ferretLog := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError})).With("process", demo.ServersName)
	mongo, err := ferret.StartOn(filepath.Join(cfg.Data, "ferretdb"), listenAddr("demo MongoDB-wire server", cfg.Mongo), ferretLog)
	if err != nil {
		return err
	}
	defer mongo.Stop()
	sctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	err = ferret.Seed(sctx, mongo.URI)
	cancel()
	if err != nil {
		return err
	}
	emu, err := startEmulators(cfg.Data, listenAddr("demo provider emulators", cfg.Emulators), cfg.Redirect, cfg.Clients, log)
	if err != nil {
		return err
	}
	defer emu.Stop()
	answer, err := json.Marshal(demo.Answer{MongoURI: mongo.URI, Emulators: emu.Base, Samples: len(emu.Samples)})
	if err != nil {
		return err
	}
	if _, err := out.Write(append(answer, '\n')); err != nil {
		return err
	}
	// Serve until the standard input closes (dev stops us, or has ended).
	closed := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, r)
		close(closed)
	}()
	select {
	case <-closed:
	case <-ctx.Done():
	}
	return nil
}

// listenAddr is addr when it is free (a restart listens where the last
// start did, so that what points there stays valid), else any free
// loopback port.
func listenAddr(what, addr string) string {
	if addr != "" && cli.CheckFree(what, addr) == nil {
		return addr
	}
	return "127.0.0.1:0"
}
