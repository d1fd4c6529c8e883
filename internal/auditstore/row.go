package auditstore

import (
	"bytes"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/auditrail/auditrail/schemas"
)

// StoredRow is an audit row as both SQL backends store it: UUIDs as
// canonical strings, times as Unix milliseconds, enums as numbers, nullable
// columns as pointers. Scan the columns of ScanTargets in this order.
type StoredRow struct {
	EventID, ID, OrgID                                         string
	TsMS, CreatedMS                                            int64
	Action, Source                                             uint8
	DisplayName, PrincipalID, PrincipalType                    string
	ClientIP, Customer, Project, User, ResID, ResDisplay, Data *string
	ResourceType                                               *uint8
	// Salt is the entry's salt (none: NULL in SQLite, '' in ClickHouse).
	Salt []byte
	// Seq is the feed's sequence, read only by the feed queries (FeedTargets).
	Seq uint64
}

// ScanTargets returns the destinations of the list queries' columns:
// event_id, id, ts_ms, client_ip, action, source, display_name, customer_id,
// organization_id, project_id, principal_id, user_id, principal_type,
// resource_type, resource_id, resource_display, data, created_ms, salt.
func (r *StoredRow) ScanTargets() []any {
	return []any{&r.EventID, &r.ID, &r.TsMS, &r.ClientIP, &r.Action, &r.Source, &r.DisplayName, &r.Customer,
		&r.OrgID, &r.Project, &r.PrincipalID, &r.User, &r.PrincipalType, &r.ResourceType, &r.ResID, &r.ResDisplay, &r.Data, &r.CreatedMS, &r.Salt}
}

// FeedTargets returns the destinations of the feed queries' columns: those
// of ScanTargets, then seq.
func (r *StoredRow) FeedTargets() []any { return append(r.ScanTargets(), &r.Seq) }

// Entry converts the row.
func (r *StoredRow) Entry() (schemas.AuditEntry, error) {
	var e schemas.AuditEntry
	var err error
	if e.EventID, err = parseStored("event_id", r.EventID); err != nil {
		return e, err
	}
	if e.ID, err = parseStored("id", r.ID); err != nil {
		return e, err
	}
	if e.OrganizationID, err = parseStored("organization_id", r.OrgID); err != nil {
		return e, err
	}
	if e.CustomerID, err = parseOptStored("customer_id", r.Customer); err != nil {
		return e, err
	}
	if e.ProjectID, err = parseOptStored("project_id", r.Project); err != nil {
		return e, err
	}
	e.Timestamp = time.UnixMilli(r.TsMS).UTC()
	e.CreatedTime = time.UnixMilli(r.CreatedMS).UTC()
	e.Action, e.Source = schemas.AuditAction(r.Action), schemas.AuditSource(r.Source)
	e.DisplayName, e.PrincipalID, e.PrincipalType = r.DisplayName, r.PrincipalID, r.PrincipalType
	e.ClientIP, e.UserID, e.ResourceID, e.ResourceDisplay = r.ClientIP, r.User, r.ResID, r.ResDisplay
	if r.ResourceType != nil {
		rt := schemas.ResourceType(*r.ResourceType)
		e.ResourceType = &rt
	}
	if r.Data != nil {
		e.Data = []byte(*r.Data)
	}
	e.Salt = storedSalt(r.Salt)
	return e, nil
}

// storedSalt is the salt of a stored row: a copy (the ClickHouse driver
// scans into a view of its block), nil for none.
func storedSalt(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return bytes.Clone(b)
}

// SaltValue is the value of a salt column to write: nil for none (NULL in
// SQLite, an empty String in ClickHouse), else the bytes.
func SaltValue(salt []byte) any {
	if len(salt) == 0 {
		return nil
	}
	return salt
}

func parseStored(field, s string) (uuid.UUID, error) {
	u, err := uuid.Parse(s)
	if err != nil {
		return uuid.Nil, fmt.Errorf("stored %s %q: %w", field, s, err)
	}
	return u, nil
}

func parseOptStored(field string, s *string) (*uuid.UUID, error) {
	if s == nil {
		return nil, nil
	}
	u, err := parseStored(field, *s)
	return &u, err
}

// Rows is the row cursor of both SQL drivers.
type Rows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
}

// ReadPage reads the rows of a list query that asked for limit+1 rows and
// returns the page: at most limit items, HasMore when a further row exists.
func ReadPage(rows Rows, limit int) (Page, error) {
	// A page is usually full: room for it at once, not grown by copies of
	// large entries (an export's page holds 10,000).
	page := Page{Items: make([]schemas.AuditEntry, 0, min(max(limit, 0)+1, MaxLimit+1))}
	for rows.Next() {
		var r StoredRow
		if err := rows.Scan(r.ScanTargets()...); err != nil {
			return Page{}, fmt.Errorf("scan audit row: %w", err)
		}
		e, err := r.Entry()
		if err != nil {
			return Page{}, err
		}
		page.Items = append(page.Items, e)
	}
	if err := rows.Err(); err != nil {
		return Page{}, fmt.Errorf("read audit rows: %w", err)
	}
	if len(page.Items) > limit {
		page.Items, page.HasMore = page.Items[:limit], true
	}
	return page, nil
}

// ReadFeed reads the rows of a feed query (FeedTargets' columns), in order.
func ReadFeed(rows Rows) ([]schemas.AuditEntry, error) {
	var items []schemas.AuditEntry
	for rows.Next() {
		var r StoredRow
		if err := rows.Scan(r.FeedTargets()...); err != nil {
			return nil, fmt.Errorf("scan audit row: %w", err)
		}
		e, err := r.Entry()
		if err != nil {
			return nil, err
		}
		e.Stored = schemas.Persisted{Seq: r.Seq, Time: e.CreatedTime}
		items = append(items, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read audit rows: %w", err)
	}
	return items, nil
}
