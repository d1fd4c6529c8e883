// Package query serves the audit API over HTTP (Fiber): the org and project
// audit log listings with the seed's envelope, filters and cursor paging,
// and wait_for: a listing that first waits (bounded) until the caller's own
// event is stored.
package query

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/google/uuid"

	"github.com/auditrail/auditrail/internal/auditstore"
	"github.com/auditrail/auditrail/internal/auth"
	"github.com/auditrail/auditrail/internal/httpapi"
	"github.com/auditrail/auditrail/internal/httpx"
	"github.com/auditrail/auditrail/internal/retry"
	"github.com/auditrail/auditrail/schemas/apiitem"
)

// Reader is the store as the query service needs it.
type Reader interface {
	ListAudit(ctx context.Context, q auditstore.Query) (auditstore.Page, error)
	// HasAudit reports whether the audit entry with event id id is stored
	// for org (and project, when not nil), so that ListAudit lists it. A
	// store may look only near the event's time (ClickHouse:
	// auditstore.LookupWindow) and then answers false for an event outside.
	HasAudit(ctx context.Context, org uuid.UUID, project *uuid.UUID, id uuid.UUID) (bool, error)
}

// ExecutionReader lists tool executions.
type ExecutionReader interface {
	ListExecutions(ctx context.Context, q auditstore.ExecQuery) (auditstore.ExecPage, error)
	// HasExecution reports whether the tool execution with event id id is
	// stored for org (and project, when not nil), as Reader.HasAudit.
	HasExecution(ctx context.Context, org uuid.UUID, project *uuid.UUID, id uuid.UUID) (bool, error)
}

// HeaderWaitFor answers a listing with wait_for: WaitFound when the event
// was stored before the listing was read, WaitTimeout when the wait ended
// (Config.WaitForMax) without it.
const (
	HeaderWaitFor = "Auditrail-Wait-For"
	WaitFound     = "found"
	WaitTimeout   = "timeout"
)

// Bounds of Config.WaitForMax: the contract pins "at most 5 s".
const (
	DefaultWaitForMax = 5 * time.Second
	MaxWaitForMax     = 5 * time.Second
)

// waitPolicy spaces the store lookups of a wait: 20 ms doubling to 200 ms,
// so that an event ingested within the first second is seen within a few
// tens of milliseconds and a 5 s wait costs about 30 point lookups.
var waitPolicy = retry.Policy{Initial: 20 * time.Millisecond, Max: 200 * time.Millisecond, Multiplier: 2, Jitter: 0.2}

// Access authenticates callers and decides what they may read.
type Access interface {
	// Authenticate resolves a bearer credential, or returns an error wrapping
	// auth.ErrUnauthenticated.
	Authenticate(ctx context.Context, credential string) (auth.Principal, error)
	// AuthorizeRead returns nil when p may read the org (and project, when
	// set), or an error wrapping auth.ErrForbidden.
	AuthorizeRead(ctx context.Context, p auth.Principal, org uuid.UUID, project *uuid.UUID) error
}

// Config configures the query service.
type Config struct {
	// CursorKeys sign cursors; the first signs, all verify.
	CursorKeys [][]byte
	// StoreTimeout bounds one store query.
	StoreTimeout time.Duration
	// WaitForMax bounds the wait of a listing with wait_for, after which it
	// answers as usual (0: DefaultWaitForMax; at most MaxWaitForMax).
	WaitForMax time.Duration
	// ExportWriteTimeout bounds the writing of each page of an export (the
	// server's write timeout would bound the whole export): a client that
	// reads nothing for this long is dropped (0: DefaultExportWriteTimeout).
	ExportWriteTimeout time.Duration
	// ProofCacheBytes bounds the cache of the proof routes (stored hashes
	// and leaf indexes, which never change once written); 0:
	// DefaultProofCacheBytes, negative: no cache.
	ProofCacheBytes int64
	// Exports bounds the exports streaming at once: in all (then 503),
	// per organization and per credential (then 429); zero fields take
	// DefaultExportLimits'.
	Exports Limits
	// Recheck is how often an export in progress authorizes its caller
	// again (between pages; at once after a change of the control-plane
	// state): an export whose credential was revoked is cut (0:
	// DefaultRecheck).
	Recheck time.Duration
	// BulkReadAge: a feed read from its start, or a live stream resumed,
	// from further back than this is a bulk read, recorded like an export
	// (0: DefaultBulkReadAge).
	BulkReadAge time.Duration
	// Proxies are the peers whose X-Forwarded-For names the client_ip
	// recorded with a bulk read (none: the TCP peer).
	Proxies httpx.TrustedProxies
}

// Defaults of Config.
const (
	DefaultExportWriteTimeout = 30 * time.Second
	DefaultRecheck            = 2 * time.Second
	DefaultBulkReadAge        = time.Hour
)

// DefaultExportLimits are Config.Exports' defaults.
func DefaultExportLimits() Limits { return Limits{Max: 32, PerOrg: 4, PerCredential: 2} }

// DefaultConfig returns the defaults; CursorKeys must still be set.
func DefaultConfig() Config {
	return Config{StoreTimeout: 10 * time.Second, WaitForMax: DefaultWaitForMax, Exports: DefaultExportLimits(),
		Recheck: DefaultRecheck, BulkReadAge: DefaultBulkReadAge}
}

// Validate checks the configuration.
func (c Config) Validate() error {
	if len(c.CursorKeys) == 0 {
		return errors.New("query: at least one cursor key is required")
	}
	if c.StoreTimeout <= 0 {
		return errors.New("query: store timeout must be positive")
	}
	if c.ExportWriteTimeout < 0 {
		return errors.New("query: export write timeout must not be negative")
	}
	if c.WaitForMax < 0 || c.WaitForMax > MaxWaitForMax {
		return fmt.Errorf("query: wait_for bound %s not in 0..%s", c.WaitForMax, MaxWaitForMax)
	}
	if c.Recheck < 0 || c.Recheck > 5*time.Second {
		return fmt.Errorf("query: re-check interval %s not in 0..5s: a revoked credential must lose its export within 5 s", c.Recheck)
	}
	if c.BulkReadAge < 0 {
		return errors.New("query: bulk read age must not be negative")
	}
	l := c.Exports
	if l.Max < 0 || l.PerOrg < 0 || l.PerCredential < 0 {
		return errors.New("query: export limits must not be negative")
	}
	return nil
}

// Server holds the handlers.
type Server struct {
	cfg    Config
	store  Reader
	access Access
	cursor *CursorCodec
	log    *slog.Logger
	// exports records each export (RecordExportsWith); nil: not recorded.
	exports EventRecorder
	// exportSlots bounds the exports streaming at once (Config.Exports).
	exportSlots *slots
	// live serves the live streams (ServeLive); nil: 503.
	live *live
	// feeds is where the feeds' watermarks come from (ServeFeedsWith);
	// nil: 503.
	feeds *FeedSource
	// logs are the tamper-evidence logs (when the store has them);
	// proofs caches what the proof routes read; keys serves audit_keys.
	logs   LogReader
	proofs *proofCache
	keys   KeySource
	// expiries are the logs' expiries, erased the erased entries (when
	// the store keeps them).
	expiries ExpiryReader
	erased   ErasureReader
}

// New returns a query server.
func New(cfg Config, store Reader, access Access, log *slog.Logger) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	codec, err := NewCursorCodec(cfg.CursorKeys...)
	if err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.Default()
	}
	if cfg.WaitForMax == 0 {
		cfg.WaitForMax = DefaultWaitForMax
	}
	if cfg.ExportWriteTimeout == 0 {
		cfg.ExportWriteTimeout = DefaultExportWriteTimeout
	}
	if cfg.ProofCacheBytes == 0 {
		cfg.ProofCacheBytes = DefaultProofCacheBytes
	}
	def := DefaultExportLimits()
	for _, f := range []struct {
		v *int
		d int
	}{{&cfg.Exports.Max, def.Max}, {&cfg.Exports.PerOrg, def.PerOrg}, {&cfg.Exports.PerCredential, def.PerCredential}} {
		if *f.v == 0 {
			*f.v = f.d
		}
	}
	if cfg.Recheck == 0 {
		cfg.Recheck = DefaultRecheck
	}
	if cfg.BulkReadAge == 0 {
		cfg.BulkReadAge = DefaultBulkReadAge
	}
	s := &Server{cfg: cfg, store: store, access: access, cursor: codec, log: log, proofs: newProofCache(cfg.ProofCacheBytes),
		exportSlots: newSlots("exports", cfg.Exports)}
	s.logs, _ = store.(LogReader)
	if s.logs != nil {
		s.expiries, _ = store.(ExpiryReader)
		s.erased, _ = store.(ErasureReader)
	}
	return s, nil
}

// Register mounts the /api/v1 audit routes behind the given middleware
// (the rate limit).
func (s *Server) Register(r fiber.Router, mw ...fiber.Handler) {
	r.Get("/api/v1/orgs/:org_id/audit_logs", httpapi.With(mw, s.listAudit(false))...)
	r.Get("/api/v1/orgs/:org_id/projects/:project_id/audit_logs", httpapi.With(mw, s.listAudit(true))...)
	r.Get("/api/v1/orgs/:org_id/audit_logs/export", httpapi.With(mw, s.exportAudit(false))...)
	r.Get("/api/v1/orgs/:org_id/projects/:project_id/audit_logs/export", httpapi.With(mw, s.exportAudit(true))...)
	if stats, ok := s.store.(StatsReader); ok {
		r.Get("/api/v1/orgs/:org_id/audit_logs/stats", httpapi.With(mw, s.auditStats(stats, false))...)
		r.Get("/api/v1/orgs/:org_id/projects/:project_id/audit_logs/stats", httpapi.With(mw, s.auditStats(stats, true))...)
	}
	s.registerLogs(r, mw)
	r.Get("/api/v1/orgs/:org_id/audit_logs/stream", httpapi.With(mw, s.streamAudit(false))...)
	r.Get("/api/v1/orgs/:org_id/projects/:project_id/audit_logs/stream", httpapi.With(mw, s.streamAudit(true))...)
	if feeds, ok := s.store.(FeedReader); ok {
		r.Get("/api/v1/orgs/:org_id/audit_logs/feed", httpapi.With(mw, s.feedAudit(feeds, false))...)
		r.Get("/api/v1/orgs/:org_id/projects/:project_id/audit_logs/feed", httpapi.With(mw, s.feedAudit(feeds, true))...)
		r.Get("/api/v1/orgs/:org_id/tool_executions/feed", httpapi.With(mw, s.feedExecutions(feeds, false))...)
		r.Get("/api/v1/orgs/:org_id/projects/:project_id/tool_executions/feed", httpapi.With(mw, s.feedExecutions(feeds, true))...)
	}
	if execs, ok := s.store.(ExecutionReader); ok {
		r.Get("/api/v1/orgs/:org_id/tool_executions", httpapi.With(mw, s.listExecutions(execs, false))...)
		r.Get("/api/v1/orgs/:org_id/projects/:project_id/tool_executions", httpapi.With(mw, s.listExecutions(execs, true))...)
		r.Get("/api/v1/orgs/:org_id/tool_executions/export", httpapi.With(mw, s.exportExecutions(execs, false))...)
		r.Get("/api/v1/orgs/:org_id/projects/:project_id/tool_executions/export", httpapi.With(mw, s.exportExecutions(execs, true))...)
	}
}

// authorizeList authenticates the caller (before any parameter error, so
// that an anonymous caller learns nothing) and authorizes the read.
func (s *Server) authorizeList(c *fiber.Ctx, org uuid.UUID, project *uuid.UUID, paramErr error) error {
	_, err := s.authorizeAs(c, org, project, paramErr)
	return err
}

// authorizeAs is authorizeList that answers the principal.
func (s *Server) authorizeAs(c *fiber.Ctx, org uuid.UUID, project *uuid.UUID, paramErr error) (auth.Principal, error) {
	principal, err := s.authenticate(c)
	if err != nil {
		return principal, err
	}
	if paramErr != nil {
		return principal, fiber.NewError(fiber.StatusBadRequest, paramErr.Error())
	}
	if err := s.access.AuthorizeRead(c.UserContext(), principal, org, project); err != nil {
		if errors.Is(err, auth.ErrForbidden) {
			return principal, fiber.NewError(fiber.StatusForbidden, err.Error())
		}
		return principal, err
	}
	return principal, nil
}

func (s *Server) listExecutions(store ExecutionReader, withProject bool) fiber.Handler {
	kind := "tool_executions/org"
	if withProject {
		kind = "tool_executions/project"
	}
	return func(c *fiber.Ctx) error {
		p, perr := ParseExecList(func(n string) string { return c.Params(n) }, func(n string) string { return c.Query(n) }, withProject)
		if perr == nil {
			perr = httpapi.CheckParams(c.Context().QueryArgs().VisitAll, ExecutionParams)
		}
		principal, err := s.authorizeAs(c, p.OrgID, p.ProjectID, perr)
		if err != nil {
			return err
		}
		var wait *waiting
		if p.WaitFor != nil {
			wait = &waiting{g: s.grantOf(c, principal, p.OrgID, p.ProjectID)}
			wait.has = func(ctx context.Context) (bool, error) {
				return store.HasExecution(ctx, p.OrgID, p.ProjectID, *p.WaitFor)
			}
		}
		return s.page(c, p.Cursor, p.Scope(kind), wait, func(ctx context.Context, after *auditstore.Key) (any, *auditstore.Key, bool, error) {
			page, err := store.ListExecutions(ctx, execQuery(p, p.Limit, after))
			if err != nil {
				return nil, nil, false, fmt.Errorf("list tool executions: %w", err)
			}
			marks, err := s.marksOf(ctx, p.OrgID, auditstore.LogExecutions, execEventIDs(page.Items), true)
			if err != nil {
				return nil, nil, false, err
			}
			leaves, erased := marks.leaves, marks.erased
			items := make([]apiitem.ExecutionItem, len(page.Items))
			for i := range page.Items {
				items[i] = apiitem.NewExecutionItem(&page.Items[i])
				items[i].LeafIndex = execLeafIndex(leaves, items[i].EventID)
				items[i].Erasure = execErased(erased, items[i].EventID)
			}
			return items, page.Next(), page.HasMore, nil
		})
	}
}

// lookup reports whether the event a listing waits for is stored.
type lookup func(ctx context.Context) (bool, error)

// waiting is the wait of a listing with wait_for: the lookup, and the
// caller's grant, checked again once the wait is over (the answer must
// not outlive a credential revoked while it waited).
type waiting struct {
	has lookup
	g   *grant
}

// page answers one page of a listing: the cursor (of scope) decoded into
// the position after which fetch reads, the items and the next cursor.
// With wait (wait_for), it first waits for the event (waitFor). Callers
// authorize before: nobody waits, or learns anything, for a listing they
// may not read.
func (s *Server) page(c *fiber.Ctx, cursor string, scope [scopeLen]byte, wait *waiting,
	fetch func(ctx context.Context, after *auditstore.Key) (items any, next *auditstore.Key, hasMore bool, err error)) error {
	var after *auditstore.Key
	if cursor != "" {
		k, err := s.cursor.Decode(cursor, scope)
		if err != nil {
			return fiber.NewError(fiber.StatusBadRequest, "cursor: "+err.Error())
		}
		after = &k
	}
	if wait != nil {
		found, err := s.waitFor(c.UserContext(), wait.has)
		if err != nil {
			return err
		}
		if ferr := wait.g.check(c.UserContext()); ferr != nil {
			return ferr
		}
		state := WaitTimeout
		if found {
			state = WaitFound
		}
		c.Set(HeaderWaitFor, state)
	}
	ctx, cancel := context.WithTimeout(c.UserContext(), s.cfg.StoreTimeout)
	defer cancel()
	items, next, hasMore, err := fetch(ctx, after)
	if err != nil {
		return err
	}
	data := httpapi.ListData{Items: items, HasMore: hasMore}
	if next != nil {
		data.NextCursor = s.cursor.Encode(*next, scope)
	}
	return c.JSON(httpapi.Envelope{Code: fiber.StatusOK, Msg: "OK", Data: data})
}

// waitFor polls has, with waitPolicy's growing intervals, until it reports
// the event, WaitForMax has passed or ctx ends; it reports whether the
// event was found. A lookup cut short by the bound counts as not found;
// another store error is returned.
func (s *Server) waitFor(ctx context.Context, has lookup) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.WaitForMax)
	defer cancel()
	b := waitPolicy.Backoff()
	for {
		qctx, qcancel := context.WithTimeout(ctx, s.cfg.StoreTimeout)
		found, err := has(qctx)
		qcancel()
		switch {
		case ctx.Err() != nil:
			return found && err == nil, nil
		case err != nil:
			return false, fmt.Errorf("wait_for: %w", err)
		case found:
			return true, nil
		}
		if !retry.Sleep(ctx, b.NextBackOff()) {
			return false, nil
		}
	}
}

func (s *Server) authenticate(c *fiber.Ctx) (auth.Principal, error) {
	return httpapi.Authenticate(c, s.access)
}

func (s *Server) listAudit(withProject bool) fiber.Handler {
	kind := "audit_logs/org"
	if withProject {
		kind = "audit_logs/project"
	}
	return func(c *fiber.Ctx) error {
		p, perr := ParseList(func(n string) string { return c.Params(n) }, func(n string) string { return c.Query(n) }, withProject)
		if perr == nil {
			perr = httpapi.CheckParams(c.Context().QueryArgs().VisitAll, AuditParams)
		}
		principal, err := s.authorizeAs(c, p.OrgID, p.ProjectID, perr)
		if err != nil {
			return err
		}
		var wait *waiting
		if p.WaitFor != nil {
			wait = &waiting{g: s.grantOf(c, principal, p.OrgID, p.ProjectID)}
			wait.has = func(ctx context.Context) (bool, error) {
				return s.store.HasAudit(ctx, p.OrgID, p.ProjectID, *p.WaitFor)
			}
		}
		return s.page(c, p.Cursor, p.Scope(kind), wait, func(ctx context.Context, after *auditstore.Key) (any, *auditstore.Key, bool, error) {
			page, err := s.store.ListAudit(ctx, auditQuery(p, p.Limit, after))
			if err != nil {
				return nil, nil, false, fmt.Errorf("list audit logs: %w", err)
			}
			marks, err := s.marksOf(ctx, p.OrgID, auditstore.LogAudit, eventIDs(page.Items), true)
			if err != nil {
				return nil, nil, false, err
			}
			leaves, erased := marks.leaves, marks.erased
			items := make([]apiitem.Item, len(page.Items))
			for i := range page.Items {
				items[i] = apiitem.NewItem(&page.Items[i])
				items[i].LeafIndex = leafIndex(leaves, page.Items[i].EventID)
				items[i].Erasure = erased[page.Items[i].EventID]
			}
			return items, page.Next(), page.HasMore, nil
		})
	}
}
