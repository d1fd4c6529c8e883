package docs

import (
	"context"
	"testing"

	gdocs "google.golang.org/api/docs/v1"
)

// edits100 answers 100 requests on a document of 100 paragraphs, from the
// highest index to the lowest as seeds/002 asks: a bold span and an insert
// in each paragraph.
func edits100(paraLen int) []any {
	var reqs []any
	for p := 49; p >= 0; p-- {
		start := 1 + p*paraLen
		reqs = append(reqs,
			map[string]any{"updateTextStyle": map[string]any{"range": map[string]any{"startIndex": start + 2, "endIndex": start + 8},
				"textStyle": map[string]any{"bold": true}, "fields": "bold"}},
			map[string]any{"insertText": map[string]any{"text": "x", "location": map[string]any{"index": start + 1}}})
	}
	return reqs
}

// BenchmarkEditDocument100: EditDocument with 100 requests end to end
// (runner, validation, batchUpdate, documents.get, DocMD) against the
// emulator; BenchmarkBatchUpdate100Direct is the client library's own
// batchUpdate + get of the same requests, the reference.
func BenchmarkEditDocument100(b *testing.B) {
	e := newEnv(b)
	para := "Paragraph text that is long enough.\n"
	text := ""
	for range 100 {
		text += para
	}
	res, err := e.runner.Execute(context.Background(), e.sc, Name+".CreateDocumentFromText", map[string]any{"title": "Bench", "text_content": text, "input_format": "plain"})
	if err != nil || !res.Success {
		b.Fatal(err, res.Error)
	}
	id := res.Output.(map[string]any)["documentId"].(string)
	reqs := edits100(len(para))
	for b.Loop() {
		res, err := e.runner.Execute(context.Background(), e.sc, Name+".EditDocument", map[string]any{"document_id": id, "requests": reqs})
		if err != nil || !res.Success {
			b.Fatal(err, res.Error)
		}
	}
}

func BenchmarkBatchUpdate100Direct(b *testing.B) {
	e := newEnv(b)
	ds, _ := e.direct(b, e.token(b, "u1", ScopeDriveFile))
	para := "Paragraph text that is long enough.\n"
	text := ""
	for range 100 {
		text += para
	}
	d, err := ds.Documents.Create(&gdocs.Document{Title: "Bench"}).Do()
	if err != nil {
		b.Fatal(err)
	}
	if _, err := ds.Documents.BatchUpdate(d.DocumentId, &gdocs.BatchUpdateDocumentRequest{Requests: []*gdocs.Request{{InsertText: &gdocs.InsertTextRequest{Text: text, Location: &gdocs.Location{Index: 1}}}}}).Do(); err != nil {
		b.Fatal(err)
	}
	var reqs []*gdocs.Request
	for p := 49; p >= 0; p-- {
		start := int64(1 + p*len(para))
		reqs = append(reqs,
			&gdocs.Request{UpdateTextStyle: &gdocs.UpdateTextStyleRequest{Range: &gdocs.Range{StartIndex: start + 2, EndIndex: start + 8}, TextStyle: &gdocs.TextStyle{Bold: true}, Fields: "bold"}},
			&gdocs.Request{InsertText: &gdocs.InsertTextRequest{Text: "x", Location: &gdocs.Location{Index: start + 1}}})
	}
	for b.Loop() {
		if _, err := ds.Documents.BatchUpdate(d.DocumentId, &gdocs.BatchUpdateDocumentRequest{Requests: reqs}).Do(); err != nil {
			b.Fatal(err)
		}
		if _, err := ds.Documents.Get(d.DocumentId).IncludeTabsContent(true).Do(); err != nil {
			b.Fatal(err)
		}
	}
}
