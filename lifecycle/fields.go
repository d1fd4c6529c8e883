package lifecycle

import (
	"encoding/json"
	"fmt"

	"github.com/auditrail/auditrail/internal/auditstore"
	"github.com/auditrail/auditrail/internal/tlog"
	"github.com/auditrail/auditrail/schemas"
	"github.com/auditrail/auditrail/schemas/apiitem"
)

// The fields of an erased entry (internal/tlog/commit.go): an entry of
// version 2 (salted) is served after its erasure with each committed
// field opened, by its key where the value stays and by its commitment
// where the pseudonym replaces it, so that every other field still
// verifies; its salt is forgotten. An entry already erased (no salt, the
// fields of its earlier erasure) is opened again from those. An entry of
// version 1 has no fields: it is placed by its original leaf hash only.

// applyAudit is e with the rewrite's columns set.
func applyAudit(e schemas.AuditEntry, set map[string]*string) schemas.AuditEntry {
	for col, v := range set {
		switch col {
		case "display_name":
			e.DisplayName = str(v)
		case "principal_id":
			e.PrincipalID = str(v)
		case "user_id":
			e.UserID = v
		case "client_ip":
			e.ClientIP = v
		case "resource_id":
			e.ResourceID = v
		case "resource_display":
			e.ResourceDisplay = v
		case "data":
			if v == nil {
				e.Data = nil
			} else {
				e.Data = json.RawMessage(*v)
			}
		}
	}
	return e
}

// applyExecution is x with the rewrite's columns set.
func applyExecution(x auditstore.Execution, set map[string]*string) auditstore.Execution {
	for col, v := range set {
		switch col {
		case "display_name":
			x.DisplayName = str(v)
		case "principal_id":
			x.PrincipalID = str(v)
		case "user_id":
			x.UserID = str(v)
		case "client_ip":
			x.ClientIP = str(v)
		case "execution_error":
			x.ExecutionError = str(v)
		}
	}
	return x
}

// openFields returns the fields of the erasure of an entry served as
// before and, rewritten, as after: from its salt, or from prev (the
// fields of its earlier erasure); nil for an entry of version 1.
func openFields(before, after any, salt []byte, prev json.RawMessage) (json.RawMessage, error) {
	if len(salt) == 0 && len(prev) == 0 {
		return nil, nil
	}
	b, err := json.Marshal(before)
	if err != nil {
		return nil, err
	}
	a, err := json.Marshal(after)
	if err != nil {
		return nil, err
	}
	var f tlog.ErasedFields
	if len(salt) > 0 {
		f, err = tlog.OpenErased(b, a, salt)
	} else {
		var p tlog.ErasedFields
		if err := json.Unmarshal(prev, &p); err != nil {
			return nil, fmt.Errorf("the fields of the earlier erasure: %w", err)
		}
		f, err = tlog.Reopen(p, b, a)
	}
	if err != nil {
		return nil, err
	}
	return json.Marshal(f)
}

// auditFields is openFields of an audit entry and its rewrite.
func auditFields(e *schemas.AuditEntry, set map[string]*string, prev json.RawMessage) (json.RawMessage, error) {
	return openFields(apiitem.NewItem(e), apiitem.NewItem(ptr(applyAudit(*e, set))), e.Salt, prev)
}

// executionFields is openFields of an execution and its rewrite.
func executionFields(x *auditstore.Execution, set map[string]*string, prev json.RawMessage) (json.RawMessage, error) {
	return openFields(apiitem.NewExecutionItem(x), apiitem.NewExecutionItem(ptr(applyExecution(*x, set))), x.Salt, prev)
}

func ptr[T any](v T) *T { return &v }

// str is *v, "" for nil (a NOT NULL column's NULL).
func str(v *string) string {
	if v == nil {
		return ""
	}
	return *v
}
