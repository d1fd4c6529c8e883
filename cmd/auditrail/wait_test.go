//go:build e2e

package main

import (
	"testing"
	"time"
)

// A script waits for its own event instead of sleeping: the answer of a
// tool execution or an admin change carries Auditrail-Event-Id, and the
// listing asked at once with wait_for=<that id> holds the event as its first
// item (Auditrail-Wait-For: found), although ingest stores it about a
// second later.
func TestWaitForOwnEvent(t *testing.T) {
	t.Parallel()
	p, boot := devWithKey(t)
	c := newAPIClient(t, p.http)
	org := c.call("POST", "/api/v1/orgs", boot, map[string]any{"name": "Acme"}).data()["id"].(string)
	project := c.call("POST", "/api/v1/orgs/"+org+"/projects", boot, map[string]any{"name": "p"}).data()["id"].(string)
	base := "/api/v1/orgs/" + org
	tests := []struct {
		name           string
		method, path   string
		body           map[string]any
		listing, field string
	}{
		{"tool execution", "POST", base + "/projects/" + project + "/tools/execute",
			map[string]any{"tool_name": "DocumentDbToolkit.DiscoverDatabases", "input": map[string]any{}, "user_id": "alice"},
			base + "/projects/" + project + "/tool_executions", "execution_id"},
		{"tool execution, org listing", "POST", base + "/projects/" + project + "/tools/execute",
			map[string]any{"tool_name": "DocumentDbToolkit.DiscoverDatabases", "input": map[string]any{}, "user_id": "bob"},
			base + "/tool_executions", "execution_id"},
		{"admin change", "PUT", base + "/members/alice", map[string]any{"role": "member", "display_name": "Alice"}, base + "/audit_logs", "event_id"},
		{"admin change in a project", "PUT", base + "/projects/" + project + "/members/alice", map[string]any{"role": "member"},
			base + "/projects/" + project + "/audit_logs", "event_id"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := c.call(tc.method, tc.path, boot, tc.body)
			id := r.header.Get("Auditrail-Event-Id")
			if r.status/100 != 2 || id == "" {
				t.Fatalf("%s %s: %d, event id %q: %s", tc.method, tc.path, r.status, id, r.raw)
			}
			start := time.Now()
			l := c.call("GET", tc.listing+"?limit=3&wait_for="+id, boot, nil)
			elapsed := time.Since(start)
			if l.status != 200 || l.header.Get("Auditrail-Wait-For") != "found" {
				t.Fatalf("listing with wait_for after %s: %d %q %s", elapsed, l.status, l.header.Get("Auditrail-Wait-For"), l.raw)
			}
			items, _ := l.data()["items"].([]any)
			if len(items) == 0 || items[0].(map[string]any)[tc.field] != id {
				t.Fatalf("the event %s is not the first item: %s", id, l.raw)
			}
			t.Logf("listed after %s", elapsed)
		})
	}
}
