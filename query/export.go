package query

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/google/uuid"
	"github.com/nats-io/nats.go"

	"github.com/auditrail/auditrail/internal/auditstore"
	"github.com/auditrail/auditrail/internal/auth"
	"github.com/auditrail/auditrail/internal/httpapi"
	"github.com/auditrail/auditrail/producers"
	"github.com/auditrail/auditrail/schemas"
	"github.com/auditrail/auditrail/schemas/apiitem"
)

// EventRecorder publishes audit events (producers.Recorder): Prepare
// builds the event of a mutation and its message, Send returns nil once
// the stream stored them.
type EventRecorder interface {
	Prepare(m producers.Mutation) (*schemas.AuditEvent, *nats.Msg, error)
	Send(ctx context.Context, msgs ...*nats.Msg) error
}

// RecordExportsWith makes every bulk read of an organization's trail
// record one audit event in its trail before its first byte is sent: an
// export, a feed read from its start (no cursor, and no since or one older
// than Config.BulkReadAge), a live stream resumed from further back than
// that. The event: action AUDIT_ACTION_CREATED (a read was made), source
// API, resource the organization (or the project, on the project routes),
// the reader as principal with its client_ip, and data.after.<export|feed|
// stream> naming the route, path, filters (and the format, or where the
// read starts). A read whose event cannot be stored is refused (503):
// nothing leaves in bulk without its trace. The answer names the event in
// Auditrail-Event-Id. Call it before serving.
func (s *Server) RecordExportsWith(r EventRecorder) { s.exports = r }

// How a bulk read reads (the member of data.after that describes it).
const (
	readExport = "export"
	readFeed   = "feed"
	readStream = "stream"
)

// bulkRead describes one bulk read for its audit event.
type bulkRead struct {
	route   string // audit_logs, tool_executions
	how     string // readExport, readFeed, readStream
	display string // the event's resource_display
	org     uuid.UUID
	project *uuid.UUID
	extra   map[string]any // more members of data.after.<how>
}

// recordExport records the export of kind (audit_logs, tool_executions)
// by p; see RecordExportsWith.
func (s *Server) recordExport(c *fiber.Ctx, p auth.Principal, kind, format string, org uuid.UUID, project *uuid.UUID) error {
	return s.recordRead(c, p, bulkRead{route: kind, how: readExport, display: kind + " export (" + format + ")", org: org, project: project,
		extra: map[string]any{"format": format}})
}

// recordRead records the bulk read r by p (RecordExportsWith); nil when
// the server records no reads.
func (s *Server) recordRead(c *fiber.Ctx, p auth.Principal, r bulkRead) error {
	if s.exports == nil {
		return nil
	}
	filters := map[string]string{}
	c.Context().QueryArgs().VisitAll(func(k, v []byte) {
		if string(k) != "format" {
			filters[string(k)] = string(v)
		}
	})
	what := map[string]any{"route": r.route, "path": c.Path(), "filters": filters}
	for k, v := range r.extra {
		what[k] = v
	}
	peer, _ := netip.AddrFromSlice(c.Context().RemoteIP())
	ip := ""
	if a := s.cfg.Proxies.ClientIP(peer, c.Request().Header.PeekAll(fiber.HeaderXForwardedFor)); a.IsValid() && !a.IsUnspecified() {
		ip = a.String()
	}
	m := producers.Mutation{Action: schemas.AuditActionCreated, Source: schemas.AuditSourceAPI,
		ResourceType: schemas.ResourceTypeOrganization, ResourceID: r.org.String(), ResourceDisplay: r.display,
		OrgID: r.org, ProjectID: r.project, PrincipalID: p.ID, PrincipalType: p.Type, UserID: p.UserID, DisplayName: p.DisplayName,
		ClientIP: ip, After: map[string]any{r.how: what}}
	if r.project != nil {
		m.ResourceType, m.ResourceID = schemas.ResourceTypeProject, r.project.String()
	}
	ev, msg, err := s.exports.Prepare(m)
	if err != nil {
		return fmt.Errorf("record %s: %w", r.how, err)
	}
	ctx, cancel := context.WithTimeout(c.UserContext(), s.cfg.StoreTimeout)
	defer cancel()
	if err := s.exports.Send(ctx, msg); err != nil {
		s.log.Error(r.how+" refused: its audit event was not stored", "org", r.org.String(), "err", err)
		return fiber.NewError(fiber.StatusServiceUnavailable, r.how+" refused: the audit log cannot record it now, try again")
	}
	c.Set(httpapi.HeaderEventID, ev.EventID.String())
	return nil
}

// Export formats (the format parameter) and their content types.
const (
	FormatCSV   = "csv"
	FormatJSONL = "jsonl"

	ContentTypeCSV   = "text/csv; charset=utf-8"
	ContentTypeJSONL = "application/x-ndjson"
)

// ExportPageSize is the page an export reads from the store at a time: an
// export holds at most one page in memory, writes it to the response and
// flushes before reading the next.
const ExportPageSize = auditstore.MaxLimit

// exportTimeFormat is the UTC time in an export's file name.
const exportTimeFormat = "20060102T150405Z"

// pagingParams are the listing parameters an export does not take: it
// returns every matching entry, without waiting.
var pagingParams = []string{"cursor", "limit", "wait_for"}

// Query parameters of the exports: the filters of the matching listing
// (whatever AuditParams and ExecutionParams hold, so that a filter added
// there applies to the export too) and format.
var (
	AuditExportParams     = exportParams(AuditParams)
	ExecutionExportParams = exportParams(ExecutionParams)
)

func exportParams(list []string) []string {
	out := []string{"format"}
	for _, p := range list {
		if !slices.Contains(pagingParams, p) {
			out = append(out, p)
		}
	}
	return out
}

// parseFormat parses the format parameter, which is required. It answers
// the constant, not v: v views fasthttp's request memory, and the format
// is read again by the export's body writer, after the handler returned.
func parseFormat(v string) (string, error) {
	switch v {
	case FormatCSV:
		return FormatCSV, nil
	case FormatJSONL:
		return FormatJSONL, nil
	case "":
		return "", badParam("format", "required: %s or %s", FormatCSV, FormatJSONL)
	default:
		return "", badParam("format", "%q is not %s or %s", v, FormatCSV, FormatJSONL)
	}
}

// exportQuery returns the query of the export: the parameters the route
// takes, with the listing's own parser; limit, cursor and wait_for are
// refused by CheckParams, so the parser's defaults stand.
func exportQuery(c *fiber.Ctx, allowed []string) (Getter, Getter, string, error) {
	path := func(n string) string { return c.Params(n) }
	query := func(n string) string { return c.Query(n) }
	if err := httpapi.CheckParams(c.Context().QueryArgs().VisitAll, allowed); err != nil {
		return path, query, "", err
	}
	format, err := parseFormat(c.Query("format"))
	return path, query, format, err
}

// streamPages answers the export: the headers now, the body page by page
// from fasthttp's stream writer (after the handler returned, so that
// nothing there may use c). While one page is encoded and written, the
// next is read from the store (a goroutine of its own: at most two pages
// in memory); each page is flushed before the next is written. A store
// error after the first byte cannot change the status: it is logged and
// the connection is cut (no final chunk, so the client sees an incomplete
// transfer rather than a short file); a client gone ends the reading too.
//
// A JSONL export of a store with logs ends with the line
// {"checkpoint":"<signed note>"}: the latest checkpoint of the org's log of
// logKind, read before the first page (so that every entry it covers shows
// its leaf_index); none when the log has no checkpoint yet.
//
// The caller's grant is checked again between pages (Config.Recheck, and
// at once after a change of the control-plane state): when it no longer
// holds, the connection is cut before the next page, so that the client
// sees a transfer that did not complete rather than a short file. release
// is called once the body has ended.
func streamPages[T any](s *Server, c *fiber.Ctx, kind, format string, org uuid.UUID, logKind auditstore.LogKind, whole bool, enc *encoder[T],
	leafOf func(T) (*int64, *apiitem.Erasure), g *grant, release func(), fetch func(ctx context.Context, after *auditstore.Key) ([]T, *auditstore.Key, error)) {
	name := fmt.Sprintf("%s-%s-%s.%s", kind, org, time.Now().UTC().Format(exportTimeFormat), format)
	c.Set(fiber.HeaderContentDisposition, `attachment; filename="`+name+`"`)
	c.Set("X-Content-Type-Options", "nosniff")
	c.Set(fiber.HeaderCacheControl, "no-store")
	if format == FormatCSV {
		c.Set(fiber.HeaderContentType, ContentTypeCSV)
	} else {
		c.Set(fiber.HeaderContentType, ContentTypeJSONL)
	}
	c.Status(fiber.StatusOK)
	timeout, writeTimeout, log := s.cfg.StoreTimeout, s.cfg.ExportWriteTimeout, s.log
	// The server's write timeout bounds a whole response; an export of
	// millions of rows takes longer. Each page gets the time instead: a
	// client that reads nothing for that long is dropped.
	conn := c.Context().Conn()
	recheck := newRevalidator(g, s.cfg.Recheck)
	streamBody(c, log, func(w *bufio.Writer) error {
		defer release()
		fail := func(err error) error {
			log.Error("export ended early", "kind", kind, "org", org.String(), "err", err)
			return err
		}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel() // ends the reader when the writing ends first
		var note []byte
		var life *exportLife
		if format == FormatJSONL {
			var err error
			var size int64
			if note, size, err = s.latestNote(ctx, org, logKind); err != nil {
				return fail(err)
			}
			if whole && note != nil {
				if life, err = s.exportLifecycle(ctx, org, logKind, size); err != nil {
					return fail(err)
				}
			}
		}
		pages := readAhead(ctx, timeout, fetch)
		// send writes out what the encoder holds: the page leaves memory;
		// a gone client ends the export.
		send := func() error {
			if err := enc.flush(); err != nil {
				return err
			}
			if err := w.Flush(); err != nil {
				return fmt.Errorf("flush: %w", err)
			}
			return nil
		}
		// The CSV header row leaves at once (and the response's status and
		// headers with it), before the first page is read.
		if err := enc.start(w); err != nil {
			return fail(err)
		}
		if err := send(); err != nil {
			return fail(err)
		}
		for pg := range pages {
			if pg.err != nil {
				return fail(pg.err)
			}
			if ferr := recheck.check(ctx); ferr != nil {
				log.Info("export cut: the caller may no longer read it", "kind", kind, "org", org.String(), "principal", g.principal.ID, "code", ferr.Code)
				return ferr
			}
			if conn != nil {
				_ = conn.SetWriteDeadline(time.Now().Add(writeTimeout))
			}
			for i := range pg.items {
				if err := enc.write(w, pg.items[i]); err != nil {
					return fail(err)
				}
				if life != nil {
					life.see(leafOf(pg.items[i]))
				}
			}
			if err := send(); err != nil {
				return fail(err)
			}
		}
		if err := s.writeLifecycleLines(ctx, w, org, logKind, life); err != nil {
			return fail(err)
		}
		if note != nil {
			if err := writeCheckpointLine(w, note); err != nil {
				return fail(err)
			}
		}
		return nil
	})
}

// streamBody answers the body written by sw, which runs in a goroutine of
// its own once the handler has returned (as with fasthttp's
// SetBodyStreamWriter, so nothing there may use c). sw's error ends the
// response without its final chunk, after everything written before it
// has left: the client sees a transfer that did not complete, never a
// short body that looks whole. A client gone makes sw's writes fail.
func streamBody(c *fiber.Ctx, log *slog.Logger, sw func(w *bufio.Writer) error) {
	pr, pw := io.Pipe()
	go func() {
		err := errors.New("the body's writer panicked")
		defer func() {
			if r := recover(); r != nil {
				log.Error("streamed body panicked", "panic", r)
			}
			_ = pw.CloseWithError(err) // nil: the body ends (EOF)
		}()
		w := bufio.NewWriter(pw)
		if err = sw(w); err == nil {
			err = w.Flush()
		}
	}()
	c.Context().SetBodyStream(pr, -1)
}

// CheckpointLine is the member of an export's last line,
// {"checkpoint":"<signed note>"}.
const CheckpointLine = "checkpoint"

func writeCheckpointLine(w *bufio.Writer, note []byte) error {
	b, err := json.Marshal(map[string]string{CheckpointLine: string(note)})
	if err != nil {
		return fmt.Errorf("encode checkpoint: %w", err)
	}
	if _, err := w.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	if err := w.Flush(); err != nil {
		return fmt.Errorf("flush: %w", err)
	}
	return nil
}

// page is one page of an export as readAhead answers it.
type page[T any] struct {
	items []T
	err   error
}

// readAhead reads the pages of an export in order, from the newest, each
// query bounded by timeout, and sends them on the channel it answers
// (unbuffered: the next page is read while the last one is written, no
// further). The channel closes after the last page, after a page with an
// error, or when ctx ends; a panic of fetch is an error page.
func readAhead[T any](ctx context.Context, timeout time.Duration, fetch func(ctx context.Context, after *auditstore.Key) ([]T, *auditstore.Key, error)) <-chan page[T] {
	out := make(chan page[T])
	go func() {
		defer close(out)
		send := func(p page[T]) bool {
			select {
			case out <- p:
				return true
			case <-ctx.Done():
				return false
			}
		}
		defer func() {
			if r := recover(); r != nil {
				send(page[T]{err: fmt.Errorf("export: panic reading a page: %v", r)})
			}
		}()
		var after *auditstore.Key
		for {
			qctx, cancel := context.WithTimeout(ctx, timeout)
			items, next, err := fetch(qctx, after)
			cancel()
			if !send(page[T]{items: items, err: err}) || err != nil || next == nil {
				return
			}
			after = next
		}
	}()
	return out
}

// auditQuery is the store query of a listing's parameters, shared by the
// list route and the export so that a filter applies to both.
func auditQuery(p ListParams, limit int, after *auditstore.Key) auditstore.Query {
	return auditstore.Query{OrgID: p.OrgID, ProjectID: p.ProjectID, Filter: p.Filter, Limit: limit, After: after}
}

// execQuery is auditQuery for tool executions.
func execQuery(p ExecParams, limit int, after *auditstore.Key) auditstore.ExecQuery {
	return auditstore.ExecQuery{OrgID: p.OrgID, ProjectID: p.ProjectID, Success: p.Success, UserID: p.UserID,
		Window: p.Window, Search: p.Search, Limit: limit, After: after}
}

// openExport authorizes an export, takes its slot (Config.Exports) and
// records it: the caller's grant and the slot's release, which the body's
// end calls.
func (s *Server) openExport(c *fiber.Ctx, kind, format string, org uuid.UUID, project *uuid.UUID, perr error) (*grant, func(), error) {
	principal, err := s.authorizeAs(c, org, project, perr)
	if err != nil {
		return nil, nil, err
	}
	release, err := s.exportSlots.acquire(c, org, principal)
	if err != nil {
		return nil, nil, err
	}
	if err := s.recordExport(c, principal, kind, format, org, project); err != nil {
		release()
		return nil, nil, err
	}
	return s.grantOf(c, principal, org, project), release, nil
}

// OpenExports is how many exports are streaming.
func (s *Server) OpenExports() int { return s.exportSlots.count() }

func (s *Server) exportAudit(withProject bool) fiber.Handler {
	return func(c *fiber.Ctx) error {
		path, query, format, perr := exportQuery(c, AuditExportParams)
		var p ListParams
		if perr == nil {
			p, perr = ParseList(path, query, withProject)
		}
		g, release, err := s.openExport(c, "audit_logs", format, p.OrgID, p.ProjectID, perr)
		if err != nil {
			return err
		}
		whole := p.ProjectID == nil && p.Action == nil && p.Source == nil && p.ResourceType == nil && p.Search.Empty() && p.Since == nil && p.Until == nil
		streamPages(s, c, "audit_logs", format, p.OrgID, auditstore.LogAudit, whole, newAuditEncoder(format), func(it apiitem.Item) (*int64, *apiitem.Erasure) { return it.LeafIndex, it.Erasure }, g, release, func(ctx context.Context, after *auditstore.Key) ([]apiitem.Item, *auditstore.Key, error) {
			page, err := s.store.ListAudit(ctx, auditQuery(p, ExportPageSize, after))
			if err != nil {
				return nil, nil, fmt.Errorf("list audit logs: %w", err)
			}
			marks, err := s.marksOf(ctx, p.OrgID, auditstore.LogAudit, eventIDs(page.Items), false)
			if err != nil {
				return nil, nil, err
			}
			leaves, erased := marks.leaves, marks.erased
			items := make([]apiitem.Item, len(page.Items))
			for i := range page.Items {
				items[i] = apiitem.NewItem(&page.Items[i])
				items[i].LeafIndex = leafIndex(leaves, page.Items[i].EventID)
				items[i].Erasure = erased[page.Items[i].EventID]
			}
			return items, page.Next(), nil
		})
		return nil
	}
}

func (s *Server) exportExecutions(store ExecutionReader, withProject bool) fiber.Handler {
	return func(c *fiber.Ctx) error {
		path, query, format, perr := exportQuery(c, ExecutionExportParams)
		var p ExecParams
		if perr == nil {
			p, perr = ParseExecList(path, query, withProject)
		}
		g, release, err := s.openExport(c, "tool_executions", format, p.OrgID, p.ProjectID, perr)
		if err != nil {
			return err
		}
		whole := p.ProjectID == nil && p.Success == nil && p.UserID == nil && p.Search.Empty() && p.Since == nil && p.Until == nil
		streamPages(s, c, "tool_executions", format, p.OrgID, auditstore.LogExecutions, whole, newExecutionEncoder(format), func(it apiitem.ExecutionItem) (*int64, *apiitem.Erasure) { return it.LeafIndex, it.Erasure }, g, release, func(ctx context.Context, after *auditstore.Key) ([]apiitem.ExecutionItem, *auditstore.Key, error) {
			page, err := store.ListExecutions(ctx, execQuery(p, ExportPageSize, after))
			if err != nil {
				return nil, nil, fmt.Errorf("list tool executions: %w", err)
			}
			marks, err := s.marksOf(ctx, p.OrgID, auditstore.LogExecutions, execEventIDs(page.Items), false)
			if err != nil {
				return nil, nil, err
			}
			leaves, erased := marks.leaves, marks.erased
			items := make([]apiitem.ExecutionItem, len(page.Items))
			for i := range page.Items {
				items[i] = apiitem.NewExecutionItem(&page.Items[i])
				items[i].LeafIndex = execLeafIndex(leaves, items[i].EventID)
				items[i].Erasure = execErased(erased, items[i].EventID)
			}
			return items, page.Next(), nil
		})
		return nil
	}
}

// AuditCSVHeader is the header row of an audit log CSV export: the seed's
// fields in the seed's order.
var AuditCSVHeader = []string{"id", "event_id", "timestamp", "client_ip", "action", "source", "display_name",
	"customer_id", "organization_id", "project_id", "principal_id", "user_id", "principal_type",
	"resource_type", "resource_id", "resource_display", "data", "created_time", "leaf_index"}

// ExecutionCSVHeader is the header row of a tool execution CSV export: the
// fields of the list item in its order; tool, error and hooks as JSON.
var ExecutionCSVHeader = []string{"execution_id", "event_id", "organization_id", "project_id", "user_id",
	"principal_id", "principal_type", "display_name", "client_ip", "tool", "tool_name", "started_at",
	"ended_at", "duration_ms", "success", "execution_code", "error", "hooks", "created_time", "leaf_index"}

// encoder writes the items of one export in its format, to the writer
// given to start.
type encoder[T any] struct {
	header []string
	row    func(T) ([]string, error)
	csv    bool
	out    io.Writer // the writer of start (CSV)
	buf    []byte    // CSV rows not yet flushed to out
}

// start begins the export on w: the CSV header row (JSONL has none).
func (e *encoder[T]) start(w io.Writer) error {
	if !e.csv {
		return nil
	}
	e.out = w
	return e.writeRow(e.header)
}

// write writes one item: a CSV row, or the list item as one JSON line.
func (e *encoder[T]) write(w io.Writer, it T) error {
	if e.csv {
		row, err := e.row(it)
		if err != nil {
			return err
		}
		return e.writeRow(row)
	}
	b, err := json.Marshal(it)
	if err != nil {
		return fmt.Errorf("encode item: %w", err)
	}
	if _, err := w.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	return nil
}

// flush writes the CSV rows held to the writer of start.
func (e *encoder[T]) flush() error {
	if len(e.buf) == 0 {
		return nil
	}
	_, err := e.out.Write(e.buf)
	e.buf = e.buf[:0]
	if err != nil {
		return fmt.Errorf("write csv: %w", err)
	}
	return nil
}

// writeRow adds one RFC 4180 record (CRLF line ends), every cell defused
// against formula injection (CSVSafe) and quoted when it holds a
// separator of any spreadsheet locale (csvQuote).
func (e *encoder[T]) writeRow(cells []string) error {
	for i, v := range cells {
		if i > 0 {
			e.buf = append(e.buf, ',')
		}
		v = CSVSafe(v)
		if !csvQuote(v) {
			e.buf = append(e.buf, v...)
			continue
		}
		e.buf = append(e.buf, '"')
		for {
			j := strings.IndexByte(v, '"')
			if j < 0 {
				break
			}
			e.buf = append(append(e.buf, v[:j+1]...), '"')
			v = v[j+1:]
		}
		e.buf = append(append(e.buf, v...), '"')
	}
	e.buf = append(e.buf, '\r', '\n')
	return nil
}

// csvQuote reports whether a cell is written quoted: it holds a comma, a
// quote or a line break (RFC 4180), a semicolon or a tab (the list
// separators of other spreadsheet locales and of TSV), or begins with a
// space.
func csvQuote(v string) bool {
	return v != "" && (v[0] == ' ' || strings.ContainsAny(v, ",\";\t\r\n"))
}

// EncodeAudit writes items as an export in format (FormatCSV or
// FormatJSONL) would: the benchmark's reference, the encoder without the
// store.
func EncodeAudit(w io.Writer, format string, items []apiitem.Item) error {
	enc := newAuditEncoder(format)
	if err := enc.start(w); err != nil {
		return err
	}
	for _, it := range items {
		if err := enc.write(w, it); err != nil {
			return err
		}
	}
	return enc.flush()
}

func newAuditEncoder(format string) *encoder[apiitem.Item] {
	return &encoder[apiitem.Item]{header: AuditCSVHeader, row: auditRow, csv: format == FormatCSV}
}

func newExecutionEncoder(format string) *encoder[apiitem.ExecutionItem] {
	return &encoder[apiitem.ExecutionItem]{header: ExecutionCSVHeader, row: executionRow, csv: format == FormatCSV}
}

// CSVSafe defuses a cell that a spreadsheet would read as a formula (OWASP
// "CSV injection"): one beginning with = + - @, a tab or a carriage
// return is prefixed with a single quote; so is such a character right
// after a semicolon, a tab or a line break inside the cell, where a
// spreadsheet that splits on that separator (a locale whose list separator
// is ";", a TSV import, a reader that ignores quotes) would begin a new
// cell. A comma is not such a place: every cell holding one is quoted
// (RFC 4180), and a negative number after a comma in the data column's
// JSON must stay JSON.
func CSVSafe(v string) string {
	if v == "" {
		return v
	}
	if csvTrigger(v[0]) {
		v = "'" + v
	}
	if !strings.ContainsAny(v, ";\t\r\n") {
		return v
	}
	var b strings.Builder
	last := 0
	for i := 0; i+1 < len(v); i++ {
		switch v[i] {
		case ';', '\t', '\r', '\n':
			if csvTrigger(v[i+1]) {
				b.WriteString(v[last : i+1])
				b.WriteByte('\'')
				last = i + 1
			}
		}
	}
	if last == 0 {
		return v
	}
	b.WriteString(v[last:])
	return b.String()
}

// csvTrigger reports whether a cell (or a part of one a spreadsheet may
// split off) beginning with c is read as a formula.
func csvTrigger(c byte) bool {
	switch c {
	case '=', '+', '-', '@', '\t', '\r':
		return true
	}
	return false
}

func str(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// jsonCell is v as compact JSON, or empty for null.
func jsonCell(v any) (string, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("encode cell: %w", err)
	}
	if string(b) == "null" {
		return "", nil
	}
	return string(b), nil
}

// compactJSON is the stored JSON raw as one compact cell, empty for none
// or null. JSON without a space, tab or line break is compact already and
// is copied as it is (the common case; json.Marshal took a quarter of an
// export's encoding time on it).
func compactJSON(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	if bytes.IndexAny(raw, " \t\r\n") < 0 {
		return string(raw), nil // validated by ingest, stored as sent
	}
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return "", fmt.Errorf("encode cell: %w", err)
	}
	return b.String(), nil
}

func auditRow(it apiitem.Item) ([]string, error) {
	data, err := compactJSON(it.Data)
	if err != nil {
		return nil, err
	}
	return []string{it.ID, it.EventID, it.Timestamp, str(it.ClientIP), it.Action, it.Source, it.DisplayName,
		str(it.CustomerID), it.OrganizationID, str(it.ProjectID), it.PrincipalID, str(it.UserID), it.PrincipalType,
		str(it.ResourceType), str(it.ResourceID), str(it.ResourceDisplay), data, it.CreatedTime, indexCell(it.LeafIndex)}, nil
}

func executionRow(it apiitem.ExecutionItem) ([]string, error) {
	tool, err := jsonCell(it.Tool)
	if err != nil {
		return nil, err
	}
	var errCell string
	if it.Error != nil {
		if errCell, err = jsonCell(it.Error); err != nil {
			return nil, err
		}
	}
	hooks, err := jsonCell(it.Hooks)
	if err != nil {
		return nil, err
	}
	return []string{it.ExecutionID, it.EventID, it.OrganizationID, str(it.ProjectID), it.UserID,
		it.PrincipalID, it.PrincipalType, it.DisplayName, str(it.ClientIP), tool, it.ToolName, it.StartedAt,
		it.EndedAt, strconv.FormatFloat(it.DurationMS, 'f', -1, 64), strconv.FormatBool(it.Success),
		it.ExecutionCode, errCell, hooks, it.CreatedTime, indexCell(it.LeafIndex)}, nil
}

// indexCell is a leaf_index as a CSV cell, empty for null.
func indexCell(x *int64) string {
	if x == nil {
		return ""
	}
	return strconv.FormatInt(*x, 10)
}
