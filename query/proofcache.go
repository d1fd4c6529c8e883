package query

import (
	"container/list"
	"sync"

	"github.com/google/uuid"

	"github.com/auditrail/auditrail/internal/auditstore"
)

// DefaultProofCacheBytes is Config.ProofCacheBytes' default: about 600k
// hashes, the upper levels of many trees and the recent leaves' paths.
const DefaultProofCacheBytes = 64 << 20

// cacheEntryBytes is what one cached hash costs, counted against the
// bound: the hash, its key and the LRU's list element and map slot.
const cacheEntryBytes = 32 + 32 + 64 + 48

// hashKey names a stored hash (kind < 2) or an event's leaf index
// (leafKind + kind): both never change once written.
type hashKey struct {
	org   uuid.UUID
	kind  uint8
	index int64
	event uuid.UUID
}

const leafKind = 0x10

type cacheEntry struct {
	key  hashKey
	hash [32]byte
	leaf int64
}

// proofCache is a bounded LRU of what never changes in a log once written:
// stored hashes below a size the log reached (tlog.StoredHashCount of it)
// and events' leaf indexes. It never holds more than max bytes
// (cacheEntryBytes each). Safe for concurrent use.
type proofCache struct {
	mu      sync.Mutex
	max     int64
	used    int64
	order   *list.List // front: most recently used
	entries map[hashKey]*list.Element
}

func newProofCache(maxBytes int64) *proofCache {
	return &proofCache{max: maxBytes, order: list.New(), entries: map[hashKey]*list.Element{}}
}

// hashes looks up the stored hashes of (org, kind) at indexes: found[i]
// tells whether out[i] was cached.
func (c *proofCache) hashes(org uuid.UUID, kind auditstore.LogKind, indexes []int64, out [][32]byte, found []bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, x := range indexes {
		if el, ok := c.entries[hashKey{org: org, kind: uint8(kind), index: x}]; ok {
			c.order.MoveToFront(el)
			out[i], found[i] = el.Value.(*cacheEntry).hash, true
		}
	}
}

// addHash caches a stored hash; the caller guarantees index is below
// tlog.StoredHashCount of a size the log has reached.
func (c *proofCache) addHash(org uuid.UUID, kind auditstore.LogKind, index int64, h [32]byte) {
	c.add(&cacheEntry{key: hashKey{org: org, kind: uint8(kind), index: index}, hash: h})
}

// leaf returns an event's cached leaf index.
func (c *proofCache) leaf(org uuid.UUID, kind auditstore.LogKind, event uuid.UUID) (int64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.entries[hashKey{org: org, kind: leafKind + uint8(kind), event: event}]
	if !ok {
		return 0, false
	}
	c.order.MoveToFront(el)
	return el.Value.(*cacheEntry).leaf, true
}

func (c *proofCache) addLeaf(org uuid.UUID, kind auditstore.LogKind, event uuid.UUID, index int64) {
	c.add(&cacheEntry{key: hashKey{org: org, kind: leafKind + uint8(kind), event: event}, leaf: index})
}

func (c *proofCache) add(e *cacheEntry) {
	if c.max < cacheEntryBytes {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.entries[e.key]; ok {
		c.order.MoveToFront(el)
		return
	}
	for c.used+cacheEntryBytes > c.max {
		last := c.order.Back()
		c.order.Remove(last)
		delete(c.entries, last.Value.(*cacheEntry).key)
		c.used -= cacheEntryBytes
	}
	c.entries[e.key] = c.order.PushFront(e)
	c.used += cacheEntryBytes
}

// size is the bytes counted and the entries held.
func (c *proofCache) size() (int64, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.used, len(c.entries)
}

const headKind = 0x20

// head returns the largest size of (org, kind)'s log seen (0: none): a
// log never shrinks, so a size at or below it needs no head read.
func (c *proofCache) head(org uuid.UUID, kind auditstore.LogKind) int64 {
	n, _ := c.leaf(org, kind+headKind-leafKind, uuid.Nil)
	return n
}

// setHead records a size of (org, kind)'s log.
func (c *proofCache) setHead(org uuid.UUID, kind auditstore.LogKind, size int64) {
	c.mu.Lock()
	if el, ok := c.entries[hashKey{org: org, kind: headKind + uint8(kind)}]; ok {
		e := el.Value.(*cacheEntry)
		e.leaf = max(e.leaf, size)
		c.order.MoveToFront(el)
		c.mu.Unlock()
		return
	}
	c.mu.Unlock()
	c.add(&cacheEntry{key: hashKey{org: org, kind: headKind + uint8(kind)}, leaf: size})
}
