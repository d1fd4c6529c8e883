package tlog

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"slices"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// maxDepth bounds the nesting of a canonicalized document. Entries nest
// three or four levels; the bound keeps a hostile line from costing more
// than a bounded amount of stack and copying.
const maxDepth = 64

// canonicalizer writes the RFC 8785 (JCS) form of one JSON text in a
// single pass: strings and numbers are rewritten as they are read, and the
// members of each object are put in order once the object is complete.
// It is the fast path of Canonical; github.com/gowebpki/jcs (the reference
// implementation the tests and the fuzz target compare it with) allocates
// a tree per document and is 10x slower, too slow for the verifier.
//
// A canonicalizer is reused: its buffers grow to the largest document seen.
type canonicalizer struct {
	src   []byte
	pos   int
	depth int
	out   []byte
	tmp   []byte
	plain bool     // the last string read was ASCII without escapes
	mem   []member // members of the objects being read, innermost last
	sig   []byte   // the names of an object as written, the key of perms
	perms map[string][]int32
	top   []member // members of the top-level object, in output order
	base  int      // the depth of src's value in its document (canonicalAt)
}

// member is one object member in out: the quoted key at [key, colon) and
// the value at [colon+1, end).
type member struct {
	key, colon, end int
	plain           bool   // the name is ASCII without escapes: compare its bytes
	prefix          uint64 // of a plain name: its first 8 bytes, big-endian, zero-padded
}

// canonical appends the canonical form of src to dst.
func (c *canonicalizer) canonical(dst, src []byte) ([]byte, error) {
	return c.canonicalAt(dst, src, 0)
}

// canonicalAt is canonical of a value found depth levels down a document
// (maxDepth counts from the document's top).
func (c *canonicalizer) canonicalAt(dst, src []byte, depth int) ([]byte, error) {
	c.src, c.pos, c.depth, c.base, c.out, c.top = src, 0, depth, depth, dst, c.top[:0]
	c.mem = c.mem[:0]
	c.skipSpace()
	if err := c.value(); err != nil {
		return nil, err
	}
	c.skipSpace()
	if c.pos != len(c.src) {
		return nil, c.errorf("data after the JSON value")
	}
	out := c.out
	c.src, c.out = nil, nil
	return out, nil
}

func (c *canonicalizer) errorf(format string, args ...any) error {
	return fmt.Errorf("%w: at byte %d: %s", ErrNotCanonicalizable, c.pos, fmt.Sprintf(format, args...))
}

func (c *canonicalizer) skipSpace() {
	for c.pos < len(c.src) {
		switch c.src[c.pos] {
		case ' ', '\t', '\n', '\r':
			c.pos++
		default:
			return
		}
	}
}

func (c *canonicalizer) value() error {
	if c.pos >= len(c.src) {
		return c.errorf("unexpected end")
	}
	switch b := c.src[c.pos]; {
	case b == '{':
		return c.object()
	case b == '[':
		return c.array()
	case b == '"':
		return c.str()
	case b == '-' || b >= '0' && b <= '9':
		return c.number()
	case b == 't':
		return c.literal("true")
	case b == 'f':
		return c.literal("false")
	case b == 'n':
		return c.literal("null")
	default:
		return c.errorf("unexpected %q", b)
	}
}

func (c *canonicalizer) literal(lit string) error {
	if len(c.src)-c.pos < len(lit) || string(c.src[c.pos:c.pos+len(lit)]) != lit {
		return c.errorf("invalid literal")
	}
	c.pos += len(lit)
	c.out = append(c.out, lit...)
	return nil
}

func (c *canonicalizer) enter() error {
	c.depth++
	if c.depth > maxDepth {
		return c.errorf("nested deeper than %d", maxDepth)
	}
	return nil
}

func (c *canonicalizer) array() error {
	if err := c.enter(); err != nil {
		return err
	}
	c.pos++
	c.out = append(c.out, '[')
	c.skipSpace()
	if c.pos < len(c.src) && c.src[c.pos] == ']' {
		c.pos++
		c.out = append(c.out, ']')
		c.depth--
		return nil
	}
	for {
		c.skipSpace()
		if err := c.value(); err != nil {
			return err
		}
		c.skipSpace()
		if c.pos >= len(c.src) {
			return c.errorf("unterminated array")
		}
		switch c.src[c.pos] {
		case ',':
			c.pos++
			c.out = append(c.out, ',')
		case ']':
			c.pos++
			c.out = append(c.out, ']')
			c.depth--
			return nil
		default:
			return c.errorf("expected , or ] in array")
		}
	}
}

func (c *canonicalizer) object() error {
	if err := c.enter(); err != nil {
		return err
	}
	c.pos++
	c.out = append(c.out, '{')
	start := len(c.out)
	base := len(c.mem)
	c.skipSpace()
	if c.pos < len(c.src) && c.src[c.pos] == '}' {
		c.pos++
	} else {
		for {
			c.skipSpace()
			if c.pos >= len(c.src) || c.src[c.pos] != '"' {
				return c.errorf("expected a member name")
			}
			key := len(c.out)
			if err := c.str(); err != nil {
				return err
			}
			colon := len(c.out)
			plain := c.plain
			c.skipSpace()
			if c.pos >= len(c.src) || c.src[c.pos] != ':' {
				return c.errorf("expected : after a member name")
			}
			c.pos++
			c.out = append(c.out, ':')
			c.skipSpace()
			if err := c.value(); err != nil {
				return err
			}
			c.mem = append(c.mem, member{key: key, colon: colon, end: len(c.out), plain: plain})
			c.skipSpace()
			if c.pos >= len(c.src) {
				return c.errorf("unterminated object")
			}
			if c.src[c.pos] == '}' {
				c.pos++
				break
			}
			if c.src[c.pos] != ',' {
				return c.errorf("expected , or } in object")
			}
			c.pos++
		}
	}
	if err := c.order(start, c.mem[base:]); err != nil {
		return err
	}
	c.mem = c.mem[:base]
	c.out = append(c.out, '}')
	c.depth--
	return nil
}

// order rewrites out[start:] (the members ms, written in input order with
// no separators) as the members sorted by name, comma-separated.
func (c *canonicalizer) order(start int, ms []member) error {
	o := c.out
	// Objects of one kind (every entry of an export) have the same names
	// in the same order: their sorted order is remembered, keyed by the
	// names as written.
	sig := c.sig[:0]
	for _, m := range ms {
		sig = append(sig, o[m.key:m.colon]...)
	}
	c.sig = sig
	perm, ok := c.perms[string(sig)]
	if !ok || len(perm) != len(ms) {
		sorted, err := c.sortNames(ms)
		if err != nil {
			return err
		}
		perm = sorted
		if len(ms) <= 64 && len(sig) <= 4096 {
			if c.perms == nil || len(c.perms) >= 64 {
				c.perms = map[string][]int32{}
			}
			c.perms[string(sig)] = perm
		}
	}
	c.tmp = append(c.tmp[:0], o[start:]...)
	o = o[:start]
	top := c.depth == c.base+1
	for i, p := range perm {
		m := ms[p]
		if i > 0 {
			o = append(o, ',')
		}
		k := len(o)
		o = append(o, c.tmp[m.key-start:m.end-start]...)
		if top {
			c.top = append(c.top, member{key: k, colon: k + m.colon - m.key, end: len(o)})
		}
	}
	c.out = o
	return nil
}

// sortNames returns the order of ms sorted by name (RFC 8785 §3.2.3), and
// refuses a name given twice. ms is left as it is.
func (c *canonicalizer) sortNames(ms []member) ([]int32, error) {
	o := c.out
	for i := range ms {
		if ms[i].plain {
			var p [8]byte
			copy(p[:], o[ms[i].key+1:ms[i].colon-1])
			ms[i].prefix = binary.BigEndian.Uint64(p[:])
		}
	}
	cmp := func(a, b member) int {
		if a.plain && b.plain {
			if a.prefix != b.prefix {
				if a.prefix < b.prefix {
					return -1
				}
				return 1
			}
			return bytes.Compare(o[a.key+1:a.colon-1], o[b.key+1:b.colon-1])
		}
		return compareNames(o[a.key:a.colon], o[b.key:b.colon])
	}
	idx := make([]int, len(ms))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int { return cmp(ms[a], ms[b]) })
	for i := 1; i < len(idx); i++ {
		if cmp(ms[idx[i-1]], ms[idx[i]]) == 0 {
			return nil, c.errorf("duplicate member %.60s", o[ms[idx[i]].key:ms[idx[i]].colon])
		}
	}
	perm := make([]int32, len(idx))
	for i, k := range idx {
		perm[i] = int32(k)
	}
	return perm, nil
}

// compareNames orders two canonical quoted member names by the UTF-16 code
// units of the names they spell (RFC 8785 §3.2.3).
func compareNames(a, b []byte) int {
	a, b = a[1:len(a)-1], b[1:len(b)-1]
	for len(a) > 0 && len(b) > 0 {
		ra, na := nextNameRune(a)
		rb, nb := nextNameRune(b)
		if ra != rb {
			return int(utf16Unit(ra)) - int(utf16Unit(rb))
		}
		a, b = a[na:], b[nb:]
	}
	return len(a) - len(b)
}

// utf16Unit is the first UTF-16 code unit of r; two runes with the same
// first unit (a surrogate pair's high half) compare as their code points.
func utf16Unit(r rune) rune {
	if r >= 0x10000 {
		hi, lo := utf16.EncodeRune(r)
		return hi<<10 | (lo - 0xDC00) // keeps the order of r among runes ≥ 0x10000, below any BMP rune ≥ 0xE000
	}
	if r >= 0xE000 {
		return r << 10
	}
	return r
}

// nextNameRune decodes one rune of a canonical string's contents (escapes
// there are only \" \\ \b \f \n \r \t and \u00XX).
func nextNameRune(s []byte) (rune, int) {
	if s[0] == '\\' {
		switch s[1] {
		case 'b':
			return '\b', 2
		case 'f':
			return '\f', 2
		case 'n':
			return '\n', 2
		case 'r':
			return '\r', 2
		case 't':
			return '\t', 2
		case 'u':
			v, _ := strconv.ParseUint(string(s[2:6]), 16, 16)
			return rune(v), 6
		default:
			return rune(s[1]), 2
		}
	}
	if s[0] < utf8.RuneSelf {
		return rune(s[0]), 1
	}
	return utf8.DecodeRune(s)
}

const hexDigits = "0123456789abcdef"

// SWAR masks: a 1 and a 0x80 in every byte.
const (
	lows  = 0x0101010101010101
	highs = 0x8080808080808080
)

// hasZero is non-zero when a byte of x is zero.
func hasZero(x uint64) uint64 { return (x - lows) &^ x & highs }

// str reads a JSON string and writes it as RFC 8785 does: only '"', '\'
// and the control characters escaped (the five short forms, else \u00xx),
// everything else as UTF-8. Invalid UTF-8 and lone surrogates are refused.
func (c *canonicalizer) str() error {
	c.pos++
	c.out = append(c.out, '"')
	c.plain = true
	src := c.src
	for {
		i := c.pos
		// Eight bytes at a time while none is special (a control
		// character, '"', '\\' or a non-ASCII byte).
		for i+8 <= len(src) {
			x := binary.LittleEndian.Uint64(src[i:])
			if (x-lows*0x20)&^x&highs|hasZero(x^(lows*'"'))|hasZero(x^(lows*'\\'))|x&highs != 0 {
				break
			}
			i += 8
		}
		for i < len(src) {
			b := src[i]
			if b < 0x20 || b == '"' || b == '\\' || b >= utf8.RuneSelf {
				break
			}
			i++
		}
		c.out = append(c.out, src[c.pos:i]...)
		c.pos = i
		if i >= len(src) {
			return c.errorf("unterminated string")
		}
		switch b := src[i]; {
		case b == '"':
			c.pos++
			c.out = append(c.out, '"')
			return nil
		case b < 0x20:
			return c.errorf("control character in a string")
		case b >= utf8.RuneSelf:
			c.plain = false
			r, n := utf8.DecodeRune(src[i:])
			if r == utf8.RuneError && n <= 1 {
				return c.errorf("invalid UTF-8")
			}
			c.out = append(c.out, src[i:i+n]...)
			c.pos += n
		default: // backslash
			c.plain = false
			if i+1 >= len(src) {
				return c.errorf("unterminated escape")
			}
			var r rune
			switch e := src[i+1]; e {
			case '"', '\\', '/':
				r, c.pos = rune(e), i+2
			case 'b':
				r, c.pos = '\b', i+2
			case 'f':
				r, c.pos = '\f', i+2
			case 'n':
				r, c.pos = '\n', i+2
			case 'r':
				r, c.pos = '\r', i+2
			case 't':
				r, c.pos = '\t', i+2
			case 'u':
				u, ok := hex4(src[i+2:])
				if !ok {
					return c.errorf("invalid \\u escape")
				}
				c.pos = i + 6
				r = u
				if utf16.IsSurrogate(u) {
					if u >= 0xDC00 {
						return c.errorf("lone low surrogate")
					}
					if len(src) < c.pos+6 || src[c.pos] != '\\' || src[c.pos+1] != 'u' {
						return c.errorf("lone high surrogate")
					}
					lo, ok := hex4(src[c.pos+2:])
					if !ok || lo < 0xDC00 || lo > 0xDFFF {
						return c.errorf("invalid low surrogate")
					}
					r = utf16.DecodeRune(u, lo)
					c.pos += 6
				}
			default:
				return c.errorf("invalid escape")
			}
			c.appendRune(r)
		}
	}
}

func (c *canonicalizer) appendRune(r rune) {
	switch {
	case r == '"' || r == '\\':
		c.out = append(c.out, '\\', byte(r))
	case r == '\b':
		c.out = append(c.out, '\\', 'b')
	case r == '\f':
		c.out = append(c.out, '\\', 'f')
	case r == '\n':
		c.out = append(c.out, '\\', 'n')
	case r == '\r':
		c.out = append(c.out, '\\', 'r')
	case r == '\t':
		c.out = append(c.out, '\\', 't')
	case r < 0x20:
		c.out = append(c.out, '\\', 'u', '0', '0', hexDigits[r>>4], hexDigits[r&0xF])
	default:
		c.out = utf8.AppendRune(c.out, r)
	}
}

func hex4(s []byte) (rune, bool) {
	if len(s) < 4 {
		return 0, false
	}
	var v rune
	for _, b := range s[:4] {
		switch {
		case b >= '0' && b <= '9':
			v = v<<4 | rune(b-'0')
		case b >= 'a' && b <= 'f':
			v = v<<4 | rune(b-'a'+10)
		case b >= 'A' && b <= 'F':
			v = v<<4 | rune(b-'A'+10)
		default:
			return 0, false
		}
	}
	return v, true
}

// number reads a number of the RFC 8259 grammar and writes it as
// ECMAScript's Number.prototype.toString does for the IEEE 754 double it
// denotes (RFC 8785 §3.2.2.3).
func (c *canonicalizer) number() error {
	src, start := c.src, c.pos
	i := start
	if src[i] == '-' {
		i++
	}
	digits := i
	switch {
	case i < len(src) && src[i] == '0':
		i++
	case i < len(src) && src[i] >= '1' && src[i] <= '9':
		for i < len(src) && src[i] >= '0' && src[i] <= '9' {
			i++
		}
	default:
		return c.errorf("invalid number")
	}
	intEnd := i
	if i < len(src) && src[i] == '.' {
		i++
		if i >= len(src) || src[i] < '0' || src[i] > '9' {
			return c.errorf("invalid number")
		}
		for i < len(src) && src[i] >= '0' && src[i] <= '9' {
			i++
		}
	}
	if i < len(src) && (src[i] == 'e' || src[i] == 'E') {
		i++
		if i < len(src) && (src[i] == '+' || src[i] == '-') {
			i++
		}
		if i >= len(src) || src[i] < '0' || src[i] > '9' {
			return c.errorf("invalid number")
		}
		for i < len(src) && src[i] >= '0' && src[i] <= '9' {
			i++
		}
	}
	c.pos = i
	lit := src[start:i]
	// An integer of at most 15 digits is exact in a double and printed
	// as its digits: it is its own canonical form (but "-0" is "0").
	if i == intEnd && intEnd-digits <= 15 && string(lit) != "-0" {
		c.out = append(c.out, lit...)
		return nil
	}
	f, err := strconv.ParseFloat(string(lit), 64)
	if err != nil {
		return c.errorf("number out of range")
	}
	c.out = appendES6Number(c.out, f)
	return nil
}

// appendES6Number appends f as ECMAScript prints a Number (f is finite).
func appendES6Number(dst []byte, f float64) []byte {
	if f == 0 {
		return append(dst, '0')
	}
	if f < 0 {
		dst = append(dst, '-')
		f = -f
	}
	if f < 1e21 && f >= 1e-6 {
		return strconv.AppendFloat(dst, f, 'f', -1, 64)
	}
	n := len(dst)
	dst = strconv.AppendFloat(dst, f, 'e', -1, 64)
	// Go writes a two-digit exponent ("1e+07"); ECMAScript does not.
	for j := n; j < len(dst)-2; j++ {
		if dst[j] == 'e' {
			if dst[j+2] == '0' {
				dst = append(dst[:j+2], dst[j+3:]...)
			}
			break
		}
	}
	return dst
}
