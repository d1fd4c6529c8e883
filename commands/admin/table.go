package admin

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// printTable prints a list answer (an array, or an object with an items
// array) as a table: one row per item, its scalar fields (and arrays of
// scalars) as columns in the order the API sends them; nested objects are
// left out (--format json shows them).
func printTable(w io.Writer, data json.RawMessage) error {
	items, err := listItems(data)
	if err != nil {
		return err
	}
	var cols []string
	seen := map[string]bool{}
	rows := make([]map[string]json.RawMessage, 0, len(items))
	for _, raw := range items {
		keys, err := objectKeys(raw)
		if err != nil {
			return fmt.Errorf("--format table: an item is not an object: %w", err)
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(raw, &m); err != nil {
			return err
		}
		rows = append(rows, m)
		for _, k := range keys {
			if !seen[k] && cell(m[k]) != nil {
				seen[k] = true
				cols = append(cols, k)
			}
		}
	}
	tw := tabwriter.NewWriter(w, 0, 2, 2, ' ', 0)
	if len(cols) == 0 {
		fmt.Fprintf(w, "(%d items)\n", len(rows))
		return nil
	}
	fmt.Fprintln(tw, strings.ToUpper(strings.Join(cols, "\t")))
	for _, m := range rows {
		vals := make([]any, len(cols))
		for i, c := range cols {
			if v := cell(m[c]); v != nil {
				vals[i] = *v
			}
		}
		fmt.Fprintln(tw, tableRow(vals))
	}
	return tw.Flush()
}

// listItems finds the list in an answer: the data itself, or its items.
func listItems(data json.RawMessage) ([]json.RawMessage, error) {
	var items []json.RawMessage
	if json.Unmarshal(data, &items) == nil {
		return items, nil
	}
	var obj struct {
		Items []json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal(data, &obj); err != nil || obj.Items == nil {
		return nil, fmt.Errorf("--format table: the answer holds no list (use --format json)")
	}
	return obj.Items, nil
}

// objectKeys lists an object's keys in the order they appear.
func objectKeys(raw json.RawMessage) ([]string, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, fmt.Errorf("not an object")
	}
	var keys []string
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, err
		}
		keys = append(keys, t.(string))
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return nil, err
		}
	}
	return keys, nil
}

// cell is a field's text in a table: a scalar as is (null as nil), an
// array of scalars joined by commas; nil for an object or a nested array.
func cell(raw json.RawMessage) *string {
	if len(raw) == 0 {
		return nil
	}
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return nil
	}
	var s string
	switch x := v.(type) {
	case nil:
		s = "-"
	case string:
		s = x
	case bool, float64:
		s = strings.TrimSpace(string(raw))
	case []any:
		parts := make([]string, 0, len(x))
		for _, e := range x {
			switch e.(type) {
			case map[string]any, []any:
				return nil
			}
			parts = append(parts, fmt.Sprint(e))
		}
		s = strings.Join(parts, ",")
	default:
		return nil
	}
	return &s
}
