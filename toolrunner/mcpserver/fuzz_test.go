package mcpserver

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode"
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

// clip keeps valid UTF-8 without control characters, at most 200 bytes;
// a short clean name is kept as it is.
func FuzzClip(f *testing.F) {
	f.Add("claude-desktop")
	f.Add(string(make([]rune, 300)))
	f.Add("evil\x1b[2J\r\nname\u0085\u200b")
	f.Add("bad\xff\xfeutf8")
	f.Add(strings.Repeat("é", 150))
	f.Fuzz(func(t *testing.T, s string) {
		c := clip(s)
		if len(c) > 200 || !utf8.ValidString(c) || strings.ContainsFunc(c, unicode.IsControl) {
			t.Fatalf("clip(%q) = %q", s, c)
		}
		clean := utf8.ValidString(s) && !strings.ContainsFunc(s, func(r rune) bool { return r == utf8.RuneError || unicode.IsControl(r) })
		if clean && len(s) <= 200 && c != s {
			t.Fatalf("clip(%q) = %q, want it unchanged", s, c)
		}
	})
}

func TestClip(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"claude-desktop", "claude-desktop"},
		{"a\x1b[31mred\x1b[0m", "a[31mred[0m"},
		{"line\r\nbreak\ttab\u0085nel", "linebreaktabnel"},
		{"bad\xffutf8", "badutf8"},
		{strings.Repeat("x", 199) + "é", strings.Repeat("x", 199)},
		{strings.Repeat("\n", 300) + "v1", "v1"},
	} {
		if got := clip(tc.in); got != tc.want {
			t.Errorf("clip(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
