package docmd

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// ErrSyntax is wrapped by every Parse error; the message names the line.
var ErrSyntax = errors.New("docmd: syntax error")

// Doc is a parsed DocMD document.
type Doc struct {
	DocumentID string
	Title      string
	RevisionID string
	// Sections holds one section per tab in depth-first order, or a single section with an empty
	// TabID for a document rendered without tabs content.
	Sections []Section
}

// Section is one tab of the document.
type Section struct {
	TabID    string
	Title    string
	Index    int64
	Level    int64
	ParentID string
	Segments []Segment
}

// Segment is the body, a header, a footer or a footnote: an index space of its own.
type Segment struct {
	Kind   string // body, header, footer, footnote
	ID     string // segmentId; empty for the body
	Blocks []Block
}

// Block is one annotated block.
type Block struct {
	ID       string
	Start    int64
	End      int64
	Type     string
	Attrs    map[string]string
	Styles   []Span
	Text     string // unescaped text without non-text elements and without the closing newline
	Elements []Element
}

// Span is a style over the half-open UTF-16 range [Start, End).
type Span struct {
	Style string // bold, italic, font, fg, …
	Value string // for font, size, fg, bg, link
	Start int64
	End   int64
}

// Element is a non-text element occupying [Start, End) inside a block.
type Element struct {
	Type  string
	Start int64
	End   int64
	Attrs map[string]string
}

var textTypes = map[string]bool{
	"TITLE": true, "SUBTITLE": true, "HEADING_1": true, "HEADING_2": true, "HEADING_3": true,
	"HEADING_4": true, "HEADING_5": true, "HEADING_6": true, "PARAGRAPH": true, "BULLET": true, "ORDERED": true,
}

var structTypes = map[string]bool{"SECTION_BREAK": true, "TABLE": true, "ROW": true, "CELL": true, "TOC": true}

// IsTextType reports whether blocks of type t carry a text line.
func IsTextType(t string) bool { return textTypes[t] }

// Parse reads DocMD produced by Render (or written by hand following docs/docmd.md).
func Parse(s string) (*Doc, error) {
	lines := strings.Split(s, "\n")
	if len(lines) > 0 && lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	if len(lines) == 0 || lines[0] != "@docmd 1" {
		return nil, fmt.Errorf("%w: line 1: want %q", ErrSyntax, "@docmd 1")
	}
	d := &Doc{}
	var sec *Section
	var seg *Segment
	for i := 1; i < len(lines); i++ {
		ln := lines[i]
		errf := func(format string, a ...any) error {
			return fmt.Errorf("%w: line %d: %s", ErrSyntax, i+1, fmt.Sprintf(format, a...))
		}
		switch {
		case strings.HasPrefix(ln, "@document_id "), strings.HasPrefix(ln, "@title "), strings.HasPrefix(ln, "@revision_id "):
			name, rest, _ := strings.Cut(ln, " ")
			v, tail, err := readValue(rest)
			if err != nil || tail != "" {
				return nil, errf("bad value for %s", name)
			}
			switch name {
			case "@document_id":
				d.DocumentID = v
			case "@title":
				d.Title = v
			default:
				d.RevisionID = v
			}
		case ln == "@tab" || strings.HasPrefix(ln, "@tab "):
			attrs, err := readAttrs(strings.TrimPrefix(ln, "@tab"))
			if err != nil {
				return nil, errf("%v", err)
			}
			ns := Section{TabID: attrs["id"], Title: attrs["title"], ParentID: attrs["parent"]}
			if ns.Index, err = optInt(attrs["index"]); err != nil {
				return nil, errf("tab index: %v", err)
			}
			if ns.Level, err = optInt(attrs["level"]); err != nil {
				return nil, errf("tab level: %v", err)
			}
			d.Sections = append(d.Sections, ns)
			sec, seg = &d.Sections[len(d.Sections)-1], nil
		case strings.HasPrefix(ln, "@segment "):
			kind, rest, _ := strings.Cut(strings.TrimPrefix(ln, "@segment "), " ")
			switch kind {
			case "body", "header", "footer", "footnote":
			default:
				return nil, errf("unknown segment kind %q", kind)
			}
			attrs, err := readAttrs(prefixSpace(rest))
			if err != nil {
				return nil, errf("%v", err)
			}
			if (kind == "body") != (attrs["id"] == "") {
				return nil, errf("segment %s: id must be given exactly for non-body segments", kind)
			}
			if sec == nil {
				d.Sections = append(d.Sections, Section{})
				sec = &d.Sections[0]
			}
			sec.Segments = append(sec.Segments, Segment{Kind: kind, ID: attrs["id"]})
			seg = &sec.Segments[len(sec.Segments)-1]
		case strings.HasPrefix(ln, "["):
			if seg == nil {
				return nil, errf("block outside a segment")
			}
			b, err := parseAnnotation(ln)
			if err != nil {
				return nil, errf("%v", err)
			}
			if textTypes[b.Type] {
				if i+1 >= len(lines) {
					return nil, errf("block %s: missing text line", b.ID)
				}
				i++
				if err := parseText(&b, lines[i]); err != nil {
					return nil, fmt.Errorf("%w: line %d: %v", ErrSyntax, i+1, err)
				}
			}
			seg.Blocks = append(seg.Blocks, b)
		default:
			return nil, errf("unexpected line (a text line must follow its block annotation)")
		}
	}
	return d, nil
}

func prefixSpace(s string) string {
	if s == "" {
		return ""
	}
	return " " + s
}

func optInt(s string) (int64, error) {
	if s == "" {
		return 0, nil
	}
	return strconv.ParseInt(s, 10, 64)
}

// parseRange reads "<start>-<end>" with 0 <= start <= end.
func parseRange(s string) (int64, int64, error) {
	a, b, ok := strings.Cut(s, "-")
	if !ok {
		return 0, 0, fmt.Errorf("bad range %q", s)
	}
	start, err1 := strconv.ParseInt(a, 10, 64)
	end, err2 := strconv.ParseInt(b, 10, 64)
	if err1 != nil || err2 != nil || start < 0 || end < start || a[0] == '+' || b[0] == '+' {
		return 0, 0, fmt.Errorf("bad range %q", s)
	}
	return start, end, nil
}

func parseAnnotation(ln string) (Block, error) {
	var b Block
	if !strings.HasSuffix(ln, "]") {
		return b, errors.New("annotation must end with ]")
	}
	body := ln[1 : len(ln)-1]
	id, rest, ok := strings.Cut(body, " ")
	if !ok || !isToken(id) {
		return b, errors.New("bad block id")
	}
	rng, rest, _ := strings.Cut(rest, " ")
	var err error
	if b.Start, b.End, err = parseRange(rng); err != nil {
		return b, err
	}
	typ, rest, _ := strings.Cut(rest, " ")
	if !textTypes[typ] && !structTypes[typ] {
		return b, fmt.Errorf("unknown block type %q", typ)
	}
	b.ID, b.Type = id, typ
	b.Attrs = map[string]string{}
	rest = prefixSpace(rest)
	for rest != "" {
		if !strings.HasPrefix(rest, " ") {
			return b, errors.New("attributes must be separated by a space")
		}
		rest = rest[1:]
		if strings.HasPrefix(rest, "styles=") {
			spans, tail, err := readSpans(rest[len("styles="):])
			if err != nil {
				return b, err
			}
			if tail != "" {
				return b, errors.New("styles= must be the last attribute")
			}
			for _, s := range spans {
				if s.Start < b.Start || s.End > b.End {
					return b, fmt.Errorf("style span %s:%d-%d outside block %d-%d", s.Style, s.Start, s.End, b.Start, b.End)
				}
			}
			b.Styles = spans
			break
		}
		k, v, tail, err := readAttr(rest)
		if err != nil {
			return b, err
		}
		b.Attrs[k] = v
		rest = tail
	}
	return b, nil
}

// readAttr reads name=value from the start of s.
func readAttr(s string) (string, string, string, error) {
	k, rest, ok := strings.Cut(s, "=")
	if !ok || !isToken(k) {
		return "", "", "", fmt.Errorf("bad attribute near %q", clip(s))
	}
	v, tail, err := readValue(rest)
	return k, v, tail, err
}

func readAttrs(s string) (map[string]string, error) {
	m := map[string]string{}
	for s != "" {
		if s[0] != ' ' {
			return nil, fmt.Errorf("bad attribute near %q", clip(s))
		}
		k, v, tail, err := readAttr(s[1:])
		if err != nil {
			return nil, err
		}
		m[k] = v
		s = tail
	}
	return m, nil
}

func clip(s string) string {
	if len(s) > 20 {
		return s[:20]
	}
	return s
}

// readValue reads a bare token or a quoted string from the start of s and returns the rest.
func readValue(s string) (string, string, error) {
	if s == "" {
		return "", "", errors.New("missing value")
	}
	if s[0] != '"' {
		n := 0
		for n < len(s) && isToken(s[n:n+1]) {
			n++
		}
		if n == 0 {
			return "", "", fmt.Errorf("bad value near %q", clip(s))
		}
		return s[:n], s[n:], nil
	}
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		switch c := s[i]; c {
		case '"':
			return b.String(), s[i+1:], nil
		case '\\':
			if i+1 >= len(s) {
				return "", "", errors.New("unterminated escape")
			}
			i++
			switch s[i] {
			case '"', '\\':
				b.WriteByte(s[i])
			case 'n':
				b.WriteByte('\n')
			default:
				return "", "", fmt.Errorf("bad escape \\%c", s[i])
			}
		default:
			b.WriteByte(c)
		}
	}
	return "", "", errors.New("unterminated quoted value")
}

func readSpans(s string) ([]Span, string, error) {
	var spans []Span
	for {
		name := s
		n := 0
		for n < len(s) && s[n] >= 'a' && s[n] <= 'z' {
			n++
		}
		name, s = s[:n], s[n:]
		switch name {
		case "bold", "italic", "underline", "strike", "smallcaps", "sup", "sub", "font", "size", "fg", "bg", "link":
		default:
			return nil, "", fmt.Errorf("unknown style %q", name)
		}
		sp := Span{Style: name}
		if strings.HasPrefix(s, "=") {
			v, tail, err := readValue(s[1:])
			if err != nil {
				return nil, "", err
			}
			sp.Value, s = v, tail
		}
		if !strings.HasPrefix(s, ":") {
			return nil, "", fmt.Errorf("style %s: missing :<start>-<end>", name)
		}
		s = s[1:]
		end := strings.IndexAny(s, ", ")
		if end < 0 {
			end = len(s)
		}
		var err error
		if sp.Start, sp.End, err = parseRange(s[:end]); err != nil {
			return nil, "", err
		}
		spans = append(spans, sp)
		s = s[end:]
		if !strings.HasPrefix(s, ",") {
			return spans, s, nil
		}
		s = s[1:]
	}
}

// parseText unescapes a text line into b.Text and b.Elements and checks that it fills the block.
func parseText(b *Block, ln string) error {
	var t strings.Builder
	pos := b.Start
	for i := 0; i < len(ln); i++ {
		c := ln[i]
		switch c {
		case '\\':
			if i+1 >= len(ln) {
				return errors.New("trailing backslash")
			}
			i++
			switch ln[i] {
			case '\\', '{', '[', '@':
				t.WriteByte(ln[i])
			case 'v':
				t.WriteByte('\v')
			case 'n':
				t.WriteByte('\n')
			default:
				return fmt.Errorf("bad escape \\%c", ln[i])
			}
			pos++
		case '{':
			j := elementEnd(ln[i:])
			if j < 0 {
				return errors.New("unterminated element")
			}
			e, err := parseElement(ln[i+1 : i+j])
			if err != nil {
				return err
			}
			if e.Start != pos {
				return fmt.Errorf("element %s starts at %d, text says %d", e.Type, e.Start, pos)
			}
			pos = e.End
			b.Elements = append(b.Elements, e)
			i += j
		default:
			if c < 0x80 {
				t.WriteByte(c)
				pos++
				continue
			}
			// multi-byte rune: count its UTF-16 units.
			k := i + 1
			for k < len(ln) && ln[k]&0xC0 == 0x80 {
				k++
			}
			t.WriteString(ln[i:k])
			pos += utf16Len(ln[i:k])
			i = k - 1
		}
	}
	if pos+1 != b.End {
		return fmt.Errorf("block %s %d-%d: text and elements end at %d, want %d (end minus the newline)", b.ID, b.Start, b.End, pos, b.End-1)
	}
	b.Text = t.String()
	return nil
}

var elementTypes = map[string]bool{
	"INLINE_IMAGE": true, "FOOTNOTE_REF": true, "PAGE_BREAK": true, "COLUMN_BREAK": true, "HORIZONTAL_RULE": true,
	"PERSON": true, "DATE": true, "RICH_LINK": true, "EQUATION": true, "AUTO_TEXT": true, "UNKNOWN": true,
}

func parseElement(s string) (Element, error) {
	var e Element
	typ, rest, _ := strings.Cut(s, " ")
	if !elementTypes[typ] {
		return e, fmt.Errorf("unknown element %q", typ)
	}
	rng, rest, _ := strings.Cut(rest, " ")
	var err error
	if e.Start, e.End, err = parseRange(rng); err != nil {
		return e, err
	}
	e.Type = typ
	if e.Attrs, err = readAttrs(prefixSpace(rest)); err != nil {
		return e, err
	}
	return e, nil
}

// elementEnd returns the offset of the '}' closing the element that s starts with, skipping quoted
// attribute values, or -1.
func elementEnd(s string) int {
	quoted := false
	for i := 1; i < len(s); i++ {
		switch s[i] {
		case '\\':
			if quoted {
				i++
			}
		case '"':
			quoted = !quoted
		case '}':
			if !quoted {
				return i
			}
		}
	}
	return -1
}
