package google

import "fmt"

// checkSegment verifies the structure of a segment: a body starts with its
// section break and nothing else holds one; the segment ends with a
// newline; every table follows a newline, is followed by a paragraph, has
// rows of the same number of cells, and every cell holds at least one
// paragraph ending with a newline.
func checkSegment(s *segment, body bool) error {
	it := s.items
	if len(it) == 0 {
		return fmt.Errorf("empty segment")
	}
	if body != (it[0].k == kSectionBreak) {
		return fmt.Errorf("index 0: section break misplaced")
	}
	if !it[len(it)-1].isNewline() {
		return fmt.Errorf("the segment does not end with a newline")
	}
	i := 0
	if body {
		i = 1
	}
	_, err := checkContent(it, i, false, body)
	return err
}

// checkContent checks structural elements from i until the end (top level)
// or a cell/row/table boundary (inCell); it answers where it stopped.
func checkContent(it []item, i int, inCell, body bool) (int, error) {
	start := i
	for i < len(it) {
		switch k := it[i].k; {
		case k == kSectionBreak:
			// A body may hold more section breaks (insertSectionBreak): at
			// the top level, after a paragraph, followed by one.
			if !body || inCell || !it[i-1].isNewline() || i+1 >= len(it) || !it[i+1].k.inline() {
				return i, fmt.Errorf("index %d: a misplaced section break", i)
			}
			i++
		case k.inline():
			i++
		case k == kTableStart:
			if i == 0 || !it[i-1].isNewline() && it[i-1].k != kSectionBreak && it[i-1].k != kTableEnd {
				return i, fmt.Errorf("index %d: a table inside a paragraph", i)
			}
			if it[i-1].k == kTableEnd || it[i-1].k == kSectionBreak {
				return i, fmt.Errorf("index %d: a table not preceded by a paragraph", i)
			}
			j, err := checkTable(it, i, body)
			if err != nil {
				return j, err
			}
			if j >= len(it) || !it[j].k.inline() {
				return j, fmt.Errorf("index %d: a table not followed by a paragraph", j)
			}
			i = j
		default: // row, cell, table end
			if !inCell {
				return i, fmt.Errorf("index %d: a table marker outside a table", i)
			}
			if i == start || !it[i-1].isNewline() {
				return i, fmt.Errorf("index %d: a cell not ending with a newline", i)
			}
			return i, nil
		}
	}
	if inCell {
		return i, fmt.Errorf("an unterminated table")
	}
	return i, nil
}

// checkTable checks the table starting at i and answers the index after it.
func checkTable(it []item, i int, body bool) (int, error) {
	i++ // table start
	cols := -1
	rows := 0
	for i < len(it) && it[i].k == kRowStart {
		i++
		n := 0
		for i < len(it) && it[i].k == kCellStart {
			j, err := checkContent(it, i+1, true, body)
			if err != nil {
				return j, err
			}
			i = j
			n++
		}
		if n == 0 {
			return i, fmt.Errorf("index %d: a row without cells", i)
		}
		if cols >= 0 && n != cols {
			return i, fmt.Errorf("index %d: rows of %d and %d cells", i, cols, n)
		}
		cols = n
		rows++
	}
	if rows == 0 || i >= len(it) || it[i].k != kTableEnd {
		return i, fmt.Errorf("index %d: a malformed table", i)
	}
	return i + 1, nil
}
