package apiitem

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/auditrail/auditrail/internal/auditstore"
	itlog "github.com/auditrail/auditrail/internal/tlog"
	"github.com/auditrail/auditrail/schemas"
)

// jsonLeaf is the leaf of an item as a route serves it: the JSON of the
// item, canonicalized and hashed by internal/tlog (what verifiers do).
func jsonLeaf(item any) ([32]byte, error) {
	b, err := json.Marshal(item)
	if err != nil {
		return [32]byte{}, err
	}
	return itlog.Leaf(b)
}

var leafSalt = []byte("0123456789abcdef")

func auditOf(display, principal string, ip *string, data json.RawMessage) *schemas.AuditEntry {
	at := time.UnixMilli(1_700_000_000_123).UTC()
	rt := schemas.ResourceType(1)
	return &schemas.AuditEntry{ID: uuid.MustParse("0190c1d2-0000-7000-8000-000000000001"), CreatedTime: at.Add(time.Second),
		AuditEvent: schemas.AuditEvent{EventID: uuid.MustParse("0190c1d2-0000-7000-8000-000000000002"),
			OrganizationID: uuid.MustParse("0190c1d2-0000-7000-8000-000000000003"), Timestamp: at, ClientIP: ip,
			Action: schemas.AuditActionUpdated, Source: schemas.AuditSourceAPI, DisplayName: display, PrincipalID: principal,
			PrincipalType: "ACCOUNT", UserID: schemas.Ptr(principal), ResourceType: &rt, ResourceID: schemas.Ptr("r-1"),
			Data: data, Salt: leafSalt}}
}

func executionOf(display, msg string, success bool, hooks []schemas.HookCall) *auditstore.Execution {
	at := time.UnixMilli(1_700_000_000_123).UTC()
	return &auditstore.Execution{CreatedTime: at, ExecutionEvent: schemas.ExecutionEvent{
		EventID: "e-1", ExecutionID: "x-1", OrganizationID: "o-1", UserID: "ada", PrincipalID: "ada", PrincipalType: "ACCOUNT",
		DisplayName: display, ClientIP: "10.0.0.9", Tool: schemas.ToolRef{Toolkit: "Docs", Name: "Get<&>", Version: "1.0"},
		StartedAt: at, EndedAt: at.Add(1500 * time.Microsecond), DurationMS: 1.5, Success: success, ExecutionCode: "E",
		ExecutionError: msg, ErrorKind: "upstream", Hooks: hooks, Salt: leafSalt}}
}

// TestSaltedLeavesAreTheServedLeaves: the leaf ingest writes from an
// entry's members (SaltedLeaf) is the leaf of the entry's JSON as served,
// for values that JSON and JCS write differently: escapes, HTML
// characters, invalid UTF-8, line separators, numbers, nesting, data of
// every shape. A difference would make every entry unverifiable.
func TestSaltedLeavesAreTheServedLeaves(t *testing.T) {
	var l Leaves
	odd := []string{"", "Ada Lovelace", `quote " back \ slash`, "tab\tnl\ncr\rbs\bff\f\x01\x1f", "<b>&amp;</b>",
		"line\u2028para\u2029", "é日本\U0001F600", "bad \xff\xfe utf8 \xed\xa0\x80", strings.Repeat("x", 300)}
	datas := []string{``, `null`, `{}`, `[]`, `"s"`, `3`, `{"a":1}`, `{"b":1e21,"a":-0,"c":1.50,"d":[1,{"z":true,"y":null}]}`,
		`{"x":"<&>\u2028","\u00e9":"é","\ud83d\ude00":1,"":"empty"}`, ` { "sp" : [ 1 , 2 ] } `, `{"n":{"m":{"o":{"p":"deep"}}}}`,
		`{"k":"\u0000\u001f\"\\\/"}`, `{"big":123456789012345678901234567890,"small":1e-7,"f":0.1}`}
	for _, s := range odd {
		for _, d := range datas {
			var data json.RawMessage
			if d != "" {
				data = json.RawMessage(d)
			}
			e := auditOf(s, s, &s, data)
			got, err := l.AuditLeaf(e)
			if err != nil {
				t.Fatalf("%q %q: %v", s, d, err)
			}
			want, err := jsonLeaf(NewItem(e))
			if err != nil {
				t.Fatalf("%q %q: served: %v", s, d, err)
			}
			if got != want {
				t.Errorf("display %q data %s: the salted leaf is not the served leaf", s, d)
			}
		}
		for _, ok := range []bool{true, false} {
			for _, hooks := range [][]schemas.HookCall{nil, {{HookID: "h", Point: "pre", Code: "OK", LatencyMS: 0.25, ErrorMessage: s, Attempts: 2}}} {
				e := executionOf(s, s, ok, hooks)
				got, err := l.ExecutionLeaf(e)
				if err != nil {
					t.Fatal(err)
				}
				want, err := jsonLeaf(NewExecutionItem(e))
				if err != nil {
					t.Fatal(err)
				}
				if got != want {
					t.Errorf("execution %q success %v hooks %v: the salted leaf is not the served leaf", s, ok, hooks != nil)
				}
			}
		}
	}
	// What the served JSON cannot hash, neither can the salted leaf.
	for _, d := range []string{`{"a":1,"a":2}`, `{"a":`, strings.Repeat("[", 70) + strings.Repeat("]", 70)} {
		e := auditOf("a", "a", nil, json.RawMessage(d))
		if _, err := l.AuditLeaf(e); !errors.Is(err, itlog.ErrNotCanonicalizable) {
			t.Errorf("data %.20s: %v, want ErrNotCanonicalizable", d, err)
		}
	}
	// Near the size a verifier takes, the JSON decides: data whose
	// characters the JSON escapes six times over is refused as too large
	// (the verifier could not read the entry), data just under the limit
	// is hashed as the JSON is.
	for _, tc := range []struct {
		data    string
		tooLong bool
	}{{`{"x":"` + strings.Repeat("<", 180_000) + `"}`, true}, {`{"x":"` + strings.Repeat("a", itlog.MaxEntryBytes-2000) + `"}`, false}} {
		e := auditOf("a", "a", nil, json.RawMessage(tc.data))
		got, err := l.AuditLeaf(e)
		want, werr := jsonLeaf(NewItem(e))
		if tc.tooLong != errors.Is(err, itlog.ErrTooLarge) || tc.tooLong != errors.Is(werr, itlog.ErrTooLarge) || !tc.tooLong && (err != nil || got != want) {
			t.Errorf("data of %d bytes: %v, %v (want too large: %v)", len(tc.data), err, werr, tc.tooLong)
		}
	}
	e := auditOf("a", "a", nil, nil)
	e.Salt = []byte("short")
	if _, err := l.AuditLeaf(e); !errors.Is(err, itlog.ErrNotCanonicalizable) {
		t.Errorf("a salt of 5 bytes: %v", err)
	}
}

// FuzzSaltedLeaf: for any display name, principal and data that the
// served JSON hashes, the salted leaf is the same hash.
func FuzzSaltedLeaf(f *testing.F) {
	f.Add("Ada", "ada", `{"a":1}`)
	f.Add("\xff<", "\u2028", `{"b":[1e21,-0,"\u00e9"],"a":{"c":null}}`)
	f.Add("", "", `null`)
	var l Leaves
	f.Fuzz(func(t *testing.T, display, principal, data string) {
		var raw json.RawMessage
		if data != "" {
			raw = json.RawMessage(data)
		}
		e := auditOf(display, principal, &principal, raw)
		want, werr := jsonLeaf(NewItem(e))
		got, gerr := l.AuditLeaf(e)
		if werr != nil {
			if gerr == nil && json.Valid(raw) {
				t.Fatalf("served JSON refused (%v), salted leaf computed", werr)
			}
			return
		}
		if gerr != nil {
			t.Fatalf("salted leaf refused (%v), served JSON hashed", gerr)
		}
		if got != want {
			t.Fatalf("display %q principal %q data %q: the salted leaf is not the served leaf", display, principal, data)
		}
	})
}
