package google

import (
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// The Drive v3 files.list query language (a subset of
// https://developers.google.com/drive/api/guides/ref-search-terms):
//
//	query   = or
//	or      = and { "or" and }
//	and     = unary { "and" unary }
//	unary   = "not" unary | "(" query ")" | term
//	term    = field op value | string "in" collection
//	field   = "name" | "fullText" | "mimeType" | "trashed" | "starred" | "sharedWithMe"
//	        | "createdTime" | "modifiedTime" | "viewedByMeTime"
//	op      = "=" | "!=" | "<" | "<=" | ">" | ">=" | "contains"
//	value   = string | "true" | "false"
//	string  = "'" { char | "\'" | "\\" } "'"
//	collection = "parents" | "owners" | "writers" | "readers"
//
// Keywords are case-insensitive; field names are not. Every query Google
// would refuse with "Invalid Value" answers errBadQuery.

var errBadQuery = errors.New("invalid Drive query")

// qNode is a parsed query; String answers a canonical query that parses to
// the same tree.
type qNode interface {
	String() string
	eval(c *qCtx) bool
}

type (
	qAnd  struct{ l, r qNode }
	qOr   struct{ l, r qNode }
	qNot  struct{ x qNode }
	qTerm struct {
		field, op string
		str       string // string value (also the RFC 3339 time's text)
		b         bool   // boolean value
		t         time.Time
	}
	qIn struct{ value, coll string }
)

func (n qAnd) String() string { return "(" + n.l.String() + " and " + n.r.String() + ")" }
func (n qOr) String() string  { return "(" + n.l.String() + " or " + n.r.String() + ")" }
func (n qNot) String() string { return "not " + n.x.String() }
func (n qIn) String() string  { return quoteQ(n.value) + " in " + n.coll }
func (n qTerm) String() string {
	if fieldKinds[n.field] == kBool {
		return fmt.Sprintf("%s %s %t", n.field, n.op, n.b)
	}
	return n.field + " " + n.op + " " + quoteQ(n.str)
}

// quoteQ answers s as a query string literal.
func quoteQ(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}

type fieldKind int

const (
	kString fieldKind = iota + 1
	kText             // contains only
	kBool
	kTime
)

var fieldKinds = map[string]fieldKind{
	"name": kString, "mimeType": kString, "fullText": kText,
	"trashed": kBool, "starred": kBool, "sharedWithMe": kBool,
	"createdTime": kTime, "modifiedTime": kTime, "viewedByMeTime": kTime,
}

var opsOf = map[fieldKind][]string{
	kString: {"=", "!=", "contains"},
	kText:   {"contains"},
	kBool:   {"=", "!="},
	kTime:   {"=", "!=", "<", "<=", ">", ">="},
}

// maxQueryLen bounds q (Google refuses very long queries).
const maxQueryLen = 8192

// parseQuery parses q ("" answers nil: every file).
func parseQuery(q string) (qNode, error) {
	if len(q) > maxQueryLen || !utf8.ValidString(q) {
		return nil, errBadQuery
	}
	toks, err := lexQ(q)
	if err != nil {
		return nil, err
	}
	if len(toks) == 0 {
		return nil, nil
	}
	p := &qParser{toks: toks}
	n, err := p.or(0)
	if err != nil {
		return nil, err
	}
	if p.i != len(p.toks) {
		return nil, fmt.Errorf("%w: unexpected %q", errBadQuery, p.toks[p.i].text)
	}
	return n, nil
}

type tokKind int

const (
	tWord tokKind = iota + 1 // identifier or keyword
	tStr                     // quoted string (text is the unescaped value)
	tOp                      // = != < <= > >=
	tLParen
	tRParen
)

type qTok struct {
	kind tokKind
	text string
}

func lexQ(q string) ([]qTok, error) {
	var toks []qTok
	for i := 0; i < len(q); {
		c := q[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case c == '(':
			toks = append(toks, qTok{tLParen, "("})
			i++
		case c == ')':
			toks = append(toks, qTok{tRParen, ")"})
			i++
		case c == '\'':
			var b strings.Builder
			i++
			for {
				if i >= len(q) {
					return nil, fmt.Errorf("%w: unterminated string", errBadQuery)
				}
				if q[i] == '\\' {
					if i+1 >= len(q) || q[i+1] != '\'' && q[i+1] != '\\' {
						return nil, fmt.Errorf("%w: bad escape", errBadQuery)
					}
					b.WriteByte(q[i+1])
					i += 2
					continue
				}
				if q[i] == '\'' {
					i++
					break
				}
				b.WriteByte(q[i])
				i++
			}
			toks = append(toks, qTok{tStr, b.String()})
		case c == '=' || c == '<' || c == '>' || c == '!':
			op := string(c)
			if i+1 < len(q) && q[i+1] == '=' && c != '=' {
				op += "="
			}
			if op == "!" {
				return nil, fmt.Errorf("%w: bad operator", errBadQuery)
			}
			toks = append(toks, qTok{tOp, op})
			i += len(op)
		case c < utf8.RuneSelf && (unicode.IsLetter(rune(c)) || c == '_'):
			j := i
			for j < len(q) && q[j] < utf8.RuneSelf && (unicode.IsLetter(rune(q[j])) || unicode.IsDigit(rune(q[j])) || q[j] == '_' || q[j] == '.') {
				j++
			}
			toks = append(toks, qTok{tWord, q[i:j]})
			i = j
		default:
			return nil, fmt.Errorf("%w: unexpected character", errBadQuery)
		}
	}
	return toks, nil
}

type qParser struct {
	toks []qTok
	i    int
}

// maxQueryDepth bounds nesting (parentheses and not).
const maxQueryDepth = 64

func (p *qParser) peekWord(w string) bool {
	return p.i < len(p.toks) && p.toks[p.i].kind == tWord && strings.EqualFold(p.toks[p.i].text, w)
}

func (p *qParser) or(depth int) (qNode, error) {
	l, err := p.and(depth)
	if err != nil {
		return nil, err
	}
	for p.peekWord("or") {
		p.i++
		r, err := p.and(depth)
		if err != nil {
			return nil, err
		}
		l = qOr{l, r}
	}
	return l, nil
}

func (p *qParser) and(depth int) (qNode, error) {
	l, err := p.unary(depth)
	if err != nil {
		return nil, err
	}
	for p.peekWord("and") {
		p.i++
		r, err := p.unary(depth)
		if err != nil {
			return nil, err
		}
		l = qAnd{l, r}
	}
	return l, nil
}

func (p *qParser) unary(depth int) (qNode, error) {
	if depth > maxQueryDepth {
		return nil, fmt.Errorf("%w: too deep", errBadQuery)
	}
	if p.i >= len(p.toks) {
		return nil, fmt.Errorf("%w: unexpected end", errBadQuery)
	}
	switch {
	case p.peekWord("not"):
		p.i++
		x, err := p.unary(depth + 1)
		if err != nil {
			return nil, err
		}
		return qNot{x}, nil
	case p.toks[p.i].kind == tLParen:
		p.i++
		x, err := p.or(depth + 1)
		if err != nil {
			return nil, err
		}
		if p.i >= len(p.toks) || p.toks[p.i].kind != tRParen {
			return nil, fmt.Errorf("%w: missing )", errBadQuery)
		}
		p.i++
		return x, nil
	}
	return p.term()
}

func (p *qParser) next() (qTok, bool) {
	if p.i >= len(p.toks) {
		return qTok{}, false
	}
	t := p.toks[p.i]
	p.i++
	return t, true
}

func (p *qParser) term() (qNode, error) {
	first, _ := p.next()
	if first.kind == tStr {
		in, ok := p.next()
		coll, ok2 := p.next()
		if !ok || !ok2 || in.kind != tWord || !strings.EqualFold(in.text, "in") || coll.kind != tWord {
			return nil, fmt.Errorf("%w: expected 'value' in collection", errBadQuery)
		}
		switch coll.text {
		case "parents", "owners", "writers", "readers":
			return qIn{first.text, coll.text}, nil
		}
		return nil, fmt.Errorf("%w: unknown collection %q", errBadQuery, coll.text)
	}
	if first.kind != tWord {
		return nil, fmt.Errorf("%w: expected a field", errBadQuery)
	}
	fk, ok := fieldKinds[first.text]
	if !ok {
		return nil, fmt.Errorf("%w: unknown field %q", errBadQuery, first.text)
	}
	opTok, ok := p.next()
	if !ok {
		return nil, fmt.Errorf("%w: expected an operator", errBadQuery)
	}
	op := opTok.text
	if opTok.kind == tWord {
		op = strings.ToLower(op)
	}
	if opTok.kind != tOp && op != "contains" || !containsStr(opsOf[fk], op) {
		return nil, fmt.Errorf("%w: operator %q not valid for %s", errBadQuery, opTok.text, first.text)
	}
	val, ok := p.next()
	if !ok {
		return nil, fmt.Errorf("%w: expected a value", errBadQuery)
	}
	t := qTerm{field: first.text, op: op}
	switch fk {
	case kBool:
		if val.kind != tWord || !strings.EqualFold(val.text, "true") && !strings.EqualFold(val.text, "false") {
			return nil, fmt.Errorf("%w: %s needs true or false", errBadQuery, first.text)
		}
		t.b = strings.EqualFold(val.text, "true")
	case kTime:
		if val.kind != tStr {
			return nil, fmt.Errorf("%w: %s needs a quoted RFC 3339 time", errBadQuery, first.text)
		}
		tm, err := parseQTime(val.text)
		if err != nil {
			return nil, err
		}
		t.str, t.t = val.text, tm
	default:
		if val.kind != tStr {
			return nil, fmt.Errorf("%w: %s needs a quoted string", errBadQuery, first.text)
		}
		t.str = val.text
	}
	return t, nil
}

// parseQTime accepts RFC 3339 date-times (the time zone defaults to UTC).
func parseQTime(s string) (time.Time, error) {
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05.999999999", "2006-01-02"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("%w: bad time %q", errBadQuery, s)
}

func containsStr(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// qCtx is what a query is evaluated against.
type qCtx struct {
	f         *driveFile
	text      func() string // the document's body text (lazily)
	userID    string
	userEmail string
}

func (n qAnd) eval(c *qCtx) bool { return n.l.eval(c) && n.r.eval(c) }
func (n qOr) eval(c *qCtx) bool  { return n.l.eval(c) || n.r.eval(c) }
func (n qNot) eval(c *qCtx) bool { return !n.x.eval(c) }

func (n qIn) eval(c *qCtx) bool {
	switch n.coll {
	case "parents":
		if c.f.DriveID != "" {
			return n.value == c.f.DriveID
		}
		return n.value == "root" && c.f.Owner == c.userID || n.value == rootFolderID(c.f.Owner)
	default: // owners, writers, readers: the owner (no sharing is emulated)
		if c.f.DriveID != "" && n.coll == "owners" {
			return false // shared-drive files have no owner
		}
		v := n.value
		if v == "me" {
			return c.f.Owner == c.userID
		}
		return strings.EqualFold(v, c.f.OwnerEmail)
	}
}

func (n qTerm) eval(c *qCtx) bool {
	f := c.f
	switch n.field {
	case "trashed":
		return (f.Trashed == n.b) == (n.op == "=")
	case "starred":
		return (f.Starred == n.b) == (n.op == "=")
	case "sharedWithMe":
		return !n.b == (n.op == "=") // own files are not shared with the user
	case "name":
		return matchString(f.Name, n.op, n.str, false)
	case "mimeType":
		return matchString(f.MimeType, n.op, n.str, true)
	case "fullText":
		return fullTextMatch(f.Name+"\n"+c.text(), n.str)
	case "createdTime":
		return cmpTime(f.Created, n.op, n.t)
	case "modifiedTime":
		return cmpTime(f.Modified, n.op, n.t)
	case "viewedByMeTime":
		return cmpTime(f.ViewedBy[c.userID], n.op, n.t)
	}
	return false
}

func matchString(have, op, want string, exactContains bool) bool {
	switch op {
	case "=":
		return have == want
	case "!=":
		return have != want
	}
	if exactContains {
		return strings.Contains(have, want)
	}
	return wordPrefix(strings.ToLower(have), strings.ToLower(want))
}

// wordPrefix reports whether want starts at a word start of have, which is
// how Google matches `name contains` ("Hello" finds "HelloWorld", "World"
// does not).
func wordPrefix(have, want string) bool {
	if want == "" {
		return true
	}
	for i := 0; i <= len(have)-len(want); {
		j := strings.Index(have[i:], want)
		if j < 0 {
			return false
		}
		at := i + j
		if at == 0 || !isWordRune(lastRune(have[:at])) || !isWordRune(firstRune(want)) {
			return true
		}
		_, size := utf8.DecodeRuneInString(have[at:])
		i = at + size
	}
	return false
}

// fullTextMatch: a "double-quoted" value is a phrase; otherwise every
// whitespace-separated word must start a word of the text (case-insensitive).
func fullTextMatch(text, q string) bool {
	text = strings.ToLower(text)
	q = strings.ToLower(q)
	if len(q) >= 2 && q[0] == '"' && q[len(q)-1] == '"' {
		return wordPrefix(text, q[1:len(q)-1])
	}
	for _, w := range strings.Fields(q) {
		if !wordPrefix(text, w) {
			return false
		}
	}
	return true
}

func isWordRune(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }

func lastRune(s string) rune { r, _ := utf8.DecodeLastRuneInString(s); return r }

func firstRune(s string) rune { r, _ := utf8.DecodeRuneInString(s); return r }

func cmpTime(have time.Time, op string, want time.Time) bool {
	switch op {
	case "=":
		return have.Equal(want)
	case "!=":
		return !have.Equal(want)
	case "<":
		return have.Before(want)
	case "<=":
		return !have.After(want)
	case ">":
		return have.After(want)
	default:
		return !have.Before(want)
	}
}

// queryHasFullText reports whether the query holds a fullText term (Google
// then refuses orderBy).
func queryHasFullText(n qNode) bool {
	switch n := n.(type) {
	case qAnd:
		return queryHasFullText(n.l) || queryHasFullText(n.r)
	case qOr:
		return queryHasFullText(n.l) || queryHasFullText(n.r)
	case qNot:
		return queryHasFullText(n.x)
	case qTerm:
		return n.field == "fullText"
	}
	return false
}

// relevanceOf scores a file's lower-cased name and text for the query's
// fullText terms: the number of times they occur.
func relevanceOf(n qNode, text string) int {
	switch n := n.(type) {
	case qAnd:
		return relevanceOf(n.l, text) + relevanceOf(n.r, text)
	case qOr:
		return relevanceOf(n.l, text) + relevanceOf(n.r, text)
	case qTerm:
		if n.field != "fullText" {
			return 0
		}
		q := strings.ToLower(n.str)
		if len(q) >= 2 && q[0] == '"' && q[len(q)-1] == '"' {
			return countWordPrefix(text, q[1:len(q)-1])
		}
		score := 0
		for _, w := range strings.Fields(q) {
			score += countWordPrefix(text, w)
		}
		return score
	}
	return 0 // not: no positive evidence
}

// countWordPrefix counts the word starts of have where want begins.
func countWordPrefix(have, want string) int {
	if want == "" {
		return 0
	}
	n := 0
	for i := 0; i <= len(have)-len(want); {
		j := strings.Index(have[i:], want)
		if j < 0 {
			break
		}
		at := i + j
		if at == 0 || !isWordRune(lastRune(have[:at])) || !isWordRune(firstRune(want)) {
			n++
		}
		_, size := utf8.DecodeRuneInString(have[at:])
		i = at + size
	}
	return n
}
