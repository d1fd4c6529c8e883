package testenv

import (
	"net"
	"sync"
	"testing"
	"time"
)

// Accepts counts the connections a CountingListener accepted.
type Accepts struct {
	addr string

	mu       sync.Mutex
	n        int64
	sentinel map[string]chan struct{} // local address of a Settled dial → closed once taken
	seen     map[string]bool          // remote addresses counted so far
}

// Load is the count so far, which may still miss a connection that the
// kernel accepted but the listener's goroutine has not taken yet: assert
// on Settled instead.
func (a *Accepts) Load() int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.n
}

// Settled answers the count once every connection made before the call has
// been taken: it connects once more itself and waits (at most 10 s) until
// the listener, which takes connections in the order they were made, has
// taken that one, which it does not count.
func (a *Accepts) Settled(t testing.TB) int64 {
	t.Helper()
	c, err := net.DialTimeout("tcp", a.addr, 5*time.Second)
	if err != nil {
		t.Fatalf("counting listener: sentinel dial: %v", err)
	}
	defer c.Close()
	taken := make(chan struct{})
	local := c.LocalAddr().String()
	a.mu.Lock()
	if a.seen[local] { // taken (and counted) before it could register
		delete(a.seen, local)
		a.n--
		close(taken)
	} else {
		a.sentinel[local] = taken
	}
	a.mu.Unlock()
	select {
	case <-taken:
	case <-time.After(10 * time.Second):
		t.Fatalf("counting listener: the sentinel connection was not accepted within 10 s")
	}
	return a.Load()
}

// take records one accepted connection.
func (a *Accepts) take(remote string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if ch, ok := a.sentinel[remote]; ok {
		delete(a.sentinel, remote)
		close(ch)
		return
	}
	a.seen[remote] = true
	a.n++
}

// CountingListener listens on a free loopback port, accepts connections,
// closes them at once and counts them: a server that proves a client never
// connected (or did). It stops when the test ends.
func CountingListener(t testing.TB) (net.Listener, *Accepts) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	a := &Accepts{addr: l.Addr().String(), sentinel: map[string]chan struct{}{}, seen: map[string]bool{}}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			remote := c.RemoteAddr().String()
			c.Close()
			a.take(remote)
		}
	}()
	t.Cleanup(func() { l.Close(); <-done })
	return l, a
}
