package clickhouse

import (
	"context"
	_ "embed"
	"fmt"
	"sort"
	"time"

	ch "github.com/ClickHouse/clickhouse-go/v2"
)

var (
	//go:embed queries/stored_ids.sql
	storedIDsSQL string
	//go:embed queries/insert_index.sql
	insertIndexSQL string
)

// Kinds of event_index rows.
const (
	kindAudit     uint8 = 0
	kindExecution uint8 = 1
)

// indexed is what event_index needs of one event.
type indexed struct {
	org, id string
	ts      int64
}

// key is how storedIDs names an event: an event_id is unique within its
// organization (two organizations may hold the same one).
func (r indexed) key() string { return r.org + "/" + r.id }

// storedIDs answers which of the events (by key) are already stored.
func (s *Store) storedIDs(ctx context.Context, kind uint8, rows []indexed) (map[string]bool, error) {
	out := map[string]bool{}
	for len(rows) > 0 {
		n := min(len(rows), maxLookup)
		if err := s.lookup(ctx, kind, rows[:n], out); err != nil {
			return nil, err
		}
		rows = rows[n:]
	}
	return out, nil
}

// maxLookup bounds the ids of one lookup query, which stays far below the
// server's max_query_size (256 KiB by default): ~40 bytes an id.
const maxLookup = 2000

func (s *Store) lookup(ctx context.Context, kind uint8, rows []indexed, out map[string]bool) error {
	orgSet, ids := map[string]bool{}, make([]string, 0, len(rows))
	for _, r := range rows {
		orgSet[r.org] = true
		ids = append(ids, r.id)
	}
	orgs := make([]string, 0, len(orgSet))
	for o := range orgSet {
		orgs = append(orgs, o)
	}
	res, err := s.conn.Query(ctx, storedIDsSQL, groupSet(orgs), kind, groupSet(ids))
	if err != nil {
		return fmt.Errorf("clickhouse stored ids: %w", classify(err))
	}
	defer res.Close()
	for res.Next() {
		var r indexed
		if err := res.Scan(&r.org, &r.id); err != nil {
			return fmt.Errorf("clickhouse stored ids: %w", err)
		}
		out[r.key()] = true
	}
	if err := res.Err(); err != nil {
		return fmt.Errorf("clickhouse stored ids: %w", classify(err))
	}
	return nil
}

// groupSet binds strings as the tuple an IN takes: ('a', 'b').
func groupSet(v []string) ch.GroupSet {
	out := make([]any, len(v))
	for i, s := range v {
		out[i] = s
	}
	return ch.GroupSet{Value: out}
}

// index records the ids of rows just written.
func (s *Store) index(ctx context.Context, kind uint8, rows []indexed) error {
	if len(rows) == 0 {
		return nil
	}
	batch, err := s.conn.PrepareBatch(ctx, insertIndexSQL)
	if err != nil {
		return fmt.Errorf("clickhouse prepare index batch: %w", err)
	}
	defer batch.Abort()
	for _, r := range rows {
		if err := batch.Append(r.org, kind, r.id, r.ts); err != nil {
			return fmt.Errorf("clickhouse append index: %w", err)
		}
	}
	if err := batch.Send(); err != nil {
		return fmt.Errorf("clickhouse index %d ids: %w", len(rows), classify(err))
	}
	return nil
}

// maxPartitionsPerInsert is how many monthly partitions one insert may
// touch: current releases refuse more than max_partitions_per_insert_block
// (100 by default) with code 252, which is no overload but the batch's shape.
const maxPartitionsPerInsert = 100

// byPartition splits the indices 0..n-1 into groups whose times (Unix ms)
// fall in at most maxParts monthly partitions each (toYYYYMM, UTC), in the
// order of the months; one group when they already do.
func byPartition(n int, ts func(i int) int64, maxParts int) [][]int {
	months := map[int][]int{}
	for i := 0; i < n; i++ {
		t := time.UnixMilli(ts(i)).UTC()
		m := t.Year()*100 + int(t.Month())
		months[m] = append(months[m], i)
	}
	if len(months) <= maxParts {
		all := make([]int, n)
		for i := range all {
			all[i] = i
		}
		return [][]int{all}
	}
	keys := make([]int, 0, len(months))
	for m := range months {
		keys = append(keys, m)
	}
	sort.Ints(keys)
	var out [][]int
	for len(keys) > 0 {
		k := min(maxParts, len(keys))
		var g []int
		for _, m := range keys[:k] {
			g = append(g, months[m]...)
		}
		out = append(out, g)
		keys = keys[k:]
	}
	return out
}
