package google

import (
	"fmt"
	"strings"
	"testing"

	docs "google.golang.org/api/docs/v1"

	"github.com/auditrail/auditrail/toolrunner/toolkits/docs/docmd"
	"github.com/auditrail/auditrail/toolrunner/toolkits/docs/docmd/docmdtest"
)

// checkDocMD renders the document as documents.get answers it (with tabs),
// renders that as DocMD, parses it back and checks that every block of
// every segment of every tab has the document's own range and text.
func checkDocMD(d *document) error {
	api := render(d, true)
	out, err := docmd.Render(api, docmd.Options{})
	if err != nil {
		return fmt.Errorf("render: %w", err)
	}
	p, err := docmd.Parse(out)
	if err != nil {
		return fmt.Errorf("parse: %w\n%s", err, out)
	}
	var tabs []*docs.Tab
	var walk func([]*docs.Tab)
	walk = func(ts []*docs.Tab) {
		for _, t := range ts {
			tabs = append(tabs, t)
			walk(t.ChildTabs)
		}
	}
	walk(api.Tabs)
	if len(p.Sections) != len(tabs) {
		return fmt.Errorf("%d sections, %d tabs", len(p.Sections), len(tabs))
	}
	for k, t := range tabs {
		sec := p.Sections[k]
		if sec.TabID != t.TabProperties.TabId || sec.Title != t.TabProperties.Title || sec.ParentID != t.TabProperties.ParentTabId {
			return fmt.Errorf("section %d: %q %q %q, tab %+v", k, sec.TabID, sec.Title, sec.ParentID, t.TabProperties)
		}
		dt := t.DocumentTab
		want := map[string][]*docs.StructuralElement{"body/": dt.Body.Content}
		for id, h := range dt.Headers {
			want["header/"+id] = h.Content
		}
		for id, f := range dt.Footers {
			want["footer/"+id] = f.Content
		}
		for id, f := range dt.Footnotes {
			want["footnote/"+id] = f.Content
		}
		if len(sec.Segments) != len(want) {
			return fmt.Errorf("tab %s: %d segments, want %d", sec.TabID, len(sec.Segments), len(want))
		}
		for _, seg := range sec.Segments {
			content, ok := want[seg.Kind+"/"+seg.ID]
			if !ok {
				return fmt.Errorf("tab %s: unexpected segment %s/%s", sec.TabID, seg.Kind, seg.ID)
			}
			got := make([]docmdtest.Block, len(seg.Blocks))
			for i, b := range seg.Blocks {
				typ := b.Type
				if docmd.IsTextType(typ) {
					typ = "P"
				}
				got[i] = docmdtest.Block{Type: typ, Start: b.Start, End: b.End, Text: b.Text}
			}
			if err := docmdtest.Compare(got, docmdtest.Expected(content)); err != nil {
				return fmt.Errorf("tab %s segment %s/%s: %w\n%s", sec.TabID, seg.Kind, seg.ID, err, out)
			}
		}
	}
	return nil
}

func TestSampleDocuments(t *testing.T) {
	samples := sampleDocuments()
	if len(samples) < 3 || len(samples) > 4 {
		t.Fatalf("%d samples", len(samples))
	}
	byTitle := map[string]*document{}
	for _, d := range samples {
		byTitle[d.Title] = d
		t.Run(d.Title, func(t *testing.T) {
			for _, tb := range d.Tabs {
				for id, s := range allSegments(tb) {
					if err := checkSegment(s, id == ""); err != nil {
						t.Fatalf("tab %s segment %q: %v", tb.ID, id, err)
					}
				}
			}
			if err := checkDocMD(d); err != nil {
				t.Fatal(err)
			}
		})
	}
	// What each sample is there to show.
	plan, err := docmd.Render(render(byTitle["Apollo launch plan"], true), docmd.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{" TITLE]", " SUBTITLE]", " HEADING_1]", " HEADING_2]", " HEADING_3]", " ORDERED list=", "level=2",
		" BULLET list=", " TABLE rows=3 cols=3]", "{FOOTNOTE_REF ", "{INLINE_IMAGE ", "@segment header", "@segment footer",
		"@segment footnote", "bold:", "italic:", "link="} {
		if !strings.Contains(plan, want) {
			t.Errorf("plan lacks %q:\n%s", want, plan)
		}
	}
	notes := render(byTitle["Weekly sync — meeting notes"], true)
	if len(notes.Tabs) != 1 || len(notes.Tabs[0].ChildTabs) != 1 || notes.Tabs[0].ChildTabs[0].TabProperties.NestingLevel != 1 {
		t.Fatalf("meeting notes tabs: %+v", notes.Tabs)
	}
	nm, _ := docmd.Render(notes, docmd.Options{})
	for _, want := range []string{"{PERSON ", "{DATE ", "text=2026-11-16", "parent=t.0"} {
		if !strings.Contains(nm, want) {
			t.Errorf("meeting notes lack %q:\n%s", want, nm)
		}
	}
	ob := byTitle["O'Brien's notes"]
	if ob == nil || !strings.Contains(string(utf16Runes(ob.Tabs[0].Body)), `C:\Users\obrien`) {
		t.Fatal("O'Brien's notes: no backslash in the body")
	}
	tr := render(byTitle["Travel notes 🌏 旅行メモ"], false)
	for _, el := range tr.Body.Content {
		if el.Paragraph != nil && strings.Contains(el.Paragraph.Elements[0].TextRun.Content, "東京での会議") {
			// 😀-class characters are two UTF-16 units: "🎫" and "🔌" add 4 units over their rune count.
			text := ""
			for _, e := range el.Paragraph.Elements {
				text += e.TextRun.Content
			}
			if got, want := el.EndIndex-el.StartIndex, int64(len([]rune(text))+2); got != want {
				t.Fatalf("CJK/emoji paragraph spans %d units, want %d", got, want)
			}
		}
	}
}

func utf16Runes(s *segment) []rune {
	u := s.units()
	out := make([]rune, len(u))
	for i, c := range u {
		out[i] = rune(c)
	}
	return out
}
