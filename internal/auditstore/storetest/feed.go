package storetest

import (
	"bytes"
	"context"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/auditrail/auditrail/internal/auditstore"
	"github.com/auditrail/auditrail/internal/auditstore/search"
	"github.com/auditrail/auditrail/schemas"
)

// Feeder is a store with feeds.
type Feeder interface {
	FeedAudit(ctx context.Context, q auditstore.FeedQuery) (auditstore.FeedPage, error)
	FeedExecutions(ctx context.Context, q auditstore.ExecFeedQuery) (auditstore.ExecFeedPage, error)
}

func feeder(t *testing.T, s auditstore.Store) Feeder {
	t.Helper()
	f, ok := s.(Feeder)
	if !ok {
		t.Fatalf("%T has no feeds", s)
	}
	return f
}

// FeedAll follows the feed of q from q.After until a page says there is no
// more, and answers every item and the last cursor.
func FeedAll(t *testing.T, f Feeder, q auditstore.FeedQuery) ([]schemas.AuditEntry, auditstore.FeedKey) {
	t.Helper()
	var out []schemas.AuditEntry
	for i := 0; ; i++ {
		if i > 10000 {
			t.Fatal("the feed does not end")
		}
		p, err := f.FeedAudit(ctx(t), q)
		if err != nil {
			t.Fatalf("FeedAudit: %v", err)
		}
		if len(p.Items) > q.Limit {
			t.Fatalf("page of %d items for a limit of %d", len(p.Items), q.Limit)
		}
		for j := range p.Items {
			k := auditstore.AuditFeedKey(&p.Items[j])
			if !q.After.Less(k) {
				t.Fatalf("item %v is not after the cursor %v", k, q.After)
			}
			if j > 0 && !auditstore.AuditFeedKey(&p.Items[j-1]).Less(k) {
				t.Fatalf("items out of feed order at %d", j)
			}
		}
		if n := len(p.Items); n > 0 && p.Next != auditstore.AuditFeedKey(&p.Items[n-1]) && !p.HasMore {
			// A store may move the cursor past entries the filters skipped,
			// never behind the last item.
			if p.Next.Less(auditstore.AuditFeedKey(&p.Items[n-1])) {
				t.Fatalf("next cursor %v behind the last item", p.Next)
			}
		}
		if p.Next.Less(q.After) {
			t.Fatalf("next cursor %v moved back from %v", p.Next, q.After)
		}
		out = append(out, p.Items...)
		q.After = p.Next
		if !p.HasMore {
			return out, q.After
		}
	}
}

func entryIDs(es []schemas.AuditEntry) []uuid.UUID {
	out := make([]uuid.UUID, len(es))
	for i := range es {
		out[i] = es[i].EventID
	}
	return out
}

// feed order: seq, then the event id (the events of these tests have
// distinct seqs, or seq 0 and one created time).
func feedOrder(evs []schemas.AuditEvent) []uuid.UUID {
	s := slices.Clone(evs)
	slices.SortFunc(s, func(a, b schemas.AuditEvent) int {
		if a.Stored.Seq != b.Stored.Seq {
			if a.Stored.Seq < b.Stored.Seq {
				return -1
			}
			return 1
		}
		return slices.Compare(a.EventID[:], b.EventID[:])
	})
	ids := make([]uuid.UUID, len(s))
	for i := range s {
		ids[i] = s[i].EventID
	}
	return ids
}

// The feed lists entries in persistence order, whatever their timestamps,
// each once; it stops at the watermark and resumes there; entries without a
// position (stored before feeds) come first.
func testFeed(t *testing.T, open Opener) {
	s := mustOpen(t, open)
	f := feeder(t, s)
	org, other := uuid.New(), uuid.New()
	base := auditstore.Millis(time.Now().Add(-time.Hour))
	rng := rand.New(rand.NewPCG(7, 9))

	// Legacy entries: no position, one batch.
	legacy := make([]schemas.AuditEvent, 5)
	for i := range legacy {
		legacy[i] = Event(org, base.Add(-time.Duration(i)*time.Hour))
	}
	write(t, s, legacy)

	// Positions 1..120 of a stream shared with another org (odd positions
	// are the other org's), timestamps anywhere in the last 40 days, written
	// in a shuffled order in batches of 7, except the entries at positions
	// 61..80: a slow batch, written last.
	var mine, theirs, slow []schemas.AuditEvent
	for seq := uint64(1); seq <= 120; seq++ {
		o := org
		if seq%2 == 1 {
			o = other
		}
		e := Event(o, base.Add(-time.Duration(rng.IntN(40*24))*time.Hour))
		e.Stored = schemas.Persisted{Seq: seq, Time: base.Add(time.Duration(seq) * time.Millisecond)}
		if seq%4 != 0 {
			e.Salt = Salt(int(seq))
		}
		switch {
		case o == other:
			theirs = append(theirs, e)
		case seq > 60 && seq <= 80:
			slow = append(slow, e)
		default:
			mine = append(mine, e)
		}
	}
	rng.Shuffle(len(mine), func(i, j int) { mine[i], mine[j] = mine[j], mine[i] })
	for i := 0; i < len(mine); i += 7 {
		write(t, s, mine[i:min(i+7, len(mine))])
	}
	write(t, s, theirs)

	q := auditstore.FeedQuery{OrgID: org, Limit: 7, Upto: 60}
	got, cur := FeedAll(t, f, q)
	want := append(feedOrder(legacy), feedOrder(filterSeq(mine, 1, 60))...)
	if !slices.Equal(entryIDs(got), want) {
		t.Fatalf("feed up to 60: %d entries, want %d in persistence order", len(got), len(want))
	}
	for _, e := range got[len(legacy):] {
		if !e.CreatedTime.Equal(e.Stored.Time) || e.CreatedTime != base.Add(time.Duration(e.Stored.Seq)*time.Millisecond) {
			t.Fatalf("entry %d: created_time %v, want the persisted time", e.Stored.Seq, e.CreatedTime)
		}
		if want := Salt(int(e.Stored.Seq)); e.Stored.Seq%4 == 0 && e.Salt != nil || e.Stored.Seq%4 != 0 && !bytes.Equal(e.Salt, want) {
			t.Fatalf("entry %d: salt %x", e.Stored.Seq, e.Salt)
		}
	}

	// While 61..80 are not committed the watermark stays at 60 (whatever
	// else is stored above it): nothing past 60 shows.
	if rest, _ := FeedAll(t, f, auditstore.FeedQuery{OrgID: org, Limit: 7, Upto: 60, After: cur}); len(rest) != 0 {
		t.Fatalf("%d entries past the watermark", len(rest))
	}
	write(t, s, slow)
	got, cur = FeedAll(t, f, auditstore.FeedQuery{OrgID: org, Limit: 7, Upto: 120, After: cur})
	if want := feedOrder(append(filterSeq(mine, 61, 120), slow...)); !slices.Equal(entryIDs(got), want) {
		t.Fatalf("feed from the cursor: %d entries, want %d", len(got), len(want))
	}
	// An empty page keeps the cursor where it was.
	p, err := f.FeedAudit(ctx(t), auditstore.FeedQuery{OrgID: org, Limit: 7, Upto: 120, After: cur})
	if err != nil || len(p.Items) != 0 || p.HasMore || p.Next != cur {
		t.Fatalf("empty page: %d items, has_more %v, next %v (want %v), %v", len(p.Items), p.HasMore, p.Next, cur, err)
	}
	// Redelivered copies (one position) show once.
	write(t, s, filterSeq(mine, 1, 20))
	if all, _ := FeedAll(t, f, auditstore.FeedQuery{OrgID: org, Limit: 100, Upto: 120}); len(all) != len(legacy)+60 {
		t.Fatalf("%d entries after redelivery, want %d", len(all), len(legacy)+60)
	}
	// created_since: the entries persisted at or after it (the legacy ones
	// were stored by this test, after it).
	since := base.Add(90 * time.Millisecond)
	got, _ = FeedAll(t, f, auditstore.FeedQuery{OrgID: org, Limit: 9, Upto: 120, CreatedSince: &since})
	if want := append(feedOrder(legacy), feedOrder(filterSeq(append(slices.Clone(mine), slow...), 90, 120))...); !slices.Equal(entryIDs(got), want) {
		t.Fatalf("feed since: %d entries, want %d", len(got), len(want))
	}
}

func filterSeq(evs []schemas.AuditEvent, lo, hi uint64) []schemas.AuditEvent {
	var out []schemas.AuditEvent
	for _, e := range evs {
		if e.Stored.Seq >= lo && e.Stored.Seq <= hi {
			out = append(out, e)
		}
	}
	return out
}

// The feed's filters (project, action, q) keep what they keep in the list,
// also when matches are rare across thousands of entries (a store reading
// chunks of keys must not stop early or skip).
func testFeedFilters(t *testing.T, open Opener) {
	s := mustOpen(t, open)
	f := feeder(t, s)
	org := uuid.New()
	projects := []uuid.UUID{uuid.New(), uuid.New()}
	base := auditstore.Millis(time.Now().Add(-time.Hour))
	evs := make([]schemas.AuditEvent, 3000)
	for i := range evs {
		e := Event(org, base.Add(-time.Duration(i*37%5000)*time.Minute))
		e.Stored = schemas.Persisted{Seq: uint64(i + 1), Time: base.Add(time.Duration(i) * time.Millisecond)}
		if i%3 == 0 {
			e.ProjectID = &projects[i%2]
		}
		if i%700 == 5 {
			e.Action = schemas.AuditActionDeleted
			e.DisplayName = "Rare Actor"
		}
		evs[i] = e
	}
	write(t, s, evs)
	tests := []struct {
		name string
		q    auditstore.FeedQuery
		keep func(e schemas.AuditEvent) bool
	}{
		{"project", auditstore.FeedQuery{ProjectID: &projects[0]}, func(e schemas.AuditEvent) bool { return e.ProjectID != nil && *e.ProjectID == projects[0] }},
		{"rare action", auditstore.FeedQuery{Filter: auditstore.Filter{Action: ptr(schemas.AuditActionDeleted)}}, func(e schemas.AuditEvent) bool { return e.Action == schemas.AuditActionDeleted }},
		{"rare text", auditstore.FeedQuery{Filter: auditstore.Filter{Search: mustSearch(t, `"rare actor"`)}}, func(e schemas.AuditEvent) bool { return e.DisplayName == "Rare Actor" }},
		{"watermark below", auditstore.FeedQuery{Upto: 1500}, func(e schemas.AuditEvent) bool { return e.Stored.Seq <= 1500 }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			q := tc.q
			q.OrgID, q.Limit = org, 50
			if q.Upto == 0 {
				q.Upto = 3000
			}
			var want []schemas.AuditEvent
			for _, e := range evs {
				if tc.keep(e) {
					want = append(want, e)
				}
			}
			got, _ := FeedAll(t, f, q)
			if !slices.Equal(entryIDs(got), feedOrder(want)) {
				t.Fatalf("%d entries, want %d", len(got), len(want))
			}
		})
	}
}

func mustSearch(t *testing.T, q string) search.Query {
	t.Helper()
	sq, err := search.Parse(search.Audit, q)
	if err != nil {
		t.Fatal(err)
	}
	return sq
}

// The execution feed: persistence order, the watermark, the filters.
func testExecutionsFeed(t *testing.T, open Opener) {
	s := mustOpen(t, open)
	f := feeder(t, s)
	es, ok := s.(auditstore.ExecutionStore)
	if !ok {
		t.Fatalf("%T stores no executions", s)
	}
	org, project := uuid.New(), uuid.New()
	base := auditstore.Millis(time.Now().Add(-time.Hour))
	evs := make([]schemas.ExecutionEvent, 40)
	for i := range evs {
		// Started long ago for the later positions: late arrivals.
		evs[i] = execEvent(org, project, base.Add(-time.Duration(i)*time.Hour), i%4 != 0)
		evs[i].Stored = schemas.Persisted{Seq: uint64(i + 1), Time: base.Add(time.Duration(i) * time.Millisecond)}
		if i%3 != 0 {
			evs[i].Salt = Salt(i)
		}
	}
	salts := map[string][]byte{}
	for _, e := range evs {
		salts[e.EventID] = e.Salt
	}
	if err := es.WriteExecutions(ctx(t), evs[20:]); err != nil {
		t.Fatal(err)
	}
	if err := es.WriteExecutions(ctx(t), evs[:20]); err != nil {
		t.Fatal(err)
	}
	walk := func(q auditstore.ExecFeedQuery) []string {
		var ids []string
		for i := 0; i < 1000; i++ {
			p, err := f.FeedExecutions(ctx(t), q)
			if err != nil {
				t.Fatal(err)
			}
			for j := range p.Items {
				ids = append(ids, p.Items[j].EventID)
				if got, want := p.Items[j].CreatedTime, p.Items[j].Stored.Time; !got.Equal(want) {
					t.Fatalf("created_time %v, want %v", got, want)
				}
				if got, want := p.Items[j].Salt, salts[p.Items[j].EventID]; !bytes.Equal(got, want) || (want == nil) != (got == nil) {
					t.Fatalf("salt %x, want %x", got, want)
				}
			}
			q.After = p.Next
			if !p.HasMore {
				return ids
			}
		}
		t.Fatal("the feed does not end")
		return nil
	}
	want := func(keep func(i int) bool) []string {
		var ids []string
		for i := range evs {
			if keep(i) {
				ids = append(ids, evs[i].EventID)
			}
		}
		return ids
	}
	failed := false
	for _, tc := range []struct {
		name string
		q    auditstore.ExecFeedQuery
		keep func(i int) bool
	}{
		{"all", auditstore.ExecFeedQuery{Upto: 40}, func(int) bool { return true }},
		{"watermark", auditstore.ExecFeedQuery{Upto: 25}, func(i int) bool { return i < 25 }},
		{"project", auditstore.ExecFeedQuery{Upto: 40, ProjectID: &project}, func(int) bool { return true }},
		{"other project", auditstore.ExecFeedQuery{Upto: 40, ProjectID: ptr(uuid.New())}, func(int) bool { return false }},
		{"failed", auditstore.ExecFeedQuery{Upto: 40, Success: &failed}, func(i int) bool { return i%4 == 0 }},
	} {
		q := tc.q
		q.OrgID, q.Limit = org, 6
		if got, w := walk(q), want(tc.keep); !slices.Equal(got, w) {
			t.Fatalf("%s: %d executions, want %d", tc.name, len(got), len(w))
		}
	}
}
