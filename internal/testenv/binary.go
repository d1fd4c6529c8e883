package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

var (
	binMu    sync.Mutex
	binBuilt = map[string]binResult{}
)

type binResult struct {
	dir string
	err error
}

// Binaries builds the main packages pkgs (paths as go build takes them,
// e.g. "github.com/auditrail/auditrail/cmd/auditrail") into one directory,
// once per test process, and returns the path of the first. Binaries built
// together find each other beside themselves (auditrail-demo beside
// auditrail, auditrail beside auditrail-bench). The directory is removed
// when Main or MainNoLeaks ends the package's tests.
func Binaries(t testing.TB, pkgs ...string) string {
	t.Helper()
	key := strings.Join(pkgs, " ")
	binMu.Lock()
	r, ok := binBuilt[key]
	if !ok {
		r.dir, r.err = os.MkdirTemp("", "auditrail-bin-")
		if r.err == nil {
			// Removed when the package's tests end (Main, MainNoLeaks):
			// a hundred test runs left 10 GB of binaries behind.
			dir := r.dir
			OnStop(func() { os.RemoveAll(dir) })
			args := append([]string{"build", "-o", r.dir + string(filepath.Separator)}, pkgs...)
			if out, err := exec.Command("go", args...).CombinedOutput(); err != nil {
				r.err = fmt.Errorf("go build %s: %v: %s", key, err, out)
			}
		}
		binBuilt[key] = r
	}
	binMu.Unlock()
	if r.err != nil {
		t.Fatal(r.err)
	}
	return filepath.Join(r.dir, filepath.Base(pkgs[0]))
}
