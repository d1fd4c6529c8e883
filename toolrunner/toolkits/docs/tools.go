package docs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	gdocs "google.golang.org/api/docs/v1"
	"google.golang.org/api/drive/v3"

	"github.com/auditrail/auditrail/toolrunner"
	"github.com/auditrail/auditrail/toolrunner/toolkits/docs/docmd"
)

// Tools returns the 13 tools.
func (t *Toolkit) Tools() []toolrunner.Tool {
	return []toolrunner.Tool{
		tool{t, defCommentOnDocument(), t.commentOnDocument},
		tool{t, defCreateBlankDocument(), t.createBlankDocument},
		tool{t, defCreateDocumentFromText(), t.createDocumentFromText},
		tool{t, defEditDocument(), t.editDocument},
		tool{t, defGenerateGoogleFilePickerUrl(), nil},
		tool{t, defGetDocumentAsDocmd(), t.getDocumentAsDocmd},
		tool{t, defGetDocumentByID(), t.getDocumentByID},
		tool{t, defGetDocumentMetadata(), t.getDocumentMetadata},
		tool{t, defInsertTextAtEndOfDocument(), t.insertTextAtEnd},
		tool{t, defListDocumentComments(), t.listDocumentComments},
		tool{t, defSearchAndRetrieveDocuments(), t.searchAndRetrieve},
		tool{t, defSearchDocuments(), t.searchDocuments},
		tool{t, defWhoAmI(), t.whoAmI},
	}
}

// tool runs one tool with the call's clients; run nil is the picker, which
// needs no API client.
type tool struct {
	t   *Toolkit
	def toolrunner.Definition
	run func(ctx context.Context, c *clients, call toolrunner.Call) (any, error)
}

func (x tool) Definition() toolrunner.Definition { return x.def }

func (x tool) Run(ctx context.Context, call toolrunner.Call) (any, error) {
	var out any
	var err error
	if x.run == nil {
		out, err = x.t.pickerURL(ctx, call)
	} else {
		var c *clients
		if c, err = x.t.clientsFor(ctx, call); err == nil {
			out, err = x.run(ctx, c, call)
		}
	}
	if err == nil {
		return out, nil
	}
	if ue, ok := errors.AsType[*upstreamError](err); ok {
		x.t.cfg.Log.Warn("google api error", "toolkit", Name, "tool", x.def.Name, "err", ue.detail)
		return nil, ue.te
	}
	return nil, err
}

// str answers a string input ("" when absent).
func str(in map[string]any, name string) string {
	s, _ := in[name].(string)
	return s
}

func boolean(in map[string]any, name string) bool {
	b, _ := in[name].(bool)
	return b
}

func strs(in map[string]any, name string) []string {
	ss, _ := in[name].([]string)
	return ss
}

func docID(in map[string]any) (string, error) {
	id := strings.TrimSpace(str(in, "document_id"))
	if id == "" {
		return "", toolrunner.Errorf(toolrunner.KindInputInvalid, false, "document_id: must not be empty")
	}
	return id, nil
}

func docWhat(id string) string { return fmt.Sprintf("document %q", id) }

// getDocument reads a document with every tab's content. The answer comes
// from a tenant-chosen endpoint: one whose indices, sizes or nesting no
// Google document has (docmd.Check) is refused before any tool sizes,
// slices or loops over them.
func getDocument(ctx context.Context, c *clients, id string) (*gdocs.Document, error) {
	d, err := c.docs.Documents.Get(id).IncludeTabsContent(true).Context(ctx).Do()
	if err == nil {
		err = docmd.Check(d)
	}
	if err != nil {
		return nil, apiError(err, docWhat(id))
	}
	return d, nil
}

// asMap turns an API object into the JSON object the caller receives.
func asMap(v any) (map[string]any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encode: %w", err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("decode: %w", err)
	}
	return m, nil
}

func created(d *gdocs.Document) map[string]any {
	return map[string]any{"title": d.Title, "documentId": d.DocumentId, "documentUrl": documentURL(d.DocumentId)}
}

func (t *Toolkit) createBlankDocument(ctx context.Context, c *clients, call toolrunner.Call) (any, error) {
	d, err := c.docs.Documents.Create(&gdocs.Document{Title: str(call.Inputs, "title")}).Context(ctx).Do()
	if err != nil {
		return nil, apiError(err, "the new document")
	}
	return created(d), nil
}

func (t *Toolkit) createDocumentFromText(ctx context.Context, c *clients, call toolrunner.Call) (any, error) {
	text := str(call.Inputs, "text_content")
	var reqs []*gdocs.Request
	switch strings.ToLower(str(call.Inputs, "input_format")) {
	case InputPlain:
		if text != "" {
			reqs = []*gdocs.Request{{InsertText: &gdocs.InsertTextRequest{Text: text, Location: &gdocs.Location{Index: 1}}}}
		}
	default:
		reqs = markdownRequests(text)
	}
	d, err := c.docs.Documents.Create(&gdocs.Document{Title: str(call.Inputs, "title")}).Context(ctx).Do()
	if err != nil {
		return nil, apiError(err, "the new document")
	}
	if len(reqs) > 0 {
		if _, err := c.docs.Documents.BatchUpdate(d.DocumentId, &gdocs.BatchUpdateDocumentRequest{Requests: reqs}).Context(ctx).Do(); err != nil {
			te := toolrunner.AsError(apiError(err, docWhat(d.DocumentId)))
			return nil, &toolrunner.Error{Kind: te.Kind, CanRetry: false,
				Message: fmt.Sprintf("document %s (%s) was created but its content could not be written: %s", d.DocumentId, documentURL(d.DocumentId), te.Message)}
		}
	}
	return created(d), nil
}

func (t *Toolkit) getDocumentAsDocmd(ctx context.Context, c *clients, call toolrunner.Call) (any, error) {
	id, err := docID(call.Inputs)
	if err != nil {
		return nil, err
	}
	d, err := getDocument(ctx, c, id)
	if err != nil {
		return nil, err
	}
	out, err := docmd.Render(d, docmd.Options{TabID: str(call.Inputs, "tab_id")})
	if errors.Is(err, docmd.ErrTabNotFound) {
		return nil, toolrunner.Errorf(toolrunner.KindNotFound, false, "document %q has no tab %q; GetDocumentMetadata lists its tabs", id, str(call.Inputs, "tab_id"))
	}
	if err != nil {
		return nil, apiError(fmt.Errorf("render DocMD: %w", err), docWhat(id))
	}
	return out, nil
}

func (t *Toolkit) getDocumentByID(ctx context.Context, c *clients, call toolrunner.Call) (any, error) {
	id, err := docID(call.Inputs)
	if err != nil {
		return nil, err
	}
	d, err := getDocument(ctx, c, id)
	if err != nil {
		return nil, err
	}
	return asMap(d)
}

// walkTabs visits tabs depth-first.
func walkTabs(tabs []*gdocs.Tab, f func(*gdocs.Tab)) {
	for _, tb := range tabs {
		f(tb)
		walkTabs(tb.ChildTabs, f)
	}
}

// bodyStats answers the number of characters (Unicode code points of the
// text, paragraph ends included) of a body and its end index (UTF-16).
func bodyStats(b *gdocs.Body) (chars, end int64) {
	if b == nil {
		return 0, 0
	}
	var walk func(els []*gdocs.StructuralElement)
	walk = func(els []*gdocs.StructuralElement) {
		for _, e := range els {
			end = max(end, e.EndIndex)
			switch {
			case e.Paragraph != nil:
				for _, pe := range e.Paragraph.Elements {
					if pe.TextRun != nil {
						chars += int64(utf8.RuneCountInString(pe.TextRun.Content))
					}
				}
			case e.Table != nil:
				for _, r := range e.Table.TableRows {
					for _, cell := range r.TableCells {
						walk(cell.Content)
					}
				}
			case e.TableOfContents != nil:
				walk(e.TableOfContents.Content)
			}
		}
	}
	walk(b.Content)
	return chars, end
}

func (t *Toolkit) getDocumentMetadata(ctx context.Context, c *clients, call toolrunner.Call) (any, error) {
	id, err := docID(call.Inputs)
	if err != nil {
		return nil, err
	}
	d, err := getDocument(ctx, c, id)
	if err != nil {
		return nil, err
	}
	var total int64
	var tabs func([]*gdocs.Tab) []map[string]any
	tabs = func(ts []*gdocs.Tab) []map[string]any {
		out := []map[string]any{}
		for _, tb := range ts {
			p := tb.TabProperties
			if p == nil {
				p = &gdocs.TabProperties{}
			}
			var chars, end int64
			if tb.DocumentTab != nil {
				chars, end = bodyStats(tb.DocumentTab.Body)
			}
			total += chars
			out = append(out, map[string]any{"tab_id": p.TabId, "title": p.Title, "index": p.Index, "nesting_level": p.NestingLevel,
				"character_count": chars, "end_index": end, "child_tabs": tabs(tb.ChildTabs)})
		}
		return out
	}
	tabList := tabs(d.Tabs)
	if len(d.Tabs) == 0 { // a document read without tabs content
		total, _ = bodyStats(d.Body)
	}
	return map[string]any{"title": d.Title, "document_id": d.DocumentId, "document_url": documentURL(d.DocumentId),
		"revision_id": d.RevisionId, "total_characters": total, "tabs": tabList}, nil
}

// firstTabID answers the id of the document's first tab ("" without tabs).
func firstTabID(d *gdocs.Document) string {
	if len(d.Tabs) > 0 && d.Tabs[0].TabProperties != nil {
		return d.Tabs[0].TabProperties.TabId
	}
	return ""
}

func (t *Toolkit) insertTextAtEnd(ctx context.Context, c *clients, call toolrunner.Call) (any, error) {
	id, err := docID(call.Inputs)
	if err != nil {
		return nil, err
	}
	text := str(call.Inputs, "text_content")
	if text == "" {
		return nil, toolrunner.Errorf(toolrunner.KindInputInvalid, false, "text_content: must not be empty")
	}
	d, err := getDocument(ctx, c, id)
	if err != nil {
		return nil, err
	}
	req := &gdocs.BatchUpdateDocumentRequest{Requests: []*gdocs.Request{{InsertText: &gdocs.InsertTextRequest{
		Text: text, EndOfSegmentLocation: &gdocs.EndOfSegmentLocation{TabId: firstTabID(d)}}}}}
	resp, err := c.docs.Documents.BatchUpdate(id, req).Context(ctx).Do()
	if err != nil {
		return nil, apiError(err, docWhat(id))
	}
	return asMap(resp)
}

// commentFields are the comment fields answered (Drive requires a fields
// selector on every comments method).
const commentFields = "id,content,htmlContent,createdTime,modifiedTime,resolved,deleted,quotedFileContent,author(displayName,emailAddress,me)," +
	"replies(id,content,createdTime,modifiedTime,deleted,action,author(displayName,emailAddress,me))"

func (t *Toolkit) commentOnDocument(ctx context.Context, c *clients, call toolrunner.Call) (any, error) {
	id, err := docID(call.Inputs)
	if err != nil {
		return nil, err
	}
	text := str(call.Inputs, "comment_text")
	if strings.TrimSpace(text) == "" {
		return nil, toolrunner.Errorf(toolrunner.KindInputInvalid, false, "comment_text: must not be empty")
	}
	cm, err := c.drive.Comments.Create(id, &drive.Comment{Content: text}).Fields(commentFields).Context(ctx).Do()
	if err != nil {
		return nil, apiError(err, docWhat(id))
	}
	return map[string]any{"comment_id": cm.Id, "documentId": id, "documentUrl": documentURL(id), "content": cm.Content,
		"created_time": cm.CreatedTime}, nil
}

// maxComments bounds what ListDocumentComments gathers over pages, and
// maxCommentPages the pages it asks for (a provider answering empty pages
// with a next page token forever).
const (
	maxComments     = 1000
	maxCommentPages = 50
)

func (t *Toolkit) listDocumentComments(ctx context.Context, c *clients, call toolrunner.Call) (any, error) {
	id, err := docID(call.Inputs)
	if err != nil {
		return nil, err
	}
	comments := []*drive.Comment{}
	truncated, pages := false, 0
	// The comments kept, over every page, weigh at most what one answer
	// may: a provider answering page after page of huge comments fills no
	// more memory than one huge page.
	budget := t.cfg.MaxResponseBytes
	err = c.drive.Comments.List(id).IncludeDeleted(boolean(call.Inputs, "include_deleted")).PageSize(100).
		Fields("nextPageToken,comments("+commentFields+")").Pages(ctx, func(l *drive.CommentList) error {
		for _, cm := range l.Comments {
			if cm == nil {
				continue
			}
			if budget -= commentSize(cm); budget < 0 {
				truncated = true
				return errStop
			}
			comments = append(comments, cm)
		}
		pages++
		switch {
		case len(comments) >= maxComments:
			comments, truncated = comments[:maxComments], true
			return errStop
		case pages >= maxCommentPages:
			truncated = l.NextPageToken != ""
			return errStop
		}
		return nil
	})
	if err != nil && !errors.Is(err, errStop) {
		return nil, apiError(err, docWhat(id))
	}
	list := make([]map[string]any, 0, len(comments))
	for _, cm := range comments {
		m, err := asMap(cm)
		if err != nil {
			return nil, err
		}
		list = append(list, m)
	}
	return map[string]any{"documentId": id, "documentUrl": documentURL(id), "comments": list, "comments_count": len(list), "truncated": truncated}, nil
}

var errStop = errors.New("enough")

// commentSize is about what a comment holds in memory: its texts.
func commentSize(cm *drive.Comment) int64 {
	n := int64(len(cm.Content) + len(cm.HtmlContent) + 64)
	if q := cm.QuotedFileContent; q != nil {
		n += int64(len(q.Value))
	}
	for _, r := range cm.Replies {
		if r != nil {
			n += int64(len(r.Content)+len(r.HtmlContent)) + 64
		}
	}
	return n
}

func (t *Toolkit) whoAmI(ctx context.Context, c *clients, call toolrunner.Call) (any, error) {
	p, err := c.people.People.Get("people/me").PersonFields("names,emailAddresses,photos,locales").Context(ctx).Do()
	if err != nil {
		return nil, apiError(err, "the user's profile")
	}
	about, err := c.drive.About.Get().Fields("user(displayName,emailAddress,photoLink,permissionId),storageQuota,canCreateDrives,maxUploadSize").Context(ctx).Do()
	if err != nil {
		return nil, apiError(err, "the user's Drive")
	}
	out := map[string]any{"resource_name": p.ResourceName}
	for _, n := range p.Names {
		if n.Metadata == nil || n.Metadata.Primary || out["name"] == nil {
			out["name"], out["given_name"], out["family_name"] = n.DisplayName, n.GivenName, n.FamilyName
		}
	}
	for _, e := range p.EmailAddresses {
		if e.Metadata == nil || e.Metadata.Primary || out["email"] == nil {
			out["email"] = e.Value
		}
	}
	for _, ph := range p.Photos {
		if ph.Metadata == nil || ph.Metadata.Primary || out["profile_picture_url"] == nil {
			out["profile_picture_url"] = ph.Url
		}
	}
	if len(p.Locales) > 0 {
		out["locale"] = p.Locales[0].Value
	}
	drv := map[string]any{"can_create_shared_drives": about.CanCreateDrives, "max_upload_size": about.MaxUploadSize}
	if u := about.User; u != nil {
		drv["display_name"], drv["email"], drv["photo_link"], drv["permission_id"] = u.DisplayName, u.EmailAddress, u.PhotoLink, u.PermissionId
	}
	if q := about.StorageQuota; q != nil {
		drv["storage_quota"] = map[string]any{"limit": q.Limit, "usage": q.Usage, "usage_in_drive": q.UsageInDrive, "usage_in_drive_trash": q.UsageInDriveTrash}
	}
	out["drive"] = drv
	out["access"] = map[string]any{
		"scopes": call.Connections[Provider].Scopes,
		"note":   "this app sees only the documents it created and those the user picked (GenerateGoogleFilePickerUrl)",
	}
	return out, nil
}

func (t *Toolkit) pickerURL(ctx context.Context, call toolrunner.Call) (any, error) {
	if t.cfg.Picker == nil {
		return nil, toolrunner.Errorf("CONFIGURATION_ERROR", false, "this platform has no file picker configured")
	}
	u, exp, err := t.cfg.Picker.PickerURL(ctx, call.Org, call.Project, call.UserID, Provider)
	if err != nil {
		var te *toolrunner.Error
		if errors.As(err, &te) {
			return nil, te
		}
		return nil, &upstreamError{toolrunner.Errorf(toolrunner.KindUpstream, true, "the file picker URL could not be issued"), err}
	}
	return map[string]any{"url": u, "expires_at": exp.UTC(),
		"instructions": "Give this URL to the user: they open it in a browser before it expires, pick the Google documents this app may use, and confirm; then retry the tool that failed."}, nil
}
