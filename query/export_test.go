package query_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/auditrail/auditrail/internal/auditstore"
	"github.com/auditrail/auditrail/internal/auditstore/clickhouse"
	"github.com/auditrail/auditrail/internal/auditstore/sqlite"
	"github.com/auditrail/auditrail/internal/auditstore/storetest"
	"github.com/auditrail/auditrail/internal/auth"
	"github.com/auditrail/auditrail/internal/httpapi"
	"github.com/auditrail/auditrail/internal/httpx"
	"github.com/auditrail/auditrail/internal/ratelimit"
	"github.com/auditrail/auditrail/internal/testenv"
	"github.com/auditrail/auditrail/producers"
	"github.com/auditrail/auditrail/query"
	"github.com/auditrail/auditrail/schemas"
	"github.com/auditrail/auditrail/schemas/openapitest"
)

// countingStore records the limit and size of every page an export reads.
type countingStore struct {
	query.Reader
	mu    sync.Mutex
	pages [][2]int // limit, items
}

func (s *countingStore) ListAudit(ctx context.Context, q auditstore.Query) (auditstore.Page, error) {
	p, err := s.Reader.ListAudit(ctx, q)
	s.mu.Lock()
	s.pages = append(s.pages, [2]int{q.Limit, len(p.Items)})
	s.mu.Unlock()
	return p, err
}

// allowAll lets any bearer read anything: the paging is under test.
type allowAll struct{}

func (allowAll) Authenticate(context.Context, string) (auth.Principal, error) {
	return auth.Principal{ID: "k", Type: "API_KEY"}, nil
}

func (allowAll) AuthorizeRead(context.Context, auth.Principal, uuid.UUID, *uuid.UUID) error {
	return nil
}

type exportReply struct {
	status               int
	ctype, disp, eventID string
	body                 []byte
}

func doExport(t *testing.T, app *fiber.App, path, key string) exportReply {
	t.Helper()
	req := httptest.NewRequest("GET", path, nil)
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := app.Test(req, -1)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return exportReply{resp.StatusCode, resp.Header.Get("Content-Type"), resp.Header.Get("Content-Disposition"), resp.Header.Get(httpapi.HeaderEventID), body}
}

// csvIDs returns the event_id column of a CSV export, checking its header.
func csvIDs(t *testing.T, body []byte, col string) []string {
	t.Helper()
	rows, err := csv.NewReader(bytes.NewReader(body)).ReadAll()
	if err != nil {
		t.Fatalf("not CSV: %v", err)
	}
	if len(rows) == 0 {
		t.Fatal("no header row")
	}
	i := slices.Index(rows[0], col)
	if i < 0 {
		t.Fatalf("header %v has no %s", rows[0], col)
	}
	var ids []string
	for _, r := range rows[1:] {
		ids = append(ids, r[i])
	}
	return ids
}

// jsonlIDs returns the event_id of every line of a JSONL export.
func jsonlIDs(t *testing.T, body []byte) []string {
	t.Helper()
	var ids []string
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var it map[string]any
		if err := json.Unmarshal(sc.Bytes(), &it); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		ids = append(ids, it["event_id"].(string))
	}
	return ids
}

// An export of 5,000 entries answers all of them, newest first, in one
// request, read from the store in pages of at most ExportPageSize (the
// handler holds one page at a time), in both formats, on both stores.
func TestExportAllPages(t *testing.T) {
	t.Parallel() // among the slowest of the package: they share nothing
	t.Run("sqlite", func(t *testing.T) {
		st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "audit.db"))
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		exportAllPages(t, st)
	})
	t.Run("clickhouse", func(t *testing.T) {
		st, err := clickhouse.Open(context.Background(), testenv.ClickHouse(t))
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		exportAllPages(t, st)
	})
}

func exportAllPages(t *testing.T, st interface {
	query.Reader
	WriteAudit(ctx context.Context, events []schemas.AuditEvent) error
}) {
	ctx := context.Background()
	org := uuid.New()
	const n = 5000
	base := time.Now().Add(-time.Hour)
	var want []string
	evs := make([]schemas.AuditEvent, 0, n)
	for i := range n {
		ev := storetest.Event(org, base.Add(time.Duration(i/2)*time.Millisecond)) // pairs share a timestamp
		evs = append(evs, ev)
	}
	if err := st.WriteAudit(ctx, evs); err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(evs, func(a, b schemas.AuditEvent) int {
		if c := b.Timestamp.Compare(a.Timestamp); c != 0 {
			return c
		}
		return bytes.Compare(b.EventID[:], a.EventID[:])
	})
	for _, ev := range evs {
		want = append(want, ev.EventID.String())
	}
	cs := &countingStore{Reader: st}
	cfg := query.DefaultConfig()
	cfg.CursorKeys = [][]byte{[]byte("0123456789abcdef0123456789abcdef")}
	// It checks what is exported, not how fast: under the race detector,
	// beside the package's other parallel tests, a page may take longer
	// than a store query's default bound.
	cfg.StoreTimeout = 2 * time.Minute
	qs, err := query.New(cfg, cs, allowAll{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	app := httpapi.NewApp(nil)
	qs.Register(app)
	for _, format := range []string{"csv", "jsonl"} {
		cs.pages = nil
		r := doExport(t, app, "/api/v1/orgs/"+org.String()+"/audit_logs/export?format="+format, "k")
		if r.status != 200 {
			t.Fatalf("%s: %d %s", format, r.status, r.body)
		}
		var got []string
		if format == "csv" {
			got = csvIDs(t, r.body, "event_id")
		} else {
			got = jsonlIDs(t, r.body)
		}
		if len(got) != n || !slices.Equal(got, want) {
			t.Fatalf("%s: %d entries, in order: %v; want %d newest first", format, len(got), slices.Equal(got, want), n)
		}
		if len(cs.pages) != n/query.ExportPageSize+1 && len(cs.pages) != n/query.ExportPageSize {
			t.Errorf("%s: %d store reads, want about %d", format, len(cs.pages), n/query.ExportPageSize)
		}
		for _, p := range cs.pages {
			if p[0] != query.ExportPageSize || p[1] > query.ExportPageSize {
				t.Errorf("%s: a page of limit %d with %d items, want limit %d", format, p[0], p[1], query.ExportPageSize)
			}
		}
	}
}

// The export routes against the real control plane: headers, filters
// (the list routes' own), formats, authorization and parameter errors.
func TestExport(t *testing.T) {
	e := newWaitEnv(t)
	org := e.org.String()
	ctx := context.Background()
	base := time.Now().Add(-time.Minute)
	var deleted, inProject []string
	var evs []schemas.AuditEvent
	for i := range 30 {
		ev := storetest.Event(e.org, base.Add(time.Duration(i)*time.Millisecond))
		switch {
		case i%3 == 0:
			ev.Action = schemas.AuditActionDeleted
			deleted = append([]string{ev.EventID.String()}, deleted...)
		case i%3 == 1:
			ev.ProjectID = &e.project
			inProject = append([]string{ev.EventID.String()}, inProject...)
		}
		evs = append(evs, ev)
	}
	other := storetest.Event(e.otherOrg, base)
	if err := e.store.WriteAudit(ctx, append(evs, other)); err != nil {
		t.Fatal(err)
	}
	now := auditstore.Millis(time.Now())
	execs := []schemas.ExecutionEvent{}
	var failed []string
	for i := range 4 {
		id := uuid.Must(uuid.NewV7()).String()
		ev := schemas.ExecutionEvent{EventID: id, ExecutionID: id, OrganizationID: org, UserID: "u1",
			Tool:      schemas.ToolRef{Toolkit: "DocumentDbToolkit", Name: "CountDocuments", Version: "0.4.0"},
			StartedAt: now.Add(time.Duration(i) * time.Millisecond), EndedAt: now.Add(time.Duration(i) * time.Millisecond),
			Success: i%2 == 0, ExecutionCode: "OK"}
		if !ev.Success {
			ev.ExecutionCode, ev.ErrorKind, ev.ExecutionError = "TOOL_ERROR", "tool", "boom"
			failed = append([]string{id}, failed...)
		}
		execs = append(execs, ev)
	}
	if err := e.store.WriteExecutions(ctx, execs); err != nil {
		t.Fatal(err)
	}
	audit := "/api/v1/orgs/" + org + "/audit_logs/export"
	project := "/api/v1/orgs/" + org + "/projects/" + e.project.String() + "/audit_logs/export"
	execPath := "/api/v1/orgs/" + org + "/tool_executions/export"

	for _, tc := range []struct {
		name, path string
		csv        bool
		want       []string
	}{
		{"action filter csv", audit + "?format=csv&action=AUDIT_ACTION_DELETED", true, deleted},
		{"action filter jsonl", audit + "?format=jsonl&action=AUDIT_ACTION_DELETED", false, deleted},
		{"project route", project + "?format=jsonl", false, inProject},
		{"project and action", project + "?format=csv&action=AUDIT_ACTION_DELETED", true, nil},
		{"executions success=false", execPath + "?format=jsonl&success=false", false, failed},
		{"executions csv success=false", execPath + "?format=csv&success=false", true, failed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := doExport(t, e.app, tc.path, e.boot)
			if r.status != 200 {
				t.Fatalf("%d %s", r.status, r.body)
			}
			wantType := query.ContentTypeJSONL
			if tc.csv {
				wantType = query.ContentTypeCSV
			}
			if r.ctype != wantType {
				t.Errorf("Content-Type %q, want %q", r.ctype, wantType)
			}
			if !strings.HasPrefix(r.disp, `attachment; filename="`) || !strings.Contains(r.disp, org) {
				t.Errorf("Content-Disposition %q", r.disp)
			}
			var got []string
			if tc.csv {
				got = csvIDs(t, r.body, "event_id")
			} else {
				got = jsonlIDs(t, r.body)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("got %v\nwant %v", got, tc.want)
			}
		})
	}

	// JSONL lines are the list route's items.
	list := e.call("GET", "/api/v1/orgs/"+org+"/audit_logs?action=AUDIT_ACTION_DELETED&limit=100", e.boot, "")
	r := doExport(t, e.app, audit+"?format=jsonl&action=AUDIT_ACTION_DELETED", e.boot)
	var lines []any
	for _, l := range bytes.Split(bytes.TrimSpace(r.body), []byte("\n")) {
		var v any
		if err := json.Unmarshal(l, &v); err != nil {
			t.Fatal(err)
		}
		lines = append(lines, v)
	}
	if a, b := mustJSON(t, lines), mustJSON(t, list.data()["items"]); a != b {
		t.Errorf("JSONL lines differ from the list items:\n%s\n%s", a, b)
	}

	for _, tc := range []struct {
		name, path, key string
		status          int
		names           string
	}{
		{"non-member", audit + "?format=csv", e.alice, 403, ""},
		{"non-member, executions", execPath + "?format=csv", e.alice, 403, ""},
		{"anonymous", audit + "?format=csv", "", 401, ""},
		{"format missing", audit, e.boot, 400, "format"},
		{"format invalid", audit + "?format=xml", e.boot, 400, "format"},
		{"format invalid, executions", execPath + "?format=CSV", e.boot, 400, "format"},
		{"limit refused", audit + "?format=csv&limit=5", e.boot, 400, "limit"},
		{"cursor refused", execPath + "?format=csv&cursor=x", e.boot, 400, "cursor"},
		{"bad filter", audit + "?format=csv&action=NOPE", e.boot, 400, "action"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := doExport(t, e.app, tc.path, tc.key)
			if r.status != tc.status {
				t.Fatalf("%d %s, want %d", r.status, r.body, tc.status)
			}
			if tc.names != "" && !strings.Contains(string(r.body), tc.names) {
				t.Errorf("%s does not name %s", r.body, tc.names)
			}
		})
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// The export answers (200 in both formats, 400, 403) match audit.yaml.
func TestExportMatchesOpenAPI(t *testing.T) {
	router := openapitest.Router(t, "audit.yaml", "http://auditrail.test")
	e := newWaitEnv(t)
	_, store := e.audit(e.org, &e.project)
	if err := store(); err != nil {
		t.Fatal(err)
	}
	_, store = e.execution(e.org, &e.project)
	if err := store(); err != nil {
		t.Fatal(err)
	}
	org := "http://auditrail.test/api/v1/orgs/" + e.org.String()
	project := org + "/projects/" + e.project.String()
	checked := map[string]bool{}
	for _, tc := range []struct {
		path, key string
		status    int
	}{
		{org + "/audit_logs/export?format=csv", e.boot, 200},
		{project + "/audit_logs/export?format=jsonl&action=AUDIT_ACTION_CREATED", e.boot, 200},
		{org + "/tool_executions/export?format=jsonl", e.boot, 200},
		{project + "/tool_executions/export?format=csv&success=true", e.boot, 200},
		{org + "/audit_logs/export?format=xml", e.boot, 400},
		{org + "/tool_executions/export?format=csv", e.alice, 403},
	} {
		req := httptest.NewRequest("GET", tc.path, nil)
		req.Header.Set("Authorization", "Bearer "+tc.key)
		resp, err := e.app.Test(req, -1)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.status {
			t.Fatalf("%s: %d %s, want %d", tc.path, resp.StatusCode, raw, tc.status)
		}
		checked[openapitest.CheckResponse(t, router, req, resp.StatusCode, resp.Header, raw)] = true
	}
	for _, op := range []string{"exportOrgAuditLogs", "exportProjectAuditLogs", "exportOrgToolExecutions", "exportProjectToolExecutions"} {
		if !checked[op] {
			t.Errorf("%s not checked", op)
		}
	}
}

// failAfter fails every ListAudit after the first.
type failAfter struct {
	query.Reader
	mu    sync.Mutex
	calls int
}

func (s *failAfter) ListAudit(ctx context.Context, q auditstore.Query) (auditstore.Page, error) {
	s.mu.Lock()
	s.calls++
	n := s.calls
	s.mu.Unlock()
	if n > 1 {
		return auditstore.Page{}, errors.New("store gone")
	}
	return s.Reader.ListAudit(ctx, q)
}

// A store failure after the first page cuts the connection after that
// page: the status (200) is already sent, so the client must see a
// transfer that did not complete (no final chunk), never a short file that
// looks whole; nothing is written twice or invented.
func TestExportStoreFailsMidway(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "audit.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	org := uuid.New()
	var evs []schemas.AuditEvent
	for i := range query.ExportPageSize + 10 {
		evs = append(evs, storetest.Event(org, time.Now().Add(time.Duration(-i)*time.Millisecond)))
	}
	if err := st.WriteAudit(ctx, evs); err != nil {
		t.Fatal(err)
	}
	cfg := query.DefaultConfig()
	cfg.CursorKeys = [][]byte{[]byte("0123456789abcdef0123456789abcdef")}
	qs, err := query.New(cfg, &failAfter{Reader: st}, allowAll{}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	app := httpapi.NewApp(nil)
	qs.Register(app)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- app.Listener(ln) }()
	defer func() {
		_ = app.ShutdownWithTimeout(5 * time.Second)
		<-served
	}()
	req, _ := http.NewRequest("GET", "http://"+ln.Addr().String()+"/api/v1/orgs/"+org.String()+"/audit_logs/export?format=jsonl", nil)
	req.Header.Set("Authorization", "Bearer k")
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("%d", resp.StatusCode)
	}
	body, err := io.ReadAll(resp.Body)
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("the export ended with %v after %d bytes, want an incomplete transfer", err, len(body))
	}
	if got := jsonlIDs(t, body); len(got) != query.ExportPageSize {
		t.Fatalf("%d lines, want the first page (%d)", len(got), query.ExportPageSize)
	}
}

// Each export records one audit event in its organization before its first
// byte (who, which route, format and filters), published through the real
// producers on an embedded NATS; an export whose event cannot be stored is
// refused (503) and sends nothing.
func TestExportRecorded(t *testing.T) {
	_, nc, js := testenv.NATS(t)
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "audit.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	pub, err := producers.New(nc, producers.DefaultConfig(), slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	cfg := query.DefaultConfig()
	cfg.CursorKeys = [][]byte{[]byte("0123456789abcdef0123456789abcdef")}
	cfg.StoreTimeout = 2 * time.Second
	qs, err := query.New(cfg, st, allowAll{}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	qs.RecordExportsWith(producers.NewRecorder(pub, 2*time.Second))
	app := httpapi.NewApp(nil)
	qs.Register(app)
	org, project := uuid.New(), uuid.New()

	path := "/api/v1/orgs/" + org.String() + "/projects/" + project.String() + "/tool_executions/export?format=csv&success=false&user_id=u1"
	r := doExport(t, app, path, "k")
	if r.status != 200 {
		t.Fatalf("%d %s", r.status, r.body)
	}
	cons, err := js.OrderedConsumer(ctx, schemas.StreamEvents, jetstream.OrderedConsumerConfig{FilterSubjects: []string{schemas.EventSubject(org.String(), schemas.KindAudit)}})
	if err != nil {
		t.Fatal(err)
	}
	msg, err := cons.Next(jetstream.FetchMaxWait(5 * time.Second))
	if err != nil {
		t.Fatalf("no audit event of the export: %v", err)
	}
	ev, err := schemas.UnmarshalAuditEvent(msg.Data())
	if err != nil {
		t.Fatal(err)
	}
	if r.eventID != ev.EventID.String() {
		t.Errorf("Auditrail-Event-Id %q, event %s", r.eventID, ev.EventID)
	}
	if ev.Action != schemas.AuditActionCreated || ev.OrganizationID != org || ev.ProjectID == nil || *ev.ProjectID != project ||
		ev.ResourceType == nil || *ev.ResourceType != schemas.ResourceTypeProject || ev.PrincipalID != "k" || ev.PrincipalType != "API_KEY" {
		t.Errorf("event: %+v", ev)
	}
	var data struct {
		After struct {
			Export struct {
				Route, Path, Format string
				Filters             map[string]string
			}
		}
	}
	if err := json.Unmarshal(ev.Data, &data); err != nil {
		t.Fatal(err)
	}
	x := data.After.Export
	if x.Route != "tool_executions" || x.Format != "csv" || !strings.HasSuffix(x.Path, "/tool_executions/export") ||
		len(x.Filters) != 2 || x.Filters["success"] != "false" || x.Filters["user_id"] != "u1" {
		t.Errorf("data: %s", ev.Data)
	}

	// Parameter errors and refusals record nothing: the next event is
	// the next export's.
	if r := doExport(t, app, "/api/v1/orgs/"+org.String()+"/audit_logs/export?format=xml", "k"); r.status != 400 {
		t.Fatalf("format=xml: %d", r.status)
	}
	if r := doExport(t, app, "/api/v1/orgs/"+org.String()+"/audit_logs/export?format=jsonl", "k"); r.status != 200 {
		t.Fatalf("%d %s", r.status, r.body)
	}
	if msg, err = cons.Next(jetstream.FetchMaxWait(5 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if ev, err = schemas.UnmarshalAuditEvent(msg.Data()); err != nil || ev.ProjectID != nil || !strings.Contains(string(ev.Data), `"format":"jsonl"`) {
		t.Fatalf("second event: %+v %v", ev, err)
	}

	// Without the audit stream, no export.
	if err := js.DeleteStream(ctx, schemas.StreamEvents); err != nil {
		t.Fatal(err)
	}
	r = doExport(t, app, "/api/v1/orgs/"+org.String()+"/audit_logs/export?format=csv", "k")
	if r.status != 503 || bytes.Contains(r.body, []byte("event_id")) {
		t.Fatalf("unrecordable export: %d %s", r.status, r.body)
	}
}

// An export is one request for the rate limit, however many pages it
// reads: behind a real limit of 2 per window, an export of three pages
// leaves one request, the next none, the third is refused (429).
func TestExportCountsOnceAgainstTheRateLimit(t *testing.T) {
	t.Parallel() // among the slowest of the package: they share nothing
	_, _, js := testenv.NATS(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// A day's window: a minute's could end between two exports of a
	// loaded machine and let the second start afresh.
	limiter, err := ratelimit.New(ctx, js, "rl_export_test", ratelimit.Spec{Limit: 2, Window: 24 * time.Hour}, ratelimit.WithClock(fixedClock))
	if err != nil {
		t.Fatal(err)
	}
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "audit.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	org := uuid.New()
	var evs []schemas.AuditEvent
	for i := range 2*query.ExportPageSize + 1 {
		evs = append(evs, storetest.Event(org, time.Now().Add(time.Duration(-i)*time.Millisecond)))
	}
	if err := st.WriteAudit(ctx, evs); err != nil {
		t.Fatal(err)
	}
	cs := &countingStore{Reader: st}
	cfg := query.DefaultConfig()
	cfg.CursorKeys = [][]byte{[]byte("0123456789abcdef0123456789abcdef")}
	// It counts requests against the limit, not time: two exports of
	// 20,001 entries (pages of 10,000) read from SQLite under the race
	// detector, beside the package's other parallel tests, ran past a store
	// query's default bound of 10 s once (context deadline exceeded).
	cfg.StoreTimeout = 2 * time.Minute
	qs, err := query.New(cfg, cs, allowAll{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	app := httpapi.NewApp(nil)
	qs.Register(app, httpapi.RateLimit(limiter, httpx.TrustedProxies{}, slog.New(slog.NewTextHandler(io.Discard, nil))))
	path := "/api/v1/orgs/" + org.String() + "/audit_logs/export?format=csv"
	for i, want := range []struct {
		status    int
		remaining string
	}{{200, "1"}, {200, "0"}, {429, "0"}} {
		req := httptest.NewRequest("GET", path, nil)
		req.Header.Set("Authorization", "Bearer k")
		resp, err := app.Test(req, -1)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want.status || resp.Header.Get("X-RateLimit-Remaining") != want.remaining {
			t.Fatalf("export %d: %d, remaining %q; want %d, %q", i+1, resp.StatusCode, resp.Header.Get("X-RateLimit-Remaining"), want.status, want.remaining)
		}
	}
	if len(cs.pages) != 6 {
		t.Errorf("%d store reads for two exports, want 3 each", len(cs.pages))
	}
}

// slowPages answers pages of at most 20 items, each after a delay: an
// export of many slow pages.
type slowPages struct {
	query.Reader
	delay time.Duration
}

func (s slowPages) ListAudit(ctx context.Context, q auditstore.Query) (auditstore.Page, error) {
	time.Sleep(s.delay)
	p, err := s.Reader.ListAudit(ctx, q)
	if len(p.Items) > 20 {
		p.Items, p.HasMore = p.Items[:20], true
	}
	return p, err
}

// An export takes as long as it needs: the server's write timeout (which
// bounds a whole response) does not cut it; each page gets the export's
// write timeout instead. Served over a real listener (app.Test has no
// deadlines): 10 pages of 150 ms against a write timeout of 500 ms.
func TestExportOutlastsTheServersWriteTimeout(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "audit.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	org := uuid.New()
	var evs []schemas.AuditEvent
	for i := range 200 {
		evs = append(evs, storetest.Event(org, time.Now().Add(time.Duration(-i)*time.Millisecond)))
	}
	if err := st.WriteAudit(ctx, evs); err != nil {
		t.Fatal(err)
	}
	cfg := query.DefaultConfig()
	cfg.CursorKeys = [][]byte{[]byte("0123456789abcdef0123456789abcdef")}
	cfg.ExportWriteTimeout = 500 * time.Millisecond
	qs, err := query.New(cfg, slowPages{Reader: st, delay: 150 * time.Millisecond}, allowAll{}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	hcfg := httpapi.DefaultConfig()
	hcfg.WriteTimeout = 500 * time.Millisecond
	app, err := httpapi.New(hcfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	qs.Register(app)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = app.Listener(ln) }()
	defer func() { _ = app.Shutdown() }()
	req, _ := http.NewRequest("GET", "http://"+ln.Addr().String()+"/api/v1/orgs/"+org.String()+"/audit_logs/export?format=jsonl", nil)
	req.Header.Set("Authorization", "Bearer k")
	start := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatalf("the export was cut after %s: %v", time.Since(start), err)
	}
	if got := jsonlIDs(t, body); len(got) != len(evs) {
		t.Fatalf("%d lines in %s, want %d", len(got), time.Since(start), len(evs))
	}
}
