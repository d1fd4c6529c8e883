// Package testenv starts the real servers that tests and benchmarks need: an
// embedded NATS JetStream server, and a throwaway ClickHouse server from the
// machine's clickhouse-server binary in a temp directory on free ports.
//
// A test that cannot get a server skips, unless AUDITRAIL_REQUIRE_ALL=1 (as
// in CI), in which case it fails.
package testenv

import (
	"fmt"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// RequireAll reports whether missing servers fail tests instead of skipping them.
func RequireAll() bool { return os.Getenv("AUDITRAIL_REQUIRE_ALL") == "1" }

// Missing fails the test when RequireAll, and skips it otherwise.
func Missing(t testing.TB, format string, args ...any) {
	t.Helper()
	if RequireAll() {
		t.Fatalf("AUDITRAIL_REQUIRE_ALL=1 and "+format, args...)
	}
	t.Skipf(format, args...)
}

// Long skips a long test under -short, unless RequireAll: CI runs every
// test, whatever the flags.
func Long(t testing.TB, why string) {
	t.Helper()
	if testing.Short() && !RequireAll() {
		t.Skip(why + " (-short)")
	}
}

// Main runs the tests of a package and stops the servers this package started.
// Use it from TestMain: func TestMain(m *testing.M) { testenv.Main(m) }.
func Main(m *testing.M) {
	code := m.Run()
	stopShared()
	os.Exit(code)
}

// MainNoLeaks is Main, then a goleak check once the servers are stopped:
// a package whose tests pass but leave goroutines behind fails. The
// library goroutines of LeakOptions are ignored, and opts too.
func MainNoLeaks(m *testing.M, opts ...goleak.Option) {
	code := m.Run()
	stopShared()
	if code == 0 {
		opts = append(LeakOptions(), opts...)
		err := goleak.Find(opts...)
		// Some goroutines end a little after the server they served has
		// shut down (a NATS stream store's flush loop, the server's
		// access-time service): under a loaded machine's make test, later
		// than goleak's own retries (about a second). A goroutine still
		// there after ten more seconds is a leak.
		for i := 0; err != nil && i < 10; i++ {
			time.Sleep(time.Second)
			err = goleak.Find(opts...)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "goleak: goroutines left after the tests: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}
