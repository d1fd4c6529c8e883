package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"

	"github.com/auditrail/auditrail/internal/chserver"
)

// EnvClickHouseDSN names a ClickHouse to use instead of starting one.
const EnvClickHouseDSN = "AUDITRAIL_TEST_CLICKHOUSE_DSN"

// FreePort returns a TCP port that was free a moment ago.
func FreePort() (int, error) { return chserver.FreePort() }

var shared struct {
	once sync.Once
	srv  *chserver.Server
	dir  string
	err  error
}

func stopShared() {
	runStops()
	stopCluster()
	if shared.srv != nil {
		shared.srv.Stop()
		_ = os.RemoveAll(shared.dir)
	}
}

// ClickHouse returns the DSN of a fresh, empty database on a ClickHouse
// server: the one named by AUDITRAIL_TEST_CLICKHOUSE_DSN, or one started for
// this test binary (use Main in TestMain to stop it at the end).
func ClickHouse(t testing.TB) string {
	t.Helper()
	base := os.Getenv(EnvClickHouseDSN)
	if base == "" {
		shared.once.Do(func() {
			shared.dir, shared.err = os.MkdirTemp("", "auditrail-clickhouse-")
			if shared.err == nil {
				shared.srv, shared.err = chserver.Start(shared.dir)
			}
		})
		if shared.err != nil {
			Missing(t, "no ClickHouse: %v", shared.err)
		}
		base = shared.srv.DSN("default")
	}
	return freshDatabase(t, base)
}

// ClickHouseDedicated starts a ClickHouse server for this test alone (for
// tests that stop and restart it) and returns it with the DSN of a fresh database.
func ClickHouseDedicated(t testing.TB) (*chserver.Server, string) {
	t.Helper()
	if _, err := chserver.Binary(); err != nil {
		Missing(t, "%v", err)
	}
	dir, err := os.MkdirTemp("", "auditrail-clickhouse-")
	if err != nil {
		t.Fatal(err)
	}
	srv, err := chserver.Start(dir)
	if err != nil {
		t.Fatalf("start clickhouse: %v", err)
	}
	t.Cleanup(func() {
		srv.Stop()
		_ = os.RemoveAll(dir)
	})
	return srv, freshDatabase(t, srv.DSN("default"))
}

func freshDatabase(t testing.TB, base string) string {
	t.Helper()
	opts, err := clickhouse.ParseDSN(base)
	if err != nil {
		t.Fatalf("parse %s: %v", base, err)
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	db := "test_" + hex.EncodeToString(b[:])
	opts.Auth.Database = "default"
	conn, err := clickhouse.Open(opts)
	if err != nil {
		t.Fatalf("open clickhouse: %v", err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := conn.Exec(ctx, "CREATE DATABASE "+db); err != nil {
		Missing(t, "clickhouse at %s: %v", base, err)
	}
	t.Cleanup(func() {
		c, err := clickhouse.Open(opts)
		if err != nil {
			return
		}
		defer c.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = c.Exec(ctx, "DROP DATABASE IF EXISTS "+db)
	})
	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("parse %s: %v", base, err)
	}
	u.Path = "/" + db
	return u.String()
}
