package mail

import (
	"github.com/auditrail/auditrail/toolrunner/toolkits/mail/graphapi"
)

// listSelect are the message properties the list tools read.
var listSelect = []string{"id", "conversationId", "subject", "from", "sender", "toRecipients", "ccRecipients",
	"receivedDateTime", "sentDateTime", "isRead", "isDraft", "hasAttachments", "importance", "categories", "flag",
	"parentFolderId", "bodyPreview", "webLink"}

func address(r *graphapi.Recipient) any {
	if r == nil || r.EmailAddress.Address == "" && r.EmailAddress.Name == "" {
		return nil
	}
	return map[string]any{"name": r.EmailAddress.Name, "address": r.EmailAddress.Address}
}

func addresses(rs []graphapi.Recipient) []any {
	out := make([]any, 0, len(rs))
	for i := range rs {
		if a := address(&rs[i]); a != nil {
			out = append(out, a)
		}
	}
	return out
}

func orEmpty(ss []string) []string {
	if ss == nil {
		return []string{}
	}
	return ss
}

func nilIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// summary is an email as the list tools answer it.
func summary(m *graphapi.Message) map[string]any {
	flag := "notFlagged"
	if m.Flag != nil && m.Flag.FlagStatus != "" {
		flag = m.Flag.FlagStatus
	}
	from := m.From
	if from == nil {
		from = m.Sender
	}
	return map[string]any{
		"id": m.ID, "conversation_id": m.ConversationID, "subject": m.Subject,
		"from": address(from), "to": addresses(m.ToRecipients), "cc": addresses(m.CcRecipients),
		"received_at": nilIfEmpty(m.ReceivedDateTime), "sent_at": nilIfEmpty(m.SentDateTime),
		"is_read": m.IsRead, "is_draft": m.IsDraft, "has_attachments": m.HasAttachments,
		"importance": m.Importance, "categories": orEmpty(m.Categories), "flag_status": flag,
		"folder_id": m.ParentFolderID, "body_preview": m.BodyPreview, "web_link": nilIfEmpty(m.WebLink),
	}
}

// details is an email with everything a compose tool answers: the
// summary, Bcc, reply-to, the body and the message id of the internet.
func details(m *graphapi.Message) map[string]any {
	out := summary(m)
	out["bcc"] = addresses(m.BccRecipients)
	out["reply_to"] = addresses(m.ReplyTo)
	out["internet_message_id"] = nilIfEmpty(m.InternetMessageID)
	out["created_at"] = nilIfEmpty(m.CreatedDateTime)
	out["last_modified_at"] = nilIfEmpty(m.LastModifiedDateTime)
	if m.Body != nil {
		out["body"] = m.Body.Content
		out["body_type"] = m.Body.ContentType
	}
	return out
}

func folder(f *graphapi.MailFolder) map[string]any {
	return map[string]any{"id": f.ID, "name": f.DisplayName, "parent_folder_id": f.ParentFolderID,
		"child_folder_count": f.ChildFolderCount, "unread_count": f.UnreadItemCount, "total_count": f.TotalItemCount,
		"is_hidden": f.IsHidden}
}

func attachment(a *graphapi.Attachment) map[string]any {
	kind := "file"
	switch a.ODataType {
	case "#microsoft.graph.itemAttachment":
		kind = "item"
	case "#microsoft.graph.referenceAttachment":
		kind = "reference"
	}
	return map[string]any{"id": a.ID, "name": a.Name, "content_type": a.ContentType, "size": a.Size,
		"is_inline": a.IsInline, "last_modified": nilIfEmpty(a.LastModifiedDateTime), "kind": kind}
}
