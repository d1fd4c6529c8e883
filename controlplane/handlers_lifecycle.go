package controlplane

// The lifecycle settings of an organization: its retention (how long its
// audit log and its tool executions are kept, within the operator's
// bounds, ServiceConfig.Retention) and its legal holds (entries kept past
// retention). Owners and admins (and the platform admin) read and change
// them; each change is one SETTING audit event. The lifecycle role applies
// them (package lifecycle).

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/google/uuid"

	"github.com/auditrail/auditrail/controlplane/cpstate"
	"github.com/auditrail/auditrail/internal/auditstore/search"
	"github.com/auditrail/auditrail/internal/httpapi"
	"github.com/auditrail/auditrail/producers"
	"github.com/auditrail/auditrail/schemas"
)

// HoldCounter counts the entries a legal hold holds now (the audit store).
type HoldCounter interface {
	CountHeld(ctx context.Context, h cpstate.LegalHold) (int64, error)
}

// UseHoldCounter sets what counts the entries of each legal hold (the
// held of the legal hold routes); without one, held is null.
func (s *Service) UseHoldCounter(c HoldCounter) { s.holdCounter = c }

// Bounds of the legal holds.
const (
	// MaxLegalHolds is how many active legal holds an organization may
	// hold (the lifecycle evaluates each at every expiry).
	MaxLegalHolds = 100
	// holdCountTimeout bounds the counting of one hold, holdCountBudget
	// the counting of a list; holdCountConcurrency holds are counted at a
	// time.
	holdCountTimeout     = 2 * time.Second
	holdCountBudget      = 10 * time.Second
	holdCountConcurrency = 4
)

// The resource id and display of the retention setting's audit events.
const retentionResource = "retention"

func (s *Service) registerLifecycle(v routes) {
	v.Get("/orgs/:org_id/retention", s.getRetention)
	v.Put("/orgs/:org_id/retention", s.putRetention)
	v.Get("/orgs/:org_id/legal_holds", s.listLegalHolds)
	v.Post("/orgs/:org_id/legal_holds", s.createLegalHold)
	v.Get("/orgs/:org_id/legal_holds/:hold_id", s.getLegalHold)
	v.Delete("/orgs/:org_id/legal_holds/:hold_id", s.releaseLegalHold)
}

// retentionValues are a retention of each log, formatted
// (cpstate.FormatRetention); null: keep forever.
type retentionValues struct {
	AuditLogs      *string `json:"audit_logs"`
	ToolExecutions *string `json:"tool_executions"`
}

// retentionBoundsView shows the operator's bounds; max and default null:
// none (keep forever).
type retentionBoundsView struct {
	Min     string  `json:"min"`
	Max     *string `json:"max"`
	Default *string `json:"default"`
	Grace   string  `json:"grace"`
}

// retentionView is the answer of the retention routes and what their
// audit events show before and after a change.
type retentionView struct {
	retentionValues
	// AppliesFrom: a shorter retention applies from here (null: no
	// setting, the operator default applies).
	AppliesFrom *time.Time          `json:"applies_from"`
	Effective   retentionValues     `json:"effective"`
	Bounds      retentionBoundsView `json:"bounds"`
}

// foreverNull formats d, 0 (keep forever) as null.
func foreverNull(d time.Duration) *string {
	if d <= 0 {
		return nil
	}
	v := cpstate.FormatRetention(d)
	return &v
}

func durPtr(d time.Duration) *time.Duration {
	if d <= 0 {
		return nil
	}
	return &d
}

// retentionView shows r (nil: no setting) at now.
func (s *Service) retentionView(r *cpstate.Retention, now time.Time) retentionView {
	b := s.cfg.Retention
	v := retentionView{
		Effective: retentionValues{AuditLogs: foreverNull(b.Effective(r, cpstate.RetentionAuditLogs, now)),
			ToolExecutions: foreverNull(b.Effective(r, cpstate.RetentionToolExecutions, now))},
		Bounds: retentionBoundsView{Min: cpstate.FormatRetention(b.Min), Max: foreverNull(b.Max),
			Default: foreverNull(b.Default), Grace: cpstate.FormatRetention(b.Grace)},
	}
	if r == nil {
		v.AuditLogs, v.ToolExecutions = foreverNull(b.Default), foreverNull(b.Default)
		return v
	}
	v.AuditLogs = foreverNull(r.Value(cpstate.RetentionAuditLogs))
	v.ToolExecutions = foreverNull(r.Value(cpstate.RetentionToolExecutions))
	at := r.AppliesFrom.UTC()
	v.AppliesFrom = &at
	return v
}

func (s *Service) getRetention(c *fiber.Ctx) error {
	_, org, _, err := s.scope(c, true, false)
	if err != nil {
		return err
	}
	r, err := cpstate.RetentionOf(s.state, org.ID)
	if err != nil {
		return err
	}
	return httpapi.Reply(c, fiber.StatusOK, s.retentionView(r, s.now()))
}

// parseRetentionMember parses a member of the PUT body: a duration
// string, or null (keep forever, answered as nil), within the bounds.
func (s *Service) parseRetentionMember(field string, raw json.RawMessage) (*time.Duration, error) {
	var v *time.Duration
	if !bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		var str string
		if err := json.Unmarshal(raw, &str); err != nil {
			return nil, cpstate.Invalid(field, "a duration string like \"400d\", \"36h\", \"90m\", or null (keep forever)")
		}
		d, err := cpstate.ParseRetention(str)
		if err != nil {
			return nil, cpstate.Invalid(field, "%s", err.Error())
		}
		v = durPtr(d)
	}
	if err := s.cfg.Retention.Check(field, v); err != nil {
		return nil, err
	}
	return v, nil
}

func sameDuration(a, b *time.Duration) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

// putRetention sets the organization's retention: a member left out keeps
// its current value (the operator default when the organization has no
// setting), null keeps forever. The values in force until now protect
// during the grace period (cpstate.RetentionBounds.Effective). A PUT that
// changes no value records nothing.
func (s *Service) putRetention(c *fiber.Ctx) error {
	cl, org, _, err := s.scope(c, true, false)
	if err != nil {
		return err
	}
	var body struct {
		AuditLogs      json.RawMessage `json:"audit_logs"`
		ToolExecutions json.RawMessage `json:"tool_executions"`
	}
	if err := decodeBody(c, &body); err != nil {
		return err
	}
	if body.AuditLogs == nil && body.ToolExecutions == nil {
		return fiber.NewError(fiber.StatusBadRequest, "body: set audit_logs, tool_executions or both (a duration like \"400d\", or null to keep forever)")
	}
	var set [2]*time.Duration
	for i, m := range []struct {
		field string
		raw   json.RawMessage
	}{{cpstate.RetentionAuditLogs, body.AuditLogs}, {cpstate.RetentionToolExecutions, body.ToolExecutions}} {
		if m.raw == nil {
			continue
		}
		if set[i], err = s.parseRetentionMember(m.field, m.raw); err != nil {
			return httpError(err)
		}
	}

	key := cpstate.RetentionKey(org.ID.String())
	defer s.lock(key)()
	var cur cpstate.Retention
	rev, err := s.state.Get(key, &cur)
	if err != nil && err != cpstate.ErrNotFound {
		return err
	}
	var before *cpstate.Retention
	b := s.cfg.Retention
	curAudit, curExec := durPtr(b.Default), durPtr(b.Default)
	if rev != 0 {
		before = &cur
		curAudit, curExec = cur.AuditLogs, cur.ToolExecutions
	}
	next := [2]*time.Duration{curAudit, curExec}
	if body.AuditLogs != nil {
		next[0] = set[0]
	}
	if body.ToolExecutions != nil {
		next[1] = set[1]
	}
	now := s.now().UTC()
	if sameDuration(next[0], curAudit) && sameDuration(next[1], curExec) {
		return httpapi.Reply(c, fiber.StatusOK, s.retentionView(before, now))
	}
	rec := cpstate.Retention{OrgID: org.ID, AuditLogs: next[0], ToolExecutions: next[1],
		// What was in force until now (during an earlier grace period, the
		// longer of its values) keeps protecting until this grace ends.
		PreviousAuditLogs:      durPtr(b.Effective(before, cpstate.RetentionAuditLogs, now)),
		PreviousToolExecutions: durPtr(b.Effective(before, cpstate.RetentionToolExecutions, now)),
		PreviousSet:            true,
		AppliesFrom:            now.Add(b.Grace), UpdatedAt: now}
	mut := producers.Mutation{Action: schemas.AuditActionUpdated, ResourceType: schemas.ResourceTypeSetting,
		ResourceID: retentionResource, ResourceDisplay: retentionResource, OrgID: org.ID,
		Before: s.retentionView(before, now), After: s.retentionView(&rec, now)}
	if before == nil {
		mut.Action = schemas.AuditActionCreated
	}
	if err := s.commitRecorded(cl, mut, cpstate.SetKey(key, rec, rev)); err != nil {
		return httpError(err)
	}
	return httpapi.Reply(c, fiber.StatusOK, s.retentionView(&rec, now))
}

// Statuses of a legal hold.
const (
	holdActive   = "active"
	holdReleased = "released"
)

// legalHoldView is a legal hold as the API shows it: held is how many
// entries it holds now (null: released, not counted, or the count failed).
type legalHoldView struct {
	cpstate.LegalHold
	Held   *int64 `json:"held"`
	Status string `json:"status"`
}

// holdView shows h with held (nil: null); audit events show it uncounted.
func holdView(h cpstate.LegalHold, held *int64) legalHoldView {
	if h.Kinds == nil {
		h.Kinds = []string{}
	}
	v := legalHoldView{LegalHold: h, Held: held, Status: holdActive}
	if !h.Active() {
		v.Status, v.Held = holdReleased, nil
	}
	return v
}

func holdRecordView(h cpstate.LegalHold) any { return holdView(h, nil) }

// countHolds counts the entries of each active hold, holdCountConcurrency
// at a time, each within holdCountTimeout and all within holdCountBudget;
// a hold that is released, not counted in time or whose count fails is
// nil (the failure is logged).
func (s *Service) countHolds(ctx context.Context, holds []cpstate.LegalHold) []*int64 {
	out := make([]*int64, len(holds))
	counter := s.holdCounter
	if counter == nil {
		return out
	}
	ctx, cancel := context.WithTimeout(ctx, holdCountBudget)
	defer cancel()
	sem := make(chan struct{}, holdCountConcurrency)
	var wg sync.WaitGroup
	for i, h := range holds {
		if !h.Active() {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case sem <- struct{}{}:
				defer func() { <-sem }()
			case <-ctx.Done():
				s.log.Warn("legal hold: not counted", "hold", h.ID, "err", ctx.Err())
				return
			}
			hctx, hcancel := context.WithTimeout(ctx, holdCountTimeout)
			defer hcancel()
			type result struct {
				n   int64
				err error
			}
			done := make(chan result, 1) // the counter returns even when nobody waits
			go func() {
				n, err := counter.CountHeld(hctx, h)
				done <- result{n, err}
			}()
			select {
			case r := <-done:
				if r.err != nil {
					s.log.Warn("legal hold: count failed", "hold", h.ID, "err", r.err)
					return
				}
				out[i] = &r.n
			case <-hctx.Done():
				s.log.Warn("legal hold: count timed out", "hold", h.ID, "err", hctx.Err())
			}
		}()
	}
	wg.Wait()
	return out
}

// countedView shows one hold with its count.
func (s *Service) countedView(ctx context.Context, h cpstate.LegalHold) legalHoldView {
	return holdView(h, s.countHolds(ctx, []cpstate.LegalHold{h})[0])
}

// holdKinds are the logs whose search language parses q; neither is a
// 400 naming q.
func holdKinds(q string) ([]string, error) {
	_, errA := search.Parse(search.Audit, q)
	_, errE := search.Parse(search.Executions, q)
	var kinds []string
	if errA == nil {
		kinds = append(kinds, cpstate.RetentionAuditLogs)
	}
	if errE == nil {
		kinds = append(kinds, cpstate.RetentionToolExecutions)
	}
	if kinds == nil {
		return nil, cpstate.Invalid("q", "not a search of the audit log (%v) nor of the tool executions (%v)", errA, errE)
	}
	return kinds, nil
}

// createLegalHold records a hold of the entries matching q (the search
// language of the listings, of either log) within since/until.
func (s *Service) createLegalHold(c *fiber.Ctx) error {
	cl, org, _, err := s.scope(c, true, false)
	if err != nil {
		return err
	}
	var body struct {
		Name  string     `json:"name"`
		Q     string     `json:"q"`
		Since *time.Time `json:"since"`
		Until *time.Time `json:"until"`
	}
	if err := decodeBody(c, &body); err != nil {
		return err
	}
	name, err := validName("name", body.Name)
	if err != nil {
		return httpError(err)
	}
	q := strings.TrimSpace(body.Q)
	kinds, err := holdKinds(q)
	if err != nil {
		return httpError(err)
	}
	utc := func(t *time.Time) *time.Time {
		if t == nil {
			return nil
		}
		u := t.UTC()
		return &u
	}
	since, until := utc(body.Since), utc(body.Until)
	if since != nil && until != nil && !since.Before(*until) {
		return httpError(cpstate.Invalid("until", "must be after since"))
	}
	orgID := org.ID.String()
	// One creation at a time per organization on this instance: the limit.
	defer s.lock(cpstate.LegalHoldPrefix(orgID))()
	all, err := cpstate.LegalHolds(s.state, org.ID)
	if err != nil {
		return err
	}
	if n := countActive(all); n >= MaxLegalHolds {
		return httpError(fmt.Errorf("%w: the organization holds %d active legal holds, the most allowed; release one", cpstate.ErrConflict, n))
	}
	rec := cpstate.LegalHold{ID: uuid.New(), OrgID: org.ID, Name: name, Q: q, Since: since, Until: until, Kinds: kinds,
		CreatedAt: s.now().UTC(), CreatedBy: cl.p.ID}
	mut := producers.Mutation{Action: schemas.AuditActionCreated, ResourceType: schemas.ResourceTypeSetting,
		ResourceID: rec.ID.String(), ResourceDisplay: "legal hold " + name, OrgID: org.ID, After: holdRecordView(rec)}
	if err := s.commitRecorded(cl, mut, cpstate.SetKey(cpstate.LegalHoldKey(orgID, rec.ID.String()), rec, 0)); err != nil {
		return httpError(err)
	}
	return httpapi.Reply(c, fiber.StatusCreated, s.countedView(c.UserContext(), rec))
}

func countActive(holds []cpstate.LegalHold) int {
	n := 0
	for _, h := range holds {
		if h.Active() {
			n++
		}
	}
	return n
}

// listLegalHolds answers the organization's holds, active and released,
// newest first, each active one with its count.
func (s *Service) listLegalHolds(c *fiber.Ctx) error {
	_, org, _, err := s.scope(c, true, false)
	if err != nil {
		return err
	}
	holds, err := cpstate.LegalHolds(s.state, org.ID)
	if err != nil {
		return err
	}
	slices.SortFunc(holds, func(a, b cpstate.LegalHold) int {
		return cmp.Or(b.CreatedAt.Compare(a.CreatedAt), strings.Compare(b.ID.String(), a.ID.String()))
	})
	held := s.countHolds(c.UserContext(), holds)
	items := make([]any, len(holds))
	for i, h := range holds {
		items[i] = holdView(h, held[i])
	}
	return httpapi.Reply(c, fiber.StatusOK, map[string]any{"items": items})
}

// legalHold reads the hold of the hold_id parameter.
func (s *Service) legalHold(c *fiber.Ctx, org cpstate.Org) (string, cpstate.LegalHold, error) {
	id, err := uuidParam(c, "hold_id")
	if err != nil {
		return "", cpstate.LegalHold{}, err
	}
	key := cpstate.LegalHoldKey(org.ID.String(), id.String())
	var h cpstate.LegalHold
	if _, err := s.state.Get(key, &h); err != nil {
		return "", cpstate.LegalHold{}, httpError(fmt.Errorf("%w: legal hold %s", cpstate.ErrNotFound, id))
	}
	return key, h, nil
}

func (s *Service) getLegalHold(c *fiber.Ctx) error {
	_, org, _, err := s.scope(c, true, false)
	if err != nil {
		return err
	}
	_, h, err := s.legalHold(c, org)
	if err != nil {
		return err
	}
	return httpapi.Reply(c, fiber.StatusOK, s.countedView(c.UserContext(), h))
}

// releaseLegalHold releases a hold: its entries expire again under the
// retention. The record stays (status released); releasing a released
// hold records nothing.
func (s *Service) releaseLegalHold(c *fiber.Ctx) error {
	cl, org, _, err := s.scope(c, true, false)
	if err != nil {
		return err
	}
	key, h, err := s.legalHold(c, org)
	if err != nil {
		return err
	}
	mut := producers.Mutation{Action: schemas.AuditActionDeleted, ResourceType: schemas.ResourceTypeSetting,
		ResourceID: h.ID.String(), ResourceDisplay: "legal hold " + h.Name, OrgID: org.ID}
	return updateRecorded(s, cl, key, "legal hold "+h.ID.String(), mut, holdRecordView, func(h cpstate.LegalHold) (cpstate.LegalHold, bool, error) {
		if !h.Active() {
			return h, false, nil
		}
		now := s.now().UTC()
		h.ReleasedAt = &now
		return h, true, nil
	})
}
