package odata

import "strings"

type tokKind uint8

const (
	tokEOF tokKind = iota
	tokIdent
	tokString // text holds the unescaped value
	tokNumber
	tokDateTime
	tokDate
	tokLParen
	tokRParen
	tokComma
	tokSlash
	tokColon
)

type token struct {
	kind tokKind
	text string
	pos  int // byte offset in the input
}

// lexer splits a $filter or $orderby expression into tokens.
type lexer struct {
	src string
	pos int
}

func isDigit(c byte) bool      { return c >= '0' && c <= '9' }
func isIdentStart(c byte) bool { return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
func isIdentChar(c byte) bool  { return isIdentStart(c) || isDigit(c) }

func (l *lexer) skipSpace() {
	for l.pos < len(l.src) && (l.src[l.pos] == ' ' || l.src[l.pos] == '\t' || l.src[l.pos] == '\n' || l.src[l.pos] == '\r') {
		l.pos++
	}
}

// next returns the next token, or an error for an unterminated string or a
// character that starts no token.
func (l *lexer) next() (token, *Error) {
	l.skipSpace()
	start := l.pos
	if l.pos >= len(l.src) {
		return token{kind: tokEOF, pos: start}, nil
	}
	c := l.src[l.pos]
	switch {
	case c == '(':
		l.pos++
		return token{kind: tokLParen, text: "(", pos: start}, nil
	case c == ')':
		l.pos++
		return token{kind: tokRParen, text: ")", pos: start}, nil
	case c == ',':
		l.pos++
		return token{kind: tokComma, text: ",", pos: start}, nil
	case c == '/':
		l.pos++
		return token{kind: tokSlash, text: "/", pos: start}, nil
	case c == ':':
		l.pos++
		return token{kind: tokColon, text: ":", pos: start}, nil
	case c == '\'':
		var b strings.Builder
		l.pos++
		for {
			i := strings.IndexByte(l.src[l.pos:], '\'')
			if i < 0 {
				return token{}, filterError("There is an unterminated string literal at position %d in '%s'.", l.pos, l.src)
			}
			b.WriteString(l.src[l.pos : l.pos+i])
			l.pos += i + 1
			if l.pos < len(l.src) && l.src[l.pos] == '\'' { // '' is an escaped quote
				b.WriteByte('\'')
				l.pos++
				continue
			}
			return token{kind: tokString, text: b.String(), pos: start}, nil
		}
	case isDigit(c) || c == '-' && l.pos+1 < len(l.src) && isDigit(l.src[l.pos+1]):
		if n := scanDateTime(l.src[l.pos:]); n > 0 {
			l.pos += n
			kind := tokDateTime
			if n == 10 {
				kind = tokDate
			}
			return token{kind: kind, text: l.src[start:l.pos], pos: start}, nil
		}
		l.pos += scanNumber(l.src[l.pos:])
		if l.pos < len(l.src) && isIdentChar(l.src[l.pos]) {
			return token{}, filterError("Syntax error at position %d in '%s'.", l.pos, l.src)
		}
		return token{kind: tokNumber, text: l.src[start:l.pos], pos: start}, nil
	case isIdentStart(c) || c == '$':
		l.pos++
		for l.pos < len(l.src) && (isIdentChar(l.src[l.pos]) || l.src[l.pos] == '.') {
			l.pos++
		}
		return token{kind: tokIdent, text: l.src[start:l.pos], pos: start}, nil
	}
	return token{}, filterError("Syntax error: character '%c' is not valid at position %d in '%s'.", rune(c), start, l.src)
}

// scanNumber returns the length of the number at the start of s:
// -?digits(.digits)?([eE][+-]?digits)?
func scanNumber(s string) int {
	i := 0
	if i < len(s) && s[i] == '-' {
		i++
	}
	for i < len(s) && isDigit(s[i]) {
		i++
	}
	if i+1 < len(s) && s[i] == '.' && isDigit(s[i+1]) {
		i++
		for i < len(s) && isDigit(s[i]) {
			i++
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		j := i + 1
		if j < len(s) && (s[j] == '+' || s[j] == '-') {
			j++
		}
		if j < len(s) && isDigit(s[j]) {
			for j < len(s) && isDigit(s[j]) {
				j++
			}
			i = j
		}
	}
	return i
}

// scanDateTime returns the length of the date (YYYY-MM-DD) or
// DateTimeOffset (YYYY-MM-DDThh:mm[:ss[.fffffff]](Z|±hh:mm)) literal at the
// start of s, or 0.
func scanDateTime(s string) int {
	digits := func(i, n int) bool {
		if i+n > len(s) {
			return false
		}
		for j := i; j < i+n; j++ {
			if !isDigit(s[j]) {
				return false
			}
		}
		return true
	}
	at := func(i int, c byte) bool { return i < len(s) && s[i] == c }
	if !digits(0, 4) || !at(4, '-') || !digits(5, 2) || !at(7, '-') || !digits(8, 2) {
		return 0
	}
	if !at(10, 'T') && !at(10, 't') {
		if len(s) > 10 && isIdentChar(s[10]) {
			return 0
		}
		return 10
	}
	if !digits(11, 2) || !at(13, ':') || !digits(14, 2) {
		return 0
	}
	i := 16
	if at(i, ':') {
		if !digits(i+1, 2) {
			return 0
		}
		i += 3
		if at(i, '.') {
			j := i + 1
			for j < len(s) && isDigit(s[j]) {
				j++
			}
			if j == i+1 {
				return 0
			}
			i = j
		}
	}
	switch {
	case at(i, 'Z') || at(i, 'z'):
		i++
	case at(i, '+') || at(i, '-'):
		if !digits(i+1, 2) || !at(i+3, ':') || !digits(i+4, 2) {
			return 0
		}
		i += 6
	default:
		return 0
	}
	if i < len(s) && isIdentChar(s[i]) {
		return 0
	}
	return i
}
