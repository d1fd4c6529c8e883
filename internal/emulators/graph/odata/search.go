package odata

import (
	"strings"
	"time"
	"unicode"
)

// Search is a parsed $search: the KQL subset Exchange supports on
// messages.
//
// Free words and "quoted phrases" match the default properties from,
// subject and body. Property restrictions: from:, to:, cc:, bcc:,
// recipients: (to, cc, bcc), participants: (from and recipients),
// subject:, body:, attachment: (attachment names, from the object's
// "attachments" array), category:, hasattachments:true|false,
// importance:low|normal|high, isread:true|false, and received: / sent: with
// a date (YYYY-MM-DD, UTC) after ':' or '=' (that day), '<>' (another
// day), '>=', '<=', '>' or '<' (the property operators of MS-KQL). A restriction may take a group: subject:(lunch OR dinner).
// AND, OR, NOT (upper case, as KQL; NOT binds tightest, then AND, then
// OR), parentheses, and implicit AND between terms.
//
// Word matching is Exchange's prefix matching: the text and the query are
// split into words (letters and digits); a term matches when its words
// appear consecutively in the property, each query word a case-insensitive
// prefix of the text's word. So "meet" matches "meeting", "ann@contoso"
// matches "ann@contoso.com", and "lunch meet" does not match "meeting for
// lunch" as a phrase (but does as two words).
type Search struct {
	Root searchNode
	src  string
}

type searchNode interface {
	String() string
	match(obj map[string]any) bool
}

type searchAnd struct{ L, R searchNode }
type searchOr struct{ L, R searchNode }
type searchNot struct{ X searchNode }

// searchTerm is a word, phrase or property restriction.
type searchTerm struct {
	Prop   string // "" for the default properties; lower case
	Op     string // ":" "=" "<>" ">=" "<=" ">" "<"
	Value  string // as written (unquoted)
	Quoted bool
	words  []string
	day    time.Time // received/sent
	flag   bool      // hasattachments / isread
}

func searchError(format string, args ...any) *Error {
	return &Error{Code: CodeBadRequest, Message: sprintf(format, args...)}
}

// ParseSearch parses a $search value. Graph takes it in double quotes
// ($search="pizza"); the outer quotes are removed (with \" inside read as a
// quote) when they enclose the whole value.
func ParseSearch(s string) (*Search, error) {
	q := strings.TrimSpace(s)
	if len(q) >= 2 && q[0] == '"' && q[len(q)-1] == '"' && !strings.Contains(strings.ReplaceAll(q[1:len(q)-1], `\"`, ""), `"`) {
		q = strings.ReplaceAll(q[1:len(q)-1], `\"`, `"`)
	}
	p := &searchParser{src: q}
	p.next()
	if p.err != nil {
		return nil, p.err
	}
	if p.tok.kind == stEOF {
		return nil, searchError("The $search query option is empty.")
	}
	n, err := p.parseOr("")
	if err != nil {
		return nil, err
	}
	if p.err != nil {
		return nil, p.err
	}
	if p.tok.kind != stEOF {
		return nil, searchError("Syntax error at position %d in '%s'.", p.tok.pos, s)
	}
	return &Search{Root: n, src: s}, nil
}

// Match reports whether obj satisfies the search.
func (q *Search) Match(obj map[string]any) bool { return q.Root.match(obj) }

// String prints the search as a $search value: the KQL in Graph's outer
// double quotes, inner quotes escaped as \".
func (q *Search) String() string {
	return `"` + strings.ReplaceAll(q.Root.String(), `"`, `\"`) + `"`
}

type stKind uint8

const (
	stEOF stKind = iota
	stWord
	stPhrase
	stLParen
	stRParen
	stAnd
	stOr
	stNot
)

type stToken struct {
	kind stKind
	text string
	pos  int
}

type searchParser struct {
	src   string
	pos   int
	tok   stToken
	err   *Error
	depth int
}

func isSearchSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// next reads a token: parentheses, a "phrase", or a word (which runs to a
// space, a parenthesis or a quote; a word may contain "prop:", in which
// case a quoted value or group follows it).
func (p *searchParser) next() {
	for p.pos < len(p.src) && isSearchSpace(p.src[p.pos]) {
		p.pos++
	}
	start := p.pos
	if p.pos >= len(p.src) {
		p.tok = stToken{kind: stEOF, pos: start}
		return
	}
	switch c := p.src[p.pos]; c {
	case '(':
		p.pos++
		p.tok = stToken{kind: stLParen, text: "(", pos: start}
		return
	case ')':
		p.pos++
		p.tok = stToken{kind: stRParen, text: ")", pos: start}
		return
	case '"':
		end := strings.IndexByte(p.src[p.pos+1:], '"')
		if end < 0 {
			p.err = searchError("There is an unterminated string literal at position %d in '%s'.", start, p.src)
			p.tok = stToken{kind: stEOF, pos: start}
			p.pos = len(p.src)
			return
		}
		p.tok = stToken{kind: stPhrase, text: p.src[p.pos+1 : p.pos+1+end], pos: start}
		p.pos += end + 2
		return
	}
	for p.pos < len(p.src) {
		c := p.src[p.pos]
		if isSearchSpace(c) || c == '(' || c == ')' || c == '"' {
			break
		}
		p.pos++
	}
	w := p.src[start:p.pos]
	kind := stWord
	switch w {
	case "AND":
		kind = stAnd
	case "OR":
		kind = stOr
	case "NOT":
		kind = stNot
	}
	p.tok = stToken{kind: kind, text: w, pos: start}
}

func (p *searchParser) parseOr(prop string) (searchNode, error) {
	l, err := p.parseAnd(prop)
	if err != nil {
		return nil, err
	}
	for p.tok.kind == stOr {
		p.next()
		r, err := p.parseAnd(prop)
		if err != nil {
			return nil, err
		}
		l = &searchOr{L: l, R: r}
	}
	return l, nil
}

func (p *searchParser) parseAnd(prop string) (searchNode, error) {
	l, err := p.parseNot(prop)
	if err != nil {
		return nil, err
	}
	for {
		switch p.tok.kind {
		case stAnd:
			p.next()
		case stWord, stPhrase, stLParen, stNot: // implicit AND
		default:
			return l, nil
		}
		r, err := p.parseNot(prop)
		if err != nil {
			return nil, err
		}
		l = &searchAnd{L: l, R: r}
	}
}

func (p *searchParser) parseNot(prop string) (searchNode, error) {
	if p.tok.kind != stNot {
		return p.parsePrimary(prop)
	}
	if p.depth++; p.depth > maxDepth {
		return nil, searchError("The recursion limit has been exceeded.")
	}
	defer func() { p.depth-- }()
	p.next()
	x, err := p.parseNot(prop)
	if err != nil {
		return nil, err
	}
	return &searchNot{X: x}, nil
}

// searchProps are the property restrictions understood, lower case.
var searchProps = map[string]bool{
	"from": true, "to": true, "cc": true, "bcc": true, "recipients": true, "participants": true,
	"subject": true, "body": true, "attachment": true, "category": true,
	"hasattachments": true, "hasattachment": true, "importance": true, "isread": true,
	"received": true, "sent": true,
}

func (p *searchParser) parsePrimary(prop string) (searchNode, error) {
	if p.err != nil {
		return nil, p.err
	}
	t := p.tok
	switch t.kind {
	case stLParen:
		if p.depth++; p.depth > maxDepth {
			return nil, searchError("The recursion limit has been exceeded.")
		}
		defer func() { p.depth-- }()
		p.next()
		n, err := p.parseOr(prop)
		if err != nil {
			return nil, err
		}
		if p.tok.kind != stRParen {
			if p.err != nil {
				return nil, p.err
			}
			return nil, searchError("')' expected at position %d in '%s'.", p.tok.pos, p.src)
		}
		p.next()
		return n, nil
	case stPhrase:
		p.next()
		return newTerm(prop, ":", t.text, true)
	case stWord:
		name, op, value, ok := splitRestriction(t.text)
		if ok && prop == "" {
			if value == "" { // prop:"phrase" or prop:(group)
				after := p.pos
				p.next()
				switch {
				case p.tok.kind == stPhrase && p.tok.pos == after:
					v := p.tok.text
					p.next()
					return newTerm(name, op, v, true)
				case p.tok.kind == stLParen && p.tok.pos == after && op == ":":
					return p.parsePrimary(name)
				}
				return nil, searchError("A value is expected after '%s' at position %d in '%s'.", t.text, after, p.src)
			}
			p.next()
			return newTerm(name, op, value, false)
		}
		p.next()
		return newTerm(prop, ":", t.text, false)
	case stEOF:
		if p.err != nil {
			return nil, p.err
		}
		return nil, searchError("Expression expected at position %d in '%s'.", t.pos, p.src)
	}
	return nil, searchError("Syntax error at position %d in '%s'.", t.pos, p.src)
}

// splitRestriction splits "from:ann", "received>=2026-01-02" into the
// (known, lower-cased) property, the operator and the value.
func splitRestriction(w string) (name, op, value string, ok bool) {
	i := strings.IndexAny(w, ":=<>")
	if i <= 0 {
		return "", "", "", false
	}
	name = strings.ToLower(w[:i])
	if !searchProps[name] {
		return "", "", "", false
	}
	rest := w[i:]
	for _, o := range []string{">=", "<=", "<>", ":", "=", ">", "<"} {
		if strings.HasPrefix(rest, o) {
			return name, o, rest[len(o):], true
		}
	}
	return "", "", "", false
}

func newTerm(prop, op, value string, quoted bool) (searchNode, error) {
	t := &searchTerm{Prop: prop, Op: op, Value: value, Quoted: quoted}
	if op != ":" && op != "=" && prop != "received" && prop != "sent" {
		return nil, searchError("The operator '%s' is not valid for the property '%s'.", op, prop)
	}
	switch prop {
	case "received", "sent":
		d, err := time.Parse("2006-01-02", value)
		if err != nil {
			return nil, searchError("The value '%s' of '%s' is not a date (YYYY-MM-DD).", value, prop)
		}
		t.day = d
	case "hasattachments", "hasattachment", "isread":
		switch strings.ToLower(value) {
		case "true":
			t.flag = true
		case "false":
		default:
			return nil, searchError("The value '%s' of '%s' is not true or false.", value, prop)
		}
	case "importance":
		switch strings.ToLower(value) {
		case "low", "normal", "high":
		default:
			return nil, searchError("The value '%s' of 'importance' is not low, normal or high.", value)
		}
	default:
		t.words = words(value)
		if len(t.words) == 0 { // punctuation only: matches nothing, as in Exchange
			t.words = []string{}
		}
	}
	return t, nil
}

// words splits s into lower-case runs of letters and digits.
func words(s string) []string {
	var out []string
	start := -1
	for i, r := range s {
		alnum := unicode.IsLetter(r) || unicode.IsDigit(r)
		switch {
		case alnum && start < 0:
			start = i
		case !alnum && start >= 0:
			out = append(out, strings.ToLower(s[start:i]))
			start = -1
		}
	}
	if start >= 0 {
		out = append(out, strings.ToLower(s[start:]))
	}
	return out
}

// matchWords reports whether q appears in text as consecutive words, each
// a prefix of the text's word.
func matchWords(text string, q []string) bool {
	if len(q) == 0 {
		return false
	}
	tw := words(text)
	for i := 0; i+len(q) <= len(tw); i++ {
		ok := true
		for j, w := range q {
			if !strings.HasPrefix(tw[i+j], w) {
				ok = false
				break
			}
		}
		if ok {
			return true
		}
	}
	return false
}

func str(obj map[string]any, path ...string) string {
	var cur any = obj
	for _, s := range path {
		m, ok := cur.(map[string]any)
		if !ok {
			return ""
		}
		cur = m[s]
	}
	s, _ := cur.(string)
	return s
}

// recipientTexts appends the names and addresses of a recipient list.
func recipientTexts(dst []string, obj map[string]any, prop string) []string {
	list, _ := obj[prop].([]any)
	for _, r := range list {
		m, _ := r.(map[string]any)
		dst = append(dst, str(m, "emailAddress", "name"), str(m, "emailAddress", "address"))
	}
	return dst
}

func (t *searchTerm) texts(obj map[string]any) []string {
	from := func(dst []string) []string {
		return append(dst, str(obj, "from", "emailAddress", "name"), str(obj, "from", "emailAddress", "address"))
	}
	switch t.Prop {
	case "":
		return from([]string{str(obj, "subject"), str(obj, "body", "content")})
	case "from":
		return from(nil)
	case "to":
		return recipientTexts(nil, obj, "toRecipients")
	case "cc":
		return recipientTexts(nil, obj, "ccRecipients")
	case "bcc":
		return recipientTexts(nil, obj, "bccRecipients")
	case "recipients", "participants":
		var out []string
		if t.Prop == "participants" {
			out = from(out)
		}
		for _, p := range []string{"toRecipients", "ccRecipients", "bccRecipients"} {
			out = recipientTexts(out, obj, p)
		}
		return out
	case "subject":
		return []string{str(obj, "subject")}
	case "body":
		return []string{str(obj, "body", "content")}
	case "attachment":
		var out []string
		list, _ := obj["attachments"].([]any)
		for _, a := range list {
			m, _ := a.(map[string]any)
			out = append(out, str(m, "name"))
		}
		return out
	case "category":
		var out []string
		list, _ := obj["categories"].([]any)
		for _, c := range list {
			s, _ := c.(string)
			out = append(out, s)
		}
		return out
	}
	return nil
}

func (t *searchTerm) match(obj map[string]any) bool {
	switch t.Prop {
	case "received", "sent":
		field := "receivedDateTime"
		if t.Prop == "sent" {
			field = "sentDateTime"
		}
		ts, err := time.Parse(time.RFC3339Nano, str(obj, field))
		if err != nil {
			return false
		}
		u := ts.UTC()
		day := time.Date(u.Year(), u.Month(), u.Day(), 0, 0, 0, 0, time.UTC)
		c := day.Compare(t.day)
		switch t.Op {
		case ">=":
			return c >= 0
		case "<=":
			return c <= 0
		case ">":
			return c > 0
		case "<":
			return c < 0
		case "<>":
			return c != 0
		}
		return c == 0
	case "hasattachments", "hasattachment":
		b, _ := obj["hasAttachments"].(bool)
		return b == t.flag
	case "isread":
		b, _ := obj["isRead"].(bool)
		return b == t.flag
	case "importance":
		return strings.EqualFold(str(obj, "importance"), t.Value)
	}
	for _, s := range t.texts(obj) {
		if matchWords(s, t.words) {
			return true
		}
	}
	return false
}

func (n *searchAnd) match(obj map[string]any) bool { return n.L.match(obj) && n.R.match(obj) }
func (n *searchOr) match(obj map[string]any) bool  { return n.L.match(obj) || n.R.match(obj) }
func (n *searchNot) match(obj map[string]any) bool { return !n.X.match(obj) }

// Printing parenthesises only what precedence needs (NOT, AND, OR from
// tightest; AND and OR left-associative), so that a long chain prints
// flat and parses back within the nesting limit.

func searchPrec(n searchNode) int {
	switch n.(type) {
	case *searchOr:
		return 1
	case *searchAnd:
		return 2
	case *searchNot:
		return 3
	}
	return 4
}

func searchChild(n searchNode, prec int, right bool) string {
	if p := searchPrec(n); p < prec || right && p == prec {
		return "(" + n.String() + ")"
	}
	return n.String()
}

func (n *searchAnd) String() string {
	return searchChild(n.L, 2, false) + " AND " + searchChild(n.R, 2, true)
}

func (n *searchOr) String() string {
	return searchChild(n.L, 1, false) + " OR " + searchChild(n.R, 1, true)
}

func (n *searchNot) String() string { return "NOT " + searchChild(n.X, 3, false) }

func (t *searchTerm) String() string {
	v := t.Value
	if t.Quoted {
		v = `"` + v + `"`
	}
	if t.Prop == "" {
		return v
	}
	return t.Prop + t.Op + v
}
