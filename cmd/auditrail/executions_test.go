//go:build e2e

package main

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/auditrail/auditrail/internal/testenv"
	"github.com/auditrail/auditrail/producers"
	"github.com/auditrail/auditrail/schemas"
)

func TestToolExecutionsListing(t *testing.T) {
	t.Parallel()
	t.Run("sqlite", func(t *testing.T) { toolExecutions(t) })
}

func toolExecutions(t *testing.T, extra ...string) {
	p, boot := devWithKey(t, extra...)
	c := newAPIClient(t, p.http)
	org := c.call("POST", "/api/v1/orgs", boot, map[string]any{"name": "Acme"}).data()["id"].(string)
	project := c.call("POST", "/api/v1/orgs/"+org+"/projects", boot, map[string]any{"name": "p"}).data()["id"].(string)
	nc := p.connect(t)
	pub, err := producers.New(nc, producers.DefaultConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var evs []producers.Event
	start := time.Now().Add(-time.Minute)
	for i := 0; i < 25; i++ {
		id := uuid.Must(uuid.NewV7()).String()
		ev := &schemas.ExecutionEvent{EventID: id, ExecutionID: id, OrganizationID: org, ProjectID: project, UserID: "alice",
			Tool:      schemas.ToolRef{Toolkit: "DocumentDbToolkit", Name: "CountDocuments", Version: "0.4.0"},
			StartedAt: start.Add(time.Duration(i) * time.Second), EndedAt: start.Add(time.Duration(i)*time.Second + 5*time.Millisecond),
			DurationMS: 5, Success: i%5 != 0, ExecutionCode: "OK",
			Hooks: []schemas.HookCall{{HookID: "h", HookName: "policy", Point: "pre", Code: "OK", HTTPStatus: 200, Attempts: 1, LatencyMS: 0.8, Decision: "allow"}}}
		if !ev.Success {
			ev.ExecutionCode, ev.ErrorKind, ev.ExecutionError = "HOOK_CHECK_FAILED", "HOOK_CHECK_FAILED", "destructive tools are not allowed"
			ev.Hooks[0].Code, ev.Hooks[0].Decision, ev.Hooks[0].ErrorMessage = "CHECK_FAILED", "deny", ev.ExecutionError
		}
		evs = append(evs, ev)
	}
	if err := pub.PublishBatch(context.Background(), evs); err != nil {
		t.Fatal(err)
	}
	path := "/api/v1/orgs/" + org + "/projects/" + project + "/tool_executions"
	var got []map[string]any
	testenv.Eventually(t, 15*time.Second, func() string { return fmt.Sprintf("%d executions listed, want 25", len(got)) }, func() bool {
		got = nil
		cursor := ""
		for {
			q := path + "?limit=4"
			if cursor != "" {
				q += "&cursor=" + url.QueryEscape(cursor)
			}
			r := c.call("GET", q, boot, nil)
			if r.status != 200 {
				t.Fatalf("%d %s", r.status, r.raw)
			}
			for _, it := range r.data()["items"].([]any) {
				got = append(got, it.(map[string]any))
			}
			if r.data()["has_more"] != true {
				break
			}
			cursor = r.data()["next_cursor"].(string)
		}
		return len(got) == 25
	})
	newest := got[0]
	if newest["execution_id"] != evs[24].(*schemas.ExecutionEvent).ExecutionID || newest["tool_name"] != "DocumentDbToolkit.CountDocuments" || newest["error"] != nil {
		t.Fatalf("newest: %v", newest)
	}
	failed := c.call("GET", "/api/v1/orgs/"+org+"/tool_executions?success=false", boot, nil)
	items := failed.data()["items"].([]any)
	if len(items) != 5 || items[0].(map[string]any)["error"].(map[string]any)["kind"] != "HOOK_CHECK_FAILED" {
		t.Fatalf("failed executions: %s", failed.raw)
	}
	if r := c.call("GET", path+"?success=maybe", boot, nil); r.status != 400 || !strings.Contains(r.msg(), "success") {
		t.Fatalf("bad success: %d %s", r.status, r.msg())
	}
	first := c.call("GET", path+"?limit=2", boot, nil)
	cur := url.QueryEscape(first.data()["next_cursor"].(string))
	if r := c.call("GET", "/api/v1/orgs/"+org+"/audit_logs?cursor="+cur, boot, nil); r.status != 400 {
		t.Fatalf("execution cursor on the audit listing: %d", r.status)
	}
	if r := c.call("GET", path, "", nil); r.status != 401 {
		t.Fatalf("anonymous: %d", r.status)
	}
}
