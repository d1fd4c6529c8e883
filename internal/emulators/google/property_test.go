package google

import (
	"math/rand/v2"
	"testing"

	docs "google.golang.org/api/docs/v1"
)

// randomRequest answers a request that is valid for d's first tab body, or
// one that may be invalid (the batch must then leave d unchanged).
func randomRequest(rng *rand.Rand, s *segment) *docs.Request {
	n := int64(len(s.items))
	idx := 1 + rng.Int64N(n-1)
	a := 1 + rng.Int64N(n-1)
	b := a + 1 + rng.Int64N(4)
	words := []string{"a", "bc\n", "\n", "😀", "x y", "\n\n"}
	switch rng.IntN(7) {
	case 0, 1:
		return &docs.Request{InsertText: &docs.InsertTextRequest{Location: &docs.Location{Index: idx}, Text: words[rng.IntN(len(words))]}}
	case 2:
		return &docs.Request{DeleteContentRange: &docs.DeleteContentRangeRequest{Range: &docs.Range{StartIndex: a, EndIndex: b}}}
	case 3:
		return &docs.Request{InsertTable: &docs.InsertTableRequest{Location: &docs.Location{Index: idx}, Rows: 1 + rng.Int64N(2), Columns: 1 + rng.Int64N(2)}}
	case 4:
		return &docs.Request{UpdateTextStyle: &docs.UpdateTextStyleRequest{Range: &docs.Range{StartIndex: a, EndIndex: b}, TextStyle: &docs.TextStyle{Bold: rng.IntN(2) == 0}, Fields: "bold"}}
	case 5:
		return &docs.Request{ReplaceAllText: &docs.ReplaceAllTextRequest{ContainsText: &docs.SubstringMatchCriteria{Text: "a"}, ReplaceText: words[rng.IntN(len(words))]}}
	}
	return &docs.Request{UpdateParagraphStyle: &docs.UpdateParagraphStyleRequest{Range: &docs.Range{StartIndex: a, EndIndex: b}, ParagraphStyle: &docs.ParagraphStyle{NamedStyleType: "HEADING_2"}, Fields: "namedStyleType"}}
}

// TestPropertyRandomBatches applies random request sequences: every
// accepted batch leaves valid segments with contiguous rendered indices;
// every refused one leaves the document as it was.
func TestPropertyRandomBatches(t *testing.T) {
	for seed := uint64(0); seed < 40; seed++ {
		rng := rand.New(rand.NewPCG(seed, 11))
		d := &document{ID: "doc-property", Tabs: []*tab{newTab("t.0", "Tab 1")}}
		accepted := 0
		for step := 0; step < 60; step++ {
			before := string(utf16Text(d.Tabs[0].Body))
			nd, replies, err := applyBatch(d, []*docs.Request{randomRequest(rng, d.Tabs[0].Body)})
			if err != nil {
				if after := string(utf16Text(d.Tabs[0].Body)); after != before {
					t.Fatalf("seed %d step %d: refused batch changed the document", seed, step)
				}
				continue
			}
			if len(replies) != 1 {
				t.Fatalf("seed %d: %d replies", seed, len(replies))
			}
			accepted++
			d = nd
			if err := checkSegment(d.Tabs[0].Body, true); err != nil {
				t.Fatalf("seed %d step %d: %v", seed, step, err)
			}
			next := int64(0)
			var walk func([]*docs.StructuralElement)
			walk = func(els []*docs.StructuralElement) {
				for _, el := range els {
					if el.StartIndex != next && el.Table == nil {
						t.Fatalf("seed %d step %d: element at %d, want %d", seed, step, el.StartIndex, next)
					}
					if el.Table != nil {
						for _, r := range el.Table.TableRows {
							for _, c := range r.TableCells {
								next = c.StartIndex + 1
								walk(c.Content)
							}
						}
					}
					next = el.EndIndex
				}
			}
			walk(renderSegment(d.Tabs[0].Body))
			if next != int64(len(d.Tabs[0].Body.items)) {
				t.Fatalf("seed %d step %d: rendered end %d, %d items", seed, step, next, len(d.Tabs[0].Body.items))
			}
		}
		if accepted < 10 {
			t.Fatalf("seed %d: only %d requests accepted: the generator is too weak", seed, accepted)
		}
	}
}

func utf16Text(s *segment) []rune {
	out := make([]rune, 0, len(s.items))
	for _, it := range s.items {
		out = append(out, rune(it.u)+rune(it.k)<<16)
	}
	return out
}
