//go:build e2e

package main

import (
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/auditrail/auditrail/internal/version"
)

// make release builds a static binary per platform, named with the
// release, and SHA256SUMS that verifies them; the binary reports the
// release (no -dev).
func TestMakeRelease(t *testing.T) {
	t.Parallel()
	dist := t.TempDir()
	out, err := exec.Command("make", "-C", "../..", "release", "DIST="+dist).CombinedOutput()
	if err != nil {
		t.Fatalf("make release: %v\n%s", err, out)
	}
	sums, err := exec.Command("bash", "-c", "cd "+dist+" && sha256sum -c SHA256SUMS").CombinedOutput()
	if err != nil {
		t.Fatalf("sha256sum -c: %v\n%s", err, sums)
	}
	for _, p := range []struct {
		arch    string
		machine elf.Machine
	}{{"amd64", elf.EM_X86_64}, {"arm64", elf.EM_AARCH64}} {
		name := "auditrail-" + version.Release + "-linux-" + p.arch
		if !strings.Contains(string(sums), name+": OK") {
			t.Errorf("SHA256SUMS does not cover %s:\n%s", name, sums)
		}
		f, err := elf.Open(filepath.Join(dist, name))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if f.Machine != p.machine {
			t.Errorf("%s is built for %v", name, f.Machine)
		}
		for _, prog := range f.Progs {
			if prog.Type == elf.PT_INTERP || prog.Type == elf.PT_DYNAMIC {
				t.Errorf("%s is not static: it has a %v program header", name, prog.Type)
			}
		}
		f.Close()
	}
	v, err := exec.Command(filepath.Join(dist, "auditrail-"+version.Release+"-linux-amd64"), "version").Output()
	if err != nil || !strings.HasPrefix(string(v), "auditrail "+version.Release+" commit ") {
		t.Errorf("the release binary says %q (%v), want auditrail %s commit …", v, err, version.Release)
	}
}

// make release refuses a version that CHANGELOG.md has not dated.
func TestReleaseNeedsADatedChangelog(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, f := range []string{"scripts/release.sh", "internal/version/version.go"} {
		raw, err := os.ReadFile("../../" + f)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), raw, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	changelog := "# Changelog\n\n## [" + version.Release + "] - unreleased\n"
	if err := os.WriteFile(filepath.Join(dir, "CHANGELOG.md"), []byte(changelog), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", "scripts/release.sh", "linux/amd64")
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "date the release there") {
		t.Fatalf("an undated release was built: %v\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(dir, "dist")); err == nil {
		t.Errorf("the refused release wrote dist/")
	}
}
