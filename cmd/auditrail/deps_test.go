package main

import (
	"os/exec"
	"strings"
	"testing"
)

// The production binary ships the product: no benchmark harness, no
// provider emulator, no FerretDB, no chromedp, no test helper of ours, and
// no package of ours importing testing (those live in auditrail-bench and
// auditrail-demo). The one importer of testing it links is Fiber's utils
// package (its assertion helpers), which Fiber's router imports.
func TestProductionBinaryShipsTheProduct(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", `{{.ImportPath}}|{{with .Module}}{{.Path}}{{end}}|{{join .Imports " "}}`, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	forbidden := []string{
		"github.com/chromedp/", "github.com/FerretDB/",
		"github.com/auditrail/auditrail/bench", "github.com/auditrail/auditrail/internal/emulators",
		"github.com/auditrail/auditrail/internal/ferret", "github.com/auditrail/auditrail/internal/testenv",
		"github.com/auditrail/auditrail/internal/chserver", "github.com/auditrail/auditrail/internal/e2e",
	}
	testingImporters := map[string]bool{"github.com/gofiber/fiber/v2/utils": true}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) < 100 {
		t.Fatalf("go list found %d packages: %s", len(lines), out)
	}
	for _, line := range lines {
		parts := strings.SplitN(line, "|", 3)
		pkg, mod, imports := parts[0], parts[1], strings.Fields(parts[2])
		for _, f := range forbidden {
			if strings.HasPrefix(pkg, f) || strings.HasPrefix(mod+"/", f) {
				t.Errorf("the auditrail binary links %s (module %s)", pkg, mod)
			}
		}
		for _, imp := range imports {
			if imp == "testing" && !testingImporters[pkg] {
				t.Errorf("%s imports testing, and the auditrail binary links it", pkg)
			}
		}
	}
}
