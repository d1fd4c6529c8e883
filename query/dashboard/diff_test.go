package dashboard

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/auditrail/auditrail/internal/testenv"
)

// The entry panel's diff (static/js/diff.js, run by node): objects key by
// key, arrays by value — one scope added to a list is one added row, not
// every later element changed.
func TestDiffChanges(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		testenv.Missing(t, "node is not installed (it runs the dashboard's diff module)")
	}
	mod, err := filepath.Abs("static/js/diff.js")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name          string
		before, after string
		want          []string // kind path before after
	}{
		{"a field changed", `{"disabled":false,"name":"ci"}`, `{"disabled":true,"name":"ci"}`,
			[]string{`changed disabled false true`, `same name "ci" "ci"`}},
		{"one scope added in the middle", `{"scopes":["a","c","d"]}`, `{"scopes":["a","b","c","d"]}`,
			[]string{`same scopes[0] "a" "a"`, `added scopes[1]  "b"`, `same scopes[2] "c" "c"`, `same scopes[3] "d" "d"`}},
		{"one removed, order changed", `{"s":["x","y","z"]}`, `{"s":["z","x"]}`,
			[]string{`same s[0] "z" "z"`, `same s[1] "x" "x"`, `removed s[1] "y" `}},
		{"duplicates counted", `{"s":["x","x"]}`, `{"s":["x"]}`,
			[]string{`same s[0] "x" "x"`, `removed s[1] "x" `}},
		{"objects in an array matched whole", `{"h":[{"id":1,"on":true},{"id":2,"on":true}]}`, `{"h":[{"id":1,"on":true},{"id":2,"on":false}]}`,
			[]string{`same h[0].id 1 1`, `same h[0].on true true`, `added h[1].id  2`, `added h[1].on  false`, `removed h[1].id 2 `, `removed h[1].on true `}},
		{"a key added and one removed", `{"a":1}`, `{"b":{"c":2}}`, []string{`removed a 1 `, `added b.c  2`}},
		{"a value became a list", `{"a":"x"}`, `{"a":["x"]}`, []string{`removed a "x" `, `added a[0]  "x"`}},
		{"empty lists", `{"a":[]}`, `{"a":[]}`, []string{`same a [] []`}},
		{"from nothing", `null`, `{"a":1}`, []string{`added a  1`}},
	} {
		script := `import { changes } from ` + jsString(mod) + `;
const rows = changes(` + c.before + `, ` + c.after + `);
console.log(JSON.stringify(rows.map((r) => [r.kind, r.path, r.before ?? "", r.after ?? ""].join(" "))));`
		out, err := exec.Command(node, "--input-type=module", "-e", script).CombinedOutput()
		if err != nil {
			t.Fatalf("%s: node: %v\n%s", c.name, err, out)
		}
		var got []string
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("%s: %v %s", c.name, err, out)
		}
		if len(got) != len(c.want) {
			t.Errorf("%s: got %q, want %q", c.name, got, c.want)
			continue
		}
		for i := range got {
			if got[i] != c.want[i] {
				t.Errorf("%s: row %d %q, want %q (all: %q)", c.name, i, got[i], c.want[i], got)
			}
		}
	}
}

func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
