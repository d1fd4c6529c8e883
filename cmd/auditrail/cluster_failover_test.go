//go:build e2e && !race

// The cluster tests run without the race detector, in the second step of
// `make test`: what they test runs in other processes (the roles, the
// ClickHouse and NATS servers of the cluster) or is tested under the race
// detector elsewhere, and the race detector would make their in-process
// servers and harness several times slower (14 minutes were not enough).

package main

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/auditrail/auditrail/internal/natsx"
	"github.com/auditrail/auditrail/internal/testenv"
	"github.com/auditrail/auditrail/producers"
	"github.com/auditrail/auditrail/schemas"
)

// clusterEvents is the number of events of the cluster tests: the failover
// test and the ClickHouse cluster's (AUDITRAIL_CLUSTER_EVENTS, default
// 50,000: the failover happens at the same fractions of the run with more;
// make test-e2e CLUSTER_EVENTS=200000).
func clusterEvents(t *testing.T) int {
	n := 50_000
	if v := os.Getenv("AUDITRAIL_CLUSTER_EVENTS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1000 {
			t.Fatalf("AUDITRAIL_CLUSTER_EVENTS=%q: want an integer of at least 1000", v)
		}
	}
	return n
}

// apiWatch calls the audit and admin APIs until stop, and keeps what is
// wrong: an answer other than 200 or 503, or a page out of order or with
// an event twice.
type apiWatch struct {
	mu                 sync.Mutex
	calls, unavailable int
	wrong              []string
}

func (w *apiWatch) add(status int, what string, ok bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.calls++
	switch {
	case status == http.StatusServiceUnavailable:
		w.unavailable++
	case status != http.StatusOK || !ok:
		if len(w.wrong) < 20 {
			w.wrong = append(w.wrong, what)
		}
	}
}

// A 3-server JetStream cluster with every stream and bucket at 3 replicas
// (--nats-replicas 3) loses nothing while the events stream's leader is shut
// down and another server restarted: `auditrail dev` (the real ingest, the
// control plane with its outbox, the tool runner with its execution outbox,
// the query API over SQLite) runs against it while events are published;
// every event is in the stream once and stored once, the APIs answer 200 or
// 503 throughout with well-formed pages, every admin change made during
// the failover is in the state and in the audit log, and every tool
// execution answered is stored.
func TestClusterFailover(t *testing.T) {
	testenv.Long(t, "three NATS servers and tens of thousands of events")
	n := clusterEvents(t)
	began := time.Now()
	cluster := testenv.NewNATSCluster(t, 3)
	t.Logf("cluster up in %s", time.Since(began).Round(time.Millisecond))
	data := t.TempDir()
	boot := "bootstrap-key-of-the-failover-test"
	p := launchDev(t, data, append([]string{"--nats-url", cluster.URL(), "--nats-creds", cluster.Creds(natsx.RoleAdmin), "--nats-replicas", "3",
		"--bootstrap-key", boot, "--flush-interval", "100ms", "--rate-limit", "1000000/60s", "--admin-rate-limit", "1000000/60s",
		"--tool-rate-limit", "1000000/60s"}, cluster.TLSArgs()...)...)
	p.waitHealthy(t, 60*time.Second)
	t.Logf("dev healthy at %s", time.Since(began).Round(time.Millisecond))
	c := newAPIClient(t, p.http)
	org := c.call("POST", "/api/v1/orgs", boot, map[string]any{"name": "Acme"}).data()["id"].(string)
	project := c.call("POST", "/api/v1/orgs/"+org+"/projects", boot, map[string]any{"name": "p"}).data()["id"].(string)
	loadOrg := uuid.New() // the published events' organization

	nc := cluster.Connect(t, natsx.RoleAdmin)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	for s, r := range streamReplicas(t, js, schemas.StreamEvents, schemas.StreamDLQ, "KV_auditrail_controlplane", "KV_auditrail_ratelimit") {
		if r != 3 {
			t.Fatalf("%s: %d replicas, want 3", s, r)
		}
	}
	pub, err := producers.New(nc, producers.DefaultConfig(), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	start := time.Now()
	var published atomic.Int64
	pubDone := make(chan error, 2)
	const batch = 2000
	base := time.Now().Add(-time.Hour)
	for w := range 2 { // two publishers, each its half
		go func() {
			for i := w * batch; i < n; i += 2 * batch {
				evs := make([]producers.Event, 0, batch)
				for j := i; j < min(i+batch, n); j++ {
					evs = append(evs, &schemas.AuditEvent{EventID: uuid.New(), Timestamp: base.Add(time.Duration(j) * time.Millisecond),
						Action: schemas.AuditActionCreated, Source: schemas.AuditSourceAPI, OrganizationID: loadOrg,
						PrincipalID: "load", PrincipalType: "ACCOUNT", ResourceType: schemas.Ptr(schemas.ResourceTypeAPIKey)})
				}
				if err := pub.PublishBatch(ctx, evs); err != nil {
					pubDone <- err
					return
				}
				published.Add(int64(len(evs)))
			}
			pubDone <- nil
		}()
	}

	// The APIs, throughout.
	stop := make(chan struct{})
	var watch apiWatch
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		c := newAPIClient(t, p.http) // a client of its own: a client counts its checks
		for {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
			r := c.call("GET", "/api/v1/orgs/"+loadOrg.String()+"/audit_logs?limit=50", boot, nil)
			items, _ := r.data()["items"].([]any)
			ok, seen, last := true, map[string]bool{}, ""
			for _, it := range items {
				m, _ := it.(map[string]any)
				id, _ := m["event_id"].(string)
				ts, _ := m["timestamp"].(string)
				if seen[id] || (last != "" && ts > last) {
					ok = false
				}
				seen[id], last = true, ts
			}
			watch.add(r.status, fmt.Sprintf("audit list: %d %.200s", r.status, r.raw), ok)
			r = c.call("GET", "/api/v1/orgs/"+org, boot, nil)
			watch.add(r.status, fmt.Sprintf("org: %d %.200s", r.status, r.raw), r.data()["id"] == org)
		}
	}()
	// Admin changes and tool executions, throughout: each retried until
	// answered (a 503 during an election), then it must last.
	var members, executions []string
	go func() {
		defer wg.Done()
		c := newAPIClient(t, p.http)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
			user := fmt.Sprintf("fo-user-%d", i)
			for {
				r := c.call("PUT", "/api/v1/orgs/"+org+"/members/"+user, boot, map[string]any{"role": "member"})
				if r.status/100 == 2 {
					members = append(members, user)
					break
				}
				watch.add(r.status, fmt.Sprintf("member change: %d %.200s", r.status, r.raw), false)
				time.Sleep(200 * time.Millisecond)
			}
			r := c.call("POST", "/api/v1/orgs/"+org+"/projects/"+project+"/tools/execute", boot,
				map[string]any{"tool_name": "DocumentDbToolkit.DiscoverDatabases", "input": map[string]any{}, "user_id": user})
			if id, _ := r.data()["execution_id"].(string); r.status/100 == 2 && id != "" {
				executions = append(executions, id)
			} else {
				watch.add(r.status, fmt.Sprintf("tool execution: %d %.200s", r.status, r.raw), false)
			}
		}
	}()

	waitPublished := func(k int) {
		t.Helper()
		for published.Load() < int64(k) {
			select {
			case err := <-pubDone:
				if err != nil {
					t.Fatalf("publish: %v", err)
				}
				pubDone <- nil
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	waitPublished(n / 5)
	leader := cluster.Leader(t, js, schemas.StreamEvents)
	t.Logf("%s: shutting down the leader of %s, %s, at %d events published", time.Since(start).Round(time.Millisecond),
		schemas.StreamEvents, cluster.Name(leader), published.Load())
	cluster.Stop(leader)
	waitPublished(n / 2)
	t.Logf("%s: %d events published; starting %s again", time.Since(start).Round(time.Millisecond), published.Load(), cluster.Name(leader))
	cluster.Start(leader)
	cluster.WaitJetStream(t)
	other := (leader + 1) % cluster.Len()
	t.Logf("%s: restarting %s at %d events published", time.Since(start).Round(time.Millisecond), cluster.Name(other), published.Load())
	cluster.Stop(other)
	time.Sleep(time.Second)
	cluster.Start(other)
	for range 2 {
		if err := <-pubDone; err != nil {
			t.Fatalf("publish: %v", err)
		}
	}
	t.Logf("%s: %d events published", time.Since(start).Round(time.Millisecond), n)
	close(stop)
	wg.Wait()

	// Once in the stream.
	deadline := time.Now().Add(60 * time.Second)
	subject := schemas.EventSubject(loadOrg.String(), schemas.KindAudit)
	var inStream uint64
	var streamErr error
	testenv.Eventually(t, 60*time.Second, func() string {
		return fmt.Sprintf("%d events of the load in the stream, want %d (%v)", inStream, n, streamErr)
	}, func() bool {
		var st jetstream.Stream
		inStream = 0
		if st, streamErr = js.Stream(ctx, schemas.StreamEvents); streamErr == nil {
			info, ierr := st.Info(ctx, jetstream.WithSubjectFilter(subject))
			if ierr == nil {
				inStream = info.State.Subjects[subject]
			}
		}
		return inStream == uint64(n)
	})
	// Once in the store.
	db, err := sql.Open("sqlite", "file:"+filepath.Join(data, "audit.db")+"?mode=ro&_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var total, distinct int
	for {
		if err := db.QueryRow(`SELECT count(*), count(DISTINCT event_id) FROM audit_logs WHERE organization_id = ?`, loadOrg.String()).Scan(&total, &distinct); err != nil {
			t.Fatal(err)
		}
		if total >= n || time.Now().After(deadline.Add(60*time.Second)) {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	elapsed := time.Since(start)
	t.Logf("%d events published and stored in %s (%.0f events/s), %d API calls of which %d answered 503, %d admin changes, %d tool executions",
		n, elapsed.Round(time.Millisecond), float64(n)/elapsed.Seconds(), watch.calls, watch.unavailable, len(members), len(executions))
	if total != n || distinct != n {
		t.Errorf("stored %d events, %d distinct; want %d each", total, distinct, n)
	}
	for _, w := range watch.wrong {
		t.Errorf("wrong answer during the failover: %s", w)
	}
	if len(members) == 0 || len(executions) == 0 {
		t.Fatalf("no admin change (%d) or tool execution (%d) made during the failover", len(members), len(executions))
	}
	// The admin changes: in the state, and each recorded (the control
	// plane's outbox); the tool executions stored (the execution outbox).
	list := c.call("GET", "/api/v1/orgs/"+org+"/members?limit=1000", boot, nil)
	have := map[string]bool{}
	items, _ := list.data()["items"].([]any)
	for _, it := range items {
		m, _ := it.(map[string]any)
		id, _ := m["user_id"].(string)
		have[id] = true
	}
	for _, u := range members {
		if !have[u] {
			t.Errorf("member %s, added during the failover, is not in the state: %.300s", u, list.raw)
		}
	}
	var recorded, stored int
	testenv.Eventually(t, 30*time.Second, func() string {
		return fmt.Sprintf("%d of %d admin changes recorded, %d of %d tool executions stored", recorded, len(members), stored, len(executions))
	}, func() bool {
		if err := db.QueryRow(`SELECT count(DISTINCT resource_id) FROM audit_logs WHERE organization_id = ? AND resource_id LIKE 'fo-user-%'`, org).Scan(&recorded); err != nil {
			t.Fatal(err)
		}
		if err := db.QueryRow(`SELECT count(DISTINCT execution_id) FROM tool_executions WHERE organization_id = ?`, org).Scan(&stored); err != nil {
			t.Fatal(err)
		}
		return recorded >= len(members) && stored >= len(executions)
	})
}
