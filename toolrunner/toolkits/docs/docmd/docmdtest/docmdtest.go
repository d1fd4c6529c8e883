// Package docmdtest is the tests' oracle for DocMD ranges: the blocks a
// segment must have, derived from the Docs API content the way the API
// defines it, independently of the renderer (the docmd tests and the
// Google emulator's tests check the renderer and the emulator against it).
package docmdtest

import (
	"fmt"
	"strings"

	docs "google.golang.org/api/docs/v1"
)

// Block is a block as the oracle sees it: Type is SECTION_BREAK, TABLE,
// ROW, CELL, or P for any paragraph.
type Block struct {
	Type       string
	Start, End int64
	Text       string
}

// Expected lists the blocks of content: one per section break, paragraph
// (its text runs without the closing newline), table, row and cell (which
// starts after its marker), cells followed by their own content.
func Expected(content []*docs.StructuralElement) []Block {
	var out []Block
	for _, se := range content {
		switch {
		case se.SectionBreak != nil:
			out = append(out, Block{"SECTION_BREAK", se.StartIndex, se.EndIndex, ""})
		case se.Paragraph != nil:
			var sb strings.Builder
			for _, e := range se.Paragraph.Elements {
				if e.TextRun != nil {
					sb.WriteString(e.TextRun.Content)
				}
			}
			out = append(out, Block{"P", se.StartIndex, se.EndIndex, strings.TrimSuffix(sb.String(), "\n")})
		case se.Table != nil:
			out = append(out, Block{"TABLE", se.StartIndex, se.EndIndex, ""})
			for _, r := range se.Table.TableRows {
				out = append(out, Block{"ROW", r.StartIndex, r.EndIndex, ""})
				for _, c := range r.TableCells {
					out = append(out, Block{"CELL", c.StartIndex + 1, c.EndIndex, ""})
					out = append(out, Expected(c.Content)...)
				}
			}
		}
	}
	return out
}

// Compare reports the first difference between the blocks rendered and
// those expected.
func Compare(got, want []Block) error {
	if len(got) != len(want) {
		return fmt.Errorf("%d blocks, want %d", len(got), len(want))
	}
	for i, w := range want {
		if g := got[i]; g != w {
			return fmt.Errorf("block %d = %s %d-%d %q, want %s %d-%d %q", i, g.Type, g.Start, g.End, g.Text, w.Type, w.Start, w.End, w.Text)
		}
	}
	return nil
}
