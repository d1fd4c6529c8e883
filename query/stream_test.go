package query_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/auditrail/auditrail/ingest"
	"github.com/auditrail/auditrail/internal/auditstore/sqlite"
	"github.com/auditrail/auditrail/internal/auth"
	"github.com/auditrail/auditrail/internal/httpapi"
	"github.com/auditrail/auditrail/internal/httpx"
	"github.com/auditrail/auditrail/internal/ratelimit"
	"github.com/auditrail/auditrail/internal/testenv"
	"github.com/auditrail/auditrail/producers"
	"github.com/auditrail/auditrail/query"
	"github.com/auditrail/auditrail/schemas"
	"github.com/auditrail/auditrail/schemas/apiitem"
	"github.com/auditrail/auditrail/schemas/openapitest"
)

// orgKeys authenticates "key-<org>" (and "key-<org>#<name>", another
// credential of the same org) as a reader of that org only, and "admin" as
// the platform admin.
type orgKeys struct{}

func (orgKeys) Authenticate(_ context.Context, cred string) (auth.Principal, error) {
	if cred == "admin" {
		return auth.Principal{ID: "bootstrap", Type: auth.TypePlatformAdmin, PlatformAdmin: true}, nil
	}
	org, ok := strings.CutPrefix(cred, "key-")
	if !ok {
		return auth.Principal{}, fmt.Errorf("%w: unknown key", auth.ErrUnauthenticated)
	}
	return auth.Principal{ID: org, Type: "API_KEY"}, nil
}

func (orgKeys) AuthorizeRead(_ context.Context, p auth.Principal, org uuid.UUID, _ *uuid.UUID) error {
	if p.PlatformAdmin {
		return nil
	}
	if id, _, _ := strings.Cut(p.ID, "#"); id != org.String() {
		return fmt.Errorf("%w: not a member of %s", auth.ErrForbidden, org)
	}
	return nil
}

// liveEnv is a query server with live streams on a real listener, over an
// embedded JetStream, a SQLite store and (unless noIngest) a running
// ingester.
type liveEnv struct {
	url    string
	js     jetstream.JetStream
	pub    *producers.Publisher
	qs     *query.Server
	stop   context.CancelFunc // ends the live streams (server shutdown)
	client *http.Client
}

// mws are middleware built on the env's JetStream (a rate limit).
func newLiveEnv(t *testing.T, noIngest bool, tune func(*query.LiveConfig), mws ...func(jetstream.JetStream) fiber.Handler) *liveEnv {
	t.Helper()
	_, nc, js := testenv.NATS(t)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	ctx, cancel := context.WithCancel(context.Background())
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "audit.db"))
	if err != nil {
		t.Fatal(err)
	}
	var ingestDone chan error
	if !noIngest {
		in, err := ingest.NewAudit(nc, st, ingest.DefaultConfig(), log)
		if err != nil {
			t.Fatal(err)
		}
		ingestDone = make(chan error, 1)
		go func() { ingestDone <- in.Run(ctx) }()
	}
	pub, err := producers.New(nc, producers.DefaultConfig(), log)
	if err != nil {
		t.Fatal(err)
	}
	cfg := query.DefaultConfig()
	cfg.CursorKeys = [][]byte{[]byte("0123456789abcdef0123456789abcdef")}
	qs, err := query.New(cfg, st, orgKeys{}, log)
	if err != nil {
		t.Fatal(err)
	}
	lc := query.DefaultLiveConfig()
	lc.Heartbeat, lc.ConsumerInactive, lc.WriteTimeout = 200*time.Millisecond, time.Second, 2*time.Second
	if tune != nil {
		tune(&lc)
	}
	app := httpapi.NewApp(nil)
	var mw []fiber.Handler
	for _, m := range mws {
		mw = append(mw, m(js))
	}
	qs.Register(app, mw...)
	return serveLiveEnv(t, ctx, js, pub, qs, lc, app, func() {
		cancel()
		if ingestDone != nil {
			<-ingestDone
		}
		_ = st.Close()
	})
}

// serveLiveEnv serves app (qs registered) with live streams on a real
// listener until the test ends; then the streams, the server and, last,
// stop end.
func serveLiveEnv(t *testing.T, ctx context.Context, js jetstream.JetStream, pub *producers.Publisher, qs *query.Server, lc query.LiveConfig, app *fiber.App, stop func()) *liveEnv {
	t.Helper()
	liveCtx, stopLive := context.WithCancel(ctx)
	if err := qs.ServeLive(liveCtx, js, lc); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- app.Listener(ln) }()
	tr := &http.Transport{}
	t.Cleanup(func() {
		tr.CloseIdleConnections()
		stopLive()
		qs.WaitStreams()
		if err := app.ShutdownWithTimeout(5 * time.Second); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		<-served
		stop()
	})
	return &liveEnv{url: "http://" + ln.Addr().String(), js: js, pub: pub, qs: qs, stop: stopLive, client: &http.Client{Transport: tr}}
}

// sse is one message of a stream (event is empty for an entry).
type sse struct {
	id    string
	event string
	data  string
}

// sseConn is an open stream.
type sseConn struct {
	resp   *http.Response
	cancel context.CancelFunc
	msgs   chan sse
	pings  chan struct{}
	done   chan struct{}
}

// open opens path with key and headers; it fails the test unless the
// answer is 200.
func (e *liveEnv) open(t *testing.T, path, key string, header ...string) *sseConn {
	t.Helper()
	c, status, body := e.try(t, path, key, header...)
	if status != http.StatusOK {
		t.Fatalf("GET %s: %d %s", path, status, body)
	}
	return c
}

// try opens path; on 200 it returns the stream, else the status and body.
func (e *liveEnv) try(t *testing.T, path, key string, header ...string) (*sseConn, int, string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.url+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := e.client.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		cancel()
		return nil, resp.StatusCode, string(b)
	}
	if ct := resp.Header.Get("Content-Type"); ct != query.ContentTypeEventStream {
		t.Fatalf("content type %q", ct)
	}
	c := &sseConn{resp: resp, cancel: cancel, msgs: make(chan sse, 1000), pings: make(chan struct{}, 1000), done: make(chan struct{})}
	go c.read()
	t.Cleanup(c.close)
	return c, http.StatusOK, ""
}

func (c *sseConn) read() {
	defer close(c.done)
	r := bufio.NewReader(c.resp.Body)
	var m sse
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return
		}
		line = strings.TrimSuffix(line, "\n")
		switch {
		case line == "":
			if m.id != "" || m.data != "" {
				c.msgs <- m
			}
			m = sse{}
		case line == ": ping":
			select {
			case c.pings <- struct{}{}:
			default:
			}
		case strings.HasPrefix(line, "id: "):
			m.id = line[4:]
		case strings.HasPrefix(line, "event: "):
			m.event = line[7:]
		case strings.HasPrefix(line, "data: "):
			m.data = line[6:]
		}
	}
}

func (c *sseConn) close() {
	c.cancel()
	c.resp.Body.Close()
	<-c.done
}

// next returns the next message, failing after 10 s.
func (c *sseConn) next(t *testing.T) sse {
	t.Helper()
	select {
	case m := <-c.msgs:
		return m
	case <-c.done:
		t.Fatal("the stream ended")
	case <-time.After(10 * time.Second):
		t.Fatal("no message within 10 s")
	}
	return sse{}
}

// quiet asserts that no message arrives within d.
func (c *sseConn) quiet(t *testing.T, d time.Duration) {
	t.Helper()
	select {
	case m := <-c.msgs:
		t.Fatalf("unexpected message %s", m.id)
	case <-time.After(d):
	}
}

// event returns an audit event of org, its fields set by mod.
func event(org uuid.UUID, mod func(e *schemas.AuditEvent)) *schemas.AuditEvent {
	rt := schemas.ResourceTypeAPIKey
	rid, rdisp := "key-"+uuid.NewString()[:8], "Prod key"
	ip := "10.1.2.3"
	e := &schemas.AuditEvent{EventID: uuid.Must(uuid.NewV7()), OrganizationID: org, Timestamp: time.Now().UTC().Truncate(time.Millisecond),
		Action: schemas.AuditActionCreated, Source: schemas.AuditSourceAPI, DisplayName: "Ada Lovelace", PrincipalID: "key_1",
		PrincipalType: "USER", ResourceType: &rt, ResourceID: &rid, ResourceDisplay: &rdisp, ClientIP: &ip, Data: json.RawMessage(`{"after":{"n":1}}`)}
	if mod != nil {
		mod(e)
	}
	return e
}

func (e *liveEnv) publish(t *testing.T, evs ...*schemas.AuditEvent) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, ev := range evs {
		if err := e.pub.Publish(ctx, ev); err != nil {
			t.Fatal(err)
		}
	}
}

// listed returns the list route's item of the event (waiting until it is
// stored).
func (e *liveEnv) listed(t *testing.T, key, path string, id string) map[string]any {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, e.url+path+"?wait_for="+id+"&q=event_id:"+id+"&limit=1", nil)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := e.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var env struct {
		Data struct{ Items []map[string]any }
	}
	if err := json.NewDecoder(resp.Body).Decode(&env); err != nil {
		t.Fatal(err)
	}
	if resp.Header.Get(query.HeaderWaitFor) != query.WaitFound || len(env.Data.Items) != 1 {
		t.Fatalf("entry %s not listed", id)
	}
	return env.Data.Items[0]
}

// consumers is the number of consumers of the event stream.
func (e *liveEnv) consumers(t *testing.T) int {
	t.Helper()
	n := 0
	st, err := e.js.Stream(context.Background(), schemas.StreamEvents)
	if err != nil {
		t.Fatal(err)
	}
	l := st.ListConsumers(context.Background())
	for ci := range l.Info() {
		if !strings.HasPrefix(ci.Name, "auditrail-ingest") {
			n++
		}
	}
	if err := l.Err(); err != nil {
		t.Fatal(err)
	}
	return n
}

func streamPath(org uuid.UUID, project *uuid.UUID) string {
	if project != nil {
		return "/api/v1/orgs/" + org.String() + "/projects/" + project.String() + "/audit_logs/stream"
	}
	return "/api/v1/orgs/" + org.String() + "/audit_logs/stream"
}

func listPath(org uuid.UUID) string { return "/api/v1/orgs/" + org.String() + "/audit_logs" }

// A stream delivers exactly the own org's new entries that pass the
// filters, in order, each with its event id and the list route's item.
func TestStreamDeliversTheScopesMatchingEntries(t *testing.T) {
	e := newLiveEnv(t, false, nil)
	org, other, project := uuid.New(), uuid.New(), uuid.New()
	key := "key-" + org.String()
	all := e.open(t, streamPath(org, nil), key)
	filtered := e.open(t, streamPath(org, nil)+"?q=-source:CLI+ada&action=AUDIT_ACTION_CREATED", key)
	inProject := e.open(t, streamPath(org, &project), key)
	otherOrg := e.open(t, streamPath(other, nil), "key-"+other.String())
	testenv.Eventually(t, 10*time.Second, "4 consumers", func() bool { return e.consumers(t) == 4 })

	a1 := event(org, nil)
	b1 := event(other, nil)
	a2 := event(org, func(e *schemas.AuditEvent) { e.Source = schemas.AuditSourceCLI })
	a3 := event(org, func(e *schemas.AuditEvent) { e.ProjectID = &project; e.UserID = ptr("u1"); e.Data = nil })
	a4 := event(org, func(e *schemas.AuditEvent) { e.DisplayName = "Grace"; e.ResourceDisplay = nil; e.ClientIP = nil })
	a5 := event(org, func(e *schemas.AuditEvent) { e.Action = schemas.AuditActionDeleted })
	e.publish(t, a1, b1, a2, a3, a4, a5)

	want := map[*sseConn][]*schemas.AuditEvent{
		all:       {a1, a2, a3, a4, a5},
		filtered:  {a1, a3},
		inProject: {a3},
		otherOrg:  {b1},
	}
	for c, evs := range want {
		for _, ev := range evs {
			m := c.next(t)
			if m.id != ev.EventID.String() {
				t.Fatalf("got %s, want %s", m.id, ev.EventID)
			}
			var got map[string]any
			if err := json.Unmarshal([]byte(m.data), &got); err != nil {
				t.Fatalf("data %q: %v", m.data, err)
			}
			listed := e.listed(t, "key-"+ev.OrganizationID.String(), listPath(ev.OrganizationID), m.id)
			// created_time: the stream's time, no later than the store's.
			streamed, err1 := time.Parse(apiitem.TimeFormat, got["created_time"].(string))
			stored, err2 := time.Parse(apiitem.TimeFormat, listed["created_time"].(string))
			if err1 != nil || err2 != nil || streamed.After(stored) {
				t.Fatalf("created_time streamed %v, stored %v (%v %v)", got["created_time"], listed["created_time"], err1, err2)
			}
			delete(got, "created_time")
			delete(listed, "created_time")
			if g, l := mustJSON(t, got), mustJSON(t, listed); g != l {
				t.Fatalf("streamed item\n%s\nlist item\n%s", g, l)
			}
		}
		c.quiet(t, 300*time.Millisecond)
	}
	select {
	case <-all.pings:
	case <-time.After(5 * time.Second):
		t.Fatal("no heartbeat")
	}
}

// Last-Event-ID (or last_event_id) resumes after that entry: exactly the
// entries after it, whether the store holds it already or not.
func TestStreamResumesAfterLastEventID(t *testing.T) {
	for _, tc := range []struct {
		name     string
		noIngest bool
		param    bool
		v4       bool // event ids that are not UUIDv7 (looked up without a time window)
	}{
		{"stored entry, header", false, false, false},
		{"stored entry (not a UUIDv7), parameter", false, true, true},
		{"entry not ingested yet", true, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newLiveEnv(t, tc.noIngest, nil)
			org := uuid.New()
			key := "key-" + org.String()
			// Older history, before the stream started.
			e.publish(t, event(org, nil), event(org, nil))
			c := e.open(t, streamPath(org, nil), key)
			evs := []*schemas.AuditEvent{event(org, nil), event(org, nil), event(org, nil)}
			if tc.v4 {
				for _, ev := range evs {
					ev.EventID = uuid.New()
				}
			}
			e.publish(t, evs...)
			for _, ev := range evs {
				if m := c.next(t); m.id != ev.EventID.String() {
					t.Fatalf("got %s, want %s", m.id, ev.EventID)
				}
			}
			if !tc.noIngest {
				e.listed(t, key, listPath(org), evs[1].EventID.String())
			}
			c.close()
			// Missed while away.
			more := []*schemas.AuditEvent{event(org, nil), event(org, nil)}
			e.publish(t, more...)
			var r *sseConn
			if tc.param {
				r = e.open(t, streamPath(org, nil)+"?last_event_id="+evs[1].EventID.String(), key)
			} else {
				r = e.open(t, streamPath(org, nil), key, query.HeaderLastEventID, evs[1].EventID.String())
			}
			live := event(org, nil)
			e.publish(t, live)
			for _, ev := range []*schemas.AuditEvent{evs[2], more[0], more[1], live} {
				if m := r.next(t); m.id != ev.EventID.String() {
					t.Fatalf("resumed: got %s, want %s", m.id, ev.EventID)
				}
			}
			r.quiet(t, 300*time.Millisecond)
		})
	}
	// An id the stream does not hold: everything from the resume margin
	// before now, at least once.
	t.Run("unknown id", func(t *testing.T) {
		e := newLiveEnv(t, false, nil)
		org := uuid.New()
		evs := []*schemas.AuditEvent{event(org, nil), event(org, nil)}
		e.publish(t, evs...)
		r := e.open(t, streamPath(org, nil), "key-"+org.String(), query.HeaderLastEventID, uuid.NewString())
		for _, ev := range evs {
			if m := r.next(t); m.id != ev.EventID.String() {
				t.Fatalf("got %s, want %s", m.id, ev.EventID)
			}
		}
	})
}

// Refusals: as the list route (401, 403, 400), and the parameters a live
// stream does not take.
func TestStreamRefusals(t *testing.T) {
	e := newLiveEnv(t, false, nil)
	org, project := uuid.New(), uuid.New()
	key := "key-" + org.String()
	for _, tc := range []struct {
		name, path, key string
		header          []string
		status          int
		msg             string
	}{
		{"no key", streamPath(org, nil), "", nil, 401, ""},
		{"bad key, bad parameter", streamPath(org, nil) + "?until=x", "nope", nil, 401, ""},
		{"another org", streamPath(uuid.New(), nil), key, nil, 403, "not a member"},
		{"another org's project", streamPath(uuid.New(), &project), key, nil, 403, "not a member"},
		{"until", streamPath(org, nil) + "?until=2026-01-01T00:00:00Z", key, nil, 400, "until"},
		{"since", streamPath(org, nil) + "?since=2026-01-01T00:00:00Z", key, nil, 400, "since"},
		{"cursor", streamPath(org, nil) + "?cursor=x", key, nil, 400, "cursor"},
		{"bad q", streamPath(org, nil) + "?q=nokey:x", key, nil, 400, "q:"},
		{"bad action", streamPath(org, nil) + "?action=NOPE", key, nil, 400, "action"},
		{"bad Last-Event-ID", streamPath(org, nil), key, []string{query.HeaderLastEventID, "42"}, 400, "Last-Event-ID"},
		{"bad last_event_id", streamPath(org, nil) + "?last_event_id=42", key, nil, 400, "last_event_id"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, status, body := e.try(t, tc.path, tc.key, tc.header...)
			if status != tc.status || !strings.Contains(body, tc.msg) {
				t.Fatalf("%d %s, want %d with %q", status, body, tc.status, tc.msg)
			}
		})
	}
	if n := e.consumers(t); n != 0 {
		t.Fatalf("%d consumers after refusals", n)
	}
}

// A client that goes away frees its consumer and its slot.
func TestStreamClientGoneFreesTheConsumer(t *testing.T) {
	e := newLiveEnv(t, false, nil)
	org := uuid.New()
	c := e.open(t, streamPath(org, nil), "key-"+org.String())
	testenv.Eventually(t, 10*time.Second, "one consumer", func() bool { return e.consumers(t) == 1 && e.qs.OpenStreams() == 1 })
	c.close()
	testenv.Eventually(t, 10*time.Second, "no consumer, no open stream", func() bool { return e.consumers(t) == 0 && e.qs.OpenStreams() == 0 })
}

// A server shutdown ends every stream (the clients see the end of the
// body) and deletes their consumers.
func TestStreamShutdownEndsStreams(t *testing.T) {
	e := newLiveEnv(t, false, nil)
	org := uuid.New()
	cs := []*sseConn{e.open(t, streamPath(org, nil), "key-"+org.String()), e.open(t, streamPath(org, nil), "key-"+org.String())}
	testenv.Eventually(t, 10*time.Second, "two consumers", func() bool { return e.consumers(t) == 2 })
	e.stop()
	for _, c := range cs {
		select {
		case <-c.done:
		case <-time.After(10 * time.Second):
			t.Fatal("a stream did not end on shutdown")
		}
	}
	e.qs.WaitStreams()
	if n := e.consumers(t); n != 0 || e.qs.OpenStreams() != 0 {
		t.Fatalf("%d consumers, %d streams after shutdown", n, e.qs.OpenStreams())
	}
	if _, status, body := e.try(t, streamPath(org, nil), "key-"+org.String()); status != 503 {
		t.Fatalf("a stream during shutdown: %d %s", status, body)
	}
}

// Beyond MaxStreams, a stream is refused with 503 and Retry-After until
// one ends.
func TestStreamCap(t *testing.T) {
	e := newLiveEnv(t, false, func(c *query.LiveConfig) { c.MaxStreams = 2 })
	org := uuid.New()
	key := "key-" + org.String()
	first := e.open(t, streamPath(org, nil), key)
	e.open(t, streamPath(org, nil), key)
	_, status, body := e.try(t, streamPath(org, nil), key)
	if status != 503 || !strings.Contains(body, "too many live streams") {
		t.Fatalf("third stream: %d %s", status, body)
	}
	first.close()
	testenv.Eventually(t, 10*time.Second, "a free slot", func() bool { return e.qs.OpenStreams() == 1 })
	e.open(t, streamPath(org, nil), key)
}

// Each credential and each organization has its share of the streams
// (429 and Retry-After beyond it); the platform admin is not counted
// against an organization's share, and the server's cap (503) still holds.
func TestStreamCapPerCredentialAndOrg(t *testing.T) {
	e := newLiveEnv(t, true, func(c *query.LiveConfig) {
		c.MaxStreams, c.MaxStreamsPerOrg, c.MaxStreamsPerCredential = 6, 3, 2
	})
	orgA, orgB := uuid.New(), uuid.New()
	a1, a2 := "key-"+orgA.String()+"#1", "key-"+orgA.String()+"#2"
	refused := func(key string, org uuid.UUID, status int, msg string) {
		t.Helper()
		c, got, body := e.try(t, streamPath(org, nil), key)
		if c != nil {
			t.Fatalf("%s: a stream beyond the cap", key)
		}
		if got != status || !strings.Contains(body, msg) {
			t.Fatalf("%s: %d %s, want %d %q", key, got, body, status, msg)
		}
	}
	first := e.open(t, streamPath(orgA, nil), a1)
	e.open(t, streamPath(orgA, nil), a1)
	refused(a1, orgA, 429, "with this credential (2)")
	e.open(t, streamPath(orgA, nil), a2)
	refused(a2, orgA, 429, "for this organization (3)")
	// Another org, and the platform admin in the full org, still stream.
	e.open(t, streamPath(orgB, nil), "key-"+orgB.String())
	e.open(t, streamPath(orgA, nil), "admin")
	e.open(t, streamPath(orgA, nil), "admin")
	if e.qs.OpenStreams() != 6 {
		t.Fatalf("%d streams open, want 6", e.qs.OpenStreams())
	}
	refused("key-"+uuid.NewString(), uuid.Nil, 403, "") // authorization comes first
	refused("admin", orgB, 429, "with this credential (2)")
	refused("key-"+orgB.String()+"#2", orgB, 503, "on this server (6)")
	// A slot given back is taken again.
	first.close()
	testenv.Eventually(t, 10*time.Second, "a free slot", func() bool { return e.qs.OpenStreams() == 5 })
	e.open(t, streamPath(orgA, nil), a1)
}

// A client that does not read is disconnected once its buffer is full
// (or a write blocks past WriteTimeout), not buffered without bound.
func TestStreamSlowClientDisconnected(t *testing.T) {
	e := newLiveEnv(t, true, func(c *query.LiveConfig) { c.BufferBytes, c.WriteTimeout = 200<<10, 300*time.Millisecond })
	org := uuid.New()
	conn, err := net.Dial("tcp", strings.TrimPrefix(e.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// A small receive window, and nothing read.
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetReadBuffer(4096)
	}
	fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer key-%s\r\n\r\n", streamPath(org, nil), org)
	testenv.Eventually(t, 10*time.Second, "the stream open", func() bool { return e.qs.OpenStreams() == 1 })
	big := strings.Repeat("x", 60000)
	for i := 0; i < 150 && e.qs.OpenStreams() == 1; i++ {
		e.publish(t, event(org, func(e *schemas.AuditEvent) { e.Data = json.RawMessage(`{"pad":"` + big + `"}`) }))
	}
	testenv.Eventually(t, 10*time.Second, "the slow client disconnected", func() bool { return e.qs.OpenStreams() == 0 && e.consumers(t) == 0 })
}

// Without ServeLive the route answers 503.
func TestStreamNotConfigured(t *testing.T) {
	cfg := query.DefaultConfig()
	cfg.CursorKeys = [][]byte{[]byte("0123456789abcdef0123456789abcdef")}
	qs, err := query.New(cfg, nil, orgKeys{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	app := httpapi.NewApp(nil)
	qs.Register(app)
	org := uuid.New()
	req, _ := http.NewRequest(http.MethodGet, streamPath(org, nil), nil)
	req.Header.Set("Authorization", "Bearer key-"+org.String())
	resp, err := app.Test(req, 5000)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 503 || !strings.Contains(string(b), "live stream not configured") {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
}

func TestLiveConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		mod  func(*query.LiveConfig)
		ok   bool
	}{
		{"defaults", func(*query.LiveConfig) {}, true},
		{"no stream", func(c *query.LiveConfig) { c.MaxStreams = 0 }, false},
		{"no buffer", func(c *query.LiveConfig) { c.BufferBytes = 0 }, false},
		{"no per-org stream", func(c *query.LiveConfig) { c.MaxStreamsPerOrg = 0 }, false},
		{"no per-credential stream", func(c *query.LiveConfig) { c.MaxStreamsPerCredential = 0 }, false},
		{"no re-check", func(c *query.LiveConfig) { c.Recheck = 0 }, false},
		{"re-check past 5 s", func(c *query.LiveConfig) { c.Recheck = 6 * time.Second }, false},
		{"lifetime too short", func(c *query.LiveConfig) { c.MaxLifetime = time.Millisecond }, false},
		{"no heartbeat", func(c *query.LiveConfig) { c.Heartbeat = 0 }, false},
		{"no write timeout", func(c *query.LiveConfig) { c.WriteTimeout = 0 }, false},
		{"negative margin", func(c *query.LiveConfig) { c.ResumeMargin = -time.Second }, false},
		{"inactive too short", func(c *query.LiveConfig) { c.ConsumerInactive = time.Millisecond }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := query.DefaultLiveConfig()
			tc.mod(&c)
			if err := c.Validate(); (err == nil) != tc.ok {
				t.Fatalf("Validate: %v", err)
			}
		})
	}
}

// The stream's answers (200, 400, 401, 403, 503) match audit.yaml.
func TestStreamMatchesOpenAPI(t *testing.T) {
	e := newLiveEnv(t, false, func(c *query.LiveConfig) { c.MaxStreams = 1 })
	router := openapitest.Router(t, "audit.yaml", e.url)
	org, project := uuid.New(), uuid.New()
	key := "key-" + org.String()
	checked := map[string]bool{}
	var open []*http.Response
	defer func() {
		for _, r := range open {
			r.Body.Close()
		}
	}()
	for _, tc := range []struct {
		path, key string
		header    []string
		status    int
	}{
		{streamPath(org, &project) + "?q=actor:key_1&source=AUDIT_SOURCE_API", key, []string{query.HeaderLastEventID, uuid.NewString()}, 200},
		{streamPath(org, nil), key, nil, 503}, // the one stream allowed is open
		{streamPath(org, nil) + "?until=2026-01-01T00:00:00Z", key, nil, 400},
		{streamPath(org, nil), "", nil, 401},
		{streamPath(uuid.New(), &project), key, nil, 403},
	} {
		req, _ := http.NewRequest(http.MethodGet, e.url+tc.path, nil)
		if tc.key != "" {
			req.Header.Set("Authorization", "Bearer "+tc.key)
		}
		for i := 0; i+1 < len(tc.header); i += 2 {
			req.Header.Set(tc.header[i], tc.header[i+1])
		}
		resp, err := e.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var raw []byte
		if resp.StatusCode == 200 {
			open = append(open, resp) // the body does not end: validate the headers
		} else {
			raw, _ = io.ReadAll(resp.Body)
			resp.Body.Close()
		}
		if resp.StatusCode != tc.status {
			t.Fatalf("%s: %d %s, want %d", tc.path, resp.StatusCode, raw, tc.status)
		}
		openapitest.CheckRequest(t, router, req)
		checked[openapitest.CheckResponse(t, router, req, resp.StatusCode, resp.Header, raw)] = true
	}
	for _, op := range []string{"streamOrgAuditLogs", "streamProjectAuditLogs"} {
		if !checked[op] {
			t.Errorf("%s not checked", op)
		}
	}
}

// One stream is one request for the rate limit, however long it stays
// open and however many heartbeats and entries it sends.
func TestStreamCountsOnceAgainstTheRateLimit(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	e := newLiveEnv(t, true, nil, func(js jetstream.JetStream) fiber.Handler {
		limiter, err := ratelimit.New(ctx, js, "rl_stream_test", ratelimit.Spec{Limit: 2, Window: time.Minute}, ratelimit.WithClock(fixedClock))
		if err != nil {
			t.Fatal(err)
		}
		return httpapi.RateLimit(limiter, httpx.TrustedProxies{}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	})
	org := uuid.New()
	key := "key-" + org.String()
	first := e.open(t, streamPath(org, nil), key)
	e.publish(t, event(org, nil), event(org, nil))
	first.next(t)
	first.next(t)
	for range 3 { // heartbeats
		select {
		case <-first.pings:
		case <-time.After(5 * time.Second):
			t.Fatal("no heartbeat")
		}
	}
	if first.resp.Header.Get("X-RateLimit-Remaining") != "1" {
		t.Fatalf("first stream: remaining %q", first.resp.Header.Get("X-RateLimit-Remaining"))
	}
	second := e.open(t, streamPath(org, nil), key)
	if second.resp.Header.Get("X-RateLimit-Remaining") != "0" {
		t.Fatalf("second stream: remaining %q", second.resp.Header.Get("X-RateLimit-Remaining"))
	}
	if _, status, body := e.try(t, streamPath(org, nil), key); status != 429 {
		t.Fatalf("third stream: %d %s", status, body)
	}
}
