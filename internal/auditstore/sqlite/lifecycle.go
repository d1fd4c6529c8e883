package sqlite

import (
	"context"
	"database/sql"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"text/template"
	"time"

	"github.com/google/uuid"

	"github.com/auditrail/auditrail/internal/auditstore"
)

var (
	//go:embed queries/lifecycle_count.sql
	lifecycleCountText string
	//go:embed queries/lifecycle_candidates.sql
	lifecycleCandidatesText string
	//go:embed queries/lifecycle_delete.sql
	lifecycleDeleteText string
	//go:embed queries/save_log_expiry.sql
	saveLogExpirySQL string
	//go:embed queries/log_expiry_latest.sql
	logExpiryLatestSQL string
)

// lifecycleSQL are the lifecycle's queries of one table, by log kind.
type lifecycleSQL struct{ count, candidates, delete string }

var lifecycleQueries = func() map[auditstore.LogKind]lifecycleSQL {
	render := func(text, table string) string {
		var b strings.Builder
		template.Must(template.New("").Parse(text)).Execute(&b, struct{ Table string }{table})
		return b.String()
	}
	out := map[auditstore.LogKind]lifecycleSQL{}
	for kind, table := range map[auditstore.LogKind]string{auditstore.LogAudit: "audit_logs", auditstore.LogExecutions: "tool_executions"} {
		out[kind] = lifecycleSQL{render(lifecycleCountText, table), render(lifecycleCandidatesText, table), render(lifecycleDeleteText, table)}
	}
	return out
}()

var _ auditstore.LifecycleStore = (*Store)(nil)

// ExpiryStep is how many entries one step of DeleteExpired deletes in one
// transaction: the single writer is held for a few milliseconds, so that
// ingest goes on while a large expiry runs.
const ExpiryStep = 2000

// ReadLogLeaves implements auditstore.LifecycleStore.
func (s *Store) ReadLogLeaves(ctx context.Context, org uuid.UUID, kind auditstore.LogKind, lo, hi int64) ([]auditstore.LogLeaf, error) {
	if err := auditstore.ValidateLog(org, kind); err != nil {
		return nil, err
	}
	logID, _, _, err := logHead(ctx, s.db, org, kind)
	if err != nil || logID == 0 {
		return nil, err
	}
	return readLeaves(ctx, s.db, logID, lo, hi)
}

func feedKeyArgs(prefix string, k auditstore.FeedKey) []any {
	return []any{sql.Named(prefix+"_seq", int64(k.Seq)), sql.Named(prefix+"_created", k.CreatedMS), sql.Named(prefix+"_id", k.EventID.String())}
}

// CountThrough implements auditstore.LifecycleStore.
func (s *Store) CountThrough(ctx context.Context, org uuid.UUID, kind auditstore.LogKind, last auditstore.FeedKey, cutoffMS int64) (all, before int64, err error) {
	if err := auditstore.ValidateLog(org, kind); err != nil {
		return 0, 0, err
	}
	args := append([]any{sql.Named("org", org.String()), sql.Named("cutoff", cutoffMS)}, feedKeyArgs("last", last)...)
	if err := s.db.QueryRowContext(ctx, lifecycleQueries[kind].count, args...).Scan(&all, &before); err != nil {
		return 0, 0, fmt.Errorf("sqlite count expiring: %w", err)
	}
	return all, before, nil
}

// DeleteExpired implements auditstore.LifecycleStore: steps of ExpiryStep
// entries, each read from the feed index and deleted in a transaction of
// its own.
func (s *Store) DeleteExpired(ctx context.Context, org uuid.UUID, kind auditstore.LogKind, last auditstore.FeedKey, cutoffMS int64, keep map[uuid.UUID]bool) (int64, error) {
	if err := auditstore.ValidateLog(org, kind); err != nil {
		return 0, err
	}
	q := lifecycleQueries[kind]
	var (
		after   auditstore.FeedKey
		deleted int64
	)
	for {
		args := append([]any{sql.Named("org", org.String()), sql.Named("cutoff", cutoffMS), sql.Named("limit", ExpiryStep)},
			append(feedKeyArgs("after", after), feedKeyArgs("last", last)...)...)
		ids, next, n, err := s.expiryStep(ctx, q.candidates, args, keep)
		if err != nil {
			return deleted, err
		}
		if len(ids) > 0 {
			if err := execEachW(ctx, s.wdb, q.delete, len(ids), func(i int) []any { return []any{org.String(), ids[i]} }); err != nil {
				return deleted, fmt.Errorf("sqlite delete expired: %w", err)
			}
			deleted += int64(len(ids))
		}
		if n < ExpiryStep {
			return deleted, nil
		}
		after = next
	}
}

// expiryStep reads one step's candidates: the ids to delete (not kept),
// the key of the last one read and how many were read.
func (s *Store) expiryStep(ctx context.Context, query string, args []any, keep map[uuid.UUID]bool) (ids []string, next auditstore.FeedKey, n int, err error) {
	rows, err := s.db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, next, 0, fmt.Errorf("sqlite expiry candidates: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			seq, created int64
			id           string
		)
		if err := rows.Scan(&seq, &created, &id); err != nil {
			return nil, next, 0, fmt.Errorf("sqlite expiry candidates: %w", err)
		}
		eid, err := uuid.Parse(id)
		if err != nil {
			return nil, next, 0, fmt.Errorf("sqlite expiry candidates: %w", err)
		}
		n++
		next = auditstore.FeedKey{Seq: uint64(seq), CreatedMS: created, EventID: eid}
		if !keep[eid] {
			ids = append(ids, id)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, next, 0, fmt.Errorf("sqlite expiry candidates: %w", err)
	}
	return ids, next, n, nil
}

// execEachW runs the statement query once per row in one transaction of
// the writer.
func execEachW(ctx context.Context, db *sql.DB, query string, n int, row func(i int) []any) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	st, err := tx.PrepareContext(ctx, query)
	if err != nil {
		return err
	}
	defer st.Close()
	for i := range n {
		if _, err := st.ExecContext(ctx, row(i)...); err != nil {
			return classify(err)
		}
	}
	return tx.Commit()
}

// SaveExpiry implements auditstore.LifecycleStore.
func (s *Store) SaveExpiry(ctx context.Context, org uuid.UUID, kind auditstore.LogKind, e auditstore.Expiry) error {
	if err := auditstore.ValidateExpiry(org, kind, e); err != nil {
		return err
	}
	logID, _, _, err := logHead(ctx, s.db, org, kind)
	if err != nil {
		return err
	}
	if logID == 0 {
		return fmt.Errorf("%w: no log of kind %s for organization %s to expire", auditstore.ErrLogConflict, kind, org)
	}
	holds, err := json.Marshal(holdStrings(e.Holds))
	if err != nil {
		return err
	}
	done := 0
	if e.Done {
		done = 1
	}
	if _, err := s.wdb.ExecContext(ctx, saveLogExpirySQL, logID, e.RecordLeaf, e.Record.String(), e.BelowLeaf, int64(e.Last.Seq), e.Last.CreatedMS,
		e.Last.EventID.String(), e.CutoffMS, e.Retention.Milliseconds(), e.Kept, e.Expired, string(holds), e.Time.UnixMilli(), done); err != nil {
		return fmt.Errorf("sqlite save expiry: %w", classify(err))
	}
	return nil
}

func holdStrings(ids []uuid.UUID) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = id.String()
	}
	return out
}

// LatestExpiry implements auditstore.LifecycleStore.
func (s *Store) LatestExpiry(ctx context.Context, org uuid.UUID, kind auditstore.LogKind) (auditstore.Expiry, bool, error) {
	if err := auditstore.ValidateLog(org, kind); err != nil {
		return auditstore.Expiry{}, false, err
	}
	logID, _, _, err := logHead(ctx, s.db, org, kind)
	if err != nil || logID == 0 {
		return auditstore.Expiry{}, false, err
	}
	var (
		e                               auditstore.Expiry
		record, lastID, holds           string
		lastSeq, retentionMS, timeMS, d int64
	)
	err = s.db.QueryRowContext(ctx, logExpiryLatestSQL, logID).Scan(&e.RecordLeaf, &record, &e.BelowLeaf, &lastSeq, &e.Last.CreatedMS, &lastID,
		&e.CutoffMS, &retentionMS, &e.Kept, &e.Expired, &holds, &timeMS, &d)
	if errors.Is(err, sql.ErrNoRows) {
		return auditstore.Expiry{}, false, nil
	}
	if err != nil {
		return auditstore.Expiry{}, false, fmt.Errorf("sqlite latest expiry: %w", err)
	}
	if e.Record, err = uuid.Parse(record); err != nil {
		return auditstore.Expiry{}, false, fmt.Errorf("sqlite latest expiry: %w", err)
	}
	if e.Last.EventID, err = uuid.Parse(lastID); err != nil {
		return auditstore.Expiry{}, false, fmt.Errorf("sqlite latest expiry: %w", err)
	}
	var hs []string
	if err := json.Unmarshal([]byte(holds), &hs); err != nil {
		return auditstore.Expiry{}, false, fmt.Errorf("sqlite latest expiry holds: %w", err)
	}
	for _, h := range hs {
		id, err := uuid.Parse(h)
		if err != nil {
			return auditstore.Expiry{}, false, fmt.Errorf("sqlite latest expiry holds: %w", err)
		}
		e.Holds = append(e.Holds, id)
	}
	e.Last.Seq = uint64(lastSeq)
	e.Retention = time.Duration(retentionMS) * time.Millisecond
	e.Time = time.UnixMilli(timeMS).UTC()
	e.Done = d != 0
	return e, true, nil
}
