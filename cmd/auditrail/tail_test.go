//go:build e2e

package main

import (
	"bufio"
	"encoding/json"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/auditrail/auditrail/internal/natsx"
)

// tailLines runs `auditrail tail` and returns its first n lines.
func tailLines(t *testing.T, p *devProc, n int, args ...string) []map[string]any {
	t.Helper()
	cmd := exec.Command(binary(t), append(append([]string{"tail"}, p.natsArgs(natsx.RoleAdmin)...), args...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Signal(syscall.SIGTERM); _ = cmd.Wait() }()
	lines := make(chan map[string]any, n)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			var m map[string]any
			if json.Unmarshal(sc.Bytes(), &m) == nil {
				lines <- m
			}
		}
		close(lines)
	}()
	var out []map[string]any
	timeout := time.After(20 * time.Second)
	for len(out) < n {
		select {
		case m, ok := <-lines:
			if !ok {
				t.Fatalf("tail ended after %d lines", len(out))
			}
			out = append(out, m)
		case <-timeout:
			t.Fatalf("tail printed %d lines in 20 s, want %d", len(out), n)
		}
	}
	return out
}

func TestTail(t *testing.T) {
	t.Parallel()
	p := startDev(t, t.TempDir())
	org := uuid.New()
	emit(t, p, org, 5)
	js := tailLines(t, p, 5, "--org", org.String(), "--since", "1h", "--format", "json")
	for _, m := range js {
		if m["organization_id"] != org.String() || m["event_id"] == nil || m["action"] == nil {
			t.Fatalf("json line %v", m)
		}
	}
	ocsf := tailLines(t, p, 5, "--org", org.String(), "--since", "1h", "--format", "ocsf", "--kinds", "audit")
	for _, m := range ocsf {
		if m["class_uid"] != 6003.0 || m["metadata"].(map[string]any)["uid"] == nil || m["actor"] == nil {
			t.Fatalf("ocsf line %v", m)
		}
	}
}
