// Package auditstore is the storage of audit entries: one interface, a
// conformance suite (storetest) and two backends, clickhouse (at scale) and
// sqlite (embedded default).
package auditstore

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/google/uuid"

	"github.com/auditrail/auditrail/internal/auditstore/search"
	"github.com/auditrail/auditrail/schemas"
)

// ErrInvalidQuery is returned for a query that no backend can answer.
var ErrInvalidQuery = errors.New("invalid query")

// MaxLimit is the largest page a store returns: the API's pages are
// smaller (at most 100); exports read pages this large, so that a million
// rows cost a hundred store queries, not a thousand (each one's fixed cost
// bounded export throughput to about 30k rows/s on ClickHouse).
const MaxLimit = 10_000

// Store keeps audit entries. Implementations are safe for concurrent use.
type Store interface {
	// WriteAudit stores a batch of validated events. It returns nil only after
	// every event of the batch is durably stored. It is idempotent per
	// (organization_id, event_id): an event already stored, in this batch or
	// an earlier one, is stored once, and readers keep seeing the id and
	// created_time of its first write.
	WriteAudit(ctx context.Context, events []schemas.AuditEvent) error
	// ListAudit returns one page of an organization's entries, newest first,
	// ties broken by event_id descending.
	ListAudit(ctx context.Context, q Query) (Page, error)
	// Ping reports whether the store answers.
	Ping(ctx context.Context) error
	// Close releases the store.
	Close() error
}

// Insert is one write of a store that takes its rows in several blocks
// and makes them visible together, when it commits: a store that writes
// large inserts cheaply (ClickHouse makes one part of each table per
// insert, whatever its blocks) lets ingest send each batch as it arrives
// and keep none of it, however many batches the insert spans. Rows
// already stored, or written earlier in the same insert, are not written
// again, as WriteAudit's. Not safe for concurrent use.
type Insert[T any] interface {
	// Write sends a block. ErrInsertFull: nothing of it was written; the
	// insert takes no more blocks, and can still commit. Any other error
	// ends the insert (Abort it): some of its rows may be stored, and
	// writing them again stores them once.
	Write(ctx context.Context, events []T) error
	// Commit returns nil once every row written is durably stored.
	Commit(ctx context.Context) error
	// Rows is the number of rows written (copies left out).
	Rows() int
	// Abort ends an insert that will not commit. Rows already sent may
	// still be stored (ClickHouse 18.16 ends an INSERT whose client goes
	// away as if it had finished), so the caller writes them again, which
	// stores them once.
	Abort()
}

// Filter narrows a listing; nil fields do not filter.
type Filter struct {
	Action       *schemas.AuditAction
	Source       *schemas.AuditSource
	ResourceType *schemas.ResourceType
	Window
	// Search keeps the entries every term of a parsed q holds for (a
	// search.Audit query).
	Search search.Query
}

// Unfiltered reports whether f keeps every entry of its window: no
// action, source, resource type or search (a store may then place a page
// by its counts of entries alone).
func (f Filter) Unfiltered() bool {
	return f.Action == nil && f.Source == nil && f.ResourceType == nil && f.Search.Empty()
}

// Window bounds a listing in time: Since (inclusive) and Until
// (exclusive), on the listing's time (timestamp, started_at); nil: open.
type Window struct {
	Since, Until *time.Time
}

// validate checks that the window is not empty.
func (w Window) validate() error {
	if w.Since != nil && w.Until != nil && !w.Since.Before(*w.Until) {
		return fmt.Errorf("%w: since %s is not before until %s", ErrInvalidQuery, w.Since.Format(time.RFC3339Nano), w.Until.Format(time.RFC3339Nano))
	}
	return nil
}

// Bounds returns the window in stored milliseconds, [lo, hi), the open
// ends as math.MinInt64 and math.MaxInt64. A bound between two
// milliseconds rounds up: a stored time t is in the window exactly when
// since <= t < until.
func (w Window) Bounds() (lo, hi int64) {
	lo, hi = math.MinInt64, math.MaxInt64
	if w.Since != nil {
		lo = ceilMilli(*w.Since)
	}
	if w.Until != nil {
		hi = ceilMilli(*w.Until)
	}
	return lo, hi
}

func ceilMilli(t time.Time) int64 {
	ms := t.UnixMilli()
	if time.UnixMilli(ms).Before(t) {
		ms++
	}
	return ms
}

// Key is a position in the newest-first order of an organization's entries.
type Key struct {
	Timestamp time.Time
	EventID   uuid.UUID
}

// Query selects a page.
type Query struct {
	OrgID     uuid.UUID
	ProjectID *uuid.UUID
	Filter
	// After, when set, returns only entries strictly older than this key in
	// the listing order (keyset pagination).
	After *Key
	// Limit is the page size, 1..MaxLimit.
	Limit int
}

// Validate checks the query.
func (q Query) Validate() error {
	if q.OrgID == uuid.Nil {
		return fmt.Errorf("%w: organization id is required", ErrInvalidQuery)
	}
	if q.Limit < 1 || q.Limit > MaxLimit {
		return fmt.Errorf("%w: limit %d not in 1..%d", ErrInvalidQuery, q.Limit, MaxLimit)
	}
	return q.Window.validate()
}

// Page is one page of a listing.
type Page struct {
	Items []schemas.AuditEntry
	// HasMore is true when entries older than the last item exist.
	HasMore bool
}

// Next is the key after the last item of the page, or nil when there is none.
func (p Page) Next() *Key {
	if !p.HasMore || len(p.Items) == 0 {
		return nil
	}
	last := p.Items[len(p.Items)-1]
	return &Key{Timestamp: last.Timestamp, EventID: last.EventID}
}

// Millis truncates t to the stored precision (milliseconds, UTC).
func Millis(t time.Time) time.Time { return time.UnixMilli(t.UnixMilli()).UTC() }

// ExecutionStore keeps tool executions (execution/v1 events), with the
// same guarantees as Store: a batch is durable when WriteExecutions returns
// nil, an event_id is stored once per organization, listings are newest
// first (started_at, then event_id, descending) with keyset pagination.
type ExecutionStore interface {
	WriteExecutions(ctx context.Context, events []schemas.ExecutionEvent) error
	ListExecutions(ctx context.Context, q ExecQuery) (ExecPage, error)
}

// ExecQuery selects a page of executions.
type ExecQuery struct {
	OrgID     uuid.UUID
	ProjectID *uuid.UUID
	// Success, when set, keeps only successful (true) or failed executions.
	Success *bool
	// UserID, when set, keeps only the executions run for this end user.
	UserID *string
	// Window bounds started_at.
	Window
	// Search keeps the executions every term of a parsed q holds for (a
	// search.Executions query).
	Search search.Query
	After  *Key
	Limit  int
}

// Unfiltered reports whether q keeps every execution of its window (no
// success, user or search filter).
func (q ExecQuery) Unfiltered() bool {
	return q.Success == nil && q.UserID == nil && q.Search.Empty()
}

// Validate checks the query.
func (q ExecQuery) Validate() error {
	return Query{OrgID: q.OrgID, Limit: q.Limit, Filter: Filter{Window: q.Window}}.Validate()
}

// Execution is a stored execution.
type Execution struct {
	schemas.ExecutionEvent
	CreatedTime time.Time `json:"created_time"`
}

// ExecPage is one page of executions.
type ExecPage struct {
	Items   []Execution
	HasMore bool
}

// Next is the key after the last item of the page, or nil.
func (p ExecPage) Next() *Key {
	if !p.HasMore || len(p.Items) == 0 {
		return nil
	}
	last := p.Items[len(p.Items)-1]
	id, _ := uuid.Parse(last.EventID)
	return &Key{Timestamp: last.StartedAt, EventID: id}
}
