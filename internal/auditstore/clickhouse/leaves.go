package clickhouse

import (
	"context"
	_ "embed"
	"fmt"

	"github.com/google/uuid"

	"github.com/auditrail/auditrail/internal/auditstore"
)

//go:embed queries/feed_leaves.sql
var feedLeavesSQL string

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

// FeedLeaves implements auditstore.LeafFeed: the feed's keys (feed_index,
// as FeedAudit and FeedExecutions read them) with the leaves stored for
// them (feed_leaves), two range reads of keys and hashes a chunk.
func (s *Store) FeedLeaves(ctx context.Context, q auditstore.LeafFeedQuery) (auditstore.LeafPage, error) {
	if err := q.Validate(); err != nil {
		return auditstore.LeafPage{}, err
	}
	f := feedSpec{org: q.OrgID, kind: feedKindAudit, upto: q.Upto, limit: q.Limit}
	if q.Kind == auditstore.LogExecutions {
		f.kind = feedKindExecutions
	}
	items, last, exhausted, err := feedChunks(ctx, &f, q.After, func(ctx context.Context, last auditstore.FeedKey, hi uint64, chunk int) ([]auditstore.FeedLeaf, int, auditstore.FeedKey, error) {
		keys, err := s.feedKeys(ctx, &f, last, hi, chunk)
		if err != nil || len(keys) == 0 {
			return nil, 0, last, err
		}
		stored, err := s.storedLeaves(ctx, q.OrgID, f.kind, keys[0].Seq, keys[len(keys)-1].Seq)
		if err != nil {
			return nil, 0, last, err
		}
		out := make([]auditstore.FeedLeaf, len(keys))
		for i, k := range keys {
			l, ok := stored[k]
			out[i] = auditstore.FeedLeaf{Key: k, Leaf: l, Known: ok}
		}
		return out, len(keys), keys[len(keys)-1], nil
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

// storedLeaves reads the leaves stored for the feed positions of org's
// kind with sequences lo..hi.
func (s *Store) storedLeaves(ctx context.Context, org uuid.UUID, kind uint8, lo, hi uint64) (map[auditstore.FeedKey][32]byte, error) {
	rows, err := s.conn.Query(ctx, feedLeavesSQL, org.String(), kind, lo, hi)
	if err != nil {
		return nil, fmt.Errorf("clickhouse feed leaves: %w", err)
	}
	defer rows.Close()
	out := map[auditstore.FeedKey][32]byte{}
	for rows.Next() {
		var k auditstore.FeedKey
		var id, leaf string
		if err := rows.Scan(&k.Seq, &k.CreatedMS, &id, &leaf); err != nil {
			return nil, fmt.Errorf("clickhouse feed leaves: %w", err)
		}
		if k.EventID, err = uuid.Parse(id); err != nil || len(leaf) != 32 {
			continue // not a leaf this store wrote: the entry is read instead
		}
		out[k] = [32]byte([]byte(leaf))
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("clickhouse feed leaves: %w", err)
	}
	return out, nil
}
