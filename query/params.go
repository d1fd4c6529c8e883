package query

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/auditrail/auditrail/internal/auditstore"
	"github.com/auditrail/auditrail/internal/auditstore/search"
	"github.com/auditrail/auditrail/internal/httpapi"
	"github.com/auditrail/auditrail/schemas"
)

// ErrBadParam marks input errors; their message names the parameter.
var ErrBadParam = httpapi.ErrBadParam

// Limits of the limit parameter (seeds/000).
const (
	DefaultLimit = 50
	MaxLimit     = 100
)

// ListParams are the parsed parameters of an audit log listing.
type ListParams struct {
	OrgID     uuid.UUID
	ProjectID *uuid.UUID
	auditstore.Filter
	Limit  int
	Cursor string
	// WaitFor, when set, is the event the caller waits for (wait_for); it
	// does not change the result set, so it is not part of the cursor scope.
	WaitFor *uuid.UUID
	// raw filter values, part of the cursor scope
	action, source, resourceType string
	search                       searchScope
}

// searchScope is what since, until and q add to a cursor scope: the times
// in a canonical form (one instant, one scope), q as given.
type searchScope struct{ since, until, q string }

// parts returns the scope parts; none when the listing has no search, so
// that the cursors of listings without one keep their scope.
func (s searchScope) parts() []string {
	if s == (searchScope{}) {
		return nil
	}
	return []string{"since:" + s.since, "until:" + s.until, "q:" + s.q}
}

// parseSearch parses since, until and q (a search of kind) into w and sq.
func parseSearch(query Getter, kind search.Kind, w *auditstore.Window, sq *search.Query) (searchScope, error) {
	var sc searchScope
	var err error
	if w.Since, sc.since, err = parseTime("since", query("since")); err != nil {
		return sc, err
	}
	if w.Until, sc.until, err = parseTime("until", query("until")); err != nil {
		return sc, err
	}
	if w.Since != nil && w.Until != nil && !w.Since.Before(*w.Until) {
		return sc, badParam("until", "%s is not after since %s", sc.until, sc.since)
	}
	sc.q = query("q")
	if *sq, err = search.Parse(kind, sc.q); err != nil {
		return sc, badParam("q", "%s", strings.TrimPrefix(err.Error(), search.ErrSyntax.Error()+": "))
	}
	return sc, nil
}

// parseTime parses an RFC 3339 time with an offset; "" is no time.
func parseTime(name, v string) (*time.Time, string, error) {
	if v == "" {
		return nil, "", nil
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return nil, "", badParam(name, "%q is not an RFC 3339 time with an offset, such as 2026-01-02T15:04:05Z", v)
	}
	t = t.UTC()
	return &t, t.Format(time.RFC3339Nano), nil
}

// Getter returns a query or path parameter ("" when absent).
type Getter func(name string) string

func badParam(name, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrBadParam, name, fmt.Sprintf(format, args...))
}

// parseScope parses org_id and, withProject, project_id.
func parseScope(path Getter, withProject bool) (uuid.UUID, *uuid.UUID, error) {
	org, err := parseUUID("org_id", path("org_id"))
	if err != nil || !withProject {
		return org, nil, err
	}
	project, err := parseUUID("project_id", path("project_id"))
	if err != nil {
		return org, nil, err
	}
	return org, &project, nil
}

// ParseList parses the path and query parameters of a listing: action,
// source, resource_type, since, until, q, limit, cursor and wait_for.
func ParseList(path, query Getter, withProject bool) (ListParams, error) {
	var p ListParams
	var err error
	if p.OrgID, p.ProjectID, err = parseScope(path, withProject); err != nil {
		return p, err
	}
	if v := query("action"); v != "" {
		a, err := schemas.ParseAuditActionName(v)
		if err != nil {
			return p, badParam("action", "%s", filterMsg(err))
		}
		p.Action, p.action = &a, a.String()
	}
	if v := query("source"); v != "" {
		s, err := schemas.ParseAuditSourceName(v)
		if err != nil {
			return p, badParam("source", "%s", filterMsg(err))
		}
		p.Source, p.source = &s, s.String()
	}
	if v := query("resource_type"); v != "" {
		r, err := schemas.ParseResourceTypeName(v)
		if err != nil {
			return p, badParam("resource_type", "%s", filterMsg(err))
		}
		p.ResourceType, p.resourceType = &r, r.String()
	}
	if p.search, err = parseSearch(query, search.Audit, &p.Window, &p.Search); err != nil {
		return p, err
	}
	if p.Limit, err = parseLimit(query("limit")); err != nil {
		return p, err
	}
	p.Cursor = query("cursor")
	p.WaitFor, err = parseWaitFor(query("wait_for"))
	return p, err
}

// parseWaitFor parses wait_for: an event id (a UUID), or nil when absent.
func parseWaitFor(v string) (*uuid.UUID, error) {
	if v == "" {
		return nil, nil
	}
	id, err := parseUUID("wait_for", v)
	if err != nil {
		return nil, err
	}
	return &id, nil
}

func parseLimit(v string) (int, error) {
	if v == "" {
		return DefaultLimit, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, badParam("limit", "%q is not an integer", v)
	}
	if n < 1 || n > MaxLimit {
		return 0, badParam("limit", "%d is not between 1 and %d", n, MaxLimit)
	}
	return n, nil
}

// ExecParams are the parsed parameters of a tool execution listing.
type ExecParams struct {
	OrgID     uuid.UUID
	ProjectID *uuid.UUID
	Success   *bool
	// UserID keeps only the executions run for this end user.
	UserID *string
	// Window (since, until) bounds started_at; Search is the parsed q.
	auditstore.Window
	Search search.Query
	Limit  int
	Cursor string
	// WaitFor is as in ListParams (not part of the cursor scope).
	WaitFor *uuid.UUID
	success string
	search  searchScope
}

// ParseExecList parses the parameters of a tool execution listing: limit,
// cursor, success (true or false), user_id, since, until, q and wait_for.
func ParseExecList(path, query Getter, withProject bool) (ExecParams, error) {
	var p ExecParams
	var err error
	if p.OrgID, p.ProjectID, err = parseScope(path, withProject); err != nil {
		return p, err
	}
	switch v := query("success"); v {
	case "":
	case "true", "false":
		b := v == "true"
		p.Success, p.success = &b, v
	default:
		return p, badParam("success", "%q is not true or false", v)
	}
	if v := query("user_id"); v != "" {
		if len(v) > 256 {
			return p, badParam("user_id", "at most 256 characters")
		}
		// Copied: a query parameter views fasthttp's request memory,
		// reused once the request is answered, and an export's pages are
		// read with these parameters after its handler has returned.
		v = strings.Clone(v)
		p.UserID = &v
	}
	if p.search, err = parseSearch(query, search.Executions, &p.Window, &p.Search); err != nil {
		return p, err
	}
	if p.Limit, err = parseLimit(query("limit")); err != nil {
		return p, err
	}
	p.Cursor = query("cursor")
	p.WaitFor, err = parseWaitFor(query("wait_for"))
	return p, err
}

// Scope is the cursor scope of the listing.
func (p ExecParams) Scope(kind string) [scopeLen]byte {
	project := ""
	if p.ProjectID != nil {
		project = p.ProjectID.String()
	}
	user := ""
	if p.UserID != nil {
		user = "user:" + *p.UserID
	}
	return Scope(append([]string{kind, p.OrgID.String(), project, p.success, user}, p.search.parts()...)...)
}

func parseUUID(name, v string) (uuid.UUID, error) {
	if len(v) != 36 {
		return uuid.Nil, badParam(name, "%q is not a UUID", v)
	}
	u, err := uuid.Parse(v)
	if err != nil {
		return uuid.Nil, badParam(name, "%q is not a UUID", v)
	}
	return u, nil
}

// Scope is the cursor scope of the listing: the route kind, org, project and filters.
func (p ListParams) Scope(kind string) [scopeLen]byte {
	project := ""
	if p.ProjectID != nil {
		project = p.ProjectID.String()
	}
	return Scope(append([]string{kind, p.OrgID.String(), project, p.action, p.source, p.resourceType}, p.search.parts()...)...)
}

// Query parameters each listing takes; any other is refused.
var (
	AuditParams     = []string{"action", "source", "resource_type", "since", "until", "q", "cursor", "limit", "wait_for"}
	ExecutionParams = []string{"success", "user_id", "since", "until", "q", "cursor", "limit", "wait_for"}
)

// filterMsg is the message of a filter parse error without its sentinel's
// prefix (the parameter is named by badParam).
func filterMsg(err error) string {
	msg := err.Error()
	for _, sentinel := range []error{schemas.ErrUnknownEnum, schemas.ErrUnspecifiedFilter} {
		msg = strings.TrimPrefix(msg, sentinel.Error()+": ")
	}
	return msg
}
