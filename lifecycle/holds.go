package lifecycle

import (
	"context"
	"fmt"
	"slices"

	"github.com/auditrail/auditrail/controlplane/cpstate"
	"github.com/auditrail/auditrail/internal/auditstore"
	"github.com/auditrail/auditrail/internal/auditstore/search"
)

// Lister lists entries (the audit store).
type Lister interface {
	ListAudit(ctx context.Context, q auditstore.Query) (auditstore.Page, error)
	ListExecutions(ctx context.Context, q auditstore.ExecQuery) (auditstore.ExecPage, error)
}

// HoldCounter counts what a legal hold holds now: the entries of each log
// it applies to that match its search and window (the admin API's
// `held`).
type HoldCounter struct{ Store Lister }

// CountHeld counts the entries h holds, page by page (the caller bounds
// the time).
func (c HoldCounter) CountHeld(ctx context.Context, h cpstate.LegalHold) (int64, error) {
	var n int64
	w := auditstore.Window{Since: h.Since, Until: h.Until}
	if slices.Contains(h.Kinds, cpstate.RetentionAuditLogs) {
		q, err := search.Parse(search.Audit, h.Q)
		if err != nil {
			return 0, fmt.Errorf("legal hold %s: %w", h.ID, err)
		}
		var after *auditstore.Key
		for {
			p, err := c.Store.ListAudit(ctx, auditstore.Query{OrgID: h.OrgID, Filter: auditstore.Filter{Search: q, Window: w}, After: after, Limit: auditstore.MaxLimit})
			if err != nil {
				return 0, err
			}
			n += int64(len(p.Items))
			if after = p.Next(); after == nil {
				break
			}
		}
	}
	if slices.Contains(h.Kinds, cpstate.RetentionToolExecutions) {
		q, err := search.Parse(search.Executions, h.Q)
		if err != nil {
			return 0, fmt.Errorf("legal hold %s: %w", h.ID, err)
		}
		var after *auditstore.Key
		for {
			p, err := c.Store.ListExecutions(ctx, auditstore.ExecQuery{OrgID: h.OrgID, Search: q, Window: w, After: after, Limit: auditstore.MaxLimit})
			if err != nil {
				return 0, err
			}
			n += int64(len(p.Items))
			if after = p.Next(); after == nil {
				break
			}
		}
	}
	return n, nil
}
