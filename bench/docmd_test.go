//go:build e2e

package bench

import (
	"strings"
	"testing"

	docs "google.golang.org/api/docs/v1"

	"github.com/auditrail/auditrail/toolrunner/toolkits/docs/docmd"
)

// TestDocMDBenchDocumentRoundTrip is the DocMD bench's smoke test: the
// generated bench document renders as DocMD that parses back, block for
// block, to the document's own ranges and text (the bench measures a
// renderer that is right, not just fast).
func TestDocMDBenchDocumentRoundTrip(t *testing.T) {
	doc := DocMDDocument(256 << 10)
	out, err := docmd.Render(doc, docmd.Options{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := docmd.Parse(out)
	if err != nil {
		t.Fatal(err)
	}
	type block struct {
		typ        string
		start, end int64
		text       string
	}
	var want []block
	var walk func([]*docs.StructuralElement)
	walk = func(content []*docs.StructuralElement) {
		for _, se := range content {
			switch {
			case se.SectionBreak != nil:
				want = append(want, block{"SECTION_BREAK", se.StartIndex, se.EndIndex, ""})
			case se.Paragraph != nil:
				var sb strings.Builder
				for _, e := range se.Paragraph.Elements {
					sb.WriteString(e.TextRun.Content)
				}
				typ := "PARAGRAPH"
				switch {
				case se.Paragraph.Bullet != nil:
					typ = "ORDERED" // the bench list's glyphs are DECIMAL and ALPHA
				case se.Paragraph.ParagraphStyle.NamedStyleType != "NORMAL_TEXT":
					typ = se.Paragraph.ParagraphStyle.NamedStyleType
				}
				want = append(want, block{typ, se.StartIndex, se.EndIndex, strings.TrimSuffix(sb.String(), "\n")})
			case se.Table != nil:
				want = append(want, block{"TABLE", se.StartIndex, se.EndIndex, ""})
				for _, r := range se.Table.TableRows {
					want = append(want, block{"ROW", r.StartIndex, r.EndIndex, ""})
					for _, c := range r.TableCells {
						want = append(want, block{"CELL", c.StartIndex + 1, c.EndIndex, ""})
						walk(c.Content)
					}
				}
			}
		}
	}
	walk(doc.Body.Content)
	if len(p.Sections) != 1 || len(p.Sections[0].Segments) != 1 {
		t.Fatalf("sections %+v", p.Sections)
	}
	got := p.Sections[0].Segments[0].Blocks
	if len(got) != len(want) || len(want) < 1000 {
		t.Fatalf("%d blocks, want %d (>= 1000)", len(got), len(want))
	}
	tables := 0
	for i, w := range want {
		g := got[i]
		if g.Type != w.typ || g.Start != w.start || g.End != w.end || g.Text != w.text {
			t.Fatalf("block %d = %s %d-%d %q, want %s %d-%d %q", i, g.Type, g.Start, g.End, g.Text, w.typ, w.start, w.end, w.text)
		}
		if w.typ == "TABLE" {
			tables++
		}
	}
	if tables == 0 {
		t.Fatal("the bench document has no table")
	}
	// Rendering is deterministic: a second render is byte-identical.
	again, _ := docmd.Render(doc, docmd.Options{})
	if again != out {
		t.Fatal("render is not deterministic")
	}
}
