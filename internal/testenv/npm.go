package testenv

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// NPMPackage installs the npm package name@version once per machine (in
// the user cache) and returns its directory (node_modules/name). Without
// npm the test is Missing.
func NPMPackage(t testing.TB, name, version string) string {
	t.Helper()
	npm, err := exec.LookPath("npm")
	if err != nil {
		Missing(t, "npm is not installed (the test runs the npm package %s)", name)
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	root := filepath.Join(cache, "auditrail-test", "npm", name+"@"+version)
	pkg := filepath.Join(root, "node_modules", name)
	if _, err := os.Stat(filepath.Join(pkg, "package.json")); err == nil {
		return pkg
	}
	if err := os.MkdirAll(filepath.Dir(root), 0o755); err != nil {
		t.Fatal(err)
	}
	// Installed apart, then moved in place: tests running at once never
	// see a half-installed package.
	tmp, err := os.MkdirTemp(filepath.Dir(root), ".install-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(tmp)
	out, err := exec.Command(npm, "install", "--no-audit", "--no-fund", "--ignore-scripts", "--prefix", tmp, name+"@"+version).CombinedOutput()
	if err != nil {
		t.Fatalf("npm install %s@%s: %v\n%s", name, version, err, out)
	}
	if err := os.Rename(tmp, root); err != nil && !errors.Is(err, os.ErrExist) {
		if _, serr := os.Stat(filepath.Join(pkg, "package.json")); serr != nil {
			t.Fatalf("npm install %s@%s: %v", name, version, err)
		}
	}
	return pkg
}
