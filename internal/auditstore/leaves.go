package auditstore

import (
	"context"
	"fmt"

	"github.com/google/uuid"

	"github.com/auditrail/auditrail/schemas"
)

// Leaves computes the leaf hash of an entry as the list routes serve it
// (the query component renders entries; a store cannot import it). A store
// given one (ClickHouse: Options.Leaves) stores each entry's leaf beside
// the entry as it writes it, computed from the row exactly as it is
// stored, so that the sequencer appends leaves without reading the entries
// back (FeedLeaves).
type Leaves interface {
	AuditLeaf(e *schemas.AuditEntry) ([32]byte, error)
	ExecutionLeaf(e *Execution) ([32]byte, error)
}

// FeedLeaf is one position of a feed and the leaf stored beside its entry;
// Known is false for an entry stored without one (by a writer without
// Leaves, or before the store kept them): the reader computes it from the
// entry.
type FeedLeaf struct {
	Key   FeedKey
	Leaf  [32]byte
	Known bool
}

// LeafPage is a page of FeedLeaves, as a feed page: Next is where the
// next page starts, HasMore whether entries may follow up to the watermark.
type LeafPage struct {
	Items   []FeedLeaf
	Next    FeedKey
	HasMore bool
}

// LeafFeedMaxLimit is the largest page of FeedLeaves (positions and
// hashes only: ten feed pages).
const LeafFeedMaxLimit = 10 * FeedMaxLimit

// LeafFeedQuery selects a page of the positions and stored leaves of an
// organization's feed of kind: the entries after After whose stream
// sequence is at most Upto, at most Limit (1..LeafFeedMaxLimit), in feed order,
// one per event id (the copy the feed serves).
type LeafFeedQuery struct {
	OrgID uuid.UUID
	Kind  LogKind
	After FeedKey
	Upto  uint64
	Limit int
}

// Validate checks q.
func (q LeafFeedQuery) Validate() error {
	switch {
	case q.OrgID == uuid.Nil:
		return fmt.Errorf("%w: organization id is required", ErrInvalidQuery)
	case !q.Kind.Valid():
		return fmt.Errorf("%w: log kind %d", ErrInvalidQuery, q.Kind)
	case q.Limit < 1 || q.Limit > LeafFeedMaxLimit:
		return fmt.Errorf("%w: leaf feed limit %d not in 1..%d", ErrInvalidQuery, q.Limit, LeafFeedMaxLimit)
	}
	return nil
}

// LeafFeed is a store that keeps each entry's leaf beside it.
type LeafFeed interface {
	FeedLeaves(ctx context.Context, q LeafFeedQuery) (LeafPage, error)
}

// LeafFeedHolder is a store that wraps another (backend.Pending): its
// LeafFeed is the wrapped store's, when that store is one.
type LeafFeedHolder interface {
	LeafFeed() (LeafFeed, bool)
}

// LeafFeedOf returns s's leaf feed: s itself, or the one it holds.
func LeafFeedOf(s any) (LeafFeed, bool) {
	if lf, ok := s.(LeafFeed); ok {
		return lf, true
	}
	if h, ok := s.(LeafFeedHolder); ok {
		return h.LeafFeed()
	}
	return nil, false
}

// LeafFeeds is a LeafFeed that reads the next leaves of several logs in
// one read: a sequencer's round over many organizations costs the store
// one range read rather than one per organization (ClickHouse reads whole
// granules, so each of those read nearly the same rows).
type LeafFeeds interface {
	LeafFeed
	// FeedLeavesOf answers each query's page, the page FeedLeaves answers
	// (every query of one kind and one Upto, each organization once), from
	// one read. ok is false, with no page and nothing read, when the stream
	// sequences from the smallest cursor to Upto are more than
	// LeafFeedsWindow: read each page alone then.
	FeedLeavesOf(ctx context.Context, qs []LeafFeedQuery) (pages []LeafPage, ok bool, err error)
}

// LeafFeedsWindow bounds the stream sequences FeedLeavesOf reads at once
// (an organization's backlog is read page by page instead).
const LeafFeedsWindow = 50_000

// ValidateLeafFeeds checks the queries of a FeedLeavesOf: each valid, one
// kind and one Upto, each organization once.
func ValidateLeafFeeds(qs []LeafFeedQuery) error {
	seen := make(map[uuid.UUID]bool, len(qs))
	for i, q := range qs {
		if err := q.Validate(); err != nil {
			return err
		}
		if i > 0 && (q.Kind != qs[0].Kind || q.Upto != qs[0].Upto) {
			return fmt.Errorf("%w: leaf feeds of several kinds or watermarks", ErrInvalidQuery)
		}
		if seen[q.OrgID] {
			return fmt.Errorf("%w: leaf feed of %s twice", ErrInvalidQuery, q.OrgID)
		}
		seen[q.OrgID] = true
	}
	return nil
}

// LogHeadsReader reads the heads of several logs of one kind in one read
// (LogStore.LogHead's of each); an organization whose log is empty is
// absent, and a log's size is its head's Index + 1.
type LogHeadsReader interface {
	LogHeadsOf(ctx context.Context, kind LogKind, orgs []uuid.UUID) (map[uuid.UUID]LogLeaf, error)
}
