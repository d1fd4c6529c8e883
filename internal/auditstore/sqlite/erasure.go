package sqlite

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/google/uuid"

	"github.com/auditrail/auditrail/internal/auditstore"
)

var (
	//go:embed queries/save_entry_erasure.sql
	saveEntryErasureSQL string
	//go:embed queries/entry_erasures.sql
	entryErasuresText string
)

var _ auditstore.ErasureStore = (*Store)(nil)

// RewriteEntries implements auditstore.ErasureStore: one transaction.
// The statements name only erasable columns (checked), sorted, so that
// equal shapes share a statement.
func (s *Store) RewriteEntries(ctx context.Context, org uuid.UUID, kind auditstore.LogKind, rewrites []auditstore.Rewrite) error {
	if err := auditstore.ValidateRewrites(org, kind, rewrites); err != nil {
		return err
	}
	table := "audit_logs"
	if kind == auditstore.LogExecutions {
		table = "tool_executions"
	}
	tx, err := s.wdb.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	for _, r := range rewrites {
		if len(r.Set) > 0 {
			cols := make([]string, 0, len(r.Set))
			for c := range r.Set {
				cols = append(cols, c)
			}
			slices.Sort(cols)
			var sets []string
			var args []any
			for _, c := range cols {
				sets = append(sets, c+" = ?")
				v := r.Set[c]
				switch {
				case c == auditstore.SaltColumn: // cleared (ValidateRewrites)
					args = append(args, nil)
				case v != nil:
					args = append(args, *v)
				case kind == auditstore.LogExecutions || c == "display_name" || c == "principal_id":
					args = append(args, "")
				default:
					args = append(args, nil)
				}
			}
			args = append(args, org.String(), r.EventID.String())
			q := "UPDATE " + table + " SET " + strings.Join(sets, ", ") + " WHERE organization_id = ? AND event_id = ?"
			if _, err := tx.ExecContext(ctx, q, args...); err != nil {
				return fmt.Errorf("sqlite rewrite %s: %w", r.EventID, classify(err))
			}
		}
		if _, err := tx.ExecContext(ctx, saveEntryErasureSQL, org.String(), int64(kind), r.EventID.String(), r.Erasure.String(), r.LeafHash[:], string(r.Fields)); err != nil {
			return fmt.Errorf("sqlite keep the erasure of %s: %w", r.EventID, classify(err))
		}
	}
	return tx.Commit()
}

// ErasedEntries implements auditstore.ErasureStore.
func (s *Store) ErasedEntries(ctx context.Context, org uuid.UUID, kind auditstore.LogKind, ids []uuid.UUID) (map[uuid.UUID]auditstore.ErasedEntry, error) {
	if err := auditstore.ValidateLog(org, kind); err != nil {
		return nil, err
	}
	out := map[uuid.UUID]auditstore.ErasedEntry{}
	for lo := 0; lo < len(ids); lo += 500 {
		chunk := ids[lo:min(lo+500, len(ids))]
		args := []any{org.String(), int64(kind)}
		for _, id := range chunk {
			args = append(args, id.String())
		}
		q := strings.Replace(entryErasuresText, "{{.}}", strings.TrimSuffix(strings.Repeat("?, ", len(chunk)), ", "), 1)
		rows, err := s.db.QueryContext(ctx, q, args...)
		if err != nil {
			return nil, fmt.Errorf("sqlite erased entries: %w", err)
		}
		for rows.Next() {
			var id, erasure, fields string
			var leaf []byte
			if err := rows.Scan(&id, &erasure, &leaf, &fields); err != nil {
				rows.Close()
				return nil, fmt.Errorf("sqlite erased entries: %w", err)
			}
			eid, err1 := uuid.Parse(id)
			er, err2 := uuid.Parse(erasure)
			if err1 != nil || err2 != nil || len(leaf) != 32 {
				rows.Close()
				return nil, fmt.Errorf("sqlite erased entries: a malformed row of %s", id)
			}
			e := auditstore.ErasedEntry{Erasure: er}
			copy(e.LeafHash[:], leaf)
			if fields != "" {
				e.Fields = json.RawMessage(fields)
			}
			out[eid] = e
		}
		if err := rows.Err(); err != nil {
			rows.Close()
			return nil, fmt.Errorf("sqlite erased entries: %w", err)
		}
		rows.Close()
	}
	return out, nil
}
