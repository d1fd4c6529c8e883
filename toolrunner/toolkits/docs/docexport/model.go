// Package docexport converts the main body of a Google Docs document (google.golang.org/api/docs/v1)
// to Markdown (CommonMark + GFM tables and footnotes) and to HTML. It is pure: no network, no
// state; the document is read as documents.get returns it. When the document was fetched with
// includeTabsContent the body of the first tab is exported.
package docexport

import (
	"net/url"
	"strings"

	docs "google.golang.org/api/docs/v1"
)

// source is the part of a document the exporters read.
type source struct {
	title     string
	content   []*docs.StructuralElement
	lists     map[string]docs.List
	inline    map[string]docs.InlineObject
	footnotes map[string]docs.Footnote
}

func mainBody(d *docs.Document) source {
	if d == nil {
		return source{}
	}
	s := source{title: d.Title}
	if len(d.Tabs) > 0 {
		if t := d.Tabs[0]; t != nil && t.DocumentTab != nil {
			dt := t.DocumentTab
			if dt.Body != nil {
				s.content = dt.Body.Content
			}
			s.lists, s.inline, s.footnotes = dt.Lists, dt.InlineObjects, dt.Footnotes
		}
		return s
	}
	if d.Body != nil {
		s.content = d.Body.Content
	}
	s.lists, s.inline, s.footnotes = d.Lists, d.InlineObjects, d.Footnotes
	return s
}

// style is the subset of a text style both formats can show.
type style struct {
	bold, italic, strike, underline, sup, sub bool
	link                                      string
}

type runKind int

const (
	runText      runKind = iota
	runImage             // text = alt, url = image URI
	runFootnote          // text = number, url = footnote id
	runPageBreak         // block separator
	runRule              // horizontal rule, block separator
)

// run is a piece of a paragraph: text with one style, or a non-text element.
type run struct {
	kind runKind
	text string
	url  string
	st   style
}

func (r run) separator() bool { return r.kind == runPageBreak || r.kind == runRule }

// safeURL keeps links with a scheme a reader can follow safely (http, https, mailto) and in-document
// fragments; anything else (javascript:, data:, vbscript: …) is dropped.
func safeURL(raw string) string {
	raw = strings.TrimSpace(raw)
	if raw == "" {
		return ""
	}
	if strings.HasPrefix(raw, "#") {
		return raw
	}
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	switch strings.ToLower(u.Scheme) {
	case "http", "https", "mailto":
		return raw
	}
	return ""
}

func textStyle(ts *docs.TextStyle) style {
	if ts == nil {
		return style{}
	}
	st := style{
		bold:      ts.Bold,
		italic:    ts.Italic,
		strike:    ts.Strikethrough,
		underline: ts.Underline,
		sup:       ts.BaselineOffset == "SUPERSCRIPT",
		sub:       ts.BaselineOffset == "SUBSCRIPT",
	}
	if l := ts.Link; l != nil {
		switch {
		case l.Url != "":
			st.link = safeURL(l.Url)
		case l.HeadingId != "":
			st.link = "#heading=" + l.HeadingId
		case l.BookmarkId != "":
			st.link = "#bookmark=" + l.BookmarkId
		}
		// Docs underlines links by default; the link itself says so.
		st.underline = false
	}
	return st
}

// runs converts the elements of a paragraph, without its final newline, merging neighbours with
// the same style.
func (s *source) runs(p *docs.Paragraph) []run {
	var out []run
	// merged gathers the text of the last run while neighbours join it:
	// appending to the run's string instead would copy it once per
	// neighbour, quadratic in a paragraph of many tiny runs.
	var merged strings.Builder
	merging := false
	flush := func() {
		if merging {
			out[len(out)-1].text = merged.String()
			merged.Reset()
			merging = false
		}
	}
	add := func(r run) {
		if r.kind == runText {
			if r.text == "" {
				return
			}
			if n := len(out); merging && out[n-1].st == r.st {
				merged.WriteString(r.text)
				return
			}
			flush()
			out = append(out, r)
			merged.WriteString(r.text)
			merging = true
			return
		}
		flush()
		out = append(out, r)
	}
	for i, e := range p.Elements {
		if e == nil {
			continue
		}
		switch {
		case e.TextRun != nil:
			text := e.TextRun.Content
			if i == len(p.Elements)-1 {
				text = strings.TrimSuffix(text, "\n")
			}
			add(run{kind: runText, text: text, st: textStyle(e.TextRun.TextStyle)})
		case e.InlineObjectElement != nil:
			r := run{kind: runImage, text: "image"}
			if obj, ok := s.inline[e.InlineObjectElement.InlineObjectId]; ok && obj.InlineObjectProperties != nil {
				if eo := obj.InlineObjectProperties.EmbeddedObject; eo != nil {
					if eo.Title != "" {
						r.text = eo.Title
					} else if eo.Description != "" {
						r.text = eo.Description
					}
					if eo.ImageProperties != nil {
						r.url = safeURL(eo.ImageProperties.ContentUri)
					}
				}
			}
			add(r)
		case e.FootnoteReference != nil:
			add(run{kind: runFootnote, text: e.FootnoteReference.FootnoteNumber, url: e.FootnoteReference.FootnoteId})
		case e.PageBreak != nil:
			add(run{kind: runPageBreak})
		case e.HorizontalRule != nil:
			add(run{kind: runRule})
		case e.Person != nil:
			if pp := e.Person.PersonProperties; pp != nil {
				st := textStyle(e.Person.TextStyle)
				name := pp.Name
				if name == "" {
					name = pp.Email
				}
				if pp.Email != "" {
					st.link = safeURL("mailto:" + pp.Email)
				}
				add(run{kind: runText, text: name, st: st})
			}
		case e.DateElement != nil:
			if dp := e.DateElement.DateElementProperties; dp != nil {
				add(run{kind: runText, text: dp.DisplayText, st: textStyle(e.DateElement.TextStyle)})
			}
		case e.RichLink != nil:
			if rp := e.RichLink.RichLinkProperties; rp != nil {
				st := textStyle(e.RichLink.TextStyle)
				st.link = safeURL(rp.Uri)
				text := rp.Title
				if text == "" {
					text = rp.Uri
				}
				add(run{kind: runText, text: text, st: st})
			}
		}
		// Column breaks, equations and auto text have no text in either format.
	}
	flush()
	return out
}

// split cuts a paragraph's runs at page breaks and horizontal rules: parts[i] is followed by seps[i].
func split(runs []run) (parts [][]run, seps []run) {
	start := 0
	for i, r := range runs {
		if r.separator() {
			parts = append(parts, runs[start:i])
			seps = append(seps, r)
			start = i + 1
		}
	}
	parts = append(parts, runs[start:])
	return parts, seps
}

// heading is the heading level of a named style: TITLE and HEADING_1 are 1, HEADING_n is n, 0 for
// anything else.
func heading(p *docs.Paragraph) int {
	if p.ParagraphStyle == nil {
		return 0
	}
	switch n := p.ParagraphStyle.NamedStyleType; n {
	case "TITLE":
		return 1
	case "HEADING_1", "HEADING_2", "HEADING_3", "HEADING_4", "HEADING_5", "HEADING_6":
		return int(n[len(n)-1] - '0')
	}
	return 0
}

func subtitle(p *docs.Paragraph) bool {
	return p.ParagraphStyle != nil && p.ParagraphStyle.NamedStyleType == "SUBTITLE"
}

// ordered tells whether a list level is numbered: a glyph type other than none, or a glyph format
// holding a counter, and no glyph symbol (bullets have one).
func (s *source) ordered(listID string, level int64) bool {
	l, ok := s.lists[listID]
	if !ok || l.ListProperties == nil || level < 0 || int(level) >= len(l.ListProperties.NestingLevels) {
		return false
	}
	nl := l.ListProperties.NestingLevels[level]
	if nl == nil || nl.GlyphSymbol != "" {
		return false
	}
	switch nl.GlyphType {
	case "", "NONE", "GLYPH_TYPE_UNSPECIFIED":
		return strings.Contains(nl.GlyphFormat, "%")
	}
	return true
}

// footnoteRuns is the inline content of a footnote's paragraphs, joined by spaces.
func (s *source) footnoteRuns(id string) []run {
	fn, ok := s.footnotes[id]
	if !ok {
		return nil
	}
	var out []run
	for _, se := range fn.Content {
		if se == nil || se.Paragraph == nil {
			continue
		}
		rs := s.runs(se.Paragraph)
		if len(rs) > 0 && rs[0].kind == runText {
			rs[0].text = strings.TrimLeft(rs[0].text, " \t")
		}
		if n := len(rs); n > 0 && rs[n-1].kind == runText {
			rs[n-1].text = strings.TrimRight(rs[n-1].text, " \t")
		}
		if len(out) > 0 && len(rs) > 0 {
			out = append(out, run{kind: runText, text: " "})
		}
		for _, r := range rs {
			if !r.separator() && r.kind != runFootnote {
				out = append(out, r)
			}
		}
	}
	return out
}
