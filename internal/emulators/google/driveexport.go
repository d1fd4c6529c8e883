package google

import (
	"html"
	"net/http"
	"strconv"
	"strings"

	docs "google.golang.org/api/docs/v1"
)

// files.export of a Google Doc: GET /drive/v3/files/{id}/export?mimeType=
// text/plain, text/markdown or text/html, rendered from the document as
// documents.get answers it (every tab's body, depth first). The renderings
// follow Google's exports in structure (headings, lists, tables, bold,
// italic, links), not byte for byte.

// exportLimit is Google's export size limit (10 MB).
const exportLimit = 10 << 20

var exportTypes = map[string]func(*docs.Document) string{
	"text/plain":    exportPlain,
	"text/markdown": exportMarkdown,
	"text/html":     exportHTML,
}

// exportFile is GET /drive/v3/files/{id}/export.
func (s *Server) exportFile(w http.ResponseWriter, r *http.Request) {
	g, ok := s.driveAuth(w, r, contentScopes...)
	if !ok {
		return
	}
	mt := r.URL.Query().Get("mimeType")
	if mt == "" {
		driveError(w, http.StatusBadRequest, "required", "Required parameter: mimeType", "mimeType", "parameter")
		return
	}
	conv, known := exportTypes[mt]
	s.mu.Lock()
	f, ok := s.visibleFileLocked(w, r.PathValue("id"), g, true, readContent)
	var d *docs.Document
	if ok {
		if doc, found := s.docs[f.ID]; found {
			d = render(doc, true)
		}
	}
	s.mu.Unlock()
	switch {
	case !ok:
		return
	case !known || d == nil:
		driveError(w, http.StatusBadRequest, "badRequest", "The requested conversion is not supported.", "convertTo", "parameter")
		return
	}
	out := conv(d)
	if len(out) > exportLimit {
		driveError(w, http.StatusForbidden, "exportSizeLimitExceeded", "This file is too large to be exported.", "", "")
		return
	}
	w.Header().Set("Content-Type", mt+"; charset=utf-8")
	w.Header().Set("Content-Length", strconv.Itoa(len(out)))
	_, _ = w.Write([]byte(out))
}

// bodies answers every tab's body content, depth first (the legacy body
// when the document has no tabs).
func bodies(d *docs.Document) [][]*docs.StructuralElement {
	var out [][]*docs.StructuralElement
	var walk func(ts []*docs.Tab)
	walk = func(ts []*docs.Tab) {
		for _, t := range ts {
			if t.DocumentTab != nil && t.DocumentTab.Body != nil {
				out = append(out, t.DocumentTab.Body.Content)
			}
			walk(t.ChildTabs)
		}
	}
	walk(d.Tabs)
	if len(out) == 0 && d.Body != nil {
		out = append(out, d.Body.Content)
	}
	return out
}

// listsOf answers every tab's lists by id.
func listsOf(d *docs.Document) map[string]docs.List {
	m := map[string]docs.List{}
	for id, l := range d.Lists {
		m[id] = l
	}
	var walk func(ts []*docs.Tab)
	walk = func(ts []*docs.Tab) {
		for _, t := range ts {
			if t.DocumentTab != nil {
				for id, l := range t.DocumentTab.Lists {
					m[id] = l
				}
			}
			walk(t.ChildTabs)
		}
	}
	walk(d.Tabs)
	return m
}

// ordered reports whether the list's level is numbered (its glyph type is
// a number or letter sequence; bullets have a glyph symbol instead).
func ordered(lists map[string]docs.List, b *docs.Bullet) bool {
	l, ok := lists[b.ListId]
	if !ok || l.ListProperties == nil || int(b.NestingLevel) >= len(l.ListProperties.NestingLevels) {
		return false
	}
	switch l.ListProperties.NestingLevels[b.NestingLevel].GlyphType {
	case "DECIMAL", "ZERO_DECIMAL", "UPPER_ALPHA", "ALPHA", "UPPER_ROMAN", "ROMAN":
		return true
	}
	return false
}

// paragraphText answers the paragraph's text without its final newline
// (vertical tabs, soft line breaks, as newlines).
func paragraphText(p *docs.Paragraph) string {
	var b strings.Builder
	for _, e := range p.Elements {
		if e.TextRun != nil {
			b.WriteString(e.TextRun.Content)
		}
	}
	return strings.ReplaceAll(strings.TrimSuffix(b.String(), "\n"), "\v", "\n")
}

func cellText(c *docs.TableCell, sep string) string {
	var parts []string
	for _, el := range c.Content {
		if el.Paragraph != nil {
			parts = append(parts, paragraphText(el.Paragraph))
		}
	}
	return strings.Join(parts, sep)
}

func headingLevel(p *docs.Paragraph) int {
	if p.ParagraphStyle == nil {
		return 0
	}
	switch st := p.ParagraphStyle.NamedStyleType; {
	case st == "TITLE":
		return 1
	case st == "SUBTITLE":
		return 2
	case strings.HasPrefix(st, "HEADING_"):
		n, _ := strconv.Atoi(strings.TrimPrefix(st, "HEADING_"))
		return n
	}
	return 0
}

func exportPlain(d *docs.Document) string {
	var b strings.Builder
	b.WriteString("\ufeff") // Google's text export starts with a byte order mark
	lists := listsOf(d)
	for _, content := range bodies(d) {
		for _, el := range content {
			switch {
			case el.Paragraph != nil:
				p := el.Paragraph
				if p.Bullet != nil {
					b.WriteString(strings.Repeat("    ", int(p.Bullet.NestingLevel)))
					if ordered(lists, p.Bullet) {
						b.WriteString("1. ")
					} else {
						b.WriteString("* ")
					}
				}
				b.WriteString(paragraphText(p))
				b.WriteString("\r\n")
			case el.Table != nil:
				for _, row := range el.Table.TableRows {
					cells := make([]string, len(row.TableCells))
					for i, c := range row.TableCells {
						cells[i] = cellText(c, " ")
					}
					b.WriteString(strings.Join(cells, "\t"))
					b.WriteString("\r\n")
				}
			}
		}
	}
	return b.String()
}

// mdEscape escapes the characters markdown would read as markup.
var mdEscape = strings.NewReplacer(`\`, `\\`, `*`, `\*`, `_`, `\_`, "`", "\\`", `[`, `\[`, `]`, `\]`, `#`, `\#`, `|`, `\|`, `<`, `\<`)

func markdownRuns(p *docs.Paragraph) string {
	var b strings.Builder
	for _, e := range p.Elements {
		if e.TextRun == nil {
			continue
		}
		text := strings.TrimSuffix(e.TextRun.Content, "\n")
		if text == "" {
			continue
		}
		lead := len(text) - len(strings.TrimLeft(text, " "))
		trail := len(text) - len(strings.TrimRight(text, " "))
		core := text[lead : len(text)-trail]
		if core == "" {
			b.WriteString(text)
			continue
		}
		t := mdEscape.Replace(strings.ReplaceAll(core, "\v", "\n"))
		if ts := e.TextRun.TextStyle; ts != nil {
			if ts.Link != nil && ts.Link.Url != "" {
				t = "[" + t + "](" + ts.Link.Url + ")"
			}
			if ts.Italic {
				t = "*" + t + "*"
			}
			if ts.Bold {
				t = "**" + t + "**"
			}
			if ts.Strikethrough {
				t = "~~" + t + "~~"
			}
		}
		b.WriteString(text[:lead] + t + text[len(text)-trail:])
	}
	return b.String()
}

func exportMarkdown(d *docs.Document) string {
	var b strings.Builder
	lists := listsOf(d)
	inList := false
	for _, content := range bodies(d) {
		for _, el := range content {
			switch {
			case el.Paragraph != nil:
				p := el.Paragraph
				if p.Bullet == nil && inList {
					b.WriteString("\n")
					inList = false
				}
				switch h := headingLevel(p); {
				case p.Bullet != nil:
					b.WriteString(strings.Repeat("    ", int(p.Bullet.NestingLevel)))
					if ordered(lists, p.Bullet) {
						b.WriteString("1. ")
					} else {
						b.WriteString("* ")
					}
					b.WriteString(markdownRuns(p))
					b.WriteString("\n")
					inList = true
				case h > 0:
					b.WriteString(strings.Repeat("#", h) + " " + markdownRuns(p) + "\n\n")
				default:
					if text := markdownRuns(p); text != "" {
						b.WriteString(text + "\n\n")
					}
				}
			case el.Table != nil:
				if inList {
					b.WriteString("\n")
					inList = false
				}
				for r, row := range el.Table.TableRows {
					cells := make([]string, len(row.TableCells))
					for i, c := range row.TableCells {
						cells[i] = mdEscape.Replace(cellText(c, " "))
					}
					b.WriteString("| " + strings.Join(cells, " | ") + " |\n")
					if r == 0 {
						b.WriteString("|" + strings.Repeat(" :---- |", len(cells)) + "\n")
					}
				}
				b.WriteString("\n")
			}
		}
	}
	return strings.TrimRight(b.String(), "\n") + "\n"
}

func htmlRuns(p *docs.Paragraph) string {
	var b strings.Builder
	for _, e := range p.Elements {
		if e.TextRun == nil {
			continue
		}
		t := html.EscapeString(strings.TrimSuffix(e.TextRun.Content, "\n"))
		t = strings.ReplaceAll(t, "\v", "<br>")
		if ts := e.TextRun.TextStyle; ts != nil {
			if ts.Bold {
				t = "<b>" + t + "</b>"
			}
			if ts.Italic {
				t = "<i>" + t + "</i>"
			}
			if ts.Underline && ts.Link == nil {
				t = "<u>" + t + "</u>"
			}
			if ts.Link != nil && ts.Link.Url != "" {
				t = `<a href="` + html.EscapeString(ts.Link.Url) + `">` + t + "</a>"
			}
		}
		b.WriteString(t)
	}
	return b.String()
}

func exportHTML(d *docs.Document) string {
	var b strings.Builder
	b.WriteString(`<html><head><meta content="text/html; charset=UTF-8" http-equiv="content-type"><title>`)
	b.WriteString(html.EscapeString(d.Title))
	b.WriteString("</title></head><body>")
	lists := listsOf(d)
	var open []string // the list tags open, one per nesting level
	closeTo := func(n int) {
		for len(open) > n {
			b.WriteString("</" + open[len(open)-1] + ">")
			open = open[:len(open)-1]
		}
	}
	for _, content := range bodies(d) {
		for _, el := range content {
			switch {
			case el.Paragraph != nil:
				p := el.Paragraph
				if p.Bullet == nil {
					closeTo(0)
					tag := "p"
					if h := headingLevel(p); h > 0 {
						tag = "h" + strconv.Itoa(h)
					}
					b.WriteString("<" + tag + ">" + htmlRuns(p) + "</" + tag + ">")
					continue
				}
				level := int(p.Bullet.NestingLevel) + 1
				tag := "ul"
				if ordered(lists, p.Bullet) {
					tag = "ol"
				}
				closeTo(level)
				if len(open) == level && open[level-1] != tag {
					closeTo(level - 1)
				}
				for len(open) < level {
					b.WriteString("<" + tag + ">")
					open = append(open, tag)
				}
				b.WriteString("<li>" + htmlRuns(p) + "</li>")
			case el.Table != nil:
				closeTo(0)
				b.WriteString("<table>")
				for _, row := range el.Table.TableRows {
					b.WriteString("<tr>")
					for _, c := range row.TableCells {
						b.WriteString("<td>")
						for _, ce := range c.Content {
							if ce.Paragraph != nil {
								b.WriteString("<p>" + htmlRuns(ce.Paragraph) + "</p>")
							}
						}
						b.WriteString("</td>")
					}
					b.WriteString("</tr>")
				}
				b.WriteString("</table>")
			}
		}
	}
	closeTo(0)
	b.WriteString("</body></html>")
	return b.String()
}
