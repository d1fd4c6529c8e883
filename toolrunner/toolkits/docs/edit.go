package docs

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"reflect"
	"sort"
	"strings"

	gdocs "google.golang.org/api/docs/v1"
	"google.golang.org/api/googleapi"

	"github.com/auditrail/auditrail/toolrunner"
	"github.com/auditrail/auditrail/toolrunner/toolkits/docs/docmd"
)

// requestRule is what seeds/002's EditDocument table says of one request
// type: its required fields, and whether it needs exactly one of location
// and endOfSegmentLocation. The shapes of every field (names, JSON types,
// nested objects) come from the client library's own types.
type requestRule struct {
	required []string
	location bool
}

// requestRules: the request types EditDocument accepts (seeds/002).
var requestRules = map[string]requestRule{
	"replaceAllText":              {},
	"insertText":                  {location: true},
	"deleteContentRange":          {required: []string{"range"}},
	"updateTextStyle":             {required: []string{"range", "textStyle", "fields"}},
	"updateParagraphStyle":        {required: []string{"range", "paragraphStyle", "fields"}},
	"createParagraphBullets":      {required: []string{"range", "bulletPreset"}},
	"deleteParagraphBullets":      {required: []string{"range"}},
	"insertTable":                 {location: true},
	"insertTableRow":              {required: []string{"tableCellLocation", "insertBelow"}},
	"insertTableColumn":           {required: []string{"tableCellLocation", "insertRight"}},
	"deleteTableRow":              {required: []string{"tableCellLocation"}},
	"deleteTableColumn":           {required: []string{"tableCellLocation"}},
	"updateTableCellStyle":        {},
	"updateTableColumnProperties": {},
	"updateTableRowStyle":         {},
	"mergeTableCells":             {required: []string{"tableRange"}},
	"unmergeTableCells":           {required: []string{"tableRange"}},
	"pinTableHeaderRows":          {required: []string{"tableStartLocation", "pinnedHeaderRowsCount"}},
	"updateDocumentStyle":         {},
	"updateSectionStyle":          {required: []string{"range", "sectionStyle", "fields"}},
	"insertSectionBreak":          {location: true},
	"insertPageBreak":             {location: true},
	"createNamedRange":            {required: []string{"name", "range"}},
	"deleteNamedRange":            {},
	"replaceNamedRangeContent":    {},
	"insertInlineImage":           {location: true},
	"replaceImage":                {},
	"deletePositionedObject":      {},
	"createHeader":                {},
	"createFooter":                {},
	"deleteHeader":                {},
	"deleteFooter":                {},
	"createFootnote":              {location: true},
	"addDocumentTab":              {},
	"deleteTab":                   {required: []string{"tabId"}},
	"updateDocumentTabProperties": {},
	"insertPerson":                {location: true},
	"insertDate":                  {location: true},
}

// nestedRequired: fields required inside shared shapes, by JSON type name
// of the client library (seeds/002 "Shared shapes").
var nestedRequired = map[reflect.Type][]string{
	reflect.TypeFor[gdocs.Dimension]():         {"magnitude", "unit"},
	reflect.TypeFor[gdocs.TableCellLocation](): {"tableStartLocation", "rowIndex", "columnIndex"},
	reflect.TypeFor[gdocs.TableRange]():        {"tableCellLocation", "rowSpan", "columnSpan"},
}

// requestTypes maps a request type to its body's Go type.
var requestTypes = func() map[string]reflect.Type {
	m := map[string]reflect.Type{}
	rt := reflect.TypeFor[gdocs.Request]()
	for i := 0; i < rt.NumField(); i++ {
		f := rt.Field(i)
		if name := jsonName(f); name != "" {
			m[name] = f.Type.Elem()
		}
	}
	for name := range requestRules {
		if _, ok := m[name]; !ok {
			panic("docs: request type " + name + " is not in the client library")
		}
	}
	return m
}()

func knownTypes() string {
	names := make([]string, 0, len(requestRules))
	for n := range requestRules {
		names = append(names, n)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// jsonName answers a struct field's JSON name ("" for fields not sent).
func jsonName(f reflect.StructField) string {
	tag := f.Tag.Get("json")
	name, _, _ := strings.Cut(tag, ",")
	if name == "-" || !f.IsExported() {
		return ""
	}
	return name
}

func invalid(format string, args ...any) error {
	return toolrunner.Errorf(toolrunner.KindInputInvalid, false, format, args...)
}

// validateRequests checks every request (seeds/002 EditDocument rules);
// the first problem names the request's index and the field.
func validateRequests(reqs []any) error {
	for i, r := range reqs {
		obj, ok := r.(map[string]any)
		if !ok {
			return invalid("requests[%d]: want an object with one key, the request type", i)
		}
		if len(obj) != 1 {
			keys := make([]string, 0, len(obj))
			for k := range obj {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			return invalid("requests[%d]: want exactly one key, the request type; got %d (%s)", i, len(obj), strings.Join(keys, ", "))
		}
		for typ, body := range obj {
			rule, ok := requestRules[typ]
			if !ok {
				return invalid("requests[%d]: unknown request type %q; known: %s", i, typ, knownTypes())
			}
			path := fmt.Sprintf("requests[%d].%s", i, typ)
			b, ok := body.(map[string]any)
			if !ok {
				return invalid("%s: want an object, got %s", path, jsonKind(body))
			}
			for _, f := range rule.required {
				if _, ok := b[f]; !ok {
					return invalid("%s: %s is required", path, f)
				}
			}
			if rule.location {
				_, loc := b["location"]
				_, end := b["endOfSegmentLocation"]
				if loc == end {
					return invalid("%s: exactly one of location and endOfSegmentLocation is required", path)
				}
			}
			if err := validateShape(path, b, requestTypes[typ]); err != nil {
				return err
			}
		}
	}
	return nil
}

// validateShape checks a JSON value against the client library's type.
func validateShape(path string, v any, t reflect.Type) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Struct:
		obj, ok := v.(map[string]any)
		if !ok {
			return invalid("%s: want an object, got %s", path, jsonKind(v))
		}
		fields := map[string]reflect.Type{}
		for i := 0; i < t.NumField(); i++ {
			if n := jsonName(t.Field(i)); n != "" {
				fields[n] = t.Field(i).Type
			}
		}
		for _, f := range nestedRequired[t] {
			if _, ok := obj[f]; !ok {
				return invalid("%s: %s is required", path, f)
			}
		}
		keys := make([]string, 0, len(obj))
		for k := range obj {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			ft, ok := fields[k]
			if !ok {
				known := make([]string, 0, len(fields))
				for n := range fields {
					known = append(known, n)
				}
				sort.Strings(known)
				return invalid("%s: unknown field %q; known: %s", path, k, strings.Join(known, ", "))
			}
			if err := validateShape(path+"."+k, obj[k], ft); err != nil {
				return err
			}
		}
		return nil
	case reflect.Slice:
		arr, ok := v.([]any)
		if !ok {
			return invalid("%s: want an array, got %s", path, jsonKind(v))
		}
		for i, e := range arr {
			if err := validateShape(fmt.Sprintf("%s[%d]", path, i), e, t.Elem()); err != nil {
				return err
			}
		}
		return nil
	case reflect.String:
		if _, ok := v.(string); !ok {
			return invalid("%s: want a string, got %s", path, jsonKind(v))
		}
	case reflect.Bool:
		if _, ok := v.(bool); !ok {
			return invalid("%s: want a boolean, got %s", path, jsonKind(v))
		}
	case reflect.Int64, reflect.Int, reflect.Int32:
		f, ok := number(v)
		if !ok || f != math.Trunc(f) || math.Abs(f) > 1<<53 {
			return invalid("%s: want an integer, got %s", path, jsonKind(v))
		}
	case reflect.Float64:
		if _, ok := number(v); !ok {
			return invalid("%s: want a number, got %s", path, jsonKind(v))
		}
	}
	return nil
}

func number(v any) (float64, bool) {
	switch n := v.(type) {
	case float64:
		return n, true
	case int:
		return float64(n), true
	case int64:
		return float64(n), true
	case json.Number:
		f, err := n.Float64()
		return f, err == nil
	}
	return 0, false
}

func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case float64, int, int64, json.Number:
		return "a number"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}

// rawBatchUpdate posts the caller's requests as they were given: a round
// trip through gdocs.Request would drop explicit false and zero values,
// which under a fields mask mean "set to false", not "reset".
func rawBatchUpdate(ctx context.Context, c *clients, id string, reqs []any, revision string) (*gdocs.BatchUpdateDocumentResponse, error) {
	body := map[string]any{"requests": reqs}
	if revision != "" {
		body["writeControl"] = map[string]any{"requiredRevisionId": revision}
	}
	b, err := json.Marshal(body)
	if err != nil {
		return nil, invalid("requests: cannot be encoded as JSON: %v", err)
	}
	u := c.docsEndpoint + "v1/documents/" + url.PathEscape(id) + ":batchUpdate"
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("batchUpdate request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer googleapi.CloseBody(resp)
	if err := googleapi.CheckResponse(resp); err != nil {
		return nil, err
	}
	var out gdocs.BatchUpdateDocumentResponse
	if err := json.NewDecoder(io.LimitReader(resp.Body, 64<<20)).Decode(&out); err != nil {
		return nil, fmt.Errorf("batchUpdate response: %w", err)
	}
	return &out, nil
}

// revisionMismatch: Google's answer to a stale writeControl.
func revisionMismatch(err error) bool {
	ge, ok := err.(*googleapi.Error)
	return ok && ge.Code == http.StatusBadRequest && strings.Contains(strings.ToLower(ge.Message), "revision") &&
		(strings.Contains(ge.Message, "does not match") || strings.Contains(ge.Message, "modified"))
}

func (t *Toolkit) editDocument(ctx context.Context, c *clients, call toolrunner.Call) (any, error) {
	id, err := docID(call.Inputs)
	if err != nil {
		return nil, err
	}
	reqs, _ := call.Inputs["requests"].([]any)
	if err := validateRequests(reqs); err != nil {
		return nil, err
	}
	revision := strings.TrimSpace(str(call.Inputs, "revision_id"))
	applied := 0
	if len(reqs) > 0 {
		_, err := rawBatchUpdate(ctx, c, id, reqs, revision)
		switch {
		case err != nil && revisionMismatch(err):
			return nil, invalid("the document changed since revision %s; read it again (GetDocumentAsDocmd, or EditDocument without requests) and redo the edit with the new indices and @revision_id", revision)
		case err != nil:
			return nil, apiError(err, docWhat(id))
		}
		applied = len(reqs) // all or none: Google applies a batch atomically
	}
	d, err := getDocument(ctx, c, id)
	if err != nil {
		return nil, err
	}
	md, err := docmd.Render(d, docmd.Options{})
	if err != nil {
		return nil, fmt.Errorf("render DocMD: %w", err)
	}
	return map[string]any{"document_id": id, "document_url": documentURL(id), "edits_applied": applied, "docmd": md}, nil
}
