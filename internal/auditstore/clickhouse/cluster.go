package clickhouse

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/auditrail/auditrail/internal/auditstore"
)

// The cluster layout (--clickhouse-cluster NAME). The embedded migrations
// (schemas/clickhouse) are the one source of truth: in cluster mode each
// statement is rewritten by clusterPlan, not written twice.
//
//   - CREATE TABLE t … ENGINE = E(args) creates t_local ON CLUSTER with
//     ReplicatedE('/clickhouse/tables/{shard}/db.t_local', '{replica}', args)
//     and t, a Distributed table over t_local sharded by
//     cityHash64(organization_id): a tenant's rows, hours, stats, indexes
//     and pages live on one shard. Readers and writers keep using t.
//   - CREATE MATERIALIZED VIEW v TO t AS SELECT … FROM u creates v ON
//     CLUSTER on every node, reading u_local and writing t_local: each shard
//     keeps the aggregates and indexes of its own rows, and its replicas get
//     them through replication of t_local (a view on a replica fires only for
//     inserts into that replica; fetched parts do not run views, so the
//     target is replicated rather than recomputed).
//   - ALTER TABLE t ADD COLUMN … alters t_local ON CLUSTER (once per shard:
//     replication carries it to the other replicas), then the Distributed
//     table is made again with the new columns: 18.16 refuses ALTER ON
//     CLUSTER of a Distributed table when the cluster's shards use
//     internal_replication (code 371), and a MATERIALIZED column must not be
//     on the Distributed table (an insert through it would carry the column
//     and be refused). A Distributed table holds no rows (inserts are
//     synchronous, see Open), so dropping and creating it loses nothing.
//   - DROP TABLE IF EXISTS v of a view that an earlier migration created
//     drops it ON CLUSTER (a view is replaced by another: the new one is
//     made first, so no insert misses it). A view that a later migration
//     drops is not made at all: a cluster is created by this release or a
//     later one, and a node added later runs every migration again on the
//     cluster, which would otherwise bring the dropped view back on every
//     node until its drop.
//   - INSERT … SELECT (the backfills) runs as written, through the
//     Distributed tables, on the node the migrator is connected to: the
//     rows go to the shard of their organization.
//
// Any other statement is refused in cluster mode, so that a new migration
// of another shape fails loudly (TestClusterPlanCoversMigrations) instead
// of creating an unsharded table.

var (
	createTableRE = regexp.MustCompile(`(?is)^CREATE\s+TABLE\s+IF\s+NOT\s+EXISTS\s+(\w+)\s*(\(.*\))\s*ENGINE\s*=\s*(\w+)(?:\(([^)]*)\))?(.*)$`)
	createViewRE  = regexp.MustCompile(`(?is)^CREATE\s+MATERIALIZED\s+VIEW\s+IF\s+NOT\s+EXISTS\s+(\w+)\s+TO\s+(\w+)\s+AS\s+(.*)$`)
	alterAddRE    = regexp.MustCompile(`(?is)^ALTER\s+TABLE\s+(\w+)\s+(ADD\s+COLUMN\s.*)$`)
	dropViewRE    = regexp.MustCompile(`(?is)^DROP\s+TABLE\s+IF\s+EXISTS\s+(\w+)\s*$`)
	insertRE      = regexp.MustCompile(`(?is)^INSERT\s+INTO\s+(\w+)\s.*\bSELECT\s.*$`)
	addColumnRE   = regexp.MustCompile(`(?is)^ADD\s+COLUMN\s+`)
	fromRE        = regexp.MustCompile(`(?i)\bFROM\s+(\w+)\b`)
	clusterNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,63}$`)
)

// shardingKey is the expression that places a row on a shard.
const shardingKey = "cityHash64(organization_id)"

// clusterStep is one step of a migration in cluster mode: a statement to
// run (sql) or, when distributed is set, the Distributed table of that
// name to make match its local table.
type clusterStep struct {
	sql         string
	distributed string
	// table and column: sql adds column to table, and runs only when
	// table_local does not have it.
	table, column string
	// view: sql drops this view, and runs only when the node the store is
	// connected to has it (a fresh cluster never made it: no DDL round
	// on the cluster for nothing).
	view string
	// target: sql is a backfill into this (Distributed) table, and runs
	// only when it is empty. On a cluster the backfills of the current
	// migrations copy nothing (a cluster starts empty); a node added later
	// runs the migrations again, and a view that fed the target since its
	// creation has counted the rows already.
	target string
}

// clusterPlan rewrites the statements of ms for cluster on database db.
// The columns that later migrations add (ALTER TABLE … ADD COLUMN) are
// part of the CREATE TABLE from the start: a cluster is created by this
// release or a later one, never by one before cluster mode. Their ALTER
// steps still run where the column is missing (a migration added after a
// cluster was created): ALTER ON CLUSTER of a replicated table makes the
// DDL workers of a shard's replicas race on 18.16 (a "Node exists …
// /executed" that stops one worker), so it is kept off a fresh cluster.
func clusterPlan(ms []auditstore.Migration, cluster, db string) ([][]clusterStep, error) {
	q := func(name string) string { return "`" + db + "`.`" + name + "`" }
	on := " ON CLUSTER `" + cluster + "`"
	added := map[string][]string{} // table → column definitions, in order
	dropped := map[string]bool{}   // views a migration drops
	for _, m := range ms {
		for _, raw := range m.Statements {
			if g := alterAddRE.FindStringSubmatch(stripLeadingComments(raw)); g != nil {
				def := strings.TrimSpace(addColumnRE.ReplaceAllString(g[2], ""))
				added[g[1]] = append(added[g[1]], def)
			}
			if g := dropViewRE.FindStringSubmatch(stripLeadingComments(raw)); g != nil {
				dropped[g[1]] = true
			}
		}
	}
	tables, views := map[string]bool{}, map[string]bool{}
	local := func(sel string) string {
		return fromRE.ReplaceAllStringFunc(sel, func(m string) string {
			name := fromRE.FindStringSubmatch(m)[1]
			if !tables[name] {
				return m
			}
			return "FROM " + q(name+"_local")
		})
	}
	out := make([][]clusterStep, len(ms))
	for i, m := range ms {
		for _, raw := range m.Statements {
			stmt := stripLeadingComments(raw)
			switch {
			case createTableRE.MatchString(stmt):
				g := createTableRE.FindStringSubmatch(stmt)
				name, cols, engine, args, rest := g[1], g[2], g[3], strings.TrimSpace(g[4]), g[5]
				if !strings.Contains(cols, "organization_id") {
					return nil, fmt.Errorf("migration %s: table %s has no organization_id to shard by", m.Name, name)
				}
				if defs := added[name]; len(defs) > 0 {
					cols = strings.TrimSuffix(strings.TrimSpace(cols), ")") + ",\n    " + strings.Join(defs, ",\n    ") + "\n)"
				}
				params := fmt.Sprintf("'/clickhouse/tables/{shard}/%s.%s_local', '{replica}'", db, name)
				if args != "" {
					params += ", " + args
				}
				tables[name] = true
				out[i] = append(out[i],
					clusterStep{sql: fmt.Sprintf("CREATE TABLE IF NOT EXISTS %s%s %s ENGINE = Replicated%s(%s)%s", q(name+"_local"), on, cols, engine, params, rest)},
					clusterStep{distributed: name})
			case createViewRE.MatchString(stmt):
				g := createViewRE.FindStringSubmatch(stmt)
				if !tables[g[2]] {
					return nil, fmt.Errorf("migration %s: view %s writes to %s, not a table of the migrations", m.Name, g[1], g[2])
				}
				views[g[1]] = true
				if dropped[g[1]] {
					continue // dropped by a later migration: never made
				}
				out[i] = append(out[i], clusterStep{sql: fmt.Sprintf("CREATE MATERIALIZED VIEW IF NOT EXISTS %s%s TO %s AS %s", q(g[1]), on, q(g[2]+"_local"), local(g[3]))})
			case dropViewRE.MatchString(stmt):
				g := dropViewRE.FindStringSubmatch(stmt)
				if !views[g[1]] {
					return nil, fmt.Errorf("migration %s: DROP of %s, not a view of the migrations", m.Name, g[1])
				}
				out[i] = append(out[i], clusterStep{sql: fmt.Sprintf("DROP TABLE IF EXISTS %s%s", q(g[1]), on), view: g[1]})
			case alterAddRE.MatchString(stmt):
				g := alterAddRE.FindStringSubmatch(stmt)
				if !tables[g[1]] {
					return nil, fmt.Errorf("migration %s: ALTER of %s, not a table of the migrations", m.Name, g[1])
				}
				col := strings.Fields(addColumnRE.ReplaceAllString(g[2], ""))[0]
				out[i] = append(out[i],
					clusterStep{sql: fmt.Sprintf("ALTER TABLE %s%s %s", q(g[1]+"_local"), on, g[2]), table: g[1], column: col},
					clusterStep{distributed: g[1]})
			case insertRE.MatchString(stmt):
				target := insertRE.FindStringSubmatch(stmt)[1]
				if !tables[target] {
					return nil, fmt.Errorf("migration %s: backfill of %s, not a table of the migrations", m.Name, target)
				}
				out[i] = append(out[i], clusterStep{sql: raw, target: target})
			default:
				return nil, fmt.Errorf("migration %s: statement not supported in cluster mode: %.80s", m.Name, stmt)
			}
		}
	}
	return out, nil
}

// stripLeadingComments drops the comment lines before a statement.
func stripLeadingComments(s string) string {
	lines := strings.Split(s, "\n")
	for len(lines) > 0 {
		l := strings.TrimSpace(lines[0])
		if l != "" && !strings.HasPrefix(l, "--") {
			break
		}
		lines = lines[1:]
	}
	return strings.TrimSpace(strings.Join(lines, "\n"))
}

type column struct{ name, typ, kind, expr string }

// columns returns the columns of db.table in their order (none: no table).
func (s *Store) columns(ctx context.Context, table string) ([]column, error) {
	rows, err := s.conn.Query(ctx, `SELECT name, type, default_kind, default_expression FROM system.columns WHERE database = ? AND table = ?`, s.db, table)
	if err != nil {
		return nil, fmt.Errorf("read columns of %s: %w", table, err)
	}
	defer rows.Close()
	var out []column
	for rows.Next() {
		var c column
		if err := rows.Scan(&c.name, &c.typ, &c.kind, &c.expr); err != nil {
			return nil, fmt.Errorf("read columns of %s: %w", table, err)
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

// syncDistributed makes the Distributed table name hold the columns of
// name_local that can be inserted (not MATERIALIZED or ALIAS), creating it
// or making it again when they differ.
func (s *Store) syncDistributed(ctx context.Context, name string) error {
	local, err := s.columns(ctx, name+"_local")
	if err != nil {
		return err
	}
	if len(local) == 0 {
		return fmt.Errorf("cluster table %s_local not found", name)
	}
	var want []column
	for _, c := range local {
		if c.kind != "MATERIALIZED" && c.kind != "ALIAS" {
			want = append(want, c)
		}
	}
	have, err := s.columns(ctx, name)
	if err != nil {
		return err
	}
	if equalColumns(have, want) {
		return nil
	}
	q := "`" + s.db + "`.`" + name + "`"
	on := " ON CLUSTER `" + s.cluster + "`"
	if len(have) > 0 {
		if err := s.conn.Exec(ctx, "DROP TABLE IF EXISTS "+q+on); err != nil {
			return fmt.Errorf("drop distributed %s: %w", name, err)
		}
	}
	defs := make([]string, len(want))
	for i, c := range want {
		defs[i] = "`" + c.name + "` " + c.typ
		if c.kind == "DEFAULT" {
			defs[i] += " DEFAULT " + c.expr
		}
	}
	ddl := fmt.Sprintf("CREATE TABLE IF NOT EXISTS %s%s (%s) ENGINE = Distributed(`%s`, `%s`, `%s_local`, %s)",
		q, on, strings.Join(defs, ", "), s.cluster, s.db, name, shardingKey)
	if err := s.conn.Exec(ctx, ddl); err != nil {
		return fmt.Errorf("create distributed %s: %w", name, err)
	}
	return nil
}

func hasColumn(cols []column, name string) bool {
	for _, c := range cols {
		if c.name == name {
			return true
		}
	}
	return false
}

func equalColumns(a, b []column) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].name != b[i].name || a[i].typ != b[i].typ {
			return false
		}
	}
	return true
}

// migrateCluster applies the migrations in cluster mode (see clusterPlan).
// schema_migrations is one ReplicatedMergeTree with every node of the
// cluster as a replica (a path without {shard}): every node reads the
// whole list locally.
func (s *Store) migrateCluster(ctx context.Context, ms []auditstore.Migration) error {
	plan, err := clusterPlan(ms, s.cluster, s.db)
	if err != nil {
		return err
	}
	ddl := fmt.Sprintf("CREATE TABLE IF NOT EXISTS `%s`.schema_migrations ON CLUSTER `%s` (name String, applied_ms Int64) "+
		"ENGINE = ReplicatedMergeTree('/clickhouse/tables/all/%s.schema_migrations', '{replica}') ORDER BY name", s.db, s.cluster, s.db)
	if err := s.conn.Exec(ctx, ddl); err != nil {
		return fmt.Errorf("create schema_migrations: %w", err)
	}
	// A node added to the cluster after the migrations ran (its local
	// tables missing) gets every table and view: the migrations are run
	// again from the node the store is connected to — their statements are
	// idempotent, and a backfill is skipped when its target holds rows.
	cols, err := s.columns(ctx, "audit_logs_local")
	if err != nil {
		return err
	}
	newNode := len(cols) == 0
	for i, m := range ms {
		done, err := s.applied(ctx, m.Name)
		if err != nil {
			return err
		}
		if done && !newNode {
			continue
		}
		for _, st := range plan[i] {
			if st.distributed != "" {
				if err := s.syncDistributed(ctx, st.distributed); err != nil {
					return fmt.Errorf("migration %s: %w", m.Name, err)
				}
				continue
			}
			if st.target != "" {
				var n uint64
				if err := s.conn.QueryRow(ctx, "SELECT count() FROM `"+st.target+"`").Scan(&n); err != nil {
					return fmt.Errorf("migration %s: %w", m.Name, err)
				}
				if n > 0 {
					continue
				}
			}
			if st.view != "" {
				var n uint64
				if err := s.conn.QueryRow(ctx, "SELECT count() FROM system.tables WHERE database = ? AND name = ?", s.db, st.view).Scan(&n); err != nil {
					return fmt.Errorf("migration %s: %w", m.Name, err)
				}
				if n == 0 {
					continue
				}
			}
			if st.column != "" {
				cols, err := s.columns(ctx, st.table+"_local")
				if err != nil {
					return fmt.Errorf("migration %s: %w", m.Name, err)
				}
				if hasColumn(cols, st.column) {
					continue
				}
			}
			if err := s.conn.Exec(ctx, st.sql); err != nil && !columnExists(st.sql, err) {
				return fmt.Errorf("migration %s: %w", m.Name, err)
			}
		}
		if err := s.recordMigration(ctx, m.Name); err != nil {
			return err
		}
	}
	return nil
}

// clusterConn is the connection of a cluster store: a query with a
// subquery in IN (the listings' IN (SELECT … FROM audit_logs), the feed's
// keys) reads, on each shard, the local table of the subquery: an
// organization's rows are all on one shard, so the local answer is the
// whole answer (the default, distributed_product_mode = 'deny', refuses
// such queries). The setting goes in the query's SETTINGS clause: the
// driver cannot send a string setting to 18.16 over the native protocol.
type clusterConn struct{ driver.Conn }

var inSubqueryRE = regexp.MustCompile(`(?i)\bIN\s*\(\s*SELECT\b`)

func localProduct(query string) string {
	if inSubqueryRE.MatchString(query) {
		return query + "\nSETTINGS distributed_product_mode = 'local'"
	}
	return query
}

func (c clusterConn) Query(ctx context.Context, query string, args ...any) (driver.Rows, error) {
	return c.Conn.Query(ctx, localProduct(query), args...)
}

func (c clusterConn) QueryRow(ctx context.Context, query string, args ...any) driver.Row {
	return c.Conn.QueryRow(ctx, localProduct(query), args...)
}

func (c clusterConn) Select(ctx context.Context, dest any, query string, args ...any) error {
	return c.Conn.Select(ctx, dest, localProduct(query), args...)
}

// ValidateCluster checks a cluster name (an identifier of remote_servers).
func ValidateCluster(name string) error {
	if name != "" && !clusterNameRE.MatchString(name) {
		return errors.New("clickhouse cluster name must be an identifier ([A-Za-z_][A-Za-z0-9_]*)")
	}
	return nil
}
