package ocsf_test

import (
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/auditrail/auditrail/internal/ocsf"
	"github.com/auditrail/auditrail/schemas"
)

func TestAudit(t *testing.T) {
	at := time.Date(2026, 11, 26, 9, 0, 0, 0, time.UTC)
	tests := []struct {
		action       schemas.AuditAction
		id           int
		name, opName string
	}{
		{schemas.AuditActionCreated, 1, "Create", "CREATED"},
		{schemas.AuditActionUpdated, 3, "Update", "UPDATED"},
		{schemas.AuditActionDisabled, 3, "Update", "DISABLED"},
		{schemas.AuditActionDeleted, 4, "Delete", "DELETED"},
	}
	for _, tt := range tests {
		ev := schemas.AuditEvent{EventID: uuid.New(), Timestamp: at, Action: tt.action, Source: schemas.AuditSourceCLI, DisplayName: "Alice",
			OrganizationID: uuid.New(), PrincipalID: "alice", PrincipalType: "ACCOUNT", ClientIP: schemas.Ptr("203.0.113.7"),
			ResourceType: schemas.Ptr(schemas.ResourceTypeAPIKey), ResourceID: schemas.Ptr("k1"), ResourceDisplay: schemas.Ptr("laptop")}
		o := ocsf.Audit(&ev)
		res := o["resources"].([]any)[0].(map[string]any)
		if o["class_uid"] != 6003 || o["activity_id"] != tt.id || o["activity_name"] != tt.name || o["type_uid"] != 600300+tt.id ||
			o["time"] != at.UnixMilli() || o["metadata"].(map[string]any)["uid"] != ev.EventID.String() ||
			o["api"].(map[string]any)["operation"] != tt.opName || o["src_endpoint"].(map[string]any)["ip"] != "203.0.113.7" ||
			res["type"] != "API_KEY" || res["uid"] != "k1" || res["name"] != "laptop" ||
			o["actor"].(map[string]any)["user"].(map[string]any)["uid"] != "alice" {
			t.Errorf("%v: %v", tt.action, o)
		}
	}
}

func TestExecution(t *testing.T) {
	ev := schemas.ExecutionEvent{EventID: "e1", ExecutionID: "x1", OrganizationID: "o", UserID: "bob",
		Tool: schemas.ToolRef{Toolkit: "DocsToolkit", Name: "CreateBlankDocument", Version: "6.0.0"}, StartedAt: time.Unix(1_800_000_000, 0),
		DurationMS: 12.5, ErrorKind: "HOOK_CHECK_FAILED", ExecutionError: "denied"}
	o := ocsf.Execution(&ev)
	if o["activity_id"] != 99 || o["type_uid"] != 600399 || o["status_id"] != 2 || o["status_detail"] != "HOOK_CHECK_FAILED: denied" ||
		o["api"].(map[string]any)["operation"] != "DocsToolkit.CreateBlankDocument" || o["duration"] != 12.5 ||
		o["metadata"].(map[string]any)["uid"] != "e1" {
		t.Errorf("failed execution: %v", o)
	}
	ev.Success = true
	if o := ocsf.Execution(&ev); o["status_id"] != 1 || o["status"] != "Success" {
		t.Errorf("successful execution: %v", o)
	}
}
