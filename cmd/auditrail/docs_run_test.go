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
	// docBlockRe finds the shell blocks a document marks as runnable, by name.
	docBlockRe = regexp.MustCompile("(?s)<!-- doc-test ([a-z][a-z0-9-]*) -->\n```sh\n(.*?)```")
	// docSkipRe finds the shell blocks a document marks as not run here.
	docSkipRe = regexp.MustCompile("<!-- doc-test: skip \\([^>]*\\) -->\n```sh\n")
	// readmeOutputRe finds what the README says `make run` prints.
	readmeOutputRe = regexp.MustCompile("(?s)It prints[^`]*```text\n(.*?)```")
	makeRunRe      = regexp.MustCompile(`(?m)^run:[^\n]*\n\t([^\n]+)`)
)

// runDocs are the documents whose shell blocks run, in this order, in one
// shell: the README's quick start first, then the guides that continue it.
// Every Markdown file of docs/ must be listed (a new one with shell blocks
// is then run too).
var runDocs = []string{
	"README.md", "docs/api.md", "docs/delivery.md", "docs/tool-platform.md", "docs/toolkits.md",
	"docs/operations.md", "docs/tamper-evidence.md", "docs/security.md", "docs/configuration.md",
	"docs/architecture.md", "docs/benchmarks.md", "docs/development.md", "docs/docmd.md", "docs/contract.md",
}

// docBlock is one runnable shell block.
type docBlock struct{ file, name, script string }

// docBlocks reads the runnable blocks of runDocs, checking that every shell
// block is either run or skipped with a reason, and that names are unique.
func docBlocks(t *testing.T) []docBlock {
	t.Helper()
	listed := map[string]bool{}
	for _, f := range runDocs {
		listed[f] = true
	}
	mds, _ := filepath.Glob("../../docs/*.md")
	for _, m := range mds {
		if rel := "docs/" + filepath.Base(m); !listed[rel] {
			t.Errorf("%s is not in runDocs: its shell blocks would not run", rel)
		}
	}
	var blocks []docBlock
	names := map[string]string{}
	for _, f := range runDocs {
		raw, err := os.ReadFile("../../" + f)
		if err != nil {
			t.Fatal(err)
		}
		run := docBlockRe.FindAllStringSubmatch(string(raw), -1)
		all := strings.Count(string(raw), "```sh\n")
		skipped := len(docSkipRe.FindAllString(string(raw), -1))
		if len(run)+skipped != all {
			t.Errorf("%s: %d shell blocks, %d marked <!-- doc-test NAME -->, %d marked <!-- doc-test: skip (why) -->: mark every block", f, all, len(run), skipped)
		}
		for _, b := range run {
			if prev, ok := names[b[1]]; ok {
				t.Errorf("%s: block name %q is taken in %s", f, b[1], prev)
			}
			names[b[1]] = f
			blocks = append(blocks, docBlock{file: f, name: b[1], script: b[2]})
		}
	}
	return blocks
}

// The documentation runs as written: `make run`'s command line (from the
// Makefile) starts the demo, what it prints matches the README's sample,
// and every shell block of the README and docs/ marked `<!-- doc-test
// NAME -->` runs, in one shell, in runDocs' order, with the `export` lines
// the demo printed — so the documentation cannot drift from the product.
// Only the fixed addresses are moved to free ports (the README's
// 127.0.0.1:8080 and :4222 come from the printed export lines anyway; the
// hook server's 127.0.0.1:9090 and its policy file are replaced here).
func TestDocsRunAsWritten(t *testing.T) {
	t.Parallel()
	for _, tool := range []string{"bash", "curl", "jq"} {
		if _, err := exec.LookPath(tool); err != nil {
			testenv.Missing(t, "%s is not installed (the documentation's examples use it)", tool)
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
	blocks := docBlocks(t)
	if len(blocks) < 10 {
		t.Fatalf("%d runnable blocks in the documentation", len(blocks))
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
		fmt.Fprintf(&script, "echo '@@block %d@@'\n%s\n", i, fix.Replace(b.script))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
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
		t.Fatalf("the documentation's blocks failed: %v\n%s", err, res)
	}
	got := strings.Split(string(res), "@@block ")
	if len(got) != len(blocks)+1 {
		t.Fatalf("expected %d blocks of output:\n%s", len(blocks), res)
	}

	// What each block must visibly do.
	expect := map[string][]string{
		"admin":  {`"resource_type":"RESOURCE_TYPE_USER","resource_display":"bob"`, `"RESOURCE_TYPE_API_KEY"`, "laptop", "TIMESTAMP"},
		"search": {"API_KEY", "USER", "laptop", "exported ", "id,event_id,timestamp,client_ip,action"},
		"verify": {"OK: "},
		"tools": {"DocumentDbToolkit.AggregateDocuments\n", `"fields"`, `\"total\":`,
			`{"tool_name":"DocumentDbToolkit.FindDocuments","success":true`, "STARTED", "SUCCESS  ERROR"},
		"hooks": {`"success":false`, "AggregateDocuments is not available"},
		"oauth": {`{"provider":"google","connected":true`, `"account":"demo-user@example.com"`, "Connected to google",
			`"https://www.googleapis.com/auth/calendar.readonly","https://www.googleapis.com/auth/drive.file"`},
		"docs": {"@title \"Apollo launch plan\"", "[p3fbfa0 44-50 HEADING_1]", "2 edits applied", "PARAGRAPH styles=bold:50-57]\nStatus: on track.\n"},
		"mail": {`{"subject":"Quick question about the offsite","from":"priya@contoso.com","is_read":false}`,
			`"body":"Are we still on for the offsite next week?","body_truncated":false}`,
			`{"subject":"Offsite: yes","is_draft":false,"sent_at":"20`, `{"success":false,"kind":"TOOL_INPUT_INVALID"}`},
		"emit":          {"scratch organization", "emitted 5000 events"},
		"verify-export": {"OK: ", "OK: the log extends the kept checkpoint"},
		"verify-online": {"OK: ", "saved the verified checkpoint", `{"leaf_index":`},
		"tiles":         {"/audit_logs\n", "32\n"},
	}
	outputs := map[string]string{}
	for i, b := range blocks {
		out := got[i+1]
		outputs[b.name] = out
		for _, bad := range []string{`"code":4`, `"code":5`, "curl: (", "FAIL:", "NOT VERIFIED"} {
			if strings.Contains(out, bad) {
				t.Errorf("%s block %s: an error (%s):\n%s", b.file, b.name, bad, out)
			}
		}
	}
	for name, want := range expect {
		out, ok := outputs[name]
		if !ok {
			t.Errorf("no runnable block is named %s", name)
			continue
		}
		for _, w := range want {
			if !strings.Contains(out, w) {
				t.Errorf("block %s: output lacks %q:\n%s", name, w, out)
			}
		}
	}
	// The hook hides the denied tool from the list.
	if strings.Contains(outputs["hooks"], "\nDocumentDbToolkit.AggregateDocuments\n") {
		t.Errorf("the hook did not hide AggregateDocuments:\n%s", outputs["hooks"])
	}
}
