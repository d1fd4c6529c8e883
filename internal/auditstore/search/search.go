// Package search parses the search language of the listing routes (the q
// parameter): terms separated by spaces, all of which must hold —
// key:value, -key:value (not), key:a,b (any of), "quoted values", and bare
// words or quoted phrases (free text). Parse returns typed terms that the
// stores translate into parameterized SQL.
package search

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/auditrail/auditrail/schemas"
)

// ErrSyntax is wrapped by every error of Parse; the message names the
// offending term.
var ErrSyntax = errors.New("invalid search")

// Limits of an expression: they bound the SQL a search turns into.
const (
	MaxLen    = 1024
	MaxTerms  = 16
	MaxValues = 32
)

// Kind is the listing a search applies to; each has its own keys.
type Kind int

// Kinds.
const (
	Audit Kind = iota
	Executions
)

// Keys of the audit listings.
const (
	KeyAction        = "action"
	KeySource        = "source"
	KeyResourceType  = "resource_type"
	KeyResourceID    = "resource_id"
	KeyActor         = "actor"
	KeyPrincipalType = "principal_type"
	KeyProject       = "project"
	KeyIP            = "ip"
	KeyEventID       = "event_id"
)

// Keys of the execution listings.
const (
	KeyTool         = "tool"
	KeyToolkit      = "toolkit"
	KeyUser         = "user"
	KeySuccess      = "success"
	KeyHookDecision = "hook_decision"
	KeyErrorKind    = "error_kind"
)

var keys = map[Kind][]string{
	Audit:      {KeyAction, KeySource, KeyResourceType, KeyResourceID, KeyActor, KeyPrincipalType, KeyProject, KeyIP, KeyEventID},
	Executions: {KeyTool, KeyToolkit, KeyUser, KeySuccess, KeyHookDecision, KeyErrorKind},
}

// HookDecisions are the values of hook_decision: a hook's decision (allow,
// deny) or the failure mode that decided for it (fail_open, fail_closed).
var HookDecisions = []string{"allow", "deny", "fail_open", "fail_closed"}

// Keys returns the keys a search of kind accepts.
func Keys(kind Kind) []string { return append([]string(nil), keys[kind]...) }

// Term is one condition. Key is "" for free text (Values holds the one
// word or phrase). Values holds the values as typed; for action, source and
// resource_type, Nums holds the enum numbers; for ip, Prefixes the address
// ranges (an address is its /32 or /128); for success, Values is "true" or
// "false". The term holds when any value matches (none, when Not).
type Term struct {
	Key      string
	Not      bool
	Values   []string
	Nums     []uint8
	Prefixes []netip.Prefix
}

// Query is a parsed expression: all its terms must hold.
type Query struct {
	Terms []Term
}

// Empty reports whether the query has no term.
func (q Query) Empty() bool { return len(q.Terms) == 0 }

// Parse parses s as a search of kind. An empty or blank s is the empty query.
func Parse(kind Kind, s string) (Query, error) {
	var q Query
	if len(s) > MaxLen {
		return q, fmt.Errorf("%w: longer than %d bytes", ErrSyntax, MaxLen)
	}
	if !utf8.ValidString(s) {
		return q, fmt.Errorf("%w: not UTF-8", ErrSyntax)
	}
	raw, err := split(s)
	if err != nil {
		return q, err
	}
	if len(raw) > MaxTerms {
		return q, fmt.Errorf("%w: %d terms, at most %d", ErrSyntax, len(raw), MaxTerms)
	}
	for i, r := range raw {
		t, err := parseTerm(kind, r)
		if err != nil {
			return Query{}, fmt.Errorf("%w: term %d %q: %s", ErrSyntax, i+1, r, err.Error())
		}
		q.Terms = append(q.Terms, t)
	}
	return q, nil
}

// split cuts s into terms at spaces outside double quotes.
func split(s string) ([]string, error) {
	var out []string
	var b strings.Builder
	inQuote, escaped := false, false
	for _, r := range s {
		switch {
		case escaped:
			escaped = false
		case inQuote && r == '\\':
			escaped = true
		case r == '"':
			inQuote = !inQuote
		case !inQuote && isSpace(r):
			if b.Len() > 0 {
				out = append(out, b.String())
				b.Reset()
			}
			continue
		}
		b.WriteRune(r)
	}
	if inQuote || escaped {
		return nil, fmt.Errorf("%w: term %d %q: unterminated quote", ErrSyntax, len(out)+1, b.String())
	}
	if b.Len() > 0 {
		out = append(out, b.String())
	}
	return out, nil
}

func isSpace(r rune) bool { return r == ' ' || r == '\t' || r == '\n' || r == '\r' }

// parseTerm parses one term (no space outside quotes, quotes balanced).
func parseTerm(kind Kind, s string) (Term, error) {
	var t Term
	if strings.HasPrefix(s, "-") {
		t.Not, s = true, s[1:]
	}
	if s == "" {
		return t, errors.New("nothing after -")
	}
	if s[0] == '"' {
		v, rest, err := unquote(s)
		if err != nil {
			return t, err
		}
		if rest != "" {
			return t, fmt.Errorf("unexpected %q after the quoted phrase", rest)
		}
		if v == "" {
			return t, errors.New("empty phrase")
		}
		t.Values = []string{v}
		return t, nil
	}
	key, val, ok := strings.Cut(s, ":")
	if !ok {
		if strings.ContainsRune(s, '"') {
			return t, errors.New(`a quote inside a word; quote the whole phrase`)
		}
		t.Values = []string{s}
		return t, nil
	}
	if !known(kind, key) {
		return t, fmt.Errorf("unknown key %s; keys: %s", key, strings.Join(keys[kind], ", "))
	}
	t.Key = key
	vals, err := values(val)
	if err != nil {
		return t, err
	}
	if len(vals) > MaxValues {
		return t, fmt.Errorf("%d values, at most %d", len(vals), MaxValues)
	}
	t.Values = vals
	return t, typed(&t)
}

func known(kind Kind, key string) bool {
	for _, k := range keys[kind] {
		if k == key {
			return true
		}
	}
	return false
}

// values splits a comma-separated list of plain or quoted values.
func values(s string) ([]string, error) {
	var out []string
	for {
		var v string
		if strings.HasPrefix(s, `"`) {
			var err error
			if v, s, err = unquote(s); err != nil {
				return nil, err
			}
			if s != "" && s[0] != ',' {
				return nil, fmt.Errorf("unexpected %q after a quoted value", s)
			}
		} else {
			i := strings.IndexByte(s, ',')
			if i < 0 {
				i = len(s)
			}
			v, s = s[:i], s[i:]
			if strings.ContainsRune(v, '"') {
				return nil, errors.New(`a quote inside a value; quote the whole value`)
			}
		}
		if v == "" {
			return nil, errors.New("empty value")
		}
		out = append(out, v)
		if s == "" {
			return out, nil
		}
		s = s[1:] // the comma
		if s == "" {
			return nil, errors.New("empty value after ,")
		}
	}
}

// unquote reads a quoted string at the start of s (\" and \\ escape) and
// returns it and the rest of s.
func unquote(s string) (string, string, error) {
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		switch c := s[i]; c {
		case '\\':
			if i+1 == len(s) {
				return "", "", errors.New("unterminated quote")
			}
			i++
			b.WriteByte(s[i])
		case '"':
			return b.String(), s[i+1:], nil
		default:
			b.WriteByte(c)
		}
	}
	return "", "", errors.New("unterminated quote")
}

// typed checks the values of a key term and fills Nums or Prefixes.
func typed(t *Term) error {
	for _, v := range t.Values {
		switch t.Key {
		case KeyAction:
			a, err := schemas.ParseAuditActionFilter(v)
			if err != nil {
				return err
			}
			t.Nums = append(t.Nums, uint8(a))
		case KeySource:
			a, err := schemas.ParseAuditSourceFilter(v)
			if err != nil {
				return err
			}
			t.Nums = append(t.Nums, uint8(a))
		case KeyResourceType:
			a, err := schemas.ParseResourceTypeFilter(v)
			if err != nil {
				return err
			}
			t.Nums = append(t.Nums, uint8(a))
		case KeyProject, KeyEventID:
			if len(v) != 36 {
				return fmt.Errorf("%s %q is not a UUID", t.Key, v)
			}
			if _, err := uuid.Parse(v); err != nil {
				return fmt.Errorf("%s %q is not a UUID", t.Key, v)
			}
		case KeyIP:
			p, err := parsePrefix(v)
			if err != nil {
				return err
			}
			t.Prefixes = append(t.Prefixes, p)
		case KeySuccess:
			if v != "true" && v != "false" {
				return fmt.Errorf("success %q is not true or false", v)
			}
		case KeyHookDecision:
			ok := false
			for _, d := range HookDecisions {
				ok = ok || d == v
			}
			if !ok {
				return fmt.Errorf("hook_decision %q; one of %s", v, strings.Join(HookDecisions, ", "))
			}
		}
	}
	return nil
}

// parsePrefix parses an address (its single-address prefix) or a CIDR, in
// canonical (masked) form. An IPv4-mapped IPv6 address (or a prefix inside
// ::ffff:0:0/96) is its IPv4 address (prefix). IPv4 addresses are in IPv4
// prefixes only, as netip.Prefix.Contains says: ::/0 holds every IPv6
// address but no IPv4 one (see Mapped).
func parsePrefix(v string) (netip.Prefix, error) {
	if strings.Contains(v, "/") {
		p, err := netip.ParsePrefix(v)
		if err != nil || p.Addr().Zone() != "" {
			return netip.Prefix{}, fmt.Errorf("ip %q is not an address or a CIDR", v)
		}
		if a := p.Addr(); a.Is4In6() && p.Bits() >= 96 {
			p = netip.PrefixFrom(a.Unmap(), p.Bits()-96)
		}
		return p.Masked(), nil
	}
	a, err := netip.ParseAddr(v)
	if err != nil || a.Zone() != "" {
		return netip.Prefix{}, fmt.Errorf("ip %q is not an address or a CIDR", v)
	}
	a = a.Unmap()
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// Range16 returns the first and last addresses of p as 32 upper-case hex
// digits of their 16-byte form (an IPv4 address as ::ffff:a.b.c.d): the
// form both stores compare stored addresses in.
func Range16(p netip.Prefix) (lo, hi string) {
	first := p.Addr()
	bits := p.Bits()
	if first.Is4() {
		bits += 96
	}
	b := first.As16()
	last := b
	for i := bits; i < 128; i++ {
		last[i/8] |= 1 << (7 - i%8)
	}
	return fmt.Sprintf("%X", b[:]), fmt.Sprintf("%X", last[:])
}

// Mapped is the first 24 hex digits of every IPv4 address in the form of
// Hex16 (::ffff:0:0/96): the stores exclude them from an IPv6 prefix's range.
const Mapped = "00000000000000000000FFFF"

// Hex16 is the 16-byte form of a stored address as Range16 writes it, or
// "" when s is not an address.
func Hex16(s string) string {
	a, err := netip.ParseAddr(s)
	if err != nil || a.Zone() != "" {
		return ""
	}
	b := a.As16()
	return fmt.Sprintf("%X", b[:])
}
