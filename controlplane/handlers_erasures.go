package controlplane

// The erasure routes: an organization's owners (and the platform admin)
// ask that a person — a user id or a principal id — be erased from the
// organization's audit log and tool executions: their values replaced by
// a pseudonym. The control plane records the request (pending); the
// lifecycle role applies it (package lifecycle). An erasure cannot be
// undone: there is no DELETE. Neither the answers nor the audit events
// ever show the erased value; it is kept only in the record, until the
// lifecycle wipes it.

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/gofiber/fiber/v2"
	"github.com/google/uuid"

	"github.com/auditrail/auditrail/controlplane/cpstate"
	"github.com/auditrail/auditrail/internal/auth"
	"github.com/auditrail/auditrail/internal/httpapi"
	"github.com/auditrail/auditrail/producers"
	"github.com/auditrail/auditrail/schemas"
)

// SubjectHolds says whether legal holds hold entries of a subject (the
// audit store).
type SubjectHolds interface {
	// HeldBy returns the first active hold that holds an entry of the
	// subject (nil when none) and how many of the subject's entries it
	// holds.
	HeldBy(ctx context.Context, org uuid.UUID, kind, subject string, holds []cpstate.LegalHold) (*cpstate.LegalHold, int64, error)
}

// UseSubjectHolds sets what checks, when an erasure is asked, that no
// legal hold holds entries of its subject; without one (a control plane
// that cannot reach the audit store), the erasure is accepted and the
// lifecycle refuses it later if a hold holds such entries.
func (s *Service) UseSubjectHolds(h SubjectHolds) { s.subjectHolds = h }

// Bounds of an erasure request.
const (
	// maxErasureSubject is the longest subject value, in bytes.
	maxErasureSubject = 256
	// maxErasureReason is the longest reason, in characters.
	maxErasureReason = 500
	// subjectHoldsTimeout bounds the legal hold check of one request.
	subjectHoldsTimeout = 10 * time.Second
)

func (s *Service) registerErasures(v routes) {
	v.Get("/orgs/:org_id/erasures", s.listErasures)
	v.Post("/orgs/:org_id/erasures", s.createErasure)
	v.Get("/orgs/:org_id/erasures/:erasure_id", s.getErasure)
}

// erasureView is an erasure as the API and its audit events show it:
// never the subject's value. Entries is AuditEntries + Executions.
type erasureView struct {
	ID           uuid.UUID  `json:"id"`
	OrgID        uuid.UUID  `json:"organization_id"`
	SubjectKind  string     `json:"subject_kind"`
	Reason       string     `json:"reason"`
	Pseudonym    string     `json:"pseudonym"`
	Status       string     `json:"status"`
	StatusMsg    string     `json:"status_msg"`
	Entries      int64      `json:"entries"`
	AuditEntries int64      `json:"audit_entries"`
	Executions   int64      `json:"executions"`
	CreatedAt    time.Time  `json:"created_at"`
	CreatedBy    string     `json:"created_by"`
	DoneAt       *time.Time `json:"done_at"`
}

// viewErasure shows e without its subject's value (a status message that
// would quote it shows [subject] instead).
func viewErasure(e cpstate.Erasure) erasureView {
	return erasureView{ID: e.ID, OrgID: e.OrgID, SubjectKind: e.SubjectKind, Reason: e.Reason,
		Pseudonym: e.Pseudonym, Status: e.Status, StatusMsg: redactSubject(e.StatusMsg, e.Subject),
		Entries: e.AuditEntries + e.Executions, AuditEntries: e.AuditEntries, Executions: e.Executions,
		CreatedAt: e.CreatedAt, CreatedBy: e.CreatedBy, DoneAt: e.DoneAt}
}

func erasureRecordView(e cpstate.Erasure) any { return viewErasure(e) }

// subjectIndexes returns where the subject's value occurs in text,
// case-insensitively, as a whole word: not inside a longer run of letters
// and digits ("u-1" is not in "u-12", "bob" is in "Bob's"). Each is a byte
// offset and length in text.
func subjectIndexes(text, subject string) [][2]int {
	if subject == "" {
		return nil
	}
	alnum := func(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }
	first, _ := utf8.DecodeRuneInString(subject)
	last, _ := utf8.DecodeLastRuneInString(subject)
	var out [][2]int
	for i := 0; i < len(text); {
		n, ok := foldPrefix(text[i:], subject)
		if ok {
			before, _ := utf8.DecodeLastRuneInString(text[:i])
			after, _ := utf8.DecodeRuneInString(text[i+n:])
			if !(i > 0 && alnum(first) && alnum(before)) && !(i+n < len(text) && alnum(last) && alnum(after)) {
				out = append(out, [2]int{i, n})
				i += n
				continue
			}
		}
		_, size := utf8.DecodeRuneInString(text[i:])
		i += size
	}
	return out
}

// foldPrefix reports whether text begins with prefix under simple case
// folding, and how many bytes of text it spans.
func foldPrefix(text, prefix string) (int, bool) {
	i := 0
	for _, p := range prefix {
		if i >= len(text) {
			return 0, false
		}
		r, size := utf8.DecodeRuneInString(text[i:])
		if !strings.EqualFold(string(r), string(p)) {
			return 0, false
		}
		i += size
	}
	return i, true
}

// redactSubject replaces each whole-word occurrence of the subject's value
// in s by [subject].
func redactSubject(s, subject string) string {
	idx := subjectIndexes(s, subject)
	if idx == nil {
		return s
	}
	var b strings.Builder
	prev := 0
	for _, m := range idx {
		b.WriteString(s[prev:m[0]])
		b.WriteString("[subject]")
		prev = m[0] + m[1]
	}
	b.WriteString(s[prev:])
	return b.String()
}

// newPseudonym returns "erased-" and 16 lowercase hex digits from
// crypto/rand.
func newPseudonym() string {
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return "erased-" + hex.EncodeToString(b)
}

// erasureScope authorizes the owners and admins of the organization (and
// the platform admin); with ownerOnly, the organization's owners (and the
// platform admin) only.
func (s *Service) erasureScope(c *fiber.Ctx, ownerOnly bool) (*call, cpstate.Org, error) {
	cl, org, _, err := s.scope(c, true, false)
	if err != nil {
		return nil, cpstate.Org{}, err
	}
	if ownerOnly && !cl.p.PlatformAdmin {
		if r, ok := s.access.Role(cl.p, org.ID); !ok || r != cpstate.RoleOwner {
			return nil, cpstate.Org{}, httpError(fmt.Errorf("%w: only owners of organization %s erase a person", auth.ErrForbidden, org.ID))
		}
	}
	return cl, org, nil
}

// isNull reports whether a member is absent or null.
func isNull(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) == 0 || bytes.Equal(t, []byte("null"))
}

// erasureSubject checks the subject member, an object with exactly one of
// user_id, principal_id, and returns its kind and value. No message quotes
// the value.
func erasureSubject(raw json.RawMessage) (kind, value string, err error) {
	const want = `required: {"user_id": "…"} or {"principal_id": "…"}`
	if isNull(raw) {
		return "", "", cpstate.Invalid("subject", want)
	}
	var members map[string]json.RawMessage
	if err := json.Unmarshal(raw, &members); err != nil {
		return "", "", cpstate.Invalid("subject", `an object: {"user_id": "…"} or {"principal_id": "…"}`)
	}
	for name, v := range members {
		switch name {
		case cpstate.ErasureUserID, cpstate.ErasurePrincipalID:
			kind, value = name, ""
			if err := json.Unmarshal(v, &value); err != nil || isNull(v) {
				return "", "", cpstate.Invalid("subject."+name, "a string")
			}
		default:
			return "", "", cpstate.Invalid("subject", "unknown member %q: exactly one of user_id, principal_id", name)
		}
	}
	switch len(members) {
	case 0:
		return "", "", cpstate.Invalid("subject", want)
	case 1:
	default:
		return "", "", cpstate.Invalid("subject", "exactly one of user_id, principal_id")
	}
	field := "subject." + kind
	switch {
	case strings.TrimSpace(value) == "":
		return "", "", cpstate.Invalid(field, "required, a non-blank string")
	case len(value) > maxErasureSubject:
		return "", "", cpstate.Invalid(field, "at most %d bytes", maxErasureSubject)
	case !utf8.ValidString(value) || strings.ContainsFunc(value, unicode.IsControl):
		return "", "", cpstate.Invalid(field, "must not contain control characters")
	}
	return kind, value, nil
}

// erasureReason checks the reason: a string of 1..maxErasureReason
// characters once trimmed, without the subject's value (the reason is kept
// and shown; the value must not be).
func erasureReason(raw json.RawMessage, subject string) (string, error) {
	var reason string
	if isNull(raw) {
		return "", cpstate.Invalid("reason", "required, 1 to %d characters", maxErasureReason)
	}
	if err := json.Unmarshal(raw, &reason); err != nil {
		return "", cpstate.Invalid("reason", "a string of 1 to %d characters", maxErasureReason)
	}
	r := strings.TrimSpace(reason)
	switch {
	case r == "":
		return "", cpstate.Invalid("reason", "required, 1 to %d characters", maxErasureReason)
	case utf8.RuneCountInString(r) > maxErasureReason:
		return "", cpstate.Invalid("reason", "at most %d characters", maxErasureReason)
	case subjectIndexes(r, subject) != nil:
		return "", cpstate.Invalid("reason", "must not contain the subject's value (the reason is kept and shown after the erasure)")
	}
	return r, nil
}

// pendingErasureOf returns the pending erasure of the same subject in
// org, if any (compared in memory).
func (s *Service) pendingErasureOf(org uuid.UUID, kind, subject string) (*cpstate.Erasure, error) {
	all, err := cpstate.Erasures(s.state, org)
	if err != nil {
		return nil, err
	}
	for _, e := range all {
		if e.Pending() && e.SubjectKind == kind && e.Subject == subject {
			return &e, nil
		}
	}
	return nil, nil
}

func duplicateErasure(e *cpstate.Erasure) error {
	return fiber.NewError(fiber.StatusConflict, fmt.Sprintf("subject: erasure %s of this subject is pending", e.ID))
}

// checkSubjectHolds refuses (409) an erasure of a subject whose entries an
// active legal hold holds, when a checker is set; a checker that fails is
// a 503 (its error is shown and logged without the subject's value).
func (s *Service) checkSubjectHolds(ctx context.Context, org uuid.UUID, kind, subject string) error {
	checker := s.subjectHolds
	if checker == nil {
		return nil
	}
	holds, err := cpstate.LegalHolds(s.state, org)
	if err != nil {
		return err
	}
	active := slices.DeleteFunc(holds, func(h cpstate.LegalHold) bool { return !h.Active() })
	if len(active) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, subjectHoldsTimeout)
	defer cancel()
	type result struct {
		held *cpstate.LegalHold
		n    int64
		err  error
	}
	done := make(chan result, 1) // the checker returns even when nobody waits
	go func() {
		held, n, err := checker.HeldBy(ctx, org, kind, subject, active)
		done <- result{held, n, err}
	}()
	var r result
	select {
	case r = <-done:
	case <-ctx.Done():
		r.err = ctx.Err()
	}
	held, n, err := r.held, r.n, r.err
	if err != nil {
		why := redactSubject(err.Error(), subject)
		if errors.Is(err, context.DeadlineExceeded) {
			why = fmt.Sprintf("no answer within %s", subjectHoldsTimeout)
		}
		s.log.Warn("erasure: the legal hold check failed", "org", org, "subject_kind", kind, "err", why)
		return fiber.NewError(fiber.StatusServiceUnavailable,
			"subject: the legal holds could not be checked against this subject's entries ("+why+"); try again")
	}
	if held != nil {
		return fiber.NewError(fiber.StatusConflict,
			fmt.Sprintf("subject: legal hold %q (%s) holds %d entries of this subject; release it first", held.Name, held.ID, n))
	}
	return nil
}

// createErasure records an erasure (pending) for the lifecycle to apply,
// after checking that no erasure of the subject is pending and (with a
// SubjectHolds) that no legal hold holds its entries. 202: the work is
// done later.
func (s *Service) createErasure(c *fiber.Ctx) error {
	cl, org, err := s.erasureScope(c, true)
	if err != nil {
		return err
	}
	var body struct {
		Subject json.RawMessage `json:"subject"`
		Reason  json.RawMessage `json:"reason"`
	}
	if err := decodeBody(c, &body); err != nil {
		return err
	}
	kind, subject, err := erasureSubject(body.Subject)
	if err != nil {
		return httpError(err)
	}
	reason, err := erasureReason(body.Reason, subject)
	if err != nil {
		return httpError(err)
	}
	// Before the (slower) hold check; again under the lock below.
	if dup, err := s.pendingErasureOf(org.ID, kind, subject); err != nil {
		return err
	} else if dup != nil {
		return duplicateErasure(dup)
	}
	if err := s.checkSubjectHolds(c.UserContext(), org.ID, kind, subject); err != nil {
		return httpError(err)
	}
	orgID := org.ID.String()
	// One creation at a time per organization on this instance: no two
	// pending erasures of one subject.
	defer s.lock(cpstate.ErasurePrefix(orgID))()
	if dup, err := s.pendingErasureOf(org.ID, kind, subject); err != nil {
		return err
	} else if dup != nil {
		return duplicateErasure(dup)
	}
	rec := cpstate.Erasure{ID: uuid.New(), OrgID: org.ID, SubjectKind: kind, Subject: subject, Reason: reason,
		Pseudonym: newPseudonym(), Status: cpstate.ErasurePending, CreatedAt: s.now().UTC(), CreatedBy: cl.p.ID}
	id := rec.ID.String()
	mut := producers.Mutation{Action: schemas.AuditActionCreated, ResourceType: schemas.ResourceTypeSetting,
		ResourceID: id, ResourceDisplay: "erasure " + id, OrgID: org.ID, After: erasureRecordView(rec)}
	if err := s.commitRecorded(cl, mut, cpstate.SetKey(cpstate.ErasureKey(orgID, id), rec, 0)); err != nil {
		return httpError(err)
	}
	return httpapi.Reply(c, fiber.StatusAccepted, viewErasure(rec))
}

// listErasures answers the organization's erasures, of any status, newest
// first.
func (s *Service) listErasures(c *fiber.Ctx) error {
	_, org, err := s.erasureScope(c, false)
	if err != nil {
		return err
	}
	all, err := cpstate.Erasures(s.state, org.ID)
	if err != nil {
		return err
	}
	slices.SortFunc(all, func(a, b cpstate.Erasure) int {
		return cmp.Or(b.CreatedAt.Compare(a.CreatedAt), strings.Compare(b.ID.String(), a.ID.String()))
	})
	items := make([]erasureView, len(all))
	for i, e := range all {
		items[i] = viewErasure(e)
	}
	return httpapi.Reply(c, fiber.StatusOK, map[string]any{"items": items})
}

func (s *Service) getErasure(c *fiber.Ctx) error {
	_, org, err := s.erasureScope(c, false)
	if err != nil {
		return err
	}
	id, err := uuidParam(c, "erasure_id")
	if err != nil {
		return err
	}
	var e cpstate.Erasure
	if _, err := s.state.Get(cpstate.ErasureKey(org.ID.String(), id.String()), &e); err != nil {
		if errors.Is(err, cpstate.ErrNotFound) {
			return httpError(fmt.Errorf("%w: erasure %s", cpstate.ErrNotFound, id))
		}
		return err
	}
	return httpapi.Reply(c, fiber.StatusOK, viewErasure(e))
}
