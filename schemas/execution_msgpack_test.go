package schemas

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/vmihailenco/msgpack/v5"
)

func sampleExecution() ExecutionEvent {
	return ExecutionEvent{
		EventID: uuid.NewString(), ExecutionID: uuid.NewString(), OrganizationID: uuid.NewString(), ProjectID: uuid.NewString(),
		UserID: "u1", PrincipalID: "k1", PrincipalType: "API_KEY", DisplayName: "ci", ClientIP: "203.0.113.9",
		Tool:      ToolRef{Toolkit: "MailToolkit", Name: "ListEmails", Version: "1.0.0"},
		StartedAt: time.UnixMilli(1_700_000_000_123).UTC(), EndedAt: time.UnixMilli(1_700_000_000_456).UTC(), DurationMS: 333.25,
		Success: true, ExecutionCode: "OK", ErrorKind: "",
		Hooks: []HookCall{
			{HookID: "h1", HookName: "policy", Point: "pre", Code: "OK", HTTPStatus: 200, Attempts: 2, LatencyMS: 1.5, Decision: "allow", Overridden: true},
			{HookID: "h2", Point: "access", Decision: "deny", Cached: true, Failure: "timeout", FailureModeApplied: "fail_closed", HTTPStatus: -1},
		},
		Client: &ClientInfo{Protocol: "mcp", Name: "claude-desktop", Version: "1.2.3"},
		Salt:   bytes.Repeat([]byte{0xa5}, SaltBytes),
	}
}

// An event without a client (the HTTP API) has no client key on the wire,
// so that consumers that predate it see the same bytes as before; one with
// a client decodes in a decoder that predates it (unknown keys skipped).
func TestExecutionClientIsOptional(t *testing.T) {
	ev := sampleExecution()
	ev.Client = nil
	b, err := ev.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(b, []byte("\xa6client")) { // fixstr "client"
		t.Fatal("an event without a client carries a client key")
	}
	got, err := UnmarshalExecutionEvent(b)
	if err != nil || got.Client != nil {
		t.Fatalf("without client: %v %+v", err, got.Client)
	}
	// msgpack nil is no client; a client with an unknown member keeps the rest.
	for _, c := range []any{nil, map[string]any{"name": "x", "version": "1", "protocol": "mcp", "later": []int{1}}} {
		m := map[string]any{"event_id": ev.EventID, "execution_id": ev.ExecutionID, "organization_id": ev.OrganizationID,
			"tool": map[string]any{"toolkit": "T", "name": "N"}, "started_at": ev.StartedAt, "client": c}
		b, err := msgpack.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		got, err := UnmarshalExecutionEvent(b)
		if err != nil {
			t.Fatalf("client %v: %v", c, err)
		}
		if (c == nil) != (got.Client == nil) || (c != nil && *got.Client != ClientInfo{Protocol: "mcp", Name: "x", Version: "1"}) {
			t.Fatalf("client %v decoded as %+v", c, got.Client)
		}
	}
}

// The bounded decoder reads exactly what the msgpack library writes, for
// every field (a reflection round trip of a fully set event).
func TestExecutionDecoderAgreesWithTheEncoder(t *testing.T) {
	ev := sampleExecution()
	b, err := ev.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	got, err := UnmarshalExecutionEvent(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, ev) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", got, ev)
	}
	// Every field of the struct is set in the sample, so a field the
	// decoder forgot would show above; check the sample stays complete.
	v := reflect.ValueOf(ev)
	for i := 0; i < v.NumField(); i++ {
		// Stored is not on the wire (msgpack:"-"): ingest sets it.
		if v.Field(i).IsZero() && !slices.Contains([]string{"ErrorKind", "ExecutionError", "Stored"}, v.Type().Field(i).Name) {
			t.Errorf("sample leaves %s unset", v.Type().Field(i).Name)
		}
	}
	// Through the library's decoder too (CustomDecoder).
	var viaLib ExecutionEvent
	dec := msgpack.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&viaLib); err != nil || !reflect.DeepEqual(viaLib, ev) {
		t.Fatalf("msgpack.Decode: %v %+v", err, viaLib)
	}
}

// A message of a few hundred bytes whose hooks array header claims 40
// million entries (or a map of billions of keys, a string of 4 GiB) is
// refused without allocating what it claims.
func TestExecutionAllocationBombRefused(t *testing.T) {
	ev := sampleExecution()
	ev.Hooks = nil
	b, _ := ev.Marshal()
	// Replace the hooks value (nil: 0xc0) by an array32 header of 40M.
	i := bytes.Index(b, append([]byte("\xa5hooks"), 0xc0))
	if i < 0 {
		t.Fatal("no hooks key in the encoding")
	}
	bomb := append(append([]byte{}, b[:i+6]...), 0xdd, 0, 0, 0, 0)
	binary.BigEndian.PutUint32(bomb[len(bomb)-4:], 40_000_000)
	bomb = append(bomb, b[i+7:]...)
	if len(bomb) > 600 {
		t.Fatalf("bomb of %d bytes", len(bomb))
	}
	cases := map[string][]byte{
		"hooks array of 40M":    bomb,
		"map of 4G entries":     {0xdf, 0xff, 0xff, 0xff, 0xff},
		"string of 4 GiB":       append([]byte{0x81, 0xa8}, append([]byte("event_id"), 0xdb, 0xff, 0xff, 0xff, 0xff)...),
		"1001 hook calls":       hookCalls(t, 1001),
		"hooks not an array":    replaceHooks(t, []byte{0xa1, 'x'}),
		"non-finite latency":    replaceHooks(t, []byte{0x91, 0x81, 0xaa, 'l', 'a', 't', 'e', 'n', 'c', 'y', '_', 'm', 's', 0xcb, 0x7f, 0xf0, 0, 0, 0, 0, 0, 0}),
		"attempts out of int32": replaceHooks(t, []byte{0x91, 0x81, 0xa8, 'a', 't', 't', 'e', 'm', 'p', 't', 's', 0xcf, 0xff, 0, 0, 0, 0, 0, 0, 0}),
	}
	for name, b := range cases {
		t.Run(name, func(t *testing.T) {
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			_, err := UnmarshalExecutionEvent(b)
			runtime.ReadMemStats(&after)
			if !errors.Is(err, ErrDecode) && !errors.Is(err, ErrInvalidEvent) {
				t.Fatalf("err = %v", err)
			}
			if grew := after.TotalAlloc - before.TotalAlloc; grew > 1<<20 {
				t.Fatalf("decoding %d bytes allocated %d bytes", len(b), grew)
			}
		})
	}
}

func hookCalls(t *testing.T, n int) []byte {
	ev := sampleExecution()
	ev.Hooks = make([]HookCall, n)
	b, err := ev.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// replaceHooks encodes the sample with raw bytes as the value of hooks.
func replaceHooks(t *testing.T, raw []byte) []byte {
	ev := sampleExecution()
	ev.Hooks = nil
	b, _ := ev.Marshal()
	i := bytes.Index(b, append([]byte("\xa5hooks"), 0xc0))
	if i < 0 {
		t.Fatal("no hooks key")
	}
	return append(append(append([]byte{}, b[:i+6]...), raw...), b[i+7:]...)
}

// Identifiers sent in another form that uuid.Parse accepts (upper case,
// braces, urn:uuid:) are stored canonical, so cursors that re-encode them
// canonically find them again.
func TestExecutionIDsCanonical(t *testing.T) {
	ev := sampleExecution()
	want := ev
	ev.EventID = strings.ToUpper(ev.EventID)
	ev.ExecutionID = "{" + ev.ExecutionID + "}"
	ev.OrganizationID = "urn:uuid:" + ev.OrganizationID
	ev.ProjectID = strings.ReplaceAll(ev.ProjectID, "-", "")
	b, _ := ev.Marshal()
	got, err := UnmarshalExecutionEvent(b)
	if err != nil {
		t.Fatal(err)
	}
	if got.EventID != want.EventID || got.ExecutionID != want.ExecutionID || got.OrganizationID != want.OrganizationID || got.ProjectID != want.ProjectID {
		t.Fatalf("ids not canonical: %s %s %s %s", got.EventID, got.ExecutionID, got.OrganizationID, got.ProjectID)
	}
}

// FuzzUnmarshalExecutionEvent: whatever the bytes, the decoder answers an
// error that wraps ErrDecode or ErrInvalidEvent, or an event that re-encodes
// to itself, and never allocates much more than the input.
func FuzzUnmarshalExecutionEvent(f *testing.F) {
	ev := sampleExecution()
	b, _ := ev.Marshal()
	f.Add(b)
	f.Add([]byte{0x80})
	f.Add([]byte{0xdd, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, data []byte) {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		got, err := UnmarshalExecutionEvent(data)
		runtime.ReadMemStats(&after)
		if grew := after.TotalAlloc - before.TotalAlloc; grew > uint64(64*len(data)+64<<10) {
			t.Fatalf("decoding %d bytes allocated %d", len(data), grew)
		}
		if err != nil {
			if !errors.Is(err, ErrDecode) && !errors.Is(err, ErrInvalidEvent) {
				t.Fatalf("error %v wraps neither ErrDecode nor ErrInvalidEvent", err)
			}
			return
		}
		again, err := got.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		back, err := UnmarshalExecutionEvent(again)
		if err != nil {
			t.Fatalf("decode re-encoded event: %v", err)
		}
		j1, _ := json.Marshal(got)
		j2, _ := json.Marshal(back)
		if !bytes.Equal(j1, j2) {
			t.Fatalf("not stable:\n%s\n%s", j1, j2)
		}
	})
}
