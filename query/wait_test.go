package query_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/google/uuid"

	"github.com/auditrail/auditrail/controlplane/cptest"
	"github.com/auditrail/auditrail/internal/auditstore"
	"github.com/auditrail/auditrail/internal/auditstore/sqlite"
	"github.com/auditrail/auditrail/internal/auditstore/storetest"
	"github.com/auditrail/auditrail/internal/httpapi"
	"github.com/auditrail/auditrail/internal/testenv"
	"github.com/auditrail/auditrail/query"
	"github.com/auditrail/auditrail/schemas"
)

// waitEnv is a query server over a real SQLite store, with the real
// control plane (on an embedded NATS) deciding who may read what.
type waitEnv struct {
	t     *testing.T
	app   *fiber.App
	qs    *query.Server
	store *sqlite.Store
	boot  string
	// org and project hold the events; alice is a member of another org only.
	org, project, otherProject, otherOrg uuid.UUID
	alice                                string
}

const waitBound = 1500 * time.Millisecond

func newWaitEnv(t *testing.T) *waitEnv {
	t.Helper()
	_, nc, js := testenv.NATS(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	cp := cptest.Start(t, nc, js, "cp_wait_test")
	e := &waitEnv{t: t, boot: cptest.Boot}
	var err error
	if e.store, err = sqlite.Open(ctx, filepath.Join(t.TempDir(), "audit.db")); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.store.Close() })
	cfg := query.DefaultConfig()
	cfg.CursorKeys, cfg.WaitForMax = [][]byte{[]byte("0123456789abcdef0123456789abcdef")}, waitBound
	qs, err := query.New(cfg, e.store, cp.Access, nil)
	if err != nil {
		t.Fatal(err)
	}
	e.qs = qs
	e.app = httpapi.NewApp(nil)
	cp.Service.Register(e.app)
	qs.Register(e.app)

	e.org = e.create("/api/v1/orgs", map[string]any{"name": "Acme"})
	e.project = e.create("/api/v1/orgs/"+e.org.String()+"/projects", map[string]any{"name": "p"})
	e.otherProject = e.create("/api/v1/orgs/"+e.org.String()+"/projects", map[string]any{"name": "q"})
	e.otherOrg = e.create("/api/v1/orgs", map[string]any{"name": "Other"})
	other := "/api/v1/orgs/" + e.otherOrg.String()
	if r := e.call("PUT", other+"/members/alice", e.boot, `{"role": "member", "display_name": "Alice"}`); r.status != 200 && r.status != 201 {
		t.Fatalf("add alice: %d %s", r.status, r.raw)
	}
	r := e.call("POST", other+"/api_keys", e.boot, `{"name": "a", "user_id": "alice"}`)
	if r.status != 201 {
		t.Fatalf("alice's key: %d %s", r.status, r.raw)
	}
	e.alice = r.data()["key"].(string)
	// The key works once the access mirror has it.
	var last string
	testenv.Eventually(t, 10*time.Second, func() string { return "alice reads her own org: " + last }, func() bool {
		r := e.call("GET", other+"/audit_logs", e.alice, "")
		last = fmt.Sprintf("%d %s", r.status, r.raw)
		return r.status == 200
	})
	return e
}

type waitReply struct {
	status  int
	header  http.Header
	raw     []byte
	body    map[string]any
	elapsed time.Duration
}

func (r waitReply) data() map[string]any { d, _ := r.body["data"].(map[string]any); return d }

func (r waitReply) msg() string { s, _ := r.body["msg"].(string); return s }

// ids returns the event ids of the items, in order.
func (r waitReply) ids() []string {
	var out []string
	items, _ := r.data()["items"].([]any)
	for _, it := range items {
		out = append(out, it.(map[string]any)["event_id"].(string))
	}
	return out
}

func (e *waitEnv) call(method, path, key, body string) waitReply {
	e.t.Helper()
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	start := time.Now()
	resp, err := e.app.Test(req, -1)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	r := waitReply{status: resp.StatusCode, header: resp.Header, raw: raw, elapsed: time.Since(start)}
	if err := json.Unmarshal(raw, &r.body); err != nil {
		e.t.Fatalf("%s %s: %d, not JSON: %s", method, path, resp.StatusCode, raw)
	}
	return r
}

func (e *waitEnv) create(path string, body map[string]any) uuid.UUID {
	e.t.Helper()
	b, _ := json.Marshal(body)
	r := e.call("POST", path, e.boot, string(b))
	if r.status != 201 {
		e.t.Fatalf("POST %s: %d %s", path, r.status, r.raw)
	}
	return uuid.MustParse(r.data()["id"].(string))
}

// audit and execution return an event of kind audit or execution, of org
// and project (nil: none), with a UUIDv7 id of now, and the function that
// stores it.
func (e *waitEnv) audit(org uuid.UUID, project *uuid.UUID) (uuid.UUID, func() error) {
	ev := storetest.Event(org, time.Now())
	ev.EventID, ev.ProjectID = storetest.V7At(time.Now()), project
	return ev.EventID, func() error { return e.store.WriteAudit(context.Background(), []schemas.AuditEvent{ev}) }
}

func (e *waitEnv) execution(org uuid.UUID, project *uuid.UUID) (uuid.UUID, func() error) {
	id := uuid.Must(uuid.NewV7())
	now := auditstore.Millis(time.Now())
	ev := schemas.ExecutionEvent{EventID: id.String(), ExecutionID: id.String(), OrganizationID: org.String(), UserID: "u1",
		Tool: schemas.ToolRef{Toolkit: "DocumentDbToolkit", Name: "CountDocuments", Version: "0.4.0"}, StartedAt: now, EndedAt: now,
		Success: true, ExecutionCode: "OK"}
	if project != nil {
		ev.ProjectID = project.String()
	}
	return id, func() error { return e.store.WriteExecutions(context.Background(), []schemas.ExecutionEvent{ev}) }
}

// A listing with wait_for answers as soon as the event is stored (written
// here ~300 ms after the request started), with the event as its first item
// and Auditrail-Wait-For: found; an event that is never stored in that
// listing (not written, of another org or project, of the other table)
// answers after the bound with timeout and the listing as usual.
func TestWaitFor(t *testing.T) {
	e := newWaitEnv(t)
	org, project := e.org.String(), e.project.String()
	orgAudit := "/api/v1/orgs/" + org + "/audit_logs"
	projectAudit := "/api/v1/orgs/" + org + "/projects/" + project + "/audit_logs"
	orgExecs := "/api/v1/orgs/" + org + "/tool_executions"
	projectExecs := "/api/v1/orgs/" + org + "/projects/" + project + "/tool_executions"
	p, q := &e.project, &e.otherProject
	const late = 300 * time.Millisecond
	tests := []struct {
		name  string
		path  string
		event func() (uuid.UUID, func() error)
		// delay before the event is written (negative: never)
		delay time.Duration
		found bool
	}{
		{"audit, org", orgAudit, func() (uuid.UUID, func() error) { return e.audit(e.org, nil) }, late, true},
		{"audit, project", projectAudit, func() (uuid.UUID, func() error) { return e.audit(e.org, p) }, late, true},
		{"execution, org", orgExecs, func() (uuid.UUID, func() error) { return e.execution(e.org, p) }, late, true},
		{"execution, project", projectExecs, func() (uuid.UUID, func() error) { return e.execution(e.org, p) }, late, true},
		{"audit already stored", orgAudit, func() (uuid.UUID, func() error) { return e.audit(e.org, nil) }, 0, true},
		{"audit never stored", orgAudit, func() (uuid.UUID, func() error) { return e.audit(e.org, nil) }, -1, false},
		{"execution never stored", projectExecs, func() (uuid.UUID, func() error) { return e.execution(e.org, p) }, -1, false},
		{"audit of another org", orgAudit, func() (uuid.UUID, func() error) { return e.audit(e.otherOrg, nil) }, 0, false},
		{"execution of another org", orgExecs, func() (uuid.UUID, func() error) { return e.execution(e.otherOrg, nil) }, 0, false},
		{"audit of another project", projectAudit, func() (uuid.UUID, func() error) { return e.audit(e.org, q) }, 0, false},
		{"execution of another project", projectExecs, func() (uuid.UUID, func() error) { return e.execution(e.org, q) }, 0, false},
		{"audit id on the executions listing", orgExecs, func() (uuid.UUID, func() error) { return e.audit(e.org, p) }, 0, false},
		{"execution id on the audit listing", orgAudit, func() (uuid.UUID, func() error) { return e.execution(e.org, p) }, 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel() // the waits are independent: the bound is paid once
			id, store := tc.event()
			if tc.delay == 0 {
				if err := store(); err != nil {
					t.Fatal(err)
				}
			}
			var wg sync.WaitGroup
			if tc.delay > 0 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					time.Sleep(tc.delay)
					if err := store(); err != nil {
						t.Error(err)
					}
				}()
			}
			r := e.call("GET", tc.path+"?limit=5&wait_for="+id.String(), e.boot, "")
			wg.Wait()
			if r.status != 200 {
				t.Fatalf("%d %s", r.status, r.raw)
			}
			ids := r.ids()
			if !tc.found {
				if got := r.header.Get(query.HeaderWaitFor); got != query.WaitTimeout {
					t.Fatalf("%s: %q, want %q", query.HeaderWaitFor, got, query.WaitTimeout)
				}
				if r.elapsed < waitBound || r.elapsed > waitBound+5*time.Second { // slack for a loaded machine
					t.Fatalf("answered after %s, want about the bound %s", r.elapsed, waitBound)
				}
				for _, got := range ids {
					if got == id.String() {
						t.Fatalf("the event is listed: %s", r.raw)
					}
				}
				return
			}
			if got := r.header.Get(query.HeaderWaitFor); got != query.WaitFound {
				t.Fatalf("%s: %q, want %q (after %s)", query.HeaderWaitFor, got, query.WaitFound, r.elapsed)
			}
			// Listed (parallel cases write newer events into the same org,
			// so it need not be the first item).
			if !slices.Contains(ids, id.String()) {
				t.Fatalf("the event %s is not listed: %s", id, r.raw)
			}
			if r.elapsed < tc.delay || r.elapsed > tc.delay+700*time.Millisecond {
				t.Fatalf("answered after %s; the event was stored after %s", r.elapsed, tc.delay)
			}
			t.Logf("answered after %s; the event was stored after %s", r.elapsed, tc.delay)
		})
	}
}

// wait_for is checked like every parameter, after authentication; an
// anonymous caller, or one who may not read the listing, is answered at
// once (never made to wait, never told whether the event exists); and
// wait_for combines with filters and a cursor (it is not in the cursor's
// scope).
func TestWaitForRefusals(t *testing.T) {
	e := newWaitEnv(t)
	orgAudit := "/api/v1/orgs/" + e.org.String() + "/audit_logs"
	projectExecs := "/api/v1/orgs/" + e.org.String() + "/projects/" + e.project.String() + "/tool_executions"
	stored, write := e.audit(e.org, nil)
	if err := write(); err != nil {
		t.Fatal(err)
	}
	never := uuid.Must(uuid.NewV7()).String()
	tests := []struct {
		name, path, key string
		status          int
		msg             string
	}{
		{"malformed", orgAudit + "?wait_for=12345", e.boot, 400, "wait_for"},
		{"malformed on executions", projectExecs + "?wait_for=" + strings.ToUpper(never) + "0", e.boot, 400, "wait_for"},
		{"empty", orgAudit + "?wait_for=", e.boot, 400, "wait_for"},
		{"repeated", orgAudit + "?wait_for=" + never + "&wait_for=" + never, e.boot, 400, "wait_for"},
		{"anonymous", orgAudit + "?wait_for=" + never, "", 401, ""},
		{"anonymous, malformed", orgAudit + "?wait_for=x", "", 401, ""},
		{"wrong key", projectExecs + "?wait_for=" + never, "not-a-key", 401, ""},
		{"member of another org", orgAudit + "?wait_for=" + never, e.alice, 403, ""},
		{"member of another org, stored event", orgAudit + "?wait_for=" + stored.String(), e.alice, 403, ""},
		{"member of another org, executions", projectExecs + "?wait_for=" + never, e.alice, 403, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := e.call("GET", tc.path, tc.key, "")
			if r.status != tc.status || !strings.Contains(r.msg(), tc.msg) {
				t.Fatalf("%d %q, want %d naming %q", r.status, r.msg(), tc.status, tc.msg)
			}
			if r.elapsed > waitBound/3 {
				t.Fatalf("answered after %s: the caller was made to wait", r.elapsed)
			}
			if h := r.header.Get(query.HeaderWaitFor); h != "" {
				t.Fatalf("%s: %q on a refusal", query.HeaderWaitFor, h)
			}
		})
	}

	// With filters and a cursor: the second page of the created entries.
	for i := 0; i < 3; i++ {
		_, write := e.audit(e.org, nil)
		if err := write(); err != nil {
			t.Fatal(err)
		}
	}
	first := e.call("GET", orgAudit+"?limit=2&action=AUDIT_ACTION_CREATED", e.boot, "")
	cursor, _ := first.data()["next_cursor"].(string)
	if first.status != 200 || cursor == "" {
		t.Fatalf("first page: %d %s", first.status, first.raw)
	}
	r := e.call("GET", orgAudit+"?limit=2&action=AUDIT_ACTION_CREATED&cursor="+url.QueryEscape(cursor)+"&wait_for="+stored.String(), e.boot, "")
	if r.status != 200 || r.header.Get(query.HeaderWaitFor) != query.WaitFound || len(r.ids()) != 2 {
		t.Fatalf("second page with wait_for: %d %q %s", r.status, r.header.Get(query.HeaderWaitFor), r.raw)
	}
	if r.elapsed > waitBound/3 {
		t.Fatalf("a stored event waited %s", r.elapsed)
	}
	// Without wait_for, no header.
	if r := e.call("GET", orgAudit, e.boot, ""); r.status != 200 || r.header.Get(query.HeaderWaitFor) != "" {
		t.Fatalf("listing without wait_for: %d %q", r.status, r.header.Get(query.HeaderWaitFor))
	}
}

func TestConfigWaitForMax(t *testing.T) {
	key := [][]byte{[]byte("0123456789abcdef0123456789abcdef")}
	tests := []struct {
		name string
		max  time.Duration
		ok   bool
	}{
		{"default", query.DefaultConfig().WaitForMax, true},
		{"unset means the default", 0, true},
		{"short", 300 * time.Millisecond, true},
		{"the contract's 5 s", 5 * time.Second, true},
		{"negative", -time.Second, false},
		{"above the contract", 6 * time.Second, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := query.DefaultConfig()
			cfg.CursorKeys, cfg.WaitForMax = key, tc.max
			if err := cfg.Validate(); (err == nil) != tc.ok {
				t.Fatalf("Validate(%s) = %v", tc.max, err)
			}
		})
	}
	if got := query.DefaultConfig().WaitForMax; got != 5*time.Second {
		t.Fatalf("default bound %s, want 5s", got)
	}
}
