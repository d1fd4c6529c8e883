package main

import (
	"os/exec"
	"strings"
	"testing"
)

// internal/ is plumbing only: no package under it (tests aside) imports a
// component (controlplane, query, ingest, toolrunner, hookproxy, producers)
// or a harness (bench); arrows run from the components down to internal/.
func TestInternalIsPlumbing(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}}: {{join .Imports " "}}`, "github.com/auditrail/auditrail/internal/...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	upward := []string{"controlplane", "query", "ingest", "toolrunner", "hookproxy", "producers", "deliver", "evidence", "demo", "commands", "bench", "cmd"}
	// internal/e2e drives every component end to end: a test package.
	allowed := map[string]bool{"github.com/auditrail/auditrail/internal/e2e": true}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		pkg, imports, _ := strings.Cut(line, ": ")
		if allowed[pkg] {
			continue
		}
		for _, imp := range strings.Fields(imports) {
			for _, u := range upward {
				if imp == "github.com/auditrail/auditrail/"+u || strings.HasPrefix(imp, "github.com/auditrail/auditrail/"+u+"/") {
					t.Errorf("%s imports %s: internal/ is plumbing, the components build on it", pkg, imp)
				}
			}
		}
	}
}

// No component reaches into another: only the compositions (cmd/…, the
// tools' commands/…) and the benchmark harness import the query service or
// ingest; what others need of them (the API item and its leaf, the event
// decoders, the watermarks, the durable names) lives in packages both
// import. The delivery role, the sequencer, the checkpointer and the
// control plane's state (controlplane/cpstate) link no HTTP framework.
func TestComponentsDoNotReachIntoEachOther(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}}: {{join .Imports " "}}`, "github.com/auditrail/auditrail/...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	const mod = "github.com/auditrail/auditrail/"
	composes := func(pkg string) bool {
		for _, p := range []string{"cmd/", "commands/", "bench"} {
			if strings.HasPrefix(pkg, mod+p) {
				return true
			}
		}
		return false
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		pkg, imports, _ := strings.Cut(line, ": ")
		if composes(pkg) {
			continue
		}
		for _, imp := range strings.Fields(imports) {
			if imp == mod+"query" || imp == mod+"ingest" {
				t.Errorf("%s imports %s: only cmd/…, commands/… and bench compose the components", pkg, imp)
			}
		}
	}
	for _, pkg := range []string{"deliver", "evidence/sequencer", "evidence/checkpointer", "evidence/lease", "controlplane/cpstate", "controlplane/destination", "schemas/apiitem", "lifecycle"} {
		deps, err := exec.Command("go", "list", "-deps", mod+pkg).CombinedOutput()
		if err != nil {
			t.Fatalf("go list -deps %s: %v\n%s", pkg, err, deps)
		}
		for _, d := range strings.Fields(string(deps)) {
			if strings.HasPrefix(d, "github.com/gofiber/") || d == mod+"query" || d == mod+"controlplane" {
				t.Errorf("%s links %s", pkg, d)
			}
		}
	}
}
