package clickhouse

import (
	"context"
	_ "embed"
	"fmt"

	"github.com/google/uuid"

	"github.com/auditrail/auditrail/internal/auditstore"
)

var (
	//go:embed queries/has_audit.sql
	hasAuditSQL string
	//go:embed queries/has_execution.sql
	hasExecutionSQL string
)

// HasAudit reports whether the audit entry with event id id is stored for
// org (and project, when not nil). It looks only in the time window of
// auditstore.LookupWindow (±10 minutes around the time in a UUIDv7 id, else
// the last hour), so that the sort key prunes the read: an entry whose time
// lies outside the window is not found.
func (s *Store) HasAudit(ctx context.Context, org uuid.UUID, project *uuid.UUID, id uuid.UUID) (bool, error) {
	return s.has(ctx, hasAuditSQL, org, project, id)
}

// HasExecution reports whether the tool execution with event id id is
// stored for org (and project, when not nil), with started_at in the
// window of auditstore.LookupWindow, as HasAudit.
func (s *Store) HasExecution(ctx context.Context, org uuid.UUID, project *uuid.UUID, id uuid.UUID) (bool, error) {
	return s.has(ctx, hasExecutionSQL, org, project, id)
}

func (s *Store) has(ctx context.Context, query string, org uuid.UUID, project *uuid.UUID, id uuid.UUID) (bool, error) {
	lo, hi := auditstore.LookupWindow(id, s.now())
	p := ""
	if project != nil {
		p = project.String()
	}
	var n uint64
	if err := s.conn.QueryRow(ctx, query, org.String(), lo, hi, id.String(), p, p).Scan(&n); err != nil {
		return false, fmt.Errorf("clickhouse event lookup: %w", err)
	}
	return n > 0, nil
}
