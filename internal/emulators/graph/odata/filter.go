package odata

import (
	"strconv"
	"strings"
	"time"
)

// Node is a node of a parsed $filter expression.
type Node interface {
	// String prints the node in $filter syntax; parsing it gives back an
	// equal tree.
	String() string
	// Kind is the node's static EDM type.
	Kind() Kind
	eval(e *env) val
}

// Binary is a logical (and, or) or comparison (eq ne gt ge lt le) operator.
type Binary struct {
	Op   string
	L, R Node
	dom  Kind // comparisons: the domain both sides are compared in
}

// Not is the unary not.
type Not struct{ X Node }

// Call is a call of contains, startswith or endswith.
type Call struct {
	Name  string
	Args  []Node
	lower string // the second argument, lower-cased, when it is a literal
}

// Path is a property path from the object or from a lambda variable.
type Path struct {
	Var    string // "" for the object itself
	Segs   []string
	prop   *Prop
	varIdx int // index of Var in the lambda scope
}

// Lambda is coll/any(v: body) or coll/all(v: body); any() has no body.
type Lambda struct {
	Coll *Path
	Op   string // "any" or "all"
	Var  string
	Body Node

	varIdx int // the variable's slot in env.vars
}

// Literal is a string, number, boolean, null, date or DateTimeOffset. A
// string compared with an enum property becomes an enum literal (K is
// KindEnum, f the member's index).
type Literal struct {
	K    Kind
	Text string // the source text; the value for strings and enums
	f    float64
	b    bool
	t    time.Time
	enum *EnumType
}

// Filter is a parsed $filter.
type Filter struct {
	Root  Node
	props []string
}

// maxDepth bounds nesting (parentheses, not, lambdas) so that hostile input
// cannot exhaust the stack.
const maxDepth = 100

// maxVars bounds nested lambdas.
const maxVars = 4

// ParseFilter parses a $filter expression over microsoft.graph.message.
func ParseFilter(s string) (*Filter, error) { return ParseFilterFor(s, Message) }

// ParseFilterFor parses a $filter expression over the given type, checking
// property names and operand types as Graph does.
func ParseFilterFor(s string, t *EntityType) (*Filter, error) {
	p := &parser{lx: lexer{src: s}, typ: t}
	if err := p.advance(); err != nil {
		return nil, err
	}
	if p.tok.kind == tokEOF {
		return nil, filterError("Expression expected at position %d in '%s'.", p.tok.pos, s)
	}
	n, err := p.parseOr()
	if err != nil {
		return nil, err
	}
	if p.tok.kind != tokEOF {
		return nil, filterError("Syntax error at position %d in '%s'.", p.tok.pos, s)
	}
	if k := n.Kind(); k != KindBool && k != KindNull {
		return nil, filterError("The $filter expression must evaluate to a single boolean value.")
	}
	f := &Filter{Root: n}
	seen := map[string]bool{}
	walk(n, func(path string) {
		if !seen[path] {
			seen[path] = true
			f.props = append(f.props, path)
		}
	}, nil)
	return f, nil
}

// walk calls fn with the full property path (from the object) of every
// property the node references, in source order. scope maps lambda
// variables to their collection's path.
func walk(n Node, fn func(string), scope map[string]string) {
	switch n := n.(type) {
	case *Binary:
		walk(n.L, fn, scope)
		walk(n.R, fn, scope)
	case *Not:
		walk(n.X, fn, scope)
	case *Call:
		for _, a := range n.Args {
			walk(a, fn, scope)
		}
	case *Path:
		fn(n.full(scope))
	case *Lambda:
		coll := n.Coll.full(scope)
		if n.Body == nil {
			fn(coll)
			return
		}
		inner := map[string]string{n.Var: coll}
		for k, v := range scope {
			if k != n.Var {
				inner[k] = v
			}
		}
		walk(n.Body, fn, inner)
	}
}

func (p *Path) full(scope map[string]string) string {
	segs := strings.Join(p.Segs, "/")
	if p.Var == "" {
		return segs
	}
	base := scope[p.Var]
	if segs == "" {
		return base
	}
	return base + "/" + segs
}

// Properties returns the property paths the filter references, from the
// object, in order of first appearance ("sender/emailAddress/address";
// inside toRecipients/any(r: r/emailAddress/address eq 'x') it is
// "toRecipients/emailAddress/address").
func (f *Filter) Properties() []string { return append([]string(nil), f.props...) }

// String prints the filter in $filter syntax.
func (f *Filter) String() string { return f.Root.String() }

// parser is a recursive-descent parser; precedence as in ODataLib, from
// loosest: or, and, comparisons (left-associative), not.
type parser struct {
	lx    lexer
	tok   token
	typ   *EntityType
	vars  []lambdaVar
	depth int
}

type lambdaVar struct {
	name string
	elem *Prop
}

func (p *parser) advance() error {
	t, err := p.lx.next()
	if err != nil {
		return err
	}
	p.tok = t
	return nil
}

func (p *parser) isKeyword(word string) bool { return p.tok.kind == tokIdent && p.tok.text == word }

func (p *parser) enter() error {
	p.depth++
	if p.depth > maxDepth {
		return filterError("The recursion limit has been exceeded.")
	}
	return nil
}

func (p *parser) parseOr() (Node, error) {
	l, err := p.parseAnd()
	if err != nil {
		return nil, err
	}
	for p.isKeyword("or") {
		if err := p.advance(); err != nil {
			return nil, err
		}
		r, err := p.parseAnd()
		if err != nil {
			return nil, err
		}
		if l, err = logical("or", l, r); err != nil {
			return nil, err
		}
	}
	return l, nil
}

func (p *parser) parseAnd() (Node, error) {
	l, err := p.parseComparison()
	if err != nil {
		return nil, err
	}
	for p.isKeyword("and") {
		if err := p.advance(); err != nil {
			return nil, err
		}
		r, err := p.parseComparison()
		if err != nil {
			return nil, err
		}
		if l, err = logical("and", l, r); err != nil {
			return nil, err
		}
	}
	return l, nil
}

var opKinds = map[string]string{
	"and": "And", "or": "Or",
	"eq": "Equal", "ne": "NotEqual", "gt": "GreaterThan", "ge": "GreaterThanOrEqual",
	"lt": "LessThan", "le": "LessThanOrEqual",
}

func isBoolish(k Kind) bool { return k == KindBool || k == KindNull }

func logical(op string, l, r Node) (Node, error) {
	if !isBoolish(l.Kind()) || !isBoolish(r.Kind()) {
		return nil, filterError("A binary operator with incompatible types was detected. Found operand types '%s' and '%s' for operator kind '%s'.",
			l.Kind().edmName(), r.Kind().edmName(), opKinds[op])
	}
	return &Binary{Op: op, L: l, R: r, dom: KindBool}, nil
}

func (p *parser) parseComparison() (Node, error) {
	l, err := p.parseUnary()
	if err != nil {
		return nil, err
	}
	for p.tok.kind == tokIdent {
		op := p.tok.text
		switch op {
		case "eq", "ne", "gt", "ge", "lt", "le":
		default:
			return l, nil
		}
		if err := p.advance(); err != nil {
			return nil, err
		}
		r, err := p.parseUnary()
		if err != nil {
			return nil, err
		}
		if l, r, err = enumOperands(op, l, r); err != nil {
			return nil, err
		}
		dom, err := comparable(op, l.Kind(), r.Kind())
		if err != nil {
			return nil, err
		}
		l = &Binary{Op: op, L: l, R: r, dom: dom}
	}
	return l, nil
}

// enumOperands turns a string literal compared with an enum property into
// an enum literal, as ODataLib promotes it; a string that names no member
// is an error, and so is an enum against anything else.
func enumOperands(op string, l, r Node) (Node, Node, error) {
	var err error
	if pl, ok := l.(*Path); ok && pl.Kind() == KindEnum {
		r, err = enumLiteral(op, pl, r)
		return l, r, err
	}
	if pr, ok := r.(*Path); ok && pr.Kind() == KindEnum {
		l, err = enumLiteral(op, pr, l)
		return l, r, err
	}
	return l, r, nil
}

func enumLiteral(op string, p *Path, other Node) (Node, error) {
	e := p.prop.Enum
	switch o := other.(type) {
	case *Literal:
		switch o.K {
		case KindNull:
			return o, nil
		case KindString, KindEnum:
			i := e.member(o.Text)
			if i < 0 {
				return nil, filterError("The string '%s' is not a valid enumeration type constant.", o.Text)
			}
			return &Literal{K: KindEnum, Text: o.Text, f: float64(i), enum: e}, nil
		}
	case *Path:
		if o.Kind() == KindEnum && o.prop.Enum == e {
			return o, nil
		}
	}
	ot := other.Kind().edmName()
	if p, ok := other.(*Path); ok {
		ot = p.prop.typeName()
	}
	return nil, filterError("A binary operator with incompatible types was detected. Found operand types '%s' and '%s' for operator kind '%s'.",
		e.Name, ot, opKinds[op])
}

// comparable returns the domain two operands are compared in, or Graph's
// error when their types do not compare.
func comparable(op string, kl, kr Kind) (Kind, error) {
	for _, k := range []Kind{kl, kr} {
		if k == KindComplex || k == KindCollection {
			return 0, filterError("The operand for a binary operator '%s' is not a single value. Binary operators require both operands to be single values.", opKinds[op])
		}
	}
	switch {
	case kl == KindNull:
		return kr, nil
	case kr == KindNull || kl == kr:
		return kl, nil
	case kl.numeric() && kr.numeric():
		return KindDouble, nil
	case kl.temporal() && kr.temporal():
		return KindDateTime, nil
	}
	return 0, filterError("A binary operator with incompatible types was detected. Found operand types '%s' and '%s' for operator kind '%s'.",
		kl.edmName(), kr.edmName(), opKinds[op])
}

func (p *parser) parseUnary() (Node, error) {
	if !p.isKeyword("not") {
		return p.parsePrimary()
	}
	if err := p.enter(); err != nil {
		return nil, err
	}
	defer func() { p.depth-- }()
	if err := p.advance(); err != nil {
		return nil, err
	}
	x, err := p.parseUnary()
	if err != nil {
		return nil, err
	}
	if !isBoolish(x.Kind()) {
		return nil, filterError("A unary operator with an incompatible type was detected. Found operand type '%s' for operator kind 'Not'.", x.Kind().edmName())
	}
	return &Not{X: x}, nil
}

// unsupported are OData functions Exchange does not run on messages.
var unsupported = map[string]bool{
	"tolower": true, "toupper": true, "trim": true, "length": true, "indexof": true, "substring": true,
	"concat": true, "year": true, "month": true, "day": true, "hour": true, "minute": true, "second": true,
	"fractionalseconds": true, "date": true, "time": true, "now": true, "totaloffsetminutes": true,
	"round": true, "floor": true, "ceiling": true, "cast": true, "isof": true, "matchespattern": true,
	"mindatetime": true, "maxdatetime": true,
}

func (p *parser) parsePrimary() (Node, error) {
	t := p.tok
	switch t.kind {
	case tokLParen:
		if err := p.enter(); err != nil {
			return nil, err
		}
		defer func() { p.depth-- }()
		if err := p.advance(); err != nil {
			return nil, err
		}
		n, err := p.parseOr()
		if err != nil {
			return nil, err
		}
		if p.tok.kind != tokRParen {
			return nil, filterError("')' or operator expected at position %d in '%s'.", p.tok.pos, p.lx.src)
		}
		return n, p.advance()
	case tokString:
		return &Literal{K: KindString, Text: t.text}, p.advance()
	case tokNumber:
		lit := &Literal{K: KindInt, Text: t.text}
		if strings.ContainsAny(t.text, ".eE") {
			lit.K = KindDouble
		}
		f, err := strconv.ParseFloat(t.text, 64)
		if err != nil {
			return nil, filterError("Unrecognized '%s' literal '%s' at '%d' in '%s'.", lit.K.edmName(), t.text, t.pos, p.lx.src)
		}
		if lit.K == KindInt && (f > 1<<63-1 || f < -(1<<63)) {
			lit.K = KindDouble // ODataLib widens; keep the text
		}
		lit.f = f
		return lit, p.advance()
	case tokDateTime, tokDate:
		lit := &Literal{K: KindDateTime, Text: t.text}
		var err error
		if t.kind == tokDate {
			lit.K = KindDate
			lit.t, err = time.Parse("2006-01-02", t.text)
		} else {
			lit.t, err = parseDateTimeLiteral(t.text)
		}
		if err != nil {
			return nil, filterError("Unrecognized '%s' literal '%s' at '%d' in '%s'.", lit.K.edmName(), t.text, t.pos, p.lx.src)
		}
		return lit, p.advance()
	case tokIdent:
		switch t.text {
		case "true", "false":
			return &Literal{K: KindBool, Text: t.text, b: t.text == "true"}, p.advance()
		case "null":
			return &Literal{K: KindNull, Text: t.text}, p.advance()
		}
		if err := p.advance(); err != nil {
			return nil, err
		}
		if p.tok.kind == tokLParen {
			return p.parseCall(t)
		}
		return p.parsePath(t)
	case tokEOF:
		return nil, filterError("Expression expected at position %d in '%s'.", t.pos, p.lx.src)
	}
	return nil, filterError("Syntax error at position %d in '%s'.", t.pos, p.lx.src)
}

func parseDateTimeLiteral(s string) (time.Time, error) {
	s = strings.ToUpper(s)
	if len(s) >= 16 && (len(s) == 16 || s[16] != ':') { // hh:mm without seconds
		s = s[:16] + ":00" + s[16:]
	}
	return time.Parse(time.RFC3339Nano, s)
}

func (p *parser) parseCall(name token) (Node, error) {
	fn := strings.ToLower(name.text) // Graph resolves function names ignoring case
	switch {
	case fn == "contains" || fn == "startswith" || fn == "endswith":
	case unsupported[fn]:
		return nil, &Error{Code: CodeInvalidURLQueryFilter, Message: "The query filter contains one or more invalid nodes."}
	default:
		return nil, filterError("An unknown function with name '%s' was found. This may also be a function import or a key lookup on a navigation property, which is not allowed.", fn)
	}
	if err := p.enter(); err != nil {
		return nil, err
	}
	defer func() { p.depth-- }()
	if err := p.advance(); err != nil { // (
		return nil, err
	}
	var args []Node
	for p.tok.kind != tokRParen {
		a, err := p.parseOr()
		if err != nil {
			return nil, err
		}
		args = append(args, a)
		if p.tok.kind == tokComma {
			if err := p.advance(); err != nil {
				return nil, err
			}
			continue
		}
		if p.tok.kind != tokRParen {
			return nil, filterError("')' or ',' expected at position %d in '%s'.", p.tok.pos, p.lx.src)
		}
	}
	if err := p.advance(); err != nil {
		return nil, err
	}
	if len(args) != 2 || !stringish(args[0].Kind()) || !stringish(args[1].Kind()) {
		return nil, filterError("No function signature for the function with name '%s' matches the specified arguments. The function signatures considered are: %s(Edm.String Nullable=true, Edm.String Nullable=true).", fn, fn)
	}
	c := &Call{Name: fn, Args: args}
	if lit, ok := args[1].(*Literal); ok && lit.K == KindString {
		c.lower = strings.ToLower(lit.Text)
	}
	return c, nil
}

func stringish(k Kind) bool { return k == KindString || k == KindNull }

// parsePath parses the rest of a property path whose first segment is
// first, resolving it against the type (or a lambda variable), and a
// trailing any()/all().
func (p *parser) parsePath(first token) (Node, error) {
	path := &Path{varIdx: -1}
	var cur *Prop
	for i := len(p.vars) - 1; i >= 0; i-- {
		if p.vars[i].name == first.text {
			path.Var, path.varIdx, cur = first.text, i, p.vars[i].elem
			break
		}
	}
	owner := p.typ
	if path.Var == "" {
		name, pr, ok := p.typ.prop(first.text)
		if !ok {
			return nil, filterError("Could not find a property named '%s' on type '%s'.", first.text, p.typ.Name)
		}
		cur = pr
		path.Segs = append(path.Segs, name)
	}
	for p.tok.kind == tokSlash {
		if err := p.advance(); err != nil {
			return nil, err
		}
		seg := p.tok
		if seg.kind != tokIdent {
			return nil, filterError("Syntax error at position %d in '%s'.", seg.pos, p.lx.src)
		}
		if err := p.advance(); err != nil {
			return nil, err
		}
		if (seg.text == "any" || seg.text == "all") && p.tok.kind == tokLParen {
			if cur.Kind != KindCollection {
				return nil, filterError("Any/All may only be used following a collection.")
			}
			path.prop = cur
			return p.parseLambda(path, seg.text)
		}
		if cur.Kind != KindComplex {
			typ := cur.Kind.edmName()
			if cur.Kind == KindCollection {
				typ = "Collection"
			}
			return nil, filterError("Could not find a property named '%s' on type '%s'.", seg.text, typ)
		}
		owner = cur.Complex
		name, pr, ok := owner.prop(seg.text)
		if !ok {
			return nil, filterError("Could not find a property named '%s' on type '%s'.", seg.text, owner.Name)
		}
		cur = pr
		path.Segs = append(path.Segs, name)
	}
	path.prop = cur
	return path, nil
}

func (p *parser) parseLambda(coll *Path, op string) (Node, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	defer func() { p.depth-- }()
	if err := p.advance(); err != nil { // (
		return nil, err
	}
	l := &Lambda{Coll: coll, Op: op}
	if p.tok.kind == tokRParen {
		if op == "all" {
			return nil, filterError("Syntax error at position %d in '%s'.", p.tok.pos, p.lx.src)
		}
		return l, p.advance()
	}
	if p.tok.kind != tokIdent {
		return nil, filterError("Syntax error at position %d in '%s'.", p.tok.pos, p.lx.src)
	}
	l.Var = p.tok.text
	if _, clash := p.typ.Props[l.Var]; clash {
		return nil, filterError("The range variable '%s' has already been declared.", l.Var)
	}
	for _, v := range p.vars {
		if v.name == l.Var {
			return nil, filterError("The range variable '%s' has already been declared.", l.Var)
		}
	}
	if len(p.vars) >= maxVars {
		return nil, filterError("The recursion limit has been exceeded.")
	}
	if err := p.advance(); err != nil {
		return nil, err
	}
	if p.tok.kind != tokColon {
		return nil, filterError("':' expected at position %d in '%s'.", p.tok.pos, p.lx.src)
	}
	if err := p.advance(); err != nil {
		return nil, err
	}
	l.varIdx = len(p.vars)
	p.vars = append(p.vars, lambdaVar{name: l.Var, elem: coll.prop.Elem})
	body, err := p.parseOr()
	p.vars = p.vars[:len(p.vars)-1]
	if err != nil {
		return nil, err
	}
	if !isBoolish(body.Kind()) {
		return nil, filterError("The %s expression must evaluate to a single boolean value.", op)
	}
	if p.tok.kind != tokRParen {
		return nil, filterError("')' or operator expected at position %d in '%s'.", p.tok.pos, p.lx.src)
	}
	l.Body = body
	return l, p.advance()
}

// Kinds.

func (n *Binary) Kind() Kind  { return KindBool }
func (n *Not) Kind() Kind     { return KindBool }
func (n *Call) Kind() Kind    { return KindBool }
func (n *Lambda) Kind() Kind  { return KindBool }
func (n *Literal) Kind() Kind { return n.K }
func (n *Path) Kind() Kind {
	if n.prop == nil {
		return KindNull
	}
	return n.prop.Kind
}

// Printing.

// Printing parenthesises only what precedence needs (not, comparisons,
// and, or from tightest; binary operators left-associative), so that a
// long chain prints flat and parses back within the nesting limit.

func prec(n Node) int {
	switch n := n.(type) {
	case *Binary:
		switch n.Op {
		case "or":
			return 1
		case "and":
			return 2
		}
		return 3
	case *Not:
		return 4
	}
	return 5
}

func child(n Node, p int, right bool) string {
	if c := prec(n); c < p || right && c == p {
		return "(" + n.String() + ")"
	}
	return n.String()
}

func (n *Binary) String() string {
	p := prec(n)
	return child(n.L, p, false) + " " + n.Op + " " + child(n.R, p, true)
}

func (n *Not) String() string { return "not " + child(n.X, 4, false) }

func (n *Call) String() string {
	args := make([]string, len(n.Args))
	for i, a := range n.Args {
		args[i] = a.String()
	}
	return n.Name + "(" + strings.Join(args, ",") + ")"
}

func (n *Path) String() string {
	if n.Var == "" {
		return strings.Join(n.Segs, "/")
	}
	if len(n.Segs) == 0 {
		return n.Var
	}
	return n.Var + "/" + strings.Join(n.Segs, "/")
}

func (n *Lambda) String() string {
	if n.Body == nil {
		return n.Coll.String() + "/" + n.Op + "()"
	}
	return n.Coll.String() + "/" + n.Op + "(" + n.Var + ":" + n.Body.String() + ")"
}

func (n *Literal) String() string {
	if n.K == KindString || n.K == KindEnum {
		return "'" + strings.ReplaceAll(n.Text, "'", "''") + "'"
	}
	return n.Text
}
