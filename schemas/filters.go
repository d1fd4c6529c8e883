package schemas

import (
	"errors"
	"fmt"
	"strings"
)

// ErrUnspecifiedFilter: a *_UNSPECIFIED name is no filter (every entry has
// an action and a source; "no resource type" is not that value either).
var ErrUnspecifiedFilter = errors.New("an UNSPECIFIED value is not a filter")

// Filter names: what a person types in a filter (the CLI's flags, the
// search language) is an enum name
// (AUDIT_ACTION_CREATED) or its short name (CREATED), in upper case as they
// are printed (the CLI upper-cases what a person types); the *_UNSPECIFIED
// values are refused.

// The API's action, source and resource_type parameters take the enum
// names only, as the seed defines them (a short name there is an unknown
// name: 400); *_UNSPECIFIED is refused all the same.

// ParseAuditActionName parses an action filter of the API: AUDIT_ACTION_CREATED.
func ParseAuditActionName(s string) (AuditAction, error) {
	v, err := nameParse(auditActionNames, s, "action")
	return AuditAction(v), err
}

// ParseAuditSourceName parses a source filter of the API: AUDIT_SOURCE_CLI.
func ParseAuditSourceName(s string) (AuditSource, error) {
	v, err := nameParse(auditSourceNames, s, "source")
	return AuditSource(v), err
}

// ParseResourceTypeName parses a resource type filter of the API: RESOURCE_TYPE_HOOK.
func ParseResourceTypeName(s string) (ResourceType, error) {
	v, err := nameParse(resourceTypeNames, s, "resource_type")
	return ResourceType(v), err
}

func nameParse(names []string, s, kind string) (uint8, error) {
	for i, n := range names {
		if n == s {
			if i == 0 {
				return 0, fmt.Errorf("%w: %s is no %s filter (omit %s to list every entry)", ErrUnspecifiedFilter, n, kind, kind)
			}
			return uint8(i), nil
		}
	}
	return 0, fmt.Errorf("%w: %s %q; one of %s", ErrUnknownEnum, kind, s, strings.Join(names[1:], ", "))
}

// ParseAuditActionFilter parses an action filter: AUDIT_ACTION_CREATED or CREATED.
func ParseAuditActionFilter(s string) (AuditAction, error) {
	v, err := filterParse(auditActionNames, "AUDIT_ACTION_", s, "action")
	return AuditAction(v), err
}

// ParseAuditSourceFilter parses a source filter: AUDIT_SOURCE_CLI or CLI.
func ParseAuditSourceFilter(s string) (AuditSource, error) {
	v, err := filterParse(auditSourceNames, "AUDIT_SOURCE_", s, "source")
	return AuditSource(v), err
}

// ParseResourceTypeFilter parses a resource type filter: RESOURCE_TYPE_HOOK or HOOK.
func ParseResourceTypeFilter(s string) (ResourceType, error) {
	v, err := filterParse(resourceTypeNames, "RESOURCE_TYPE_", s, "resource_type")
	return ResourceType(v), err
}

// ShortNames returns the short names a filter of that kind accepts, in
// number order, without UNSPECIFIED: "action", "source" or "resource_type".
func ShortNames(kind string) []string {
	names, prefix := filterTable(kind)
	out := make([]string, 0, len(names)-1)
	for _, n := range names[1:] {
		out = append(out, strings.TrimPrefix(n, prefix))
	}
	return out
}

func filterTable(kind string) ([]string, string) {
	switch kind {
	case "action":
		return auditActionNames, "AUDIT_ACTION_"
	case "source":
		return auditSourceNames, "AUDIT_SOURCE_"
	}
	return resourceTypeNames, "RESOURCE_TYPE_"
}

func filterParse(names []string, prefix, s, kind string) (uint8, error) {
	u := s
	if !strings.HasPrefix(u, prefix) {
		u = prefix + u
	}
	for i, n := range names {
		if n == u {
			if i == 0 {
				return 0, fmt.Errorf("%w: %s is no %s filter (omit %s to list every entry)", ErrUnspecifiedFilter, n, kind, kind)
			}
			return uint8(i), nil
		}
	}
	return 0, fmt.Errorf("%w: %s %q; one of %s (or the full names, such as %s)", ErrUnknownEnum, kind, s,
		strings.Join(ShortNames(kind), ", "), names[1])
}
