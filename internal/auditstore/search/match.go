package search

import (
	"net/netip"
	"strings"

	"github.com/auditrail/auditrail/schemas"
)

// MatchAudit reports whether the audit event e satisfies q (a search of kind
// Audit), in memory, with the semantics of the stores' SQL: every term must
// hold; a term holds when any of its values matches (none, when negated);
// an absent (null) field matches no value, so a negated term keeps the
// entries that lack the field. Free text is a case-insensitive substring of
// display_name, resource_display or resource_id (Unicode lower case, no
// wildcards); actor is principal_id, user_id or display_name exactly; ip
// holds when the stored address parses and lies in one of the prefixes (an
// IPv4-mapped address is its IPv4 address; IPv6 prefixes hold no IPv4
// address); project and event_id compare the canonical lower-case UUIDs as
// the stores keep them. The live stream filters with it, and a destination
// can: the conformance suite and a fuzz target hold it to the SQL.
func (q Query) MatchAudit(e *schemas.AuditEvent) bool {
	for i := range q.Terms {
		if !q.Terms[i].matchAudit(e) {
			return false
		}
	}
	return true
}

// MatchExecution is MatchAudit for a search of kind Executions: free text
// in display_name, the tool's name or its toolkit; tool, toolkit, user and
// error_kind exactly; success; hook_decision holds when one of the hook
// calls has that decision (allow, deny) or had that failure mode applied
// (fail_open, fail_closed).
func (q Query) MatchExecution(e *schemas.ExecutionEvent) bool {
	for i := range q.Terms {
		if !q.Terms[i].matchExecution(e) {
			return false
		}
	}
	return true
}

func (t *Term) matchAudit(e *schemas.AuditEvent) bool {
	hit := false
	for j := 0; j < len(t.Values) && !hit; j++ {
		v := t.Values[j]
		switch t.Key {
		case "":
			f := strings.ToLower(v)
			hit = contains(&e.DisplayName, f) || contains(e.ResourceDisplay, f) || contains(e.ResourceID, f)
		case KeyAction:
			hit = uint8(e.Action) == t.Nums[j]
		case KeySource:
			hit = uint8(e.Source) == t.Nums[j]
		case KeyResourceType:
			hit = e.ResourceType != nil && uint8(*e.ResourceType) == t.Nums[j]
		case KeyResourceID:
			hit = equal(e.ResourceID, v)
		case KeyActor:
			hit = e.PrincipalID == v || equal(e.UserID, v) || e.DisplayName == v
		case KeyPrincipalType:
			hit = e.PrincipalType == v
		case KeyProject:
			hit = e.ProjectID != nil && e.ProjectID.String() == v
		case KeyEventID:
			hit = e.EventID.String() == v
		case KeyIP:
			hit = e.ClientIP != nil && inPrefix(*e.ClientIP, t.Prefixes[j])
		}
	}
	return hit != t.Not
}

func (t *Term) matchExecution(e *schemas.ExecutionEvent) bool {
	hit := false
	for j := 0; j < len(t.Values) && !hit; j++ {
		v := t.Values[j]
		switch t.Key {
		case "":
			f := strings.ToLower(v)
			hit = contains(&e.DisplayName, f) || contains(&e.Tool.Name, f) || contains(&e.Tool.Toolkit, f)
		case KeyTool:
			hit = e.Tool.Name == v
		case KeyToolkit:
			hit = e.Tool.Toolkit == v
		case KeyUser:
			hit = e.UserID == v
		case KeySuccess:
			hit = e.Success == (v == "true")
		case KeyErrorKind:
			hit = e.ErrorKind == v
		case KeyHookDecision:
			for _, h := range e.Hooks {
				if v == "fail_open" || v == "fail_closed" {
					hit = hit || h.FailureModeApplied == v
				} else {
					hit = hit || h.Decision == v
				}
			}
		}
	}
	return hit != t.Not
}

// contains reports whether the Unicode lower case of *s contains folded
// (already lower case); a nil s contains nothing.
func contains(s *string, folded string) bool {
	return s != nil && strings.Contains(strings.ToLower(*s), folded)
}

func equal(s *string, v string) bool { return s != nil && *s == v }

// inPrefix reports whether the stored address s lies in p, as the stores
// compare: s must parse as an address without a zone (Hex16); an
// IPv4-mapped address is its IPv4 address, which no IPv6 prefix holds.
func inPrefix(s string, p netip.Prefix) bool {
	a, err := netip.ParseAddr(s)
	if err != nil || a.Zone() != "" {
		return false
	}
	return p.Contains(a.Unmap())
}
