package mail

import (
	"strconv"
	"strings"

	"github.com/auditrail/auditrail/toolrunner"
)

// ServiceDomain of every tool, as the issue spells it.
const ServiceDomain = "EMAIL"

// Limits of seeds/002.
const (
	ListDefaultLimit       = 10
	ListMaxLimit           = 100
	AttachmentDefaultLimit = 25
	AttachmentMaxLimit     = 100
	FolderDefaultLimit     = 25
	FolderMaxLimit         = 100
	SearchDefaultLimit     = 10
	SearchMaxLimit         = 25
	// SearchBodyCharacters is where SearchEmails cuts bodies.
	SearchBodyCharacters = 255
	// GetEmailDefaultCharacters is GetEmail's default body cap.
	GetEmailDefaultCharacters = 5000
)

// Values of the enum parameters (seeds/002; the seed's upper-case
// spellings, PLAIN_TEXT or REPLY_ALL, are accepted too: enums compare
// without regard to case).
var (
	SortByValues     = []string{"receivedDateTime", "subject", "sender_email_address", "importance"}
	SortOrderValues  = []string{"ascending", "descending"}
	MailProperties   = []string{"subject", "conversationId", "receivedDateTime", "sender/emailAddress/address", "isRead", "hasAttachments", "importance", "flag/flagStatus"}
	FilterOperators  = []string{"eq", "ne", "gt", "ge", "lt", "le", "startsWith", "endsWith", "contains"}
	WellKnownFolders = []string{"deleteditems", "drafts", "inbox", "junkemail", "sentitems", "starred", "tasks"}
	BodyFormats      = []string{"plain_text", "html"}
	BodyTypes        = []string{"text", "html"}
	ReplyTypes       = []string{"reply", "reply_all"}
	Importances      = []string{"low", "normal", "high"}
)

func i64(v int64) *int64 { return &v }

func itoa(v int64) string { return strconv.FormatInt(v, 10) }

// hints are the execution hints (the seed does not give them).
type hints struct {
	ops                               []string
	readOnly, destructive, idempotent bool
}

var (
	hintRead = hints{ops: []string{"read"}, readOnly: true, idempotent: true}
	// Drafts: nothing leaves the mailbox, nothing existing is lost.
	hintCreateDraft = hints{ops: []string{"create"}}
	hintUpdateDraft = hints{ops: []string{"read", "update"}, idempotent: true}
	// Sending cannot be undone and a second call sends a second email.
	hintSendDraft = hints{ops: []string{"read", "update"}, destructive: true}
	hintSendNew   = hints{ops: []string{"create"}, destructive: true}
	hintReply     = hints{ops: []string{"read", "create"}, destructive: true}
)

// Scope sets (least privilege per tool): reading needs Mail.Read; drafts
// Mail.ReadWrite; SendDraftEmail reads the draft first (Mail.ReadWrite)
// then sends (Mail.Send); CreateAndSendEmail and ReplyToEmail go through a
// draft that is then sent, so that the sent message's details can be
// answered (Mail.ReadWrite + Mail.Send); WhoAmI reads the profile and the
// mailbox settings.
var (
	scopesRead   = []string{ScopeMailRead}
	scopesDraft  = []string{ScopeMailReadWrite}
	scopesSend   = []string{ScopeMailReadWrite, ScopeMailSend}
	scopesWhoAmI = []string{ScopeUserRead, ScopeMailboxSettingsRead}
)

func def(name, desc string, h hints, scopes []string, params ...toolrunner.Param) toolrunner.Definition {
	if params == nil {
		params = []toolrunner.Param{}
	}
	return toolrunner.Definition{
		Toolkit: Name, Name: name, Version: Version, Description: desc, Parameters: params,
		Output: toolrunner.Output{Type: toolrunner.TypeJSON},
		Metadata: toolrunner.Metadata{
			Classification: toolrunner.Classification{ServiceDomains: []string{ServiceDomain}},
			Behavior: toolrunner.Behavior{Operations: h.ops, ReadOnly: h.readOnly, Destructive: h.destructive,
				Idempotent: h.idempotent, OpenWorld: true},
		},
		Requirements: toolrunner.Requirements{
			Authorization: []toolrunner.AuthRequirement{{ProviderType: Provider, ProviderID: Provider, Scopes: scopes}},
			Secrets:       []toolrunner.SecretRequirement{},
		},
	}
}

var (
	pMessageID = func(desc string) toolrunner.Param {
		return toolrunner.Param{Name: "message_id", Type: toolrunner.TypeString, Required: true, Description: desc}
	}
	pToken = toolrunner.Param{Name: "pagination_token", Type: toolrunner.TypeString,
		Description: "The pagination_token of the previous answer, to get the next page; valid only with the same other parameters."}
)

func limitParam(def, max int64, what string) toolrunner.Param {
	return toolrunner.Param{Name: "limit", Type: toolrunner.TypeInteger, Default: def, Minimum: i64(1), Maximum: i64(max),
		Description: what + " per page (1 to " + itoa(max) + ", default " + itoa(def) + ")."}
}

// listParams are sort_by, sort_order, limit and pagination_token.
func listParams() []toolrunner.Param {
	return []toolrunner.Param{
		{Name: "sort_by", Type: toolrunner.TypeString, Default: "receivedDateTime", Enum: SortByValues,
			Description: "Sort key: receivedDateTime (default), subject, sender_email_address or importance."},
		{Name: "sort_order", Type: toolrunner.TypeString, Default: "descending", Enum: SortOrderValues,
			Description: "ascending or descending (default: newest first)."},
		limitParam(ListDefaultLimit, ListMaxLimit, "Emails"),
		pToken,
	}
}

const emailFields = "Each email has id, conversation_id, subject, from, to, cc, received_at, sent_at, is_read, is_draft, has_attachments, importance, categories, flag_status, folder_id and body_preview."

func recipientParams() []toolrunner.Param {
	return []toolrunner.Param{
		{Name: "subject", Type: toolrunner.TypeString, Required: true, Description: "Subject."},
		{Name: "body", Type: toolrunner.TypeString, Required: true, Description: "Body, as text or HTML per body_type."},
		{Name: "to_recipients", Type: toolrunner.TypeArrayString, Required: true, Description: "Email addresses of the To recipients (at least one)."},
		{Name: "cc_recipients", Type: toolrunner.TypeArrayString, Description: "Email addresses of the Cc recipients."},
		{Name: "bcc_recipients", Type: toolrunner.TypeArrayString, Description: "Email addresses of the Bcc recipients."},
		{Name: "body_type", Type: toolrunner.TypeString, Default: "text", Enum: BodyTypes, Description: "text (default) or html."},
	}
}

func defListEmails() toolrunner.Definition {
	return def("ListEmails", "List the emails of every folder of the user's mailbox (sent items and drafts included), newest first by default; answers emails, count, pagination_token and has_more. "+emailFields,
		hintRead, scopesRead, listParams()...)
}

func defListEmailsByProperty() toolrunner.Definition {
	return def("ListEmailsByProperty", "List the emails of every folder whose property compares to a value (mail_property operator value), sorted as asked; answers emails, count, pagination_token and has_more. "+
		"Values are typed by the property: isRead and hasAttachments take true or false with eq or ne; importance (low, normal, high) and flag/flagStatus (notFlagged, flagged, complete) take eq or ne; "+
		"receivedDateTime takes a date (2026-01-31, a whole UTC day) or a date and time with offset and no text operators; the other properties are text, compared as text even when the value looks like a number. "+
		"Sorting by another property than the filtered one is done by filtering on the sort property too, as Graph requires; when sorting by sender_email_address, emails without a sender (never-sent drafts) are left out. "+emailFields,
		hintRead, scopesRead, append([]toolrunner.Param{
			{Name: "mail_property", Type: toolrunner.TypeString, Required: true, Enum: MailProperties, Description: "Property compared: " + strings.Join(MailProperties, ", ") + "."},
			{Name: "operator", Type: toolrunner.TypeString, Required: true, Enum: FilterOperators, Description: "Comparison: " + strings.Join(FilterOperators, ", ") + "."},
			{Name: "value", Type: toolrunner.TypeString, Required: true, Description: "Value compared with."},
		}, listParams()...)...)
}

func defListEmailsInFolder() toolrunner.Definition {
	return def("ListEmailsInFolder", "List the emails of one folder, given by exactly one of well_known_folder_name and folder_id; answers emails, count, pagination_token and has_more. "+
		"starred lists the flagged emails of every folder (flag status flagged: follow-up not done, Outlook's Flagged view); tasks lists every email flagged for follow-up in any folder, done (complete) or not, as Microsoft To Do's Flagged email list does. "+emailFields,
		hintRead, scopesRead, append([]toolrunner.Param{
			{Name: "well_known_folder_name", Type: toolrunner.TypeString, Enum: WellKnownFolders, Description: "One of " + strings.Join(WellKnownFolders, ", ") + "."},
			{Name: "folder_id", Type: toolrunner.TypeString, Description: "Folder id (ListMailFolders lists them) when the folder is not a well-known one."},
		}, listParams()...)...)
}

func defListMailFolders() toolrunner.Definition {
	return def("ListMailFolders", "List the mail folders (top level, or the children of parent_folder_id) with id, name, parent_folder_id, child_folder_count, unread_count, total_count and is_hidden; answers folders, count, pagination_token and has_more.",
		hintRead, scopesRead,
		toolrunner.Param{Name: "parent_folder_id", Type: toolrunner.TypeString, Description: "List this folder's child folders; omitted: the top-level folders."},
		toolrunner.Param{Name: "include_hidden", Type: toolrunner.TypeBoolean, Default: false, Description: "Also list hidden folders; default false."},
		limitParam(FolderDefaultLimit, FolderMaxLimit, "Folders"), pToken)
}

func defGetEmail() toolrunner.Definition {
	return def("GetEmail", "Read one email: its metadata and body. plain_text (PLAIN_TEXT, the default) strips the markup of HTML bodies (scripts and styles dropped, line breaks kept); html (HTML) answers the original markup. "+
		"The body is cut to max_body_characters characters from body_offset; body_total_characters and body_remaining_characters say what is left (read on with body_offset = body_offset + max_body_characters).",
		hintRead, scopesRead, pMessageID("The email's id."),
		toolrunner.Param{Name: "body_format", Type: toolrunner.TypeString, Default: "plain_text", Enum: BodyFormats, Description: "plain_text (default) or html."},
		toolrunner.Param{Name: "max_body_characters", Type: toolrunner.TypeInteger, Default: int64(GetEmailDefaultCharacters), Minimum: i64(1), Nullable: true,
			Description: "Characters of the body answered (default 5000); null answers the whole body."},
		toolrunner.Param{Name: "body_offset", Type: toolrunner.TypeInteger, Default: int64(0), Minimum: i64(0), Description: "Character offset where the answered body starts; default 0."})
}

func defListEmailAttachments() toolrunner.Definition {
	return def("ListEmailAttachments", "List the attachments of an email: id, name, content_type, size (bytes), is_inline, last_modified (metadata only, never the content); answers attachments, count, pagination_token and has_more.",
		hintRead, scopesRead, pMessageID("The email's id."), limitParam(AttachmentDefaultLimit, AttachmentMaxLimit, "Attachments"), pToken)
}

func defSearchEmails() toolrunner.Definition {
	return def("SearchEmails", "Search every folder: all given filters must match (AND); within keywords every term must match, within sender, recipient and attachment_name any value may match. "+
		"Newest sent first; bodies are cut to 255 characters. Answers emails (each with body and body_truncated), count, pagination_token and has_more. "+emailFields,
		hintRead, scopesRead,
		toolrunner.Param{Name: "keywords", Type: toolrunner.TypeArrayString, Description: "Words or phrases searched in subject, body and sender; all must match."},
		toolrunner.Param{Name: "sender", Type: toolrunner.TypeArrayString, Description: "Sender address, display name or alias; any matches."},
		toolrunner.Param{Name: "recipient", Type: toolrunner.TypeArrayString, Description: "To-recipient address or display name; any matches."},
		toolrunner.Param{Name: "attachment_name", Type: toolrunner.TypeArrayString, Description: "Attachment file names; any matches."},
		toolrunner.Param{Name: "has_attachments", Type: toolrunner.TypeBoolean, Description: "true: only emails with attachments, false: only without; omitted: no filter."},
		toolrunner.Param{Name: "importance", Type: toolrunner.TypeString, Enum: Importances, Description: "low, normal or high."},
		toolrunner.Param{Name: "is_read", Type: toolrunner.TypeBoolean, Description: "true: read emails, false: unread ones."},
		toolrunner.Param{Name: "category", Type: toolrunner.TypeString, Description: "A user-defined category name."},
		toolrunner.Param{Name: "received_after", Type: toolrunner.TypeString, Description: "Date YYYY-MM-DD (UTC), inclusive."},
		toolrunner.Param{Name: "received_before", Type: toolrunner.TypeString, Description: "Date YYYY-MM-DD (UTC), inclusive."},
		limitParam(SearchDefaultLimit, SearchMaxLimit, "Emails"), pToken)
}

func defCreateDraftEmail() toolrunner.Definition {
	return def("CreateDraftEmail", "Create a draft in the Drafts folder (nothing is sent); answers the draft's details, its id among them (for UpdateDraftEmail and SendDraftEmail).",
		hintCreateDraft, scopesDraft, recipientParams()...)
}

func defUpdateDraftEmail() toolrunner.Definition {
	return def("UpdateDraftEmail", "Update an un-sent email (a draft, or a reply, reply-all or forward draft): subject and body are overwritten when given, recipients added or removed by address (case-insensitive). "+
		"The body is written in the draft's format; in a reply or forward draft the new text replaces what is above the quoted original, which is kept. A sent email is refused. Answers the updated email's details.",
		hintUpdateDraft, scopesDraft, pMessageID("The un-sent email's id."),
		toolrunner.Param{Name: "subject", Type: toolrunner.TypeString, Description: "New subject."},
		toolrunner.Param{Name: "body", Type: toolrunner.TypeString, Description: "New body text (above the quoted original of a reply or forward)."},
		toolrunner.Param{Name: "to_add", Type: toolrunner.TypeArrayString, Description: "Addresses added to To."},
		toolrunner.Param{Name: "to_remove", Type: toolrunner.TypeArrayString, Description: "Addresses removed from To."},
		toolrunner.Param{Name: "cc_add", Type: toolrunner.TypeArrayString, Description: "Addresses added to Cc."},
		toolrunner.Param{Name: "cc_remove", Type: toolrunner.TypeArrayString, Description: "Addresses removed from Cc."},
		toolrunner.Param{Name: "bcc_add", Type: toolrunner.TypeArrayString, Description: "Addresses added to Bcc."},
		toolrunner.Param{Name: "bcc_remove", Type: toolrunner.TypeArrayString, Description: "Addresses removed from Bcc."})
}

func defSendDraftEmail() toolrunner.Definition {
	return def("SendDraftEmail", "Send an un-sent email (a draft, or a reply, reply-all or forward draft); a sent email is refused. Answers the sent email's details (same id).",
		hintSendDraft, scopesSend, pMessageID("The un-sent email's id."))
}

func defCreateAndSendEmail() toolrunner.Definition {
	return def("CreateAndSendEmail", "Compose and send an email at once (through a draft that is sent at once, kept in Sent Items); answers the sent email's details.",
		hintSendNew, scopesSend, recipientParams()...)
}

func defReplyToEmail() toolrunner.Definition {
	return def("ReplyToEmail", "Reply to an email: reply (REPLY, the default) goes to its sender, reply_all (REPLY_ALL) to the sender and every recipient; the body is written above the quoted original. Answers the sent reply's details.",
		hintReply, scopesSend, pMessageID("The email replied to."),
		toolrunner.Param{Name: "body", Type: toolrunner.TypeString, Required: true, Description: "Text of the reply."},
		toolrunner.Param{Name: "reply_type", Type: toolrunner.TypeString, Default: "reply", Enum: ReplyTypes, Description: "reply (default) or reply_all."})
}

func defWhoAmI() toolrunner.Definition {
	return def("WhoAmI", "Answer the user's profile (name, email, job title, …) and mailbox environment: time zone, language, date and time formats, working hours and the automatic replies configuration.",
		hintRead, scopesWhoAmI)
}
