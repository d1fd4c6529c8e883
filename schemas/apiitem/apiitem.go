// Package apiitem is an entry as the audit API serves it (the list routes'
// items) and its tamper-evidence leaf, which hashes the JCS of that item:
// what the query service, the sequencer, the delivery role and the
// verifier share.
package apiitem

import (
	"encoding/base64"
	"encoding/json"
	"time"

	"github.com/google/uuid"

	"github.com/auditrail/auditrail/internal/auditstore"
	"github.com/auditrail/auditrail/schemas"
)

// TimeFormat is UTC with milliseconds, as the seed asks.
const TimeFormat = "2006-01-02T15:04:05.000Z"

// Item is an audit log entry as the API returns it: every field of the seed,
// null where absent, enums by name.
type Item struct {
	ID              string          `json:"id"`
	EventID         string          `json:"event_id"`
	Timestamp       string          `json:"timestamp"`
	ClientIP        *string         `json:"client_ip"`
	Action          string          `json:"action"`
	Source          string          `json:"source"`
	DisplayName     string          `json:"display_name"`
	CustomerID      *string         `json:"customer_id"`
	OrganizationID  string          `json:"organization_id"`
	ProjectID       *string         `json:"project_id"`
	PrincipalID     string          `json:"principal_id"`
	UserID          *string         `json:"user_id"`
	PrincipalType   string          `json:"principal_type"`
	ResourceType    *string         `json:"resource_type"`
	ResourceID      *string         `json:"resource_id"`
	ResourceDisplay *string         `json:"resource_display"`
	Data            json.RawMessage `json:"data"`
	CreatedTime     string          `json:"created_time"`
	// Salt is the entry's salt (standard base64 of its 16 bytes), omitted
	// when it has none (stored before salts, or erased): with a salt the
	// leaf is of version 2, which commits to the identifying fields one by
	// one (internal/tlog/commit.go); no leaf covers the salt itself.
	Salt string `json:"salt,omitempty"`
	// LeafIndex is the entry's position in its organization's log (issue
	// 24), null while it is not sequenced; a leaf never includes it.
	LeafIndex *int64 `json:"leaf_index"`
	// Erasure is set on an entry that an erasure rewrote: no leaf covers
	// it (internal/tlog ErasureMember).
	Erasure *Erasure `json:"erasure,omitempty"`
}

// Erasure is an erased entry's erasure and original leaf hash (standard
// base64 of 32 bytes), as internal/tlog.ErasureRef.
type Erasure struct {
	ID       string `json:"id"`
	LeafHash string `json:"leaf_hash"`
	// Fields opens the committed fields of an entry of version 2 (the
	// JSON of internal/tlog.ErasedFields); absent for one of version 1.
	Fields json.RawMessage `json:"fields,omitempty"`
}

// NewItem converts a stored entry.
func NewItem(e *schemas.AuditEntry) Item {
	it := Item{
		ID: e.ID.String(), EventID: e.EventID.String(), Timestamp: FormatTime(e.Timestamp),
		ClientIP: e.ClientIP, Action: e.Action.String(), Source: e.Source.String(), DisplayName: e.DisplayName,
		CustomerID: uuidPtr(e.CustomerID), OrganizationID: e.OrganizationID.String(), ProjectID: uuidPtr(e.ProjectID),
		PrincipalID: e.PrincipalID, UserID: e.UserID, PrincipalType: e.PrincipalType,
		ResourceID: e.ResourceID, ResourceDisplay: e.ResourceDisplay, Data: e.Data, CreatedTime: FormatTime(e.CreatedTime),
		Salt: encodeSalt(e.Salt),
	}
	if e.ResourceType != nil {
		s := e.ResourceType.String()
		it.ResourceType = &s
	}
	return it
}

// FormatTime is t as the API shows times (TimeFormat), written by hand for
// the years of four digits (time.Format, for the others, was an eighth of
// the CPU of each entry's leaf).
func FormatTime(t time.Time) string {
	t = t.UTC()
	y, mo, d := t.Date()
	if y < 0 || y > 9999 {
		return t.Format(TimeFormat)
	}
	h, mi, s := t.Clock()
	var b [len(TimeFormat)]byte
	digits := func(at, n, v int) {
		for i := at + n - 1; i >= at; i-- {
			b[i] = byte('0' + v%10)
			v /= 10
		}
	}
	digits(0, 4, y)
	b[4] = '-'
	digits(5, 2, int(mo))
	b[7] = '-'
	digits(8, 2, d)
	b[10] = 'T'
	digits(11, 2, h)
	b[13] = ':'
	digits(14, 2, mi)
	b[16] = ':'
	digits(17, 2, s)
	b[19] = '.'
	digits(20, 3, t.Nanosecond()/int(time.Millisecond)) // truncated, as Format does
	b[23] = 'Z'
	return string(b[:])
}

// encodeSalt is a salt as items carry it: standard base64, "" for none.
func encodeSalt(salt []byte) string {
	if len(salt) == 0 {
		return ""
	}
	return base64.StdEncoding.EncodeToString(salt)
}

func uuidPtr(u *uuid.UUID) *string {
	if u == nil {
		return nil
	}
	s := u.String()
	return &s
}

// ExecutionItem is a tool execution as the API returns it.
type ExecutionItem struct {
	ExecutionID    string             `json:"execution_id"`
	EventID        string             `json:"event_id"`
	OrganizationID string             `json:"organization_id"`
	ProjectID      *string            `json:"project_id"`
	UserID         string             `json:"user_id"`
	PrincipalID    string             `json:"principal_id"`
	PrincipalType  string             `json:"principal_type"`
	DisplayName    string             `json:"display_name"`
	ClientIP       *string            `json:"client_ip"`
	Tool           schemas.ToolRef    `json:"tool"`
	ToolName       string             `json:"tool_name"`
	StartedAt      string             `json:"started_at"`
	EndedAt        string             `json:"ended_at"`
	DurationMS     float64            `json:"duration_ms"`
	Success        bool               `json:"success"`
	ExecutionCode  string             `json:"execution_code"`
	Error          *ExecutionError    `json:"error"`
	Hooks          []schemas.HookCall `json:"hooks"`
	CreatedTime    string             `json:"created_time"`
	// Client is the program through which the execution was asked (an
	// MCP client's name and version); null through the HTTP API. Added
	// after version 1 of the items: the leaf does not cover it.
	Client *schemas.ClientInfo `json:"client"`
	// Salt: see Item.Salt.
	Salt string `json:"salt,omitempty"`
	// LeafIndex: see Item.LeafIndex.
	LeafIndex *int64 `json:"leaf_index"`
	// Erasure is set on an entry that an erasure rewrote: no leaf covers
	// it (internal/tlog ErasureMember).
	Erasure *Erasure `json:"erasure,omitempty"`
}

// ExecutionError is the error of a failed execution.
type ExecutionError struct {
	Kind    string `json:"kind"`
	Message string `json:"message"`
}

// NewExecutionItem converts a stored execution.
func NewExecutionItem(e *auditstore.Execution) ExecutionItem {
	it := ExecutionItem{ExecutionID: e.ExecutionID, EventID: e.EventID, OrganizationID: e.OrganizationID, UserID: e.UserID,
		PrincipalID: e.PrincipalID, PrincipalType: e.PrincipalType, DisplayName: e.DisplayName,
		Tool: e.Tool, ToolName: e.Tool.Toolkit + "." + e.Tool.Name, StartedAt: FormatTime(e.StartedAt), EndedAt: FormatTime(e.EndedAt),
		DurationMS: e.DurationMS, Success: e.Success, ExecutionCode: e.ExecutionCode, Hooks: e.Hooks, CreatedTime: FormatTime(e.CreatedTime),
		Client: e.Client, Salt: encodeSalt(e.Salt)}
	if e.ProjectID != "" {
		p := e.ProjectID
		it.ProjectID = &p
	}
	if e.ClientIP != "" {
		ip := e.ClientIP
		it.ClientIP = &ip
	}
	if !e.Success {
		it.Error = &ExecutionError{Kind: e.ErrorKind, Message: e.ExecutionError}
	}
	if it.Hooks == nil {
		it.Hooks = []schemas.HookCall{}
	}
	return it
}
