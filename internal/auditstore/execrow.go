package auditstore

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/auditrail/auditrail/schemas"
)

// ExecRow is a tool execution as both SQL backends store it. Columns, in
// the order of ScanTargets and Values: organization_id, event_id,
// execution_id, project_id (empty when none), user_id, principal_id,
// principal_type, display_name, client_ip, toolkit, tool_name, tool_version,
// started_ms, ended_ms, duration_ms, success, execution_code,
// execution_error, error_kind, hooks (JSON), created_ms, client (JSON of
// the event's client, ” for none), salt (its bytes; none: NULL in SQLite,
// ” in ClickHouse).
type ExecRow struct {
	OrgID, EventID, ExecutionID, ProjectID, UserID string
	PrincipalID, PrincipalType, DisplayName        string
	ClientIP                                       string
	Toolkit, ToolName, ToolVersion                 string
	StartedMS, EndedMS                             int64
	DurationMS                                     float64
	Success                                        uint8
	Code, Err, Kind, Hooks                         string
	CreatedMS                                      int64
	Client                                         string
	Salt                                           []byte
	// Seq is the feed's sequence: written after Values' columns, read only
	// by the feed queries (FeedTargets).
	Seq uint64
}

// NewExecRow converts an event for storage.
func NewExecRow(e *schemas.ExecutionEvent, createdMS int64) (ExecRow, error) {
	hooks := e.Hooks
	if hooks == nil {
		hooks = []schemas.HookCall{}
	}
	h, err := json.Marshal(hooks)
	if err != nil {
		return ExecRow{}, fmt.Errorf("execution %s hooks: %w", e.ExecutionID, err)
	}
	var client []byte
	if e.Client != nil {
		if client, err = json.Marshal(e.Client); err != nil {
			return ExecRow{}, fmt.Errorf("execution %s client: %w", e.ExecutionID, err)
		}
	}
	var ok uint8
	if e.Success {
		ok = 1
	}
	return ExecRow{OrgID: e.OrganizationID, EventID: e.EventID, ExecutionID: e.ExecutionID, ProjectID: e.ProjectID, UserID: e.UserID,
		PrincipalID: e.PrincipalID, PrincipalType: e.PrincipalType, DisplayName: e.DisplayName, ClientIP: e.ClientIP,
		Toolkit: e.Tool.Toolkit, ToolName: e.Tool.Name, ToolVersion: e.Tool.Version, StartedMS: e.StartedAt.UnixMilli(),
		EndedMS: e.EndedAt.UnixMilli(), DurationMS: e.DurationMS, Success: ok, Code: e.ExecutionCode, Err: e.ExecutionError,
		Kind: e.ErrorKind, Hooks: string(h), CreatedMS: createdMS, Client: string(client), Salt: e.Salt, Seq: e.Stored.Seq}, nil
}

// FeedTargets returns the destinations of the feed queries' columns: those
// of ScanTargets, then seq.
func (r *ExecRow) FeedTargets() []any { return append(r.ScanTargets(), &r.Seq) }

// Values returns the columns in order.
func (r *ExecRow) Values() []any {
	return []any{r.OrgID, r.EventID, r.ExecutionID, r.ProjectID, r.UserID, r.PrincipalID, r.PrincipalType, r.DisplayName, r.ClientIP, r.Toolkit, r.ToolName, r.ToolVersion,
		r.StartedMS, r.EndedMS, r.DurationMS, r.Success, r.Code, r.Err, r.Kind, r.Hooks, r.CreatedMS, r.Client, SaltValue(r.Salt)}
}

// ScanTargets returns destinations for the columns in order.
func (r *ExecRow) ScanTargets() []any {
	return []any{&r.OrgID, &r.EventID, &r.ExecutionID, &r.ProjectID, &r.UserID, &r.PrincipalID, &r.PrincipalType, &r.DisplayName, &r.ClientIP, &r.Toolkit, &r.ToolName, &r.ToolVersion,
		&r.StartedMS, &r.EndedMS, &r.DurationMS, &r.Success, &r.Code, &r.Err, &r.Kind, &r.Hooks, &r.CreatedMS, &r.Client, &r.Salt}
}

// Execution converts the row.
func (r *ExecRow) Execution() (Execution, error) {
	e := Execution{ExecutionEvent: schemas.ExecutionEvent{EventID: r.EventID, ExecutionID: r.ExecutionID, OrganizationID: r.OrgID,
		ProjectID: r.ProjectID, UserID: r.UserID, PrincipalID: r.PrincipalID, PrincipalType: r.PrincipalType,
		DisplayName: r.DisplayName, ClientIP: r.ClientIP, Tool: schemas.ToolRef{Toolkit: r.Toolkit, Name: r.ToolName, Version: r.ToolVersion},
		StartedAt: time.UnixMilli(r.StartedMS).UTC(), EndedAt: time.UnixMilli(r.EndedMS).UTC(), DurationMS: r.DurationMS,
		Success: r.Success == 1, ExecutionCode: r.Code, ExecutionError: r.Err, ErrorKind: r.Kind, Salt: storedSalt(r.Salt)},
		CreatedTime: time.UnixMilli(r.CreatedMS).UTC()}
	if err := json.Unmarshal([]byte(r.Hooks), &e.Hooks); err != nil {
		return e, fmt.Errorf("stored hooks of %s: %w", r.ExecutionID, err)
	}
	if r.Client != "" {
		e.Client = &schemas.ClientInfo{}
		if err := json.Unmarshal([]byte(r.Client), e.Client); err != nil {
			return e, fmt.Errorf("stored client of %s: %w", r.ExecutionID, err)
		}
	}
	return e, nil
}

// ReadExecPage reads the rows of a list query that asked for limit+1 rows.
func ReadExecPage(rows Rows, limit int) (ExecPage, error) {
	var page ExecPage
	for rows.Next() {
		var r ExecRow
		if err := rows.Scan(r.ScanTargets()...); err != nil {
			return ExecPage{}, fmt.Errorf("scan execution row: %w", err)
		}
		e, err := r.Execution()
		if err != nil {
			return ExecPage{}, err
		}
		page.Items = append(page.Items, e)
	}
	if err := rows.Err(); err != nil {
		return ExecPage{}, fmt.Errorf("read execution rows: %w", err)
	}
	if len(page.Items) > limit {
		page.Items, page.HasMore = page.Items[:limit], true
	}
	return page, nil
}

// HookDecisionJSON is the text that the stored hooks (JSON) of an
// execution contain when one of its hook calls has the decision d of a
// hook_decision search: "decision":"allow" or "deny", or
// "failure_mode_applied":"fail_open" or "fail_closed". Hooks are stored as
// encoding/json writes them (no spaces; a quote inside a string is escaped),
// so the text occurs only as that field.
func HookDecisionJSON(d string) string {
	switch d {
	case "fail_open", "fail_closed":
		return `"failure_mode_applied":"` + d + `"`
	}
	return `"decision":"` + d + `"`
}

// ReadExecFeed reads the rows of an execution feed query (FeedTargets'
// columns), in order.
func ReadExecFeed(rows Rows) ([]Execution, error) {
	var items []Execution
	for rows.Next() {
		var r ExecRow
		if err := rows.Scan(r.FeedTargets()...); err != nil {
			return nil, fmt.Errorf("scan execution row: %w", err)
		}
		e, err := r.Execution()
		if err != nil {
			return nil, err
		}
		e.Stored = schemas.Persisted{Seq: r.Seq, Time: e.CreatedTime}
		items = append(items, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read execution rows: %w", err)
	}
	return items, nil
}
