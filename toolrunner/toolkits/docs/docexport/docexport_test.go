package docexport

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/extension"
	gmhtml "github.com/yuin/goldmark/renderer/html"
	"golang.org/x/net/html"
	docs "google.golang.org/api/docs/v1"
)

var update = flag.Bool("update", false, "rewrite golden files")

func loadDoc(t testing.TB, path string) *docs.Document {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var d docs.Document
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatal(err)
	}
	return &d
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Errorf("output differs from %s:\n%s", path, got)
	}
}

// TestGolden exports the DocMD fixtures (every element kind, emoji, CJK, tabs) and a list/escaping
// fixture; `go test -run TestGolden -update` rewrites testdata/*.md and *.html.
func TestGolden(t *testing.T) {
	fixtures := []struct{ name, path string }{
		{"kitchen_sink", "../docmd/testdata/kitchen_sink.json"},
		{"tabs", "../docmd/testdata/tabs.json"},
		{"lists", "testdata/lists.json"},
	}
	for _, f := range fixtures {
		d := loadDoc(t, f.path)
		t.Run(f.name+".md", func(t *testing.T) { golden(t, f.name+".md", Markdown(d)) })
		t.Run(f.name+".html", func(t *testing.T) {
			got := HTML(d)
			golden(t, f.name+".html", got)
			checkHTML(t, got)
		})
	}
}

// builders for hand-made documents; indices do not matter to the exporters.
func text(s string, ts *docs.TextStyle) *docs.ParagraphElement {
	return &docs.ParagraphElement{TextRun: &docs.TextRun{Content: s, TextStyle: ts}}
}

func para(named string, bullet *docs.Bullet, els ...*docs.ParagraphElement) *docs.StructuralElement {
	els = append(els, text("\n", nil))
	return &docs.StructuralElement{Paragraph: &docs.Paragraph{Elements: els, Bullet: bullet,
		ParagraphStyle: &docs.ParagraphStyle{NamedStyleType: named}}}
}

func doc(lists map[string]docs.List, content ...*docs.StructuralElement) *docs.Document {
	return &docs.Document{Title: "T", Body: &docs.Body{Content: content}, Lists: lists}
}

func link(u string) *docs.TextStyle { return &docs.TextStyle{Link: &docs.Link{Url: u}} }

func TestExport(t *testing.T) {
	numbered := map[string]docs.List{
		"n": {ListProperties: &docs.ListProperties{NestingLevels: []*docs.NestingLevel{
			{GlyphType: "DECIMAL", GlyphFormat: "%0."}, {GlyphType: "ALPHA", GlyphFormat: "%1."}}}},
		"b": {ListProperties: &docs.ListProperties{NestingLevels: []*docs.NestingLevel{
			{GlyphSymbol: "●"}, {GlyphSymbol: "○"}}}},
	}
	tests := []struct {
		name     string
		d        *docs.Document
		md, html []string // substrings that must appear
		notMD    []string
		notHTML  []string
	}{
		{
			name:    "script text is escaped",
			d:       doc(nil, para("NORMAL_TEXT", nil, text(`<script>alert("x")</script> & <b>`, nil))),
			md:      []string{`\<script\>alert("x")\</script\> \& \<b\>`},
			html:    []string{`<p>&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt; &amp; &lt;b&gt;</p>`},
			notHTML: []string{"<script>", "<b>"},
		},
		{
			name: "javascript link dropped, https kept",
			d: doc(nil, para("NORMAL_TEXT", nil, text("bad", link("javascript:alert(1)")), text(" ", nil),
				text("good", link(`https://e.com/a b?q="x"&y=(1)`)))),
			md:      []string{"bad [good](https://e.com/a%20b?q=\"x\"&y=%281%29)"},
			notMD:   []string{"javascript"},
			html:    []string{`bad <a href="https://e.com/a b?q=&#34;x&#34;&amp;y=(1)">good</a>`},
			notHTML: []string{"javascript"},
		},
		{
			name: "markdown block markers at line start are literal",
			d: doc(nil, para("NORMAL_TEXT", nil, text("# not a heading\v- not a list\v1. not numbered\v    not code", nil)),
				para("NORMAL_TEXT", nil, text("=== *x* _y_ `z` [a](b) |c| ~d~ \\e", nil))),
			md: []string{
				"\\# not a heading\\\n\\- not a list\\\n1\\. not numbered\\\nnot code",
				"\\=== \\*x\\* \\_y\\_ \\`z\\` \\[a\\](b) \\|c\\| \\~d\\~ \\\\e",
			},
			html: []string{"# not a heading<br>- not a list<br>1. not numbered<br>    not code"},
		},
		{
			name: "headings and subtitle",
			d: doc(nil, para("TITLE", nil, text("Title", nil)), para("SUBTITLE", nil, text("Sub", nil)),
				para("HEADING_1", nil, text("H1", nil)), para("HEADING_3", nil, text("H3", nil)),
				para("HEADING_6", nil, text("H6", nil))),
			md:   []string{"# Title\n\n*Sub*\n\n# H1\n\n### H3\n\n###### H6\n"},
			html: []string{"<h1>Title</h1>", `<p class="subtitle">Sub</p>`, "<h1>H1</h1>", "<h3>H3</h3>", "<h6>H6</h6>"},
		},
		{
			name: "emphasis never opens on whitespace",
			d: doc(nil, para("NORMAL_TEXT", nil, text("a", nil), text(" bold ", &docs.TextStyle{Bold: true}),
				text("both", &docs.TextStyle{Bold: true, Italic: true}), text(" c", nil),
				text("gone", &docs.TextStyle{Strikethrough: true}))),
			// "both" ends the bold span with an inner delimiter: tags, which parse whatever follows.
			md:   []string{"a <strong>bold *both*</strong> c~~gone~~"},
			html: []string{"a<strong> bold </strong><strong><em>both</em></strong> c<s>gone</s>"},
		},
		{
			name: "emphasis next to punctuation or emoji uses tags",
			d: doc(nil, para("NORMAL_TEXT", nil, text("x", nil), text("(a)", &docs.TextStyle{Bold: true}), text("y ", nil),
				text("😀", &docs.TextStyle{Italic: true}), text(" plain ", nil), text("word", &docs.TextStyle{Italic: true}), text("s", nil))),
			md:   []string{"x<strong>(a)</strong>y <em>😀</em> plain *word*s"},
			html: []string{"x<strong>(a)</strong>y <em>😀</em> plain <em>word</em>s"},
		},
		{
			name: "a numbered list starting past 1 after a list item gets a blank line",
			d: doc(numbered,
				para("NORMAL_TEXT", &docs.Bullet{ListId: "n"}, text("one", nil)),
				para("NORMAL_TEXT", &docs.Bullet{ListId: "b"}, text("dot", nil)),
				para("NORMAL_TEXT", &docs.Bullet{ListId: "n"}, text("two", nil))),
			md: []string{"1. one\n- dot\n\n2. two\n"},
		},
		{
			name: "a heading keeps its hashes and a soft break at the end is dropped",
			d:    doc(nil, para("HEADING_2", nil, text("C# #", nil)), para("NORMAL_TEXT", nil, text("back\\\vslash\v", nil))),
			md:   []string{"## C\\# \\#\n\nback\\\\<br>\nslash\n"},
		},
		{
			name: "numbered and bullet lists nest and keep the document's numbering",
			d: doc(numbered,
				para("NORMAL_TEXT", &docs.Bullet{ListId: "n"}, text("one", nil)),
				para("NORMAL_TEXT", &docs.Bullet{ListId: "n", NestingLevel: 1}, text("one.a", nil)),
				para("NORMAL_TEXT", &docs.Bullet{ListId: "n", NestingLevel: 1}, text("one.b", nil)),
				para("NORMAL_TEXT", &docs.Bullet{ListId: "n"}, text("two", nil)),
				para("NORMAL_TEXT", nil, text("between", nil)),
				para("NORMAL_TEXT", &docs.Bullet{ListId: "n"}, text("three", nil)),
				para("NORMAL_TEXT", &docs.Bullet{ListId: "b"}, text("dot", nil)),
				para("NORMAL_TEXT", &docs.Bullet{ListId: "b", NestingLevel: 1}, text("circle", nil)),
			),
			md: []string{"1. one\n   1. one.a\n   2. one.b\n2. two\n\nbetween\n\n3. three\n- dot\n  - circle\n"},
			html: []string{
				"<ol>\n<li>one<ol>\n<li>one.a</li>\n<li>one.b</li>\n</ol>\n</li>\n<li>two</li>\n</ol>\n<p>between</p>",
				"<ol start=\"3\">\n<li>three</li>\n</ol>\n<ul>\n<li>dot<ul>\n<li>circle</li>\n</ul>\n</li>\n</ul>",
			},
		},
		{
			name: "table cells escape pipes and join paragraphs",
			d: doc(nil, &docs.StructuralElement{Table: &docs.Table{Rows: 2, Columns: 2, TableRows: []*docs.TableRow{
				{TableCells: []*docs.TableCell{
					{Content: []*docs.StructuralElement{para("NORMAL_TEXT", nil, text("a|b", nil))}},
					{Content: []*docs.StructuralElement{para("NORMAL_TEXT", nil, text("x", nil)), para("NORMAL_TEXT", nil, text("y", nil))}}}},
				{TableCells: []*docs.TableCell{
					{Content: []*docs.StructuralElement{para("NORMAL_TEXT", nil, text("- c", nil))}},
					{Content: []*docs.StructuralElement{para("NORMAL_TEXT", nil, text("", nil))}}}},
			}}}),
			md:   []string{"| a\\|b | x<br>y |\n| --- | --- |\n| - c |  |"},
			html: []string{"<td>\n<p>a|b</p>\n</td>", "<td>\n<p>x</p>\n<p>y</p>\n</td>"},
		},
		{
			name: "page break and rule split the paragraph",
			d: doc(nil, para("NORMAL_TEXT", nil, text("before", nil), &docs.ParagraphElement{PageBreak: &docs.PageBreak{}},
				text("after", nil), &docs.ParagraphElement{HorizontalRule: &docs.HorizontalRule{}}, text("last", nil))),
			md:   []string{"before\n\n---\n\nafter\n\n---\n\nlast\n"},
			html: []string{"<p>before</p>\n<div class=\"page-break\" style=\"break-after: page\"></div>\n<p>after</p>\n<hr>\n<p>last</p>"},
		},
		{
			name: "first tab when tabs content is included",
			d: &docs.Document{Title: "Tabs", Tabs: []*docs.Tab{
				{DocumentTab: &docs.DocumentTab{Body: &docs.Body{Content: []*docs.StructuralElement{para("NORMAL_TEXT", nil, text("first tab", nil))}}}},
				{DocumentTab: &docs.DocumentTab{Body: &docs.Body{Content: []*docs.StructuralElement{para("NORMAL_TEXT", nil, text("second tab", nil))}}}},
			}},
			md:      []string{"first tab"},
			notMD:   []string{"second tab"},
			html:    []string{"<p>first tab</p>"},
			notHTML: []string{"second tab"},
		},
		{
			name: "nil document",
			d:    nil,
			html: []string{"<body>\n</body>"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			md, h := Markdown(tc.d), HTML(tc.d)
			for _, s := range tc.md {
				if !strings.Contains(md, s) {
					t.Errorf("markdown lacks %q:\n%s", s, md)
				}
			}
			for _, s := range tc.notMD {
				if strings.Contains(md, s) {
					t.Errorf("markdown holds %q:\n%s", s, md)
				}
			}
			for _, s := range tc.html {
				if !strings.Contains(h, s) {
					t.Errorf("html lacks %q:\n%s", s, h)
				}
			}
			for _, s := range tc.notHTML {
				if strings.Contains(h, s) {
					t.Errorf("html holds %q:\n%s", s, h)
				}
			}
			checkHTML(t, h)
		})
	}
}

var voidElements = map[string]bool{"br": true, "hr": true, "img": true, "meta": true}

var allowedElements = map[string]bool{
	"html": true, "head": true, "meta": true, "title": true, "body": true, "p": true, "br": true, "hr": true,
	"h1": true, "h2": true, "h3": true, "h4": true, "h5": true, "h6": true, "strong": true, "em": true, "u": true,
	"s": true, "sup": true, "sub": true, "a": true, "img": true, "ul": true, "ol": true, "li": true, "table": true,
	"tbody": true, "tr": true, "td": true, "div": true, "section": true, "nav": true,
}

// checkHTML tokenizes out: every element is one the exporter writes, every start tag is closed in
// order, and each href uses a safe scheme.
func checkHTML(t *testing.T, out string) {
	t.Helper()
	z := html.NewTokenizer(strings.NewReader(out))
	var stack []string
	for {
		tt := z.Next()
		switch tt {
		case html.ErrorToken:
			if z.Err() != io.EOF {
				t.Fatalf("tokenize: %v", z.Err())
			}
			if len(stack) > 0 {
				t.Fatalf("unclosed elements %v", stack)
			}
			return
		case html.StartTagToken, html.SelfClosingTagToken:
			tok := z.Token()
			if !allowedElements[tok.Data] {
				t.Fatalf("unexpected element <%s>", tok.Data)
			}
			for _, a := range tok.Attr {
				if a.Key == "href" && safeURL(a.Val) == "" {
					t.Fatalf("unsafe href %q", a.Val)
				}
				if strings.HasPrefix(a.Key, "on") {
					t.Fatalf("event handler attribute %q", a.Key)
				}
			}
			if !voidElements[tok.Data] && tt == html.StartTagToken {
				stack = append(stack, tok.Data)
			}
		case html.EndTagToken:
			tok := z.Token()
			if len(stack) == 0 || stack[len(stack)-1] != tok.Data {
				t.Fatalf("</%s> closes %v", tok.Data, stack)
			}
			stack = stack[:len(stack)-1]
		}
	}
}

func stripSpace(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsSpace(r) {
			return -1
		}
		return r
	}, s)
}

// genDoc is a random document whose text is full of markup characters, emoji and CJK, with random
// styles, links (some unsafe), headings, nested lists and tables, and what its export must show: the
// visible text and the text of its bold, italic and struck runs, in document order, without blanks.
type genDoc struct {
	d                          *docs.Document
	text, bold, italic, strike string
	italicMD                   string // Markdown shows SUBTITLE as emphasis
}

func randomDoc(seed uint64) genDoc {
	alphabet := []string{"a", "b", " ", "<", ">", "&", `"`, "'", "*", "_", "#", "[", "]", "|", "\\", "`", "~", "!",
		"😀", "表", "\v", "1.", "-", "+", "=", "</p>", "<script>", "&amp;", "javascript:", "  ", "(", ")"}
	urls := []string{"https://e.com/x?a=1&b=<2>", "javascript:alert(1)", "mailto:a@b.c", "data:text/html,<b>", "#heading=h.1",
		"https://e.com/(x) y"}
	lists := map[string]docs.List{
		"n": {ListProperties: &docs.ListProperties{NestingLevels: []*docs.NestingLevel{{GlyphType: "DECIMAL"}, {GlyphType: "ROMAN"}, {GlyphType: "ALPHA"}}}},
		"b": {ListProperties: &docs.ListProperties{NestingLevels: []*docs.NestingLevel{{GlyphSymbol: "●"}, {GlyphSymbol: "○"}, {GlyphSymbol: "■"}}}},
	}
	r := rand.New(rand.NewPCG(seed, 11))
	var wantText, bold, italic, italicMD, strike strings.Builder
	randText := func() string {
		var b strings.Builder
		for range 1 + r.IntN(8) {
			b.WriteString(alphabet[r.IntN(len(alphabet))])
		}
		return b.String()
	}
	randPara := func(inTable bool) *docs.StructuralElement {
		var els []*docs.ParagraphElement
		var txt, bo, it, itMD, st strings.Builder
		named := []string{"NORMAL_TEXT", "NORMAL_TEXT", "TITLE", "SUBTITLE", "HEADING_2", "HEADING_6"}[r.IntN(6)]
		for range 1 + r.IntN(4) {
			s := randText()
			ts := &docs.TextStyle{Bold: r.IntN(3) == 0, Italic: r.IntN(3) == 0, Strikethrough: r.IntN(5) == 0,
				Underline: r.IntN(5) == 0}
			if r.IntN(4) == 0 {
				ts.Link = &docs.Link{Url: urls[r.IntN(len(urls))]}
			}
			els = append(els, text(s, ts))
			txt.WriteString(s)
			if ts.Bold {
				bo.WriteString(s)
			}
			if ts.Italic {
				it.WriteString(s)
			}
			if ts.Italic || named == "SUBTITLE" {
				itMD.WriteString(s)
			}
			if ts.Strikethrough {
				st.WriteString(s)
			}
		}
		var bullet *docs.Bullet
		if !inTable && r.IntN(3) == 0 {
			bullet = &docs.Bullet{ListId: []string{"n", "b"}[r.IntN(2)], NestingLevel: int64(r.IntN(3))}
		}
		// A paragraph of blanks only is dropped by design.
		if strings.TrimSpace(strings.ReplaceAll(txt.String(), "\v", "")) != "" {
			wantText.WriteString(txt.String())
			bold.WriteString(bo.String())
			italic.WriteString(it.String())
			italicMD.WriteString(itMD.String())
			strike.WriteString(st.String())
		}
		return para(named, bullet, els...)
	}
	var content []*docs.StructuralElement
	for range 1 + r.IntN(12) {
		if r.IntN(6) == 0 {
			tbl := &docs.Table{}
			for range 1 + r.IntN(3) {
				row := &docs.TableRow{}
				for range 1 + r.IntN(3) {
					row.TableCells = append(row.TableCells, &docs.TableCell{Content: []*docs.StructuralElement{randPara(true)}})
				}
				tbl.TableRows = append(tbl.TableRows, row)
			}
			content = append(content, &docs.StructuralElement{Table: tbl})
			continue
		}
		content = append(content, randPara(false))
	}
	clean := func(b *strings.Builder) string { return stripSpace(strings.ReplaceAll(b.String(), "\v", "")) }
	return genDoc{d: doc(lists, content...), text: clean(&wantText), bold: clean(&bold), italic: clean(&italic), italicMD: clean(&italicMD), strike: clean(&strike)}
}

// textOf is the text of the parsed HTML's body, without blanks, and the text under each element name.
func textOf(t *testing.T, out string) (string, map[string]string) {
	t.Helper()
	root, err := html.Parse(strings.NewReader(out))
	if err != nil {
		t.Fatal(err)
	}
	var all strings.Builder
	under := map[string]*strings.Builder{}
	var walk func(n *html.Node, inBody bool, open []string)
	walk = func(n *html.Node, inBody bool, open []string) {
		if n.Type == html.ElementNode {
			if n.Data == "body" {
				inBody = true
			}
			open = append(open, n.Data)
		}
		if n.Type == html.TextNode && inBody {
			all.WriteString(n.Data)
			seen := map[string]bool{}
			for _, name := range open {
				if !seen[name] {
					seen[name] = true
					if under[name] == nil {
						under[name] = &strings.Builder{}
					}
					under[name].WriteString(n.Data)
				}
			}
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c, inBody, open)
		}
	}
	walk(root, false, nil)
	m := map[string]string{}
	for k, v := range under {
		m[k] = stripSpace(v.String())
	}
	return stripSpace(all.String()), m
}

// TestHTMLProperty exports random documents: the HTML tokenizes into balanced, known elements with
// safe links, and html.Parse gives back exactly the document's text, with the bold, italic and
// struck text under <strong>, <em> and <s>.
func TestHTMLProperty(t *testing.T) {
	for seed := range uint64(300) {
		g := randomDoc(seed)
		out := HTML(g.d)
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			checkHTML(t, out)
			got, under := textOf(t, out)
			for _, c := range []struct{ name, got, want string }{
				{"text", got, g.text}, {"<strong>", under["strong"], g.bold}, {"<em>", under["em"], g.italic}, {"<s>", under["s"], g.strike},
			} {
				if c.got != c.want {
					t.Fatalf("%s differs:\n got %q\nwant %q\n%s", c.name, c.got, c.want, out)
				}
			}
		})
	}
}

// TestMarkdownProperty renders the Markdown of random documents with a CommonMark + GFM renderer
// (goldmark): the reader sees exactly the document's text, the bold, italic and struck text as
// <strong>, <em> and <del>, no element but those the exporter means (no markup from the text) and
// no unsafe link.
func TestMarkdownProperty(t *testing.T) {
	md := goldmark.New(goldmark.WithExtensions(extension.Table, extension.Strikethrough, extension.Footnote),
		goldmark.WithRendererOptions(gmhtml.WithUnsafe()))
	allowed := map[string]bool{"html": true, "head": true, "body": true, "p": true, "h1": true, "h2": true, "h3": true, "h4": true,
		"h5": true, "h6": true, "strong": true, "em": true, "del": true, "a": true, "ul": true, "ol": true, "li": true, "br": true,
		"table": true, "thead": true, "tbody": true, "tr": true, "th": true, "td": true, "hr": true, "sup": true, "sub": true}
	for seed := range uint64(1000) {
		g := randomDoc(seed)
		src := Markdown(g.d)
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			var buf bytes.Buffer
			if err := md.Convert([]byte(src), &buf); err != nil {
				t.Fatal(err)
			}
			out := buf.String()
			z := html.NewTokenizer(strings.NewReader(out))
			for tt := z.Next(); tt != html.ErrorToken; tt = z.Next() {
				if tt == html.StartTagToken || tt == html.SelfClosingTagToken {
					tok := z.Token()
					if !allowed[tok.Data] {
						t.Fatalf("element <%s> from:\n%s\n%s", tok.Data, src, out)
					}
					for _, a := range tok.Attr {
						if a.Key == "href" && safeURL(a.Val) == "" {
							t.Fatalf("unsafe href %q from:\n%s", a.Val, src)
						}
					}
				}
			}
			got, under := textOf(t, "<body>"+out+"</body>")
			for _, c := range []struct{ name, got, want string }{
				{"text", got, g.text}, {"<strong>", under["strong"], g.bold}, {"<em>", under["em"], g.italicMD}, {"<del>", under["del"], g.strike},
			} {
				if c.got != c.want {
					t.Fatalf("%s differs:\n got %q\nwant %q\n--- markdown\n%s\n--- html\n%s", c.name, c.got, c.want, src, out)
				}
			}
		})
	}
}

// bigDoc is the kitchen-sink body repeated n times (~3,000 blocks for n=100).
func bigDoc(b *testing.B, n int) *docs.Document {
	d := loadDoc(b, "../docmd/testdata/kitchen_sink.json")
	body := d.Body.Content
	for range n - 1 {
		d.Body.Content = append(d.Body.Content, body[1:]...)
	}
	return d
}

func BenchmarkMarkdown(b *testing.B) {
	d := bigDoc(b, 100)
	b.ReportAllocs()
	for b.Loop() {
		_ = Markdown(d)
	}
}

func BenchmarkHTML(b *testing.B) {
	d := bigDoc(b, 100)
	b.ReportAllocs()
	for b.Loop() {
		_ = HTML(d)
	}
}
