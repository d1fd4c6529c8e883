package docs

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"

	"golang.org/x/sync/errgroup"
	gdocs "google.golang.org/api/docs/v1"
	"google.golang.org/api/drive/v3"
	"google.golang.org/api/googleapi"

	"github.com/auditrail/auditrail/internal/pagetoken"
	"github.com/auditrail/auditrail/toolrunner"
	"github.com/auditrail/auditrail/toolrunner/toolkits/docs/docmd"
)

// retrieveParallel bounds the documents SearchAndRetrieveDocuments reads at
// once.
const retrieveParallel = 4

// MimeDocument is the Drive MIME type of a Google document.
const MimeDocument = "application/vnd.google-apps.document"

// driveQuery is one Drive files.list query, as sent.
type driveQuery struct {
	Q         string `json:"q"`
	Corpora   string `json:"corpora"`
	DriveID   string `json:"driveId,omitempty"`
	AllDrives bool   `json:"allDrives,omitempty"`
	OrderBy   string `json:"orderBy,omitempty"`
}

// quote writes a Drive query string literal: backslash first, then the
// quote, escaped with a backslash.
func quote(s string) string {
	s = strings.ReplaceAll(s, `\`, `\\`)
	return "'" + strings.ReplaceAll(s, `'`, `\'`) + "'"
}

// buildQuery turns the search tools' inputs into a Drive query.
func buildQuery(in map[string]any) (driveQuery, error) {
	terms := []string{"mimeType = " + quote(MimeDocument), "trashed = false"}
	contains, notContains := strs(in, "document_contains"), strs(in, "document_not_contains")
	for i, s := range contains {
		if strings.TrimSpace(s) == "" {
			return driveQuery{}, invalid("document_contains[%d]: must not be empty", i)
		}
		terms = append(terms, "fullText contains "+quote(s))
	}
	for i, s := range notContains {
		if strings.TrimSpace(s) == "" {
			return driveQuery{}, invalid("document_not_contains[%d]: must not be empty", i)
		}
		terms = append(terms, "not fullText contains "+quote(s))
	}
	dq := driveQuery{Q: strings.Join(terms, " and "), Corpora: "user"}
	shared, domain := boolean(in, "include_shared_drives"), boolean(in, "include_organization_domain_documents")
	switch id := strings.TrimSpace(str(in, "search_only_in_shared_drive_id")); {
	case id != "":
		dq.Corpora, dq.DriveID, dq.AllDrives = "drive", id, true
	case shared:
		dq.Corpora, dq.AllDrives = "allDrives", true
	case domain:
		dq.Corpora = "domain"
	}
	// Drive does not sort full-text searches: order_by is ignored then
	// (seeds/002).
	if len(contains) == 0 && len(notContains) == 0 {
		order := strs(in, "order_by")
		if len(order) == 0 {
			order = []string{"modifiedTime desc"}
		}
		for i, o := range order {
			if !slices.Contains(OrderByValues, o) {
				return driveQuery{}, invalid("order_by[%d]: %q is not one of %s", i, o, joinValues(OrderByValues))
			}
		}
		dq.OrderBy = strings.Join(order, ",")
	}
	return dq, nil
}

// tokenPurpose starts the search tools' pagination tokens (version 2:
// signed, internal/pagetoken).
const tokenPurpose = "dtk2"

// binding is what a pagination token is bound to: the user, the API base
// and the query.
func (q driveQuery) binding(user, base string) []byte {
	b, _ := json.Marshal([]any{user, base, q})
	return b
}

// wrapToken makes Drive's nextPageToken a token signed with the toolkit's
// key and bound to the query; "" on the last page.
func (t *Toolkit) wrapToken(q driveQuery, user, base, next string) (string, error) {
	tok, err := t.tokens.Seal(q.binding(user, base), []byte(next))
	if err != nil {
		return "", &upstreamError{toolrunner.Errorf(toolrunner.KindUpstream, false, "Google answered a next page token too long to hand on"), err}
	}
	return tok, nil
}

// unwrapToken answers Drive's page token of a token the toolkit signed for
// this query, refusing any other.
func (t *Toolkit) unwrapToken(q driveQuery, user, base, tok string) (string, error) {
	if tok == "" {
		return "", nil
	}
	p, err := t.tokens.Open(tok, q.binding(user, base))
	switch {
	case errors.Is(err, pagetoken.ErrBinding):
		return "", invalid("pagination_token: it continues a search with other filters, order or drives; repeat that search's parameters exactly, or leave pagination_token out to start again")
	case err != nil:
		return "", invalid("pagination_token: not a token of this search; use the pagination_token of the previous answer as is")
	}
	return string(p), nil
}

const fileFields = "id,name,createdTime,modifiedTime,driveId,owners(displayName,emailAddress),lastModifyingUser(displayName,emailAddress)"

func fileMeta(f *drive.File) map[string]any {
	m := map[string]any{"id": f.Id, "title": f.Name, "url": documentURL(f.Id), "created_time": f.CreatedTime, "modified_time": f.ModifiedTime}
	if f.DriveId != "" {
		m["drive_id"] = f.DriveId
	}
	owners := []map[string]any{}
	for _, o := range f.Owners {
		owners = append(owners, map[string]any{"name": o.DisplayName, "email": o.EmailAddress})
	}
	m["owners"] = owners
	if u := f.LastModifyingUser; u != nil {
		m["last_modified_by"] = map[string]any{"name": u.DisplayName, "email": u.EmailAddress}
	}
	return m
}

// search lists one page of documents.
func (t *Toolkit) search(ctx context.Context, c *clients, call toolrunner.Call) (*drive.FileList, driveQuery, error) {
	q, err := buildQuery(call.Inputs)
	if err != nil {
		return nil, q, err
	}
	page, err := t.unwrapToken(q, call.UserID, c.docsEndpoint, str(call.Inputs, "pagination_token"))
	if err != nil {
		return nil, q, err
	}
	limit, _ := call.Inputs["limit"].(int64)
	if limit <= 0 {
		limit = SearchDefaultLimit
	}
	lc := c.drive.Files.List().Q(q.Q).Corpora(q.Corpora).PageSize(limit).Fields("nextPageToken,incompleteSearch,files(" + fileFields + ")").Context(ctx)
	if q.DriveID != "" {
		lc = lc.DriveId(q.DriveID)
	}
	if q.AllDrives {
		lc = lc.IncludeItemsFromAllDrives(true).SupportsAllDrives(true)
	}
	if q.OrderBy != "" {
		lc = lc.OrderBy(q.OrderBy)
	}
	if page != "" {
		lc = lc.PageToken(page)
	}
	fl, err := lc.Do()
	if ge, ok := errors.AsType[*googleapi.Error](err); ok && ge.Code == http.StatusNotFound && q.DriveID != "" {
		return nil, q, toolrunner.Errorf(toolrunner.KindNotFound, false, "shared drive %q was not found or the user is not one of its members", q.DriveID)
	}
	if err != nil {
		return nil, q, apiError(err, "the document search")
	}
	// At most the page asked for, no empty entries: the number of files is
	// the provider's, and each may cost a documents.get.
	fl.Files = slices.DeleteFunc(fl.Files, func(f *drive.File) bool { return f == nil })
	fl.Files = fl.Files[:min(int64(len(fl.Files)), limit)]
	return fl, q, nil
}

func (t *Toolkit) searchDocuments(ctx context.Context, c *clients, call toolrunner.Call) (any, error) {
	fl, q, err := t.search(ctx, c, call)
	if err != nil {
		return nil, err
	}
	docs := make([]map[string]any, 0, len(fl.Files))
	for _, f := range fl.Files {
		docs = append(docs, fileMeta(f))
	}
	return t.searchAnswer(docs, q, call.UserID, c.docsEndpoint, fl)
}

// searchAnswer is the answer of both search tools; incomplete_search says
// that Drive did not search every drive asked for (allDrives corpora).
func (t *Toolkit) searchAnswer(docs []map[string]any, q driveQuery, user, base string, fl *drive.FileList) (map[string]any, error) {
	tok, err := t.wrapToken(q, user, base, fl.NextPageToken)
	if err != nil {
		return nil, err
	}
	out := map[string]any{"documents_count": len(docs), "documents": docs,
		"pagination_token": tok, "has_more": fl.NextPageToken != ""}
	if fl.IncompleteSearch {
		out["incomplete_search"] = true
	}
	return out, nil
}

func (t *Toolkit) searchAndRetrieve(ctx context.Context, c *clients, call toolrunner.Call) (any, error) {
	format := strings.ToLower(str(call.Inputs, "return_format"))
	if format == "" {
		format = FormatMarkdown
	}
	fl, q, err := t.search(ctx, c, call)
	if err != nil {
		return nil, err
	}
	// The documents are read a few at a time, each answer in its place; a
	// document that cannot be read carries its error, the others still
	// answer. Each goroutine runs through toolrunner.Safely: a panic there
	// would end the process, not this call.
	docs := make([]map[string]any, len(fl.Files))
	// The contents answered weigh at most what one provider answer may:
	// a document past the budget carries an error instead of its content.
	var budget atomic.Int64
	budget.Store(t.cfg.MaxResponseBytes)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(retrieveParallel)
	for i, f := range fl.Files {
		g.Go(func() error {
			return toolrunner.Safely(t.cfg.Log, func() error {
				m := fileMeta(f)
				docs[i] = m
				d, err := getDocument(gctx, c, f.Id)
				if err != nil {
					te := toolrunner.AsError(err)
					m["error"] = map[string]any{"kind": te.Kind, "message": te.Message}
					return nil
				}
				m["revision_id"] = d.RevisionId
				m["tabs"] = tabsMeta(d.Tabs)
				m["return_format"] = format
				body, err := content(mainDocument(d), format)
				if err != nil {
					return err
				}
				if budget.Add(-contentSize(body)) < 0 {
					m["error"] = map[string]any{"kind": toolrunner.KindUpstream,
						"message": "the documents found are too large to answer together; read this one alone (GetDocumentAsDocmd) or ask for fewer (limit)"}
					return nil
				}
				m["content"] = body
				return nil
			})
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return t.searchAnswer(docs, q, call.UserID, c.docsEndpoint, fl)
}

// contentSize is about what a rendered content holds in memory.
func contentSize(c any) int64 {
	if s, ok := c.(string); ok {
		return int64(len(s))
	}
	b, _ := json.Marshal(c)
	return int64(len(b))
}

// mainDocument answers the document reduced to its main body: the first
// tab's body, lists, objects and footnotes, no headers, footers, other
// tabs.
func mainDocument(d *gdocs.Document) *gdocs.Document {
	m := &gdocs.Document{DocumentId: d.DocumentId, Title: d.Title, RevisionId: d.RevisionId}
	if len(d.Tabs) == 0 || d.Tabs[0].DocumentTab == nil {
		m.Body, m.Lists, m.InlineObjects, m.Footnotes, m.NamedStyles, m.DocumentStyle = d.Body, d.Lists, d.InlineObjects, d.Footnotes, d.NamedStyles, d.DocumentStyle
		return m
	}
	dt := d.Tabs[0].DocumentTab
	m.Body, m.Lists, m.InlineObjects, m.Footnotes, m.NamedStyles, m.DocumentStyle = dt.Body, dt.Lists, dt.InlineObjects, dt.Footnotes, dt.NamedStyles, dt.DocumentStyle
	return m
}

// tabsMeta answers the tabs' properties (no content), nested.
func tabsMeta(tabs []*gdocs.Tab) []map[string]any {
	out := []map[string]any{}
	for _, tb := range tabs {
		p := tb.TabProperties
		if p == nil {
			p = &gdocs.TabProperties{}
		}
		out = append(out, map[string]any{"tab_id": p.TabId, "title": p.Title, "index": p.Index, "nesting_level": p.NestingLevel,
			"child_tabs": tabsMeta(tb.ChildTabs)})
	}
	return out
}

// content renders the main document in a return format.
func content(d *gdocs.Document, format string) (any, error) {
	switch format {
	case FormatDocMD:
		return docmd.Render(d, docmd.Options{})
	case FormatJSON:
		return asMap(d)
	}
	return exportText(d, format)
}
