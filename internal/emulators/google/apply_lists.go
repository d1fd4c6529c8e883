package google

import (
	"fmt"
	"strings"

	docs "google.golang.org/api/docs/v1"
)

// bulletPresets maps each preset to the glyph of its first three nesting
// levels, repeated down to level 8 as Google does: a symbol for bulleted
// lists, a glyph type for numbered ones.
var bulletPresets = map[string]struct {
	symbols [3]string
	types   [3]string
	suffix  string // "." or ")" after the placeholder of numbered lists
	nested  bool   // NUMBERED_DECIMAL_NESTED: "%0.%1."
}{
	"BULLET_DISC_CIRCLE_SQUARE":              {symbols: [3]string{"●", "○", "■"}},
	"BULLET_DIAMONDX_ARROW3D_SQUARE":         {symbols: [3]string{"❖", "➢", "■"}},
	"BULLET_CHECKBOX":                        {symbols: [3]string{}},
	"BULLET_ARROW_DIAMOND_DISC":              {symbols: [3]string{"➔", "◆", "●"}},
	"BULLET_STAR_CIRCLE_SQUARE":              {symbols: [3]string{"★", "○", "■"}},
	"BULLET_ARROW3D_CIRCLE_SQUARE":           {symbols: [3]string{"➢", "○", "■"}},
	"BULLET_LEFTTRIANGLE_DIAMOND_DISC":       {symbols: [3]string{"◀", "◆", "●"}},
	"BULLET_DIAMONDX_HOLLOWDIAMOND_SQUARE":   {symbols: [3]string{"❖", "◇", "■"}},
	"BULLET_DIAMOND_CIRCLE_SQUARE":           {symbols: [3]string{"◆", "○", "■"}},
	"NUMBERED_DECIMAL_ALPHA_ROMAN":           {types: [3]string{"DECIMAL", "ALPHA", "ROMAN"}, suffix: "."},
	"NUMBERED_DECIMAL_ALPHA_ROMAN_PARENS":    {types: [3]string{"DECIMAL", "ALPHA", "ROMAN"}, suffix: ")"},
	"NUMBERED_DECIMAL_NESTED":                {types: [3]string{"DECIMAL", "DECIMAL", "DECIMAL"}, suffix: ".", nested: true},
	"NUMBERED_UPPERALPHA_ALPHA_ROMAN":        {types: [3]string{"UPPER_ALPHA", "ALPHA", "ROMAN"}, suffix: "."},
	"NUMBERED_UPPERROMAN_UPPERALPHA_DECIMAL": {types: [3]string{"UPPER_ROMAN", "UPPER_ALPHA", "DECIMAL"}, suffix: "."},
	"NUMBERED_ZERODECIMAL_ALPHA_ROMAN":       {types: [3]string{"ZERO_DECIMAL", "ALPHA", "ROMAN"}, suffix: "."},
}

// maxNesting is the deepest list level (0..8) Google keeps.
const maxNesting = 8

// listProperties answers the nine nesting levels of a list created with
// preset, shaped as documents.get shows them.
func listProperties(preset string) *docs.ListProperties {
	p := bulletPresets[preset]
	lp := &docs.ListProperties{}
	for lvl := 0; lvl <= maxNesting; lvl++ {
		nl := &docs.NestingLevel{BulletAlignment: "START", StartNumber: 1,
			IndentFirstLine: &docs.Dimension{Magnitude: float64(18 + 36*lvl), Unit: "PT"},
			IndentStart:     &docs.Dimension{Magnitude: float64(36 + 36*lvl), Unit: "PT"},
			TextStyle:       &docs.TextStyle{Underline: false, ForceSendFields: []string{"Underline"}}}
		ph := fmt.Sprintf("%%%d", lvl)
		switch {
		case preset == "BULLET_CHECKBOX":
			nl.GlyphType, nl.GlyphFormat = "GLYPH_TYPE_UNSPECIFIED", ph
		case p.types[0] == "":
			nl.GlyphSymbol, nl.GlyphFormat = p.symbols[lvl%3], ph
		default:
			nl.GlyphType = p.types[lvl%3]
			if nl.GlyphType == "ROMAN" || nl.GlyphType == "UPPER_ROMAN" {
				nl.BulletAlignment = "END"
			}
			if p.nested {
				var b strings.Builder
				for k := 0; k <= lvl; k++ {
					fmt.Fprintf(&b, "%%%d.", k)
				}
				nl.GlyphFormat = b.String()
			} else {
				nl.GlyphFormat = ph + p.suffix
			}
		}
		lp.NestingLevels = append(lp.NestingLevels, nl)
	}
	return lp
}

// resolveTabRange is resolveRange that also answers the range's tab.
func resolveTabRange(d *document, r *docs.Range) (*tab, *segment, int, int, error) {
	s, a, b, err := resolveRange(d, r)
	if err != nil {
		return nil, nil, 0, 0, err
	}
	t, _ := d.tab(r.TabId)
	return t, s, a, b, nil
}

// paragraphEnds answers the index of the '\n' of every paragraph the range
// [a,b) overlaps, in document order.
func paragraphEnds(s *segment, a, b int) []int {
	var ends []int
	for i := a; i < len(s.items); i++ {
		if s.items[i].isNewline() {
			ends = append(ends, i)
			if i >= b-1 {
				break
			}
		}
	}
	return ends
}

// createParagraphBullets makes list items of the paragraphs the range
// overlaps. Leading tabs give each paragraph its nesting level and are
// removed; the paragraphs join the list of the paragraph just before them
// when it uses the same preset, else a new list.
func createParagraphBullets(d *document, r *docs.CreateParagraphBulletsRequest) error {
	t, s, a, b, err := resolveTabRange(d, r.Range)
	if err != nil {
		return err
	}
	if r.BulletPreset == "" || r.BulletPreset == "BULLET_GLYPH_PRESET_UNSPECIFIED" {
		return fmt.Errorf("A bullet preset must be specified.")
	}
	if _, ok := bulletPresets[r.BulletPreset]; !ok {
		return fmt.Errorf("Invalid value at 'bullet_preset': %q", r.BulletPreset)
	}
	if s.items[a].k == kSectionBreak {
		a++
		if a >= b {
			return fmt.Errorf("The range must include at least one paragraph.")
		}
	}
	ends := paragraphEnds(s, a, b)
	first := s.paragraphStart(ends[0])
	listID := ""
	if first > 0 {
		if prev := s.items[first-1].para(); s.items[first-1].isNewline() && prev.ListID != "" && t.Lists[prev.ListID] == r.BulletPreset {
			listID = prev.ListID
		}
	}
	if listID == "" {
		listID = d.newObjectID("kix.")
		t.Lists[listID] = r.BulletPreset
	}
	// Last paragraph first, so that removing tabs keeps earlier indices.
	for k := len(ends) - 1; k >= 0; k-- {
		end := ends[k]
		start := s.paragraphStart(end)
		tabs := 0
		for start+tabs < end && s.items[start+tabs].k == kChar && s.items[start+tabs].u == '\t' {
			tabs++
		}
		if tabs > 0 {
			s.splice(start, start+tabs, nil)
			end -= tabs
		}
		s.items[end].ps = withPara(s.items[end].ps, func(ps *paraStyle) {
			ps.ListID, ps.Nesting = listID, int64(min(tabs, maxNesting))
		})
	}
	return nil
}

// deleteParagraphBullets removes the paragraphs the range overlaps from
// their lists; the start indent of their level is kept on the paragraph,
// so that the nesting stays visible.
func deleteParagraphBullets(d *document, r *docs.DeleteParagraphBulletsRequest) error {
	_, s, a, b, err := resolveTabRange(d, r.Range)
	if err != nil {
		return err
	}
	for _, end := range paragraphEnds(s, a, b) {
		s.items[end].ps = withPara(s.items[end].ps, func(ps *paraStyle) {
			if ps.ListID != "" {
				ps.IndentStartPt, ps.IndentFirstLinePt = float64(36+36*ps.Nesting), float64(36+36*ps.Nesting)
			}
			ps.ListID, ps.Nesting = "", 0
		})
	}
	return nil
}
