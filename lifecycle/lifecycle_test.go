package lifecycle

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/auditrail/auditrail/controlplane/cpstate"
	"github.com/auditrail/auditrail/internal/auditstore"
	"github.com/auditrail/auditrail/internal/auditstore/sqlite"
	"github.com/auditrail/auditrail/internal/testenv"
	"github.com/auditrail/auditrail/internal/tlog"
	"github.com/auditrail/auditrail/producers"
	"github.com/auditrail/auditrail/schemas"
)

func TestMain(m *testing.M) { testenv.MainNoLeaks(m) }

// world is a SQLite store whose audit log is appended by the test's own
// sequencer: every event written (the test's and the records the runner
// publishes) becomes the next leaf, and a checkpoint covers it at once.
type world struct {
	t     *testing.T
	store *sqlite.Store
	org   uuid.UUID
	mu    sync.Mutex
	seq   uint64
	logs  map[auditstore.LogKind]*tlog.MemoryLog
	// published are the records published; purges the stream calls.
	published []*schemas.AuditEvent
	purges    []string
	settings  *fakeSettings
}

func newWorld(t *testing.T) *world {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "audit.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return &world{t: t, store: st, org: uuid.New(), logs: map[auditstore.LogKind]*tlog.MemoryLog{
		auditstore.LogAudit: {}, auditstore.LogExecutions: {}}, settings: &fakeSettings{}}
}

// write stores events and appends them to the audit log.
func (w *world) write(evs ...*schemas.AuditEvent) {
	w.t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	ctx := context.Background()
	batch := make([]schemas.AuditEvent, len(evs))
	for i, ev := range evs {
		w.seq++
		ev.Stored = schemas.Persisted{Seq: w.seq}
		batch[i] = *ev
	}
	if err := w.store.WriteAudit(ctx, batch); err != nil {
		w.t.Fatal(err)
	}
	mem := w.logs[auditstore.LogAudit]
	for _, ev := range evs {
		p, err := w.store.FeedAudit(ctx, auditstore.FeedQuery{OrgID: w.org, Upto: 1 << 40, Limit: auditstore.FeedMaxLimit})
		if err != nil {
			w.t.Fatal(err)
		}
		var key auditstore.FeedKey
		for i := range p.Items {
			if p.Items[i].EventID == ev.EventID {
				key = auditstore.AuditFeedKey(&p.Items[i])
			}
		}
		idx := mem.Size()
		leaf := tlog.LeafHash(ev.EventID[:])
		hs, err := mem.Append(leaf)
		if err != nil {
			w.t.Fatal(err)
		}
		stored := make([]auditstore.StoredHash, len(hs))
		for i, h := range hs {
			stored[i] = auditstore.StoredHash{Index: tlog.StoredHashIndex(idx) + int64(i), Hash: h}
		}
		if err := w.store.AppendLog(ctx, w.org, auditstore.LogAudit, []auditstore.LogLeaf{{Index: idx, EventID: ev.EventID, Key: key}}, stored); err != nil {
			w.t.Fatal(err)
		}
		if err := w.store.SaveCheckpoint(ctx, w.org, auditstore.LogAudit, auditstore.Checkpoint{Size: idx + 1, Root: mem.Root(), Time: time.Now(), KeyID: "k", Note: []byte("note")}); err != nil {
			w.t.Fatal(err)
		}
	}
}

// Publish is the runner's publisher: the record lands in the store and the log.
func (w *world) Publish(_ context.Context, ev producers.Event) error {
	a, ok := ev.(*schemas.AuditEvent)
	if !ok {
		return errors.New("not an audit event")
	}
	w.published = append(w.published, a)
	cp := *a
	w.write(&cp)
	return nil
}

func (w *world) PurgeThrough(_ context.Context, subject string, seq uint64) error {
	w.purges = append(w.purges, fmt.Sprintf("%s through %d", subject, seq))
	return nil
}

func (w *world) PurgeBefore(_ context.Context, subject string, _ time.Time) error {
	w.purges = append(w.purges, subject+" before cutoff")
	return nil
}

type fakeSettings struct {
	retention *cpstate.Retention
	holds     []cpstate.LegalHold
}

func (f *fakeSettings) Retention(uuid.UUID) (*cpstate.Retention, error)   { return f.retention, nil }
func (f *fakeSettings) LegalHolds(uuid.UUID) ([]cpstate.LegalHold, error) { return f.holds, nil }

func (w *world) event(name string) *schemas.AuditEvent {
	rt := schemas.ResourceTypeProject
	return &schemas.AuditEvent{EventID: uuid.New(), OrganizationID: w.org, Timestamp: auditstore.Millis(time.Now()),
		Action: schemas.AuditActionCreated, Source: schemas.AuditSourceAPI, DisplayName: name, PrincipalID: "p-" + name,
		PrincipalType: "API_KEY", ResourceType: &rt, ResourceID: schemas.Ptr(name), ResourceDisplay: schemas.Ptr(name)}
}

// listed is the event ids the store lists, oldest first.
func (w *world) listed() []uuid.UUID {
	w.t.Helper()
	p, err := w.store.FeedAudit(context.Background(), auditstore.FeedQuery{OrgID: w.org, Upto: 1 << 40, Limit: auditstore.FeedMaxLimit})
	if err != nil {
		w.t.Fatal(err)
	}
	var out []uuid.UUID
	for _, e := range p.Items {
		out = append(out, e.EventID)
	}
	return out
}

func (w *world) createdMS(id uuid.UUID) int64 {
	p, _ := w.store.FeedAudit(context.Background(), auditstore.FeedQuery{OrgID: w.org, Upto: 1 << 40, Limit: auditstore.FeedMaxLimit})
	for _, e := range p.Items {
		if e.EventID == id {
			return e.CreatedTime.UnixMilli()
		}
	}
	w.t.Fatalf("event %s not stored", id)
	return 0
}

func (w *world) runner(t *testing.T, store Store, now time.Time) *Runner {
	t.Helper()
	cfg := DefaultConfig()
	cfg.RecordWait, cfg.Poll = 5*time.Second, 5*time.Millisecond
	r, err := New(cfg, store, w.settings, w, w, nil)
	if err != nil {
		t.Fatal(err)
	}
	r.now = func() time.Time { return now }
	return r
}

// A cycle deletes the entries persisted before the cutoff, except those a
// legal hold keeps, only after its record is in the signed log; the next
// cycle records nothing more; releasing the hold lets the next one take
// the held entries.
func TestCycleExpires(t *testing.T) {
	w := newWorld(t)
	var old, young []*schemas.AuditEvent
	for i := range 20 {
		e := w.event("old")
		if i == 4 || i == 11 {
			e.DisplayName = "held"
		}
		old = append(old, e)
	}
	w.write(old...)
	time.Sleep(20 * time.Millisecond)
	for range 10 {
		young = append(young, w.event("young"))
	}
	w.write(young...)
	cutoff := w.createdMS(young[0].EventID)
	retention := 400 * 24 * time.Hour
	now := time.UnixMilli(cutoff).Add(retention)
	w.settings.retention = &cpstate.Retention{OrgID: w.org, AuditLogs: ptr(retention), AppliesFrom: now.Add(-time.Hour)}
	hold := cpstate.LegalHold{ID: uuid.New(), OrgID: w.org, Name: "dispute", Q: `actor:held`, Kinds: []string{cpstate.RetentionAuditLogs}}
	w.settings.holds = []cpstate.LegalHold{hold}
	r := w.runner(t, w.store, now)

	rep, err := r.Cycle(context.Background())
	if err != nil || rep.Expired != 18 || rep.Failed != 0 {
		t.Fatalf("Cycle = %+v, %v; want 18 expired", rep, err)
	}
	if len(w.published) != 1 {
		t.Fatalf("%d records published, want 1", len(w.published))
	}
	rec, err := tlog.ParseLifecycleRecord(itemJSON(t, w.published[0]))
	if err != nil {
		t.Fatal(err)
	}
	if rec.BelowLeaf != 20 || rec.Kept != 2 || rec.Expired != 18 || rec.Retention != "400d" || rec.Log != tlog.LogNameAudit || !slices.Equal(rec.Holds, []string{hold.ID.String()}) {
		t.Fatalf("record %+v", rec)
	}
	want := []uuid.UUID{old[4].EventID, old[11].EventID}
	for _, e := range young {
		want = append(want, e.EventID)
	}
	want = append(want, w.published[0].EventID)
	if got := w.listed(); !slices.Equal(got, want) {
		t.Fatalf("left: %v, want %v", got, want)
	}
	exp, ok, err := w.store.LatestExpiry(context.Background(), w.org, auditstore.LogAudit)
	if err != nil || !ok || !exp.Done || exp.BelowLeaf != 20 || exp.RecordLeaf != 30 || exp.Record != w.published[0].EventID {
		t.Fatalf("LatestExpiry = %+v, %v, %v", exp, ok, err)
	}
	if len(w.purges) != 2 || w.purges[0] != schemas.EventSubject(w.org.String(), "audit")+" through 20" {
		t.Fatalf("purges %v", w.purges)
	}

	// Steady state: nothing more to record or delete.
	if rep, err := r.Cycle(context.Background()); err != nil || rep.Expired != 0 || len(w.published) != 1 {
		t.Fatalf("second cycle = %+v, %v, %d records", rep, err, len(w.published))
	}

	// The hold released: its entries go at the next cycle, with a record.
	w.settings.holds[0].ReleasedAt = ptr(now)
	if rep, err := r.Cycle(context.Background()); err != nil || rep.Expired != 2 || len(w.published) != 2 {
		t.Fatalf("cycle after the release = %+v, %v, %d records", rep, err, len(w.published))
	}
	if got := w.listed(); len(got) != 12 {
		t.Fatalf("%d entries left, want the 10 young and 2 records", len(got))
	}
}

// No retention (the default: forever), or a change still in its grace
// period that would shorten it, deletes nothing.
func TestCycleKeeps(t *testing.T) {
	w := newWorld(t)
	w.write(w.event("a"), w.event("b"))
	now := time.Now().Add(365 * 24 * time.Hour)
	r := w.runner(t, w.store, now)
	if rep, err := r.Cycle(context.Background()); err != nil || rep.Expired != 0 || len(w.published) != 0 {
		t.Fatalf("forever: %+v, %v", rep, err)
	}
	w.settings.retention = &cpstate.Retention{OrgID: w.org, AuditLogs: ptr(24 * time.Hour), AppliesFrom: now.Add(time.Hour), UpdatedAt: now}
	if rep, err := r.Cycle(context.Background()); err != nil || rep.Expired != 0 || len(w.published) != 0 {
		t.Fatalf("in its grace period: %+v, %v", rep, err)
	}
	if got := w.listed(); len(got) != 2 {
		t.Fatalf("%d left", len(got))
	}
}

// failingStore fails DeleteExpired after deleting a part (a crash mid-way).
type failingStore struct {
	*sqlite.Store
	fail bool
}

func (f *failingStore) DeleteExpired(ctx context.Context, org uuid.UUID, kind auditstore.LogKind, last auditstore.FeedKey, cutoff int64, keep map[uuid.UUID]bool) (int64, error) {
	if f.fail {
		// Delete the first half of what is due, then "crash".
		p, err := f.Store.FeedAudit(ctx, auditstore.FeedQuery{OrgID: org, Upto: 1 << 40, Limit: 5})
		if err != nil {
			return 0, err
		}
		half := p.Items[len(p.Items)-1]
		n, err := f.Store.DeleteExpired(ctx, org, kind, auditstore.AuditFeedKey(&half), cutoff, keep)
		if err != nil {
			return n, err
		}
		return n, errors.New("crashed")
	}
	return f.Store.DeleteExpired(ctx, org, kind, last, cutoff, keep)
}

// A cycle that stopped mid-deletion resumes its saved plan at the next:
// exactly the expired entries go, with one record.
func TestCycleResumes(t *testing.T) {
	w := newWorld(t)
	var old []*schemas.AuditEvent
	for range 12 {
		old = append(old, w.event("old"))
	}
	w.write(old...)
	time.Sleep(20 * time.Millisecond)
	young := w.event("young")
	w.write(young)
	retention := 30 * 24 * time.Hour
	now := time.UnixMilli(w.createdMS(young.EventID)).Add(retention)
	w.settings.retention = &cpstate.Retention{OrgID: w.org, AuditLogs: ptr(retention)}
	fs := &failingStore{Store: w.store, fail: true}
	r := w.runner(t, fs, now)
	if rep, _ := r.Cycle(context.Background()); rep.Failed != 1 || rep.Expired != 5 {
		t.Fatalf("crashed cycle = %+v", rep)
	}
	if exp, ok, _ := w.store.LatestExpiry(context.Background(), w.org, auditstore.LogAudit); !ok || exp.Done {
		t.Fatalf("the interrupted expiry is saved as done: %+v %v", exp, ok)
	}
	fs.fail = false
	if rep, err := r.Cycle(context.Background()); err != nil || rep.Failed != 0 || rep.Expired != 7 {
		t.Fatalf("resumed cycle = %+v, %v", rep, err)
	}
	if got := w.listed(); !slices.Equal(got, []uuid.UUID{young.EventID, w.published[0].EventID}) || len(w.published) != 1 {
		t.Fatalf("left %v (records %d)", got, len(w.published))
	}
}

func itemJSON(t *testing.T, ev *schemas.AuditEvent) []byte {
	t.Helper()
	return []byte(`{"data":` + string(ev.Data) + `}`)
}

// The horizon is the first leaf persisted at or after the cutoff.
func TestHorizon(t *testing.T) {
	w := newWorld(t)
	var evs []*schemas.AuditEvent
	for range 9 {
		e := w.event("x")
		w.write(e)
		evs = append(evs, e)
		time.Sleep(3 * time.Millisecond)
	}
	r := w.runner(t, w.store, time.Now())
	for i, e := range evs {
		n, err := r.horizon(context.Background(), w.org, auditstore.LogAudit, 9, w.createdMS(e.EventID))
		if err != nil || n != int64(i) {
			t.Fatalf("horizon at entry %d = %d, %v", i, n, err)
		}
	}
	if n, _ := r.horizon(context.Background(), w.org, auditstore.LogAudit, 9, time.Now().Add(time.Hour).UnixMilli()); n != 9 {
		t.Fatalf("horizon after every entry = %d", n)
	}
}

// An entry that a record kept, deleted by hand, stops the log's expiries:
// a new record counting only what is left would hide the deletion.
func TestCycleRefusesToLaunderADeletion(t *testing.T) {
	w := newWorld(t)
	var old []*schemas.AuditEvent
	for range 6 {
		old = append(old, w.event("old"))
	}
	old[1].DisplayName = "held"
	w.write(old...)
	time.Sleep(20 * time.Millisecond)
	young := w.event("young")
	w.write(young)
	retention := 24 * time.Hour
	now := time.UnixMilli(w.createdMS(young.EventID)).Add(retention)
	w.settings.retention = &cpstate.Retention{OrgID: w.org, AuditLogs: ptr(retention)}
	w.settings.holds = []cpstate.LegalHold{{ID: uuid.New(), OrgID: w.org, Name: "h", Q: "actor:held", Kinds: []string{cpstate.RetentionAuditLogs}}}
	r := w.runner(t, w.store, now)
	if rep, err := r.Cycle(context.Background()); err != nil || rep.Expired != 5 {
		t.Fatalf("first cycle = %+v, %v", rep, err)
	}
	if _, err := w.store.DeleteExpired(context.Background(), w.org, auditstore.LogAudit, auditstore.FeedKey{Seq: 1 << 40}, 1<<62, nil); err != nil {
		t.Fatal(err)
	}
	r.now = func() time.Time { return now.Add(time.Hour) }
	w.settings.holds = nil
	rep, err := r.Cycle(context.Background())
	if err != nil || rep.Failed != 1 || rep.Expired != 0 || len(w.published) != 1 {
		t.Fatalf("cycle after a hand deletion = %+v, %v, %d records", rep, err, len(w.published))
	}
}

type fakeErasures struct {
	list    []cpstate.Erasure
	updates []cpstate.Erasure
}

func (f *fakeErasures) Pending() ([]cpstate.Erasure, error) {
	var out []cpstate.Erasure
	for _, e := range f.list {
		if e.Pending() {
			out = append(out, e)
		}
	}
	return out, nil
}

func (f *fakeErasures) Update(_ context.Context, e cpstate.Erasure) error {
	f.updates = append(f.updates, e)
	for i := range f.list {
		if f.list[i].ID == e.ID {
			f.list[i] = e
		}
	}
	return nil
}

func (w *world) EraseMessages(_ context.Context, stream, subject string, _ func(string, []byte) bool) (int, error) {
	w.purges = append(w.purges, "erase "+stream+" "+subject)
	return 0, nil
}

// An erasure replaces the subject's values (as actor, as resource, inside
// data, by its names too) after a signed record names the entries' leaves,
// keeps each entry's original leaf, and wipes the subject when done;
// entries of others stay as they were.
func TestErasure(t *testing.T) {
	w := newWorld(t)
	alice := func(name string) *schemas.AuditEvent {
		e := w.event(name)
		e.UserID, e.PrincipalID, e.DisplayName, e.ClientIP = ptr("alice@example.com"), "key-1", "Alice Smith", ptr("198.51.100.7")
		return e
	}
	a1, a2 := alice("a1"), alice("a2")
	res := w.event("bob")
	rt := schemas.ResourceTypeUser
	res.ResourceType, res.ResourceID, res.ResourceDisplay = &rt, ptr("alice@example.com"), ptr("Alice Smith")
	res.Data = []byte(`{"after":{"user_id":"alice@example.com","display_name":"Alice Smith","role":"owner"}}`)
	other := w.event("carol")
	other.Data = []byte(`{"note":"nothing of hers"}`)
	w.write(a1, a2, res, other)
	erasure := cpstate.Erasure{ID: uuid.New(), OrgID: w.org, SubjectKind: cpstate.ErasureUserID, Subject: "alice@example.com",
		Pseudonym: "erased-00112233aabbccdd", Status: cpstate.ErasurePending}
	fe := &fakeErasures{list: []cpstate.Erasure{erasure}}
	r := w.runner(t, w.store, time.Now())
	r.UseErasures(fe, w)
	if rep, err := r.Cycle(context.Background()); err != nil || rep.Failed != 0 {
		t.Fatalf("Cycle = %+v, %v", rep, err)
	}
	if len(fe.updates) != 1 {
		t.Fatalf("%d updates", len(fe.updates))
	}
	got := fe.updates[0]
	if got.Status != cpstate.ErasureDone || got.Subject != "" || got.AuditEntries != 3 || got.DoneAt == nil {
		t.Fatalf("erasure after the cycle: %+v", got)
	}
	p, err := w.store.FeedAudit(context.Background(), auditstore.FeedQuery{OrgID: w.org, Upto: 1 << 40, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(p.Items)
	for _, needle := range []string{"alice@example.com", "Alice Smith", "198.51.100.7"} {
		if strings.Contains(string(raw), needle) {
			t.Fatalf("%q is still stored: %s", needle, raw)
		}
	}
	byID := map[uuid.UUID]schemas.AuditEntry{}
	for _, e := range p.Items {
		byID[e.EventID] = e
	}
	if e := byID[other.EventID]; e.DisplayName != "carol" || string(e.Data) != `{"note":"nothing of hers"}` {
		t.Fatalf("another entry changed: %+v", e)
	}
	if e := byID[res.EventID]; e.DisplayName != "bob" || *e.ResourceID != erasure.Pseudonym || !strings.Contains(string(e.Data), erasure.Pseudonym) {
		t.Fatalf("the resource entry: %+v %s", e.AuditEvent, e.Data)
	}
	erased, err := w.store.ErasedEntries(context.Background(), w.org, auditstore.LogAudit, []uuid.UUID{a1.EventID, res.EventID, other.EventID})
	if err != nil || len(erased) != 2 || erased[a1.EventID].LeafHash != tlog.LeafHash(a1.EventID[:]) {
		t.Fatalf("ErasedEntries = %v, %v", erased, err)
	}
	// One record, naming leaves 0..2, before the rewrites.
	if len(w.published) != 1 {
		t.Fatalf("%d records", len(w.published))
	}
	rec, err := tlog.ParseLifecycleRecord(itemJSON(t, w.published[0]))
	if err != nil || rec.Type != tlog.RecordErasure || rec.Erasure != erasure.ID.String() || len(rec.Leaves) != 1 || rec.Leaves[0] != [2]int64{0, 2} {
		t.Fatalf("record %+v, %v", rec, err)
	}
	if strings.Contains(string(w.published[0].Data), "alice") {
		t.Fatal("the record names the subject")
	}
	if !slices.Contains(w.purges, "erase AUDITRAIL_EVENTS "+schemas.EventSubject(w.org.String(), "audit")) {
		t.Fatalf("the stream's messages were not erased: %v", w.purges)
	}
	// Done: nothing more at the next cycle.
	if _, err := r.Cycle(context.Background()); err != nil || len(fe.updates) != 1 {
		t.Fatalf("second cycle: %v, %d updates", err, len(fe.updates))
	}
}

// A legal hold holding an entry of the subject refuses the erasure.
func TestErasureRefusedByAHold(t *testing.T) {
	w := newWorld(t)
	e := w.event("x")
	e.UserID = ptr("dave")
	w.write(e)
	w.settings.holds = []cpstate.LegalHold{{ID: uuid.New(), OrgID: w.org, Name: "dispute", Q: "actor:dave", Kinds: []string{cpstate.RetentionAuditLogs}}}
	fe := &fakeErasures{list: []cpstate.Erasure{{ID: uuid.New(), OrgID: w.org, SubjectKind: cpstate.ErasureUserID, Subject: "dave", Pseudonym: "erased-x", Status: cpstate.ErasurePending}}}
	r := w.runner(t, w.store, time.Now())
	r.UseErasures(fe, w)
	if _, err := r.Cycle(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(fe.updates) != 1 || fe.updates[0].Status != cpstate.ErasureRefused || fe.updates[0].Subject != "" || !strings.Contains(fe.updates[0].StatusMsg, `"dispute"`) {
		t.Fatalf("updates %+v", fe.updates)
	}
	if len(w.published) != 0 || w.listed()[0] != e.EventID {
		t.Fatal("a refused erasure changed something")
	}
}

type fakeOutbox [][]byte

func (f fakeOutbox) PendingPayloads() [][]byte { return f }

// An event naming the subject that still waits in the control plane's
// outbox keeps the erasure pending.
func TestErasureWaitsForTheOutbox(t *testing.T) {
	w := newWorld(t)
	e := w.event("x")
	e.UserID = ptr("erin@example.com")
	w.write(e)
	fe := &fakeErasures{list: []cpstate.Erasure{{ID: uuid.New(), OrgID: w.org, SubjectKind: cpstate.ErasureUserID, Subject: "erin@example.com", Pseudonym: "erased-y", Status: cpstate.ErasurePending}}}
	r := w.runner(t, w.store, time.Now())
	r.UseErasures(fe, w)
	r.UseOutbox(fakeOutbox{[]byte(`{"user_id":"erin@example.com"}`)})
	if _, err := r.Cycle(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(fe.updates) != 1 || fe.updates[0].Status != cpstate.ErasurePending || fe.updates[0].AuditEntries != 1 || !strings.Contains(fe.updates[0].StatusMsg, "outbox") {
		t.Fatalf("updates %+v", fe.updates)
	}
	r.UseOutbox(fakeOutbox{})
	if _, err := r.Cycle(context.Background()); err != nil {
		t.Fatal(err)
	}
	if last := fe.updates[len(fe.updates)-1]; last.Status != cpstate.ErasureDone || last.Subject != "" {
		t.Fatalf("after the outbox emptied: %+v", last)
	}
}

type fakeLease struct {
	mu    sync.Mutex
	grant []bool // answers of Keep, in turn; the last repeats
}

func (f *fakeLease) Keep(context.Context) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	ok := f.grant[0]
	if len(f.grant) > 1 {
		f.grant = f.grant[1:]
	}
	return ok
}

// Without the lease no cycle runs; a lease lost during a cycle ends the
// cycle's context.
func TestLease(t *testing.T) {
	w := newWorld(t)
	r := w.runner(t, w.store, time.Now())
	r.UseLease(&fakeLease{grant: []bool{false}}, 10*time.Millisecond)
	if _, _, ok := r.leased(context.Background()); ok {
		t.Fatal("a cycle without the lease")
	}
	r.UseLease(&fakeLease{grant: []bool{true, true, false}}, 10*time.Millisecond)
	ctx, stop, ok := r.leased(context.Background())
	if !ok {
		t.Fatal("no cycle with the lease")
	}
	defer stop()
	select {
	case <-ctx.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the cycle went on after its lease was lost")
	}
}

// steppingStore records the keys of the deletions.
type steppingStore struct {
	*sqlite.Store
	lasts []uint64
}

func (s *steppingStore) DeleteExpired(ctx context.Context, org uuid.UUID, kind auditstore.LogKind, last auditstore.FeedKey, cutoff int64, keep map[uuid.UUID]bool) (int64, error) {
	s.lasts = append(s.lasts, last.Seq)
	return s.Store.DeleteExpired(ctx, org, kind, last, cutoff, keep)
}

// A large expiry deletes in steps of DeleteStep leaves, oldest first,
// with the same result; the next expiry starts its steps at the previous
// horizon.
func TestCycleDeletesInSteps(t *testing.T) {
	w := newWorld(t)
	var old []*schemas.AuditEvent
	for range 14 {
		old = append(old, w.event("old"))
	}
	w.write(old...)
	time.Sleep(20 * time.Millisecond)
	young := w.event("young")
	w.write(young)
	retention := 30 * 24 * time.Hour
	now := time.UnixMilli(w.createdMS(young.EventID)).Add(retention)
	w.settings.retention = &cpstate.Retention{OrgID: w.org, AuditLogs: ptr(retention)}
	st := &steppingStore{Store: w.store}
	cfg := DefaultConfig()
	cfg.RecordWait, cfg.Poll, cfg.DeleteStep = 5*time.Second, 5*time.Millisecond, 5
	r, err := New(cfg, st, w.settings, w, w, nil)
	if err != nil {
		t.Fatal(err)
	}
	r.now = func() time.Time { return now }
	if rep, err := r.Cycle(context.Background()); err != nil || rep.Expired != 14 {
		t.Fatalf("Cycle = %+v, %v", rep, err)
	}
	// Leaves 0..13: through the leaves 4, 9 and 13 (seqs 5, 10, 14).
	if !slices.Equal(st.lasts, []uint64{5, 10, 14}) {
		t.Fatalf("deletions through seqs %v, want [5 10 14]", st.lasts)
	}
	if got := w.listed(); !slices.Equal(got, []uuid.UUID{young.EventID, w.published[0].EventID}) {
		t.Fatalf("left %v", got)
	}
	// Later: the young entry and the record expire, in one step from
	// the previous horizon (leaf 14).
	st.lasts = nil
	r.now = func() time.Time { return now.Add(retention) }
	if rep, err := r.Cycle(context.Background()); err != nil || rep.Expired != 1 {
		t.Fatalf("second Cycle = %+v, %v", rep, err)
	}
	if len(st.lasts) != 1 {
		t.Fatalf("the second expiry deleted in %d steps (from the previous horizon: 1)", len(st.lasts))
	}
}
