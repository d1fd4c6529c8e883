package clickhouse

import (
	"context"
	_ "embed"
	"fmt"
	"math"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/auditrail/auditrail/internal/auditstore"
	"github.com/auditrail/auditrail/schemas"
)

var (
	//go:embed queries/insert_execution.sql
	insertExecutionSQL string
	//go:embed queries/list_executions.sql
	listExecutionsTemplate string
	listExecutionsSQL      = listTemplate("list_executions.sql", listExecutionsTemplate)
	//go:embed queries/execution_hours.sql
	executionHoursSQL string
)

var _ auditstore.ExecutionStore = (*Store)(nil)

// execPredicates says which optional predicates a listing uses, and the
// terms of its search.
type execPredicates struct {
	Project, Success, User, After bool
	Terms                         []chTerm
}

// WriteExecutions implements auditstore.ExecutionStore with one batch insert.
func (s *Store) WriteExecutions(ctx context.Context, events []schemas.ExecutionEvent) error {
	if len(events) == 0 {
		return nil
	}
	rows := make([]indexed, len(events))
	for i := range events {
		rows[i] = indexed{org: events[i].OrganizationID, id: events[i].EventID, ts: events[i].StartedAt.UnixMilli()}
	}
	stored, err := s.storedIDs(ctx, kindExecution, rows)
	if err != nil {
		return err
	}
	fresh, freshRows := make([]schemas.ExecutionEvent, 0, len(events)), make([]indexed, 0, len(events))
	for i := range events {
		if k := rows[i].key(); !stored[k] { // a copy later in the batch is not written either
			stored[k] = true
			fresh, freshRows = append(fresh, events[i]), append(freshRows, rows[i])
		}
	}
	for _, g := range byPartition(len(fresh), func(i int) int64 { return freshRows[i].ts }, maxPartitionsPerInsert-1) {
		part := make([]schemas.ExecutionEvent, len(g))
		for j, i := range g {
			part[j] = fresh[i]
		}
		if err := s.writeExecutionRows(ctx, part); err != nil {
			return err
		}
	}
	return nil // event_index_executions_mv indexes the rows
}

// writeExecutionRows writes events in one batch insert.
func (s *Store) writeExecutionRows(ctx context.Context, events []schemas.ExecutionEvent) error {
	if len(events) == 0 {
		return nil
	}
	batch, err := s.conn.PrepareBatch(ctx, insertExecutionSQL)
	if err != nil {
		return fmt.Errorf("clickhouse prepare batch: %w", err)
	}
	defer batch.Abort()
	if err := s.appendExecutionRows(batch, events); err != nil {
		return err
	}
	if err := batch.Send(); err != nil {
		return fmt.Errorf("clickhouse insert %d executions: %w", len(events), classify(err))
	}
	return nil
}

// appendExecutionRows appends events to batch, row by row.
func (s *Store) appendExecutionRows(batch driver.Batch, events []schemas.ExecutionEvent) error {
	now := s.now()
	for i := range events {
		created := auditstore.CreatedMS(events[i].Stored, now)
		row, err := auditstore.NewExecRow(&events[i], created)
		if err != nil {
			return err
		}
		leaf, err := s.executionLeaf(&row)
		if err != nil {
			return err
		}
		if err := batch.Append(append(row.Values(), uint64(math.MaxInt64-created), row.Seq, leaf)...); err != nil {
			return fmt.Errorf("clickhouse append execution: %w", err)
		}
	}
	return nil
}

// ListExecutions implements auditstore.ExecutionStore. Like ListAudit, it
// scans only the newest hours that hold a page, by the hourly counts of
// execution_hours, widening when filters leave the page short.
func (s *Store) ListExecutions(ctx context.Context, q auditstore.ExecQuery) (auditstore.ExecPage, error) {
	if err := q.Validate(); err != nil {
		return auditstore.ExecPage{}, err
	}
	span, err := s.hourCounts(ctx, execHoursKey(q), q.Unfiltered())
	if err != nil {
		return auditstore.ExecPage{}, err
	}
	items, more, err := pageByHours(span, q.After, q.Window, q.Limit, func(lo, hi int64, limit int) ([]auditstore.Execution, error) {
		return s.listExecWindow(ctx, q, lo, hi, limit)
	})
	return auditstore.ExecPage{Items: items, HasMore: more}, err
}

func execHoursKey(q auditstore.ExecQuery) hoursKey {
	k := hoursKey{query: executionHoursSQL, org: q.OrgID.String()}
	if q.ProjectID != nil {
		k.project = q.ProjectID.String()
	}
	return k
}

// FirstExecWindow returns the time range [lo, hi) that ListExecutions scans
// first for q (for benchmarks that compare with a hand-written query).
func (s *Store) FirstExecWindow(ctx context.Context, q auditstore.ExecQuery) (lo, hi int64, err error) {
	span, err := s.hourCounts(ctx, execHoursKey(q), q.Unfiltered())
	if err != nil {
		return 0, 0, err
	}
	lo, hi = firstWindow(span, q.After, q.Limit)
	return lo, hi, nil
}

// listExecWindow reads up to limit executions of q with lo <= started_ms < hi.
func (s *Store) listExecWindow(ctx context.Context, q auditstore.ExecQuery, lo, hi int64, limit int) ([]auditstore.Execution, error) {
	p := execPredicates{Project: q.ProjectID != nil, Success: q.Success != nil, User: q.UserID != nil, After: q.After != nil}
	var termArgs []any
	p.Terms, termArgs = searchTerms(q.Search.Terms, "exec_text")
	args := []any{q.OrgID.String(), lo, hi, q.OrgID.String(), lo, hi}
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
	if p.User {
		args = append(args, *q.UserID)
	}
	args = append(args, termArgs...)
	if p.After {
		ts := q.After.Timestamp.UnixMilli()
		args = append(args, ts, ts, q.After.EventID.String())
	}
	args = append(args, limit, limit)
	query, err := render(listExecutionsSQL, p, len(args))
	if err != nil {
		return nil, err
	}
	rows, err := s.conn.Query(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("clickhouse list executions: %w", err)
	}
	defer rows.Close()
	// ReadExecPage with limit+1 never trims: the caller counts.
	page, err := auditstore.ReadExecPage(rows, limit+1)
	if err != nil {
		return nil, fmt.Errorf("clickhouse list executions: %w", err)
	}
	return page.Items, nil
}
