// Package clickhouse is the audit store at scale: ClickHouse over the native
// protocol (clickhouse-go/v2), with DDL that runs on 18.16 and current releases.
package clickhouse

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	ch "github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/ClickHouse/clickhouse-go/v2/lib/proto"
	"github.com/google/uuid"

	"github.com/auditrail/auditrail/internal/auditstore"
	"github.com/auditrail/auditrail/schemas"
)

var (
	//go:embed queries/insert_audit.sql
	insertAuditSQL string
	//go:embed queries/list_audit.sql
	listAuditTemplate string
	listAuditSQL      = listTemplate("list_audit.sql", listAuditTemplate)
	//go:embed queries/audit_hours.sql
	auditHoursSQL string
)

// ErrInvalidDSN is returned for a DSN that cannot be used.
var ErrInvalidDSN = errors.New("invalid clickhouse dsn")

// ErrNotMigrated is returned by OpenWith with NoMigrate while the database
// lacks a migration of this binary (the migrations have not run yet, or
// were run by an older release): it may pass once they ran.
var ErrNotMigrated = errors.New("clickhouse schema not migrated")

// ErrNoDDL is returned by OpenWith when the migrations must run but the
// server refuses DDL to the user (a read-only or insert-only user): a
// configuration mistake that waiting does not fix.
var ErrNoDDL = errors.New("the clickhouse user may not run the migrations (DDL)")

// Store is the ClickHouse audit store.
type Store struct {
	conn    driver.Conn
	now     func() time.Time
	db      string
	cluster string            // --clickhouse-cluster; "" on a single server
	leaves  auditstore.Leaves // nil: rows are written without their leaf
	opts    *ch.Options       // as opened (a cluster's servers are reached with them, lifecycle.go)

	mu    sync.Mutex
	hours map[hoursKey]hoursEntry

	// wrote: where this store's own appends left each log (appendlogs.go).
	wroteMu sync.Mutex
	wrote   map[logKey]wroteLog
	// remnantReads counts the reads of what crashed appends left above
	// the heads (for tests).
	remnantReads atomic.Int64
}

// hoursKey names the hourly counts of one listing: the counts query (of
// audit_hours or execution_hours), the organization and the project (empty: all).
type hoursKey struct{ query, org, project string }

type hoursEntry struct {
	at    time.Time
	hours []hourCount // newest first
}

// hourSpan is what pageByHours knows of where a listing's entries lie:
// the hourly counts, newest first, and asOf, the time they were read
// (Unix ms), before which the newest hour's entries lie. A nonzero asOf
// also lets a window start inside an hour, in proportion to the time, when
// that hour holds far more entries than the page needs: a listing without
// filters, whose entries the counts are. A filtered listing gives 0, since
// its matches may lie anywhere in the hour: its windows are whole hours.
type hourSpan struct {
	hours []hourCount
	asOf  int64
}

type hourCount struct {
	hour int64 // start of the hour, Unix ms
	n    uint64
}

// hoursTTL bounds how stale the cached hourly counts may be. Staleness only
// costs an extra round: the newest bound of a scan is always open.
const hoursTTL = 5 * time.Second

var _ auditstore.Store = (*Store)(nil)

// Options are the settings of Open beyond the DSN.
type Options struct {
	// Cluster names a cluster of the servers' remote_servers: the tables
	// are ReplicatedMergeTree under Distributed tables sharded by
	// organization, and every DDL runs ON CLUSTER (see cluster.go).
	// Empty: one server.
	Cluster string
	// Leaves, when set, computes each entry's tamper-evidence leaf as it
	// is written (column leaf of the entries, 0013_feed_leaves.sql, and of
	// feed_index, 0018_feed_index_leaf.sql);
	// nil writes none (the sequencer then reads the entries back).
	Leaves auditstore.Leaves
	// NoMigrate opens the store without any DDL: the database must exist
	// and hold every embedded migration (ErrNotMigrated otherwise), run
	// beforehand by a user with DDL rights (`auditrail migrate`). For the
	// roles' own users: read-only (query) or without DDL (ingest, tlog).
	// False: the database is created and the migrations applied.
	NoMigrate bool
}

// Validate checks the options.
func (o Options) Validate() error { return ValidateCluster(o.Cluster) }

// Open connects to the database of dsn (clickhouse://host:9000/db), creating
// the database if needed, and applies the migrations.
func Open(ctx context.Context, dsn string) (*Store, error) {
	return OpenWith(ctx, dsn, Options{})
}

// OpenWith is Open with options. In cluster mode the DSN may name several
// nodes (clickhouse://h1:9000,h2:9000/db): the client uses the first that
// answers.
func OpenWith(ctx context.Context, dsn string, o Options) (*Store, error) {
	if err := o.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidDSN, err)
	}
	opts, err := ch.ParseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidDSN, err)
	}
	if opts.Protocol != ch.Native {
		return nil, fmt.Errorf("%w: only the native protocol is supported (clickhouse://host:9000/db)", ErrInvalidDSN)
	}
	db := opts.Auth.Database
	if db == "" {
		db = "default"
	}
	// The database is created through the default database, unless it
	// exists on this one server (a user may reach its database and no
	// other). On a cluster it is always created ON CLUSTER: a server added
	// later gets it so.
	if db != "default" && !o.NoMigrate && (o.Cluster != "" || !databaseAnswers(ctx, opts)) {
		boot := *opts
		boot.Auth.Database = "default"
		c, err := ch.Open(&boot)
		if err != nil {
			return nil, fmt.Errorf("open clickhouse: %w", err)
		}
		create := "CREATE DATABASE IF NOT EXISTS `" + db + "`"
		if o.Cluster != "" {
			create += " ON CLUSTER `" + o.Cluster + "`"
		}
		err = c.Exec(ctx, create)
		c.Close()
		if err != nil {
			return nil, fmt.Errorf("create database %s: %w", db, noDDL(err))
		}
	}
	if opts.DialTimeout == 0 {
		opts.DialTimeout = 5 * time.Second
	}
	if o.Cluster != "" {
		if opts.Settings == nil {
			opts.Settings = ch.Settings{}
		}
		// An insert returns once every shard it touches has stored its rows
		// (on one replica; replication copies them): ingest acknowledges
		// events only then, so a crash of the node that took the insert
		// loses nothing (asynchronous Distributed inserts would keep the
		// rows in that node's queue, unlisted, until they are sent).
		opts.Settings["insert_distributed_sync"] = 1
	}
	conn, err := ch.Open(opts)
	if err != nil {
		return nil, fmt.Errorf("open clickhouse: %w", err)
	}
	s := &Store{conn: conn, now: time.Now, db: db, cluster: o.Cluster, leaves: o.Leaves, opts: opts, hours: map[hoursKey]hoursEntry{}}
	if o.Cluster != "" {
		s.conn = clusterConn{conn}
	}
	if o.NoMigrate {
		err = s.checkMigrated(ctx)
	} else if err = s.migrate(ctx); err != nil {
		err = noDDL(err)
	}
	if err != nil {
		conn.Close()
		return nil, err
	}
	return s, nil
}

// databaseAnswers reports whether a connection to the database of opts
// succeeds (it exists, and the user may use it).
func databaseAnswers(ctx context.Context, opts *ch.Options) bool {
	o := *opts
	if o.DialTimeout == 0 {
		o.DialTimeout = 5 * time.Second
	}
	c, err := ch.Open(&o)
	if err != nil {
		return false
	}
	defer c.Close()
	return c.Ping(ctx) == nil
}

// noDDL wraps err with ErrNoDDL when the server refused a DDL statement
// for the user's rights: READONLY (164), QUERY_IS_PROHIBITED (392, a
// profile with allow_ddl = 0), ACCESS_DENIED (497, the GRANTs of current
// releases).
func noDDL(err error) error {
	var exc *ch.Exception
	if errors.As(err, &exc) && (exc.Code == 164 || exc.Code == 392 || exc.Code == 497) {
		return fmt.Errorf("%w: %w: run `auditrail migrate` as a user with DDL rights, and start the roles with --clickhouse-migrate=false", ErrNoDDL, err)
	}
	return err
}

// checkMigrated returns nil when schema_migrations lists every embedded
// migration, else an error wrapping ErrNotMigrated.
func (s *Store) checkMigrated(ctx context.Context) error {
	ms, err := auditstore.LoadMigrations(schemas.ClickHouseDDL, "clickhouse")
	if err != nil {
		return err
	}
	rows, err := s.conn.Query(ctx, `SELECT DISTINCT name FROM schema_migrations`)
	if err != nil {
		var exc *ch.Exception
		if errors.As(err, &exc) && (exc.Code == 60 || exc.Code == 81) { // UNKNOWN_TABLE, UNKNOWN_DATABASE
			return fmt.Errorf("%w: database %s has no schema_migrations: run `auditrail migrate`: %w", ErrNotMigrated, s.db, err)
		}
		return fmt.Errorf("read schema_migrations: %w", err)
	}
	defer rows.Close()
	applied := map[string]bool{}
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			return fmt.Errorf("read schema_migrations: %w", err)
		}
		applied[name] = true
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read schema_migrations: %w", err)
	}
	var missing []string
	for _, m := range ms {
		if !applied[m.Name] {
			missing = append(missing, m.Name)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w: %d of %d migrations not applied in %s (%s): run `auditrail migrate`", ErrNotMigrated, len(missing), len(ms), s.db, strings.Join(missing, ", "))
	}
	return nil
}

func (s *Store) migrate(ctx context.Context) error {
	ms, err := auditstore.LoadMigrations(schemas.ClickHouseDDL, "clickhouse")
	if err != nil {
		return err
	}
	if s.cluster != "" {
		return s.migrateCluster(ctx, ms)
	}
	if err := s.conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (name String, applied_ms Int64) ENGINE = MergeTree ORDER BY name`); err != nil {
		return fmt.Errorf("create schema_migrations: %w", err)
	}
	for _, m := range ms {
		done, err := s.applied(ctx, m.Name)
		if err != nil {
			return err
		}
		if done {
			continue
		}
		// Statements are idempotent (IF NOT EXISTS, or an ADD COLUMN whose
		// column exists is skipped), so a migration that another instance
		// applies at the same time, or one interrupted before it was
		// recorded, does no harm.
		for _, stmt := range m.Statements {
			if err := s.conn.Exec(ctx, stmt); err != nil && !columnExists(stmt, err) {
				return fmt.Errorf("migration %s: %w", m.Name, err)
			}
		}
		if err := s.recordMigration(ctx, m.Name); err != nil {
			return err
		}
	}
	return nil
}

// applied reports whether migration name is recorded in schema_migrations.
func (s *Store) applied(ctx context.Context, name string) (bool, error) {
	var n uint64
	if err := s.conn.QueryRow(ctx, `SELECT count() FROM schema_migrations WHERE name = ?`, name).Scan(&n); err != nil {
		return false, fmt.Errorf("read schema_migrations: %w", err)
	}
	return n > 0, nil
}

// recordMigration records migration name as applied.
func (s *Store) recordMigration(ctx context.Context, name string) error {
	// Inserts go through batches: 18.16 answers an INSERT with inline
	// VALUES over the native protocol by waiting for a data block.
	batch, err := s.conn.PrepareBatch(ctx, `INSERT INTO schema_migrations (name, applied_ms)`)
	if err != nil {
		return fmt.Errorf("record migration %s: %w", name, err)
	}
	if err := batch.Append(name, time.Now().UnixMilli()); err != nil {
		return fmt.Errorf("record migration %s: %w", name, err)
	}
	if err := batch.Send(); err != nil {
		return fmt.Errorf("record migration %s: %w", name, err)
	}
	return nil
}

// columnExists reports whether err is the answer to an ALTER TABLE … ADD
// COLUMN whose column already exists. ClickHouse 18.16 has no ADD COLUMN IF
// NOT EXISTS; it answers code 44 (ILLEGAL_COLUMN), current releases code 15
// (DUPLICATE_COLUMN).
func columnExists(stmt string, err error) bool {
	var exc *ch.Exception
	if !errors.As(err, &exc) || (exc.Code != 15 && exc.Code != 44) || !strings.Contains(exc.Message, "already exists") {
		return false
	}
	return strings.Contains(strings.ToUpper(stmt), "ADD COLUMN")
}

// WriteAudit implements auditstore.Store: one event_id, one row. Events
// already stored (event_index) are not written again, whatever their
// timestamp; the others go in columnar batch inserts of at most
// maxPartitionsPerInsert-1 months each (a month in UTC may straddle two of
// the server's time zone); a materialized view indexes them. Copies written
// concurrently with one timestamp are folded by the ReplacingMergeTree and
// hidden at read time by LIMIT 1 BY event_id.
func (s *Store) WriteAudit(ctx context.Context, events []schemas.AuditEvent) error {
	if len(events) == 0 {
		return nil
	}
	rows := make([]indexed, len(events))
	for i := range events {
		rows[i] = indexed{org: events[i].OrganizationID.String(), id: events[i].EventID.String(), ts: events[i].Timestamp.UnixMilli()}
	}
	stored, err := s.storedIDs(ctx, kindAudit, rows)
	if err != nil {
		return err
	}
	fresh, freshRows := make([]schemas.AuditEvent, 0, len(events)), make([]indexed, 0, len(events))
	for i := range events {
		if k := rows[i].key(); !stored[k] { // a copy later in the batch is not written either
			stored[k] = true
			fresh, freshRows = append(fresh, events[i]), append(freshRows, rows[i])
		}
	}
	for _, g := range byPartition(len(fresh), func(i int) int64 { return freshRows[i].ts }, maxPartitionsPerInsert-1) {
		part := fresh
		if len(g) != len(fresh) {
			part = make([]schemas.AuditEvent, len(g))
			for j, i := range g {
				part[j] = fresh[i]
			}
		}
		if err := s.writeAuditRows(ctx, part); err != nil {
			return err
		}
	}
	return nil // event_index_audit_mv indexes the rows
}

// writeAuditRows writes events in one columnar batch insert.
func (s *Store) writeAuditRows(ctx context.Context, events []schemas.AuditEvent) error {
	if len(events) == 0 {
		return nil
	}
	batch, err := s.conn.PrepareBatch(ctx, insertAuditSQL)
	if err != nil {
		return fmt.Errorf("clickhouse prepare batch: %w", err)
	}
	defer batch.Abort()
	if err := s.appendAuditRows(batch, events); err != nil {
		return err
	}
	if err := batch.Send(); err != nil {
		return fmt.Errorf("clickhouse insert %d rows: %w", len(events), classify(err))
	}
	return nil
}

// appendAuditRows appends events to batch as one block of columns.
func (s *Store) appendAuditRows(batch driver.Batch, events []schemas.AuditEvent) error {
	now := s.now()
	n := len(events)
	var (
		org, eventID, id, display, principal, ptype = make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		salt                                        = make([]string, n)
		ts, createdMS                               = make([]int64, n), make([]int64, n)
		ver, seq                                    = make([]uint64, n), make([]uint64, n)
		action, source                              = make([]uint8, n), make([]uint8, n)
		clientIP, customer, project, user           = make([]*string, n), make([]*string, n), make([]*string, n), make([]*string, n)
		resID, resDisplay, data                     = make([]*string, n), make([]*string, n), make([]*string, n)
		rt                                          = make([]*uint8, n)
	)
	// Few allocations per row: ids go through one arena, repeated org and
	// project ids are shared, pointers point into per-batch arrays.
	arena := make([]byte, 0, n*36*2)
	for i := range events {
		arena = appendUUID(arena, events[i].EventID)
		arena = appendUUID(arena, schemas.EntryID(events[i].EventID))
	}
	ids := string(arena)
	dataVals := make([]string, n)
	var rtVals [32]uint8
	for i := range rtVals {
		rtVals[i] = uint8(i)
	}
	uuids := map[uuid.UUID]*string{}
	shared := func(u uuid.UUID) *string {
		if p, ok := uuids[u]; ok {
			return p
		}
		str := u.String()
		uuids[u] = &str
		return &str
	}
	for i := range events {
		e := &events[i]
		org[i] = *shared(e.OrganizationID)
		ts[i] = e.Timestamp.UnixMilli()
		eventID[i] = ids[i*72 : i*72+36]
		id[i] = ids[i*72+36 : i*72+72]
		clientIP[i] = e.ClientIP
		action[i] = uint8(e.Action)
		source[i] = uint8(e.Source)
		display[i] = e.DisplayName
		if e.CustomerID != nil {
			customer[i] = shared(*e.CustomerID)
		}
		if e.ProjectID != nil {
			project[i] = shared(*e.ProjectID)
		}
		principal[i] = e.PrincipalID
		user[i] = e.UserID
		ptype[i] = e.PrincipalType
		if e.ResourceType != nil && int(*e.ResourceType) < len(rtVals) {
			rt[i] = &rtVals[*e.ResourceType]
		}
		resID[i] = e.ResourceID
		resDisplay[i] = e.ResourceDisplay
		if e.Data != nil {
			dataVals[i] = string(e.Data)
			data[i] = &dataVals[i]
		}
		createdMS[i] = auditstore.CreatedMS(e.Stored, now)
		salt[i] = string(e.Salt)
		ver[i] = math.MaxInt64 - uint64(createdMS[i])
		seq[i] = e.Stored.Seq
	}
	leaf := make([]string, n)
	if s.leaves != nil {
		var err error
		for i := range leaf {
			r := auditstore.StoredRow{EventID: eventID[i], ID: id[i], OrgID: org[i], TsMS: ts[i], CreatedMS: createdMS[i],
				Action: action[i], Source: source[i], DisplayName: display[i], PrincipalID: principal[i], PrincipalType: ptype[i],
				ClientIP: clientIP[i], Customer: customer[i], Project: project[i], User: user[i], ResID: resID[i], ResDisplay: resDisplay[i],
				Data: data[i], ResourceType: rt[i], Salt: events[i].Salt}
			if leaf[i], err = s.auditLeaf(&r); err != nil {
				return err
			}
		}
	}
	cols := []any{org, ts, eventID, id, clientIP, action, source, display, customer, project, principal, user, ptype, rt, resID, resDisplay, data, createdMS, salt, ver, seq, leaf}
	for i, col := range cols {
		if err := batch.Column(i).Append(col); err != nil {
			return fmt.Errorf("clickhouse append column %d: %w", i, err)
		}
	}
	return nil
}

// classify marks the errors of an insert that ingest handles apart, by the
// server's exception code: rows the table refuses (a row limit of
// 0010_row_limits.sql, a value the column cannot hold) and a server that
// refuses inserts for now (too many parts, memory or time limits).
func classify(err error) error {
	var e *proto.Exception
	if !errors.As(err, &e) {
		return err
	}
	switch e.Code {
	case 6, 27, 53, 69, 70, 131, 321, 395:
		// CANNOT_PARSE_TEXT, CANNOT_PARSE_INPUT_ASSERTION_FAILED, TYPE_MISMATCH,
		// ARGUMENT_OUT_OF_BOUND, CANNOT_CONVERT_TYPE, TOO_LARGE_STRING_SIZE,
		// VALUE_IS_OUT_OF_RANGE_OF_DATA_TYPE, FUNCTION_THROW_IF_VALUE_IS_NON_ZERO
		return fmt.Errorf("%w: %w", auditstore.ErrRefused, err)
	case 159, 202, 241, 242, 252:
		// TIMEOUT_EXCEEDED, TOO_MANY_SIMULTANEOUS_QUERIES, MEMORY_LIMIT_EXCEEDED,
		// TABLE_IS_READ_ONLY, TOO_MANY_PARTS
		return fmt.Errorf("%w: %w", auditstore.ErrBusy, err)
	}
	return err
}

const hexDigits = "0123456789abcdef"

// appendUUID appends the canonical form of u (as uuid.String writes it).
func appendUUID(b []byte, u uuid.UUID) []byte {
	for i, x := range u {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			b = append(b, '-')
		}
		b = append(b, hexDigits[x>>4], hexDigits[x&0xf])
	}
	return b
}

// ListAudit implements auditstore.Store. ClickHouse 18.16 cannot read the
// sort key in reverse, so an unbounded newest-first query reads every row
// of the organization. Instead the hourly counts (audit_stats' kind 0) choose the
// newest hours that hold a page, and only those are scanned (see pageByHours).
func (s *Store) ListAudit(ctx context.Context, q auditstore.Query) (auditstore.Page, error) {
	if err := q.Validate(); err != nil {
		return auditstore.Page{}, err
	}
	project := ""
	if q.ProjectID != nil {
		project = q.ProjectID.String()
	}
	span, err := s.hourCounts(ctx, hoursKey{auditHoursSQL, q.OrgID.String(), project}, q.Filter.Unfiltered())
	if err != nil {
		return auditstore.Page{}, err
	}
	items, more, err := pageByHours(span, q.After, q.Window, q.Limit, func(lo, hi int64, limit int) ([]schemas.AuditEntry, error) {
		return s.listWindow(ctx, q, project, lo, hi, limit)
	})
	return auditstore.Page{Items: items, HasMore: more}, err
}

// pageByHours reads the page of limit items after the cursor (nil: the
// newest page) from window, which returns up to limit items of the listing
// in [lo, hi), newest first. The first window holds the newest hours that
// hold limit+1 events by the counts. When filters leave too few items,
// older hours follow: as many events as the matches seen so far say the
// rest of the page needs (with a margin), and at least four times the
// events scanned so far, until the page is full or the history is
// exhausted. The newest bound is open (or the cursor), so stale counts cost
// at most an extra round, never an item. The window w (since, until)
// narrows the scanned hours: no window starts before since or ends after
// until, and the scan stops at since. A listing without filters starts
// its first window inside an hour that holds far more than it needs
// (hourSpan): the newest page of a tenant writing thousands of entries a
// second reads a few hundred of them, not the whole hour.
func pageByHours[T any](span hourSpan, after *auditstore.Key, w auditstore.Window, limit int, window func(lo, hi int64, limit int) ([]T, error)) ([]T, bool, error) {
	floor, until := w.Bounds()
	upper := min(upperBound(after), until)
	idx := firstHourBelow(span.hours, upper)
	need := limit + 1
	var items []T
	var scanned uint64 // events in the windows read so far, by the counts
	for hi, target := upper, uint64(need); ; {
		lo, j, n := nextWindow(span, idx, hi, target)
		last := lo <= floor // the window reaches since (or the beginning)
		lo = max(lo, floor)
		page, err := window(lo, hi, need-len(items))
		if err != nil {
			return nil, false, err
		}
		if items == nil {
			items = page // most pages come from one window: no copy
		} else {
			items = append(items, page...)
		}
		if len(items) >= need || last {
			break
		}
		hi, idx, scanned = lo, j, scanned+n
		target = nextTarget(scanned, len(items), need)
		// Only the first window starts inside an hour: one found short
		// says the entries are not spread as the counts let it assume,
		// so the rest is read by whole hours, as a filtered listing's
		// (at worst, one small read more than whole hours from the start).
		span.asOf = 0
	}
	if len(items) > limit {
		return items[:limit], true, nil
	}
	return items, false, nil
}

// nextTarget is the number of events the next window should hold, when
// found of the need items were among the scanned events so far.
func nextTarget(scanned uint64, found, need int) uint64 {
	target := 4 * max(scanned, 1)
	if found > 0 {
		// The selectivity seen so far, with a 50 % margin.
		est := scanned * uint64(need-found) * 3 / (2 * uint64(found))
		target = max(est, uint64(need))
	}
	return target
}

// upperBound is the exclusive upper time bound of a page after the cursor.
func upperBound(after *auditstore.Key) int64 {
	if after == nil {
		return math.MaxInt64
	}
	return after.Timestamp.UnixMilli() + 1
}

// firstWindow returns the time range [lo, hi) that pageByHours scans first.
func firstWindow(span hourSpan, after *auditstore.Key, limit int) (lo, hi int64) {
	hi = upperBound(after)
	lo, _, _ = nextWindow(span, firstHourBelow(span.hours, hi), hi, uint64(limit+1))
	return lo, hi
}

// FirstWindow returns the time range [lo, hi) that ListAudit scans first
// for q (for benchmarks that compare with a hand-written query).
func (s *Store) FirstWindow(ctx context.Context, q auditstore.Query) (lo, hi int64, err error) {
	project := ""
	if q.ProjectID != nil {
		project = q.ProjectID.String()
	}
	span, err := s.hourCounts(ctx, hoursKey{auditHoursSQL, q.OrgID.String(), project}, q.Filter.Unfiltered())
	if err != nil {
		return 0, 0, err
	}
	lo, hi = firstWindow(span, q.After, q.Limit)
	return lo, hi, nil
}

// firstHourBelow is the index of the newest hour that starts before upper.
func firstHourBelow(hours []hourCount, upper int64) int {
	idx := 0
	for idx < len(hours) && hours[idx].hour >= upper {
		idx++
	}
	return idx
}

// nextWindow returns the start of the oldest hour needed for hours[idx:],
// below upper, to hold target events (math.MinInt64 when they hold fewer:
// scan to the beginning), the index after that hour and the events of the
// window by the counts. When span.asOf is set and that hour holds more
// than windowMargin times what the window still needs from it, the window
// starts inside it instead, where that many of its events lie by the
// time (its events spread evenly up to asOf), and the index is that
// hour's: the next window takes the rest of it.
func nextWindow(span hourSpan, idx int, upper int64, target uint64) (int64, int, uint64) {
	hours := span.hours
	var cum uint64
	j := idx
	for j < len(hours) && cum < target {
		cum += below(hours[j], upper, span.asOf)
		j++
	}
	if cum >= target && span.asOf != 0 {
		h := hours[j-1]
		in := below(h, upper, span.asOf)
		want := windowMargin * (target - (cum - in))
		if end := min(upper, spanEnd(h, span.asOf)); want < in && end > h.hour {
			lo := end - int64(uint64(end-h.hour)*want/in) - 1
			if lo > h.hour {
				return lo, j - 1, cum - in + want
			}
		}
	}
	if j < len(hours) {
		return hours[j-1].hour, j, cum
	}
	return math.MinInt64, j, cum
}

// windowMargin is how many times more events than it needs a window
// inside an hour is meant to hold: events are not spread evenly, and a
// window found short costs a round.
const windowMargin = 4

// spanEnd is the end of the time over which h's events lie: the hour's
// end, or asOf (when set) for the hour the counts were read in.
func spanEnd(h hourCount, asOf int64) int64 {
	end := h.hour + hourMS
	if asOf > h.hour && asOf < end {
		end = asOf + 1
	}
	return end
}

// below estimates how many of h's events lie before upper: all of them
// when the hour (or its span up to asOf) ends by upper, else a share in
// proportion to the time (a cursor inside an hour). Counting the whole
// hour there made a page deep in an export read the rest of the cursor's
// hour, find it short, and then read three more hours for the remainder:
// six rows scanned per row returned; with the share it is about two.
func below(h hourCount, upper, asOf int64) uint64 {
	end := spanEnd(h, asOf)
	if upper >= end {
		return h.n
	}
	if upper <= h.hour {
		return 0
	}
	span := uint64(end - h.hour)
	return (h.n*uint64(upper-h.hour) + span - 1) / span
}

// listPredicates says which optional predicates a listing uses, and the
// terms of its search.
type listPredicates struct {
	Project, Action, Source, ResourceType, After bool
	Terms                                        []chTerm
}

// listWindow reads up to limit entries of q with lo <= ts_ms < hi.
func (s *Store) listWindow(ctx context.Context, q auditstore.Query, project string, lo, hi int64, limit int) ([]schemas.AuditEntry, error) {
	p := listPredicates{Project: project != "", Action: q.Action != nil, Source: q.Source != nil, ResourceType: q.ResourceType != nil, After: q.After != nil}
	var termArgs []any
	p.Terms, termArgs = searchTerms(q.Search.Terms, "text")
	args := []any{q.OrgID.String(), lo, hi, q.OrgID.String(), lo, hi}
	if p.Project {
		args = append(args, project)
	}
	if p.Action {
		args = append(args, uint8(*q.Action))
	}
	if p.Source {
		args = append(args, uint8(*q.Source))
	}
	if p.ResourceType {
		args = append(args, uint8(*q.ResourceType))
	}
	args = append(args, termArgs...)
	if p.After {
		ts := q.After.Timestamp.UnixMilli()
		args = append(args, ts, ts, q.After.EventID.String())
	}
	args = append(args, limit, limit)
	query, err := render(listAuditSQL, p, len(args))
	if err != nil {
		return nil, err
	}
	rows, err := s.conn.Query(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("clickhouse list: %w", err)
	}
	defer rows.Close()
	// ReadPage with limit+1 never trims: the caller counts.
	page, err := auditstore.ReadPage(rows, limit+1)
	if err != nil {
		return nil, fmt.Errorf("clickhouse list: %w", err)
	}
	return page.Items, nil
}

// hourCounts returns the hourly counts of k, newest first, cached for
// hoursTTL, as the span of a listing (unfiltered: the listing has no
// filters, and its windows may start inside an hour).
func (s *Store) hourCounts(ctx context.Context, k hoursKey, unfiltered bool) (hourSpan, error) {
	e, err := s.cachedHours(ctx, k)
	span := hourSpan{hours: e.hours}
	if unfiltered {
		span.asOf = e.at.UnixMilli()
	}
	return span, err
}

// cachedHours returns the hourly counts of k and when they were read,
// cached for hoursTTL.
func (s *Store) cachedHours(ctx context.Context, k hoursKey) (hoursEntry, error) {
	s.mu.Lock()
	e, ok := s.hours[k]
	s.mu.Unlock()
	if ok && s.now().Sub(e.at) < hoursTTL {
		return e, nil
	}
	at := s.now()
	args := []any{k.org, k.project, k.project, int64(math.MaxInt64)}
	if k.query == auditHoursSQL {
		args = []any{k.org, k.project, int64(math.MaxInt64)} // a scope of audit_stats
	}
	rows, err := s.conn.Query(ctx, k.query, args...)
	if err != nil {
		return hoursEntry{}, fmt.Errorf("clickhouse hourly counts: %w", err)
	}
	defer rows.Close()
	var hours []hourCount
	for rows.Next() {
		var h hourCount
		if err := rows.Scan(&h.hour, &h.n); err != nil {
			return hoursEntry{}, fmt.Errorf("clickhouse hourly counts: %w", err)
		}
		hours = append(hours, h)
	}
	if err := rows.Err(); err != nil {
		return hoursEntry{}, fmt.Errorf("clickhouse hourly counts: %w", err)
	}
	s.mu.Lock()
	if len(s.hours) > 10_000 {
		s.hours = map[hoursKey]hoursEntry{} // bound the cache; it refills on demand
	}
	e = hoursEntry{at: at, hours: hours}
	s.hours[k] = e
	s.mu.Unlock()
	return e, nil
}

// Ping implements auditstore.Store.
func (s *Store) Ping(ctx context.Context) error { return s.conn.Ping(ctx) }

// Close implements auditstore.Store.
func (s *Store) Close() error { return s.conn.Close() }
