package clickhouse

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"sort"
	"time"

	ch "github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/ext"

	"github.com/auditrail/auditrail/internal/auditstore"
)

var (
	//go:embed queries/stored_ids.sql
	storedIDsSQL string
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

// storedIDs answers which of the events (by key) are already stored, in
// one round trip whatever their number: the batch's keys travel as
// external data (a temporary table of the query), matched on the whole
// sort key of event_index.
func (s *Store) storedIDs(ctx context.Context, kind uint8, rows []indexed) (map[string]bool, error) {
	out := map[string]bool{}
	if len(rows) == 0 {
		return out, nil
	}
	tbl, err := ext.NewTable("batch_ids",
		ext.Column("organization_id", "String"), ext.Column("kind", "UInt8"), ext.Column("event_id", "String"))
	if err != nil {
		return nil, fmt.Errorf("clickhouse stored ids: %w", err)
	}
	for _, r := range rows {
		if err := tbl.Append(r.org, kind, r.id); err != nil {
			return nil, fmt.Errorf("clickhouse stored ids: %w", err)
		}
	}
	res, err := s.conn.Query(ch.Context(ctx, ch.WithExternalTable(tbl)), storedIDsSQL)
	if err != nil {
		return nil, fmt.Errorf("clickhouse stored ids: %w", busyOnly(err))
	}
	defer res.Close()
	for res.Next() {
		var r indexed
		if err := res.Scan(&r.org, &r.id); err != nil {
			return nil, fmt.Errorf("clickhouse stored ids: %w", err)
		}
		out[r.key()] = true
	}
	if err := res.Err(); err != nil {
		return nil, fmt.Errorf("clickhouse stored ids: %w", busyOnly(err))
	}
	return out, nil
}

// busyOnly classifies an error of the lookup or of the index: busy, or an
// outage — never a refusal of the rows (ErrRefused would make ingest split
// the batch and dead-letter valid events because of the index's own trouble).
func busyOnly(err error) error {
	if c := classify(err); errors.Is(c, auditstore.ErrBusy) {
		return c
	}
	return err
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
