package docmd

import (
	"fmt"

	docs "google.golang.org/api/docs/v1"
)

// Limits of a document Check accepts. Google Docs nests tabs three levels
// deep, lists nine and tables a few; a deeper document is not one Google
// answers. The table depth also bounds the work of re-encoding a document
// (GetDocumentById, provider_api_json): encoding/json compacts the output
// of each nested marshaler again, once per level.
const (
	// MaxTableDepth bounds tables nested in table cells.
	MaxTableDepth = 16
	// MaxTabDepth bounds child tabs.
	MaxTabDepth = 16
	// MaxListLevels is the number of nesting levels of a list (0 to 8).
	MaxListLevels = 9
)

// Check verifies what Render and the toolkit take from a documents.get
// answer before anything is sized, sliced or looped over by it: in every
// segment each structural element, table row, cell and paragraph element
// has 0 ≤ startIndex ≤ endIndex ≤ a bound derived from the segment's own
// content (its text's UTF-16 length plus one unit per element, which is
// at least every true index); tables declare at most the rows and columns
// they hold and merge cells within them; bullets and lists stay within
// nine levels; tables and tabs nest at most MaxTableDepth and MaxTabDepth.
// It answers an error wrapping ErrInvalidDocument naming the first
// violation.
func Check(doc *docs.Document) error {
	if doc == nil {
		return ErrInvalidDocument
	}
	c := checker{}
	if err := c.segments("", doc.Body, doc.Headers, doc.Footers, doc.Footnotes, doc.Lists); err != nil {
		return err
	}
	return c.tabs(doc.Tabs, 0)
}

type checker struct{}

func invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalidDocument}, args...)...)
}

func (c checker) tabs(tabs []*docs.Tab, depth int) error {
	if len(tabs) > 0 && depth >= MaxTabDepth {
		return invalidf("tabs nested deeper than %d", MaxTabDepth)
	}
	for _, t := range tabs {
		if t == nil {
			continue
		}
		if dt := t.DocumentTab; dt != nil {
			id := ""
			if t.TabProperties != nil {
				id = t.TabProperties.TabId
			}
			if err := c.segments("tab "+quoteValue(id)+" ", dt.Body, dt.Headers, dt.Footers, dt.Footnotes, dt.Lists); err != nil {
				return err
			}
		}
		if err := c.tabs(t.ChildTabs, depth+1); err != nil {
			return err
		}
	}
	return nil
}

func (c checker) segments(where string, body *docs.Body, headers map[string]docs.Header, footers map[string]docs.Footer,
	footnotes map[string]docs.Footnote, lists map[string]docs.List) error {
	for id, l := range lists {
		if l.ListProperties != nil && len(l.ListProperties.NestingLevels) > MaxListLevels {
			return invalidf("%slist %s has %d nesting levels (at most %d)", where, quoteValue(id), len(l.ListProperties.NestingLevels), MaxListLevels)
		}
	}
	if body != nil {
		if err := c.segment(where+"body", body.Content); err != nil {
			return err
		}
	}
	for _, id := range sortedKeys(headers) {
		if err := c.segment(where+"header "+quoteValue(id), headers[id].Content); err != nil {
			return err
		}
	}
	for _, id := range sortedKeys(footers) {
		if err := c.segment(where+"footer "+quoteValue(id), footers[id].Content); err != nil {
			return err
		}
	}
	for _, id := range sortedKeys(footnotes) {
		if err := c.segment(where+"footnote "+quoteValue(id), footnotes[id].Content); err != nil {
			return err
		}
	}
	return nil
}

// segment checks one index space.
func (c checker) segment(where string, content []*docs.StructuralElement) error {
	limit, err := bound(content, 0)
	if err != nil {
		return invalidf("%s: %v", where, err)
	}
	if err := checkRanges(content, limit+1); err != nil {
		return invalidf("%s: %v", where, err)
	}
	return nil
}

// bound answers an upper bound of the indices of content: the UTF-16
// length of its text plus one unit per structural element, row, cell,
// paragraph element and table end. It refuses tables nested deeper than
// MaxTableDepth (before recursing further).
func bound(content []*docs.StructuralElement, depth int) (int64, error) {
	var n int64
	for _, se := range content {
		if se == nil {
			continue
		}
		n++
		switch {
		case se.Paragraph != nil:
			for _, e := range se.Paragraph.Elements {
				if e == nil {
					continue
				}
				n++
				if e.TextRun != nil {
					n += utf16Len(e.TextRun.Content)
				}
			}
		case se.Table != nil:
			if depth >= MaxTableDepth {
				return 0, fmt.Errorf("tables nested deeper than %d", MaxTableDepth)
			}
			n++ // the table's end
			for _, row := range se.Table.TableRows {
				if row == nil {
					continue
				}
				n++
				for _, cell := range row.TableCells {
					if cell == nil {
						continue
					}
					n++
					m, err := bound(cell.Content, depth+1)
					if err != nil {
						return 0, err
					}
					n += m
				}
			}
		case se.TableOfContents != nil:
			m, err := bound(se.TableOfContents.Content, depth)
			if err != nil {
				return 0, err
			}
			n += m
		}
	}
	return n, nil
}

func checkRange(what string, start, end, limit int64) error {
	if start < 0 || end < start || end > limit {
		return fmt.Errorf("%s has the range %d-%d (want 0 ≤ start ≤ end ≤ %d)", what, start, end, limit)
	}
	return nil
}

// checkRanges checks the ranges and the declared sizes of content.
func checkRanges(content []*docs.StructuralElement, limit int64) error {
	for _, se := range content {
		if se == nil {
			continue
		}
		if err := checkRange("an element", se.StartIndex, se.EndIndex, limit); err != nil {
			return err
		}
		switch {
		case se.Paragraph != nil:
			p := se.Paragraph
			if p.Bullet != nil && (p.Bullet.NestingLevel < 0 || p.Bullet.NestingLevel >= MaxListLevels) {
				return fmt.Errorf("a bullet at %d has the nesting level %d (want 0 to %d)", se.StartIndex, p.Bullet.NestingLevel, MaxListLevels-1)
			}
			for _, e := range p.Elements {
				if e == nil {
					continue
				}
				if err := checkRange("a paragraph element", e.StartIndex, e.EndIndex, limit); err != nil {
					return err
				}
			}
		case se.Table != nil:
			if err := checkTable(se.Table, limit); err != nil {
				return err
			}
		case se.TableOfContents != nil:
			if err := checkRanges(se.TableOfContents.Content, limit); err != nil {
				return err
			}
		}
	}
	return nil
}

func checkTable(t *docs.Table, limit int64) error {
	rows, cols := int64(len(t.TableRows)), int64(0)
	for _, row := range t.TableRows {
		if row != nil {
			cols = max(cols, int64(len(row.TableCells)))
		}
	}
	if t.Rows < 0 || t.Rows > rows || t.Columns < 0 || t.Columns > cols {
		return fmt.Errorf("a table declares %d rows and %d columns but holds %d and %d", t.Rows, t.Columns, rows, cols)
	}
	// Merged areas do not overlap: together they cover at most the table.
	var merged int64
	for _, row := range t.TableRows {
		if row == nil {
			continue
		}
		if err := checkRange("a table row", row.StartIndex, row.EndIndex, limit); err != nil {
			return err
		}
		for _, cell := range row.TableCells {
			if cell == nil {
				continue
			}
			if err := checkRange("a table cell", cell.StartIndex, cell.EndIndex, limit); err != nil {
				return err
			}
			if st := cell.TableCellStyle; st != nil && (st.RowSpan < 0 || st.RowSpan > rows || st.ColumnSpan < 0 || st.ColumnSpan > cols) {
				return fmt.Errorf("a table cell spans %d rows and %d columns of %d and %d", st.RowSpan, st.ColumnSpan, rows, cols)
			} else if st != nil && (st.RowSpan > 1 || st.ColumnSpan > 1) {
				if merged += max(st.RowSpan, 1) * max(st.ColumnSpan, 1); merged > rows*cols {
					return fmt.Errorf("the merged cells of a table cover more than its %d cells", rows*cols)
				}
			}
			if err := checkRanges(cell.Content, limit); err != nil {
				return err
			}
		}
	}
	return nil
}
