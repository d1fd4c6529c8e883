//go:build e2e

package main

import (
	"encoding/json"
	"net/http"
	"regexp"
	"slices"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
)

// warnLine is a log line at WARN or ERROR (text or JSON format).
var warnLine = regexp.MustCompile(`level=(WARN|ERROR)|"level":"(WARN|ERROR)"`)

// terminate sends SIGTERM and returns how long the exit took, what dev
// wrote on stderr from the signal on, and the exit error.
func (p *devProc) terminate(t *testing.T) (time.Duration, string, error) {
	t.Helper()
	before := len(p.stderr.String())
	start := time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-p.exited:
		return time.Since(start), p.stderr.String()[before:], err
	case <-time.After(30 * time.Second):
		t.Fatalf("dev did not exit within 30s of SIGTERM\n%s", p.stderr)
		return 0, "", nil
	}
}

// TestDevShutdown: SIGTERM stops dev promptly, quietly and without losing
// what it was given: exit status 0, no WARN or ERROR line about the
// watches, subscriptions and consumers it closes itself, within 2 s when
// idle; events emitted just before the signal are all stored.
func TestDevShutdown(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		extra  []string
		events int           // emitted just before SIGTERM (0: idle)
		tools  bool          // call a tool of each toolkit of the demo first
		within time.Duration // bound of the exit after SIGTERM
	}{
		{name: "idle", within: 2 * time.Second},
		{name: "idle with demo", extra: []string{"--demo"}, within: 2 * time.Second},
		// The toolkits hold connections to the demo's servers (FerretDB
		// waits up to 3 s for its clients): they close before the servers
		// are waited for.
		{name: "demo after tool calls", extra: []string{"--demo"}, tools: true, within: 2 * time.Second},
		// Ingest commits the batch in hand before the process exits: that
		// takes what the store takes (seconds for 10,000 events in SQLite on
		// a busy machine), bounded by ingest's DrainTimeout (10 s).
		{name: "events in flight", events: 20000, extra: []string{"--flush-interval", "1s"}, within: 15 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := t.TempDir()
			p := startDev(t, data, tt.extra...)
			key := keyRe.FindString(p.stdout.String())
			if key == "" {
				t.Fatalf("no bootstrap key printed:\n%s", p.stdout)
			}
			// A client that keeps its connection open, as browsers and
			// pollers do, must not hold up the exit.
			client := &http.Client{Transport: &http.Transport{}}
			resp, err := client.Get("http://" + p.http + "/healthz")
			if err != nil {
				t.Fatal(err)
			}
			var health map[string]json.RawMessage
			err = json.NewDecoder(resp.Body).Decode(&health)
			resp.Body.Close()
			if err != nil {
				t.Fatal(err)
			}
			checkDevHealthKeys(t, health)
			if tt.tools {
				callDemoTools(t, p)
			}
			if tt.events == 0 {
				time.Sleep(time.Second) // idle: the watches and consumers are waiting
			}
			org := uuid.New()
			if tt.events > 0 {
				emit(t, p, org, tt.events)
			}
			took, tail, err := p.terminate(t)
			t.Logf("exit after SIGTERM: %s", took.Round(time.Millisecond))
			if err != nil {
				t.Fatalf("dev exited with %v after SIGTERM\n%s", err, p.stderr)
			}
			if took > tt.within {
				t.Errorf("dev took %s to exit after SIGTERM, want at most %s\n%s", took, tt.within, tail)
			}
			for _, line := range strings.Split(tail, "\n") {
				if warnLine.MatchString(line) {
					t.Errorf("shutdown logged: %s", line)
				}
			}
			if tt.events == 0 {
				return
			}
			p = startDev(t, data, tt.extra...)
			ids := walk(t, p.http, "/api/v1/orgs/"+org.String()+"/audit_logs", key, 100)
			if len(ids) != tt.events {
				t.Errorf("after a restart %d events stored, want %d", len(ids), tt.events)
			}
			p.stop(t)
		})
	}
}

// checkDevHealthKeys: dev's /healthz names its checks and counters in one
// scheme, a consumer's counters under the name of its check.
func checkDevHealthKeys(t *testing.T, health map[string]json.RawMessage) {
	t.Helper()
	var checks map[string]string
	if err := json.Unmarshal(health["checks"], &checks); err != nil {
		t.Fatalf("/healthz checks: %v", err)
	}
	var names []string
	for name := range checks {
		names = append(names, name)
	}
	sort.Strings(names)
	// dev is every module: each adds its checks, as in its own role.
	if want := []string{"deliver", "ingest_audit", "ingest_executions", "nats", "store", "tlog"}; !slices.Equal(names, want) {
		t.Errorf("/healthz checks %v, want %v", names, want)
	}
	for _, key := range []string{"ingest_audit", "ingest_executions", "hooks", "execution_outbox", "audit_outbox", "deliver"} {
		if _, ok := health[key]; !ok {
			t.Errorf("/healthz lacks %q", key)
		}
	}
	for key := range health {
		if !healthKey.MatchString(key) {
			t.Errorf("/healthz key %q does not follow the scheme", key)
		}
	}
}

// callDemoTools calls a tool of each toolkit of dev --demo as the demo user.
func callDemoTools(t *testing.T, p *devProc) {
	t.Helper()
	out := p.stdout.String()
	key, ids := demoKeyRe.FindStringSubmatch(out), demoIDsRe.FindStringSubmatch(out)
	if key == nil || ids == nil {
		t.Fatalf("demo not printed:\n%s", out)
	}
	c := newAPIClient(t, p.http)
	base := "/api/v1/orgs/" + ids[1] + "/projects/" + ids[2] + "/tools/execute"
	for _, call := range []map[string]any{
		{"tool_name": "DocumentDbToolkit.DiscoverCollections", "input": map[string]any{"database_name": "shop"}},
		{"tool_name": "DocsToolkit.SearchDocuments", "input": map[string]any{"document_contains": []string{"launch"}}},
		{"tool_name": "MailToolkit.ListEmailsInFolder", "input": map[string]any{"well_known_folder_name": "inbox", "limit": 1}},
	} {
		if r := c.call("POST", base, key[1], call); r.status != 200 || r.data()["success"] != true {
			t.Fatalf("%s: %d %s", call["tool_name"], r.status, r.raw)
		}
	}
}
