package docs

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/auditrail/auditrail/toolrunner"
	"github.com/auditrail/auditrail/toolrunner/toolkits/docs/docmd"
)

func js(t *testing.T, s string) []any {
	t.Helper()
	var v []any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("%s: %v", s, err)
	}
	return v
}

const okText = `{"insertText":{"text":"x","location":{"index":1}}}`

// TestValidateRequests: each rule of seeds/002's EditDocument table, the
// error naming the request's index and the field.
func TestValidateRequests(t *testing.T) {
	tests := []struct {
		name, reqs, want string
	}{
		{"valid mix", `[` + okText + `,{"updateTextStyle":{"range":{"startIndex":1,"endIndex":2},"textStyle":{"bold":false,"fontSize":{"magnitude":12,"unit":"PT"},"foregroundColor":{"color":{"rgbColor":{"red":1}}}},"fields":"bold,fontSize"}},` +
			`{"replaceAllText":{"containsText":{"text":"a","matchCase":true},"replaceText":"b"}},{"insertTableRow":{"tableCellLocation":{"tableStartLocation":{"index":5},"rowIndex":0,"columnIndex":0},"insertBelow":false}},` +
			`{"updateTableColumnProperties":{"tableStartLocation":{"index":5},"columnIndices":[0,1],"tableColumnProperties":{"widthType":"FIXED_WIDTH","width":{"magnitude":100,"unit":"PT"}},"fields":"*"}},` +
			`{"insertText":{"text":"y","endOfSegmentLocation":{"tabId":"t.0"}}},{"deleteTab":{"tabId":"t.1"}}]`, ""},
		{"not an object", `["insertText"]`, "requests[0]: want an object with one key, the request type"},
		{"no key", `[` + okText + `,{}]`, "requests[1]: want exactly one key, the request type; got 0"},
		{"two keys", `[{"insertText":{"text":"x","location":{"index":1}},"deleteContentRange":{"range":{"startIndex":1,"endIndex":2}}}]`,
			"requests[0]: want exactly one key, the request type; got 2 (deleteContentRange, insertText)"},
		{"unknown type", `[{"insertTextt":{}}]`, `requests[0]: unknown request type "insertTextt"`},
		{"type outside the seed's table", `[{"acceptSuggestion":{"suggestionId":"s"}}]`, `requests[0]: unknown request type "acceptSuggestion"`},
		{"body not an object", `[{"deleteContentRange":[1,2]}]`, "requests[0].deleteContentRange: want an object, got an array"},
		{"required fields", `[` + okText + `,` + okText + `,{"updateTextStyle":{"range":{"startIndex":1,"endIndex":2},"textStyle":{"bold":true}}}]`,
			"requests[2].updateTextStyle: fields is required"},
		{"required range", `[{"deleteContentRange":{}}]`, "requests[0].deleteContentRange: range is required"},
		{"required preset", `[{"createParagraphBullets":{"range":{"startIndex":1,"endIndex":2}}}]`, "requests[0].createParagraphBullets: bulletPreset is required"},
		{"required boolean", `[{"insertTableColumn":{"tableCellLocation":{"tableStartLocation":{"index":2},"rowIndex":0,"columnIndex":0}}}]`,
			"requests[0].insertTableColumn: insertRight is required"},
		{"required count", `[{"pinTableHeaderRows":{"tableStartLocation":{"index":2}}}]`, "requests[0].pinTableHeaderRows: pinnedHeaderRowsCount is required"},
		{"no location", `[{"insertText":{"text":"x"}}]`, "requests[0].insertText: exactly one of location and endOfSegmentLocation is required"},
		{"both locations", `[{"insertPageBreak":{"location":{"index":1},"endOfSegmentLocation":{}}}]`,
			"requests[0].insertPageBreak: exactly one of location and endOfSegmentLocation is required"},
		{"index as a string", `[{"insertText":{"text":"x","location":{"index":"1"}}}]`, "requests[0].insertText.location.index: want an integer, got a string"},
		{"fractional index", `[{"insertText":{"text":"x","location":{"index":1.5}}}]`, "requests[0].insertText.location.index: want an integer, got a number"},
		{"text as a number", `[{"insertText":{"text":5,"location":{"index":1}}}]`, "requests[0].insertText.text: want a string, got a number"},
		{"boolean as a string", `[{"updateTextStyle":{"range":{"startIndex":1,"endIndex":2},"textStyle":{"bold":"false"},"fields":"bold"}}]`,
			"requests[0].updateTextStyle.textStyle.bold: want a boolean, got a string"},
		{"unknown nested field", `[{"updateTextStyle":{"range":{"startIndex":1,"endIndex":2},"textStyle":{"bolt":true},"fields":"bold"}}]`,
			`requests[0].updateTextStyle.textStyle: unknown field "bolt"`},
		{"dimension needs its unit", `[{"updateTextStyle":{"range":{"startIndex":1,"endIndex":2},"textStyle":{"fontSize":{"magnitude":12}},"fields":"fontSize"}}]`,
			"requests[0].updateTextStyle.textStyle.fontSize: unit is required"},
		{"cell location complete", `[{"deleteTableRow":{"tableCellLocation":{"tableStartLocation":{"index":2},"columnIndex":0}}}]`,
			"requests[0].deleteTableRow.tableCellLocation: rowIndex is required"},
		{"table range complete", `[{"mergeTableCells":{"tableRange":{"tableCellLocation":{"tableStartLocation":{"index":2},"rowIndex":0,"columnIndex":0},"rowSpan":2}}}]`,
			"requests[0].mergeTableCells.tableRange: columnSpan is required"},
		{"array element shape", `[{"updateTableRowStyle":{"tableStartLocation":{"index":2},"rowIndices":[0,"1"],"tableRowStyle":{},"fields":"*"}}]`,
			"requests[0].updateTableRowStyle.rowIndices[1]: want an integer, got a string"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := validateRequests(js(t, tc.reqs))
			if tc.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			te := toolrunner.AsError(err)
			if err == nil || te.Kind != toolrunner.KindInputInvalid || !strings.HasPrefix(te.Message, tc.want) {
				t.Fatalf("got %v, want %q", err, tc.want)
			}
		})
	}
}

func revisionOf(t *testing.T, md string) string {
	t.Helper()
	for _, l := range strings.Split(md, "\n") {
		if r, ok := strings.CutPrefix(l, "@revision_id "); ok {
			return r
		}
	}
	t.Fatalf("no @revision_id in\n%s", md)
	return ""
}

func TestEditDocument(t *testing.T) {
	e := newEnv(t)
	id := obj(t, e.ok(t, "CreateDocumentFromText", map[string]any{"title": "Edit", "text_content": "Hello world", "input_format": "plain"}))["documentId"].(string)
	before := e.sent.last(":batchUpdate")

	// Without requests it only reads.
	read := obj(t, e.ok(t, "EditDocument", map[string]any{"document_id": id}))
	if read["edits_applied"] != 0 || read["document_id"] != id || !strings.Contains(read["docmd"].(string), "Hello world") || e.sent.last(":batchUpdate") != before {
		t.Fatalf("read-only edit: %v", read)
	}
	rev := revisionOf(t, read["docmd"].(string))

	// An invalid request is refused before anything is sent.
	res := e.run(t, "EditDocument", map[string]any{"document_id": id, "requests": js(t, `[`+okText+`,{"updateTextStyle":{"range":{"startIndex":1,"endIndex":6},"textStyle":{"bold":true}}}]`)})
	if res.Success || res.Error.Kind != toolrunner.KindInputInvalid || res.Error.Message != "requests[1].updateTextStyle: fields is required" {
		t.Fatalf("invalid request: %+v", res.Error)
	}
	if e.sent.last(":batchUpdate") != before {
		t.Fatal("an invalid batch reached Google")
	}

	// Bold, then bold:false under the mask: the explicit false is sent as
	// given and resets the style.
	bold := obj(t, e.ok(t, "EditDocument", map[string]any{"document_id": id, "revision_id": rev, "requests": js(t,
		`[{"updateTextStyle":{"range":{"startIndex":1,"endIndex":6},"textStyle":{"bold":true},"fields":"bold"}},{"insertText":{"text":"!","location":{"index":12}}}]`)}))
	if bold["edits_applied"] != 2 || !strings.Contains(bold["docmd"].(string), "styles=bold:1-6]") || !strings.Contains(bold["docmd"].(string), "Hello world!") {
		t.Fatalf("bold: %v", bold)
	}
	unbold := obj(t, e.ok(t, "EditDocument", map[string]any{"document_id": id, "requests": js(t,
		`[{"updateTextStyle":{"range":{"startIndex":1,"endIndex":6},"textStyle":{"bold":false},"fields":"bold"}}]`)}))
	if strings.Contains(unbold["docmd"].(string), "bold") {
		t.Errorf("bold:false did not reset:\n%s", unbold["docmd"])
	}
	if body := e.sent.last(":batchUpdate"); !strings.Contains(body, `"textStyle":{"bold":false}`) {
		t.Errorf("explicit false not sent: %s", body)
	}

	// The revision read before the two edits is stale now.
	te := e.fails(t, "EditDocument", map[string]any{"document_id": id, "revision_id": rev, "requests": js(t, `[`+okText+`]`)}, toolrunner.KindInputInvalid)
	if !strings.Contains(te.Message, "the document changed since revision "+rev) || !strings.Contains(te.Message, "read it again") {
		t.Errorf("stale revision: %v", te)
	}
	if md := e.docmdOf(t, id); strings.Contains(md, "xHello") {
		t.Errorf("a stale edit was applied:\n%s", md)
	}

	// Google's own refusals come back with its message.
	te = e.fails(t, "EditDocument", map[string]any{"document_id": id, "requests": js(t, `[{"insertText":{"text":"x","location":{"index":0}}}]`)}, toolrunner.KindInputInvalid)
	if !strings.Contains(te.Message, "Invalid requests[0].insertText") {
		t.Errorf("Google's refusal: %v", te)
	}
}

// block answers the first block of a type in the DocMD's first body.
func block(t *testing.T, md, typ string, attrs map[string]string) docmd.Block {
	t.Helper()
	d, err := docmd.Parse(md)
	if err != nil {
		t.Fatalf("%v\n%s", err, md)
	}
	for _, s := range d.Sections {
		for _, seg := range s.Segments {
		blocks:
			for _, b := range seg.Blocks {
				if b.Type != typ {
					continue
				}
				for k, v := range attrs {
					if b.Attrs[k] != v {
						continue blocks
					}
				}
				return b
			}
		}
	}
	t.Fatalf("no %s %v in\n%s", typ, attrs, md)
	return docmd.Block{}
}

// TestEditFromDocMD: the indices an agent reads in the DocMD are the ones
// EditDocument takes (seeds/002 rules 2, 3 and 5): a table located by its
// TABLE start gets a row, a cell is written at its CELL start, a paragraph
// is restyled by its range — all in one batch, highest index first.
func TestEditFromDocMD(t *testing.T) {
	e := newEnv(t)
	id := e.create(t, "Tables", "Intro\nOutro")
	out := obj(t, e.ok(t, "EditDocument", map[string]any{"document_id": id, "requests": js(t,
		`[{"insertTable":{"rows":2,"columns":2,"location":{"index":6}}}]`)}))
	md := out["docmd"].(string)
	table := block(t, md, "TABLE", nil)
	cell := block(t, md, "CELL", map[string]string{"row": "1", "col": "1"})
	intro := block(t, md, "PARAGRAPH", nil)
	reqs := fmt.Sprintf(`[{"insertText":{"text":"bottom right","location":{"index":%d}}},`+
		`{"insertTableRow":{"tableCellLocation":{"tableStartLocation":{"index":%d},"rowIndex":1,"columnIndex":0},"insertBelow":true}},`+
		`{"updateParagraphStyle":{"range":{"startIndex":%d,"endIndex":%d},"paragraphStyle":{"namedStyleType":"HEADING_2"},"fields":"namedStyleType"}}]`,
		cell.Start, table.Start, intro.Start, intro.End)
	out = obj(t, e.ok(t, "EditDocument", map[string]any{"document_id": id, "revision_id": revisionOf(t, md), "requests": js(t, reqs)}))
	md = out["docmd"].(string)
	if got := block(t, md, "TABLE", nil); got.Attrs["rows"] != "3" || got.Start != table.Start {
		t.Errorf("table after the edit: %+v\n%s", got, md)
	}
	end := cell.Start + int64(len("bottom right\n"))
	if want := fmt.Sprintf("[%d-%d CELL table=%d row=1 col=1]\n[%d-%d PARAGRAPH]\nbottom right\n", cell.Start, end, table.Start, cell.Start, end); !strings.Contains(stripIDs(md), want) {
		t.Errorf("cell 1,1: want\n%s\nin\n%s", want, md)
	}
	if got := block(t, md, "HEADING_2", nil); got.Text != "Intro" {
		t.Errorf("heading: %+v\n%s", got, md)
	}
}
