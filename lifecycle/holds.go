package lifecycle

import (
	"context"
	"fmt"
	"slices"

	"github.com/auditrail/auditrail/controlplane/cpstate"
	"github.com/auditrail/auditrail/internal/auditstore"
	"github.com/auditrail/auditrail/internal/auditstore/search"
	"github.com/auditrail/auditrail/schemas"
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
	return HeldOf(ctx, c.Store, h, nil, nil)
}

// HeldOf counts the entries h holds that match (nil: every one).
func HeldOf(ctx context.Context, st Lister, h cpstate.LegalHold, audit func(*schemas.AuditEntry) bool, execs func(*auditstore.Execution) bool) (int64, error) {
	var n int64
	w := auditstore.Window{Since: h.Since, Until: h.Until}
	if slices.Contains(h.Kinds, cpstate.RetentionAuditLogs) {
		q, err := search.Parse(search.Audit, h.Q)
		if err != nil {
			return 0, fmt.Errorf("legal hold %s: %w", h.ID, err)
		}
		var after *auditstore.Key
		for {
			p, err := st.ListAudit(ctx, auditstore.Query{OrgID: h.OrgID, Filter: auditstore.Filter{Search: q, Window: w}, After: after, Limit: auditstore.MaxLimit})
			if err != nil {
				return 0, err
			}
			for i := range p.Items {
				if audit == nil || audit(&p.Items[i]) {
					n++
				}
			}
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
			p, err := st.ListExecutions(ctx, auditstore.ExecQuery{OrgID: h.OrgID, Search: q, Window: w, After: after, Limit: auditstore.MaxLimit})
			if err != nil {
				return 0, err
			}
			for i := range p.Items {
				if execs == nil || execs(&p.Items[i]) {
					n++
				}
			}
			if after = p.Next(); after == nil {
				break
			}
		}
	}
	return n, nil
}
