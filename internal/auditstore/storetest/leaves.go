package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/auditrail/auditrail/internal/auditstore"
	"github.com/auditrail/auditrail/schemas"
)

// RunLeafFeed checks a store that keeps each entry's leaf beside it
// (auditstore.LeafFeed): plain opens the location with no Leaves, withLeaves
// with leaves. Entries written without a leaf are listed unknown; every
// leaf stored is the one leaves computes from the entry as the feed serves
// it (the row read back, not the event written), for every field of an
// entry and of an execution; positions are the feed's, paged, up to the
// watermark; a copy of an event written again is not listed twice.
func RunLeafFeed(t *testing.T, plain, withLeaves Opener, leaves auditstore.Leaves) {
	old, s := mustOpen(t, plain), mustOpen(t, withLeaves)
	lf, ok := s.(auditstore.LeafFeed)
	if !ok {
		t.Fatalf("%T keeps no leaves", s)
	}
	es, ok := s.(auditstore.ExecutionStore)
	if !ok {
		t.Fatalf("%T stores no executions", s)
	}
	oldES := old.(auditstore.ExecutionStore)
	f := feeder(t, s)
	org, project := uuid.New(), uuid.New()
	base := auditstore.Millis(time.Now().Add(-time.Hour))
	rt := schemas.ResourceTypeUserConnection
	evs := make([]schemas.AuditEvent, 70)
	for i := range evs {
		evs[i] = Event(org, base.Add(-time.Duration(i)*time.Minute))
		if i%3 == 0 {
			evs[i].ClientIP, evs[i].CustomerID, evs[i].ProjectID = schemas.Ptr("2001:db8::1"), schemas.Ptr(uuid.New()), &project
			evs[i].UserID, evs[i].ResourceType, evs[i].ResourceID = schemas.Ptr("u'1\"; DROP TABLE x"), &rt, schemas.Ptr("conn_9")
			evs[i].ResourceDisplay, evs[i].DisplayName = schemas.Ptr("google"), "Grace — ünïcode"
			evs[i].Data = json.RawMessage(fmt.Sprintf(`{"n": %d, "after":{"scopes":["a","b"], "x": 1.50},"before":null}`, i))
		}
		evs[i].Stored = schemas.Persisted{Seq: uint64(2*i + 1), Time: base.Add(time.Duration(i) * time.Millisecond)}
	}
	// Positions 1..59 written without leaves, the others with (one of them
	// twice, at another position: stored once).
	write(t, old, evs[:30])
	again := evs[40]
	again.Stored.Seq = 1000
	write(t, s, append(evs[30:], again))

	execs := make([]schemas.ExecutionEvent, 10)
	for i := range execs {
		execs[i] = execEvent(org, project, base.Add(-time.Duration(i)*time.Hour), i%2 == 0)
		execs[i].Stored = schemas.Persisted{Seq: uint64(2000 + i), Time: base.Add(time.Duration(i) * time.Millisecond)}
		if i%3 == 0 {
			execs[i].Client = &schemas.ClientInfo{Protocol: "mcp", Name: "desk", Version: "1"}
		}
	}
	if err := oldES.WriteExecutions(ctx(t), execs[:4]); err != nil {
		t.Fatal(err)
	}
	if err := es.WriteExecutions(ctx(t), execs[4:]); err != nil {
		t.Fatal(err)
	}

	walk := func(kind auditstore.LogKind, upto uint64, limit int) []auditstore.FeedLeaf {
		var out []auditstore.FeedLeaf
		q := auditstore.LeafFeedQuery{OrgID: org, Kind: kind, Upto: upto, Limit: limit}
		for i := 0; ; i++ {
			if i > 1000 {
				t.Fatal("the leaf feed does not end")
			}
			p, err := lf.FeedLeaves(ctx(t), q)
			if err != nil {
				t.Fatalf("FeedLeaves: %v", err)
			}
			if len(p.Items) > limit {
				t.Fatalf("%d leaves for a limit of %d", len(p.Items), limit)
			}
			out = append(out, p.Items...)
			q.After = p.Next
			if !p.HasMore {
				return out
			}
		}
	}

	entries, _ := FeedAll(t, f, auditstore.FeedQuery{OrgID: org, Upto: 10_000, Limit: 1000})
	got := walk(auditstore.LogAudit, 10_000, 7)
	if len(got) != len(entries) || len(got) != len(evs) {
		t.Fatalf("%d leaves, %d feed entries, %d events", len(got), len(entries), len(evs))
	}
	for i, l := range got {
		e := &entries[i]
		if l.Key != auditstore.AuditFeedKey(e) {
			t.Fatalf("leaf %d at %v, the feed's entry at %v", i, l.Key, auditstore.AuditFeedKey(e))
		}
		if want := e.Stored.Seq <= 59; l.Known == want {
			t.Fatalf("entry at %d: known %v", e.Stored.Seq, l.Known)
		}
		if !l.Known {
			continue
		}
		want, err := leaves.AuditLeaf(e)
		if err != nil {
			t.Fatal(err)
		}
		if l.Leaf != want {
			t.Fatalf("entry at %d: the stored leaf is not the entry's as the feed serves it", e.Stored.Seq)
		}
	}
	if up := walk(auditstore.LogAudit, 80, 1000); len(up) != 40 || up[len(up)-1].Key.Seq != 79 {
		t.Fatalf("up to the watermark 80: %d leaves", len(up))
	}

	xs := walk(auditstore.LogExecutions, 10_000, 3)
	if len(xs) != len(execs) {
		t.Fatalf("%d execution leaves for %d executions", len(xs), len(execs))
	}
	p, err := f.FeedExecutions(ctx(t), auditstore.ExecFeedQuery{OrgID: org, Upto: 10_000, Limit: 100})
	if err != nil || len(p.Items) != len(execs) {
		t.Fatalf("execution feed: %v, %d", err, len(p.Items))
	}
	for i, l := range xs {
		e := &p.Items[i]
		if l.Key != auditstore.ExecFeedKey(e) || l.Known != (i >= 4) {
			t.Fatalf("execution leaf %d: %v known %v, the feed's %v", i, l.Key, l.Known, auditstore.ExecFeedKey(e))
		}
		if want, err := leaves.ExecutionLeaf(e); l.Known && (err != nil || l.Leaf != want) {
			t.Fatalf("execution %d: the stored leaf is not the execution's as the feed serves it (%v)", i, err)
		}
	}

	for _, q := range []auditstore.LeafFeedQuery{
		{Kind: auditstore.LogAudit, Limit: 10},
		{OrgID: org, Kind: 9, Limit: 10},
		{OrgID: org, Limit: 0},
		{OrgID: org, Limit: auditstore.LeafFeedMaxLimit + 1},
	} {
		if _, err := lf.FeedLeaves(ctx(t), q); !errors.Is(err, auditstore.ErrInvalidQuery) {
			t.Errorf("%+v: %v, want ErrInvalidQuery", q, err)
		}
	}
}

// RunLeafFeeds checks a store that reads the leaves and the log heads of
// several organizations at once (auditstore.LeafFeeds,
// auditstore.LogHeadsReader; open keeps leaves): each page FeedLeavesOf
// answers is the page FeedLeaves answers for the same query, whatever the
// cursors (before, inside and past the organizations' entries), the limits
// (a page cut short says so) and the copies of an event; a window wider
// than LeafFeedsWindow is declined unread, bad queries refused; and each
// head LogHeadsOf answers is LogHead's (an empty log absent).
func RunLeafFeeds(t *testing.T, open Opener) {
	s := mustOpen(t, open)
	lfs, ok := s.(auditstore.LeafFeeds)
	if !ok {
		t.Fatalf("%T reads no leaves of several logs at once", s)
	}
	orgs := []uuid.UUID{uuid.New(), uuid.New(), uuid.New(), uuid.New()}
	base := auditstore.Millis(time.Now().Add(-time.Hour))
	// Interleaved in the stream: org i has the sequences ≡ i (mod 3), the
	// fourth none; an event of the first written again further on.
	var evs []schemas.AuditEvent
	for seq := uint64(1); seq <= 90; seq++ {
		e := Event(orgs[seq%3], base.Add(-time.Duration(seq)*time.Minute))
		e.Stored = schemas.Persisted{Seq: seq, Time: base.Add(time.Duration(seq) * time.Millisecond)}
		evs = append(evs, e)
	}
	again := evs[2] // seq 3, the first organization's
	again.Stored.Seq = 95
	write(t, s, append(evs, again))

	keyAt := func(org uuid.UUID, n int) auditstore.FeedKey { // org's n-th key (0: none)
		if n == 0 {
			return auditstore.FeedKey{}
		}
		p, err := lfs.FeedLeaves(ctx(t), auditstore.LeafFeedQuery{OrgID: org, Kind: auditstore.LogAudit, Upto: 1000, Limit: n})
		if err != nil || len(p.Items) < n {
			t.Fatalf("FeedLeaves: %v, %d items", err, len(p.Items))
		}
		return p.Items[n-1].Key
	}
	for _, c := range []struct {
		name   string
		after  []int // each organization's cursor, as its n-th key
		upto   uint64
		limits []int
	}{
		{"from the start", []int{0, 0, 0, 0}, 1000, []int{1000, 1000, 1000, 1000}},
		{"cursors apart", []int{5, 0, 29, 0}, 1000, []int{1000, 1000, 1000, 1000}},
		{"cut short", []int{2, 3, 0, 0}, 1000, []int{4, 1000, 7, 1}},
		{"up to a watermark", []int{1, 10, 0, 0}, 40, []int{1000, 1000, 3, 1000}},
		{"the watermark before a cursor", []int{20, 0, 0, 0}, 30, []int{1000, 1000, 1000, 1000}},
	} {
		qs := make([]auditstore.LeafFeedQuery, len(orgs))
		for i, org := range orgs {
			qs[i] = auditstore.LeafFeedQuery{OrgID: org, Kind: auditstore.LogAudit, After: keyAt(org, c.after[i]), Upto: c.upto, Limit: c.limits[i]}
		}
		pages, ok, err := lfs.FeedLeavesOf(ctx(t), qs)
		if err != nil || !ok || len(pages) != len(qs) {
			t.Fatalf("%s: FeedLeavesOf: %v, %v, %d pages", c.name, err, ok, len(pages))
		}
		for i, q := range qs {
			want, err := lfs.FeedLeaves(ctx(t), q)
			if err != nil {
				t.Fatal(err)
			}
			got := pages[i]
			if len(got.Items) != len(want.Items) || got.HasMore != want.HasMore || got.Next != want.Next {
				t.Fatalf("%s, organization %d: %d items, more %v, next %v; FeedLeaves: %d, %v, %v", c.name, i,
					len(got.Items), got.HasMore, got.Next, len(want.Items), want.HasMore, want.Next)
			}
			for j := range got.Items {
				if got.Items[j] != want.Items[j] {
					t.Fatalf("%s, organization %d, item %d: %+v; FeedLeaves: %+v", c.name, i, j, got.Items[j], want.Items[j])
				}
			}
		}
	}
	wide := []auditstore.LeafFeedQuery{
		{OrgID: orgs[0], Kind: auditstore.LogAudit, Upto: auditstore.LeafFeedsWindow + 10, Limit: 10},
		{OrgID: orgs[1], Kind: auditstore.LogAudit, Upto: auditstore.LeafFeedsWindow + 10, Limit: 10},
	}
	if pages, ok, err := lfs.FeedLeavesOf(ctx(t), wide); err != nil || ok || pages != nil {
		t.Fatalf("a window of %d sequences: %v, %v, %d pages; want it declined", wide[0].Upto, err, ok, len(pages))
	}
	for name, qs := range map[string][]auditstore.LeafFeedQuery{
		"two kinds":             {{OrgID: orgs[0], Kind: auditstore.LogAudit, Upto: 9, Limit: 1}, {OrgID: orgs[1], Kind: auditstore.LogExecutions, Upto: 9, Limit: 1}},
		"two watermarks":        {{OrgID: orgs[0], Kind: auditstore.LogAudit, Upto: 9, Limit: 1}, {OrgID: orgs[1], Kind: auditstore.LogAudit, Upto: 8, Limit: 1}},
		"an organization twice": {{OrgID: orgs[0], Kind: auditstore.LogAudit, Upto: 9, Limit: 1}, {OrgID: orgs[0], Kind: auditstore.LogAudit, Upto: 9, Limit: 1}},
		"no limit":              {{OrgID: orgs[0], Kind: auditstore.LogAudit, Upto: 9}},
	} {
		if _, _, err := lfs.FeedLeavesOf(ctx(t), qs); !errors.Is(err, auditstore.ErrInvalidQuery) {
			t.Errorf("%s: %v, want ErrInvalidQuery", name, err)
		}
	}

	hr, ok := s.(auditstore.LogHeadsReader)
	ls, isLog := s.(auditstore.LogStore)
	if !ok || !isLog {
		t.Fatalf("%T reads no heads of several logs at once", s)
	}
	for i, n := range []int{3, 0, 300} { // the second log empty
		m := NewLogModel()
		if n == 0 {
			continue
		}
		leaves, hashes := m.Add(t, n)
		appendLog(t, ls, orgs[i], auditstore.LogAudit, leaves, hashes)
		if i == 2 { // a second append: the head is the newest
			more, hs := m.Add(t, 5)
			appendLog(t, ls, orgs[i], auditstore.LogAudit, more, hs)
		}
	}
	heads, err := hr.LogHeadsOf(ctx(t), auditstore.LogAudit, orgs[:3])
	if err != nil {
		t.Fatal(err)
	}
	for i, org := range orgs[:3] {
		size, last, err := ls.LogHead(ctx(t), org, auditstore.LogAudit)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := heads[org]
		if ok != (size > 0) || ok && (got != last || got.Index+1 != size) {
			t.Fatalf("log %d: head %+v (%v); LogHead: size %d, %+v", i, got, ok, size, last)
		}
	}
	if heads, err := hr.LogHeadsOf(ctx(t), auditstore.LogExecutions, orgs[:3]); err != nil || len(heads) != 0 {
		t.Fatalf("the execution logs: %v, %v", heads, err)
	}
}
