package google_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.uber.org/goleak"
	docs "google.golang.org/api/docs/v1"
	"google.golang.org/api/googleapi"
	"google.golang.org/api/option"

	"github.com/auditrail/auditrail/internal/emulators/google"
	"github.com/auditrail/auditrail/internal/emulators/oauth"
	"github.com/auditrail/auditrail/internal/emulators/oauth/oauthtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type env struct {
	url  string
	auth *httptest.Server
}

func newEnv(t *testing.T) *env {
	t.Helper()
	o, err := oauth.New(oauth.Config{Clients: []oauth.Client{{ID: "app", Secret: "s", RedirectURIs: []string{"https://app.example/cb"}}},
		Users:       []oauth.User{{ID: "u1", Email: "ann@example.com"}, {ID: "u2", Email: "ben@example.com"}},
		AutoApprove: true})
	if err != nil {
		t.Fatal(err)
	}
	g, err := google.New(google.Config{Auth: o})
	if err != nil {
		t.Fatal(err)
	}
	as := httptest.NewServer(o.Handler())
	gs := httptest.NewServer(g.Handler())
	t.Cleanup(func() { gs.Close(); as.Close() })
	return &env{url: gs.URL, auth: as}
}

// token runs the real authorization-code flow with PKCE for the user.
func (e *env) token(t *testing.T, user string, scopes ...string) string {
	t.Helper()
	return oauthtest.Token(t, e.auth.URL, oauthtest.Client{ID: "app", Secret: "s", RedirectURI: "https://app.example/cb"}, user, scopes...)
}

type bearer struct{ tok string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	if b.tok != "" {
		r.Header.Set("Authorization", "Bearer "+b.tok)
	}
	return http.DefaultTransport.RoundTrip(r)
}

func (e *env) docs(t *testing.T, tok string) *docs.Service {
	t.Helper()
	hc := &http.Client{Transport: bearer{tok}}
	t.Cleanup(hc.CloseIdleConnections)
	svc, err := docs.NewService(context.Background(), option.WithEndpoint(e.url+"/"), option.WithHTTPClient(hc))
	if err != nil {
		t.Fatal(err)
	}
	return svc
}

// text answers the body's text with markers: '#' for the section break,
// '[' table, '|' row, '/' cell, ']' table end; it also checks that indices
// are contiguous from 0.
func text(t *testing.T, d *docs.Document) string {
	t.Helper()
	var b strings.Builder
	next := int64(0)
	var walk func(els []*docs.StructuralElement)
	check := func(start, end int64, what string) {
		if start != next {
			t.Fatalf("%s starts at %d, want %d", what, start, next)
		}
		next = end
	}
	walk = func(els []*docs.StructuralElement) {
		for _, el := range els {
			switch {
			case el.SectionBreak != nil:
				check(el.StartIndex, el.EndIndex, "section break")
				b.WriteString("#")
			case el.Paragraph != nil:
				for _, pe := range el.Paragraph.Elements {
					check(pe.StartIndex, pe.EndIndex, "paragraph element")
					if pe.TextRun != nil {
						b.WriteString(pe.TextRun.Content)
					}
					if pe.PageBreak != nil {
						b.WriteString("\f")
					}
				}
			case el.Table != nil:
				check(el.StartIndex, el.StartIndex+1, "table")
				b.WriteString("[")
				for _, r := range el.Table.TableRows {
					check(r.StartIndex, r.StartIndex+1, "row")
					b.WriteString("|")
					for _, c := range r.TableCells {
						check(c.StartIndex, c.StartIndex+1, "cell")
						b.WriteString("/")
						walk(c.Content)
						if c.EndIndex != next {
							t.Fatalf("cell ends at %d, content at %d", c.EndIndex, next)
						}
					}
				}
				check(el.EndIndex-1, el.EndIndex, "table end")
				b.WriteString("]")
			}
		}
	}
	walk(d.Body.Content)
	return b.String()
}

func apiCode(err error) (int, string) {
	var ge *googleapi.Error
	if errors.As(err, &ge) {
		return ge.Code, ge.Message
	}
	return 0, ""
}

func TestDocsCreateGetBatchUpdate(t *testing.T) {
	e := newEnv(t)
	svc := e.docs(t, e.token(t, "ann@example.com", google.ScopeDocs))
	ctx := context.Background()
	d, err := svc.Documents.Create(&docs.Document{Title: "Plan"}).Do()
	if err != nil {
		t.Fatal(err)
	}
	if d.Title != "Plan" || d.DocumentId == "" || text(t, d) != "#\n" {
		t.Fatalf("created %q %q %q", d.Title, d.DocumentId, text(t, d))
	}
	rev0 := d.RevisionId
	res, err := svc.Documents.BatchUpdate(d.DocumentId, &docs.BatchUpdateDocumentRequest{Requests: []*docs.Request{
		{InsertText: &docs.InsertTextRequest{Location: &docs.Location{Index: 1}, Text: "Title\nHello wörld 😀\n"}},
		{UpdateParagraphStyle: &docs.UpdateParagraphStyleRequest{Range: &docs.Range{StartIndex: 1, EndIndex: 2},
			ParagraphStyle: &docs.ParagraphStyle{NamedStyleType: "HEADING_1"}, Fields: "namedStyleType"}},
		{UpdateTextStyle: &docs.UpdateTextStyleRequest{Range: &docs.Range{StartIndex: 7, EndIndex: 12},
			TextStyle: &docs.TextStyle{Bold: true}, Fields: "bold"}},
		{ReplaceAllText: &docs.ReplaceAllTextRequest{ContainsText: &docs.SubstringMatchCriteria{Text: "hello"}, ReplaceText: "Hi"}},
		{InsertTable: &docs.InsertTableRequest{EndOfSegmentLocation: &docs.EndOfSegmentLocation{}, Rows: 2, Columns: 2}},
	}, WriteControl: &docs.WriteControl{RequiredRevisionId: rev0}}).Context(ctx).Do()
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Replies) != 5 || res.Replies[3].ReplaceAllText.OccurrencesChanged != 1 || res.WriteControl.RequiredRevisionId == rev0 {
		t.Fatalf("replies %+v", res)
	}
	g, err := svc.Documents.Get(d.DocumentId).Do()
	if err != nil {
		t.Fatal(err)
	}
	// "😀" is two UTF-16 units: the table starts after them.
	if got, want := text(t, g), "#Title\nHi wörld 😀\n\n[|/\n/\n|/\n/\n]\n"; got != want {
		t.Fatalf("text %q, want %q", got, want)
	}
	body := g.Body.Content
	if body[1].Paragraph.ParagraphStyle.NamedStyleType != "HEADING_1" || body[2].Paragraph.ParagraphStyle.NamedStyleType != "NORMAL_TEXT" {
		t.Fatal("paragraph styles")
	}
	// "Hi" replaced the bold "Hello" and took its style; the rest is plain.
	if r := body[2].Paragraph.Elements; !r[0].TextRun.TextStyle.Bold || r[0].TextRun.Content != "Hi" || r[1].TextRun.TextStyle.Bold {
		t.Fatalf("first run %q bold=%v", r[0].TextRun.Content, r[0].TextRun.TextStyle.Bold)
	}
	if tb := body[4].Table; tb == nil || tb.Rows != 2 || tb.Columns != 2 || body[4].StartIndex != 20 {
		t.Fatalf("table %+v at %d", tb, body[4].StartIndex)
	}
	// The stale revision is refused as Google refuses it, and nothing changes.
	_, err = svc.Documents.BatchUpdate(d.DocumentId, &docs.BatchUpdateDocumentRequest{Requests: []*docs.Request{
		{InsertText: &docs.InsertTextRequest{Location: &docs.Location{Index: 1}, Text: "x"}}},
		WriteControl: &docs.WriteControl{RequiredRevisionId: rev0}}).Do()
	if code, _ := apiCode(err); code != 400 {
		t.Fatalf("stale revision: %v", err)
	}
	// includeTabsContent: legacy body empty, tabs filled.
	tg, err := svc.Documents.Get(d.DocumentId).IncludeTabsContent(true).Do()
	if err != nil || tg.Body != nil || len(tg.Tabs) != 1 || len(tg.Tabs[0].DocumentTab.Body.Content) != len(body) {
		t.Fatalf("tabs: %v %+v", err, tg)
	}
}

func TestDocsInvalidRequests(t *testing.T) {
	e := newEnv(t)
	svc := e.docs(t, e.token(t, "ann@example.com", google.ScopeDocs))
	d, err := svc.Documents.Create(&docs.Document{Title: "T"}).Do()
	if err != nil {
		t.Fatal(err)
	}
	// #Ab\n [ | / \n / \n ] \n   indices: 0 # ,1 A,2 b,3 \n,4 [,5 |,6 /,7 \n,8 /,9 \n,10 ],11 \n
	_, err = svc.Documents.BatchUpdate(d.DocumentId, &docs.BatchUpdateDocumentRequest{Requests: []*docs.Request{
		{InsertText: &docs.InsertTextRequest{Location: &docs.Location{Index: 1}, Text: "Ab"}},
		{InsertTable: &docs.InsertTableRequest{EndOfSegmentLocation: &docs.EndOfSegmentLocation{}, Rows: 1, Columns: 2}},
		{DeleteContentRange: &docs.DeleteContentRangeRequest{Range: &docs.Range{StartIndex: 3, EndIndex: 4}}},
	}}).Do()
	// The table is inserted after "Ab": its leading newline ends "Ab"'s
	// paragraph; deleting index 3..4 (that newline) would glue text to it.
	if code, msg := apiCode(err); code != 400 || !strings.HasPrefix(msg, "Invalid requests[2].deleteContentRange:") {
		t.Fatalf("glue to table: %v", err)
	}
	if _, err := svc.Documents.BatchUpdate(d.DocumentId, &docs.BatchUpdateDocumentRequest{Requests: []*docs.Request{
		{InsertText: &docs.InsertTextRequest{Location: &docs.Location{Index: 1}, Text: "Ab"}},
		{InsertTable: &docs.InsertTableRequest{EndOfSegmentLocation: &docs.EndOfSegmentLocation{}, Rows: 1, Columns: 2}},
	}}).Do(); err != nil {
		t.Fatal(err)
	}
	g, _ := svc.Documents.Get(d.DocumentId).Do()
	if got := text(t, g); got != "#Ab\n[|/\n/\n]\n" {
		t.Fatalf("atomicity: %q", got)
	}
	tests := []struct {
		name string
		req  *docs.Request
		want string
	}{
		{"insert at 0", &docs.Request{InsertText: &docs.InsertTextRequest{Location: &docs.Location{Index: 0}, Text: "x"}}, "insertText"},
		{"insert at table start", &docs.Request{InsertText: &docs.InsertTextRequest{Location: &docs.Location{Index: 4}, Text: "x"}}, "insertText"},
		{"insert at a cell marker", &docs.Request{InsertText: &docs.InsertTextRequest{Location: &docs.Location{Index: 8}, Text: "x"}}, "insertText"},
		{"insert past the end", &docs.Request{InsertText: &docs.InsertTextRequest{Location: &docs.Location{Index: 14}, Text: "x"}}, "insertText"},
		{"delete the final newline", &docs.Request{DeleteContentRange: &docs.DeleteContentRangeRequest{Range: &docs.Range{StartIndex: 1, EndIndex: 14}}}, "deleteContentRange"},
		{"delete part of a table", &docs.Request{DeleteContentRange: &docs.DeleteContentRangeRequest{Range: &docs.Range{StartIndex: 2, EndIndex: 7}}}, "deleteContentRange"},
		{"delete across cells", &docs.Request{DeleteContentRange: &docs.DeleteContentRangeRequest{Range: &docs.Range{StartIndex: 7, EndIndex: 9}}}, "deleteContentRange"},
		{"delete a cell's newline", &docs.Request{DeleteContentRange: &docs.DeleteContentRangeRequest{Range: &docs.Range{StartIndex: 7, EndIndex: 8}}}, "deleteContentRange"},
		{"delete the section break", &docs.Request{DeleteContentRange: &docs.DeleteContentRangeRequest{Range: &docs.Range{StartIndex: 0, EndIndex: 1}}}, "deleteContentRange"},
		{"empty range", &docs.Request{DeleteContentRange: &docs.DeleteContentRangeRequest{Range: &docs.Range{StartIndex: 2, EndIndex: 2}}}, "deleteContentRange"},
		{"unknown segment", &docs.Request{InsertText: &docs.InsertTextRequest{Location: &docs.Location{Index: 0, SegmentId: "kix.nope"}, Text: "x"}}, "insertText"},
		{"unknown field", &docs.Request{UpdateTextStyle: &docs.UpdateTextStyleRequest{Range: &docs.Range{StartIndex: 1, EndIndex: 2}, Fields: "boldness"}}, "updateTextStyle"},
		{"no fields", &docs.Request{UpdateTextStyle: &docs.UpdateTextStyleRequest{Range: &docs.Range{StartIndex: 1, EndIndex: 2}}}, "updateTextStyle"},
		{"bad named style", &docs.Request{UpdateParagraphStyle: &docs.UpdateParagraphStyleRequest{Range: &docs.Range{StartIndex: 1, EndIndex: 2}, ParagraphStyle: &docs.ParagraphStyle{NamedStyleType: "HEADING_9"}, Fields: "namedStyleType"}}, "updateParagraphStyle"},
		{"zero-row table", &docs.Request{InsertTable: &docs.InsertTableRequest{Location: &docs.Location{Index: 1}, Columns: 2}}, "insertTable"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// A valid first request after every index the cases use (the
			// final paragraph, 11): it must be rolled back with the batch.
			_, err := svc.Documents.BatchUpdate(d.DocumentId, &docs.BatchUpdateDocumentRequest{Requests: []*docs.Request{
				{InsertText: &docs.InsertTextRequest{Location: &docs.Location{Index: 11}, Text: "zz"}}, tt.req}}).Do()
			code, msg := apiCode(err)
			if code != 400 || !strings.HasPrefix(msg, "Invalid requests[1]."+tt.want+": ") {
				t.Fatalf("got %v", err)
			}
			g, _ := svc.Documents.Get(d.DocumentId).Do()
			if got := text(t, g); got != "#Ab\n[|/\n/\n]\n" {
				t.Fatalf("not atomic: %q", got)
			}
		})
	}
}

func TestDocsAuth(t *testing.T) {
	e := newEnv(t)
	ann := e.docs(t, e.token(t, "ann@example.com", google.ScopeDocs))
	d, err := ann.Documents.Create(&docs.Document{Title: "Secret"}).Do()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		svc  *docs.Service
		want int
	}{
		{"no token", e.docs(t, ""), 401},
		{"forged token", e.docs(t, "ya29.forged"), 401},
		{"wrong scope", e.docs(t, e.token(t, "ann@example.com", "https://mail.google.com/")), 403},
		{"another user", e.docs(t, e.token(t, "ben@example.com", google.ScopeDocs)), 404},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tt.svc.Documents.Get(d.DocumentId).Do()
			if code, _ := apiCode(err); code != tt.want {
				t.Fatalf("get: %v", err)
			}
			_, err = tt.svc.Documents.BatchUpdate(d.DocumentId, &docs.BatchUpdateDocumentRequest{Requests: []*docs.Request{
				{InsertText: &docs.InsertTextRequest{Location: &docs.Location{Index: 1}, Text: "x"}}}}).Do()
			if code, _ := apiCode(err); code != tt.want {
				t.Fatalf("batchUpdate: %v", err)
			}
		})
	}
	// Read-only scope reads but does not write.
	ro := e.docs(t, e.token(t, "ann@example.com", google.ScopeDocsReadOnly))
	if _, err := ro.Documents.Get(d.DocumentId).Do(); err != nil {
		t.Fatal(err)
	}
	_, err = ro.Documents.BatchUpdate(d.DocumentId, &docs.BatchUpdateDocumentRequest{Requests: []*docs.Request{
		{InsertText: &docs.InsertTextRequest{Location: &docs.Location{Index: 1}, Text: "x"}}}}).Do()
	if code, _ := apiCode(err); code != 403 {
		t.Fatalf("read-only write: %v", err)
	}
}
