package apiitem

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/auditrail/auditrail/internal/auditstore"
	itlog "github.com/auditrail/auditrail/internal/tlog"
	"github.com/auditrail/auditrail/schemas"
)

// An entry with a salt is served with "salt" (standard base64), just
// before leaf_index, and its leaf is of version 2; one without is served
// without the member, and its leaf is of version 1.
func TestItemSalt(t *testing.T) {
	salt := []byte("\x00\xff0123456789abc\"")
	entry := schemas.AuditEntry{ID: uuid.New(), CreatedTime: time.UnixMilli(1_700_000_000_000).UTC(),
		AuditEvent: schemas.AuditEvent{EventID: uuid.New(), OrganizationID: uuid.New(), Timestamp: time.UnixMilli(1_700_000_000_000).UTC(),
			Action: schemas.AuditActionCreated, Source: schemas.AuditSourceAPI, DisplayName: "Ada", PrincipalID: "ada",
			PrincipalType: "ACCOUNT", UserID: schemas.Ptr("ada"), Data: json.RawMessage(`{"k":"v"}`), Salt: salt}}
	exec := auditstore.Execution{CreatedTime: time.UnixMilli(1_700_000_000_000).UTC(), ExecutionEvent: schemas.ExecutionEvent{
		EventID: uuid.NewString(), ExecutionID: uuid.NewString(), OrganizationID: uuid.NewString(), UserID: "ada",
		PrincipalID: "ada", PrincipalType: "ACCOUNT", DisplayName: "Ada", Tool: schemas.ToolRef{Toolkit: "T", Name: "N", Version: "1"},
		StartedAt: time.UnixMilli(1_700_000_000_000).UTC(), EndedAt: time.UnixMilli(1_700_000_000_001).UTC(), Success: true, Salt: salt}}
	want := `"salt":"` + base64.StdEncoding.EncodeToString(salt) + `","leaf_index":null`
	for _, tc := range []struct {
		name string
		item func() any
		leaf func() ([32]byte, error)
	}{
		{"audit", func() any { return NewItem(&entry) }, func() ([32]byte, error) { return Leaves{}.AuditLeaf(&entry) }},
		{"execution", func() any { return NewExecutionItem(&exec) }, func() ([32]byte, error) { return Leaves{}.ExecutionLeaf(&exec) }},
	} {
		for _, salted := range []bool{true, false} {
			entry.Salt, exec.Salt = nil, nil
			if salted {
				entry.Salt, exec.Salt = salt, salt
			}
			b, err := json.Marshal(tc.item())
			if err != nil {
				t.Fatal(err)
			}
			if got := bytes.Contains(b, []byte(want)); got != salted {
				t.Fatalf("%s (salted %v): %s", tc.name, salted, b)
			}
			if !salted && bytes.Contains(b, []byte(`"salt"`)) {
				t.Fatalf("%s without a salt: %s", tc.name, b)
			}
			e, err := itlog.ParseEntry(nil, b)
			if err != nil {
				t.Fatal(err)
			}
			if v := map[bool]int{true: 2, false: 1}[salted]; e.Version != v {
				t.Fatalf("%s (salted %v): leaf version %d, want %d", tc.name, salted, e.Version, v)
			}
			leaf, err := tc.leaf()
			if err != nil || leaf != e.Leaf {
				t.Fatalf("%s: Leaves %x, ParseEntry %x (%v)", tc.name, leaf, e.Leaf, err)
			}
		}
	}
}

// FormatTime writes what time.Format writes with TimeFormat: every field,
// the milliseconds truncated, any zone made UTC, and the years of other
// than four digits.
func TestFormatTimeIsFormat(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	zone := time.FixedZone("x", -7*3600-30*60)
	times := []time.Time{
		{}, time.Unix(0, 0), time.Date(9999, 12, 31, 23, 59, 59, 999_999_999, time.UTC),
		time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(-1, 3, 4, 5, 6, 7, 8, time.UTC),
		time.Date(2026, 11, 29, 0, 0, 0, 999_999, zone), time.Date(1, 1, 1, 0, 0, 0, 1_000_000, time.UTC),
	}
	for range 10_000 {
		times = append(times, time.Unix(0, rng.Int64()-rng.Int64()/2).In(zone))
	}
	for _, tm := range times {
		if got, want := FormatTime(tm), tm.UTC().Format(TimeFormat); got != want {
			t.Fatalf("FormatTime(%v) = %q, Format %q", tm, got, want)
		}
	}
}

func FuzzFormatTime(f *testing.F) {
	f.Add(int64(0), int64(0))
	f.Add(int64(253402300799), int64(999_999_999))
	f.Fuzz(func(t *testing.T, sec, nsec int64) {
		tm := time.Unix(sec, nsec)
		if got, want := FormatTime(tm), tm.UTC().Format(TimeFormat); got != want {
			t.Fatalf("FormatTime(%v) = %q, Format %q", tm, got, want)
		}
	})
}
