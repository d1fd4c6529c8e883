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
	listExecutionsSQL string
)

var _ auditstore.ExecutionStore = (*Store)(nil)

// WriteExecutions implements auditstore.ExecutionStore in one transaction.
func (s *Store) WriteExecutions(ctx context.Context, events []schemas.ExecutionEvent) error {
	if len(events) == 0 {
		return nil
	}
	created := s.now().UnixMilli()
	return s.insertAll(ctx, insertExecutionSQL, len(events), func(i int) ([]any, error) {
		row, err := auditstore.NewExecRow(&events[i], created)
		return row.Values(), err
	})
}

// ListExecutions implements auditstore.ExecutionStore.
func (s *Store) ListExecutions(ctx context.Context, q auditstore.ExecQuery) (auditstore.ExecPage, error) {
	if err := q.Validate(); err != nil {
		return auditstore.ExecPage{}, err
	}
	args := []any{sql.Named("org", q.OrgID.String()), sql.Named("limit", q.Limit+1),
		sql.Named("project", nil), sql.Named("success", nil), sql.Named("after_ts", nil), sql.Named("after_id", nil)}
	if q.ProjectID != nil {
		args[2] = sql.Named("project", q.ProjectID.String())
	}
	if q.Success != nil {
		v := 0
		if *q.Success {
			v = 1
		}
		args[3] = sql.Named("success", v)
	}
	if q.After != nil {
		args[4] = sql.Named("after_ts", q.After.Timestamp.UnixMilli())
		args[5] = sql.Named("after_id", q.After.EventID.String())
	}
	rows, err := s.db.QueryContext(ctx, listExecutionsSQL, args...)
	if err != nil {
		return auditstore.ExecPage{}, fmt.Errorf("sqlite list executions: %w", err)
	}
	defer rows.Close()
	return auditstore.ReadExecPage(rows, q.Limit)
}
