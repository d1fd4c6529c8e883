package google

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	docs "google.golang.org/api/docs/v1"
)

// gen draws requests for a document: mostly valid ones (indices inside a
// segment that exists, tables that exist) and, as they come, invalid ones
// (the batch must then leave the document unchanged).
type gen struct {
	rng *rand.Rand
	d   *document
}

func (g *gen) pick(n int) int { return g.rng.IntN(n) }

// target picks a tab and one of its segments.
func (g *gen) target() (*tab, string, *segment) {
	t := g.d.Tabs[g.pick(len(g.d.Tabs))]
	ids := append([]string{"", ""}, sortedSegmentIDs(t)...) // the body twice as likely
	id := ids[g.pick(len(ids))]
	s, _ := t.segment(id)
	return t, id, s
}

func (g *gen) tableStarts(s *segment) []int64 {
	var out []int64
	for i, it := range s.items {
		if it.k == kTableStart {
			out = append(out, int64(i))
		}
	}
	return out
}

func (g *gen) request() *docs.Request {
	t, segID, s := g.target()
	n := int64(len(s.items))
	lo := int64(0)
	if segID == "" {
		lo = 1
	}
	idx := lo + g.rng.Int64N(n-lo)
	a := lo + g.rng.Int64N(n-lo)
	b := a + 1 + g.rng.Int64N(5)
	loc := &docs.Location{Index: idx, SegmentId: segID, TabId: t.ID}
	r := &docs.Range{StartIndex: a, EndIndex: b, SegmentId: segID, TabId: t.ID}
	words := []string{"a", "bc\n", "\n", "😀", "x y", "\n\n", "\tsub\n", "\t\tdeep\n"}
	cell := func() *docs.TableCellLocation {
		ts := g.tableStarts(s)
		if len(ts) == 0 {
			return &docs.TableCellLocation{TableStartLocation: &docs.Location{Index: idx, SegmentId: segID, TabId: t.ID}}
		}
		return &docs.TableCellLocation{TableStartLocation: &docs.Location{Index: ts[g.pick(len(ts))], SegmentId: segID, TabId: t.ID},
			RowIndex: g.rng.Int64N(3), ColumnIndex: g.rng.Int64N(3)}
	}
	presets := []string{"BULLET_DISC_CIRCLE_SQUARE", "NUMBERED_DECIMAL_ALPHA_ROMAN", "BULLET_CHECKBOX", "NUMBERED_DECIMAL_NESTED"}
	switch g.pick(24) {
	case 0, 1, 2:
		return &docs.Request{InsertText: &docs.InsertTextRequest{Location: loc, Text: words[g.pick(len(words))]}}
	case 3, 4:
		return &docs.Request{DeleteContentRange: &docs.DeleteContentRangeRequest{Range: r}}
	case 5:
		return &docs.Request{InsertTable: &docs.InsertTableRequest{Location: loc, Rows: 1 + g.rng.Int64N(3), Columns: 1 + g.rng.Int64N(3)}}
	case 6:
		return &docs.Request{UpdateTextStyle: &docs.UpdateTextStyleRequest{Range: r, TextStyle: &docs.TextStyle{Bold: g.pick(2) == 0, Italic: g.pick(2) == 0}, Fields: "bold,italic"}}
	case 7:
		return &docs.Request{ReplaceAllText: &docs.ReplaceAllTextRequest{ContainsText: &docs.SubstringMatchCriteria{Text: "a"}, ReplaceText: words[g.pick(len(words))]}}
	case 8:
		return &docs.Request{UpdateParagraphStyle: &docs.UpdateParagraphStyleRequest{Range: r, ParagraphStyle: &docs.ParagraphStyle{NamedStyleType: "HEADING_2"}, Fields: "namedStyleType"}}
	case 9, 10:
		return &docs.Request{CreateParagraphBullets: &docs.CreateParagraphBulletsRequest{Range: r, BulletPreset: presets[g.pick(len(presets))]}}
	case 11:
		return &docs.Request{DeleteParagraphBullets: &docs.DeleteParagraphBulletsRequest{Range: r}}
	case 12:
		return &docs.Request{InsertTableRow: &docs.InsertTableRowRequest{TableCellLocation: cell(), InsertBelow: g.pick(2) == 0}}
	case 13:
		return &docs.Request{InsertTableColumn: &docs.InsertTableColumnRequest{TableCellLocation: cell(), InsertRight: g.pick(2) == 0}}
	case 14:
		return &docs.Request{DeleteTableRow: &docs.DeleteTableRowRequest{TableCellLocation: cell()}}
	case 15:
		return &docs.Request{DeleteTableColumn: &docs.DeleteTableColumnRequest{TableCellLocation: cell()}}
	case 16:
		return &docs.Request{MergeTableCells: &docs.MergeTableCellsRequest{TableRange: &docs.TableRange{TableCellLocation: cell(), RowSpan: 1 + g.rng.Int64N(2), ColumnSpan: 1 + g.rng.Int64N(2)}}}
	case 17:
		if g.pick(2) == 0 {
			return &docs.Request{CreateHeader: &docs.CreateHeaderRequest{Type: "DEFAULT", SectionBreakLocation: &docs.Location{TabId: t.ID}}}
		}
		return &docs.Request{CreateFooter: &docs.CreateFooterRequest{Type: "DEFAULT", SectionBreakLocation: &docs.Location{TabId: t.ID}}}
	case 18:
		for id := range t.Headers {
			if g.pick(2) == 0 {
				return &docs.Request{DeleteHeader: &docs.DeleteHeaderRequest{HeaderId: id, TabId: t.ID}}
			}
		}
		for id := range t.Footers {
			return &docs.Request{DeleteFooter: &docs.DeleteFooterRequest{FooterId: id, TabId: t.ID}}
		}
		return &docs.Request{DeleteHeader: &docs.DeleteHeaderRequest{HeaderId: "kix.none", TabId: t.ID}}
	case 19:
		return &docs.Request{CreateFootnote: &docs.CreateFootnoteRequest{Location: loc}}
	case 20:
		if g.pick(3) == 0 && len(g.d.Tabs) > 1 {
			return &docs.Request{DeleteTab: &docs.DeleteTabRequest{TabId: g.d.Tabs[g.pick(len(g.d.Tabs))].ID}}
		}
		parent := ""
		if g.pick(2) == 0 {
			parent = t.ID
		}
		return &docs.Request{AddDocumentTab: &docs.AddDocumentTabRequest{TabProperties: &docs.TabProperties{Title: "T", ParentTabId: parent}}}
	case 21:
		return &docs.Request{InsertInlineImage: &docs.InsertInlineImageRequest{Location: loc, Uri: "https://www.example.com/i.png"}}
	case 22:
		if g.pick(2) == 0 {
			return &docs.Request{InsertSectionBreak: &docs.InsertSectionBreakRequest{Location: loc, SectionType: "NEXT_PAGE"}}
		}
		return &docs.Request{InsertPageBreak: &docs.InsertPageBreakRequest{Location: loc}}
	}
	return &docs.Request{CreateNamedRange: &docs.CreateNamedRangeRequest{Name: "r", Range: r}}
}

// fingerprint serializes the whole model deeply (every item, attrs and
// props by value, named ranges, lists, styles), so that a refused batch
// that changed anything reachable from the document shows.
func fingerprint(d *document) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s|%s|%d\n", d.ID, d.Title, d.nextID)
	for _, t := range d.Tabs {
		ds, _ := json.Marshal(t.DocStyle)
		fmt.Fprintf(&b, "tab %s %s %s %s %s %s %v %s\n", t.ID, t.Title, t.ParentID, t.IconEmoji, t.DefaultHeaderID, t.DefaultFooterID, t.Lists, ds)
		for _, id := range append([]string{""}, sortedSegmentIDs(t)...) {
			s, _ := t.segment(id)
			fmt.Fprintf(&b, "seg %s %v\n", id, s.ranges)
			for _, it := range s.items {
				fmt.Fprintf(&b, "%d %d %v %v", it.k, it.u, it.ts, it.ps)
				if it.x != nil {
					p, _ := json.Marshal(it.x.p)
					fmt.Fprintf(&b, " %s %s", it.x.ref, p)
				}
				b.WriteByte('\n')
			}
		}
	}
	return b.String()
}

// checkIndices walks rendered content: elements, paragraph elements, rows
// and cells follow each other without gaps and end at the segment's length.
func checkIndices(content []*docs.StructuralElement, n int) error {
	next := int64(0)
	var walk func([]*docs.StructuralElement) error
	walk = func(els []*docs.StructuralElement) error {
		for _, el := range els {
			if el.StartIndex != next {
				return fmt.Errorf("element at %d, want %d", el.StartIndex, next)
			}
			switch {
			case el.Paragraph != nil:
				for _, pe := range el.Paragraph.Elements {
					if pe.StartIndex != next || pe.EndIndex <= pe.StartIndex {
						return fmt.Errorf("paragraph element %d-%d, want start %d", pe.StartIndex, pe.EndIndex, next)
					}
					next = pe.EndIndex
				}
			case el.Table != nil:
				next++
				for _, r := range el.Table.TableRows {
					if r.StartIndex != next {
						return fmt.Errorf("row at %d, want %d", r.StartIndex, next)
					}
					next++
					for _, c := range r.TableCells {
						if c.StartIndex != next {
							return fmt.Errorf("cell at %d, want %d", c.StartIndex, next)
						}
						next++
						if err := walk(c.Content); err != nil {
							return err
						}
						if c.EndIndex != next {
							return fmt.Errorf("cell ends at %d, content at %d", c.EndIndex, next)
						}
					}
				}
				next++
			default:
				next = el.EndIndex
			}
			if el.EndIndex != next {
				return fmt.Errorf("element %d-%d, content ends at %d", el.StartIndex, el.EndIndex, next)
			}
		}
		return nil
	}
	if err := walk(content); err != nil {
		return err
	}
	if next != int64(n) {
		return fmt.Errorf("rendered end %d, %d items", next, n)
	}
	return nil
}

// checkDocument is the property every accepted batch must keep: valid
// segments, contiguous rendered indices, and DocMD that parses with every
// block's range equal to the document's own.
func checkDocument(d *document) error {
	for _, t := range d.Tabs {
		r := newRenderer(t)
		for id, s := range allSegments(t) {
			if err := checkSegment(s, id == ""); err != nil {
				return fmt.Errorf("tab %s segment %q: %w", t.ID, id, err)
			}
			if err := checkIndices(r.segment(s), len(s.items)); err != nil {
				return fmt.Errorf("tab %s segment %q: %w", t.ID, id, err)
			}
		}
	}
	return checkDocMD(d)
}

// TestPropertyRandomBatches applies random request sequences (text, tables
// and their rows/columns/merges, bullets, headers/footers/footnotes, tabs,
// images, breaks, named ranges): every accepted batch keeps the property;
// every refused one leaves the document as it was.
func TestPropertyRandomBatches(t *testing.T) {
	kinds := map[string]int{}
	for seed := uint64(0); seed < 40; seed++ {
		g := &gen{rng: rand.New(rand.NewPCG(seed, 11)), d: &document{ID: "doc-property", Tabs: []*tab{newTab("t.0", "Tab 1")}}}
		accepted := 0
		for step := 0; step < 80; step++ {
			before := fingerprint(g.d)
			req := g.request()
			nd, replies, err := applyBatch(g.d, []*docs.Request{req})
			if err != nil {
				if fingerprint(g.d) != before {
					t.Fatalf("seed %d step %d: refused batch changed the document", seed, step)
				}
				continue
			}
			if len(replies) != 1 {
				t.Fatalf("seed %d: %d replies", seed, len(replies))
			}
			accepted++
			kinds[requestType(req)]++
			g.d = nd
			if err := checkDocument(g.d); err != nil {
				b, _ := json.Marshal(req)
				t.Fatalf("seed %d step %d after %s: %v", seed, step, b, err)
			}
		}
		if accepted < 15 {
			t.Fatalf("seed %d: only %d requests accepted: the generator is too weak", seed, accepted)
		}
	}
	// Every kind of request must have been accepted at least a few times,
	// else the property says nothing about it.
	for _, k := range []string{"insertText", "deleteContentRange", "insertTable", "createParagraphBullets", "deleteParagraphBullets",
		"insertTableRow", "insertTableColumn", "deleteTableRow", "deleteTableColumn", "mergeTableCells", "createHeader", "createFooter",
		"deleteHeader", "deleteFooter", "createFootnote", "addDocumentTab", "deleteTab", "insertInlineImage", "insertSectionBreak",
		"insertPageBreak", "createNamedRange", "replaceAllText", "updateTextStyle", "updateParagraphStyle"} {
		if kinds[k] < 3 {
			t.Errorf("%s accepted %d times", k, kinds[k])
		}
	}
	t.Logf("accepted: %v", kinds)
}

// FuzzApplyBatch feeds arbitrary request JSON to a sample document: the
// emulator never panics (a panic would be a 500), an accepted batch keeps
// the property, a refused one leaves the document unchanged.
func FuzzApplyBatch(f *testing.F) {
	for _, seed := range []string{
		`[{"insertText":{"location":{"index":5},"text":"x\n\ty"}}]`,
		`[{"createParagraphBullets":{"range":{"startIndex":1,"endIndex":60},"bulletPreset":"BULLET_CHECKBOX"}}]`,
		`[{"deleteTableRow":{"tableCellLocation":{"tableStartLocation":{"index":355},"rowIndex":1}}}]`,
		`[{"mergeTableCells":{"tableRange":{"tableCellLocation":{"tableStartLocation":{"index":355}},"rowSpan":2,"columnSpan":3}}}]`,
		`[{"deleteContentRange":{"range":{"startIndex":90,"endIndex":360}}}]`,
		`[{"createFootnote":{"endOfSegmentLocation":{}}},{"insertSectionBreak":{"location":{"index":20},"sectionType":"CONTINUOUS"}}]`,
		`[{"addDocumentTab":{"tabProperties":{"title":"x","parentTabId":"t.0"}}},{"deleteTab":{"tabId":"t.0"}}]`,
		`[{"replaceNamedRangeContent":{"namedRangeName":"n","text":"y"}},{"createNamedRange":{"name":"n","range":{"startIndex":3,"endIndex":9}}}]`,
		`[{"updateTableCellStyle":{"tableStartLocation":{"index":355},"tableCellStyle":{"paddingTop":{"magnitude":3,"unit":"PT"}},"fields":"*"}}]`,
	} {
		f.Add(seed)
	}
	base := samplePlan()
	f.Fuzz(func(t *testing.T, raw string) {
		var reqs []*docs.Request
		if json.Unmarshal([]byte(raw), &reqs) != nil || len(reqs) == 0 || len(reqs) > 20 {
			return
		}
		before := fingerprint(base)
		nd, replies, err := applyBatch(base, reqs)
		if fingerprint(base) != before {
			t.Fatal("the batch changed the original document")
		}
		if err != nil {
			return
		}
		if len(replies) != len(reqs) {
			t.Fatalf("%d replies for %d requests", len(replies), len(reqs))
		}
		if err := checkDocument(nd); err != nil {
			t.Fatal(err)
		}
	})
}
