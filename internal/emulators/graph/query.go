package graph

import (
	"errors"
	"net/http"
	"slices"
	"strings"

	"github.com/auditrail/auditrail/internal/emulators/graph/odata"
)

// query is a message list's $filter, $orderby and $search.
type query struct {
	filter *odata.Filter
	order  []odata.OrderKey
	search *odata.Search
}

// defaultOrder is Graph's order of a message list: newest received first.
var defaultOrder = []odata.OrderKey{{Path: "receivedDateTime", Desc: true}}

// parseQuery parses the request's query options and applies Graph's rules
// on combining them: $search refuses $orderby (SearchWithOrderBy) and
// $filter with $orderby must pass CheckInefficient (InefficientFilter).
func parseQuery(r *http.Request) (query, *odata.Error) {
	var q query
	fv, hasFilter := queryParam(r, "$filter")
	ov, hasOrder := queryParam(r, "$orderby")
	sv, hasSearch := queryParam(r, "$search")
	if hasSearch && hasOrder {
		return q, &odata.Error{Code: CodeSearchWithOrderBy, Message: "The query parameter '$orderBy' is not supported with '$search'."}
	}
	if hasSearch && hasFilter {
		// Graph's /messages does not combine $filter and $search (Microsoft
		// Q&A); the code and wording follow SearchWithOrderBy's.
		return q, &odata.Error{Code: CodeInvalidURLQuery, Message: "The query parameter '$filter' is not supported with '$search'."}
	}
	if hasFilter {
		f, err := odata.ParseFilter(fv)
		if err != nil {
			return q, asODataError(err)
		}
		q.filter = f
	}
	if hasOrder {
		keys, err := odata.ParseOrderBy(ov)
		if err != nil {
			return q, asODataError(err)
		}
		q.order = keys
		if err := odata.CheckInefficient(q.filter, keys); err != nil {
			return q, asODataError(err)
		}
	}
	if hasSearch {
		s, err := odata.ParseSearch(sv)
		if err != nil {
			return q, asODataError(err)
		}
		q.search = s
	}
	return q, nil
}

func asODataError(err error) *odata.Error {
	var oe *odata.Error
	if errors.As(err, &oe) {
		return oe
	}
	return &odata.Error{Code: CodeBadRequest, Message: err.Error()}
}

// run answers the messages that match, in the query's order (ties broken
// by receivedDateTime, newest first, then by id for a stable order).
func (q query) run(msgs []*message) []*message {
	out := msgs[:0:0]
	for _, m := range msgs {
		d := m.docLocked()
		if q.filter != nil && !q.filter.Match(d) {
			continue
		}
		if q.search != nil && !q.search.Match(d) {
			continue
		}
		out = append(out, m)
	}
	keys := q.order
	switch {
	case keys == nil && q.search == nil:
		// The default order, on the timestamps themselves (the same order
		// as Compare on their RFC 3339 strings, without parsing them).
		slices.SortFunc(out, func(a, b *message) int {
			if c := b.received.Compare(a.received); c != 0 {
				return c
			}
			return strings.Compare(a.immID, b.immID)
		})
		return capSearch(q, out)
	case keys == nil:
		slices.SortFunc(out, func(a, b *message) int {
			if c := b.sent.Compare(a.sent); c != 0 {
				return c
			}
			if c := b.received.Compare(a.received); c != 0 {
				return c
			}
			return strings.Compare(a.immID, b.immID)
		})
		return capSearch(q, out)
	}
	keys = append(slices.Clone(keys), defaultOrder...)
	slices.SortStableFunc(out, func(a, b *message) int {
		if c := odata.Compare(keys, a.docLocked(), b.docLocked()); c != 0 {
			return c
		}
		return strings.Compare(a.immID, b.immID)
	})
	return capSearch(q, out)
}

func capSearch(q query, out []*message) []*message {
	if q.search != nil && len(out) > maxSearchResults {
		out = out[:maxSearchResults]
	}
	return out
}

// maxSearchResults is the most a $search answers ("A $search request
// returns up to 1,000 results").
const maxSearchResults = 1000
