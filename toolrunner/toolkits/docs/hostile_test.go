package docs

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/auditrail/auditrail/internal/oauthflow"
	"github.com/auditrail/auditrail/internal/provhttp"
	"github.com/auditrail/auditrail/internal/provhttp/provhttptest"
	"github.com/auditrail/auditrail/toolrunner"
	"github.com/auditrail/auditrail/toolrunner/toolkits/docs/docmd"
)

// hostileGoogle is a Google API base a tenant chose: documents.get answers
// doc, files.list one file; a 307 of documents.get goes to elsewhere.
type hostileGoogle struct {
	srv *httptest.Server
	mu  sync.Mutex
	// doc is the documents.get answer; size, when set, instead streams
	// that many bytes of a JSON string (declaring its length when
	// declared).
	doc      string
	size     int64
	declared bool
	redirect string
}

func newHostileGoogle(t *testing.T) *hostileGoogle {
	h := &hostileGoogle{}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.mu.Lock()
		doc, size, declared, redirect := h.doc, h.size, h.declared, h.redirect
		h.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		switch {
		case strings.HasSuffix(r.URL.Path, "/comments"):
			// Page after page of one big comment, forever.
			io.WriteString(w, `{"nextPageToken":"more","comments":[{"id":"c","content":"`+strings.Repeat("x", 30000)+`"}]}`)
		case strings.HasPrefix(r.URL.Path, "/drive/v3/files"):
			io.WriteString(w, `{"files":[{"id":"evil","name":"Evil"},null,{"id":"evil2","name":"Evil 2"}]}`)
		case !strings.HasPrefix(r.URL.Path, "/v1/documents/"):
			http.NotFound(w, r)
		case redirect != "":
			http.Redirect(w, r, redirect, http.StatusTemporaryRedirect)
		case size > 0:
			provhttptest.WriteHuge(w, `{"title":"`, `"}`, size, declared)
		default:
			io.WriteString(w, doc)
		}
	}))
	t.Cleanup(h.srv.Close)
	return h
}

func (h *hostileGoogle) set(f func(h *hostileGoogle)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.doc, h.size, h.declared, h.redirect = "", 0, false, ""
	f(h)
}

// witness is another host: it records the Authorization of whatever
// reaches it.
func witness(t *testing.T) (*httptest.Server, func() []string) {
	var mu sync.Mutex
	var seen []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.URL.Path+" Authorization="+r.Header.Get("Authorization"))
		mu.Unlock()
		io.WriteString(w, `{"documentId":"stolen","title":"stolen"}`)
	}))
	t.Cleanup(srv.Close)
	return srv, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), seen...)
	}
}

// TestHostileGoogleAnswers: a tenant's api_base_url answering documents
// no Google document is, or more bytes than the cap, costs the call (an
// upstream tool error; one document's error in SearchAndRetrieveDocuments)
// and never the process: neither an allocation sized by the provider's
// numbers nor a panic in a search goroutine.
func TestHostileGoogleAnswers(t *testing.T) {
	e := newEnv(t)
	h := newHostileGoogle(t)
	e.conns.Update("u1", func(c *oauthflow.Connection) { c.APIBaseURL = h.srv.URL })
	para := func(start, end int64) string {
		return `{"documentId":"evil","title":"Evil","body":{"content":[{"startIndex":` + strconv.FormatInt(start, 10) + `,"endIndex":` + strconv.FormatInt(end, 10) +
			`,"paragraph":{"elements":[{"startIndex":1,"endIndex":3,"textRun":{"content":"x\n"}}]}}]}}`
	}
	var deep strings.Builder
	deep.WriteString(`{"documentId":"evil","body":{"content":[`)
	for range docmd.MaxTableDepth + 8 {
		deep.WriteString(`{"table":{"rows":1,"columns":1,"tableRows":[{"tableCells":[{"content":[`)
	}
	for range docmd.MaxTableDepth + 8 {
		deep.WriteString(`]}]}]}}`)
	}
	deep.WriteString(`]}}`)
	// big: a streamed body past the cap. Reading the 64 MiB the default
	// cap lets through takes tens of seconds under -race on a loaded
	// machine, so this case caps the toolkit's transport at 4 MiB: the
	// same LimitBody; the default's value is TestMaxResponseBytes', and a
	// declared length past it fails at once (the "declared" case).
	tests := []struct {
		name string
		set  func(h *hostileGoogle)
		big  bool
	}{
		{"100 MiB body", func(h *hostileGoogle) { h.size = 100 << 20 }, true},
		{"end index 68719476736", func(h *hostileGoogle) { h.doc = para(1, 68719476736) }, false},
		{"end index -500", func(h *hostileGoogle) { h.doc = para(1, -500) }, false},
		{"start after end", func(h *hostileGoogle) { h.doc = para(3, 1) }, false},
		{"huge table", func(h *hostileGoogle) {
			h.doc = `{"documentId":"evil","body":{"content":[{"startIndex":1,"endIndex":5,"table":{"rows":68719476736,"columns":68719476736,` +
				`"tableRows":[{"tableCells":[{"tableCellStyle":{"rowSpan":68719476736,"columnSpan":68719476736}}]}]}}]}}`
		}, false},
		{"deeply nested tables", func(h *hostileGoogle) { h.doc = deep.String() }, false},
		{"absurd list nesting", func(h *hostileGoogle) {
			h.doc = `{"documentId":"evil","body":{"content":[{"startIndex":1,"endIndex":3,"paragraph":{"bullet":{"listId":"l","nestingLevel":68719476736},` +
				`"elements":[{"startIndex":1,"endIndex":3,"textRun":{"content":"x\n"}}]}}]},"lists":{"l":{"listProperties":{"nestingLevels":[{}]}}}}`
		}, false},
		{"100 MiB body declared", func(h *hostileGoogle) { h.size, h.declared = 100<<20, true }, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h.set(tc.set)
			big := tc.big
			if big {
				limited := e.tk.limited
				e.tk.limited = provhttp.LimitBody(e.tk.base, 4<<20)
				defer func() { e.tk.limited = limited }()
			}
			for _, tc := range []struct {
				tool string
				in   map[string]any
			}{
				{"GetDocumentAsDocmd", map[string]any{"document_id": "evil"}},
				{"GetDocumentById", map[string]any{"document_id": "evil"}},
				{"GetDocumentMetadata", map[string]any{"document_id": "evil"}},
				{"InsertTextAtEndOfDocument", map[string]any{"document_id": "evil", "text_content": "x"}},
			} {
				tool := tc.tool
				te := e.fails(t, tool, tc.in, toolrunner.KindUpstream)
				if te.CanRetry {
					t.Errorf("%s: %+v (a hostile answer is not worth retrying)", tool, te)
				}
			}
			for _, format := range []string{FormatDocMD, FormatMarkdown, FormatHTML, FormatJSON} {
				out := obj(t, e.ok(t, "SearchAndRetrieveDocuments", map[string]any{"return_format": format}))
				docs := out["documents"].([]map[string]any)
				if len(docs) != 2 {
					t.Fatalf("%s: %d documents, want 2 (the null one dropped)", format, len(docs))
				}
				for _, d := range docs {
					if e, _ := d["error"].(map[string]any); e["kind"] != toolrunner.KindUpstream || d["content"] != nil {
						t.Errorf("%s: %v", format, d)
					}
				}
			}
		})
	}
	// The same toolkit still serves a well-formed answer of that host.
	h.set(func(h *hostileGoogle) { h.doc = para(1, 3) })
	if out, _ := e.ok(t, "GetDocumentAsDocmd", map[string]any{"document_id": "evil"}).(string); !strings.Contains(out, "[p") {
		t.Errorf("%q", out)
	}
}

// TestRedirectKeepsTheToken: a Docs API base that redirects to another
// host does not get the user's bearer token there (oauth2.Transport would
// set it on every hop): the redirect is refused, the other host sees no
// request at all.
func TestRedirectKeepsTheToken(t *testing.T) {
	e := newEnv(t)
	h := newHostileGoogle(t)
	other, seen := witness(t)
	e.conns.Update("u1", func(c *oauthflow.Connection) { c.APIBaseURL = h.srv.URL })
	h.set(func(h *hostileGoogle) { h.redirect = other.URL + "/v1/documents/evil" })
	te := e.fails(t, "GetDocumentById", map[string]any{"document_id": "evil"}, toolrunner.KindUpstream)
	if !strings.Contains(te.Message, "redirect") {
		t.Errorf("%+v", te)
	}
	out := obj(t, e.ok(t, "SearchAndRetrieveDocuments", map[string]any{"return_format": FormatMarkdown}))
	if d := out["documents"].([]map[string]any); d[0]["error"] == nil {
		t.Errorf("%v", d)
	}
	if s := seen(); len(s) != 0 {
		t.Fatalf("the other host was called: %q", s)
	}
}

// TestMaxResponseBytes: the cap is a validated config field.
func TestMaxResponseBytes(t *testing.T) {
	cfg := DefaultConfig()
	if cfg.MaxResponseBytes != 64<<20 {
		t.Errorf("default %d", cfg.MaxResponseBytes)
	}
	cfg.MaxResponseBytes = 0
	if _, err := New(cfg); err == nil {
		t.Error("MaxResponseBytes 0 accepted")
	}
	b, _ := json.Marshal(cfg)
	_ = b
}

// TestAnswersStayBounded: what a tool gathers over several provider
// answers weighs at most what one answer may (Config.MaxResponseBytes):
// comments over endless pages stop, truncated; documents retrieved
// together past the budget carry an error instead of their content.
func TestAnswersStayBounded(t *testing.T) {
	e := newEnv(t)
	h := newHostileGoogle(t)
	e.conns.Update("u1", func(c *oauthflow.Connection) { c.APIBaseURL = h.srv.URL })
	e.tk.cfg.MaxResponseBytes = 100_000
	out := obj(t, e.ok(t, "ListDocumentComments", map[string]any{"document_id": "evil"}))
	if out["truncated"] != true || out["comments_count"] != 3 {
		t.Errorf("comments: truncated %v, %v comments", out["truncated"], out["comments_count"])
	}
	h.set(func(h *hostileGoogle) {
		h.doc = `{"documentId":"evil","title":"Big","body":{"content":[{"startIndex":1,"endIndex":60002,"paragraph":{"elements":[` +
			`{"startIndex":1,"endIndex":60002,"textRun":{"content":"` + strings.Repeat("y", 60000) + `\n"}}]}}]}}`
	})
	docs := obj(t, e.ok(t, "SearchAndRetrieveDocuments", map[string]any{"return_format": FormatMarkdown}))["documents"].([]map[string]any)
	var full, refused int
	for _, d := range docs {
		if d["content"] != nil {
			full++
		} else if e, _ := d["error"].(map[string]any); e["kind"] == toolrunner.KindUpstream && strings.Contains(e["message"].(string), "too large") {
			refused++
		}
	}
	if full != 1 || refused != 1 {
		t.Errorf("%d with content, %d refused: %v", full, refused, docs)
	}
}
