package docmdtest

import (
	"math"

	docs "google.golang.org/api/docs/v1"
)

// Hostile builds a documents.get answer from fuzz bytes, as a tenant-chosen
// endpoint could send it: every index, size, span, level and nesting depth
// is drawn from values that matter at the edges (negative, zero, small,
// 2^36, near overflow) or from a running counter, so that a fuzzer reaches
// the shapes byte-level JSON mutations rarely do. The fuzzers of the
// renderers (docmd, docexport) use it beside raw JSON.
func Hostile(b []byte) *docs.Document {
	g := &gen{b: b}
	d := &docs.Document{DocumentId: g.text(), Title: g.text(), RevisionId: g.text()}
	if g.next()%2 == 0 {
		d.Body = &docs.Body{Content: g.content(0)}
		d.Lists = g.lists()
		d.Footnotes = map[string]docs.Footnote{}
		for range g.next() % 3 {
			d.Footnotes[g.text()] = docs.Footnote{Content: g.content(1)}
		}
		d.Headers = map[string]docs.Header{}
		for range g.next() % 2 {
			d.Headers[g.text()] = docs.Header{Content: g.content(1)}
		}
		return d
	}
	d.Tabs = g.tabs(0)
	return d
}

// Size is about the size of d as JSON (its texts, and a few dozen bytes per
// element and style), without encoding it: encoding/json re-compacts the
// output of every nested marshaler of the API types, which makes encoding a
// deep document slow.
func Size(d *docs.Document) int {
	n := 64 + len(d.Title) + len(d.DocumentId) + len(d.RevisionId)
	var content func([]*docs.StructuralElement)
	content = func(els []*docs.StructuralElement) {
		for _, se := range els {
			n += 48
			switch {
			case se == nil:
			case se.Paragraph != nil:
				for _, e := range se.Paragraph.Elements {
					n += 48
					if e != nil && e.TextRun != nil {
						n += len(e.TextRun.Content) + 48
					}
				}
			case se.Table != nil:
				for _, r := range se.Table.TableRows {
					n += 32
					if r != nil {
						for _, c := range r.TableCells {
							n += 32
							if c != nil {
								content(c.Content)
							}
						}
					}
				}
			case se.TableOfContents != nil:
				content(se.TableOfContents.Content)
			}
		}
	}
	segments := func(b *docs.Body, h map[string]docs.Header, f map[string]docs.Footer, fn map[string]docs.Footnote, l map[string]docs.List) {
		if b != nil {
			content(b.Content)
		}
		for _, x := range h {
			content(x.Content)
		}
		for _, x := range f {
			content(x.Content)
		}
		for _, x := range fn {
			content(x.Content)
		}
		for _, x := range l {
			if x.ListProperties != nil {
				n += 32 * len(x.ListProperties.NestingLevels)
			}
		}
	}
	segments(d.Body, d.Headers, d.Footers, d.Footnotes, d.Lists)
	var tabs func([]*docs.Tab)
	tabs = func(ts []*docs.Tab) {
		for _, t := range ts {
			n += 64
			if t != nil {
				if dt := t.DocumentTab; dt != nil {
					segments(dt.Body, dt.Headers, dt.Footers, dt.Footnotes, dt.Lists)
				}
				tabs(t.ChildTabs)
			}
		}
	}
	tabs(d.Tabs)
	return n
}

// edgeValues are the numbers a hostile answer chooses from.
var edgeValues = []int64{0, 1, 2, 3, 5, 8, 9, 10, 20, -1, -500, 1 << 36, 68719476736 * 2, math.MaxInt64, math.MinInt64, math.MaxInt32}

type gen struct {
	b     []byte
	i     int
	index int64
	// budget bounds the elements built, whatever the bytes say.
	budget int
}

func (g *gen) next() byte {
	if g.i >= len(g.b) {
		return 0
	}
	c := g.b[g.i]
	g.i++
	return c
}

// num is an edge value, or the running index (most of the time, so that
// well-formed runs of elements happen too).
func (g *gen) num() int64 {
	c := g.next()
	if c < 160 {
		g.index += int64(c % 4)
		return g.index
	}
	return edgeValues[int(c)%len(edgeValues)]
}

var alphabet = []string{"a", "b", " ", "\n", "\v", "{", "[", "@", "\\", "#", "*", "1.", "é", "😀", "<b>", "&", "|", "`", "_", "\t", "\u212a", "\xff", "x\n"}

func (g *gen) text() string {
	n := int(g.next() % 6)
	s := ""
	for range n {
		s += alphabet[int(g.next())%len(alphabet)]
	}
	return s
}

func (g *gen) style() *docs.TextStyle {
	c := g.next()
	if c%5 == 0 {
		return nil
	}
	ts := &docs.TextStyle{Bold: c&1 != 0, Italic: c&2 != 0, Underline: c&4 != 0, Strikethrough: c&8 != 0, SmallCaps: c&16 != 0}
	switch g.next() % 4 {
	case 1:
		ts.BaselineOffset = "SUPERSCRIPT"
	case 2:
		ts.BaselineOffset = "SUBSCRIPT"
	}
	switch g.next() % 6 {
	case 1:
		ts.Link = &docs.Link{Url: "https://example.com/" + g.text()}
	case 2:
		ts.Link = &docs.Link{Url: "javascript:alert(1)"}
	case 3:
		ts.Link = &docs.Link{HeadingId: g.text()}
	}
	if g.next()%4 == 0 {
		ts.FontSize = &docs.Dimension{Magnitude: float64(g.num())}
	}
	return ts
}

func (g *gen) content(depth int) []*docs.StructuralElement {
	n := int(g.next() % 6)
	var out []*docs.StructuralElement
	for range n {
		if g.budget++; g.budget > 2000 {
			break
		}
		se := &docs.StructuralElement{StartIndex: g.num()}
		switch k := g.next() % 10; {
		case k == 0:
			se.SectionBreak = &docs.SectionBreak{}
		case k == 1 && depth < 20:
			se.Table = g.table(depth)
		case k == 2 && depth < 20:
			se.TableOfContents = &docs.TableOfContents{Content: g.content(depth + 1)}
		case k == 3:
			out = append(out, nil)
			continue
		default:
			se.Paragraph = g.paragraph()
		}
		se.EndIndex = g.num()
		out = append(out, se)
	}
	return out
}

func (g *gen) paragraph() *docs.Paragraph {
	p := &docs.Paragraph{}
	switch g.next() % 8 {
	case 1:
		p.ParagraphStyle = &docs.ParagraphStyle{NamedStyleType: "HEADING_2"}
	case 2:
		p.ParagraphStyle = &docs.ParagraphStyle{NamedStyleType: "TITLE"}
	case 3:
		p.ParagraphStyle = &docs.ParagraphStyle{NamedStyleType: "SUBTITLE"}
	}
	if g.next()%3 == 0 {
		p.Bullet = &docs.Bullet{ListId: []string{"l1", "l2", "missing"}[g.next()%3], NestingLevel: g.num() % 12}
		if g.next()%4 == 0 {
			p.Bullet.NestingLevel = g.num()
		}
	}
	n := int(g.next() % 8)
	for range n {
		e := &docs.ParagraphElement{StartIndex: g.num()}
		switch g.next() % 12 {
		case 0:
			e.InlineObjectElement = &docs.InlineObjectElement{InlineObjectId: g.text(), TextStyle: g.style()}
		case 1:
			e.FootnoteReference = &docs.FootnoteReference{FootnoteId: g.text(), FootnoteNumber: g.text()}
		case 2:
			e.PageBreak = &docs.PageBreak{}
		case 3:
			e.HorizontalRule = &docs.HorizontalRule{}
		case 4:
			e.Person = &docs.Person{PersonProperties: &docs.PersonProperties{Name: g.text(), Email: g.text()}}
		case 5:
			e.RichLink = &docs.RichLink{RichLinkProperties: &docs.RichLinkProperties{Uri: "https://x/" + g.text(), Title: g.text()}}
		case 6:
			p.Elements = append(p.Elements, nil)
			continue
		default:
			e.TextRun = &docs.TextRun{Content: g.text(), TextStyle: g.style()}
		}
		e.EndIndex = g.num()
		p.Elements = append(p.Elements, e)
	}
	return p
}

func (g *gen) table(depth int) *docs.Table {
	t := &docs.Table{Rows: g.num(), Columns: g.num()}
	rows := int(g.next() % 5)
	for range rows {
		row := &docs.TableRow{StartIndex: g.num()}
		cols := int(g.next() % 5)
		for range cols {
			c := &docs.TableCell{StartIndex: g.num(), Content: g.content(depth + 1)}
			if g.next()%3 == 0 {
				c.TableCellStyle = &docs.TableCellStyle{RowSpan: g.num(), ColumnSpan: g.num()}
			}
			c.EndIndex = g.num()
			row.TableCells = append(row.TableCells, c)
		}
		row.EndIndex = g.num()
		t.TableRows = append(t.TableRows, row)
	}
	return t
}

func (g *gen) lists() map[string]docs.List {
	out := map[string]docs.List{}
	for _, id := range []string{"l1", "l2"} {
		n := int(g.next() % 12)
		lp := &docs.ListProperties{}
		for range n {
			nl := &docs.NestingLevel{GlyphType: []string{"DECIMAL", "NONE", "GLYPH_TYPE_UNSPECIFIED", "ROMAN", ""}[g.next()%5]}
			if g.next()%3 == 0 {
				nl.GlyphSymbol = "●"
			}
			if g.next()%2 == 0 {
				nl.GlyphFormat = "%0."
			}
			lp.NestingLevels = append(lp.NestingLevels, nl)
		}
		out[id] = docs.List{ListProperties: lp}
	}
	return out
}

func (g *gen) tabs(depth int) []*docs.Tab {
	n := int(g.next() % 3)
	var out []*docs.Tab
	for range n {
		t := &docs.Tab{TabProperties: &docs.TabProperties{TabId: g.text(), Title: g.text(), Index: g.num(), NestingLevel: g.num()}}
		t.DocumentTab = &docs.DocumentTab{Body: &docs.Body{Content: g.content(0)}, Lists: g.lists()}
		if depth < 20 && g.next()%2 == 0 {
			t.ChildTabs = g.tabs(depth + 1)
		}
		out = append(out, t)
	}
	return out
}
