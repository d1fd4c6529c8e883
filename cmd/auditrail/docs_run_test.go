//go:build e2e

package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/auditrail/auditrail/internal/testenv"
)

var (
	// readmeBlockRe finds the shell blocks the README marks as runnable.
	readmeBlockRe = regexp.MustCompile("(?s)<!-- readme-test -->\n```sh\n(.*?)```")
	// readmeSkipRe finds the shell blocks the README marks as not run here.
	readmeSkipRe = regexp.MustCompile("<!-- readme-test: skip [^>]*-->\n```sh\n")
	// readmeOutputRe finds what the README says `make run` prints.
	readmeOutputRe = regexp.MustCompile("(?s)It prints[^`]*```text\n(.*?)```")
	makeRunRe      = regexp.MustCompile(`(?m)^run:[^\n]*\n\t([^\n]+)`)
)

// The README's quick start runs as written: `make run`'s command line (from
// the Makefile) starts the demo, what it prints matches the README's
// sample, and every shell block marked `<!-- readme-test -->` runs, in one
// shell, with the `export` lines the demo printed — so the README cannot
// drift from the product again. Only the fixed addresses are moved to free
// ports (the README's 127.0.0.1:8080 and :4222 come from the printed export
// lines anyway; the hook server's 127.0.0.1:9090 and its policy file are
// replaced here).
func TestReadmeQuickstart(t *testing.T) {
	t.Parallel()
	for _, tool := range []string{"bash", "curl", "jq"} {
		if _, err := exec.LookPath(tool); err != nil {
			testenv.Missing(t, "%s is not installed (the README's examples use it)", tool)
		}
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	makefile, err := os.ReadFile("../../Makefile")
	if err != nil {
		t.Fatal(err)
	}

	// Every shell block is either run or explicitly skipped.
	blocks := readmeBlockRe.FindAllStringSubmatch(string(readme), -1)
	all := strings.Count(string(readme), "```sh\n")
	skipped := len(readmeSkipRe.FindAllString(string(readme), -1))
	if len(blocks) < 4 || len(blocks)+skipped != all {
		t.Fatalf("README: %d shell blocks, %d marked <!-- readme-test -->, %d marked skip: mark every block", all, len(blocks), skipped)
	}

	// `make run` is `$(BIN) dev --demo $(ARGS)`: run that line from a
	// directory laid out like the repository (bin/auditrail).
	m := makeRunRe.FindStringSubmatch(string(makefile))
	if m == nil {
		t.Fatal("Makefile: no run target")
	}
	line := strings.Fields(strings.NewReplacer("$(BIN)", "bin/auditrail", "$(ARGS)", "").Replace(m[1]))
	if len(line) < 2 || line[0] != "bin/auditrail" || line[1] != "dev" {
		t.Fatalf("Makefile: run is %q, not `$(BIN) dev …`", m[1])
	}
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(binary(t), filepath.Join(dir, "bin", "auditrail")); err != nil {
		t.Fatal(err)
	}
	p := launchCmd(t, dir, filepath.Join(dir, "bin", "auditrail"), line[2:], false)
	p.waitHealthy(t, 60*time.Second)
	testenv.Eventually(t, 30*time.Second, func() string { return "dev prints its ready line:\n" + p.stdout.String() },
		func() bool { return strings.Contains(p.stdout.String(), "auditrail dev: ") })
	out := p.stdout.String()

	// What the README says the demo prints, line by line, in order ("…"
	// stands for anything, <port> for a port).
	sample := readmeOutputRe.FindStringSubmatch(string(readme))
	if sample == nil {
		t.Fatal("README: no ```text sample of what make run prints")
	}
	moved := strings.NewReplacer("127.0.0.1:8080", p.http, "127.0.0.1:4222", p.nats).Replace(sample[1])
	lines := strings.Split(out, "\n")
	at := 0
	for _, want := range strings.Split(strings.TrimSpace(moved), "\n") {
		re := regexp.MustCompile("^" + strings.NewReplacer("…", ".+", "<port>", "[0-9]+").Replace(regexp.QuoteMeta(want)) + "$")
		for at < len(lines) && !re.MatchString(lines[at]) {
			at++
		}
		if at == len(lines) {
			t.Fatalf("README says make run prints %q (in this order); it printed:\n%s", want, out)
		}
		at++
	}

	var exports []string
	for _, l := range lines {
		if strings.HasPrefix(l, "export ") {
			exports = append(exports, l)
		}
	}
	if len(exports) != 2 || !strings.Contains(exports[0], " KEY=ak_") || !strings.Contains(exports[1], "AUDITRAIL_KEY=ark_") {
		t.Fatalf("the demo printed no complete export lines:\n%s", out)
	}

	hp, _ := testenv.FreePort()
	fix := strings.NewReplacer("127.0.0.1:9090", fmt.Sprintf("127.0.0.1:%d", hp), "/tmp/demo-policy.yaml", filepath.Join(dir, "policy.yaml"))
	var script strings.Builder
	script.WriteString("set -euo pipefail\n" + strings.Join(exports, "\n") + "\n")
	for i, b := range blocks {
		fmt.Fprintf(&script, "echo '@@block %d@@'\n%s\n", i, fix.Replace(b[1]))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sh := exec.CommandContext(ctx, "bash", "-c", script.String())
	sh.Dir = dir
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "AUDITRAIL_") {
			sh.Env = append(sh.Env, kv)
		}
	}
	sh.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	sh.Cancel = func() error { return syscall.Kill(-sh.Process.Pid, syscall.SIGKILL) }
	t.Cleanup(func() {
		if sh.Process != nil {
			_ = syscall.Kill(-sh.Process.Pid, syscall.SIGKILL) // a hook server left running
		}
	})
	res, err := sh.CombinedOutput()
	if err != nil {
		t.Fatalf("the README's blocks failed: %v\n%s", err, res)
	}
	got := strings.Split(string(res), "@@block ")
	if len(got) != len(blocks)+1 {
		t.Fatalf("expected %d blocks of output:\n%s", len(blocks), res)
	}

	// What each block must visibly do.
	expect := [][]string{
		{"DocumentDbToolkit.AggregateDocuments\n", `"fields"`, `\"total\":`,
			`{"tool_name":"DocumentDbToolkit.FindDocuments","success":true`},
		{`"resource_type":"RESOURCE_TYPE_USER","resource_display":"bob"`, `"RESOURCE_TYPE_API_KEY"`, "laptop"},
		{`"success":false`, "AggregateDocuments is not available"},
		{`{"provider":"google","connected":true`, `"account":"demo-user@example.com"`, "Connected to google",
			`"https://www.googleapis.com/auth/calendar.readonly","https://www.googleapis.com/auth/drive.file"`},
		{"@title \"Apollo launch plan\"", "[p3fbfa0 44-50 HEADING_1]", "2 edits applied", "PARAGRAPH styles=bold:50-57]\nStatus: on track.\n"},
		{`{"subject":"Quick question about the offsite","from":"priya@contoso.com","is_read":false}`,
			`"body":"Are we still on for the offsite next week?","body_truncated":false}`,
			`{"subject":"Offsite: yes","is_draft":false,"sent_at":"20`, `{"success":false,"kind":"TOOL_INPUT_INVALID"}`},
		{"scratch organization", "emitted 5000 events"},
	}
	for i, want := range expect {
		block := got[i+1]
		for _, w := range want {
			if !strings.Contains(block, w) {
				t.Errorf("README block %d: output lacks %q:\n%s", i, w, block)
			}
		}
		for _, bad := range []string{`"code":4`, `"code":5`, "curl: ("} {
			if strings.Contains(block, bad) {
				t.Errorf("README block %d: an error (%s):\n%s", i, bad, block)
			}
		}
	}
	// The hook hides the denied tool from the list.
	if strings.Contains(got[3], "\nDocumentDbToolkit.AggregateDocuments\n") {
		t.Errorf("the hook did not hide AggregateDocuments:\n%s", got[3])
	}
}
