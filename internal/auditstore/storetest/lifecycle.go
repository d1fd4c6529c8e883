package storetest

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/auditrail/auditrail/internal/auditstore"
	"github.com/auditrail/auditrail/internal/auditstore/search"
	"github.com/auditrail/auditrail/schemas"
)

// The lifecycle's storage (auditstore.LifecycleStore): counting and
// deleting the entries of an expiry (through a feed key, persisted before
// a cutoff, none of those kept), in both kinds, for one organization only;
// the expiries kept beside the log.

// RunLifecycle runs the lifecycle's conformance cases.
func RunLifecycle(t *testing.T, factory Factory) {
	for _, tc := range []struct {
		name string
		fn   func(t *testing.T, open Opener)
	}{
		{"Expire", testLifecycleExpire},
		{"Large", testLifecycleLarge},
		{"Expiries", testLifecycleExpiries},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, factory(t)) })
	}
}

func lifecycleStore(t *testing.T, s auditstore.Store) auditstore.LifecycleStore {
	t.Helper()
	ls, ok := s.(auditstore.LifecycleStore)
	if !ok {
		t.Fatalf("%T has no lifecycle", s)
	}
	return ls
}

func testLifecycleExpire(t *testing.T, open Opener) {
	s := mustOpen(t, open)
	ls := lifecycleStore(t, s)
	f := feeder(t, s)
	es := s.(auditstore.ExecutionStore)
	org, other := uuid.New(), uuid.New()
	base := auditstore.Millis(time.Now().Add(-time.Hour))

	// 30 entries of org at stream positions 1..30 (and the same positions'
	// neighbours for the other org), 10 executions.
	var mine, theirs []schemas.AuditEvent
	for seq := uint64(1); seq <= 30; seq++ {
		e := Event(org, base.Add(time.Duration(seq)*time.Minute))
		e.Stored = schemas.Persisted{Seq: seq * 2}
		mine = append(mine, e)
		o := Event(other, base.Add(time.Duration(seq)*time.Minute))
		o.Stored = schemas.Persisted{Seq: seq*2 + 1}
		theirs = append(theirs, o)
	}
	write(t, s, mine)
	write(t, s, theirs)
	var execs []schemas.ExecutionEvent
	for i := range 10 {
		e := execEvent(org, uuid.New(), base.Add(time.Duration(i)*time.Minute), true)
		e.Stored = schemas.Persisted{Seq: uint64(100 + i)}
		execs = append(execs, e)
	}
	if err := es.WriteExecutions(ctx(t), execs); err != nil {
		t.Fatal(err)
	}
	feed, _ := FeedAll(t, f, auditstore.FeedQuery{OrgID: org, Upto: 1000, Limit: 7})
	if len(feed) != 30 {
		t.Fatalf("feed of %d entries, want 30", len(feed))
	}
	key := func(i int) auditstore.FeedKey { return auditstore.AuditFeedKey(&feed[i]) }
	future := time.Now().Add(time.Hour).UnixMilli()

	if n, before, err := ls.CountThrough(ctx(t), org, auditstore.LogAudit, key(19), future); err != nil || n != 20 || before != 20 {
		t.Fatalf("CountThrough(20th, future) = %d, %d, %v; want 20, 20", n, before, err)
	}
	if _, before, err := ls.CountThrough(ctx(t), org, auditstore.LogAudit, key(19), 0); err != nil || before != 0 {
		t.Fatalf("CountThrough(20th, 0) = %d, %v; want none persisted before 1970", before, err)
	}

	// A cutoff before every entry deletes nothing; the 20 first but 3 kept.
	if n, err := ls.DeleteExpired(ctx(t), org, auditstore.LogAudit, key(19), 0, nil); err != nil || n != 0 {
		t.Fatalf("DeleteExpired(cutoff 0) = %d, %v", n, err)
	}
	keep := map[uuid.UUID]bool{feed[0].EventID: true, feed[7].EventID: true, feed[19].EventID: true, feed[25].EventID: true}
	n, err := ls.DeleteExpired(ctx(t), org, auditstore.LogAudit, key(19), future, keep)
	if err != nil || n != 17 {
		t.Fatalf("DeleteExpired = %d, %v; want 17", n, err)
	}
	// Again: nothing left to delete.
	if n, err := ls.DeleteExpired(ctx(t), org, auditstore.LogAudit, key(19), future, keep); err != nil || n != 0 {
		t.Fatalf("DeleteExpired again = %d, %v; want 0", n, err)
	}
	var want []uuid.UUID
	for i, e := range feed {
		if i >= 20 || keep[e.EventID] {
			want = append(want, e.EventID)
		}
	}
	left, _ := FeedAll(t, f, auditstore.FeedQuery{OrgID: org, Upto: 1000, Limit: 100})
	if got := entryIDs(left); !slices.Equal(got, want) {
		t.Fatalf("left after the expiry: %v, want %v", got, want)
	}
	if got := all(t, s, auditstore.Query{OrgID: org, Limit: 100}); len(got) != len(want) {
		t.Fatalf("listing shows %d entries, want %d", len(got), len(want))
	}
	if got := all(t, s, auditstore.Query{OrgID: other, Limit: 100}); len(got) != 30 {
		t.Fatalf("the other organization lost entries: %d left", len(got))
	}
	if n, before, err := ls.CountThrough(ctx(t), org, auditstore.LogAudit, key(19), future); err != nil || n != 3 || before != 3 {
		t.Fatalf("CountThrough after = %d, %d, %v; want 3 kept", n, before, err)
	}
	if p, err := es.ListExecutions(ctx(t), auditstore.ExecQuery{OrgID: org, Limit: 100}); err != nil || len(p.Items) != 10 {
		t.Fatalf("executions touched by an audit expiry: %d, %v", len(p.Items), err)
	}

	// Executions: through the 6th, all but one.
	var xf []auditstore.Execution
	p, err := f.FeedExecutions(ctx(t), auditstore.ExecFeedQuery{OrgID: org, Upto: 1000, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	xf = p.Items
	xkey := auditstore.ExecFeedKey(&xf[5])
	xid, _ := uuid.Parse(xf[2].EventID)
	if n, err := ls.DeleteExpired(ctx(t), org, auditstore.LogExecutions, xkey, future, map[uuid.UUID]bool{xid: true}); err != nil || n != 5 {
		t.Fatalf("DeleteExpired(executions) = %d, %v; want 5", n, err)
	}
	if p, err := es.ListExecutions(ctx(t), auditstore.ExecQuery{OrgID: org, Limit: 100}); err != nil || len(p.Items) != 5 {
		t.Fatalf("%d executions left, %v; want 5", len(p.Items), err)
	}
	if _, err := ls.DeleteExpired(ctx(t), uuid.Nil, auditstore.LogAudit, key(0), future, nil); err == nil {
		t.Fatal("DeleteExpired of no organization: no error")
	}
}

// Many entries: a delete that takes steps deletes them all.
func testLifecycleLarge(t *testing.T, open Opener) {
	s := mustOpen(t, open)
	ls := lifecycleStore(t, s)
	org := uuid.New()
	base := auditstore.Millis(time.Now().Add(-time.Hour))
	const n = 5000
	evs := make([]schemas.AuditEvent, n)
	for i := range evs {
		evs[i] = Event(org, base.Add(time.Duration(i)*time.Millisecond))
		evs[i].Stored = schemas.Persisted{Seq: uint64(i + 1)}
	}
	write(t, s, evs)
	last := auditstore.FeedKey{Seq: n - 100, CreatedMS: 1 << 62}
	deleted, err := ls.DeleteExpired(ctx(t), org, auditstore.LogAudit, last, time.Now().Add(time.Hour).UnixMilli(), map[uuid.UUID]bool{evs[10].EventID: true})
	if err != nil || deleted != n-101 {
		t.Fatalf("DeleteExpired = %d, %v; want %d", deleted, err, n-101)
	}
	if got := all(t, s, auditstore.Query{OrgID: org, Limit: auditstore.MaxLimit}); len(got) != 101 {
		t.Fatalf("%d left, want 101", len(got))
	}
}

func testLifecycleExpiries(t *testing.T, open Opener) {
	s := mustOpen(t, open)
	ls := lifecycleStore(t, s)
	lg := logStore(t, s)
	org := uuid.New()
	if _, ok, err := ls.LatestExpiry(ctx(t), org, auditstore.LogAudit); err != nil || ok {
		t.Fatalf("LatestExpiry of no log = %v, %v", ok, err)
	}
	m := NewLogModel()
	leaves, hashes := m.Add(t, 40)
	appendLog(t, lg, org, auditstore.LogAudit, leaves, hashes)
	got, err := ls.ReadLogLeaves(ctx(t), org, auditstore.LogAudit, 5, 9)
	if err != nil || !slices.Equal(got, m.Leaves[5:9]) {
		t.Fatalf("ReadLogLeaves(5, 9) = %v, %v; want %v", got, err, m.Leaves[5:9])
	}
	if got, err := ls.ReadLogLeaves(ctx(t), org, auditstore.LogAudit, 38, 50); err != nil || len(got) != 2 {
		t.Fatalf("ReadLogLeaves past the end = %d leaves, %v", len(got), err)
	}
	if got, err := ls.ReadLogLeaves(ctx(t), org, auditstore.LogExecutions, 0, 5); err != nil || len(got) != 0 {
		t.Fatalf("ReadLogLeaves of an empty log = %v, %v", got, err)
	}
	first := auditstore.Expiry{Record: uuid.New(), RecordLeaf: 30, BelowLeaf: 20, Last: m.Leaves[19].Key, CutoffMS: 12345,
		Retention: 400 * 24 * time.Hour, Kept: 2, Expired: 18, Holds: []uuid.UUID{uuid.New()}, Time: auditstore.Millis(time.Now())}
	second := first
	second.Record, second.RecordLeaf, second.BelowLeaf, second.Last, second.Holds, second.Kept, second.Expired = uuid.New(), 39, 25, m.Leaves[24].Key, nil, 0, 25
	for _, e := range []auditstore.Expiry{second, first} {
		if err := ls.SaveExpiry(ctx(t), org, auditstore.LogAudit, e); err != nil {
			t.Fatal(err)
		}
	}
	check := func(want auditstore.Expiry) {
		t.Helper()
		got, ok, err := ls.LatestExpiry(ctx(t), org, auditstore.LogAudit)
		if err != nil || !ok {
			t.Fatalf("LatestExpiry = %v, %v", ok, err)
		}
		if got.Record != want.Record || got.RecordLeaf != want.RecordLeaf || got.BelowLeaf != want.BelowLeaf || got.Last != want.Last ||
			got.CutoffMS != want.CutoffMS || got.Retention != want.Retention || got.Kept != want.Kept || got.Expired != want.Expired ||
			!slices.Equal(got.Holds, want.Holds) || !got.Time.Equal(want.Time) || got.Done != want.Done {
			t.Fatalf("LatestExpiry = %+v, want %+v", got, want)
		}
	}
	check(second)
	second.Done = true
	if err := ls.SaveExpiry(ctx(t), org, auditstore.LogAudit, second); err != nil {
		t.Fatal(err)
	}
	check(second)
	if _, ok, _ := ls.LatestExpiry(ctx(t), org, auditstore.LogExecutions); ok {
		t.Fatal("an expiry of the audit log shows on the executions log")
	}
	bad := second
	bad.Kept = 30
	if err := ls.SaveExpiry(ctx(t), org, auditstore.LogAudit, bad); err == nil {
		t.Fatal("an expiry keeping more leaves than it covers was saved")
	}
	if err := ls.SaveExpiry(ctx(t), uuid.New(), auditstore.LogAudit, first); err == nil {
		t.Fatal("an expiry of an organization without a log was saved")
	}
}

// RunErasure runs the erasure's conformance cases.
func RunErasure(t *testing.T, factory Factory) {
	t.Run("Rewrite", func(t *testing.T) { testErasureRewrite(t, factory(t)) })
}

func erasureStore(t *testing.T, s auditstore.Store) auditstore.ErasureStore {
	t.Helper()
	es, ok := s.(auditstore.ErasureStore)
	if !ok {
		t.Fatalf("%T erases nothing", s)
	}
	return es
}

// An erasure rewrites the named columns of the named entries, of one
// organization and kind only, keeps each entry's erasure, and the old
// values are no longer found.
func testErasureRewrite(t *testing.T, open Opener) {
	s := mustOpen(t, open)
	es := erasureStore(t, s)
	org, other := uuid.New(), uuid.New()
	base := auditstore.Millis(time.Now().Add(-time.Hour))
	var evs []schemas.AuditEvent
	for i := range 5 {
		e := Event(org, base.Add(time.Duration(i)*time.Second))
		e.DisplayName, e.UserID, e.ClientIP = "Alice Smith", ptr("alice@example.com"), ptr("198.51.100.7")
		e.Data = []byte(`{"after":{"email":"alice@example.com","note":"hi"}}`)
		e.Salt = Salt(i)
		evs = append(evs, e)
	}
	o := Event(other, base)
	o.UserID = ptr("alice@example.com")
	write(t, s, append(evs, o))
	xs := s.(auditstore.ExecutionStore)
	x := execEvent(org, uuid.New(), base, false)
	x.UserID, x.ExecutionError = "alice@example.com", "denied for alice@example.com"
	x.Salt = Salt(9)
	if err := xs.WriteExecutions(ctx(t), []schemas.ExecutionEvent{x}); err != nil {
		t.Fatal(err)
	}
	erasure := uuid.New()
	pseudo := "erased-0123456789abcdef"
	var rws []auditstore.Rewrite
	for i, e := range evs[:3] {
		rws = append(rws, auditstore.Rewrite{EventID: e.EventID, Erasure: erasure, LeafHash: [32]byte{byte(i + 1)},
			Set: map[string]*string{"display_name": &pseudo, "user_id": &pseudo, "client_ip": &pseudo,
				"data": ptr(`{"after":{"email":"` + pseudo + `","note":"hi"}}`), auditstore.SaltColumn: nil}})
	}
	rws[1].Set[auditstore.SaltColumn] = ptr("") // "" clears it too
	rws[0].Fields = json.RawMessage(`{"user_id":{"commitment":"AAAA"}}`)
	if err := es.RewriteEntries(ctx(t), org, auditstore.LogAudit, rws); err != nil {
		t.Fatal(err)
	}
	if err := es.RewriteEntries(ctx(t), org, auditstore.LogAudit, []auditstore.Rewrite{{EventID: evs[0].EventID, Erasure: erasure, Set: map[string]*string{"created_ms": &pseudo}}}); err == nil {
		t.Fatal("a rewrite of created_ms was accepted")
	}
	if err := es.RewriteEntries(ctx(t), org, auditstore.LogAudit, []auditstore.Rewrite{{EventID: evs[4].EventID, Erasure: erasure, Set: map[string]*string{auditstore.SaltColumn: &pseudo}}}); !errors.Is(err, auditstore.ErrInvalidQuery) {
		t.Fatalf("a salt rewritten to a value: %v", err)
	}
	xid, _ := uuid.Parse(x.EventID)
	if err := es.RewriteEntries(ctx(t), org, auditstore.LogExecutions, []auditstore.Rewrite{{EventID: xid, Erasure: erasure, LeafHash: [32]byte{9},
		Set: map[string]*string{"user_id": &pseudo, "execution_error": ptr("denied for " + pseudo), auditstore.SaltColumn: nil}}}); err != nil {
		t.Fatal(err)
	}
	got := all(t, s, auditstore.Query{OrgID: org, Limit: 100})
	erased := 0
	for _, e := range got {
		if e.DisplayName == pseudo {
			erased++
			if *e.UserID != pseudo || *e.ClientIP != pseudo || !strings.Contains(string(e.Data), pseudo) || strings.Contains(string(e.Data), "alice@") {
				t.Fatalf("half rewritten: %+v %s", e.AuditEvent, e.Data)
			}
			if e.Salt != nil {
				t.Fatalf("a rewritten entry kept its salt %x", e.Salt)
			}
		} else if len(e.Salt) != schemas.SaltBytes {
			t.Fatalf("an entry not rewritten lost its salt: %x", e.Salt)
		}
	}
	if erased != 3 {
		t.Fatalf("%d entries rewritten, want 3", erased)
	}
	q, err := search.Parse(search.Audit, "actor:alice@example.com")
	if err != nil {
		t.Fatal(err)
	}
	if got := all(t, s, auditstore.Query{OrgID: org, Filter: auditstore.Filter{Search: q}, Limit: 100}); len(got) != 2 {
		t.Fatalf("the old value finds %d entries, want the 2 not erased", len(got))
	}
	if got := all(t, s, auditstore.Query{OrgID: other, Limit: 100}); len(got) != 1 || *got[0].UserID != "alice@example.com" {
		t.Fatal("another organization's entry was rewritten")
	}
	p, err := xs.ListExecutions(ctx(t), auditstore.ExecQuery{OrgID: org, Limit: 10})
	if err != nil || len(p.Items) != 1 || p.Items[0].UserID != pseudo || p.Items[0].ExecutionError != "denied for "+pseudo || p.Items[0].Salt != nil {
		t.Fatalf("execution after the rewrite: %+v, %v", p.Items, err)
	}
	m, err := es.ErasedEntries(ctx(t), org, auditstore.LogAudit, []uuid.UUID{evs[0].EventID, evs[2].EventID, evs[4].EventID})
	if err != nil || len(m) != 2 || m[evs[2].EventID].LeafHash[0] != 3 || m[evs[0].EventID].Erasure != erasure {
		t.Fatalf("ErasedEntries = %v, %v", m, err)
	}
	if f := m[evs[0].EventID].Fields; string(f) != `{"user_id":{"commitment":"AAAA"}}` || m[evs[2].EventID].Fields != nil {
		t.Fatalf("the erased entries' fields: %s and %s", f, m[evs[2].EventID].Fields)
	}
	if m, err := es.ErasedEntries(ctx(t), org, auditstore.LogExecutions, []uuid.UUID{xid}); err != nil || m[xid].LeafHash[0] != 9 {
		t.Fatalf("ErasedEntries(executions) = %v, %v", m, err)
	}
}
