package mail

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/auditrail/auditrail/toolrunner"
	"github.com/auditrail/auditrail/toolrunner/toolkits/mail/graphapi"
)

// searchKQL builds the KQL of SearchEmails: filters of different
// parameters joined with AND; within keywords every term must match (AND),
// within sender, recipient and attachment_name any value (OR). Values are
// KQL phrases (graphapi.KQLPhrase); dates are inclusive whole UTC days.
// It answers "" when no filter is given.
func searchKQL(in map[string]any) (string, error) {
	var parts []string
	anyOf := func(prop string, vs []string) {
		var terms []string
		for _, v := range vs {
			if v = strings.TrimSpace(v); v != "" {
				terms = append(terms, prop+":"+graphapi.KQLPhrase(v))
			}
		}
		switch len(terms) {
		case 0:
		case 1:
			parts = append(parts, terms[0])
		default:
			parts = append(parts, "("+strings.Join(terms, " OR ")+")")
		}
	}
	for _, k := range strs(in, "keywords") {
		if k = strings.TrimSpace(k); k != "" {
			parts = append(parts, graphapi.KQLPhrase(k))
		}
	}
	anyOf("from", strs(in, "sender"))
	anyOf("to", strs(in, "recipient"))
	anyOf("attachment", strs(in, "attachment_name"))
	if b, ok := in["has_attachments"].(bool); ok {
		parts = append(parts, "hasattachments:"+map[bool]string{true: "true", false: "false"}[b])
	}
	if imp := strings.ToLower(strings.TrimSpace(str(in, "importance"))); imp != "" {
		if !slices.Contains(Importances, imp) {
			return "", invalid("importance: %q is not one of low, normal, high", imp)
		}
		parts = append(parts, "importance:"+imp)
	}
	if b, ok := in["is_read"].(bool); ok {
		parts = append(parts, "isread:"+map[bool]string{true: "true", false: "false"}[b])
	}
	if cat := strings.TrimSpace(str(in, "category")); cat != "" {
		parts = append(parts, "category:"+graphapi.KQLPhrase(cat))
	}
	var after, before time.Time
	for _, d := range []struct {
		name, op string
		t        *time.Time
	}{{"received_after", ">=", &after}, {"received_before", "<=", &before}} {
		v := strings.TrimSpace(str(in, d.name))
		if v == "" {
			continue
		}
		t, err := time.Parse(time.DateOnly, v)
		if err != nil {
			return "", invalid("%s: %q is not a date YYYY-MM-DD", d.name, v)
		}
		*d.t = t
		parts = append(parts, "received"+d.op+t.Format(time.DateOnly))
	}
	if !after.IsZero() && !before.IsZero() && before.Before(after) {
		return "", invalid("received_before %s is before received_after %s", before.Format(time.DateOnly), after.Format(time.DateOnly))
	}
	return strings.Join(parts, " AND "), nil
}

// searchSelect adds the body (cut to 255 characters) to the list fields.
var searchSelect = append(slices.Clone(listSelect), "body")

func (t *Toolkit) searchEmails(ctx context.Context, c *graphapi.Client, call toolrunner.Call) (any, error) {
	kql, err := searchKQL(call.Inputs)
	if err != nil {
		return nil, err
	}
	q := graphapi.Query{Top: integer(call.Inputs, "limit"), Select: searchSelect}
	if kql != "" {
		// Graph sorts search results by date sent, newest first, and
		// refuses $orderby with $search.
		q.Search = graphapi.SearchValue(kql)
	} else {
		q.OrderBy = []graphapi.OrderBy{{Property: "sentDateTime", Desc: true}}
	}
	l := listing{tool: "SearchEmails", collection: graphapi.MessagesPath(""), query: q, what: "the mailbox"}
	rel, bind, err := l.rel(t, c, call)
	if err != nil {
		return nil, err
	}
	p, err := c.ListMessages(ctx, rel, graphapi.PreferText)
	if err != nil {
		return nil, apiError(err, l.what)
	}
	next, err := t.nextToken(c, l, bind, p.NextLink)
	if err != nil {
		return nil, apiError(err, l.what)
	}
	// is_read and category are checked on the answer too: KQL's isread:
	// and category: are not in Graph's documented list of searchable
	// message properties, so a Graph that ignored them must not widen the
	// answer (a page may then hold fewer than limit emails).
	p.Value = slices.DeleteFunc(p.Value, func(m graphapi.Message) bool { return !searchKeeps(call.Inputs, &m) })
	// Newest sent first within the page too (drafts, never sent, last).
	slices.SortStableFunc(p.Value, func(a, b graphapi.Message) int { return compareSent(b.SentDateTime, a.SentDateTime) })
	items := make([]any, len(p.Value))
	for i := range p.Value {
		m := &p.Value[i]
		e := summary(m)
		content := ""
		if m.Body != nil {
			content = m.Body.Content
			if strings.EqualFold(m.Body.ContentType, graphapi.ContentHTML) {
				content = htmlToText(content)
			}
		}
		part, _, remaining := cut(content, 0, SearchBodyCharacters)
		e["body"], e["body_truncated"] = part, remaining > 0
		items[i] = e
	}
	return page("emails", items, next), nil
}

// compareSent orders RFC 3339 times; an empty one (never sent) first.
func compareSent(a, b string) int {
	ta, ea := time.Parse(time.RFC3339Nano, a)
	tb, eb := time.Parse(time.RFC3339Nano, b)
	switch {
	case ea != nil && eb != nil:
		return 0
	case ea != nil:
		return -1
	case eb != nil:
		return 1
	}
	return ta.Compare(tb)
}

// searchKeeps: the message has the is_read and category asked for (the
// category name compared without regard to case).
func searchKeeps(in map[string]any, m *graphapi.Message) bool {
	if b, ok := in["is_read"].(bool); ok && m.IsRead != b {
		return false
	}
	if cat := strings.TrimSpace(str(in, "category")); cat != "" {
		return slices.ContainsFunc(m.Categories, func(c string) bool { return strings.EqualFold(strings.TrimSpace(c), cat) })
	}
	return true
}
