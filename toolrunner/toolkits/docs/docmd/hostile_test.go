package docmd

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	docs "google.golang.org/api/docs/v1"

	"github.com/auditrail/auditrail/toolrunner/toolkits/docs/docmd/docmdtest"
)

// hostileSeeds are generator inputs (not JSON) for docmdtest.Hostile.
var hostileSeeds = [][]byte{
	{0, 3, 0, 0, 0, 5, 4, 2, 1, 3, 7, 2, 9, 9, 9, 1},
	{0, 1, 1, 1, 2, 1, 3, 200, 201, 202, 203, 4, 4, 1, 2, 3, 2, 1, 0, 3, 165, 170},
	{1, 2, 3, 2, 5, 1, 1, 4, 4, 4, 2, 0, 0, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1},
	{0, 5, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1},
}

// hostileDocs are documents.get answers no Google document has, as a
// tenant-chosen endpoint may send them: each must be refused by Check and
// Render with ErrInvalidDocument, without a panic or an allocation sized
// by the number it holds.
var hostileDocs = map[string]string{
	"huge end index":     `{"body":{"content":[{"startIndex":1,"endIndex":68719476736,"paragraph":{"elements":[{"startIndex":1,"endIndex":68719476736,"textRun":{"content":"x\n"}}]}}]}}`,
	"negative end index": `{"body":{"content":[{"startIndex":1,"endIndex":-500,"paragraph":{"elements":[{"startIndex":1,"endIndex":2,"textRun":{"content":"x\n"}}]}}]}}`,
	"start after end":    `{"body":{"content":[{"startIndex":1,"endIndex":3,"paragraph":{"elements":[{"startIndex":3,"endIndex":1,"textRun":{"content":"xy\n"}}]}}]}}`,
	"negative start":     `{"body":{"content":[{"startIndex":-5,"endIndex":0,"sectionBreak":{}}]}}`,
	"huge table":         `{"body":{"content":[{"startIndex":1,"endIndex":9,"table":{"rows":68719476736,"columns":68719476736,"tableRows":[{"startIndex":2,"endIndex":8,"tableCells":[{"startIndex":3,"endIndex":8}]}]}}]}}`,
	"huge cell span":     `{"body":{"content":[{"startIndex":1,"endIndex":9,"table":{"rows":1,"columns":1,"tableRows":[{"startIndex":2,"endIndex":8,"tableCells":[{"startIndex":3,"endIndex":8,"tableCellStyle":{"rowSpan":68719476736,"columnSpan":68719476736}}]}]}}]}}`,
	"overlapping spans":  `{"body":{"content":[{"table":{"rows":2,"columns":2,"tableRows":[{"tableCells":[{"tableCellStyle":{"rowSpan":2,"columnSpan":2}},{"tableCellStyle":{"rowSpan":2,"columnSpan":2}}]},{"tableCells":[{},{}]}]}}]}}`,
	"bullet level":       `{"body":{"content":[{"startIndex":1,"endIndex":3,"paragraph":{"bullet":{"listId":"l","nestingLevel":68719476736},"elements":[{"startIndex":1,"endIndex":3,"textRun":{"content":"x\n"}}]}}]},"lists":{"l":{"listProperties":{"nestingLevels":[{}]}}}}`,
	"negative bullet":    `{"body":{"content":[{"startIndex":1,"endIndex":3,"paragraph":{"bullet":{"listId":"l","nestingLevel":-500},"elements":[{"startIndex":1,"endIndex":3,"textRun":{"content":"x\n"}}]}}]}}`,
	"list levels":        `{"body":{"content":[]},"lists":{"l":{"listProperties":{"nestingLevels":[{},{},{},{},{},{},{},{},{},{},{}]}}}}`,
	"header index":       `{"headers":{"h":{"content":[{"startIndex":0,"endIndex":68719476736,"paragraph":{}}]}}}`,
	"tab index":          `{"tabs":[{"tabProperties":{"tabId":"t"},"documentTab":{"body":{"content":[{"startIndex":1,"endIndex":-500,"paragraph":{}}]}}}]}`,
	"nested tables":      nestedTables(MaxTableDepth + 1),
	"nested tabs":        nestedTabs(MaxTabDepth + 1),
}

// nestedTables is a body of tables nested n deep, one cell each.
func nestedTables(n int) string {
	s := `{"paragraph":{"elements":[{"textRun":{"content":"deep\n"}}]}}`
	for range n {
		s = `{"table":{"rows":1,"columns":1,"tableRows":[{"tableCells":[{"content":[` + s + `]}]}]}}`
	}
	return `{"body":{"content":[` + s + `]}}`
}

func nestedTabs(n int) string {
	s := `{"tabProperties":{"tabId":"leaf"}}`
	for range n {
		s = `{"tabProperties":{"tabId":"t"},"childTabs":[` + s + `]}`
	}
	return `{"tabs":[` + s + `]}`
}

func TestCheckRefusesHostileDocuments(t *testing.T) {
	for name, raw := range hostileDocs {
		t.Run(name, func(t *testing.T) {
			var d docs.Document
			if err := json.Unmarshal([]byte(raw), &d); err != nil {
				t.Fatal(err)
			}
			if err := Check(&d); !errors.Is(err, ErrInvalidDocument) {
				t.Fatalf("Check: %v, want ErrInvalidDocument", err)
			}
			if out, err := Render(&d, Options{}); !errors.Is(err, ErrInvalidDocument) || out != "" {
				t.Fatalf("Render: %q, %v, want ErrInvalidDocument", out, err)
			}
		})
	}
}

// TestCheckAcceptsRealDocuments: every fixture (Google's and the
// emulator's answers) and the deepest nesting allowed pass.
func TestCheckAcceptsRealDocuments(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join("testdata", "*.json"))
	if len(files) == 0 {
		t.Fatal("no fixtures")
	}
	for _, f := range files {
		d := loadDoc(t, strings.TrimSuffix(filepath.Base(f), ".json"))
		if err := Check(d); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
	for name, raw := range map[string]string{"tables": nestedTables(MaxTableDepth), "tabs": nestedTabs(MaxTabDepth - 1)} {
		var d docs.Document
		if err := json.Unmarshal([]byte(raw), &d); err != nil {
			t.Fatal(err)
		}
		if _, err := Render(&d, Options{}); err != nil {
			t.Errorf("nested %s: %v", name, err)
		}
	}
}

// FuzzRenderDocMD: documents.get answers come from a tenant-chosen
// endpoint. Whatever it sends — the input as JSON, or else as the bytes of
// a docmdtest.Hostile document (edge indices, sizes, spans, levels, depths)
// — Render never panics, refuses what Check refuses, and writes an answer
// proportional to the document, never to a number in it.
func FuzzRenderDocMD(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "*.json"))
	for _, p := range files {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	for _, raw := range hostileDocs {
		f.Add([]byte(raw))
	}
	f.Add([]byte(`{"tabs":[{"tabProperties":{"tabId":"a"},"documentTab":{"body":{"content":[{"startIndex":0,"endIndex":1,"sectionBreak":{}},{"startIndex":1,"endIndex":2,"paragraph":{"elements":[{"startIndex":1,"endIndex":2,"textRun":{"content":"\n"}}]}}]}}}]}`))
	for _, seed := range hostileSeeds {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		d, size := &docs.Document{}, len(raw)
		if json.Unmarshal(raw, d) != nil {
			d = docmdtest.Hostile(raw)
			size = docmdtest.Size(d)
		}
		out, err := Render(d, Options{})
		if cerr := Check(d); (cerr == nil) != (err == nil) {
			t.Fatalf("Check: %v, Render: %v", cerr, err)
		}
		if err != nil {
			if !errors.Is(err, ErrInvalidDocument) {
				t.Fatalf("Render: %v", err)
			}
			return
		}
		if limit := 64*size + 4096; len(out) > limit {
			t.Fatalf("%d bytes of JSON rendered as %d bytes", size, len(out))
		}
	})
}
