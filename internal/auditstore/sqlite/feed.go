package sqlite

import (
	"context"
	"database/sql"
	_ "embed"
	"fmt"
	"math"
	"text/template"
	"time"

	"github.com/auditrail/auditrail/internal/auditstore"
)

var (
	//go:embed queries/feed_audit.sql
	feedAuditTemplate string
	//go:embed queries/feed_executions.sql
	feedExecutionsTemplate string

	//go:embed queries/feed.sql
	feedWhereTemplate string

	feedAuditSQL      = feedTemplate("feed_audit.sql", feedAuditTemplate)
	feedExecutionsSQL = feedTemplate("feed_executions.sql", feedExecutionsTemplate)
)

// feedTemplate parses a feed query with the search conditions and the
// feed's common conditions (feed.sql).
func feedTemplate(name, text string) *template.Template {
	t := listTemplate(name, text)
	template.Must(t.New("feed.sql").Parse(feedWhereTemplate))
	return t
}

// feedArgs are the arguments every feed query takes: the cursor, the
// watermark and created_since. SQLite integers are signed: a watermark
// above MaxInt64 (never a real stream sequence) reads as MaxInt64.
func feedArgs(after auditstore.FeedKey, upto uint64, since *time.Time, limit int) []any {
	var createdSince any
	if since != nil {
		lo, _ := auditstore.Window{Since: since}.Bounds()
		createdSince = lo
	}
	return []any{
		sql.Named("after_seq", int64(min(after.Seq, math.MaxInt64))),
		sql.Named("after_created", after.CreatedMS),
		sql.Named("after_id", after.EventID.String()),
		sql.Named("upto", int64(min(upto, math.MaxInt64))),
		sql.Named("created_since", createdSince),
		sql.Named("limit", limit+1),
	}
}

// FeedAudit returns a page of q's audit feed.
func (s *Store) FeedAudit(ctx context.Context, q auditstore.FeedQuery) (auditstore.FeedPage, error) {
	if err := q.Validate(); err != nil {
		return auditstore.FeedPage{}, err
	}
	query, args, err := feedAuditQuery(q)
	if err != nil {
		return auditstore.FeedPage{}, err
	}
	rows, err := s.db.QueryContext(ctx, query, args...)
	if err != nil {
		return auditstore.FeedPage{}, fmt.Errorf("sqlite feed: %w", err)
	}
	defer rows.Close()
	items, err := auditstore.ReadFeed(rows)
	if err != nil {
		return auditstore.FeedPage{}, fmt.Errorf("sqlite feed: %w", err)
	}
	page := auditstore.FeedPage{Items: items, Next: q.After}
	if len(page.Items) > q.Limit {
		page.Items, page.HasMore = page.Items[:q.Limit], true
	}
	if n := len(page.Items); n > 0 {
		page.Next = auditstore.AuditFeedKey(&page.Items[n-1])
	}
	return page, nil
}

// FeedExecutions returns a page of q's execution feed.
func (s *Store) FeedExecutions(ctx context.Context, q auditstore.ExecFeedQuery) (auditstore.ExecFeedPage, error) {
	if err := q.Validate(); err != nil {
		return auditstore.ExecFeedPage{}, err
	}
	query, args, err := feedExecutionsQuery(q)
	if err != nil {
		return auditstore.ExecFeedPage{}, err
	}
	rows, err := s.db.QueryContext(ctx, query, args...)
	if err != nil {
		return auditstore.ExecFeedPage{}, fmt.Errorf("sqlite execution feed: %w", err)
	}
	defer rows.Close()
	items, err := auditstore.ReadExecFeed(rows)
	if err != nil {
		return auditstore.ExecFeedPage{}, fmt.Errorf("sqlite execution feed: %w", err)
	}
	page := auditstore.ExecFeedPage{Items: items, Next: q.After}
	if len(page.Items) > q.Limit {
		page.Items, page.HasMore = page.Items[:q.Limit], true
	}
	if n := len(page.Items); n > 0 {
		page.Next = auditstore.ExecFeedKey(&page.Items[n-1])
	}
	return page, nil
}

// feedAuditQuery returns the statement and arguments of q. render adds
// the project and the search's arguments; the feed's cursor and window are
// its own.
func feedAuditQuery(q auditstore.FeedQuery) (string, []any, error) {
	query, args, err := render(feedAuditSQL, q.ProjectID, nil, auditstore.Window{}, q.Search.Terms, "text")
	args = append(args, sql.Named("org", q.OrgID.String()), sql.Named("action", enumArg(q.Action)),
		sql.Named("source", enumArg(q.Source)), sql.Named("resource_type", enumArg(q.ResourceType)))
	return query, append(args, feedArgs(q.After, q.Upto, q.CreatedSince, q.Limit)...), err
}

// feedExecutionsQuery returns the statement and arguments of q.
func feedExecutionsQuery(q auditstore.ExecFeedQuery) (string, []any, error) {
	query, args, err := render(feedExecutionsSQL, q.ProjectID, nil, auditstore.Window{}, q.Search.Terms, "exec_text")
	var success, user any
	if q.Success != nil {
		success = 0
		if *q.Success {
			success = 1
		}
	}
	if q.UserID != nil {
		user = *q.UserID
	}
	args = append(args, sql.Named("org", q.OrgID.String()), sql.Named("success", success), sql.Named("user", user))
	return query, append(args, feedArgs(q.After, q.Upto, q.CreatedSince, q.Limit)...), err
}
