package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"

	"github.com/auditrail/auditrail/internal/chserver"
)

// ClusterName is the name of the test cluster in its remote_servers.
const ClusterName = "auditrail"

var sharedCluster struct {
	once sync.Once
	c    *chserver.Cluster
	err  error
}

// stopCluster stops the cluster this test binary started (from stopShared).
func stopCluster() {
	if sharedCluster.c != nil {
		_ = sharedCluster.c.RemoveAll()
	}
}

// ClickHouseCluster returns a ClickHouse cluster of 2 shards × 2 replicas
// with its ZooKeeper (started once for this test binary; use Main in
// TestMain to stop it) and the DSN of a fresh database name through every
// node (the store creates it ON CLUSTER). A missing zookeeper or
// clickhouse-server skips the test, or fails it under AUDITRAIL_REQUIRE_ALL=1.
func ClickHouseCluster(t testing.TB) (*chserver.Cluster, string) {
	t.Helper()
	if _, err := chserver.Binary(); err != nil {
		Missing(t, "%v", err)
	}
	if err := chserver.ZooKeeperInstalled(); err != nil {
		Missing(t, "%v", err)
	}
	sharedCluster.once.Do(func() {
		dir, err := os.MkdirTemp("", "auditrail-chcluster-")
		if err != nil {
			sharedCluster.err = err
			return
		}
		sharedCluster.c, sharedCluster.err = chserver.StartCluster(dir, ClusterName, 2, 2)
		if sharedCluster.err != nil {
			_ = os.RemoveAll(dir)
		}
	})
	if sharedCluster.err != nil {
		t.Fatalf("start clickhouse cluster: %v", sharedCluster.err)
	}
	c := sharedCluster.c
	var b [6]byte
	_, _ = rand.Read(b[:])
	db := "test_" + hex.EncodeToString(b[:])
	t.Cleanup(func() {
		opts, err := clickhouse.ParseDSN(c.DSN("default"))
		if err != nil {
			return
		}
		conn, err := clickhouse.Open(opts)
		if err != nil {
			return
		}
		defer conn.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		_ = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+db+" ON CLUSTER "+ClusterName)
	})
	return c, c.DSN(db)
}
