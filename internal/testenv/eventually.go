package testenv

import (
	"testing"
	"time"
)

// pollEvery is how often Eventually asks again at first; the pause doubles
// up to pollAtMost, so that a long wait does not keep a loaded machine busy.
const (
	pollEvery  = 20 * time.Millisecond
	pollAtMost = 200 * time.Millisecond
)

// Eventually polls cond until it holds, failing the test once within has
// passed without it. The failure names the bound and what: a string, or a
// func() string called then, to tell the last state cond saw.
//
// cond runs on the test's goroutine: it may call t.Fatal for an error that
// no retry can mend.
func Eventually[W string | func() string](t testing.TB, within time.Duration, what W, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	pause := pollEvery
	for !cond() {
		if time.Now().After(deadline) {
			var msg string
			switch w := any(what).(type) {
			case string:
				msg = w
			case func() string:
				msg = w()
			}
			t.Fatalf("not within %s: %s", within, msg)
		}
		time.Sleep(pause)
		pause = min(2*pause, pollAtMost)
	}
}
