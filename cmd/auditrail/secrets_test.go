//go:build e2e

package main

import (
	"context"
	"encoding/base64"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// No secret given in the environment shows in usage text, errors or logs,
// whatever goes wrong: --help, an unknown flag, a malformed variable, or a
// start that fails to reach its servers.
func TestSecretsNeverPrinted(t *testing.T) {
	t.Parallel()
	bin := binary(t)
	secrets := map[string]string{
		"AUDITRAIL_BOOTSTRAP_KEY":  "SECRET-bootstrap-key-0001",
		"AUDITRAIL_SECRETS_KEYS":   base64.StdEncoding.EncodeToString([]byte("SECRET-sealing-key-32-bytes-0002")),
		"AUDITRAIL_CURSOR_KEYS":    base64.StdEncoding.EncodeToString([]byte("SECRET-cursor-key-0003")),
		"AUDITRAIL_CLICKHOUSE_DSN": "clickhouse://default:SECRET-ch-pass-0004@127.0.0.1:1/audit?password=SECRET-ch-param-0005",
		"AUDITRAIL_NATS_URL":       "nats://SECRET-nats-token-0006@127.0.0.1:1",
		"AUDITRAIL_KEY":            "SECRET-admin-key-0007",
		"AUDITRAIL_URL":            "http://admin:SECRET-url-pass-0008@127.0.0.1:1",
		"AUDITRAIL_HOOKS_TOKEN":    "SECRET-hooks-token-0009",
	}
	marker := "SECRET-malformed-0010"
	needles := []string{"SECRET-", marker}
	for _, v := range secrets {
		needles = append(needles, v)
	}
	env := func(extra ...string) []string {
		e := []string{"PATH=/usr/bin:/bin", "HOME=" + t.TempDir()}
		for k, v := range secrets {
			e = append(e, k+"="+v)
		}
		return append(e, extra...)
	}
	// real: arguments that start the command for real (it fails to reach
	// the servers named by the secret-bearing variables).
	cmds := []struct {
		name      string
		malformed string // a variable that does not parse
		real      []string
	}{
		{"dev", "AUDITRAIL_STREAM_MAX_AGE", []string{"--data", t.TempDir(), "--http", "127.0.0.1:0"}},
		{"ingest", "AUDITRAIL_BATCH_SIZE", nil},
		{"query", "AUDITRAIL_LOG_LEVEL", nil},
		{"controlplane", "AUDITRAIL_LOG_LEVEL", nil},
		{"toolrunner", "AUDITRAIL_LOG_FORMAT", nil},
		{"emit", "AUDITRAIL_COUNT", []string{"--org", "new"}},
		{"tail", "AUDITRAIL_SINCE", []string{"--org", "00000000-0000-0000-0000-000000000001"}},
		{"admin", "AUDITRAIL_URL", []string{"org", "get", "00000000-0000-0000-0000-000000000001"}},
		{"hooks-example", "AUDITRAIL_LOG_FORMAT", nil},
	}
	for _, c := range cmds {
		cases := []struct {
			name string
			args []string
			env  []string
			exit int // 0, 2, or -1 for any failure
		}{
			{"help", []string{"--help"}, env(), 0},
			{"typo", []string{"--typo"}, env(), 2},
			{"malformed env", nil, env(c.malformed + "=" + marker + "@[::1"), 2},
		}
		if c.name == "admin" {
			cases[2].args = []string{"org", "get", "x"} // the URL is checked when used
			cases[2].exit = -1
		}
		if c.real != nil || c.name == "ingest" || c.name == "query" || c.name == "controlplane" || c.name == "toolrunner" {
			cases = append(cases, struct {
				name string
				args []string
				env  []string
				exit int
			}{"unreachable servers", c.real, env(), -1})
		}
		for _, k := range cases {
			t.Run(c.name+"/"+k.name, func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
				defer cancel()
				cmd := exec.CommandContext(ctx, bin, append([]string{c.name}, k.args...)...)
				cmd.Env = k.env
				var stdout, stderr strings.Builder
				cmd.Stdout, cmd.Stderr = &stdout, &stderr
				err := cmd.Run()
				code := cmd.ProcessState.ExitCode()
				if ctx.Err() != nil {
					t.Fatalf("did not exit within 60s\n%s", stderr.String())
				}
				switch {
				case k.exit >= 0 && code != k.exit:
					t.Errorf("exit %d (%v), want %d\nstdout:\n%s\nstderr:\n%s", code, err, k.exit, stdout.String(), stderr.String())
				case k.exit < 0 && code == 0:
					t.Errorf("exit 0, want a failure\nstdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
				}
				if k.name == "help" && !strings.Contains(stdout.String(), "usage") {
					t.Errorf("--help printed no usage on stdout:\n%s", stdout.String())
				}
				for _, out := range []string{stdout.String(), stderr.String()} {
					for _, n := range needles {
						if strings.Contains(out, n) {
							t.Errorf("output holds the secret %q:\n%s", n, out)
						}
					}
				}
			})
		}
	}
}
