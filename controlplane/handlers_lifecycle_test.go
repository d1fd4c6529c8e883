package controlplane

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/auditrail/auditrail/controlplane/cpstate"
	"github.com/auditrail/auditrail/internal/testenv"
	"github.com/auditrail/auditrail/schemas"
)

const day = cpstate.Day

// lifecycleEnv is a control plane with the given retention bounds, served
// over real HTTP and checked against admin.yaml, on a clock the test
// moves; an organization with admin bob and member alice.
type lifecycleEnv struct {
	n          *node
	js         jetstream.JetStream
	api        *adminSpec
	base       string
	clock      atomic.Int64 // unix nanoseconds of the service's now
	org        string
	bob, alice string
}

func newLifecycleEnv(t *testing.T, bounds cpstate.RetentionBounds, counter HoldCounter) *lifecycleEnv {
	t.Helper()
	srv, _, js := testenv.NATS(t)
	n := newNode(t, srv.ClientURL(), nodeOpts{service: func(c *ServiceConfig) { c.Retention = bounds }})
	n.run()
	e := &lifecycleEnv{n: n, js: js}
	e.clock.Store(time.Date(2031, 3, 4, 5, 6, 7, 0, time.UTC).UnixNano())
	n.svc.now = func() time.Time { return time.Unix(0, e.clock.Load()).UTC() }
	if counter != nil {
		n.svc.UseHoldCounter(counter)
	}
	e.org = n.must(201, "POST", "/api/v1/orgs", bootKey, map[string]any{"name": "acme"}).field("id")
	key := func(user, role string) string {
		n.must(201, "PUT", "/api/v1/orgs/"+e.org+"/members/"+user, bootKey, map[string]any{"role": role})
		return n.must(201, "POST", "/api/v1/orgs/"+e.org+"/api_keys", bootKey, map[string]any{"name": user, "user_id": user}).field("key")
	}
	e.alice, e.bob = key("alice", "member"), key("bob", "admin")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = n.app.Listener(ln) }()
	t.Cleanup(func() { _ = n.app.Shutdown(); <-done })
	e.base = "http://" + ln.Addr().String()
	e.api = newAdminSpec(t, e.base)
	return e
}

func (e *lifecycleEnv) now() time.Time          { return time.Unix(0, e.clock.Load()).UTC() }
func (e *lifecycleEnv) advance(d time.Duration) { e.clock.Add(int64(d)) }

// do sends a request (body: JSON, or a string sent as is) and checks the
// status and the answer against admin.yaml; it answers the lcEnvelope.
func (e *lifecycleEnv) do(t *testing.T, method, path, key string, body any, want int) lcEnvelope {
	t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		j, _ := json.Marshal(b)
		rd = bytes.NewReader(j)
	}
	req, _ := http.NewRequest(method, e.base+path, rd)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+key)
	raw := e.api.do(t, req, want)
	var env lcEnvelope
	if err := json.Unmarshal(raw, &env); err != nil {
		t.Fatalf("%s %s: %s", method, path, raw)
	}
	env.raw = raw
	return env
}

type lcEnvelope struct {
	Msg  string          `json:"msg"`
	Data json.RawMessage `json:"data"`
	raw  []byte
}

// retentionAnswer is the view of the retention routes.
type retentionAnswer struct {
	AuditLogs      *string    `json:"audit_logs"`
	ToolExecutions *string    `json:"tool_executions"`
	AppliesFrom    *time.Time `json:"applies_from"`
	Effective      struct {
		AuditLogs      *string `json:"audit_logs"`
		ToolExecutions *string `json:"tool_executions"`
	} `json:"effective"`
	Bounds struct {
		Min     string  `json:"min"`
		Max     *string `json:"max"`
		Default *string `json:"default"`
		Grace   string  `json:"grace"`
	} `json:"bounds"`
}

func decodeRetention(t *testing.T, env lcEnvelope) retentionAnswer {
	t.Helper()
	var r retentionAnswer
	if err := json.Unmarshal(env.Data, &r); err != nil {
		t.Fatalf("%s", env.raw)
	}
	return r
}

func str(p *string) string {
	if p == nil {
		return "null"
	}
	return *p
}

// settingEvents returns the audit events of resource id in org, after
// checking that each is a SETTING event.
func settingEvents(t *testing.T, e *lifecycleEnv, id string) []schemas.AuditEvent {
	t.Helper()
	var out []schemas.AuditEvent
	for _, ev := range auditOf(t, e.js, id) {
		if ev.OrganizationID.String() != e.org {
			continue
		}
		if ev.ResourceType == nil || *ev.ResourceType != schemas.ResourceTypeSetting {
			t.Fatalf("event %s: resource type %v", ev.EventID, ev.ResourceType)
		}
		out = append(out, ev)
	}
	return out
}

// The retention routes: the default view, validation naming the member
// (nothing recorded), owners and admins only, a change recorded once as a
// SETTING event, the grace period in effective, a PUT that changes nothing
// recording nothing.
func TestRetentionAPI(t *testing.T) {
	e := newLifecycleEnv(t, cpstate.RetentionBounds{Min: 30 * day, Max: 400 * day, Default: 90 * day, Grace: day}, nil)
	path := "/api/v1/orgs/" + e.org + "/retention"

	// No setting: the operator default.
	r := decodeRetention(t, e.do(t, "GET", path, e.bob, nil, 200))
	if str(r.AuditLogs) != "90d" || str(r.ToolExecutions) != "90d" || r.AppliesFrom != nil || str(r.Effective.AuditLogs) != "90d" ||
		str(r.Effective.ToolExecutions) != "90d" || r.Bounds.Min != "30d" || str(r.Bounds.Max) != "400d" || str(r.Bounds.Default) != "90d" || r.Bounds.Grace != "1d" {
		t.Fatalf("default view: %+v", r)
	}
	e.do(t, "GET", path, bootKey, nil, 200) // the platform admin
	e.do(t, "GET", path, e.alice, nil, 403)
	e.do(t, "PUT", path, e.alice, map[string]any{"audit_logs": "100d"}, 403)
	e.do(t, "GET", "/api/v1/orgs/not-a-uuid/retention", e.bob, nil, 400)

	for _, tt := range []struct {
		body any
		msg  string
	}{
		{map[string]any{"audit_logs": "40x"}, `audit_logs: "40x" is not a duration like "400d", "36h", "90m"`},
		{map[string]any{"audit_logs": "10d"}, "audit_logs: 10d is below the operator's minimum of 30d"},
		{map[string]any{"tool_executions": "500d"}, "tool_executions: 500d is above the operator's maximum of 400d"},
		{map[string]any{"audit_logs": nil}, "audit_logs: keep forever (null) is above the operator's maximum of 400d"},
		{map[string]any{"audit_logs": "0"}, "audit_logs: keep forever"},
		{map[string]any{"tool_executions": 30}, "tool_executions: a duration string"},
		{map[string]any{"audit_logs": "100d", "tool_executions": "-1h"}, "tool_executions:"},
		{map[string]any{"audit_logs": "100d", "unknown": "1d"}, "unknown"},
		{map[string]any{}, "audit_logs, tool_executions"},
		{"null", "audit_logs, tool_executions"},
		{"", "body"},
		{"[]", "body"},
	} {
		env := e.do(t, "PUT", path, e.bob, tt.body, 400)
		if !strings.Contains(env.Msg, tt.msg) {
			t.Errorf("PUT %v: %q does not say %q", tt.body, env.Msg, tt.msg)
		}
	}
	if evs := settingEvents(t, e, retentionResource); len(evs) != 0 {
		t.Fatalf("refused changes were recorded: %d events", len(evs))
	}
	if s, _ := cpstate.RetentionOf(e.n.state, mustUUID(t, e.org)); s != nil {
		t.Fatalf("a refused change was stored: %+v", s)
	}

	// A longer retention: in force at once; tool_executions keeps the default.
	t0 := e.now()
	r = decodeRetention(t, e.do(t, "PUT", path, e.bob, map[string]any{"audit_logs": "400d"}, 200))
	if str(r.AuditLogs) != "400d" || str(r.ToolExecutions) != "90d" || r.AppliesFrom == nil || !r.AppliesFrom.Equal(t0.Add(day)) ||
		str(r.Effective.AuditLogs) != "400d" || str(r.Effective.ToolExecutions) != "90d" {
		t.Fatalf("after the first PUT: %+v", r)
	}
	evs := settingEvents(t, e, retentionResource)
	if len(evs) != 1 || evs[0].Action != schemas.AuditActionCreated || evs[0].ResourceDisplay == nil || *evs[0].ResourceDisplay != "retention" {
		t.Fatalf("the first PUT recorded %+v", evs)
	}
	var data struct {
		Before, After retentionAnswer
	}
	if err := json.Unmarshal(evs[0].Data, &data); err != nil || str(data.Before.AuditLogs) != "90d" || data.Before.AppliesFrom != nil ||
		str(data.After.AuditLogs) != "400d" || data.After.AppliesFrom == nil {
		t.Fatalf("the event's data: %s (%v)", evs[0].Data, err)
	}
	if got := decodeRetention(t, e.do(t, "GET", path, e.bob, nil, 200)); str(got.AuditLogs) != "400d" || got.AppliesFrom == nil {
		t.Fatalf("GET after the PUT: %+v", got)
	}

	// The same values again: answered, nothing recorded.
	e.do(t, "PUT", path, e.bob, map[string]any{"audit_logs": "400d", "tool_executions": "90d"}, 200)
	if evs := settingEvents(t, e, retentionResource); len(evs) != 1 {
		t.Fatalf("a PUT that changed nothing recorded: %d events", len(evs))
	}

	// Shorter, during the first grace period: the longer value protects
	// until the new grace period ends; then the new value applies.
	e.advance(time.Hour)
	t1 := e.now()
	r = decodeRetention(t, e.do(t, "PUT", path, e.bob, map[string]any{"audit_logs": "30d", "tool_executions": "30d"}, 200))
	if str(r.AuditLogs) != "30d" || str(r.ToolExecutions) != "30d" || !r.AppliesFrom.Equal(t1.Add(day)) ||
		str(r.Effective.AuditLogs) != "400d" || str(r.Effective.ToolExecutions) != "90d" {
		t.Fatalf("a shorter retention during the grace period: %+v", r)
	}
	stored, err := cpstate.RetentionOf(e.n.state, mustUUID(t, e.org))
	if err != nil || stored == nil || !stored.PreviousSet || stored.PreviousAuditLogs == nil || *stored.PreviousAuditLogs != 400*day ||
		stored.PreviousToolExecutions == nil || *stored.PreviousToolExecutions != 90*day || !stored.UpdatedAt.Equal(t1) {
		t.Fatalf("stored: %+v, %v", stored, err)
	}
	evs = settingEvents(t, e, retentionResource)
	if len(evs) != 2 || evs[1].Action != schemas.AuditActionUpdated {
		t.Fatalf("the second PUT recorded %+v", evs)
	}
	e.advance(day - time.Minute)
	if r := decodeRetention(t, e.do(t, "GET", path, e.bob, nil, 200)); str(r.Effective.AuditLogs) != "400d" {
		t.Fatalf("a minute before applies_from: %+v", r)
	}
	e.advance(time.Minute)
	if r := decodeRetention(t, e.do(t, "GET", path, e.bob, nil, 200)); str(r.Effective.AuditLogs) != "30d" || str(r.Effective.ToolExecutions) != "30d" {
		t.Fatalf("at applies_from: %+v", r)
	}
	for _, op := range []string{"getRetention", "putRetention"} {
		if !e.api.checked[op] {
			t.Errorf("%s not checked", op)
		}
	}
}

// Without a ceiling, null keeps forever, shown as null; a shorter value
// then waits for the grace period (forever protects until then).
func TestRetentionForeverWithoutCeiling(t *testing.T) {
	e := newLifecycleEnv(t, cpstate.RetentionBounds{Grace: 2 * time.Hour}, nil)
	path := "/api/v1/orgs/" + e.org + "/retention"
	r := decodeRetention(t, e.do(t, "GET", path, e.bob, nil, 200))
	if r.AuditLogs != nil || r.Effective.AuditLogs != nil || r.Bounds.Max != nil || r.Bounds.Default != nil || r.Bounds.Min != "0" || r.Bounds.Grace != "2h" {
		t.Fatalf("default view: %+v", r)
	}
	// Keeping forever (the default) again changes nothing.
	e.do(t, "PUT", path, e.bob, map[string]any{"audit_logs": nil}, 200)
	if evs := settingEvents(t, e, retentionResource); len(evs) != 0 {
		t.Fatalf("recorded: %d", len(evs))
	}
	r = decodeRetention(t, e.do(t, "PUT", path, e.bob, map[string]any{"tool_executions": "36h"}, 200))
	if r.AuditLogs != nil || str(r.ToolExecutions) != "36h" || r.Effective.ToolExecutions != nil {
		t.Fatalf("36h during the grace period: %+v", r)
	}
	e.advance(2 * time.Hour)
	if r := decodeRetention(t, e.do(t, "GET", path, e.bob, nil, 200)); str(r.Effective.ToolExecutions) != "36h" || r.Effective.AuditLogs != nil {
		t.Fatalf("after the grace period: %+v", r)
	}
	if evs := settingEvents(t, e, retentionResource); len(evs) != 1 || evs[0].Action != schemas.AuditActionCreated {
		t.Fatalf("recorded: %+v", evs)
	}
}

// fakeCounter counts a hold's entries as the length of its name; a hold
// named "broken" fails, one named "slow" waits for its deadline once slow
// is set.
type fakeCounter struct {
	calls atomic.Int32
	slow  atomic.Bool
}

func (f *fakeCounter) CountHeld(ctx context.Context, h cpstate.LegalHold) (int64, error) {
	f.calls.Add(1)
	switch {
	case h.Name == "broken":
		return 0, errors.New("store down")
	case h.Name == "slow" && f.slow.Load():
		<-ctx.Done()
		return 0, ctx.Err()
	}
	return int64(len(h.Name)), nil
}

type holdAnswer struct {
	cpstate.LegalHold
	Held   *int64 `json:"held"`
	Status string `json:"status"`
}

func decodeHold(t *testing.T, env lcEnvelope) holdAnswer {
	t.Helper()
	var h holdAnswer
	if err := json.Unmarshal(env.Data, &h); err != nil {
		t.Fatalf("%s", env.raw)
	}
	return h
}

// The legal hold routes: validation naming the field, owners and admins
// only, kinds from the languages that parse q, held from the counter (null
// when released or when the count fails), newest first, release keeping
// the record, each change one SETTING event.
func TestLegalHoldsAPI(t *testing.T) {
	counter := &fakeCounter{}
	e := newLifecycleEnv(t, cpstate.DefaultRetentionBounds(), counter)
	holds := "/api/v1/orgs/" + e.org + "/legal_holds"

	// A hold of everything.
	h := decodeHold(t, e.do(t, "POST", holds, e.bob, map[string]any{"name": "uncounted", "q": " "}, 201))
	if h.Held == nil || *h.Held != 9 || h.Status != "active" || !slices.Equal(h.Kinds, []string{cpstate.RetentionAuditLogs, cpstate.RetentionToolExecutions}) || h.Q != "" {
		t.Fatalf("a hold of everything: %+v", h)
	}

	since := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	until := since.Add(30 * day)
	for _, tt := range []struct {
		body  map[string]any
		field string
	}{
		{map[string]any{"q": "actor:bob"}, "name"},
		{map[string]any{"name": " ", "q": "actor:bob"}, "name"},
		{map[string]any{"name": "x", "q": "action:NOPE"}, "q"},
		{map[string]any{"name": "x", "q": `"unterminated`}, "q"},
		{map[string]any{"name": "x", "q": "nokey:1"}, "q"},
		{map[string]any{"name": "x", "since": until, "until": since}, "until"},
		{map[string]any{"name": "x", "since": since, "until": since}, "until"},
		{map[string]any{"name": "x", "since": "yesterday"}, "body"},
		{map[string]any{"name": "x", "held": 3}, "held"},
	} {
		env := e.do(t, "POST", holds, e.bob, tt.body, 400)
		if !strings.HasPrefix(env.Msg, tt.field+":") && !strings.Contains(env.Msg, tt.field) {
			t.Errorf("POST %v: %q does not name %s", tt.body, env.Msg, tt.field)
		}
	}
	e.do(t, "POST", holds, e.alice, map[string]any{"name": "x"}, 403)
	e.do(t, "GET", holds, e.alice, nil, 403)

	e.advance(time.Minute)
	dispute := decodeHold(t, e.do(t, "POST", holds, e.bob, map[string]any{"name": "dispute", "q": "actor:bob action:UPDATED",
		"since": since, "until": until}, 201))
	if !slices.Equal(dispute.Kinds, []string{cpstate.RetentionAuditLogs}) || dispute.Held == nil || *dispute.Held != 7 || dispute.Status != "active" ||
		dispute.Since == nil || !dispute.Since.Equal(since) || dispute.Until == nil || !dispute.Until.Equal(until) || dispute.CreatedBy == "" ||
		!dispute.CreatedAt.Equal(e.now()) || dispute.ReleasedAt != nil || dispute.OrgID.String() != e.org {
		t.Fatalf("dispute: %+v", dispute)
	}
	e.advance(time.Minute)
	tools := decodeHold(t, e.do(t, "POST", holds, e.bob, map[string]any{"name": "tools", "q": "tool:search success:false"}, 201))
	if !slices.Equal(tools.Kinds, []string{cpstate.RetentionToolExecutions}) {
		t.Fatalf("an executions query applies to %v", tools.Kinds)
	}
	e.advance(time.Minute)
	broken := decodeHold(t, e.do(t, "POST", holds, bootKey, map[string]any{"name": "broken", "q": "alice"}, 201))
	if broken.Held != nil || !slices.Equal(broken.Kinds, []string{cpstate.RetentionAuditLogs, cpstate.RetentionToolExecutions}) {
		t.Fatalf("broken: %+v", broken)
	}

	// The list: newest first, each counted; a failed count is null.
	list := func() []holdAnswer {
		t.Helper()
		var l struct {
			Items []holdAnswer `json:"items"`
		}
		if err := json.Unmarshal(e.do(t, "GET", holds, e.bob, nil, 200).Data, &l); err != nil {
			t.Fatal(err)
		}
		return l.Items
	}
	items := list()
	names := make([]string, len(items))
	for i, it := range items {
		names[i] = it.Name
	}
	if !slices.Equal(names, []string{"broken", "tools", "dispute", "uncounted"}) {
		t.Fatalf("order: %v", names)
	}
	if items[0].Held != nil || items[1].Held == nil || *items[1].Held != 5 || items[2].Held == nil || *items[2].Held != 7 || items[3].Held == nil || *items[3].Held != 9 {
		t.Fatalf("counts: %s", e.do(t, "GET", holds, e.bob, nil, 200).raw)
	}

	one := holds + "/" + dispute.ID.String()
	if got := decodeHold(t, e.do(t, "GET", one, e.bob, nil, 200)); got.ID != dispute.ID || got.Held == nil || *got.Held != 7 {
		t.Fatalf("get: %+v", got)
	}
	e.do(t, "GET", holds+"/00000000-0000-4000-8000-000000000000", e.bob, nil, 404)
	e.do(t, "GET", holds+"/nope", e.bob, nil, 400)
	e.do(t, "GET", one, e.alice, nil, 403)
	e.do(t, "DELETE", one, e.alice, nil, 403)

	// Release: the record stays, released, uncounted; once.
	e.advance(time.Minute)
	calls := counter.calls.Load()
	rel := decodeHold(t, e.do(t, "DELETE", one, e.bob, nil, 200))
	if rel.Status != "released" || rel.Held != nil || rel.ReleasedAt == nil || !rel.ReleasedAt.Equal(e.now()) || rel.Name != "dispute" {
		t.Fatalf("released: %+v", rel)
	}
	again := decodeHold(t, e.do(t, "DELETE", one, e.bob, nil, 200))
	if again.Status != "released" || !again.ReleasedAt.Equal(*rel.ReleasedAt) {
		t.Fatalf("released twice: %+v", again)
	}
	if got := decodeHold(t, e.do(t, "GET", one, e.bob, nil, 200)); got.Status != "released" || got.Held != nil {
		t.Fatalf("get a released hold: %+v", got)
	}
	if counter.calls.Load() != calls {
		t.Fatal("a released hold was counted")
	}
	if items := list(); len(items) != 4 || items[2].Name != "dispute" || items[2].Status != "released" || items[2].Held != nil {
		t.Fatalf("list after the release: %+v", items)
	}
	stored, err := cpstate.LegalHolds(e.n.state, mustUUID(t, e.org))
	if err != nil || len(stored) != 4 {
		t.Fatalf("stored holds: %d, %v", len(stored), err)
	}

	// One event per change: CREATED, then DELETED once.
	evs := settingEvents(t, e, dispute.ID.String())
	if len(evs) != 2 || evs[0].Action != schemas.AuditActionCreated || evs[1].Action != schemas.AuditActionDeleted ||
		evs[0].ResourceDisplay == nil || *evs[0].ResourceDisplay != "legal hold dispute" {
		t.Fatalf("events of the hold: %+v", evs)
	}
	if n := len(settingEvents(t, e, tools.ID.String())); n != 1 {
		t.Fatalf("events of tools: %d", n)
	}
	for _, op := range []string{"listLegalHolds", "createLegalHold", "getLegalHold", "releaseLegalHold"} {
		if !e.api.checked[op] {
			t.Errorf("%s not checked", op)
		}
	}
}

// A count that does not answer is cut at its deadline: the list answers,
// with held null for it and the counts of the others.
func TestLegalHoldCountTimesOut(t *testing.T) {
	counter := &fakeCounter{}
	e := newLifecycleEnv(t, cpstate.DefaultRetentionBounds(), counter)
	holds := "/api/v1/orgs/" + e.org + "/legal_holds"
	for _, name := range []string{"slow", "fast", "slow", "slow", "slow", "slow"} {
		e.advance(time.Second)
		e.do(t, "POST", holds, e.bob, map[string]any{"name": name, "q": "actor:bob"}, 201)
	}
	counter.slow.Store(true)
	start := time.Now()
	var l struct {
		Items []holdAnswer `json:"items"`
	}
	_ = json.Unmarshal(e.do(t, "GET", holds, e.bob, nil, 200).Data, &l)
	// Five slow ones, four at a time: two rounds of 2 s.
	if took := time.Since(start); took > 6*time.Second {
		t.Fatalf("the list took %s", took)
	}
	for _, it := range l.Items {
		if (it.Name == "fast") != (it.Held != nil) {
			t.Fatalf("%s: held %v", it.Name, it.Held)
		}
	}
}

func mustUUID(t *testing.T, s string) uuid.UUID {
	t.Helper()
	u, err := uuid.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// Without a counter (the control plane cannot reach the audit store), held
// is null and the routes answer as usual.
func TestLegalHoldWithoutCounter(t *testing.T) {
	e := newLifecycleEnv(t, cpstate.DefaultRetentionBounds(), nil)
	holds := "/api/v1/orgs/" + e.org + "/legal_holds"
	h := decodeHold(t, e.do(t, "POST", holds, e.bob, map[string]any{"name": "all"}, 201))
	if h.Held != nil || h.Status != "active" {
		t.Fatalf("created: %+v", h)
	}
	if got := decodeHold(t, e.do(t, "GET", holds+"/"+h.ID.String(), e.bob, nil, 200)); got.Held != nil {
		t.Fatalf("get: %+v", got)
	}
	if raw := e.do(t, "GET", holds, e.bob, nil, 200).raw; !strings.Contains(string(raw), `"held":null`) {
		t.Fatalf("list: %s", raw)
	}
}

// The service refuses retention bounds that do not hold together.
func TestServiceConfigValidatesRetention(t *testing.T) {
	for _, tt := range []struct {
		b  cpstate.RetentionBounds
		ok bool
	}{
		{cpstate.DefaultRetentionBounds(), true},
		{cpstate.RetentionBounds{Min: 30 * day, Max: 400 * day, Default: 90 * day}, true},
		{cpstate.RetentionBounds{Max: 400 * day}, false}, // keep forever by default above a ceiling
		{cpstate.RetentionBounds{Min: 30 * day, Max: 10 * day, Default: 20 * day}, false},
		{cpstate.RetentionBounds{Grace: -time.Hour}, false},
	} {
		c := DefaultServiceConfig()
		c.Retention = tt.b
		if err := c.Validate(); (err == nil) != tt.ok || (err != nil && !errors.Is(err, cpstate.ErrInvalidOption)) {
			t.Errorf("%+v: %v", tt.b, err)
		}
	}
	if DefaultServiceConfig().Retention != cpstate.DefaultRetentionBounds() {
		t.Fatal("the default config's bounds")
	}
}
