package dashboard

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/auditrail/auditrail/internal/testenv"
	"github.com/auditrail/auditrail/internal/tlog"
)

// The dashboard computes the leaf of an entry as internal/tlog does (the
// verifier of record): version 1, version 2 with its salt, and version 2
// erased (fields opened by keys and commitments), audit entries and tool
// executions alike; and it names the same erased fields.
func TestLeafHashIsTheGoLeaf(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		testenv.Missing(t, "node is not installed (it runs the dashboard's tlog module)")
	}
	mod, err := filepath.Abs("static/js/tlog.js")
	if err != nil {
		t.Fatal(err)
	}
	salt := bytes.Repeat([]byte{9}, tlog.SaltBytes)
	b64 := base64.StdEncoding.EncodeToString
	audit := func(extra map[string]any) map[string]any {
		m := map[string]any{
			"id": "e1", "event_id": "ev-1", "timestamp": "2026-01-01T00:00:00.000Z", "client_ip": "10.0.0.7",
			"action": "DELETE", "source": "API", "display_name": "Zoë \u2028 Example", "customer_id": nil,
			"organization_id": "org", "project_id": nil, "principal_id": "zoe", "user_id": "zoe",
			"principal_type": "ACCOUNT", "resource_type": "USER", "resource_id": "bob", "resource_display": "Bob",
			"data":         map[string]any{"role": "admin", "reason": "asked by zoe", "n": 3.5, "é": []any{1, "x", nil}, "Z": map[string]any{"b": 1, "a": 2}},
			"created_time": "2026-01-01T00:00:01.000Z", "leaf_index": 4,
		}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	execution := map[string]any{
		"execution_id": "x1", "event_id": "ev-2", "organization_id": "org", "project_id": "p", "user_id": "zoe",
		"principal_id": "k", "principal_type": "API_KEY", "display_name": "agent", "client_ip": nil,
		"tool": map[string]any{"toolkit": "Docs", "name": "Read", "version": "1"}, "tool_name": "Docs.Read",
		"started_at": "2026-01-01T00:00:00.000Z", "ended_at": "2026-01-01T00:00:00.100Z", "duration_ms": 100,
		"success": false, "execution_code": "E", "error": map[string]any{"kind": "k", "message": "no access for zoe"},
		"hooks": []any{}, "created_time": "2026-01-01T00:00:01.000Z", "client": nil, "leaf_index": 0,
		"salt": b64(salt),
	}
	marshal := func(m map[string]any) []byte {
		b, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	// erased rewrites item as an erasure does (change), opening its fields.
	erased := func(item map[string]any, change func(m map[string]any)) []byte {
		orig := marshal(item)
		var m map[string]any
		_ = json.Unmarshal(orig, &m)
		delete(m, "salt")
		change(m)
		f, err := tlog.OpenErased(orig, marshal(m), salt)
		if err != nil {
			t.Fatal(err)
		}
		e, err := tlog.ParseEntry(nil, orig)
		if err != nil {
			t.Fatal(err)
		}
		m["erasure"] = map[string]any{"id": "x", "leaf_hash": b64(e.Leaf[:]), "fields": f}
		return marshal(m)
	}
	cases := map[string][]byte{
		"version 1":               marshal(audit(nil)),
		"version 2":               marshal(audit(map[string]any{"salt": b64(salt)})),
		"version 2, null data":    marshal(audit(map[string]any{"salt": b64(salt), "data": nil})),
		"version 2, empty data":   marshal(audit(map[string]any{"salt": b64(salt), "data": map[string]any{}})),
		"version 2, a new member": marshal(audit(map[string]any{"salt": b64(salt), "later": 1})),
		"execution":               marshal(execution),
		"erased actor and data": erased(audit(map[string]any{"salt": b64(salt)}), func(m map[string]any) {
			m["user_id"], m["principal_id"], m["display_name"], m["client_ip"] = "erased-1", "erased-1", "erased-1", "erased-1"
			m["data"].(map[string]any)["reason"] = "asked by erased-1"
		}),
		"erased data member name": erased(audit(map[string]any{"salt": b64(salt), "data": map[string]any{"zoe": "admin", "team": "ops"}}), func(m map[string]any) {
			m["data"] = map[string]any{"erased-1": "admin", "team": "ops"}
		}),
		"erased execution error": erased(execution, func(m map[string]any) {
			m["error"] = map[string]any{"kind": "k", "message": "no access for erased-1"}
		}),
	}
	for name, item := range cases {
		e, err := tlog.ParseEntry(nil, item)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		script := `import { leafHash, toBase64 } from ` + jsString(mod) + `;
const erased = [];
const leaf = await leafHash(JSON.parse(` + jsString(string(item)) + `), erased);
console.log(JSON.stringify({ leaf: toBase64(leaf), erased }));`
		out, err := exec.Command(node, "--input-type=module", "-e", script).CombinedOutput()
		if err != nil {
			t.Fatalf("%s: node: %v\n%s", name, err, out)
		}
		var got struct {
			Leaf   string   `json:"leaf"`
			Erased []string `json:"erased"`
		}
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("%s: %v %s", name, err, out)
		}
		if got.Leaf != b64(e.Leaf[:]) {
			t.Errorf("%s: the dashboard's leaf %s, internal/tlog's %s (version %d)", name, got.Leaf, b64(e.Leaf[:]), e.Version)
		}
		if !slices.Equal(got.Erased, e.Erased) && (len(got.Erased)+len(e.Erased) > 0) {
			t.Errorf("%s: erased %q, internal/tlog says %q", name, got.Erased, e.Erased)
		}
		if strings.HasPrefix(name, "erased") && len(e.Erased) == 0 {
			t.Errorf("%s: nothing erased", name)
		}
	}
}
