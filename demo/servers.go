package demo

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// The demo user's account at the emulated providers.
const (
	User      = "demo-user"
	UserEmail = "demo-user@example.com"
)

// ServersName is the binary that runs the demo's servers.
const ServersName = "auditrail-demo"

// Client is the OAuth client the demo registers for a provider.
type Client struct {
	ID     string `json:"id"`
	Secret string `json:"secret"`
}

// ServersConfig is what auditrail-demo reads, as one JSON line on its
// standard input: where to keep its data, where to listen (an address
// that is taken, or empty, means any free loopback port), and the OAuth
// clients to register with their redirect URI.
type ServersConfig struct {
	Data      string            `json:"data"`
	Mongo     string            `json:"mongo,omitempty"`
	Emulators string            `json:"emulators,omitempty"`
	Redirect  string            `json:"redirect"`
	Clients   map[string]Client `json:"clients"`
}

// Answer is what auditrail-demo answers, one JSON line on its standard
// output, once its servers serve.
type Answer struct {
	// MongoURI is the MongoDB-wire server with the sample database.
	MongoURI string `json:"mongo_uri"`
	// Emulators is the base URL of the provider emulators: OAuth under
	// /oauth, Google Docs/Drive under /google, Microsoft Graph under
	// /microsoft.
	Emulators string `json:"emulators"`
	// Samples is the number of sample documents in the Google emulator.
	Samples int `json:"samples"`
}

// Servers are the demo's servers, running in an auditrail-demo process.
type Servers struct {
	Answer
	cmd   *exec.Cmd
	stdin io.WriteCloser
	done  chan error
	once  sync.Once
	// closeOnce closes stdin once (Close, then Stop).
	closeOnce sync.Once
}

// ServersBinary finds auditrail-demo beside this executable, else on PATH.
func ServersBinary() (string, error) {
	if self, err := os.Executable(); err == nil {
		exe := filepath.Join(filepath.Dir(self), ServersName)
		if _, err := os.Stat(exe); err == nil {
			return exe, nil
		}
	}
	if exe, err := exec.LookPath(ServersName); err == nil {
		return exe, nil
	}
	return "", fmt.Errorf("--demo runs the provider emulators and the MongoDB-wire server from the %s binary, found neither beside this executable nor on PATH: make build (or make run) builds it beside bin/auditrail", ServersName)
}

// startTimeout bounds the start of the servers (FerretDB's first start
// seeds the sample database).
const startTimeout = 2 * time.Minute

// StartServers runs exe (auditrail-demo) with cfg and waits for its answer.
// The process ends when Stop closes its standard input, or when this
// process ends, whichever comes first (it never outlives dev).
func StartServers(ctx context.Context, exe string, cfg ServersConfig, log *slog.Logger) (*Servers, error) {
	line, err := json.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("%s: %w", ServersName, err)
	}
	s := &Servers{cmd: cmd, stdin: stdin, done: make(chan error, 1)}
	answer := make(chan error, 1)
	go func() {
		r := bufio.NewReader(io.LimitReader(stdout, 1<<20))
		b, err := r.ReadBytes('\n')
		if err == nil {
			err = json.Unmarshal(b, &s.Answer)
		}
		answer <- err
		_, _ = io.Copy(io.Discard, stdout) // nothing more is expected
		s.done <- cmd.Wait()
	}()
	if _, err := stdin.Write(append(line, '\n')); err != nil {
		s.Stop()
		return nil, fmt.Errorf("%s: %w", ServersName, err)
	}
	select {
	case err = <-answer:
	case <-ctx.Done():
		err = ctx.Err()
	case <-time.After(startTimeout):
		err = errors.New("no answer in " + startTimeout.String())
	}
	if err == nil && (s.MongoURI == "" || !strings.HasPrefix(s.Emulators, "http://")) {
		err = fmt.Errorf("unexpected answer %q %q", s.MongoURI, s.Emulators)
	}
	if err != nil {
		s.Stop()
		return nil, fmt.Errorf("%s did not start: %w", ServersName, err)
	}
	log.Debug("demo servers", "pid", cmd.Process.Pid, "mongo", s.MongoURI, "emulators", s.Emulators)
	return s, nil
}

// stopGrace is how long Stop waits for the servers to end before it kills
// them.
const stopGrace = 3 * time.Second

// Close asks the servers to end (their standard input closes) without
// waiting: dev closes its own connections to them meanwhile (FerretDB waits
// up to 3 s for its clients), then Stop waits.
func (s *Servers) Close() {
	s.closeOnce.Do(func() { _ = s.stdin.Close() })
}

// Stop ends the servers: their standard input closes, they shut down;
// after stopGrace they are killed.
func (s *Servers) Stop() {
	s.Close()
	s.once.Do(func() {
		select {
		case <-s.done:
		case <-time.After(stopGrace):
			_ = s.cmd.Process.Kill()
			<-s.done
		}
	})
}
