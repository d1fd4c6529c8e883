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
