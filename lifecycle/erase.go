package lifecycle

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/auditrail/auditrail/controlplane/cpstate"
	"github.com/auditrail/auditrail/internal/auditstore"
	"github.com/auditrail/auditrail/internal/auth"
	"github.com/auditrail/auditrail/internal/tlog"
	"github.com/auditrail/auditrail/schemas"
)

// An erasure replaces every value that identifies one person (a user id
// or a principal id) in an organization's two logs by the erasure's
// pseudonym. An entry is the subject's when the subject is its actor
// (user_id or principal_id), its resource (resource_id), or appears in its
// data (audit) or error (executions); then its actor fields (display_name,
// user_id, principal_id, client_ip) when it is the actor, its resource
// fields (resource_id, resource_display) when it is the resource, and
// every occurrence in data or the error of the subject's value and of the
// names it went by (its display names as actor, its resource displays)
// are replaced. As with an expiry, the records naming the leaves of the
// entries come first, signed in a checkpoint; then the entries are
// rewritten, each keeping its original leaf hash; then their messages
// leave the event stream and the dead-letter stream. Only entries already
// in the log are erased: newer ones wait for the next cycle (the erasure
// stays pending).

// Erasures are the pending erasures and where their progress goes (the
// control-plane state).
type Erasures interface {
	// Pending lists the pending erasures of every organization.
	Pending() ([]cpstate.Erasure, error)
	// Update stores the erasure's status, message and counts.
	Update(ctx context.Context, e cpstate.Erasure) error
}

// EraseStore is what an erasure needs of the store beside Store.
type EraseStore interface {
	auditstore.ErasureStore
	FeedAudit(ctx context.Context, q auditstore.FeedQuery) (auditstore.FeedPage, error)
	FeedExecutions(ctx context.Context, q auditstore.ExecFeedQuery) (auditstore.ExecFeedPage, error)
	ReadLogHashes(ctx context.Context, org uuid.UUID, kind auditstore.LogKind, indexes []int64) ([][32]byte, error)
}

// Outbox is the control plane's outbox: the events it has committed and
// not yet seen stored (published within a second, normally).
type Outbox interface {
	// PendingPayloads returns the pending events' messages.
	PendingPayloads() [][]byte
}

// MessageEraser deletes messages of the streams.
type MessageEraser interface {
	// EraseMessages deletes the messages of subject (a filter) in stream
	// that match, and returns how many.
	EraseMessages(ctx context.Context, stream, subject string, match func(msgID string, data []byte) bool) (int, error)
}

// minNeedle is the shortest name replaced inside data: shorter ones would
// rewrite unrelated text.
const minNeedle = 3

// subject is an erasure's subject and the values it went by.
type subject struct {
	kind, value string
	needles     []string // value and names, longest first
	pseudonym   string
}

func (s *subject) isActor(userID *string, principalID string) bool {
	if principalID == s.value {
		return true
	}
	return s.kind == cpstate.ErasureUserID && userID != nil && *userID == s.value
}

// replace replaces every needle in text.
func (s *subject) replace(text string) (string, bool) {
	out := text
	for _, n := range s.needles {
		out = strings.ReplaceAll(out, n, s.pseudonym)
	}
	return out, out != text
}

// replaceJSON replaces the needles in every string (and member name) of a
// JSON document.
func (s *subject) replaceJSON(doc json.RawMessage) (string, bool, error) {
	if len(doc) == 0 {
		return "", false, nil
	}
	contains := false
	for _, n := range s.needles {
		if bytes.Contains(doc, []byte(n)) {
			contains = true
			break
		}
	}
	if !contains {
		return "", false, nil
	}
	var v any
	if err := json.Unmarshal(doc, &v); err != nil {
		return "", false, err
	}
	v = s.walk(v)
	b, err := json.Marshal(v)
	if err != nil {
		return "", false, err
	}
	return string(b), string(b) != string(doc), nil
}

func (s *subject) walk(v any) any {
	switch x := v.(type) {
	case string:
		r, _ := s.replace(x)
		return r
	case []any:
		for i := range x {
			x[i] = s.walk(x[i])
		}
		return x
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			nk, _ := s.replace(k)
			out[nk] = s.walk(e)
		}
		return out
	}
	return v
}

// auditRewrite is the rewrite of an audit entry of the subject (nil: not
// the subject's).
func (s *subject) auditRewrite(e *schemas.AuditEntry) (map[string]*string, error) {
	set := map[string]*string{}
	p := &s.pseudonym
	if s.isActor(e.UserID, e.PrincipalID) {
		set["display_name"], set["principal_id"] = p, p
		if e.UserID != nil {
			set["user_id"] = p
		}
		if e.ClientIP != nil {
			set["client_ip"] = p
		}
	}
	if e.ResourceID != nil && *e.ResourceID == s.value {
		set["resource_id"] = p
		if e.ResourceDisplay != nil {
			set["resource_display"] = p
		}
	}
	data, changed, err := s.replaceJSON(e.Data)
	if err != nil {
		return nil, fmt.Errorf("entry %s: data: %w", e.EventID, err)
	}
	if changed {
		set["data"] = &data
	}
	if e.ResourceDisplay != nil && set["resource_display"] == nil {
		if r, ok := s.replace(*e.ResourceDisplay); ok && len(set) > 0 {
			set["resource_display"] = &r
		}
	}
	if len(set) == 0 {
		return nil, nil
	}
	return set, nil
}

// execRewrite is the rewrite of an execution of the subject.
func (s *subject) execRewrite(x *auditstore.Execution) map[string]*string {
	set := map[string]*string{}
	p := &s.pseudonym
	uid := x.UserID
	if s.isActor(&uid, x.PrincipalID) {
		set["display_name"], set["user_id"], set["principal_id"] = p, p, p
		if x.ClientIP != "" {
			set["client_ip"] = p
		}
	}
	if r, ok := s.replace(x.ExecutionError); ok {
		set["execution_error"] = &r
	}
	if len(set) == 0 {
		return nil
	}
	return set
}

// feedAll walks a log's feed, a page at a time.
func feedAll(ctx context.Context, st EraseStore, org uuid.UUID, kind auditstore.LogKind,
	audit func([]schemas.AuditEntry) error, execs func([]auditstore.Execution) error) error {
	var after auditstore.FeedKey
	for {
		if kind == auditstore.LogAudit {
			p, err := st.FeedAudit(ctx, auditstore.FeedQuery{OrgID: org, After: after, Upto: math.MaxInt64, Limit: auditstore.FeedMaxLimit})
			if err != nil {
				return err
			}
			if err := audit(p.Items); err != nil {
				return err
			}
			if !p.HasMore || p.Next == after {
				return nil
			}
			after = p.Next
			continue
		}
		p, err := st.FeedExecutions(ctx, auditstore.ExecFeedQuery{OrgID: org, After: after, Upto: math.MaxInt64, Limit: auditstore.FeedMaxLimit})
		if err != nil {
			return err
		}
		if err := execs(p.Items); err != nil {
			return err
		}
		if !p.HasMore || p.Next == after {
			return nil
		}
		after = p.Next
	}
}

// names collects the names the subject went by: its display names as
// actor, its resource displays.
func (r *Runner) names(ctx context.Context, st EraseStore, s *subject, org uuid.UUID) error {
	seen := map[string]bool{s.value: true}
	add := func(n string) {
		if len(n) >= minNeedle && n != s.pseudonym && !seen[n] {
			seen[n] = true
			s.needles = append(s.needles, n)
		}
	}
	for _, kind := range []auditstore.LogKind{auditstore.LogAudit, auditstore.LogExecutions} {
		err := feedAll(ctx, st, org, kind, func(es []schemas.AuditEntry) error {
			for i := range es {
				e := &es[i]
				if s.isActor(e.UserID, e.PrincipalID) {
					add(e.DisplayName)
				}
				if e.ResourceID != nil && *e.ResourceID == s.value && e.ResourceDisplay != nil {
					add(*e.ResourceDisplay)
				}
			}
			return nil
		}, func(xs []auditstore.Execution) error {
			for i := range xs {
				uid := xs[i].UserID
				if s.isActor(&uid, xs[i].PrincipalID) {
					add(xs[i].DisplayName)
				}
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("read the %s: %w", LogName(kind), err)
		}
	}
	sort.SliceStable(s.needles, func(i, j int) bool { return len(s.needles[i]) > len(s.needles[j]) })
	return nil
}

// planned is one log's rewrites of an erasure.
type planned struct {
	kind     auditstore.LogKind
	rewrites []auditstore.Rewrite
	leaves   []int64
	fields   []string
	waiting  int // entries of the subject not in the log yet
}

// plan finds the subject's entries of one log and their leaves.
func (r *Runner) plan(ctx context.Context, st EraseStore, s *subject, e cpstate.Erasure, kind auditstore.LogKind) (planned, error) {
	pl := planned{kind: kind}
	fields := map[string]bool{}
	var ids []uuid.UUID
	var sets []map[string]*string
	var opened []json.RawMessage
	// prevFields are the fields of the earlier erasures of the page's
	// unsalted entries among ids[from:] (erased before: opened again).
	prevFields := func(from int, salted func(i int) bool) (map[uuid.UUID]auditstore.ErasedEntry, error) {
		var again []uuid.UUID
		for i := from; i < len(ids); i++ {
			if !salted(i - from) {
				again = append(again, ids[i])
			}
		}
		if len(again) == 0 {
			return nil, nil
		}
		return st.ErasedEntries(ctx, e.OrgID, kind, again)
	}
	err := feedAll(ctx, st, e.OrgID, kind, func(es []schemas.AuditEntry) error {
		from := len(ids)
		var page []*schemas.AuditEntry
		for i := range es {
			set, err := s.auditRewrite(&es[i])
			if err != nil {
				return err
			}
			if set != nil {
				ids, sets, page = append(ids, es[i].EventID), append(sets, set), append(page, &es[i])
			}
		}
		prev, err := prevFields(from, func(i int) bool { return len(page[i].Salt) > 0 })
		if err != nil {
			return fmt.Errorf("earlier erasures: %w", err)
		}
		for i, en := range page {
			f, err := auditFields(en, sets[from+i], prev[en.EventID].Fields)
			if err != nil {
				return fmt.Errorf("entry %s: its fields: %w", en.EventID, err)
			}
			opened = append(opened, f)
		}
		return nil
	}, func(xs []auditstore.Execution) error {
		from := len(ids)
		var page []*auditstore.Execution
		for i := range xs {
			if set := s.execRewrite(&xs[i]); set != nil {
				id, err := uuid.Parse(xs[i].EventID)
				if err != nil {
					return err
				}
				ids, sets, page = append(ids, id), append(sets, set), append(page, &xs[i])
			}
		}
		prev, err := prevFields(from, func(i int) bool { return len(page[i].Salt) > 0 })
		if err != nil {
			return fmt.Errorf("earlier erasures: %w", err)
		}
		for i, x := range page {
			f, err := executionFields(x, sets[from+i], prev[ids[from+i]].Fields)
			if err != nil {
				return fmt.Errorf("execution %s: its fields: %w", x.EventID, err)
			}
			opened = append(opened, f)
		}
		return nil
	})
	if err != nil {
		return pl, fmt.Errorf("read the %s: %w", LogName(kind), err)
	}
	for lo := 0; lo < len(ids); lo += auditstore.MaxLimit {
		chunk := ids[lo:min(lo+auditstore.MaxLimit, len(ids))]
		idx, err := r.store.LeafIndexes(ctx, e.OrgID, kind, chunk)
		if err != nil {
			return pl, fmt.Errorf("leaf indexes: %w", err)
		}
		var leaves []int64
		var pick []int
		for i, id := range chunk {
			x, ok := idx[id]
			if !ok {
				pl.waiting++
				continue
			}
			leaves, pick = append(leaves, x), append(pick, lo+i)
		}
		hidx := make([]int64, len(leaves))
		for i, x := range leaves {
			hidx[i] = tlog.StoredHashIndex(x)
		}
		hs, err := st.ReadLogHashes(ctx, e.OrgID, kind, hidx)
		if err != nil {
			return pl, fmt.Errorf("leaf hashes: %w", err)
		}
		for i, k := range pick {
			if opened[k] != nil {
				// The salt is forgotten: the fields are opened instead.
				sets[k][auditstore.SaltColumn] = nil
			}
			pl.rewrites = append(pl.rewrites, auditstore.Rewrite{EventID: ids[k], Set: sets[k], Erasure: e.ID, LeafHash: hs[i], Fields: opened[k]})
			pl.leaves = append(pl.leaves, leaves[i])
			for f := range sets[k] {
				if f != auditstore.SaltColumn {
					fields[f] = true
				}
			}
		}
	}
	for f := range fields {
		pl.fields = append(pl.fields, f)
	}
	slices.Sort(pl.fields)
	return pl, nil
}

// ranges turns sorted leaf indexes into ranges.
func ranges(leaves []int64) [][2]int64 {
	s := slices.Clone(leaves)
	slices.Sort(s)
	var out [][2]int64
	for _, x := range s {
		if n := len(out); n > 0 && out[n-1][1]+1 >= x {
			out[n-1][1] = max(out[n-1][1], x)
			continue
		}
		out = append(out, [2]int64{x, x})
	}
	return out
}

// erase applies one pending erasure: refused when a legal hold holds an
// entry of the subject; otherwise records, rewrites, stream deletions and
// the erasure's new counts and status.
func (r *Runner) erase(ctx context.Context, e cpstate.Erasure) error {
	st, ok := r.store.(EraseStore)
	if !ok || r.erasures == nil {
		return fmt.Errorf("the store or the settings cannot erase")
	}
	s := &subject{kind: e.SubjectKind, value: e.Subject, pseudonym: e.Pseudonym, needles: []string{e.Subject}}
	if s.value == "" || s.pseudonym == "" {
		return fmt.Errorf("erasure %s has no subject or pseudonym", e.ID)
	}
	if held, n, err := r.heldSubject(ctx, s, e.OrgID); err != nil {
		return err
	} else if held != nil {
		e.Status, e.Subject = cpstate.ErasureRefused, ""
		e.StatusMsg = fmt.Sprintf("legal hold %q (%s) holds %d entries of this subject; release it and ask again", held.Name, held.ID, n)
		return r.erasures.Update(ctx, e)
	}
	if err := r.names(ctx, st, s, e.OrgID); err != nil {
		return err
	}
	waiting := 0
	for _, kind := range []auditstore.LogKind{auditstore.LogAudit, auditstore.LogExecutions} {
		pl, err := r.plan(ctx, st, s, e, kind)
		if err != nil {
			return err
		}
		waiting += pl.waiting
		if len(pl.rewrites) == 0 {
			continue
		}
		if err := r.recordErasure(ctx, e, pl); err != nil {
			return err
		}
		for lo := 0; lo < len(pl.rewrites); lo += 500 {
			if err := st.RewriteEntries(ctx, e.OrgID, kind, pl.rewrites[lo:min(lo+500, len(pl.rewrites))]); err != nil {
				return fmt.Errorf("rewrite the %s: %w", LogName(kind), err)
			}
		}
		if err := r.eraseMessages(ctx, s, e.OrgID, kind, pl.rewrites); err != nil {
			return err
		}
		if kind == auditstore.LogAudit {
			e.AuditEntries += int64(len(pl.rewrites))
		} else {
			e.Executions += int64(len(pl.rewrites))
		}
	}
	outboxed := 0
	if r.outbox != nil {
		for _, m := range r.outbox.PendingPayloads() {
			for _, n := range s.needles {
				if bytes.Contains(m, []byte(n)) {
					outboxed++
					break
				}
			}
		}
	}
	if waiting > 0 || outboxed > 0 {
		e.StatusMsg = fmt.Sprintf("%d entries of the subject are not in the log yet (%d of them in the control plane's outbox): the next cycle erases them", waiting+outboxed, outboxed)
		return r.erasures.Update(ctx, e)
	}
	now := r.now().UTC()
	e.Status, e.Subject, e.StatusMsg, e.DoneAt = cpstate.ErasureDone, "", "", &now
	return r.erasures.Update(ctx, e)
}

// heldSubject returns the first active legal hold holding an entry of the
// subject, and how many it holds.
func (r *Runner) heldSubject(ctx context.Context, s *subject, org uuid.UUID) (*cpstate.LegalHold, int64, error) {
	all, err := r.settings.LegalHolds(org)
	if err != nil {
		return nil, 0, fmt.Errorf("legal holds: %w", err)
	}
	return HeldSubject(ctx, r.store, s.kind, s.value, all)
}

// recordErasure publishes the records of one log's rewrites and waits
// until a signed checkpoint covers them.
func (r *Runner) recordErasure(ctx context.Context, e cpstate.Erasure, pl planned) error {
	rs := ranges(pl.leaves)
	for lo := 0; lo < len(rs); lo += tlog.MaxRecordRanges {
		chunk := rs[lo:min(lo+tlog.MaxRecordRanges, len(rs))]
		rec := tlog.LifecycleRecord{Type: tlog.RecordErasure, Erasure: e.ID.String(), Log: LogName(pl.kind), Leaves: chunk,
			Fields: pl.fields, Pseudonym: e.Pseudonym}
		data, err := json.Marshal(map[string]any{tlog.LifecycleMember: rec})
		if err != nil {
			return err
		}
		id := uuid.NewSHA1(recordNamespace, fmt.Appendf(nil, "erasure/%s/%d/%d/%d/%d", e.ID, pl.kind, chunk[0][0], chunk[len(chunk)-1][1], len(chunk)))
		rt := schemas.ResourceTypeSetting
		ev := &schemas.AuditEvent{EventID: id, Timestamp: auditstore.Millis(r.now()), Action: schemas.AuditActionUpdated, Source: schemas.AuditSourceSystem,
			DisplayName: "auditrail erasure", OrganizationID: e.OrgID, PrincipalID: recordPrincipal, PrincipalType: auth.TypeSystem,
			ResourceType: &rt, ResourceID: schemas.Ptr(e.ID.String()), ResourceDisplay: schemas.Ptr("erasure " + e.ID.String()), Data: data}
		if err := ev.Validate(); err != nil {
			return fmt.Errorf("erasure record: %w", err)
		}
		if err := r.pub.Publish(ctx, ev); err != nil {
			return fmt.Errorf("publish the erasure record: %w", err)
		}
		if _, err := r.awaitSigned(ctx, e.OrgID, id); err != nil {
			return err
		}
	}
	return nil
}

// eraseMessages deletes the stream's messages of the rewritten entries
// and the dead letters that mention the subject.
func (r *Runner) eraseMessages(ctx context.Context, s *subject, org uuid.UUID, kind auditstore.LogKind, rws []auditstore.Rewrite) error {
	if r.msgs == nil {
		return nil
	}
	ids := make(map[string]bool, len(rws))
	for _, rw := range rws {
		ids[rw.EventID.String()] = true
	}
	sk := schemas.KindAudit
	if kind == auditstore.LogExecutions {
		sk = schemas.KindExecution
	}
	subj := schemas.EventSubject(org.String(), sk)
	if _, err := r.msgs.EraseMessages(ctx, schemas.StreamEvents, subj, func(id string, _ []byte) bool { return ids[id] }); err != nil {
		return fmt.Errorf("erase the stream's messages: %w", err)
	}
	if _, err := r.msgs.EraseMessages(ctx, schemas.StreamDLQ, schemas.DLQSubject(subj), func(_ string, data []byte) bool {
		for _, n := range s.needles {
			if bytes.Contains(data, []byte(n)) {
				return true
			}
		}
		return false
	}); err != nil {
		return fmt.Errorf("erase the dead letters: %w", err)
	}
	return nil
}

// eraseAll applies the pending erasures; an erasure that fails stays
// pending for the next cycle.
func (r *Runner) eraseAll(ctx context.Context, rep *Report) {
	if r.erasures == nil {
		return
	}
	pending, err := r.erasures.Pending()
	if err != nil {
		r.log.Warn("lifecycle: pending erasures", "err", err)
		return
	}
	for _, e := range pending {
		if ctx.Err() != nil {
			return
		}
		start := time.Now()
		if err := r.erase(ctx, e); err != nil {
			rep.Failed++
			r.log.Warn("lifecycle: erasure left for the next cycle", "org", e.OrgID.String(), "erasure", e.ID.String(), "err", err)
			continue
		}
		r.log.Info("lifecycle: erasure applied", "org", e.OrgID.String(), "erasure", e.ID.String(), "took", time.Since(start))
	}
}

// HeldSubject returns the first active hold of holds that holds an entry
// of the subject (kind cpstate.ErasureUserID or ErasurePrincipalID), and how
// many of its entries it holds: the admin API refuses such an erasure at
// once (409), where it has the store.
func HeldSubject(ctx context.Context, st Lister, kind, value string, holds []cpstate.LegalHold) (*cpstate.LegalHold, int64, error) {
	s := &subject{kind: kind, value: value, needles: []string{value}, pseudonym: "\x00"}
	for _, h := range holds {
		if !h.Active() {
			continue
		}
		n, err := HeldOf(ctx, st, h, func(e *schemas.AuditEntry) bool {
			set, _ := s.auditRewrite(e)
			return set != nil
		}, func(x *auditstore.Execution) bool { return s.execRewrite(x) != nil })
		if err != nil {
			return nil, 0, err
		}
		if n > 0 {
			return &h, n, nil
		}
	}
	return nil, 0, nil
}
