package docs

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
)

// reqJSON answers the requests as compact JSON lines.
func reqJSON(t *testing.T, md string) []string {
	t.Helper()
	var out []string
	for _, r := range markdownRequests(md) {
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, string(b))
	}
	return out
}

// TestMarkdownRequests: the requests CreateDocumentFromText sends for each
// construct — text from index 1 without the last newline (the document has
// it), heading styles, emphasis runs, and bullets from the last list to the
// first with one leading tab per nesting level.
func TestMarkdownRequests(t *testing.T) {
	tests := []struct {
		name, md string
		want     []string
	}{
		{"empty", "", nil},
		{"paragraph", "Hello world", []string{`{"insertText":{"location":{"index":1},"text":"Hello world"}}`}},
		{"headings", "# A\n###### F\nx", []string{
			`{"insertText":{"location":{"index":1},"text":"A\nF\nx"}}`,
			`{"updateParagraphStyle":{"fields":"namedStyleType","paragraphStyle":{"namedStyleType":"HEADING_1"},"range":{"endIndex":3,"startIndex":1}}}`,
			`{"updateParagraphStyle":{"fields":"namedStyleType","paragraphStyle":{"namedStyleType":"HEADING_6"},"range":{"endIndex":5,"startIndex":3}}}`,
		}},
		{"emphasis in UTF-16", "😀 **b** *i* ***bi***", []string{
			`{"insertText":{"location":{"index":1},"text":"😀 b i bi"}}`,
			`{"updateTextStyle":{"fields":"bold","range":{"endIndex":5,"startIndex":4},"textStyle":{"bold":true}}}`,
			`{"updateTextStyle":{"fields":"bold","range":{"endIndex":10,"startIndex":8},"textStyle":{"bold":true}}}`,
			`{"updateTextStyle":{"fields":"italic","range":{"endIndex":7,"startIndex":6},"textStyle":{"italic":true}}}`,
			`{"updateTextStyle":{"fields":"italic","range":{"endIndex":10,"startIndex":8},"textStyle":{"italic":true}}}`,
		}},
		{"nested lists", "- a\n  - b\n    - c\n\n1. x\n   1. y\n", []string{
			`{"insertText":{"location":{"index":1},"text":"a\n\tb\n\t\tc\nx\n\ty"}}`,
			`{"createParagraphBullets":{"bulletPreset":"NUMBERED_DECIMAL_ALPHA_ROMAN","range":{"endIndex":15,"startIndex":10}}}`,
			`{"createParagraphBullets":{"bulletPreset":"BULLET_DISC_CIRCLE_SQUARE","range":{"endIndex":10,"startIndex":1}}}`,
		}},
		{"leading tab in an item is not a level", "- \tx", []string{
			`{"insertText":{"location":{"index":1},"text":"x"}}`,
			`{"createParagraphBullets":{"bulletPreset":"BULLET_DISC_CIRCLE_SQUARE","range":{"endIndex":3,"startIndex":1}}}`,
		}},
		{"links: http(s) and mailto only", "[site](https://example.com/a) <b@example.com> [js](javascript:alert(1))", []string{
			`{"insertText":{"location":{"index":1},"text":"site b@example.com js"}}`,
			`{"updateTextStyle":{"fields":"link","range":{"endIndex":5,"startIndex":1},"textStyle":{"link":{"url":"https://example.com/a"}}}}`,
			`{"updateTextStyle":{"fields":"link","range":{"endIndex":19,"startIndex":6},"textStyle":{"link":{"url":"mailto:b@example.com"}}}}`,
		}},
		{"escapes and references resolved, code spans literal", "a \\*b\\* Tom &amp; Jerry &copy; &#35; `x \\* &amp;`", []string{
			`{"insertText":{"location":{"index":1},"text":"a *b* Tom \u0026 Jerry © # x \\* \u0026amp;"}}`,
		}},
		{"code block as is", "```\nfunc f() {}\n```\n", []string{`{"insertText":{"location":{"index":1},"text":"func f() {}"}}`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := reqJSON(t, tc.md)
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}

var listIDs = regexp.MustCompile(`list=\S+`)

var blockID = regexp.MustCompile(`(?m)^\[[^ \]]+ `)

// stripIDs removes block ids and the header from DocMD.
func stripIDs(md string) string {
	var lines []string
	for _, l := range strings.Split(md, "\n") {
		if strings.HasPrefix(l, "@") {
			continue
		}
		lines = append(lines, l)
	}
	return blockID.ReplaceAllString(strings.Join(lines, "\n"), "[")
}

// TestMarkdownToDocMD: markdown → CreateDocumentFromText → the document's
// DocMD shows every heading level and the emphasis where it was.
func TestMarkdownToDocMD(t *testing.T) {
	e := newEnv(t)
	md := "# H1\n## H2\n### H3\n#### H4\n##### H5\n###### H6\n\nSome **bold** and *italic* and ***both***.\n\n" +
		"- one\n- **two**\n  - nested\n    - deeper\n\n1. first\n2. second\n   1. sub\n"
	before := e.sent.count(":batchUpdate")
	id := obj(t, e.ok(t, "CreateDocumentFromText", map[string]any{"title": "MD", "text_content": md}))["documentId"].(string)
	if n := e.sent.count(":batchUpdate") - before; n != 1 {
		t.Errorf("%d batchUpdate calls, want one", n)
	}
	got := listIDs.ReplaceAllString(stripIDs(e.docmdOf(t, id)), "list=L")
	want := `[0-1 SECTION_BREAK]
[1-4 HEADING_1]
H1
[4-7 HEADING_2]
H2
[7-10 HEADING_3]
H3
[10-13 HEADING_4]
H4
[13-16 HEADING_5]
H5
[16-19 HEADING_6]
H6
[19-50 PARAGRAPH styles=bold:24-28,italic:33-39,bold:44-48,italic:44-48]
Some bold and italic and both.
[50-54 BULLET list=L level=0]
one
[54-58 BULLET list=L level=0 styles=bold:54-57]
two
[58-65 BULLET list=L level=1]
nested
[65-72 BULLET list=L level=2]
deeper
[72-78 ORDERED list=L level=0]
first
[78-85 ORDERED list=L level=0]
second
[85-89 ORDERED list=L level=1]
sub
`
	if !strings.Contains(got, want) {
		t.Errorf("DocMD\n%s\nwant it to contain\n%s", got, want)
	}
}
