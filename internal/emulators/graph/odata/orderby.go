package odata

import (
	"strings"
	"time"
)

// OrderKey is one key of $orderby.
type OrderKey struct {
	Path string // slash path, e.g. "from/emailAddress/name"
	Desc bool
}

// orderError is a $orderby error: ODataLib's message as it is (Graph's
// "Invalid filter clause: " prefix belongs to $filter).
func orderError(format string, args ...any) *Error {
	return &Error{Code: CodeBadRequest, Message: sprintf(format, args...)}
}

// ParseOrderBy parses $orderby ("receivedDateTime desc,subject") over
// microsoft.graph.message.
func ParseOrderBy(s string) ([]OrderKey, error) { return ParseOrderByFor(s, Message) }

// ParseOrderByFor parses $orderby over the given type: a comma list of
// property paths to single primitive values, each optionally followed by
// asc or desc.
func ParseOrderByFor(s string, t *EntityType) ([]OrderKey, error) {
	var keys []OrderKey
	lx := lexer{src: s}
	tok, err := lx.next()
	if err != nil {
		return nil, orderErr(err)
	}
	if tok.kind == tokEOF {
		return nil, orderError("Expression expected at position %d in '%s'.", tok.pos, s)
	}
	for {
		if tok.kind != tokIdent {
			return nil, orderError("Syntax error at position %d in '%s'.", tok.pos, s)
		}
		first, prop, ok := t.prop(tok.text)
		segs := []string{first}
		owner := t
		if !ok {
			return nil, orderError("Could not find a property named '%s' on type '%s'.", tok.text, t.Name)
		}
		if tok, err = lx.next(); err != nil {
			return nil, orderErr(err)
		}
		for tok.kind == tokSlash {
			if tok, err = lx.next(); err != nil {
				return nil, orderErr(err)
			}
			if tok.kind != tokIdent {
				return nil, orderError("Syntax error at position %d in '%s'.", tok.pos, s)
			}
			if prop.Kind != KindComplex {
				return nil, orderError("Could not find a property named '%s' on type '%s'.", tok.text, owner.Name)
			}
			owner = prop.Complex
			var name string
			if name, prop, ok = owner.prop(tok.text); !ok {
				return nil, orderError("Could not find a property named '%s' on type '%s'.", tok.text, owner.Name)
			}
			segs = append(segs, name)
			if tok, err = lx.next(); err != nil {
				return nil, orderErr(err)
			}
		}
		if prop.Kind == KindComplex || prop.Kind == KindCollection {
			return nil, orderError("The $orderby expression must evaluate to a single value of primitive type.")
		}
		key := OrderKey{Path: strings.Join(segs, "/")}
		if tok.kind == tokIdent && (tok.text == "asc" || tok.text == "desc") {
			key.Desc = tok.text == "desc"
			if tok, err = lx.next(); err != nil {
				return nil, orderErr(err)
			}
		}
		keys = append(keys, key)
		switch tok.kind {
		case tokEOF:
			return keys, nil
		case tokComma:
			if tok, err = lx.next(); err != nil {
				return nil, orderErr(err)
			}
		default:
			return nil, orderError("Syntax error at position %d in '%s'.", tok.pos, s)
		}
	}
}

// orderErr re-labels a lexer error for $orderby.
func orderErr(e *Error) *Error {
	return &Error{Code: e.Code, Message: strings.TrimPrefix(e.Message, "Invalid filter clause: ")}
}

// Compare orders a and b by the keys: negative when a sorts first. Missing
// and null values sort first ascending (last descending), as in Graph;
// enums (importance, flag/flagStatus, …) by member order (low < normal <
// high), as Exchange sorts their values; other strings case-insensitively;
// DateTimeOffset strings as instants; numbers and booleans by value.
func Compare(keys []OrderKey, a, b map[string]any) int {
	for _, k := range keys {
		x, y := lookupPath(a, k.Path), lookupPath(b, k.Path)
		var c int
		if e := enumAt(Message, k.Path); e != nil {
			c = compareEnum(e, x, y)
		} else {
			c = compareJSON(x, y)
		}
		if c != 0 {
			if k.Desc {
				return -c
			}
			return c
		}
	}
	return 0
}

// compareEnum orders enum values by member order; values naming no
// member sort as null.
func compareEnum(e *EnumType, x, y any) int {
	idx := func(v any) int {
		s, _ := v.(string)
		return e.member(s)
	}
	return idx(x) - idx(y)
}

func lookupPath(obj map[string]any, path string) any {
	var cur any = obj
	for path != "" {
		seg := path
		if i := strings.IndexByte(path, '/'); i >= 0 {
			seg, path = path[:i], path[i+1:]
		} else {
			path = ""
		}
		m, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = m[seg]
	}
	return cur
}

// rank orders values of different JSON types: null first.
func rank(x any) int {
	switch x.(type) {
	case nil:
		return 0
	case bool:
		return 1
	case float64:
		return 2
	case string:
		return 3
	}
	return 4
}

func compareJSON(a, b any) int {
	ra, rb := rank(a), rank(b)
	if ra != rb {
		return ra - rb
	}
	switch a := a.(type) {
	case bool:
		v, _ := compareVals(val{k: KindBool, b: a}, val{k: KindBool, b: b.(bool)})
		return v
	case float64:
		v, _ := compareVals(val{k: KindDouble, f: a}, val{k: KindDouble, f: b.(float64)})
		return v
	case string:
		bs := b.(string)
		if looksLikeDateTime(a) && looksLikeDateTime(bs) {
			ta, ea := time.Parse(time.RFC3339Nano, a)
			tb, eb := time.Parse(time.RFC3339Nano, bs)
			if ea == nil && eb == nil {
				return ta.Compare(tb)
			}
		}
		return compareFold(a, bs)
	}
	return 0
}

func looksLikeDateTime(s string) bool { return len(s) >= 20 && s[4] == '-' && s[10] == 'T' }

// CheckInefficient applies Exchange's rule for $filter with $orderby on
// messages (Graph's "Using filter and orderby in the same query", and the
// Outlook team's 2018 note on InefficientFilter): the properties in
// $orderby must also appear in $filter, in the same order, and before any
// property that is not in $orderby. Otherwise Graph answers 400
// InefficientFilter. It holds for receivedDateTime too: to sort by it under
// an unrelated filter, put "receivedDateTime ge 1900-01-01T00:00:00Z and"
// first in the filter, as Microsoft's note shows. With no filter or no
// keys there is nothing to check.
func CheckInefficient(f *Filter, keys []OrderKey) error {
	if f == nil || len(keys) == 0 {
		return nil
	}
	var want []string
	for _, k := range keys {
		if !slicesContains(want, k.Path) {
			want = append(want, k.Path)
		}
	}
	props := f.props
	if len(props) < len(want) {
		return errInefficient
	}
	for i, p := range want {
		if props[i] != p {
			return errInefficient
		}
	}
	return nil
}

var errInefficient = &Error{Code: CodeInefficientFilter, Message: "The restriction or sort order is too complex for this operation."}

func slicesContains(s []string, x string) bool {
	for _, y := range s {
		if y == x {
			return true
		}
	}
	return false
}
