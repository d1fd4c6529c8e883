package docs

import (
	"context"
	"encoding/base64"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"

	gdocs "google.golang.org/api/docs/v1"
	"google.golang.org/api/drive/v3"

	"github.com/auditrail/auditrail/toolrunner"
)

func TestBuildQuery(t *testing.T) {
	base := "mimeType = 'application/vnd.google-apps.document' and trashed = false"
	tests := []struct {
		name string
		in   map[string]any
		want driveQuery
		err  string
	}{
		{"defaults", map[string]any{}, driveQuery{Q: base, Corpora: "user", OrderBy: "modifiedTime desc"}, ""},
		{"order", map[string]any{"order_by": []string{"name_natural", "createdTime desc"}}, driveQuery{Q: base, Corpora: "user", OrderBy: "name_natural,createdTime desc"}, ""},
		{"bad order", map[string]any{"order_by": []string{"size"}}, driveQuery{}, `order_by[0]: "size" is not one of`},
		{"quote escaped", map[string]any{"document_contains": []string{"O'Brien"}}, driveQuery{Q: base + ` and fullText contains 'O\'Brien'`, Corpora: "user"}, ""},
		{"backslash escaped first", map[string]any{"document_contains": []string{`back\slash`, `\'`}},
			driveQuery{Q: base + ` and fullText contains 'back\\slash' and fullText contains '\\\''`, Corpora: "user"}, ""},
		{"not contains; order ignored", map[string]any{"document_not_contains": []string{"draft"}, "order_by": []string{"name"}},
			driveQuery{Q: base + ` and not fullText contains 'draft'`, Corpora: "user"}, ""},
		{"empty keyword", map[string]any{"document_contains": []string{" "}}, driveQuery{}, "document_contains[0]: must not be empty"},
		{"shared drive", map[string]any{"search_only_in_shared_drive_id": "0AD", "include_shared_drives": true},
			driveQuery{Q: base, Corpora: "drive", DriveID: "0AD", AllDrives: true, OrderBy: "modifiedTime desc"}, ""},
		{"all drives", map[string]any{"include_shared_drives": true, "include_organization_domain_documents": true},
			driveQuery{Q: base, Corpora: "allDrives", AllDrives: true, OrderBy: "modifiedTime desc"}, ""},
		{"domain", map[string]any{"include_organization_domain_documents": true}, driveQuery{Q: base, Corpora: "domain", OrderBy: "modifiedTime desc"}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := buildQuery(tc.in)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("got %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %+v %v\nwant %+v", got, err, tc.want)
			}
		})
	}
}

// TestPageTokenBinding: a token is signed with the toolkit's key and bound
// to the user, the API base and the query; any other token, an unkeyed one
// a caller made (as version 1 was) included, is an input error. Keys
// rotate: [new, old] still opens what old signed.
func TestPageTokenBinding(t *testing.T) {
	oldKey, newKey := []byte("0123456789abcdef-old"), []byte("0123456789abcdef-new")
	kit := func(keys ...[]byte) *Toolkit {
		cfg := DefaultConfig()
		cfg.PageTokenKeys = keys
		tk, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return tk
	}
	old, rotated, other := kit(oldKey), kit(newKey, oldKey), kit([]byte("another key of 16+ bytes"))
	const base = "https://docs.example/"
	q1, _ := buildQuery(map[string]any{})
	q2, _ := buildQuery(map[string]any{"document_contains": []string{"x"}})
	tok, err := old.wrapToken(q1, "u1", base, "drive-token")
	if err != nil || !strings.HasPrefix(tok, tokenPurpose+".") || strings.Contains(tok, "drive-token") {
		t.Fatalf("token not opaque: %s %v", tok, err)
	}
	for _, tk := range []*Toolkit{old, rotated} {
		if p, err := tk.unwrapToken(q1, "u1", base, tok); err != nil || p != "drive-token" {
			t.Fatalf("same query: %q %v", p, err)
		}
	}
	// What version 1 was: an unkeyed hash of what the caller knows.
	forged := "dtk1." + base64.RawURLEncoding.EncodeToString([]byte(`{"b":"x","p":"forged-page"}`))
	for _, tc := range []struct {
		name string
		tk   *Toolkit
		q    driveQuery
		user string
		base string
		tok  string
	}{
		{"other query", old, q2, "u1", base, tok}, {"other user", old, q1, "u2", base, tok}, {"other base", old, q1, "u1", "https://evil.example/", tok},
		{"other key", other, q1, "u1", base, tok}, {"drive's own token", old, q1, "u1", base, "drive-token"}, {"garbage", old, q1, "u1", base, tokenPurpose + ".!!"},
		{"truncated", old, q1, "u1", base, tok[:len(tok)-3]}, {"forged v1", old, q1, "u1", base, forged},
	} {
		if _, err := tc.tk.unwrapToken(tc.q, tc.user, tc.base, tc.tok); toolrunner.AsError(err).Kind != toolrunner.KindInputInvalid {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
	if tok, err := old.wrapToken(q1, "u1", base, ""); tok != "" || err != nil {
		t.Error("a last page has a token")
	}
	cfg := DefaultConfig()
	cfg.PageTokenKeys = [][]byte{[]byte("short")}
	if _, err := New(cfg); err == nil {
		t.Error("a short key accepted")
	}
	cfg.PageTokenKeys = nil
	if _, err := New(cfg); err == nil {
		t.Error("no key accepted")
	}
}

func titles(t *testing.T, out any) []string {
	t.Helper()
	m := obj(t, out)
	docs, _ := m["documents"].([]map[string]any)
	if m["documents_count"] != len(docs) {
		t.Fatalf("documents_count %v for %d documents", m["documents_count"], len(docs))
	}
	var ts []string
	for _, d := range docs {
		ts = append(ts, d["title"].(string))
	}
	return ts
}

func (e *env) create(t *testing.T, title, text string) string {
	t.Helper()
	return obj(t, e.ok(t, "CreateDocumentFromText", map[string]any{"title": title, "text_content": text, "input_format": "plain"}))["documentId"].(string)
}

func TestSearchDocuments(t *testing.T) {
	e := newEnv(t)
	e.create(t, "Irish notes", "Meeting with O'Brien about the budget")
	e.create(t, "Paths", `The folder is C:\back\slash on the share`)
	e.create(t, "Plain", "nothing special here")
	trashed := e.create(t, "Binned", "O'Brien again")
	_, dr := e.direct(t, e.token(t, "u1", ScopeDriveFile))
	if _, err := dr.Files.Update(trashed, &drive.File{Trashed: true}).Do(); err != nil {
		t.Fatal(err)
	}
	// Another user's documents are not listed.
	if res := e.runAs(t, "u2", "CreateDocumentFromText", map[string]any{"title": "Ben's O'Brien", "text_content": "O'Brien", "input_format": "plain"}); !res.Success {
		t.Fatal(res.Error)
	}

	tests := []struct {
		name string
		in   map[string]any
		want []string
	}{
		{"quote", map[string]any{"document_contains": []any{"O'Brien"}}, []string{"Irish notes"}},
		{"backslash", map[string]any{"document_contains": []any{`back\slash`}}, []string{"Paths"}},
		{"not contains", map[string]any{"document_not_contains": []any{"O'Brien", `back\slash`}}, []string{"Plain"}},
		// Drive refuses orderBy with a full-text search (403): order_by
		// must be dropped, not sent.
		{"order ignored with contains", map[string]any{"document_contains": []any{"O'Brien"}, "order_by": []any{"name"}}, []string{"Irish notes"}},
		{"order by name", map[string]any{"order_by": []any{"name desc"}}, []string{"Plain", "Paths", "Irish notes"}},
		{"default: most recently modified first", map[string]any{}, []string{"Plain", "Paths", "Irish notes"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := titles(t, e.ok(t, "SearchDocuments", tc.in))
			if !slices.Equal(got, tc.want) {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
	out := obj(t, e.ok(t, "SearchDocuments", map[string]any{"document_contains": []any{"O'Brien"}}))
	d := out["documents"].([]map[string]any)[0]
	if d["url"] != documentURL(d["id"].(string)) || d["modified_time"] == "" || out["has_more"] != false || out["pagination_token"] != "" {
		t.Errorf("answer %v", out)
	}
	if _, ok := d["content"]; ok {
		t.Error("SearchDocuments answered content")
	}
}

func TestSearchPagination(t *testing.T) {
	e := newEnv(t)
	var want []string
	for i := range 5 {
		title := fmt.Sprintf("Doc %d", i)
		e.create(t, title, "page test")
		want = append(want, title)
	}
	in := map[string]any{"limit": 2.0, "order_by": []any{"name"}}
	var got []string
	var pages []int
	for range 10 {
		out := obj(t, e.ok(t, "SearchDocuments", in))
		ts := titles(t, out)
		got = append(got, ts...)
		pages = append(pages, len(ts))
		if out["has_more"] != (out["pagination_token"] != "") {
			t.Fatalf("has_more and token disagree: %v", out)
		}
		if out["has_more"] == false {
			break
		}
		tok := out["pagination_token"].(string)
		// The token is bound to this search: with other filters it is refused.
		te := e.fails(t, "SearchDocuments", map[string]any{"limit": 2.0, "order_by": []any{"name desc"}, "pagination_token": tok}, toolrunner.KindInputInvalid)
		if !strings.Contains(te.Message, "other filters") {
			t.Errorf("replayed token: %v", te)
		}
		e.fails(t, "SearchDocuments", map[string]any{"document_contains": []any{"page"}, "pagination_token": tok}, toolrunner.KindInputInvalid)
		in["pagination_token"] = tok
	}
	if !slices.Equal(got, want) || !slices.Equal(pages, []int{2, 2, 1}) {
		t.Fatalf("pages %v: %q", pages, got)
	}
	e.fails(t, "SearchDocuments", map[string]any{"pagination_token": "not-a-token"}, toolrunner.KindInputInvalid)
}

func TestSearchAndRetrieve(t *testing.T) {
	e := newEnv(t)
	id := obj(t, e.ok(t, "CreateDocumentFromText", map[string]any{"title": "Report", "text_content": "# Results\n\nIt **worked**.\n"}))["documentId"].(string)
	for _, tc := range []struct {
		format string
		check  func(any) bool
	}{
		{"docmd", func(c any) bool {
			s, _ := c.(string)
			return strings.Contains(s, "HEADING_1]\nResults") && strings.Contains(s, "styles=bold:")
		}},
		{"markdown", func(c any) bool {
			s, _ := c.(string)
			return strings.Contains(s, "# Results") && strings.Contains(s, "**worked**")
		}},
		{"HTML", func(c any) bool {
			s, _ := c.(string)
			return strings.Contains(s, "<h1") && strings.Contains(s, "<strong>worked</strong>") || strings.Contains(s, "<b>worked</b>")
		}},
		{"provider_api_json", func(c any) bool {
			m, _ := c.(map[string]any)
			body, _ := m["body"].(map[string]any)
			return m["documentId"] == id && body["content"] != nil && m["tabs"] == nil
		}},
	} {
		t.Run(tc.format, func(t *testing.T) {
			out := obj(t, e.ok(t, "SearchAndRetrieveDocuments", map[string]any{"return_format": tc.format, "document_contains": []any{"Results"}}))
			docs := out["documents"].([]map[string]any)
			if len(docs) != 1 || docs[0]["id"] != id || docs[0]["title"] != "Report" {
				t.Fatalf("documents %v", docs)
			}
			tabs, _ := docs[0]["tabs"].([]map[string]any)
			if len(tabs) != 1 || tabs[0]["tab_id"] == "" || docs[0]["return_format"] != strings.ToLower(tc.format) {
				t.Errorf("tabs metadata %v", docs[0])
			}
			if !tc.check(docs[0]["content"]) {
				t.Errorf("%s content:\n%v", tc.format, docs[0]["content"])
			}
		})
	}
	// Default format: markdown.
	out := obj(t, e.ok(t, "SearchAndRetrieveDocuments", map[string]any{}))
	if d := out["documents"].([]map[string]any); len(d) != 1 || d[0]["return_format"] != "markdown" {
		t.Errorf("default format %v", out)
	}
}

// TestPickerFlow: a document the app neither created nor was granted is
// not found, with the picker named; once the user picked it (the emulator's
// grant, what the picker page does) the same call succeeds (seeds/002 Errors
// rule 1).
func TestPickerFlow(t *testing.T) {
	e := newEnv(t)
	otherTok := e.clientToken(t, "other-app", "s2", "https://other.example/cb", "u1", ScopeDriveFile)
	ds, _ := e.direct(t, otherTok)
	d, err := ds.Documents.Create(&gdocs.Document{Title: "Made elsewhere"}).Context(context.Background()).Do()
	if err != nil {
		t.Fatal(err)
	}
	te := e.fails(t, "GetDocumentAsDocmd", map[string]any{"document_id": d.DocumentId}, toolrunner.KindNotFound)
	if !strings.Contains(te.Message, "GenerateGoogleFilePickerUrl") {
		t.Fatalf("no picker hint: %v", te)
	}
	if ts := titles(t, e.ok(t, "SearchDocuments", map[string]any{})); len(ts) != 0 {
		t.Fatalf("an ungranted document is listed: %v", ts)
	}
	if err := e.google.GrantFile("u1", "app", d.DocumentId); err != nil {
		t.Fatal(err)
	}
	if md := e.docmdOf(t, d.DocumentId); !strings.Contains(md, "Made elsewhere") {
		t.Fatalf("after the grant:\n%s", md)
	}
	if ts := titles(t, e.ok(t, "SearchDocuments", map[string]any{})); !slices.Equal(ts, []string{"Made elsewhere"}) {
		t.Fatalf("after the grant: %v", ts)
	}
}

func TestComments(t *testing.T) {
	e := newEnv(t)
	id := e.create(t, "Commented", "text")
	c1 := obj(t, e.ok(t, "CommentOnDocument", map[string]any{"document_id": id, "comment_text": "First remark"}))
	c2 := obj(t, e.ok(t, "CommentOnDocument", map[string]any{"document_id": id, "comment_text": "Second remark"}))
	if c1["comment_id"] == "" || c1["documentId"] != id || c1["documentUrl"] != documentURL(id) {
		t.Fatalf("comment %v", c1)
	}
	_, dr := e.direct(t, e.token(t, "u1", ScopeDriveFile))
	if err := dr.Comments.Delete(id, c2["comment_id"].(string)).Do(); err != nil {
		t.Fatal(err)
	}
	list := func(deleted bool) []string {
		out := obj(t, e.ok(t, "ListDocumentComments", map[string]any{"document_id": id, "include_deleted": deleted}))
		var got []string
		for _, c := range out["comments"].([]map[string]any) {
			a, _ := c["author"].(map[string]any)
			got = append(got, fmt.Sprintf("%v|%v|%v", c["content"], c["deleted"], a["emailAddress"]))
		}
		sort.Strings(got)
		return got
	}
	if got := list(false); !slices.Equal(got, []string{"First remark|<nil>|ann@example.com"}) {
		t.Errorf("comments %q", got)
	}
	if got := list(true); len(got) != 2 || !strings.HasSuffix(got[0], "|true|ann@example.com") {
		t.Errorf("with deleted %q", got)
	}
	e.fails(t, "CommentOnDocument", map[string]any{"document_id": "1nope", "comment_text": "x"}, toolrunner.KindNotFound)
	e.fails(t, "ListDocumentComments", map[string]any{"document_id": "1nope"}, toolrunner.KindNotFound)
}

func TestWhoAmI(t *testing.T) {
	e := newEnv(t)
	out := obj(t, e.ok(t, "WhoAmI", nil))
	drv, _ := out["drive"].(map[string]any)
	if out["name"] != "Ann Example" || out["email"] != "ann@example.com" || drv["email"] != "ann@example.com" || out["access"] == nil {
		t.Fatalf("whoami %v", out)
	}
	// A connection lacking the profile scopes: the runner asks for them.
	e.connect(t, "u1", ScopeDriveFile)
	res := e.run(t, "WhoAmI", nil)
	if res.Success || res.Error.Kind != toolrunner.KindAuthorization {
		t.Fatalf("without profile scopes: %+v", res.Error)
	}
}

// TestSearchSharedDrives: the drive options reach Drive as corpora,
// driveId and the all-drives flags, so each finds what it should.
func TestSearchSharedDrives(t *testing.T) {
	e := newEnv(t)
	e.create(t, "Mine", "x")
	inDrive := e.create(t, "Team doc", "x")
	sd := e.google.AddSharedDrive("u1", "Team")
	if err := e.google.MoveToDrive(inDrive, sd); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		in   map[string]any
		want []string
	}{
		{"own drive only", map[string]any{}, []string{"Mine"}},
		{"one shared drive", map[string]any{"search_only_in_shared_drive_id": sd}, []string{"Team doc"}},
		{"all drives", map[string]any{"include_shared_drives": true, "order_by": []any{"name"}}, []string{"Mine", "Team doc"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := titles(t, e.ok(t, "SearchDocuments", tc.in)); !slices.Equal(got, tc.want) {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
	out := obj(t, e.ok(t, "SearchDocuments", map[string]any{"search_only_in_shared_drive_id": sd}))
	if d := out["documents"].([]map[string]any); d[0]["drive_id"] != sd {
		t.Errorf("drive_id %v", d[0])
	}
	// A shared drive the user is not a member of: not found.
	res := e.runAs(t, "u2", "SearchDocuments", map[string]any{"search_only_in_shared_drive_id": sd})
	if res.Success || res.Error.Kind != toolrunner.KindNotFound || !strings.Contains(res.Error.Message, "not one of its members") {
		t.Errorf("non-member: %+v", res.Error)
	}
}

// TestRetrieveKeepsOrder: the documents are read in parallel, each
// answered in the listing's order with its own content.
func TestRetrieveKeepsOrder(t *testing.T) {
	e := newEnv(t)
	var want []string
	for i := range 9 {
		title := fmt.Sprintf("Doc %d", i)
		e.create(t, title, "content of "+title)
		want = append(want, title)
	}
	out := obj(t, e.ok(t, "SearchAndRetrieveDocuments", map[string]any{"order_by": []any{"name"}, "limit": 20.0, "return_format": "markdown"}))
	if got := titles(t, out); !slices.Equal(got, want) {
		t.Fatalf("order %q", got)
	}
	for _, d := range out["documents"].([]map[string]any) {
		if c, _ := d["content"].(string); strings.TrimSpace(c) != "content of "+d["title"].(string) {
			t.Errorf("%v: content %q", d["title"], c)
		}
	}
}
