//go:build e2e

package main

import (
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/auditrail/auditrail/internal/testenv"
)

// Errors that help: each names what was wrong and what to do, and hides
// only secrets.
func TestErrorsThatHelp(t *testing.T) {
	t.Parallel()
	run := func(args ...string) (string, int) {
		t.Helper()
		out, err := exec.Command(binary(t), args...).CombinedOutput()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return string(out), ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return string(out), 0
	}
	// A --url without a scheme is named, with the fix.
	out, code := run("admin", "--url", "127.0.0.1:8080", "org", "list")
	if code != 2 || !strings.Contains(out, `"127.0.0.1:8080"`) || !strings.Contains(out, "did you mean http://127.0.0.1:8080?") || strings.Contains(out, "xxxxx") {
		t.Errorf("admin --url 127.0.0.1:8080: %d %s", code, out)
	}
	// ... and its password is not.
	out, _ = run("admin", "--url", "ftp://u:hunter22@h:21", "org", "list")
	if strings.Contains(out, "hunter22") || !strings.Contains(out, "h:21") {
		t.Errorf("admin --url with a password: %s", out)
	}
	// tail without --org says the flag is required.
	if out, code := run("tail"); code != 2 || !strings.Contains(out, "--org is required") {
		t.Errorf("tail without --org: %d %s", code, out)
	}
	// A NATS server that refuses anonymous connections: the URL is shown and
	// --nats-creds named.
	p := startDev(t, t.TempDir())
	out, code = run("tail", "--org", "00000000-0000-4000-8000-000000000001", "--nats-url", "nats://"+p.nats)
	if code != 1 || !strings.Contains(out, "nats://"+p.nats) || !strings.Contains(out, "--nats-creds") || !strings.Contains(out, "DATA/nats/") {
		t.Errorf("tail without credentials: %d %s", code, out)
	}
	_ = testenv.FreePort
}

// hooks-example binds before it says it listens: on a busy port it exits
// non-zero at once, without claiming to listen.
func TestHooksExampleBusyPort(t *testing.T) {
	t.Parallel()
	l, _ := testenv.CountingListener(t)
	done := make(chan struct{})
	var out []byte
	var err error
	go func() {
		out, err = exec.Command(binary(t), "hooks-example", "--listen", l.Addr().String()).CombinedOutput()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("hooks-example on a busy port did not exit within 10 s")
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() == 0 || !strings.Contains(string(out), "address already in use") || strings.Contains(string(out), "listening on") {
		t.Fatalf("hooks-example on a busy port: %v %s", err, out)
	}
}
