package google_test

import (
	"strings"
	"testing"

	docs "google.golang.org/api/docs/v1"

	"github.com/auditrail/auditrail/internal/emulators/google"
)

// docFixture creates a document and answers the client and its id.
func docFixture(t *testing.T) (*docs.Service, string) {
	t.Helper()
	e := newEnv(t)
	svc := e.docs(t, e.token(t, "ann@example.com", google.ScopeDocs))
	d, err := svc.Documents.Create(&docs.Document{Title: "Requests"}).Do()
	if err != nil {
		t.Fatal(err)
	}
	return svc, d.DocumentId
}

func batch(svc *docs.Service, id string, reqs ...*docs.Request) (*docs.BatchUpdateDocumentResponse, error) {
	return svc.Documents.BatchUpdate(id, &docs.BatchUpdateDocumentRequest{Requests: reqs}).Do()
}

func mustBatch(t *testing.T, svc *docs.Service, id string, reqs ...*docs.Request) *docs.BatchUpdateDocumentResponse {
	t.Helper()
	res, err := batch(svc, id, reqs...)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func get(t *testing.T, svc *docs.Service, id string) *docs.Document {
	t.Helper()
	d, err := svc.Documents.Get(id).Do()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

type refusal struct {
	name string
	req  *docs.Request
	typ  string
}

// checkRefusals sends each request after a valid one and expects Google's
// 400 naming requests[1] and its type, with the document unchanged.
func checkRefusals(t *testing.T, svc *docs.Service, id string, cases []refusal) {
	t.Helper()
	before := text(t, get(t, svc, id))
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := batch(svc, id, &docs.Request{InsertText: &docs.InsertTextRequest{Location: &docs.Location{Index: 1}, Text: "zz"}}, tc.req)
			code, msg := apiCode(err)
			if code != 400 || !strings.HasPrefix(msg, "Invalid requests[1]."+tc.typ+": ") {
				t.Fatalf("got %v", err)
			}
			if got := text(t, get(t, svc, id)); got != before {
				t.Fatalf("not atomic: %q, was %q", got, before)
			}
		})
	}
}

func rng(a, b int64) *docs.Range { return &docs.Range{StartIndex: a, EndIndex: b} }

func TestDocsBullets(t *testing.T) {
	svc, id := docFixture(t)
	// Leading tabs give the nesting level and are removed.
	mustBatch(t, svc, id,
		&docs.Request{InsertText: &docs.InsertTextRequest{Location: &docs.Location{Index: 1}, Text: "a\n\tb\n\t\tc\nd\ntail\n"}},
		&docs.Request{CreateParagraphBullets: &docs.CreateParagraphBulletsRequest{Range: rng(1, 11), BulletPreset: "NUMBERED_DECIMAL_ALPHA_ROMAN"}})
	d := get(t, svc, id)
	if got := text(t, d); got != "#a\nb\nc\nd\ntail\n\n" {
		t.Fatalf("text %q", got)
	}
	var list string
	for i, want := range []int64{0, 1, 2, 0} {
		p := d.Body.Content[1+i].Paragraph
		if p.Bullet == nil || p.Bullet.NestingLevel != want {
			t.Fatalf("paragraph %d bullet %+v", i, p.Bullet)
		}
		if list == "" {
			list = p.Bullet.ListId
		}
		if p.Bullet.ListId != list {
			t.Fatal("one list expected")
		}
	}
	if d.Body.Content[5].Paragraph.Bullet != nil {
		t.Fatal("tail is not in the range")
	}
	nl := d.Lists[list].ListProperties.NestingLevels
	if len(nl) != 9 || nl[0].GlyphType != "DECIMAL" || nl[0].GlyphFormat != "%0." || nl[1].GlyphType != "ALPHA" || nl[2].GlyphType != "ROMAN" || nl[3].GlyphType != "DECIMAL" {
		t.Fatalf("nesting levels %+v", nl)
	}
	// The next paragraph with the same preset joins the list; another
	// preset makes a new list; deleteParagraphBullets removes the bullet.
	mustBatch(t, svc, id, &docs.Request{CreateParagraphBullets: &docs.CreateParagraphBulletsRequest{Range: rng(9, 10), BulletPreset: "NUMBERED_DECIMAL_ALPHA_ROMAN"}})
	d = get(t, svc, id)
	if b := d.Body.Content[5].Paragraph.Bullet; b == nil || b.ListId != list {
		t.Fatalf("tail did not join the list: %+v", b)
	}
	mustBatch(t, svc, id,
		&docs.Request{DeleteParagraphBullets: &docs.DeleteParagraphBulletsRequest{Range: rng(3, 4)}},
		&docs.Request{CreateParagraphBullets: &docs.CreateParagraphBulletsRequest{Range: rng(14, 15), BulletPreset: "BULLET_DISC_CIRCLE_SQUARE"}})
	d = get(t, svc, id)
	if p := d.Body.Content[2].Paragraph; p.Bullet != nil || p.ParagraphStyle.IndentStart == nil || p.ParagraphStyle.IndentStart.Magnitude != 72 {
		t.Fatalf("bullet not deleted or its level's indent lost: %+v", p.ParagraphStyle)
	}
	last := d.Body.Content[6].Paragraph.Bullet
	if last == nil || last.ListId == list || d.Lists[last.ListId].ListProperties.NestingLevels[0].GlyphSymbol != "●" {
		t.Fatalf("bulleted list %+v", last)
	}
	// Every preset: bullets carry a symbol (checkbox: none, no glyph type),
	// numbered lists a glyph type.
	for _, preset := range []string{"BULLET_DISC_CIRCLE_SQUARE", "BULLET_DIAMONDX_ARROW3D_SQUARE", "BULLET_CHECKBOX", "BULLET_ARROW_DIAMOND_DISC",
		"BULLET_STAR_CIRCLE_SQUARE", "BULLET_ARROW3D_CIRCLE_SQUARE", "BULLET_LEFTTRIANGLE_DIAMOND_DISC", "BULLET_DIAMONDX_HOLLOWDIAMOND_SQUARE",
		"BULLET_DIAMOND_CIRCLE_SQUARE", "NUMBERED_DECIMAL_ALPHA_ROMAN", "NUMBERED_DECIMAL_ALPHA_ROMAN_PARENS", "NUMBERED_DECIMAL_NESTED",
		"NUMBERED_UPPERALPHA_ALPHA_ROMAN", "NUMBERED_UPPERROMAN_UPPERALPHA_DECIMAL", "NUMBERED_ZERODECIMAL_ALPHA_ROMAN"} {
		mustBatch(t, svc, id, &docs.Request{CreateParagraphBullets: &docs.CreateParagraphBulletsRequest{Range: rng(3, 4), BulletPreset: preset}})
		d = get(t, svc, id)
		lvl := d.Lists[d.Body.Content[2].Paragraph.Bullet.ListId].ListProperties.NestingLevels[1]
		switch {
		case preset == "BULLET_CHECKBOX":
			if lvl.GlyphSymbol != "" || lvl.GlyphType != "GLYPH_TYPE_UNSPECIFIED" {
				t.Errorf("%s: %+v", preset, lvl)
			}
		case strings.HasPrefix(preset, "BULLET_"):
			if lvl.GlyphSymbol == "" || lvl.GlyphFormat != "%1" {
				t.Errorf("%s: %+v", preset, lvl)
			}
		case preset == "NUMBERED_DECIMAL_NESTED":
			if lvl.GlyphType != "DECIMAL" || lvl.GlyphFormat != "%0.%1." {
				t.Errorf("%s: %+v", preset, lvl)
			}
		case lvl.GlyphType == "" || lvl.GlyphFormat == "":
			t.Errorf("%s: %+v", preset, lvl)
		}
	}
	checkRefusals(t, svc, id, []refusal{
		{"no preset", &docs.Request{CreateParagraphBullets: &docs.CreateParagraphBulletsRequest{Range: rng(1, 2)}}, "createParagraphBullets"},
		{"unknown preset", &docs.Request{CreateParagraphBullets: &docs.CreateParagraphBulletsRequest{Range: rng(1, 2), BulletPreset: "BULLET_HEARTS"}}, "createParagraphBullets"},
		{"empty range", &docs.Request{CreateParagraphBullets: &docs.CreateParagraphBulletsRequest{Range: rng(2, 2), BulletPreset: "BULLET_CHECKBOX"}}, "createParagraphBullets"},
		{"past the end", &docs.Request{DeleteParagraphBullets: &docs.DeleteParagraphBulletsRequest{Range: rng(1, 99)}}, "deleteParagraphBullets"},
	})
}

func cellLoc(table, row, col int64) *docs.TableCellLocation {
	return &docs.TableCellLocation{TableStartLocation: &docs.Location{Index: table}, RowIndex: row, ColumnIndex: col}
}

func TestDocsTableRequests(t *testing.T) {
	svc, id := docFixture(t)
	// #x\n [ | / a \n / b \n | / c \n / d \n ] \n : the table starts at 3.
	mustBatch(t, svc, id,
		&docs.Request{InsertText: &docs.InsertTextRequest{Location: &docs.Location{Index: 1}, Text: "x"}},
		&docs.Request{InsertTable: &docs.InsertTableRequest{EndOfSegmentLocation: &docs.EndOfSegmentLocation{}, Rows: 2, Columns: 2}},
		&docs.Request{InsertText: &docs.InsertTextRequest{Location: &docs.Location{Index: 13}, Text: "d"}},
		&docs.Request{InsertText: &docs.InsertTextRequest{Location: &docs.Location{Index: 11}, Text: "c"}},
		&docs.Request{InsertText: &docs.InsertTextRequest{Location: &docs.Location{Index: 8}, Text: "b"}},
		&docs.Request{InsertText: &docs.InsertTextRequest{Location: &docs.Location{Index: 6}, Text: "a"}})
	if got := text(t, get(t, svc, id)); got != "#x\n[|/a\n/b\n|/c\n/d\n]\n" {
		t.Fatalf("text %q", got)
	}
	const ts = 3
	mustBatch(t, svc, id,
		&docs.Request{InsertTableRow: &docs.InsertTableRowRequest{TableCellLocation: cellLoc(ts, 0, 0), InsertBelow: true}},
		&docs.Request{InsertTableColumn: &docs.InsertTableColumnRequest{TableCellLocation: cellLoc(ts, 0, 1), InsertRight: true}},
		&docs.Request{InsertTableColumn: &docs.InsertTableColumnRequest{TableCellLocation: cellLoc(ts, 0, 0)}})
	if got := text(t, get(t, svc, id)); got != "#x\n[|/\n/a\n/b\n/\n|/\n/\n/\n/\n|/\n/c\n/d\n/\n]\n" {
		t.Fatalf("after inserts %q", got)
	}
	mustBatch(t, svc, id,
		&docs.Request{DeleteTableRow: &docs.DeleteTableRowRequest{TableCellLocation: cellLoc(ts, 1, 0)}},
		&docs.Request{DeleteTableColumn: &docs.DeleteTableColumnRequest{TableCellLocation: cellLoc(ts, 0, 3)}},
		&docs.Request{DeleteTableColumn: &docs.DeleteTableColumnRequest{TableCellLocation: cellLoc(ts, 0, 0)}})
	if got := text(t, get(t, svc, id)); got != "#x\n[|/a\n/b\n|/c\n/d\n]\n" {
		t.Fatalf("after deletes %q", got)
	}
	red := &docs.OptionalColor{Color: &docs.Color{RgbColor: &docs.RgbColor{Red: 1}}}
	mustBatch(t, svc, id,
		&docs.Request{UpdateTableCellStyle: &docs.UpdateTableCellStyleRequest{TableRange: &docs.TableRange{TableCellLocation: cellLoc(ts, 1, 1), RowSpan: 1, ColumnSpan: 1},
			TableCellStyle: &docs.TableCellStyle{BackgroundColor: red, ContentAlignment: "MIDDLE"}, Fields: "backgroundColor,contentAlignment"}},
		&docs.Request{UpdateTableRowStyle: &docs.UpdateTableRowStyleRequest{TableStartLocation: &docs.Location{Index: ts}, RowIndices: []int64{1},
			TableRowStyle: &docs.TableRowStyle{MinRowHeight: &docs.Dimension{Magnitude: 30, Unit: "PT"}}, Fields: "minRowHeight"}},
		&docs.Request{UpdateTableColumnProperties: &docs.UpdateTableColumnPropertiesRequest{TableStartLocation: &docs.Location{Index: ts}, ColumnIndices: []int64{0},
			TableColumnProperties: &docs.TableColumnProperties{WidthType: "FIXED_WIDTH", Width: &docs.Dimension{Magnitude: 100, Unit: "PT"}}, Fields: "widthType,width"}},
		&docs.Request{PinTableHeaderRows: &docs.PinTableHeaderRowsRequest{TableStartLocation: &docs.Location{Index: ts}, PinnedHeaderRowsCount: 1}})
	tb := get(t, svc, id).Body.Content[2].Table
	c11 := tb.TableRows[1].TableCells[1].TableCellStyle
	if c11.BackgroundColor.Color.RgbColor.Red != 1 || c11.ContentAlignment != "MIDDLE" || c11.RowSpan != 1 {
		t.Fatalf("cell style %+v", c11)
	}
	if tb.TableRows[1].TableRowStyle.MinRowHeight.Magnitude != 30 || !tb.TableRows[0].TableRowStyle.TableHeader || tb.TableRows[1].TableRowStyle.TableHeader {
		t.Fatalf("row styles %+v %+v", tb.TableRows[0].TableRowStyle, tb.TableRows[1].TableRowStyle)
	}
	if cp := tb.TableStyle.TableColumnProperties; len(cp) != 2 || cp[0].WidthType != "FIXED_WIDTH" || cp[0].Width.Magnitude != 100 || cp[1].WidthType != "EVENLY_DISTRIBUTED" {
		t.Fatalf("column properties %+v", cp)
	}
	// Resetting: a masked field absent from the style goes back to default.
	mustBatch(t, svc, id, &docs.Request{UpdateTableCellStyle: &docs.UpdateTableCellStyleRequest{TableStartLocation: &docs.Location{Index: ts},
		TableCellStyle: &docs.TableCellStyle{}, Fields: "contentAlignment"}})
	if c := get(t, svc, id).Body.Content[2].Table.TableRows[1].TableCells[1].TableCellStyle; c.ContentAlignment != "TOP" || c.BackgroundColor.Color == nil {
		t.Fatalf("reset %+v", c)
	}
	// Merge the first row: "b" joins "a" in the head cell, spans show.
	mustBatch(t, svc, id, &docs.Request{MergeTableCells: &docs.MergeTableCellsRequest{TableRange: &docs.TableRange{TableCellLocation: cellLoc(ts, 0, 0), RowSpan: 1, ColumnSpan: 2}}})
	d := get(t, svc, id)
	if got := text(t, d); got != "#x\n[|/a\nb\n/\n|/c\n/d\n]\n" {
		t.Fatalf("merged %q", got)
	}
	if h := d.Body.Content[2].Table.TableRows[0].TableCells[0].TableCellStyle; h.ColumnSpan != 2 || h.RowSpan != 1 {
		t.Fatalf("head %+v", h)
	}
	checkRefusals(t, svc, id, []refusal{
		{"not a table start", &docs.Request{InsertTableRow: &docs.InsertTableRowRequest{TableCellLocation: cellLoc(ts+1, 0, 0)}}, "insertTableRow"},
		{"row out of bounds", &docs.Request{DeleteTableRow: &docs.DeleteTableRowRequest{TableCellLocation: cellLoc(ts, 2, 0)}}, "deleteTableRow"},
		{"column out of bounds", &docs.Request{InsertTableColumn: &docs.InsertTableColumnRequest{TableCellLocation: cellLoc(ts, 0, 5)}}, "insertTableColumn"},
		{"no location", &docs.Request{DeleteTableColumn: &docs.DeleteTableColumnRequest{}}, "deleteTableColumn"},
		{"too many pinned", &docs.Request{PinTableHeaderRows: &docs.PinTableHeaderRowsRequest{TableStartLocation: &docs.Location{Index: ts}, PinnedHeaderRowsCount: 3}}, "pinTableHeaderRows"},
		{"narrow column", &docs.Request{UpdateTableColumnProperties: &docs.UpdateTableColumnPropertiesRequest{TableStartLocation: &docs.Location{Index: ts},
			TableColumnProperties: &docs.TableColumnProperties{WidthType: "FIXED_WIDTH", Width: &docs.Dimension{Magnitude: 2, Unit: "PT"}}, Fields: "width"}}, "updateTableColumnProperties"},
		{"unit missing", &docs.Request{UpdateTableRowStyle: &docs.UpdateTableRowStyleRequest{TableStartLocation: &docs.Location{Index: ts},
			TableRowStyle: &docs.TableRowStyle{MinRowHeight: &docs.Dimension{Magnitude: 3}}, Fields: "minRowHeight"}}, "updateTableRowStyle"},
		{"read-only span", &docs.Request{UpdateTableCellStyle: &docs.UpdateTableCellStyleRequest{TableStartLocation: &docs.Location{Index: ts},
			TableCellStyle: &docs.TableCellStyle{RowSpan: 2}, Fields: "rowSpan"}}, "updateTableCellStyle"},
		{"range and start", &docs.Request{UpdateTableCellStyle: &docs.UpdateTableCellStyleRequest{TableStartLocation: &docs.Location{Index: ts},
			TableRange: &docs.TableRange{TableCellLocation: cellLoc(ts, 0, 0), RowSpan: 1, ColumnSpan: 1}, Fields: "contentAlignment"}}, "updateTableCellStyle"},
		{"cuts a merged cell", &docs.Request{MergeTableCells: &docs.MergeTableCellsRequest{TableRange: &docs.TableRange{TableCellLocation: cellLoc(ts, 0, 1), RowSpan: 2, ColumnSpan: 1}}}, "mergeTableCells"},
		{"range outside", &docs.Request{UnmergeTableCells: &docs.UnmergeTableCellsRequest{TableRange: &docs.TableRange{TableCellLocation: cellLoc(ts, 0, 0), RowSpan: 3, ColumnSpan: 1}}}, "unmergeTableCells"},
	})
	// Unmerge keeps the text in the head; deleting every row deletes the table.
	mustBatch(t, svc, id, &docs.Request{UnmergeTableCells: &docs.UnmergeTableCellsRequest{TableRange: &docs.TableRange{TableCellLocation: cellLoc(ts, 0, 0), RowSpan: 1, ColumnSpan: 2}}})
	if h := get(t, svc, id).Body.Content[2].Table.TableRows[0].TableCells; h[0].TableCellStyle.ColumnSpan != 1 || h[1].TableCellStyle.ColumnSpan != 1 {
		t.Fatal("not unmerged")
	}
	mustBatch(t, svc, id,
		&docs.Request{DeleteTableRow: &docs.DeleteTableRowRequest{TableCellLocation: cellLoc(ts, 1, 0)}},
		&docs.Request{DeleteTableRow: &docs.DeleteTableRowRequest{TableCellLocation: cellLoc(ts, 0, 0)}})
	if got := text(t, get(t, svc, id)); got != "#x\n\n" {
		t.Fatalf("table not deleted: %q", got)
	}
}

func TestDocsHeadersFootersFootnotes(t *testing.T) {
	svc, id := docFixture(t)
	res := mustBatch(t, svc, id,
		&docs.Request{InsertText: &docs.InsertTextRequest{Location: &docs.Location{Index: 1}, Text: "Body text\n"}},
		&docs.Request{CreateHeader: &docs.CreateHeaderRequest{Type: "DEFAULT"}},
		&docs.Request{CreateFooter: &docs.CreateFooterRequest{Type: "DEFAULT"}},
		&docs.Request{CreateFootnote: &docs.CreateFootnoteRequest{Location: &docs.Location{Index: 5}}})
	hid, fid, nid := res.Replies[1].CreateHeader.HeaderId, res.Replies[2].CreateFooter.FooterId, res.Replies[3].CreateFootnote.FootnoteId
	if hid == "" || fid == "" || nid == "" {
		t.Fatalf("replies %+v", res.Replies)
	}
	mustBatch(t, svc, id,
		&docs.Request{InsertText: &docs.InsertTextRequest{EndOfSegmentLocation: &docs.EndOfSegmentLocation{SegmentId: hid}, Text: "Head"}},
		&docs.Request{InsertText: &docs.InsertTextRequest{Location: &docs.Location{SegmentId: nid, Index: 1}, Text: "Note"}})
	d := get(t, svc, id)
	if d.DocumentStyle.DefaultHeaderId != hid || d.DocumentStyle.DefaultFooterId != fid {
		t.Fatalf("document style %+v", d.DocumentStyle)
	}
	h := d.Headers[hid].Content
	if len(h) != 1 || h[0].StartIndex != 0 || h[0].EndIndex != 5 || h[0].Paragraph.Elements[0].TextRun.Content != "Head\n" {
		t.Fatalf("header %+v", h[0])
	}
	// The reference is one unit in the body; the footnote starts " ".
	ref := d.Body.Content[1].Paragraph.Elements[1]
	if ref.FootnoteReference == nil || ref.FootnoteReference.FootnoteId != nid || ref.FootnoteReference.FootnoteNumber != "1" || ref.StartIndex != 5 || ref.EndIndex != 6 {
		t.Fatalf("reference %+v", ref)
	}
	if fn := d.Footnotes[nid].Content[0].Paragraph.Elements[0].TextRun.Content; fn != " Note\n" {
		t.Fatalf("footnote %q", fn)
	}
	checkRefusals(t, svc, id, []refusal{
		{"second default header", &docs.Request{CreateHeader: &docs.CreateHeaderRequest{Type: "DEFAULT"}}, "createHeader"},
		{"header type missing", &docs.Request{CreateFooter: &docs.CreateFooterRequest{}}, "createFooter"},
		{"footnote in a header", &docs.Request{CreateFootnote: &docs.CreateFootnoteRequest{Location: &docs.Location{SegmentId: hid, Index: 1}}}, "createFootnote"},
		{"unknown header", &docs.Request{DeleteHeader: &docs.DeleteHeaderRequest{HeaderId: "kix.nope"}}, "deleteHeader"},
		{"unknown footer", &docs.Request{DeleteFooter: &docs.DeleteFooterRequest{FooterId: hid}}, "deleteFooter"},
		{"section break not at a break", &docs.Request{CreateHeader: &docs.CreateHeaderRequest{Type: "DEFAULT", SectionBreakLocation: &docs.Location{Index: 2}}}, "createHeader"},
	})
	// Deleting the reference deletes the footnote; deleteHeader/Footer
	// remove the segments and the document style's ids.
	mustBatch(t, svc, id,
		&docs.Request{DeleteContentRange: &docs.DeleteContentRangeRequest{Range: rng(5, 6)}},
		&docs.Request{DeleteHeader: &docs.DeleteHeaderRequest{HeaderId: hid}},
		&docs.Request{DeleteFooter: &docs.DeleteFooterRequest{FooterId: fid}})
	d = get(t, svc, id)
	if len(d.Footnotes) != 0 || len(d.Headers) != 0 || len(d.Footers) != 0 || d.DocumentStyle.DefaultHeaderId != "" {
		t.Fatalf("left: %v %v %v %+v", d.Footnotes, d.Headers, d.Footers, d.DocumentStyle)
	}
}

func TestDocsInlineObjectsAndChips(t *testing.T) {
	svc, id := docFixture(t)
	res := mustBatch(t, svc, id,
		&docs.Request{InsertText: &docs.InsertTextRequest{Location: &docs.Location{Index: 1}, Text: "See  and  on .\n"}},
		&docs.Request{InsertDate: &docs.InsertDateRequest{Location: &docs.Location{Index: 14},
			DateElementProperties: &docs.DateElementProperties{Timestamp: "2026-11-16T15:00:00Z", DateFormat: "DATE_FORMAT_ISO8601"}}},
		&docs.Request{InsertPerson: &docs.InsertPersonRequest{Location: &docs.Location{Index: 10}, PersonProperties: &docs.PersonProperties{Email: "ben@example.com"}}},
		&docs.Request{InsertInlineImage: &docs.InsertInlineImageRequest{Location: &docs.Location{Index: 5}, Uri: "https://www.example.com/a.png",
			ObjectSize: &docs.Size{Width: &docs.Dimension{Magnitude: 200, Unit: "PT"}, Height: &docs.Dimension{Magnitude: 100, Unit: "PT"}}}})
	oid := res.Replies[3].InsertInlineImage.ObjectId
	d := get(t, svc, id)
	els := d.Body.Content[1].Paragraph.Elements
	var kinds []string
	for _, e := range els {
		switch {
		case e.TextRun != nil:
			kinds = append(kinds, e.TextRun.Content)
		case e.InlineObjectElement != nil:
			kinds = append(kinds, "IMG:"+e.InlineObjectElement.InlineObjectId)
		case e.Person != nil:
			kinds = append(kinds, "P:"+e.Person.PersonProperties.Email)
		case e.DateElement != nil:
			kinds = append(kinds, "D:"+e.DateElement.DateElementProperties.DisplayText)
		}
		if e.TextRun == nil && e.EndIndex-e.StartIndex != 1 {
			t.Fatalf("element %+v is not one unit", e)
		}
	}
	if got, want := strings.Join(kinds, "|"), "See |IMG:"+oid+"| and |P:ben@example.com| on |D:2026-11-16|.\n"; got != want {
		t.Fatalf("elements %q, want %q", got, want)
	}
	eo := d.InlineObjects[oid].InlineObjectProperties.EmbeddedObject
	if eo.ImageProperties.SourceUri != "https://www.example.com/a.png" || eo.ImageProperties.ContentUri == "" || eo.Size.Width.Magnitude != 200 || eo.Size.Height.Magnitude != 100 {
		t.Fatalf("embedded object %+v", eo)
	}
	mustBatch(t, svc, id, &docs.Request{ReplaceImage: &docs.ReplaceImageRequest{ImageObjectId: oid, Uri: "https://www.example.com/b.png"}})
	if u := get(t, svc, id).InlineObjects[oid].InlineObjectProperties.EmbeddedObject.ImageProperties.SourceUri; u != "https://www.example.com/b.png" {
		t.Fatalf("replaced %q", u)
	}
	checkRefusals(t, svc, id, []refusal{
		{"image without uri", &docs.Request{InsertInlineImage: &docs.InsertInlineImageRequest{Location: &docs.Location{Index: 1}}}, "insertInlineImage"},
		{"image not http", &docs.Request{InsertInlineImage: &docs.InsertInlineImageRequest{Location: &docs.Location{Index: 1}, Uri: "file:///etc/passwd"}}, "insertInlineImage"},
		{"image at 0", &docs.Request{InsertInlineImage: &docs.InsertInlineImageRequest{Location: &docs.Location{Index: 0}, Uri: "https://www.example.com/a.png"}}, "insertInlineImage"},
		{"replace unknown image", &docs.Request{ReplaceImage: &docs.ReplaceImageRequest{ImageObjectId: "kix.nope", Uri: "https://www.example.com/a.png"}}, "replaceImage"},
		{"positioned object", &docs.Request{DeletePositionedObject: &docs.DeletePositionedObjectRequest{ObjectId: "kix.any"}}, "deletePositionedObject"},
		{"person without email", &docs.Request{InsertPerson: &docs.InsertPersonRequest{Location: &docs.Location{Index: 1}, PersonProperties: &docs.PersonProperties{}}}, "insertPerson"},
		{"date without timestamp", &docs.Request{InsertDate: &docs.InsertDateRequest{Location: &docs.Location{Index: 1}, DateElementProperties: &docs.DateElementProperties{}}}, "insertDate"},
		{"date bad zone", &docs.Request{InsertDate: &docs.InsertDateRequest{Location: &docs.Location{Index: 1},
			DateElementProperties: &docs.DateElementProperties{Timestamp: "2026-11-16T15:00:00Z", TimeZoneId: "Mars/Olympus"}}}, "insertDate"},
	})
	// Deleting the element deletes the inline object.
	mustBatch(t, svc, id, &docs.Request{DeleteContentRange: &docs.DeleteContentRangeRequest{Range: rng(5, 6)}})
	if d := get(t, svc, id); len(d.InlineObjects) != 0 {
		t.Fatalf("inline objects left: %v", d.InlineObjects)
	}
}

func TestDocsStylesRangesSections(t *testing.T) {
	svc, id := docFixture(t)
	res := mustBatch(t, svc, id,
		&docs.Request{InsertText: &docs.InsertTextRequest{Location: &docs.Location{Index: 1}, Text: "one two three\n"}},
		&docs.Request{CreateNamedRange: &docs.CreateNamedRangeRequest{Name: "middle", Range: rng(5, 8)}},
		&docs.Request{UpdateDocumentStyle: &docs.UpdateDocumentStyleRequest{DocumentStyle: &docs.DocumentStyle{MarginTop: &docs.Dimension{Magnitude: 36, Unit: "PT"},
			Background: &docs.Background{Color: &docs.OptionalColor{Color: &docs.Color{RgbColor: &docs.RgbColor{Blue: 1}}}}}, Fields: "marginTop,background"}},
		&docs.Request{InsertText: &docs.InsertTextRequest{Location: &docs.Location{Index: 1}, Text: ">> "}})
	nrID := res.Replies[1].CreateNamedRange.NamedRangeId
	d := get(t, svc, id)
	nr := d.NamedRanges["middle"].NamedRanges
	if len(nr) != 1 || nr[0].NamedRangeId != nrID || nr[0].Ranges[0].StartIndex != 8 || nr[0].Ranges[0].EndIndex != 11 {
		t.Fatalf("named range did not follow the insert: %+v", nr)
	}
	if ds := d.DocumentStyle; ds.MarginTop.Magnitude != 36 || ds.MarginBottom.Magnitude != 72 || ds.Background.Color.Color.RgbColor.Blue != 1 || ds.PageSize.Width.Magnitude != 612 {
		t.Fatalf("document style %+v", ds)
	}
	mustBatch(t, svc, id,
		&docs.Request{ReplaceNamedRangeContent: &docs.ReplaceNamedRangeContentRequest{NamedRangeName: "middle", Text: "2"}},
		&docs.Request{UpdateDocumentStyle: &docs.UpdateDocumentStyleRequest{DocumentStyle: &docs.DocumentStyle{}, Fields: "marginTop"}},
		&docs.Request{InsertSectionBreak: &docs.InsertSectionBreakRequest{Location: &docs.Location{Index: 8}, SectionType: "NEXT_PAGE"}})
	d = get(t, svc, id)
	if got := text(t, d); got != "#>> one \n#2 three\n\n" {
		t.Fatalf("text %q", got)
	}
	if sb := d.Body.Content[2].SectionBreak; sb == nil || sb.SectionStyle.SectionType != "NEXT_PAGE" || d.Body.Content[2].StartIndex != 9 {
		t.Fatalf("section break %+v", d.Body.Content[2])
	}
	if nr := d.NamedRanges["middle"].NamedRanges[0].Ranges[0]; nr.StartIndex != 10 || nr.EndIndex != 11 {
		t.Fatalf("replaced named range %+v", nr)
	}
	if d.DocumentStyle.MarginTop.Magnitude != 72 {
		t.Fatal("marginTop not reset")
	}
	mustBatch(t, svc, id,
		&docs.Request{UpdateSectionStyle: &docs.UpdateSectionStyleRequest{Range: rng(10, 11), SectionStyle: &docs.SectionStyle{MarginLeft: &docs.Dimension{Magnitude: 20, Unit: "PT"},
			ColumnSeparatorStyle: "BETWEEN_EACH_COLUMN"}, Fields: "marginLeft,columnSeparatorStyle"}},
		&docs.Request{DeleteNamedRange: &docs.DeleteNamedRangeRequest{NamedRangeId: nrID}})
	d = get(t, svc, id)
	if ss := d.Body.Content[2].SectionBreak.SectionStyle; ss.MarginLeft.Magnitude != 20 || ss.ColumnSeparatorStyle != "BETWEEN_EACH_COLUMN" {
		t.Fatalf("section style %+v", ss)
	}
	if d.Body.Content[0].SectionBreak.SectionStyle.MarginLeft != nil || len(d.NamedRanges) != 0 {
		t.Fatal("first section changed or named range left")
	}
	checkRefusals(t, svc, id, []refusal{
		{"unknown document style field", &docs.Request{UpdateDocumentStyle: &docs.UpdateDocumentStyleRequest{DocumentStyle: &docs.DocumentStyle{}, Fields: "colour"}}, "updateDocumentStyle"},
		{"document style no fields", &docs.Request{UpdateDocumentStyle: &docs.UpdateDocumentStyleRequest{DocumentStyle: &docs.DocumentStyle{}}}, "updateDocumentStyle"},
		{"margin without unit", &docs.Request{UpdateDocumentStyle: &docs.UpdateDocumentStyleRequest{DocumentStyle: &docs.DocumentStyle{MarginTop: &docs.Dimension{Magnitude: 3}}, Fields: "marginTop"}}, "updateDocumentStyle"},
		{"section type missing", &docs.Request{InsertSectionBreak: &docs.InsertSectionBreakRequest{Location: &docs.Location{Index: 2}}}, "insertSectionBreak"},
		{"section style in a footnote", &docs.Request{UpdateSectionStyle: &docs.UpdateSectionStyleRequest{Range: &docs.Range{SegmentId: "kix.x", StartIndex: 0, EndIndex: 1}, Fields: "marginLeft"}}, "updateSectionStyle"},
		{"named range without name", &docs.Request{CreateNamedRange: &docs.CreateNamedRangeRequest{Range: rng(1, 2)}}, "createNamedRange"},
		{"delete range by id and name", &docs.Request{DeleteNamedRange: &docs.DeleteNamedRangeRequest{NamedRangeId: "a", Name: "b"}}, "deleteNamedRange"},
		{"replace unknown range", &docs.Request{ReplaceNamedRangeContent: &docs.ReplaceNamedRangeContentRequest{NamedRangeName: "nope", Text: "x"}}, "replaceNamedRangeContent"},
	})
}

func TestDocsTabs(t *testing.T) {
	svc, id := docFixture(t)
	res := mustBatch(t, svc, id,
		&docs.Request{AddDocumentTab: &docs.AddDocumentTabRequest{TabProperties: &docs.TabProperties{Title: "Second"}}},
		&docs.Request{InsertText: &docs.InsertTextRequest{Location: &docs.Location{Index: 1}, Text: "first tab\n"}})
	second := res.Replies[0].AddDocumentTab.TabProperties
	if second.TabId == "" || second.Title != "Second" || second.Index != 1 {
		t.Fatalf("reply %+v", second)
	}
	res = mustBatch(t, svc, id,
		&docs.Request{AddDocumentTab: &docs.AddDocumentTabRequest{TabProperties: &docs.TabProperties{Title: "Child", ParentTabId: second.TabId, IconEmoji: "📎"}}},
		&docs.Request{InsertText: &docs.InsertTextRequest{Location: &docs.Location{Index: 1, TabId: second.TabId}, Text: "second tab\n"}},
		&docs.Request{UpdateDocumentTabProperties: &docs.UpdateDocumentTabPropertiesRequest{TabProperties: &docs.TabProperties{TabId: "t.0", Title: "Main"}, Fields: "title"}})
	child := res.Replies[0].AddDocumentTab.TabProperties
	mustBatch(t, svc, id, &docs.Request{InsertText: &docs.InsertTextRequest{EndOfSegmentLocation: &docs.EndOfSegmentLocation{TabId: child.TabId}, Text: "child"}})
	d, err := svc.Documents.Get(id).IncludeTabsContent(true).Do()
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Tabs) != 2 || d.Tabs[0].TabProperties.Title != "Main" || len(d.Tabs[1].ChildTabs) != 1 {
		t.Fatalf("tabs %+v", d.Tabs)
	}
	c := d.Tabs[1].ChildTabs[0]
	if c.TabProperties.TabId != child.TabId || c.TabProperties.ParentTabId != second.TabId || c.TabProperties.NestingLevel != 1 || c.TabProperties.IconEmoji != "📎" {
		t.Fatalf("child %+v", c.TabProperties)
	}
	if c.DocumentTab.Body.Content[1].Paragraph.Elements[0].TextRun.Content != "child\n" || d.Tabs[1].DocumentTab.Body.Content[1].Paragraph.Elements[0].TextRun.Content != "second tab\n" {
		t.Fatal("tab bodies")
	}
	// Without includeTabsContent the legacy fields show the first tab.
	if got := text(t, get(t, svc, id)); got != "#first tab\n\n" {
		t.Fatalf("legacy body %q", got)
	}
	checkRefusals(t, svc, id, []refusal{
		{"unknown parent", &docs.Request{AddDocumentTab: &docs.AddDocumentTabRequest{TabProperties: &docs.TabProperties{ParentTabId: "t.nope"}}}, "addDocumentTab"},
		{"index out of range", &docs.Request{AddDocumentTab: &docs.AddDocumentTabRequest{TabProperties: &docs.TabProperties{Index: 7}}}, "addDocumentTab"},
		{"unknown tab", &docs.Request{DeleteTab: &docs.DeleteTabRequest{TabId: "t.nope"}}, "deleteTab"},
		{"move under itself", &docs.Request{UpdateDocumentTabProperties: &docs.UpdateDocumentTabPropertiesRequest{
			TabProperties: &docs.TabProperties{TabId: second.TabId, ParentTabId: child.TabId}, Fields: "parentTabId"}}, "updateDocumentTabProperties"},
		{"insert into unknown tab", &docs.Request{InsertText: &docs.InsertTextRequest{Location: &docs.Location{Index: 1, TabId: "t.nope"}, Text: "x"}}, "insertText"},
	})
	// Deleting a tab deletes its children; the last tab cannot go.
	mustBatch(t, svc, id, &docs.Request{DeleteTab: &docs.DeleteTabRequest{TabId: second.TabId}})
	d, _ = svc.Documents.Get(id).IncludeTabsContent(true).Do()
	if len(d.Tabs) != 1 || len(d.Tabs[0].ChildTabs) != 0 {
		t.Fatalf("after delete %+v", d.Tabs)
	}
	_, err = batch(svc, id, &docs.Request{DeleteTab: &docs.DeleteTabRequest{TabId: "t.0"}})
	if code, msg := apiCode(err); code != 400 || !strings.HasPrefix(msg, "Invalid requests[0].deleteTab: ") {
		t.Fatalf("deleting the last tab: %v", err)
	}
}

// A merge follows rows and columns inserted inside it or deleted from it.
func TestDocsMergedCellsFollowRowAndColumnChanges(t *testing.T) {
	svc, id := docFixture(t)
	mustBatch(t, svc, id,
		&docs.Request{InsertTable: &docs.InsertTableRequest{Location: &docs.Location{Index: 1}, Rows: 3, Columns: 3}},
		&docs.Request{MergeTableCells: &docs.MergeTableCellsRequest{TableRange: &docs.TableRange{TableCellLocation: cellLoc(2, 0, 0), RowSpan: 2, ColumnSpan: 2}}})
	spans := func() string {
		var b strings.Builder
		for _, r := range get(t, svc, id).Body.Content[2].Table.TableRows {
			for _, c := range r.TableCells {
				b.WriteString(string(rune('0'+c.TableCellStyle.RowSpan)) + string(rune('0'+c.TableCellStyle.ColumnSpan)) + " ")
			}
			b.WriteString("| ")
		}
		return b.String()
	}
	if got := spans(); got != "22 00 11 | 00 00 11 | 11 11 11 | " {
		t.Fatalf("merged: %s", got)
	}
	mustBatch(t, svc, id, &docs.Request{InsertTableRow: &docs.InsertTableRowRequest{TableCellLocation: cellLoc(2, 0, 2), InsertBelow: true}})
	if got := spans(); got != "32 00 11 | 00 00 11 | 00 00 11 | 11 11 11 | " {
		t.Fatalf("row inserted inside the merge: %s", got)
	}
	mustBatch(t, svc, id, &docs.Request{DeleteTableColumn: &docs.DeleteTableColumnRequest{TableCellLocation: cellLoc(2, 3, 1)}})
	if got := spans(); got != "31 11 | 00 11 | 00 11 | 11 11 | " {
		t.Fatalf("column deleted from the merge: %s", got)
	}
	mustBatch(t, svc, id, &docs.Request{DeleteTableRow: &docs.DeleteTableRowRequest{TableCellLocation: cellLoc(2, 0, 1)}})
	if got := spans(); got != "11 11 | 11 11 | 11 11 | " {
		t.Fatalf("head row deleted: %s", got)
	}
}

// A named range inside a table keeps its text when the table gets a new row
// or column elsewhere.
func TestDocsNamedRangeInTableFollowsTableEdits(t *testing.T) {
	svc, id := docFixture(t)
	// #\n [ | / \n / \n | / \n / \n ] \n : cell (1,1) content at 12.
	mustBatch(t, svc, id,
		&docs.Request{InsertTable: &docs.InsertTableRequest{Location: &docs.Location{Index: 1}, Rows: 2, Columns: 2}},
		&docs.Request{InsertText: &docs.InsertTextRequest{Location: &docs.Location{Index: 12}, Text: "keep"}},
		&docs.Request{CreateNamedRange: &docs.CreateNamedRangeRequest{Name: "k", Range: rng(12, 16)}},
		&docs.Request{InsertTableRow: &docs.InsertTableRowRequest{TableCellLocation: cellLoc(2, 0, 0)}},
		&docs.Request{InsertTableColumn: &docs.InsertTableColumnRequest{TableCellLocation: cellLoc(2, 0, 0)}},
		&docs.Request{UpdateTableCellStyle: &docs.UpdateTableCellStyleRequest{TableStartLocation: &docs.Location{Index: 2},
			TableCellStyle: &docs.TableCellStyle{ContentAlignment: "BOTTOM"}, Fields: "contentAlignment"}})
	d := get(t, svc, id)
	r := d.NamedRanges["k"].NamedRanges[0].Ranges[0]
	cell := d.Body.Content[2].Table.TableRows[2].TableCells[2]
	if r.StartIndex != cell.StartIndex+1 || r.EndIndex != r.StartIndex+4 || cell.Content[0].Paragraph.Elements[0].TextRun.Content != "keep\n" {
		t.Fatalf("range %d-%d, cell %d %+v", r.StartIndex, r.EndIndex, cell.StartIndex, cell.Content[0].Paragraph.Elements[0].TextRun)
	}
}
