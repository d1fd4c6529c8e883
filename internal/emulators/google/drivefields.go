package google

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
)

// A fields mask ("partial response") as Google's APIs take it:
//
//	fields   = selector { "," selector }
//	selector = path [ "(" fields ")" ]
//	path     = name { "/" name }
//	name     = "*" | letters, digits, "_"
//
// Names are checked against the resource's JSON schema (the client library's
// struct), as Google refuses an unknown field with 400 "Invalid field
// selection <name>".

var errBadFields = errors.New("invalid field selection")

// fieldMask maps a field name to the mask of its sub-fields; a nil sub-mask
// selects the whole value. "*" selects every field.
type fieldMask map[string]fieldMask

// parseFields parses a fields mask and checks it against the schema of the
// resource type (a struct of the client library).
func parseFields(s string, schema reflect.Type) (fieldMask, error) {
	p := &fieldsParser{s: s}
	m, err := p.list(0)
	if err != nil {
		return nil, err
	}
	if p.i != len(p.s) {
		return nil, fmt.Errorf("%w %s", errBadFields, p.s[p.i:])
	}
	if err := checkFields(m, schema); err != nil {
		return nil, err
	}
	return m, nil
}

type fieldsParser struct {
	s string
	i int
}

func (p *fieldsParser) list(depth int) (fieldMask, error) {
	if depth > 16 {
		return nil, fmt.Errorf("%w %s", errBadFields, p.s)
	}
	m := fieldMask{}
	for {
		if err := p.selector(m, depth); err != nil {
			return nil, err
		}
		if p.i < len(p.s) && p.s[p.i] == ',' {
			p.i++
			continue
		}
		return m, nil
	}
}

func (p *fieldsParser) name() (string, error) {
	for p.i < len(p.s) && p.s[p.i] == ' ' {
		p.i++
	}
	j := p.i
	for j < len(p.s) {
		c := p.s[j]
		if c == '*' || c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' {
			j++
			continue
		}
		break
	}
	if j == p.i {
		return "", fmt.Errorf("%w %s", errBadFields, p.s[p.i:])
	}
	n := p.s[p.i:j]
	p.i = j
	for p.i < len(p.s) && p.s[p.i] == ' ' {
		p.i++
	}
	return n, nil
}

func (p *fieldsParser) selector(into fieldMask, depth int) error {
	m := into
	for {
		n, err := p.name()
		if err != nil {
			return err
		}
		if p.i < len(p.s) && p.s[p.i] == '/' {
			p.i++
			sub, ok := m[n]
			if !ok || sub == nil {
				if ok { // already selected whole
					sub = fieldMask{"*": nil}
				} else {
					sub = fieldMask{}
				}
				m[n] = sub
			}
			m = sub
			continue
		}
		if p.i < len(p.s) && p.s[p.i] == '(' {
			p.i++
			sub, err := p.list(depth + 1)
			if err != nil {
				return err
			}
			if p.i >= len(p.s) || p.s[p.i] != ')' {
				return fmt.Errorf("%w %s", errBadFields, p.s)
			}
			p.i++
			for p.i < len(p.s) && p.s[p.i] == ' ' {
				p.i++
			}
			if old, ok := m[n]; ok && old != nil {
				for k, v := range sub {
					old[k] = v
				}
			} else if !ok {
				m[n] = sub
			}
			return nil
		}
		m[n] = nil
		return nil
	}
}

// checkFields checks every name of m against the JSON fields of t.
func checkFields(m fieldMask, t reflect.Type) error {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		if len(m) > 0 {
			for k := range m {
				return fmt.Errorf("%w %s", errBadFields, k)
			}
		}
		return nil
	}
	for name, sub := range m {
		if name == "*" {
			continue
		}
		ft, ok := jsonField(t, name)
		if !ok {
			return fmt.Errorf("%w %s", errBadFields, name)
		}
		if sub != nil {
			if err := checkFields(sub, ft); err != nil {
				return err
			}
		}
	}
	return nil
}

func jsonField(t reflect.Type, name string) (reflect.Type, bool) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if tag == name {
			return f.Type, true
		}
	}
	return nil, false
}

// apply answers the part of v the mask selects (v built of map[string]any,
// []any and scalars).
func (m fieldMask) apply(v any) any {
	if m == nil {
		return v
	}
	switch v := v.(type) {
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = m.apply(e)
		}
		return out
	case []map[string]any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = m.apply(e)
		}
		return out
	case map[string]any:
		out := map[string]any{}
		if sub, ok := m["*"]; ok {
			for k, e := range v {
				out[k] = sub.apply(e)
			}
		}
		for k, sub := range m {
			if e, ok := v[k]; ok && k != "*" {
				out[k] = sub.apply(e)
			}
		}
		return out
	}
	return v
}
