// Package ocsf maps auditrail events to OCSF 1.1 API Activity events
// (class 6003, category 6 Application Activity): `auditrail tail --format
// ocsf` prints them and push destinations of format ocsf deliver them.
package ocsf

import (
	"strings"
	"time"

	"github.com/auditrail/auditrail/schemas"
)

// Version is the OCSF schema version of the events.
const Version = "1.1.0"

// ClassUID is API Activity.
const ClassUID = 6003

// activity maps an audit action to its OCSF activity.
var activity = map[schemas.AuditAction]struct {
	id   int
	name string
}{
	schemas.AuditActionCreated:  {1, "Create"},
	schemas.AuditActionUpdated:  {3, "Update"},
	schemas.AuditActionDeleted:  {4, "Delete"},
	schemas.AuditActionDisabled: {3, "Update"},
}

func base(activityID int, activityName string, t time.Time, eventID string) map[string]any {
	return map[string]any{
		"class_uid": ClassUID, "class_name": "API Activity", "category_uid": 6, "category_name": "Application Activity",
		"activity_id": activityID, "activity_name": activityName, "type_uid": ClassUID*100 + activityID,
		"severity_id": 1, "severity": "Informational", "time": t.UnixMilli(),
		"metadata": map[string]any{"uid": eventID, "version": Version, "product": map[string]any{"name": "auditrail", "vendor_name": "auditrail"}},
	}
}

// Audit maps an administrative action: activity Create, Update (also for
// DISABLED) or Delete, actor.user from the principal, api.operation the
// action, api.service.name the source, resources[0] the resource,
// metadata.uid the event id, unmapped the organization, project and data.
func Audit(e *schemas.AuditEvent) map[string]any {
	a, ok := activity[e.Action]
	if !ok {
		a.id, a.name = 0, "Unknown"
	}
	o := base(a.id, a.name, e.Timestamp, e.EventID.String())
	user := map[string]any{"uid": e.PrincipalID, "name": e.DisplayName, "type": e.PrincipalType}
	o["actor"] = map[string]any{"user": user}
	o["api"] = map[string]any{"operation": strings.TrimPrefix(e.Action.String(), "AUDIT_ACTION_"), "service": map[string]any{"name": strings.TrimPrefix(e.Source.String(), "AUDIT_SOURCE_")}}
	o["status_id"], o["status"] = 1, "Success"
	if e.ClientIP != nil {
		o["src_endpoint"] = map[string]any{"ip": *e.ClientIP}
	}
	res := map[string]any{}
	if e.ResourceType != nil {
		res["type"] = strings.TrimPrefix(e.ResourceType.String(), "RESOURCE_TYPE_")
	}
	if e.ResourceID != nil {
		res["uid"] = *e.ResourceID
	}
	if e.ResourceDisplay != nil {
		res["name"] = *e.ResourceDisplay
	}
	o["resources"] = []any{res}
	o["unmapped"] = map[string]any{"organization_id": e.OrganizationID.String(), "project_id": e.ProjectID, "data": e.Data}
	return o
}

// Execution maps a tool execution: activity Other (99), actor.user the user
// it ran for, api.operation the tool, status Success or Failure with the
// error kind and message, duration in milliseconds, unmapped the
// organization, project, execution id and hook calls.
func Execution(e *schemas.ExecutionEvent) map[string]any {
	o := base(99, "Other", e.StartedAt, e.EventID)
	o["actor"] = map[string]any{"user": map[string]any{"uid": e.UserID}}
	o["api"] = map[string]any{"operation": e.Tool.Toolkit + "." + e.Tool.Name, "version": e.Tool.Version}
	if e.Success {
		o["status_id"], o["status"] = 1, "Success"
	} else {
		o["status_id"], o["status"], o["status_detail"] = 2, "Failure", e.ErrorKind+": "+e.ExecutionError
	}
	o["duration"] = e.DurationMS
	o["unmapped"] = map[string]any{"organization_id": e.OrganizationID, "project_id": e.ProjectID, "execution_id": e.ExecutionID, "hooks": e.Hooks}
	return o
}
