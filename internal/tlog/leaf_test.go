package tlog_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gowebpki/jcs"

	"github.com/auditrail/auditrail/internal/tlog"
	"github.com/auditrail/auditrail/schemas"
	"github.com/auditrail/auditrail/schemas/apiitem"
)

var update = flag.Bool("update", false, "rewrite the .json goldens (the .jcs and .leaf files are checked by hand, never rewritten)")

func ptr(s string) *string { return &s }

// goldenItems are an audit entry and a tool execution as the list routes
// return them: nulls, non-ASCII text, characters encoding/json escapes
// (<, >, &, U+2028) and JCS does not, a float duration, nested data.
func goldenItems() map[string]any {
	audit := apiitem.Item{
		ID: "0b4f6d2e-3a51-5c7e-9d10-2f3e4a5b6c7d", EventID: "9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d",
		Timestamp: "2026-11-26T18:00:00.123Z", ClientIP: ptr("198.51.100.7"), Action: "AUDIT_ACTION_UPDATED",
		Source: "AUDIT_SOURCE_DASHBOARD", DisplayName: "Zoë Ångström 日本 😀", CustomerID: nil,
		OrganizationID: "5b1c2d3e-4f50-4617-8a9b-0c1d2e3f4a5b", ProjectID: nil, PrincipalID: "user_42",
		UserID: ptr("user_42"), PrincipalType: "ACCOUNT", ResourceType: ptr("RESOURCE_TYPE_HOOK"),
		ResourceID: ptr("hook_7"), ResourceDisplay: ptr("<policy> & \u2028 \"quoted\""),
		Data:        json.RawMessage(`{"before":{"enabled":true,"timeout_ms":1.5e3},"after":{"enabled":false,"€":"x","a":[1,0.10,-0]}}`),
		CreatedTime: "2026-11-26T18:00:00.456Z",
	}
	exec := apiitem.ExecutionItem{
		ExecutionID: "exec_01", EventID: "1f2e3d4c-5b6a-4798-8a7b-6c5d4e3f2a1b", OrganizationID: "5b1c2d3e-4f50-4617-8a9b-0c1d2e3f4a5b",
		ProjectID: ptr("7c6d5e4f-3a2b-4c1d-9e8f-7a6b5c4d3e2f"), UserID: "ann@example.com", PrincipalID: "key_9",
		PrincipalType: "SERVICE_KEY", DisplayName: "Ann Ö", ClientIP: nil,
		Tool:     schemas.ToolRef{Toolkit: "DocsToolkit", Name: "EditDocument", Version: "1.2.0"},
		ToolName: "DocsToolkit.EditDocument", StartedAt: "2026-11-26T18:00:01.000Z", EndedAt: "2026-11-26T18:00:01.234Z",
		DurationMS: 234.56700000000001, Success: false, ExecutionCode: "TOOL_ERROR",
		Error: &apiitem.ExecutionError{Kind: "upstream", Message: "Drive said: \"quota\"\nretry later"},
		Hooks: []schemas.HookCall{{HookID: "hk_1", HookName: "pre-check", Point: "pre", Code: "OK", HTTPStatus: 200, Attempts: 1,
			LatencyMS: 3.25, Decision: "allow"}},
		CreatedTime: "2026-11-26T18:00:01.300Z",
	}
	return map[string]any{"audit_item": audit, "execution_item": exec}
}

// The golden leaves: each item marshals as the .json golden, canonicalizes
// to the .jcs golden (checked by hand against RFC 8785: names sorted, the
// escapes \u003c \u003e \u0026 \u2028 of encoding/json undone, 1.5e3 as 1500,
// 0.10 as 0.1, -0 as 0, "\n" kept as \n), and hashes to the .leaf golden
// (recorded once with `(printf '\0'; cat X.jcs) | sha256sum`).
func TestLeafGolden(t *testing.T) {
	for name, item := range goldenItems() {
		t.Run(name, func(t *testing.T) {
			raw, err := json.Marshal(item)
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join("testdata", name)
			if *update {
				if err := os.WriteFile(path+".json", append(raw, '\n'), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			wantJSON, err := os.ReadFile(path + ".json")
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(append(raw, '\n'), wantJSON) {
				t.Fatalf("the item marshals as\n%s\nnot as the golden\n%s", raw, wantJSON)
			}
			wantJCS, err := os.ReadFile(path + ".jcs")
			if err != nil {
				t.Fatal(err)
			}
			for how, in := range map[string]any{"value": item, "raw": raw, "RawMessage": json.RawMessage(raw)} {
				got, err := tlog.Canonical(in)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, wantJCS) {
					t.Fatalf("%s: canonical\n%s\nwant\n%s", how, got, wantJCS)
				}
			}
			// The list item carries leaf_index (null until sequenced) and, on
			// executions, client (added after version 1), which a leaf leaves
			// out: the reference canonicalizes the item without them.
			v1 := bytes.Replace(bytes.Replace(raw, []byte(`,"leaf_index":null`), nil, 1), []byte(`,"client":null`), nil, 1)
			if ref, err := jcs.Transform(v1); err != nil || !bytes.Equal(ref, wantJCS) {
				t.Fatalf("the reference canonicalizer gives\n%s, %v", ref, err)
			}
			leafHex, err := os.ReadFile(path + ".leaf")
			if err != nil {
				t.Fatal(err)
			}
			want, err := hex.DecodeString(strings.Fields(string(leafHex))[0])
			if err != nil {
				t.Fatal(err)
			}
			independent := sha256.Sum256(append([]byte{0}, wantJCS...))
			if !bytes.Equal(independent[:], want) {
				t.Fatalf("recorded leaf %x is not sha256(0x00 ‖ jcs) %x", want, independent)
			}
			if got := tlog.LeafHash(wantJCS); !bytes.Equal(got[:], want) {
				t.Fatalf("LeafHash %x, want %x", got, want)
			}
		})
	}
}

// An export line's leaf_index is left out of the leaf wherever it stands;
// the same entry without it gives the same canonical bytes and leaf.
func TestParseEntryLeafIndex(t *testing.T) {
	base := `{"event_id":"e1","action":1,"tool":[2]}`
	want, err := tlog.Canonical([]byte(base))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{
		`{"leaf_index":17,"event_id":"e1","action":1,"tool":[2]}`,
		`{"event_id":"e1","action":1,"leaf_index":17,"tool":[2]}`,
		`{"event_id":"e1","action":1,"tool":[2],"leaf_index":17}`,
		` { "tool" : [ 2 ] , "leaf_index" : 17 , "action" : 1.0, "event_id" : "e\u0031" } `,
		// Members no leaf covers (the feed's position, a field added after
		// v1) are left out wherever they are.
		`{"position":3,"event_id":"e1","action":1,"leaf_index":17,"tool":[2],"zz_new_field":{"a":1}}`,
		`{"aa":0,"event_id":"e1","action":1,"leaf_index":17,"tool":[2]}`,
	} {
		e, err := tlog.ParseEntry(nil, []byte(line))
		if err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		if !bytes.Equal(e.Canonical, want) || e.Leaf != tlog.LeafHash(want) || e.LeafIndex != 17 || e.EventID() != "e1" || e.Members != 3 {
			t.Fatalf("%s: %s index %d event %q members %d", line, e.Canonical, e.LeafIndex, e.EventID(), e.Members)
		}
	}
	e, err := tlog.ParseEntry(nil, []byte(`{"leaf_index":0}`))
	if err != nil || string(e.Canonical) != "{}" || e.LeafIndex != 0 || e.Members != 0 {
		t.Fatalf("only leaf_index: %s %v", e.Canonical, err)
	}
	e, err = tlog.ParseEntry(nil, []byte(base))
	if err != nil || e.LeafIndex != -1 {
		t.Fatalf("no leaf_index: %d %v", e.LeafIndex, err)
	}
	// A null leaf_index (not sequenced yet) is left out of the leaf too.
	for _, line := range []string{`{"leaf_index":null,"event_id":"e1","action":1,"tool":[2]}`, `{"event_id":"e1","action":1,"tool":[2],"leaf_index":null}`} {
		e, err = tlog.ParseEntry(nil, []byte(line))
		if err != nil || !bytes.Equal(e.Canonical, want) || e.LeafIndex != -1 || !e.Pending || e.Members != 3 || e.EventID() != "e1" {
			t.Fatalf("%s: %s index %d pending %v %v", line, e.Canonical, e.LeafIndex, e.Pending, err)
		}
	}
	// A nested leaf_index is data, not the position.
	e, err = tlog.ParseEntry(nil, []byte(`{"data":{"leaf_index":3}}`))
	if err != nil || e.LeafIndex != -1 || !strings.Contains(string(e.Canonical), "leaf_index") {
		t.Fatalf("nested leaf_index: %s %d %v", e.Canonical, e.LeafIndex, err)
	}
	for _, bad := range []string{`{"leaf_index":-1}`, `{"leaf_index":1.5}`, `{"leaf_index":"3"}`, `{"leaf_index":1e30}`, `[1]`, `"x"`} {
		if _, err := tlog.ParseEntry(nil, []byte(bad)); !errors.Is(err, tlog.ErrNotCanonicalizable) {
			t.Errorf("%s: %v", bad, err)
		}
	}
	if _, err := tlog.ParseEntry(nil, bytes.Repeat([]byte(" "), tlog.MaxEntryBytes+1)); !errors.Is(err, tlog.ErrTooLarge) {
		t.Errorf("oversized line: %v", err)
	}
}
