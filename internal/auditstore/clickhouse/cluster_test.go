//go:build !race

// The cluster tests run without the race detector, in the second step of
// `make test`: what they test runs in other processes (the roles, the
// ClickHouse and NATS servers of the cluster) or is tested under the race
// detector elsewhere, and the race detector would make their in-process
// servers and harness several times slower (14 minutes were not enough).

package clickhouse_test

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	ch "github.com/ClickHouse/clickhouse-go/v2"
	"github.com/google/uuid"

	"github.com/auditrail/auditrail/internal/auditstore"
	"github.com/auditrail/auditrail/internal/auditstore/clickhouse"
	"github.com/auditrail/auditrail/internal/auditstore/storetest"
	"github.com/auditrail/auditrail/internal/chserver"
	"github.com/auditrail/auditrail/internal/testenv"
	"github.com/auditrail/auditrail/schemas"
	"github.com/auditrail/auditrail/schemas/apiitem"
)

func openCluster(t *testing.T, dsn string) *clickhouse.Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	s, err := clickhouse.OpenWith(ctx, dsn, clickhouse.Options{Cluster: testenv.ClusterName})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// The whole conformance suite passes against a 2×2 cluster (about 4
// minutes here): listings, pagination, filters, isolation, dedup,
// executions, search, stats and feeds, through the Distributed tables;
// and the lifecycle's and the erasure's cases, with TestExpiryConsistent's
// and TestErasureConsistent's, which also read each node's own tables
// (every replica deleted or rewrote the entries' rows; its aggregates
// agree with its entries).
func TestClusterConformance(t *testing.T) {
	// One database for every case: the migrations' ON CLUSTER DDL took
	// about 5 s per case (each statement waits for the four nodes).
	c, dsn := testenv.ClickHouseCluster(t)
	factory := func(t *testing.T) storetest.Opener {
		return func(t *testing.T) auditstore.Store { return openCluster(t, dsn) }
	}
	storetest.Run(t, factory)
	t.Run("Lifecycle", func(t *testing.T) { storetest.RunLifecycle(t, factory) })
	t.Run("Erasure", func(t *testing.T) { storetest.RunErasure(t, factory) })
	t.Run("ExpiryConsistent", func(t *testing.T) {
		s, err := clickhouse.OpenWith(context.Background(), dsn, clickhouse.Options{Cluster: testenv.ClusterName, Leaves: apiitem.Leaves{}})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		u, _ := url.Parse(dsn)
		views := []tableView{{conn: openSyncConn(t, dsn)}}
		for _, srv := range c.Servers() {
			views = append(views, tableView{conn: openConn(t, srv.DSN(u.Path[1:])), suffix: "_local", name: fmt.Sprintf("node %d: ", srv.TCPPort)})
		}
		testExpiryConsistent(t, s, views)
	})
	t.Run("ErasureConsistent", func(t *testing.T) {
		s, err := clickhouse.OpenWith(context.Background(), dsn, clickhouse.Options{Cluster: testenv.ClusterName, Leaves: apiitem.Leaves{}})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		u, _ := url.Parse(dsn)
		views := []tableView{{conn: openSyncConn(t, dsn)}}
		for _, srv := range c.Servers() {
			views = append(views, tableView{conn: openConn(t, srv.DSN(u.Path[1:])), suffix: "_local", name: fmt.Sprintf("node %d: ", srv.TCPPort)})
		}
		testErasureConsistent(t, s, views)
	})
}

func TestClusterOptionsValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		ok   bool
	}{{"", true}, {"auditrail", true}, {"prod_2x2", true}, {"a-b", false}, {"x` ON CLUSTER y", false}, {"1abc", false}} {
		if err := (clickhouse.Options{Cluster: tc.name}).Validate(); (err == nil) != tc.ok {
			t.Errorf("Validate(%q) = %v", tc.name, err)
		}
	}
}

// A node that joins after the migrations ran (here: a replica whose
// database was dropped) gets every table and view when a store connects
// to it first: its replicas fetch their shard's rows, and the backfills
// are not run again (the stats are not counted twice).
func TestClusterNodeAddedLater(t *testing.T) {
	c, dsn := testenv.ClickHouseCluster(t)
	ctx := context.Background()
	s := openCluster(t, dsn)
	defer s.Close()
	var evs []schemas.AuditEvent
	var orgs []uuid.UUID
	for i := 0; i < 10; i++ {
		orgs = append(orgs, uuid.New())
	}
	base := time.Now().Add(-time.Hour)
	for i := 0; i < 2000; i++ {
		evs = append(evs, storetest.Event(orgs[i%len(orgs)], base.Add(time.Duration(i)*time.Second)))
	}
	if err := s.WriteAudit(ctx, evs); err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(dsn)
	db := u.Path[1:]
	newcomer, peer := c.Shards[1][1], c.Shards[1][0]
	nc, pc := nodeConn(t, newcomer), nodeConn(t, peer)
	if err := nc.Exec(ctx, "DROP DATABASE `"+db+"`"); err != nil {
		t.Fatal(err)
	}

	// The store connects to the newcomer first.
	hosts := []string{fmt.Sprintf("127.0.0.1:%d", newcomer.TCPPort)}
	for _, srv := range c.Servers() {
		if srv != newcomer {
			hosts = append(hosts, fmt.Sprintf("127.0.0.1:%d", srv.TCPPort))
		}
	}
	s2 := openCluster(t, "clickhouse://"+strings.Join(hosts, ",")+"/"+db)
	defer s2.Close()

	count := func(c ch.Conn, q string) uint64 {
		var n uint64
		if err := c.QueryRow(ctx, q).Scan(&n); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		return n
	}
	local := "SELECT count() FROM `" + db + "`.audit_logs_local"
	testenv.Eventually(t, time.Minute, func() string {
		return fmt.Sprintf("the newcomer holds %d rows, its peer %d", count(nc, local), count(pc, local))
	}, func() bool { return count(nc, local) == count(pc, local) })
	if count(pc, local) == 0 {
		t.Fatal("no rows on shard 2: the test proves nothing")
	}
	stats := "SELECT sum(n) FROM `" + db + "`.audit_stats_local WHERE kind = 0 AND scope = ''"
	testenv.Eventually(t, time.Minute, func() string {
		return fmt.Sprintf("the newcomer's stats hold %d, its peer's %d", count(nc, stats), count(pc, stats))
	}, func() bool { return count(nc, stats) == count(pc, stats) })
	if got := count(nc, "SELECT sum(n) FROM `"+db+"`.audit_stats WHERE kind = 0 AND scope = ''"); got != uint64(len(evs)) {
		t.Fatalf("stats count %d events, want %d (a backfill ran again?)", got, len(evs))
	}
	for _, org := range orgs {
		if got := len(all(t, s2, org)); got != len(evs)/len(orgs) {
			t.Fatalf("org %s: %d entries listed through the newcomer, want %d", org, got, len(evs)/len(orgs))
		}
	}
}

func all(t *testing.T, s *clickhouse.Store, org uuid.UUID) []schemas.AuditEntry {
	t.Helper()
	var out []schemas.AuditEntry
	q := auditstore.Query{OrgID: org, Limit: 100}
	for {
		p, err := s.ListAudit(context.Background(), q)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, p.Items...)
		if !p.HasMore {
			return out
		}
		last := p.Items[len(p.Items)-1]
		q.After = &auditstore.Key{Timestamp: last.Timestamp, EventID: last.EventID}
	}
}

func nodeConn(t *testing.T, s *chserver.Server) ch.Conn {
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
