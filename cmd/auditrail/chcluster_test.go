//go:build e2e && !race

// The cluster tests run without the race detector, in the second step of
// `make test`: what they test runs in other processes (the roles, the
// ClickHouse and NATS servers of the cluster) or is tested under the race
// detector elsewhere, and the race detector would make their in-process
// servers and harness several times slower (14 minutes were not enough).

package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"sync"
	"testing"
	"time"

	ch "github.com/ClickHouse/clickhouse-go/v2"
	"github.com/google/uuid"

	"github.com/auditrail/auditrail/internal/chserver"
	"github.com/auditrail/auditrail/internal/cli"
	"github.com/auditrail/auditrail/internal/natsx"
	"github.com/auditrail/auditrail/internal/testenv"
	"github.com/auditrail/auditrail/producers"
	"github.com/auditrail/auditrail/schemas"
)

// The ClickHouse cluster through the production roles: dev (its ingest)
// and a query role run with --clickhouse-cluster against 2 shards × 2
// replicas. AUDITRAIL_CLUSTER_EVENTS events (default 50,000; the scenario is
// the same with more) of 50 organizations are published while a replica
// of shard 2 is killed and, later, started again. Every event is listed
// exactly once by the query role (every page of every organization), each
// organization's rows are on one shard only, and the restarted replica
// catches up with its peer.
func TestClickHouseClusterIngestAndList(t *testing.T) {
	testenv.Long(t, "tens of thousands of events through a 2×2 cluster")
	const orgs = 50
	perOrg := clusterEvents(t) / orgs
	cluster, dsn := testenv.ClickHouseCluster(t)
	boot := "bootstrap-key-of-the-cluster-test"
	cursorKey := base64.StdEncoding.EncodeToString([]byte("cursor-key-of-the-cluster-test!!"))
	common := []string{"--clickhouse", dsn, "--clickhouse-cluster", testenv.ClusterName, "--bootstrap-key", boot,
		"--cursor-keys", cursorKey, "--rate-limit", "10000000/60s"}
	dev := startDev(t, t.TempDir(), common...)
	q := startQueryRole(t, append(dev.natsArgs(natsx.RoleQuery), common...)...)

	pub, err := producers.New(dev.connect(t), producers.DefaultConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	org := make([]uuid.UUID, orgs)
	for i := range org {
		org[i] = uuid.New()
	}
	want := map[uuid.UUID]map[string]bool{}
	for _, o := range org {
		want[o] = map[string]bool{}
	}
	rng := rand.New(rand.NewPCG(23, 2))
	now := time.Now()
	var events []producers.Event
	for i := 0; i < orgs*perOrg; i++ {
		o := org[i%orgs]
		e := &schemas.AuditEvent{EventID: uuid.New(), OrganizationID: o,
			Timestamp: now.Add(-time.Duration(rng.Int64N(int64(3 * 24 * time.Hour)))).Truncate(time.Millisecond).UTC(),
			Action:    schemas.AuditActionUpdated, Source: schemas.AuditSourceSDK, DisplayName: "clustered", PrincipalID: "svc", PrincipalType: "SERVICE"}
		want[o][e.EventID.String()] = true
		events = append(events, e)
	}
	victim := cluster.Shards[1][0]
	start := time.Now()
	publish := func(evs []producers.Event) {
		t.Helper()
		for len(evs) > 0 {
			n := min(5000, len(evs))
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			err := pub.PublishBatch(ctx, evs[:n])
			cancel()
			if err != nil {
				t.Fatal(err)
			}
			evs = evs[n:]
		}
	}
	third := len(events) / 3
	publish(events[:third])
	victim.Kill()
	t.Logf("replica %s killed at %s", victim.Dir, time.Since(start).Round(time.Millisecond))
	publish(events[third : 2*third])
	time.Sleep(5 * time.Second) // writes go on without the replica
	if err := victim.Start(); err != nil {
		t.Fatal(err)
	}
	t.Logf("replica restarted at %s", time.Since(start).Round(time.Millisecond))
	publish(events[2*third:])

	conn := clusterConn(t, cluster.Shards[0][0])
	db := dbOf(t, dsn)
	var stored uint64
	testenv.Eventually(t, 5*time.Minute, func() string { return fmt.Sprintf("%d of %d events stored", stored, len(events)) }, func() bool {
		if err := conn.QueryRow(context.Background(), "SELECT uniqExact(organization_id, event_id) FROM `"+db+"`.audit_logs").Scan(&stored); err != nil {
			t.Logf("count: %v", err)
			return false
		}
		return stored >= uint64(len(events))
	})
	t.Logf("%d events stored %s after the first was published", len(events), time.Since(start).Round(time.Millisecond))

	// Every page of every organization through the query role.
	listStart := time.Now()
	var mu sync.Mutex
	var wg sync.WaitGroup
	errs := make(chan error, orgs)
	work := make(chan uuid.UUID)
	pages := 0
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for o := range work {
				ids, n, err := walkOrg(q, boot, o)
				if err != nil {
					errs <- err
					continue
				}
				mu.Lock()
				pages += n
				mu.Unlock()
				seen := map[string]bool{}
				for _, id := range ids {
					if seen[id] {
						errs <- fmt.Errorf("org %s: event %s listed twice", o, id)
						break
					}
					seen[id] = true
					if !want[o][id] {
						errs <- fmt.Errorf("org %s: event %s not of this organization", o, id)
						break
					}
				}
				if len(seen) != len(want[o]) {
					errs <- fmt.Errorf("org %s: %d events listed, want %d", o, len(seen), len(want[o]))
				}
			}
		}()
	}
	for _, o := range org {
		work <- o
	}
	close(work)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	t.Logf("%d pages listed in %s", pages, time.Since(listStart).Round(time.Millisecond))

	// Each organization on one shard; the replicas of a shard agree once
	// the restarted one has caught up.
	shardOf := map[string]int{}
	for i, replicas := range cluster.Shards {
		var conns []ch.Conn
		for _, s := range replicas {
			conns = append(conns, clusterConn(t, s))
		}
		var counts []map[string]uint64
		testenv.Eventually(t, 2*time.Minute, func() string {
			return fmt.Sprintf("shard %d: replicas the same: %d against %d organizations", i+1, len(counts[0]), len(counts[1]))
		}, func() bool {
			counts = counts[:0]
			for _, c := range conns {
				counts = append(counts, localCounts(t, c, db))
			}
			return fmt.Sprint(counts[0]) == fmt.Sprint(counts[1])
		})
		for o, n := range counts[0] {
			if j, ok := shardOf[o]; ok {
				t.Errorf("organization %s on shards %d and %d", o, j+1, i+1)
			}
			shardOf[o] = i
			if n < uint64(perOrg) {
				t.Errorf("organization %s: %d rows on shard %d, want %d", o, n, i+1, perOrg)
			}
		}
		t.Logf("shard %d holds %d organizations", i+1, len(counts[0]))
	}
	if len(shardOf) != orgs {
		t.Errorf("%d organizations on the shards, want %d", len(shardOf), orgs)
	}
}

// walkOrg lists every page of an organization's audit log through the
// query role at base, returning the event ids in order and the pages.
func walkOrg(base, key string, org uuid.UUID) ([]string, int, error) {
	var ids []string
	cursor := ""
	for pages := 1; ; pages++ {
		u := "http://" + base + "/api/v1/orgs/" + org.String() + "/audit_logs?limit=100"
		if cursor != "" {
			u += "&cursor=" + url.QueryEscape(cursor)
		}
		req, _ := http.NewRequest("GET", u, nil)
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return nil, 0, err
		}
		var body struct {
			Data struct {
				Items []struct {
					EventID string `json:"event_id"`
				} `json:"items"`
				NextCursor string `json:"next_cursor"`
				HasMore    bool   `json:"has_more"`
			} `json:"data"`
		}
		err = json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 {
			return nil, 0, fmt.Errorf("org %s page %d: %d %v", org, pages, resp.StatusCode, err)
		}
		for _, it := range body.Data.Items {
			ids = append(ids, it.EventID)
		}
		if !body.Data.HasMore {
			return ids, pages, nil
		}
		cursor = body.Data.NextCursor
	}
}

// clusterConn connects to one node of the cluster.
func clusterConn(t *testing.T, s *chserver.Server) ch.Conn {
	t.Helper()
	opts, err := ch.ParseDSN(s.DSN("default"))
	if err != nil {
		t.Fatal(err)
	}
	c, err := ch.Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// localCounts returns the rows per organization of one node's local table.
func localCounts(t *testing.T, c ch.Conn, db string) map[string]uint64 {
	t.Helper()
	rows, err := c.Query(context.Background(), "SELECT organization_id, count() FROM `"+db+"`.audit_logs_local GROUP BY organization_id")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]uint64{}
	for rows.Next() {
		var o string
		var n uint64
		if err := rows.Scan(&o, &n); err != nil {
			t.Fatal(err)
		}
		out[o] = n
	}
	return out
}

func dbOf(t *testing.T, dsn string) string {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	return u.Path[1:]
}

// --clickhouse-cluster is refused without --clickhouse, and a name that is
// not an identifier (it is spliced into DDL) is refused before anything runs.
func TestClickHouseClusterFlag(t *testing.T) {
	for _, tc := range []struct {
		args []string
		ok   bool
	}{
		{[]string{"--clickhouse", "clickhouse://127.0.0.1:9000/db", "--clickhouse-cluster", "prod_2x2"}, true},
		{[]string{"--clickhouse-cluster", "prod"}, false},
		{[]string{"--clickhouse", "clickhouse://127.0.0.1:9000/db", "--clickhouse-cluster", "x` ON CLUSTER y"}, false},
	} {
		_, err := parseDevFlags(append([]string{"--data", t.TempDir()}, tc.args...))
		var ue cli.UsageError
		if (err == nil) != tc.ok || (err != nil && !errors.As(err, &ue)) {
			t.Errorf("dev %v: %v", tc.args, err)
		}
	}
}
