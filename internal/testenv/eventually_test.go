package testenv

import (
	"fmt"
	"testing"
	"time"
)

// recorder is a testing.TB that records a Fatalf instead of ending the test.
type recorder struct {
	testing.TB
	failed string
}

func (r *recorder) Helper() {}

func (r *recorder) Fatalf(format string, args ...any) {
	r.failed = fmt.Sprintf(format, args...)
	panic(r) // Fatalf does not return
}

func TestEventually(t *testing.T) {
	start := time.Now()
	n := 0
	Eventually(t, time.Second, "the third call", func() bool { n++; return n == 3 })
	if n != 3 || time.Since(start) > 500*time.Millisecond {
		t.Fatalf("%d calls in %s", n, time.Since(start))
	}
	r := &recorder{TB: t}
	func() {
		defer func() {
			if p := recover(); p != r {
				t.Fatalf("recovered %v", p)
			}
		}()
		Eventually(r, 60*time.Millisecond, "never", func() bool { return false })
	}()
	if r.failed != "not within 60ms: never" {
		t.Fatalf("failure %q does not name what was waited for", r.failed)
	}
	// what may be a func telling the last state seen, called at the failure.
	last := 0
	func() {
		defer func() { _ = recover() }()
		Eventually(r, 60*time.Millisecond, func() string { return fmt.Sprintf("last %d", last) }, func() bool { last++; return false })
	}()
	if want := fmt.Sprintf("not within 60ms: last %d", last); r.failed != want || last < 2 {
		t.Fatalf("failure %q, want %q", r.failed, want)
	}
}
