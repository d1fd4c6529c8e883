package clickhouse

import (
	"context"
	_ "embed"
	"fmt"
	"math"
	"strings"
	"text/template"

	"github.com/auditrail/auditrail/internal/auditstore"
	"github.com/auditrail/auditrail/schemas"
)

var (
	//go:embed queries/insert_execution.sql
	insertExecutionSQL string
	//go:embed queries/list_executions.sql
	listExecutionsTemplate string
	// listExecutionsSQL holds every rendering of the list query, by predicate set.
	listExecutionsSQL = renderExecQueries()
)

var _ auditstore.ExecutionStore = (*Store)(nil)

type execPredicates struct{ Project, Success, After bool }

func (p execPredicates) index() int {
	i := 0
	for bit, on := range []bool{p.Project, p.Success, p.After} {
		if on {
			i |= 1 << bit
		}
	}
	return i
}

func renderExecQueries() []string {
	tmpl := template.Must(template.New("list_executions.sql").Parse(listExecutionsTemplate))
	out := make([]string, 8)
	for i := range out {
		p := execPredicates{Project: i&1 != 0, Success: i&2 != 0, After: i&4 != 0}
		var b strings.Builder
		if err := tmpl.Execute(&b, p); err != nil {
			panic(err)
		}
		out[p.index()] = b.String()
	}
	return out
}

// WriteExecutions implements auditstore.ExecutionStore with one batch insert.
func (s *Store) WriteExecutions(ctx context.Context, events []schemas.ExecutionEvent) error {
	if len(events) == 0 {
		return nil
	}
	created := s.now().UnixMilli()
	batch, err := s.conn.PrepareBatch(ctx, insertExecutionSQL)
	if err != nil {
		return fmt.Errorf("clickhouse prepare batch: %w", err)
	}
	defer batch.Abort()
	for i := range events {
		row, err := auditstore.NewExecRow(&events[i], created)
		if err != nil {
			return err
		}
		if err := batch.Append(append(row.Values(), uint64(math.MaxInt64-created))...); err != nil {
			return fmt.Errorf("clickhouse append execution: %w", err)
		}
	}
	if err := batch.Send(); err != nil {
		return fmt.Errorf("clickhouse insert %d executions: %w", len(events), err)
	}
	return nil
}

// ListExecutions implements auditstore.ExecutionStore.
func (s *Store) ListExecutions(ctx context.Context, q auditstore.ExecQuery) (auditstore.ExecPage, error) {
	if err := q.Validate(); err != nil {
		return auditstore.ExecPage{}, err
	}
	p := execPredicates{Project: q.ProjectID != nil, Success: q.Success != nil, After: q.After != nil}
	args := []any{q.OrgID.String()}
	if p.Project {
		args = append(args, q.ProjectID.String())
	}
	if p.Success {
		var v uint8
		if *q.Success {
			v = 1
		}
		args = append(args, v)
	}
	if p.After {
		ts := q.After.Timestamp.UnixMilli()
		args = append(args, ts, ts, q.After.EventID.String())
	}
	args = append(args, q.Limit+1)
	rows, err := s.conn.Query(ctx, listExecutionsSQL[p.index()], args...)
	if err != nil {
		return auditstore.ExecPage{}, fmt.Errorf("clickhouse list executions: %w", err)
	}
	defer rows.Close()
	return auditstore.ReadExecPage(rows, q.Limit)
}
