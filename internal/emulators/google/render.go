package google

import (
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync"
	"unicode/utf16"

	docs "google.golang.org/api/docs/v1"
)

// renderer renders the segments of one tab: it numbers the footnote
// references and collects the inline objects it meets.
type renderer struct {
	t       *tab
	fnNum   map[string]int
	objects map[string]docs.InlineObject
}

func newRenderer(t *tab) *renderer {
	r := &renderer{t: t, fnNum: map[string]int{}, objects: map[string]docs.InlineObject{}}
	n := 0
	for _, it := range t.Body.items {
		if it.k == kFootnoteRef {
			n++
			r.fnNum[it.x.ref] = n
		}
	}
	return r
}

// renderSegment answers the structural elements of a segment, indices
// counted in UTF-16 code units as Google does.
func renderSegment(s *segment) []*docs.StructuralElement {
	return newRenderer(newTab("", "")).segment(s)
}

func (r *renderer) segment(s *segment) []*docs.StructuralElement {
	out, _ := r.content(s.items, 0, false)
	return out
}

// fromProps decodes p (plus defaults under it) into out, a client type.
// Most markers carry no props: their style is the decoded defaults, kept
// per defaults map and type (render must stay fast for the bench).
func fromProps(defaults, p props, out any) {
	if len(p) == 0 && defaults != nil {
		key := fmt.Sprintf("%p/%T", defaults, out)
		if v, ok := defaultsCache.Load(key); ok {
			reflect.ValueOf(out).Elem().Set(reflect.ValueOf(v).Elem())
			return
		}
		fromPropsSlow(defaults, nil, out)
		c := reflect.New(reflect.TypeOf(out).Elem())
		c.Elem().Set(reflect.ValueOf(out).Elem())
		defaultsCache.Store(key, c.Interface())
		return
	}
	fromPropsSlow(defaults, p, out)
}

var defaultsCache sync.Map

func fromPropsSlow(defaults, p props, out any) {
	m := make(map[string]any, len(defaults)+len(p))
	for k, v := range defaults {
		m[k] = v
	}
	for k, v := range p {
		m[k] = v
	}
	b, _ := json.Marshal(m)
	_ = json.Unmarshal(b, out)
}

func pt(v float64) map[string]any { return map[string]any{"magnitude": v, "unit": "PT"} }

var defaultSectionStyle = props{"columnSeparatorStyle": "NONE", "contentDirection": "LEFT_TO_RIGHT", "sectionType": "CONTINUOUS"}

func (r *renderer) content(it []item, i int, inCell bool) ([]*docs.StructuralElement, int) {
	var out []*docs.StructuralElement
	for i < len(it) {
		switch it[i].k {
		case kSectionBreak:
			ss := &docs.SectionStyle{}
			var p props
			if it[i].x != nil {
				p = it[i].x.p
			}
			fromProps(defaultSectionStyle, p, ss)
			out = append(out, &docs.StructuralElement{StartIndex: int64(i), EndIndex: int64(i + 1), SectionBreak: &docs.SectionBreak{SectionStyle: ss}})
			i++
		case kTableStart:
			el, j := r.table(it, i)
			out = append(out, el)
			i = j
		case kRowStart, kCellStart, kTableEnd:
			if inCell {
				return out, i
			}
			i++ // unreachable in a checked segment
		default:
			el, j := r.paragraph(it, i)
			out = append(out, el)
			i = j
		}
	}
	return out, i
}

// element answers the paragraph element of the non-text item at i.
func (r *renderer) element(it item, i int) *docs.ParagraphElement {
	pe := &docs.ParagraphElement{StartIndex: int64(i), EndIndex: int64(i + 1)}
	ts := toDocsTextStyle(it.style())
	switch it.k {
	case kPageBreak:
		pe.PageBreak = &docs.PageBreak{TextStyle: ts}
	case kInlineObject:
		pe.InlineObjectElement = &docs.InlineObjectElement{InlineObjectId: it.x.ref, TextStyle: ts}
		eo := &docs.EmbeddedObject{}
		fromProps(nil, it.x.p, eo)
		r.objects[it.x.ref] = docs.InlineObject{ObjectId: it.x.ref, InlineObjectProperties: &docs.InlineObjectProperties{EmbeddedObject: eo}}
	case kFootnoteRef:
		pe.FootnoteReference = &docs.FootnoteReference{FootnoteId: it.x.ref, FootnoteNumber: strconv.Itoa(r.fnNum[it.x.ref]), TextStyle: ts}
	case kPerson:
		pp := &docs.PersonProperties{}
		fromProps(nil, it.x.p, pp)
		pe.Person = &docs.Person{PersonId: it.x.ref, PersonProperties: pp, TextStyle: ts}
	case kDate:
		dp := &docs.DateElementProperties{}
		fromProps(nil, it.x.p, dp)
		pe.DateElement = &docs.DateElement{DateId: it.x.ref, DateElementProperties: dp, TextStyle: ts}
	}
	return pe
}

func (r *renderer) paragraph(it []item, i int) (*docs.StructuralElement, int) {
	start := i
	p := &docs.Paragraph{}
	for i < len(it) {
		j := i
		if it[i].k != kChar && it[i].k.inline() {
			p.Elements = append(p.Elements, r.element(it[i], i))
			i++
			continue
		}
		if it[i].k != kChar {
			break
		}
		var units []uint16
		for j < len(it) && it[j].k == kChar && sameStyle(it[j].ts, it[i].ts) {
			units = append(units, it[j].u)
			j++
			if it[j-1].u == '\n' {
				break
			}
		}
		p.Elements = append(p.Elements, &docs.ParagraphElement{StartIndex: int64(i), EndIndex: int64(j),
			TextRun: &docs.TextRun{Content: string(utf16.Decode(units)), TextStyle: toDocsTextStyle(it[i].style())}})
		i = j
		if it[j-1].u == '\n' {
			break
		}
	}
	ps := it[i-1].para()
	p.ParagraphStyle = &docs.ParagraphStyle{NamedStyleType: ps.NamedStyleType, Alignment: ps.Alignment, Direction: "LEFT_TO_RIGHT"}
	if p.ParagraphStyle.NamedStyleType == "" {
		p.ParagraphStyle.NamedStyleType = "NORMAL_TEXT"
	}
	if strings.HasPrefix(ps.NamedStyleType, "HEADING_") || ps.NamedStyleType == "TITLE" || ps.NamedStyleType == "SUBTITLE" {
		p.ParagraphStyle.HeadingId = "h." + strconv.Itoa(start)
	}
	if ps.IndentStartPt != 0 {
		p.ParagraphStyle.IndentStart = &docs.Dimension{Magnitude: ps.IndentStartPt, Unit: "PT"}
	}
	if ps.IndentFirstLinePt != 0 {
		p.ParagraphStyle.IndentFirstLine = &docs.Dimension{Magnitude: ps.IndentFirstLinePt, Unit: "PT"}
	}
	if ps.ListID != "" {
		p.Bullet = &docs.Bullet{ListId: ps.ListID, NestingLevel: ps.Nesting, TextStyle: &docs.TextStyle{}}
		// Google indents a list paragraph as its nesting level says.
		p.ParagraphStyle.IndentFirstLine = &docs.Dimension{Magnitude: float64(18 + 36*ps.Nesting), Unit: "PT"}
		p.ParagraphStyle.IndentStart = &docs.Dimension{Magnitude: float64(36 + 36*ps.Nesting), Unit: "PT"}
	}
	return &docs.StructuralElement{StartIndex: int64(start), EndIndex: int64(i), Paragraph: p}, i
}

var (
	defaultRowStyle  = props{"minRowHeight": map[string]any{"unit": "PT"}}
	defaultCellStyle = props{"rowSpan": 1, "columnSpan": 1, "backgroundColor": map[string]any{}, "contentAlignment": "TOP",
		"paddingLeft": pt(5), "paddingRight": pt(5), "paddingTop": pt(5), "paddingBottom": pt(5)}
)

func (r *renderer) table(it []item, i int) (*docs.StructuralElement, int) {
	start := i
	t := &docs.Table{TableStyle: &docs.TableStyle{}}
	var tp props
	if it[i].x != nil {
		tp = it[i].x.p
	}
	i++
	for i < len(it) && it[i].k == kRowStart {
		row := &docs.TableRow{StartIndex: int64(i), TableRowStyle: &docs.TableRowStyle{}}
		var rp props
		if it[i].x != nil {
			rp = it[i].x.p
		}
		fromProps(defaultRowStyle, rp, row.TableRowStyle)
		i++
		for i < len(it) && it[i].k == kCellStart {
			cell := &docs.TableCell{StartIndex: int64(i), TableCellStyle: &docs.TableCellStyle{}}
			var cp props
			if it[i].x != nil {
				cp = it[i].x.p
			}
			fromProps(defaultCellStyle, cp, cell.TableCellStyle)
			cell.Content, i = r.content(it, i+1, true)
			cell.EndIndex = int64(i)
			row.TableCells = append(row.TableCells, cell)
		}
		row.EndIndex = int64(i)
		t.TableRows = append(t.TableRows, row)
	}
	i++ // table end
	t.Rows = int64(len(t.TableRows))
	if t.Rows > 0 {
		t.Columns = int64(len(t.TableRows[0].TableCells))
	}
	cols, _ := tp["columns"].([]props)
	for c := range t.Columns {
		cp := &docs.TableColumnProperties{}
		var p props
		if int(c) < len(cols) {
			p = cols[c]
		}
		fromProps(props{"widthType": "EVENLY_DISTRIBUTED"}, p, cp)
		t.TableStyle.TableColumnProperties = append(t.TableStyle.TableColumnProperties, cp)
	}
	return &docs.StructuralElement{StartIndex: int64(start), EndIndex: int64(i), Table: t}, i
}

func toDocsTextStyle(ts textStyle) *docs.TextStyle {
	out := &docs.TextStyle{Bold: ts.Bold, Italic: ts.Italic, Underline: ts.Underline, Strikethrough: ts.Strikethrough, SmallCaps: ts.SmallCaps}
	if ts.FontSizePt > 0 {
		out.FontSize = &docs.Dimension{Magnitude: ts.FontSizePt, Unit: "PT"}
	}
	if ts.FontFamily != "" {
		out.WeightedFontFamily = &docs.WeightedFontFamily{FontFamily: ts.FontFamily, Weight: 400}
	}
	if ts.LinkURL != "" {
		out.Link = &docs.Link{Url: ts.LinkURL}
	}
	if ts.Foreground != "" {
		var rgb [3]float64
		for k, f := range strings.Split(ts.Foreground, ",") {
			if k < 3 {
				rgb[k], _ = strconv.ParseFloat(f, 64)
			}
		}
		out.ForegroundColor = &docs.OptionalColor{Color: &docs.Color{RgbColor: &docs.RgbColor{Red: rgb[0], Green: rgb[1], Blue: rgb[2]}}}
	}
	return out
}

var defaultDocumentStyle = props{"background": map[string]any{"color": map[string]any{}}, "pageNumberStart": 1,
	"marginTop": pt(72), "marginBottom": pt(72), "marginRight": pt(72), "marginLeft": pt(72),
	"pageSize": map[string]any{"width": pt(612), "height": pt(792)}, "marginHeader": pt(36), "marginFooter": pt(36),
	"useCustomHeaderFooterMargins": true, "documentFormat": map[string]any{"documentMode": "PAGES"}}

// renderTab answers a tab's DocumentTab.
func renderTab(t *tab) *docs.DocumentTab {
	r := newRenderer(t)
	ds := &docs.DocumentStyle{}
	fromProps(defaultDocumentStyle, t.DocStyle, ds)
	ds.DefaultHeaderId, ds.DefaultFooterId = t.DefaultHeaderID, t.DefaultFooterID
	dt := &docs.DocumentTab{Body: &docs.Body{Content: r.segment(t.Body)}, DocumentStyle: ds}
	if len(t.Headers) > 0 {
		dt.Headers = map[string]docs.Header{}
		for id, s := range t.Headers {
			dt.Headers[id] = docs.Header{HeaderId: id, Content: r.segment(s)}
		}
	}
	if len(t.Footers) > 0 {
		dt.Footers = map[string]docs.Footer{}
		for id, s := range t.Footers {
			dt.Footers[id] = docs.Footer{FooterId: id, Content: r.segment(s)}
		}
	}
	if len(t.Footnotes) > 0 {
		dt.Footnotes = map[string]docs.Footnote{}
		for id, s := range t.Footnotes {
			dt.Footnotes[id] = docs.Footnote{FootnoteId: id, Content: r.segment(s)}
		}
	}
	if len(r.objects) > 0 {
		dt.InlineObjects = r.objects
	}
	if len(t.Lists) > 0 {
		dt.Lists = map[string]docs.List{}
		for id, preset := range t.Lists {
			dt.Lists[id] = docs.List{ListProperties: listProperties(preset)}
		}
	}
	for segID, s := range allSegments(t) {
		for _, nr := range s.ranges {
			if dt.NamedRanges == nil {
				dt.NamedRanges = map[string]docs.NamedRanges{}
			}
			g := dt.NamedRanges[nr.name]
			g.Name = nr.name
			var into *docs.NamedRange
			for _, x := range g.NamedRanges {
				if x.NamedRangeId == nr.id {
					into = x
				}
			}
			if into == nil {
				into = &docs.NamedRange{NamedRangeId: nr.id, Name: nr.name}
				g.NamedRanges = append(g.NamedRanges, into)
			}
			into.Ranges = append(into.Ranges, &docs.Range{SegmentId: segID, StartIndex: int64(nr.a), EndIndex: int64(nr.b), TabId: t.ID})
			dt.NamedRanges[nr.name] = g
		}
	}
	for _, g := range dt.NamedRanges {
		sort.Slice(g.NamedRanges, func(a, b int) bool { return g.NamedRanges[a].NamedRangeId < g.NamedRanges[b].NamedRangeId })
		for _, nr := range g.NamedRanges {
			sort.Slice(nr.Ranges, func(a, b int) bool {
				x, y := nr.Ranges[a], nr.Ranges[b]
				return x.SegmentId < y.SegmentId || x.SegmentId == y.SegmentId && x.StartIndex < y.StartIndex
			})
		}
	}
	return dt
}

// render answers the Document JSON: with includeTabsContent the legacy
// fields stay empty and tabs holds every tab, children nested in childTabs;
// without it the legacy fields show the first tab.
func render(d *document, includeTabs bool) *docs.Document {
	out := &docs.Document{DocumentId: d.ID, Title: d.Title, RevisionId: revisionID(d)}
	if includeTabs {
		out.Tabs = renderTabs(d, "", 0)
		return out
	}
	dt := renderTab(d.Tabs[0])
	out.Body, out.Headers, out.Footers, out.Footnotes, out.DocumentStyle = dt.Body, dt.Headers, dt.Footers, dt.Footnotes, dt.DocumentStyle
	out.Lists, out.InlineObjects, out.NamedRanges = dt.Lists, dt.InlineObjects, dt.NamedRanges
	return out
}

func renderTabs(d *document, parent string, level int64) []*docs.Tab {
	var out []*docs.Tab
	for _, t := range d.Tabs {
		if t.ParentID != parent {
			continue
		}
		out = append(out, &docs.Tab{TabProperties: &docs.TabProperties{TabId: t.ID, Title: t.Title, Index: int64(len(out)),
			ParentTabId: t.ParentID, NestingLevel: level, IconEmoji: t.IconEmoji},
			DocumentTab: renderTab(t), ChildTabs: renderTabs(d, t.ID, level+1)})
	}
	return out
}
