package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/auditrail/auditrail/internal/auditstore"
	"github.com/auditrail/auditrail/internal/auditstore/clickhouse"
	"github.com/auditrail/auditrail/internal/auditstore/sqlite"
	"github.com/auditrail/auditrail/internal/auth"
	"github.com/auditrail/auditrail/internal/cli"
	"github.com/auditrail/auditrail/internal/redact"
	"github.com/auditrail/auditrail/query"
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
		s, err := clickhouse.OpenWith(ctx, dsn, clickhouse.Options{Cluster: cluster, Leaves: query.Leaves{}, NoMigrate: t.noMigrate})
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

const (
	bootstrapHashFile = "bootstrap_key.sha256"
	bootstrapKeyFile  = "bootstrap.key"
	cursorKeyFile     = "cursor.key"
	pageTokenKeyFile  = "page_token.key"
	secretsKeyFile    = "secrets.key"
)

// bootstrapKey returns the hash of the platform-admin key: the given key, or
// the one kept in dataDir (dev), or a new one that is printed to out and
// kept in dataDir. A dev data directory is not a production tenant: the key
// is kept there in the clear too (bootstrap.key, 0600), so that `dev --demo`
// prints it in full at every start; known is that key (or "" when only its
// hash is kept, by a data directory of an earlier release).
func bootstrapKey(given, dataDir string, out io.Writer) (hash, known string, err error) {
	if given != "" {
		if len(given) < 16 {
			return "", "", cli.UsageErrorf("--bootstrap-key must be at least 16 characters")
		}
		return auth.HashKey(given), "", nil
	}
	path := filepath.Join(dataDir, bootstrapHashFile)
	plainPath := filepath.Join(dataDir, bootstrapKeyFile)
	if b, err := os.ReadFile(path); err == nil {
		h := strings.TrimSpace(string(b))
		if raw, err := hex.DecodeString(h); err != nil || len(raw) != 32 {
			return "", "", fmt.Errorf("%s is corrupt; delete it to generate a new bootstrap key", path)
		}
		if p, err := os.ReadFile(plainPath); err == nil {
			if key := strings.TrimSpace(string(p)); auth.HashKey(key) == h {
				fmt.Fprintf(out, "bootstrap key: kept in %s (platform admin; delete %s and it to get a new one)\n", plainPath, bootstrapHashFile)
				return h, key, nil
			}
			return "", "", fmt.Errorf("%s does not match %s; delete both to generate a new bootstrap key", plainPath, path)
		}
		fmt.Fprintf(out, "bootstrap key: kept as a hash in %s (it was printed at the first start; delete that file to get a new one)\n", path)
		return h, "", nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", "", err
	}
	key := "ark_" + cli.RandomToken(32)
	h := auth.HashKey(key)
	if err := cli.WriteFileAtomic(plainPath, []byte(key+"\n"), 0o600); err != nil {
		return "", "", err
	}
	if err := cli.WriteFileAtomic(path, []byte(h+"\n"), 0o600); err != nil {
		return "", "", err
	}
	fmt.Fprintf(out, "bootstrap key (platform admin, kept in %s): %s\n", plainPath, key)
	return h, key, nil
}

// keyList parses comma-separated base64 keys of flag, or keeps a generated
// key in dataDir/file when none are given (dev). exact: every key must be
// that many bytes; otherwise at least 16.
func keyList(flagName, given, dataDir, file string, exact int) ([][]byte, error) {
	okLen := func(k []byte) bool { return (exact == 0 && len(k) >= 16) || (exact != 0 && len(k) == exact) }
	if given != "" {
		var keys [][]byte
		for _, part := range strings.Split(given, ",") {
			k, err := base64.StdEncoding.DecodeString(strings.TrimSpace(part))
			if err != nil || !okLen(k) {
				want := "at least 16 bytes"
				if exact != 0 {
					want = fmt.Sprintf("%d bytes", exact)
				}
				return nil, cli.UsageErrorf("--%s: each key must be base64 of %s", flagName, want)
			}
			keys = append(keys, k)
		}
		return keys, nil
	}
	if dataDir == "" {
		return nil, cli.UsageErrorf("--%s is required (comma-separated base64 keys; the first is used, all are accepted)", flagName)
	}
	path := filepath.Join(dataDir, file)
	if b, err := os.ReadFile(path); err == nil {
		k, err := base64.StdEncoding.DecodeString(strings.TrimSpace(string(b)))
		if err != nil || !okLen(k) {
			return nil, fmt.Errorf("%s is corrupt", path)
		}
		return [][]byte{k}, nil
	}
	k := make([]byte, 32)
	if _, err := rand.Read(k); err != nil {
		return nil, err
	}
	if err := cli.WriteFileAtomic(path, []byte(base64.StdEncoding.EncodeToString(k)+"\n"), 0o600); err != nil {
		return nil, err
	}
	return [][]byte{k}, nil
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

// serve runs app on addr until ctx ends, then shuts it down gracefully.
func serve(ctx context.Context, app *fiber.App, addr string, log *slog.Logger) error {
	errc := make(chan error, 1)
	go func() { errc <- app.Listen(addr) }()
	select {
	case err := <-errc:
		return fmt.Errorf("listen %s: %w", addr, err)
	case <-ctx.Done():
	}
	log.Info("http: draining")
	if err := app.ShutdownWithTimeout(10 * time.Second); err != nil {
		log.Warn("http shutdown", "err", err)
	}
	return nil
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
