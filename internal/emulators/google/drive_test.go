package google_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	docs "google.golang.org/api/docs/v1"
	drive "google.golang.org/api/drive/v3"
	"google.golang.org/api/googleapi"
	"google.golang.org/api/option"
	people "google.golang.org/api/people/v1"

	"github.com/auditrail/auditrail/internal/emulators/google"
	"github.com/auditrail/auditrail/internal/emulators/oauth"
	"github.com/auditrail/auditrail/internal/emulators/oauth/oauthtest"
)

// denv is an emulator with two OAuth clients ("app" and "other"), two users
// and a settable clock.
type denv struct {
	g    *google.Server
	url  string
	auth *httptest.Server
	mu   sync.Mutex
	now  time.Time
}

func newDriveEnv(t *testing.T) *denv {
	t.Helper()
	cb := []string{"https://app.example/cb"}
	o, err := oauth.New(oauth.Config{Clients: []oauth.Client{{ID: "app", Secret: "s", RedirectURIs: cb},
		{ID: "other", Secret: "s", RedirectURIs: cb}},
		Users:       []oauth.User{{ID: "u1", Email: "ann@example.com", Name: "Ann Lee"}, {ID: "u2", Email: "ben@example.com"}},
		AutoApprove: true})
	if err != nil {
		t.Fatal(err)
	}
	e := &denv{now: time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)}
	g, err := google.New(google.Config{Auth: o, Now: e.clock,
		Users: []oauth.User{{ID: "u1", Email: "ann@example.com", Name: "Ann Lee"}}})
	if err != nil {
		t.Fatal(err)
	}
	as := httptest.NewServer(o.Handler())
	gs := httptest.NewServer(g.Handler())
	t.Cleanup(func() { gs.Close(); as.Close() })
	e.g, e.url, e.auth = g, gs.URL, as
	return e
}

// clock answers the test time and advances it by a second, so that every
// write has its own timestamp.
func (e *denv) clock() time.Time {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.now = e.now.Add(time.Second)
	return e.now
}

// token runs the real authorization-code flow with PKCE for the user and client.
func (e *denv) token(t *testing.T, client, user string, scopes ...string) string {
	t.Helper()
	return oauthtest.Token(t, e.auth.URL, oauthtest.Client{ID: client, Secret: "s", RedirectURI: "https://app.example/cb"}, user, scopes...)
}

func (e *denv) client(t *testing.T, tok string) *http.Client {
	hc := &http.Client{Transport: bearer{tok}}
	t.Cleanup(hc.CloseIdleConnections)
	return hc
}

func (e *denv) docs(t *testing.T, tok string) *docs.Service {
	t.Helper()
	svc, err := docs.NewService(context.Background(), option.WithEndpoint(e.url+"/"), option.WithHTTPClient(e.client(t, tok)))
	if err != nil {
		t.Fatal(err)
	}
	return svc
}

func (e *denv) drive(t *testing.T, tok string) *drive.Service {
	t.Helper()
	svc, err := drive.NewService(context.Background(), option.WithEndpoint(e.url+"/drive/v3/"), option.WithHTTPClient(e.client(t, tok)))
	if err != nil {
		t.Fatal(err)
	}
	return svc
}

func (e *denv) create(t *testing.T, svc *docs.Service, title, body string) string {
	t.Helper()
	d, err := svc.Documents.Create(&docs.Document{Title: title}).Do()
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		_, err = svc.Documents.BatchUpdate(d.DocumentId, &docs.BatchUpdateDocumentRequest{Requests: []*docs.Request{
			{InsertText: &docs.InsertTextRequest{Location: &docs.Location{Index: 1}, Text: body}}}}).Do()
		if err != nil {
			t.Fatal(err)
		}
	}
	return d.DocumentId
}

// TestDriveFileVisibility: with only drive.file a client sees the documents
// it created or was granted (GrantFile, the picker); broader scopes see all
// the user's documents; nobody sees another user's.
func TestDriveFileVisibility(t *testing.T) {
	e := newDriveEnv(t)
	appTok := e.token(t, "app", "ann@example.com", google.ScopeDriveFile)
	otherTok := e.token(t, "other", "ann@example.com", google.ScopeDriveFile)
	mine := e.create(t, e.docs(t, appTok), "Made by app", "hello")
	theirs := e.create(t, e.docs(t, otherTok), "Made by other", "")

	tests := []struct {
		name string
		tok  string
		id   string
		want int // 0: visible
		// driveWant is the Drive API's answer when it differs (the Docs
		// scopes do not open the Drive API: 403).
		driveWant int
	}{
		{"creator client", appTok, mine, 0, 0},
		{"other client drive.file", otherTok, mine, 404, 404},
		{"app does not see other's", appTok, theirs, 404, 404},
		{"other client documents scope", e.token(t, "other", "ann@example.com", google.ScopeDocsReadOnly), mine, 0, 403},
		{"other client drive.readonly", e.token(t, "other", "ann@example.com", google.ScopeDriveRO), mine, 0, 0},
		{"another user, full scope", e.token(t, "app", "ben@example.com", google.ScopeDrive), mine, 404, 404},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := e.docs(t, tt.tok).Documents.Get(tt.id).Do()
			if code, msg := apiCode(err); code != tt.want || tt.want == 404 && msg != "Requested entity was not found." {
				t.Fatalf("docs get: %v", err)
			}
			_, err = e.drive(t, tt.tok).Files.Get(tt.id).Do()
			if code, msg := apiCode(err); code != tt.driveWant || tt.driveWant == 404 && msg != "File not found: "+tt.id+"." {
				t.Fatalf("drive get: %v", err)
			}
		})
	}

	// The picker's grant makes the file visible to the other client's
	// drive.file token, and only for that user and client.
	if err := e.g.GrantFile("u2", "other", mine); err == nil {
		t.Fatal("GrantFile of another user's file succeeded")
	}
	if err := e.g.GrantFile("u1", "other", mine); err != nil {
		t.Fatal(err)
	}
	if _, err := e.docs(t, otherTok).Documents.Get(mine).Do(); err != nil {
		t.Fatalf("after grant: %v", err)
	}
	f, err := e.drive(t, otherTok).Files.Get(mine).Fields("id,name,mimeType").Do()
	if err != nil || f.Name != "Made by app" || f.MimeType != google.MimeTypeDocument {
		t.Fatalf("drive get after grant: %+v %v", f, err)
	}
	if _, err := e.docs(t, appTok).Documents.Get(theirs).Do(); err == nil {
		t.Fatal("grant leaked to the other direction")
	}
}

// TestDriveScopeAccess: what each broad scope adds to drive.file for a file
// the client neither created nor was granted: read-only scopes read but do
// not write (403, the file exists for the caller), the Docs scopes do not
// widen the Drive API, the metadata scopes open metadata only.
func TestDriveScopeAccess(t *testing.T) {
	e := newDriveEnv(t)
	id := e.create(t, e.docs(t, e.token(t, "app", "ann@example.com", google.ScopeDriveFile)), "Ann's", "text")
	tok := func(scope string) string { return e.token(t, "other", "ann@example.com", google.ScopeDriveFile, scope) }
	insert := &docs.BatchUpdateDocumentRequest{Requests: []*docs.Request{
		{InsertText: &docs.InsertTextRequest{Location: &docs.Location{Index: 1}, Text: "x"}}}}

	docsRO := tok(google.ScopeDocsReadOnly)
	if _, err := e.docs(t, docsRO).Documents.Get(id).Do(); err != nil {
		t.Fatalf("documents.readonly get: %v", err)
	}
	_, err := e.docs(t, docsRO).Documents.BatchUpdate(id, insert).Do()
	if code, msg := apiCode(err); code != 403 || msg != "The caller does not have permission" {
		t.Fatalf("documents.readonly write: %v", err)
	}
	if _, err := e.docs(t, tok(google.ScopeDocs)).Documents.BatchUpdate(id, insert).Do(); err != nil {
		t.Fatalf("documents write: %v", err)
	}
	// The Docs scope does not widen the Drive API: still only the client's files.
	fl, err := e.drive(t, tok(google.ScopeDocs)).Files.List().Fields("files(id)").Do()
	if err != nil || len(fl.Files) != 0 {
		t.Fatalf("drive list with documents scope: %v %v", fl, err)
	}

	driveRO := e.drive(t, tok(google.ScopeDriveRO))
	if _, err := driveRO.Files.Get(id).Do(); err != nil {
		t.Fatal(err)
	}
	_, err = driveRO.Files.Update(id, &drive.File{Name: "x"}).Do()
	wantDriveErr(t, err, 403, "insufficientFilePermissions", "")
	_, err = driveRO.Comments.Create(id, &drive.Comment{Content: "x"}).Fields("id").Do()
	wantDriveErr(t, err, 403, "insufficientFilePermissions", "")
	if _, err := driveRO.Comments.List(id).Fields("comments").Do(); err != nil {
		t.Fatal(err)
	}

	meta := e.drive(t, tok(google.ScopeDriveMetaRO))
	if f, err := meta.Files.Get(id).Fields("name").Do(); err != nil || f.Name != "Ann's" {
		t.Fatalf("metadata get: %v %v", f, err)
	}
	_, err = meta.Files.Export(id, "text/plain").Download()
	wantDriveErr(t, err, 404, "notFound", "fileId")
	_, err = meta.Comments.List(id).Fields("comments").Do()
	wantDriveErr(t, err, 404, "notFound", "fileId")
	_, err = meta.Files.Update(id, &drive.File{Starred: true}).Do()
	wantDriveErr(t, err, 403, "insufficientFilePermissions", "")
	if _, err := e.drive(t, tok(google.ScopeDriveMeta)).Files.Update(id, &drive.File{Starred: true}).Do(); err != nil {
		t.Fatalf("drive.metadata update: %v", err)
	}
}

func apiErr(t *testing.T, err error) *googleapi.Error {
	t.Helper()
	var ge *googleapi.Error
	if !errors.As(err, &ge) {
		t.Fatalf("want a Google API error, got %v", err)
	}
	return ge
}

// wantDriveErr checks a Drive error's code, reason and location.
func wantDriveErr(t *testing.T, err error, code int, reason, location string) {
	t.Helper()
	ge := apiErr(t, err)
	if ge.Code != code || len(ge.Errors) != 1 || ge.Errors[0].Reason != reason {
		t.Fatalf("want %d %s, got %v (%s)", code, reason, err, ge.Body)
	}
	if location != "" && !strings.Contains(ge.Body, `"location":"`+location+`"`) {
		t.Fatalf("want location %s: %s", location, ge.Body)
	}
}

func names(fl *drive.FileList) []string {
	out := make([]string, 0, len(fl.Files))
	for _, f := range fl.Files {
		out = append(out, f.Name)
	}
	return out
}

func reversed(s []string) []string { s = slices.Clone(s); slices.Reverse(s); return s }

func sorted(s []string) []string { s = slices.Clone(s); slices.Sort(s); return s }

// searchFixture creates documents of ann (all by the "app" client, full
// drive scope for the Drive calls) and answers the Drive and Docs clients.
func searchFixture(t *testing.T) (*denv, *drive.Service, *docs.Service) {
	t.Helper()
	e := newDriveEnv(t)
	tok := e.token(t, "app", "ann@example.com", google.ScopeDriveFile)
	dc := e.docs(t, tok)
	for _, d := range []struct{ title, body string }{
		{"O'Brien contract", "Signed by Mr O'Brien in Dublin."},
		{`C:\path\notes`, `The path is C:\temp\x and more.`},
		{"Budget 2026", "Quarterly numbers; revenue up."},
		{"Plan 9", "Outer space."},
		{"Plan 10", "Inner space and budget cuts."},
		{"HelloWorld", "nothing here"},
		{"Old draft", "revenue down"},
	} {
		e.create(t, dc, d.title, d.body)
	}
	dv := e.drive(t, tok)
	fl, err := dv.Files.List().Q("name = 'Old draft'").Fields("files(id)").Do()
	if err != nil || len(fl.Files) != 1 {
		t.Fatalf("find draft: %v %v", fl, err)
	}
	if _, err := dv.Files.Update(fl.Files[0].Id, &drive.File{Trashed: true}).Do(); err != nil {
		t.Fatal(err)
	}
	return e, dv, dc
}

// TestDriveSearch: the q language through the real client, including the
// escaping of ' and \ (the toolkit's O'Brien case), trashed, not/and/or.
func TestDriveSearch(t *testing.T) {
	_, dv, _ := searchFixture(t)
	all := []string{"Budget 2026", `C:\path\notes`, "HelloWorld", "O'Brien contract", "Plan 10", "Plan 9"}
	tests := []struct {
		q    string
		want []string
	}{
		{"trashed = false", all},
		{"trashed = true", []string{"Old draft"}},
		{`name contains 'O\'Brien' and trashed = false`, []string{"O'Brien contract"}},
		{`name contains 'o\'brien'`, []string{"O'Brien contract"}}, // case-insensitive
		{`fullText contains 'O\'Brien'`, []string{"O'Brien contract"}},
		{`name contains 'C:\\path'`, []string{`C:\path\notes`}},
		{`fullText contains 'C:\\temp\\x'`, []string{`C:\path\notes`}},
		{`name contains 'Hello'`, []string{"HelloWorld"}},
		{`name contains 'World'`, nil}, // prefix matching only
		{`name contains 'plan' and not name contains '10'`, []string{"Plan 9"}},
		{`(name contains 'Plan 9' or name contains 'Budget') and trashed = false`, []string{"Budget 2026", "Plan 9"}},
		{`fullText contains 'revenue'`, []string{"Budget 2026", "Old draft"}},
		{`fullText contains 'revenue' and trashed = false`, []string{"Budget 2026"}},
		{`fullText contains 'budget'`, []string{"Budget 2026", "Plan 10"}}, // title or body
		{`fullText contains '"space and budget"'`, []string{"Plan 10"}},
		{`fullText contains 'space budget'`, []string{"Plan 10"}}, // every word
		{`mimeType = 'application/vnd.google-apps.document' and trashed = false`, all},
		{`mimeType != 'application/vnd.google-apps.document'`, nil},
		{`starred = true`, nil},
		{`NOT trashed = false`, []string{"Old draft"}}, // keywords are case-insensitive
		{`'root' in parents and trashed = false`, all},
		{`'ann@example.com' in owners and name = 'Plan 9'`, []string{"Plan 9"}},
		{`modifiedTime > '2000-01-01T00:00:00Z' and trashed = false`, all},
		{`createdTime < '2000-01-01T00:00:00'`, nil},
	}
	for _, tt := range tests {
		t.Run(tt.q, func(t *testing.T) {
			fl, err := dv.Files.List().Q(tt.q).Fields("files(id,name,mimeType)").Do()
			if err != nil {
				t.Fatal(err)
			}
			if got := sorted(names(fl)); !slices.Equal(got, sorted(tt.want)) {
				t.Fatalf("got %q, want %q", got, tt.want)
			}
		})
	}
}

// TestDriveQueryRefused: a malformed q is refused as Google does.
func TestDriveQueryRefused(t *testing.T) {
	_, dv, _ := searchFixture(t)
	for _, q := range []string{
		"name contains 'unterminated",
		`name contains 'bad \x escape'`,
		"name = O'Brien",
		"trashed = 'false'",
		"fullText = 'x'",
		"name contains",
		"(trashed = false",
		"trashed = false)",
		"and trashed = false",
		"colour = 'red'",
		"'x' in folders",
		"modifiedTime > 'yesterday'",
		"name ! 'x'",
		"trashed = false name = 'x'",
		strings.Repeat("(", 100) + "trashed = false" + strings.Repeat(")", 100),
	} {
		t.Run(q, func(t *testing.T) {
			_, err := dv.Files.List().Q(q).Do()
			wantDriveErr(t, err, 400, "invalid", "q")
			if ge := apiErr(t, err); ge.Message != "Invalid Value" {
				t.Fatalf("message %q", ge.Message)
			}
		})
	}
}

// TestDriveOrderAndPaging: orderBy keys, pages across a query, the token
// bound to its query, pageSize bounds, fullText refusing a sort.
func TestDriveOrderAndPaging(t *testing.T) {
	e, dv, dc := searchFixture(t)
	list := func(order string) []string {
		t.Helper()
		fl, err := dv.Files.List().Q("trashed = false").OrderBy(order).Fields("files(name)").Do()
		if err != nil {
			t.Fatal(err)
		}
		return names(fl)
	}
	byCreation := []string{"O'Brien contract", `C:\path\notes`, "Budget 2026", "Plan 9", "Plan 10", "HelloWorld"}
	tests := []struct {
		order string
		want  []string
	}{
		{"createdTime", byCreation},
		{"createdTime desc", reversed(byCreation)},
		{"name", []string{"Budget 2026", `C:\path\notes`, "HelloWorld", "O'Brien contract", "Plan 10", "Plan 9"}},
		{"name_natural", []string{"Budget 2026", `C:\path\notes`, "HelloWorld", "O'Brien contract", "Plan 9", "Plan 10"}},
		{"name_natural desc", []string{"Plan 10", "Plan 9", "O'Brien contract", "HelloWorld", `C:\path\notes`, "Budget 2026"}},
		{"quotaBytesUsed desc,name", nil}, // checked below
	}
	for _, tt := range tests[:len(tests)-1] {
		if got := list(tt.order); !slices.Equal(got, tt.want) {
			t.Errorf("orderBy %s: %q, want %q", tt.order, got, tt.want)
		}
	}
	fl, err := dv.Files.List().Q("trashed = false").OrderBy("quotaBytesUsed desc,name").Fields("files(name,size,quotaBytesUsed)").Do()
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i < len(fl.Files); i++ {
		if fl.Files[i-1].QuotaBytesUsed < fl.Files[i].QuotaBytesUsed || fl.Files[i].Size != fl.Files[i].QuotaBytesUsed || fl.Files[i].Size == 0 {
			t.Fatalf("quotaBytesUsed order: %+v", fl.Files)
		}
	}

	// An edit moves a document to the front of modifiedTime desc (the
	// batchUpdate handler touches the Drive file).
	p9, err := dv.Files.List().Q("name = 'Plan 9'").Fields("files(id,modifiedTime)").Do()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dc.Documents.BatchUpdate(p9.Files[0].Id, &docs.BatchUpdateDocumentRequest{Requests: []*docs.Request{
		{InsertText: &docs.InsertTextRequest{Location: &docs.Location{Index: 1}, Text: "Edited. "}}}}).Do(); err != nil {
		t.Fatal(err)
	}
	for _, order := range []string{"modifiedTime desc", "recency desc", "modifiedByMeTime desc"} {
		if got := list(order); got[0] != "Plan 9" {
			t.Errorf("%s after edit: %q", order, got)
		}
	}
	after, err := dv.Files.Get(p9.Files[0].Id).Fields("modifiedTime").Do()
	if err != nil || after.ModifiedTime <= p9.Files[0].ModifiedTime {
		t.Fatalf("modifiedTime %q -> %q (%v)", p9.Files[0].ModifiedTime, after.ModifiedTime, err)
	}

	// Paging: pages of 2 cover the result exactly once, in order.
	var paged []string
	pages := 0
	err = dv.Files.List().Q("trashed = false").OrderBy("name").PageSize(2).Fields("nextPageToken,files(name)").
		Pages(context.Background(), func(fl *drive.FileList) error {
			pages++
			if len(fl.Files) > 2 {
				t.Errorf("page of %d", len(fl.Files))
			}
			paged = append(paged, names(fl)...)
			return nil
		})
	if err != nil || pages != 3 || !slices.Equal(paged, list("name")) {
		t.Fatalf("paged %d pages %q: %v", pages, paged, err)
	}
	first, err := dv.Files.List().Q("trashed = false").OrderBy("name").PageSize(2).Fields("nextPageToken,files(name)").Do()
	if err != nil || first.NextPageToken == "" {
		t.Fatalf("first page: %v", err)
	}
	// The token belongs to its query: another q, order or size is refused,
	// as is a forged one.
	for name, call := range map[string]*drive.FilesListCall{
		"other q":     dv.Files.List().Q("trashed = true").OrderBy("name").PageSize(2),
		"other order": dv.Files.List().Q("trashed = false").OrderBy("createdTime").PageSize(2),
		"other size":  dv.Files.List().Q("trashed = false").OrderBy("name").PageSize(3),
	} {
		_, err := call.PageToken(first.NextPageToken).Do()
		if ge := apiErr(t, err); ge.Code != 400 || !strings.Contains(ge.Body, `"location":"pageToken"`) {
			t.Errorf("%s: %v", name, err)
		}
	}
	forged := base64.RawURLEncoding.EncodeToString(append(make([]byte, 7), 2))
	_, err = dv.Files.List().Q("trashed = false").OrderBy("name").PageSize(2).PageToken(forged).Do()
	wantDriveErr(t, err, 400, "invalid", "pageToken")

	for _, n := range []int64{-1, 1001} {
		_, err := dv.Files.List().PageSize(n).Do()
		wantDriveErr(t, err, 400, "invalid", "pageSize")
	}
	_, err = dv.Files.List().OrderBy("size").Do()
	wantDriveErr(t, err, 400, "invalid", "orderBy")
	// fullText results come in descending relevance.
	e.create(t, dc, "Space log", "space, space and more space")
	fl, err = dv.Files.List().Q("fullText contains 'space'").Fields("files(name)").Do()
	if err != nil || len(fl.Files) != 3 || fl.Files[0].Name != "Space log" {
		t.Fatalf("relevance: %q %v", names(fl), err)
	}
	_, err = dv.Files.List().Q("fullText contains 'space'").OrderBy("name").Do()
	wantDriveErr(t, err, 400, "badRequest", "orderBy")
	if ge := apiErr(t, err); !strings.HasPrefix(ge.Message, "Sorting is not supported for queries with fullText terms") {
		t.Fatalf("fullText with orderBy: %v", err)
	}
	// Default page size is 100: 120 documents need two pages.
	for i := 0; i < 113; i++ {
		e.create(t, dc, fmt.Sprintf("bulk %03d", i), "")
	}
	fl, err = dv.Files.List().Q("trashed = false").Fields("nextPageToken,files(id)").Do()
	if err != nil || len(fl.Files) != 100 || fl.NextPageToken == "" {
		t.Fatalf("default page: %d %q %v", len(fl.Files), fl.NextPageToken, err)
	}
}

// TestDriveSharedDrives: corpora / driveId / includeItemsFromAllDrives /
// supportsAllDrives with Google's rules, and membership.
func TestDriveSharedDrives(t *testing.T) {
	e := newDriveEnv(t)
	tok := e.token(t, "app", "ann@example.com", google.ScopeDrive)
	dc, dv := e.docs(t, tok), e.drive(t, tok)
	e.create(t, dc, "My doc", "")
	team := e.create(t, dc, "Team doc", "")
	sd := e.g.AddSharedDrive("u1", "Team")
	if err := e.g.MoveToDrive(team, sd); err != nil {
		t.Fatal(err)
	}
	list := func(c *drive.FilesListCall) ([]string, error) {
		fl, err := c.Fields("files(name,driveId,owners)").Do()
		if err != nil {
			return nil, err
		}
		return sorted(names(fl)), nil
	}
	type refusal struct {
		code            int
		reason, reason2 string
	}
	includeItems := &refusal{403, "forbidden", "includeItemsFromAllDrives"}
	driveIDRule := &refusal{400, "teamDriveIdRequiresTeamDriveCorpora", ""}
	tests := []struct {
		name string
		call *drive.FilesListCall
		want []string
		err  *refusal
	}{
		{"default user corpus", dv.Files.List(), []string{"My doc"}, nil},
		{"user + all drives", dv.Files.List().SupportsAllDrives(true).IncludeItemsFromAllDrives(true), []string{"My doc", "Team doc"}, nil},
		{"allDrives", dv.Files.List().Corpora("allDrives").SupportsAllDrives(true).IncludeItemsFromAllDrives(true), []string{"My doc", "Team doc"}, nil},
		{"drive", dv.Files.List().Corpora("drive").DriveId(sd).SupportsAllDrives(true).IncludeItemsFromAllDrives(true), []string{"Team doc"}, nil},
		{"drive in parents", dv.Files.List().Corpora("drive").DriveId(sd).SupportsAllDrives(true).IncludeItemsFromAllDrives(true).Q("'" + sd + "' in parents"), []string{"Team doc"}, nil},
		{"driveId without corpora=drive", dv.Files.List().Corpora("user").DriveId(sd).SupportsAllDrives(true).IncludeItemsFromAllDrives(true), nil, driveIDRule},
		{"corpora=drive without driveId", dv.Files.List().Corpora("drive").SupportsAllDrives(true).IncludeItemsFromAllDrives(true), nil, driveIDRule},
		{"drive without includeItems", dv.Files.List().Corpora("drive").DriveId(sd).SupportsAllDrives(true), nil, includeItems},
		{"allDrives without includeItems", dv.Files.List().Corpora("allDrives"), nil, includeItems},
		{"driveId without includeItems", dv.Files.List().DriveId(sd), nil, includeItems},
		{"driveId without corpora", dv.Files.List().DriveId(sd).SupportsAllDrives(true).IncludeItemsFromAllDrives(true), nil, driveIDRule},
		{"unknown corpora", dv.Files.List().Corpora("everything"), nil, &refusal{400, "invalid", "corpora"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := list(tt.call)
			if tt.err != nil {
				wantDriveErr(t, err, tt.err.code, tt.err.reason, tt.err.reason2)
				return
			}
			if err != nil || !slices.Equal(got, tt.want) {
				t.Fatalf("got %q %v, want %q", got, err, tt.want)
			}
		})
	}
	// A shared-drive file is found by id only with supportsAllDrives.
	_, err := dv.Files.Get(team).Do()
	wantDriveErr(t, err, 404, "notFound", "fileId")
	_, err = dv.Files.Update(team, &drive.File{Starred: true}).Do()
	wantDriveErr(t, err, 404, "notFound", "fileId")
	f, err := dv.Files.Get(team).SupportsAllDrives(true).Fields("driveId,owners,parents").Do()
	if err != nil || f.DriveId != sd || len(f.Owners) != 0 || len(f.Parents) != 1 || f.Parents[0] != sd {
		t.Fatalf("shared-drive file: %+v %v", f, err)
	}

	// Ben is not a member: the drive and its file do not exist for him,
	// until he is added.
	ben := e.drive(t, e.token(t, "app", "ben@example.com", google.ScopeDrive))
	_, err = ben.Files.List().Corpora("drive").DriveId(sd).SupportsAllDrives(true).IncludeItemsFromAllDrives(true).Do()
	wantDriveErr(t, err, 404, "notFound", "driveId")
	_, err = ben.Files.Get(team).SupportsAllDrives(true).Do()
	wantDriveErr(t, err, 404, "notFound", "fileId")
	if err := e.g.AddDriveMember(sd, "u2"); err != nil {
		t.Fatal(err)
	}
	if got, err := list(ben.Files.List().Corpora("allDrives").SupportsAllDrives(true).IncludeItemsFromAllDrives(true)); err != nil || !slices.Equal(got, []string{"Team doc"}) {
		t.Fatalf("member: %q %v", got, err)
	}

	// Ben edits the team document: he is its last modifier and it is
	// modified by him, not by Ann (the "ByMe" times are per user).
	const timeFields = "modifiedTime,modifiedByMeTime,modifiedByMe,lastModifyingUser(emailAddress,me)"
	annBefore, err := dv.Files.Get(team).SupportsAllDrives(true).Fields(timeFields).Do()
	if err != nil {
		t.Fatal(err)
	}
	benDocs := e.docs(t, e.token(t, "app", "ben@example.com", google.ScopeDocs))
	if _, err := benDocs.Documents.BatchUpdate(team, &docs.BatchUpdateDocumentRequest{Requests: []*docs.Request{
		{InsertText: &docs.InsertTextRequest{Location: &docs.Location{Index: 1}, Text: "Ben was here. "}}}}).Do(); err != nil {
		t.Fatal(err)
	}
	annAfter, err := dv.Files.Get(team).SupportsAllDrives(true).Fields(timeFields).Do()
	if err != nil {
		t.Fatal(err)
	}
	if annAfter.ModifiedTime <= annBefore.ModifiedTime || annAfter.ModifiedByMeTime != annBefore.ModifiedByMeTime ||
		annAfter.LastModifyingUser.EmailAddress != "ben@example.com" || annAfter.LastModifyingUser.Me {
		t.Fatalf("Ann's view after Ben's edit: %+v -> %+v %+v", annBefore, annAfter, annAfter.LastModifyingUser)
	}
	benView, err := ben.Files.Get(team).SupportsAllDrives(true).Fields(timeFields).Do()
	if err != nil || !benView.ModifiedByMe || benView.ModifiedByMeTime != annAfter.ModifiedTime || !benView.LastModifyingUser.Me {
		t.Fatalf("Ben's view: %+v %v", benView, err)
	}
}

// TestDriveFileUpdateDelete: PATCH name/starred/trashed (the Docs title
// follows the name), read-only and unknown fields refused, DELETE removes.
func TestDriveFileUpdateDelete(t *testing.T) {
	e := newDriveEnv(t)
	tok := e.token(t, "app", "ann@example.com", google.ScopeDriveFile)
	dc, dv := e.docs(t, tok), e.drive(t, tok)
	id := e.create(t, dc, "Draft", "text")
	f, err := dv.Files.Update(id, &drive.File{Name: "Final", Starred: true}).Fields("name,starred,trashed").Do()
	if err != nil || f.Name != "Final" || !f.Starred || f.Trashed {
		t.Fatalf("update: %+v %v", f, err)
	}
	if d, err := dc.Documents.Get(id).Do(); err != nil || d.Title != "Final" {
		t.Fatalf("docs title after rename: %v %v", d, err)
	}
	if fl, err := dv.Files.List().Q("starred = true").Fields("files(id)").Do(); err != nil || len(fl.Files) != 1 {
		t.Fatalf("starred: %v %v", fl, err)
	}
	// An explicit false (ForceSendFields) un-stars.
	if f, err = dv.Files.Update(id, &drive.File{Starred: false, ForceSendFields: []string{"Starred"}}).Fields("starred").Do(); err != nil || f.Starred {
		t.Fatalf("unstar: %+v %v", f, err)
	}
	_, err = dv.Files.Update(id, &drive.File{Id: "other"}).Do()
	wantDriveErr(t, err, 403, "fieldNotWritable", "")
	_, err = dv.Files.Update(id, &drive.File{Name: " "}).Do()
	wantDriveErr(t, err, 400, "invalid", "name")

	if _, err := dv.Files.Update(id, &drive.File{Trashed: true}).Do(); err != nil {
		t.Fatal(err)
	}
	if fl, err := dv.Files.List().Q("trashed = false").Do(); err != nil || len(fl.Files) != 0 {
		t.Fatalf("trashed listed: %v %v", fl, err)
	}
	if err := dv.Files.Delete(id).Do(); err != nil {
		t.Fatal(err)
	}
	_, err = dv.Files.Get(id).Do()
	wantDriveErr(t, err, 404, "notFound", "fileId")
	if _, err := dc.Documents.Get(id).Do(); err == nil {
		t.Fatal("deleted document still readable")
	}
	err = dv.Files.Delete(id).Do()
	wantDriveErr(t, err, 404, "notFound", "fileId")
	_, err = dv.Files.Get("nope").Fields("id,bogus").Do()
	wantDriveErr(t, err, 400, "invalidParameter", "fields")
	_, err = dv.Files.List().Fields("files(id,owners(nope))").Do()
	wantDriveErr(t, err, 400, "invalidParameter", "fields")
}

// TestDriveAuthErrors: 401 and 403 in Google's shape; the Docs scopes do not
// open the Drive API; read-only scopes do not write.
func TestDriveAuthErrors(t *testing.T) {
	e := newDriveEnv(t)
	tok := e.token(t, "app", "ann@example.com", google.ScopeDriveFile)
	id := e.create(t, e.docs(t, tok), "Doc", "")
	_, err := e.drive(t, "").Files.List().Do()
	wantDriveErr(t, err, 401, "authError", "Authorization")
	_, err = e.drive(t, "ya29.forged").Files.Get(id).Do()
	wantDriveErr(t, err, 401, "authError", "Authorization")
	_, err = e.drive(t, e.token(t, "app", "ann@example.com", google.ScopeDocs)).Files.List().Do()
	wantDriveErr(t, err, 403, "insufficientPermissions", "")
	ro := e.drive(t, e.token(t, "app", "ann@example.com", google.ScopeDriveRO))
	if _, err := ro.Files.Get(id).Do(); err != nil {
		t.Fatal(err)
	}
	_, err = ro.Files.Update(id, &drive.File{Name: "x"}).Do()
	wantDriveErr(t, err, 403, "insufficientPermissions", "")
	err = ro.Files.Delete(id).Do()
	wantDriveErr(t, err, 403, "insufficientPermissions", "")
	_, err = ro.Comments.Create(id, &drive.Comment{Content: "x"}).Fields("id").Do()
	wantDriveErr(t, err, 403, "insufficientPermissions", "")
	// The metadata scope lists and gets files but reads neither content nor
	// comments.
	meta := e.drive(t, e.token(t, "app", "ann@example.com", google.ScopeDriveMetaRO))
	if fl, err := meta.Files.List().Fields("files(id)").Do(); err != nil || len(fl.Files) != 1 {
		t.Fatalf("metadata list: %v %v", fl, err)
	}
	_, err = meta.Files.Export(id, "text/plain").Download()
	wantDriveErr(t, err, 403, "insufficientPermissions", "")
	_, err = meta.Comments.List(id).Fields("comments").Do()
	wantDriveErr(t, err, 403, "insufficientPermissions", "")
}

// TestDriveAbout: fields required; the user and quota.
func TestDriveAbout(t *testing.T) {
	e := newDriveEnv(t)
	tok := e.token(t, "app", "ann@example.com", google.ScopeDriveFile)
	e.create(t, e.docs(t, tok), "Doc", "twelve chars")
	dv := e.drive(t, tok)
	_, err := dv.About.Get().Do()
	wantDriveErr(t, err, 400, "required", "fields")
	if ge := apiErr(t, err); ge.Message != "The 'fields' parameter is required for this method." {
		t.Fatalf("message: %q", ge.Message)
	}
	a, err := dv.About.Get().Fields("user(displayName,emailAddress,photoLink,permissionId,me),storageQuota,canCreateDrives").Do()
	if err != nil {
		t.Fatal(err)
	}
	if a.User.DisplayName != "Ann Lee" || a.User.EmailAddress != "ann@example.com" || !a.User.Me || a.User.PermissionId == "" ||
		a.User.PhotoLink == "" || !a.CanCreateDrives || a.StorageQuota == nil || a.StorageQuota.Usage < 12 || a.StorageQuota.Limit == 0 {
		t.Fatalf("about: %+v %+v %+v", a, a.User, a.StorageQuota)
	}
	// Only what was asked is sent.
	a, err = dv.About.Get().Fields("user/emailAddress").Do()
	if err != nil || a.User.EmailAddress != "ann@example.com" || a.User.DisplayName != "" || a.StorageQuota != nil {
		t.Fatalf("partial about: %+v %v", a, err)
	}
	// A user the config does not name is named after their email.
	b, err := e.drive(t, e.token(t, "app", "ben@example.com", google.ScopeDriveFile)).About.Get().Fields("user").Do()
	if err != nil || b.User.DisplayName != "ben" || b.User.PermissionId == a.User.PermissionId {
		t.Fatalf("ben: %+v %v", b, err)
	}
}

// TestDriveComments: fields required, create/get/list/delete, includeDeleted,
// paging, visibility.
func TestDriveComments(t *testing.T) {
	e := newDriveEnv(t)
	tok := e.token(t, "app", "ann@example.com", google.ScopeDriveFile)
	id := e.create(t, e.docs(t, tok), "Doc", "body")
	dv := e.drive(t, tok)

	_, err := dv.Comments.List(id).Do()
	wantDriveErr(t, err, 400, "required", "fields")
	_, err = dv.Comments.Create(id, &drive.Comment{Content: "x"}).Do()
	wantDriveErr(t, err, 400, "required", "fields")
	_, err = dv.Comments.Create(id, &drive.Comment{}).Fields("id").Do()
	wantDriveErr(t, err, 400, "required", "content")

	const fields = "id,content,htmlContent,author(displayName,emailAddress,me),createdTime,modifiedTime,deleted,resolved,replies"
	var ids []string
	for i, text := range []string{"First <b>point</b>\nsecond line", "Two", "Three"} {
		c, err := dv.Comments.Create(id, &drive.Comment{Content: text}).Fields(fields).Do()
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 && (c.Content != text || c.HtmlContent != "First &lt;b&gt;point&lt;/b&gt;<br>second line" ||
			c.Author.DisplayName != "Ann Lee" || c.Author.EmailAddress != "ann@example.com" || !c.Author.Me ||
			c.CreatedTime == "" || c.ModifiedTime == "" || c.Deleted || c.Resolved) {
			t.Fatalf("created: %+v %+v", c, c.Author)
		}
		ids = append(ids, c.Id)
	}
	got, err := dv.Comments.Get(id, ids[1]).Fields("id,content").Do()
	if err != nil || got.Content != "Two" || got.HtmlContent != "" {
		t.Fatalf("get: %+v %v", got, err)
	}
	if err := dv.Comments.Delete(id, ids[1]).Do(); err != nil {
		t.Fatal(err)
	}
	_, err = dv.Comments.Get(id, ids[1]).Fields("id").Do()
	wantDriveErr(t, err, 404, "notFound", "commentId")
	del, err := dv.Comments.Get(id, ids[1]).IncludeDeleted(true).Fields("id,deleted,content").Do()
	if err != nil || !del.Deleted || del.Content != "" {
		t.Fatalf("deleted comment: %+v %v", del, err)
	}
	listIDs := func(c *drive.CommentsListCall) []string {
		t.Helper()
		var out []string
		err := c.Fields("nextPageToken,comments(id,deleted)").Pages(context.Background(), func(cl *drive.CommentList) error {
			for _, c := range cl.Comments {
				out = append(out, c.Id)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	if l := listIDs(dv.Comments.List(id)); !slices.Equal(l, []string{ids[0], ids[2]}) {
		t.Fatalf("list: %q", l)
	}
	if l := listIDs(dv.Comments.List(id).IncludeDeleted(true).PageSize(1)); !slices.Equal(l, ids) {
		t.Fatalf("list with deleted, pages of 1: %q", l)
	}
	_, err = dv.Comments.List(id).PageSize(101).Fields("comments").Do()
	wantDriveErr(t, err, 400, "invalid", "pageSize")

	// Another client's drive.file token neither sees nor comments.
	other := e.drive(t, e.token(t, "other", "ann@example.com", google.ScopeDriveFile))
	_, err = other.Comments.List(id).Fields("comments").Do()
	wantDriveErr(t, err, 404, "notFound", "fileId")
	_, err = other.Comments.Create(id, &drive.Comment{Content: "x"}).Fields("id").Do()
	wantDriveErr(t, err, 404, "notFound", "fileId")
}

// TestPeopleMe: personFields required and checked; names/photos need the
// profile scope, emailAddresses the email scope.
func TestPeopleMe(t *testing.T) {
	e := newDriveEnv(t)
	svc := func(tok string) *people.Service {
		p, err := people.NewService(context.Background(), option.WithEndpoint(e.url+"/"), option.WithHTTPClient(e.client(t, tok)))
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	full := svc(e.token(t, "app", "ann@example.com", google.ScopeOpenID, google.ScopeEmail, google.ScopeProfile, google.ScopeDriveFile))
	p, err := full.People.Get("people/me").PersonFields("names,emailAddresses,photos").Do()
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Names) != 1 || p.Names[0].DisplayName != "Ann Lee" || p.Names[0].GivenName != "Ann" || p.Names[0].FamilyName != "Lee" ||
		len(p.EmailAddresses) != 1 || p.EmailAddresses[0].Value != "ann@example.com" || len(p.Photos) != 1 ||
		!strings.HasPrefix(p.ResourceName, "people/") {
		t.Fatalf("person: %+v", p)
	}
	emailOnly := svc(e.token(t, "app", "ann@example.com", google.ScopeOpenID, google.ScopeEmail))
	p, err = emailOnly.People.Get("people/me").PersonFields("names,emailAddresses").Do()
	if err != nil || len(p.Names) != 0 || len(p.EmailAddresses) != 1 {
		t.Fatalf("email scope only: %+v %v", p, err)
	}
	tests := []struct {
		name   string
		call   *people.PeopleGetCall
		code   int
		prefix string
	}{
		{"personFields missing", full.People.Get("people/me"), 400, "personFields mask is required"},
		{"bad path", full.People.Get("people/me").PersonFields("names,shoeSize"), 400, `Invalid personFields mask path: "shoeSize"`},
		{"drive scope only", svc(e.token(t, "app", "ann@example.com", google.ScopeDriveFile)).People.Get("people/me").PersonFields("names"), 403, "Request had insufficient"},
		{"no token", svc("").People.Get("people/me").PersonFields("names"), 401, "Request had invalid authentication"},
		{"someone else", full.People.Get("people/123").PersonFields("names"), 404, "Requested entity"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tt.call.Do()
			if ge := apiErr(t, err); ge.Code != tt.code || !strings.HasPrefix(ge.Message, tt.prefix) {
				t.Fatalf("got %v", err)
			}
		})
	}
}

// pickerDo calls the picker backend as the picker page does.
func (e *denv) pickerDo(t *testing.T, method, path, tok, body string) (*http.Response, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(method, e.url+path, strings.NewReader(body))
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	req.Header.Set("Origin", "https://platform.example")
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	hc := e.client(t, "")
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp, out
}

// TestPickerGrant: the picker backend lists the user's files and grants the
// token's client drive.file access; a file then becomes visible to that
// client's drive.file token (the seed's Errors rule 1), and nothing else.
func TestPickerGrant(t *testing.T) {
	e := newDriveEnv(t)
	appTok := e.token(t, "app", "ann@example.com", google.ScopeDriveFile)
	id := e.create(t, e.docs(t, appTok), "Picked", "")
	trashed := e.create(t, e.docs(t, appTok), "Gone", "")
	if _, err := e.drive(t, appTok).Files.Update(trashed, &drive.File{Trashed: true}).Do(); err != nil {
		t.Fatal(err)
	}
	benDoc := e.create(t, e.docs(t, e.token(t, "app", "ben@example.com", google.ScopeDriveFile)), "Ben's", "")
	otherTok := e.token(t, "other", "ann@example.com", google.ScopeDriveFile)
	other := e.drive(t, otherTok)
	_, err := other.Files.Get(id).Do()
	wantDriveErr(t, err, 404, "notFound", "fileId")

	// Preflight answers the headers the page sends.
	resp, _ := e.pickerDo(t, http.MethodOptions, "/picker/v1/grant", "", "")
	if resp.StatusCode != 204 || resp.Header.Get("Access-Control-Allow-Origin") == "" ||
		!strings.Contains(resp.Header.Get("Access-Control-Allow-Headers"), "Authorization") ||
		!strings.Contains(resp.Header.Get("Access-Control-Allow-Headers"), "Content-Type") ||
		!strings.Contains(resp.Header.Get("Access-Control-Allow-Methods"), "POST") {
		t.Fatalf("preflight: %d %v", resp.StatusCode, resp.Header)
	}
	// The list: the user's non-trashed files, whatever the client.
	resp, out := e.pickerDo(t, http.MethodGet, "/picker/v1/files", otherTok, "")
	files, _ := out["files"].([]any)
	if resp.StatusCode != 200 || resp.Header.Get("Access-Control-Allow-Origin") == "" || len(files) != 1 {
		t.Fatalf("files: %d %v", resp.StatusCode, out)
	}
	if f := files[0].(map[string]any); f["id"] != id || f["name"] != "Picked" || f["mimeType"] != google.MimeTypeDocument ||
		f["modifiedTime"] == "" || !strings.Contains(f["url"].(string), id) {
		t.Fatalf("file: %v", f)
	}
	for _, tt := range []struct {
		name, tok, body string
		code            int
	}{
		{"no token", "", `{"fileIds":["` + id + `"]}`, 401},
		{"another user's file, all or nothing", otherTok, `{"fileIds":["` + id + `","` + benDoc + `"]}`, 404},
		{"empty", otherTok, `{"fileIds":[]}`, 400},
		{"bad json", otherTok, `{"fileIds":`, 400},
	} {
		t.Run(tt.name, func(t *testing.T) {
			resp, _ := e.pickerDo(t, http.MethodPost, "/picker/v1/grant", tt.tok, tt.body)
			if resp.StatusCode != tt.code || resp.Header.Get("Access-Control-Allow-Origin") == "" {
				t.Fatalf("got %d", resp.StatusCode)
			}
		})
	}
	if _, err := other.Files.Get(id).Do(); err == nil {
		t.Fatal("a refused grant granted")
	}
	resp, out = e.pickerDo(t, http.MethodPost, "/picker/v1/grant", otherTok, `{"fileIds":["`+id+`"]}`)
	if resp.StatusCode != 200 || fmt.Sprint(out["granted"]) != "["+id+"]" {
		t.Fatalf("grant: %d %v", resp.StatusCode, out)
	}
	if f, err := other.Files.Get(id).Fields("id,name").Do(); err != nil || f.Name != "Picked" {
		t.Fatalf("after grant: %v %v", f, err)
	}
	if fl, err := other.Files.List().Q("trashed = false").Fields("files(id)").Do(); err != nil || len(fl.Files) != 1 || fl.Files[0].Id != id {
		t.Fatalf("list after grant: %v %v", fl, err)
	}
	if _, err := e.docs(t, otherTok).Documents.Get(id).Do(); err != nil {
		t.Fatalf("docs after grant: %v", err)
	}
	// The grant is the client's for that user only: Ben's token of the same
	// client does not see Ann's file.
	_, err = e.drive(t, e.token(t, "other", "ben@example.com", google.ScopeDriveFile)).Files.Get(id).Do()
	wantDriveErr(t, err, 404, "notFound", "fileId")
}

// TestDriveExport: files.export of a document as text, markdown and HTML
// (headings, bold, italic, links, tables, escaping), through the real
// client's Download.
func TestDriveExport(t *testing.T) {
	e := newDriveEnv(t)
	tok := e.token(t, "app", "ann@example.com", google.ScopeDriveFile)
	dc, dv := e.docs(t, tok), e.drive(t, tok)
	id := e.create(t, dc, "Report", "")
	// Body: "Title\nSee *docs* here\n" then a 2x2 table at the end.
	_, err := dc.Documents.BatchUpdate(id, &docs.BatchUpdateDocumentRequest{Requests: []*docs.Request{
		{InsertText: &docs.InsertTextRequest{Location: &docs.Location{Index: 1}, Text: "Title\nSee *docs* here & <now>\n"}},
		{UpdateParagraphStyle: &docs.UpdateParagraphStyleRequest{Range: &docs.Range{StartIndex: 1, EndIndex: 6},
			ParagraphStyle: &docs.ParagraphStyle{NamedStyleType: "HEADING_2"}, Fields: "namedStyleType"}},
		{UpdateTextStyle: &docs.UpdateTextStyleRequest{Range: &docs.Range{StartIndex: 11, EndIndex: 17},
			TextStyle: &docs.TextStyle{Bold: true, Link: &docs.Link{Url: "https://example.com/d"}}, Fields: "bold,link"}},
		{InsertTable: &docs.InsertTableRequest{EndOfSegmentLocation: &docs.EndOfSegmentLocation{}, Rows: 2, Columns: 2}},
	}}).Do()
	if err != nil {
		t.Fatal(err)
	}
	export := func(mt string) string {
		t.Helper()
		resp, err := dv.Files.Export(id, mt).Download()
		if err != nil {
			t.Fatalf("%s: %v", mt, err)
		}
		defer resp.Body.Close()
		var b strings.Builder
		if _, err := io.Copy(&b, resp.Body); err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(resp.Header.Get("Content-Type"), mt) {
			t.Fatalf("content type %q", resp.Header.Get("Content-Type"))
		}
		return b.String()
	}
	if got := export("text/plain"); !strings.HasPrefix(got, "\ufeffTitle\r\nSee *docs* here & <now>\r\n") || !strings.Contains(got, "\t") {
		t.Errorf("text: %q", got)
	}
	md := export("text/markdown")
	for _, want := range []string{"## Title\n", `[\*docs\*](https://example.com/d)`, "**", `here & \<now>`, "|  |  |\n| :---- | :---- |\n"} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
	h := export("text/html")
	for _, want := range []string{"<title>Report</title>", "<h2>Title</h2>", `<a href="https://example.com/d"><b>*docs*</b></a>`,
		"here &amp; &lt;now&gt;", "<table><tr><td><p></p></td>"} {
		if !strings.Contains(h, want) {
			t.Errorf("html lacks %q:\n%s", want, h)
		}
	}
	_, err = dv.Files.Export(id, "application/zip").Download()
	wantDriveErr(t, err, 400, "badRequest", "convertTo")
	_, err = e.drive(t, e.token(t, "other", "ann@example.com", google.ScopeDriveFile)).Files.Export(id, "text/plain").Download()
	wantDriveErr(t, err, 404, "notFound", "fileId")
}

// TestDriveConcurrent: Docs edits, Drive lists, renames, comments and picker
// grants at once (run under -race).
func TestDriveConcurrent(t *testing.T) {
	e := newDriveEnv(t)
	tok := e.token(t, "app", "ann@example.com", google.ScopeDriveFile)
	dc, dv := e.docs(t, tok), e.drive(t, tok)
	ids := []string{e.create(t, dc, "A", "alpha"), e.create(t, dc, "B", "beta")}
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 10; i++ {
				id := ids[i%2]
				_, err := dc.Documents.BatchUpdate(id, &docs.BatchUpdateDocumentRequest{Requests: []*docs.Request{
					{InsertText: &docs.InsertTextRequest{Location: &docs.Location{Index: 1}, Text: "x"}}}}).Do()
				if err == nil {
					_, err = dv.Files.List().Q("fullText contains 'x' and trashed = false").Fields("files(id,name,size)").Do()
				}
				if err == nil {
					_, err = dv.Files.Update(id, &drive.File{Name: fmt.Sprintf("N%d", i)}).Do()
				}
				if err == nil {
					_, err = dv.Comments.Create(id, &drive.Comment{Content: "c"}).Fields("id").Do()
				}
				if err == nil {
					err = e.g.GrantFile("u1", "other", id)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	cl, err := dv.Comments.List(ids[0]).PageSize(100).Fields("comments(id)").Do()
	if err != nil || len(cl.Comments) != 20 {
		t.Fatalf("comments: %v %v", cl, err)
	}
}

// TestSeedSample: the samples belong to the seeded user and are visible to
// the seeding client's drive.file token (in a Drive search too), not to
// another client's nor to another user; seeding twice is refused.
func TestSeedSample(t *testing.T) {
	e := newDriveEnv(t)
	ids, err := e.g.SeedSample("u1", "app")
	if err != nil || len(ids) < 3 {
		t.Fatalf("SeedSample: %v %v", ids, err)
	}
	if _, err := e.g.SeedSample("u1", "app"); !errors.Is(err, google.ErrSeeded) {
		t.Fatalf("second seed: %v", err)
	}
	app := e.token(t, "app", "ann@example.com", google.ScopeDriveFile)
	l, err := e.drive(t, app).Files.List().Q("trashed = false and name contains 'O''Brien'").Fields("files(id,name,owners)").Do()
	if err == nil {
		t.Fatalf("a q with a doubled quote was accepted: %+v", l)
	}
	l, err = e.drive(t, app).Files.List().Q(`trashed = false and name contains 'O\'Brien'`).Fields("files(id,name,owners)").Do()
	if err != nil || len(l.Files) != 1 || l.Files[0].Name != "O'Brien's notes" || l.Files[0].Owners[0].EmailAddress != "ann@example.com" {
		t.Fatalf("search: %+v %v", l, err)
	}
	for _, id := range ids {
		d, err := e.docs(t, app).Documents.Get(id).Do()
		if err != nil || d.Title == "" {
			t.Fatalf("%s: %v", id, err)
		}
	}
	other := e.token(t, "other", "ann@example.com", google.ScopeDriveFile)
	ben := e.token(t, "app", "ben@example.com", google.ScopeDrive)
	for _, tok := range []string{other, ben} {
		if _, err := e.docs(t, tok).Documents.Get(ids[0]).Do(); err == nil {
			t.Fatal("a sample is visible beyond its user and client")
		}
	}
}
