package testenv

import (
	"net"
	"testing"
)

// TestCountingListenerSettled: connections made just before Settled are
// all counted (none is missed because the accept goroutine had not run
// yet), and Settled's own connections never are.
func TestCountingListenerSettled(t *testing.T) {
	for round := 0; round < 20; round++ {
		l, accepts := CountingListener(t)
		for i := 0; i < round; i++ {
			c, err := net.Dial("tcp", l.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			c.Close()
		}
		if n := accepts.Settled(t); n != int64(round) {
			t.Fatalf("round %d: Settled = %d", round, n)
		}
		if n := accepts.Settled(t); n != int64(round) {
			t.Fatalf("round %d: second Settled = %d", round, n)
		}
	}
}
