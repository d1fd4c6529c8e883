package query_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/auditrail/auditrail/internal/auditstore"
	"github.com/auditrail/auditrail/internal/auditstore/storetest"
	"github.com/auditrail/auditrail/query"
	"github.com/auditrail/auditrail/schemas"
	"github.com/auditrail/auditrail/schemas/openapitest"
)

// watermark is a watermark the test moves (natsx.Watermarks reads it from
// JetStream; the ingest and dev tests cover that).
type watermark struct {
	seq  atomic.Uint64
	fail atomic.Bool
}

func (w *watermark) Watermark(_ context.Context, durable string) (uint64, error) {
	if w.fail.Load() {
		return 0, errors.New("nats: timeout")
	}
	return w.seq.Load(), nil
}

// feedEnv is a waitEnv whose store holds entries and executions with
// positions 1..n (odd: the project's), timestamps shuffled, and whose
// feeds follow w.
func feedEnv(t *testing.T, n int) (*waitEnv, *watermark, []schemas.AuditEvent) {
	e := newWaitEnv(t)
	w := &watermark{}
	e.qs.ServeFeedsWith(query.FeedSource{Watermarks: w, AuditDurable: "a", ExecutionDurable: "x"})
	base := auditstore.Millis(time.Now().Add(-time.Hour))
	evs := make([]schemas.AuditEvent, n)
	var execs []schemas.ExecutionEvent
	for i := range evs {
		seq := uint64(i + 1)
		evs[i] = storetest.Event(e.org, base.Add(-time.Duration(i*7919%n)*time.Minute))
		evs[i].Stored = schemas.Persisted{Seq: seq, Time: base.Add(time.Duration(seq) * time.Millisecond)}
		if seq%2 == 1 {
			evs[i].ProjectID = &e.project
		}
		id := uuid.NewString()
		x := schemas.ExecutionEvent{EventID: id, ExecutionID: id, OrganizationID: e.org.String(), UserID: "u1",
			Tool:      schemas.ToolRef{Toolkit: "DocumentDbToolkit", Name: "CountDocuments", Version: "0.4.0"},
			StartedAt: evs[i].Timestamp, EndedAt: evs[i].Timestamp, Success: seq%3 != 0, ExecutionCode: "OK", Stored: evs[i].Stored}
		execs = append(execs, x)
	}
	if err := e.store.WriteAudit(context.Background(), evs); err != nil {
		t.Fatal(err)
	}
	if err := e.store.WriteExecutions(context.Background(), execs); err != nil {
		t.Fatal(err)
	}
	return e, w, evs
}

// follow reads a feed from path (with params) page after page until a page
// is empty, checking each page against audit.yaml, and answers the event
// ids and positions it read and the last cursor.
func follow(t *testing.T, e *waitEnv, path string, params url.Values, cursor string) ([]string, []float64, string) {
	t.Helper()
	router := openapitest.Router(t, "audit.yaml", "http://auditrail.test")
	var ids []string
	var positions []float64
	for i := 0; i < 1000; i++ {
		q := url.Values{}
		for k, v := range params {
			q[k] = v
		}
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		req := httptest.NewRequest("GET", "http://auditrail.test"+path+"?"+q.Encode(), nil)
		req.Header.Set("Authorization", "Bearer "+e.boot)
		resp, err := e.app.Test(req, -1)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("%s: %d %s", req.URL, resp.StatusCode, raw)
		}
		openapitest.CheckResponse(t, router, req, resp.StatusCode, resp.Header, raw)
		r := waitReply{raw: raw}
		if err := json.Unmarshal(raw, &r.body); err != nil {
			t.Fatal(err)
		}
		next, ok := r.data()["next_cursor"].(string)
		if !ok || next == "" {
			t.Fatalf("page %d without next_cursor: %s", i, raw)
		}
		items, _ := r.data()["items"].([]any)
		for _, it := range items {
			m := it.(map[string]any)
			ids = append(ids, m["event_id"].(string))
			positions = append(positions, m["position"].(float64))
		}
		cursor = next
		if len(items) == 0 {
			return ids, positions, cursor
		}
	}
	t.Fatal("the feed does not end")
	return nil, nil, ""
}

func TestFeedRoutes(t *testing.T) {
	e, w, evs := feedEnv(t, 40)
	org := "/api/v1/orgs/" + e.org.String()
	project := org + "/projects/" + e.project.String()
	want := func(upto uint64, keep func(e schemas.AuditEvent) bool) []string {
		var ids []string
		for _, ev := range evs { // written in position order
			if ev.Stored.Seq <= upto && keep(ev) {
				ids = append(ids, ev.EventID.String())
			}
		}
		return ids
	}
	all := func(schemas.AuditEvent) bool { return true }

	t.Run("follows the watermark", func(t *testing.T) {
		w.seq.Store(0)
		ids, _, cur := follow(t, e, org+"/audit_logs/feed", url.Values{"limit": {"3"}}, "")
		if len(ids) != 0 {
			t.Fatalf("%d items below watermark 0", len(ids))
		}
		w.seq.Store(25)
		got, pos, cur := follow(t, e, org+"/audit_logs/feed", url.Values{"limit": {"3"}}, cur)
		if !slices.Equal(got, want(25, all)) || !slices.IsSorted(pos) {
			t.Fatalf("up to 25: %d items, want %d, positions sorted %v", len(got), len(want(25, all)), slices.IsSorted(pos))
		}
		w.seq.Store(40)
		rest, _, _ := follow(t, e, org+"/audit_logs/feed", url.Values{"limit": {"3"}}, cur)
		if !slices.Equal(append(got, rest...), want(40, all)) {
			t.Fatalf("resumed: %d items, want %d", len(got)+len(rest), len(want(40, all)))
		}
	})
	w.seq.Store(40)
	t.Run("project, filters, since", func(t *testing.T) {
		got, _, _ := follow(t, e, project+"/audit_logs/feed", url.Values{"limit": {"1000"}}, "")
		if w := want(40, func(ev schemas.AuditEvent) bool { return ev.ProjectID != nil }); !slices.Equal(got, w) {
			t.Fatalf("project: %d items, want %d", len(got), len(w))
		}
		since := evs[30].Stored.Time
		got, _, _ = follow(t, e, org+"/audit_logs/feed", url.Values{"since": {since.Format(time.RFC3339Nano)}, "q": {"-source:CLI"}}, "")
		if w := want(40, func(ev schemas.AuditEvent) bool { return !ev.Stored.Time.Before(since) }); !slices.Equal(got, w) {
			t.Fatalf("since: %d items, want %d", len(got), len(w))
		}
		got, _, _ = follow(t, e, org+"/tool_executions/feed", url.Values{"success": {"false"}, "limit": {"4"}}, "")
		if len(got) != 13 {
			t.Fatalf("failed executions: %d, want 13", len(got))
		}
	})
	t.Run("bad input", func(t *testing.T) {
		_, _, cur := follow(t, e, org+"/audit_logs/feed", url.Values{"limit": {"1000"}}, "")
		list := e.call("GET", org+"/audit_logs?limit=1", e.boot, "")
		listCursor, _ := list.data()["next_cursor"].(string)
		for _, b := range []struct{ path, query, msg string }{
			{org + "/audit_logs/feed", "limit=0", "limit: 0 is not between 1 and 1000"},
			{org + "/audit_logs/feed", "limit=1001", "limit: 1001 is not between 1 and 1000"},
			{org + "/audit_logs/feed", "since=yesterday", `since: "yesterday" is not an RFC 3339 time`},
			{org + "/audit_logs/feed", "until=2026-01-01T00:00:00Z", "until: unknown parameter"},
			{org + "/audit_logs/feed", "wait_for=" + uuid.NewString(), "wait_for: unknown parameter"},
			{org + "/audit_logs/feed", "cursor=" + listCursor, "cursor: cursor is malformed"},
			{org + "/audit_logs/feed", "cursor=" + cur + "&action=AUDIT_ACTION_CREATED", "cursor: cursor belongs to another listing"},
			{project + "/audit_logs/feed", "cursor=" + cur, "cursor: cursor belongs to another listing"},
			{org + "/tool_executions/feed", "cursor=" + cur, "cursor: cursor belongs to another listing"},
			{org + "/audit_logs/feed", "cursor=" + cur[:len(cur)-2] + "AA", "cursor: cursor signature does not verify"},
			{org + "/audit_logs/feed", "q=" + url.QueryEscape("actoor:x"), `q: term 1 "actoor:x": unknown key actoor`},
			{org + "/tool_executions/feed", "action=AUDIT_ACTION_CREATED", "action: unknown parameter"},
		} {
			r := e.call("GET", b.path+"?"+b.query, e.boot, "")
			if r.status != 400 || !strings.Contains(r.msg(), b.msg) {
				t.Errorf("%s?%s: %d %q, want 400 with %q", b.path, b.query, r.status, r.msg(), b.msg)
			}
		}
	})
	t.Run("authorization", func(t *testing.T) {
		for _, a := range []struct {
			path, key string
			status    int
		}{
			{org + "/audit_logs/feed", e.alice, 403},
			{project + "/tool_executions/feed", e.alice, 403},
			{org + "/audit_logs/feed?limit=0", "", 401}, // authentication before parameters
			{org + "/audit_logs/feed", "not-a-key", 401},
			{"/api/v1/orgs/" + e.otherOrg.String() + "/audit_logs/feed", e.alice, 200},
		} {
			if r := e.call("GET", a.path, a.key, ""); r.status != a.status {
				t.Errorf("%s as %q: %d %s, want %d", a.path, a.key, r.status, r.raw, a.status)
			}
		}
	})
	t.Run("watermark unavailable", func(t *testing.T) {
		w.fail.Store(true)
		defer w.fail.Store(false)
		if r := e.call("GET", org+"/audit_logs/feed", e.boot, ""); r.status != 503 {
			t.Fatalf("%d %s, want 503", r.status, r.raw)
		}
	})
}
