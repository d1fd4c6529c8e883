package clickhouse

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"text/template"
	"time"

	ch "github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/ext"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/google/uuid"

	"github.com/auditrail/auditrail/internal/auditstore"
)

// The lifecycle's storage (auditstore.LifecycleStore). ClickHouse deletes
// rows with mutations (ALTER TABLE … DELETE WHERE …), which 18.16 runs in
// the background, part by part, beside the inserts: ingest is never held
// off. A mutation applies to the parts that exist when it is created;
// rows inserted later are not touched, so entries written during an expiry
// stay (and those have feed keys after the expiry's anyway).
//
// What a mutation costs on 18.16, measured here (18.16.1; 120 000 entries
// of 100 organizations over 12 months, each table merged to one part per
// partition with OPTIMIZE FINAL; one organization's 200 entries of two
// months expired, system.parts and the inodes of the parts' files compared
// before and after): every part of a table is visited. A part without a
// matching row is checked with the predicate (a read of the columns it
// names, bounded by the primary key, organization_id first) and
// hard-linked under the mutation's version, not rewritten. A part holding
// one matching row is rewritten whole, every column of every row, other
// organizations' included. audit_logs (partitioned by month): 2 of its 12
// parts rewritten, 2.8 of 16.8 MB (17 %). event_index, feed_index and
// feed_leaves have no partitions: one part each here, rewritten whole
// (5.1, 6.3 and 9.6 MB), audit_hours and audit_stats too (0.6 and
// 0.8 MB): 25 MB written to delete 200 rows, the whole DeleteExpired done
// in 0.41 s. So an expiry costs about the size of the parts that hold its
// entries, whatever their share of them: the months of audit_logs it
// reaches and, for the indexes, the (large, merged) parts that hold the
// oldest rows, which is most of each index table. 18.16 has no
// mutations_sync, no KILL MUTATION and no latest_fail_reason: the store
// waits by polling system.mutations (bounded by ExpiryWait) and only ever
// creates mutations whose predicates it rendered itself (tried here: a
// mutation whose predicate throws stays undone, and so does every later
// mutation of its table).
//
// Each table gets one mutation per call: the entries' table, event_index,
// feed_index, feed_leaves, and the aggregates (audit_stats, whose kind 0
// holds the entries' hourly counts since 0020, or execution_hours), whose rows for the hours and days of
// the deleted entries are deleted and counted again from the rows that
// stay, with the SELECT of their materialized views. In this order:
//
//  1. event_index (it holds no feed key: its rows are matched through
//     feed_index, which must still hold them), waited for;
//  2. the aggregates: their rows deleted, then counted again (an entry
//     written with a timestamp in those hours between the two, a few
//     milliseconds, is counted twice: retention expires hours long past,
//     where entries hardly arrive);
//  3. feed_leaves, the entries, feed_index last: a run that stops before
//     the end leaves rows that the next one finds (in the entries or in
//     feed_index) and deletes, doing every step again.
//
// On a cluster the mutations are made on the local tables under the
// Distributed ones, on one replica of each shard (the first of
// system.clusters that takes it): a mutation of a replicated table is
// written to ZooKeeper and every replica of the shard applies it. Not ON
// CLUSTER: each such statement waits for the distributed DDL queue of
// every server (0.5 to 1.2 s here, where a direct ALTER takes a few
// milliseconds: the 2×2 test cluster's conformance cases took 38 s ON
// CLUSTER), and the DDL workers parse it again with their own
// max_query_size. The store then waits until every server of the cluster
// lists the mutations of the call as done: a read may go to any replica.

var (
	//go:embed queries/lifecycle.sql
	lifecycleText string
	lifecycleSQL  = template.Must(template.New("lifecycle.sql").Parse(lifecycleText))
	//go:embed queries/insert_log_expiry.sql
	insertLogExpirySQL string
	//go:embed queries/log_expiry_latest.sql
	logExpiryLatestSQL string
	//go:embed queries/insert_lifecycle_keep.sql
	insertLifecycleKeepSQL string
)

var _ auditstore.LifecycleStore = (*Store)(nil)

// keepLiteralMax is how many kept entries an expiry writes into its
// deletions as literals (event_id NOT IN ('…', …)); more go to
// lifecycle_keep (0014), which the deletions read back (18.16 takes a
// subquery in a mutation, of a replicated table too: tried here). 10 000
// would not do: the statement must fit the server's max_query_size
// (256 KiB by default), which a list of 6 550 ids already exceeded here
// (code 62); ON CLUSTER, each server's DDL worker would parse it again
// with its own. Only the kept entries that the expiry would otherwise
// delete count, not the whole keep set.
var keepLiteralMax = 5000

// ExpiryWait bounds how long DeleteExpired waits for its mutations (and
// the copies of its kept ids) on every server. The mutations carry on
// after it gives up; a later call with the same arguments finds what is
// left.
var ExpiryWait = 30 * time.Minute

// expiryMutating, when set (tests), is called once DeleteExpired has
// created its last mutation, before it waits for them.
var expiryMutating func()

// lifecycleData is what the queries of lifecycle.sql render from.
type lifecycleData struct {
	// Table and TS: the entries' table and its time column, as SELECTs
	// name it; Keep: the kept entries' clause.
	Table, TS, Keep string
	// Qualified names of the tables a mutation deletes from (local ones on
	// a cluster).
	Entries, Index, EventIndex, FeedIndex, Hours, Stats string
	KeepTable                                           string
}

// expiryKind is what differs between the two kinds of logs.
type expiryKind struct {
	entries, ts, hours string
	stats              bool  // audit_stats counts the entries
	kind               uint8 // in event_index, feed_index and feed_leaves
}

func expiryKindOf(kind auditstore.LogKind) expiryKind {
	if kind == auditstore.LogExecutions {
		return expiryKind{entries: "tool_executions", ts: "started_ms", hours: "execution_hours", kind: kindExecution}
	}
	// The entries' hourly counts are audit_stats' kind 0 (0020).
	return expiryKind{entries: "audit_logs", ts: "ts_ms", stats: true, kind: kindAudit}
}

func lifecycleQuery(name string, d lifecycleData, nargs int) (string, error) {
	return render(lifecycleSQL.Lookup(name), d, nargs)
}

// ReadLogLeaves implements auditstore.LifecycleStore: the leaves below
// the head's size (rows above it are an append's that crashed).
func (s *Store) ReadLogLeaves(ctx context.Context, org uuid.UUID, kind auditstore.LogKind, lo, hi int64) ([]auditstore.LogLeaf, error) {
	if err := auditstore.ValidateLog(org, kind); err != nil {
		return nil, err
	}
	size, _, err := s.LogHead(ctx, org, kind)
	if err != nil {
		return nil, err
	}
	lo, hi = max(lo, 0), min(hi, size)
	if lo >= hi {
		return nil, nil
	}
	leaves, _, err := s.readLeaves(ctx, org, kind, lo, hi)
	return leaves, err
}

// CountThrough implements auditstore.LifecycleStore: distinct event ids
// of the entries' table itself (not of feed_index: the lifecycle counts
// what is kept to notice entries deleted by other means, which an index
// would still list). A scan of the organization's rows (the feed key is
// not in the table's sort key) of four columns.
func (s *Store) CountThrough(ctx context.Context, org uuid.UUID, kind auditstore.LogKind, last auditstore.FeedKey, cutoffMS int64) (all, before int64, err error) {
	if err := auditstore.ValidateLog(org, kind); err != nil {
		return 0, 0, err
	}
	k := expiryKindOf(kind)
	query, err := lifecycleQuery("count_through", lifecycleData{Table: k.entries, TS: k.ts}, 6)
	if err != nil {
		return 0, 0, err
	}
	var a, b uint64
	if err := s.conn.QueryRow(groupBySpills(ctx), query, cutoffMS, org.String(), last.Seq, last.Seq, last.CreatedMS, last.EventID.String()).Scan(&a, &b); err != nil {
		return 0, 0, fmt.Errorf("clickhouse count expiring: %w", err)
	}
	return int64(a), int64(b), nil
}

// groupByMemory is the memory a GROUP BY of the lifecycle's counts holds
// before it spills to disk (max_bytes_before_external_group_by).
const groupByMemory = 128 << 20

// groupBySpills is ctx with the lifecycle counts' setting: their GROUP BY
// over an expiry's event ids (millions) spills to disk past
// groupByMemory instead of growing the server's memory.
func groupBySpills(ctx context.Context) context.Context {
	return ch.Context(ctx, ch.WithSettings(ch.Settings{"max_bytes_before_external_group_by": groupByMemory}))
}

// expiry is one call of DeleteExpired.
type expiry struct {
	s      *Store
	org    uuid.UUID
	k      expiryKind
	last   auditstore.FeedKey
	cutoff int64
	// kept: the kept entries that the predicate would delete otherwise,
	// sorted; inTable: they are in lifecycle_keep under run.
	kept    []string
	inTable bool
	run     string
	nodes   servers
}

// table is the qualified name of a table as a mutation names it.
func (x *expiry) table(name string) string {
	if x.s.cluster != "" {
		name += "_local"
	}
	return "`" + x.s.db + "`.`" + name + "`"
}

// data is the template data of a query; mutation: the names of a mutation
// (qualified, local on a cluster), else those of a SELECT.
func (x *expiry) data(mutation bool) lifecycleData {
	d := lifecycleData{Table: x.k.entries, TS: x.k.ts}
	keepTable := "lifecycle_keep"
	if mutation {
		keepTable = x.table("lifecycle_keep")
		d.Entries, d.FeedIndex, d.EventIndex = x.table(x.k.entries), x.table("feed_index"), x.table("event_index")
		d.Hours, d.Stats, d.KeepTable = x.table(x.k.hours), x.table("audit_stats"), keepTable
	}
	switch {
	case len(x.kept) == 0:
	case !x.inTable:
		d.Keep = " AND event_id NOT IN (" + strings.TrimSuffix(strings.Repeat("?, ", len(x.kept)), ", ") + ")"
	default:
		d.Keep = " AND event_id NOT IN (SELECT event_id FROM " + keepTable + " WHERE organization_id = ? AND kind = ? AND run = ?)"
	}
	return d
}

// expiring returns the arguments of the "expiring" predicate.
func (x *expiry) expiring() []any {
	args := []any{x.last.Seq, x.last.Seq, x.last.CreatedMS, x.last.EventID.String(), x.cutoff}
	switch {
	case len(x.kept) == 0:
	case !x.inTable:
		for _, id := range x.kept {
			args = append(args, id)
		}
	default:
		args = append(args, x.org.String(), x.k.kind, x.run)
	}
	return args
}

// DeleteExpired implements auditstore.LifecycleStore (see the top of this
// file): one mutation per table, waited for on every server. It returns
// the number of distinct entries that matched in the entries' table before
// the deletions.
func (s *Store) DeleteExpired(ctx context.Context, org uuid.UUID, kind auditstore.LogKind, last auditstore.FeedKey, cutoffMS int64, keep map[uuid.UUID]bool) (int64, error) {
	if err := auditstore.ValidateLog(org, kind); err != nil {
		return 0, err
	}
	x := &expiry{s: s, org: org, k: expiryKindOf(kind), last: last, cutoff: cutoffMS, run: uuid.NewString()}
	if len(keep) > 0 {
		kept, err := x.keptAmong(ctx, keep)
		if err != nil {
			return 0, err
		}
		x.kept = kept
	}
	nodes, err := s.servers(ctx)
	if err != nil {
		return 0, err
	}
	defer nodes.close()
	x.nodes = nodes
	if len(x.kept) > keepLiteralMax {
		if err := x.writeKept(ctx); err != nil {
			return 0, err
		}
	}
	n, span, err := x.doomed(ctx)
	if err != nil || span == nil {
		x.dropKept(ctx) // no mutation reads them
		return 0, err   // nothing left to delete (or an error)
	}
	// From here on, a failure leaves the kept ids in lifecycle_keep: a
	// mutation made may still read them.
	if err := x.delete(ctx, span); err != nil {
		return 0, err
	}
	x.dropKept(ctx)
	s.forgetHours(org)
	return n, nil
}

// delete makes the mutations of the expiry (and counts the aggregates
// again) in the order of the top of this file, and waits for them.
func (x *expiry) delete(ctx context.Context, span *expirySpan) error {
	tag := "lifecycle " + x.run
	mut := x.data(true)
	o, k := x.org.String(), x.k.kind
	with := func(head ...any) []any { return append(append(head, x.expiring()...), tag) }

	// 1. event_index, through feed_index.
	if err := x.mutate(ctx, "delete_event_index", mut, with(o, k, o, k)...); err != nil {
		return err
	}
	if err := x.nodes.waitMutations(ctx, x.s.db, tag, 1); err != nil {
		return err
	}
	// 2. The aggregates.
	made := uint64(1)
	if x.k.hours != "" {
		if err := x.mutate(ctx, "delete_hours", mut, o, span.hourLo, span.hourHi, tag); err != nil {
			return err
		}
		made++
	}
	if x.k.stats {
		if err := x.mutate(ctx, "delete_stats", mut, o, span.hourLo, span.hourHi, span.dayLo, span.dayHi, tag); err != nil {
			return err
		}
		made++
	}
	if err := x.recount(ctx, span); err != nil {
		return err
	}
	// 3. feed_leaves, the entries, feed_index.
	for _, table := range []string{"feed_leaves", x.k.entries, "feed_index"} {
		var err error
		if table == x.k.entries {
			err = x.mutate(ctx, "delete_entries", mut, with(o)...)
		} else {
			d := mut
			d.Index = x.table(table)
			err = x.mutate(ctx, "delete_feed", d, with(o, k)...)
		}
		if err != nil {
			return err
		}
		made++
	}
	if expiryMutating != nil {
		expiryMutating()
	}
	return x.nodes.waitMutations(ctx, x.s.db, tag, made)
}

// keptAmong returns the ids of keep that the expiry's predicate matches
// in the entries' table (the ids travel as external data), sorted.
func (x *expiry) keptAmong(ctx context.Context, keep map[uuid.UUID]bool) ([]string, error) {
	tbl, err := ext.NewTable("lifecycle_keep_ids", ext.Column("event_id", "String"))
	if err != nil {
		return nil, fmt.Errorf("clickhouse expiry kept: %w", err)
	}
	for id, ok := range keep {
		if ok {
			if err := tbl.Append(id.String()); err != nil {
				return nil, fmt.Errorf("clickhouse expiry kept: %w", err)
			}
		}
	}
	query, err := lifecycleQuery("kept", lifecycleData{Table: x.k.entries, TS: x.k.ts}, 6)
	if err != nil {
		return nil, err
	}
	rows, err := x.s.conn.Query(ch.Context(ctx, ch.WithExternalTable(tbl)), query, append([]any{x.org.String()}, x.expiring()...)...)
	if err != nil {
		return nil, fmt.Errorf("clickhouse expiry kept: %w", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("clickhouse expiry kept: %w", err)
		}
		out = append(out, id)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("clickhouse expiry kept: %w", err)
	}
	slices.Sort(out)
	return out, nil
}

// writeKept writes the kept ids to lifecycle_keep under the run and, on a
// cluster, waits until every replica of the organization's shard holds
// them all: each replica evaluates the deletions' subquery on its own copy.
func (x *expiry) writeKept(ctx context.Context) error {
	o, k := x.org.String(), x.k.kind
	if err := x.s.insertRows(ctx, insertLifecycleKeepSQL, len(x.kept), func(i int) []any { return []any{o, k, x.run, x.kept[i]} }); err != nil {
		return err
	}
	x.inTable = true
	if x.s.cluster == "" {
		return nil
	}
	query, err := lifecycleQuery("keep_count", lifecycleData{KeepTable: x.table("lifecycle_keep")}, 3)
	if err != nil {
		return err
	}
	want := uint64(len(x.kept))
	return x.nodes.poll(ctx, "the kept ids of the expiry to reach every replica", func(ctx context.Context) (bool, string, error) {
		counts := map[uint32][]uint64{}
		for _, n := range x.nodes {
			var c uint64
			if err := n.conn.QueryRow(ctx, query, o, k, x.run).Scan(&c); err != nil {
				return false, "", fmt.Errorf("%s: %w", n.addr, err)
			}
			counts[n.shard] = append(counts[n.shard], c)
		}
		var total uint64
		for _, cs := range counts {
			if slices.Min(cs) != slices.Max(cs) {
				return false, fmt.Sprintf("replicas hold %v of %d", cs, want), nil
			}
			total += cs[0]
		}
		return total == want, fmt.Sprintf("%d of %d", total, want), nil
	})
}

// dropKept deletes the run's rows of lifecycle_keep once no mutation
// will read them (every one done, or none made), without waiting; rows
// left by a run that failed stay (a few ids, which no other run reads).
func (x *expiry) dropKept(ctx context.Context) {
	if !x.inTable {
		return
	}
	d := lifecycleData{KeepTable: x.table("lifecycle_keep")}
	_ = x.mutate(context.WithoutCancel(ctx), "delete_keep", d, x.org.String(), x.k.kind, x.run)
}

// expirySpan is the time range of the entries an expiry deletes, in whole
// hours and days (their starts, as intDiv computes them).
type expirySpan struct{ hourLo, hourHi, dayLo, dayHi int64 }

// doomed counts the entries the expiry deletes (distinct event ids of the
// entries' table) and returns the time range of those and of the rows
// left in feed_index; nil when there is nothing to delete.
func (x *expiry) doomed(ctx context.Context) (int64, *expirySpan, error) {
	d := x.data(false)
	var (
		n      int64
		lo, hi int64
		found  bool
	)
	for _, src := range []struct {
		name string
		args []any
	}{
		{"doomed_entries", append([]any{x.org.String()}, x.expiring()...)},
		{"doomed_index", append([]any{x.org.String(), x.k.kind}, x.expiring()...)},
	} {
		query, err := lifecycleQuery(src.name, d, len(src.args))
		if err != nil {
			return 0, nil, err
		}
		var (
			c        uint64
			from, to int64
		)
		if err := x.s.conn.QueryRow(groupBySpills(ctx), query, src.args...).Scan(&c, &from, &to); err != nil {
			return 0, nil, fmt.Errorf("clickhouse expiry count: %w", err)
		}
		if src.name == "doomed_entries" {
			n = int64(c)
		}
		if c == 0 {
			continue
		}
		if !found || from < lo {
			lo = from
		}
		if !found || to > hi {
			hi = to
		}
		found = true
	}
	if !found {
		return 0, nil, nil
	}
	return n, &expirySpan{hourLo: lo / hourMS * hourMS, hourHi: hi / hourMS * hourMS, dayLo: lo / dayMS * dayMS, dayHi: hi / dayMS * dayMS}, nil
}

// recount inserts the counts of the span's hours and days from the rows
// that stay.
func (x *expiry) recount(ctx context.Context, sp *expirySpan) error {
	d := x.data(false)
	o := x.org.String()
	if x.k.hours != "" {
		hours := append([]any{o, sat(sp.hourLo, -hourMS), sat(sp.hourHi, hourMS), sp.hourLo, sp.hourHi}, x.expiring()...)
		if err := x.insertSelect(ctx, "recount_execution_hours", d, hours); err != nil {
			return err
		}
	}
	if !x.k.stats {
		return nil
	}
	stats := append([]any{o, sat(sp.dayLo, -dayMS), sat(sp.dayHi, dayMS), sp.dayLo, sp.dayHi}, x.expiring()...)
	return x.insertSelect(ctx, "recount_audit_stats", d, append(stats, sp.hourLo, sp.hourHi, sp.dayLo, sp.dayHi))
}

// sat is a + b, saturated.
func sat(a, b int64) int64 {
	c := a + b
	if (b > 0 && c < a) || (b < 0 && c > a) {
		if b > 0 {
			return 1<<63 - 1
		}
		return -1 << 63
	}
	return c
}

// insertSelect runs an INSERT … SELECT (through the Distributed tables on
// a cluster, with the subquery of the kept ids read on each shard).
func (x *expiry) insertSelect(ctx context.Context, name string, d lifecycleData, args []any) error {
	query, err := lifecycleQuery(name, d, len(args))
	if err != nil {
		return err
	}
	if x.s.cluster != "" {
		query = localProduct(query)
	}
	if err := x.s.conn.Exec(ctx, query, args...); err != nil {
		return fmt.Errorf("clickhouse expiry %s: %w", name, err)
	}
	return nil
}

// mutate creates one mutation (lifecycle.sql's name): on the server, or
// on a replica of each shard of the cluster (the next one when a replica
// fails).
func (x *expiry) mutate(ctx context.Context, name string, d lifecycleData, args ...any) error {
	query, err := lifecycleQuery(name, d, len(args))
	if err != nil {
		return err
	}
	if err := x.s.mutateOn(ctx, x.nodes, query, args...); err != nil {
		return fmt.Errorf("clickhouse expiry %s: %w", name, err)
	}
	return nil
}

// mutateOn runs the statement of a mutation: on the server, or on a
// replica of each shard of the cluster of nodes (the next one when a
// replica fails).
func (s *Store) mutateOn(ctx context.Context, nodes servers, query string, args ...any) error {
	if s.cluster == "" {
		return s.conn.Exec(ctx, query, args...)
	}
	for _, replicas := range nodes.shards() {
		var errs []error
		for _, r := range replicas {
			err := r.conn.Exec(ctx, query, args...)
			if err == nil {
				errs = nil
				break
			}
			errs = append(errs, fmt.Errorf("%s: %w", r.addr, err))
			if ctx.Err() != nil {
				break
			}
		}
		if len(errs) > 0 {
			return errors.Join(errs...)
		}
	}
	return nil
}

// forgetHours drops the cached hourly counts of org.
func (s *Store) forgetHours(org uuid.UUID) {
	o := org.String()
	s.mu.Lock()
	defer s.mu.Unlock()
	for k := range s.hours {
		if k.org == o {
			delete(s.hours, k)
		}
	}
}

// server is a server of the store: on a cluster each node of
// system.clusters, connected to on its own.
type server struct {
	addr  string
	shard uint32
	conn  driver.Conn
	own   bool // opened here (closed by close)
}

type servers []server

// servers returns the store's server, or every node of its cluster.
func (s *Store) servers(ctx context.Context) (servers, error) {
	if s.cluster == "" {
		return servers{{addr: "the server", conn: s.conn}}, nil
	}
	rows, err := s.conn.Query(ctx, `SELECT shard_num, host_name, port FROM system.clusters WHERE cluster = ? ORDER BY shard_num, replica_num`, s.cluster)
	if err != nil {
		return nil, fmt.Errorf("clickhouse cluster servers: %w", err)
	}
	defer rows.Close()
	var out servers
	for rows.Next() {
		var (
			sv   server
			host string
			port uint16
		)
		if err := rows.Scan(&sv.shard, &host, &port); err != nil {
			out.close()
			return nil, fmt.Errorf("clickhouse cluster servers: %w", err)
		}
		sv.addr = net.JoinHostPort(host, strconv.Itoa(int(port)))
		o := *s.opts
		o.Addr = []string{sv.addr}
		o.MaxOpenConns, o.MaxIdleConns = 1, 1
		if sv.conn, err = ch.Open(&o); err != nil {
			out.close()
			return nil, fmt.Errorf("clickhouse cluster server %s: %w", sv.addr, err)
		}
		sv.own = true
		out = append(out, sv)
	}
	if err := rows.Err(); err != nil {
		out.close()
		return nil, fmt.Errorf("clickhouse cluster servers: %w", err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("clickhouse cluster %s: no servers in system.clusters", s.cluster)
	}
	return out, nil
}

// shards groups the servers by shard, in the order of system.clusters.
func (ss servers) shards() [][]server {
	var out [][]server
	at := map[uint32]int{}
	for _, s := range ss {
		i, ok := at[s.shard]
		if !ok {
			i = len(out)
			at[s.shard] = i
			out = append(out, nil)
		}
		out[i] = append(out[i], s)
	}
	return out
}

func (ss servers) close() {
	for _, s := range ss {
		if s.own {
			s.conn.Close()
		}
	}
}

// poll calls check until it answers true, with growing pauses, for at
// most ExpiryWait; what names what is waited for, and check's string the
// state it saw last. Errors of check are retried until then (a server may
// restart).
func (ss servers) poll(ctx context.Context, what string, check func(ctx context.Context) (bool, string, error)) error {
	deadline := time.Now().Add(ExpiryWait)
	pause := 20 * time.Millisecond
	for {
		ok, state, err := check(ctx)
		if err == nil && ok {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if time.Now().After(deadline) {
			if err != nil {
				return fmt.Errorf("clickhouse: waited %s for %s: %w", ExpiryWait, what, err)
			}
			return fmt.Errorf("clickhouse: waited %s for %s: %s", ExpiryWait, what, state)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(pause):
		}
		pause = min(pause*3/2, 500*time.Millisecond)
	}
}

// waitMutations waits until every server lists want mutations of the
// run's tag in db, all done.
func (ss servers) waitMutations(ctx context.Context, db, tag string, want uint64) error {
	query, err := lifecycleQuery("mutations", lifecycleData{}, 2)
	if err != nil {
		return err
	}
	return ss.poll(ctx, "the expiry's mutations", func(ctx context.Context) (bool, string, error) {
		for _, s := range ss {
			var n, done uint64
			if err := s.conn.QueryRow(ctx, query, db, tag).Scan(&n, &done); err != nil {
				return false, "", fmt.Errorf("%s: %w", s.addr, err)
			}
			if n < want || done < n {
				return false, fmt.Sprintf("%s lists %d of %d mutations, %d done", s.addr, n, want, done), nil
			}
		}
		return true, "", nil
	})
}

// SaveExpiry implements auditstore.LifecycleStore: a row of log_expiries
// (0014), which replaces the record's earlier saves (ver).
func (s *Store) SaveExpiry(ctx context.Context, org uuid.UUID, kind auditstore.LogKind, e auditstore.Expiry) error {
	if err := auditstore.ValidateExpiry(org, kind, e); err != nil {
		return err
	}
	size, _, err := s.LogHead(ctx, org, kind)
	if err != nil {
		return err
	}
	if size == 0 {
		return fmt.Errorf("%w: no log of kind %s for organization %s to expire", auditstore.ErrLogConflict, kind, org)
	}
	hs := make([]string, len(e.Holds))
	for i, h := range e.Holds {
		hs[i] = h.String()
	}
	holds, err := json.Marshal(hs)
	if err != nil {
		return err
	}
	var done uint8
	ver := uint64(s.now().UnixNano()) &^ (1 << 63)
	if e.Done {
		done, ver = 1, ver|1<<63
	}
	return s.insertRows(ctx, insertLogExpirySQL, 1, func(int) []any {
		return []any{org.String(), uint8(kind), e.RecordLeaf, e.Record.String(), e.BelowLeaf, e.Last.Seq, e.Last.CreatedMS, e.Last.EventID.String(),
			e.CutoffMS, e.Retention.Milliseconds(), e.Kept, e.Expired, string(holds), e.Time.UnixMilli(), done, ver}
	})
}

// LatestExpiry implements auditstore.LifecycleStore.
func (s *Store) LatestExpiry(ctx context.Context, org uuid.UUID, kind auditstore.LogKind) (auditstore.Expiry, bool, error) {
	if err := auditstore.ValidateLog(org, kind); err != nil {
		return auditstore.Expiry{}, false, err
	}
	rows, err := s.conn.Query(ctx, logExpiryLatestSQL, org.String(), uint8(kind))
	if err != nil {
		return auditstore.Expiry{}, false, fmt.Errorf("clickhouse latest expiry: %w", err)
	}
	defer rows.Close()
	if !rows.Next() {
		return auditstore.Expiry{}, false, rows.Err()
	}
	var (
		e                     auditstore.Expiry
		record, lastID, holds string
		lastSeq               uint64
		retentionMS, timeMS   int64
		done                  uint8
	)
	if err := rows.Scan(&e.RecordLeaf, &record, &e.BelowLeaf, &lastSeq, &e.Last.CreatedMS, &lastID, &e.CutoffMS, &retentionMS,
		&e.Kept, &e.Expired, &holds, &timeMS, &done); err != nil {
		return auditstore.Expiry{}, false, fmt.Errorf("clickhouse latest expiry: %w", err)
	}
	if e.Record, err = uuid.Parse(record); err != nil {
		return auditstore.Expiry{}, false, fmt.Errorf("clickhouse latest expiry: %w", err)
	}
	if e.Last.EventID, err = uuid.Parse(lastID); err != nil {
		return auditstore.Expiry{}, false, fmt.Errorf("clickhouse latest expiry: %w", err)
	}
	var hs []string
	if err := json.Unmarshal([]byte(holds), &hs); err != nil {
		return auditstore.Expiry{}, false, fmt.Errorf("clickhouse latest expiry holds: %w", err)
	}
	for _, h := range hs {
		id, err := uuid.Parse(h)
		if err != nil {
			return auditstore.Expiry{}, false, fmt.Errorf("clickhouse latest expiry holds: %w", err)
		}
		e.Holds = append(e.Holds, id)
	}
	e.Last.Seq = lastSeq
	e.Retention = time.Duration(retentionMS) * time.Millisecond
	e.Time = time.UnixMilli(timeMS).UTC()
	e.Done = done != 0
	return e, true, rows.Err()
}
