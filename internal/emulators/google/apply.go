package google

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf16"

	docs "google.golang.org/api/docs/v1"
)

// requestError is a 400 for one request of a batch, worded as Google words
// it: "Invalid requests[i].<type>: <reason>".
type requestError struct {
	i    int
	typ  string
	what string
}

func (e *requestError) Error() string {
	return fmt.Sprintf("Invalid requests[%d].%s: %s", e.i, e.typ, e.what)
}

// applyBatch applies the requests in order on a copy of d; it answers the
// new document and one reply per request, or the first request's error (d
// untouched: a batch is atomic).
func applyBatch(d *document, reqs []*docs.Request) (*document, []*docs.Response, error) {
	nd := d.clone()
	replies := make([]*docs.Response, 0, len(reqs))
	for i, r := range reqs {
		typ, rep, err := applyOne(nd, r)
		if err != nil {
			return nil, nil, &requestError{i: i, typ: typ, what: err.Error()}
		}
		dropOrphanFootnotes(nd)
		for _, t := range nd.Tabs {
			for id, s := range allSegments(t) {
				if err := checkSegment(s, id == ""); err != nil {
					return nil, nil, &requestError{i: i, typ: typ, what: "the request would leave an invalid document: " + err.Error()}
				}
			}
		}
		if rep == nil {
			rep = &docs.Response{}
		}
		replies = append(replies, rep)
	}
	return nd, replies, nil
}

// requestType answers the JSON name of the request's set field.
func requestType(r *docs.Request) string {
	b, err := json.Marshal(r)
	if err != nil {
		return "request"
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(b, &m) != nil {
		return "request"
	}
	for k := range m {
		return k
	}
	return "request"
}

func allSegments(t *tab) map[string]*segment {
	m := map[string]*segment{"": t.Body}
	for _, src := range []map[string]*segment{t.Headers, t.Footers, t.Footnotes} {
		for k, v := range src {
			m[k] = v
		}
	}
	return m
}

// applyOne answers the request's JSON type name, its reply and error.
func applyOne(d *document, r *docs.Request) (string, *docs.Response, error) {
	switch {
	case r == nil:
		return "", nil, fmt.Errorf("empty request")
	case r.InsertText != nil:
		return "insertText", nil, insertText(d, r.InsertText)
	case r.DeleteContentRange != nil:
		return "deleteContentRange", nil, deleteContentRange(d, r.DeleteContentRange)
	case r.InsertTable != nil:
		return "insertTable", nil, insertTable(d, r.InsertTable)
	case r.UpdateTextStyle != nil:
		return "updateTextStyle", nil, updateTextStyle(d, r.UpdateTextStyle)
	case r.UpdateParagraphStyle != nil:
		return "updateParagraphStyle", nil, updateParagraphStyle(d, r.UpdateParagraphStyle)
	case r.ReplaceAllText != nil:
		n, err := replaceAllText(d, r.ReplaceAllText)
		return "replaceAllText", &docs.Response{ReplaceAllText: &docs.ReplaceAllTextResponse{OccurrencesChanged: n}}, err
	case r.InsertPageBreak != nil:
		return "insertPageBreak", nil, insertPageBreak(d, r.InsertPageBreak)
	case r.CreateParagraphBullets != nil:
		return "createParagraphBullets", nil, createParagraphBullets(d, r.CreateParagraphBullets)
	case r.DeleteParagraphBullets != nil:
		return "deleteParagraphBullets", nil, deleteParagraphBullets(d, r.DeleteParagraphBullets)
	case r.InsertTableRow != nil:
		return "insertTableRow", nil, insertTableRow(d, r.InsertTableRow)
	case r.InsertTableColumn != nil:
		return "insertTableColumn", nil, insertTableColumn(d, r.InsertTableColumn)
	case r.DeleteTableRow != nil:
		return "deleteTableRow", nil, deleteTableRow(d, r.DeleteTableRow)
	case r.DeleteTableColumn != nil:
		return "deleteTableColumn", nil, deleteTableColumn(d, r.DeleteTableColumn)
	case r.UpdateTableCellStyle != nil:
		return "updateTableCellStyle", nil, updateTableCellStyle(d, r.UpdateTableCellStyle)
	case r.UpdateTableRowStyle != nil:
		return "updateTableRowStyle", nil, updateTableRowStyle(d, r.UpdateTableRowStyle)
	case r.UpdateTableColumnProperties != nil:
		return "updateTableColumnProperties", nil, updateTableColumnProperties(d, r.UpdateTableColumnProperties)
	case r.PinTableHeaderRows != nil:
		return "pinTableHeaderRows", nil, pinTableHeaderRows(d, r.PinTableHeaderRows)
	case r.MergeTableCells != nil:
		return "mergeTableCells", nil, mergeTableCells(d, r.MergeTableCells)
	case r.UnmergeTableCells != nil:
		return "unmergeTableCells", nil, unmergeTableCells(d, r.UnmergeTableCells)
	case r.CreateHeader != nil:
		id, err := createHeaderFooter(d, r.CreateHeader.Type, r.CreateHeader.SectionBreakLocation, false)
		return "createHeader", &docs.Response{CreateHeader: &docs.CreateHeaderResponse{HeaderId: id}}, err
	case r.CreateFooter != nil:
		id, err := createHeaderFooter(d, r.CreateFooter.Type, r.CreateFooter.SectionBreakLocation, true)
		return "createFooter", &docs.Response{CreateFooter: &docs.CreateFooterResponse{FooterId: id}}, err
	case r.DeleteHeader != nil:
		return "deleteHeader", nil, deleteHeaderFooter(d, r.DeleteHeader.HeaderId, r.DeleteHeader.TabId, false)
	case r.DeleteFooter != nil:
		return "deleteFooter", nil, deleteHeaderFooter(d, r.DeleteFooter.FooterId, r.DeleteFooter.TabId, true)
	case r.CreateFootnote != nil:
		id, err := createFootnote(d, r.CreateFootnote)
		return "createFootnote", &docs.Response{CreateFootnote: &docs.CreateFootnoteResponse{FootnoteId: id}}, err
	case r.InsertInlineImage != nil:
		id, err := insertInlineImage(d, r.InsertInlineImage)
		return "insertInlineImage", &docs.Response{InsertInlineImage: &docs.InsertInlineImageResponse{ObjectId: id}}, err
	case r.ReplaceImage != nil:
		return "replaceImage", nil, replaceImage(d, r.ReplaceImage)
	case r.DeletePositionedObject != nil:
		return "deletePositionedObject", nil, deletePositionedObject(d, r.DeletePositionedObject)
	case r.InsertPerson != nil:
		return "insertPerson", nil, insertPerson(d, r.InsertPerson)
	case r.InsertDate != nil:
		return "insertDate", nil, insertDate(d, r.InsertDate)
	case r.InsertSectionBreak != nil:
		return "insertSectionBreak", nil, insertSectionBreak(d, r.InsertSectionBreak)
	case r.UpdateSectionStyle != nil:
		return "updateSectionStyle", nil, updateSectionStyle(d, r.UpdateSectionStyle)
	case r.UpdateDocumentStyle != nil:
		return "updateDocumentStyle", nil, updateDocumentStyle(d, r.UpdateDocumentStyle)
	case r.CreateNamedRange != nil:
		id, err := createNamedRange(d, r.CreateNamedRange)
		return "createNamedRange", &docs.Response{CreateNamedRange: &docs.CreateNamedRangeResponse{NamedRangeId: id}}, err
	case r.DeleteNamedRange != nil:
		return "deleteNamedRange", nil, deleteNamedRange(d, r.DeleteNamedRange)
	case r.ReplaceNamedRangeContent != nil:
		return "replaceNamedRangeContent", nil, replaceNamedRangeContent(d, r.ReplaceNamedRangeContent)
	case r.AddDocumentTab != nil:
		tp, err := addDocumentTab(d, r.AddDocumentTab)
		return "addDocumentTab", &docs.Response{AddDocumentTab: &docs.AddDocumentTabResponse{TabProperties: tp}}, err
	case r.DeleteTab != nil:
		return "deleteTab", nil, deleteTab(d, r.DeleteTab)
	case r.UpdateDocumentTabProperties != nil:
		return "updateDocumentTabProperties", nil, updateDocumentTabProperties(d, r.UpdateDocumentTabProperties)
	}
	return requestType(r), nil, fmt.Errorf("this request type is not supported by the emulator")
}

// locate resolves a tab and segment.
func locate(d *document, tabID, segID string) (*tab, *segment, error) {
	t, ok := d.tab(tabID)
	if !ok {
		return nil, nil, fmt.Errorf("The tab with ID %s was not found.", tabID)
	}
	s, ok := t.segment(segID)
	if !ok {
		return nil, nil, fmt.Errorf("The segment with ID %s was not found.", segID)
	}
	return t, s, nil
}

// insertionPoint resolves a Location or EndOfSegmentLocation to a segment
// and an index where text may be inserted.
func insertionPoint(d *document, loc *docs.Location, end *docs.EndOfSegmentLocation) (*segment, int, error) {
	switch {
	case loc != nil && end != nil:
		return nil, 0, fmt.Errorf("Exactly one of location or endOfSegmentLocation must be specified.")
	case loc != nil:
		_, s, err := locate(d, loc.TabId, loc.SegmentId)
		if err != nil {
			return nil, 0, err
		}
		i := int(loc.Index)
		if i < 0 || i >= len(s.items) {
			return nil, 0, fmt.Errorf("Index %d must be less than the end index of the referenced segment, %d.", i, len(s.items))
		}
		if it := s.items[i]; !it.k.inline() {
			return nil, 0, fmt.Errorf("The insertion index must be inside the bounds of an existing paragraph. You can still create new paragraphs by inserting newlines.")
		}
		if i > 0 && isHighSurrogate(s.items[i-1]) {
			return nil, 0, fmt.Errorf("The insertion index cannot be inside a surrogate pair.")
		}
		return s, i, nil
	case end != nil:
		_, s, err := locate(d, end.TabId, end.SegmentId)
		if err != nil {
			return nil, 0, err
		}
		return s, len(s.items) - 1, nil
	}
	return nil, 0, fmt.Errorf("Exactly one of location or endOfSegmentLocation must be specified.")
}

func isHighSurrogate(it item) bool {
	return it.k == kChar && utf16.IsSurrogate(rune(it.u)) && it.u < 0xDC00
}

// insertUnits inserts text at i: the new characters take the style of the
// character before them in the paragraph (or after, at a paragraph start); a
// '\n' splits the paragraph, both halves keeping its paragraph style.
func insertUnits(s *segment, i int, text []uint16) {
	end := s.paragraphEnd(i)
	ps := s.items[end].ps
	ts := s.items[i].ts
	if st := s.paragraphStart(i); i > st {
		ts = s.items[i-1].ts
	}
	ts = unlinked(ts)
	ins := make([]item, len(text))
	for k, u := range text {
		ins[k] = item{k: kChar, u: u, ts: ts}
		if u == '\n' {
			ins[k].ps = ps
		}
	}
	s.splice(i, i, ins)
}

func insertText(d *document, r *docs.InsertTextRequest) error {
	s, i, err := insertionPoint(d, r.Location, r.EndOfSegmentLocation)
	if err != nil {
		return err
	}
	if r.Text == "" {
		return fmt.Errorf("The text to insert must not be empty.")
	}
	// Google drops control characters other than \n and \t; \r is treated as \n.
	clean := strings.Map(func(c rune) rune {
		switch {
		case c == '\r':
			return '\n'
		case c == '\n' || c == '\t':
			return c
		case c < 0x20 || (c >= 0xE000 && c <= 0xF8FF):
			return -1
		}
		return c
	}, r.Text)
	insertUnits(s, i, toUnits(clean))
	return nil
}

// resolveRange checks a Range against its segment.
func resolveRange(d *document, r *docs.Range) (*segment, int, int, error) {
	if r == nil {
		return nil, 0, 0, fmt.Errorf("A range is required.")
	}
	_, s, err := locate(d, r.TabId, r.SegmentId)
	if err != nil {
		return nil, 0, 0, err
	}
	a, b := int(r.StartIndex), int(r.EndIndex)
	if a < 0 || b <= a {
		return nil, 0, 0, fmt.Errorf("The range should not be empty.")
	}
	if b > len(s.items) {
		return nil, 0, 0, fmt.Errorf("Index %d must be less than the end index of the referenced segment, %d.", b-1, len(s.items))
	}
	return s, a, b, nil
}

func deleteContentRange(d *document, r *docs.DeleteContentRangeRequest) error {
	s, a, b, err := resolveRange(d, r.Range)
	if err != nil {
		return err
	}
	if b == len(s.items) {
		return fmt.Errorf("The range cannot include the newline character at the end of the segment.")
	}
	if s.items[a].k == kSectionBreak {
		return fmt.Errorf("Invalid deletion range. Cannot delete the requested range.")
	}
	if !wholeStructure(s, a, b) {
		return fmt.Errorf("Invalid deletion range. Cannot delete the requested range.")
	}
	// A section break stays between two paragraphs.
	if a > 0 && (s.items[b].k == kSectionBreak && !s.items[a-1].isNewline() || s.items[a-1].k == kSectionBreak && a > 1 && !s.items[b].k.inline()) {
		return fmt.Errorf("Invalid deletion range. Cannot delete the requested range.")
	}
	// A cell keeps its last newline.
	if k := s.items[b].k; (k == kCellStart || k == kRowStart || k == kTableEnd) && s.items[b-1].isNewline() {
		return fmt.Errorf("Invalid deletion range. Cannot delete the requested range.")
	}
	// Deleting the newline before a table (or the table's own trailing
	// paragraph boundary) would merge text into the table.
	if b < len(s.items) && s.items[b].k == kTableStart && a > 0 && !s.items[a-1].isNewline() {
		return fmt.Errorf("Invalid deletion range. Cannot delete the requested range.")
	}
	// The paragraph keeps the style of the newline that survives: the last
	// one of the range's paragraphs; when the range ends inside a paragraph
	// after deleting a newline, the merged paragraph ends with the later
	// newline, as in Google Docs.
	s.splice(a, b, nil)
	return nil
}

// wholeStructure reports whether [a,b) cuts no table: every table marker in
// the range belongs to a table that is wholly inside it, and the range does
// not span two cells of a table it does not wholly contain.
func wholeStructure(s *segment, a, b int) bool {
	depth := 0 // table nesting depth relative to a
	minDepth := 0
	cellsCrossed := false
	for i := a; i < b; i++ {
		switch s.items[i].k {
		case kTableStart:
			depth++
		case kTableEnd:
			depth--
			if depth < minDepth {
				minDepth = depth
			}
		case kRowStart, kCellStart:
			if depth == 0 {
				cellsCrossed = true
			}
		}
	}
	return depth == 0 && minDepth == 0 && !cellsCrossed
}

func insertTable(d *document, r *docs.InsertTableRequest) error {
	if r.Rows < 1 || r.Columns < 1 {
		return fmt.Errorf("The number of rows and columns must be at least 1.")
	}
	if r.Rows*r.Columns > 20*20 || r.Columns > 20 {
		return fmt.Errorf("The table is too large.")
	}
	s, i, err := insertionPoint(d, r.Location, r.EndOfSegmentLocation)
	if err != nil {
		return err
	}
	if t, _ := d.tab(tabOf(r.Location, r.EndOfSegmentLocation)); t != nil {
		if _, fn := t.Footnotes[segOf(r.Location, r.EndOfSegmentLocation)]; fn {
			return fmt.Errorf("Tables cannot be inserted into footnotes.")
		}
	}
	ps := s.items[s.paragraphEnd(i)].para()
	ins := []item{newline(ps), {k: kTableStart}}
	for range r.Rows {
		ins = append(ins, item{k: kRowStart})
		for range r.Columns {
			ins = append(ins, item{k: kCellStart}, newline(paraStyle{NamedStyleType: "NORMAL_TEXT"}))
		}
	}
	ins = append(ins, item{k: kTableEnd})
	s.splice(i, i, ins)
	return nil
}

func tabOf(l *docs.Location, e *docs.EndOfSegmentLocation) string {
	switch {
	case l != nil:
		return l.TabId
	case e != nil:
		return e.TabId
	}
	return ""
}

func segOf(l *docs.Location, e *docs.EndOfSegmentLocation) string {
	switch {
	case l != nil:
		return l.SegmentId
	case e != nil:
		return e.SegmentId
	}
	return ""
}

func insertPageBreak(d *document, r *docs.InsertPageBreakRequest) error {
	s, i, err := insertionPoint(d, r.Location, r.EndOfSegmentLocation)
	if err != nil {
		return err
	}
	if segOf(r.Location, r.EndOfSegmentLocation) != "" {
		return fmt.Errorf("Page breaks can only be inserted in the body.")
	}
	if inTable(s, i) {
		return fmt.Errorf("Page breaks cannot be inserted inside a table.")
	}
	// A page break is followed by a newline: it ends its own paragraph.
	ps := s.items[s.paragraphEnd(i)].para()
	ins := []item{{k: kPageBreak, ts: s.items[i].ts}, newline(ps)}
	s.splice(i, i, ins)
	return nil
}

// inTable reports whether index i lies inside a table.
func inTable(s *segment, i int) bool {
	depth := 0
	for j := 0; j < i && j < len(s.items); j++ {
		switch s.items[j].k {
		case kTableStart:
			depth++
		case kTableEnd:
			depth--
		}
	}
	return depth > 0
}

// fieldSet parses a field mask: "*" selects all, else comma-separated
// names. It answers an error for an unknown field.
func fieldSet(mask string, known []string) (map[string]bool, error) {
	set := map[string]bool{}
	if strings.TrimSpace(mask) == "" {
		return nil, fmt.Errorf("At least one field must be listed in 'fields'. (Use '*' to indicate all fields.)")
	}
	for _, f := range strings.Split(mask, ",") {
		f = strings.TrimSpace(f)
		if f == "*" {
			for _, k := range known {
				set[k] = true
			}
			continue
		}
		ok := false
		for _, k := range known {
			if k == f || strings.HasPrefix(f, k+".") {
				set[k], ok = true, true
			}
		}
		if !ok {
			return nil, fmt.Errorf("Invalid field: %s", f)
		}
	}
	return set, nil
}

var textStyleFields = []string{"bold", "italic", "underline", "strikethrough", "smallCaps", "fontSize", "weightedFontFamily", "link", "foregroundColor"}

// updateTextStyle sets the masked fields of the range's characters; a field
// in the mask but absent from textStyle is reset to its default.
func updateTextStyle(d *document, r *docs.UpdateTextStyleRequest) error {
	s, a, b, err := resolveRange(d, r.Range)
	if err != nil {
		return err
	}
	set, err := fieldSet(r.Fields, textStyleFields)
	if err != nil {
		return err
	}
	in := r.TextStyle
	if in == nil {
		in = &docs.TextStyle{}
	}
	ns := fromDocsTextStyle(in)
	memo := map[*textStyle]*textStyle{}
	for i := a; i < b; i++ {
		it := &s.items[i]
		if !it.k.inline() {
			continue
		}
		if nts, ok := memo[it.ts]; ok {
			it.ts = nts
			continue
		}
		old := it.ts
		cur := it.style()
		ts := &cur
		memo[old], it.ts = ts, ts
		if set["bold"] {
			ts.Bold = ns.Bold
		}
		if set["italic"] {
			ts.Italic = ns.Italic
		}
		if set["underline"] {
			ts.Underline = ns.Underline
		}
		if set["strikethrough"] {
			ts.Strikethrough = ns.Strikethrough
		}
		if set["smallCaps"] {
			ts.SmallCaps = ns.SmallCaps
		}
		if set["fontSize"] {
			ts.FontSizePt = ns.FontSizePt
		}
		if set["weightedFontFamily"] {
			ts.FontFamily = ns.FontFamily
		}
		if set["link"] {
			ts.LinkURL = ns.LinkURL
		}
		if set["foregroundColor"] {
			ts.Foreground = ns.Foreground
		}
	}
	return nil
}

var namedStyles = map[string]bool{"NORMAL_TEXT": true, "TITLE": true, "SUBTITLE": true, "HEADING_1": true, "HEADING_2": true,
	"HEADING_3": true, "HEADING_4": true, "HEADING_5": true, "HEADING_6": true}

var alignments = map[string]bool{"": true, "START": true, "CENTER": true, "END": true, "JUSTIFIED": true}

// updateParagraphStyle sets the masked fields on every paragraph the range
// touches.
func updateParagraphStyle(d *document, r *docs.UpdateParagraphStyleRequest) error {
	s, a, b, err := resolveRange(d, r.Range)
	if err != nil {
		return err
	}
	set, err := fieldSet(r.Fields, []string{"namedStyleType", "alignment", "indentStart", "indentFirstLine"})
	if err != nil {
		return err
	}
	in := r.ParagraphStyle
	if in == nil {
		in = &docs.ParagraphStyle{}
	}
	if err := checkDimensions(toProps(in)); err != nil {
		return err
	}
	indent := func(d *docs.Dimension) float64 {
		if d == nil {
			return 0
		}
		return d.Magnitude
	}
	nst := in.NamedStyleType
	if set["namedStyleType"] {
		if nst == "" {
			nst = "NORMAL_TEXT"
		}
		if !namedStyles[nst] {
			return fmt.Errorf("Invalid value at 'paragraph_style.named_style_type': %q", in.NamedStyleType)
		}
	}
	if set["alignment"] && !alignments[in.Alignment] {
		return fmt.Errorf("Invalid value at 'paragraph_style.alignment': %q", in.Alignment)
	}
	for i := a; i < len(s.items); i++ {
		it := &s.items[i]
		if it.isNewline() {
			it.ps = withPara(it.ps, func(ps *paraStyle) {
				if set["namedStyleType"] {
					ps.NamedStyleType = nst
				}
				if set["alignment"] {
					ps.Alignment = in.Alignment
				}
				if set["indentStart"] {
					ps.IndentStartPt = indent(in.IndentStart)
				}
				if set["indentFirstLine"] {
					ps.IndentFirstLinePt = indent(in.IndentFirstLine)
				}
			})
			if i >= b-1 {
				break
			}
		}
	}
	return nil
}

// replaceAllText replaces every match in the bodies, headers, footers and
// footnotes of the selected tabs; the replacement takes the style of the
// match's first character. It answers the number of occurrences.
func replaceAllText(d *document, r *docs.ReplaceAllTextRequest) (int64, error) {
	if r.ContainsText == nil || r.ContainsText.Text == "" {
		return 0, fmt.Errorf("The containsText must be set and non-empty.")
	}
	want := toUnits(r.ContainsText.Text)
	repl := toUnits(r.ReplaceText)
	tabs := d.Tabs
	if r.TabsCriteria != nil && len(r.TabsCriteria.TabIds) > 0 {
		tabs = nil
		for _, id := range r.TabsCriteria.TabIds {
			t, ok := d.tab(id)
			if !ok {
				return 0, fmt.Errorf("The tab with ID %s was not found.", id)
			}
			tabs = append(tabs, t)
		}
	}
	var n int64
	for _, t := range tabs {
		for _, s := range allSegments(t) {
			n += replaceIn(s, want, repl, r.ContainsText.MatchCase)
		}
	}
	return n, nil
}

func fold(u uint16) uint16 {
	if u < 0x80 && 'A' <= u && u <= 'Z' {
		return u + 32
	}
	if u >= 0x80 && !utf16.IsSurrogate(rune(u)) {
		return uint16([]rune(strings.ToLower(string(rune(u))))[0])
	}
	return u
}

func replaceIn(s *segment, want, repl []uint16, matchCase bool) int64 {
	var at []int
	for i := 0; i < len(s.items); {
		if matchAt(s.items, i, want, matchCase) {
			at = append(at, i)
			i += len(want)
			continue
		}
		i++
	}
	for k := len(at) - 1; k >= 0; k-- {
		i := at[k]
		ts := s.items[i].ts
		ps := s.items[s.paragraphEnd(i)].ps
		ins := make([]item, len(repl))
		for n, u := range repl {
			ins[n] = item{k: kChar, u: u, ts: ts}
			if u == '\n' {
				ins[n].ps = ps
			}
		}
		s.splice(i, i+len(want), ins)
	}
	return int64(len(at))
}

func matchAt(items []item, i int, want []uint16, matchCase bool) bool {
	if i+len(want) > len(items) {
		return false
	}
	for k, w := range want {
		it := items[i+k]
		if it.k != kChar {
			return false
		}
		if matchCase && it.u != w || !matchCase && fold(it.u) != fold(w) {
			return false
		}
	}
	return true
}

func fromDocsTextStyle(in *docs.TextStyle) textStyle {
	ts := textStyle{Bold: in.Bold, Italic: in.Italic, Underline: in.Underline, Strikethrough: in.Strikethrough, SmallCaps: in.SmallCaps}
	if in.FontSize != nil {
		ts.FontSizePt = in.FontSize.Magnitude
	}
	if in.WeightedFontFamily != nil {
		ts.FontFamily = in.WeightedFontFamily.FontFamily
	}
	if in.Link != nil {
		ts.LinkURL = in.Link.Url
	}
	if in.ForegroundColor != nil && in.ForegroundColor.Color != nil && in.ForegroundColor.Color.RgbColor != nil {
		c := in.ForegroundColor.Color.RgbColor
		ts.Foreground = strconv.FormatFloat(c.Red, 'g', -1, 64) + "," + strconv.FormatFloat(c.Green, 'g', -1, 64) + "," + strconv.FormatFloat(c.Blue, 'g', -1, 64)
	}
	return ts
}
