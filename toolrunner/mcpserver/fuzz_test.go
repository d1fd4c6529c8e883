package mcpserver

import (
	"encoding/json"
	"testing"
	"unicode/utf8"

	"github.com/auditrail/auditrail/toolrunner"
)

var fuzzDef = toolrunner.Definition{Toolkit: "T", Name: "N", Parameters: []toolrunner.Param{
	{Name: "s", Type: toolrunner.TypeString, Enum: []string{"a", "b"}},
	{Name: "i", Type: toolrunner.TypeInteger},
	{Name: "o", Type: toolrunner.TypeJSON, Nullable: true},
	{Name: "l", Type: toolrunner.TypeArrayString},
}}

// The arguments of tools/call come from any client: they decode to an
// object or are refused, and what decodes goes through the runner's
// validation and the error rendering without a panic.
func FuzzArguments(f *testing.F) {
	for _, s := range []string{``, `null`, `{}`, `[]`, `1`, `"x"`, `{"s":"a","i":3}`, `{"i":1.5}`, `{"o":null,"l":["x",1]}`, `{"s":`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		in, err := decodeArguments(raw)
		if err != nil {
			if in != nil {
				t.Fatal("an error with arguments")
			}
			_ = errorResult(&toolrunner.Error{Kind: toolrunner.KindInputInvalid, Message: err.Error()}, nil)
			return
		}
		if in == nil {
			t.Fatal("nil arguments without an error")
		}
		var v any
		if len(raw) > 0 && json.Unmarshal(raw, &v) == nil {
			if _, isObj := v.(map[string]any); !isObj && v != nil {
				t.Fatalf("%s accepted", raw)
			}
		}
		if _, err := toolrunner.Validate(fuzzDef, in); err != nil {
			_ = errorResult(&toolrunner.Error{Kind: toolrunner.KindInputInvalid, Message: err.Error()}, nil)
		}
	})
}

// clip keeps at most 200 bytes, on a rune boundary.
func FuzzClip(f *testing.F) {
	f.Add("claude-desktop")
	f.Add(string(make([]rune, 300)))
	f.Fuzz(func(t *testing.T, s string) {
		c := clip(s)
		if len(c) > 200 || (utf8.ValidString(s) && !utf8.ValidString(c)) || (len(s) <= 200 && c != s) {
			t.Fatalf("clip(%q) = %q", s, c)
		}
	})
}
