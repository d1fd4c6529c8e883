package mail

import (
	"runtime"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/auditrail/auditrail/toolrunner"
	"github.com/auditrail/auditrail/toolrunner/toolkits/mail/graphapi"
)

func TestHTMLToText(t *testing.T) {
	tests := []struct{ in, want string }{
		{`<html><head><title>T</title><style>p{color:red}</style><script>alert(1)</script></head><body><p>Hello <b>world</b></p><p>Second</p></body></html>`, "Hello world\n\nSecond"},
		{`<div>line one<br>line two<br/><br>after blank</div>`, "line one\nline two\n\nafter blank"},
		{`<ul><li>one</li><li>two &amp; three</li></ul>`, "- one\n- two & three"},
		{`<p>see <a href="https://x.example/a">the page</a> and <a href="https://y.example">https://y.example</a></p>`, "see the page (https://x.example/a) and https://y.example"},
		{`<table><tr><td>a</td><td>b</td></tr><tr><td>c</td><td>d</td></tr></table>`, "a\tb\nc\td"},
		{"<p>  spaced\n\n   out\ttext  </p>", "spaced out text"},
		{`<pre>keep
  this</pre>`, "keep\n  this"},
		{`<!-- hidden --><p>x<script>document.write("y")</script>z</p><noscript>n</noscript>`, "xz"},
		{`plain &lt;not a tag&gt; 😀`, "plain <not a tag> 😀"},
		{`<p>unclosed <b>bold`, "unclosed bold"},
		{`<img src="cid:x" alt="chart"><hr><p>end</p>`, "[chart]\n----\n\nend"},
	}
	for _, tc := range tests {
		if got := htmlToText(tc.in); got != tc.want {
			t.Errorf("htmlToText(%q)\n got %q\nwant %q", tc.in, got, tc.want)
		}
	}
}

func TestCut(t *testing.T) {
	s := "añ😀日x" // 5 characters, 1+2+4+3+1 bytes
	tests := []struct {
		offset, max      int
		part             string
		total, remaining int
	}{
		{0, -1, s, 5, 0},
		{0, 3, "añ😀", 5, 2},
		{2, 2, "😀日", 5, 1},
		{4, 10, "x", 5, 0},
		{5, 1, "", 5, 0},
		{99, 1, "", 5, 0},
		{1, 0, "", 5, 4},
	}
	for _, tc := range tests {
		part, total, rem := cut(s, tc.offset, tc.max)
		if part != tc.part || total != tc.total || rem != tc.remaining || !utf8.ValidString(part) {
			t.Errorf("cut(%d, %d) = %q %d %d; want %q %d %d", tc.offset, tc.max, part, total, rem, tc.part, tc.total, tc.remaining)
		}
	}
}

func TestReplaceAboveQuote(t *testing.T) {
	reply := `<html><head><meta charset="utf-8"></head><body dir="ltr"><div>old text</div><div id="appendonsend"></div><hr style="x"><div id="divRplyFwdMsg"><b>From:</b> A</div><div>original</div></body></html>`
	tests := []struct {
		name     string
		existing *graphapi.ItemBody
		text     string
		want     graphapi.ItemBody
	}{
		{"html reply: above the quote", &graphapi.ItemBody{ContentType: "html", Content: reply}, "new <text>\nline",
			graphapi.ItemBody{ContentType: "html", Content: `<html><head><meta charset="utf-8"></head><body dir="ltr"><div>new &lt;text&gt;<br>line</div><div id="appendonsend"></div><hr style="x"><div id="divRplyFwdMsg"><b>From:</b> A</div><div>original</div></body></html>`}},
		{"divRplyFwdMsg without hr", &graphapi.ItemBody{ContentType: "HTML", Content: `<body><p>x</p><div id="divRplyFwdMsg">From: A</div></body>`}, "y",
			graphapi.ItemBody{ContentType: "html", Content: `<body><div>y</div><div id="divRplyFwdMsg">From: A</div></body>`}},
		{"blockquote", &graphapi.ItemBody{ContentType: "html", Content: `<p>x</p><blockquote>q</blockquote>`}, "y",
			graphapi.ItemBody{ContentType: "html", Content: `<div>y</div><blockquote>q</blockquote>`}},
		{"html draft without quote: overwritten", &graphapi.ItemBody{ContentType: "html", Content: `<p>old</p>`}, "a & b",
			graphapi.ItemBody{ContentType: "html", Content: `<html><body><div>a &amp; b</div></body></html>`}},
		{"text reply", &graphapi.ItemBody{ContentType: "text", Content: "old\n\n________________________________\nFrom: A\noriginal"}, "new",
			graphapi.ItemBody{ContentType: "text", Content: "new\n\n________________________________\nFrom: A\noriginal"}},
		{"text draft", &graphapi.ItemBody{ContentType: "text", Content: "old"}, "new", graphapi.ItemBody{ContentType: "text", Content: "new"}},
		{"no body", nil, "new", graphapi.ItemBody{ContentType: "text", Content: "new"}},
		// Runs whose lowercase has another length (the Kelvin sign, İ, an
		// invalid byte) before the quote do not move the cut.
		{"html with resized runes", &graphapi.ItemBody{ContentType: "html", Content: "<body>\u212a\u212a\u212a\u0130\xff<p>x</p><blockquote>q</blockquote></body>"}, "y",
			graphapi.ItemBody{ContentType: "html", Content: `<body><div>y</div><blockquote>q</blockquote></body>`}},
		{"text with resized runes", &graphapi.ItemBody{ContentType: "text", Content: strings.Repeat("\u212a", 40) + "\n-----Original Message-----\nq"}, "y",
			graphapi.ItemBody{ContentType: "text", Content: "y\n\n-----Original Message-----\nq"}},
	}
	for _, tc := range tests {
		if got := replaceAboveQuote(tc.existing, tc.text); got != tc.want {
			t.Errorf("%s:\n got %+v\nwant %+v", tc.name, got, tc.want)
		}
	}
}

func TestSearchKQL(t *testing.T) {
	tests := []struct {
		in   map[string]any
		want string
	}{
		{map[string]any{}, ""},
		{map[string]any{"keywords": []string{"budget", ` Q3 "final" `, ""}}, `"budget" AND "Q3  final "`},
		{map[string]any{"sender": []string{"a@x.com", "Bob"}, "recipient": []string{"c@x.com"}}, `(from:"a@x.com" OR from:"Bob") AND to:"c@x.com"`},
		{map[string]any{"attachment_name": []string{`a\b.pdf`}, "has_attachments": false, "importance": "HIGH", "is_read": true, "category": "Red category"},
			`attachment:"a b.pdf" AND hasattachments:false AND importance:high AND isread:true AND category:"Red category"`},
		{map[string]any{"received_after": "2026-01-02", "received_before": "2026-01-31"}, `received>=2026-01-02 AND received<=2026-01-31`},
	}
	for _, tc := range tests {
		got, err := searchKQL(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("searchKQL(%v) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	for _, in := range []map[string]any{{"received_after": "2026-1-2"}, {"received_before": "tomorrow"}, {"importance": "urgent"},
		{"received_after": "2026-02-01", "received_before": "2026-01-31"}} {
		if _, err := searchKQL(in); err == nil {
			t.Errorf("searchKQL(%v): no error", in)
		}
	}
	if v := graphapi.SearchValue(`from:"a" AND "b"`); v != `"from:\"a\" AND \"b\""` {
		t.Errorf("SearchValue %s", v)
	}
}

func TestTokenRoundTrip(t *testing.T) {
	tk, err := New(DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	in := map[string]any{"limit": int64(5), "sort_by": "subject", "pagination_token": "ignored"}
	b := binding("u1", "https://graph.example/v1.0", "ListEmails", in)
	if b2 := binding("u1", "https://graph.example/v1.0", "ListEmails", map[string]any{"sort_by": "subject", "limit": int64(5)}); b2 != b {
		t.Fatal("the binding depends on the token or on map order")
	}
	for _, other := range []string{binding("u2", "https://graph.example/v1.0", "ListEmails", in), binding("u1", "https://other.example/v1.0", "ListEmails", in),
		binding("u1", "https://graph.example/v1.0", "SearchEmails", in), binding("u1", "https://graph.example/v1.0", "ListEmails", map[string]any{"limit": int64(6), "sort_by": "subject"})} {
		if other == b {
			t.Fatal("binding collision")
		}
	}
	messages := listing{collection: "/me/messages", query: graphapi.Query{Top: 5}}
	tok, err := tk.encodeToken(b, "/me/messages?$top=5&$skip=5")
	if err != nil {
		t.Fatal(err)
	}
	if rel, err := tk.decodeToken(tok, b, messages); err != nil || rel != "/me/messages?$top=5&$skip=5" {
		t.Fatalf("decode %q %v", rel, err)
	}
	if _, err := tk.decodeToken(tok, b, listing{collection: "/me/mailFolders", query: graphapi.Query{Top: 5}}); err == nil {
		t.Fatal("a messages token continued a folder listing")
	}
	if tok, err := tk.encodeToken(b, ""); tok != "" || err != nil {
		t.Fatal("a last page has a token")
	}
}

// TestFollowable: a next link is followed only when it is the listing's
// own collection (Graph's name('id') spelling allowed) with the listing's
// own query and Graph's paging parameters.
func TestFollowable(t *testing.T) {
	q := graphapi.Query{Filter: "isRead eq false", OrderBy: []graphapi.OrderBy{{Property: "receivedDateTime", Desc: true}}, Top: 10, Select: []string{"id", "subject"}}
	inbox := listing{collection: graphapi.MessagesPath("inbox"), query: q}
	own := graphapi.WithQuery(inbox.collection, q)
	tests := []struct {
		rel  string
		want bool
	}{
		{own, true},
		{own + "&$skip=10", true},
		{own + "&%24skiptoken=abc", true},
		{"/me/mailFolders('inbox')/messages?$top=10&$skip=10", true},
		{"/me/mailFolders/inbox/messages", true},
		{"/users/other/mailFolders/inbox/messages?$skip=10", false},
		{"/me/mailFolders/sentitems/messages?$skip=10", false},
		{"/me/messages?$skip=10", false},
		{own + "&$filter=true", false},
		{"/me/mailFolders/inbox/messages?$filter=subject%20eq%20'x'&$skip=10", false},
		{"/me/mailFolders/inbox/messages?$top=1000", false},
		{"/me/mailFolders/inbox/messages?$expand=attachments", false},
		{"/me/mailFolders/inbox/messages?$skip=-1", false},
		{"/me/mailFolders/inbox/messages?$skip=1&$skip=2", false},
		{"/me/mailFolders/inbox/messages?%zz", false},
		{"/me/mailFolders/in%zzbox/messages", false},
	}
	for _, tc := range tests {
		if got := inbox.followable(tc.rel); got != tc.want {
			t.Errorf("followable(%q) = %v", tc.rel, got)
		}
	}
}

// FuzzPageToken: the decoder never panics, and whatever it accepts is a
// token the toolkit signed of a link of the listing's own shape.
func FuzzPageToken(f *testing.F) {
	tk, err := New(DefaultConfig())
	if err != nil {
		f.Fatal(err)
	}
	b := binding("u1", "https://graph.example/v1.0", "ListEmails", map[string]any{})
	l := listing{collection: "/me/messages", query: graphapi.Query{Top: 10}}
	for _, next := range []string{"/me/messages?$top=10&$skip=10", "https://evil.example/me/messages", "/users/other/messages?$filter=x"} {
		tok, _ := tk.encodeToken(b, next)
		f.Add(tok)
	}
	f.Add("mtk1.eyJiIjoieCIsIm4iOiIvbWUvbWVzc2FnZXMifQ")
	f.Add(tokenPurpose + ".")
	f.Add(strings.Repeat("A", 100))
	f.Fuzz(func(t *testing.T, tok string) {
		rel, err := tk.decodeToken(tok, b, l)
		if err != nil {
			if te := toolrunner.AsError(err); te.Kind != toolrunner.KindInputInvalid {
				t.Fatalf("%+v", te)
			}
			return
		}
		if !l.followable(rel) {
			t.Fatalf("accepted %q", rel)
		}
		if again, err := tk.encodeToken(b, rel); err != nil || again != tok {
			t.Fatalf("accepted %q, which the toolkit did not sign", tok)
		}
		c, cerr := graphapi.New(graphapi.Config{BaseURL: "https://graph.example/v1.0", Token: "t", Retry: graphapi.DefaultConfig().Retry})
		if cerr != nil {
			t.Fatal(cerr)
		}
		if abs, err := c.Resolve(rel); err == nil && !strings.HasPrefix(abs, "https://graph.example/v1.0/me/messages") {
			t.Fatalf("%q resolves to %q", rel, abs)
		}
	})
}

// FuzzHTMLToText: any input renders without panicking, as valid UTF-8
// when the input is, and never with a script's text.
func FuzzHTMLToText(f *testing.F) {
	f.Add(`<p>a<script>evil()</script>b</p>`)
	f.Add(`<ul><li>x<li>y</ul><pre> z </pre>`)
	f.Add("<a href='https://x'>https://x</a><td>1<td>2")
	f.Fuzz(func(t *testing.T, s string) {
		// The tree's conversion, and the tokenizer's of bodies too long
		// for a tree.
		for _, out := range []string{htmlToText(s), streamText(s)} {
			if utf8.ValidString(s) && !utf8.ValidString(out) {
				t.Fatalf("invalid UTF-8 from %q", s)
			}
			if strings.Contains(s, "<script>SECRET</script>") && strings.Contains(out, "SECRET") && strings.Count(s, "SECRET") == 1 {
				t.Fatalf("script text kept: %q", out)
			}
		}
	})
}

// TestHTMLToTextOfAHugeBody: a provider's HTML body past maxTreeHTML is
// converted token by token: the text is the same as the tree's for plain
// markup, and memory stays about the size of the body (a tree of its
// 5.6 million paragraphs would weigh gigabytes).
func TestHTMLToTextOfAHugeBody(t *testing.T) {
	small := `<html><head><style>p{}</style><title>t</title></head><body><p>Hello <b>you</b>,</p><div>line&amp;one<br>two</div><script>evil()</script>end</body></html>`
	if got, want := streamText(small), htmlToText(small); got != want {
		t.Errorf("streamText %q, the tree %q", got, want)
	}
	huge := strings.Repeat("<p>x", 17<<20/4)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	out := htmlToText(huge)
	runtime.ReadMemStats(&after)
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 256<<20 {
		t.Errorf("converting %d bytes allocated %d MiB", len(huge), alloc>>20)
	}
	if !strings.HasPrefix(out, "x\n\nx\n\nx") || strings.Count(out, "x") != 17<<20/4 {
		t.Errorf("%.40q… (%d x)", out, strings.Count(out, "x"))
	}
}
