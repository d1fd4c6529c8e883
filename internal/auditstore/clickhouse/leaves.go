package clickhouse

import (
	"context"
	_ "embed"
	"fmt"

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
