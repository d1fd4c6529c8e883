//go:build e2e

package main

import (
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

const configDoc = "../../docs/configuration.md"

// configMarker starts the generated part of docs/configuration.md.
const configMarker = "<!-- generated from `auditrail <command> -h` by `make docs`"

var (
	// flagLineRe is a flag's first line in `-h`: "  -name type".
	flagLineRe = regexp.MustCompile(`^  -([a-z0-9-]+)(?: (\S+))?$`)
	// usageRe splits a flag's help: its text, its environment twin, the
	// default flag.PrintDefaults appends.
	// The twin ends the text; flag.PrintDefaults appends the default after it.
	usageEnvRe = regexp.MustCompile(`^(.*) \(env (AUDITRAIL_[A-Z0-9_]+)\)(?: \(default (.*)\))?$`)
	usageRe    = regexp.MustCompile(`^(.*?)()(?: \(default (.*)\))?$`)
	commandRe  = regexp.MustCompile(`^  ([a-z][a-z-]*)  +(.+)$`)
)

// The configuration reference is generated from the binary's own -h of
// every command, so it cannot drift from the flags: docs/configuration.md
// ends with it. `make docs` (AUDITRAIL_UPDATE_DOCS=1) writes it.
func TestConfigurationReference(t *testing.T) {
	t.Parallel()
	out, err := exec.Command(binary(t), "help").Output()
	if err != nil {
		t.Fatalf("auditrail help: %v", err)
	}
	var b strings.Builder
	b.WriteString("\nEvery command of `auditrail` and its flags, as `auditrail <command> -h` prints them.\n")
	n := 0
	for _, line := range strings.Split(string(out), "\n") {
		m := commandRe.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		n++
		help, _ := exec.Command(binary(t), m[1], "-h").CombinedOutput()
		fmt.Fprintf(&b, "\n### auditrail %s\n\n%s.\n\n", m[1], strings.TrimSuffix(m[2], "."))
		b.WriteString(flagTable(t, m[1], string(help)))
	}
	if n < 15 {
		t.Fatalf("auditrail help lists %d commands:\n%s", n, out)
	}
	raw, err := os.ReadFile(configDoc)
	if err != nil {
		t.Fatal(err)
	}
	head, _, ok := strings.Cut(string(raw), configMarker)
	if !ok {
		t.Fatalf("%s has no line starting %q", configDoc, configMarker)
	}
	line, _, _ := strings.Cut(strings.SplitN(string(raw), configMarker, 2)[1], "\n")
	want := head + configMarker + line + "\n" + b.String()
	if string(raw) == want {
		return
	}
	if os.Getenv("AUDITRAIL_UPDATE_DOCS") == "1" {
		if err := os.WriteFile(configDoc, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s", configDoc)
		return
	}
	t.Errorf("docs/configuration.md's flag reference differs from the binary's flags: run make docs")
}

// flagTable renders a command's -h as a Markdown table.
func flagTable(t *testing.T, cmd, help string) string {
	type flagDoc struct{ name, typ, env, def, usage string }
	var flags []flagDoc
	for _, line := range strings.Split(help, "\n") {
		if m := flagLineRe.FindStringSubmatch(line); m != nil {
			flags = append(flags, flagDoc{name: m[1], typ: m[2]})
			continue
		}
		if len(flags) > 0 && strings.HasPrefix(line, "    \t") {
			f := &flags[len(flags)-1]
			f.usage = strings.TrimSpace(f.usage + " " + strings.TrimSpace(line))
		}
	}
	if len(flags) == 0 {
		return "No flags.\n"
	}
	var b strings.Builder
	b.WriteString("| flag | environment | default | meaning |\n|---|---|---|---|\n")
	for _, f := range flags {
		m := usageEnvRe.FindStringSubmatch(f.usage)
		if m == nil {
			m = usageRe.FindStringSubmatch(f.usage)
		}
		u := m[1]
		f.def = strings.Trim(m[3], `"`)
		if m[2] != "" {
			f.env = "`" + m[2] + "`"
		}
		if f.usage == "" {
			t.Errorf("auditrail %s -%s: no help text", cmd, f.name)
		}
		name := "`--" + f.name + "`"
		if f.typ != "" {
			name += " " + f.typ
		}
		def := ""
		if f.def != "" {
			def = "`" + f.def + "`"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", name, f.env, def, mdCell(u))
	}
	return b.String()
}

// mdCell keeps a text inside its table cell.
func mdCell(s string) string {
	return strings.NewReplacer("|", `\|`, "\n", " ", "<", "&lt;").Replace(s)
}
