//go:build e2e

package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// nats-setup's environment twins have names of their own (not AUDITRAIL_KEYS,
// a look-alike of the admin CLI's AUDITRAIL_KEY); the former names work for
// one release, with a warning, and lose to the flag and to the new names.
func TestNATSSetupEnv(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		env      func(dir string) []string
		args     func(dir string) []string
		wantOut  string // relative to the test's directory
		wantKeys string
		warn     string // "" : no warning at all
	}{
		{name: "new names",
			env: func(d string) []string {
				return []string{"AUDITRAIL_NATS_SETUP_OUT_DIR=" + d + "/o", "AUDITRAIL_NATS_SETUP_KEYS_DIR=" + d + "/k"}
			},
			wantOut: "o", wantKeys: "k"},
		{name: "deprecated names",
			env:     func(d string) []string { return []string{"AUDITRAIL_OUT=" + d + "/o", "AUDITRAIL_KEYS=" + d + "/k"} },
			wantOut: "o", wantKeys: "k", warn: "AUDITRAIL_KEYS is deprecated, use AUDITRAIL_NATS_SETUP_KEYS_DIR"},
		{name: "new name wins",
			env: func(d string) []string {
				return []string{"AUDITRAIL_NATS_SETUP_OUT_DIR=" + d + "/o", "AUDITRAIL_KEYS=" + d + "/old", "AUDITRAIL_NATS_SETUP_KEYS_DIR=" + d + "/k"}
			},
			wantOut: "o", wantKeys: "k", warn: "AUDITRAIL_KEYS is deprecated and ignored here"},
		{name: "flag wins",
			env:     func(d string) []string { return []string{"AUDITRAIL_KEYS=" + d + "/old"} },
			args:    func(d string) []string { return []string{"--out", d + "/o", "--keys", d + "/k"} },
			wantOut: "o", wantKeys: "k", warn: "AUDITRAIL_KEYS is deprecated and ignored here"},
		{name: "keys under out by default",
			env:     func(d string) []string { return []string{"AUDITRAIL_NATS_SETUP_OUT_DIR=" + d + "/o"} },
			wantOut: "o", wantKeys: "o/keys"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			var args []string
			if tt.args != nil {
				args = tt.args(dir)
			}
			cmd := exec.Command(binary(t), append([]string{"nats-setup"}, args...)...)
			for _, kv := range os.Environ() {
				if !strings.HasPrefix(kv, "AUDITRAIL_") {
					cmd.Env = append(cmd.Env, kv)
				}
			}
			cmd.Env = append(cmd.Env, tt.env(dir)...)
			var stderr strings.Builder
			cmd.Stderr = &stderr
			if err := cmd.Run(); err != nil {
				t.Fatalf("nats-setup: %v\n%s", err, stderr.String())
			}
			if _, err := os.Stat(filepath.Join(dir, tt.wantOut, "auth.conf")); err != nil {
				t.Errorf("no auth.conf in %s: %v", tt.wantOut, err)
			}
			if _, err := os.Stat(filepath.Join(dir, tt.wantKeys, "operator.nk")); err != nil {
				t.Errorf("no operator seed in %s: %v", tt.wantKeys, err)
			}
			if _, err := os.Stat(filepath.Join(dir, "old")); err == nil {
				t.Error("the deprecated variable was used although the flag or the new variable was set")
			}
			if got := stderr.String(); tt.warn == "" && got != "" || !strings.Contains(got, tt.warn) {
				t.Errorf("stderr %q, want %q", got, tt.warn)
			}
		})
	}
}
