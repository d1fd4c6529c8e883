package lifecycle

import (
	"context"
	"fmt"
	"slices"

	"github.com/google/uuid"

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
	for _, kind := range []auditstore.LogKind{auditstore.LogAudit, auditstore.LogExecutions} {
		if !slices.Contains(h.Kinds, settingKind(kind)) {
			continue
		}
		skind := search.Audit
		if kind == auditstore.LogExecutions {
			skind = search.Executions
		}
		q, err := search.Parse(skind, h.Q)
		if err != nil {
			return 0, fmt.Errorf("legal hold %s: %w", h.ID, err)
		}
		err = walk(ctx, st, h.OrgID, kind, q, w, func(e *schemas.AuditEntry) error {
			if audit == nil || audit(e) {
				n++
			}
			return nil
		}, func(x *auditstore.Execution) error {
			if execs == nil || execs(x) {
				n++
			}
			return nil
		})
		if err != nil {
			return 0, err
		}
	}
	return n, nil
}

// walk pages through the entries of org's log of kind that q and w keep,
// newest first, handing each to audit or execs; the first error stops it.
func walk(ctx context.Context, st Lister, org uuid.UUID, kind auditstore.LogKind, q search.Query, w auditstore.Window,
	audit func(*schemas.AuditEntry) error, execs func(*auditstore.Execution) error) error {
	var after *auditstore.Key
	for {
		if kind == auditstore.LogExecutions {
			p, err := st.ListExecutions(ctx, auditstore.ExecQuery{OrgID: org, Search: q, Window: w, After: after, Limit: auditstore.MaxLimit})
			if err != nil {
				return err
			}
			for i := range p.Items {
				if err := execs(&p.Items[i]); err != nil {
					return err
				}
			}
			if after = p.Next(); after == nil {
				return nil
			}
			continue
		}
		p, err := st.ListAudit(ctx, auditstore.Query{OrgID: org, Filter: auditstore.Filter{Search: q, Window: w}, After: after, Limit: auditstore.MaxLimit})
		if err != nil {
			return err
		}
		for i := range p.Items {
			if err := audit(&p.Items[i]); err != nil {
				return err
			}
		}
		if after = p.Next(); after == nil {
			return nil
		}
	}
}
