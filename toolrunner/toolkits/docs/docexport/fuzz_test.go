package docexport

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	docs "google.golang.org/api/docs/v1"

	"github.com/auditrail/auditrail/toolrunner/toolkits/docs/docmd/docmdtest"
)

// hostileSeeds are documents.get answers no Google document has, as a
// tenant-chosen endpoint may send them.
var hostileSeeds = []string{
	`{"body":{"content":[{"table":{"rows":68719476736,"columns":68719476736,"tableRows":[{"tableCells":[{}]}]}}]}}`,
	`{"body":{"content":[{"table":{"columns":-500,"tableRows":[{"tableCells":[{"tableCellStyle":{"rowSpan":68719476736,"columnSpan":-500}}]}]}}]}}`,
	`{"body":{"content":[{"table":{"tableRows":[{"tableCells":[{},{},{},{},{},{},{},{}]},{},{},{},{},{},{},{},{},{},{},{}]}}]}}`,
	`{"body":{"content":[{"paragraph":{"bullet":{"listId":"l","nestingLevel":68719476736},"elements":[{"textRun":{"content":"a\u000bb"}}]}},{"paragraph":{"bullet":{"listId":"l","nestingLevel":-500},"elements":[{"textRun":{"content":"c"}}]}}]},"lists":{"l":{"listProperties":{"nestingLevels":[{"glyphType":"DECIMAL"}]}}}}`,
	`{"body":{"content":[{"paragraph":{"elements":[{"footnoteReference":{"footnoteId":"f","footnoteNumber":"1"}},{"footnoteReference":{"footnoteId":"f"}}]}}]},"footnotes":{"f":{"content":[{"paragraph":{"elements":[{"footnoteReference":{"footnoteId":"f"}},{"textRun":{"content":"note"}}]}}]}}}`,
	`{"tabs":[{"documentTab":{"body":{"content":[{"paragraph":{"paragraphStyle":{"namedStyleType":"HEADING_9"},"elements":[{"textRun":{"content":"#1. <b>&","textStyle":{"link":{"url":"javascript:alert(1)"}}}}]}}]}}}]}`,
}

// FuzzExportMarkdown and FuzzExportHTML: documents come from a
// tenant-chosen endpoint. Whatever it sends — the input as JSON, or else as
// the bytes of a docmdtest.Hostile document — the exporters never panic
// and answer in proportion to the document, never to a number in it.
func FuzzExportMarkdown(f *testing.F) { fuzzExport(f, Markdown) }

func FuzzExportHTML(f *testing.F) { fuzzExport(f, HTML) }

func fuzzExport(f *testing.F, export func(*docs.Document) string) {
	files, _ := filepath.Glob(filepath.Join("testdata", "*.json"))
	more, _ := filepath.Glob(filepath.Join("..", "docmd", "testdata", "*.json"))
	for _, p := range append(files, more...) {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	for _, s := range hostileSeeds {
		f.Add([]byte(s))
	}
	f.Add([]byte{0, 3, 0, 0, 0, 5, 4, 2, 1, 3, 7, 2, 9, 9, 9, 1})
	f.Add([]byte{0, 1, 1, 1, 2, 1, 3, 200, 201, 202, 203, 4, 4, 1, 2, 3, 2, 1, 0, 3, 165, 170})
	f.Fuzz(func(t *testing.T, raw []byte) {
		d, size := &docs.Document{}, len(raw)
		if json.Unmarshal(raw, d) != nil {
			d = docmdtest.Hostile(raw)
			size = docmdtest.Size(d)
		}
		out := export(d)
		if limit := 64*size + 4096; len(out) > limit {
			t.Fatalf("%d bytes of JSON exported as %d bytes", size, len(out))
		}
	})
}
