package testenv

import (
	"bytes"
	"sync"
	"sync/atomic"
	"time"
)

// SyncBuffer is an io.Writer safe for concurrent writers (log sinks, the
// output of a child process), read with String.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns everything written so far.
func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// OffsetClock is time.Now moved by an offset that tests advance.
type OffsetClock struct{ d atomic.Int64 }

func (c *OffsetClock) Now() time.Time          { return time.Now().Add(time.Duration(c.d.Load())) }
func (c *OffsetClock) Advance(d time.Duration) { c.d.Add(int64(d)) }
func (c *OffsetClock) Reset()                  { c.d.Store(0) }
func (c *OffsetClock) String() string          { return time.Duration(c.d.Load()).String() }

// ManualClock is a clock that moves only when a test adds to it.
type ManualClock struct {
	mu sync.Mutex
	t  time.Time
}

// NewManualClock returns a clock standing at t.
func NewManualClock(t time.Time) *ManualClock { return &ManualClock{t: t} }

func (c *ManualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Add moves the clock by d.
func (c *ManualClock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}
