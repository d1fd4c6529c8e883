package mail

import (
	"context"
	"net/mail"
	"strings"
	"time"

	"github.com/auditrail/auditrail/internal/retry"
	"github.com/auditrail/auditrail/toolrunner"
	"github.com/auditrail/auditrail/toolrunner/toolkits/mail/graphapi"
)

// recipients parses the addresses of a parameter ("ann@example.com" or
// "Ann <ann@example.com>").
func recipients(in map[string]any, name string) ([]graphapi.Recipient, error) {
	vs := strs(in, name)
	out := make([]graphapi.Recipient, 0, len(vs))
	for i, v := range vs {
		a, err := mail.ParseAddress(strings.TrimSpace(v))
		if err != nil {
			return nil, invalid("%s[%d]: %q is not an email address", name, i, v)
		}
		out = append(out, graphapi.Recipient{EmailAddress: graphapi.EmailAddress{Name: a.Name, Address: a.Address}})
	}
	return out, nil
}

// newMessage is the draft of CreateDraftEmail and CreateAndSendEmail.
func newMessage(in map[string]any) (graphapi.NewMessage, error) {
	var m graphapi.NewMessage
	var err error
	if m.ToRecipients, err = recipients(in, "to_recipients"); err != nil {
		return m, err
	}
	if len(m.ToRecipients) == 0 {
		return m, invalid("to_recipients: give at least one address")
	}
	if m.CcRecipients, err = recipients(in, "cc_recipients"); err != nil {
		return m, err
	}
	if m.BccRecipients, err = recipients(in, "bcc_recipients"); err != nil {
		return m, err
	}
	m.Subject = str(in, "subject")
	m.Body = graphapi.ItemBody{ContentType: graphapi.ContentText, Content: str(in, "body")}
	if strings.EqualFold(str(in, "body_type"), "html") {
		m.Body.ContentType = graphapi.ContentHTML
	}
	return m, nil
}

func (t *Toolkit) createDraftEmail(ctx context.Context, c *graphapi.Client, call toolrunner.Call) (any, error) {
	m, err := newMessage(call.Inputs)
	if err != nil {
		return nil, err
	}
	d, err := c.CreateDraft(ctx, m)
	if err != nil {
		return nil, apiError(err, "the new draft")
	}
	return details(d), nil
}

// unsent reads a message and refuses one that is not un-sent (a draft,
// reply, reply-all or forward draft: Graph's isDraft), before any write.
func unsent(ctx context.Context, c *graphapi.Client, mid, action string) (*graphapi.Message, error) {
	m, err := c.GetMessage(ctx, mid, "")
	if err != nil {
		return nil, apiError(err, messageWhat(mid))
	}
	if !m.IsDraft {
		return nil, invalid("message %s is not an un-sent email (it was sent or received): only drafts, reply, reply-all and forward drafts can be %s", quoteID(mid), action)
	}
	return m, nil
}

// editRecipients applies the adds and removes of one list: addresses
// compared without regard to case; an address added twice is kept once.
func editRecipients(cur []graphapi.Recipient, add, remove []graphapi.Recipient) []graphapi.Recipient {
	out := make([]graphapi.Recipient, 0, len(cur)+len(add))
	has := func(rs []graphapi.Recipient, a string) bool {
		for _, r := range rs {
			if strings.EqualFold(r.EmailAddress.Address, a) {
				return true
			}
		}
		return false
	}
	for _, r := range cur {
		if !has(remove, r.EmailAddress.Address) {
			out = append(out, r)
		}
	}
	for _, r := range add {
		if !has(out, r.EmailAddress.Address) && !has(remove, r.EmailAddress.Address) {
			out = append(out, r)
		}
	}
	return out
}

func (t *Toolkit) updateDraftEmail(ctx context.Context, c *graphapi.Client, call toolrunner.Call) (any, error) {
	in := call.Inputs
	mid, err := id(in, "message_id")
	if err != nil {
		return nil, err
	}
	type edit struct {
		add, remove []graphapi.Recipient
		set         **[]graphapi.Recipient
		cur         func(*graphapi.Message) []graphapi.Recipient
	}
	var patch graphapi.MessagePatch
	edits := []edit{
		{set: &patch.ToRecipients, cur: func(m *graphapi.Message) []graphapi.Recipient { return m.ToRecipients }},
		{set: &patch.CcRecipients, cur: func(m *graphapi.Message) []graphapi.Recipient { return m.CcRecipients }},
		{set: &patch.BccRecipients, cur: func(m *graphapi.Message) []graphapi.Recipient { return m.BccRecipients }},
	}
	changes := 0
	for i, field := range []string{"to", "cc", "bcc"} {
		if edits[i].add, err = recipients(in, field+"_add"); err != nil {
			return nil, err
		}
		if edits[i].remove, err = recipients(in, field+"_remove"); err != nil {
			return nil, err
		}
		changes += len(edits[i].add) + len(edits[i].remove)
	}
	subject, hasSubject := in["subject"].(string)
	body, hasBody := in["body"].(string)
	if !hasSubject && !hasBody && changes == 0 {
		return nil, invalid("nothing to update: give subject, body or recipients to add or remove")
	}
	m, err := unsent(ctx, c, mid, "updated")
	if err != nil {
		return nil, err
	}
	if hasSubject {
		patch.Subject = &subject
	}
	if hasBody {
		b := replaceAboveQuote(m.Body, body)
		patch.Body = &b
	}
	for _, e := range edits {
		if len(e.add)+len(e.remove) > 0 {
			rs := editRecipients(e.cur(m), e.add, e.remove)
			*e.set = &rs
		}
	}
	u, err := c.UpdateMessage(ctx, mid, patch)
	if err != nil {
		return nil, apiError(err, messageWhat(mid))
	}
	return details(u), nil
}

// readBack reads a message just sent by its immutable id; Graph may take
// a moment to file it in Sent Items, so a not-found is retried briefly.
// When it stays unreadable, what was known before sending is answered,
// marked sent.
func readBack(ctx context.Context, c *graphapi.Client, mid string, before *graphapi.Message) map[string]any {
	var m *graphapi.Message
	_ = retry.Do(ctx, retry.Policy{Initial: 100 * time.Millisecond, Max: time.Second, MaxAttempts: 4}, func(ctx context.Context) error {
		var err error
		m, err = c.GetMessage(ctx, mid, "")
		if err != nil && graphCode(err) != "ErrorItemNotFound" {
			return retry.Permanent(err)
		}
		return err
	}, nil)
	if m == nil {
		m = before
		m.IsDraft = false
	}
	out := details(m)
	out["status"] = "sent"
	return out
}

func (t *Toolkit) sendDraftEmail(ctx context.Context, c *graphapi.Client, call toolrunner.Call) (any, error) {
	mid, err := id(call.Inputs, "message_id")
	if err != nil {
		return nil, err
	}
	m, err := unsent(ctx, c, mid, "sent")
	if err != nil {
		return nil, err
	}
	if len(m.ToRecipients)+len(m.CcRecipients)+len(m.BccRecipients) == 0 {
		return nil, invalid("message %s has no recipient: add some with UpdateDraftEmail first", quoteID(mid))
	}
	if err := c.Send(ctx, mid); err != nil {
		return nil, apiError(err, messageWhat(mid))
	}
	return readBack(ctx, c, mid, m), nil
}

func (t *Toolkit) createAndSendEmail(ctx context.Context, c *graphapi.Client, call toolrunner.Call) (any, error) {
	m, err := newMessage(call.Inputs)
	if err != nil {
		return nil, err
	}
	d, err := c.CreateDraft(ctx, m)
	if err != nil {
		return nil, apiError(err, "the new email")
	}
	if err := c.Send(ctx, d.ID); err != nil {
		te := toolrunner.AsError(apiError(err, messageWhat(d.ID)))
		te.Message += "; the email was saved as draft " + quoteID(d.ID) + " and not sent: send it with SendDraftEmail"
		return nil, te
	}
	return readBack(ctx, c, d.ID, d), nil
}

func (t *Toolkit) replyToEmail(ctx context.Context, c *graphapi.Client, call toolrunner.Call) (any, error) {
	mid, err := id(call.Inputs, "message_id")
	if err != nil {
		return nil, err
	}
	all := strings.EqualFold(str(call.Inputs, "reply_type"), "reply_all")
	d, err := c.CreateReply(ctx, mid, all)
	if err != nil {
		return nil, apiError(err, messageWhat(mid))
	}
	body := replaceAboveQuote(d.Body, str(call.Inputs, "body"))
	if _, err := c.UpdateMessage(ctx, d.ID, graphapi.MessagePatch{Body: &body}); err != nil {
		te := toolrunner.AsError(apiError(err, messageWhat(d.ID)))
		te.Message += "; the reply draft " + quoteID(d.ID) + " was created and not sent"
		return nil, te
	}
	if err := c.Send(ctx, d.ID); err != nil {
		te := toolrunner.AsError(apiError(err, messageWhat(d.ID)))
		te.Message += "; the reply was saved as draft " + quoteID(d.ID) + " and not sent: send it with SendDraftEmail"
		return nil, te
	}
	return readBack(ctx, c, d.ID, d), nil
}
