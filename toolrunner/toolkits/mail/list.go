package mail

import (
	"context"
	"strings"

	"github.com/auditrail/auditrail/toolrunner"
	"github.com/auditrail/auditrail/toolrunner/toolkits/mail/graphapi"
)

// sortKey answers the $orderby key of sort_by and sort_order.
func sortKey(in map[string]any) graphapi.OrderBy {
	k := graphapi.OrderBy{Property: "receivedDateTime", Desc: !strings.EqualFold(str(in, "sort_order"), "ascending")}
	switch strings.ToLower(str(in, "sort_by")) {
	case "subject":
		k.Property = "subject"
	case "sender_email_address":
		k.Property = "sender/emailAddress/address"
	case "importance":
		k.Property = "importance"
	}
	return k
}

// withSortProperty is the $filter of a listing filtered on filterProp and
// sorted by key: Graph answers InefficientFilter unless the $orderby
// properties come first in the $filter, so when they differ a clause on
// the sort property that every message with a value there satisfies is
// put first (graphapi.MatchAll).
func withSortProperty(filter, filterProp string, key graphapi.OrderBy) (string, error) {
	if filter == "" || filterProp == key.Property {
		return filter, nil
	}
	all, err := graphapi.MatchAll(key.Property)
	if err != nil {
		return "", err
	}
	if strings.Contains(filter, " or ") {
		filter = "(" + filter + ")"
	}
	return all + " and " + filter, nil
}

// listing is a collection request of a tool: where, what, and how its
// pages are bound.
type listing struct {
	tool       string
	collection string
	query      graphapi.Query
	what       string
}

// rel answers the request of the page asked for: the first, or the one a
// pagination token continues.
func (l listing) rel(t *Toolkit, c *graphapi.Client, call toolrunner.Call) (rel, bind string, err error) {
	bind = binding(call.UserID, c.Base(), l.tool, call.Inputs)
	if tok := str(call.Inputs, "pagination_token"); tok != "" {
		if rel, err = t.decodeToken(tok, bind, l); err != nil {
			return "", "", err
		}
		// Only a path under the connection's API base is ever requested.
		if _, err := c.Resolve(rel); err != nil {
			return "", "", invalid("pagination_token: not a token of this listing")
		}
		return rel, bind, nil
	}
	return graphapi.WithQuery(l.collection, l.query), bind, nil
}

func (t *Toolkit) listMessages(ctx context.Context, c *graphapi.Client, call toolrunner.Call, l listing, prefer ...string) (map[string]any, error) {
	rel, bind, err := l.rel(t, c, call)
	if err != nil {
		return nil, err
	}
	p, err := c.ListMessages(ctx, rel, prefer...)
	if err != nil {
		if graphCode(err) == "InefficientFilter" {
			return nil, invalid("Microsoft Graph cannot sort this filter by %s; sort by receivedDateTime or by the filtered property", str(call.Inputs, "sort_by"))
		}
		return nil, apiError(err, l.what)
	}
	next, err := t.nextToken(c, l, bind, p.NextLink)
	if err != nil {
		return nil, apiError(err, l.what)
	}
	items := make([]any, len(p.Value))
	for i := range p.Value {
		items[i] = summary(&p.Value[i])
	}
	return page("emails", items, next), nil
}

func (t *Toolkit) listEmails(ctx context.Context, c *graphapi.Client, call toolrunner.Call) (any, error) {
	q := graphapi.Query{OrderBy: []graphapi.OrderBy{sortKey(call.Inputs)}, Top: integer(call.Inputs, "limit"), Select: listSelect}
	return t.listMessages(ctx, c, call, listing{tool: "ListEmails", collection: graphapi.MessagesPath(""), query: q, what: "the mailbox"})
}

func (t *Toolkit) listEmailsByProperty(ctx context.Context, c *graphapi.Client, call toolrunner.Call) (any, error) {
	prop := str(call.Inputs, "mail_property")
	clause, err := graphapi.Clause(prop, str(call.Inputs, "operator"), str(call.Inputs, "value"))
	if err != nil {
		return nil, apiError(err, "")
	}
	canon, err := graphapi.SortProperty(prop)
	if err != nil {
		return nil, apiError(err, "")
	}
	key := sortKey(call.Inputs)
	filter, err := withSortProperty(clause, canon, key)
	if err != nil {
		return nil, apiError(err, "")
	}
	q := graphapi.Query{Filter: filter, OrderBy: []graphapi.OrderBy{key}, Top: integer(call.Inputs, "limit"), Select: listSelect}
	return t.listMessages(ctx, c, call, listing{tool: "ListEmailsByProperty", collection: graphapi.MessagesPath(""), query: q, what: "the mailbox"})
}

// Flag filters of the seed's starred and tasks, which are not Graph mail
// folders: starred is what Outlook's Flagged view shows (follow-up not
// done), tasks every email flagged for follow-up, done or not (Microsoft To
// Do's Flagged email list).
const (
	filterStarred = "flag/flagStatus eq 'flagged'"
	filterTasks   = "flag/flagStatus ne 'notFlagged'"
)

func (t *Toolkit) listEmailsInFolder(ctx context.Context, c *graphapi.Client, call toolrunner.Call) (any, error) {
	wk := strings.ToLower(strings.TrimSpace(str(call.Inputs, "well_known_folder_name")))
	fid := strings.TrimSpace(str(call.Inputs, "folder_id"))
	if (wk == "") == (fid == "") {
		return nil, invalid("give exactly one of well_known_folder_name and folder_id")
	}
	key := sortKey(call.Inputs)
	l := listing{tool: "ListEmailsInFolder", collection: graphapi.MessagesPath(wk), what: "folder " + quoteID(wk)}
	var filter string
	switch wk {
	case "starred", "tasks":
		filter = filterStarred
		if wk == "tasks" {
			filter = filterTasks
		}
		l.collection = graphapi.MessagesPath("")
	case "":
		folderID, err := id(call.Inputs, "folder_id")
		if err != nil {
			return nil, err
		}
		l.collection, l.what = graphapi.MessagesPath(folderID), "folder "+quoteID(folderID)
	}
	filter, err := withSortProperty(filter, "flag/flagStatus", key)
	if err != nil {
		return nil, apiError(err, "")
	}
	l.query = graphapi.Query{Filter: filter, OrderBy: []graphapi.OrderBy{key}, Top: integer(call.Inputs, "limit"), Select: listSelect}
	return t.listMessages(ctx, c, call, l)
}

func (t *Toolkit) listMailFolders(ctx context.Context, c *graphapi.Client, call toolrunner.Call) (any, error) {
	l := listing{tool: "ListMailFolders", collection: graphapi.FoldersPath(""), what: "the folders"}
	if strings.TrimSpace(str(call.Inputs, "parent_folder_id")) != "" {
		parent, err := id(call.Inputs, "parent_folder_id")
		if err != nil {
			return nil, err
		}
		l.collection, l.what = graphapi.FoldersPath(parent), "folder "+quoteID(parent)
	}
	l.query = graphapi.Query{Top: integer(call.Inputs, "limit")}
	if b, _ := call.Inputs["include_hidden"].(bool); b {
		l.query.Extra = [][2]string{{"includeHiddenFolders", "true"}}
	}
	rel, bind, err := l.rel(t, c, call)
	if err != nil {
		return nil, err
	}
	p, err := c.ListFolders(ctx, rel)
	if err != nil {
		return nil, apiError(err, l.what)
	}
	next, err := t.nextToken(c, l, bind, p.NextLink)
	if err != nil {
		return nil, apiError(err, l.what)
	}
	items := make([]any, len(p.Value))
	for i := range p.Value {
		items[i] = folder(&p.Value[i])
	}
	return page("folders", items, next), nil
}

var attachmentSelect = []string{"id", "name", "contentType", "size", "isInline", "lastModifiedDateTime"}

func (t *Toolkit) listEmailAttachments(ctx context.Context, c *graphapi.Client, call toolrunner.Call) (any, error) {
	mid, err := id(call.Inputs, "message_id")
	if err != nil {
		return nil, err
	}
	l := listing{tool: "ListEmailAttachments", collection: graphapi.AttachmentsPath(mid), what: messageWhat(mid),
		query: graphapi.Query{Top: integer(call.Inputs, "limit"), Select: attachmentSelect}}
	rel, bind, err := l.rel(t, c, call)
	if err != nil {
		return nil, err
	}
	p, err := c.ListAttachments(ctx, rel)
	if err != nil {
		return nil, apiError(err, l.what)
	}
	next, err := t.nextToken(c, l, bind, p.NextLink)
	if err != nil {
		return nil, apiError(err, l.what)
	}
	items := make([]any, len(p.Value))
	for i := range p.Value {
		items[i] = attachment(&p.Value[i])
	}
	return page("attachments", items, next), nil
}

func (t *Toolkit) getEmail(ctx context.Context, c *graphapi.Client, call toolrunner.Call) (any, error) {
	mid, err := id(call.Inputs, "message_id")
	if err != nil {
		return nil, err
	}
	asHTML := strings.EqualFold(str(call.Inputs, "body_format"), "html")
	bodyType := graphapi.ContentText
	if asHTML {
		bodyType = graphapi.ContentHTML
	}
	m, err := c.GetMessage(ctx, mid, bodyType)
	if err != nil {
		return nil, apiError(err, messageWhat(mid))
	}
	content := ""
	if m.Body != nil {
		content = m.Body.Content
		if !asHTML && strings.EqualFold(m.Body.ContentType, graphapi.ContentHTML) {
			content = htmlToText(content)
		}
	}
	maxChars := GetEmailDefaultCharacters
	if v, present := call.Inputs["max_body_characters"]; present {
		if v == nil {
			maxChars = -1
		} else {
			maxChars = integer(call.Inputs, "max_body_characters")
		}
	}
	offset := integer(call.Inputs, "body_offset")
	part, total, remaining := cut(content, offset, maxChars)
	out := details(m)
	out["body"] = part
	out["body_format"] = map[bool]string{true: "html", false: "plain_text"}[asHTML]
	out["body_offset"] = offset
	out["body_total_characters"] = total
	out["body_remaining_characters"] = remaining
	out["body_truncated"] = remaining > 0
	delete(out, "body_type")
	return out, nil
}

func (t *Toolkit) whoAmI(ctx context.Context, c *graphapi.Client, _ toolrunner.Call) (any, error) {
	u, err := c.Me(ctx)
	if err != nil {
		return nil, apiError(err, "the user's profile")
	}
	s, err := c.MailboxSettings(ctx)
	if err != nil {
		return nil, apiError(err, "the user's mailbox settings")
	}
	email := u.Mail
	if email == "" {
		email = u.UserPrincipalName
	}
	profile := map[string]any{"id": u.ID, "name": u.DisplayName, "email": email, "user_principal_name": u.UserPrincipalName,
		"given_name": nilIfEmpty(u.GivenName), "surname": nilIfEmpty(u.Surname), "job_title": nilIfEmpty(u.JobTitle),
		"office_location": nilIfEmpty(u.OfficeLocation), "mobile_phone": nilIfEmpty(u.MobilePhone),
		"business_phones": orEmpty(u.BusinessPhones), "preferred_language": nilIfEmpty(u.PreferredLanguage)}
	settings := map[string]any{"time_zone": nilIfEmpty(s.TimeZone), "date_format": nilIfEmpty(s.DateFormat),
		"time_format": nilIfEmpty(s.TimeFormat), "language": nil, "working_hours": s.WorkingHours}
	if s.Language != nil {
		settings["language"] = map[string]any{"locale": s.Language.Locale, "display_name": s.Language.DisplayName}
	}
	auto := map[string]any{"status": "disabled"}
	if a := s.AutomaticRepliesSetting; a != nil {
		auto = map[string]any{"status": a.Status, "external_audience": nilIfEmpty(a.ExternalAudience),
			"internal_reply_message": a.InternalReplyMessage, "external_reply_message": a.ExternalReplyMessage,
			"scheduled_start": dtz(a.ScheduledStartDateTime), "scheduled_end": dtz(a.ScheduledEndDateTime)}
	}
	return map[string]any{"profile": profile, "mailbox_settings": settings, "automatic_replies": auto}, nil
}

func dtz(d *graphapi.DateTimeTimeZone) any {
	if d == nil || d.DateTime == "" {
		return nil
	}
	return map[string]any{"date_time": d.DateTime, "time_zone": d.TimeZone}
}
