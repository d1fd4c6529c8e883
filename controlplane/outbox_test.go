package controlplane

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/auditrail/auditrail/internal/natsx"
	"github.com/auditrail/auditrail/internal/testenv"
	"github.com/auditrail/auditrail/schemas"
)

// Concurrent conflicting changes from several instances: the audit stream
// holds exactly one event per applied change (a 409 records nothing).
func TestConcurrentConflictingChangesRecordExactlyTheApplied(t *testing.T) {
	srv, _, _ := testenv.NATS(t)
	nodes := make([]*node, 5)
	for i := range nodes {
		nodes[i] = newNode(t, srv.ClientURL(), nodeOpts{})
	}
	org := nodes[0].must(201, "POST", "/api/v1/orgs", bootKey, map[string]any{"name": "Acme"}).field("id")
	members := "/api/v1/orgs/" + org + "/members/"
	nodes[0].must(201, "PUT", members+"u1", bootKey, map[string]any{"role": "member"})
	nodes[0].must(201, "PUT", members+"u2", bootKey, map[string]any{"role": "member"})
	for _, n := range nodes {
		testenv.Eventually(t, 10*time.Second, "every instance sees the members", func() bool {
			r := n.call("GET", "/api/v1/orgs/"+org+"/members", bootKey, nil)
			return r.status == 200 && strings.Count(string(r.Data), `"user_id"`) == 2
		})
	}

	tests := []struct {
		name    string
		request func(i int) (method, path string, body any)
		applied func(t *testing.T, applied, conflicts int)
	}{
		{"update one member", func(i int) (string, string, any) {
			return "PUT", members + "u1", map[string]any{"role": []string{"admin", "member"}[i%2], "display_name": fmt.Sprint("n", i)}
		}, func(t *testing.T, applied, conflicts int) {
			if applied == 0 || conflicts == 0 {
				t.Fatalf("%d applied, %d conflicts: the test needs both", applied, conflicts)
			}
		}},
		{"delete one member", func(int) (string, string, any) {
			return "DELETE", members + "u2", nil
		}, func(t *testing.T, applied, _ int) {
			if applied != 1 {
				t.Fatalf("%d deletions applied", applied)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := eventIDs(t, nodes[0].nc)
			var (
				mu                 sync.Mutex
				applied, conflicts int
				ids                []string
				wg                 sync.WaitGroup
			)
			for i := 0; i < 50; i++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					method, path, body := tc.request(i)
					r := nodes[i%len(nodes)].call(method, path, bootKey, body)
					id := r.header.Get(HeaderEventID)
					mu.Lock()
					defer mu.Unlock()
					switch r.status {
					case 200, 201:
						applied++
						ids = append(ids, id)
					case 409, 404:
						conflicts++
						if id != "" {
							t.Errorf("a refused change (%d) recorded event %s", r.status, id)
						}
					default:
						t.Errorf("%s %s: %d %s", method, path, r.status, r.Msg)
					}
				}()
			}
			wg.Wait()
			t.Logf("%d applied, %d refused", applied, conflicts)
			tc.applied(t, applied, conflicts)
			after := eventIDs(t, nodes[0].nc)
			if got := len(after) - len(before); got != applied {
				t.Fatalf("%d changes applied, %d events in the audit stream (%d refused)", applied, got, conflicts)
			}
			for _, id := range ids {
				if id == "" || count(after, id) != 1 {
					t.Fatalf("event %q of an applied change is in the stream %d times", id, count(after, id))
				}
			}
			// An entry leaves the outbox just after its publish is acked:
			// wait for that, not for more.
			for _, n := range nodes {
				testenv.Eventually(t, 5*time.Second, func() string { return fmt.Sprintf("%d events left in the outbox", n.state.PendingCount()) },
					func() bool { return n.state.PendingCount() == 0 })
			}
		})
	}
}

// A process killed between the write and the publish: the change is
// there, its event is not; another instance on the same bucket publishes it
// on start, once.
func TestCrashBetweenWriteAndPublishEventAppearsOnceAfterRestart(t *testing.T) {
	srv, nc, _ := testenv.NATS(t)
	live := newNode(t, srv.ClientURL(), nodeOpts{})
	org := live.must(201, "POST", "/api/v1/orgs", bootKey, map[string]any{"name": "Acme"}).field("id")
	live.must(201, "PUT", "/api/v1/orgs/"+org+"/members/bob", bootKey, map[string]any{"role": "member"})

	tests := []struct {
		name         string
		method, path string
		body         any
		applied      func() bool // as another instance sees it
	}{
		{"create", "POST", "/api/v1/orgs/" + org + "/projects", map[string]any{"name": "p"}, func() bool {
			r := live.call("GET", "/api/v1/orgs/"+org+"/projects", bootKey, nil)
			return strings.Contains(string(r.Data), `"name":"p"`)
		}},
		{"delete", "DELETE", "/api/v1/orgs/" + org + "/members/bob", nil, func() bool {
			r := live.call("GET", "/api/v1/orgs/"+org+"/members", bootKey, nil)
			return r.status == 200 && !strings.Contains(string(r.Data), `"bob"`)
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			crashed := newNode(t, srv.ClientURL(), nodeOpts{service: func(c *ServiceConfig) { c.stopAfterWrite = true }})
			r := crashed.call(tc.method, tc.path, bootKey, tc.body)
			id := r.header.Get(HeaderEventID)
			if r.status != 500 || id == "" {
				t.Fatalf("crashed request: %d %q %s", r.status, id, r.Msg)
			}
			testenv.Eventually(t, 10*time.Second, "the change is applied", tc.applied)
			if n := count(eventIDs(t, nc), id); n != 0 {
				t.Fatalf("event published before the restart (%d)", n)
			}
			waiting := crashed.state.PendingEvents()
			if len(waiting) != 1 || waiting[0].ID != id {
				t.Fatalf("outbox holds %v", waiting)
			}

			restarted := newNode(t, srv.ClientURL(), nodeOpts{})
			restarted.run()
			testenv.Eventually(t, 10*time.Second, "the event is published after the restart", func() bool { return count(eventIDs(t, nc), id) == 1 })
			testenv.Eventually(t, 10*time.Second, "the outbox is empty", func() bool {
				return restarted.state.PendingCount() == 0 && live.state.PendingCount() == 0
			})
			// A second sweep of the same entry (another instance that saw
			// it before the purge) stores nothing new.
			if err := restarted.svc.rec.Send(context.Background(), mustRecord(t, waiting[0].Value).msg()); err != nil {
				t.Fatal(err)
			}
			if n := count(eventIDs(t, nc), id); n != 1 {
				t.Fatalf("event stored %d times after a republish", n)
			}
		})
	}
}

// While the audit stream is unavailable, changes are applied and their
// events wait in the outbox (up to MaxPending, then 503); when the stream
// returns, each waiting event is published once.
func TestMutationAuditedWhenAuditLogReturns(t *testing.T) {
	srv, nc, js := testenv.NATS(t)
	n := newNode(t, srv.ClientURL(), nodeOpts{timeout: 300 * time.Millisecond,
		service: func(c *ServiceConfig) { c.MaxPending, c.SweepInterval = 2, 100*time.Millisecond }})
	n.run()
	org := n.must(201, "POST", "/api/v1/orgs", bootKey, map[string]any{"name": "Acme"}).field("id")
	projects := "/api/v1/orgs/" + org + "/projects"
	ctx := context.Background()
	if err := js.DeleteStream(ctx, schemas.StreamEvents); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, name := range []string{"p1", "p2"} {
		r := n.must(201, "POST", projects, bootKey, map[string]any{"name": name})
		if r.header.Get(HeaderEventID) == "" {
			t.Fatal("no Auditrail-Event-Id")
		}
		ids = append(ids, r.header.Get(HeaderEventID))
	}
	r := n.call("POST", projects, bootKey, map[string]any{"name": "p3"})
	if r.status != 503 || !strings.Contains(r.Msg, "audit") || r.header.Get(HeaderEventID) != "" {
		t.Fatalf("mutation beyond MaxPending: %d %s", r.status, r.Msg)
	}
	if got := n.must(200, "GET", projects, bootKey, nil).Data; strings.Count(string(got), `"id"`) != 2 || strings.Contains(string(got), "p3") {
		t.Fatalf("projects: %s", got)
	}

	if err := natsx.EnsureStreams(ctx, js, natsx.DefaultStreamConfig()); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, "the waiting events are published", func() bool { return n.state.PendingCount() == 0 })
	stored := eventIDs(t, nc)
	if len(stored) != 2 || count(stored, ids[0]) != 1 || count(stored, ids[1]) != 1 {
		t.Fatalf("stream holds %v, want %v once each", stored, ids)
	}
	n.must(201, "POST", projects, bootKey, map[string]any{"name": "p4"})
}

func TestServiceConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		mut  func(*ServiceConfig)
		ok   bool
	}{
		{"default", func(*ServiceConfig) {}, true},
		{"sweep too short", func(c *ServiceConfig) { c.SweepInterval = time.Millisecond }, false},
		{"no pending allowed", func(c *ServiceConfig) { c.MaxPending = 0 }, false},
	}
	for _, tc := range tests {
		c := DefaultServiceConfig()
		tc.mut(&c)
		if err := c.Validate(); (err == nil) != tc.ok {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
}

func mustRecord(t *testing.T, v []byte) outboxRecord {
	t.Helper()
	var r outboxRecord
	if err := json.Unmarshal(v, &r); err != nil {
		t.Fatal(err)
	}
	return r
}
