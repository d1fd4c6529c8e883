package auditstore

import (
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/auditrail/auditrail/internal/auditstore/search"
	"github.com/auditrail/auditrail/schemas"
)

// The feed lists an organization's entries in the order they were
// persisted, oldest first, for pollers that must see every entry once
// whatever its timestamp. The order is the event stream's sequence
// (schemas.Persisted.Seq, stored by ingest in the seq column), then
// created_ms and event_id: entries stored before feeds existed, or written
// by other means than ingest, have seq 0 and come first, in the order they
// were stored.
//
// A stream sequence is visible only once every smaller one is committed
// (FeedQuery.Upto, the watermark): batches committed out of order by
// concurrent writers cannot let a reader pass a gap that a slower batch
// fills later.

// FeedMaxLimit is the largest feed page.
const FeedMaxLimit = 1000

// FeedKey is a position in a feed: the entries after it follow.
type FeedKey struct {
	Seq       uint64
	CreatedMS int64
	EventID   uuid.UUID
}

// Less orders keys as the feed does.
func (k FeedKey) Less(o FeedKey) bool {
	if k.Seq != o.Seq {
		return k.Seq < o.Seq
	}
	if k.CreatedMS != o.CreatedMS {
		return k.CreatedMS < o.CreatedMS
	}
	return string(k.EventID[:]) < string(o.EventID[:])
}

// FeedQuery selects a page of an organization's audit feed.
type FeedQuery struct {
	OrgID     uuid.UUID
	ProjectID *uuid.UUID
	// Action, Source and ResourceType filter as in Query; Search holds a
	// parsed q (search.Audit). Window must be empty: the feed's time bound
	// is CreatedSince.
	Filter
	// CreatedSince keeps the entries persisted at or after it (created_time).
	CreatedSince *time.Time
	// After is the position after which the page starts (zero: the start).
	After FeedKey
	// Upto is the watermark: every entry with a sequence up to it is
	// committed; none above it is returned.
	Upto uint64
	// Limit is the page size, 1..FeedMaxLimit.
	Limit int
}

// Validate checks the query.
func (q FeedQuery) Validate() error {
	return validateFeed(q.OrgID, q.Limit, q.Window)
}

func validateFeed(org uuid.UUID, limit int, w Window) error {
	if org == uuid.Nil {
		return fmt.Errorf("%w: organization id is required", ErrInvalidQuery)
	}
	if limit < 1 || limit > FeedMaxLimit {
		return fmt.Errorf("%w: feed limit %d not in 1..%d", ErrInvalidQuery, limit, FeedMaxLimit)
	}
	if w.Since != nil || w.Until != nil {
		return fmt.Errorf("%w: a feed is bounded by created time, not by timestamp", ErrInvalidQuery)
	}
	return nil
}

// FeedPage is one page of an audit feed. Next is where the following page
// starts: after the last item, or further when the store skipped entries
// that the filters leave out; it equals the query's After when nothing was
// read. HasMore: entries up to the watermark may follow.
type FeedPage struct {
	Items   []schemas.AuditEntry
	Next    FeedKey
	HasMore bool
}

// ExecFeedQuery selects a page of an organization's execution feed.
type ExecFeedQuery struct {
	OrgID     uuid.UUID
	ProjectID *uuid.UUID
	// Success, UserID and Search filter as in ExecQuery.
	Success      *bool
	UserID       *string
	Search       search.Query
	CreatedSince *time.Time
	After        FeedKey
	Upto         uint64
	Limit        int
}

// Validate checks the query.
func (q ExecFeedQuery) Validate() error { return validateFeed(q.OrgID, q.Limit, Window{}) }

// ExecFeedPage is one page of an execution feed (see FeedPage).
type ExecFeedPage struct {
	Items   []Execution
	Next    FeedKey
	HasMore bool
}

// AuditFeedKey is the feed position of a stored entry.
func AuditFeedKey(e *schemas.AuditEntry) FeedKey {
	return FeedKey{Seq: e.Stored.Seq, CreatedMS: e.CreatedTime.UnixMilli(), EventID: e.EventID}
}

// ExecFeedKey is the feed position of a stored execution.
func ExecFeedKey(e *Execution) FeedKey {
	id, _ := uuid.Parse(e.EventID)
	return FeedKey{Seq: e.Stored.Seq, CreatedMS: e.CreatedTime.UnixMilli(), EventID: id}
}

// CreatedMS is the created_ms a store writes for an event persisted at p:
// the stream's time when known, else now.
func CreatedMS(p schemas.Persisted, now time.Time) int64 {
	if p.Time.IsZero() {
		return now.UnixMilli()
	}
	return p.Time.UnixMilli()
}
