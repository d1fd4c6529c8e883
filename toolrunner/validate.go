package toolrunner

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
)

// ErrInvalidInput wraps input errors; the message names the parameter.
var ErrInvalidInput = errors.New("invalid input")

func badInput(param, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrInvalidInput, param, fmt.Sprintf(format, args...))
}

// Validate checks inputs against the definition and returns them with
// defaults filled in. Unknown parameters, missing required ones, wrong
// types and values outside an enum are errors naming the parameter.
func Validate(def Definition, in map[string]any) (map[string]any, error) {
	known := map[string]Param{}
	for _, p := range def.Parameters {
		known[p.Name] = p
	}
	names := make([]string, 0, len(in))
	for k := range in {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		if _, ok := known[k]; !ok {
			return nil, badInput(k, "unknown parameter of %s", def.FullyQualifiedName())
		}
	}
	out := make(map[string]any, len(def.Parameters))
	for _, p := range def.Parameters {
		v, present := in[p.Name]
		if present && v == nil && p.Nullable {
			out[p.Name] = nil
			continue
		}
		if !present || v == nil {
			if p.Required {
				return nil, badInput(p.Name, "required")
			}
			if p.Default != nil {
				out[p.Name] = p.Default
			}
			continue
		}
		nv, err := coerce(p, v)
		if err != nil {
			return nil, err
		}
		out[p.Name] = nv
	}
	return out, nil
}

func coerce(p Param, v any) (any, error) {
	switch p.Type {
	case TypeString:
		s, ok := v.(string)
		if !ok {
			return nil, badInput(p.Name, "want a string, got %s", jsonType(v))
		}
		if len(p.Enum) > 0 && !slices.ContainsFunc(p.Enum, func(e string) bool { return strings.EqualFold(e, s) }) {
			return nil, badInput(p.Name, "%q is not one of %s", s, strings.Join(p.Enum, ", "))
		}
		return s, nil
	case TypeInteger:
		var i int64
		switch n := v.(type) {
		case float64:
			if n != math.Trunc(n) || math.IsInf(n, 0) || math.Abs(n) > 1<<53 {
				return nil, badInput(p.Name, "want an integer, got %v", n)
			}
			i = int64(n)
		case int:
			i = int64(n)
		case int64:
			i = n
		case json.Number:
			var err error
			if i, err = n.Int64(); err != nil {
				return nil, badInput(p.Name, "want an integer, got %s", n)
			}
		default:
			return nil, badInput(p.Name, "want an integer, got %s", jsonType(v))
		}
		if p.Minimum != nil && i < *p.Minimum {
			return nil, badInput(p.Name, "%d is below the minimum %d", i, *p.Minimum)
		}
		if p.Maximum != nil && i > *p.Maximum {
			return nil, badInput(p.Name, "%d is above the maximum %d", i, *p.Maximum)
		}
		return i, nil
	case TypeNumber:
		if f, ok := v.(float64); ok {
			return f, nil
		}
		return nil, badInput(p.Name, "want a number, got %s", jsonType(v))
	case TypeBoolean:
		if b, ok := v.(bool); ok {
			return b, nil
		}
		return nil, badInput(p.Name, "want a boolean, got %s", jsonType(v))
	case TypeArrayString:
		arr, ok := v.([]any)
		if !ok {
			if ss, ok := v.([]string); ok {
				return ss, nil
			}
			return nil, badInput(p.Name, "want an array of strings, got %s", jsonType(v))
		}
		out := make([]string, len(arr))
		for i, e := range arr {
			s, ok := e.(string)
			if !ok {
				return nil, badInput(p.Name, "element %d: want a string, got %s", i, jsonType(e))
			}
			out[i] = s
		}
		return out, nil
	case TypeArrayJSON, TypeArray:
		arr, ok := v.([]any)
		if !ok {
			return nil, badInput(p.Name, "want an array, got %s", jsonType(v))
		}
		if p.Type == TypeArrayJSON {
			for i, e := range arr {
				if _, ok := e.(map[string]any); !ok {
					return nil, badInput(p.Name, "element %d: want an object, got %s", i, jsonType(e))
				}
			}
		}
		return arr, nil
	case TypeJSON:
		if _, ok := v.(map[string]any); !ok {
			return nil, badInput(p.Name, "want an object, got %s", jsonType(v))
		}
		return v, nil
	}
	return nil, badInput(p.Name, "parameter type %q is not supported", p.Type)
}

func jsonType(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "a string"
	case float64, int, int64, json.Number:
		return "a number"
	case bool:
		return "a boolean"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}
