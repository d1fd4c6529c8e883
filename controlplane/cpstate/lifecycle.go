package cpstate

// The lifecycle settings of an organization: its retention (how long its
// audit log and its tool executions are kept, within the operator's
// bounds) and its legal holds (entries kept past retention). The admin API
// writes them; the lifecycle role reads them.

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
)

// Day is the unit "d" of a retention: 24 hours.
const Day = 24 * time.Hour

// MaxRetention is the longest retention that ParseRetention accepts
// (36500d, about 100 years); longer is "0", keep forever.
const MaxRetention = 36500 * Day

// retentionError is an error of ParseRetention: its message without the
// "invalid: " prefix (callers name the field or flag), wrapping ErrInvalid.
type retentionError struct{ msg string }

func (e *retentionError) Error() string { return e.msg }
func (e *retentionError) Unwrap() error { return ErrInvalid }

// ParseRetention parses a retention duration: "<n>d" (24 h days), "<n>h",
// "<n>m", or a Go duration ("36h0m0s", "90s"); "0" and "0d" are 0 (= keep
// forever). Negative durations and durations above MaxRetention are
// refused. Errors wrap ErrInvalid; their message names the value, not the
// field: `"40x" is not a duration like "400d", "36h", "90m"`.
func ParseRetention(s string) (time.Duration, error) {
	in := strings.TrimSpace(s)
	bad := func() (time.Duration, error) {
		return 0, &retentionError{fmt.Sprintf("%q is not a duration like \"400d\", \"36h\", \"90m\"", s)}
	}
	if in == "" {
		return bad()
	}
	if in == "0" {
		return 0, nil
	}
	var d time.Duration
	units := map[byte]time.Duration{'d': Day, 'h': time.Hour, 'm': time.Minute}
	if unit, ok := units[in[len(in)-1]]; ok && isDigits(in[:len(in)-1]) {
		n, err := strconv.ParseInt(in[:len(in)-1], 10, 64)
		if err != nil || n > int64(MaxRetention/unit) {
			return 0, &retentionError{fmt.Sprintf("%q is longer than %s (use \"0\" to keep forever)", s, FormatRetention(MaxRetention))}
		}
		d = time.Duration(n) * unit
	} else {
		var err error
		if d, err = time.ParseDuration(in); err != nil {
			return bad()
		}
	}
	switch {
	case d < 0:
		return 0, &retentionError{fmt.Sprintf("%q is negative", s)}
	case d > MaxRetention:
		return 0, &retentionError{fmt.Sprintf("%q is longer than %s (use \"0\" to keep forever)", s, FormatRetention(MaxRetention))}
	}
	return d, nil
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// FormatRetention writes d as "<n>d" when a whole number of days, else
// "<n>h" when whole hours, else "<n>m" when whole minutes; 0 → "0". A
// duration of finer precision (only a Go duration parses as one) is
// written as a Go duration ("90s"), so that ParseRetention reads back what
// FormatRetention writes.
func FormatRetention(d time.Duration) string {
	switch {
	case d == 0:
		return "0"
	case d%Day == 0:
		return strconv.FormatInt(int64(d/Day), 10) + "d"
	case d%time.Hour == 0:
		return strconv.FormatInt(int64(d/time.Hour), 10) + "h"
	case d%time.Minute == 0:
		return strconv.FormatInt(int64(d/time.Minute), 10) + "m"
	}
	return d.String()
}

// RetentionBounds are the operator's limits (flags --retention-min,
// --retention-max, --retention-default, --retention-grace). Max 0 = no
// ceiling (keep forever allowed); Default 0 = keep forever; Grace is how
// long a change waits before a shorter retention applies.
type RetentionBounds struct{ Min, Max, Default, Grace time.Duration }

// DefaultRetentionBounds returns no minimum, no ceiling, keep forever by
// default and a grace period of 24 h.
func DefaultRetentionBounds() RetentionBounds {
	return RetentionBounds{Grace: 24 * time.Hour}
}

// Validate checks the bounds: none negative; Max 0 or at least Min; Default
// 0 (keep forever) only when Max is 0, else within [Min, Max]. Errors wrap
// ErrInvalidOption and name the flags.
func (b RetentionBounds) Validate() error {
	f := FormatRetention
	for _, v := range []struct {
		flag string
		d    time.Duration
	}{{"--retention-min", b.Min}, {"--retention-max", b.Max}, {"--retention-default", b.Default}, {"--retention-grace", b.Grace}} {
		if v.d < 0 {
			return fmt.Errorf("%w: %s %s is negative", ErrInvalidOption, v.flag, v.d)
		}
	}
	switch {
	case b.Max > 0 && b.Max < b.Min:
		return fmt.Errorf("%w: --retention-max %s is below --retention-min %s", ErrInvalidOption, f(b.Max), f(b.Min))
	case b.Default == 0 && b.Max > 0:
		return fmt.Errorf("%w: --retention-default 0 (keep forever) is above --retention-max %s; set a default within [%s, %s]",
			ErrInvalidOption, f(b.Max), f(b.Min), f(b.Max))
	case b.Default > 0 && b.Default < b.Min:
		return fmt.Errorf("%w: --retention-default %s is below --retention-min %s", ErrInvalidOption, f(b.Default), f(b.Min))
	case b.Default > 0 && b.Max > 0 && b.Default > b.Max:
		return fmt.Errorf("%w: --retention-default %s is above --retention-max %s", ErrInvalidOption, f(b.Default), f(b.Max))
	}
	return nil
}

// Check validates one organization's value for field: nil (or 0) means
// keep forever, refused when Max > 0; a value below Min or above Max is
// refused. Errors are Invalid(field, ...) naming the bound.
func (b RetentionBounds) Check(field string, v *time.Duration) error {
	f := FormatRetention
	switch {
	case v == nil || *v == 0:
		if b.Max > 0 {
			return Invalid(field, "keep forever (null) is above the operator's maximum of %s", f(b.Max))
		}
	case *v < 0:
		return Invalid(field, "%s is negative", *v)
	case *v < b.Min:
		return Invalid(field, "%s is below the operator's minimum of %s", f(*v), f(b.Min))
	case b.Max > 0 && *v > b.Max:
		return Invalid(field, "%s is above the operator's maximum of %s", f(*v), f(b.Max))
	}
	return nil
}

// Log kinds as the API names them.
const (
	RetentionAuditLogs      = "audit_logs"
	RetentionToolExecutions = "tool_executions"
)

// RetentionKinds are the log kinds, in the order the API shows them.
var RetentionKinds = []string{RetentionAuditLogs, RetentionToolExecutions}

// Retention is an organization's setting, at key RetentionKey(org).
type Retention struct {
	OrgID          uuid.UUID      `json:"organization_id"`
	AuditLogs      *time.Duration `json:"audit_logs"` // nil: keep forever
	ToolExecutions *time.Duration `json:"tool_executions"`
	// Previous* are the values in force before the last change (nil: keep
	// forever); PreviousSet false means the operator default was in force
	// (no setting before).
	PreviousAuditLogs      *time.Duration `json:"previous_audit_logs"`
	PreviousToolExecutions *time.Duration `json:"previous_tool_executions"`
	PreviousSet            bool           `json:"previous_set"`
	AppliesFrom            time.Time      `json:"applies_from"` // the change applies from here (UpdatedAt + Grace)
	UpdatedAt              time.Time      `json:"updated_at"`
}

// Value is the setting's value for kind (0: keep forever, as for an
// unknown kind).
func (r Retention) Value(kind string) time.Duration {
	return deref(r.pick(kind, false))
}

func (r Retention) pick(kind string, previous bool) *time.Duration {
	switch {
	case kind == RetentionAuditLogs && !previous:
		return r.AuditLogs
	case kind == RetentionAuditLogs:
		return r.PreviousAuditLogs
	case kind == RetentionToolExecutions && !previous:
		return r.ToolExecutions
	case kind == RetentionToolExecutions:
		return r.PreviousToolExecutions
	}
	return nil
}

func deref(d *time.Duration) time.Duration {
	if d == nil || *d < 0 {
		return 0
	}
	return *d
}

// RetentionKey is the key of org's retention.
func RetentionKey(org string) string { return "retention." + org }

// RetentionOf returns org's retention setting, nil (and no error) when it
// has none.
func RetentionOf(s *State, org uuid.UUID) (*Retention, error) {
	var r Retention
	if _, err := s.Get(RetentionKey(org.String()), &r); err != nil {
		if errors.Is(err, ErrNotFound) {
			return nil, nil
		}
		return nil, err
	}
	return &r, nil
}

// longer reports whether a keeps longer than b (0 = forever is longest).
func longer(a, b time.Duration) bool {
	if a == 0 || b == 0 {
		return a == 0 && b != 0
	}
	return a > b
}

// Effective is the retention in force at now for one log kind
// (RetentionAuditLogs or RetentionToolExecutions), 0 = keep forever; an
// unknown kind is 0. r nil (no setting): b.Default. Before r.AppliesFrom
// the longer of the previous value (b.Default when !PreviousSet) and the
// new one is in force (0, forever, is longest), so that a change never
// deletes anything before its grace period ends but a longer retention
// protects at once. The result is clamped into [Min, Max] (a setting
// saved under other bounds): a value below Min is Min, and when Max > 0 a
// value above Max, or forever, is Max.
func (b RetentionBounds) Effective(r *Retention, kind string, now time.Time) time.Duration {
	if kind != RetentionAuditLogs && kind != RetentionToolExecutions {
		return 0
	}
	d := b.Default
	if r != nil {
		d = r.Value(kind)
		if now.Before(r.AppliesFrom) {
			prev := b.Default
			if r.PreviousSet {
				prev = deref(r.pick(kind, true))
			}
			if longer(prev, d) {
				d = prev
			}
		}
	}
	if d < 0 {
		d = 0
	}
	if d != 0 && d < b.Min {
		d = b.Min
	}
	if b.Max > 0 && (d == 0 || d > b.Max) {
		d = b.Max
	}
	return d
}

// LegalHold keeps the entries matching it past retention, at key
// LegalHoldKey(org, id).
type LegalHold struct {
	ID    uuid.UUID `json:"id"`
	OrgID uuid.UUID `json:"organization_id"`
	Name  string    `json:"name"`
	// Q is the search language; "" = every entry in since/until.
	Q string `json:"q"`
	// Since and Until bound the entries' timestamp (audit) / started_at
	// (executions): since inclusive, until exclusive; nil: unbounded.
	Since *time.Time `json:"since"`
	Until *time.Time `json:"until"`
	// Kinds are the logs it applies to: each of audit_logs,
	// tool_executions whose search language parses Q.
	Kinds     []string  `json:"kinds"`
	CreatedAt time.Time `json:"created_at"`
	CreatedBy string    `json:"created_by"` // principal id
	// ReleasedAt is nil while active; a released hold is kept (history),
	// never deleted.
	ReleasedAt *time.Time `json:"released_at"`
}

// Active reports whether the hold keeps entries (it is not released).
func (h LegalHold) Active() bool { return h.ReleasedAt == nil }

// LegalHoldKey is the key of hold id of org.
func LegalHoldKey(org, id string) string { return "hold." + org + "." + id }

// LegalHoldPrefix is the prefix of the keys of org's legal holds.
func LegalHoldPrefix(org string) string { return "hold." + org + "." }

// LegalHolds returns every legal hold of org, active and released, in key
// order.
func LegalHolds(s *State, org uuid.UUID) ([]LegalHold, error) {
	return ListAs[LegalHold](s, LegalHoldPrefix(org.String()))
}
