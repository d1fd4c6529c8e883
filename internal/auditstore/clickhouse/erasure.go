package clickhouse

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"text/template"

	ch "github.com/ClickHouse/clickhouse-go/v2"
	"github.com/google/uuid"

	"github.com/auditrail/auditrail/internal/auditstore"
)

// The erasure's storage (auditstore.ErasureStore). An erasure rewrites
// some columns of some entries (never their leaf: the log keeps the
// original one, and so do the leaf columns of the entries and of feed_index)
// and keeps each
// entry's erasure in entry_erasures (0015). ClickHouse rewrites rows with
// a mutation, ALTER TABLE … UPDATE, which 18.16 runs as it runs the
// deletions of lifecycle.go (read its top): in the background, on the
// parts that exist when it is created, waited for here in system.mutations
// on every server; on a cluster made on one replica of each shard.
//
// One call makes one mutation of the entries' table (more only when its
// values are over rewriteBudget): each rewritten column is assigned
// multiIf(event_id IN (…), value, …, column), the entries that set one
// value grouped in one IN (a pseudonym is usually the value of every
// entry), the rows chosen by the organization, the entries' times (which
// bound the mutation's reads by the sort key and the partitions) and
// their ids. An entry written twice is rewritten in both copies.
//
// What a rewrite costs on 18.16, measured here (18.16.1, one server;
// 120 000 entries of 100 organizations over 12 months, each table merged
// to one part per partition with OPTIMIZE FINAL; 67 entries of one
// organization over three months rewritten, their principal_id, user_id,
// display_name and data; the inodes of the parts' files compared before
// and after): unlike a deletion, an UPDATE rewrites, in a part that holds
// a matching row, only the files of the columns it assigns (and of
// data_within_limits, 0010, which 18.16 computes again from data); every
// other file of the part, and every part without a matching row, is
// hard-linked under the mutation's version. audit_logs: 3 of its 13 parts
// mutated, 0.21 of 16.4 MB written (1.3 %). With principal_id, the
// deletion of audit_stats rewrites its part whole (1.2 MB here; a
// rewrite of user_id, display_name and data alone leaves it untouched).
// The whole call took 0.44 s, 0.70 s with principal_id.
//
// The aggregates: execution_hours, event_index, feed_index
// and feed_leaves (read no more since 0018) hold no erasable column. audit_stats holds principal_id
// (kind 1) and resource_id (kind 2) in its sort key, where a mutation
// cannot assign: when a call rewrites either of them, the rows of those
// kinds for the days of the rewritten entries and for the values taken
// away or brought (the old values and the new ones) are deleted and
// counted again, from the entries of those days with their values as the
// rewrite makes them (the same multiIf expressions, applied by the SELECT).
// So the recount needs no wait for the rewrite, and the order of a call
// is:
//
//  1. entry_erasures: a row per entry (its erasure and original leaf);
//  2. audit_stats: the mutation deleting those rows, then the recount (an
//     entry of those days and values written between the two, a few
//     milliseconds, is counted twice);
//  3. the rewrite of the entries;
//  4. the wait for every mutation of the call, on every server.
//
// On a cluster, which entries are stored (and their principal and
// resource before the rewrite) is asked of every server's local tables,
// so that an entry that one replica has not fetched yet is rewritten all
// the same (the mutation reaches it there); the recount reads through the
// Distributed table, one replica of the shard, as the expiry's does. A
// mutation's text is kept in ZooKeeper there, so a cluster refuses a
// rewrite of one entry over clusterMutationMax.
//
// A call is not atomic as a transaction is: a crash after 1 leaves the
// entries' erasures told before their rewrite; the erasure is still
// pending then (lifecycle/erase.go marks it done after RewriteEntries
// returns), so the next cycle finds the entries with the subject's values
// again and does every step again (1 and 2 are repeatable). A mutation
// once created is applied even if the process that created it is gone.

var (
	//go:embed queries/erasure.sql
	erasureText string
	erasureSQL  = template.Must(template.New("erasure.sql").Parse(erasureText))
	//go:embed queries/insert_entry_erasure.sql
	insertEntryErasureSQL string
	//go:embed queries/entry_erasures.sql
	entryErasuresText string
	entryErasuresSQL  = template.Must(template.New("entry_erasures.sql").Parse(entryErasuresText))
)

var _ auditstore.ErasureStore = (*Store)(nil)

// rewriteBudget bounds the bytes of a rewrite mutation's statement (its
// values quoted): the server parses it with max_query_size, 256 KiB by
// default. An entry whose values alone are over it is rewritten by a
// mutation of its own, sent with a max_query_size that fits it; on a
// cluster that is bounded by what ZooKeeper takes in a node (the mutation's
// text is stored there: jute.maxbuffer, 1 MiB by default), clusterMutationMax.
var rewriteBudget = 192 << 10

const (
	defaultMaxQuerySize = 256 << 10
	clusterMutationMax  = 960 << 10
	// erasureIDsChunk: ids per lookup (stored, current, ErasedEntries).
	erasureIDsChunk = 1000
	// maxDataBytes: an audit entry's data at most (0010_row_limits.sql).
	maxDataBytes = 1 << 20
)

// erasureData is what the queries of erasure.sql render from.
type erasureData struct {
	Table, TS, EventIndex                                      string
	Entries, Stats                                             string
	IDs, Times, Set, Principal, Resource, Days, Ranges, Values string
}

func erasureQuery(name string, d erasureData, nargs int) (string, error) {
	return render(erasureSQL.Lookup(name), d, nargs)
}

// erasing is one entry to rewrite: the call's rewrites of it merged (a
// later one's values over an earlier one's), and its stored times.
type erasing struct {
	id      string
	set     map[string]*string
	erasure uuid.UUID
	leaf    [32]byte
	fields  []byte
	times   []int64
}

// sets tells whether the entry's rewrite assigns col.
func (e *erasing) sets(col string) bool {
	_, ok := e.set[col]
	return ok
}

// nullable columns take NULL for a nil value; the others "".
var nullableAudit = map[string]bool{"user_id": true, "client_ip": true, "resource_id": true, "resource_display": true, "data": true}

// RewriteEntries implements auditstore.ErasureStore (see the top of this
// file).
func (s *Store) RewriteEntries(ctx context.Context, org uuid.UUID, kind auditstore.LogKind, rewrites []auditstore.Rewrite) error {
	if err := auditstore.ValidateRewrites(org, kind, rewrites); err != nil {
		return err
	}
	if len(rewrites) == 0 {
		return nil
	}
	if kind == auditstore.LogAudit {
		// The row limit of 0010 applies to a rewritten data too: its
		// throwIf would fail the mutation, and a failed mutation stays
		// undone (and so does every later one of the table).
		for _, r := range rewrites {
			if v := r.Set["data"]; v != nil && len(*v) > maxDataBytes {
				return fmt.Errorf("%w: the data of %s would be %d bytes once rewritten, over %d", auditstore.ErrInvalidQuery, r.EventID, len(*v), maxDataBytes)
			}
		}
	}
	var es []*erasing
	byID := map[string]*erasing{}
	for _, r := range rewrites {
		id := r.EventID.String()
		e := byID[id]
		if e == nil {
			e = &erasing{id: id, set: map[string]*string{}}
			byID[id] = e
			es = append(es, e)
		}
		maps.Copy(e.set, r.Set)
		e.erasure, e.leaf, e.fields = r.Erasure, r.LeafHash, r.Fields
	}
	nodes, err := s.servers(ctx)
	if err != nil {
		return err
	}
	defer nodes.close()
	w := &rewrite{s: s, org: org, kind: kind, k: expiryKindOf(kind), nodes: nodes, tag: "erasure " + uuid.NewString()}
	if es, err = w.stored(ctx, es); err != nil || len(es) == 0 {
		return err
	}
	// 1. The erasures.
	o, kk := org.String(), uint8(kind)
	if err := s.insertRows(ctx, insertEntryErasureSQL, len(es), func(i int) []any {
		return []any{o, kk, es[i].id, es[i].erasure.String(), string(es[i].leaf[:]), string(es[i].fields)}
	}); err != nil {
		return fmt.Errorf("clickhouse erasure: %w", err)
	}
	// 2. The aggregates.
	made := uint64(0)
	if w.k.stats {
		n, err := w.stats(ctx, es)
		if err != nil {
			return err
		}
		made += n
	}
	// 3. The entries.
	var (
		chunk []*erasing
		size  int
	)
	for _, e := range es {
		if len(e.set) == 0 {
			continue
		}
		n := e.size()
		if len(chunk) > 0 && size+n > rewriteBudget {
			if err := w.rewrite(ctx, chunk); err != nil {
				return err
			}
			made++
			chunk, size = nil, 0
		}
		chunk, size = append(chunk, e), size+n
	}
	if len(chunk) > 0 {
		if err := w.rewrite(ctx, chunk); err != nil {
			return err
		}
		made++
	}
	// 4. The wait.
	if made == 0 {
		return nil
	}
	return nodes.waitMutations(ctx, s.db, w.tag, made)
}

// size is about how many bytes the entry adds to a rewrite's statement.
func (e *erasing) size() int {
	n := 64 + 24*len(e.times)
	for _, v := range e.set {
		n += 48 + 40
		if v != nil {
			n += quotedLen(*v)
		}
	}
	return n
}

// quotedLen is the length of v as a string literal of a query.
func quotedLen(v string) int {
	return len(v) + 2 + strings.Count(v, `\`) + strings.Count(v, `'`) + strings.Count(v, "\x00")
}

// rewrite is one call of RewriteEntries.
type rewrite struct {
	s     *Store
	org   uuid.UUID
	kind  auditstore.LogKind
	k     expiryKind
	nodes servers
	tag   string
}

// table is the qualified name of a table on the servers of w.nodes (the
// local one on a cluster).
func (w *rewrite) table(name string) string {
	if w.s.cluster != "" {
		name += "_local"
	}
	return "`" + w.s.db + "`.`" + name + "`"
}

// placeholders is "?, ?, …" (n of them).
func placeholders(n int) string {
	return strings.TrimSuffix(strings.Repeat("?, ", n), ", ")
}

// stored returns the entries of es that are stored, with their times: on
// a cluster, those that any replica holds (a replica may not have
// fetched an entry yet; the mutation will rewrite it there all the same).
func (w *rewrite) stored(ctx context.Context, es []*erasing) ([]*erasing, error) {
	times := map[string]map[int64]bool{}
	for lo := 0; lo < len(es); lo += erasureIDsChunk {
		chunk := es[lo:min(lo+erasureIDsChunk, len(es))]
		args := []any{w.org.String(), w.k.kind}
		for _, e := range chunk {
			args = append(args, e.id)
		}
		query, err := erasureQuery("stored", erasureData{EventIndex: w.table("event_index"), IDs: placeholders(len(chunk))}, len(args))
		if err != nil {
			return nil, err
		}
		for _, n := range w.nodes {
			rows, err := n.conn.Query(ctx, query, args...)
			if err != nil {
				return nil, fmt.Errorf("clickhouse erasure: the stored entries (%s): %w", n.addr, err)
			}
			for rows.Next() {
				var (
					id string
					ts []int64
				)
				if err := rows.Scan(&id, &ts); err != nil {
					rows.Close()
					return nil, fmt.Errorf("clickhouse erasure: the stored entries: %w", err)
				}
				if times[id] == nil {
					times[id] = map[int64]bool{}
				}
				for _, t := range ts {
					times[id][t] = true
				}
			}
			err = rows.Err()
			rows.Close()
			if err != nil {
				return nil, fmt.Errorf("clickhouse erasure: the stored entries: %w", err)
			}
		}
	}
	var out []*erasing
	for _, e := range es {
		if ts := times[e.id]; len(ts) > 0 {
			e.times = slices.Sorted(maps.Keys(ts))
			out = append(out, e)
		}
	}
	return out, nil
}

// idsAndTimes renders the ids and the times of es (deduplicated) and
// returns their arguments.
func idsAndTimes(es []*erasing) (ids, times string, idArgs, timeArgs []any) {
	seen := map[int64]bool{}
	for _, e := range es {
		idArgs = append(idArgs, e.id)
		for _, t := range e.times {
			if !seen[t] {
				seen[t] = true
				timeArgs = append(timeArgs, t)
			}
		}
	}
	return placeholders(len(idArgs)), placeholders(len(timeArgs)), idArgs, timeArgs
}

// assign renders col's expression once rewritten by those of es that set
// it: multiIf(event_id IN (…), value, …, col), the entries of one value
// in one IN; col itself when none does.
func (w *rewrite) assign(col string, es []*erasing) (string, []any) {
	type group struct {
		null  bool
		value string
		ids   []any
	}
	var groups []*group
	at := map[string]*group{}
	for _, e := range es {
		v, ok := e.set[col]
		if !ok {
			continue
		}
		g := &group{}
		switch {
		case v != nil:
			g.value = *v
		case w.kind == auditstore.LogAudit && nullableAudit[col]:
			g.null = true
		}
		key := fmt.Sprintf("%t|%s", g.null, g.value)
		if have := at[key]; have != nil {
			g = have
		} else {
			at[key] = g
			groups = append(groups, g)
		}
		g.ids = append(g.ids, e.id)
	}
	if len(groups) == 0 {
		return col, nil
	}
	var (
		b    strings.Builder
		args []any
	)
	b.WriteString("multiIf(")
	for _, g := range groups {
		b.WriteString("event_id IN (" + placeholders(len(g.ids)) + "), ")
		args = append(args, g.ids...)
		if g.null {
			b.WriteString("NULL, ")
		} else {
			b.WriteString("?, ")
			args = append(args, g.value)
		}
	}
	b.WriteString(col + ")")
	return b.String(), args
}

// rewrite makes the mutation rewriting es.
func (w *rewrite) rewrite(ctx context.Context, es []*erasing) error {
	cols := map[string]bool{}
	for _, e := range es {
		for c := range e.set {
			cols[c] = true
		}
	}
	var (
		sets []string
		args []any
	)
	for _, c := range slices.Sorted(maps.Keys(cols)) {
		expr, a := w.assign(c, es)
		sets = append(sets, c+" = "+expr)
		args = append(args, a...)
	}
	ids, times, idArgs, timeArgs := idsAndTimes(es)
	args = append(append(append(append(args, w.org.String()), timeArgs...), idArgs...), w.tag)
	d := erasureData{Entries: w.table(w.k.entries), TS: w.k.ts, Set: strings.Join(sets, ", "), IDs: ids, Times: times}
	query, err := erasureQuery("rewrite", d, len(args))
	if err != nil {
		return err
	}
	return w.mutate(ctx, "rewrite", query, args)
}

// stats deletes the rows of audit_stats that the rewrite of es changes and
// counts them again (see the top of this file); it returns the number of
// mutations made (0 when the rewrite assigns no principal_id or
// resource_id).
func (w *rewrite) stats(ctx context.Context, es []*erasing) (uint64, error) {
	var touched []*erasing
	for _, e := range es {
		if e.sets("principal_id") || e.sets("resource_id") {
			touched = append(touched, e)
		}
	}
	if len(touched) == 0 {
		return 0, nil
	}
	// The values taken away (as stored now, on any replica) and brought.
	principals, resources := map[string]bool{}, map[string]bool{}
	for lo := 0; lo < len(touched); lo += erasureIDsChunk {
		chunk := touched[lo:min(lo+erasureIDsChunk, len(touched))]
		byID := map[string]*erasing{}
		for _, e := range chunk {
			byID[e.id] = e
		}
		ids, times, idArgs, timeArgs := idsAndTimes(chunk)
		args := append(append([]any{w.org.String()}, timeArgs...), idArgs...)
		query, err := erasureQuery("current", erasureData{Table: w.table("audit_logs"), IDs: ids, Times: times}, len(args))
		if err != nil {
			return 0, err
		}
		for _, n := range w.nodes {
			rows, err := n.conn.Query(ctx, query, args...)
			if err != nil {
				return 0, fmt.Errorf("clickhouse erasure: the values rewritten (%s): %w", n.addr, err)
			}
			for rows.Next() {
				var id, principal, resource string
				if err := rows.Scan(&id, &principal, &resource); err != nil {
					rows.Close()
					return 0, fmt.Errorf("clickhouse erasure: the values rewritten: %w", err)
				}
				if e := byID[id]; e != nil {
					if e.sets("principal_id") {
						principals[principal] = true
					}
					if e.sets("resource_id") {
						resources[resource] = true
					}
				}
			}
			err = rows.Err()
			rows.Close()
			if err != nil {
				return 0, fmt.Errorf("clickhouse erasure: the values rewritten: %w", err)
			}
		}
	}
	days := map[int64]bool{}
	for _, e := range touched {
		for _, t := range e.times {
			days[t/dayMS*dayMS] = true
		}
		if v, ok := e.set["principal_id"]; ok {
			principals[deref(v)] = true
		}
		if v, ok := e.set["resource_id"]; ok {
			resources[deref(v)] = true
		}
	}

	// The pieces of the two statements.
	var (
		values    []string
		valueArgs []any
	)
	for _, kv := range []struct {
		kind int
		set  map[string]bool
	}{{1, principals}, {2, resources}} {
		if len(kv.set) == 0 {
			continue
		}
		values = append(values, fmt.Sprintf("(kind = %d AND value IN (%s))", kv.kind, placeholders(len(kv.set))))
		for _, v := range slices.Sorted(maps.Keys(kv.set)) {
			valueArgs = append(valueArgs, v)
		}
	}
	var (
		dayArgs, rangeArgs []any
		ranges             []string
	)
	sorted := slices.Sorted(maps.Keys(days))
	for i, d := range sorted {
		dayArgs = append(dayArgs, d)
		if i > 0 && sorted[i-1] == d-dayMS {
			rangeArgs[len(rangeArgs)-1] = d + dayMS
			continue
		}
		ranges = append(ranges, "(ts_ms >= ? AND ts_ms < ?)")
		rangeArgs = append(rangeArgs, d, d+dayMS)
	}
	principal, pArgs := w.assign("principal_id", touched)
	resource, rArgs := w.assign("resource_id", touched)
	d := erasureData{Stats: w.table("audit_stats"), Days: placeholders(len(dayArgs)), Values: strings.Join(values, " OR "),
		Ranges: strings.Join(ranges, " OR "), Principal: principal, Resource: resource}

	// The rows deleted, then counted again.
	args := append(append(append([]any{w.org.String()}, dayArgs...), valueArgs...), w.tag)
	query, err := erasureQuery("delete_stats", d, len(args))
	if err != nil {
		return 0, err
	}
	if err := w.mutate(ctx, "delete_stats", query, args); err != nil {
		return 0, err
	}
	args = append(append(append(append(append(append([]any{}, pArgs...), rArgs...), w.org.String()), rangeArgs...), dayArgs...), valueArgs...)
	if query, err = erasureQuery("recount_stats", d, len(args)); err != nil {
		return 0, err
	}
	if w.s.cluster != "" {
		query = localProduct(query)
	}
	qctx, _ := sized(ctx, query, args)
	if err := w.s.conn.Exec(qctx, query, args...); err != nil {
		return 0, fmt.Errorf("clickhouse erasure recount_stats: %w", err)
	}
	return 1, nil
}

func deref(v *string) string {
	if v == nil {
		return ""
	}
	return *v
}

// mutate creates a mutation, with a max_query_size that fits it.
func (w *rewrite) mutate(ctx context.Context, name, query string, args []any) error {
	qctx, n := sized(ctx, query, args)
	if w.s.cluster != "" && n > clusterMutationMax {
		return fmt.Errorf("%w: the erasure's %s is %d bytes, over the %d that a mutation of a cluster carries (its text is kept in ZooKeeper)",
			auditstore.ErrInvalidQuery, name, n, clusterMutationMax)
	}
	if err := w.s.mutateOn(qctx, w.nodes, query, args...); err != nil {
		return fmt.Errorf("clickhouse erasure %s: %w", name, err)
	}
	return nil
}

// sized returns ctx with a max_query_size that lets the server parse
// query with args bound when it is over the default one, and that size.
func sized(ctx context.Context, query string, args []any) (context.Context, int) {
	n := len(query)
	for _, a := range args {
		if v, ok := a.(string); ok {
			n += quotedLen(v)
		} else {
			n += 24
		}
	}
	if n <= defaultMaxQuerySize-(16<<10) {
		return ctx, n
	}
	return ch.Context(ctx, ch.WithSettings(ch.Settings{"max_query_size": n + 64<<10})), n
}

// ErasedEntries implements auditstore.ErasureStore: points of
// entry_erasures, FINAL.
func (s *Store) ErasedEntries(ctx context.Context, org uuid.UUID, kind auditstore.LogKind, ids []uuid.UUID) (map[uuid.UUID]auditstore.ErasedEntry, error) {
	if err := auditstore.ValidateLog(org, kind); err != nil {
		return nil, err
	}
	out := map[uuid.UUID]auditstore.ErasedEntry{}
	for lo := 0; lo < len(ids); lo += erasureIDsChunk {
		chunk := ids[lo:min(lo+erasureIDsChunk, len(ids))]
		args := []any{org.String(), uint8(kind)}
		for _, id := range chunk {
			args = append(args, id.String())
		}
		query, err := render(entryErasuresSQL, placeholders(len(chunk)), len(args))
		if err != nil {
			return nil, err
		}
		if err := s.erasedEntries(ctx, query, args, out); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (s *Store) erasedEntries(ctx context.Context, query string, args []any, out map[uuid.UUID]auditstore.ErasedEntry) error {
	rows, err := s.conn.Query(ctx, query, args...)
	if err != nil {
		return fmt.Errorf("clickhouse erased entries: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id, erasure, leaf, fields string
		if err := rows.Scan(&id, &erasure, &leaf, &fields); err != nil {
			return fmt.Errorf("clickhouse erased entries: %w", err)
		}
		eid, err1 := uuid.Parse(id)
		er, err2 := uuid.Parse(erasure)
		if err1 != nil || err2 != nil || len(leaf) != 32 {
			return fmt.Errorf("clickhouse erased entries: a malformed row of %s", id)
		}
		e := auditstore.ErasedEntry{Erasure: er}
		copy(e.LeafHash[:], leaf)
		if fields != "" {
			e.Fields = json.RawMessage(fields)
		}
		out[eid] = e
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("clickhouse erased entries: %w", err)
	}
	return nil
}
