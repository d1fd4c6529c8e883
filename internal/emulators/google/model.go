package google

import (
	"unicode/utf16"
)

// kind of an item of a segment's flat sequence. Every item occupies exactly
// one index (one UTF-16 code unit of text, or one structural marker), so
// the index of an item is its position plus the segment's start.
type kind uint8

const (
	kChar         kind = iota // a UTF-16 code unit of text; '\n' ends a paragraph
	kSectionBreak             // the body's leading section break (index 0)
	kTableStart               // a table's start marker
	kRowStart                 // a table row's start marker
	kCellStart                // a table cell's start marker
	kTableEnd                 // a table's end marker
	kPageBreak                // a page break paragraph element (one index)
)

// textStyle is the comparable subset of a Docs TextStyle the emulator keeps.
type textStyle struct {
	Bold, Italic, Underline, Strikethrough, SmallCaps bool
	FontSizePt                                        float64
	FontFamily                                        string
	LinkURL                                           string
	Foreground                                        string // "r,g,b" in 0..1, "" for default
}

// paraStyle is carried by the '\n' that ends a paragraph.
type paraStyle struct {
	NamedStyleType string // NORMAL_TEXT, HEADING_1 … TITLE, SUBTITLE
	Alignment      string
	ListID         string // "" when not a list item
	Nesting        int64
}

// item is one index of a segment.
type item struct {
	k  kind
	u  uint16 // the code unit, for kChar
	ts textStyle
	ps paraStyle // for '\n'
}

func (it item) isNewline() bool { return it.k == kChar && it.u == '\n' }

// segment is a body, header, footer or footnote: its own index space.
// A body starts with a section break at index 0; the others start at 0 with
// their first paragraph.
type segment struct {
	items []item
}

func newBody() *segment {
	return &segment{items: []item{{k: kSectionBreak}, newline(paraStyle{NamedStyleType: "NORMAL_TEXT"})}}
}

func newSideSegment() *segment {
	return &segment{items: []item{newline(paraStyle{NamedStyleType: "NORMAL_TEXT"})}}
}

func newline(ps paraStyle) item { return item{k: kChar, u: '\n', ps: ps} }

func (s *segment) clone() *segment {
	return &segment{items: append([]item(nil), s.items...)}
}

// paragraphEnd answers the index of the '\n' ending the paragraph holding i.
func (s *segment) paragraphEnd(i int) int {
	for j := i; j < len(s.items); j++ {
		if s.items[j].isNewline() {
			return j
		}
	}
	return len(s.items) - 1
}

// paragraphStart answers the first index of the paragraph holding i.
func (s *segment) paragraphStart(i int) int {
	j := i
	for j > 0 {
		p := s.items[j-1]
		if p.isNewline() || p.k != kChar && p.k != kPageBreak {
			break
		}
		j--
	}
	return j
}

// text answers the segment's characters (markers as U+FFFC) as UTF-16.
func (s *segment) units() []uint16 {
	out := make([]uint16, len(s.items))
	for i, it := range s.items {
		if it.k == kChar {
			out[i] = it.u
		} else {
			out[i] = 0xFFFC
		}
	}
	return out
}

// tab is one document tab with its own body, headers, footers, footnotes.
type tab struct {
	ID, Title string
	Body      *segment
	Headers   map[string]*segment
	Footers   map[string]*segment
	Footnotes map[string]*segment
	// DefaultHeaderID / DefaultFooterID from createHeader/createFooter.
	DefaultHeaderID, DefaultFooterID string
	Lists                            map[string]string // list id -> glyph preset
}

func newTab(id, title string) *tab {
	return &tab{ID: id, Title: title, Body: newBody(), Headers: map[string]*segment{}, Footers: map[string]*segment{},
		Footnotes: map[string]*segment{}, Lists: map[string]string{}}
}

func (t *tab) clone() *tab {
	c := *t
	c.Body = t.Body.clone()
	c.Headers, c.Footers, c.Footnotes = cloneSegs(t.Headers), cloneSegs(t.Footers), cloneSegs(t.Footnotes)
	c.Lists = make(map[string]string, len(t.Lists))
	for k, v := range t.Lists {
		c.Lists[k] = v
	}
	return &c
}

func cloneSegs(m map[string]*segment) map[string]*segment {
	c := make(map[string]*segment, len(m))
	for k, v := range m {
		c[k] = v.clone()
	}
	return c
}

// segment answers the segment named by id ("" is the body).
func (t *tab) segment(id string) (*segment, bool) {
	if id == "" {
		return t.Body, true
	}
	for _, m := range []map[string]*segment{t.Headers, t.Footers, t.Footnotes} {
		if s, ok := m[id]; ok {
			return s, true
		}
	}
	return nil, false
}

// document is an emulated Google Doc.
type document struct {
	ID, Title, Owner string
	Revision         int64
	Tabs             []*tab
	PageWidthPt      float64
	MarginTopPt      float64
	nextID           int64
}

func (d *document) clone() *document {
	c := *d
	c.Tabs = make([]*tab, len(d.Tabs))
	for i, t := range d.Tabs {
		c.Tabs[i] = t.clone()
	}
	return &c
}

func (d *document) tab(id string) (*tab, bool) {
	if id == "" {
		return d.Tabs[0], true
	}
	for _, t := range d.Tabs {
		if t.ID == id {
			return t, true
		}
	}
	return nil, false
}

func toUnits(s string) []uint16 { return utf16.Encode([]rune(s)) }
