package docs

import (
	"strings"
	"unicode/utf16"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/text"
	"github.com/yuin/goldmark/util"
	gdocs "google.golang.org/api/docs/v1"
)

// Bullet presets of CreateDocumentFromText's lists.
const (
	presetBullets = "BULLET_DISC_CIRCLE_SQUARE"
	presetNumbers = "NUMBERED_DECIMAL_ALPHA_ROMAN"
)

// mdBuilder turns a markdown AST into the document's text and the style
// ranges over it, in UTF-16 code units from index 1 (where a new
// document's body text starts).
type mdBuilder struct {
	src  []byte
	sb   strings.Builder
	n    int64 // UTF-16 length written so far
	para int64 // start of the current paragraph
	// emphasis depth while walking inlines
	bold, italic int
	boldRuns     []span
	italicRuns   []span
	links        []link
	headings     []heading
	lists        []listRange
	// list state: depth of the list being written (0: none) and the
	// preset of its outermost list
	depth  int
	preset string
	// fresh: nothing written yet in the current paragraph
	fresh bool
}

type span struct{ start, end int64 }

type link struct {
	span
	url string
}

type heading struct {
	span
	level int
}

type listRange struct {
	span
	preset string
}

func (b *mdBuilder) write(s string) {
	if s == "" {
		return
	}
	b.sb.WriteString(s)
	b.n += int64(len(utf16.Encode([]rune(s))))
}

// styled writes s with the current emphasis.
func (b *mdBuilder) styled(s string) {
	if b.fresh && b.depth > 0 {
		s = strings.TrimLeft(s, "\t") // a leading tab would change the nesting level
	}
	if s != "" {
		b.fresh = false
	}
	start := b.n + 1
	b.write(s)
	end := b.n + 1
	if start == end {
		return
	}
	if b.bold > 0 {
		b.boldRuns = appendRun(b.boldRuns, span{start, end})
	}
	if b.italic > 0 {
		b.italicRuns = appendRun(b.italicRuns, span{start, end})
	}
}

// appendRun merges touching runs.
func appendRun(runs []span, s span) []span {
	if n := len(runs); n > 0 && runs[n-1].end == s.start {
		runs[n-1].end = s.end
		return runs
	}
	return append(runs, s)
}

// startParagraph begins a paragraph; in a list it writes the leading tabs
// that give the item its nesting level (createParagraphBullets counts
// them and removes them, as Google documents).
func (b *mdBuilder) startParagraph() {
	b.para = b.n + 1
	if b.depth > 1 {
		b.write(strings.Repeat("\t", b.depth-1))
	}
	b.fresh = true
}

func (b *mdBuilder) endParagraph() span {
	b.write("\n")
	return span{b.para, b.n + 1}
}

func (b *mdBuilder) inlines(n ast.Node) {
	for c := n.FirstChild(); c != nil; c = c.NextSibling() {
		switch v := c.(type) {
		case *ast.Text:
			b.styled(unescape(v.Segment.Value(b.src)))
			if v.SoftLineBreak() || v.HardLineBreak() {
				b.styled(" ")
			}
		case *ast.String:
			if v.IsCode() || v.IsRaw() {
				b.styled(string(v.Value))
			} else {
				b.styled(unescape(v.Value))
			}
		case *ast.CodeSpan: // literal: no escapes, no references
			for t := v.FirstChild(); t != nil; t = t.NextSibling() {
				switch tv := t.(type) {
				case *ast.Text:
					b.styled(string(tv.Segment.Value(b.src)))
				case *ast.String:
					b.styled(string(tv.Value))
				}
			}
		case *ast.Emphasis:
			if v.Level >= 2 {
				b.bold++
			} else {
				b.italic++
			}
			b.inlines(v)
			if v.Level >= 2 {
				b.bold--
			} else {
				b.italic--
			}
		case *ast.AutoLink:
			start := b.n + 1
			u := string(v.URL(b.src))
			b.styled(u)
			if v.AutoLinkType == ast.AutoLinkEmail {
				u = "mailto:" + u
			}
			b.link(start, u)
		case *ast.Link:
			start := b.n + 1
			b.inlines(v)
			b.link(start, string(v.Destination))
		case *ast.RawHTML:
			for i := 0; i < v.Segments.Len(); i++ {
				seg := v.Segments.At(i)
				b.styled(string(seg.Value(b.src)))
			}
		default: // images: their alt text
			b.inlines(c)
		}
	}
}

// unescape turns markdown text into what it shows: backslash escapes of
// punctuation removed, entity and numeric references resolved.
func unescape(b []byte) string {
	return string(util.ResolveEntityNames(util.ResolveNumericReferences(util.UnescapePunctuations(b))))
}

// link records a link over what was written since start, for the
// schemes a document link may safely carry.
func (b *mdBuilder) link(start int64, u string) {
	lu := strings.ToLower(u)
	if start == b.n+1 || !(strings.HasPrefix(lu, "https://") || strings.HasPrefix(lu, "http://") || strings.HasPrefix(lu, "mailto:")) {
		return
	}
	b.links = append(b.links, link{span{start, b.n + 1}, u})
}

// lines writes a block's raw lines as paragraphs (code blocks, HTML).
func (b *mdBuilder) lines(n ast.Node) {
	ls := n.Lines()
	for i := 0; i < ls.Len(); i++ {
		seg := ls.At(i)
		b.startParagraph()
		b.write(strings.TrimRight(string(seg.Value(b.src)), "\r\n"))
		b.endParagraph()
	}
}

func (b *mdBuilder) blocks(n ast.Node) {
	for c := n.FirstChild(); c != nil; c = c.NextSibling() {
		b.block(c)
	}
}

func (b *mdBuilder) block(n ast.Node) {
	switch v := n.(type) {
	case *ast.Heading:
		b.startParagraph()
		b.inlines(v)
		sp := b.endParagraph()
		if b.depth == 0 {
			b.headings = append(b.headings, heading{sp, min(max(v.Level, 1), 6)})
		}
	case *ast.Paragraph, *ast.TextBlock:
		b.startParagraph()
		b.inlines(v)
		b.endParagraph()
	case *ast.List:
		outer := b.depth == 0
		if outer {
			b.preset = presetBullets
			if v.IsOrdered() {
				b.preset = presetNumbers
			}
		}
		start := b.n + 1
		b.depth++
		for item := v.FirstChild(); item != nil; item = item.NextSibling() {
			if item.FirstChild() == nil { // an empty item: an empty bullet
				b.startParagraph()
				b.endParagraph()
				continue
			}
			b.blocks(item)
		}
		b.depth--
		if outer && b.n+1 > start {
			b.lists = append(b.lists, listRange{span{start, b.n + 1}, b.preset})
		}
	case *ast.FencedCodeBlock, *ast.CodeBlock, *ast.HTMLBlock:
		b.lines(v)
	case *ast.ThematicBreak:
		// no text: the next block starts a new paragraph anyway
	default: // blockquotes and anything else: their blocks
		b.blocks(n)
	}
}

// markdownRequests answers the batchUpdate requests that write markdown
// into a new, empty document: the text, then headings and emphasis, then
// the lists from the last to the first (createParagraphBullets removes the
// nesting tabs, which shifts what follows it).
func markdownRequests(md string) []*gdocs.Request {
	src := []byte(md)
	doc := goldmark.New().Parser().Parse(text.NewReader(src))
	b := &mdBuilder{src: src}
	b.blocks(doc)
	body := b.sb.String()
	if body == "" {
		return nil
	}
	// The new document's body already ends with a newline: the last
	// paragraph uses it.
	reqs := []*gdocs.Request{{InsertText: &gdocs.InsertTextRequest{Text: strings.TrimSuffix(body, "\n"), Location: &gdocs.Location{Index: 1}}}}
	for _, h := range b.headings {
		reqs = append(reqs, &gdocs.Request{UpdateParagraphStyle: &gdocs.UpdateParagraphStyleRequest{
			Range:          &gdocs.Range{StartIndex: h.start, EndIndex: h.end},
			ParagraphStyle: &gdocs.ParagraphStyle{NamedStyleType: "HEADING_" + string(rune('0'+h.level))},
			Fields:         "namedStyleType"}})
	}
	for _, r := range b.boldRuns {
		reqs = append(reqs, &gdocs.Request{UpdateTextStyle: &gdocs.UpdateTextStyleRequest{
			Range: &gdocs.Range{StartIndex: r.start, EndIndex: r.end}, TextStyle: &gdocs.TextStyle{Bold: true}, Fields: "bold"}})
	}
	for _, r := range b.italicRuns {
		reqs = append(reqs, &gdocs.Request{UpdateTextStyle: &gdocs.UpdateTextStyleRequest{
			Range: &gdocs.Range{StartIndex: r.start, EndIndex: r.end}, TextStyle: &gdocs.TextStyle{Italic: true}, Fields: "italic"}})
	}
	for _, l := range b.links {
		reqs = append(reqs, &gdocs.Request{UpdateTextStyle: &gdocs.UpdateTextStyleRequest{
			Range: &gdocs.Range{StartIndex: l.start, EndIndex: l.end}, TextStyle: &gdocs.TextStyle{Link: &gdocs.Link{Url: l.url}}, Fields: "link"}})
	}
	for i := len(b.lists) - 1; i >= 0; i-- {
		l := b.lists[i]
		reqs = append(reqs, &gdocs.Request{CreateParagraphBullets: &gdocs.CreateParagraphBulletsRequest{
			Range: &gdocs.Range{StartIndex: l.start, EndIndex: l.end}, BulletPreset: l.preset}})
	}
	return reqs
}
