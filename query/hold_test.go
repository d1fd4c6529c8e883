package query_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/auditrail/auditrail/controlplane/cptest"
	"github.com/auditrail/auditrail/ingest"
	"github.com/auditrail/auditrail/internal/auditstore"
	"github.com/auditrail/auditrail/internal/auditstore/sqlite"
	"github.com/auditrail/auditrail/internal/auditstore/storetest"
	"github.com/auditrail/auditrail/internal/httpapi"
	"github.com/auditrail/auditrail/internal/natsx"
	"github.com/auditrail/auditrail/internal/testenv"
	"github.com/auditrail/auditrail/producers"
	"github.com/auditrail/auditrail/query"
	"github.com/auditrail/auditrail/schemas"
)

// holdEnv is the query server with live streams, exports and bulk-read
// records over the real control plane (its state mirror decides who may
// read, as in production), a SQLite store fed by a running ingester, on a
// real listener.
type holdEnv struct {
	*liveEnv
	cp    *cptest.ControlPlane
	org   uuid.UUID
	store *sqlite.Store
}

// newHoldEnv starts the env; wrap, when given, is the store the query
// server reads (around the SQLite store).
func newHoldEnv(t *testing.T, tune func(*query.Config, *query.LiveConfig), wrap ...func(*sqlite.Store) query.Reader) *holdEnv {
	t.Helper()
	_, nc, js := testenv.NATS(t)
	ctx, cancel := context.WithCancel(context.Background())
	e := &holdEnv{cp: cptest.Start(t, nc, js, "cp_hold_test")}
	pub, err := producers.New(nc, producers.DefaultConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if e.store, err = sqlite.Open(ctx, filepath.Join(t.TempDir(), "audit.db")); err != nil {
		t.Fatal(err)
	}
	in, err := ingest.NewAudit(nc, e.store, ingest.DefaultConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	ingestDone := make(chan error, 1)
	go func() { ingestDone <- in.Run(ctx) }()
	cfg := query.DefaultConfig()
	cfg.CursorKeys = [][]byte{[]byte("0123456789abcdef0123456789abcdef")}
	lc := query.DefaultLiveConfig()
	lc.Heartbeat, lc.ConsumerInactive = 200*time.Millisecond, time.Second
	if tune != nil {
		tune(&cfg, &lc)
	}
	var reader query.Reader = e.store
	for _, w := range wrap {
		reader = w(e.store)
	}
	qs, err := query.New(cfg, reader, e.cp.Access, nil)
	if err != nil {
		t.Fatal(err)
	}
	qs.RecordExportsWith(producers.NewRecorder(pub, 5*time.Second))
	durable := ingest.DefaultConfig().Durable
	qs.ServeFeedsWith(query.FeedSource{Watermarks: natsx.NewWatermarks(js, 0), AuditDurable: durable, ExecutionDurable: ingest.ExecutionDurableFor(durable)})
	app := httpapi.NewApp(nil)
	e.cp.Service.Register(app)
	qs.Register(app)
	e.liveEnv = serveLiveEnv(t, ctx, js, pub, qs, lc, app, func() {
		cancel()
		<-ingestDone
		_ = e.store.Close()
	})
	e.org = uuid.MustParse(e.call(t, "POST", "/api/v1/orgs", cptest.Boot, `{"name": "Acme"}`, 201)["id"].(string))
	return e
}

// call makes a request and answers its data; any other status than want
// fails the test.
func (e *holdEnv) call(t *testing.T, method, path, key, body string, want int) map[string]any {
	t.Helper()
	req, err := http.NewRequest(method, e.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := e.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		t.Fatalf("%s %s: %d %s, want %d", method, path, resp.StatusCode, raw, want)
	}
	var env struct {
		Data map[string]any `json:"data"`
	}
	_ = json.Unmarshal(raw, &env)
	return env.Data
}

// member adds user to the org and answers a key of theirs and its id,
// once the query's mirror accepts it.
func (e *holdEnv) member(t *testing.T, user string) (key, id string) {
	t.Helper()
	org := "/api/v1/orgs/" + e.org.String()
	e.call(t, "PUT", org+"/members/"+user, cptest.Boot, `{"role": "member", "display_name": "`+user+`"}`, 201)
	d := e.call(t, "POST", org+"/api_keys", cptest.Boot, `{"name": "k", "user_id": "`+user+`"}`, 201)
	key, id = d["key"].(string), d["id"].(string)
	testenv.Eventually(t, 10*time.Second, user+"'s key accepted", func() bool {
		req, _ := http.NewRequest("GET", e.url+org+"/audit_logs?limit=1", nil)
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := e.client.Do(req)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
	return key, id
}

// endEvent waits (up to within) for the named event that ends c and
// answers its data and how long it took.
func endEvent(t *testing.T, c *sseConn, name string, within time.Duration) (map[string]any, time.Duration) {
	t.Helper()
	start := time.Now()
	deadline := time.After(within)
	for {
		select {
		case m := <-c.msgs:
			if m.event == "" {
				continue // an entry sent before the revocation was seen
			}
			if m.event != name {
				t.Fatalf("event %q (%s), want %q", m.event, m.data, name)
			}
			var d map[string]any
			if err := json.Unmarshal([]byte(m.data), &d); err != nil {
				t.Fatalf("event %s: data %q: %v", name, m.data, err)
			}
			select {
			case <-c.done:
			case <-time.After(5 * time.Second):
				t.Fatal("the stream stays open after its end event")
			}
			return d, time.Since(start)
		case <-c.done:
			select {
			case m := <-c.msgs: // read before the end: select chose at random
				c.msgs <- m
				continue
			default:
			}
			t.Fatalf("the stream ended without an %q event", name)
		case <-deadline:
			t.Fatalf("no %q event within %s", name, within)
		}
	}
}

// A live stream does not outlive its caller's right to read: a key deleted
// or disabled, a member removed from the org, a JWT past its exp — each
// ends the open stream with an "error" event (401 or 403) within 5 s, and
// nothing published afterwards reaches it; the control-plane change ends
// it at once, not at the next periodic check.
func TestStreamEndsWhenTheCallerMayNoLongerRead(t *testing.T) {
	// Periodic checks every 5 s (the bound): the changes must be noticed
	// sooner than that, through the state's change notification.
	e := newHoldEnv(t, func(_ *query.Config, lc *query.LiveConfig) { lc.Recheck = 5 * time.Second })
	org := "/api/v1/orgs/" + e.org.String()
	for _, tc := range []struct {
		name   string
		code   float64
		within time.Duration
		setup  func(t *testing.T, user string) (key string, revoke func())
	}{
		{"key deleted", 401, 2 * time.Second, func(t *testing.T, user string) (string, func()) {
			key, id := e.member(t, user)
			return key, func() { e.call(t, "DELETE", org+"/api_keys/"+id, cptest.Boot, "", 200) }
		}},
		{"key disabled", 401, 2 * time.Second, func(t *testing.T, user string) (string, func()) {
			key, id := e.member(t, user)
			return key, func() { e.call(t, "POST", org+"/api_keys/"+id+"/disable", cptest.Boot, "", 200) }
		}},
		{"member removed", 403, 2 * time.Second, func(t *testing.T, user string) (string, func()) {
			key, _ := e.member(t, user)
			return key, func() { e.call(t, "DELETE", org+"/members/"+user, cptest.Boot, "", 200) }
		}},
		{"JWT expired", 401, 5*time.Second + 1500*time.Millisecond, func(t *testing.T, user string) (string, func()) {
			e.member(t, user)
			// exp has a resolution of seconds: at least 2 s from now.
			exp := time.Now().Truncate(time.Second).Add(3 * time.Second)
			return e.cp.JWT(t, user, exp), func() { time.Sleep(time.Until(exp)) }
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			user := strings.ReplaceAll(tc.name, " ", "-")
			key, revoke := tc.setup(t, user)
			c := e.open(t, streamPath(e.org, nil), key)
			e.publish(t, event(e.org, nil))
			if m := c.next(t); m.event != "" {
				t.Fatalf("first message: event %q %s", m.event, m.data)
			}
			revoke()
			d, took := endEvent(t, c, query.EventError, tc.within)
			if d["code"] != tc.code || d["msg"] == "" {
				t.Fatalf("error event %v, want code %v and a message", d, tc.code)
			}
			t.Logf("%s: the stream ended %s after the revocation", tc.name, took.Round(time.Millisecond))
			testenv.Eventually(t, 10*time.Second, "the slot given back", func() bool { return e.qs.OpenStreams() == 0 })
			// A reconnect with the same credential is refused.
			if _, status, body := e.try(t, streamPath(e.org, nil), key); status != int(tc.code) {
				t.Fatalf("reconnect: %d %s", status, body)
			}
		})
	}
}

// A stream ends with a "reconnect" event at its lifetime; the client
// reconnects with Last-Event-ID (authenticating again) and loses nothing.
func TestStreamLifetime(t *testing.T) {
	e := newHoldEnv(t, func(_ *query.Config, lc *query.LiveConfig) { lc.MaxLifetime = 1500 * time.Millisecond })
	key, _ := e.member(t, "alice")
	c := e.open(t, streamPath(e.org, nil), key)
	first := event(e.org, nil)
	e.publish(t, first)
	if m := c.next(t); m.id != first.EventID.String() {
		t.Fatalf("first message %+v", m)
	}
	d, took := endEvent(t, c, query.EventReconnect, 5*time.Second)
	if msg, _ := d["msg"].(string); !strings.Contains(msg, "Last-Event-ID") {
		t.Fatalf("reconnect event %v", d)
	}
	if took > 3*time.Second {
		t.Fatalf("the stream lasted %s past its lifetime", took)
	}
	missed := event(e.org, nil)
	e.publish(t, missed)
	e.listed(t, key, "/api/v1/orgs/"+e.org.String()+"/audit_logs", missed.EventID.String())
	again := e.open(t, streamPath(e.org, nil), key, "Last-Event-ID", first.EventID.String())
	for {
		m := again.next(t)
		if m.id == missed.EventID.String() {
			break
		}
	}
}

// slowDialer dials with a small receive buffer, so that a client that
// stops reading holds the server's writes within a few pages.
var slowDialer = &net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
	var serr error
	err := rc.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
	return errors.Join(err, serr)
}}

// gatedStore holds an export's pages until the gate opens: the export is
// in progress (its status and headers sent), whatever the sockets buffer.
type gatedStore struct {
	*sqlite.Store
	gate chan struct{}
}

func (g gatedStore) ListAudit(ctx context.Context, q auditstore.Query) (auditstore.Page, error) {
	if q.Limit == query.ExportPageSize {
		select {
		case <-g.gate:
		case <-ctx.Done():
			return auditstore.Page{}, ctx.Err()
		}
	}
	return g.Store.ListAudit(ctx, q)
}

// An export in progress is cut (the body does not complete: no final
// chunk) once its caller's key is deleted: the pages after the revocation
// never leave.
func TestExportCutWhenTheKeyIsDeleted(t *testing.T) {
	gate := make(chan struct{})
	e := newHoldEnv(t, func(c *query.Config, _ *query.LiveConfig) { c.Recheck = 500 * time.Millisecond },
		func(st *sqlite.Store) query.Reader { return gatedStore{Store: st, gate: gate} })
	key, id := e.member(t, "alice")
	const n = 100
	evs := make([]schemas.AuditEvent, n)
	base := time.Now().Add(-2 * time.Hour)
	for i := range evs {
		evs[i] = storetest.Event(e.org, base.Add(time.Duration(i)*time.Millisecond))
	}
	if err := e.store.WriteAudit(context.Background(), evs); err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest("GET", e.url+"/api/v1/orgs/"+e.org.String()+"/audit_logs/export?format=csv", nil)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := e.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("export: %d", resp.StatusCode)
	}
	r := bufio.NewReader(resp.Body)
	if _, err := r.ReadString('\n'); err != nil { // the header row
		t.Fatal(err)
	}
	e.call(t, "DELETE", "/api/v1/orgs/"+e.org.String()+"/api_keys/"+id, cptest.Boot, "", 200)
	time.Sleep(time.Second) // past a re-check
	close(gate)
	rows := 0
	for {
		_, err := r.ReadString('\n')
		if err == io.EOF {
			t.Fatalf("the export completed (%d rows) after its key was deleted", rows)
		}
		if err != nil {
			t.Logf("the export was cut after %d of %d rows: %v", rows, n, err)
			break
		}
		rows++
	}
	if rows > 0 {
		t.Fatalf("%d lines left after the revocation", rows)
	}
	testenv.Eventually(t, 10*time.Second, "the export's slot given back", func() bool { return e.qs.OpenExports() == 0 })
}

// A listing that waits (wait_for) authorizes again when the wait is over:
// a member removed while it waited gets 403, not the page.
func TestWaitForAfterRevocation(t *testing.T) {
	e := newHoldEnv(t, func(c *query.Config, _ *query.LiveConfig) { c.WaitForMax = 2 * time.Second })
	key, _ := e.member(t, "alice")
	path := "/api/v1/orgs/" + e.org.String() + "/audit_logs?wait_for=" + uuid.NewString()
	status := make(chan int, 1)
	go func() {
		req, _ := http.NewRequest("GET", e.url+path, nil)
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := e.client.Do(req)
		if err != nil {
			status <- 0
			return
		}
		resp.Body.Close()
		status <- resp.StatusCode
	}()
	time.Sleep(300 * time.Millisecond)
	e.call(t, "DELETE", "/api/v1/orgs/"+e.org.String()+"/members/alice", cptest.Boot, "", 200)
	if got := <-status; got != 403 {
		t.Fatalf("a wait that outlived the membership: %d, want 403", got)
	}
}

// Exports have a share per credential and per organization: beyond it,
// 429 with Retry-After.
func TestExportCapPerCredential(t *testing.T) {
	t.Parallel() // among the slowest of the package: they share nothing
	e := newHoldEnv(t, func(c *query.Config, _ *query.LiveConfig) {
		c.Exports = query.Limits{Max: 10, PerOrg: 2, PerCredential: 1}
		// The first export is held open (its client reads nothing) while
		// the others are asked: on a loaded machine that took longer than
		// the default 10 s a page, and the held export ended early.
		c.StoreTimeout = 2 * time.Minute
	})
	key, _ := e.member(t, "alice")
	key2, _ := e.member(t, "bob")
	evs := make([]schemas.AuditEvent, 10000)
	for i := range evs {
		evs[i] = storetest.Event(e.org, time.Now().Add(-time.Hour+time.Duration(i)*time.Millisecond))
	}
	if err := e.store.WriteAudit(context.Background(), evs); err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Transport: &http.Transport{DialContext: slowDialer.DialContext}}
	path := e.url + "/api/v1/orgs/" + e.org.String() + "/audit_logs/export?format=jsonl"
	get := func(key string) *http.Response {
		req, _ := http.NewRequest("GET", path, nil)
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	// Held open: nothing read past the headers.
	if r := get(key); r.StatusCode != 200 {
		t.Fatalf("first export: %d", r.StatusCode)
	}
	r := get(key)
	b, _ := io.ReadAll(r.Body)
	if r.StatusCode != 429 || r.Header.Get("Retry-After") == "" || !strings.Contains(string(b), "with this credential (1)") {
		t.Fatalf("second export of the key: %d %q %s", r.StatusCode, r.Header.Get("Retry-After"), b)
	}
	if r := get(key2); r.StatusCode != 200 {
		t.Fatalf("bob's export: %d", r.StatusCode)
	}
	if r := get(cptest.Boot); r.StatusCode != 200 {
		t.Fatalf("the platform admin's export in a full org: %d", r.StatusCode)
	}
	if n := e.qs.OpenExports(); n != 3 {
		t.Fatalf("%d exports open, want 3", n)
	}
}

// A bulk read of the trail leaves an audit entry with the reader, its
// client_ip and the filters: an export, a feed read from its start (or
// from a since older than the bulk-read age), a stream resumed from far
// back. A feed page after the first (a cursor) and a feed from a recent
// since do not.
func TestBulkReadsRecorded(t *testing.T) {
	e := newHoldEnv(t, nil)
	key, _ := e.member(t, "alice")
	org := "/api/v1/orgs/" + e.org.String()
	old := storetest.Event(e.org, time.Now().Add(-3*time.Hour))
	old.EventID = storetest.V7At(old.Timestamp)
	if err := e.store.WriteAudit(context.Background(), []schemas.AuditEvent{old}); err != nil {
		t.Fatal(err)
	}
	cons, err := e.js.OrderedConsumer(context.Background(), schemas.StreamEvents, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{schemas.EventSubject(e.org.String(), schemas.KindAudit)}})
	if err != nil {
		t.Fatal(err)
	}
	// next answers the next read recorded (skipping the control plane's own).
	next := func() (schemas.AuditEvent, map[string]map[string]any) {
		t.Helper()
		for {
			msg, err := cons.Next(jetstream.FetchMaxWait(5 * time.Second))
			if err != nil {
				t.Fatalf("no read recorded: %v", err)
			}
			ev, err := schemas.UnmarshalAuditEvent(msg.Data())
			if err != nil {
				t.Fatal(err)
			}
			var d struct {
				After map[string]map[string]any `json:"after"`
			}
			_ = json.Unmarshal(ev.Data, &d)
			for _, how := range []string{"export", "feed", "stream"} {
				if d.After[how] != nil {
					return ev, d.After
				}
			}
		}
	}
	check := func(how, want string) map[string]any {
		t.Helper()
		ev, after := next()
		x := after[how]
		if x == nil {
			t.Fatalf("recorded %v, want a %s", after, how)
		}
		if ev.UserID == nil || *ev.UserID != "alice" || ev.ClientIP == nil || *ev.ClientIP != "127.0.0.1" {
			t.Fatalf("%s recorded as user %v from %v", how, ev.UserID, ev.ClientIP)
		}
		if ev.ResourceDisplay == nil || !strings.Contains(*ev.ResourceDisplay, want) {
			t.Fatalf("%s: resource_display %v, want %q", how, ev.ResourceDisplay, want)
		}
		return x
	}

	e.call(t, "GET", org+"/audit_logs/export?format=csv&q=action:CREATED", key, "", 200)
	if f := check("export", "export (csv)")["filters"].(map[string]any); f["q"] != "action:CREATED" {
		t.Fatalf("export filters %v", f)
	}
	d := e.call(t, "GET", org+"/audit_logs/feed?limit=1", key, "", 200)
	check("feed", "from the start")
	e.call(t, "GET", org+"/audit_logs/feed?limit=1&cursor="+d["next_cursor"].(string), key, "", 200)
	e.call(t, "GET", org+"/audit_logs/feed?since="+time.Now().Add(-time.Minute).UTC().Format(time.RFC3339), key, "", 200)
	since := time.Now().Add(-48 * time.Hour).UTC().Format(time.RFC3339)
	e.call(t, "GET", org+"/tool_executions/feed?since="+since, key, "", 200)
	if x := check("feed", "tool_executions feed read from "+since); x["route"] != "tool_executions" {
		t.Fatalf("feed %v", x)
	}
	// A stream resumed from a recent entry is not a bulk read; from the
	// entry three hours back it is.
	recent := event(e.org, nil)
	e.publish(t, recent)
	e.listed(t, key, org+"/audit_logs", recent.EventID.String())
	e.open(t, streamPath(e.org, nil), key, "Last-Event-ID", recent.EventID.String()).close()
	e.open(t, streamPath(e.org, nil), key, "Last-Event-ID", old.EventID.String()).close()
	if x := check("stream", "stream resumed from"); x["last_event_id"] != old.EventID.String() {
		t.Fatalf("stream %v", x)
	}
}
