package testenv

import (
	"testing"
	"time"
)

// pollEvery is how often Eventually asks again.
const pollEvery = 20 * time.Millisecond

// Eventually polls cond until it holds, failing the test (naming what and
// the bound) once within has passed without it.
func Eventually(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %s: %s", within, what)
		}
		time.Sleep(pollEvery)
	}
}
