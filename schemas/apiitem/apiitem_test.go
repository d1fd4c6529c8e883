package apiitem

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
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
