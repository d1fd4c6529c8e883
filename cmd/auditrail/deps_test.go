package main

import (
	"bytes"
	"encoding/json"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"golang.org/x/mod/modfile"
)

// The production binary ships the product: no benchmark harness, no
// provider emulator, no FerretDB, no chromedp, no test helper of ours, and
// no package importing testing (those of ours live in auditrail-bench and
// auditrail-demo; Fiber's one importer, its test assertions, is left out of
// the copy in third_party/fiber).
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
			if imp == "testing" {
				t.Errorf("%s imports testing, and the auditrail binary links it", pkg)
			}
		}
	}
}

// TestFiberForkIsUpstream: third_party/fiber is the published Fiber module
// of the version go.mod requires, file for file, except utils/assertions.go
// (see its README). A change made there by hand, or a version bump in go.mod
// without a new copy, fails here.
func TestFiberForkIsUpstream(t *testing.T) {
	const fiber = "github.com/gofiber/fiber/v2"
	const fork = "../../third_party/fiber"
	raw, err := os.ReadFile("../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	mf, err := modfile.Parse("go.mod", raw, nil)
	if err != nil {
		t.Fatal(err)
	}
	version := ""
	for _, r := range mf.Require {
		if r.Mod.Path == fiber {
			version = r.Mod.Version
		}
	}
	replaced := false
	for _, r := range mf.Replace {
		replaced = replaced || (r.Old.Path == fiber && r.New.Path == "./third_party/fiber")
	}
	if version == "" || !replaced {
		t.Fatalf("go.mod requires %s %q, replaced by ./third_party/fiber: %v", fiber, version, replaced)
	}
	out, err := exec.Command("go", "mod", "download", "-json", fiber+"@"+version).Output()
	if err != nil {
		t.Fatalf("go mod download %s@%s: %v", fiber, version, err)
	}
	var dl struct{ Dir, Error string }
	if err := json.Unmarshal(out, &dl); err != nil || dl.Dir == "" {
		t.Fatalf("go mod download: %v %s", err, out)
	}
	// The fork's files, each compared with the published one.
	var forkFiles []string
	err = filepath.WalkDir(fork, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(fork, path)
		if rel == "README.md" {
			return nil
		}
		forkFiles = append(forkFiles, rel)
		mine, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		theirs, err := os.ReadFile(filepath.Join(dl.Dir, rel))
		if err != nil {
			t.Errorf("%s is not in %s@%s: %v", rel, fiber, version, err)
			return nil
		}
		if !bytes.Equal(mine, theirs) {
			t.Errorf("third_party/fiber/%s differs from %s@%s", rel, fiber, version)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// Every non-test Go file of the copied packages is there, but one.
	var missing []string
	for _, dir := range []string{".", "internal/schema", "log", "utils"} {
		names, _ := filepath.Glob(filepath.Join(dl.Dir, dir, "*.go"))
		for _, n := range names {
			rel, _ := filepath.Rel(dl.Dir, n)
			if strings.HasSuffix(rel, "_test.go") {
				continue
			}
			if _, err := os.Stat(filepath.Join(fork, rel)); err != nil {
				missing = append(missing, rel)
			}
		}
	}
	sort.Strings(missing)
	if strings.Join(missing, " ") != "utils/assertions.go" {
		t.Errorf("files of %s@%s not in the fork: %v (want only utils/assertions.go)", fiber, version, missing)
	}
	if len(forkFiles) < 30 {
		t.Errorf("the fork holds %d files", len(forkFiles))
	}
}
