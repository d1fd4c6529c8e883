package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// roleChild is a process that a benchmark runs as a child (a role of the
// auditrail binary, or Benthos): its output discarded, its standard error
// kept.
type roleChild struct {
	name   string // as errors name it: "auditrail ingest"
	cmd    *exec.Cmd
	stderr strings.Builder
	exited chan error // its Wait's result, once
}

// startRole starts `auditrail <role> args…`; ctx's end stops it (SIGTERM).
func startRole(ctx context.Context, role string, args ...string) (*roleChild, error) {
	exe, err := ingestExe()
	if err != nil {
		return nil, err
	}
	return startChild(ctx, exe, "auditrail "+role, false, nil, append([]string{role}, args...)...)
}

// startChild starts exe with args and this process's environment plus
// env, named name in errors, keeping its standard output with its
// standard error when logsToStdout (Benthos logs there); ctx's end stops
// it (SIGTERM).
func startChild(ctx context.Context, exe, name string, logsToStdout bool, env []string, args ...string) (*roleChild, error) {
	c := &roleChild{name: name, exited: make(chan error, 1)}
	c.cmd = exec.CommandContext(ctx, exe, args...)
	c.cmd.Stdout, c.cmd.Stderr = io.Discard, &c.stderr
	if logsToStdout {
		c.cmd.Stdout = &c.stderr // one writer: exec copies both into it in one goroutine
	}
	if env != nil {
		c.cmd.Env = append(os.Environ(), env...)
	}
	c.cmd.Cancel = func() error { return c.cmd.Process.Signal(syscall.SIGTERM) }
	c.cmd.WaitDelay = 30 * time.Second
	if err := c.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s (%s): %w", name, exe, err)
	}
	go func() { c.exited <- c.cmd.Wait() }()
	return c, nil
}

// stop ends the process (SIGTERM) and waits for it; an error carries
// what it wrote to standard error.
func (c *roleChild) stop() error {
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	err := <-c.exited
	c.exited <- err // a later stop or check sees it too
	if err != nil {
		return fmt.Errorf("%s: %w: %s", c.name, err, c.stderr.String())
	}
	return nil
}

// exitedEarly is the error of a process that exited on its own, read
// without waiting: nil while it runs.
func (c *roleChild) exitedEarly() error {
	select {
	case err := <-c.exited:
		c.exited <- err
		return fmt.Errorf("%s exited: %v: %s", c.name, err, c.stderr.String())
	default:
		return nil
	}
}
