package google

import (
	"fmt"
	"slices"

	docs "google.golang.org/api/docs/v1"
)

// tableModel is a table taken out of its segment to be edited, then put
// back whole (build): markers keep their attrs, cells their content items.
type tableModel struct {
	x    *attrs // the table start's attrs (column properties)
	rows []rowModel
}

type rowModel struct {
	x     *attrs
	cells []cellModel
}

type cellModel struct {
	x       *attrs
	content []item
}

// skipTable answers the index after the table starting at i.
func skipTable(it []item, i int) int {
	depth := 0
	for ; i < len(it); i++ {
		switch it[i].k {
		case kTableStart:
			depth++
		case kTableEnd:
			depth--
			if depth == 0 {
				return i + 1
			}
		}
	}
	return i
}

// parseTable reads the table starting at index start of s.
func parseTable(s *segment, start int) (*tableModel, int) {
	it := s.items
	t := &tableModel{x: it[start].x}
	i := start + 1
	for i < len(it) && it[i].k == kRowStart {
		r := rowModel{x: it[i].x}
		i++
		for i < len(it) && it[i].k == kCellStart {
			c := cellModel{x: it[i].x}
			i++
			for i < len(it) && it[i].k != kRowStart && it[i].k != kCellStart && it[i].k != kTableEnd {
				if it[i].k == kTableStart {
					j := skipTable(it, i)
					c.content = append(c.content, it[i:j]...)
					i = j
					continue
				}
				c.content = append(c.content, it[i])
				i++
			}
			r.cells = append(r.cells, c)
		}
		t.rows = append(t.rows, r)
	}
	return t, i + 1
}

func (t *tableModel) build() []item {
	out := []item{{k: kTableStart, x: t.x}}
	for _, r := range t.rows {
		out = append(out, item{k: kRowStart, x: r.x})
		for _, c := range r.cells {
			out = append(out, item{k: kCellStart, x: c.x})
			out = append(out, c.content...)
		}
	}
	return append(out, item{k: kTableEnd})
}

func (t *tableModel) cols() int {
	if len(t.rows) == 0 {
		return 0
	}
	return len(t.rows[0].cells)
}

// replaceTable puts the edited table back over [start, end): only the span
// that differs is spliced, so that named ranges elsewhere in the table keep
// their place (an inserted row shifts them, a restyled cell leaves them).
func (s *segment) replaceTable(start, end int, t *tableModel) {
	repl := t.build()
	old := s.items[start:end]
	p := 0
	for p < len(old) && p < len(repl) && old[p] == repl[p] {
		p++
	}
	q := 0
	for q < len(old)-p && q < len(repl)-p && old[len(old)-1-q] == repl[len(repl)-1-q] {
		q++
	}
	s.splice(start+p, end-q, repl[p:len(repl)-q])
}

// findTable resolves a tableStartLocation.
func findTable(d *document, loc *docs.Location) (*segment, int, *tableModel, int, error) {
	if loc == nil {
		return nil, 0, nil, 0, fmt.Errorf("The table start location must be specified.")
	}
	_, s, err := locate(d, loc.TabId, loc.SegmentId)
	if err != nil {
		return nil, 0, nil, 0, err
	}
	i := int(loc.Index)
	if i < 0 || i >= len(s.items) || s.items[i].k != kTableStart {
		return nil, 0, nil, 0, fmt.Errorf("The provided table start location is invalid: no table starts at index %d.", i)
	}
	t, end := parseTable(s, i)
	return s, i, t, end, nil
}

// findCell resolves a tableCellLocation.
func findCell(d *document, cl *docs.TableCellLocation) (*segment, int, *tableModel, int, int, int, error) {
	if cl == nil {
		return nil, 0, nil, 0, 0, 0, fmt.Errorf("The table cell location must be specified.")
	}
	s, start, t, end, err := findTable(d, cl.TableStartLocation)
	if err != nil {
		return nil, 0, nil, 0, 0, 0, err
	}
	r, c := int(cl.RowIndex), int(cl.ColumnIndex)
	if r < 0 || r >= len(t.rows) {
		return nil, 0, nil, 0, 0, 0, fmt.Errorf("The row index %d is out of bounds: the table has %d rows.", r, len(t.rows))
	}
	if c < 0 || c >= len(t.rows[r].cells) {
		return nil, 0, nil, 0, 0, 0, fmt.Errorf("The column index %d is out of bounds: the table has %d columns.", c, len(t.rows[r].cells))
	}
	return s, start, t, end, r, c, nil
}

// emptyCell answers a new empty cell styled like model (spans reset).
func emptyCell(model *attrs) cellModel {
	c := cellModel{content: []item{newline(paraStyle{NamedStyleType: "NORMAL_TEXT"})}}
	if model != nil {
		c.x = &attrs{p: model.p.with("rowSpan", nil).with("columnSpan", nil)}
	}
	return c
}

func insertTableRow(d *document, r *docs.InsertTableRowRequest) error {
	s, start, t, end, ri, _, err := findCell(d, r.TableCellLocation)
	if err != nil {
		return err
	}
	ref := t.rows[ri]
	nr := rowModel{}
	if ref.x != nil {
		nr.x = &attrs{p: ref.x.p.with("tableHeader", nil)}
	}
	for _, c := range ref.cells {
		nr.cells = append(nr.cells, emptyCell(c.x))
	}
	at := ri
	if r.InsertBelow {
		at = ri + 1
	}
	hs := shiftHeads(t.heads(), true, at, 1)
	t.rows = slices.Insert(t.rows, at, nr)
	t.setSpans(hs)
	s.replaceTable(start, end, t)
	return nil
}

func insertTableColumn(d *document, r *docs.InsertTableColumnRequest) error {
	s, start, t, end, _, ci, err := findCell(d, r.TableCellLocation)
	if err != nil {
		return err
	}
	if t.cols() >= 20 {
		return fmt.Errorf("The table cannot have more than 20 columns.")
	}
	at := ci
	if r.InsertRight {
		at = ci + 1
	}
	hs := shiftHeads(t.heads(), false, at, 1)
	for k := range t.rows {
		t.rows[k].cells = slices.Insert(t.rows[k].cells, at, emptyCell(t.rows[k].cells[ci].x))
	}
	t.setSpans(hs)
	if t.x != nil {
		if cols, _ := t.x.p["columns"].([]props); at <= len(cols) {
			t.x = &attrs{p: t.x.p.with("columns", slices.Insert(slices.Clone(cols), at, props{}))}
		}
	}
	s.replaceTable(start, end, t)
	return nil
}

// deleteTableRow deletes the row; deleting the only row deletes the table,
// as the Docs editor does.
func deleteTableRow(d *document, r *docs.DeleteTableRowRequest) error {
	s, start, t, end, ri, _, err := findCell(d, r.TableCellLocation)
	if err != nil {
		return err
	}
	if len(t.rows) == 1 {
		s.splice(start, end, nil)
		return nil
	}
	hs := shiftHeads(t.heads(), true, ri, -1)
	t.rows = slices.Delete(t.rows, ri, ri+1)
	t.setSpans(hs)
	s.replaceTable(start, end, t)
	return nil
}

// deleteTableColumn deletes the column; deleting the only column deletes
// the table.
func deleteTableColumn(d *document, r *docs.DeleteTableColumnRequest) error {
	s, start, t, end, _, ci, err := findCell(d, r.TableCellLocation)
	if err != nil {
		return err
	}
	if t.cols() == 1 {
		s.splice(start, end, nil)
		return nil
	}
	hs := shiftHeads(t.heads(), false, ci, -1)
	for k := range t.rows {
		t.rows[k].cells = slices.Delete(t.rows[k].cells, ci, ci+1)
	}
	t.setSpans(hs)
	if t.x != nil {
		if cols, _ := t.x.p["columns"].([]props); ci < len(cols) {
			t.x = &attrs{p: t.x.p.with("columns", slices.Delete(slices.Clone(cols), ci, ci+1))}
		}
	}
	s.replaceTable(start, end, t)
	return nil
}

var cellStyleFields = []string{"backgroundColor", "borderTop", "borderBottom", "borderLeft", "borderRight",
	"paddingTop", "paddingBottom", "paddingLeft", "paddingRight", "contentAlignment"}

// tableRangeCells answers the [row][col] cells of a tableRange after
// checking it lies in the table.
func tableRangeCells(t *tableModel, tr *docs.TableRange) (r0, c0, r1, c1 int, err error) {
	cl := tr.TableCellLocation
	r0, c0 = int(cl.RowIndex), int(cl.ColumnIndex)
	if tr.RowSpan < 1 || tr.ColumnSpan < 1 {
		return 0, 0, 0, 0, fmt.Errorf("The row span and column span must be at least 1.")
	}
	r1, c1 = r0+int(tr.RowSpan), c0+int(tr.ColumnSpan)
	if r0 < 0 || c0 < 0 || r1 > len(t.rows) || c1 > t.cols() {
		return 0, 0, 0, 0, fmt.Errorf("The table range is outside the table (%d rows, %d columns).", len(t.rows), t.cols())
	}
	return r0, c0, r1, c1, nil
}

func updateTableCellStyle(d *document, r *docs.UpdateTableCellStyleRequest) error {
	var loc *docs.Location
	switch {
	case r.TableRange != nil && r.TableStartLocation != nil:
		return fmt.Errorf("Exactly one of tableRange or tableStartLocation must be specified.")
	case r.TableRange != nil:
		if r.TableRange.TableCellLocation == nil {
			return fmt.Errorf("The table cell location must be specified.")
		}
		loc = r.TableRange.TableCellLocation.TableStartLocation
	case r.TableStartLocation != nil:
		loc = r.TableStartLocation
	default:
		return fmt.Errorf("Exactly one of tableRange or tableStartLocation must be specified.")
	}
	s, start, t, end, err := findTable(d, loc)
	if err != nil {
		return err
	}
	r0, c0, r1, c1 := 0, 0, len(t.rows), t.cols()
	if r.TableRange != nil {
		if r0, c0, r1, c1, err = tableRangeCells(t, r.TableRange); err != nil {
			return err
		}
	}
	in := r.TableCellStyle
	if in == nil {
		in = &docs.TableCellStyle{}
	}
	switch in.ContentAlignment {
	case "", "CONTENT_ALIGNMENT_UNSPECIFIED", "TOP", "MIDDLE", "BOTTOM":
	default:
		return fmt.Errorf("Invalid value at 'table_cell_style.content_alignment': %q", in.ContentAlignment)
	}
	for ri := r0; ri < r1; ri++ {
		for ci := c0; ci < c1; ci++ {
			c := &t.rows[ri].cells[ci]
			var old props
			if c.x != nil {
				old = c.x.p
			}
			np, err := maskUpdate(old, in, r.Fields, cellStyleFields)
			if err != nil {
				return err
			}
			c.x = &attrs{p: np}
		}
	}
	s.replaceTable(start, end, t)
	return nil
}

func updateTableRowStyle(d *document, r *docs.UpdateTableRowStyleRequest) error {
	s, start, t, end, err := findTable(d, r.TableStartLocation)
	if err != nil {
		return err
	}
	rows := r.RowIndices
	if len(rows) == 0 {
		for k := range t.rows {
			rows = append(rows, int64(k))
		}
	}
	in := r.TableRowStyle
	if in == nil {
		in = &docs.TableRowStyle{}
	}
	for _, ri := range rows {
		if ri < 0 || int(ri) >= len(t.rows) {
			return fmt.Errorf("The row index %d is out of bounds: the table has %d rows.", ri, len(t.rows))
		}
		var old props
		if x := t.rows[ri].x; x != nil {
			old = x.p
		}
		np, err := maskUpdate(old, in, r.Fields, []string{"minRowHeight", "tableHeader", "preventOverflow"})
		if err != nil {
			return err
		}
		t.rows[ri].x = &attrs{p: np}
	}
	s.replaceTable(start, end, t)
	return nil
}

// minColumnWidthPt is the narrowest column Google accepts.
const minColumnWidthPt = 5

func updateTableColumnProperties(d *document, r *docs.UpdateTableColumnPropertiesRequest) error {
	s, start, t, end, err := findTable(d, r.TableStartLocation)
	if err != nil {
		return err
	}
	in := r.TableColumnProperties
	if in == nil {
		in = &docs.TableColumnProperties{}
	}
	switch in.WidthType {
	case "", "WIDTH_TYPE_UNSPECIFIED", "EVENLY_DISTRIBUTED", "FIXED_WIDTH":
	default:
		return fmt.Errorf("Invalid value at 'table_column_properties.width_type': %q", in.WidthType)
	}
	if in.Width != nil && in.Width.Magnitude < minColumnWidthPt {
		return fmt.Errorf("The column width must be at least %d points.", minColumnWidthPt)
	}
	idx := r.ColumnIndices
	if len(idx) == 0 {
		for k := range t.cols() {
			idx = append(idx, int64(k))
		}
	}
	var tp props
	if t.x != nil {
		tp = t.x.p
	}
	old, _ := tp["columns"].([]props)
	cols := make([]props, t.cols())
	copy(cols, old)
	for _, ci := range idx {
		if ci < 0 || int(ci) >= len(cols) {
			return fmt.Errorf("The column index %d is out of bounds: the table has %d columns.", ci, len(cols))
		}
		np, err := maskUpdate(cols[ci], in, r.Fields, []string{"widthType", "width"})
		if err != nil {
			return err
		}
		cols[ci] = np
	}
	t.x = &attrs{p: tp.with("columns", cols)}
	s.replaceTable(start, end, t)
	return nil
}

// pinTableHeaderRows marks the first n rows as the table's header rows
// (tableRowStyle.tableHeader), the others not.
func pinTableHeaderRows(d *document, r *docs.PinTableHeaderRowsRequest) error {
	s, start, t, end, err := findTable(d, r.TableStartLocation)
	if err != nil {
		return err
	}
	n := int(r.PinnedHeaderRowsCount)
	if n < 0 || n > len(t.rows) {
		return fmt.Errorf("The number of pinned header rows must be between 0 and %d.", len(t.rows))
	}
	for k := range t.rows {
		var old props
		if x := t.rows[k].x; x != nil {
			old = x.p
		}
		var v any
		if k < n {
			v = true
		}
		t.rows[k].x = &attrs{p: old.with("tableHeader", v)}
	}
	s.replaceTable(start, end, t)
	return nil
}

func spanOf(c cellModel) (int, int, bool) {
	if c.x == nil {
		return 1, 1, false
	}
	rs, ok1 := c.x.p["rowSpan"].(int)
	cs, ok2 := c.x.p["columnSpan"].(int)
	if !ok1 || !ok2 {
		return 1, 1, false
	}
	return rs, cs, true
}

// headOf answers the head cell covering (r, c).
func headOf(t *tableModel, r, c int) (int, int) {
	for hr := 0; hr <= r; hr++ {
		for hc := 0; hc <= c && hc < len(t.rows[hr].cells); hc++ {
			rs, cs, set := spanOf(t.rows[hr].cells[hc])
			if set && rs > 0 && cs > 0 && hr+rs > r && hc+cs > c {
				return hr, hc
			}
		}
	}
	return r, c
}

func isEmptyContent(c []item) bool { return len(c) == 1 && c[0].isNewline() }

// mergeTableCells merges the range into its upper-left head cell: the
// text of the other cells is appended to the head's, the head gets
// rowSpan/columnSpan and the covered cells spans of 0.
func mergeTableCells(d *document, r *docs.MergeTableCellsRequest) error {
	if r.TableRange == nil || r.TableRange.TableCellLocation == nil {
		return fmt.Errorf("The table range must be specified.")
	}
	s, start, t, end, err := findTable(d, r.TableRange.TableCellLocation.TableStartLocation)
	if err != nil {
		return err
	}
	r0, c0, r1, c1, err := tableRangeCells(t, r.TableRange)
	if err != nil {
		return err
	}
	// Every cell's head must lie inside the range (rectangular).
	for ri := r0; ri < r1; ri++ {
		for ci := c0; ci < c1; ci++ {
			hr, hc := headOf(t, ri, ci)
			rs, cs, _ := spanOf(t.rows[hr].cells[hc])
			if hr < r0 || hc < c0 || hr+rs > r1 || hc+cs > c1 {
				return fmt.Errorf("The table range is non-rectangular: it cuts a merged cell.")
			}
		}
	}
	head := &t.rows[r0].cells[c0]
	for ri := r0; ri < r1; ri++ {
		for ci := c0; ci < c1; ci++ {
			if ri == r0 && ci == c0 {
				continue
			}
			c := &t.rows[ri].cells[ci]
			if !isEmptyContent(c.content) {
				if isEmptyContent(head.content) {
					head.content = nil
				}
				head.content = append(head.content, c.content...)
				c.content = []item{newline(paraStyle{NamedStyleType: "NORMAL_TEXT"})}
			}
			var old props
			if c.x != nil {
				old = c.x.p
			}
			c.x = &attrs{p: old.with("rowSpan", 0).with("columnSpan", 0)}
		}
	}
	var old props
	if head.x != nil {
		old = head.x.p
	}
	head.x = &attrs{p: old.with("rowSpan", r1-r0).with("columnSpan", c1-c0)}
	s.replaceTable(start, end, t)
	return nil
}

// unmergeTableCells splits every merged cell in the range; the text stays
// in the head cell.
func unmergeTableCells(d *document, r *docs.UnmergeTableCellsRequest) error {
	if r.TableRange == nil || r.TableRange.TableCellLocation == nil {
		return fmt.Errorf("The table range must be specified.")
	}
	s, start, t, end, err := findTable(d, r.TableRange.TableCellLocation.TableStartLocation)
	if err != nil {
		return err
	}
	r0, c0, r1, c1, err := tableRangeCells(t, r.TableRange)
	if err != nil {
		return err
	}
	for ri := r0; ri < r1; ri++ {
		for ci := c0; ci < c1; ci++ {
			hr, hc := headOf(t, ri, ci)
			rs, cs, set := spanOf(t.rows[hr].cells[hc])
			if !set {
				continue
			}
			for a := hr; a < hr+rs; a++ {
				for b := hc; b < hc+cs; b++ {
					c := &t.rows[a].cells[b]
					if c.x != nil {
						c.x = &attrs{p: c.x.p.with("rowSpan", nil).with("columnSpan", nil)}
					}
				}
			}
		}
	}
	s.replaceTable(start, end, t)
	return nil
}

// head is a merged cell: its position and spans.
type head struct{ r, c, rs, cs int }

// heads answers the table's merged head cells.
func (t *tableModel) heads() []head {
	var hs []head
	for r := range t.rows {
		for c := range t.rows[r].cells {
			if rs, cs, set := spanOf(t.rows[r].cells[c]); set && rs > 0 && cs > 0 {
				hs = append(hs, head{r, c, rs, cs})
			}
		}
	}
	return hs
}

// setSpans rewrites every cell's spans from hs (clamped to the table): a
// head gets its spans, the cells it covers spans of 0, the others none.
func (t *tableModel) setSpans(hs []head) {
	for r := range t.rows {
		for c := range t.rows[r].cells {
			if x := t.rows[r].cells[c].x; x != nil && (x.p["rowSpan"] != nil || x.p["columnSpan"] != nil) {
				t.rows[r].cells[c].x = &attrs{p: x.p.with("rowSpan", nil).with("columnSpan", nil)}
			}
		}
	}
	set := func(r, c, rs, cs int) {
		cell := &t.rows[r].cells[c]
		var old props
		if cell.x != nil {
			old = cell.x.p
		}
		cell.x = &attrs{p: old.with("rowSpan", rs).with("columnSpan", cs)}
	}
	for _, h := range hs {
		if h.r < 0 || h.c < 0 || h.r >= len(t.rows) || h.c >= t.cols() || h.rs < 1 || h.cs < 1 {
			continue
		}
		h.rs, h.cs = min(h.rs, len(t.rows)-h.r), min(h.cs, t.cols()-h.c)
		for r := h.r; r < h.r+h.rs; r++ {
			for c := h.c; c < h.c+h.cs; c++ {
				set(r, c, 0, 0)
			}
		}
		set(h.r, h.c, h.rs, h.cs)
	}
}

// shiftHeads moves merged cells for a row (rows) or column inserted at at
// (delta 1) or deleted at at (delta -1): a merge the change falls inside
// grows or shrinks; a merge whose head is deleted is dropped.
func shiftHeads(hs []head, rows bool, at, delta int) []head {
	out := hs[:0]
	for _, h := range hs {
		pos, span := &h.c, &h.cs
		if rows {
			pos, span = &h.r, &h.rs
		}
		switch {
		case delta < 0 && *pos == at:
			continue
		case *pos >= at:
			*pos += delta
		case *pos+*span > at:
			*span += delta
		}
		out = append(out, h)
	}
	return out
}
