package controlplane

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/auditrail/auditrail/controlplane/cpstate"
	"github.com/auditrail/auditrail/internal/testenv"
	"github.com/auditrail/auditrail/schemas"
)

// fakeSubjectHolds holds the entries of the subjects in held (3 of them,
// by the first hold it is given); the subject "broken" fails with an
// error that quotes it.
type fakeSubjectHolds struct {
	mu    sync.Mutex
	held  map[string]bool
	calls atomic.Int32
	seen  []cpstate.LegalHold // the holds of the last call
}

func (f *fakeSubjectHolds) hold(subject string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.held[subject] = true
}

func (f *fakeSubjectHolds) HeldBy(ctx context.Context, _ uuid.UUID, _, subject string, holds []cpstate.LegalHold) (*cpstate.LegalHold, int64, error) {
	f.calls.Add(1)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.seen = holds
	switch {
	case subject == "broken":
		return nil, 0, errors.New("store down reading the entries of broken")
	case f.held[subject] && len(holds) > 0:
		h := holds[0]
		return &h, 3, nil
	}
	return nil, 0, nil
}

// erasureEnv is a lifecycleEnv with an owner (carol) beside admin bob and
// member alice, and optionally a SubjectHolds.
type erasureEnv struct {
	*lifecycleEnv
	carol string
	path  string
}

func newErasureEnv(t *testing.T, holds SubjectHolds) *erasureEnv {
	t.Helper()
	srv, _, js := testenv.NATS(t)
	n := newNode(t, srv.ClientURL(), nodeOpts{})
	n.run()
	e := &lifecycleEnv{n: n, js: js}
	e.clock.Store(time.Date(2031, 3, 4, 5, 6, 7, 0, time.UTC).UnixNano())
	n.svc.now = func() time.Time { return time.Unix(0, e.clock.Load()).UTC() }
	if holds != nil {
		n.svc.UseSubjectHolds(holds)
	}
	e.org = n.must(201, "POST", "/api/v1/orgs", bootKey, map[string]any{"name": "acme"}).field("id")
	key := func(user, role string) string {
		n.must(201, "PUT", "/api/v1/orgs/"+e.org+"/members/"+user, bootKey, map[string]any{"role": role})
		return n.must(201, "POST", "/api/v1/orgs/"+e.org+"/api_keys", bootKey, map[string]any{"name": user, "user_id": user}).field("key")
	}
	e.alice, e.bob = key("alice", "member"), key("bob", "admin")
	carol := key("carol", "owner")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = n.app.Listener(ln) }()
	t.Cleanup(func() { _ = n.app.Shutdown(); <-done })
	e.base = "http://" + ln.Addr().String()
	e.api = newAdminSpec(t, e.base)
	return &erasureEnv{lifecycleEnv: e, carol: carol, path: "/api/v1/orgs/" + e.org + "/erasures"}
}

// erasureAnswer is the view of the erasure routes; Subject catches a
// subject member that must never be there.
type erasureAnswer struct {
	ID           uuid.UUID  `json:"id"`
	OrgID        uuid.UUID  `json:"organization_id"`
	SubjectKind  string     `json:"subject_kind"`
	Subject      *string    `json:"subject"`
	Reason       string     `json:"reason"`
	Pseudonym    string     `json:"pseudonym"`
	Status       string     `json:"status"`
	StatusMsg    string     `json:"status_msg"`
	Entries      int64      `json:"entries"`
	AuditEntries int64      `json:"audit_entries"`
	Executions   int64      `json:"executions"`
	CreatedAt    time.Time  `json:"created_at"`
	CreatedBy    string     `json:"created_by"`
	DoneAt       *time.Time `json:"done_at"`
}

func decodeErasure(t *testing.T, env lcEnvelope) erasureAnswer {
	t.Helper()
	var a erasureAnswer
	if err := json.Unmarshal(env.Data, &a); err != nil {
		t.Fatalf("%s", env.raw)
	}
	if a.Subject != nil {
		t.Fatalf("the answer shows the subject: %s", env.raw)
	}
	return a
}

func (e *erasureEnv) list(t *testing.T, key string) []erasureAnswer {
	t.Helper()
	env := e.do(t, "GET", e.path, key, nil, 200)
	var l struct {
		Items []json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal(env.Data, &l); err != nil {
		t.Fatalf("%s", env.raw)
	}
	out := make([]erasureAnswer, len(l.Items))
	for i, raw := range l.Items {
		out[i] = decodeErasure(t, lcEnvelope{Data: raw, raw: env.raw})
	}
	return out
}

// streamRaw returns the raw bytes of every message of the audit stream.
func streamRaw(t *testing.T, e *lifecycleEnv) [][]byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := e.js.Stream(ctx, schemas.StreamEvents)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		m, err := st.GetMsg(ctx, seq)
		if err != nil {
			continue
		}
		out = append(out, m.Data)
	}
	return out
}

// notInStream fails when any audit event holds one of values (case
// insensitive), raw.
func notInStream(t *testing.T, e *lifecycleEnv, values ...string) {
	t.Helper()
	for _, raw := range streamRaw(t, e) {
		for _, v := range values {
			if bytes.Contains(bytes.ToLower(raw), []byte(strings.ToLower(v))) {
				t.Fatalf("an audit event holds %q: %s", v, raw)
			}
		}
	}
}

var pseudonymRE = regexp.MustCompile(`^erased-[0-9a-f]{16}$`)

// The erasure routes: owners and the platform admin create (202, pending,
// a fresh pseudonym), admins and members may not; owners and admins read;
// the subject's value is in no answer and no audit event; a second pending
// erasure of a subject is a conflict; the list is newest first; what the
// lifecycle writes shows as the view (entries = audit_entries +
// executions); no DELETE.
func TestErasuresAPI(t *testing.T) {
	e := newErasureEnv(t, nil)
	const erin = "Erin.Example@example.com"
	body := func(kind, subject, reason string) map[string]any {
		return map[string]any{"subject": map[string]any{kind: subject}, "reason": reason}
	}

	// Not owners: 403, nothing stored.
	e.do(t, "POST", e.path, e.bob, body("user_id", erin, "GDPR art. 17 request 4411"), 403)
	e.do(t, "POST", e.path, e.alice, body("user_id", erin, "GDPR art. 17 request 4411"), 403)
	e.do(t, "POST", "/api/v1/orgs/not-a-uuid/erasures", e.carol, body("user_id", erin, "r"), 400)
	if all, err := cpstate.Erasures(e.n.state, mustUUID(t, e.org)); err != nil || len(all) != 0 {
		t.Fatalf("refused erasures stored: %+v, %v", all, err)
	}

	// The owner.
	env := e.do(t, "POST", e.path, e.carol, body("user_id", erin, "  GDPR art. 17 request 4411 "), 202)
	if bytes.Contains(bytes.ToLower(env.raw), []byte(strings.ToLower(erin))) {
		t.Fatalf("the answer shows the subject: %s", env.raw)
	}
	first := decodeErasure(t, env)
	if first.Status != cpstate.ErasurePending || !pseudonymRE.MatchString(first.Pseudonym) || first.SubjectKind != cpstate.ErasureUserID ||
		first.Reason != "GDPR art. 17 request 4411" || first.OrgID.String() != e.org || first.CreatedBy == "" || !first.CreatedAt.Equal(e.now()) ||
		first.DoneAt != nil || first.Entries != 0 || first.StatusMsg != "" {
		t.Fatalf("created: %s", env.raw)
	}
	stored, err := cpstate.Erasures(e.n.state, mustUUID(t, e.org))
	if err != nil || len(stored) != 1 || stored[0].Subject != erin || stored[0].Pseudonym != first.Pseudonym || stored[0].ID != first.ID {
		t.Fatalf("stored: %+v, %v", stored, err)
	}

	// One SETTING event, CREATED, with the view, never the value.
	evs := settingEvents(t, e.lifecycleEnv, first.ID.String())
	if len(evs) != 1 || evs[0].Action != schemas.AuditActionCreated || evs[0].ResourceDisplay == nil ||
		*evs[0].ResourceDisplay != "erasure "+first.ID.String() {
		t.Fatalf("events: %+v", evs)
	}
	var data struct {
		Before *json.RawMessage `json:"before"`
		After  erasureAnswer    `json:"after"`
	}
	if err := json.Unmarshal(evs[0].Data, &data); err != nil || data.Before != nil || data.After.Pseudonym != first.Pseudonym ||
		data.After.Status != cpstate.ErasurePending || data.After.Subject != nil {
		t.Fatalf("the event's data: %s (%v)", evs[0].Data, err)
	}
	notInStream(t, e.lifecycleEnv, erin)

	// A second pending erasure of the subject: 409 naming the first; the
	// same value as another kind is another subject.
	e.advance(time.Minute)
	events := len(streamRaw(t, e.lifecycleEnv))
	env = e.do(t, "POST", e.path, e.carol, body("user_id", erin, "again"), 409)
	if !strings.Contains(env.Msg, first.ID.String()) || !strings.HasPrefix(env.Msg, "subject:") || strings.Contains(strings.ToLower(env.Msg), strings.ToLower(erin)) {
		t.Fatalf("duplicate: %q", env.Msg)
	}
	if n := len(streamRaw(t, e.lifecycleEnv)); n != events {
		t.Fatalf("a refused erasure was recorded: %d events, were %d", n, events)
	}
	second := decodeErasure(t, e.do(t, "POST", e.path, bootKey, body("principal_id", erin, "the platform's own request"), 202))
	if second.SubjectKind != cpstate.ErasurePrincipalID || second.Pseudonym == first.Pseudonym || !pseudonymRE.MatchString(second.Pseudonym) {
		t.Fatalf("the platform admin's: %+v", second)
	}
	e.advance(time.Minute)
	third := decodeErasure(t, e.do(t, "POST", e.path, e.carol, body("user_id", strings.Repeat("é", 128), "at the limit"), 202))
	notInStream(t, e.lifecycleEnv, erin, strings.Repeat("é", 128))

	// Reads: owners, admins, the platform admin; newest first.
	items := e.list(t, e.bob)
	if len(items) != 3 || items[0].ID != third.ID || items[1].ID != second.ID || items[2].ID != first.ID {
		t.Fatalf("list: %+v", items)
	}
	e.list(t, bootKey)
	e.list(t, e.carol)
	e.do(t, "GET", e.path, e.alice, nil, 403)
	one := e.path + "/" + first.ID.String()
	if got := decodeErasure(t, e.do(t, "GET", one, e.bob, nil, 200)); got != first {
		t.Fatalf("get: %+v\nwant %+v", got, first)
	}
	e.do(t, "GET", one, e.alice, nil, 403)
	e.do(t, "GET", e.path+"/00000000-0000-4000-8000-000000000000", e.bob, nil, 404)
	e.do(t, "GET", e.path+"/nope", e.bob, nil, 400)

	// No DELETE: an erasure cannot be undone.
	req, _ := http.NewRequest("DELETE", e.base+one, nil)
	req.Header.Set("Authorization", "Bearer "+e.carol)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("DELETE: %d", resp.StatusCode)
	}

	// The lifecycle's work list, then what it writes once done.
	pending, err := cpstate.PendingErasures(e.n.state)
	if err != nil || len(pending) != 3 {
		t.Fatalf("pending: %+v, %v", pending, err)
	}
	key := cpstate.ErasureKey(e.org, first.ID.String())
	var rec cpstate.Erasure
	rev, err := e.n.state.Get(key, &rec)
	if err != nil {
		t.Fatal(err)
	}
	done := e.now().Add(time.Minute)
	rec.Subject, rec.Status, rec.AuditEntries, rec.Executions, rec.DoneAt = "", cpstate.ErasureDone, 5, 2, &done
	if err := e.n.state.Commit(context.Background(), []cpstate.Write{cpstate.SetKey(key, rec, rev)}, nil); err != nil {
		t.Fatal(err)
	}
	got := decodeErasure(t, e.do(t, "GET", one, e.carol, nil, 200))
	if got.Status != cpstate.ErasureDone || got.Entries != 7 || got.AuditEntries != 5 || got.Executions != 2 || got.DoneAt == nil || !got.DoneAt.Equal(done) {
		t.Fatalf("done: %+v", got)
	}
	if pending, _ := cpstate.PendingErasures(e.n.state); len(pending) != 2 {
		t.Fatalf("pending after one is done: %d", len(pending))
	}
	// Done, the subject may be erased again (entries written since).
	e.do(t, "POST", e.path, e.carol, body("user_id", erin, "new entries since"), 202)

	for _, op := range []string{"createErasure", "listErasures", "getErasure"} {
		if !e.api.checked[op] {
			t.Errorf("%s not checked", op)
		}
	}
}

// Invalid bodies: 400 naming the field, nothing stored or recorded.
func TestErasureValidation(t *testing.T) {
	e := newErasureEnv(t, nil)
	ok := map[string]any{"user_id": "dave"}
	events := len(streamRaw(t, e.lifecycleEnv))
	for _, tt := range []struct {
		body  any
		field string
	}{
		{map[string]any{}, "subject"},
		{map[string]any{"reason": "r"}, "subject"},
		{map[string]any{"subject": nil, "reason": "r"}, "subject"},
		{map[string]any{"subject": map[string]any{}, "reason": "r"}, "subject"},
		{map[string]any{"subject": "dave", "reason": "r"}, "subject"},
		{map[string]any{"subject": map[string]any{"user_id": "a", "principal_id": "b"}, "reason": "r"}, "subject"},
		{map[string]any{"subject": map[string]any{"user_id": ""}, "reason": "r"}, "subject.user_id"},
		{map[string]any{"subject": map[string]any{"user_id": "   "}, "reason": "r"}, "subject.user_id"},
		{map[string]any{"subject": map[string]any{"user_id": 7}, "reason": "r"}, "subject.user_id"},
		{map[string]any{"subject": map[string]any{"user_id": nil}, "reason": "r"}, "subject.user_id"},
		{map[string]any{"subject": map[string]any{"user_id": nil, "principal_id": "p"}, "reason": "r"}, "subject"},
		{map[string]any{"subject": []string{"dave"}, "reason": "r"}, "subject"},
		{map[string]any{"subject": map[string]any{"user_id": strings.Repeat("x", 257)}, "reason": "r"}, "subject.user_id"},
		{map[string]any{"subject": map[string]any{"user_id": strings.Repeat("é", 129)}, "reason": "r"}, "subject.user_id"},
		{map[string]any{"subject": map[string]any{"principal_id": "a\nb"}, "reason": "r"}, "subject.principal_id"},
		{map[string]any{"subject": map[string]any{"principal_id": "a\u0000b"}, "reason": "r"}, "subject.principal_id"},
		{map[string]any{"subject": map[string]any{"principal_id": "a\u0085b"}, "reason": "r"}, "subject.principal_id"},
		{map[string]any{"subject": map[string]any{"email": "d@example.com"}, "reason": "r"}, "email"},
		{map[string]any{"subject": ok}, "reason"},
		{map[string]any{"subject": ok, "reason": " \t "}, "reason"},
		{map[string]any{"subject": ok, "reason": 3}, "reason"},
		{map[string]any{"subject": ok, "reason": strings.Repeat("r", 501)}, "reason"},
		{map[string]any{"subject": ok, "reason": "Dave asked to be forgotten"}, "reason"},
		{map[string]any{"subject": ok, "reason": "r", "held": true}, "held"},
		{"", "body"},
		{"[]", "body"},
		{"null", "subject"},
	} {
		env := e.do(t, "POST", e.path, e.carol, tt.body, 400)
		if !strings.HasPrefix(env.Msg, tt.field+":") && !strings.Contains(env.Msg, tt.field) {
			t.Errorf("POST %v: %q does not name %s", tt.body, env.Msg, tt.field)
		}
		if strings.Contains(env.Msg, "d@example.com") || strings.Contains(env.Msg, "Dave") {
			t.Errorf("POST %v: %q quotes the value", tt.body, env.Msg)
		}
	}
	if all, _ := cpstate.Erasures(e.n.state, mustUUID(t, e.org)); len(all) != 0 {
		t.Fatalf("invalid erasures stored: %+v", all)
	}
	if n := len(streamRaw(t, e.lifecycleEnv)); n != events {
		t.Fatalf("invalid erasures were recorded: %d events, were %d", n, events)
	}
	// At the bounds: 500 characters (not bytes), 256 bytes; a subject
	// inside a longer word of the reason is not quoted by it.
	e.do(t, "POST", e.path, e.carol, map[string]any{"subject": ok, "reason": strings.Repeat("é", 500)}, 202)
	e.do(t, "POST", e.path, e.carol, map[string]any{"subject": map[string]any{"principal_id": "7"}, "reason": "ticket 1701"}, 202)
	e.do(t, "POST", e.path, e.carol, map[string]any{"subject": map[string]any{"principal_id": strings.Repeat("p", 256)}, "reason": "r"}, 202)
}

// With a SubjectHolds: a subject with held entries is refused (409 naming
// the hold, nothing stored or recorded); a failing check is a 503 that
// does not quote the value; without an active hold, nothing is checked.
func TestErasureRefusedByLegalHold(t *testing.T) {
	holds := &fakeSubjectHolds{held: map[string]bool{}}
	e := newErasureEnv(t, holds)
	body := func(subject string) map[string]any {
		return map[string]any{"subject": map[string]any{"user_id": subject}, "reason": "GDPR"}
	}
	// No active hold: the checker is not asked.
	holds.hold("frank")
	e.do(t, "POST", e.path, e.carol, body("grace"), 202)
	if holds.calls.Load() != 0 {
		t.Fatal("checked without an active hold")
	}

	hold := decodeHold(t, e.do(t, "POST", "/api/v1/orgs/"+e.org+"/legal_holds", e.bob, map[string]any{"name": "dispute", "q": "actor:frank"}, 201))
	events := len(streamRaw(t, e.lifecycleEnv))
	env := e.do(t, "POST", e.path, e.carol, body("frank"), 409)
	want := `subject: legal hold "dispute" (` + hold.ID.String() + `) holds 3 entries of this subject; release it first`
	if env.Msg != want {
		t.Fatalf("held: %q\nwant %q", env.Msg, want)
	}
	holds.mu.Lock()
	seen := holds.seen
	holds.mu.Unlock()
	if len(seen) != 1 || seen[0].ID != hold.ID {
		t.Fatalf("the checker was given %+v", seen)
	}
	env = e.do(t, "POST", e.path, e.carol, body("broken"), 503)
	if strings.Contains(env.Msg, "broken") || !strings.Contains(env.Msg, "[subject]") || !strings.HasPrefix(env.Msg, "subject:") {
		t.Fatalf("a failed check: %q", env.Msg)
	}
	if n := len(streamRaw(t, e.lifecycleEnv)); n != events {
		t.Fatalf("refused erasures were recorded: %d events, were %d", n, events)
	}
	if all, _ := cpstate.Erasures(e.n.state, mustUUID(t, e.org)); len(all) != 1 {
		t.Fatalf("refused erasures stored: %+v", all)
	}
	// Not held: accepted.
	e.do(t, "POST", e.path, e.carol, body("heidi"), 202)

	// Released, the hold no longer refuses.
	e.do(t, "DELETE", "/api/v1/orgs/"+e.org+"/legal_holds/"+hold.ID.String(), e.bob, nil, 200)
	calls := holds.calls.Load()
	e.do(t, "POST", e.path, e.carol, body("frank"), 202)
	if holds.calls.Load() != calls {
		t.Fatal("checked with released holds only")
	}
}

// The cpstate listings across organizations.
func TestPendingErasuresAcrossOrgs(t *testing.T) {
	e := newErasureEnv(t, nil)
	other := e.n.must(201, "POST", "/api/v1/orgs", bootKey, map[string]any{"name": "globex"}).field("id")
	e.do(t, "POST", e.path, e.carol, map[string]any{"subject": map[string]any{"user_id": "ivan"}, "reason": "r"}, 202)
	e.do(t, "POST", "/api/v1/orgs/"+other+"/erasures", bootKey, map[string]any{"subject": map[string]any{"user_id": "ivan"}, "reason": "r"}, 202)
	// An owner of one organization is nobody in another.
	e.do(t, "POST", "/api/v1/orgs/"+other+"/erasures", e.carol, map[string]any{"subject": map[string]any{"user_id": "judy"}, "reason": "r"}, 403)
	pending, err := cpstate.PendingErasures(e.n.state)
	if err != nil || len(pending) != 2 || pending[0].OrgID == pending[1].OrgID {
		t.Fatalf("pending: %+v, %v", pending, err)
	}
	for _, org := range []string{e.org, other} {
		if l, err := cpstate.Erasures(e.n.state, mustUUID(t, org)); err != nil || len(l) != 1 || l[0].OrgID.String() != org || l[0].Subject != "ivan" {
			t.Fatalf("%s: %+v, %v", org, l, err)
		}
	}
}
