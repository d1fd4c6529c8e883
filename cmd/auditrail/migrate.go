package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/auditrail/auditrail/internal/auditstore"
	"github.com/auditrail/auditrail/internal/auditstore/backend"
	"github.com/auditrail/auditrail/internal/cli"
	"github.com/auditrail/auditrail/internal/redact"
	"github.com/auditrail/auditrail/schemas"
)

// runMigrate creates the ClickHouse database and applies the migrations,
// then exits: the one step of a deployment that needs a user with DDL
// rights. The roles then run as users without them, with
// --clickhouse-migrate=false (they wait until this step has run).
func runMigrate(ctx context.Context, args []string) error {
	fs := cli.NewFlags("auditrail migrate")
	sf := addMigrateStoreFlags(fs)
	wait := fs.Duration("wait", "", 5*time.Minute, "how long to retry while ClickHouse does not answer")
	mkLog := fs.LogFlags("text")
	if err := fs.Parse(args); err != nil {
		return err
	}
	log, err := mkLog(os.Stderr)
	if err != nil {
		return err
	}
	if *wait <= 0 {
		return cli.UsageErrorf("--wait must be positive")
	}
	t, err := sf.resolve()
	if err != nil {
		return err
	}
	ms, err := auditstore.LoadMigrations(schemas.ClickHouseDDL, "clickhouse")
	if err != nil {
		return err
	}
	wctx, cancel := context.WithTimeout(ctx, *wait)
	defer cancel()
	store := backend.NewPending()
	defer store.Close()
	if err := store.OpenWithRetry(wctx, t, log); err != nil {
		if ctx.Err() != nil {
			return nil // interrupted
		}
		if errors.Is(err, context.DeadlineExceeded) {
			last := store.Err()
			return fmt.Errorf("clickhouse did not take the migrations within --wait %s: %w", *wait, last)
		}
		return err
	}
	fmt.Printf("auditrail migrate: %s holds the %d migrations of this release\n", redact.URL(t.DSN), len(ms))
	return nil
}
