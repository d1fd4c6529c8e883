//go:build e2e

package main

import (
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/auditrail/auditrail/internal/version"
)

// version prints the release (a development build of it: -dev), the commit and the Go version; every
// --help goes to stdout with exit status 0.
func TestVersionAndHelp(t *testing.T) {
	t.Parallel()
	out, err := exec.Command(binary(t), "version").Output()
	if err != nil || !regexp.MustCompile(`^auditrail `+regexp.QuoteMeta(version.Release)+`-dev commit \S+( \(modified\))? go1\.\d+`).Match(out) {
		t.Fatalf("version: %v %q", err, out)
	}
	alias, err := exec.Command(binary(t), "--version").Output()
	if err != nil || string(alias) != string(out) {
		t.Fatalf("--version: %v %q, want what version prints", err, alias)
	}
	for _, args := range [][]string{
		{"dlq", "list", "--help"}, {"dlq", "replay", "--help"}, {"admin", "executions", "--help"},
		{"--help"}, {"dev", "--help"}, {"admin", "--help"}, {"admin", "org", "--help"}, {"admin", "key", "create", "--help"},
		{"admin", "logs", "--help"}, {"version", "--help"}, {"nats-setup", "--help"},
	} {
		cmd := exec.Command(binary(t), args...)
		out, err := cmd.Output()
		if err != nil || len(out) == 0 {
			t.Errorf("%v: %v, %d bytes on stdout", args, err, len(out))
		}
	}
	// Every command: --help on stdout, exit 0; each flag line names its
	// argument by type (a backquoted word in a usage string would replace
	// it); the command list is aligned in one column.
	flagLine := regexp.MustCompile(`^  -[a-z0-9-]+( (string|int|float|duration|value|uint))?$`)
	for _, c := range commands() {
		out, err := exec.Command(binary(t), c.name, "--help").Output()
		if err != nil || len(out) == 0 {
			t.Errorf("%s --help: %v, %d bytes on stdout", c.name, err, len(out))
		}
		for _, l := range strings.Split(string(out), "\n") {
			if strings.HasPrefix(l, "  -") && !flagLine.MatchString(l) {
				t.Errorf("%s --help: flag line %q", c.name, l)
			}
		}
	}
	out, _ = exec.Command(binary(t), "--help").Output()
	col := -1
	for _, c := range commands() {
		m := regexp.MustCompile(`(?m)^  ` + regexp.QuoteMeta(c.name) + ` +`).FindIndex(out)
		if m == nil {
			t.Fatalf("--help lacks %s:\n%s", c.name, out)
		}
		if w := m[1] - m[0]; col == -1 {
			col = w
		} else if w != col {
			t.Errorf("--help: the description of %s starts at column %d, others at %d:\n%s", c.name, w, col, out)
		}
	}
	if out, _ := exec.Command(binary(t), "dev", "--help").Output(); !regexp.MustCompile(`(?i)dashboard`).Match(out) {
		t.Errorf("dev --help does not say where the dashboard is:\n%s", out)
	}
}
