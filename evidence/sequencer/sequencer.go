// Package sequencer appends an organization's stored entries to its
// verifiable log, in the feed's order: it reads the feed after the log's
// last leaf up to the ingest watermark (every entry below it is committed,
// so none can later appear before an entry already sequenced), takes each
// entry's leaf (stored beside it by ingest where the store keeps leaves:
// auditstore.LeafFeed; else computed from the entry as the list route
// returns it, apiitem.Leaves), and stores the leaves and the tree hashes
// they add (golang.org/x/mod/sumdb/tlog numbering).
//
// The log is a function of the feed: two sequencers of one organization
// (a lease handed over while the old holder still wrote) append the same
// leaves at the same positions, which the store takes as a repeat.
package sequencer

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"golang.org/x/mod/sumdb/tlog"
	"golang.org/x/sync/errgroup"

	"github.com/auditrail/auditrail/internal/auditstore"
	"github.com/auditrail/auditrail/schemas/apiitem"
)

// Store is what the sequencer reads and writes: the log's head and hashes,
// and the feeds.
type Store interface {
	LogHead(ctx context.Context, org uuid.UUID, kind auditstore.LogKind) (int64, auditstore.LogLeaf, error)
	LogOrgs(ctx context.Context, kind auditstore.LogKind) ([]uuid.UUID, error)
	AppendLogs(ctx context.Context, appends []auditstore.LogAppend) error
	ReadLogHashes(ctx context.Context, org uuid.UUID, kind auditstore.LogKind, indexes []int64) ([][32]byte, error)
	FeedAudit(ctx context.Context, q auditstore.FeedQuery) (auditstore.FeedPage, error)
	FeedExecutions(ctx context.Context, q auditstore.ExecFeedQuery) (auditstore.ExecFeedPage, error)
}

// PageSize is the feed page the sequencer reads (the feed's largest), and
// AppendSize about the most entries one append holds.
const (
	PageSize   = auditstore.FeedMaxLimit
	AppendSize = 10 * PageSize
)

// Sequencer appends to the logs of one store.
type Sequencer struct {
	store  Store
	leaves apiitem.Leaves

	mu sync.Mutex
	// frontiers keeps, per log, the hashes that appending its next leaf
	// reads (the roots of the complete subtrees of its first size leaves,
	// which never change), so that the next Sequence of a log of that
	// size reads none from the store; at most maxFrontiers logs.
	frontiers map[logID]frontier

	// grown holds, per kind, the size of each log appended to since
	// Grown last took them; epoch counts the leads begun and ended (Lead,
	// Unlead), leading says one is under way.
	grown   map[auditstore.LogKind]map[uuid.UUID]int64
	epoch   uint64
	leading bool
}

// maxGrown bounds the logs Grown holds for a kind; beyond it they are
// dropped and a new epoch begins (a caller reads every head again).
const maxGrown = 100_000

type frontier struct {
	size   int64
	hashes map[int64]tlog.Hash
}

// maxFrontiers bounds the logs whose frontier is kept (about 2·log2(size)
// hashes each); beyond it the cache starts afresh.
const maxFrontiers = 10_000

// New returns a sequencer of store's logs.
func New(store Store) *Sequencer {
	return &Sequencer{store: store, frontiers: map[logID]frontier{}}
}

// Lead marks the start of a lead (the runner took the lease): the store
// checks every log again before its next append (forget), and a new epoch
// of Grown begins.
func (s *Sequencer) Lead() {
	s.forget()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.epoch++
	s.leading = true
	clear(s.grown)
}

// Unlead marks the end of a lead (the lease lost, or a round failed): the
// logs may grow through another instance now.
func (s *Sequencer) Unlead() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.epoch++
	s.leading = false
	clear(s.grown)
}

// Grown takes the sizes of the logs of kind appended to through this
// sequencer since the last call, with the epoch of its lead and whether
// it leads: a caller that had the same epoch, leading, from the call
// before has been told of every log of kind that grew since (an append is
// told once it is stored).
func (s *Sequencer) Grown(kind auditstore.LogKind) (sizes map[uuid.UUID]int64, epoch uint64, leading bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sizes = s.grown[kind]
	delete(s.grown, kind)
	return sizes, s.epoch, s.leading
}

// grew records that a log has grown to size (stored).
func (s *Sequencer) grew(id logID, size int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.grown == nil {
		s.grown = map[auditstore.LogKind]map[uuid.UUID]int64{}
	}
	m := s.grown[id.kind]
	if m == nil {
		m = map[uuid.UUID]int64{}
		s.grown[id.kind] = m
	}
	if _, ok := m[id.org]; !ok && len(m) >= maxGrown {
		clear(s.grown)
		s.epoch++ // what was dropped must be read
		return
	}
	m[id.org] = max(m[id.org], size)
}

// forget makes the store check every log again before its next append
// (auditstore.LogWriteForgetter, when the store remembers its own
// appends), since another instance may have appended, and crashed, while
// this one did not lead.
func (s *Sequencer) forget() {
	if f, ok := s.store.(auditstore.LogWriteForgetter); ok {
		f.ForgetLogWrites()
	}
}

// frontier returns the kept hashes of the log of that size, or none.
func (s *Sequencer) frontier(id logID, size int64) map[int64]tlog.Hash {
	s.mu.Lock()
	defer s.mu.Unlock()
	f, ok := s.frontiers[id]
	if !ok || f.size != size {
		return nil
	}
	return maps.Clone(f.hashes)
}

func (s *Sequencer) keepFrontier(id logID, size int64, hashes map[int64]tlog.Hash) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.frontiers[id]; !ok && len(s.frontiers) >= maxFrontiers {
		clear(s.frontiers)
	}
	s.frontiers[id] = frontier{size: size, hashes: maps.Clone(hashes)}
}

// KeptHashes returns the stored hashes the sequencer keeps of the log
// (org, kind) at size, or nil when it keeps none at that size: the roots
// of the complete subtrees of its first size leaves, which it wrote or
// read for its last append, and which the log's root at that size is
// computed from (the checkpointer reads them here before the store).
func (s *Sequencer) KeptHashes(org uuid.UUID, kind auditstore.LogKind, size int64) map[int64]tlog.Hash {
	return s.frontier(logID{org, kind}, size)
}

// Result says what one Sequence call did.
type Result struct {
	Appended int
	Size     int64 // the log's size after it
	// Oldest is the earliest created_time (the time ingest stored it) of
	// the entries appended: now minus it is the longest an entry waited
	// to be sequenced, which a verifier's grace for entries not yet in the
	// log must exceed.
	Oldest time.Time
}

// Sequence appends to the log of (org, kind) every entry of its feed after
// the log's last leaf with a stream sequence up to upto (the watermark of
// the kind's ingest durable). It returns after the last append is stored;
// on an error, what was appended before it stays (the next call resumes).
func (s *Sequencer) Sequence(ctx context.Context, org uuid.UUID, kind auditstore.LogKind, upto uint64) (Result, error) {
	rs, err := s.SequenceAll(ctx, []Target{{Org: org, Kind: kind, Upto: upto}}, 1)
	return rs[0], err
}

// Target is a log to sequence and the watermark of its kind.
type Target struct {
	Org  uuid.UUID
	Kind auditstore.LogKind
	Upto uint64
}

// BatchSize is about the most entries one write of SequenceAll holds,
// across its logs.
const BatchSize = 4 * AppendSize

// SequenceAll is Sequence of several logs (each at most once), read up to
// parallel at a time, whose appends are written together: one
// AppendLogs per pass (ClickHouse: one part per table, whatever the
// number of logs), of at most AppendSize
// entries a log and about BatchSize in all. Its results are the targets',
// in order.
func (s *Sequencer) SequenceAll(ctx context.Context, targets []Target, parallel int) ([]Result, error) {
	runs := make([]*logRun, len(targets))
	results := func() []Result {
		out := make([]Result, len(runs))
		for i, r := range runs {
			if r != nil {
				out[i] = r.res
			}
		}
		return out
	}
	leafFeed, _ := auditstore.LeafFeedOf(s.store)
	heads, err := s.heads(ctx, targets)
	if err != nil {
		return results(), err
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(max(parallel, 1))
	for i, t := range targets {
		g.Go(func() error {
			r, err := s.start(gctx, ctx, t, leafFeed, heads)
			runs[i] = r
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return results(), err
	}
	for {
		var budget atomic.Int64
		budget.Store(BatchSize)
		if err := s.prefetch(ctx, runs); err != nil {
			return results(), err
		}
		g, gctx := errgroup.WithContext(ctx)
		g.SetLimit(max(parallel, 1))
		active := false
		for _, r := range runs {
			if !r.more {
				continue
			}
			active = true
			g.Go(func() error { return s.read(gctx, r, &budget) })
		}
		if !active {
			return results(), nil
		}
		if err := g.Wait(); err != nil {
			return results(), err
		}
		var appends []auditstore.LogAppend
		var written []*logRun
		for _, r := range runs {
			if len(r.items) > 0 {
				appends = append(appends, r.append)
				written = append(written, r)
			}
		}
		if err := s.write(ctx, appends); err != nil {
			return results(), err
		}
		for _, r := range written {
			if err := r.commit(); err != nil {
				return results(), err
			}
			s.keepFrontier(r.id, r.size, r.hashes.m)
			s.grew(r.id, r.size)
		}
	}
}

// write stores the appends of one pass together.
func (s *Sequencer) write(ctx context.Context, appends []auditstore.LogAppend) error {
	if len(appends) == 0 {
		return nil
	}
	if err := s.store.AppendLogs(ctx, appends); err != nil {
		return fmt.Errorf("append to %d logs: %w", len(appends), err)
	}
	return nil
}

// logRun is one log's state along SequenceAll.
type logRun struct {
	t      Target
	id     logID
	res    Result
	size   int64
	after  auditstore.FeedKey
	hashes *hashCache
	lf     auditstore.LeafFeed // its leaves are read from the store's leaf feed (nil: computed)
	more   bool                // the feed may hold entries to append
	pre    *prefetched         // the pass's first page, read beside the other logs' (prefetch)
	items  []item
	// append is the pass's append (prepare): its leaves, added, and the
	// stored hashes they add.
	append auditstore.LogAppend
	leaves []auditstore.LogLeaf
	added  []auditstore.StoredHash
}

// heads reads the heads of the targets' logs in one read per kind where
// the store reads several at once (auditstore.LogHeadsReader), else none
// (nil: start reads each).
func (s *Sequencer) heads(ctx context.Context, targets []Target) (map[logID]auditstore.LogLeaf, error) {
	hr, ok := s.store.(auditstore.LogHeadsReader)
	if !ok || len(targets) < 2 {
		return nil, nil
	}
	byKind := map[auditstore.LogKind][]uuid.UUID{}
	for _, t := range targets {
		byKind[t.Kind] = append(byKind[t.Kind], t.Org)
	}
	out := map[logID]auditstore.LogLeaf{}
	for kind, orgs := range byKind {
		m, err := hr.LogHeadsOf(ctx, kind, orgs)
		if err != nil {
			return nil, fmt.Errorf("log heads: %w", err)
		}
		for org, last := range m {
			out[logID{org, kind}] = last
		}
	}
	return out, nil
}

// start takes the log's head from heads (read for every log at once:
// an empty log is absent) or reads it (with ctx), and its kept frontier;
// the hashes the log's appends need are read with the call's context,
// rctx.
func (s *Sequencer) start(ctx, rctx context.Context, t Target, leafFeed auditstore.LeafFeed, heads map[logID]auditstore.LogLeaf) (*logRun, error) {
	r := &logRun{t: t, id: logID{t.Org, t.Kind}, lf: leafFeed, more: true}
	var (
		size int64
		last auditstore.LogLeaf
		err  error
	)
	if heads != nil {
		if l, ok := heads[r.id]; ok {
			size, last = l.Index+1, l
		}
	} else if size, last, err = s.store.LogHead(ctx, t.Org, t.Kind); err != nil {
		return r, fmt.Errorf("log head of %s: %w", t.Org, err)
	}
	r.size, r.res.Size = size, size
	if size > 0 {
		r.after = last.Key
	}
	r.hashes = newHashCache(func(indexes []int64) ([][32]byte, error) {
		return s.store.ReadLogHashes(rctx, t.Org, t.Kind, indexes)
	})
	for i, h := range s.frontier(r.id, size) {
		r.hashes.put(i, h)
	}
	return r, nil
}

// read reads the log's next entries, up to AppendSize, while the pass's
// budget lasts (pages of the feed make one append: a store's write has a
// fixed cost, one per page was most of a backlog's time), and prepares
// their append (the tree hashes it reads, a cold log's, are read here, a
// few logs at once).
func (s *Sequencer) read(ctx context.Context, r *logRun, budget *atomic.Int64) error {
	r.items = r.items[:0]
	if p := r.pre; p != nil { // the pass's first page, read for every log at once
		r.pre = nil
		budget.Add(-int64(len(p.items)))
		r.items = append(r.items, p.items...)
		r.more = p.more && p.next != r.after
		r.after = p.next
	}
	for r.more && len(r.items) < AppendSize && budget.Load() > 0 {
		page, next, m, err := s.page(ctx, r.t.Org, r.t.Kind, r.after, r.t.Upto, &r.lf)
		if err != nil {
			return err
		}
		budget.Add(-int64(len(page)))
		r.items = append(r.items, page...)
		r.more = m && next != r.after
		r.after = next
	}
	if len(r.items) == 0 {
		return nil
	}
	var err error
	r.append, err = r.prepare()
	return err
}

// prepare computes the tree hashes that the pass's entries add: the
// log's append.
func (r *logRun) prepare() (auditstore.LogAppend, error) {
	r.leaves = make([]auditstore.LogLeaf, len(r.items))
	r.added = r.added[:0]
	for i, it := range r.items {
		n := r.size + int64(i)
		add, err := tlog.StoredHashesForRecordHash(n, it.leaf, r.hashes)
		if err != nil {
			return auditstore.LogAppend{}, fmt.Errorf("tree hashes of leaf %d of the log of %s: %w", n, r.t.Org, err)
		}
		base := tlog.StoredHashIndex(0, n)
		for j, sh := range add {
			r.hashes.put(base+int64(j), sh)
			r.added = append(r.added, auditstore.StoredHash{Index: base + int64(j), Hash: sh})
		}
		r.leaves[i] = auditstore.LogLeaf{Index: n, EventID: it.key.EventID, Key: it.key}
	}
	return auditstore.LogAppend{Org: r.t.Org, Kind: r.t.Kind, Leaves: r.leaves, Hashes: r.added}, nil
}

// commit takes the pass's append as stored.
func (r *logRun) commit() error {
	for _, it := range r.items {
		if c := time.UnixMilli(it.key.CreatedMS); r.res.Oldest.IsZero() || c.Before(r.res.Oldest) {
			r.res.Oldest = c
		}
	}
	r.size += int64(len(r.items))
	r.res.Appended += len(r.items)
	r.res.Size = r.size
	r.items, r.leaves, r.added, r.append = r.items[:0], nil, nil, auditstore.LogAppend{}
	return r.hashes.keepFor(r.size)
}

type item struct {
	key  auditstore.FeedKey
	leaf tlog.Hash
}

// page reads the next entries of the feed with their leaves: while *lf
// is set, those stored beside the entries (the store's leaf feed) up to
// the first entry without one; a page that begins with such an entry is
// read from the feed, its leaves computed from the entries, and clears
// *lf.
func (s *Sequencer) page(ctx context.Context, org uuid.UUID, kind auditstore.LogKind, after auditstore.FeedKey, upto uint64, lf *auditstore.LeafFeed) ([]item, auditstore.FeedKey, bool, error) {
	if *lf != nil {
		p, err := (*lf).FeedLeaves(ctx, leafQuery(org, kind, after, upto))
		if err != nil {
			return nil, after, false, fmt.Errorf("%s leaves of %s: %w", kind, org, err)
		}
		if out, next, more, ok := leafItems(p); ok {
			return out, next, more, nil
		}
		*lf = nil
	}
	return s.entries(ctx, org, kind, after, upto)
}

func leafQuery(org uuid.UUID, kind auditstore.LogKind, after auditstore.FeedKey, upto uint64) auditstore.LeafFeedQuery {
	return auditstore.LeafFeedQuery{OrgID: org, Kind: kind, After: after, Upto: upto, Limit: auditstore.LeafFeedMaxLimit}
}

// leafItems are the items of a page of the leaf feed up to its first
// entry stored without a leaf, with where the next page starts and whether
// one may follow; ok is false when the page begins with such an entry
// (its leaves are computed from the entries: the feed is read instead).
func leafItems(p auditstore.LeafPage) (out []item, next auditstore.FeedKey, more, ok bool) {
	out = make([]item, 0, len(p.Items))
	for _, l := range p.Items {
		if !l.Known {
			break
		}
		out = append(out, item{key: l.Key, leaf: l.Leaf})
	}
	switch {
	case len(out) == len(p.Items):
		return out, p.Next, p.HasMore, true
	case len(out) > 0: // the entries from the first without a leaf come next
		return out, out[len(out)-1].key, true, true
	}
	return nil, p.Next, false, false
}

// prefetched is a log's first page of a pass, read beside the others'.
type prefetched struct {
	items []item
	next  auditstore.FeedKey
	more  bool
}

// prefetch reads the first page of every log of a pass that reads its
// leaves from the store's leaf feed in one read per kind, where the feed
// reads several logs at once (auditstore.LeafFeeds; ClickHouse reads whole
// granules, nearly the same for every organization of a round). A log
// whose window is too wide (a backlog, or its first entries: its cursor is
// far behind) or whose page it cannot use (one that begins with an entry
// stored without a leaf) is read alone, as before.
func (s *Sequencer) prefetch(ctx context.Context, runs []*logRun) error {
	type group struct {
		kind auditstore.LogKind
		upto uint64
	}
	byGroup := map[group][]*logRun{}
	for _, r := range runs {
		if !r.more || r.lf == nil {
			continue
		}
		if _, ok := r.lf.(auditstore.LeafFeeds); !ok {
			continue
		}
		if r.t.Upto > r.after.Seq && r.t.Upto-r.after.Seq > auditstore.LeafFeedsWindow {
			continue // a backlog, or a log's first entries: read alone, not the others' window with it
		}
		g := group{r.t.Kind, r.t.Upto}
		byGroup[g] = append(byGroup[g], r)
	}
	for _, rs := range byGroup {
		if len(rs) < 2 {
			continue
		}
		qs := make([]auditstore.LeafFeedQuery, len(rs))
		for i, r := range rs {
			qs[i] = leafQuery(r.t.Org, r.t.Kind, r.after, r.t.Upto)
		}
		pages, ok, err := rs[0].lf.(auditstore.LeafFeeds).FeedLeavesOf(ctx, qs)
		if err != nil {
			return fmt.Errorf("%s leaves of %d logs: %w", rs[0].t.Kind, len(rs), err)
		}
		if !ok {
			continue
		}
		for i, r := range rs {
			if items, next, more, ok := leafItems(pages[i]); ok {
				r.pre = &prefetched{items: items, next: next, more: more}
			}
		}
	}
	return nil
}

// entries reads one page of the feed and computes its entries' leaves.
func (s *Sequencer) entries(ctx context.Context, org uuid.UUID, kind auditstore.LogKind, after auditstore.FeedKey, upto uint64) ([]item, auditstore.FeedKey, bool, error) {
	switch kind {
	case auditstore.LogAudit:
		p, err := s.store.FeedAudit(ctx, auditstore.FeedQuery{OrgID: org, After: after, Upto: upto, Limit: PageSize})
		if err != nil {
			return nil, after, false, fmt.Errorf("audit feed of %s: %w", org, err)
		}
		out := make([]item, len(p.Items))
		for i := range p.Items {
			h, err := s.leaves.AuditLeaf(&p.Items[i])
			if err != nil {
				return nil, after, false, fmt.Errorf("leaf of event %s: %w", p.Items[i].EventID, err)
			}
			out[i] = item{key: auditstore.AuditFeedKey(&p.Items[i]), leaf: h}
		}
		return out, p.Next, p.HasMore, nil
	case auditstore.LogExecutions:
		p, err := s.store.FeedExecutions(ctx, auditstore.ExecFeedQuery{OrgID: org, After: after, Upto: upto, Limit: PageSize})
		if err != nil {
			return nil, after, false, fmt.Errorf("execution feed of %s: %w", org, err)
		}
		out := make([]item, len(p.Items))
		for i := range p.Items {
			h, err := s.leaves.ExecutionLeaf(&p.Items[i])
			if err != nil {
				return nil, after, false, fmt.Errorf("leaf of event %s: %w", p.Items[i].EventID, err)
			}
			out[i] = item{key: auditstore.ExecFeedKey(&p.Items[i]), leaf: h}
		}
		return out, p.Next, p.HasMore, nil
	}
	return nil, after, false, fmt.Errorf("%w: log kind %d", errUnknownKind, kind)
}

var errUnknownKind = errors.New("unknown log kind")

// hashCache serves the tree hashes that appending needs: those written in
// this run, then the store's (a leaf needs at most log2(n) of them, the
// roots of the complete subtrees to its left).
type hashCache struct {
	read func([]int64) ([][32]byte, error)
	m    map[int64]tlog.Hash
}

func newHashCache(read func([]int64) ([][32]byte, error)) *hashCache {
	return &hashCache{read: read, m: map[int64]tlog.Hash{}}
}

func (c *hashCache) put(i int64, h tlog.Hash) { c.m[i] = h }

// keepFor drops every hash but the roots of the complete subtrees of the
// first n leaves (at most log2(n)+1 of them, read from the store where
// it holds them not): those that the tree's root at size n is computed
// from, and that appending leaf n and every leaf after it read until the
// append that covers them, so a warm log reads no hash from the store
// (and a backlog of millions of leaves is sequenced in bounded memory).
func (c *hashCache) keepFor(n int64) error {
	var need []int64
	record := tlog.HashReaderFunc(func(indexes []int64) ([]tlog.Hash, error) {
		need = append(need, indexes...)
		return make([]tlog.Hash, len(indexes)), nil
	})
	if _, err := tlog.TreeHash(n, record); err != nil {
		return err
	}
	// Those it holds not (a cold log: appending read only some), read once.
	hs, err := c.ReadHashes(need)
	if err != nil {
		return err
	}
	kept := make(map[int64]tlog.Hash, len(need))
	for j, i := range need {
		kept[i] = hs[j]
	}
	c.m = kept
	return nil
}

// ReadHashes implements tlog.HashReader.
func (c *hashCache) ReadHashes(indexes []int64) ([]tlog.Hash, error) {
	out := make([]tlog.Hash, len(indexes))
	var missing []int64
	for _, i := range indexes {
		if _, ok := c.m[i]; !ok {
			missing = append(missing, i)
		}
	}
	if len(missing) > 0 {
		got, err := c.read(missing)
		if err != nil {
			return nil, err
		}
		if len(got) != len(missing) {
			return nil, fmt.Errorf("store returned %d of %d tree hashes", len(got), len(missing))
		}
		for j, i := range missing {
			c.m[i] = got[j]
		}
	}
	for k, i := range indexes {
		out[k] = c.m[i]
	}
	return out, nil
}
