package main

import (
	"os/exec"
	"regexp"
	"testing"
)

// version prints the module version, the commit and the Go version; every
// --help goes to stdout with exit status 0.
func TestVersionAndHelp(t *testing.T) {
	out, err := exec.Command(binary(t), "version").Output()
	if err != nil || !regexp.MustCompile(`^auditrail \S+ commit \S+( \(modified\))? go1\.\d+`).Match(out) {
		t.Fatalf("version: %v %q", err, out)
	}
	for _, args := range [][]string{
		{"--help"}, {"dev", "--help"}, {"admin", "--help"}, {"admin", "org", "--help"}, {"admin", "key", "create", "--help"},
		{"admin", "logs", "--help"}, {"version", "--help"}, {"nats-setup", "--help"},
	} {
		cmd := exec.Command(binary(t), args...)
		out, err := cmd.Output()
		if err != nil || len(out) == 0 {
			t.Errorf("%v: %v, %d bytes on stdout", args, err, len(out))
		}
	}
	if out, _ := exec.Command(binary(t), "dev", "--help").Output(); regexp.MustCompile(`(?i)dashboard`).Match(out) {
		t.Errorf("dev --help mentions a dashboard that does not exist yet")
	}
}
