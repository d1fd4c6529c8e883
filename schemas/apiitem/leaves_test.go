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

// Preimage answers the bytes each leaf hashes, for both kinds and both
// versions: SHA-256(0x00 ‖ bytes) is the leaf the sequencer appends. An
// erasure keeps the preimage of an entry of version 2 byte for byte (its
// fields opened by tlog.OpenErased, as the erasure serves them); the
// rewritten entry of version 1 no longer has its leaf's preimage.
func TestPreimage(t *testing.T) {
	at := time.UnixMilli(1_700_000_000_000).UTC()
	salt := []byte("0123456789abcdef")
	entry := schemas.AuditEntry{ID: uuid.New(), CreatedTime: at, AuditEvent: schemas.AuditEvent{
		EventID: uuid.New(), OrganizationID: uuid.New(), Timestamp: at, ClientIP: schemas.Ptr("10.0.0.9"),
		Action: schemas.AuditActionUpdated, Source: schemas.AuditSourceAPI, DisplayName: "Ada Lovelace", PrincipalID: "ada",
		PrincipalType: "ACCOUNT", UserID: schemas.Ptr("ada"), Data: json.RawMessage(`{"note":"by Ada Lovelace","role":"admin"}`)}}
	exec := auditstore.Execution{CreatedTime: at, ExecutionEvent: schemas.ExecutionEvent{
		EventID: uuid.NewString(), ExecutionID: uuid.NewString(), OrganizationID: uuid.NewString(), UserID: "ada",
		PrincipalID: "ada", PrincipalType: "ACCOUNT", DisplayName: "Ada Lovelace", ClientIP: "10.0.0.9",
		Tool: schemas.ToolRef{Toolkit: "T", Name: "N", Version: "1"}, StartedAt: at, EndedAt: at.Add(time.Millisecond),
		ExecutionCode: "E", ExecutionError: "no access for Ada Lovelace", ErrorKind: "k"}}

	// erase returns the item as served after an erasure that replaced the
	// display name: rewritten, no salt, its erasure member (with the
	// fields of a salted entry).
	erase := func(t *testing.T, before, after any, salted bool, leaf [32]byte) any {
		t.Helper()
		b, _ := json.Marshal(before)
		a, _ := json.Marshal(after)
		var m map[string]any
		if err := json.Unmarshal(a, &m); err != nil {
			t.Fatal(err)
		}
		delete(m, "salt")
		er := Erasure{ID: uuid.NewString(), LeafHash: base64.StdEncoding.EncodeToString(leaf[:])}
		if salted {
			f, err := itlog.OpenErased(b, a, salt)
			if err != nil {
				t.Fatal(err)
			}
			if er.Fields, err = json.Marshal(f); err != nil {
				t.Fatal(err)
			}
		}
		m["erasure"] = er
		return m
	}
	for _, tc := range []struct {
		name   string
		item   func() any
		erased func() any // the item with display_name replaced
		leaf   func() ([32]byte, error)
	}{
		{"audit", func() any { return NewItem(&entry) }, func() any {
			e := entry
			e.DisplayName = "erased-0123"
			return NewItem(&e)
		}, func() ([32]byte, error) { return Leaves{}.AuditLeaf(&entry) }},
		{"execution", func() any { return NewExecutionItem(&exec) }, func() any {
			x := exec
			x.DisplayName = "erased-0123"
			return NewExecutionItem(&x)
		}, func() ([32]byte, error) { return Leaves{}.ExecutionLeaf(&exec) }},
	} {
		for _, salted := range []bool{false, true} {
			entry.Salt, exec.Salt = nil, nil
			if salted {
				entry.Salt, exec.Salt = salt, salt
			}
			leaf, err := tc.leaf()
			if err != nil {
				t.Fatal(err)
			}
			p, err := Preimage(tc.item())
			if err != nil {
				t.Fatal(err)
			}
			version := map[bool]int{false: 1, true: 2}[salted]
			if p.Version != version || itlog.LeafHash(p.Canonical) != leaf || p.Leaf != leaf {
				t.Fatalf("%s (version %d): preimage of version %d hashes to its leaf: %v", tc.name, version, p.Version, itlog.LeafHash(p.Canonical) == leaf)
			}
			if bytes.Contains(p.Canonical, []byte(`"salt"`)) || bytes.Contains(p.Canonical, []byte(`"leaf_index"`)) {
				t.Fatalf("%s (version %d): the preimage holds a member no leaf covers: %s", tc.name, version, p.Canonical)
			}
			if salted && bytes.Contains(p.Canonical, []byte("Ada Lovelace")) {
				t.Fatalf("%s (version 2): the preimage holds a committed value: %s", tc.name, p.Canonical)
			}
			e, err := Preimage(erase(t, tc.item(), tc.erased(), salted, leaf))
			if err != nil {
				t.Fatal(err)
			}
			if salted != bytes.Equal(e.Canonical, p.Canonical) || salted != (e.Leaf == leaf) || e.Version != version {
				t.Fatalf("%s (version %d) erased: version %d, the same preimage %v, the same leaf %v",
					tc.name, version, e.Version, bytes.Equal(e.Canonical, p.Canonical), e.Leaf == leaf)
			}
		}
	}
}
