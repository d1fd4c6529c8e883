package documentdb

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"go.mongodb.org/mongo-driver/bson"

	"github.com/auditrail/auditrail/toolrunner"
)

// Every input is checked here, before the toolkit opens a client: a call
// with a bad input never reaches the server, and its error is
// TOOL_INPUT_INVALID (can_retry false) with a message that starts with the
// parameter's name ("filter_dict: …", "pipeline[2]: …").

// maxJSONDepth bounds the nesting of objects and arrays in a JSON
// parameter; Extended JSON wrappers ({"$date":{"$numberLong":"…"}}) count.
const maxJSONDepth = 100

// Sentinel errors of the JSON parameter decoder; the messages wrap them.
var (
	errNotUTF8     = errors.New("not valid UTF-8")
	errEmpty       = errors.New("empty: want one JSON object")
	errNotObject   = errors.New("want one JSON object")
	errTrailing    = errors.New("text after the JSON object")
	errTooDeep     = fmt.Errorf("nested more than %d levels deep", maxJSONDepth)
	errNULInKey    = errors.New("a field name contains a NUL character")
	errInvalidJSON = errors.New("not valid JSON")
)

func inputError(format string, args ...any) error {
	return toolrunner.Errorf(toolrunner.KindInputInvalid, false, format, args...)
}

// decodeJSONParam is the one decoder of every parameter that takes JSON
// text (filter_dict, projection, each sort entry, each pipeline stage):
// exactly one JSON object, Extended JSON accepted (canonical or relaxed),
// nothing but white space after it. null, arrays, scalars, empty or blank
// text, invalid UTF-8, nesting deeper than maxJSONDepth and field names
// holding NUL are refused. The error is a TOOL_INPUT_INVALID naming param.
func decodeJSONParam(param, s string) (bson.D, error) {
	if err := checkOneObject(s); err != nil {
		return nil, inputError("%s: %v", param, err)
	}
	var d bson.D
	if err := bson.UnmarshalExtJSON([]byte(s), false, &d); err != nil {
		return nil, inputError("%s: %v (Extended JSON accepted): %v", param, errInvalidJSON, err)
	}
	if d == nil {
		d = bson.D{}
	}
	if err := checkKeys(d); err != nil {
		return nil, inputError("%s: %v", param, err)
	}
	return d, nil
}

// checkOneObject reads s token by token (no recursion, so any depth is
// safe to refuse) and returns nil when s is one JSON object, at most
// maxJSONDepth deep, followed by nothing but white space.
func checkOneObject(s string) error {
	if !utf8.ValidString(s) {
		return errNotUTF8
	}
	if strings.TrimSpace(s) == "" {
		return errEmpty
	}
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	for depth, first := 0, true; first || depth > 0; first = false {
		tok, err := dec.Token()
		if err != nil {
			return fmt.Errorf("%w: %v", errInvalidJSON, err)
		}
		if depth == 0 && tok != json.Delim('{') {
			return fmt.Errorf("%w, got %s", errNotObject, jsonKind(tok))
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			if depth++; depth > maxJSONDepth {
				return errTooDeep
			}
		case json.Delim('}'), json.Delim(']'):
			depth--
		}
	}
	if end := dec.InputOffset(); strings.TrimLeft(s[end:], " \t\r\n") != "" {
		return fmt.Errorf("%w at offset %d: give exactly one object", errTrailing, end)
	}
	return nil
}

func jsonKind(tok json.Token) string {
	switch v := tok.(type) {
	case nil:
		return "null"
	case json.Delim:
		if v == '[' {
			return "an array"
		}
	case string:
		return "a string"
	case json.Number:
		return "a number"
	case bool:
		return "a boolean"
	}
	return fmt.Sprintf("%v", tok)
}

// checkKeys refuses field names BSON cannot carry (a NUL byte): the driver
// would otherwise fail while sending, as an upstream error.
func checkKeys(v any) error {
	switch x := v.(type) {
	case bson.D:
		for _, e := range x {
			if strings.IndexByte(e.Key, 0) >= 0 {
				return errNULInKey
			}
			if err := checkKeys(e.Value); err != nil {
				return err
			}
		}
	case bson.A:
		for _, e := range x {
			if err := checkKeys(e); err != nil {
				return err
			}
		}
	}
	return nil
}

// optionalJSON decodes an optional JSON parameter: absent is nil (the
// caller's default); present, it must be one object, even if empty text.
func optionalJSON(in map[string]any, param string) (bson.D, bool, error) {
	v, ok := in[param]
	if !ok || v == nil {
		return nil, false, nil
	}
	s, ok := v.(string)
	if !ok {
		return nil, false, inputError("%s: want a string holding one JSON object", param)
	}
	if strings.TrimSpace(s) == "" {
		return nil, false, inputError("%s: %v, or leave the parameter out", param, errEmpty)
	}
	d, err := decodeJSONParam(param, s)
	if err != nil {
		return nil, false, err
	}
	return d, true, nil
}

// name returns a database_name or collection_name: not empty or blank,
// valid UTF-8, no NUL byte.
func name(in map[string]any, param string) (string, error) {
	s, _ := in[param].(string)
	switch {
	case strings.TrimSpace(s) == "":
		return "", inputError("%s: empty: give a name (%s lists them)", param, lister(param))
	case !utf8.ValidString(s):
		return "", inputError("%s: not valid UTF-8", param)
	case strings.IndexByte(s, 0) >= 0:
		return "", inputError("%s: contains a NUL character", param)
	}
	return s, nil
}

func lister(param string) string {
	if param == "database_name" {
		return "DiscoverDatabases"
	}
	return "DiscoverCollections"
}

func integer(in map[string]any, k string, def int64) int64 {
	if v, ok := in[k].(int64); ok {
		return v
	}
	return def
}

func stringList(in map[string]any, k string) []string { s, _ := in[k].([]string); return s }

// sortEntry decodes one sort element, {"field":"…","direction":1 or -1},
// with no other key.
func sortEntry(param, s string) (bson.E, error) {
	d, err := decodeJSONParam(param, s)
	if err != nil {
		return bson.E{}, err
	}
	bad := inputError(`%s: want {"field":"…","direction":1 or -1}`, param)
	var field string
	var dir int
	for _, e := range d {
		switch e.Key {
		case "field":
			f, ok := e.Value.(string)
			if !ok || f == "" {
				return bson.E{}, bad
			}
			field = f
		case "direction":
			if dir = direction(e.Value); dir == 0 {
				return bson.E{}, bad
			}
		default:
			return bson.E{}, bad
		}
	}
	if field == "" || dir == 0 {
		return bson.E{}, bad
	}
	return bson.E{Key: field, Value: dir}, nil
}

// direction is 1 or -1 for those numbers in any numeric type, else 0.
func direction(v any) int {
	var f float64
	switch n := v.(type) {
	case int32:
		f = float64(n)
	case int64:
		f = float64(n)
	case float64:
		f = n
	default:
		return 0
	}
	if f == 1 || f == -1 {
		return int(f)
	}
	return 0
}
