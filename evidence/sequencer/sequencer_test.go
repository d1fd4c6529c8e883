package sequencer_test

import (
	"context"
	"crypto/sha256"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	xtlog "golang.org/x/mod/sumdb/tlog"

	"github.com/auditrail/auditrail/evidence/sequencer"
	"github.com/auditrail/auditrail/internal/auditstore"
	"github.com/auditrail/auditrail/internal/auditstore/backend"
	"github.com/auditrail/auditrail/internal/auditstore/sqlite"
	"github.com/auditrail/auditrail/internal/synth"
	"github.com/auditrail/auditrail/internal/testenv"
	"github.com/auditrail/auditrail/internal/tlog"
	"github.com/auditrail/auditrail/schemas"
	"github.com/auditrail/auditrail/schemas/apiitem"
)

func TestMain(m *testing.M) { testenv.MainNoLeaks(m) }

func openStore(t *testing.T) *sqlite.Store {
	t.Helper()
	s, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "audit.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// events returns n events of org with stream sequences 1..n (timestamps
// out of order: the log follows the stream, not the time).
func events(org uuid.UUID, n int) []schemas.AuditEvent {
	gen := synth.New(org, 3, 7)
	base := time.Now().Add(-time.Hour).UTC()
	evs := make([]schemas.AuditEvent, n)
	for i := range evs {
		evs[i] = gen.Event(base.Add(time.Duration(rand.IntN(3600)) * time.Second))
		evs[i].Stored = schemas.Persisted{Seq: uint64(i + 1), Time: base.Add(time.Duration(i) * time.Millisecond)}
	}
	return evs
}

// expectedRoot is the root of the entries in stream order, computed
// without the store's hashes: each entry as the list route renders it.
func expectedRoot(t *testing.T, s *sqlite.Store, org uuid.UUID, order []uuid.UUID) xtlog.Hash {
	t.Helper()
	byID := map[uuid.UUID]schemas.AuditEntry{}
	q := auditstore.FeedQuery{OrgID: org, Upto: 1 << 62, Limit: auditstore.FeedMaxLimit}
	for {
		p, err := s.FeedAudit(context.Background(), q)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range p.Items {
			byID[e.EventID] = e
		}
		if !p.HasMore {
			break
		}
		q.After = p.Next
	}
	leaves := make([]xtlog.Hash, len(order))
	for i, id := range order {
		e, ok := byID[id]
		if !ok {
			t.Fatalf("event %s not stored", id)
		}
		var err error
		if leaves[i], err = (apiitem.Leaves{}).AuditLeaf(&e); err != nil {
			t.Fatal(err)
		}
	}
	return tlog.RootOf(leaves)
}

func storedRoot(t *testing.T, s *sqlite.Store, org uuid.UUID, size int64) xtlog.Hash {
	t.Helper()
	h, err := xtlog.TreeHash(size, auditstore.LogHashReader(context.Background(), s, org, auditstore.LogAudit))
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func TestSequenceFollowsTheFeedUpToTheWatermark(t *testing.T) {
	ctx := context.Background()
	s := openStore(t)
	org, other := uuid.New(), uuid.New()
	evs := events(org, 2600)
	// Committed out of order by concurrent batches: seq 1500 comes last.
	var late schemas.AuditEvent
	rest := make([]schemas.AuditEvent, 0, len(evs))
	for _, e := range evs {
		if e.Stored.Seq == 1500 {
			late = e
			continue
		}
		rest = append(rest, e)
	}
	rand.Shuffle(len(rest), func(i, j int) { rest[i], rest[j] = rest[j], rest[i] })
	for i := 0; i < len(rest); i += 700 {
		if err := s.WriteAudit(ctx, rest[i:min(i+700, len(rest))]); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.WriteAudit(ctx, events(other, 10)); err != nil {
		t.Fatal(err)
	}
	seq := sequencer.New(s)

	// The watermark stops below the missing 1500.
	r, err := seq.Sequence(ctx, org, auditstore.LogAudit, 1499)
	if err != nil {
		t.Fatal(err)
	}
	if r.Appended != 1499 || r.Size != 1499 {
		t.Fatalf("appended %d, size %d; want 1499", r.Appended, r.Size)
	}
	if err := s.WriteAudit(ctx, []schemas.AuditEvent{late}); err != nil {
		t.Fatal(err)
	}
	// A copy of an event published again (another stream sequence) is
	// stored once, and is one leaf.
	dup := evs[10]
	dup.Stored = schemas.Persisted{Seq: 2601, Time: time.Now()}
	if err := s.WriteAudit(ctx, []schemas.AuditEvent{dup}); err != nil {
		t.Fatal(err)
	}
	if r, err = seq.Sequence(ctx, org, auditstore.LogAudit, 2601); err != nil {
		t.Fatal(err)
	}
	if r.Appended != 1101 || r.Size != 2600 {
		t.Fatalf("appended %d, size %d; want 1101 and 2600", r.Appended, r.Size)
	}
	// Nothing new: nothing appended (a sequencer retrying, or a second one).
	if r, err = sequencer.New(s).Sequence(ctx, org, auditstore.LogAudit, 2601); err != nil || r.Appended != 0 {
		t.Fatalf("again: %+v, %v", r, err)
	}
	order := make([]uuid.UUID, len(evs))
	for i, e := range evs {
		order[i] = e.EventID
	}
	if got, want := storedRoot(t, s, org, 2600), expectedRoot(t, s, org, order); got != want {
		t.Fatalf("the stored tree's root %s is not the root of the entries in stream order %s", got, want)
	}
	idx, err := s.LeafIndexes(ctx, org, auditstore.LogAudit, []uuid.UUID{evs[0].EventID, late.EventID, evs[2599].EventID})
	if err != nil {
		t.Fatal(err)
	}
	if idx[evs[0].EventID] != 0 || idx[late.EventID] != 1499 || idx[evs[2599].EventID] != 2599 {
		t.Fatalf("leaf indexes %v", idx)
	}
	// The other organization's log is its own.
	if size, _, err := s.LogHead(ctx, other, auditstore.LogAudit); err != nil || size != 0 {
		t.Fatalf("other org's log: %d, %v", size, err)
	}
}

// Each append is checked against the tree from the store's hashes: a
// sequencer that starts afresh (the in-memory hashes gone) continues the
// same tree, page after page.
func TestSequenceResumesFromTheStore(t *testing.T) {
	ctx := context.Background()
	s := openStore(t)
	org := uuid.New()
	evs := events(org, 3333)
	if err := s.WriteAudit(ctx, evs); err != nil {
		t.Fatal(err)
	}
	var size int64
	for _, upto := range []uint64{1, 2, 3, 700, 1024, 1025, 2047, 3333} {
		r, err := sequencer.New(s).Sequence(ctx, org, auditstore.LogAudit, upto)
		if err != nil {
			t.Fatal(err)
		}
		if r.Size != int64(upto) {
			t.Fatalf("upto %d: size %d", upto, r.Size)
		}
		size = r.Size
	}
	order := make([]uuid.UUID, len(evs))
	for i, e := range evs {
		order[i] = e.EventID
	}
	if got, want := storedRoot(t, s, org, size), expectedRoot(t, s, org, order); got != want {
		t.Fatalf("root %s, want %s", got, want)
	}
}

// leafStore is the SQLite store with leaves stored beside the entries
// (as the ClickHouse store keeps them): known(seq) says which entries have
// one; bogus replaces every stored leaf by another hash.
type leafStore struct {
	*sqlite.Store
	known     func(seq uint64) bool
	bogus     bool
	mu        sync.Mutex // the counts: logs are read in parallel
	feedReads int        // FeedAudit calls of the sequencer
	leafReads int        // FeedLeaves calls
}

func (l *leafStore) FeedAudit(ctx context.Context, q auditstore.FeedQuery) (auditstore.FeedPage, error) {
	l.mu.Lock()
	l.feedReads++
	l.mu.Unlock()
	return l.Store.FeedAudit(ctx, q)
}

func (l *leafStore) FeedLeaves(ctx context.Context, q auditstore.LeafFeedQuery) (auditstore.LeafPage, error) {
	l.mu.Lock()
	l.leafReads++
	l.mu.Unlock()
	if err := q.Validate(); err != nil {
		return auditstore.LeafPage{}, err
	}
	p, err := l.Store.FeedAudit(ctx, auditstore.FeedQuery{OrgID: q.OrgID, After: q.After, Upto: q.Upto, Limit: min(q.Limit, auditstore.FeedMaxLimit)})
	if err != nil {
		return auditstore.LeafPage{}, err
	}
	out := auditstore.LeafPage{Next: p.Next, HasMore: p.HasMore}
	for i := range p.Items {
		h, err := apiitem.Leaves{}.AuditLeaf(&p.Items[i])
		if err != nil {
			return auditstore.LeafPage{}, err
		}
		if l.bogus {
			h = sha256.Sum256(h[:])
		}
		out.Items = append(out.Items, auditstore.FeedLeaf{Key: auditstore.AuditFeedKey(&p.Items[i]), Leaf: h, Known: l.known(p.Items[i].Stored.Seq)})
	}
	return out, nil
}

// A store that keeps leaves: the sequencer appends them without reading
// the entries; a page with an entry stored without its leaf is read from
// the feed instead. Either way the log is the entries' (and a stored leaf
// is what the log holds: another one makes another tree).
func TestSequenceTakesStoredLeaves(t *testing.T) {
	for _, tc := range []struct {
		name      string
		known     func(uint64) bool
		bogus     bool
		feedReads bool
		same      bool
	}{
		{"every leaf stored", func(uint64) bool { return true }, false, false, true},
		{"the first entries without", func(seq uint64) bool { return seq > 1200 }, false, true, true},
		{"no leaf stored", func(uint64) bool { return false }, false, true, true},
		{"stored leaves not the entries'", func(uint64) bool { return true }, true, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			s := &leafStore{Store: openStore(t), known: tc.known, bogus: tc.bogus}
			org := uuid.New()
			evs := events(org, 2500)
			if err := s.WriteAudit(ctx, evs); err != nil {
				t.Fatal(err)
			}
			r, err := sequencer.New(s).Sequence(ctx, org, auditstore.LogAudit, 2500)
			if err != nil || r.Size != 2500 {
				t.Fatalf("sequence: %+v, %v", r, err)
			}
			if (s.feedReads > 0) != tc.feedReads {
				t.Fatalf("%d feed reads", s.feedReads)
			}
			// Once a page begins with an entry without a leaf, the call
			// reads the feed: the leaves are not read again for each page.
			if tc.feedReads && s.leafReads > 2 {
				t.Fatalf("%d leaf reads beside %d feed reads", s.leafReads, s.feedReads)
			}
			order := make([]uuid.UUID, len(evs))
			for i, e := range evs {
				order[i] = e.EventID
			}
			if same := storedRoot(t, s.Store, org, 2500) == expectedRoot(t, s.Store, org, order); same != tc.same {
				t.Fatalf("the stored root is the entries' root: %v, want %v", same, tc.same)
			}
		})
	}
}

// A sequencer keeps the hashes its next append reads; when another one
// appended meanwhile (the lease handed over and back), the kept ones are
// of another size and the store's are read: the tree stays the entries'.
func TestSequenceAfterAnotherSequencer(t *testing.T) {
	ctx := context.Background()
	s := openStore(t)
	org := uuid.New()
	evs := events(org, 2600)
	if err := s.WriteAudit(ctx, evs); err != nil {
		t.Fatal(err)
	}
	a, b := sequencer.New(s), sequencer.New(s)
	for _, step := range []struct {
		seq  *sequencer.Sequencer
		upto uint64
	}{{a, 1000}, {b, 1777}, {a, 2001}, {a, 2600}} {
		if r, err := step.seq.Sequence(ctx, org, auditstore.LogAudit, step.upto); err != nil || r.Size != int64(step.upto) {
			t.Fatalf("sequence up to %d: %+v, %v", step.upto, r, err)
		}
	}
	order := make([]uuid.UUID, len(evs))
	for i, e := range evs {
		order[i] = e.EventID
	}
	if got, want := storedRoot(t, s, org, 2600), expectedRoot(t, s, org, order); got != want {
		t.Fatalf("root %s, want %s", got, want)
	}
}

// countingStore counts the writes of the log: one AppendLogs a pass
// (however many logs), never an AppendLog of one log.
type countingStore struct {
	*sqlite.Store
	many, one int
	logs      []int
}

func (c *countingStore) AppendLogs(ctx context.Context, as []auditstore.LogAppend) error {
	c.many++
	c.logs = append(c.logs, len(as))
	return c.Store.AppendLogs(ctx, as)
}

func (c *countingStore) AppendLog(ctx context.Context, org uuid.UUID, kind auditstore.LogKind, l []auditstore.LogLeaf, h []auditstore.StoredHash) error {
	c.one++
	return c.Store.AppendLog(ctx, org, kind, l, h)
}

// TestSequenceAllWritesTogether: the logs of many organizations are
// appended in one write of the store per pass (a pass holds up to
// AppendSize entries a log and about BatchSize in all), and each log is
// the feed's, as Sequence alone makes it.
func TestSequenceAllWritesTogether(t *testing.T) {
	ctx := context.Background()
	s := &countingStore{Store: openStore(t)}
	orgs := make([]uuid.UUID, 6)
	var targets []sequencer.Target
	for i := range orgs {
		orgs[i] = uuid.New()
		n := 700
		if i == 0 {
			n = sequencer.AppendSize + 300 // two passes
		}
		evs := events(orgs[i], n)
		for j := 0; j < len(evs); j += 2000 {
			if err := s.WriteAudit(ctx, evs[j:min(j+2000, len(evs))]); err != nil {
				t.Fatal(err)
			}
		}
		targets = append(targets, sequencer.Target{Org: orgs[i], Kind: auditstore.LogAudit, Upto: 1 << 62})
	}
	rs, err := sequencer.New(s).SequenceAll(ctx, targets, 3)
	if err != nil {
		t.Fatal(err)
	}
	if s.one != 0 || s.many != 2 || s.logs[0] != 6 || s.logs[1] != 1 {
		t.Fatalf("%d writes of one log, %d of many (of %v logs); want 0 and 2 (6 logs, then the large one)", s.one, s.many, s.logs)
	}
	for i, org := range orgs {
		want := int64(700)
		if i == 0 {
			want = sequencer.AppendSize + 300
		}
		if rs[i].Appended != int(want) || rs[i].Size != want {
			t.Fatalf("log %d: %+v, want %d appended", i, rs[i], want)
		}
		order := make([]uuid.UUID, 0, want)
		q := auditstore.FeedQuery{OrgID: org, Upto: 1 << 62, Limit: auditstore.FeedMaxLimit}
		for {
			p, err := s.FeedAudit(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range p.Items {
				order = append(order, e.EventID)
			}
			if !p.HasMore {
				break
			}
			q.After = p.Next
		}
		if got, want := storedRoot(t, s.Store, org, want), expectedRoot(t, s.Store, org, order); got != want {
			t.Fatalf("log %d: the stored root is not the feed's", i)
		}
	}
	// Nothing new: no write at all.
	if _, err := sequencer.New(s).SequenceAll(ctx, targets, 3); err != nil || s.many != 2 || s.one != 0 {
		t.Fatalf("again: %v, %d writes", err, s.many)
	}
}

// The roles reach their store through backend.Pending: the sequencer
// takes the leaves the open store keeps (its leaf feed), as it does from
// the store itself, rather than reading the entries back.
func TestSequenceTakesStoredLeavesThroughPending(t *testing.T) {
	ctx := context.Background()
	s := &leafStore{Store: openStore(t), known: func(uint64) bool { return true }}
	p := backend.NewPending()
	p.Set(s)
	org := uuid.New()
	if err := s.WriteAudit(ctx, events(org, 1500)); err != nil {
		t.Fatal(err)
	}
	r, err := sequencer.New(p).Sequence(ctx, org, auditstore.LogAudit, 1500)
	if err != nil || r.Size != 1500 {
		t.Fatalf("sequence: %+v, %v", r, err)
	}
	if s.feedReads > 0 || s.leafReads == 0 {
		t.Fatalf("%d feed reads, %d leaf reads: the entries were read back", s.feedReads, s.leafReads)
	}
}

// hashReads counts the tree hashes read from the store.
type hashReads struct {
	*sqlite.Store
	reads int
}

func (h *hashReads) ReadLogHashes(ctx context.Context, org uuid.UUID, kind auditstore.LogKind, indexes []int64) ([][32]byte, error) {
	h.reads++
	return h.Store.ReadLogHashes(ctx, org, kind, indexes)
}

// TestWarmLogReadsNoHash: once a sequencer has appended to a log, it keeps
// the roots of the log's complete subtrees, so appending more, one small
// batch after another, reads no tree hash from the store (two of its
// reads for each batch were most of the ClickHouse server's CPU under a
// steady load), and KeptHashes gives the checkpointer the log's root at
// each size without a read; a sequencer that did not append keeps none.
func TestWarmLogReadsNoHash(t *testing.T) {
	ctx := context.Background()
	s := &hashReads{Store: openStore(t)}
	org := uuid.New()
	evs := events(org, 720)
	seq := sequencer.New(s)
	written := 0
	// Batches of sizes that carry into every level, the first from an
	// empty log.
	for i, n := range []int{1, 2, 5, 8, 1, 27, 64, 129, 255, 3, 200, 5} {
		if err := s.WriteAudit(ctx, evs[written:written+n]); err != nil {
			t.Fatal(err)
		}
		written += n
		r, err := seq.Sequence(ctx, org, auditstore.LogAudit, 1<<62)
		if err != nil {
			t.Fatal(err)
		}
		if r.Size != int64(written) {
			t.Fatalf("batch %d: size %d, want %d", i, r.Size, written)
		}
		if s.reads != 0 {
			t.Fatalf("batch %d (size %d): %d reads of tree hashes, want none", i, written, s.reads)
		}
		kept := seq.KeptHashes(org, auditstore.LogAudit, int64(written))
		root, err := xtlog.TreeHash(int64(written), xtlog.HashReaderFunc(func(idx []int64) ([]xtlog.Hash, error) {
			out := make([]xtlog.Hash, len(idx))
			for j, x := range idx {
				h, ok := kept[x]
				if !ok {
					return nil, fmt.Errorf("hash %d not kept", x)
				}
				out[j] = h
			}
			return out, nil
		}))
		if err != nil {
			t.Fatalf("batch %d: the root from the kept hashes: %v", i, err)
		}
		if want := storedRoot(t, s.Store, org, int64(written)); root != want {
			t.Fatalf("batch %d: the kept hashes give another root than the store's", i)
		}
		if seq.KeptHashes(org, auditstore.LogAudit, int64(written-1)) != nil {
			t.Fatalf("batch %d: hashes kept for a size the log has left", i)
		}
	}
	// Another sequencer (a lease taken over) reads the log's hashes once.
	other := sequencer.New(s)
	if err := s.WriteAudit(ctx, evs[written:written+3]); err != nil {
		t.Fatal(err)
	}
	if _, err := other.Sequence(ctx, org, auditstore.LogAudit, 1<<62); err != nil {
		t.Fatal(err)
	}
	if s.reads == 0 {
		t.Fatal("a cold sequencer appended without reading the log's hashes")
	}
	before := s.reads
	if err := s.WriteAudit(ctx, evs[written+3:written+9]); err != nil {
		t.Fatal(err)
	}
	if _, err := other.Sequence(ctx, org, auditstore.LogAudit, 1<<62); err != nil {
		t.Fatal(err)
	}
	if s.reads != before {
		t.Fatalf("warm again, it read %d more times", s.reads-before)
	}
}

// manyStore is leafStore reading the leaves and the heads of several logs
// at once (as the ClickHouse store does), counting the calls.
type manyStore struct {
	*leafStore
	many, headsMany, heads int
	decline                bool // FeedLeavesOf declines every window
}

func (m *manyStore) FeedLeavesOf(ctx context.Context, qs []auditstore.LeafFeedQuery) ([]auditstore.LeafPage, bool, error) {
	if err := auditstore.ValidateLeafFeeds(qs); err != nil {
		return nil, false, err
	}
	m.many++
	if m.decline {
		return nil, false, nil
	}
	out := make([]auditstore.LeafPage, len(qs))
	for i, q := range qs {
		p, err := m.leafStore.FeedLeaves(ctx, q)
		if err != nil {
			return nil, false, err
		}
		m.mu.Lock()
		m.leafReads-- // counted as one read of many
		m.mu.Unlock()
		out[i] = p
	}
	return out, true, nil
}

func (m *manyStore) LogHeadsOf(ctx context.Context, kind auditstore.LogKind, orgs []uuid.UUID) (map[uuid.UUID]auditstore.LogLeaf, error) {
	m.headsMany++
	return auditstore.LogHeadsEach(ctx, m.Store.LogHead, kind, orgs)
}

func (m *manyStore) LogHead(ctx context.Context, org uuid.UUID, kind auditstore.LogKind) (int64, auditstore.LogLeaf, error) {
	m.mu.Lock()
	m.heads++
	m.mu.Unlock()
	return m.Store.LogHead(ctx, org, kind)
}

// TestSequenceAllReadsLogsTogether: where the store reads several logs at
// once, a round of many organizations reads their heads in one call and
// the first page of their leaves in one call a pass, none alone (each
// alone was a read of the same ClickHouse granules, most of the server's
// CPU under a steady load); a log whose cursor is far behind (its first
// entries) is read alone, without widening the others' window; a window
// the store declines is read log by log; either way each log is its
// entries'.
func TestSequenceAllReadsLogsTogether(t *testing.T) {
	const base = 2 * auditstore.LeafFeedsWindow // the stream's sequences are far from 0
	for _, decline := range []bool{false, true} {
		ctx := context.Background()
		s := &manyStore{leafStore: &leafStore{Store: openStore(t), known: func(uint64) bool { return true }}, decline: decline}
		orgs := make([]uuid.UUID, 6) // the last one's entries begin in the second round
		var targets []sequencer.Target
		for i := range orgs {
			orgs[i] = uuid.New()
			targets = append(targets, sequencer.Target{Org: orgs[i], Kind: auditstore.LogAudit, Upto: 1 << 62})
		}
		seq := sequencer.New(s)
		var all [][]schemas.AuditEvent
		for i, org := range orgs {
			evs := events(org, 300)
			for j := range evs { // interleaved in one stream
				evs[j].Stored.Seq = base + uint64(j*len(orgs)+i+1)
			}
			all = append(all, evs)
		}
		sizes := make([]int64, len(orgs))
		for round := 0; round < 3; round++ {
			for i := range orgs {
				if i == 5 && round == 0 {
					continue
				}
				if err := s.WriteAudit(ctx, all[i][round*100:(round+1)*100]); err != nil {
					t.Fatal(err)
				}
				sizes[i] += 100
			}
			for i := range targets { // the watermark: the last event written
				targets[i].Upto = base + uint64((round+1)*100*len(orgs))
			}
			s.many, s.headsMany, s.heads, s.leafReads = 0, 0, 0, 0
			rs, err := seq.SequenceAll(ctx, targets, 3)
			if err != nil {
				t.Fatal(err)
			}
			for i, r := range rs {
				if r.Size != sizes[i] {
					t.Fatalf("declined %v, round %d, log %d: size %d, want %d", decline, round, i, r.Size, sizes[i])
				}
			}
			if s.headsMany != 1 || s.heads != 0 {
				t.Fatalf("declined %v, round %d: %d reads of many heads, %d of one; want 1 and 0", decline, round, s.headsMany, s.heads)
			}
			// Every cursor is 0 in the first round (every log read alone),
			// the last log's in the second too (its first entries).
			many, alone := 1, 0
			switch {
			case round == 0:
				many, alone = 0, len(orgs)
			case decline:
				alone = len(orgs)
			case round == 1:
				alone = 1
			}
			if s.many != many || s.leafReads != alone {
				t.Fatalf("declined %v, round %d: %d reads of many logs' leaves, %d of one log's (want %d and %d)", decline, round, s.many, s.leafReads, many, alone)
			}
		}
		for i, org := range orgs {
			var order []uuid.UUID
			for _, e := range all[i][:sizes[i]] {
				order = append(order, e.EventID)
			}
			if i == 5 { // its entries from the second round on
				order = order[:0]
				for _, e := range all[i][100:300] {
					order = append(order, e.EventID)
				}
			}
			if storedRoot(t, s.Store, org, sizes[i]) != expectedRoot(t, s.Store, org, order) {
				t.Fatalf("declined %v: log %d is not its entries'", decline, i)
			}
		}
	}
}
