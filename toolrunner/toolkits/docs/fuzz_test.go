package docs

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/auditrail/auditrail/toolrunner"
)

// FuzzValidateRequests: EditDocument's requests are outside input. The
// validator never panics, refuses with TOOL_INPUT_INVALID naming a request,
// and what it accepts is one known request type per element, re-encodable
// as the JSON that is sent.
func FuzzValidateRequests(f *testing.F) {
	for _, s := range []string{
		`[` + okText + `]`,
		`[{"updateTextStyle":{"range":{"startIndex":1,"endIndex":2},"textStyle":{"bold":false,"fontSize":{"magnitude":1,"unit":"PT"}},"fields":"bold"}}]`,
		`[{"insertTableRow":{"tableCellLocation":{"tableStartLocation":{"index":2},"rowIndex":0,"columnIndex":0},"insertBelow":true}}]`,
		`[{"updateTableRowStyle":{"tableStartLocation":{"index":2},"rowIndices":[0,1],"tableRowStyle":{"minRowHeight":{"magnitude":1,"unit":"PT"}},"fields":"*"}}]`,
		`[{"a":1,"b":2}]`, `[{}]`, `[[]]`, `[null]`, `[{"insertText":null}]`, `[{"insertText":{"location":{"index":1e300}}}]`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var reqs []any
		if json.Unmarshal([]byte(s), &reqs) != nil {
			return
		}
		err := validateRequests(reqs)
		if err != nil {
			te := toolrunner.AsError(err)
			if te.Kind != toolrunner.KindInputInvalid || !strings.HasPrefix(te.Message, "requests[") {
				t.Fatalf("%s: %+v", s, te)
			}
			return
		}
		for i, r := range reqs {
			m := r.(map[string]any)
			if len(m) != 1 {
				t.Fatalf("request %d accepted with %d keys", i, len(m))
			}
			for k := range m {
				if _, ok := requestRules[k]; !ok {
					t.Fatalf("request %d: unknown type %q accepted", i, k)
				}
			}
		}
		if _, err := json.Marshal(map[string]any{"requests": reqs}); err != nil {
			t.Fatalf("accepted but not encodable: %v", err)
		}
	})
}

// FuzzPageToken: pagination tokens come back from callers. Decoding never
// panics, and a token is only accepted for the query and user it was made
// for, when it is what the toolkit signs of its page.
func FuzzPageToken(f *testing.F) {
	tk, err := New(DefaultConfig())
	if err != nil {
		f.Fatal(err)
	}
	const base = "https://docs.example/"
	q, _ := buildQuery(map[string]any{})
	tok, _ := tk.wrapToken(q, "u1", base, "drive-page-2")
	f.Add(tok, "u1")
	f.Add(tokenPurpose+".e30", "u1")
	f.Add("dtk1.eyJiIjoieCIsInAiOiJ5In0", "u2")
	f.Fuzz(func(t *testing.T, tok, user string) {
		p, err := tk.unwrapToken(q, user, base, tok)
		if err != nil {
			if te := toolrunner.AsError(err); te.Kind != toolrunner.KindInputInvalid {
				t.Fatalf("%+v", te)
			}
			return
		}
		if again, err := tk.wrapToken(q, user, base, p); tok != "" && (p == "" || again != tok || err != nil) {
			t.Fatalf("accepted %q for %q as %q", tok, user, p)
		}
	})
}
