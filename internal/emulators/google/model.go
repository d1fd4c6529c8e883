package google

import (
	"slices"
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
	kInlineObject             // an inline image (x.ref: object id, x.p: embedded object)
	kFootnoteRef              // a footnote reference (x.ref: footnote id)
	kPerson                   // a person chip (x.ref: person id, x.p: personProperties)
	kDate                     // a date chip (x.ref: date id, x.p: dateElementProperties)
)

// inline reports whether items of kind k are paragraph elements (text or a
// one-unit non-text element such as an image or a footnote reference).
func (k kind) inline() bool {
	switch k {
	case kChar, kPageBreak, kInlineObject, kFootnoteRef, kPerson, kDate:
		return true
	}
	return false
}

// props is a style or properties object in its JSON form (as decoded from
// the request): fields masks are applied key by key and render turns it back
// into the client's type. A props value is never mutated once stored:
// updates build a new map.
type props map[string]any

func (p props) with(k string, v any) props {
	c := make(props, len(p)+1)
	for kk, vv := range p {
		c[kk] = vv
	}
	if v == nil {
		delete(c, k)
	} else {
		c[k] = v
	}
	return c
}

// attrs are the extra data of a non-text item: the id of what it refers to
// and its properties (a table's, row's, cell's or section break's style, an
// image's embedded object, a chip's properties).
type attrs struct {
	ref string
	p   props
}

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
	// IndentStartPt / IndentFirstLinePt: 0 is unset (a list item shows its
	// level's indents).
	IndentStartPt, IndentFirstLinePt float64
}

// item is one index of a segment. Its text and paragraph styles are
// shared, immutable values (an edit stores a new pointer, never writes
// through one), which keeps an item small: a batch copies the document.
type item struct {
	k  kind
	u  uint16     // the code unit, for kChar
	ts *textStyle // nil: the default style
	ps *paraStyle // for '\n'
	x  *attrs     // for markers and non-text elements; copied on clone
}

// style answers the item's text style.
func (it item) style() textStyle {
	if it.ts == nil {
		return textStyle{}
	}
	return *it.ts
}

// para answers the paragraph style of a '\n'.
func (it item) para() paraStyle {
	if it.ps == nil {
		return paraStyle{NamedStyleType: "NORMAL_TEXT"}
	}
	return *it.ps
}

// withPara answers ps changed by fn, as a new value.
func withPara(ps *paraStyle, fn func(*paraStyle)) *paraStyle {
	c := paraStyle{NamedStyleType: "NORMAL_TEXT"}
	if ps != nil {
		c = *ps
	}
	fn(&c)
	return &c
}

// sameStyle compares two text styles by value.
func sameStyle(a, b *textStyle) bool {
	if a == b {
		return true
	}
	var x, y textStyle
	if a != nil {
		x = *a
	}
	if b != nil {
		y = *b
	}
	return x == y
}

// unlinked answers ts without its link (inserted text does not extend a link).
func unlinked(ts *textStyle) *textStyle {
	if ts == nil || ts.LinkURL == "" {
		return ts
	}
	c := *ts
	c.LinkURL = ""
	return &c
}

func (it item) isNewline() bool { return it.k == kChar && it.u == '\n' }

// segment is a body, header, footer or footnote: its own index space.
// A body starts with a section break at index 0; the others start at 0 with
// their first paragraph.
type segment struct {
	items  []item
	ranges []namedRange
}

// namedRange is one range of a named range in this segment; its offsets
// follow the edits (splice).
type namedRange struct {
	id, name string
	a, b     int
}

// splice replaces items [a,b) with ins and moves the named ranges as Google
// does: offsets after the change shift, offsets inside a deleted span move
// to its start, an insertion strictly inside a range extends it; a range
// left empty disappears.
func (s *segment) splice(a, b int, ins []item) {
	s.items = slices.Replace(s.items, a, b, ins...)
	n := len(ins)
	d := n - (b - a)
	move := func(x int, isEnd bool) int {
		switch {
		case a == b && isEnd: // insertion: a range ending at a is not extended
			if x > a {
				return x + d
			}
		case a == b: // insertion: a range starting at a moves
			if x >= a {
				return x + d
			}
		case x >= b:
			return x + d
		case x > a && isEnd:
			return a + n
		case x > a:
			return a
		}
		return x
	}
	out := s.ranges[:0]
	for _, r := range s.ranges {
		r.a, r.b = move(r.a, false), move(r.b, true)
		if r.b > r.a {
			out = append(out, r)
		}
	}
	s.ranges = out
}

func newBody() *segment {
	return &segment{items: []item{{k: kSectionBreak}, newline(paraStyle{NamedStyleType: "NORMAL_TEXT"})}}
}

func newSideSegment() *segment {
	return &segment{items: []item{newline(paraStyle{NamedStyleType: "NORMAL_TEXT"})}}
}

func newline(ps paraStyle) item { return item{k: kChar, u: '\n', ps: &ps} }

func (s *segment) clone() *segment {
	c := &segment{items: append([]item(nil), s.items...), ranges: append([]namedRange(nil), s.ranges...)}
	for i := range c.items {
		if x := c.items[i].x; x != nil {
			cx := *x
			c.items[i].x = &cx
		}
	}
	return c
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
		if p.isNewline() || !p.k.inline() {
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
// Document.Tabs holds the tabs depth-first; a child tab names its parent.
type tab struct {
	ID, Title, ParentID, IconEmoji string
	Body                           *segment
	Headers                        map[string]*segment
	Footers                        map[string]*segment
	Footnotes                      map[string]*segment
	// DefaultHeaderID / DefaultFooterID from createHeader/createFooter.
	DefaultHeaderID, DefaultFooterID string
	Lists                            map[string]string // list id -> glyph preset
	// DocStyle holds the documentStyle fields set by updateDocumentStyle.
	DocStyle props
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
	nextID           int64
}

// newObjectID answers a fresh id shaped like Google's (prefix + 10 base-36
// characters), deterministic for a document so that seeded documents are
// stable.
func (d *document) newObjectID(prefix string) string {
	d.nextID++
	const digits = "0123456789abcdefghijklmnopqrstuvwxyz"
	v := uint64(d.nextID)*0x9E3779B97F4A7C15 ^ uint64(len(d.ID))<<7
	for _, c := range d.ID {
		v = v*31 + uint64(c)
	}
	b := make([]byte, 10)
	for i := range b {
		b[i] = digits[v%36]
		v /= 36
	}
	return prefix + string(b)
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

// tabByID answers the tab with this id (no default for "").
func (d *document) tabByID(id string) (*tab, bool) {
	for _, t := range d.Tabs {
		if t.ID == id {
			return t, true
		}
	}
	return nil, false
}

// children answers the child tabs of parent ("" for the top level) in order.
func (d *document) children(parent string) []*tab {
	var out []*tab
	for _, t := range d.Tabs {
		if t.ParentID == parent {
			out = append(out, t)
		}
	}
	return out
}

// depth answers the nesting level of a tab (0 at the top level).
func (d *document) depth(id string) int {
	n := 0
	for t, ok := d.tabByID(id); ok && t.ParentID != ""; t, ok = d.tabByID(t.ParentID) {
		n++
	}
	return n
}

func (d *document) maxDepth() int {
	m := 0
	for _, t := range d.Tabs {
		m = max(m, d.depth(t.ID))
	}
	return m
}

// placeTab puts t at index idx among its siblings and keeps d.Tabs in
// depth-first order (the first tab is the one the legacy fields show).
func (d *document) placeTab(t *tab, idx int) {
	kids := map[string][]*tab{}
	for _, x := range d.Tabs {
		if x != t {
			kids[x.ParentID] = append(kids[x.ParentID], x)
		}
	}
	sib := kids[t.ParentID]
	kids[t.ParentID] = append(sib[:idx:idx], append([]*tab{t}, sib[idx:]...)...)
	out := make([]*tab, 0, len(d.Tabs)+1)
	var walk func(parent string)
	walk = func(parent string) {
		for _, x := range kids[parent] {
			out = append(out, x)
			walk(x.ID)
		}
	}
	walk("")
	d.Tabs = out
}
