// Package testenv starts the real servers that tests and benchmarks need: an
// embedded NATS JetStream server, and a throwaway ClickHouse server from the
// machine's clickhouse-server binary in a temp directory on free ports.
//
// A test that cannot get a server skips, unless AUDITRAIL_REQUIRE_ALL=1 (as
// in CI), in which case it fails.
package testenv

import (
	"os"
	"testing"
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

// Main runs the tests of a package and stops the servers this package started.
// Use it from TestMain: func TestMain(m *testing.M) { testenv.Main(m) }.
func Main(m *testing.M) {
	code := m.Run()
	stopShared()
	os.Exit(code)
}
