package google

import (
	"strconv"
	"strings"
	"unicode/utf16"

	docs "google.golang.org/api/docs/v1"
)

// renderSegment answers the structural elements of a segment, indices
// counted in UTF-16 code units as Google does.
func renderSegment(s *segment) []*docs.StructuralElement {
	out, _ := renderContent(s.items, 0, false)
	return out
}

func renderContent(it []item, i int, inCell bool) ([]*docs.StructuralElement, int) {
	var out []*docs.StructuralElement
	for i < len(it) {
		switch it[i].k {
		case kSectionBreak:
			out = append(out, &docs.StructuralElement{StartIndex: int64(i), EndIndex: int64(i + 1),
				SectionBreak: &docs.SectionBreak{SectionStyle: &docs.SectionStyle{ColumnSeparatorStyle: "NONE", ContentDirection: "LEFT_TO_RIGHT", SectionType: "CONTINUOUS"}}})
			i++
		case kTableStart:
			el, j := renderTable(it, i)
			out = append(out, el)
			i = j
		case kRowStart, kCellStart, kTableEnd:
			if inCell {
				return out, i
			}
			i++ // unreachable in a checked segment
		default:
			el, j := renderParagraph(it, i)
			out = append(out, el)
			i = j
		}
	}
	return out, i
}

func renderParagraph(it []item, i int) (*docs.StructuralElement, int) {
	start := i
	p := &docs.Paragraph{}
	for i < len(it) {
		j := i
		if it[i].k == kPageBreak {
			p.Elements = append(p.Elements, &docs.ParagraphElement{StartIndex: int64(i), EndIndex: int64(i + 1),
				PageBreak: &docs.PageBreak{TextStyle: toDocsTextStyle(it[i].ts)}})
			i++
			continue
		}
		if it[i].k != kChar {
			break
		}
		var units []uint16
		for j < len(it) && it[j].k == kChar && it[j].ts == it[i].ts {
			units = append(units, it[j].u)
			j++
			if it[j-1].u == '\n' {
				break
			}
		}
		p.Elements = append(p.Elements, &docs.ParagraphElement{StartIndex: int64(i), EndIndex: int64(j),
			TextRun: &docs.TextRun{Content: string(utf16.Decode(units)), TextStyle: toDocsTextStyle(it[i].ts)}})
		i = j
		if it[j-1].u == '\n' {
			break
		}
	}
	ps := it[i-1].ps
	p.ParagraphStyle = &docs.ParagraphStyle{NamedStyleType: ps.NamedStyleType, Alignment: ps.Alignment, Direction: "LEFT_TO_RIGHT"}
	if p.ParagraphStyle.NamedStyleType == "" {
		p.ParagraphStyle.NamedStyleType = "NORMAL_TEXT"
	}
	if strings.HasPrefix(ps.NamedStyleType, "HEADING_") {
		p.ParagraphStyle.HeadingId = "h." + strconv.Itoa(start)
	}
	if ps.ListID != "" {
		p.Bullet = &docs.Bullet{ListId: ps.ListID, NestingLevel: ps.Nesting, TextStyle: &docs.TextStyle{}}
	}
	return &docs.StructuralElement{StartIndex: int64(start), EndIndex: int64(i), Paragraph: p}, i
}

func renderTable(it []item, i int) (*docs.StructuralElement, int) {
	start := i
	t := &docs.Table{}
	i++
	for i < len(it) && it[i].k == kRowStart {
		row := &docs.TableRow{StartIndex: int64(i), TableRowStyle: &docs.TableRowStyle{MinRowHeight: &docs.Dimension{Unit: "PT"}}}
		i++
		for i < len(it) && it[i].k == kCellStart {
			cell := &docs.TableCell{StartIndex: int64(i), TableCellStyle: &docs.TableCellStyle{RowSpan: 1, ColumnSpan: 1, ContentAlignment: "TOP"}}
			cell.Content, i = renderContent(it, i+1, true)
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

// renderTab answers a tab's DocumentTab.
func renderTab(t *tab) *docs.DocumentTab {
	dt := &docs.DocumentTab{Body: &docs.Body{Content: renderSegment(t.Body)},
		DocumentStyle: &docs.DocumentStyle{DefaultHeaderId: t.DefaultHeaderID, DefaultFooterId: t.DefaultFooterID,
			PageSize: &docs.Size{Width: &docs.Dimension{Magnitude: 612, Unit: "PT"}, Height: &docs.Dimension{Magnitude: 792, Unit: "PT"}}}}
	if len(t.Headers) > 0 {
		dt.Headers = map[string]docs.Header{}
		for id, s := range t.Headers {
			dt.Headers[id] = docs.Header{HeaderId: id, Content: renderSegment(s)}
		}
	}
	if len(t.Footers) > 0 {
		dt.Footers = map[string]docs.Footer{}
		for id, s := range t.Footers {
			dt.Footers[id] = docs.Footer{FooterId: id, Content: renderSegment(s)}
		}
	}
	if len(t.Footnotes) > 0 {
		dt.Footnotes = map[string]docs.Footnote{}
		for id, s := range t.Footnotes {
			dt.Footnotes[id] = docs.Footnote{FootnoteId: id, Content: renderSegment(s)}
		}
	}
	return dt
}

// render answers the Document JSON: with includeTabsContent the legacy
// fields stay empty and tabs holds every tab; without it the legacy fields
// show the first tab.
func render(d *document, includeTabs bool) *docs.Document {
	out := &docs.Document{DocumentId: d.ID, Title: d.Title, RevisionId: revisionID(d)}
	if includeTabs {
		for i, t := range d.Tabs {
			out.Tabs = append(out.Tabs, &docs.Tab{TabProperties: &docs.TabProperties{TabId: t.ID, Title: t.Title, Index: int64(i)},
				DocumentTab: renderTab(t)})
		}
		return out
	}
	dt := renderTab(d.Tabs[0])
	out.Body, out.Headers, out.Footers, out.Footnotes, out.DocumentStyle = dt.Body, dt.Headers, dt.Footers, dt.Footnotes, dt.DocumentStyle
	return out
}
