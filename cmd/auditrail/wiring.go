package main

import (
	"context"
	"log/slog"
	"net"
	"path/filepath"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/auditrail/auditrail/internal/auditstore"
	"github.com/auditrail/auditrail/internal/auditstore/clickhouse"
	"github.com/auditrail/auditrail/internal/auditstore/sqlite"
	"github.com/auditrail/auditrail/internal/cli"
	"github.com/auditrail/auditrail/internal/redact"
	"github.com/auditrail/auditrail/query"
	"github.com/auditrail/auditrail/schemas/apiitem"
)

// store keeps audit entries and tool executions, and looks them up by id
// (wait_for).
type store interface {
	auditstore.Store
	auditstore.ExecutionStore
	query.Reader
	query.ExecutionReader
	query.StatsReader
	query.FeedReader
	auditstore.LogStore
}

// storeTarget is where a process keeps its audit store: ClickHouse when
// dsn is set (on cluster when cluster is: --clickhouse-cluster), else the
// SQLite file in dataDir.
type storeTarget struct {
	dsn, cluster string
	// noMigrate opens ClickHouse without DDL (--clickhouse-migrate=false):
	// the migrations must have run (auditrail migrate).
	noMigrate bool
	dataDir   string
}

// openStore opens the store of t.
func openStore(ctx context.Context, t storeTarget, log *slog.Logger) (store, error) {
	dsn, cluster, dataDir := t.dsn, t.cluster, t.dataDir
	timeout := 60 * time.Second
	if cluster != "" {
		// ON CLUSTER DDL waits for every node (distributed_ddl_task_timeout).
		timeout = 5 * time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if dsn != "" {
		s, err := clickhouse.OpenWith(ctx, dsn, clickhouse.Options{Cluster: cluster, Leaves: apiitem.Leaves{}, NoMigrate: t.noMigrate})
		if err != nil {
			return nil, redact.Error(err, dsn)
		}
		log.Info("audit store: clickhouse", "dsn", redact.URL(dsn), "cluster", cluster, "migrated", !t.noMigrate)
		return s, nil
	}
	path := filepath.Join(dataDir, "audit.db")
	s, err := sqlite.Open(ctx, path)
	if err != nil {
		return nil, err
	}
	log.Info("audit store: sqlite", "path", path)
	return s, nil
}

// check is one readiness check of /healthz.
type check struct {
	name string
	fn   func(ctx context.Context) error
}

// healthHandler answers 200 when every check passes, else 503, with the
// result of each check.
func healthHandler(checks []check, extra func() map[string]any) fiber.Handler {
	return func(c *fiber.Ctx) error {
		ctx, cancel := context.WithTimeout(c.UserContext(), 2*time.Second)
		defer cancel()
		status := fiber.StatusOK
		results := map[string]string{}
		for _, ch := range checks {
			if err := ch.fn(ctx); err != nil {
				status = fiber.StatusServiceUnavailable
				results[ch.name] = err.Error()
			} else {
				results[ch.name] = "ok"
			}
		}
		body := map[string]any{"status": map[bool]string{true: "ok", false: "unavailable"}[status == fiber.StatusOK], "checks": results}
		if extra != nil {
			for k, v := range extra() {
				body[k] = v
			}
		}
		return c.Status(status).JSON(body)
	}
}

// addClusterFlag adds --clickhouse-cluster to a role that opens the
// ClickHouse store.
func addClusterFlag(fs *cli.Flags) *string {
	return fs.String("clickhouse-cluster", "AUDITRAIL_CLICKHOUSE_CLUSTER", "",
		"cluster of the ClickHouse servers' remote_servers: DDL ON CLUSTER, ReplicatedMergeTree tables under Distributed tables sharded by organization (empty: one server)")
}

// clientURL is the http URL a client on this host uses for a listen
// address: an unspecified host (":8080", "0.0.0.0:8080") is reached on the
// loopback address.
func clientURL(listen string) string {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return "http://" + listen
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
		if ip != nil && ip.To4() == nil {
			host = "::1"
		}
	}
	return "http://" + net.JoinHostPort(host, port)
}
