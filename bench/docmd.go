package bench

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	docs "google.golang.org/api/docs/v1"

	"github.com/auditrail/auditrail/toolrunner/toolkits/docs/docmd"
)

// DocMDDocument generates a document of about textBytes bytes of text (≈ 2 KB per page): headings,
// styled paragraphs with emoji, bullet and numbered list items, and a 3×3 table every 100 paragraphs,
// with the API's index model (section break 0-1, tables t / t+1 per row / +1 per cell).
func DocMDDocument(textBytes int) *docs.Document {
	i := int64(1)
	content := []*docs.StructuralElement{{EndIndex: 1, SectionBreak: &docs.SectionBreak{}}}
	para := func(text, style string, bullet *docs.Bullet, bold bool) *docs.StructuralElement {
		text += "😀\n"
		n := int64(len(text)) - 4 + 2 // ASCII text + one emoji: 4 bytes, 2 UTF-16 units
		se := &docs.StructuralElement{StartIndex: i, EndIndex: i + n, Paragraph: &docs.Paragraph{
			Elements: []*docs.ParagraphElement{{StartIndex: i, EndIndex: i + n, TextRun: &docs.TextRun{
				Content: text, TextStyle: &docs.TextStyle{Bold: bold}}}},
			ParagraphStyle: &docs.ParagraphStyle{NamedStyleType: style}, Bullet: bullet}}
		i += n
		return se
	}
	sentence := strings.Repeat("Lorem ipsum dolor sit amet, consectetur adipiscing elit. ", 2)
	total := 0
	for p := 0; total < textBytes; p++ {
		switch {
		case p%100 == 99:
			ts := i
			i++
			t := &docs.Table{Rows: 3, Columns: 3}
			for r := 0; r < 3; r++ {
				row := &docs.TableRow{StartIndex: i}
				i++
				for c := 0; c < 3; c++ {
					cell := &docs.TableCell{StartIndex: i}
					i++
					cell.Content = []*docs.StructuralElement{para(fmt.Sprintf("cell %d,%d ", r, c), "NORMAL_TEXT", nil, false)}
					cell.EndIndex = i
					row.TableCells = append(row.TableCells, cell)
				}
				row.EndIndex = i
				t.TableRows = append(t.TableRows, row)
			}
			content = append(content, &docs.StructuralElement{StartIndex: ts, EndIndex: i, Table: t})
		case p%50 == 0:
			content = append(content, para(fmt.Sprintf("Section %d ", p), "HEADING_2", nil, false))
		case p%10 < 3:
			content = append(content, para(sentence[:60], "NORMAL_TEXT", &docs.Bullet{ListId: "kix.num", NestingLevel: int64(p % 2)}, false))
		default:
			content = append(content, para(sentence, "NORMAL_TEXT", nil, p%7 == 0))
		}
		total = int(i)
	}
	return &docs.Document{DocumentId: "bench", Title: "Bench", RevisionId: "rev1", Body: &docs.Body{Content: content},
		Lists: map[string]docs.List{"kix.num": {ListProperties: &docs.ListProperties{NestingLevels: []*docs.NestingLevel{
			{GlyphType: "DECIMAL", GlyphFormat: "%0."}, {GlyphType: "ALPHA", GlyphFormat: "%1."}}}}}}
}

// DocMD measures rendering a ~500-page (≈ 1 MB of text) document as DocMD against decoding the
// same document's JSON into docs.Document with encoding/json. Goal: ≤ 5× the reference (and ≤ 30 ms).
func DocMD() (Figure, error) {
	doc := DocMDDocument(1 << 20)
	raw, err := json.Marshal(doc)
	if err != nil {
		return Figure{}, fmt.Errorf("docmd bench: %w", err)
	}
	if _, err := docmd.Render(doc, docmd.Options{}); err != nil {
		return Figure{}, fmt.Errorf("docmd bench: %w", err)
	}
	ours := testing.Benchmark(func(b *testing.B) {
		for b.Loop() {
			if _, err := docmd.Render(doc, docmd.Options{}); err != nil {
				b.Fatal(err)
			}
		}
	})
	ref := testing.Benchmark(func(b *testing.B) {
		for b.Loop() {
			var d docs.Document
			if err := json.Unmarshal(raw, &d); err != nil {
				b.Fatal(err)
			}
		}
	})
	ms := func(r testing.BenchmarkResult) float64 { return float64(r.NsPerOp()) / 1e6 }
	return Figure{Name: fmt.Sprintf("DocMD render of a ~500-page document (%d KB JSON)", len(raw)>>10),
		Value: ms(ours), Unit: "ms", Reference: ms(ref), RefName: "encoding/json decode of the same document",
		Goal: 5, Lower: true, Max: 30}, nil
}
