package schemas

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/vmihailenco/msgpack/v5"
)

// A salt goes on the wire as a bin under "salt" and comes back; an event
// without one has no salt key (the bytes of before: the golden file).
func TestSaltRoundTrip(t *testing.T) {
	salt := []byte("0123456789abcdef")
	audit := sampleEvent()
	audit.Salt = salt
	b, err := audit.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := msgpack.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if got, ok := m["salt"].([]byte); !ok || !bytes.Equal(got, salt) || len(m) != 17 {
		t.Fatalf("salt on the wire: %T %v (%d keys)", m["salt"], m["salt"], len(m))
	}
	got, err := UnmarshalAuditEvent(b)
	if err != nil || !bytes.Equal(got.Salt, salt) {
		t.Fatalf("audit salt: %v %x", err, got.Salt)
	}
	if got.Salt[0] = 'X'; b[len(b)-SaltBytes] != '0' {
		t.Fatal("the decoded salt is a view of the payload")
	}

	exec := sampleExecution()
	exec.Salt = salt
	if b, err = exec.Marshal(); err != nil {
		t.Fatal(err)
	}
	m = nil
	if err := msgpack.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if got, ok := m["salt"].([]byte); !ok || !bytes.Equal(got, salt) {
		t.Fatalf("execution salt on the wire: %T %v", m["salt"], m["salt"])
	}
	gotExec, err := UnmarshalExecutionEvent(b)
	if err != nil || !bytes.Equal(gotExec.Salt, salt) {
		t.Fatalf("execution salt: %v %x", err, gotExec.Salt)
	}

	// No salt: no key.
	audit.Salt, exec.Salt = nil, nil
	for _, enc := range []func() ([]byte, error){audit.Marshal, exec.Marshal} {
		b, err := enc()
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(b, []byte("\xa4salt")) {
			t.Fatal("an event without a salt carries a salt key")
		}
	}
}

// A salt of another length than SaltBytes makes the event invalid; nil
// or an empty bin is no salt; a salt that is not a bin is not the shape.
func TestSaltDecoding(t *testing.T) {
	audit := func(salt any) []byte {
		return encodeMap(t, map[string]any{"event_id": uuid.NewString(), "organization_id": uuid.NewString(),
			"timestamp": time.Now(), "action": "AUDIT_ACTION_UPDATED", "source": "AUDIT_SOURCE_API", "salt": salt})
	}
	exec := func(salt any) []byte {
		return encodeMap(t, map[string]any{"event_id": uuid.NewString(), "execution_id": uuid.NewString(), "organization_id": uuid.NewString(),
			"tool": map[string]any{"toolkit": "T", "name": "N"}, "started_at": time.Now(), "salt": salt})
	}
	decode := map[string]func(b []byte) ([]byte, error){
		"audit": func(b []byte) ([]byte, error) { e, err := UnmarshalAuditEvent(b); return e.Salt, err },
		"execution": func(b []byte) ([]byte, error) {
			e, err := UnmarshalExecutionEvent(b)
			return e.Salt, err
		},
	}
	for kind, payload := range map[string]func(any) []byte{"audit": audit, "execution": exec} {
		for _, tc := range []struct {
			name    string
			salt    any
			want    []byte
			wantErr error
		}{
			{"nil", nil, nil, nil},
			{"empty", []byte{}, nil, nil},
			{"16 bytes", bytes.Repeat([]byte{1}, 16), bytes.Repeat([]byte{1}, 16), nil},
			{"15 bytes", bytes.Repeat([]byte{1}, 15), nil, ErrInvalidEvent},
			{"17 bytes", bytes.Repeat([]byte{1}, 17), nil, ErrInvalidEvent},
			{"a string", "0123456789abcdef", nil, ErrDecode},
			{"a number", 7, nil, ErrDecode},
		} {
			got, err := decode[kind](payload(tc.salt))
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil && !bytes.Equal(got, tc.want)) {
				t.Errorf("%s, salt %s: %x, %v; want %x, %v", kind, tc.name, got, err, tc.want, tc.wantErr)
			}
		}
	}
	// Validate checks an event built in Go too.
	a := sampleEvent()
	a.Salt = []byte{1, 2, 3}
	if err := a.Validate(); !errors.Is(err, ErrInvalidEvent) {
		t.Errorf("audit Validate with 3 bytes of salt: %v", err)
	}
	x := sampleExecution()
	x.Salt = []byte{1, 2, 3}
	if err := x.Validate(); !errors.Is(err, ErrInvalidEvent) {
		t.Errorf("execution Validate with 3 bytes of salt: %v", err)
	}
}

// EnsureSalt gives an event without a salt SaltBytes random bytes once,
// and keeps a salt already there.
func TestEnsureSalt(t *testing.T) {
	var a, b AuditEvent
	if err := a.EnsureSalt(); err != nil {
		t.Fatal(err)
	}
	first := bytes.Clone(a.Salt)
	if err := a.EnsureSalt(); err != nil || len(first) != SaltBytes || !bytes.Equal(a.Salt, first) {
		t.Fatalf("salt %x then %x (%v)", first, a.Salt, err)
	}
	if err := b.EnsureSalt(); err != nil || bytes.Equal(a.Salt, b.Salt) {
		t.Fatalf("two events, one salt %x (%v)", b.Salt, err)
	}
	x := ExecutionEvent{Salt: []byte("0123456789abcdef")}
	if err := x.EnsureSalt(); err != nil || string(x.Salt) != "0123456789abcdef" {
		t.Fatalf("a salt set was replaced: %q (%v)", x.Salt, err)
	}
	var y ExecutionEvent
	if err := y.EnsureSalt(); err != nil || len(y.Salt) != SaltBytes {
		t.Fatalf("execution salt %x (%v)", y.Salt, err)
	}
}
