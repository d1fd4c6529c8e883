package clickhouse

import (
	"context"
	_ "embed"
	"fmt"

	ch "github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/ext"
	"github.com/google/uuid"

	"github.com/auditrail/auditrail/internal/auditstore"
)

// auditLeaf is the leaf of the audit row r as inserted (” without Leaves,
// or for an entry whose leaf cannot be computed: the sequencer then reads
// the entry, and says why).
func (s *Store) auditLeaf(r *auditstore.StoredRow) (string, error) {
	if s.leaves == nil {
		return "", nil
	}
	e, err := r.Entry()
	if err != nil {
		return "", err
	}
	h, err := s.leaves.AuditLeaf(&e)
	if err != nil {
		return "", nil
	}
	return string(h[:]), nil
}

// executionLeaf is the leaf of the execution row r as inserted (as
// auditLeaf).
func (s *Store) executionLeaf(r *auditstore.ExecRow) (string, error) {
	if s.leaves == nil {
		return "", nil
	}
	e, err := r.Execution()
	if err != nil {
		return "", err
	}
	h, err := s.leaves.ExecutionLeaf(&e)
	if err != nil {
		return "", nil
	}
	return string(h[:]), nil
}

// FeedLeaves implements auditstore.LeafFeed: the feed's keys with the
// leaves stored beside them (feed_index: one range read a chunk). An entry
// indexed before the index kept leaves (0018) has none there: the
// sequencer computes it from the entry.
func (s *Store) FeedLeaves(ctx context.Context, q auditstore.LeafFeedQuery) (auditstore.LeafPage, error) {
	if err := q.Validate(); err != nil {
		return auditstore.LeafPage{}, err
	}
	f := feedSpec{org: q.OrgID, kind: feedKindAudit, upto: q.Upto, limit: q.Limit}
	if q.Kind == auditstore.LogExecutions {
		f.kind = feedKindExecutions
	}
	items, last, exhausted, err := feedChunks(ctx, &f, q.After, func(ctx context.Context, last auditstore.FeedKey, hi uint64, chunk int) ([]auditstore.FeedLeaf, int, auditstore.FeedKey, error) {
		leaves, err := s.feedKeyLeaves(ctx, &f, last, hi, chunk)
		if err != nil || len(leaves) == 0 {
			return nil, 0, last, err
		}
		return leaves, len(leaves), leaves[len(leaves)-1].Key, nil
	})
	if err != nil {
		return auditstore.LeafPage{}, err
	}
	page := auditstore.LeafPage{Items: items, Next: last, HasMore: !exhausted}
	if len(items) > q.Limit {
		page.Items, page.HasMore = items[:q.Limit], true
		page.Next = items[q.Limit-1].Key
	}
	return page, nil
}

// feedKeyLeaves reads the keys of a chunk of the feed (as feedKeys) with
// their leaves.
func (s *Store) feedKeyLeaves(ctx context.Context, f *feedSpec, after auditstore.FeedKey, hi uint64, chunk int) ([]auditstore.FeedLeaf, error) {
	args := f.keyArgs(after, hi, chunk)
	query, err := render(feedKeysSQL, feedData{Columns: "seq, created_ms, event_id, leaf", LeafFirst: true}, len(args))
	if err != nil {
		return nil, err
	}
	rows, err := s.conn.Query(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("clickhouse feed leaves: %w", err)
	}
	defer rows.Close()
	var out []auditstore.FeedLeaf
	for rows.Next() {
		var l auditstore.FeedLeaf
		var id, leaf string
		if err := rows.Scan(&l.Key.Seq, &l.Key.CreatedMS, &id, &leaf); err != nil {
			return nil, fmt.Errorf("clickhouse feed leaves: %w", err)
		}
		if l.Key.EventID, err = uuid.Parse(id); err != nil {
			return nil, fmt.Errorf("clickhouse feed leaves: stored event_id %q: %w", id, err)
		}
		if len(leaf) == 32 { // else not a leaf this store wrote: the entry is read instead
			l.Leaf, l.Known = [32]byte([]byte(leaf)), true
		}
		out = append(out, l)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("clickhouse feed leaves: %w", err)
	}
	return out, nil
}

//go:embed queries/feed_leaves_of.sql
var feedLeavesOfSQL string

var _ auditstore.LeafFeeds = (*Store)(nil)

// FeedLeavesOf implements auditstore.LeafFeeds: the window of stream
// sequences from the smallest cursor to the watermark, read once for
// every organization (feed_leaves_of.sql), each organization's page the
// entries after its cursor, at most its limit.
func (s *Store) FeedLeavesOf(ctx context.Context, qs []auditstore.LeafFeedQuery) ([]auditstore.LeafPage, bool, error) {
	if err := auditstore.ValidateLeafFeeds(qs); err != nil {
		return nil, false, err
	}
	if len(qs) == 0 {
		return nil, true, nil
	}
	upto, lo := qs[0].Upto, qs[0].After.Seq
	for _, q := range qs {
		lo = min(lo, q.After.Seq)
	}
	if lo >= upto {
		pages := make([]auditstore.LeafPage, len(qs))
		for i, q := range qs {
			pages[i] = auditstore.LeafPage{Next: q.After}
		}
		return pages, true, nil
	}
	if upto-lo > auditstore.LeafFeedsWindow {
		return nil, false, nil
	}
	kind := feedKindAudit
	if qs[0].Kind == auditstore.LogExecutions {
		kind = feedKindExecutions
	}
	tbl, err := ext.NewTable("orgs", ext.Column("organization_id", "String"))
	if err != nil {
		return nil, false, fmt.Errorf("clickhouse feed leaves: %w", err)
	}
	at := make(map[uuid.UUID]int, len(qs))
	for i, q := range qs {
		if err := tbl.Append(q.OrgID.String()); err != nil {
			return nil, false, fmt.Errorf("clickhouse feed leaves: %w", err)
		}
		at[q.OrgID] = i
	}
	// Every entry of the window and its copies: a bound that a window of
	// at most LeafFeedsWindow sequences (each one event, of one
	// organization) stays under but for a store full of copies; reached,
	// the pages are read alone.
	const most = 4 * auditstore.LeafFeedsWindow
	rows, err := s.conn.Query(ch.Context(ctx, ch.WithExternalTable(tbl)), feedLeavesOfSQL, kind, lo, upto, most)
	if err != nil {
		return nil, false, fmt.Errorf("clickhouse feed leaves: %w", err)
	}
	defer rows.Close()
	pages := make([]auditstore.LeafPage, len(qs))
	seen := make([]map[uuid.UUID]bool, len(qs))
	n := 0
	for rows.Next() {
		n++
		var l auditstore.FeedLeaf
		var org, id, leaf string
		if err := rows.Scan(&org, &l.Key.Seq, &l.Key.CreatedMS, &id, &leaf); err != nil {
			return nil, false, fmt.Errorf("clickhouse feed leaves: %w", err)
		}
		o, err := uuid.Parse(org)
		if err != nil {
			return nil, false, fmt.Errorf("clickhouse feed leaves: stored organization_id %q: %w", org, err)
		}
		i, ok := at[o]
		if !ok {
			continue
		}
		if l.Key.EventID, err = uuid.Parse(id); err != nil {
			return nil, false, fmt.Errorf("clickhouse feed leaves: stored event_id %q: %w", id, err)
		}
		q, p := qs[i], &pages[i]
		if !q.After.Less(l.Key) || p.HasMore || seen[i][l.Key.EventID] {
			continue // at or before its cursor, past its limit, or a copy
		}
		if seen[i] == nil {
			seen[i] = map[uuid.UUID]bool{}
		}
		seen[i][l.Key.EventID] = true
		if len(p.Items) == q.Limit {
			p.HasMore, p.Next = true, p.Items[len(p.Items)-1].Key
			continue
		}
		if len(leaf) == 32 { // else not a leaf this store wrote: the entry is read instead
			l.Leaf, l.Known = [32]byte([]byte(leaf)), true
		}
		p.Items = append(p.Items, l)
	}
	if err := rows.Err(); err != nil {
		return nil, false, fmt.Errorf("clickhouse feed leaves: %w", err)
	}
	if n >= most {
		return nil, false, nil
	}
	for i := range pages {
		if !pages[i].HasMore {
			// Every key up to the watermark is read (never back: a cursor
			// past it stays).
			pages[i].Next = qs[i].After
			if end := endOf(upto); qs[i].After.Less(end) {
				pages[i].Next = end
			}
		}
	}
	return pages, true, nil
}
