package docexport

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	docs "google.golang.org/api/docs/v1"
)

// Markdown renders the main body of d as CommonMark with GFM tables and footnotes:
// TITLE and HEADING_1 are "#", HEADING_n is n "#", SUBTITLE is an emphasized paragraph; bold "**",
// italic "*", strikethrough "~~", links "[text](url)" (only http, https, mailto and in-document
// links), superscript and subscript as <sup>/<sub>; bullet and numbered lists (from the list's glyph
// type) nested by their nesting level, numbered with the document's own counters; tables as pipe
// tables with the first row as header; page breaks and horizontal rules as "---"; footnote
// references as "[^n]" with their text at the end; soft line breaks (\v) as hard breaks. Every
// character Markdown would interpret is escaped. Empty paragraphs are dropped.
func Markdown(d *docs.Document) string {
	s := mainBody(d)
	w := &mdWriter{src: &s, counters: map[string][]int{}, fnSeen: map[string]bool{}}
	w.blocks(s.content)
	if len(w.footnotes) > 0 {
		for _, id := range w.footnotes {
			w.sep(false)
			w.b.WriteString("[^")
			w.b.WriteString(w.fnLabel[id])
			w.b.WriteString("]: ")
			w.inline(s.footnoteRuns(id), &mdCtx{brk: " ", lineStart: false})
		}
	}
	if w.b.Len() > 0 {
		w.b.WriteByte('\n')
	}
	return w.b.String()
}

type mdWriter struct {
	src      *source
	b        strings.Builder
	lastList bool
	// contentCol[L] is the content column of the last list item at nesting level L, ordered[L]
	// whether its list is numbered.
	contentCol []int
	ordered    []bool
	counters   map[string][]int
	footnotes  []string
	fnSeen     map[string]bool
	fnLabel    map[string]string
}

// sep starts a new block: a single newline between items of the same list, a blank line otherwise.
func (w *mdWriter) sep(listItem bool) {
	if w.b.Len() > 0 {
		if listItem && w.lastList {
			w.b.WriteByte('\n')
		} else {
			w.b.WriteString("\n\n")
		}
	}
	w.lastList = listItem
	if !listItem {
		w.contentCol, w.ordered = w.contentCol[:0], w.ordered[:0]
	}
}

func (w *mdWriter) blocks(content []*docs.StructuralElement) {
	for _, se := range content {
		if se == nil {
			continue
		}
		switch {
		case se.Paragraph != nil:
			w.paragraph(se.Paragraph)
		case se.Table != nil:
			w.table(se.Table)
		case se.TableOfContents != nil:
			w.blocks(se.TableOfContents.Content)
		}
	}
}

func empty(runs []run) bool {
	for _, r := range runs {
		if r.kind != runText || strings.TrimSpace(strings.ReplaceAll(r.text, "\v", "")) != "" {
			return false
		}
	}
	return true
}

func (w *mdWriter) paragraph(p *docs.Paragraph) {
	runs := w.src.runs(p)
	if p.Bullet != nil {
		w.listItem(p, runs)
		return
	}
	parts, seps := split(runs)
	h := heading(p)
	for i, part := range parts {
		if !empty(part) {
			w.sep(false)
			ctx := &mdCtx{lineStart: true, brk: "\\\n"}
			switch {
			case h > 0:
				w.b.WriteString(strings.Repeat("#", h))
				w.b.WriteByte(' ')
				ctx.brk, ctx.lineStart, ctx.heading = " ", false, true
			case subtitle(p):
				part = withStyle(part, func(st *style) { st.italic = true })
			}
			w.inline(trimEnd(part), ctx)
		}
		if i < len(seps) {
			w.sep(false)
			w.b.WriteString("---")
		}
	}
}

// trimEnd drops the blanks and line breaks that end a block: trailing blanks would read as a hard
// break, and a hard break cannot end a block (its backslash would show). Runs left empty go.
func trimEnd(runs []run) []run {
	out := make([]run, len(runs))
	copy(out, runs)
	for len(out) > 0 && out[len(out)-1].kind == runText {
		last := &out[len(out)-1]
		last.text = strings.TrimRight(last.text, " \t\v\n")
		if last.text != "" {
			break
		}
		out = out[:len(out)-1]
	}
	for len(out) > 0 && out[0].kind == runText {
		out[0].text = strings.TrimLeft(out[0].text, " \t\v\n")
		if out[0].text != "" {
			break
		}
		out = out[1:]
	}
	return out
}

// withStyle returns a copy of runs with f applied to every text run's style.
func withStyle(runs []run, f func(*style)) []run {
	out := make([]run, len(runs))
	copy(out, runs)
	for i := range out {
		f(&out[i].st)
	}
	return out
}

// number advances the counter of a list level and resets the deeper levels, as Docs numbers.
func number(counters map[string][]int, listID string, level int) int {
	c := counters[listID]
	for len(c) <= level {
		c = append(c, 0)
	}
	c[level]++
	for i := level + 1; i < len(c); i++ {
		c[i] = 0
	}
	counters[listID] = c
	return c[level]
}

func (w *mdWriter) listItem(p *docs.Paragraph, runs []run) {
	level := int(max(min(p.Bullet.NestingLevel, 8), 0))
	n := number(w.counters, p.Bullet.ListId, level)
	var kept []run
	for _, r := range runs {
		if !r.separator() {
			kept = append(kept, r)
		}
	}
	ordered := w.src.ordered(p.Bullet.ListId, int64(level))
	indent := 0
	if level > 0 {
		// The item nests under the last item one level up; without one it starts at the margin.
		if w.lastList && level-1 < len(w.contentCol) {
			indent = w.contentCol[level-1]
		} else {
			level = 0
		}
	}
	// A numbered list that starts at another number than 1 cannot interrupt the paragraph of the
	// item before it (CommonMark): a blank line goes first.
	first := !w.lastList || level >= len(w.ordered) || w.ordered[level] != ordered
	if ordered && n != 1 && first && w.lastList {
		w.b.WriteByte('\n')
	}
	w.sep(true)
	marker := "- "
	if ordered {
		marker = strconv.Itoa(n) + ". "
	}
	w.b.WriteString(strings.Repeat(" ", indent))
	w.b.WriteString(marker)
	col := indent + len(marker)
	w.contentCol = append(w.contentCol[:min(level, len(w.contentCol))], col)
	w.ordered = append(w.ordered[:min(level, len(w.ordered))], ordered)
	ctx := &mdCtx{lineStart: true, brk: "\\\n" + strings.Repeat(" ", col)}
	if h := heading(p); h > 0 {
		w.b.WriteString(strings.Repeat("#", h))
		w.b.WriteByte(' ')
		ctx.brk, ctx.lineStart, ctx.heading = " ", false, true
	} else if subtitle(p) {
		kept = withStyle(kept, func(st *style) { st.italic = true })
	}
	w.inline(trimEnd(kept), ctx)
}

func (w *mdWriter) table(t *docs.Table) {
	// The columns are the cells the rows hold: the declared count is the
	// provider's number and would size the output unchecked.
	cols := 0
	for _, row := range t.TableRows {
		if row != nil {
			cols = max(cols, len(row.TableCells))
		}
	}
	if cols == 0 || len(t.TableRows) == 0 {
		return
	}
	w.sep(false)
	for ri, row := range t.TableRows {
		if ri > 0 {
			w.b.WriteByte('\n')
		}
		w.b.WriteByte('|')
		// The header row has every column; GFM pads a shorter row itself,
		// so another row writes only its own cells (padding them all would
		// be quadratic in a ragged table).
		n := cols
		if ri > 0 {
			n = 1
			if row != nil {
				n = max(len(row.TableCells), 1)
			}
		}
		for ci := range n {
			w.b.WriteByte(' ')
			if row != nil && ci < len(row.TableCells) && row.TableCells[ci] != nil {
				w.cell(row.TableCells[ci].Content)
			}
			w.b.WriteString(" |")
		}
		if ri == 0 {
			w.b.WriteString("\n|")
			for range cols {
				w.b.WriteString(" --- |")
			}
		}
	}
}

// cell writes a table cell on one line: paragraphs joined by <br>, nested tables flattened.
func (w *mdWriter) cell(content []*docs.StructuralElement) {
	first := true
	var walk func([]*docs.StructuralElement)
	walk = func(content []*docs.StructuralElement) {
		for _, se := range content {
			if se == nil {
				continue
			}
			switch {
			case se.Paragraph != nil:
				var kept []run
				for _, r := range w.src.runs(se.Paragraph) {
					if !r.separator() {
						kept = append(kept, r)
					}
				}
				if empty(kept) {
					continue
				}
				if subtitle(se.Paragraph) {
					kept = withStyle(kept, func(st *style) { st.italic = true })
				}
				if !first {
					w.b.WriteString("<br>")
				}
				first = false
				w.inline(trimEnd(kept), &mdCtx{table: true, brk: "<br>"})
			case se.Table != nil:
				for _, row := range se.Table.TableRows {
					if row == nil {
						continue
					}
					for _, c := range row.TableCells {
						if c != nil {
							walk(c.Content)
						}
					}
				}
			}
		}
	}
	walk(content)
}

// mdCtx carries the escaping state of the line being written.
type mdCtx struct {
	lineStart bool
	table     bool
	brk       string // what a soft line break becomes
	backslash bool   // the text written last ends with a backslash
	heading   bool   // in an ATX heading, where a "#" can close the heading
}

// inline writes runs: links group their runs, emphasis nests bold > italic > strike.
func (w *mdWriter) inline(runs []run, ctx *mdCtx) {
	for i := 0; i < len(runs); {
		j := i + 1
		link := runs[i].st.link
		if runs[i].kind == runText && link != "" {
			for j < len(runs) && runs[j].kind == runText && runs[j].st.link == link {
				j++
			}
			seg := make([]run, j-i)
			copy(seg, runs[i:j])
			// Blanks at the edges of a link go outside its brackets.
			lead := leadingSpace(seg[0].text)
			seg[0].text = seg[0].text[len(lead):]
			trail := trailingSpace(seg[len(seg)-1].text)
			seg[len(seg)-1].text = seg[len(seg)-1].text[:len(seg[len(seg)-1].text)-len(trail)]
			w.spaces(lead, ctx)
			if !empty(seg) {
				w.b.WriteByte('[')
				ctx.lineStart = false
				w.emph(seg, 0, ctx)
				w.b.WriteString("](")
				w.b.WriteString(mdURL(link))
				w.b.WriteByte(')')
			}
			w.spaces(trail, ctx)
		} else {
			for j < len(runs) && (runs[j].kind != runText || runs[j].st.link == "") {
				j++
			}
			w.emph(runs[i:j], 0, ctx)
		}
		i = j
	}
}

var marks = [...]struct {
	on        func(style) bool
	delim     string
	open, end string // the raw HTML form, where delimiters would not parse
}{
	{func(s style) bool { return s.bold }, "**", "<strong>", "</strong>"},
	{func(s style) bool { return s.italic }, "*", "<em>", "</em>"},
	{func(s style) bool { return s.strike }, "~~", "<del>", "</del>"},
}

// delimitable tells whether the delimiters of mark depth around seg parse as such whatever
// surrounds them: CommonMark's flanking rules let "*" open before and close after a letter or digit
// anywhere, but not next to punctuation, symbols (emoji), an image, or the delimiter or tag of an
// inner style.
func delimitable(seg []run, depth int) bool {
	first, last := seg[0], seg[len(seg)-1]
	if first.kind != runText || last.kind != runText || first.text == "" || last.text == "" {
		return false
	}
	for _, r := range []run{first, last} {
		if r.st.sup || r.st.sub {
			return false
		}
		for _, m := range marks[depth+1:] {
			if m.on(r.st) {
				return false
			}
		}
	}
	r0, _ := utf8.DecodeRuneInString(first.text)
	r1, _ := utf8.DecodeLastRuneInString(last.text)
	alnum := func(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }
	return alnum(r0) && alnum(r1)
}

func (w *mdWriter) emph(runs []run, depth int, ctx *mdCtx) {
	if depth == len(marks) {
		for _, r := range runs {
			w.leaf(r, ctx)
		}
		return
	}
	m := marks[depth]
	for i := 0; i < len(runs); {
		j := i + 1
		if runs[i].kind != runText || !m.on(runs[i].st) {
			for j < len(runs) && (runs[j].kind != runText || !m.on(runs[j].st)) {
				j++
			}
			w.emph(runs[i:j], depth+1, ctx)
			i = j
			continue
		}
		for j < len(runs) && runs[j].kind == runText && m.on(runs[j].st) {
			j++
		}
		seg := make([]run, j-i)
		copy(seg, runs[i:j])
		// Emphasis cannot open before or close after whitespace: move it outside the delimiters.
		lead := leadingSpace(seg[0].text)
		seg[0].text = seg[0].text[len(lead):]
		trail := trailingSpace(seg[len(seg)-1].text)
		seg[len(seg)-1].text = seg[len(seg)-1].text[:len(seg[len(seg)-1].text)-len(trail)]
		w.spaces(lead, ctx)
		if !empty(seg) {
			open, end := m.delim, m.delim
			if !delimitable(seg, depth) {
				open, end = m.open, m.end
			}
			w.b.WriteString(open)
			ctx.lineStart = false
			w.emph(seg, depth+1, ctx)
			w.b.WriteString(end)
		}
		w.spaces(trail, ctx)
		i = j
	}
}

func leadingSpace(s string) string {
	return s[:len(s)-len(strings.TrimLeft(s, " \t\v"))]
}

func trailingSpace(s string) string {
	return s[len(strings.TrimRight(s, " \t\v")):]
}

func (w *mdWriter) spaces(s string, ctx *mdCtx) {
	if s != "" {
		w.leaf(run{kind: runText, text: s}, ctx)
	}
}

func (w *mdWriter) leaf(r run, ctx *mdCtx) {
	switch r.kind {
	case runText:
		switch {
		case r.st.sup:
			w.b.WriteString("<sup>")
			ctx.lineStart = false
			mdEscape(&w.b, r.text, ctx)
			w.b.WriteString("</sup>")
		case r.st.sub:
			w.b.WriteString("<sub>")
			ctx.lineStart = false
			mdEscape(&w.b, r.text, ctx)
			w.b.WriteString("</sub>")
		default:
			mdEscape(&w.b, r.text, ctx)
		}
	case runImage:
		if r.url == "" {
			return
		}
		w.b.WriteString("![")
		ctx.lineStart = false
		mdEscape(&w.b, r.text, ctx)
		w.b.WriteString("](")
		w.b.WriteString(mdURL(r.url))
		w.b.WriteByte(')')
	case runFootnote:
		if w.fnLabel == nil {
			w.fnLabel = map[string]string{}
		}
		if !w.fnSeen[r.url] {
			w.fnSeen[r.url] = true
			w.footnotes = append(w.footnotes, r.url)
			w.fnLabel[r.url] = footnoteLabel(r.text, len(w.footnotes))
		}
		w.b.WriteString("[^")
		w.b.WriteString(w.fnLabel[r.url])
		w.b.WriteByte(']')
		ctx.lineStart = false
	}
}

// footnoteLabel is the footnote's number when it is a plain token, else its position.
func footnoteLabel(number string, pos int) string {
	if number == "" {
		return strconv.Itoa(pos)
	}
	for i := 0; i < len(number); i++ {
		c := number[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
			return strconv.Itoa(pos)
		}
	}
	return number
}

// mdURL writes a link destination that cannot end early: spaces, parentheses, angle brackets and
// backslashes are percent-encoded.
func mdURL(u string) string {
	var b strings.Builder
	for i := 0; i < len(u); i++ {
		switch c := u[i]; c {
		case ' ':
			b.WriteString("%20")
		case '(':
			b.WriteString("%28")
		case ')':
			b.WriteString("%29")
		case '<':
			b.WriteString("%3C")
		case '>':
			b.WriteString("%3E")
		case '\\':
			b.WriteString("%5C")
		case '\n', '\r', '\t':
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// mdEscape writes text so that Markdown shows it literally: ASCII punctuation with inline meaning
// is backslash-escaped everywhere, block markers (#, -, +, =, "1.") at the start of a line, and
// leading blanks (an indented code block) are dropped there.
func mdEscape(b *strings.Builder, text string, ctx *mdCtx) {
	for i := 0; i < len(text); i++ {
		c := text[i]
		if c == '\v' || c == '\n' || c == '\r' {
			if ctx.backslash && strings.HasPrefix(ctx.brk, "\\\n") {
				// An escaped backslash then a backslash hard break is misread by some renderers.
				b.WriteString("<br>")
				b.WriteString(ctx.brk[1:])
			} else {
				b.WriteString(ctx.brk)
			}
			ctx.lineStart, ctx.backslash = !ctx.table, false
			continue
		}
		ctx.backslash = c == '\\'
		if ctx.lineStart {
			if c == ' ' || c == '\t' {
				continue
			}
			ctx.lineStart = false
			switch c {
			case '#', '-', '+', '=':
				b.WriteByte('\\')
				b.WriteByte(c)
				continue
			}
			if c >= '0' && c <= '9' {
				j := i
				for j < len(text) && text[j] >= '0' && text[j] <= '9' {
					j++
				}
				b.WriteString(text[i:j])
				if j < len(text) && (text[j] == '.' || text[j] == ')') {
					b.WriteByte('\\')
					b.WriteByte(text[j])
					j++
				}
				i = j - 1
				continue
			}
		}
		switch c {
		case '\\', '`', '*', '_', '[', ']', '<', '>', '~', '|', '&', '!':
			b.WriteByte('\\')
		case '#':
			if ctx.heading {
				b.WriteByte('\\')
			}
		}
		b.WriteByte(c)
	}
}
