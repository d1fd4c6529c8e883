package lifecycle

import (
	"encoding/base64"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/auditrail/auditrail/internal/auditstore"
	"github.com/auditrail/auditrail/internal/tlog"
	"github.com/auditrail/auditrail/schemas"
	"github.com/auditrail/auditrail/schemas/apiitem"
)

// served is the item a route serves for an erased entry: rewritten, no
// salt, its erasure member with the fields.
func served(t *testing.T, item any, leaf [32]byte, fields json.RawMessage) tlog.Entry {
	t.Helper()
	b, err := json.Marshal(item)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	delete(m, "salt")
	m["erasure"] = apiitem.Erasure{ID: uuid.NewString(), LeafHash: base64.StdEncoding.EncodeToString(leaf[:]), Fields: fields}
	b, _ = json.Marshal(m)
	e, err := tlog.ParseEntry(nil, b)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// An erasure's fields, computed from the stored entry and its rewrite,
// make the served entry hash to its original leaf, for an audit entry and
// an execution, erased once and again.
func TestErasedFieldsKeepTheLeaf(t *testing.T) {
	s := &subject{kind: "user_id", value: "alice@example.com", needles: []string{"Alice Smith", "alice@example.com"}, pseudonym: "erased-0123456789abcdef"}
	rt := schemas.ResourceTypeUser
	e := schemas.AuditEntry{ID: uuid.New(), CreatedTime: time.UnixMilli(1_700_000_000_000).UTC(), AuditEvent: schemas.AuditEvent{
		EventID: uuid.New(), OrganizationID: uuid.New(), Timestamp: time.UnixMilli(1_700_000_000_000).UTC(), ClientIP: schemas.Ptr("10.0.0.9"),
		Action: schemas.AuditActionUpdated, Source: schemas.AuditSourceAPI, DisplayName: "Alice Smith", PrincipalID: "alice@example.com",
		UserID: schemas.Ptr("alice@example.com"), PrincipalType: "ACCOUNT", ResourceType: &rt, ResourceID: schemas.Ptr("bob"),
		ResourceDisplay: schemas.Ptr("Bob"), Data: json.RawMessage(`{"note":"asked by Alice Smith","role":"admin"}`),
		Salt: []byte("0123456789abcdef")}}
	leaf, err := apiitem.Leaves{}.AuditLeaf(&e)
	if err != nil {
		t.Fatal(err)
	}
	set, err := s.auditRewrite(&e)
	if err != nil || set == nil {
		t.Fatal(set, err)
	}
	fields, err := auditFields(&e, set, nil)
	if err != nil || fields == nil {
		t.Fatal(fields, err)
	}
	after := applyAudit(e, set)
	after.Salt = nil
	got := served(t, apiitem.NewItem(&after), leaf, fields)
	if got.Leaf != leaf || !slices.Equal(got.Erased, []string{"client_ip", "data", "display_name", "principal_id", "user_id"}) {
		t.Fatalf("served after the erasure: version %d, erased %q, leaf matches %v", got.Version, got.Erased, got.Leaf == leaf)
	}

	// Erased again (another subject: bob, the resource), from the fields.
	s2 := &subject{kind: "user_id", value: "bob", needles: []string{"Bob", "bob"}, pseudonym: "erased-fedcba9876543210"}
	set2, err := s2.auditRewrite(&after)
	if err != nil || set2 == nil {
		t.Fatal(set2, err)
	}
	fields2, err := auditFields(&after, set2, fields)
	if err != nil {
		t.Fatal(err)
	}
	again := applyAudit(after, set2)
	got = served(t, apiitem.NewItem(&again), leaf, fields2)
	if got.Leaf != leaf || !slices.Contains(got.Erased, "resource_id") {
		t.Fatalf("erased twice: erased %q, leaf matches %v", got.Erased, got.Leaf == leaf)
	}

	x := auditstore.Execution{CreatedTime: time.UnixMilli(1_700_000_000_000).UTC(), ExecutionEvent: schemas.ExecutionEvent{
		EventID: uuid.NewString(), ExecutionID: "x", OrganizationID: uuid.NewString(), UserID: "alice@example.com",
		PrincipalID: "alice@example.com", PrincipalType: "ACCOUNT", DisplayName: "Alice Smith", ClientIP: "10.0.0.9",
		Tool: schemas.ToolRef{Toolkit: "Docs", Name: "Read", Version: "1"}, StartedAt: time.UnixMilli(1_700_000_000_000).UTC(),
		EndedAt: time.UnixMilli(1_700_000_000_100).UTC(), ExecutionCode: "E", ExecutionError: "no access for Alice Smith", ErrorKind: "k",
		Salt: []byte("fedcba9876543210")}}
	xleaf, err := apiitem.Leaves{}.ExecutionLeaf(&x)
	if err != nil {
		t.Fatal(err)
	}
	xset := s.execRewrite(&x)
	xfields, err := executionFields(&x, xset, nil)
	if err != nil {
		t.Fatal(err)
	}
	xafter := applyExecution(x, xset)
	xafter.Salt = nil
	got = served(t, apiitem.NewExecutionItem(&xafter), xleaf, xfields)
	if got.Leaf != xleaf || !slices.Contains(got.Erased, "error") {
		t.Fatalf("execution served after the erasure: erased %q, leaf matches %v", got.Erased, got.Leaf == xleaf)
	}
}
