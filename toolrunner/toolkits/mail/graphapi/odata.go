package graphapi

import (
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"
)

// Quote is an OData string literal: single quotes around, each ' doubled.
// Strings are always quoted, also when they look like numbers, booleans or
// dates.
func Quote(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// Kinds of filterable properties.
const (
	kindString   = "string"
	kindBool     = "boolean"
	kindDateTime = "datetime"
	kindEnum     = "enum"
)

type property struct {
	kind  string
	enums []string // canonical spellings (kindEnum)
}

// properties is the allow-list of the message properties a filter or
// sort may name (seeds/002 ListEmailsByProperty and sort_by), with their
// types: no other path reaches Graph.
var properties = map[string]property{
	"subject":                     {kind: kindString},
	"conversationId":              {kind: kindString},
	"receivedDateTime":            {kind: kindDateTime},
	"sender/emailAddress/address": {kind: kindString},
	"isRead":                      {kind: kindBool},
	"hasAttachments":              {kind: kindBool},
	"importance":                  {kind: kindEnum, enums: []string{"low", "normal", "high"}},
	"flag/flagStatus":             {kind: kindEnum, enums: []string{"notFlagged", "flagged", "complete"}},
}

// Properties answers the filterable property paths.
func Properties() []string {
	out := make([]string, 0, len(properties))
	for p := range properties {
		out = append(out, p)
	}
	slices.Sort(out)
	return out
}

// Operators of Clause.
var Operators = []string{"eq", "ne", "gt", "ge", "lt", "le", "startsWith", "endsWith", "contains"}

// Clause is the $filter clause `prop op value` with value written as the
// property's type wants: strings quoted (” escaped), booleans and
// DateTimeOffset values unquoted, enum members quoted in their canonical
// spelling. A date without a time (2026-01-02) compares whole UTC days:
// eq is the day's range, gt the days after, le up to the day's end.
// Property and operator are matched without regard to case; anything
// outside the allow-lists is ErrInvalidQuery.
func Clause(prop, op, value string) (string, error) {
	name, pr, ok := lookupProperty(prop)
	if !ok {
		return "", fmt.Errorf("%w: property %q is not one of %s", ErrInvalidQuery, prop, strings.Join(Properties(), ", "))
	}
	i := slices.IndexFunc(Operators, func(o string) bool { return strings.EqualFold(o, op) })
	if i < 0 {
		return "", fmt.Errorf("%w: operator %q is not one of %s", ErrInvalidQuery, op, strings.Join(Operators, ", "))
	}
	op = Operators[i]
	fn := i >= 6
	switch pr.kind {
	case kindString:
		lit := Quote(value)
		if fn {
			return strings.ToLower(op) + "(" + name + "," + lit + ")", nil
		}
		return name + " " + op + " " + lit, nil
	case kindBool:
		if op != "eq" && op != "ne" {
			return "", fmt.Errorf("%w: %s is a boolean: use eq or ne", ErrInvalidQuery, name)
		}
		switch strings.ToLower(strings.TrimSpace(value)) {
		case "true":
			return name + " " + op + " true", nil
		case "false":
			return name + " " + op + " false", nil
		}
		return "", fmt.Errorf("%w: %s is a boolean: the value must be true or false, not %q", ErrInvalidQuery, name, value)
	case kindEnum:
		if fn {
			return "", fmt.Errorf("%w: %s takes one of %s: use eq or ne", ErrInvalidQuery, name, strings.Join(pr.enums, ", "))
		}
		j := slices.IndexFunc(pr.enums, func(e string) bool { return strings.EqualFold(e, strings.TrimSpace(value)) })
		if j < 0 {
			return "", fmt.Errorf("%w: %s must be one of %s, not %q", ErrInvalidQuery, name, strings.Join(pr.enums, ", "), value)
		}
		if op != "eq" && op != "ne" {
			return "", fmt.Errorf("%w: %s takes one of %s: use eq or ne", ErrInvalidQuery, name, strings.Join(pr.enums, ", "))
		}
		return name + " " + op + " " + Quote(pr.enums[j]), nil
	case kindDateTime:
		if fn {
			return "", fmt.Errorf("%w: %s is a date and time: use eq, ne, gt, ge, lt or le", ErrInvalidQuery, name)
		}
		return dateClause(name, op, strings.TrimSpace(value))
	}
	return "", fmt.Errorf("%w: property %q", ErrInvalidQuery, prop)
}

func lookupProperty(prop string) (string, property, bool) {
	for name, pr := range properties {
		if strings.EqualFold(name, strings.TrimSpace(prop)) {
			return name, pr, true
		}
	}
	return "", property{}, false
}

// DateTime is a DateTimeOffset literal (unquoted, UTC, RFC 3339).
func DateTime(t time.Time) string { return t.UTC().Format(time.RFC3339) }

func dateClause(name, op, value string) (string, error) {
	if day, err := time.Parse(time.DateOnly, value); err == nil {
		start, next := DateTime(day), DateTime(day.AddDate(0, 0, 1))
		switch op {
		case "eq":
			return "(" + name + " ge " + start + " and " + name + " lt " + next + ")", nil
		case "ne":
			return "(" + name + " lt " + start + " or " + name + " ge " + next + ")", nil
		case "gt":
			return name + " ge " + next, nil
		case "ge":
			return name + " ge " + start, nil
		case "lt":
			return name + " lt " + start, nil
		case "le":
			return name + " lt " + next, nil
		}
	}
	t, err := time.Parse(time.RFC3339Nano, value)
	if err != nil {
		return "", fmt.Errorf("%w: %s takes a date (2026-01-31) or a date and time with offset (2026-01-31T09:00:00Z), not %q", ErrInvalidQuery, name, value)
	}
	return name + " " + op + " " + t.UTC().Format(time.RFC3339Nano), nil
}

// OrderBy is one $orderby key.
type OrderBy struct {
	Property string
	Desc     bool
}

func (o OrderBy) String() string {
	if o.Desc {
		return o.Property + " desc"
	}
	return o.Property + " asc"
}

// SortProperty checks a sort property against the allow-list and answers
// its canonical spelling.
func SortProperty(prop string) (string, error) {
	name, _, ok := lookupProperty(prop)
	if !ok {
		return "", fmt.Errorf("%w: cannot sort by %q", ErrInvalidQuery, prop)
	}
	return name, nil
}

// MatchAll is a clause on the property that every message with a value in
// it satisfies, for putting the sort property first in a $filter as Graph
// requires when $filter and $orderby are combined (InefficientFilter).
func MatchAll(prop string) (string, error) {
	name, pr, ok := lookupProperty(prop)
	if !ok {
		return "", fmt.Errorf("%w: property %q", ErrInvalidQuery, prop)
	}
	switch pr.kind {
	case kindString:
		return name + " ge ''", nil
	case kindDateTime:
		return name + " ge 1900-01-01T00:00:00Z", nil
	case kindBool:
		return "(" + name + " eq true or " + name + " eq false)", nil
	case kindEnum:
		parts := make([]string, len(pr.enums))
		for i, e := range pr.enums {
			parts[i] = name + " eq " + Quote(e)
		}
		return "(" + strings.Join(parts, " or ") + ")", nil
	}
	return "", fmt.Errorf("%w: property %q", ErrInvalidQuery, prop)
}

// Query is the OData query of a collection request.
type Query struct {
	Filter  string
	OrderBy []OrderBy
	// Search is the value of $search as Graph wants it (see SearchValue);
	// Graph refuses $search with $orderby or $filter on messages.
	Search string
	Top    int
	Select []string
	// Extra are further parameters (includeHiddenFolders=true).
	Extra [][2]string
}

// Encode answers the query string: parameters in a fixed order, values
// percent-encoded (spaces as %20, never +).
func (q Query) Encode() string {
	var parts []string
	add := func(k, v string) { parts = append(parts, k+"="+escape(v)) }
	if q.Filter != "" {
		add("$filter", q.Filter)
	}
	if q.Search != "" {
		add("$search", q.Search)
	}
	if len(q.OrderBy) > 0 {
		keys := make([]string, len(q.OrderBy))
		for i, o := range q.OrderBy {
			keys[i] = o.String()
		}
		add("$orderby", strings.Join(keys, ","))
	}
	if q.Top > 0 {
		add("$top", fmt.Sprint(q.Top))
	}
	if len(q.Select) > 0 {
		add("$select", strings.Join(q.Select, ","))
	}
	for _, kv := range q.Extra {
		add(kv[0], kv[1])
	}
	return strings.Join(parts, "&")
}

func escape(v string) string { return strings.ReplaceAll(url.QueryEscape(v), "+", "%20") }
