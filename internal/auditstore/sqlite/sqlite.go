// Package sqlite is the embedded audit store (modernc.org/sqlite, pure Go):
// the default of `auditrail dev`.
package sqlite

import (
	"context"
	"database/sql"
	_ "embed"
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/google/uuid"
	"modernc.org/sqlite" // registers the "sqlite" driver
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/auditrail/auditrail/internal/auditstore"
	"github.com/auditrail/auditrail/schemas"
)

var (
	//go:embed queries/insert_audit.sql
	insertAuditSQL string
	//go:embed queries/list_audit.sql
	listAuditTemplate string
	listAuditSQL      = listTemplate("list_audit.sql", listAuditTemplate)
)

// variant says which of the page predicates a list query has: a project
// listing or not, the first page or a page after a cursor.
type variant struct{ Project, After bool }

// pageArgs returns the variant and the named arguments that q's project and
// cursor add to a list query.
func pageArgs(project *uuid.UUID, after *auditstore.Key) (variant, []any) {
	var v variant
	var args []any
	if project != nil {
		v.Project = true
		args = append(args, sql.Named("project", project.String()))
	}
	if after != nil {
		v.After = true
		args = append(args, sql.Named("after_ts", after.Timestamp.UnixMilli()), sql.Named("after_id", after.EventID.String()))
	}
	return v, args
}

// Store is the SQLite audit store.
type Store struct {
	db  *sql.DB // reads
	wdb *sql.DB // writes: one connection
	now func() time.Time
}

var _ auditstore.Store = (*Store)(nil)

// Open opens (creating if needed) the database file at path and applies the
// migrations. WAL with synchronous=FULL: a committed batch survives a crash
// of the process or of the machine.
//
// Writes go through one connection of their own with a 64 MiB page cache;
// reads through a pool of four with SQLite's default cache. SQLite has one
// writer at a time anyway; a writer that was any connection of the pool
// found its cache dropped after each other connection's write and read the
// random pages of the event_id key (and five indexes) back from the file,
// and a large cache in every pooled connection cost more to drop than it
// saved. A batch's inserts stay in memory until it commits: statement
// journals in memory (temp_store), no spilling of dirty pages mid-batch
// (cache_spill); with the defaults half of a write was system calls.
func Open(ctx context.Context, path string) (*Store, error) {
	dsn := func(cache string) string {
		q := url.Values{}
		for _, p := range []string{"journal_mode(WAL)", "synchronous(FULL)", "busy_timeout(10000)", "foreign_keys(ON)", "temp_store(MEMORY)", "cache_spill(false)", cache} {
			q.Add("_pragma", p)
		}
		return "file:" + path + "?" + q.Encode()
	}
	db, err := sql.Open("sqlite", dsn("cache_size(-2000)"))
	if err != nil {
		return nil, fmt.Errorf("open sqlite %s: %w", path, err)
	}
	db.SetMaxOpenConns(4)
	wdb, err := sql.Open("sqlite", dsn("cache_size(-65536)"))
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("open sqlite %s: %w", path, err)
	}
	wdb.SetMaxOpenConns(1)
	wdb.SetConnMaxIdleTime(0)
	s := &Store{db: db, wdb: wdb, now: time.Now}
	if err := s.migrate(ctx); err != nil {
		db.Close()
		wdb.Close()
		return nil, err
	}
	return s, nil
}

func (s *Store) migrate(ctx context.Context) error {
	ms, err := auditstore.LoadMigrations(schemas.SQLiteDDL, "sqlite")
	if err != nil {
		return err
	}
	if _, err := s.db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (name TEXT PRIMARY KEY, applied_ms INTEGER NOT NULL)`); err != nil {
		return fmt.Errorf("create schema_migrations: %w", err)
	}
	for _, m := range ms {
		var n int
		if err := s.db.QueryRowContext(ctx, `SELECT count(*) FROM schema_migrations WHERE name = ?`, m.Name).Scan(&n); err != nil {
			return fmt.Errorf("read schema_migrations: %w", err)
		}
		if n > 0 {
			continue
		}
		tx, err := s.db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		for _, stmt := range m.Statements {
			if _, err := tx.ExecContext(ctx, stmt); err != nil {
				tx.Rollback()
				return fmt.Errorf("migration %s: %w", m.Name, err)
			}
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations (name, applied_ms) VALUES (?, ?) ON CONFLICT DO NOTHING`, m.Name, time.Now().UnixMilli()); err != nil {
			tx.Rollback()
			return err
		}
		if err := tx.Commit(); err != nil {
			return fmt.Errorf("migration %s: %w", m.Name, err)
		}
	}
	return nil
}

// insertAll runs the insert statement query once per row in one
// transaction; row(i) returns the arguments of row i.
func (s *Store) insertAll(ctx context.Context, query string, n int, row func(i int) ([]any, error)) error {
	tx, err := s.wdb.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("sqlite begin: %w", err)
	}
	defer tx.Rollback()
	stmt, err := tx.PrepareContext(ctx, query)
	if err != nil {
		return fmt.Errorf("sqlite prepare insert: %w", err)
	}
	defer stmt.Close()
	for i := 0; i < n; i++ {
		args, err := row(i)
		if err != nil {
			return err
		}
		if _, err := stmt.ExecContext(ctx, args...); err != nil {
			return fmt.Errorf("sqlite insert: %w", classify(err))
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("sqlite commit: %w", classify(err))
	}
	return nil
}

// classify marks the errors of a write that ingest handles apart: a row
// the schema refuses (a constraint or a row limit of 0010_row_limits.sql),
// and a database busy or locked by another writer.
func classify(err error) error {
	var e *sqlite.Error
	if !errors.As(err, &e) {
		return err
	}
	switch e.Code() & 0xff {
	case sqlite3.SQLITE_CONSTRAINT, sqlite3.SQLITE_TOOBIG, sqlite3.SQLITE_MISMATCH:
		return fmt.Errorf("%w: %w", auditstore.ErrRefused, err)
	case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED:
		return fmt.Errorf("%w: %w", auditstore.ErrBusy, err)
	}
	return err
}

// WriteAudit implements auditstore.Store in one transaction.
func (s *Store) WriteAudit(ctx context.Context, events []schemas.AuditEvent) error {
	if len(events) == 0 {
		return nil
	}
	now := s.now()
	return s.insertAll(ctx, insertAuditSQL, len(events), func(i int) ([]any, error) {
		e := &events[i]
		var rt any
		if e.ResourceType != nil {
			rt = int64(*e.ResourceType)
		}
		var data any
		if e.Data != nil {
			data = string(e.Data)
		}
		return []any{
			e.OrganizationID.String(), e.EventID.String(), schemas.EntryID(e.EventID).String(),
			e.Timestamp.UnixMilli(), nullStr(e.ClientIP), int64(e.Action), int64(e.Source), e.DisplayName,
			nullUUID(e.CustomerID), nullUUID(e.ProjectID), e.PrincipalID, nullStr(e.UserID), e.PrincipalType,
			rt, nullStr(e.ResourceID), nullStr(e.ResourceDisplay), data, auditstore.CreatedMS(e.Stored, now), auditstore.SaltValue(e.Salt), int64(e.Stored.Seq),
		}, nil
	})
}

func nullStr(p *string) any {
	if p == nil {
		return nil
	}
	return *p
}

func nullUUID(p *uuid.UUID) any {
	if p == nil {
		return nil
	}
	return p.String()
}

// ListAudit implements auditstore.Store.
func (s *Store) ListAudit(ctx context.Context, q auditstore.Query) (auditstore.Page, error) {
	if err := q.Validate(); err != nil {
		return auditstore.Page{}, err
	}
	query, args, err := listAuditQuery(q)
	if err != nil {
		return auditstore.Page{}, err
	}
	rows, err := s.db.QueryContext(ctx, query, args...)
	if err != nil {
		return auditstore.Page{}, fmt.Errorf("sqlite list: %w", err)
	}
	defer rows.Close()
	page, err := auditstore.ReadPage(rows, q.Limit)
	if err != nil {
		return auditstore.Page{}, fmt.Errorf("sqlite list: %w", err)
	}
	return page, nil
}

// listAuditQuery returns the statement and arguments of q.
func listAuditQuery(q auditstore.Query) (string, []any, error) {
	query, args, err := render(listAuditSQL, q.ProjectID, q.After, q.Window, q.Search.Terms, "text")
	args = append(args,
		sql.Named("org", q.OrgID.String()),
		sql.Named("action", enumArg(q.Action)),
		sql.Named("source", enumArg(q.Source)),
		sql.Named("resource_type", enumArg(q.ResourceType)),
		sql.Named("limit", q.Limit+1),
	)
	return query, args, err
}

func enumArg[T ~uint8](p *T) any {
	if p == nil {
		return nil
	}
	return int64(*p)
}

// Ping implements auditstore.Store.
func (s *Store) Ping(ctx context.Context) error { return s.db.PingContext(ctx) }

// Close implements auditstore.Store.
func (s *Store) Close() error {
	if s.db == nil {
		return errors.New("sqlite store already closed")
	}
	err := errors.Join(s.db.Close(), s.wdb.Close())
	s.db, s.wdb = nil, nil
	return err
}
