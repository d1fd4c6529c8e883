package sqlite

import (
	"context"
	"database/sql"
	_ "embed"
	"fmt"

	"github.com/google/uuid"
)

var (
	//go:embed queries/has_audit.sql
	hasAuditSQL string
	//go:embed queries/has_execution.sql
	hasExecutionSQL string
)

// HasAudit reports whether the audit entry with event id id is stored for
// org (and project, when not nil). A point lookup on the primary key: unlike
// the ClickHouse store, it finds the entry whatever its time.
func (s *Store) HasAudit(ctx context.Context, org uuid.UUID, project *uuid.UUID, id uuid.UUID) (bool, error) {
	return s.has(ctx, hasAuditSQL, org, project, id)
}

// HasExecution reports whether the tool execution with event id id is
// stored for org (and project, when not nil), as HasAudit.
func (s *Store) HasExecution(ctx context.Context, org uuid.UUID, project *uuid.UUID, id uuid.UUID) (bool, error) {
	return s.has(ctx, hasExecutionSQL, org, project, id)
}

func (s *Store) has(ctx context.Context, query string, org uuid.UUID, project *uuid.UUID, id uuid.UUID) (bool, error) {
	var found bool
	err := s.db.QueryRowContext(ctx, query, lookupArgs(org, project, id)...).Scan(&found)
	if err != nil {
		return false, fmt.Errorf("sqlite event lookup: %w", err)
	}
	return found, nil
}

func lookupArgs(org uuid.UUID, project *uuid.UUID, id uuid.UUID) []any {
	return []any{sql.Named("org", org.String()), sql.Named("id", id.String()), sql.Named("project", nullUUID(project))}
}
