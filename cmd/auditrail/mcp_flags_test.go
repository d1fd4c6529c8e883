package main

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/auditrail/auditrail/internal/cli"
)

// The MCP endpoint's flags (dev, toolrunner) make its configuration: the
// public URL's origin allowed, the session caps and the idle timeout of
// unused sessions, each checked with an error naming the flag.
func TestMCPFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string // "" valid, else a word of the error
	}{
		{nil, ""},
		{[]string{"--mcp-max-sessions=10", "--mcp-max-sessions-per-project=10", "--mcp-max-sessions-per-principal=4", "--mcp-max-sessions-per-user=2",
			"--mcp-unused-session-timeout=30s", "--mcp-allowed-origins=https://app.example, http://localhost:3000"}, ""},
		{[]string{"--mcp-max-sessions-per-user=0"}, "--mcp-max-sessions-per-user"},
		{[]string{"--mcp-max-sessions-per-user=65"}, "--mcp-max-sessions-per-user"},
		{[]string{"--mcp-max-sessions=10"}, "--mcp-max-sessions "},
		{[]string{"--mcp-max-sessions-per-project=2000"}, "--mcp-max-sessions "},
		{[]string{"--mcp-unused-session-timeout=0s"}, "--mcp-unused-session-timeout"},
		{[]string{"--mcp-unused-session-timeout=31m"}, "--mcp-unused-session-timeout"},
		{[]string{"--mcp-allowed-origins=app.example"}, "AllowedOrigins"},
	} {
		fs := cli.NewFlags("auditrail test")
		mf := addMCPFlags(fs)
		if err := fs.Parse(tc.args); err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		cfg, err := mf.config("https://auditrail.example")
		var ue cli.UsageError
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%v: %v", tc.args, err)
		case tc.want != "" && (err == nil || !errors.As(err, &ue) || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%v: error %v, want a usage error naming %s", tc.args, err, tc.want)
		}
		if err == nil && cfg.PublicURL != "https://auditrail.example" {
			t.Errorf("%v: public URL %q", tc.args, cfg.PublicURL)
		}
		if len(tc.args) > 1 && err == nil && (cfg.MaxSessions != 10 || cfg.MaxSessionsPerProject != 10 || cfg.MaxSessionsPerPrincipal != 4 ||
			cfg.MaxSessionsPerUser != 2 || cfg.UnusedSessionTimeout != 30*time.Second || len(cfg.AllowedOrigins) != 2) {
			t.Errorf("%v: %+v", tc.args, cfg)
		}
	}
}
