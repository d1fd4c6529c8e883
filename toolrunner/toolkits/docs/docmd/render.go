// Package docmd renders Google Docs documents (google.golang.org/api/docs/v1) as DocMD and parses
// DocMD back. The format is specified in docs/docmd.md: half-open UTF-16 ranges equal to the API's
// indices, annotated blocks, segments per header/footer/footnote and sections per tab.
package docmd

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"unicode/utf16"

	docs "google.golang.org/api/docs/v1"
)

// ErrTabNotFound is returned by Render when Options.TabID names no tab of the document.
var ErrTabNotFound = errors.New("docmd: tab not found")

// ErrInvalidDocument is returned by Check and Render for a nil document or
// one whose indices, sizes or nesting no Google document has.
var ErrInvalidDocument = errors.New("docmd: invalid document")

// Options select what Render emits.
type Options struct {
	// TabID renders only this tab (and not its children); empty renders every tab depth-first.
	TabID string
}

// Render writes doc as DocMD.
func Render(doc *docs.Document, opts Options) (string, error) {
	if err := Check(doc); err != nil {
		return "", err
	}
	r := &renderer{}
	r.sb.Grow(estimate(doc))
	r.sb.WriteString("@docmd 1\n")
	if doc.DocumentId != "" {
		r.directive("@document_id ", doc.DocumentId)
	}
	if doc.Title != "" {
		r.directive("@title ", doc.Title)
	}
	if doc.RevisionId != "" {
		r.directive("@revision_id ", doc.RevisionId)
	}
	if len(doc.Tabs) == 0 {
		if opts.TabID != "" {
			return "", fmt.Errorf("%w: %q (document has no tabs content)", ErrTabNotFound, opts.TabID)
		}
		r.content(doc.Body, doc.Headers, doc.Footers, doc.Footnotes, doc.Lists)
		return r.sb.String(), nil
	}
	found := false
	walkTabs(doc.Tabs, func(t *docs.Tab) {
		p := t.TabProperties
		if p == nil {
			p = &docs.TabProperties{}
		}
		if opts.TabID != "" && p.TabId != opts.TabID {
			return
		}
		found = true
		r.sb.WriteString("@tab")
		r.attr("id", p.TabId)
		r.attr("index", strconv.FormatInt(p.Index, 10))
		r.attr("level", strconv.FormatInt(p.NestingLevel, 10))
		if p.ParentTabId != "" {
			r.attr("parent", p.ParentTabId)
		}
		r.attr("title", p.Title)
		r.sb.WriteByte('\n')
		if dt := t.DocumentTab; dt != nil {
			r.content(dt.Body, dt.Headers, dt.Footers, dt.Footnotes, dt.Lists)
		}
	})
	if !found {
		return "", fmt.Errorf("%w: %q", ErrTabNotFound, opts.TabID)
	}
	return r.sb.String(), nil
}

func walkTabs(tabs []*docs.Tab, fn func(*docs.Tab)) {
	for _, t := range tabs {
		if t == nil {
			continue
		}
		fn(t)
		walkTabs(t.ChildTabs, fn)
	}
}

// maxEstimate caps what estimate reserves up front; a longer document
// grows the buffer as it is written.
const maxEstimate = 16 << 20

// estimate sizes the output buffer: DocMD is about the text plus
// annotations. The end index is the provider's number: it is clamped, never
// trusted with an allocation.
func estimate(doc *docs.Document) int {
	n := int64(256)
	if doc.Body != nil && len(doc.Body.Content) > 0 {
		if last := doc.Body.Content[len(doc.Body.Content)-1]; last != nil {
			n += min(max(last.EndIndex, 0), maxEstimate) * 2
		}
	}
	return int(min(n, maxEstimate))
}

type renderer struct {
	sb    strings.Builder
	spans []span // of the paragraph being written
	lists map[string]docs.List
	seg   string
	seen  map[uint64]int
	tmp   []byte
	// lastSpan is the index in spans of the last span of each style.
	lastSpan map[string]int
}

func (r *renderer) directive(name, v string) {
	r.sb.WriteString(name)
	writeValue(&r.sb, v)
	r.sb.WriteByte('\n')
}

func (r *renderer) attr(name, v string) {
	r.sb.WriteByte(' ')
	r.sb.WriteString(name)
	r.sb.WriteByte('=')
	writeValue(&r.sb, v)
}

func (r *renderer) content(body *docs.Body, headers map[string]docs.Header, footers map[string]docs.Footer,
	footnotes map[string]docs.Footnote, lists map[string]docs.List) {
	r.lists = lists
	r.segment("body", "")
	if body != nil {
		r.elements(body.Content)
	}
	for _, id := range sortedKeys(headers) {
		r.segment("header", id)
		r.elements(headers[id].Content)
	}
	for _, id := range sortedKeys(footers) {
		r.segment("footer", id)
		r.elements(footers[id].Content)
	}
	for _, id := range sortedKeys(footnotes) {
		r.segment("footnote", id)
		r.elements(footnotes[id].Content)
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func (r *renderer) segment(kind, id string) {
	r.seg = kind + "/" + id
	r.seen = make(map[uint64]int)
	r.sb.WriteString("@segment ")
	r.sb.WriteString(kind)
	if id != "" {
		r.attr("id", id)
	}
	r.sb.WriteByte('\n')
}

func (r *renderer) elements(content []*docs.StructuralElement) {
	for _, se := range content {
		if se == nil {
			continue
		}
		switch {
		case se.SectionBreak != nil:
			r.annotation(r.id('s', "SECTION_BREAK", ""), se.StartIndex, se.EndIndex, "SECTION_BREAK", "", "")
		case se.Paragraph != nil:
			r.paragraph(se)
		case se.Table != nil:
			r.table(se)
		case se.TableOfContents != nil:
			h := r.idHash("TOC")
			h.toc(se.TableOfContents)
			r.annotation(r.idOf('o', h), se.StartIndex, se.EndIndex, "TOC", "", "")
			r.elements(se.TableOfContents.Content)
		}
	}
}

// toc hashes a table of contents' content key: its paragraphs' text.
func (h *fnv64) toc(t *docs.TableOfContents) {
	for _, se := range t.Content {
		if se != nil && se.Paragraph != nil {
			for _, e := range se.Paragraph.Elements {
				if e != nil && e.TextRun != nil {
					h.str(e.TextRun.Content)
				}
			}
		}
	}
}

// fnv64 is FNV-1a (hash/fnv's 64-bit variant), fed strings and integers
// without converting them to byte slices.
type fnv64 uint64

const fnvOffset, fnvPrime = 14695981039346656037, 1099511628211

func (h *fnv64) str(s string) {
	for i := 0; i < len(s); i++ {
		*h = (*h ^ fnv64(s[i])) * fnvPrime
	}
}

func (h *fnv64) byte(c byte) { *h = (*h ^ fnv64(c)) * fnvPrime }

func (h *fnv64) int(n int64) {
	var buf [20]byte
	for _, c := range strconv.AppendInt(buf[:0], n, 10) {
		h.byte(c)
	}
}

// idHash starts a block id's hash: the segment, the block type, then the
// caller adds the content key.
func (r *renderer) idHash(typ string) fnv64 {
	h := fnv64(fnvOffset)
	h.str(r.seg)
	h.byte(0)
	h.str(typ)
	h.byte(0)
	return h
}

// id derives a stable block id from the segment, the block type and a content key, with an
// occurrence number for identical blocks in the same segment.
func (r *renderer) id(prefix byte, typ, key string) string {
	h := r.idHash(typ)
	h.str(key)
	return r.idOf(prefix, h)
}

func (r *renderer) idOf(prefix byte, h fnv64) string {
	sum := uint64(h)
	n := r.seen[sum]
	r.seen[sum] = n + 1
	r.tmp = append(r.tmp[:0], prefix)
	const hexdigits = "0123456789abcdef"
	for shift := 20; shift >= 0; shift -= 4 {
		r.tmp = append(r.tmp, hexdigits[(sum>>uint(shift))&0xf])
	}
	if n > 0 {
		r.tmp = append(r.tmp, '.')
		r.tmp = strconv.AppendInt(r.tmp, int64(n), 10)
	}
	return string(r.tmp)
}

func (r *renderer) annotation(id string, start, end int64, typ, attrs, styles string) {
	r.annotationOpen(id, start, end, typ, attrs)
	if styles != "" {
		r.sb.WriteString(" styles=")
		r.sb.WriteString(styles)
	}
	r.sb.WriteString("]\n")
}

// annotationOpen writes an annotation up to its styles and closing bracket.
func (r *renderer) annotationOpen(id string, start, end int64, typ, attrs string) {
	r.sb.WriteByte('[')
	r.sb.WriteString(id)
	r.sb.WriteByte(' ')
	writeInt(&r.sb, start)
	r.sb.WriteByte('-')
	writeInt(&r.sb, end)
	r.sb.WriteByte(' ')
	r.sb.WriteString(typ)
	r.sb.WriteString(attrs)
}

func (r *renderer) table(se *docs.StructuralElement) {
	t := se.Table
	ts := se.StartIndex
	tstr := strconv.FormatInt(ts, 10)
	th := r.idHash("TABLE")
	th.table(t)
	r.annotation(r.idOf('t', th), ts, se.EndIndex, "TABLE",
		" rows="+strconv.FormatInt(t.Rows, 10)+" cols="+strconv.FormatInt(t.Columns, 10), "")
	covered := coveredCells(t)
	for ri, row := range t.TableRows {
		if row == nil {
			continue
		}
		rs := strconv.Itoa(ri)
		rattrs := " table=" + tstr + " row=" + rs
		if row.TableRowStyle != nil && row.TableRowStyle.TableHeader {
			rattrs += " header=true"
		}
		rh := r.idHash("ROW")
		rh.row(row)
		r.annotation(r.idOf('r', rh), row.StartIndex, row.EndIndex, "ROW", rattrs, "")
		for ci, cell := range row.TableCells {
			if cell == nil {
				continue
			}
			cs := strconv.Itoa(ci)
			ch := r.idHash("CELL")
			ch.str(cs)
			ch.byte(0)
			ch.cell(cell)
			r.annotation(r.idOf('c', ch), cell.StartIndex+1, cell.EndIndex, "CELL",
				" table="+tstr+" row="+rs+" col="+cs+spanAttrs(cell.TableCellStyle, covered[[2]int{ri, ci}]), "")
			r.elements(cell.Content)
		}
	}
}

// coveredCells answers the cells a merged head cell covers (the head
// excluded), from the heads' own spans, clipped to the table: no more
// cells are marked than the table holds, whatever the spans say.
func coveredCells(t *docs.Table) map[[2]int]bool {
	var m map[[2]int]bool
	rows, cols := len(t.TableRows), 0
	for _, row := range t.TableRows {
		if row != nil {
			cols = max(cols, len(row.TableCells))
		}
	}
	budget := rows * cols
	for ri, row := range t.TableRows {
		if row == nil {
			continue
		}
		for ci, cell := range row.TableCells {
			if cell == nil || cell.TableCellStyle == nil {
				continue
			}
			st := cell.TableCellStyle
			if st.RowSpan <= 1 && st.ColumnSpan <= 1 {
				continue
			}
			if m == nil {
				m = map[[2]int]bool{}
			}
			rEnd := ri + int(min(max(st.RowSpan, 1), int64(rows-ri)))
			cEnd := ci + int(min(max(st.ColumnSpan, 1), int64(cols-ci)))
			for r := ri; r < rEnd && budget > 0; r++ {
				for c := ci; c < cEnd && budget > 0; c++ {
					budget--
					if r != ri || c != ci {
						m[[2]int{r, c}] = true
					}
				}
			}
		}
	}
	return m
}

// spanAttrs describes a merged cell: the head carries its spans, a cell it
// covers is marked merged.
func spanAttrs(st *docs.TableCellStyle, covered bool) string {
	switch {
	case covered:
		return " merged=true"
	case st == nil:
		return ""
	case st.RowSpan > 1 || st.ColumnSpan > 1:
		return " rowspan=" + strconv.FormatInt(st.RowSpan, 10) + " colspan=" + strconv.FormatInt(st.ColumnSpan, 10)
	}
	return ""
}

// table, row and cell hash the content keys of ids as they are read,
// without building them: a key holds every nested table's text, which
// copied once per level would cost memory in the depth times the text.

func (h *fnv64) table(t *docs.Table) {
	for _, row := range t.TableRows {
		if row != nil {
			h.row(row)
			h.byte(0x1e)
		}
	}
}

func (h *fnv64) row(row *docs.TableRow) {
	for _, c := range row.TableCells {
		if c != nil {
			h.cell(c)
			h.byte(0x1f)
		}
	}
}

func (h *fnv64) cell(c *docs.TableCell) {
	for _, se := range c.Content {
		if se != nil && se.Paragraph != nil {
			for _, e := range se.Paragraph.Elements {
				if e != nil && e.TextRun != nil {
					h.str(e.TextRun.Content)
				}
			}
		} else if se != nil && se.Table != nil {
			h.table(se.Table)
		}
	}
}

// paragraphType maps the named style and list glyph of a paragraph to a DocMD block type and its
// extra attributes.
func (r *renderer) paragraphType(p *docs.Paragraph) (string, string) {
	named := ""
	if p.ParagraphStyle != nil {
		named = p.ParagraphStyle.NamedStyleType
	}
	typ := "PARAGRAPH"
	switch named {
	case "TITLE", "SUBTITLE", "HEADING_1", "HEADING_2", "HEADING_3", "HEADING_4", "HEADING_5", "HEADING_6":
		typ = named
	}
	if p.Bullet == nil {
		return typ, ""
	}
	level := p.Bullet.NestingLevel
	var b strings.Builder
	b.WriteString(" list=")
	writeValue(&b, p.Bullet.ListId)
	b.WriteString(" level=")
	b.WriteString(strconv.FormatInt(level, 10))
	if typ != "PARAGRAPH" {
		b.WriteString(" heading=")
		b.WriteString(typ)
	}
	if r.ordered(p.Bullet.ListId, level) {
		return "ORDERED", b.String()
	}
	return "BULLET", b.String()
}

func (r *renderer) ordered(listID string, level int64) bool {
	l, ok := r.lists[listID]
	if !ok || l.ListProperties == nil || level < 0 || int(level) >= len(l.ListProperties.NestingLevels) {
		return false
	}
	nl := l.ListProperties.NestingLevels[level]
	if nl == nil {
		return false
	}
	if nl.GlyphSymbol != "" {
		return false
	}
	// Only a numbering glyph type orders a level: a checkbox list (glyph type
	// GLYPH_TYPE_UNSPECIFIED with a "%0" format) and a NONE level are bullets.
	switch nl.GlyphType {
	case "DECIMAL", "ZERO_DECIMAL", "UPPER_ALPHA", "ALPHA", "UPPER_ROMAN", "ROMAN":
		return true
	}
	return false
}

type span struct {
	style string
	start int64
	end   int64
}

// paragraph writes the block in two passes over its elements: the first
// hashes its content key (text, element types, styles relative to the
// block start, so that ids do not depend on position) and collects the
// style spans for the annotation; the second writes the line.
func (r *renderer) paragraph(se *docs.StructuralElement) {
	p := se.Paragraph
	typ, attrs := r.paragraphType(p)
	h := r.idHash(typ + attrs)
	r.spans = r.spans[:0]
	if r.lastSpan == nil {
		r.lastSpan = map[string]int{}
	}
	clear(r.lastSpan)
	for _, e := range p.Elements {
		if e == nil {
			continue
		}
		var ts *docs.TextStyle
		if e.TextRun != nil {
			ts = e.TextRun.TextStyle
			h.str(runText(se, e))
		} else {
			typName, _, style := element(e)
			ts = style
			h.byte('{')
			h.str(typName)
			h.byte('}')
		}
		r.spans = appendSpans(r.spans, r.lastSpan, ts, e.StartIndex, e.EndIndex)
	}
	for _, s := range r.spans {
		h.byte(0)
		h.str(s.style)
		h.int(s.start - se.StartIndex)
		h.byte('-')
		h.int(s.end - se.StartIndex)
	}
	r.annotationOpen(r.idOf('p', h), se.StartIndex, se.EndIndex, typ, attrs)
	if len(r.spans) > 0 {
		r.sb.WriteString(" styles=")
		for i, s := range r.spans {
			if i > 0 {
				r.sb.WriteByte(',')
			}
			r.sb.WriteString(s.style)
			r.sb.WriteByte(':')
			writeInt(&r.sb, s.start)
			r.sb.WriteByte('-')
			writeInt(&r.sb, s.end)
		}
	}
	r.sb.WriteString("]\n")
	lineStart := true
	for _, e := range p.Elements {
		if e == nil {
			continue
		}
		if e.TextRun != nil {
			text := runText(se, e)
			escapeText(&r.sb, text, lineStart)
			lineStart = lineStart && text == ""
			continue
		}
		typName, eattrs, _ := element(e)
		r.sb.WriteByte('{')
		r.sb.WriteString(typName)
		r.sb.WriteByte(' ')
		writeInt(&r.sb, e.StartIndex)
		r.sb.WriteByte('-')
		writeInt(&r.sb, e.EndIndex)
		r.sb.WriteString(eattrs)
		r.sb.WriteByte('}')
		lineStart = false
	}
	r.sb.WriteByte('\n')
}

// runText is a text run's content without the paragraph's final newline.
func runText(se *docs.StructuralElement, e *docs.ParagraphElement) string {
	text := e.TextRun.Content
	if e.EndIndex == se.EndIndex && strings.HasSuffix(text, "\n") {
		text = text[:len(text)-1]
	}
	return text
}

// element describes a non-text paragraph element.
func element(e *docs.ParagraphElement) (string, string, *docs.TextStyle) {
	var b strings.Builder
	at := func(k, v string) {
		if v == "" {
			return
		}
		b.WriteByte(' ')
		b.WriteString(k)
		b.WriteByte('=')
		writeValue(&b, v)
	}
	switch {
	case e.InlineObjectElement != nil:
		at("id", e.InlineObjectElement.InlineObjectId)
		return "INLINE_IMAGE", b.String(), e.InlineObjectElement.TextStyle
	case e.FootnoteReference != nil:
		at("id", e.FootnoteReference.FootnoteId)
		at("number", e.FootnoteReference.FootnoteNumber)
		return "FOOTNOTE_REF", b.String(), e.FootnoteReference.TextStyle
	case e.PageBreak != nil:
		return "PAGE_BREAK", "", e.PageBreak.TextStyle
	case e.ColumnBreak != nil:
		return "COLUMN_BREAK", "", e.ColumnBreak.TextStyle
	case e.HorizontalRule != nil:
		return "HORIZONTAL_RULE", "", e.HorizontalRule.TextStyle
	case e.Person != nil:
		if pp := e.Person.PersonProperties; pp != nil {
			at("email", pp.Email)
			at("name", pp.Name)
		}
		return "PERSON", b.String(), e.Person.TextStyle
	case e.DateElement != nil:
		at("id", e.DateElement.DateId)
		if dp := e.DateElement.DateElementProperties; dp != nil {
			at("text", dp.DisplayText)
		}
		return "DATE", b.String(), e.DateElement.TextStyle
	case e.RichLink != nil:
		if rp := e.RichLink.RichLinkProperties; rp != nil {
			at("uri", rp.Uri)
			at("title", rp.Title)
		}
		return "RICH_LINK", b.String(), e.RichLink.TextStyle
	case e.Equation != nil:
		return "EQUATION", "", nil
	case e.AutoText != nil:
		at("type", e.AutoText.Type)
		return "AUTO_TEXT", b.String(), e.AutoText.TextStyle
	}
	return "UNKNOWN", "", nil
}

// appendSpans adds the styles of ts over [start,end), merging with the last
// span of the style when it ends at start; last indexes those spans (a
// search of every span instead would be quadratic in a paragraph of many
// elements).
func appendSpans(spans []span, last map[string]int, ts *docs.TextStyle, start, end int64) []span {
	if ts == nil || start >= end {
		return spans
	}
	add := func(style string) {
		if i, ok := last[style]; ok && spans[i].end == start {
			spans[i].end = end
			return
		}
		last[style] = len(spans)
		spans = append(spans, span{style: style, start: start, end: end})
	}
	if ts.Bold {
		add("bold")
	}
	if ts.Italic {
		add("italic")
	}
	if ts.Underline && ts.Link == nil {
		add("underline")
	}
	if ts.Strikethrough {
		add("strike")
	}
	if ts.SmallCaps {
		add("smallcaps")
	}
	switch ts.BaselineOffset {
	case "SUPERSCRIPT":
		add("sup")
	case "SUBSCRIPT":
		add("sub")
	}
	if ts.WeightedFontFamily != nil && ts.WeightedFontFamily.FontFamily != "" {
		add("font=" + quoteValue(ts.WeightedFontFamily.FontFamily))
	}
	if ts.FontSize != nil && ts.FontSize.Magnitude != 0 {
		add("size=" + strconv.FormatFloat(ts.FontSize.Magnitude, 'f', -1, 64))
	}
	if c := hexColor(ts.ForegroundColor); c != "" {
		add("fg=" + c)
	}
	if c := hexColor(ts.BackgroundColor); c != "" {
		add("bg=" + c)
	}
	if ts.Link != nil {
		switch {
		case ts.Link.Url != "":
			add("link=" + quoteValue(ts.Link.Url))
		case ts.Link.HeadingId != "":
			add("link=" + quoteValue("#heading="+ts.Link.HeadingId))
		case ts.Link.BookmarkId != "":
			add("link=" + quoteValue("#bookmark="+ts.Link.BookmarkId))
		}
	}
	return spans
}

func hexColor(c *docs.OptionalColor) string {
	if c == nil || c.Color == nil || c.Color.RgbColor == nil {
		return ""
	}
	rgb := c.Color.RgbColor
	b := func(f float64) int {
		v := int(f*255 + 0.5)
		return min(max(v, 0), 255)
	}
	return fmt.Sprintf("#%02x%02x%02x", b(rgb.Red), b(rgb.Green), b(rgb.Blue))
}

func isToken(v string) bool {
	if v == "" {
		return false
	}
	for i := 0; i < len(v); i++ {
		c := v[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '#' || c == '-') {
			return false
		}
	}
	return true
}

func quoteValue(v string) string {
	var b strings.Builder
	writeValue(&b, v)
	return b.String()
}

// writeValue writes v bare when it is a token, else quoted with \" \\ \n escapes.
func writeValue(b *strings.Builder, v string) {
	if isToken(v) {
		b.WriteString(v)
		return
	}
	b.WriteByte('"')
	for i := 0; i < len(v); i++ {
		switch c := v[i]; c {
		case '"', '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case '\n':
			b.WriteString(`\n`)
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
}

// escapeText writes paragraph text with DocMD escapes; lineStart tells whether text begins the line.
func escapeText(b *strings.Builder, text string, lineStart bool) {
	if lineStart && text != "" && (text[0] == '[' || text[0] == '@') {
		b.WriteByte('\\')
	}
	// Runs without a character to escape are copied at once.
	start := 0
	for i := 0; i < len(text); i++ {
		var esc string
		switch text[i] {
		case '\\':
			esc = `\\`
		case '\v':
			esc = `\v`
		case '\n':
			esc = `\n`
		case '{':
			esc = `\{`
		default:
			continue
		}
		b.WriteString(text[start:i])
		b.WriteString(esc)
		start = i + 1
	}
	b.WriteString(text[start:])
}

// writeInt writes n in decimal without allocating.
func writeInt(b *strings.Builder, n int64) {
	var buf [20]byte
	b.Write(strconv.AppendInt(buf[:0], n, 10))
}

// utf16Len is the length of s in UTF-16 code units, the unit of every Docs index.
func utf16Len(s string) int64 {
	var n int64
	for _, r := range s {
		n += int64(utf16.RuneLen(r))
	}
	return n
}
