//go:build e2e

package main

import (
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/auditrail/auditrail/internal/testenv"
)

// One --data directory belongs to one process; a busy port fails at once.
func TestOneProcessPerDataDirAndBusyPorts(t *testing.T) {
	t.Parallel()
	data := t.TempDir()
	first := startDev(t, data)
	free := func() string { p, _ := testenv.FreePort(); return fmt.Sprintf("127.0.0.1:%d", p) }
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"same data dir", []string{"--data", data, "--http", free(), "--nats-listen", free()},
			"data dir " + data + " is in use by process " + fmt.Sprint(first.cmd.Process.Pid)},
		{"busy HTTP port", []string{"--data", t.TempDir(), "--http", first.http, "--nats-listen", free()},
			"--http " + first.http + ": address already in use"},
		{"busy NATS port", []string{"--data", t.TempDir(), "--http", free(), "--nats-listen", first.nats},
			"--nats-listen " + first.nats + ": address already in use"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			out, err := exec.Command(binary(t), append([]string{"dev"}, tc.args...)...).CombinedOutput()
			if err == nil || !strings.Contains(string(out), tc.want) {
				t.Fatalf("second dev: %v\n%s\nwant %q", err, out, tc.want)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Fatalf("refused after %v, want at once", d)
			}
		})
	}
	if first.health() != 200 {
		t.Fatal("the first process suffered from the attempts")
	}
}
