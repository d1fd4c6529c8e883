package testenv

import (
	"os"
	"os/exec"
	"sync"
	"testing"
)

// EnvChromium names a chromium (or Chrome) binary to use instead of the
// machine's.
const EnvChromium = "AUDITRAIL_CHROMIUM"

// Chromium returns the path of a chromium binary: $AUDITRAIL_CHROMIUM,
// /usr/bin/chromium, or chromium, chromium-browser or google-chrome on the
// PATH. Without one the test fails under AUDITRAIL_REQUIRE_ALL=1 (CI
// installs Debian's chromium, see .ci/run) and skips otherwise.
func Chromium(t testing.TB) string {
	t.Helper()
	if p := os.Getenv(EnvChromium); p != "" {
		if _, err := os.Stat(p); err != nil {
			Missing(t, "%s=%s: %v", EnvChromium, p, err)
		}
		return p
	}
	if _, err := os.Stat("/usr/bin/chromium"); err == nil {
		return "/usr/bin/chromium"
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	Missing(t, "no chromium (apt-get install -y chromium, or set %s)", EnvChromium)
	return ""
}

var stops struct {
	mu  sync.Mutex
	fns []func()
}

// OnStop registers fn to run when Main or MainNoLeaks ends the package's
// tests, before the leak check (shared browsers stop there).
func OnStop(fn func()) {
	stops.mu.Lock()
	defer stops.mu.Unlock()
	stops.fns = append(stops.fns, fn)
}

func runStops() {
	stops.mu.Lock()
	fns := stops.fns
	stops.fns = nil
	stops.mu.Unlock()
	for i := len(fns) - 1; i >= 0; i-- {
		fns[i]()
	}
}
