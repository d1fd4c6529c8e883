package schemas

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/vmihailenco/msgpack/v5"
)

var update = flag.Bool("update", false, "rewrite golden files")

func sampleEvent() AuditEvent {
	rt := ResourceTypeProject
	return AuditEvent{
		EventID:         uuid.MustParse("0b3c8f4e-2a6d-4c1e-9f00-1a2b3c4d5e6f"),
		Timestamp:       time.Date(2026, 11, 21, 10, 4, 5, 123000000, time.UTC),
		ClientIP:        Ptr("203.0.113.7"),
		Action:          AuditActionCreated,
		Source:          AuditSourceCLI,
		DisplayName:     "Ada Lovelace",
		OrganizationID:  uuid.MustParse("11111111-2222-4333-8444-555555555555"),
		ProjectID:       Ptr(uuid.MustParse("66666666-7777-4888-9999-aaaaaaaaaaaa")),
		PrincipalID:     "user_ada",
		UserID:          Ptr("user_ada"),
		PrincipalType:   "ACCOUNT",
		ResourceType:    &rt,
		ResourceID:      Ptr("proj_1"),
		ResourceDisplay: Ptr("billing"),
		Data:            json.RawMessage(`{"after":{"n":3,"name":"billing"},"before":null}`),
	}
}

func TestEnumsRoundTrip(t *testing.T) {
	tests := []struct {
		name  string
		names []string
		parse func(string) (uint8, error)
		want  map[string]uint8
	}{
		{"AuditAction", AuditActionNames(), func(s string) (uint8, error) { v, err := ParseAuditAction(s); return uint8(v), err },
			map[string]uint8{"AUDIT_ACTION_UNSPECIFIED": 0, "AUDIT_ACTION_CREATED": 1, "AUDIT_ACTION_UPDATED": 2, "AUDIT_ACTION_DELETED": 3, "AUDIT_ACTION_DISABLED": 4}},
		{"AuditSource", AuditSourceNames(), func(s string) (uint8, error) { v, err := ParseAuditSource(s); return uint8(v), err },
			map[string]uint8{"AUDIT_SOURCE_UNSPECIFIED": 0, "AUDIT_SOURCE_API": 1, "AUDIT_SOURCE_DASHBOARD": 2, "AUDIT_SOURCE_CLI": 3, "AUDIT_SOURCE_SDK": 4, "AUDIT_SOURCE_SYSTEM": 5}},
		{"ResourceType", ResourceTypeNames(), func(s string) (uint8, error) { v, err := ParseResourceType(s); return uint8(v), err },
			map[string]uint8{"RESOURCE_TYPE_UNSPECIFIED": 0, "RESOURCE_TYPE_API_KEY": 1, "RESOURCE_TYPE_CUSTOMER": 2, "RESOURCE_TYPE_INVITATION": 3,
				"RESOURCE_TYPE_ORGANIZATION": 4, "RESOURCE_TYPE_PROJECT": 5, "RESOURCE_TYPE_PROJECT_MEMBER": 6, "RESOURCE_TYPE_USER": 7,
				"RESOURCE_TYPE_WORKER": 8, "RESOURCE_TYPE_GATEWAY": 9, "RESOURCE_TYPE_PLUGIN": 10, "RESOURCE_TYPE_HOOK": 11, "RESOURCE_TYPE_MODEL": 12,
				"RESOURCE_TYPE_AUTH_PROVIDER": 13, "RESOURCE_TYPE_SECRET": 14, "RESOURCE_TYPE_USER_CONNECTION": 15, "RESOURCE_TYPE_DEPLOYMENT": 16, "RESOURCE_TYPE_SETTING": 17}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if len(tc.names) != len(tc.want) {
				t.Fatalf("%d names, seed has %d", len(tc.names), len(tc.want))
			}
			for name, num := range tc.want {
				got, err := tc.parse(name)
				if err != nil || got != num {
					t.Errorf("parse %s = %d, %v; want %d", name, got, err, num)
				}
				if tc.names[num] != name {
					t.Errorf("name of %d = %s, want %s", num, tc.names[num], name)
				}
			}
			for _, bad := range []string{"", "created", "AUDIT_ACTION_created", "RESOURCE_TYPE_", "1"} {
				if _, err := tc.parse(bad); !errors.Is(err, ErrUnknownEnum) {
					t.Errorf("parse %q: err = %v, want ErrUnknownEnum", bad, err)
				}
			}
		})
	}
	if got := AuditAction(9).String(); got != "AuditAction(9)" {
		t.Errorf("out of range String = %q", got)
	}
}

func TestAuditEventWireGolden(t *testing.T) {
	ev := sampleEvent()
	b, err := ev.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "audit_v1.hex")
	if *update {
		if err := os.WriteFile(golden, []byte(hex.Dump(b)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if got := hex.Dump(b); got != string(want) {
		t.Fatalf("wire format changed (run with -update if intended):\n%s", got)
	}

	// The generic msgpack decoder sees exactly the CONTRACT.md shape.
	var m map[string]any
	if err := msgpack.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if _, ok := m["timestamp"].(time.Time); !ok {
		t.Errorf("timestamp is %T, want a msgpack timestamp", m["timestamp"])
	}
	for _, k := range []string{"id", "created_time"} {
		if _, ok := m[k]; ok {
			t.Errorf("payload carries %q, which ingest sets", k)
		}
	}
	if m["action"] != "AUDIT_ACTION_CREATED" || m["source"] != "AUDIT_SOURCE_CLI" || m["resource_type"] != "RESOURCE_TYPE_PROJECT" {
		t.Errorf("enums not sent by name: %v %v %v", m["action"], m["source"], m["resource_type"])
	}
	if len(m) != 16 {
		t.Errorf("payload has %d keys, want the 16 fields of the seed less id and created_time", len(m))
	}
}

func TestAuditEventRoundTrip(t *testing.T) {
	full := sampleEvent()
	minimal := AuditEvent{EventID: uuid.New(), OrganizationID: uuid.New(), Timestamp: time.UnixMilli(1).UTC()}
	for _, ev := range []AuditEvent{full, minimal} {
		b, err := ev.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		got, err := UnmarshalAuditEvent(b)
		if err != nil {
			t.Fatal(err)
		}
		wantJSON, _ := json.Marshal(ev)
		gotJSON, _ := json.Marshal(got)
		if !bytes.Equal(wantJSON, gotJSON) {
			t.Errorf("round trip:\n got %s\nwant %s", gotJSON, wantJSON)
		}
	}
}

// encodeMap builds a payload from a generic map, as a foreign producer would.
func encodeMap(t testing.TB, m map[string]any) []byte {
	t.Helper()
	b, err := msgpack.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestUnmarshalAuditEventRejects(t *testing.T) {
	base := func() map[string]any {
		return map[string]any{
			"event_id":        uuid.NewString(),
			"organization_id": uuid.NewString(),
			"timestamp":       time.Now(),
			"action":          "AUDIT_ACTION_UPDATED",
			"source":          "AUDIT_SOURCE_API",
		}
	}
	tests := []struct {
		name    string
		mutate  func(m map[string]any)
		raw     []byte
		wantErr error
		msg     string
	}{
		{name: "ok", mutate: func(m map[string]any) {}},
		{name: "unknown keys ignored", mutate: func(m map[string]any) { m["future_field"] = []any{1, "x"} }},
		{name: "missing event_id", mutate: func(m map[string]any) { delete(m, "event_id") }, wantErr: ErrInvalidEvent, msg: "event_id"},
		{name: "missing organization_id", mutate: func(m map[string]any) { delete(m, "organization_id") }, wantErr: ErrInvalidEvent, msg: "organization_id"},
		{name: "missing timestamp", mutate: func(m map[string]any) { delete(m, "timestamp") }, wantErr: ErrInvalidEvent, msg: "timestamp"},
		{name: "timestamp as string", mutate: func(m map[string]any) { m["timestamp"] = "2026-01-01" }, wantErr: ErrDecode, msg: "timestamp"},
		{name: "unknown action", mutate: func(m map[string]any) { m["action"] = "AUDIT_ACTION_EXPLODED" }, wantErr: ErrUnknownEnum, msg: "action"},
		{name: "unknown source", mutate: func(m map[string]any) { m["source"] = "AUDIT_SOURCE_FAX" }, wantErr: ErrUnknownEnum, msg: "source"},
		{name: "unknown resource type", mutate: func(m map[string]any) { m["resource_type"] = "RESOURCE_TYPE_X" }, wantErr: ErrUnknownEnum, msg: "resource_type"},
		{name: "action as number", mutate: func(m map[string]any) { m["action"] = 1 }, wantErr: ErrDecode, msg: "action"},
		{name: "bad uuid", mutate: func(m map[string]any) { m["event_id"] = "not-a-uuid" }, wantErr: ErrInvalidEvent, msg: "event_id"},
		{name: "data not a map", mutate: func(m map[string]any) { m["data"] = []any{1} }, wantErr: ErrInvalidEvent, msg: "data"},
		{name: "data with int keys", mutate: func(m map[string]any) { m["data"] = map[int]any{1: 2} }, wantErr: ErrInvalidEvent, msg: "data"},
		{name: "not a map", raw: []byte{0x93, 1, 2, 3}, wantErr: ErrDecode},
		{name: "nil", raw: []byte{0xc0}, wantErr: ErrDecode},
		{name: "truncated", raw: []byte{0x85, 0xa8}, wantErr: ErrDecode},
		{name: "empty", raw: []byte{}, wantErr: ErrDecode},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := tc.raw
			if b == nil {
				m := base()
				tc.mutate(m)
				b = encodeMap(t, m)
			}
			_, err := UnmarshalAuditEvent(b)
			if tc.wantErr == nil {
				if err != nil {
					t.Fatalf("unexpected error %v", err)
				}
				return
			}
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("error %q does not name %q", err, tc.msg)
			}
		})
	}
	// Trailing bytes after a valid map.
	b, _ := (&AuditEvent{EventID: uuid.New(), OrganizationID: uuid.New(), Timestamp: time.Now()}).Marshal()
	if _, err := UnmarshalAuditEvent(append(b, 0x01)); !errors.Is(err, ErrDecode) {
		t.Errorf("trailing byte: err = %v", err)
	}
}

func TestExecutionEventRoundTrip(t *testing.T) {
	ev := ExecutionEvent{
		EventID: uuid.NewString(), ExecutionID: uuid.NewString(), OrganizationID: uuid.NewString(),
		ProjectID: uuid.NewString(), UserID: "u1",
		Tool:      ToolRef{Toolkit: "DocsToolkit", Name: "WhoAmI", Version: "6.0.0"},
		StartedAt: time.UnixMilli(1000).UTC(), EndedAt: time.UnixMilli(1500).UTC(), DurationMS: 500,
		Success: false, ExecutionCode: "HOOK_CHECK_FAILED", ExecutionError: "denied",
		Hooks: []HookCall{{HookID: "h1", Point: "pre", Code: "CHECK_FAILED", Decision: "deny", Attempts: 1}},
	}
	b, err := ev.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	got, err := UnmarshalExecutionEvent(b)
	if err != nil {
		t.Fatal(err)
	}
	if got.Hooks[0].Decision != "deny" || got.Tool != ev.Tool || !got.StartedAt.Equal(ev.StartedAt) {
		t.Errorf("round trip: %+v", got)
	}
	if ev.Subject() != "auditrail.events."+ev.OrganizationID+".execution" {
		t.Errorf("subject %s", ev.Subject())
	}
	ev.ExecutionID = "x"
	b, _ = ev.Marshal()
	if _, err := UnmarshalExecutionEvent(b); !errors.Is(err, ErrInvalidEvent) {
		t.Errorf("bad execution_id: %v", err)
	}
}

func TestSubjects(t *testing.T) {
	tests := []struct {
		subject   string
		org, kind string
		ok        bool
		dlq       string
	}{
		{"auditrail.events.o1.audit", "o1", "audit", true, "auditrail.dlq.o1.audit"},
		{"auditrail.events.o1.execution", "o1", "execution", true, "auditrail.dlq.o1.execution"},
		{"auditrail.events.o1", "", "", false, "auditrail.dlq.unknown"},
		{"auditrail.events.o1.a.b", "", "", false, "auditrail.dlq.unknown"},
		{"other.o1.audit", "", "", false, "auditrail.dlq.unknown"},
	}
	for _, tc := range tests {
		org, kind, ok := ParseEventSubject(tc.subject)
		if org != tc.org || kind != tc.kind || ok != tc.ok {
			t.Errorf("ParseEventSubject(%s) = %s %s %v", tc.subject, org, kind, ok)
		}
		if got := DLQSubject(tc.subject); got != tc.dlq {
			t.Errorf("DLQSubject(%s) = %s", tc.subject, got)
		}
		commit := strings.Replace(tc.subject, "auditrail.events.", "auditrail.committed.", 1)
		org, kind, ok = ParseCommitSubject(commit)
		if org != tc.org || kind != tc.kind || ok != tc.ok {
			t.Errorf("ParseCommitSubject(%s) = %s %s %v", commit, org, kind, ok)
		}
		if ok && CommitSubject(org, kind) != commit {
			t.Errorf("CommitSubject(%s, %s) = %s", org, kind, CommitSubject(org, kind))
		}
	}
	if _, _, ok := ParseCommitSubject("auditrail.events.o1.audit"); ok {
		t.Error("an event subject parsed as a commit subject")
	}
}

func TestEntryIDStable(t *testing.T) {
	e := uuid.New()
	if EntryID(e) != EntryID(e) || EntryID(e) == EntryID(uuid.New()) || EntryID(e) == e {
		t.Fatal("EntryID must be a stable function of the event id, distinct from it")
	}
}

func FuzzUnmarshalAuditEvent(f *testing.F) {
	ev := sampleEvent()
	b, _ := ev.Marshal()
	f.Add(b)
	ev.Salt = bytes.Repeat([]byte{0x5a}, SaltBytes)
	b, _ = ev.Marshal()
	f.Add(b)
	f.Add([]byte{0x80})
	f.Add([]byte{0xc0})
	f.Add(encodeMap(f, map[string]any{"event_id": uuid.NewString(), "data": map[string]any{"a": []any{1.5, nil, "x"}}}))
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := UnmarshalAuditEvent(data)
		if err != nil {
			if !errors.Is(err, ErrDecode) && !errors.Is(err, ErrInvalidEvent) {
				t.Fatalf("error %v wraps neither ErrDecode nor ErrInvalidEvent", err)
			}
			return
		}
		// Anything accepted re-encodes and decodes to the same event.
		again, err := got.Marshal()
		if err != nil {
			t.Fatalf("re-encode accepted event: %v", err)
		}
		back, err := UnmarshalAuditEvent(again)
		if err != nil {
			t.Fatalf("decode re-encoded event: %v", err)
		}
		// data is compared as JSON values: the encoder sorts keys.
		got.Data, back.Data = normJSON(t, got.Data), normJSON(t, back.Data)
		j1, _ := json.Marshal(got)
		j2, _ := json.Marshal(back)
		if !bytes.Equal(j1, j2) {
			t.Fatalf("not stable:\n%s\n%s", j1, j2)
		}
	})
}

func normJSON(t *testing.T, b json.RawMessage) json.RawMessage {
	if b == nil {
		return nil
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("data is not JSON: %s: %v", b, err)
	}
	out, _ := json.Marshal(v)
	return out
}
