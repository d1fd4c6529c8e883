package graphapi

import "fmt"

// The resources of Microsoft Graph v1.0 the mail toolkit uses, with Graph's
// JSON field names (message, recipient, itemBody, followupFlag, mailFolder,
// attachment, user, mailboxSettings resource types).

// EmailAddress is Graph's emailAddress.
type EmailAddress struct {
	Name    string `json:"name,omitempty"`
	Address string `json:"address"`
}

// Recipient is Graph's recipient.
type Recipient struct {
	EmailAddress EmailAddress `json:"emailAddress"`
}

// ItemBody is Graph's itemBody; ContentType is "text" or "html".
type ItemBody struct {
	ContentType string `json:"contentType"`
	Content     string `json:"content"`
}

// Body content types.
const (
	ContentText = "text"
	ContentHTML = "html"
)

// DateTimeTimeZone is Graph's dateTimeTimeZone.
type DateTimeTimeZone struct {
	DateTime string `json:"dateTime"`
	TimeZone string `json:"timeZone"`
}

// FollowupFlag is Graph's followupFlag; FlagStatus is notFlagged, flagged
// or complete.
type FollowupFlag struct {
	FlagStatus        string            `json:"flagStatus"`
	StartDateTime     *DateTimeTimeZone `json:"startDateTime,omitempty"`
	DueDateTime       *DateTimeTimeZone `json:"dueDateTime,omitempty"`
	CompletedDateTime *DateTimeTimeZone `json:"completedDateTime,omitempty"`
}

// Message is Graph's message (the properties the toolkit reads).
type Message struct {
	ID                   string        `json:"id,omitempty"`
	CreatedDateTime      string        `json:"createdDateTime,omitempty"`
	LastModifiedDateTime string        `json:"lastModifiedDateTime,omitempty"`
	ReceivedDateTime     string        `json:"receivedDateTime,omitempty"`
	SentDateTime         string        `json:"sentDateTime,omitempty"`
	HasAttachments       bool          `json:"hasAttachments"`
	InternetMessageID    string        `json:"internetMessageId,omitempty"`
	Subject              string        `json:"subject"`
	BodyPreview          string        `json:"bodyPreview,omitempty"`
	Importance           string        `json:"importance,omitempty"`
	ParentFolderID       string        `json:"parentFolderId,omitempty"`
	ConversationID       string        `json:"conversationId,omitempty"`
	IsRead               bool          `json:"isRead"`
	IsDraft              bool          `json:"isDraft"`
	WebLink              string        `json:"webLink,omitempty"`
	Body                 *ItemBody     `json:"body,omitempty"`
	Sender               *Recipient    `json:"sender,omitempty"`
	From                 *Recipient    `json:"from,omitempty"`
	ToRecipients         []Recipient   `json:"toRecipients"`
	CcRecipients         []Recipient   `json:"ccRecipients"`
	BccRecipients        []Recipient   `json:"bccRecipients"`
	ReplyTo              []Recipient   `json:"replyTo,omitempty"`
	Flag                 *FollowupFlag `json:"flag,omitempty"`
	Categories           []string      `json:"categories"`
}

// NewMessage is the body of POST /me/messages (a new draft).
type NewMessage struct {
	Subject       string      `json:"subject"`
	Body          ItemBody    `json:"body"`
	ToRecipients  []Recipient `json:"toRecipients"`
	CcRecipients  []Recipient `json:"ccRecipients,omitempty"`
	BccRecipients []Recipient `json:"bccRecipients,omitempty"`
}

// MessagePatch is the body of PATCH /me/messages/{id}: only the non-nil
// fields are written.
type MessagePatch struct {
	Subject       *string      `json:"subject,omitempty"`
	Body          *ItemBody    `json:"body,omitempty"`
	ToRecipients  *[]Recipient `json:"toRecipients,omitempty"`
	CcRecipients  *[]Recipient `json:"ccRecipients,omitempty"`
	BccRecipients *[]Recipient `json:"bccRecipients,omitempty"`
}

// MailFolder is Graph's mailFolder.
type MailFolder struct {
	ID               string `json:"id"`
	DisplayName      string `json:"displayName"`
	ParentFolderID   string `json:"parentFolderId,omitempty"`
	ChildFolderCount int    `json:"childFolderCount"`
	UnreadItemCount  int    `json:"unreadItemCount"`
	TotalItemCount   int    `json:"totalItemCount"`
	IsHidden         bool   `json:"isHidden"`
}

// Attachment is the metadata of Graph's attachment (no contentBytes).
type Attachment struct {
	ODataType            string `json:"@odata.type,omitempty"`
	ID                   string `json:"id"`
	Name                 string `json:"name"`
	ContentType          string `json:"contentType,omitempty"`
	Size                 int64  `json:"size"`
	IsInline             bool   `json:"isInline"`
	LastModifiedDateTime string `json:"lastModifiedDateTime,omitempty"`
}

// User is Graph's user (the /me profile).
type User struct {
	ID                string   `json:"id"`
	DisplayName       string   `json:"displayName"`
	GivenName         string   `json:"givenName,omitempty"`
	Surname           string   `json:"surname,omitempty"`
	Mail              string   `json:"mail,omitempty"`
	UserPrincipalName string   `json:"userPrincipalName,omitempty"`
	JobTitle          string   `json:"jobTitle,omitempty"`
	OfficeLocation    string   `json:"officeLocation,omitempty"`
	MobilePhone       string   `json:"mobilePhone,omitempty"`
	BusinessPhones    []string `json:"businessPhones,omitempty"`
	PreferredLanguage string   `json:"preferredLanguage,omitempty"`
}

// AutomaticRepliesSetting is Graph's automaticRepliesSetting.
type AutomaticRepliesSetting struct {
	Status                 string            `json:"status"`
	ExternalAudience       string            `json:"externalAudience,omitempty"`
	ScheduledStartDateTime *DateTimeTimeZone `json:"scheduledStartDateTime,omitempty"`
	ScheduledEndDateTime   *DateTimeTimeZone `json:"scheduledEndDateTime,omitempty"`
	InternalReplyMessage   string            `json:"internalReplyMessage,omitempty"`
	ExternalReplyMessage   string            `json:"externalReplyMessage,omitempty"`
}

// LocaleInfo is Graph's localeInfo.
type LocaleInfo struct {
	Locale      string `json:"locale"`
	DisplayName string `json:"displayName,omitempty"`
}

// MailboxSettings is Graph's mailboxSettings; WorkingHours is kept as
// Graph gives it.
type MailboxSettings struct {
	TimeZone                string                   `json:"timeZone,omitempty"`
	Language                *LocaleInfo              `json:"language,omitempty"`
	DateFormat              string                   `json:"dateFormat,omitempty"`
	TimeFormat              string                   `json:"timeFormat,omitempty"`
	UserPurpose             any                      `json:"userPurpose,omitempty"`
	WorkingHours            map[string]any           `json:"workingHours,omitempty"`
	AutomaticRepliesSetting *AutomaticRepliesSetting `json:"automaticRepliesSetting,omitempty"`
}

// Page is one page of a Graph collection; Count is @odata.count, which
// Graph sends when $count=true was asked for.
type Page[T any] struct {
	Value    []T    `json:"value"`
	NextLink string `json:"@odata.nextLink,omitempty"`
	Count    *int64 `json:"@odata.count,omitempty"`
}

// MaxCount bounds the counts an answer may hold (@odata.count, a folder's
// item counts): far above any mailbox, far below what could size anything.
const MaxCount = 1 << 31

// checker is an answer that verifies the numbers it took from Graph.
type checker interface{ check() error }

func (p *Page[T]) check() error {
	if p.Count != nil && (*p.Count < int64(len(p.Value)) || *p.Count > MaxCount) {
		return fmt.Errorf("%w: @odata.count %d for %d items", ErrInvalidAnswer, *p.Count, len(p.Value))
	}
	for i := range p.Value {
		if c, ok := any(&p.Value[i]).(checker); ok {
			if err := c.check(); err != nil {
				return err
			}
		}
	}
	return nil
}

func (f *MailFolder) check() error {
	for _, n := range []int{f.ChildFolderCount, f.UnreadItemCount, f.TotalItemCount} {
		if n < 0 || n > MaxCount {
			return fmt.Errorf("%w: folder %q has the count %d", ErrInvalidAnswer, f.ID, n)
		}
	}
	return nil
}

func (a *Attachment) check() error {
	if a.Size < 0 {
		return fmt.Errorf("%w: attachment %q has the size %d", ErrInvalidAnswer, a.ID, a.Size)
	}
	return nil
}
