package hookproxy

import (
	"sync"
	"time"
)

// AccessCache keeps access decisions briefly. Keys should name the user and
// the hook configuration (ids and revisions), so that a configuration change
// misses the cache at once.
type AccessCache struct {
	ttl time.Duration
	now func() time.Time

	mu      sync.Mutex
	entries map[string]accessEntry
}

type accessEntry struct {
	at       time.Time
	decision AccessDecision
}

// NewAccessCache returns a cache whose entries live for ttl.
func NewAccessCache(ttl time.Duration) *AccessCache {
	return &AccessCache{ttl: ttl, now: time.Now, entries: map[string]accessEntry{}}
}

// Get returns a fresh entry.
func (c *AccessCache) Get(key string) (AccessDecision, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[key]
	if !ok || c.now().Sub(e.at) > c.ttl {
		return AccessDecision{}, false
	}
	return e.decision, true
}

// Put stores an entry, dropping expired ones when the cache grows.
func (c *AccessCache) Put(key string, d AccessDecision) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	if len(c.entries) > 10_000 {
		for k, e := range c.entries {
			if now.Sub(e.at) > c.ttl {
				delete(c.entries, k)
			}
		}
	}
	c.entries[key] = accessEntry{at: now, decision: d}
}
