package graphapi

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
)

// idPath escapes one id as a path segment (ids of Graph hold + / = - _).
func idPath(id string) string { return url.PathEscape(id) }

// MessagesPath is the collection of every message of the mailbox, or of
// one folder (an id or a well-known name) when folder is not empty.
func MessagesPath(folder string) string {
	if folder == "" {
		return "/me/messages"
	}
	return "/me/mailFolders/" + idPath(folder) + "/messages"
}

// FoldersPath is the top-level folders, or a folder's child folders.
func FoldersPath(parent string) string {
	if parent == "" {
		return "/me/mailFolders"
	}
	return "/me/mailFolders/" + idPath(parent) + "/childFolders"
}

// AttachmentsPath is a message's attachments.
func AttachmentsPath(messageID string) string {
	return "/me/messages/" + idPath(messageID) + "/attachments"
}

// WithQuery joins a collection path and its query.
func WithQuery(path string, q Query) string {
	if e := q.Encode(); e != "" {
		return path + "?" + e
	}
	return path
}

// ListMessages answers one page of messages at rel (a collection path
// with its query, or a Relative next link); prefer adds Prefer values
// (PreferText for text bodies).
func (c *Client) ListMessages(ctx context.Context, rel string, prefer ...string) (*Page[Message], error) {
	var p Page[Message]
	if _, err := c.do(ctx, request{method: http.MethodGet, rel: rel, prefer: prefer}, &p); err != nil {
		return nil, err
	}
	return &p, nil
}

// ListFolders answers one page of mail folders at rel.
func (c *Client) ListFolders(ctx context.Context, rel string) (*Page[MailFolder], error) {
	var p Page[MailFolder]
	if _, err := c.do(ctx, request{method: http.MethodGet, rel: rel}, &p); err != nil {
		return nil, err
	}
	return &p, nil
}

// ListAttachments answers one page of attachment metadata at rel.
func (c *Client) ListAttachments(ctx context.Context, rel string) (*Page[Attachment], error) {
	var p Page[Attachment]
	if _, err := c.do(ctx, request{method: http.MethodGet, rel: rel}, &p); err != nil {
		return nil, err
	}
	return &p, nil
}

// GetMessage reads a message; bodyType is ContentText or ContentHTML (the
// Prefer outlook.body-content-type), "" for Graph's default.
func (c *Client) GetMessage(ctx context.Context, id, bodyType string, sel ...string) (*Message, error) {
	var prefer []string
	switch bodyType {
	case ContentText:
		prefer = []string{PreferText}
	case ContentHTML:
		prefer = []string{PreferHTML}
	case "":
	default:
		return nil, fmt.Errorf("%w: body type %q", ErrInvalidQuery, bodyType)
	}
	rel := "/me/messages/" + idPath(id)
	if len(sel) > 0 {
		rel = WithQuery(rel, Query{Select: sel})
	}
	var m Message
	if _, err := c.do(ctx, request{method: http.MethodGet, rel: rel, prefer: prefer}, &m); err != nil {
		return nil, err
	}
	return &m, nil
}

// CreateDraft creates a draft in Drafts (POST /me/messages, 201).
func (c *Client) CreateDraft(ctx context.Context, m NewMessage) (*Message, error) {
	var out Message
	if _, err := c.do(ctx, request{method: http.MethodPost, rel: "/me/messages", body: m}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// UpdateMessage patches a message (PATCH /me/messages/{id}) and answers it.
func (c *Client) UpdateMessage(ctx context.Context, id string, p MessagePatch) (*Message, error) {
	var out Message
	if _, err := c.do(ctx, request{method: http.MethodPatch, rel: "/me/messages/" + idPath(id), body: p}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Send sends a draft (POST /me/messages/{id}/send, 202 without a body).
func (c *Client) Send(ctx context.Context, id string) error {
	status, err := c.do(ctx, request{method: http.MethodPost, rel: "/me/messages/" + idPath(id) + "/send"}, nil)
	if err != nil {
		return err
	}
	if status != http.StatusAccepted && status != http.StatusNoContent && status != http.StatusOK {
		return fmt.Errorf("graph: send answered %d, want 202", status)
	}
	return nil
}

// CreateReply creates a reply draft (createReply, or createReplyAll when
// all) of a message, answering the draft (201).
func (c *Client) CreateReply(ctx context.Context, id string, all bool) (*Message, error) {
	action := "/createReply"
	if all {
		action = "/createReplyAll"
	}
	var out Message
	if _, err := c.do(ctx, request{method: http.MethodPost, rel: "/me/messages/" + idPath(id) + action, body: struct{}{}}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Me is the signed-in user's profile.
func (c *Client) Me(ctx context.Context) (*User, error) {
	var u User
	if _, err := c.do(ctx, request{method: http.MethodGet, rel: "/me"}, &u); err != nil {
		return nil, err
	}
	return &u, nil
}

// MailboxSettings are the user's mailbox settings.
func (c *Client) MailboxSettings(ctx context.Context) (*MailboxSettings, error) {
	var s MailboxSettings
	if _, err := c.do(ctx, request{method: http.MethodGet, rel: "/me/mailboxSettings"}, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// SearchValue is the $search value of a KQL query: Graph wants it in
// double quotes, and a double quote inside it escaped with a backslash.
func SearchValue(kql string) string {
	return `"` + strings.ReplaceAll(kql, `"`, `\"`) + `"`
}

// KQLPhrase is a KQL phrase: the value in double quotes. KQL has no escape
// inside a phrase: a double quote or backslash in the value becomes a
// space (neither is part of an indexed word, so matching is unchanged).
func KQLPhrase(v string) string {
	return `"` + strings.Map(func(r rune) rune {
		if r == '"' || r == '\\' {
			return ' '
		}
		return r
	}, v) + `"`
}
