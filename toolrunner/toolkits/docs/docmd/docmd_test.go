package docmd

import (
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/auditrail/auditrail/toolrunner/toolkits/docs/docmd/docmdtest"
	docs "google.golang.org/api/docs/v1"
)

var update = flag.Bool("update", false, "rewrite golden files")

func loadDoc(t testing.TB, name string) *docs.Document {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	var d docs.Document
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatal(err)
	}
	return &d
}

func TestRenderGolden(t *testing.T) {
	tests := []struct {
		fixture, golden string
		opts            Options
	}{
		{"kitchen_sink", "kitchen_sink.docmd", Options{}},
		{"tabs", "tabs.docmd", Options{}},
		{"tabs", "tabs_child.docmd", Options{TabID: "t.child"}},
		{"lists", "lists.docmd", Options{}},
		{"emulator", "emulator.docmd", Options{}},
	}
	for _, tc := range tests {
		t.Run(tc.golden, func(t *testing.T) {
			got, err := Render(loadDoc(t, tc.fixture), tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join("testdata", tc.golden)
			if *update {
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if got != string(want) {
				t.Errorf("render differs from %s:\n%s", path, got)
			}
		})
	}
}

// checkSegment checks a parsed segment against the blocks its API content
// defines (docmdtest's oracle, shared with the Google emulator's tests).
func checkSegment(t *testing.T, name string, seg Segment, content []*docs.StructuralElement) {
	t.Helper()
	got := make([]docmdtest.Block, len(seg.Blocks))
	for i, b := range seg.Blocks {
		typ := b.Type
		if IsTextType(typ) {
			typ = "P"
		}
		got[i] = docmdtest.Block{Type: typ, Start: b.Start, End: b.End, Text: b.Text}
	}
	if err := docmdtest.Compare(got, docmdtest.Expected(content)); err != nil {
		t.Errorf("%s: %v", name, err)
	}
}

func TestRoundTripRanges(t *testing.T) {
	d := loadDoc(t, "kitchen_sink")
	out, err := Render(d, Options{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := Parse(out)
	if err != nil {
		t.Fatal(err)
	}
	if p.DocumentID != d.DocumentId || p.Title != d.Title || p.RevisionID != d.RevisionId {
		t.Errorf("header = %q %q %q", p.DocumentID, p.Title, p.RevisionID)
	}
	segs := p.Sections[0].Segments
	if len(segs) != 4 {
		t.Fatalf("segments = %d, want body, header, footer, footnote", len(segs))
	}
	checkSegment(t, "body", segs[0], d.Body.Content)
	checkSegment(t, "header", segs[1], d.Headers["kix.hdr1"].Content)
	checkSegment(t, "footer", segs[2], d.Footers["kix.ftr1"].Content)
	checkSegment(t, "footnote", segs[3], d.Footnotes["kix.fn1"].Content)
	if segs[1].Kind != "header" || segs[1].ID != "kix.hdr1" || segs[3].Kind != "footnote" || segs[3].ID != "kix.fn1" {
		t.Errorf("segment ids: %+v %+v", segs[1], segs[3])
	}

	byText := map[string]Block{}
	for _, b := range segs[0].Blocks {
		byText[b.Text] = b
	}
	// Emoji: surrogate pairs count 2; the bold run covers the whole paragraph, newline included.
	em := byText["Emoji 😀 and 👍🏽 count two each"]
	if em.End-em.Start != int64(len("Emoji  and  count two each"))+2+4+1 {
		t.Errorf("emoji block %d-%d", em.Start, em.End)
	}
	if len(em.Styles) != 1 || em.Styles[0].Style != "bold" || em.Styles[0].Start != em.Start || em.Styles[0].End != em.End {
		t.Errorf("emoji styles = %+v", em.Styles)
	}
	if b := byText["one"]; b.Type != "ORDERED" || b.Attrs["level"] != "0" || b.Attrs["list"] != "kix.num" {
		t.Errorf("ordered item = %+v", b)
	}
	if b := byText["nested"]; b.Type != "BULLET" || b.Attrs["level"] != "1" {
		t.Errorf("nested bullet = %+v", b)
	}
	if b := byText["Numbered heading"]; b.Type != "ORDERED" || b.Attrs["heading"] != "HEADING_2" {
		t.Errorf("numbered heading = %+v", b)
	}
	if b := byText["[not an annotation] {braces} back\\slash\vsoft break"]; b.ID == "" {
		t.Errorf("escaped text did not round-trip")
	}
	if b := byText["@not a directive"]; b.ID == "" {
		t.Errorf("@ text did not round-trip")
	}
	var styled Block
	for _, b := range segs[0].Blocks {
		if strings.HasPrefix(b.Text, "Bold and Times") {
			styled = b
		}
	}
	fonts := 0
	for _, s := range styled.Styles {
		if s.Style == "font" && s.Value == "Times New Roman" {
			fonts++
		}
		if s.Style == "fg" && s.Value != "#ff0000" {
			t.Errorf("fg = %q", s.Value)
		}
		if s.Style == "link" && s.Value != "https://example.com/a b?x=\"1\"" {
			t.Errorf("link = %q", s.Value)
		}
	}
	if fonts != 1 {
		t.Errorf("styles = %+v", styled.Styles)
	}
	// Non-text elements: every kind, each one index unit, in order.
	var kinds []string
	for _, b := range segs[0].Blocks {
		for _, e := range b.Elements {
			if e.End-e.Start != 1 {
				t.Errorf("element %s %d-%d", e.Type, e.Start, e.End)
			}
			kinds = append(kinds, e.Type)
		}
	}
	if got := strings.Join(kinds, ","); got != "INLINE_IMAGE,FOOTNOTE_REF,PAGE_BREAK,PERSON,DATE,RICH_LINK,HORIZONTAL_RULE,COLUMN_BREAK,EQUATION" {
		t.Errorf("elements = %s", got)
	}
	// Cells exclude their marker and carry the table start.
	for _, b := range segs[0].Blocks {
		if b.Type == "CELL" && b.Attrs["row"] == "1" && b.Attrs["col"] == "1" {
			next := segs[0].Blocks[indexOf(segs[0].Blocks, b.ID)+1]
			if next.Start != b.Start || next.Text != "表" {
				t.Errorf("cell %+v then %+v", b, next)
			}
		}
	}
}

func indexOf(bs []Block, id string) int {
	for i, b := range bs {
		if b.ID == id {
			return i
		}
	}
	return -1
}

func TestTabsDepthFirst(t *testing.T) {
	d := loadDoc(t, "tabs")
	out, err := Render(d, Options{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := Parse(out)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, s := range p.Sections {
		ids = append(ids, s.TabID)
	}
	if strings.Join(ids, ",") != "t.0,t.child,t.1" {
		t.Fatalf("tabs = %v", ids)
	}
	if p.Sections[1].ParentID != "t.0" || p.Sections[1].Level != 1 || p.Sections[2].Title != "Second \"quoted\"" || p.Sections[2].Index != 1 {
		t.Errorf("sections = %+v", p.Sections)
	}
	checkSegment(t, "t.child", p.Sections[1].Segments[0], d.Tabs[0].ChildTabs[0].DocumentTab.Body.Content)
	if _, err := Render(d, Options{TabID: "t.nope"}); !errors.Is(err, ErrTabNotFound) {
		t.Errorf("unknown tab: %v", err)
	}
}

// shift moves every index of content by delta, as an insertion of delta units before it would.
func shift(content []*docs.StructuralElement, delta int64) {
	for _, se := range content {
		se.StartIndex += delta
		se.EndIndex += delta
		if se.Paragraph != nil {
			for _, e := range se.Paragraph.Elements {
				e.StartIndex += delta
				e.EndIndex += delta
			}
		}
		if se.Table != nil {
			for _, r := range se.Table.TableRows {
				r.StartIndex += delta
				r.EndIndex += delta
				for _, c := range r.TableCells {
					c.StartIndex += delta
					c.EndIndex += delta
					shift(c.Content, delta)
				}
			}
		}
	}
}

func TestBlockIDsStable(t *testing.T) {
	before := loadDoc(t, "kitchen_sink")
	after := loadDoc(t, "kitchen_sink")
	// Insert "Intro\n" as a new paragraph right after the section break.
	shift(after.Body.Content[1:], 6)
	intro := &docs.StructuralElement{StartIndex: 1, EndIndex: 7, Paragraph: &docs.Paragraph{
		Elements:       []*docs.ParagraphElement{{StartIndex: 1, EndIndex: 7, TextRun: &docs.TextRun{Content: "Intro\n"}}},
		ParagraphStyle: &docs.ParagraphStyle{NamedStyleType: "NORMAL_TEXT"},
	}}
	after.Body.Content = append([]*docs.StructuralElement{after.Body.Content[0], intro}, after.Body.Content[1:]...)
	pb, pa := mustParse(t, before), mustParse(t, after)
	old := map[string]bool{}
	for _, b := range pb.Sections[0].Segments[0].Blocks {
		old[b.ID] = true
	}
	kept := 0
	for _, b := range pa.Sections[0].Segments[0].Blocks {
		if old[b.ID] {
			kept++
		} else if b.Text != "Intro" {
			t.Errorf("block %s %q changed id", b.ID, b.Text)
		}
	}
	if kept != len(old) {
		t.Errorf("kept %d of %d ids", kept, len(old))
	}
}

func mustParse(t *testing.T, d *docs.Document) *Doc {
	t.Helper()
	out, err := Render(d, Options{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := Parse(out)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestParseRejects(t *testing.T) {
	tests := []struct{ name, in string }{
		{"no header", "[p1 0-1 PARAGRAPH]\n\n"},
		{"block outside segment", "@docmd 1\n[p1 1-2 PARAGRAPH]\n\n"},
		{"missing text line", "@docmd 1\n@segment body\n[p1 1-3 PARAGRAPH]"},
		{"length mismatch", "@docmd 1\n@segment body\n[p1 1-3 PARAGRAPH]\nabc\n"},
		{"surrogate counted once", "@docmd 1\n@segment body\n[p1 1-3 PARAGRAPH]\n😀\n"},
		{"span outside block", "@docmd 1\n@segment body\n[p1 1-3 PARAGRAPH styles=bold:1-9]\nab\n"},
		{"inverted range", "@docmd 1\n@segment body\n[p1 3-1 PARAGRAPH]\n\n"},
		{"unknown type", "@docmd 1\n@segment body\n[p1 1-2 BANNER]\n\n"},
		{"stray text", "@docmd 1\n@segment body\nhello\n"},
		{"bad escape", "@docmd 1\n@segment body\n[p1 1-3 PARAGRAPH]\n\\q\n"},
		{"element gap", "@docmd 1\n@segment body\n[p1 1-4 PARAGRAPH]\na{PAGE_BREAK 3-4}\n"},
		{"body with id", "@docmd 1\n@segment body id=x\n"},
		{"unterminated quote", "@docmd 1\n@title \"abc\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := Parse(tc.in); !errors.Is(err, ErrSyntax) {
				t.Errorf("Parse = %v, want ErrSyntax", err)
			}
		})
	}
	if _, err := Parse("@docmd 1\n@segment body\n[p1 1-4 PARAGRAPH]\n😀\n"); err != nil {
		t.Errorf("surrogate pair counting 2: %v", err)
	}
}

func FuzzParse(f *testing.F) {
	for _, name := range []string{"kitchen_sink", "tabs"} {
		out, err := Render(loadDoc(f, name), Options{})
		if err != nil {
			f.Fatal(err)
		}
		f.Add(out)
	}
	f.Add("@docmd 1\n@segment body\n[p1 1-4 PARAGRAPH]\n😀\n")
	f.Fuzz(func(t *testing.T, s string) {
		d, err := Parse(s)
		if err != nil {
			return
		}
		for _, sec := range d.Sections {
			for _, seg := range sec.Segments {
				for _, b := range seg.Blocks {
					if b.Start > b.End {
						t.Fatalf("inverted block %+v", b)
					}
					for _, sp := range b.Styles {
						if sp.Start < b.Start || sp.End > b.End || sp.Start > sp.End {
							t.Fatalf("span %+v outside %+v", sp, b)
						}
					}
					if IsTextType(b.Type) && utf16Len(b.Text) > b.End-b.Start {
						t.Fatalf("text longer than block %+v", b)
					}
				}
			}
		}
	})
}

// TestListKinds: lists.json comes from the Google emulator (one list per
// preset, three nesting levels); a numbered preset's items are ORDERED,
// every bulleted one's (checkbox included) BULLET.
func TestListKinds(t *testing.T) {
	p := mustParse(t, loadDoc(t, "lists"))
	preset, n := "", 0
	for _, b := range p.Sections[0].Segments[0].Blocks {
		switch {
		case b.Type == "HEADING_3":
			preset = b.Text
		case b.Type == "BULLET" || b.Type == "ORDERED":
			n++
			want := "BULLET"
			if strings.HasPrefix(preset, "NUMBERED_") {
				want = "ORDERED"
			}
			if b.Type != want {
				t.Errorf("%s item %q is %s, want %s", preset, b.Text, b.Type, want)
			}
		}
	}
	if n != 18 {
		t.Fatalf("%d list items, want 18", n)
	}
}

// TestEmulatorElements: emulator.json is a documents.get answer of the Google
// emulator holding every element kind its requests create (person and date
// chips, an inline image, a footnote, a table with a pinned header row and a
// 2x2 merge, a second section, a header, a child tab).
func TestEmulatorElements(t *testing.T) {
	d := loadDoc(t, "emulator")
	out, err := Render(d, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"{PERSON ", "{DATE ", "{INLINE_IMAGE ", "{FOOTNOTE_REF ", " row=0 header=true]",
		" row=1 col=0 rowspan=2 colspan=2]", " row=1 col=1 merged=true]", " row=2 col=0 merged=true]", " row=2 col=1 merged=true]",
		"@segment header", "@segment footnote", "parent=t.0"} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in\n%s", want, out)
		}
	}
	if strings.Contains(out, " row=2 col=2 merged") {
		t.Error("a cell outside the merge is marked merged")
	}
	p := mustParse(t, d)
	sections := 0
	for _, b := range p.Sections[0].Segments[0].Blocks {
		if b.Type == "SECTION_BREAK" {
			sections++
		}
	}
	if sections != 2 {
		t.Errorf("%d section breaks, want 2", sections)
	}
	checkSegment(t, "body", p.Sections[0].Segments[0], d.Tabs[0].DocumentTab.Body.Content)
}
