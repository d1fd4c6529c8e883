package lifecycle

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/auditrail/auditrail/controlplane/cpstate"
	"github.com/auditrail/auditrail/internal/auditstore"
	"github.com/auditrail/auditrail/internal/auditstore/search"
	"github.com/auditrail/auditrail/internal/auth"
	"github.com/auditrail/auditrail/internal/tlog"
	"github.com/auditrail/auditrail/schemas"
)

// expire applies the retention in force to one log: it finishes an expiry
// left undone, then plans, records and applies the next one. It returns
// how many entries it deleted.
func (r *Runner) expire(ctx context.Context, org uuid.UUID, kind auditstore.LogKind) (int64, error) {
	var deleted int64
	prev, havePrev, err := r.store.LatestExpiry(ctx, org, kind)
	if err != nil {
		return 0, fmt.Errorf("latest expiry: %w", err)
	}
	if havePrev && !prev.Done {
		n, err := r.apply(ctx, org, kind, prev, 0)
		deleted += n
		if err != nil {
			return deleted, fmt.Errorf("resume the expiry of record %s: %w", prev.Record, err)
		}
		r.log.Info("lifecycle: resumed an expiry", "org", org.String(), "log", LogName(kind), "record", prev.Record.String(), "deleted", n)
	}
	if havePrev {
		// What the newest record kept must still be there: an entry below
		// its horizon deleted by other means than an expiry (by hand) is
		// for the verifier to report, and a new record counting only what
		// is left would hide it. No expiry of this log until then.
		present, _, err := r.store.CountThrough(ctx, org, kind, prev.Last, math.MaxInt64)
		if err != nil {
			return deleted, fmt.Errorf("count the kept entries: %w", err)
		}
		if present < prev.Kept {
			return deleted, fmt.Errorf("%w: the expiry record %s kept %d entries below leaf %d and %d are left: entries were deleted outside retention; no expiry is recorded until they are restored",
				ErrTampered, prev.Record, prev.Kept, prev.BelowLeaf, present)
		}
	}
	setting, err := r.settings.Retention(org)
	if err != nil {
		return deleted, fmt.Errorf("retention setting: %w", err)
	}
	now := r.now()
	keepFor := r.cfg.Bounds.Effective(setting, settingKind(kind), now)
	if keepFor <= 0 {
		return deleted, nil // kept forever
	}
	cutoff := now.Add(-keepFor).UnixMilli()
	size, _, err := r.store.LogHead(ctx, org, kind)
	if err != nil {
		return deleted, fmt.Errorf("log head: %w", err)
	}
	n, err := r.horizon(ctx, org, kind, size, cutoff)
	if err != nil {
		return deleted, err
	}
	if havePrev && n < prev.BelowLeaf {
		n = prev.BelowLeaf // a horizon never moves back (a longer retention keeps what is left)
	}
	if n == 0 {
		return deleted, nil
	}
	last, err := r.leafKey(ctx, org, kind, n-1)
	if err != nil {
		return deleted, err
	}
	holds, err := r.holds(org, kind, nil)
	if err != nil {
		return deleted, err
	}
	keep, err := r.kept(ctx, org, kind, holds, last, cutoff)
	if err != nil {
		return deleted, err
	}
	all, before, err := r.store.CountThrough(ctx, org, kind, last, cutoff)
	if err != nil {
		return deleted, fmt.Errorf("count the expiring entries: %w", err)
	}
	expired := before - int64(len(keep))
	if expired <= 0 {
		return deleted, nil
	}
	plan := auditstore.Expiry{BelowLeaf: n, Last: last, CutoffMS: cutoff, Retention: keepFor,
		Kept: min(all, n) - expired, Expired: expired, Time: auditstore.Millis(now)}
	for _, h := range holds {
		if h.id != uuid.Nil {
			plan.Holds = append(plan.Holds, h.id)
		}
	}
	if err := r.record(ctx, org, kind, &plan); err != nil {
		return deleted, err
	}
	if err := r.store.SaveExpiry(ctx, org, kind, plan); err != nil {
		return deleted, fmt.Errorf("save the expiry: %w", err)
	}
	from := int64(0)
	if havePrev {
		from = prev.BelowLeaf
	}
	n2, err := r.apply(ctx, org, kind, plan, from)
	return deleted + n2, err
}

// horizon is the number of leading leaves of the log persisted before
// cutoff: a binary search over the leaves' created times, which follow
// the leaf order up to the seconds by which concurrent writers interleave
// (an entry persisted after the cutoff below the horizon is not deleted:
// DeleteExpired checks each entry's own time).
func (r *Runner) horizon(ctx context.Context, org uuid.UUID, kind auditstore.LogKind, size, cutoff int64) (int64, error) {
	lo, hi := int64(0), size // leaves below lo are before the cutoff; hi and above are not
	for lo < hi {
		mid := lo + (hi-lo)/2
		ls, err := r.store.ReadLogLeaves(ctx, org, kind, mid, mid+1)
		if err != nil {
			return 0, fmt.Errorf("read leaf %d: %w", mid, err)
		}
		if len(ls) != 1 {
			return 0, fmt.Errorf("read leaf %d: the log of %d leaves has none there", mid, size)
		}
		if ls[0].Key.CreatedMS < cutoff {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo, nil
}

func (r *Runner) leafKey(ctx context.Context, org uuid.UUID, kind auditstore.LogKind, i int64) (auditstore.FeedKey, error) {
	ls, err := r.store.ReadLogLeaves(ctx, org, kind, i, i+1)
	if err != nil {
		return auditstore.FeedKey{}, fmt.Errorf("read leaf %d: %w", i, err)
	}
	if len(ls) != 1 {
		return auditstore.FeedKey{}, fmt.Errorf("read leaf %d: missing", i)
	}
	return ls[0].Key, nil
}

// keeper is one set of entries kept: a legal hold's (id set), or the
// lifecycle records themselves (id nil).
type keeper struct {
	id     uuid.UUID
	q      search.Query
	window auditstore.Window
}

// holds returns what keeps entries of the log: the organization's active
// legal holds that apply to it, those of ids (active or released: an
// expiry being resumed keeps what its record kept), and, in the audit
// log, the newest expiry records of both logs (the verifier needs them
// while they are the newest).
func (r *Runner) holds(org uuid.UUID, kind auditstore.LogKind, ids []uuid.UUID) ([]keeper, error) {
	all, err := r.settings.LegalHolds(org)
	if err != nil {
		return nil, fmt.Errorf("legal holds: %w", err)
	}
	skind := search.Audit
	if kind == auditstore.LogExecutions {
		skind = search.Executions
	}
	var out []keeper
	for _, h := range all {
		if !h.Active() && !slices.Contains(ids, h.ID) {
			continue
		}
		if !slices.Contains(h.Kinds, settingKind(kind)) {
			continue
		}
		q, err := search.Parse(skind, h.Q)
		if err != nil {
			return nil, fmt.Errorf("legal hold %s: %w", h.ID, err)
		}
		out = append(out, keeper{id: h.ID, q: q, window: auditstore.Window{Since: h.Since, Until: h.Until}})
	}
	return out, nil
}

// kept returns the entries of the log that the keepers keep among those
// an expiry through last and before cutoff would delete.
func (r *Runner) kept(ctx context.Context, org uuid.UUID, kind auditstore.LogKind, keepers []keeper, last auditstore.FeedKey, cutoff int64) (map[uuid.UUID]bool, error) {
	keep := map[uuid.UUID]bool{}
	add := func(id uuid.UUID, k auditstore.FeedKey) error {
		if k.CreatedMS >= cutoff || last.Less(k) {
			return nil
		}
		keep[id] = true
		if len(keep) > r.cfg.MaxHeld {
			return fmt.Errorf("legal holds keep more than %d entries below one expiry", r.cfg.MaxHeld)
		}
		return nil
	}
	if kind == auditstore.LogAudit {
		// The records themselves (expiries and erasures) never expire: the
		// verifier needs the newest expiry record of each log and every
		// erasure record of the entries left, and a record is a few
		// hundred bytes without personal data. (The newest alone would not do: the
		// record a cycle protects at planning is no longer the newest when
		// the cycle applies its own.)
		keepers = append(keepers, keeper{q: recordSearch})
	}
	for _, h := range keepers {
		err := walk(ctx, r.store, org, kind, h.q, h.window, func(e *schemas.AuditEntry) error {
			return add(e.EventID, auditstore.AuditFeedKey(e))
		}, func(x *auditstore.Execution) error {
			id, err := uuid.Parse(x.EventID)
			if err != nil {
				return err
			}
			return add(id, auditstore.ExecFeedKey(x))
		})
		if err != nil {
			return nil, fmt.Errorf("legal hold %s: %w", h.id, err)
		}
	}
	return keep, nil
}

// recordSearch finds the lifecycle records in an audit log.
var recordSearch = func() search.Query {
	q, err := search.Parse(search.Audit, search.KeyPrincipalType+":"+auth.TypeSystem+" "+search.KeyActor+":"+recordPrincipal)
	if err != nil {
		panic(err)
	}
	return q
}()

// The records' resource and principal.
const (
	recordResource  = "retention"
	recordPrincipal = "auditrail-lifecycle"
)

// recordNamespace names the records' event ids: one expiry (organization,
// log, horizon, kept) has one record, however often a crashed cycle
// publishes it again.
var recordNamespace = uuid.MustParse("5b0f6a8e-3f3c-4c55-9a4e-6c1f0e7d2a11")

// record publishes the expiry's record in the organization's audit log and
// waits until a signed checkpoint covers it; it sets plan.Record and
// plan.RecordLeaf.
func (r *Runner) record(ctx context.Context, org uuid.UUID, kind auditstore.LogKind, plan *auditstore.Expiry) error {
	rec := tlog.LifecycleRecord{Type: tlog.RecordExpiry, Log: LogName(kind), BelowLeaf: plan.BelowLeaf, Kept: plan.Kept, Expired: plan.Expired,
		Retention: cpstate.FormatRetention(plan.Retention), Cutoff: time.UnixMilli(plan.CutoffMS).UTC(), Holds: []string{}}
	for _, h := range plan.Holds {
		rec.Holds = append(rec.Holds, h.String())
	}
	data, err := json.Marshal(map[string]any{tlog.LifecycleMember: rec})
	if err != nil {
		return err
	}
	id := uuid.NewSHA1(recordNamespace, fmt.Appendf(nil, "%s/%d/%d/%d", org, kind, plan.BelowLeaf, plan.Kept))
	rt := schemas.ResourceTypeSetting
	ev := &schemas.AuditEvent{EventID: id, Timestamp: plan.Time, Action: schemas.AuditActionDeleted, Source: schemas.AuditSourceSystem,
		DisplayName: "auditrail retention", OrganizationID: org, PrincipalID: recordPrincipal, PrincipalType: auth.TypeSystem,
		ResourceType: &rt, ResourceID: schemas.Ptr(recordResource), ResourceDisplay: schemas.Ptr("retention of " + LogName(kind)), Data: data}
	if err := ev.Validate(); err != nil {
		return fmt.Errorf("expiry record: %w", err)
	}
	if err := r.pub.Publish(ctx, ev); err != nil {
		return fmt.Errorf("publish the expiry record: %w", err)
	}
	leaf, err := r.awaitSigned(ctx, org, id)
	if err != nil {
		return err
	}
	plan.Record, plan.RecordLeaf = id, leaf
	return nil
}

// awaitSigned waits until the record id is a leaf of the organization's
// audit log and a signed checkpoint covers it, and returns its leaf.
func (r *Runner) awaitSigned(ctx context.Context, org, id uuid.UUID) (int64, error) {
	wctx, cancel := context.WithTimeout(ctx, r.cfg.RecordWait)
	defer cancel()
	leaf := int64(-1)
	for {
		if leaf < 0 {
			idx, err := r.store.LeafIndexes(wctx, org, auditstore.LogAudit, []uuid.UUID{id})
			if err != nil && wctx.Err() == nil {
				return 0, fmt.Errorf("find the record in the log: %w", err)
			}
			if i, ok := idx[id]; ok {
				leaf = i
			}
		}
		if leaf >= 0 {
			cp, ok, err := r.store.LatestCheckpoint(wctx, org, auditstore.LogAudit)
			if err != nil && wctx.Err() == nil {
				return 0, fmt.Errorf("checkpoint of the record: %w", err)
			}
			if ok && cp.Size > leaf {
				return leaf, nil
			}
		}
		select {
		case <-wctx.Done():
			if ctx.Err() != nil {
				return 0, ctx.Err()
			}
			if leaf < 0 {
				return 0, fmt.Errorf("the record %s was not sequenced within %s (is the tlog role running?)", id, r.cfg.RecordWait)
			}
			return 0, fmt.Errorf("no signed checkpoint covered the record %s (leaf %d) within %s", id, leaf, r.cfg.RecordWait)
		case <-time.After(r.cfg.Poll):
		}
	}
}

// apply deletes what a saved expiry authorises, purges the streams and
// marks it done. The leaves below from are gone already (a previous
// expiry's): the deletion steps (Config.DeleteStep leaves each) start
// there.
func (r *Runner) apply(ctx context.Context, org uuid.UUID, kind auditstore.LogKind, plan auditstore.Expiry, from int64) (int64, error) {
	holds, err := r.holds(org, kind, plan.Holds)
	if err != nil {
		return 0, err
	}
	keep, err := r.kept(ctx, org, kind, holds, plan.Last, plan.CutoffMS)
	if err != nil {
		return 0, err
	}
	var n int64
	for end := min(from, plan.BelowLeaf) + r.cfg.DeleteStep; ; end += r.cfg.DeleteStep {
		last := plan.Last
		if end < plan.BelowLeaf {
			if last, err = r.leafKey(ctx, org, kind, end-1); err != nil {
				return n, err
			}
		}
		d, err := r.store.DeleteExpired(ctx, org, kind, last, plan.CutoffMS, keep)
		n += d
		if err != nil {
			return n, fmt.Errorf("delete through leaf %d: %w", min(end, plan.BelowLeaf)-1, err)
		}
		if end >= plan.BelowLeaf {
			break
		}
		r.log.Info("lifecycle: expiry in progress", "org", org.String(), "log", LogName(kind), "through_leaf", end-1, "below_leaf", plan.BelowLeaf, "deleted", n)
	}
	if r.streams != nil {
		sk := schemas.KindAudit
		if kind == auditstore.LogExecutions {
			sk = schemas.KindExecution
		}
		if plan.Last.Seq > 0 {
			if err := r.streams.PurgeThrough(ctx, schemas.EventSubject(org.String(), sk), plan.Last.Seq); err != nil {
				return n, fmt.Errorf("purge the event stream: %w", err)
			}
		}
		if err := r.streams.PurgeBefore(ctx, schemas.DLQSubject(schemas.EventSubject(org.String(), sk)), time.UnixMilli(plan.CutoffMS)); err != nil {
			return n, fmt.Errorf("purge the dead-letter stream: %w", err)
		}
	}
	plan.Done = true
	if err := r.store.SaveExpiry(ctx, org, kind, plan); err != nil {
		return n, fmt.Errorf("save the expiry done: %w", err)
	}
	return n, nil
}
