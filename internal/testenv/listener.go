package testenv

import (
	"net"
	"sync/atomic"
	"testing"
)

// CountingListener listens on a free loopback port, accepts connections,
// closes them at once and counts them: a server that proves a client never
// connected (or did). It stops when the test ends.
func CountingListener(t testing.TB) (net.Listener, *atomic.Int64) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var n atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			n.Add(1)
			c.Close()
		}
	}()
	t.Cleanup(func() { l.Close(); <-done })
	return l, &n
}
