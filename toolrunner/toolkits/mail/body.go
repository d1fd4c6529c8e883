package mail

import (
	"html"
	"strings"
	"unicode/utf8"

	xhtml "golang.org/x/net/html"
	"golang.org/x/net/html/atom"

	"github.com/auditrail/auditrail/toolrunner/toolkits/mail/graphapi"
)

// htmlToText renders HTML as plain text with a real HTML parser: scripts,
// styles, heads and comments dropped; block elements and <br> become line
// breaks; list items start with "- "; links keep their target when it
// differs from their text; runs of spaces collapse as a browser does.
//
// A body longer than maxTreeHTML is converted by the tokenizer alone
// (streamText): a parsed tree weighs some forty times its markup (one node
// of about 130 bytes per "<p>"), and the body is the provider's.
func htmlToText(src string) string {
	if len(src) > maxTreeHTML {
		return streamText(src)
	}
	doc, err := xhtml.Parse(strings.NewReader(src))
	if err != nil { // x/net/html recovers from any input; keep the text
		return src
	}
	var w textWriter
	w.node(doc)
	return w.finish()
}

type textWriter struct {
	b strings.Builder
	// pendingSpace: whitespace seen since the last word.
	pendingSpace bool
	// newlines wanted before the next text (0, 1 or 2).
	breaks int
	pre    int
}

func (w *textWriter) brk(n int) {
	if w.b.Len() > 0 && n > w.breaks {
		w.breaks = n
	}
	w.pendingSpace = false
}

func (w *textWriter) text(s string) {
	if s == "" {
		return
	}
	if w.pre > 0 {
		w.flush()
		w.b.WriteString(s)
		return
	}
	first, _ := utf8.DecodeRuneInString(s)
	last, _ := utf8.DecodeLastRuneInString(s)
	if isSpace(first) {
		w.pendingSpace = true
	}
	for i, f := range strings.FieldsFunc(s, isSpace) {
		if i > 0 {
			w.pendingSpace = true
		}
		if w.pendingSpace && w.breaks == 0 && w.b.Len() > 0 {
			w.b.WriteByte(' ')
		}
		w.flush()
		w.b.WriteString(f)
		w.pendingSpace = false
	}
	if isSpace(last) {
		w.pendingSpace = true
	}
}

func isSpace(r rune) bool {
	return r == ' ' || r == '\t' || r == '\n' || r == '\r' || r == '\f' || r == '\u00a0'
}

func (w *textWriter) flush() {
	for ; w.breaks > 0; w.breaks-- {
		w.b.WriteByte('\n')
	}
}

var blocks = map[atom.Atom]int{
	atom.P: 2, atom.Div: 1, atom.H1: 2, atom.H2: 2, atom.H3: 2, atom.H4: 2, atom.H5: 2, atom.H6: 2,
	atom.Ul: 1, atom.Ol: 1, atom.Li: 1, atom.Tr: 1, atom.Table: 1, atom.Blockquote: 2, atom.Pre: 2,
	atom.Hr: 1, atom.Section: 1, atom.Article: 1, atom.Header: 1, atom.Footer: 1, atom.Address: 1,
	atom.Dl: 1, atom.Dt: 1, atom.Dd: 1, atom.Form: 1, atom.Center: 1,
}

func (w *textWriter) node(n *xhtml.Node) {
	switch n.Type {
	case xhtml.TextNode:
		w.text(n.Data)
		return
	case xhtml.CommentNode, xhtml.DoctypeNode:
		return
	case xhtml.ElementNode:
		switch n.DataAtom {
		case atom.Script, atom.Style, atom.Head, atom.Noscript, atom.Template, atom.Iframe, atom.Object, atom.Svg:
			return
		case atom.Br:
			w.pendingSpace = false
			w.breaks++
			if w.b.Len() == 0 {
				w.breaks = 0
			}
			return
		case atom.Img:
			if alt := attr(n, "alt"); alt != "" {
				w.text("[" + alt + "]")
			}
			return
		case atom.Td, atom.Th:
			if n.PrevSibling != nil && w.b.Len() > 0 {
				w.flush()
				w.b.WriteByte('\t')
				w.pendingSpace = false
			}
		}
	}
	nl := blocks[n.DataAtom]
	if n.Type == xhtml.ElementNode && nl > 0 {
		w.brk(nl)
		if n.DataAtom == atom.Hr {
			w.flush()
			w.b.WriteString("----")
			w.brk(1)
			return
		}
		if n.DataAtom == atom.Li {
			w.flush()
			w.b.WriteString("- ")
		}
	}
	if n.DataAtom == atom.Pre {
		w.pre++
	}
	before := w.b.Len()
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		w.node(c)
	}
	if n.DataAtom == atom.Pre {
		w.pre--
	}
	if n.Type == xhtml.ElementNode && n.DataAtom == atom.A {
		href := attr(n, "href")
		if (strings.HasPrefix(href, "http://") || strings.HasPrefix(href, "https://")) && strings.TrimSpace(w.b.String()[before:]) != href {
			w.text(" (" + href + ")")
		}
	}
	if n.Type == xhtml.ElementNode && nl > 0 {
		w.brk(nl)
	}
}

// maxTreeHTML bounds the HTML htmlToText parses into a tree.
const maxTreeHTML = 4 << 20

// skipped are the elements whose content is not text.
var skipped = map[atom.Atom]bool{atom.Script: true, atom.Style: true, atom.Head: true, atom.Noscript: true,
	atom.Template: true, atom.Iframe: true, atom.Object: true, atom.Svg: true}

// streamText renders HTML as plain text token by token, in memory
// proportional to the text: what htmlToText does without a tree — skipped
// elements dropped, blocks and <br> as line breaks, runs of spaces
// collapsed — but without list markers, cell tabs, image alts or link
// targets.
func streamText(src string) string {
	z := xhtml.NewTokenizer(strings.NewReader(src))
	var w textWriter
	skip := 0
	for {
		tt := z.Next()
		switch tt {
		case xhtml.ErrorToken:
			return w.finish()
		case xhtml.TextToken:
			if skip == 0 {
				w.text(string(z.Text()))
			}
		case xhtml.StartTagToken, xhtml.SelfClosingTagToken, xhtml.EndTagToken:
			name, _ := z.TagName()
			a := atom.Lookup(name)
			switch {
			case skipped[a]:
				if tt == xhtml.StartTagToken {
					skip++
				} else if tt == xhtml.EndTagToken && skip > 0 {
					skip--
				}
			case skip > 0:
			case a == atom.Br:
				w.pendingSpace = false
				if w.b.Len() > 0 {
					w.breaks++
				}
			case blocks[a] > 0:
				w.brk(blocks[a])
			}
		}
	}
}

func attr(n *xhtml.Node, key string) string {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val
		}
	}
	return ""
}

func (w *textWriter) finish() string {
	return strings.TrimRightFunc(w.b.String(), isSpace)
}

// cut answers at most max characters (runes, never a split UTF-8
// sequence) of s from offset, with the total and the characters left
// after the answered part; max < 0 answers everything from offset.
func cut(s string, offset, max int) (part string, total, remaining int) {
	total = utf8.RuneCountInString(s)
	if offset >= total {
		return "", total, 0
	}
	i := 0
	for n := 0; n < offset; n++ {
		_, size := utf8.DecodeRuneInString(s[i:])
		i += size
	}
	if max < 0 || offset+max >= total {
		return s[i:], total, 0
	}
	j := i
	for n := 0; n < max; n++ {
		_, size := utf8.DecodeRuneInString(s[j:])
		j += size
	}
	return s[i:j], total, total - offset - max
}

// textToHTML is the HTML of plain text: escaped, line breaks as <br>.
func textToHTML(s string) string {
	s = strings.ReplaceAll(strings.ReplaceAll(s, "\r\n", "\n"), "\r", "\n")
	return "<div>" + strings.ReplaceAll(html.EscapeString(s), "\n", "<br>") + "</div>"
}

// Where the quoted original of a reply or forward draft starts: Outlook
// writes <div id="appendonsend"></div> and an <hr> before the header of
// the original (<div id="divRplyFwdMsg">), Graph's text bodies a line of
// underscores; a <blockquote> is the generic form.
var (
	htmlQuoteMarkers = []string{`<div id="appendonsend"`, `<hr`, `id="divrplyfwdmsg"`, `<blockquote`}
	textQuoteMarkers = []string{"________________________________", "-----Original Message-----", "-----Original message-----"}
)

// quoteStart answers where the quoted original begins in a draft's body,
// or -1.
func quoteStart(b *graphapi.ItemBody) int {
	lower := asciiLower(b.Content)
	best := -1
	markers := textQuoteMarkers
	if strings.EqualFold(b.ContentType, graphapi.ContentHTML) {
		markers = htmlQuoteMarkers
	}
	for _, m := range markers {
		i := strings.Index(lower, asciiLower(m))
		if i < 0 {
			continue
		}
		if m == `id="divrplyfwdmsg"` { // back to the start of its tag
			i = strings.LastIndex(lower[:i], "<")
		}
		if i >= 0 && (best < 0 || i < best) {
			best = i
		}
	}
	return best
}

// asciiLower lowercases ASCII letters only: its indices are the indices of
// s. strings.ToLower changes the length of some runes (K, the Kelvin sign,
// is 3 bytes, k one; İ grows), and an index found in its answer would cut
// the body at the wrong place or beyond its end (a panic) — and the body is
// the provider's.
// (strings.Map would also turn each invalid byte into a 3-byte U+FFFD).
func asciiLower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + ('a' - 'A')
		}
	}
	return string(b)
}

// replaceAboveQuote writes text as the new body of a draft in the draft's
// format: in a reply or forward draft it replaces what is above the quoted
// original, which is kept as it is; otherwise it replaces the whole body.
func replaceAboveQuote(existing *graphapi.ItemBody, text string) graphapi.ItemBody {
	if existing == nil || !strings.EqualFold(existing.ContentType, graphapi.ContentHTML) {
		out := graphapi.ItemBody{ContentType: graphapi.ContentText, Content: text}
		if existing != nil {
			if i := quoteStart(existing); i >= 0 {
				out.Content = text + "\n\n" + existing.Content[i:]
			}
		}
		return out
	}
	c := existing.Content
	i := quoteStart(existing)
	if i < 0 {
		return graphapi.ItemBody{ContentType: graphapi.ContentHTML, Content: "<html><body>" + textToHTML(text) + "</body></html>"}
	}
	// Keep <html><head>…<body …> before the new text.
	lower := asciiLower(c[:i])
	start := 0
	if b := strings.Index(lower, "<body"); b >= 0 {
		if e := strings.Index(lower[b:], ">"); e >= 0 {
			start = b + e + 1
		}
	}
	return graphapi.ItemBody{ContentType: graphapi.ContentHTML, Content: c[:start] + textToHTML(text) + c[i:]}
}
