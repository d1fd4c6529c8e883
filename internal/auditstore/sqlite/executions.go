package sqlite

import (
	"context"
	"database/sql"
	_ "embed"
	"fmt"

	"github.com/auditrail/auditrail/internal/auditstore"
	"github.com/auditrail/auditrail/schemas"
)

var (
	//go:embed queries/insert_execution.sql
	insertExecutionSQL string
	//go:embed queries/list_executions.sql
	listExecutionsTemplate string
	listExecutionsSQL      = listTemplate("list_executions.sql", listExecutionsTemplate)
)

var _ auditstore.ExecutionStore = (*Store)(nil)

// WriteExecutions implements auditstore.ExecutionStore in one transaction.
func (s *Store) WriteExecutions(ctx context.Context, events []schemas.ExecutionEvent) error {
	if len(events) == 0 {
		return nil
	}
	now := s.now()
	return s.insertAll(ctx, insertExecutionSQL, len(events), func(i int) ([]any, error) {
		row, err := auditstore.NewExecRow(&events[i], auditstore.CreatedMS(events[i].Stored, now))
		return append(row.Values(), int64(row.Seq)), err
	})
}

// ListExecutions implements auditstore.ExecutionStore.
func (s *Store) ListExecutions(ctx context.Context, q auditstore.ExecQuery) (auditstore.ExecPage, error) {
	if err := q.Validate(); err != nil {
		return auditstore.ExecPage{}, err
	}
	query, args, err := listExecutionsQuery(q)
	if err != nil {
		return auditstore.ExecPage{}, err
	}
	rows, err := s.db.QueryContext(ctx, query, args...)
	if err != nil {
		return auditstore.ExecPage{}, fmt.Errorf("sqlite list executions: %w", err)
	}
	defer rows.Close()
	page, err := auditstore.ReadExecPage(rows, q.Limit)
	if err != nil {
		return auditstore.ExecPage{}, fmt.Errorf("sqlite list executions: %w", err)
	}
	return page, nil
}

// listExecutionsQuery returns the statement and arguments of q.
func listExecutionsQuery(q auditstore.ExecQuery) (string, []any, error) {
	query, args, err := render(listExecutionsSQL, q.ProjectID, q.After, q.Window, q.Search.Terms, "exec_text")
	var success, user any
	if q.Success != nil {
		success = 0
		if *q.Success {
			success = 1
		}
	}
	if q.UserID != nil {
		user = *q.UserID
	}
	args = append(args, sql.Named("org", q.OrgID.String()), sql.Named("success", success), sql.Named("user", user),
		sql.Named("limit", q.Limit+1))
	return query, args, err
}
