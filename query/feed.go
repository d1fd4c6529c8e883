package query

import (
	"context"
	"crypto/hmac"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"strconv"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/google/uuid"

	"github.com/auditrail/auditrail/internal/auditstore"
	"github.com/auditrail/auditrail/internal/auth"
	"github.com/auditrail/auditrail/internal/httpapi"
	itlog "github.com/auditrail/auditrail/internal/tlog"
	"github.com/auditrail/auditrail/schemas/apiitem"
)

// FeedReader reads the feeds (persistence order) of a store.
type FeedReader interface {
	FeedAudit(ctx context.Context, q auditstore.FeedQuery) (auditstore.FeedPage, error)
	FeedExecutions(ctx context.Context, q auditstore.ExecFeedQuery) (auditstore.ExecFeedPage, error)
}

// Watermarks tells how far the store is complete: the stream sequence up
// to which every message of an ingest durable is committed
// (natsx.Watermarks).
type Watermarks interface {
	Watermark(ctx context.Context, durable string) (uint64, error)
}

// FeedSource is where the feeds' watermarks come from: the watermarks and
// the durable consumers of ingest that store audit entries and executions.
type FeedSource struct {
	Watermarks                     Watermarks
	AuditDurable, ExecutionDurable string
	// Seal (optional) tells up to which created_time every entry is in
	// its organization's verifiable log (the sequencer's seal): each page
	// answers it as sealed_until.
	Seal SealSource
}

// SealSource reads the sequencer's seal (false: none yet).
type SealSource interface {
	Sealed(ctx context.Context) (time.Time, bool, error)
}

// ServeFeedsWith enables the feed routes (they answer 503 without it).
// Call it before serving.
func (s *Server) ServeFeedsWith(src FeedSource) { s.feeds = &src }

// Feed limits (the contract: 1–1000, default 100).
const (
	FeedDefaultLimit = 100
	FeedMaxLimit     = auditstore.FeedMaxLimit
)

// Query parameters of the feeds.
var (
	AuditFeedParams     = []string{"action", "source", "resource_type", "q", "since", "cursor", "limit"}
	ExecutionFeedParams = []string{"success", "user_id", "q", "since", "cursor", "limit"}
)

// FeedItem is an audit entry of a feed: the list item and its position,
// the entry's place in the event stream (increasing along the feed; 0 for
// entries stored before feeds existed, which come first).
type FeedItem struct {
	apiitem.Item
	Position uint64 `json:"position"`
}

// ExecutionFeedItem is an execution of a feed (see FeedItem).
type ExecutionFeedItem struct {
	apiitem.ExecutionItem
	Position uint64 `json:"position"`
}

// FeedData is the data of a feed page: next_cursor is always present.
type FeedData struct {
	Items      any    `json:"items"`
	NextCursor string `json:"next_cursor"`
	HasMore    bool   `json:"has_more"`
	// SealedUntil: every entry whose created_time is at or before it is
	// in the feed already, and in the organization's signed log: a window
	// that ends by then is final (null while the logs have no seal).
	SealedUntil *string `json:"sealed_until"`
}

// feedParams are what both feeds parse besides their filters.
type feedParams struct {
	since  *time.Time
	sinceS string
	limit  int
	cursor string
}

// without hides names from a query getter: the listing parsers take the
// filters, the feed parses since, limit and cursor itself.
func without(query Getter, names ...string) Getter {
	return func(n string) string {
		for _, h := range names {
			if n == h {
				return ""
			}
		}
		return query(n)
	}
}

func parseFeedParams(query Getter) (feedParams, error) {
	var p feedParams
	var err error
	if p.since, p.sinceS, err = parseTime("since", query("since")); err != nil {
		return p, err
	}
	p.limit = FeedDefaultLimit
	if v := query("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			return p, badParam("limit", "%q is not an integer", v)
		}
		if n < 1 || n > FeedMaxLimit {
			return p, badParam("limit", "%d is not between 1 and %d", n, FeedMaxLimit)
		}
		p.limit = n
	}
	p.cursor = query("cursor")
	return p, nil
}

// feedPage answers a feed page: the cursor decoded (a feed cursor of
// scope), the watermark of durable read, the page fetched up to it, and
// the next cursor, always.
func (s *Server) feedPage(c *fiber.Ctx, fp feedParams, scope [scopeLen]byte, durable string,
	fetch func(ctx context.Context, after auditstore.FeedKey, upto uint64) (items any, next auditstore.FeedKey, hasMore bool, err error)) error {
	var after auditstore.FeedKey
	if fp.cursor != "" {
		k, err := s.cursor.DecodeFeed(fp.cursor, scope)
		if err != nil {
			return fiber.NewError(fiber.StatusBadRequest, "cursor: "+err.Error())
		}
		after = k
	}
	ctx, cancel := context.WithTimeout(c.UserContext(), s.cfg.StoreTimeout)
	defer cancel()
	// The seal is read before the watermark: what it seals is below it.
	var sealed *string
	if s.feeds.Seal != nil {
		if t, ok, err := s.feeds.Seal.Sealed(ctx); err != nil {
			s.log.Warn("feed: the logs' seal cannot be read", "err", err)
		} else if ok {
			v := t.UTC().Format(itlog.TimeFormat)
			sealed = &v
		}
	}
	upto, err := s.feeds.Watermarks.Watermark(ctx, durable)
	if err != nil {
		s.log.Error("feed watermark unavailable", "err", err)
		return fiber.NewError(fiber.StatusServiceUnavailable, "the feed's progress cannot be read now, try again")
	}
	items, next, more, err := fetch(ctx, after, upto)
	if err != nil {
		return err
	}
	return c.JSON(httpapi.Envelope{Code: fiber.StatusOK, Msg: "OK",
		Data: FeedData{Items: items, NextCursor: s.cursor.EncodeFeed(next, scope), HasMore: more, SealedUntil: sealed}})
}

// recordFeedWalk records a feed read from its start (no cursor; no since,
// or one older than Config.BulkReadAge) as a bulk read of the trail
// (RecordExportsWith): a poller's first page, or a walk of the whole trail.
func (s *Server) recordFeedWalk(c *fiber.Ctx, p auth.Principal, route string, fp feedParams, org uuid.UUID, project *uuid.UUID) error {
	if fp.cursor != "" || (fp.since != nil && time.Since(*fp.since) <= s.cfg.BulkReadAge) {
		return nil
	}
	from := "the start"
	if fp.since != nil {
		from = fp.sinceS
	}
	return s.recordRead(c, p, bulkRead{route: route, how: readFeed, display: route + " feed read from " + from, org: org, project: project,
		extra: map[string]any{"from": from}})
}

func (s *Server) feedUnavailable() error {
	return fiber.NewError(fiber.StatusServiceUnavailable, "the feed is not available on this server")
}

func (s *Server) feedAudit(store FeedReader, withProject bool) fiber.Handler {
	kind := "audit_logs/feed/org"
	if withProject {
		kind = "audit_logs/feed/project"
	}
	return func(c *fiber.Ctx) error {
		query := func(n string) string { return c.Query(n) }
		p, perr := ParseList(func(n string) string { return c.Params(n) }, without(query, "since", "limit", "cursor"), withProject)
		var fp feedParams
		if perr == nil {
			fp, perr = parseFeedParams(query)
		}
		if perr == nil {
			perr = httpapi.CheckParams(c.Context().QueryArgs().VisitAll, AuditFeedParams)
		}
		principal, err := s.authorizeAs(c, p.OrgID, p.ProjectID, perr)
		if err != nil {
			return err
		}
		if s.feeds == nil {
			return s.feedUnavailable()
		}
		if err := s.recordFeedWalk(c, principal, "audit_logs", fp, p.OrgID, p.ProjectID); err != nil {
			return err
		}
		scope := Scope(append([]string{kind, p.OrgID.String(), scopeProject(p.ProjectID), p.action, p.source, p.resourceType,
			"created_since:" + fp.sinceS}, p.search.parts()...)...)
		return s.feedPage(c, fp, scope, s.feeds.AuditDurable, func(ctx context.Context, after auditstore.FeedKey, upto uint64) (any, auditstore.FeedKey, bool, error) {
			page, err := store.FeedAudit(ctx, auditstore.FeedQuery{OrgID: p.OrgID, ProjectID: p.ProjectID, Filter: p.Filter,
				CreatedSince: fp.since, After: after, Upto: upto, Limit: fp.limit})
			if err != nil {
				return nil, after, false, fmt.Errorf("audit feed: %w", err)
			}
			marks, err := s.marksOf(ctx, p.OrgID, auditstore.LogAudit, eventIDs(page.Items), false)
			if err != nil {
				return nil, after, false, err
			}
			leaves, erased := marks.leaves, marks.erased
			items := make([]FeedItem, len(page.Items))
			for i := range page.Items {
				items[i] = FeedItem{Item: apiitem.NewItem(&page.Items[i]), Position: page.Items[i].Stored.Seq}
				items[i].LeafIndex = leafIndex(leaves, page.Items[i].EventID)
				items[i].Erasure = erased[page.Items[i].EventID]
			}
			return items, page.Next, page.HasMore, nil
		})
	}
}

func (s *Server) feedExecutions(store FeedReader, withProject bool) fiber.Handler {
	kind := "tool_executions/feed/org"
	if withProject {
		kind = "tool_executions/feed/project"
	}
	return func(c *fiber.Ctx) error {
		query := func(n string) string { return c.Query(n) }
		p, perr := ParseExecList(func(n string) string { return c.Params(n) }, without(query, "since", "limit", "cursor"), withProject)
		var fp feedParams
		if perr == nil {
			fp, perr = parseFeedParams(query)
		}
		if perr == nil {
			perr = httpapi.CheckParams(c.Context().QueryArgs().VisitAll, ExecutionFeedParams)
		}
		principal, err := s.authorizeAs(c, p.OrgID, p.ProjectID, perr)
		if err != nil {
			return err
		}
		if s.feeds == nil {
			return s.feedUnavailable()
		}
		if err := s.recordFeedWalk(c, principal, "tool_executions", fp, p.OrgID, p.ProjectID); err != nil {
			return err
		}
		user := ""
		if p.UserID != nil {
			user = "user:" + *p.UserID
		}
		scope := Scope(append([]string{kind, p.OrgID.String(), scopeProject(p.ProjectID), p.success, user,
			"created_since:" + fp.sinceS}, p.search.parts()...)...)
		return s.feedPage(c, fp, scope, s.feeds.ExecutionDurable, func(ctx context.Context, after auditstore.FeedKey, upto uint64) (any, auditstore.FeedKey, bool, error) {
			page, err := store.FeedExecutions(ctx, auditstore.ExecFeedQuery{OrgID: p.OrgID, ProjectID: p.ProjectID, Success: p.Success,
				UserID: p.UserID, Search: p.Search, CreatedSince: fp.since, After: after, Upto: upto, Limit: fp.limit})
			if err != nil {
				return nil, after, false, fmt.Errorf("execution feed: %w", err)
			}
			marks, err := s.marksOf(ctx, p.OrgID, auditstore.LogExecutions, execEventIDs(page.Items), false)
			if err != nil {
				return nil, after, false, err
			}
			leaves, erased := marks.leaves, marks.erased
			items := make([]ExecutionFeedItem, len(page.Items))
			for i := range page.Items {
				items[i] = ExecutionFeedItem{ExecutionItem: apiitem.NewExecutionItem(&page.Items[i]), Position: page.Items[i].Stored.Seq}
				items[i].LeafIndex = execLeafIndex(leaves, items[i].EventID)
				items[i].Erasure = execErased(erased, items[i].EventID)
			}
			return items, page.Next, page.HasMore, nil
		})
	}
}

func scopeProject(p *uuid.UUID) string {
	if p == nil {
		return ""
	}
	return p.String()
}

const (
	feedCursorVersion = 2
	// version, seq, created ms, event id, scope digest, mac
	feedCursorLen = 1 + 8 + 8 + 16 + scopeLen + macLen
)

// EncodeFeed returns the cursor of feed position k in the feed of scope.
func (c *CursorCodec) EncodeFeed(k auditstore.FeedKey, scope [scopeLen]byte) string {
	b := make([]byte, 0, feedCursorLen)
	b = append(b, feedCursorVersion)
	b = binary.BigEndian.AppendUint64(b, k.Seq)
	b = binary.BigEndian.AppendUint64(b, uint64(k.CreatedMS))
	b = append(b, k.EventID[:]...)
	b = append(b, scope[:]...)
	b = append(b, c.mac(c.keys[0], b)...)
	return base64.RawURLEncoding.EncodeToString(b)
}

// DecodeFeed verifies a feed cursor made for scope and returns its position.
func (c *CursorCodec) DecodeFeed(s string, scope [scopeLen]byte) (auditstore.FeedKey, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(b) != feedCursorLen || b[0] != feedCursorVersion {
		return auditstore.FeedKey{}, ErrCursorMalformed
	}
	body, sig := b[:feedCursorLen-macLen], b[feedCursorLen-macLen:]
	if !c.verify(body, sig) {
		return auditstore.FeedKey{}, ErrCursorSignature
	}
	if !hmac.Equal(body[33:33+scopeLen], scope[:]) {
		return auditstore.FeedKey{}, ErrCursorScope
	}
	id, _ := uuid.FromBytes(body[17:33])
	return auditstore.FeedKey{Seq: binary.BigEndian.Uint64(body[1:9]), CreatedMS: int64(binary.BigEndian.Uint64(body[9:17])), EventID: id}, nil
}
