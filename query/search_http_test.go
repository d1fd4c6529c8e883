package query_test

import (
	"context"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/auditrail/auditrail/internal/auditstore"
	"github.com/auditrail/auditrail/internal/auditstore/storetest"
	"github.com/auditrail/auditrail/schemas"
)

// Both listings of both tables take since, until and q: they filter (and
// page) with them, a malformed one is a 400 naming the parameter and the
// term, and a cursor replays only with the search it came from.
func TestListSearch(t *testing.T) {
	e := newWaitEnv(t)
	org, project := e.org.String(), e.project.String()
	base := time.Now().Add(-time.Hour).Truncate(time.Second)
	var evs []schemas.AuditEvent
	for i := 0; i < 12; i++ {
		ev := storetest.Event(e.org, base.Add(-time.Duration(i)*time.Minute))
		ev.ProjectID = &e.project
		ev.ClientIP = []*string{ptr("10.1.2.3"), ptr("2001:db8::9"), nil}[i%3]
		if i%2 == 0 {
			ev.Source, ev.DisplayName = schemas.AuditSourceCLI, "Ada Lovelace"
		}
		evs = append(evs, ev)
	}
	if err := e.store.WriteAudit(context.Background(), evs); err != nil {
		t.Fatal(err)
	}
	var execs []schemas.ExecutionEvent
	for i := 0; i < 6; i++ {
		id := storetest.V7At(base.Add(-time.Duration(i) * time.Minute)).String()
		at := auditstore.Millis(base.Add(-time.Duration(i) * time.Minute))
		execs = append(execs, schemas.ExecutionEvent{EventID: id, ExecutionID: id, OrganizationID: org, ProjectID: project, UserID: "u1",
			Tool: schemas.ToolRef{Toolkit: "MailToolkit", Name: []string{"SendEmail", "ListEmails"}[i%2]}, StartedAt: at, EndedAt: at,
			Success: i%3 != 0, ExecutionCode: "OK"})
	}
	if err := e.store.WriteExecutions(context.Background(), execs); err != nil {
		t.Fatal(err)
	}
	want := func(keep func(i int) bool) []string {
		var out []string
		for i, ev := range evs { // written newest first
			if keep(i) {
				out = append(out, ev.EventID.String())
			}
		}
		return out
	}
	// walk follows next_cursor with the same parameters.
	walk := func(path string, params url.Values) []string {
		t.Helper()
		var got []string
		for i := 0; i < 20; i++ {
			r := e.call("GET", path+"?"+params.Encode(), e.boot, "")
			if r.status != 200 {
				t.Fatalf("%s?%s: %d %s", path, params.Encode(), r.status, r.raw)
			}
			got = append(got, r.ids()...)
			next, _ := r.data()["next_cursor"].(string)
			if next == "" {
				return got
			}
			params.Set("cursor", next)
		}
		t.Fatal("walk does not end")
		return nil
	}
	orgAudit := "/api/v1/orgs/" + org + "/audit_logs"
	projectAudit := "/api/v1/orgs/" + org + "/projects/" + project + "/audit_logs"
	since, until := base.Add(-8*time.Minute).In(time.FixedZone("", 2*3600)).Format(time.RFC3339), base.Add(-2*time.Minute).Format(time.RFC3339)
	for _, path := range []string{orgAudit, projectAudit} {
		got := walk(path, url.Values{"q": {`source:CLI "ada lov"`}, "limit": {"2"}})
		if w := want(func(i int) bool { return i%2 == 0 }); !slices.Equal(got, w) {
			t.Fatalf("%s q: got %d, want %d", path, len(got), len(w))
		}
		got = walk(path, url.Values{"q": {"ip:10.0.0.0/8,2001:db8::/32 -source:CLI"}, "since": {since}, "until": {until}, "limit": {"1"}})
		if w := want(func(i int) bool { return i%3 != 2 && i%2 == 1 && i >= 3 && i <= 8 }); !slices.Equal(got, w) {
			t.Fatalf("%s since, until, q: got %v, want %v", path, got, w)
		}
	}
	orgExecs := "/api/v1/orgs/" + org + "/tool_executions"
	projectExecs := "/api/v1/orgs/" + org + "/projects/" + project + "/tool_executions"
	for _, path := range []string{orgExecs, projectExecs} {
		got := walk(path, url.Values{"q": {"tool:SendEmail -success:false"}, "until": {base.Format(time.RFC3339)}, "limit": {"1"}})
		if w := []string{execs[2].EventID, execs[4].EventID}; !slices.Equal(got, w) {
			t.Fatalf("%s: got %v, want %v", path, got, w)
		}
	}

	// Malformed parameters: 400, msg naming the parameter (and the term).
	bad := []struct{ path, query, msg string }{
		{orgAudit, "q=" + url.QueryEscape("action:CREATED source:CLI actoor:x"), `q: term 3 "actoor:x": unknown key actoor; keys: action, source, resource_type, resource_id, actor, principal_type, project, ip, event_id`},
		{projectAudit, "q=" + url.QueryEscape(`"open`), `q: term 1 "\"open": unterminated quote`},
		{orgAudit, "since=yesterday", `since: "yesterday" is not an RFC 3339 time`},
		{projectAudit, "since=2026-01-02T00:00:00Z&until=2026-01-02T00:00:00Z", "until: "},
		{orgExecs, "q=actor:x", `q: term 1 "actor:x": unknown key actor; keys: tool, toolkit, user, success, hook_decision, error_kind`},
		{projectExecs, "until=2026-01-02", `until: "2026-01-02" is not an RFC 3339 time`},
		{orgExecs, "q=success:maybe", `q: term 1 "success:maybe": success "maybe" is not true or false`},
	}
	for _, b := range bad {
		r := e.call("GET", b.path+"?"+b.query, e.boot, "")
		if r.status != 400 || !strings.Contains(r.msg(), b.msg) {
			t.Errorf("%s?%s: %d %q, want 400 with %q", b.path, b.query, r.status, r.msg(), b.msg)
		}
	}

	// A cursor replays only with its own q, since and until.
	first := e.call("GET", orgAudit+"?limit=1&q=ada", e.boot, "")
	cursor, _ := first.data()["next_cursor"].(string)
	if first.status != 200 || cursor == "" {
		t.Fatalf("first page: %d %s", first.status, first.raw)
	}
	for _, other := range []string{"q=bob", "", "q=ada&since=" + url.QueryEscape(since), "q=ada&until=" + url.QueryEscape(until)} {
		r := e.call("GET", orgAudit+"?limit=1&cursor="+cursor+"&"+other, e.boot, "")
		if r.status != 400 || !strings.Contains(r.msg(), "cursor") {
			t.Errorf("cursor of q=ada replayed with %q: %d %s", other, r.status, r.raw)
		}
	}
	if r := e.call("GET", orgAudit+"?limit=1&q=ada&cursor="+cursor, e.boot, ""); r.status != 200 {
		t.Fatalf("cursor with its own q: %d %s", r.status, r.raw)
	}
	execFirst := e.call("GET", orgExecs+"?limit=1&q=tool:SendEmail", e.boot, "")
	execCursor, _ := execFirst.data()["next_cursor"].(string)
	if r := e.call("GET", orgExecs+"?limit=1&q=tool:ListEmails&cursor="+execCursor, e.boot, ""); execCursor == "" || r.status != 400 {
		t.Fatalf("execution cursor replayed with another q: %d %s", r.status, r.raw)
	}
}

func ptr[T any](v T) *T { return &v }
