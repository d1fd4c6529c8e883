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
	upward := []string{"controlplane", "query", "ingest", "toolrunner", "hookproxy", "producers", "bench", "cmd"}
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
