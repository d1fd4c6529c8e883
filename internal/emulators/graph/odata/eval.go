package odata

import (
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// val is a runtime value.
type val struct {
	k Kind
	s string
	f float64
	b bool
	t time.Time
}

// env is the evaluation state of one Match: the object and the values
// bound to lambda variables.
type env struct {
	root map[string]any
	vars [maxVars]any
	// The last DateTimeOffset string parsed: a range (ge … and lt …)
	// parses the property once.
	lastStr  string
	lastTime time.Time
	lastOK   bool
}

// Match reports whether obj satisfies the filter. Missing properties are
// null; comparisons with null other than eq/ne are false, as in Graph.
func (f *Filter) Match(obj map[string]any) bool {
	e := envPool.Get().(*env)
	*e = env{root: obj}
	v := f.Root.eval(e)
	*e = env{} // drop the references to obj
	envPool.Put(e)
	return v.k == KindBool && v.b
}

// envPool recycles evaluation states: an env reached through interface
// calls escapes to the heap, and Match runs once per message.
var envPool = sync.Pool{New: func() any { return new(env) }}

func boolVal(b bool) val { return val{k: KindBool, b: b} }

func (n *Literal) eval(*env) val {
	switch n.K {
	case KindString:
		return val{k: KindString, s: n.Text}
	case KindInt, KindDouble:
		return val{k: n.K, f: n.f}
	case KindBool:
		return val{k: KindBool, b: n.b}
	case KindDateTime, KindDate:
		return val{k: KindDateTime, t: n.t}
	case KindEnum:
		return val{k: KindEnum, f: n.f}
	}
	return val{}
}

// lookup follows the path's segments from its root.
func (n *Path) lookup(e *env) any {
	var cur any
	if n.varIdx >= 0 {
		cur = e.vars[n.varIdx]
	} else {
		cur = e.root
	}
	for _, s := range n.Segs {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = m[s]
	}
	return cur
}

func (n *Path) eval(e *env) val {
	x := n.lookup(e)
	if s, ok := x.(string); ok && n.prop.Kind == KindDateTime {
		if !e.lastOK || s != e.lastStr {
			t, err := time.Parse(time.RFC3339Nano, s)
			if err != nil {
				return val{}
			}
			e.lastStr, e.lastTime, e.lastOK = s, t, true
		}
		return val{k: KindDateTime, t: e.lastTime}
	}
	if s, ok := x.(string); ok && n.prop.Kind == KindEnum {
		i := n.prop.Enum.member(s)
		if i < 0 {
			return val{}
		}
		return val{k: KindEnum, f: float64(i)}
	}
	return convert(x, n.prop.Kind)
}

// convert turns a JSON value into a val of the property's kind; values of
// the wrong JSON type are null.
func convert(x any, k Kind) val {
	switch x := x.(type) {
	case string:
		switch k {
		case KindString:
			return val{k: KindString, s: x}
		case KindDateTime:
			t, err := time.Parse(time.RFC3339Nano, x)
			if err != nil {
				return val{}
			}
			return val{k: KindDateTime, t: t}
		}
	case float64:
		if k.numeric() {
			return val{k: k, f: x}
		}
	case bool:
		if k == KindBool {
			return val{k: KindBool, b: x}
		}
	}
	return val{}
}

func (n *Not) eval(e *env) val {
	v := n.X.eval(e)
	if v.k != KindBool {
		return val{}
	}
	return boolVal(!v.b)
}

func (n *Binary) eval(e *env) val {
	switch n.Op {
	case "and":
		l := n.L.eval(e)
		if l.k != KindBool || !l.b {
			return boolVal(false)
		}
		r := n.R.eval(e)
		return boolVal(r.k == KindBool && r.b)
	case "or":
		l := n.L.eval(e)
		if l.k == KindBool && l.b {
			return boolVal(true)
		}
		r := n.R.eval(e)
		return boolVal(r.k == KindBool && r.b)
	}
	l, r := n.L.eval(e), n.R.eval(e)
	if l.k == KindNull || r.k == KindNull {
		switch n.Op {
		case "eq":
			return boolVal(l.k == r.k)
		case "ne":
			return boolVal(l.k != r.k)
		}
		return boolVal(false)
	}
	c, ok := compareVals(l, r)
	if !ok {
		return boolVal(n.Op == "ne")
	}
	switch n.Op {
	case "eq":
		return boolVal(c == 0)
	case "ne":
		return boolVal(c != 0)
	case "gt":
		return boolVal(c > 0)
	case "ge":
		return boolVal(c >= 0)
	case "lt":
		return boolVal(c < 0)
	}
	return boolVal(c <= 0) // le
}

// compareVals orders two non-null values of comparable kinds; strings
// case-insensitively, as Exchange compares them.
func compareVals(l, r val) (int, bool) {
	switch {
	case l.k == KindString && r.k == KindString:
		return compareFold(l.s, r.s), true
	case l.k.numeric() && r.k.numeric() || l.k == KindEnum && r.k == KindEnum:
		switch {
		case l.f < r.f:
			return -1, true
		case l.f > r.f:
			return 1, true
		}
		return 0, true
	case l.k == KindBool && r.k == KindBool:
		switch {
		case l.b == r.b:
			return 0, true
		case !l.b:
			return -1, true
		}
		return 1, true
	case l.k == KindDateTime && r.k == KindDateTime:
		return l.t.Compare(r.t), true
	}
	return 0, false
}

func (n *Call) eval(e *env) val {
	a := n.Args[0].eval(e)
	if a.k != KindString {
		return boolVal(false)
	}
	needle := n.lower
	if _, lit := n.Args[1].(*Literal); !lit {
		b := n.Args[1].eval(e)
		if b.k != KindString {
			return boolVal(false)
		}
		needle = strings.ToLower(b.s)
	}
	switch n.Name {
	case "contains":
		return boolVal(containsFold(a.s, needle))
	case "startswith":
		return boolVal(hasPrefixFold(a.s, needle))
	}
	return boolVal(hasSuffixFold(a.s, needle))
}

func (n *Lambda) eval(e *env) val {
	items, _ := n.Coll.lookup(e).([]any)
	if n.Body == nil {
		return boolVal(len(items) > 0)
	}
	depth := n.varIdx
	saved := e.vars[depth]
	defer func() { e.vars[depth] = saved }()
	for _, it := range items {
		e.vars[depth] = it
		v := n.Body.eval(e)
		hit := v.k == KindBool && v.b
		if n.Op == "any" && hit {
			return boolVal(true)
		}
		if n.Op == "all" && !hit {
			return boolVal(false)
		}
	}
	return boolVal(n.Op == "all")
}

// Case-insensitive string helpers. needle is already lower-case; ASCII
// haystacks are compared without allocating.

func lowerASCII(c byte) byte {
	if c >= 'A' && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

func containsFold(h, needle string) bool {
	if !isASCII(h) || !isASCII(needle) {
		return strings.Contains(strings.ToLower(h), needle)
	}
	if len(needle) == 0 {
		return true
	}
	first := needle[0]
	for i := 0; i+len(needle) <= len(h); i++ {
		if lowerASCII(h[i]) != first {
			continue
		}
		if equalLowerASCII(h[i:i+len(needle)], needle) {
			return true
		}
	}
	return false
}

func equalLowerASCII(s, lower string) bool {
	for j := 0; j < len(lower); j++ {
		if lowerASCII(s[j]) != lower[j] {
			return false
		}
	}
	return true
}

func hasPrefixFold(h, needle string) bool {
	if !isASCII(h) || !isASCII(needle) {
		return strings.HasPrefix(strings.ToLower(h), needle)
	}
	return len(h) >= len(needle) && equalLowerASCII(h[:len(needle)], needle)
}

func hasSuffixFold(h, needle string) bool {
	if !isASCII(h) || !isASCII(needle) {
		return strings.HasSuffix(strings.ToLower(h), needle)
	}
	return len(h) >= len(needle) && equalLowerASCII(h[len(h)-len(needle):], needle)
}

// compareFold orders strings case-insensitively.
func compareFold(a, b string) int {
	if isASCII(a) && isASCII(b) {
		for i := 0; i < len(a) && i < len(b); i++ {
			ca, cb := lowerASCII(a[i]), lowerASCII(b[i])
			if ca != cb {
				if ca < cb {
					return -1
				}
				return 1
			}
		}
		switch {
		case len(a) < len(b):
			return -1
		case len(a) > len(b):
			return 1
		}
		return 0
	}
	return strings.Compare(strings.ToLower(a), strings.ToLower(b))
}
