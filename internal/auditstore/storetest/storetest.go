// Package storetest is the conformance suite that every auditstore backend
// passes: the same behaviour from SQLite and ClickHouse.
package storetest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/auditrail/auditrail/internal/auditstore"
	"github.com/auditrail/auditrail/schemas"
)

// Opener opens the store of one test location; calling it again reopens the
// same data (a restart).
type Opener func(t *testing.T) auditstore.Store

// Factory returns an opener for a fresh, empty location, or for one that
// every case shares: each case writes and checks organizations of its own
// (random ids), never a whole store's contents, so a shared location only
// saves its migrations (on a ClickHouse cluster, ON CLUSTER DDL of seconds
// per case).
type Factory func(t *testing.T) Opener

// Run runs the conformance suite.
func Run(t *testing.T, factory Factory) {
	tests := []struct {
		name string
		fn   func(t *testing.T, open Opener)
	}{
		{"EmptyOrganization", testEmpty},
		{"RoundTripEveryField", testRoundTrip},
		{"NewestFirstTiesByEventID", testOrdering},
		{"KeysetPagination", testPagination},
		{"Filters", testFilters},
		{"TenantIsolation", testIsolation},
		{"DuplicatesStoredOnce", testDuplicates},
		{"WalkWhileWriting", testWalkWhileWriting},
		{"ReopenKeepsData", testReopen},
		{"InvalidQuery", testInvalidQuery},
		{"SparseMatchesAcrossMonths", testSparse},
		{"LateArrivals", testLateArrivals},
		{"Executions", testExecutions},
		{"ExecutionsSparseAcrossMonths", testExecutionsSparse},
		{"EventLookup", testLookup},
		{"ResentWithAnotherTimeStoredOnce", testResentWithAnotherTime},
		{"BatchAcrossManyMonths", testManyMonths},
		{"Search", testSearch},
		{"ExecutionsSearch", testExecutionsSearch},
		{"Stats", testStats},
		{"Feed", testFeed},
		{"FeedFilters", testFeedFilters},
		{"ExecutionsFeed", testExecutionsFeed},
		{"LogProofs", testLogProofs},
		{"LogIdempotentAppend", testLogIdempotent},
		{"LogConflicts", testLogConflicts},
		{"LogAppendMany", testLogAppendMany},
		{"LogCheckpointsMany", testLogCheckpointsMany},
		{"LogHashesMissing", testLogHashesMissing},
		{"LogLeafTile", testLogLeafTile},
		{"LogCheckpoints", testLogCheckpoints},
		{"CheckpointCosigned", testCheckpointCosigned},
		{"LogIsolation", testLogIsolation},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.fn(t, factory(t))
		})
	}
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return c
}

func mustOpen(t *testing.T, open Opener) auditstore.Store {
	t.Helper()
	s := open(t)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// Event returns a minimal valid event of org at ts.
func Event(org uuid.UUID, ts time.Time) schemas.AuditEvent {
	return schemas.AuditEvent{
		EventID: uuid.New(), OrganizationID: org, Timestamp: auditstore.Millis(ts),
		Action: schemas.AuditActionCreated, Source: schemas.AuditSourceAPI,
		DisplayName: "tester", PrincipalID: "p1", PrincipalType: "ACCOUNT",
	}
}

// Salt returns a salt of schemas.SaltBytes bytes that differs by i and
// holds bytes that text columns and quoting mangle (NUL, 0xff, quotes, a
// backslash, invalid UTF-8).
func Salt(i int) []byte {
	s := []byte{0x00, 0xff, '\'', '"', '\\', 0xc3, 0x28, '\n', 0x80, 0, 0xfe, ';', '-', '-', byte(i >> 8), byte(i)}
	return s[:schemas.SaltBytes]
}

func write(t *testing.T, s auditstore.Store, evs []schemas.AuditEvent) {
	t.Helper()
	if err := s.WriteAudit(ctx(t), evs); err != nil {
		t.Fatalf("WriteAudit: %v", err)
	}
}

// all walks every page of q.
func all(t *testing.T, s auditstore.Store, q auditstore.Query) []schemas.AuditEntry {
	t.Helper()
	var out []schemas.AuditEntry
	for i := 0; ; i++ {
		if i > 10000 {
			t.Fatal("pagination does not end")
		}
		p, err := s.ListAudit(ctx(t), q)
		if err != nil {
			t.Fatalf("ListAudit: %v", err)
		}
		if len(p.Items) > q.Limit {
			t.Fatalf("page of %d items with limit %d", len(p.Items), q.Limit)
		}
		out = append(out, p.Items...)
		if !p.HasMore {
			return out
		}
		if len(p.Items) == 0 {
			t.Fatal("has_more with an empty page")
		}
		q.After = p.Next()
	}
}

// sorted returns evs in listing order.
func sorted(evs []schemas.AuditEvent) []uuid.UUID {
	c := slices.Clone(evs)
	slices.SortFunc(c, func(a, b schemas.AuditEvent) int {
		if d := b.Timestamp.Compare(a.Timestamp); d != 0 {
			return d
		}
		return bytes.Compare(b.EventID[:], a.EventID[:])
	})
	ids := make([]uuid.UUID, len(c))
	for i, e := range c {
		ids[i] = e.EventID
	}
	return ids
}

func ids(es []schemas.AuditEntry) []uuid.UUID {
	out := make([]uuid.UUID, len(es))
	for i, e := range es {
		out[i] = e.EventID
	}
	return out
}

func testEmpty(t *testing.T, open Opener) {
	s := mustOpen(t, open)
	p, err := s.ListAudit(ctx(t), auditstore.Query{OrgID: uuid.New(), Limit: 50})
	if err != nil || len(p.Items) != 0 || p.HasMore || p.Next() != nil {
		t.Fatalf("empty org: %+v %v", p, err)
	}
}

func testRoundTrip(t *testing.T, open Opener) {
	s := mustOpen(t, open)
	org := uuid.New()
	rt := schemas.ResourceTypeUserConnection
	full := schemas.AuditEvent{
		EventID: uuid.New(), Timestamp: time.Date(2026, 11, 21, 10, 4, 5, 123_000_000, time.UTC),
		ClientIP: schemas.Ptr("2001:db8::1"), Action: schemas.AuditActionDisabled, Source: schemas.AuditSourceDashboard,
		DisplayName: "Grace — ünïcode", CustomerID: schemas.Ptr(uuid.New()), OrganizationID: org,
		ProjectID: schemas.Ptr(uuid.New()), PrincipalID: "key_1", UserID: schemas.Ptr("u'1\"; DROP TABLE x"),
		PrincipalType: "API_KEY", ResourceType: &rt, ResourceID: schemas.Ptr("conn_9"),
		ResourceDisplay: schemas.Ptr("google"), Data: json.RawMessage(`{"after":{"scopes":["a","b"]},"before":null}`),
		Salt: Salt(1),
	}
	minimal := Event(org, full.Timestamp.Add(-time.Second)) // no salt
	before := time.Now().Add(-time.Second)
	write(t, s, []schemas.AuditEvent{full, minimal})
	after := time.Now().Add(time.Second)
	got := all(t, s, auditstore.Query{OrgID: org, Limit: 10})
	if len(got) != 2 {
		t.Fatalf("got %d entries, want 2", len(got))
	}
	for i, want := range []schemas.AuditEvent{full, minimal} {
		g := got[i]
		if g.ID != schemas.EntryID(want.EventID) {
			t.Errorf("id = %s, want EntryID(event_id)", g.ID)
		}
		if g.CreatedTime.Before(before) || g.CreatedTime.After(after) {
			t.Errorf("created_time %s not set at write time", g.CreatedTime)
		}
		wantJSON, _ := json.Marshal(want)
		gotJSON, _ := json.Marshal(g.AuditEvent)
		if !bytes.Equal(normalize(t, wantJSON), normalize(t, gotJSON)) {
			t.Errorf("entry %d:\n got %s\nwant %s", i, gotJSON, wantJSON)
		}
		if !bytes.Equal(g.Salt, want.Salt) || (want.Salt == nil) != (g.Salt == nil) {
			t.Errorf("entry %d: salt %x, want %x", i, g.Salt, want.Salt)
		}
	}
}

func normalize(t *testing.T, b []byte) []byte {
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	out, _ := json.Marshal(v)
	return out
}

func testOrdering(t *testing.T, open Opener) {
	s := mustOpen(t, open)
	org := uuid.New()
	base := time.Now().Add(-time.Hour)
	var evs []schemas.AuditEvent
	for i := 0; i < 40; i++ {
		// Several events share each millisecond.
		evs = append(evs, Event(org, base.Add(time.Duration(i/8)*time.Millisecond)))
	}
	rand.Shuffle(len(evs), func(i, j int) { evs[i], evs[j] = evs[j], evs[i] })
	write(t, s, evs[:20])
	write(t, s, evs[20:])
	for _, limit := range []int{1, 3, 8, 100} {
		got := ids(all(t, s, auditstore.Query{OrgID: org, Limit: limit}))
		if !slices.Equal(got, sorted(evs)) {
			t.Fatalf("limit %d: order differs from (timestamp desc, event_id desc)", limit)
		}
	}
}

func testPagination(t *testing.T, open Opener) {
	s := mustOpen(t, open)
	org := uuid.New()
	base := time.Now().Add(-48 * time.Hour)
	var evs []schemas.AuditEvent
	for i := 0; i < 250; i++ {
		evs = append(evs, Event(org, base.Add(time.Duration(rand.IntN(3_000_000))*time.Millisecond*50)))
	}
	write(t, s, evs)
	p, err := s.ListAudit(ctx(t), auditstore.Query{OrgID: org, Limit: 250})
	if err != nil || len(p.Items) != 250 || p.HasMore {
		t.Fatalf("exact page: %d items, has_more %v, %v", len(p.Items), p.HasMore, err)
	}
	p, err = s.ListAudit(ctx(t), auditstore.Query{OrgID: org, Limit: 249})
	if err != nil || len(p.Items) != 249 || !p.HasMore {
		t.Fatalf("short page: %d items, has_more %v, %v", len(p.Items), p.HasMore, err)
	}
	got := ids(all(t, s, auditstore.Query{OrgID: org, Limit: 7}))
	if !slices.Equal(got, sorted(evs)) {
		t.Fatalf("walk with limit 7: %d items, differs from listing order", len(got))
	}
}

func testFilters(t *testing.T, open Opener) {
	s := mustOpen(t, open)
	org, p1, p2 := uuid.New(), uuid.New(), uuid.New()
	now := time.Now()
	actions := []schemas.AuditAction{schemas.AuditActionCreated, schemas.AuditActionUpdated, schemas.AuditActionDeleted, schemas.AuditActionDisabled}
	sources := []schemas.AuditSource{schemas.AuditSourceAPI, schemas.AuditSourceCLI, schemas.AuditSourceSystem}
	types := []schemas.ResourceType{schemas.ResourceTypeProject, schemas.ResourceTypeAPIKey, schemas.ResourceTypeHook}
	var evs []schemas.AuditEvent
	for i := 0; i < 120; i++ {
		e := Event(org, now.Add(-time.Duration(i)*time.Second))
		e.Action = actions[i%len(actions)]
		e.Source = sources[i%len(sources)]
		if i%5 != 0 {
			rt := types[i%len(types)]
			e.ResourceType = &rt
		}
		switch i % 3 {
		case 0:
			e.ProjectID = &p1
		case 1:
			e.ProjectID = &p2
		}
		evs = append(evs, e)
	}
	write(t, s, evs)
	hook := schemas.ResourceTypeHook
	upd := schemas.AuditActionUpdated
	cli := schemas.AuditSourceCLI
	cases := []struct {
		name string
		q    auditstore.Query
		keep func(e schemas.AuditEvent) bool
	}{
		{"none", auditstore.Query{}, func(schemas.AuditEvent) bool { return true }},
		{"action", auditstore.Query{Filter: auditstore.Filter{Action: &upd}}, func(e schemas.AuditEvent) bool { return e.Action == upd }},
		{"source", auditstore.Query{Filter: auditstore.Filter{Source: &cli}}, func(e schemas.AuditEvent) bool { return e.Source == cli }},
		{"resource_type", auditstore.Query{Filter: auditstore.Filter{ResourceType: &hook}}, func(e schemas.AuditEvent) bool {
			return e.ResourceType != nil && *e.ResourceType == hook
		}},
		{"project", auditstore.Query{ProjectID: &p1}, func(e schemas.AuditEvent) bool { return e.ProjectID != nil && *e.ProjectID == p1 }},
		{"all", auditstore.Query{ProjectID: &p2, Filter: auditstore.Filter{Action: &upd, Source: &cli, ResourceType: &hook}}, func(e schemas.AuditEvent) bool {
			return e.ProjectID != nil && *e.ProjectID == p2 && e.Action == upd && e.Source == cli && e.ResourceType != nil && *e.ResourceType == hook
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var want []schemas.AuditEvent
			for _, e := range evs {
				if c.keep(e) {
					want = append(want, e)
				}
			}
			q := c.q
			q.OrgID, q.Limit = org, 4
			got := ids(all(t, s, q))
			if !slices.Equal(got, sorted(want)) {
				t.Fatalf("got %d entries, want %d", len(got), len(want))
			}
		})
	}
}

func testIsolation(t *testing.T, open Opener) {
	s := mustOpen(t, open)
	a, b := uuid.New(), uuid.New()
	ea, eb := Event(a, time.Now()), Event(b, time.Now())
	// The same event_id in two organizations is two entries.
	eb.EventID = ea.EventID
	write(t, s, []schemas.AuditEvent{ea, eb, Event(b, time.Now())})
	if n := len(all(t, s, auditstore.Query{OrgID: a, Limit: 10})); n != 1 {
		t.Fatalf("org a sees %d entries, want 1", n)
	}
	if n := len(all(t, s, auditstore.Query{OrgID: b, Limit: 10})); n != 2 {
		t.Fatalf("org b sees %d entries, want 2", n)
	}
	if n := len(all(t, s, auditstore.Query{OrgID: uuid.New(), Limit: 10})); n != 0 {
		t.Fatalf("unknown org sees %d entries", n)
	}
}

func testDuplicates(t *testing.T, open Opener) {
	s := mustOpen(t, open)
	org := uuid.New()
	var evs []schemas.AuditEvent
	for i := 0; i < 30; i++ {
		evs = append(evs, Event(org, time.Now().Add(-time.Duration(i)*time.Minute)))
	}
	// Duplicates inside one batch.
	write(t, s, append(slices.Clone(evs[:20]), evs[:5]...))
	first := all(t, s, auditstore.Query{OrgID: org, Limit: 100})
	time.Sleep(20 * time.Millisecond)
	// Redelivery of old events alongside new ones, twice.
	write(t, s, evs[10:])
	write(t, s, evs)
	got := all(t, s, auditstore.Query{OrgID: org, Limit: 7})
	if !slices.Equal(ids(got), sorted(evs)) {
		t.Fatalf("got %d entries after redelivery, want %d once each", len(got), len(evs))
	}
	firstByID := map[uuid.UUID]schemas.AuditEntry{}
	for _, e := range first {
		firstByID[e.EventID] = e
	}
	for _, e := range got {
		if f, ok := firstByID[e.EventID]; ok {
			if f.ID != e.ID || !f.CreatedTime.Equal(e.CreatedTime) {
				t.Fatalf("event %s: id/created_time changed on redelivery: %s %s -> %s %s", e.EventID, f.ID, f.CreatedTime, e.ID, e.CreatedTime)
			}
		}
	}
}

func testWalkWhileWriting(t *testing.T, open Opener) {
	s := mustOpen(t, open)
	org := uuid.New()
	base := time.Now().Add(-time.Hour)
	var evs []schemas.AuditEvent
	for i := 0; i < 60; i++ {
		evs = append(evs, Event(org, base.Add(time.Duration(i)*time.Second)))
	}
	write(t, s, evs)
	q := auditstore.Query{OrgID: org, Limit: 10}
	var got []uuid.UUID
	for {
		p, err := s.ListAudit(ctx(t), q)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, ids(p.Items)...)
		// Newer events arrive during the walk; they belong before the cursor.
		write(t, s, []schemas.AuditEvent{Event(org, time.Now())})
		if !p.HasMore {
			break
		}
		q.After = p.Next()
	}
	if !slices.Equal(got, sorted(evs)) {
		t.Fatalf("walk saw %d entries, want exactly the %d that existed at its start", len(got), len(evs))
	}
}

func testReopen(t *testing.T, open Opener) {
	s := open(t)
	org := uuid.New()
	evs := []schemas.AuditEvent{Event(org, time.Now()), Event(org, time.Now().Add(-time.Second))}
	write(t, s, evs)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2 := mustOpen(t, open) // migrations run again on an existing schema
	got := all(t, s2, auditstore.Query{OrgID: org, Limit: 10})
	if !slices.Equal(ids(got), sorted(evs)) {
		t.Fatalf("after reopen: %d entries", len(got))
	}
	if err := s2.Ping(ctx(t)); err != nil {
		t.Fatal(err)
	}
}

func testInvalidQuery(t *testing.T, open Opener) {
	s := mustOpen(t, open)
	for _, q := range []auditstore.Query{
		{Limit: 10},
		{OrgID: uuid.New(), Limit: 0},
		{OrgID: uuid.New(), Limit: auditstore.MaxLimit + 1},
	} {
		_, err := s.ListAudit(ctx(t), q)
		if err == nil || !strings.Contains(fmt.Sprint(err), "invalid query") {
			t.Errorf("query %+v: err = %v, want ErrInvalidQuery", q, err)
		}
	}
}

// A filter that matches a few events spread over months, paged one by one:
// stores that bound their scans must still find every match.
func testSparse(t *testing.T, open Opener) {
	s := mustOpen(t, open)
	org := uuid.New()
	now := time.Now()
	var evs, rare []schemas.AuditEvent
	for i := 0; i < 400; i++ {
		e := Event(org, now.Add(-time.Duration(i)*5*time.Hour))
		if i%97 == 3 {
			e.Action = schemas.AuditActionDisabled
			rare = append(rare, e)
		}
		evs = append(evs, e)
	}
	write(t, s, evs)
	dis := schemas.AuditActionDisabled
	got := ids(all(t, s, auditstore.Query{OrgID: org, Limit: 1, Filter: auditstore.Filter{Action: &dis}}))
	if !slices.Equal(got, sorted(rare)) {
		t.Fatalf("found %d of %d sparse matches", len(got), len(rare))
	}
	if got := ids(all(t, s, auditstore.Query{OrgID: org, Limit: 37})); !slices.Equal(got, sorted(evs)) {
		t.Fatalf("walk over months: %d of %d", len(got), len(evs))
	}
}

// Events that arrive late, with old timestamps, after listings ran.
func testLateArrivals(t *testing.T, open Opener) {
	s := mustOpen(t, open)
	org := uuid.New()
	now := time.Now()
	evs := []schemas.AuditEvent{Event(org, now), Event(org, now.Add(-2*time.Hour))}
	write(t, s, evs)
	_ = all(t, s, auditstore.Query{OrgID: org, Limit: 10})
	late := []schemas.AuditEvent{Event(org, now.Add(-30*24*time.Hour)), Event(org, now.Add(-time.Hour)), Event(org, now.Add(time.Minute))}
	write(t, s, late)
	evs = append(evs, late...)
	for _, limit := range []int{1, 2, 10} {
		if got := ids(all(t, s, auditstore.Query{OrgID: org, Limit: limit})); !slices.Equal(got, sorted(evs)) {
			t.Fatalf("limit %d: %d of %d after late arrivals", limit, len(got), len(evs))
		}
	}
}

func execEvent(org, project uuid.UUID, ts time.Time, success bool) schemas.ExecutionEvent {
	id := uuid.NewString()
	e := schemas.ExecutionEvent{EventID: id, ExecutionID: id, OrganizationID: org.String(), ProjectID: project.String(), UserID: "u1",
		PrincipalID: "key_" + id[:8], PrincipalType: "PROJECT_SERVICE_KEY", DisplayName: "svc — ünïcode", ClientIP: "2001:db8::7",
		Tool:      schemas.ToolRef{Toolkit: "DocumentDbToolkit", Name: "FindDocuments", Version: "0.4.0"},
		StartedAt: auditstore.Millis(ts), EndedAt: auditstore.Millis(ts.Add(12 * time.Millisecond)), DurationMS: 12.5,
		Success: success, ExecutionCode: "OK",
		Hooks: []schemas.HookCall{{HookID: "h1", HookName: "policy", Point: "pre", Code: "OK", HTTPStatus: 200, Attempts: 1, LatencyMS: 1.25, Decision: "allow"}}}
	if !success {
		e.ExecutionCode, e.ErrorKind, e.ExecutionError = "HOOK_CHECK_FAILED", "HOOK_CHECK_FAILED", "denied"
		e.Hooks[0].Code, e.Hooks[0].Decision = "CHECK_FAILED", "deny"
	}
	return e
}

func execIDs(es []auditstore.Execution) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.EventID
	}
	return out
}

func testExecutions(t *testing.T, open Opener) {
	s, ok := mustOpen(t, open).(auditstore.ExecutionStore)
	if !ok {
		t.Fatal("the store does not keep executions")
	}
	org, p1, p2 := uuid.New(), uuid.New(), uuid.New()
	base := time.Now().Add(-time.Hour)
	users := []string{"u1", "u'2\"; DROP TABLE tool_executions", "", "u1"}
	var evs []schemas.ExecutionEvent
	for i := 0; i < 90; i++ {
		p := p1
		if i%3 == 0 {
			p = p2
		}
		e := execEvent(org, p, base.Add(time.Duration(i/5)*time.Second), i%4 != 0)
		e.UserID = users[i%5%len(users)]
		if i%7 == 0 { // an execution with no principal recorded (older producers)
			e.PrincipalID, e.PrincipalType, e.DisplayName, e.ClientIP = "", "", "", ""
		}
		if i%6 == 1 { // asked through an MCP client
			e.Client = &schemas.ClientInfo{Protocol: "mcp", Name: "Desk \"agent\" — ü'; DROP", Version: "1.2.3"}
		}
		if i%4 != 3 { // salted (the others from producers that predate salts)
			e.Salt = Salt(i)
		}
		evs = append(evs, e)
	}
	if err := s.WriteExecutions(ctx(t), append(slices.Clone(evs), evs[:10]...)); err != nil {
		t.Fatal(err)
	}
	if err := s.WriteExecutions(ctx(t), evs[50:]); err != nil { // redelivery
		t.Fatal(err)
	}
	walk := func(q auditstore.ExecQuery) []auditstore.Execution {
		var out []auditstore.Execution
		for i := 0; i < 1000; i++ {
			p, err := s.ListExecutions(ctx(t), q)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, p.Items...)
			if !p.HasMore {
				return out
			}
			q.After = p.Next()
		}
		t.Fatal("walk does not end")
		return nil
	}
	want := func(keep func(e schemas.ExecutionEvent) bool) []string { return newestFirst(evs, keep) }
	got := walk(auditstore.ExecQuery{OrgID: org, Limit: 7})
	if !slices.Equal(execIDs(got), want(func(schemas.ExecutionEvent) bool { return true })) {
		t.Fatalf("executions: %d, want the %d written, once each, newest first", len(got), len(evs))
	}
	// Every field round-trips (the principal included); created_time is set.
	byID := map[string]schemas.ExecutionEvent{}
	for _, e := range evs {
		byID[e.EventID] = e
	}
	for _, g := range got {
		w := byID[g.EventID]
		wantJSON, _ := json.Marshal(w)
		gotJSON, _ := json.Marshal(g.ExecutionEvent)
		if !bytes.Equal(normalize(t, wantJSON), normalize(t, gotJSON)) {
			t.Fatalf("round trip:\n got %s\nwant %s", gotJSON, wantJSON)
		}
		if g.CreatedTime.IsZero() {
			t.Fatalf("execution %s: no created_time", g.EventID)
		}
	}
	if got[0].PrincipalID == "" || got[0].ClientIP != "2001:db8::7" {
		t.Fatalf("principal not stored: %+v", got[0].ExecutionEvent)
	}
	clients := 0
	for _, g := range got {
		if g.Client != nil {
			clients++
		}
	}
	if clients == 0 || clients == len(got) {
		t.Fatalf("%d of %d executions listed with a client, want some", clients, len(got))
	}
	for _, g := range got { // the salt round-trips (JSON above), none as nil
		if w := byID[g.EventID].Salt; !bytes.Equal(g.Salt, w) || (w == nil) != (g.Salt == nil) {
			t.Fatalf("execution %s: salt %x, want %x", g.EventID, g.Salt, w)
		}
	}
	no, yes := false, true
	u1, u2, none, unknown := users[0], users[1], "", "u9"
	filters := []struct {
		name string
		q    auditstore.ExecQuery
		keep func(e schemas.ExecutionEvent) bool
	}{
		{"project and failed", auditstore.ExecQuery{ProjectID: &p2, Success: &no}, func(e schemas.ExecutionEvent) bool {
			return e.ProjectID == p2.String() && !e.Success
		}},
		{"user", auditstore.ExecQuery{UserID: &u1}, func(e schemas.ExecutionEvent) bool { return e.UserID == u1 }},
		{"user with quotes", auditstore.ExecQuery{UserID: &u2}, func(e schemas.ExecutionEvent) bool { return e.UserID == u2 }},
		{"no user", auditstore.ExecQuery{UserID: &none}, func(e schemas.ExecutionEvent) bool { return e.UserID == "" }},
		{"unknown user", auditstore.ExecQuery{UserID: &unknown}, func(e schemas.ExecutionEvent) bool { return false }},
		{"user, project and success", auditstore.ExecQuery{UserID: &u1, ProjectID: &p1, Success: &yes}, func(e schemas.ExecutionEvent) bool {
			return e.UserID == u1 && e.ProjectID == p1.String() && e.Success
		}},
	}
	for _, f := range filters {
		q := f.q
		q.OrgID, q.Limit = org, 3
		got := walk(q)
		w := want(f.keep)
		if f.name != "unknown user" && len(w) == 0 {
			t.Fatalf("%s: the test data holds no match", f.name)
		}
		if !slices.Equal(execIDs(got), w) {
			t.Fatalf("%s: got %d executions, want %d", f.name, len(got), len(w))
		}
	}
	if got := walk(auditstore.ExecQuery{OrgID: uuid.New(), Limit: 3}); len(got) != 0 {
		t.Fatalf("another org sees %d executions", len(got))
	}
}

// Executions spread over months, with filters that match a few of them,
// paged one by one: stores that bound their scans by time must widen until
// they find every match, and walk every page in order.
func testExecutionsSparse(t *testing.T, open Opener) {
	s, ok := mustOpen(t, open).(auditstore.ExecutionStore)
	if !ok {
		t.Fatal("the store does not keep executions")
	}
	org, p1, p2 := uuid.New(), uuid.New(), uuid.New()
	now := time.Now()
	var evs []schemas.ExecutionEvent
	for i := 0; i < 400; i++ {
		p := p1
		if i%2 == 0 {
			p = p2
		}
		e := execEvent(org, p, now.Add(-time.Duration(i)*5*time.Hour), i%97 != 3)
		if i%89 == 5 {
			e.UserID = "rare"
		}
		evs = append(evs, e)
	}
	if err := s.WriteExecutions(ctx(t), evs); err != nil {
		t.Fatal(err)
	}
	order := func(keep func(e schemas.ExecutionEvent) bool) []string { return newestFirst(evs, keep) }
	failed, rare := false, "rare"
	cases := []struct {
		name string
		q    auditstore.ExecQuery
		keep func(e schemas.ExecutionEvent) bool
	}{
		{"failed", auditstore.ExecQuery{Success: &failed, Limit: 1}, func(e schemas.ExecutionEvent) bool { return !e.Success }},
		{"rare user", auditstore.ExecQuery{UserID: &rare, Limit: 1}, func(e schemas.ExecutionEvent) bool { return e.UserID == rare }},
		{"rare user in a project", auditstore.ExecQuery{UserID: &rare, ProjectID: &p2, Limit: 2}, func(e schemas.ExecutionEvent) bool {
			return e.UserID == rare && e.ProjectID == p2.String()
		}},
		{"all", auditstore.ExecQuery{Limit: 37}, func(schemas.ExecutionEvent) bool { return true }},
		{"project", auditstore.ExecQuery{ProjectID: &p1, Limit: 37}, func(e schemas.ExecutionEvent) bool { return e.ProjectID == p1.String() }},
	}
	for _, c := range cases {
		q := c.q
		q.OrgID = org
		var got []string
		for i := 0; ; i++ {
			if i > 1000 {
				t.Fatalf("%s: pagination does not end", c.name)
			}
			p, err := s.ListExecutions(ctx(t), q)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, execIDs(p.Items)...)
			if !p.HasMore {
				break
			}
			q.After = p.Next()
		}
		want := order(c.keep)
		if len(want) < 2 {
			t.Fatalf("%s: the test data holds %d matches", c.name, len(want))
		}
		if !slices.Equal(got, want) {
			t.Fatalf("%s: found %d of %d", c.name, len(got), len(want))
		}
	}
}

// CheckMigratedExecutions checks a store opened on a database written before
// executions carried the principal: the old row (oldID of org, user u1)
// reads back with empty principal fields, and a new execution keeps them.
func CheckMigratedExecutions(t *testing.T, s auditstore.ExecutionStore, org uuid.UUID, oldID string) {
	t.Helper()
	ctx := context.Background()
	newID := uuid.NewString()
	ev := schemas.ExecutionEvent{EventID: newID, ExecutionID: newID, OrganizationID: org.String(), UserID: "u2",
		PrincipalID: "key_1", PrincipalType: "API_KEY", DisplayName: "Ada", ClientIP: "192.0.2.1",
		Tool: schemas.ToolRef{Toolkit: "tk", Name: "tool"}, StartedAt: time.Now().UTC(), EndedAt: time.Now().UTC(), Success: true}
	if err := s.WriteExecutions(ctx, []schemas.ExecutionEvent{ev}); err != nil {
		t.Fatal(err)
	}
	page, err := s.ListExecutions(ctx, auditstore.ExecQuery{OrgID: org, Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Items) != 2 {
		t.Fatalf("%d executions after migration, want 2", len(page.Items))
	}
	n, o := page.Items[0], page.Items[1]
	if n.EventID != newID || n.PrincipalID != "key_1" || n.PrincipalType != "API_KEY" || n.DisplayName != "Ada" || n.ClientIP != "192.0.2.1" {
		t.Fatalf("new execution: %+v", n.ExecutionEvent)
	}
	if o.EventID != oldID || o.UserID != "u1" || o.PrincipalID != "" || o.PrincipalType != "" || o.DisplayName != "" || o.ClientIP != "" {
		t.Fatalf("old execution: %+v", o.ExecutionEvent)
	}
}

// newestFirst returns the event ids of evs that keep accepts, in listing
// order: newest first, ties by event_id descending.
func newestFirst(evs []schemas.ExecutionEvent, keep func(e schemas.ExecutionEvent) bool) []string {
	c := slices.Clone(evs)
	slices.SortFunc(c, func(a, b schemas.ExecutionEvent) int {
		if d := b.StartedAt.Compare(a.StartedAt); d != 0 {
			return d
		}
		return strings.Compare(b.EventID, a.EventID)
	})
	var out []string
	for _, e := range c {
		if keep(e) {
			out = append(out, e.EventID)
		}
	}
	return out
}

// testResentWithAnotherTime: one event_id, one row, on every store. An
// event re-sent with another timestamp (after the stream's dedup window,
// by a producer that re-stamped it) keeps its first write: it is listed
// once, at its first time; the same for executions.
func testResentWithAnotherTime(t *testing.T, open Opener) {
	s := mustOpen(t, open)
	org := uuid.New()
	t0 := time.Now().Add(-time.Hour).UTC().Truncate(time.Millisecond)
	ev := Event(org, t0)
	write(t, s, []schemas.AuditEvent{ev})
	again := ev
	again.Timestamp = t0.Add(30 * time.Minute)
	other := Event(org, t0.Add(time.Minute))
	write(t, s, []schemas.AuditEvent{again, other})
	later := ev
	later.Timestamp = t0.Add(-40 * 24 * time.Hour) // another month
	write(t, s, []schemas.AuditEvent{later})
	got := all(t, s, auditstore.Query{OrgID: org, Limit: 1})
	if len(got) != 2 {
		t.Fatalf("listed %d entries, want 2 (the re-sent event once)", len(got))
	}
	for _, e := range got {
		if e.EventID == ev.EventID && !e.Timestamp.Equal(t0) {
			t.Fatalf("re-sent event listed at %s, want its first time %s", e.Timestamp, t0)
		}
	}

	es, ok := s.(auditstore.ExecutionStore)
	if !ok {
		return
	}
	x := execEvent(org, uuid.New(), t0, true)
	if err := es.WriteExecutions(ctx(t), []schemas.ExecutionEvent{x}); err != nil {
		t.Fatal(err)
	}
	x2 := x
	x2.StartedAt, x2.EndedAt = x.StartedAt.Add(time.Hour), x.EndedAt.Add(time.Hour)
	if err := es.WriteExecutions(ctx(t), []schemas.ExecutionEvent{x2, x2}); err != nil {
		t.Fatal(err)
	}
	page, err := es.ListExecutions(ctx(t), auditstore.ExecQuery{OrgID: org, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Items) != 1 || !page.Items[0].StartedAt.Equal(x.StartedAt) {
		t.Fatalf("executions: %d listed (want 1, at its first time)", len(page.Items))
	}
}

// testManyMonths: a batch whose events span more months than a ClickHouse
// insert may touch (max_partitions_per_insert_block, 100 by default in
// current releases) is stored whole, every event once.
func testManyMonths(t *testing.T, open Opener) {
	s := mustOpen(t, open)
	org := uuid.New()
	var evs []schemas.AuditEvent
	start := time.Date(2005, 1, 15, 12, 0, 0, 0, time.UTC)
	for m := 0; m < 150; m++ {
		evs = append(evs, Event(org, start.AddDate(0, m, 0)), Event(org, start.AddDate(0, m, 3)))
	}
	write(t, s, evs)
	got := all(t, s, auditstore.Query{OrgID: org, Limit: 100})
	if !slices.Equal(ids(got), sorted(evs)) {
		t.Fatalf("listed %d of %d events across 150 months", len(got), len(evs))
	}
}
