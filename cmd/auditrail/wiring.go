package main

import (
	"context"
	"net"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/auditrail/auditrail/internal/cli"
)

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
