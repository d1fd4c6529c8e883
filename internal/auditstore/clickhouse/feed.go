package clickhouse

import (
	"context"
	_ "embed"
	"fmt"
	"math"
	"text/template"
	"time"

	"github.com/google/uuid"

	"github.com/auditrail/auditrail/internal/auditstore"
	"github.com/auditrail/auditrail/internal/auditstore/search"
	"github.com/auditrail/auditrail/schemas"
)

var (
	//go:embed queries/feed_keys.sql
	feedKeysTemplate string
	//go:embed queries/feed_audit.sql
	feedAuditTemplate string
	//go:embed queries/feed_executions.sql
	feedExecutionsTemplate string

	feedKeysSQL       = template.Must(template.New("feed_keys.sql").Parse(feedKeysTemplate))
	feedAuditSQL      = feedTemplate("feed_audit.sql", feedAuditTemplate)
	feedExecutionsSQL = feedTemplate("feed_executions.sql", feedExecutionsTemplate)
)

func feedTemplate(name, text string) *template.Template {
	t := listTemplate(name, text)
	template.Must(t.New("feed_keys.sql").Parse(feedKeysTemplate))
	return t
}

// Feed kinds in feed_index.
const (
	feedKindAudit      = uint8(0)
	feedKindExecutions = uint8(1)
)

// Bounds of the keys a feed page reads: a chunk of the page's size first
// and, when filters leave the page short, four times more each round, up
// to feedMaxChunk keys a round and feedScanBudget keys a page. A page that
// reaches the budget ends short, with a cursor after the last key read: a
// poller of a rare filter moves through a long history a budget at a time
// instead of in one unbounded query.
const (
	feedMaxChunk   = 50_000
	feedScanBudget = 200_000
)

// feedData is what the feed queries render from.
type feedData struct {
	Columns                                     string
	Since                                       bool
	LeafFirst                                   bool
	Action, Source, ResourceType, Success, User bool
	Terms                                       []chTerm
}

// feedSpec is one feed query: its kind and scope, where it starts, its
// watermark and its filters (the arguments of feedData's predicates, in
// order).
type feedSpec struct {
	org       uuid.UUID
	kind      uint8
	project   *uuid.UUID
	since     *time.Time
	upto      uint64
	limit     int
	filtered  bool
	data      feedData
	filterArg []any
}

// keyArgs are the arguments of feed_keys.sql: the keys after the cursor
// after, up to sequence hi (at most the watermark).
func (f *feedSpec) keyArgs(after auditstore.FeedKey, hi uint64, chunk int) []any {
	scope := ""
	if f.project != nil {
		scope = f.project.String()
	}
	args := []any{f.org.String(), f.kind, scope, after.Seq, after.Seq, after.CreatedMS, after.CreatedMS, after.EventID.String(), hi}
	if f.since != nil {
		lo, _ := auditstore.Window{Since: f.since}.Bounds()
		args = append(args, lo)
	}
	return append(args, chunk)
}

// feedChunks reads a feed page: chunks of keys after q's cursor, the rows
// of each that the filters keep (read), until the page holds limit+1 rows,
// the keys up to the watermark are exhausted, or the scan budget is spent.
// It answers the rows (at most limit+1, in feed order), the position after
// the last key scanned and whether the keys were exhausted.
//
// Each round reads a window of sequences, (cursor, cursor+span], not
// everything up to the watermark: ClickHouse 18.16 does not stop reading
// at a LIMIT in key order (no read-in-order), so a page deep in a long feed
// would read every key after it. A window that holds a whole chunk is read
// again after its last key; one that holds fewer is exhausted and the next
// is eight times wider (an organization holds any share of the stream's
// sequences), so a page costs a few small range reads.
func feedChunks[T any](ctx context.Context, f *feedSpec, after auditstore.FeedKey, readChunk chunkReader[T]) ([]T, auditstore.FeedKey, bool, error) {
	need := f.limit + 1
	chunk := need
	if f.filtered {
		chunk = max(need, 1000)
	}
	span := uint64(chunk) * 16
	var items []T
	last := after
	for scanned, round := 0, 0; ; round++ {
		hi := f.upto
		if last.Seq < hi && hi-last.Seq > span {
			hi = last.Seq + span
		}
		rows, n, chunkLast, err := readChunk(ctx, last, hi, chunk)
		if err != nil {
			return nil, after, false, err
		}
		items = append(items, rows...)
		scanned += n
		exhausted := false
		switch {
		case n == chunk: // the window may hold more
			last = chunkLast
		case hi >= f.upto: // nothing more up to the watermark
			exhausted = true
			if last.Less(endOf(hi)) { // never back (a cursor past a watermark read elsewhere)
				last = endOf(hi)
			}
		default: // the window is done: the next one is wider
			last, span = endOf(hi), span*8
		}
		if len(items) >= need || exhausted || scanned >= feedScanBudget || round >= feedMaxRounds {
			if len(items) > need {
				items = items[:need]
			}
			return items, last, exhausted, nil
		}
		if n == chunk {
			chunk = min(chunk*4, feedMaxChunk, feedScanBudget-scanned)
		}
	}
}

// chunkReader reads the chunk of a feed after last up to sequence hi, at
// most chunk keys: the items kept, the number of keys scanned and the last
// key scanned (last when none).
type chunkReader[T any] func(ctx context.Context, last auditstore.FeedKey, hi uint64, chunk int) ([]T, int, auditstore.FeedKey, error)

// rowChunks reads the entries of each chunk of f that its filters keep
// (read runs the rendered query), by the keys first when filters may drop
// some.
func rowChunks[T any](s *Store, f *feedSpec, read func(ctx context.Context, query string, args []any) ([]T, error), key func(*T) auditstore.FeedKey) chunkReader[T] {
	return func(ctx context.Context, last auditstore.FeedKey, hi uint64, chunk int) ([]T, int, auditstore.FeedKey, error) {
		// The last key of the chunk: from the rows themselves when no filter
		// drops any, else from the keys.
		n, chunkLast := 0, last
		if f.filtered {
			keys, err := s.feedKeys(ctx, f, last, hi, chunk)
			if err != nil {
				return nil, 0, last, err
			}
			if n = len(keys); n == 0 {
				return nil, 0, last, nil
			}
			chunkLast = keys[n-1]
		}
		d := f.data
		d.Columns = "ts_ms, event_id" // started_ms for executions
		args := append([]any{f.org.String()}, f.keyArgs(last, hi, chunk)...)
		args = append(args, f.filterArg...)
		tmpl := feedAuditSQL
		if f.kind == feedKindExecutions {
			tmpl = feedExecutionsSQL
		}
		query, err := render(tmpl, d, len(args))
		if err != nil {
			return nil, 0, last, err
		}
		rows, err := read(ctx, query, args)
		if err != nil {
			return nil, 0, last, err
		}
		if !f.filtered {
			if n = len(rows); n > 0 {
				chunkLast = key(&rows[n-1])
			}
		}
		return rows, n, chunkLast, nil
	}
}

// feedMaxRounds bounds the windows of one page (a page that ends there
// carries its cursor on).
const feedMaxRounds = 24

// endOf is the position after every entry of sequence seq.
func endOf(seq uint64) auditstore.FeedKey {
	return auditstore.FeedKey{Seq: seq, CreatedMS: math.MaxInt64, EventID: uuid.Max}
}

// feedKeys reads the keys of the next chunk of f after the cursor.
func (s *Store) feedKeys(ctx context.Context, f *feedSpec, after auditstore.FeedKey, hi uint64, chunk int) ([]auditstore.FeedKey, error) {
	args := f.keyArgs(after, hi, chunk)
	query, err := render(feedKeysSQL, feedData{Columns: "seq, created_ms, event_id", Since: f.since != nil}, len(args))
	if err != nil {
		return nil, err
	}
	rows, err := s.conn.Query(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("clickhouse feed keys: %w", err)
	}
	defer rows.Close()
	var keys []auditstore.FeedKey
	for rows.Next() {
		var k auditstore.FeedKey
		var id string
		if err := rows.Scan(&k.Seq, &k.CreatedMS, &id); err != nil {
			return nil, fmt.Errorf("clickhouse feed keys: %w", err)
		}
		if k.EventID, err = uuid.Parse(id); err != nil {
			return nil, fmt.Errorf("clickhouse feed keys: stored event_id %q: %w", id, err)
		}
		keys = append(keys, k)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("clickhouse feed keys: %w", err)
	}
	return keys, nil
}

// FeedAudit returns a page of q's audit feed (see auditstore.FeedQuery).
func (s *Store) FeedAudit(ctx context.Context, q auditstore.FeedQuery) (auditstore.FeedPage, error) {
	if err := q.Validate(); err != nil {
		return auditstore.FeedPage{}, err
	}
	f := feedSpec{org: q.OrgID, kind: feedKindAudit, project: q.ProjectID, since: q.CreatedSince, upto: q.Upto, limit: q.Limit}
	f.data.Since = q.CreatedSince != nil
	if q.Action != nil {
		f.data.Action, f.filterArg = true, append(f.filterArg, uint8(*q.Action))
	}
	if q.Source != nil {
		f.data.Source, f.filterArg = true, append(f.filterArg, uint8(*q.Source))
	}
	if q.ResourceType != nil {
		f.data.ResourceType, f.filterArg = true, append(f.filterArg, uint8(*q.ResourceType))
	}
	f.setTerms(q.Search, "text")
	items, last, exhausted, err := feedChunks(ctx, &f, q.After, rowChunks(s, &f, func(ctx context.Context, query string, args []any) ([]schemas.AuditEntry, error) {
		rows, err := s.conn.Query(ctx, query, args...)
		if err != nil {
			return nil, fmt.Errorf("clickhouse feed: %w", err)
		}
		defer rows.Close()
		return auditstore.ReadFeed(rows)
	}, auditstore.AuditFeedKey))
	if err != nil {
		return auditstore.FeedPage{}, err
	}
	page := auditstore.FeedPage{Items: items, Next: last, HasMore: !exhausted}
	if len(items) > q.Limit {
		page.Items, page.HasMore = items[:q.Limit], true
		page.Next = auditstore.AuditFeedKey(&page.Items[q.Limit-1])
	}
	return page, nil
}

// FeedExecutions returns a page of q's execution feed.
func (s *Store) FeedExecutions(ctx context.Context, q auditstore.ExecFeedQuery) (auditstore.ExecFeedPage, error) {
	if err := q.Validate(); err != nil {
		return auditstore.ExecFeedPage{}, err
	}
	f := feedSpec{org: q.OrgID, kind: feedKindExecutions, project: q.ProjectID, since: q.CreatedSince, upto: q.Upto, limit: q.Limit}
	f.data.Since = q.CreatedSince != nil
	if q.Success != nil {
		var v uint8
		if *q.Success {
			v = 1
		}
		f.data.Success, f.filterArg = true, append(f.filterArg, v)
	}
	if q.UserID != nil {
		f.data.User, f.filterArg = true, append(f.filterArg, *q.UserID)
	}
	f.setTerms(q.Search, "exec_text")
	items, last, exhausted, err := feedChunks(ctx, &f, q.After, rowChunks(s, &f, func(ctx context.Context, query string, args []any) ([]auditstore.Execution, error) {
		rows, err := s.conn.Query(ctx, query, args...)
		if err != nil {
			return nil, fmt.Errorf("clickhouse execution feed: %w", err)
		}
		defer rows.Close()
		return auditstore.ReadExecFeed(rows)
	}, auditstore.ExecFeedKey))
	if err != nil {
		return auditstore.ExecFeedPage{}, err
	}
	page := auditstore.ExecFeedPage{Items: items, Next: last, HasMore: !exhausted}
	if len(items) > q.Limit {
		page.Items, page.HasMore = items[:q.Limit], true
		page.Next = auditstore.ExecFeedKey(&page.Items[q.Limit-1])
	}
	return page, nil
}

// setTerms adds the terms of a search to f's filters.
func (f *feedSpec) setTerms(q search.Query, text string) {
	var args []any
	f.data.Terms, args = searchTerms(q.Terms, text)
	f.filterArg = append(f.filterArg, args...)
	f.filtered = len(f.filterArg) > 0
}
