package mcpserver_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/auditrail/auditrail/internal/testenv"
	"github.com/auditrail/auditrail/toolrunner"
	"github.com/auditrail/auditrail/toolrunner/mcpserver"
)

const pingBody = `{"jsonrpc":"2.0","id":2,"method":"ping"}`

// openSession initializes a session of key (acting for user, "" for the
// key's default) with a raw request and returns its Mcp-Session-Id; it is
// deleted at the test's end.
func openSession(t *testing.T, url, key, user string) string {
	t.Helper()
	h := header{"Authorization": "Bearer " + key}
	if user != "" {
		h[mcpserver.HeaderUserID] = user
	}
	resp, body := rawRequest(t, http.MethodPost, url, initializeBody, h)
	id := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != http.StatusOK || id == "" {
		t.Fatalf("initialize as %s/%s: %d %s", key, user, resp.StatusCode, body)
	}
	return id
}

// sessionStatus is the status of a ping on session id (200: open, 404:
// ended).
func sessionStatus(t *testing.T, url, key, user, id string) int {
	t.Helper()
	h := header{"Authorization": "Bearer " + key, "Mcp-Session-Id": id}
	if user != "" {
		h[mcpserver.HeaderUserID] = user
	}
	resp, _ := rawRequest(t, http.MethodPost, url, pingBody, h)
	return resp.StatusCode
}

// projectURL is the endpoint of another project on the server of url.
func projectURL(url string) string {
	return url[:strings.Index(url, "/mcp/")] + "/mcp/v1/orgs/" + uuid.NewString() + "/projects/" + uuid.NewString()
}

// At a cap, an initialize ends the least recently used session of the
// capped scope instead of being refused: one service key naming a new
// user for each session stays under its principal's cap (the user cap is
// per user: it does not hold it), and so do a project opened by many keys
// and the whole server opened on many projects. A session used since
// (ping) outlives an older one left idle.
func TestSessionCaps(t *testing.T) {
	type open struct{ key, user string }
	for _, tc := range []struct {
		name string
		caps [4]int // per user, principal, project, all
		n    int
		// who opens session i, on which project (index)
		who     func(i int) (key, user string, project int)
		touchAt map[int]int // after opening session i, ping session j
		alive   []int
	}{
		{"one key, a user each", [4]int{1, 4, 64, 64}, 12,
			func(i int) (string, string, int) { return "good", fmt.Sprintf("user-%d", i), 0 }, nil, []int{8, 9, 10, 11}},
		{"one key and user", [4]int{3, 64, 64, 64}, 7,
			func(int) (string, string, int) { return "good", "", 0 }, nil, []int{4, 5, 6}},
		{"a key each, one project", [4]int{1, 2, 4, 64}, 10,
			func(i int) (string, string, int) { return fmt.Sprintf("good-%d", i), "", 0 }, nil, []int{6, 7, 8, 9}},
		{"a key and a project each", [4]int{1, 2, 2, 4}, 10,
			func(i int) (string, string, int) { return fmt.Sprintf("good-%d", i), "", i }, nil, []int{6, 7, 8, 9}},
		{"least recently used first", [4]int{1, 3, 64, 64}, 5,
			func(i int) (string, string, int) { return "good", fmt.Sprintf("user-%d", i), 0 }, map[int]int{2: 0, 3: 0}, []int{0, 3, 4}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := mcpserver.DefaultConfig()
			cfg.MaxSessionsPerUser, cfg.MaxSessionsPerPrincipal, cfg.MaxSessionsPerProject, cfg.MaxSessions = tc.caps[0], tc.caps[1], tc.caps[2], tc.caps[3]
			f := &fakeRunner{defs: []toolrunner.Definition{countDef}}
			base := serveHTTP(t, f, cfg)
			urls := map[int]string{0: base}
			ids := make([]string, tc.n)
			whose := make([]open, tc.n)
			url := func(p int) string {
				if urls[p] == "" {
					urls[p] = projectURL(base)
				}
				return urls[p]
			}
			for i := range tc.n {
				key, user, p := tc.who(i)
				ids[i], whose[i] = openSession(t, url(p), key, user), open{key, user}
				if j, ok := tc.touchAt[i]; ok {
					time.Sleep(5 * time.Millisecond) // a later use than the sessions opened so far
					if st := sessionStatus(t, url(p), whose[j].key, whose[j].user, ids[j]); st != http.StatusOK {
						t.Fatalf("session %d: ping %d", j, st)
					}
				}
				time.Sleep(2 * time.Millisecond) // distinct times of use
			}
			// Ended sessions are closed in the background.
			var alive []int
			testenv.Eventually(t, 5*time.Second, func() string { return fmt.Sprintf("open sessions %v, want %v", alive, tc.alive) }, func() bool {
				alive = nil
				for i := range tc.n {
					_, _, p := tc.who(i)
					switch st := sessionStatus(t, url(p), whose[i].key, whose[i].user, ids[i]); st {
					case http.StatusOK:
						alive = append(alive, i)
					case http.StatusNotFound:
					default:
						t.Fatalf("session %d: ping %d", i, st)
					}
				}
				return slices.Equal(alive, tc.alive)
			})
		})
	}
}

// A client of an evicted session sees it end: its next request fails
// (404), and it may start a new one.
func TestEvictedClient(t *testing.T) {
	cfg := mcpserver.DefaultConfig()
	cfg.MaxSessionsPerUser = 2
	f := &fakeRunner{defs: []toolrunner.Definition{countDef}}
	url := serveHTTP(t, f, cfg)
	good := header{"Authorization": "Bearer good"}
	first, err := httpClient(t, url, good, nil)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		time.Sleep(2 * time.Millisecond)
		if _, err := httpClient(t, url, good, nil); err != nil {
			t.Fatalf("a session above the cap was refused: %v", err)
		}
	}
	testenv.Eventually(t, 5*time.Second, "the least recently used session ends", func() bool {
		_, err := first.ListTools(context.Background(), nil)
		return err != nil
	})
}

// goroutinesAtMost waits until the process runs at most n goroutines and
// returns the count.
func goroutinesAtMost(n int, within time.Duration) int {
	deadline := time.Now().Add(within)
	for {
		g := runtime.NumGoroutine()
		if g <= n || time.Now().After(deadline) {
			return g
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// One service key opening a session for each of many users holds the
// goroutines of its principal's cap, not of every session it opened; once
// its sessions are closed, the goroutines are back to where they were.
func TestSessionCapGoroutines(t *testing.T) {
	cfg := mcpserver.DefaultConfig()
	cfg.MaxSessionsPerUser, cfg.MaxSessionsPerPrincipal = 1, 5
	f := &fakeRunner{defs: []toolrunner.Definition{countDef}}
	url := serveHTTP(t, f, cfg)
	// The keep-alive connection of the test's client, and the server's
	// worker for it, exist before the baseline.
	if resp, _ := rawRequest(t, http.MethodGet, url, "", header{"Accept": "text/event-stream"}); resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("GET without a session: %d", resp.StatusCode)
	}
	time.Sleep(100 * time.Millisecond)
	g0 := runtime.NumGoroutine()
	var ids []string
	for i := range 5 {
		ids = append(ids, openSession(t, url, "good", fmt.Sprintf("user-%d", i)))
	}
	g5 := runtime.NumGoroutine()
	if g5 <= g0 {
		t.Fatalf("5 sessions run no goroutine (%d, then %d): the measure is wrong", g0, g5)
	}
	for i := 5; i < 60; i++ {
		ids = append(ids, openSession(t, url, "good", fmt.Sprintf("user-%d", i)))
	}
	g60 := goroutinesAtMost(g5+5, 5*time.Second)
	if g60 > g5+5 {
		t.Fatalf("60 sessions of one key: %d goroutines, %d with its 5 first (%d before)", g60, g5, g0)
	}
	for i, id := range ids[55:] {
		resp, body := rawRequest(t, http.MethodDelete, url, "", header{"Mcp-Session-Id": id, mcpserver.HeaderUserID: fmt.Sprintf("user-%d", 55+i)})
		if resp.StatusCode != http.StatusNoContent {
			t.Fatalf("DELETE: %d %s", resp.StatusCode, body)
		}
	}
	g := goroutinesAtMost(g0+2, 5*time.Second)
	if g > g0+2 {
		t.Fatalf("all sessions closed: %d goroutines, %d before", g, g0)
	}
	t.Logf("goroutines: %d before, %d with 5 sessions, %d after 60 opened, %d once closed", g0, g5, g60, g)
}

// post sends an initialize as key "good" without failing the test (it may
// run in another goroutine).
func post(url, body string) (int, string, string, error) {
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return 0, "", "", err
	}
	req.Header.Set("Authorization", "Bearer good")
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := (&http.Client{Transport: transport}).Do(req)
	if err != nil {
		return 0, "", "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Mcp-Session-Id"), string(b), nil
}

// A session still starting (its initialize lists the tools) cannot be
// ended: at a cap that only such sessions fill, an initialize gets 429
// with Retry-After.
func TestSessionCapWhileStarting(t *testing.T) {
	cfg := mcpserver.DefaultConfig()
	cfg.MaxSessionsPerUser = 1
	gate := make(chan struct{})
	f := &fakeRunner{defs: []toolrunner.Definition{countDef}, gate: gate}
	url := serveHTTP(t, f, cfg)
	type result struct {
		status int
		id     string
		err    error
	}
	first := make(chan result, 1)
	go func() {
		st, id, _, err := post(url, initializeBody)
		first <- result{st, id, err}
	}()
	released := false
	defer func() {
		if !released {
			close(gate)
		}
	}()
	// The first initialize lists the tools (held at the gate).
	testenv.Eventually(t, 5*time.Second, "the first initialize lists the tools", func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		return f.gated == 1
	})
	resp, body := rawRequest(t, http.MethodPost, url, initializeBody, nil)
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("while the only session of the binding starts: %d %q %s", resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
	if _, msg := rpcErrorOf(t, body); !strings.Contains(msg, "at most 1") || !strings.Contains(msg, "starting") {
		t.Fatalf("429: %s", body)
	}
	close(gate)
	released = true
	r := <-first
	if r.err != nil || r.status != http.StatusOK || r.id == "" {
		t.Fatalf("the first initialize: %d %v", r.status, r.err)
	}
	// Started, it can be ended to make room.
	second := openSession(t, url, "good", "")
	if st := sessionStatus(t, url, "good", "", second); st != http.StatusOK {
		t.Fatalf("second session: %d", st)
	}
	rawRequest(t, http.MethodDelete, url, "", header{"Mcp-Session-Id": r.id})
}

// A session that never called a tool ends after UnusedSessionTimeout; one
// that called a tool lives on (SessionTimeout applies to it).
func TestUnusedSessionTimeout(t *testing.T) {
	cfg := mcpserver.DefaultConfig()
	cfg.ListCheck, cfg.UnusedSessionTimeout = 20*time.Millisecond, 300*time.Millisecond
	f := &fakeRunner{defs: []toolrunner.Definition{countDef}, result: toolrunner.Result{ExecutionID: "e", Success: true, Output: 1.0}}
	url := serveHTTP(t, f, cfg)
	good := header{"Authorization": "Bearer good"}
	unused, err := httpClient(t, url, good, nil)
	if err != nil {
		t.Fatal(err)
	}
	used, err := httpClient(t, url, good, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := unused.ListTools(ctx, nil); err != nil { // a list is no tool call
		t.Fatal(err)
	}
	if res, err := used.CallTool(ctx, &mcp.CallToolParams{Name: "Db.Count", Arguments: map[string]any{"collection": "c"}}); err != nil || res.IsError {
		t.Fatalf("call: %v %+v", err, res)
	}
	time.Sleep(3 * cfg.UnusedSessionTimeout)
	if _, err := unused.ListTools(ctx, nil); err == nil {
		t.Fatalf("a session without a tool call still answers after %v idle", 3*cfg.UnusedSessionTimeout)
	}
	if _, err := used.ListTools(ctx, nil); err != nil {
		t.Fatalf("a session that called a tool ended after %v idle: %v", 3*cfg.UnusedSessionTimeout, err)
	}
}
