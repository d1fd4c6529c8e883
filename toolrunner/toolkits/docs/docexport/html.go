package docexport

import (
	"html"
	"strconv"
	"strings"

	docs "google.golang.org/api/docs/v1"
)

// HTML renders the main body of d as a complete HTML5 document: TITLE and HEADING_1 are <h1>,
// HEADING_n is <hn>, SUBTITLE is <p class="subtitle">; bold, italic, strikethrough, underline,
// superscript, subscript and links (only http, https, mailto and in-document links) as their
// elements; bullet and numbered lists (from the list's glyph type) as nested <ul>/<ol> (with start
// when numbering continues); tables as <table> with their cell content; page breaks as
// <div class="page-break">, horizontal rules as <hr>; footnote references as links to a footnote
// section at the end; soft line breaks (\v) as <br>. All text and attribute values are escaped.
// Empty paragraphs are dropped.
func HTML(d *docs.Document) string {
	s := mainBody(d)
	w := &htmlWriter{src: &s, counters: map[string][]int{}, fnIndex: map[string]int{}}
	w.b.WriteString("<!DOCTYPE html>\n<html>\n<head>\n<meta charset=\"utf-8\">\n<title>")
	w.b.WriteString(html.EscapeString(s.title))
	w.b.WriteString("</title>\n</head>\n<body>\n")
	w.blocks(s.content)
	if len(w.footnotes) > 0 {
		w.b.WriteString("<section class=\"footnotes\">\n<ol>\n")
		for i, id := range w.footnotes {
			n := strconv.Itoa(i + 1)
			w.b.WriteString(`<li id="fn-` + n + `">`)
			w.inline(s.footnoteRuns(id))
			w.b.WriteString(` <a href="#fnref-` + n + `">↩</a></li>` + "\n")
		}
		w.b.WriteString("</ol>\n</section>\n")
	}
	w.b.WriteString("</body>\n</html>\n")
	return w.b.String()
}

type htmlWriter struct {
	src       *source
	b         strings.Builder
	counters  map[string][]int
	footnotes []string
	fnIndex   map[string]int
}

// openList is one level of the list being written; its last <li> is still open.
type openList struct {
	id      string
	level   int
	ordered bool
}

func (w *htmlWriter) closeLists(stack []openList, keep int) []openList {
	for len(stack) > keep {
		top := stack[len(stack)-1]
		if top.ordered {
			w.b.WriteString("</li>\n</ol>\n")
		} else {
			w.b.WriteString("</li>\n</ul>\n")
		}
		stack = stack[:len(stack)-1]
	}
	return stack
}

// blocks writes structural elements; the list stack is local so that a table cell holds its own lists.
func (w *htmlWriter) blocks(content []*docs.StructuralElement) {
	var stack []openList
	for _, se := range content {
		if se == nil {
			continue
		}
		switch {
		case se.Paragraph != nil && se.Paragraph.Bullet != nil:
			stack = w.listItem(stack, se.Paragraph)
		case se.Paragraph != nil:
			stack = w.closeLists(stack, 0)
			w.paragraph(se.Paragraph)
		case se.Table != nil:
			stack = w.closeLists(stack, 0)
			w.table(se.Table)
		case se.TableOfContents != nil:
			stack = w.closeLists(stack, 0)
			w.b.WriteString("<nav class=\"toc\">\n")
			w.blocks(se.TableOfContents.Content)
			w.b.WriteString("</nav>\n")
		}
	}
	w.closeLists(stack, 0)
}

func (w *htmlWriter) separator(r run) {
	if r.kind == runPageBreak {
		w.b.WriteString("<div class=\"page-break\" style=\"break-after: page\"></div>\n")
	} else {
		w.b.WriteString("<hr>\n")
	}
}

func (w *htmlWriter) paragraph(p *docs.Paragraph) {
	parts, seps := split(w.src.runs(p))
	open, close := "<p>", "</p>\n"
	if h := heading(p); h > 0 {
		n := strconv.Itoa(h)
		open, close = "<h"+n+">", "</h"+n+">\n"
	} else if subtitle(p) {
		open = `<p class="subtitle">`
	}
	for i, part := range parts {
		if !empty(part) {
			w.b.WriteString(open)
			w.inline(part)
			w.b.WriteString(close)
		}
		if i < len(seps) {
			w.separator(seps[i])
		}
	}
}

func (w *htmlWriter) listItem(stack []openList, p *docs.Paragraph) []openList {
	id := p.Bullet.ListId
	level := int(max(min(p.Bullet.NestingLevel, 8), 0))
	n := number(w.counters, id, level)
	ordered := w.src.ordered(id, int64(level))
	// Close deeper levels, and this level when it belongs to another list or kind.
	keep := len(stack)
	for keep > 0 {
		top := stack[keep-1]
		if top.level > level || top.level == level && (top.id != id || top.ordered != ordered) {
			keep--
			continue
		}
		break
	}
	stack = w.closeLists(stack, keep)
	if len(stack) > 0 && stack[len(stack)-1].level == level {
		w.b.WriteString("</li>\n<li>")
	} else {
		switch {
		case ordered && n != 1:
			w.b.WriteString(`<ol start="` + strconv.Itoa(n) + `">` + "\n<li>")
		case ordered:
			w.b.WriteString("<ol>\n<li>")
		default:
			w.b.WriteString("<ul>\n<li>")
		}
		stack = append(stack, openList{id: id, level: level, ordered: ordered})
	}
	parts, seps := split(w.src.runs(p))
	h := heading(p)
	for i, part := range parts {
		if !empty(part) {
			if h > 0 {
				w.b.WriteString("<h" + strconv.Itoa(h) + ">")
			}
			w.inline(part)
			if h > 0 {
				w.b.WriteString("</h" + strconv.Itoa(h) + ">")
			}
		}
		if i < len(seps) {
			w.separator(seps[i])
		}
	}
	return stack
}

func (w *htmlWriter) table(t *docs.Table) {
	if len(t.TableRows) == 0 {
		return
	}
	w.b.WriteString("<table>\n<tbody>\n")
	for _, row := range t.TableRows {
		if row == nil {
			continue
		}
		w.b.WriteString("<tr>\n")
		for _, c := range row.TableCells {
			if c == nil {
				continue
			}
			w.b.WriteString("<td")
			if st := c.TableCellStyle; st != nil {
				// Spans are clipped to what HTML allows (colspan 1000,
				// rowspan 65534).
				if st.ColumnSpan > 1 {
					w.b.WriteString(` colspan="` + strconv.FormatInt(min(st.ColumnSpan, 1000), 10) + `"`)
				}
				if st.RowSpan > 1 {
					w.b.WriteString(` rowspan="` + strconv.FormatInt(min(st.RowSpan, 65534), 10) + `"`)
				}
			}
			w.b.WriteString(">\n")
			w.blocks(c.Content)
			w.b.WriteString("</td>\n")
		}
		w.b.WriteString("</tr>\n")
	}
	w.b.WriteString("</tbody>\n</table>\n")
}

// inline writes runs; a link wraps all its consecutive runs.
func (w *htmlWriter) inline(runs []run) {
	for i := 0; i < len(runs); {
		link := runs[i].st.link
		if runs[i].kind != runText || link == "" {
			w.leaf(runs[i])
			i++
			continue
		}
		j := i + 1
		for j < len(runs) && runs[j].kind == runText && runs[j].st.link == link {
			j++
		}
		w.b.WriteString(`<a href="` + html.EscapeString(link) + `">`)
		for _, r := range runs[i:j] {
			w.leaf(r)
		}
		w.b.WriteString("</a>")
		i = j
	}
}

var htmlMarks = [...]struct {
	on       func(style) bool
	open, cl string
}{
	{func(s style) bool { return s.bold }, "<strong>", "</strong>"},
	{func(s style) bool { return s.italic }, "<em>", "</em>"},
	{func(s style) bool { return s.underline }, "<u>", "</u>"},
	{func(s style) bool { return s.strike }, "<s>", "</s>"},
	{func(s style) bool { return s.sup }, "<sup>", "</sup>"},
	{func(s style) bool { return s.sub }, "<sub>", "</sub>"},
}

func (w *htmlWriter) leaf(r run) {
	switch r.kind {
	case runText:
		for _, m := range htmlMarks {
			if m.on(r.st) {
				w.b.WriteString(m.open)
			}
		}
		for i, line := range strings.Split(strings.ReplaceAll(r.text, "\n", "\v"), "\v") {
			if i > 0 {
				w.b.WriteString("<br>")
			}
			w.b.WriteString(html.EscapeString(line))
		}
		for i := len(htmlMarks) - 1; i >= 0; i-- {
			if htmlMarks[i].on(r.st) {
				w.b.WriteString(htmlMarks[i].cl)
			}
		}
	case runImage:
		if r.url != "" {
			w.b.WriteString(`<img src="` + html.EscapeString(r.url) + `" alt="` + html.EscapeString(r.text) + `">`)
		}
	case runFootnote:
		n, ok := w.fnIndex[r.url]
		if !ok {
			w.footnotes = append(w.footnotes, r.url)
			n = len(w.footnotes)
			w.fnIndex[r.url] = n
		}
		label := r.text
		if label == "" {
			label = strconv.Itoa(n)
		}
		ns := strconv.Itoa(n)
		id := ""
		if !ok {
			id = ` id="fnref-` + ns + `"`
		}
		w.b.WriteString(`<sup><a href="#fn-` + ns + `"` + id + `>` + html.EscapeString(label) + `</a></sup>`)
	}
}
