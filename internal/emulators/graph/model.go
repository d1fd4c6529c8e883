package graph

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/auditrail/auditrail/internal/emulators/oauth"
)

// Id prefixes: Exchange's REST ids start with AAMkA (the bytes 00 03 24 00),
// its immutable ids with AAkALg (00 09 00 2e).
var (
	restPrefix      = []byte{0x00, 0x03, 0x24, 0x00}
	immutablePrefix = []byte{0x00, 0x09, 0x00, 0x2e, 0x00}
)

// newID answers an opaque id: prefix and n random bytes, base64url with
// padding, as Graph's ids are.
func newID(prefix []byte, n int) string {
	b := make([]byte, len(prefix)+n)
	copy(b, prefix)
	_, _ = rand.Read(b[len(prefix):])
	return base64.URLEncoding.EncodeToString(b)
}

// wellFormed reports whether id could be a Graph item id; an id that is not
// answers ErrorInvalidIdMalformed instead of ErrorItemNotFound.
func wellFormed(id string) bool {
	b, err := base64.URLEncoding.DecodeString(id)
	if err != nil {
		b, err = base64.StdEncoding.DecodeString(id)
	}
	if err != nil || len(b) < 24 {
		return false
	}
	return bytes.HasPrefix(b, restPrefix) || bytes.HasPrefix(b, immutablePrefix)
}

// wellKnownNames are the well-known folder names of Graph v1.0
// (mailFolder resource type); a name outside the list is taken for an id.
var wellKnownNames = map[string]bool{
	"archive": true, "clutter": true, "conflicts": true, "conversationhistory": true, "deleteditems": true,
	"drafts": true, "inbox": true, "junkemail": true, "localfailures": true, "msgfolderroot": true, "outbox": true,
	"recoverableitemsdeletions": true, "scheduled": true, "searchfolders": true, "sentitems": true,
	"serverfailures": true, "syncissues": true,
}

type emailAddress struct {
	Name    string `json:"name"`
	Address string `json:"address"`
}

type recipient struct {
	EmailAddress emailAddress `json:"emailAddress"`
}

type itemBody struct {
	ContentType string `json:"contentType"`
	Content     string `json:"content"`
}

type mailbox struct {
	userID, email, name string
	root                *folder            // msgfolderroot
	wellKnown           map[string]*folder // by well-known name
	settings            MailboxSettings
	jobTitle            string
}

type folder struct {
	id        string
	name      string
	wellKnown string
	hidden    bool
	parent    *folder // nil for msgfolderroot
	children  []*folder
	msgs      []*message
	mb        *mailbox
}

type message struct {
	mb                       *mailbox
	folder                   *folder
	restID, immID            string
	created, modified        time.Time
	received, sent           time.Time // sent zero while a draft
	subject                  string
	body, uniqueBody         itemBody
	from, sender             *recipient
	to, cc, bcc, replyTo     []recipient
	importance               string
	isRead, isDraft          bool
	flagStatus               string
	categories               []string
	conversationID, internID string
	attachments              []*attachment
	changeKey                string
	doc                      map[string]any // cached full JSON, nil after a change
}

type attachment struct {
	id          string
	name        string
	contentType string
	content     []byte
	isInline    bool
	contentID   string
	modified    time.Time
	msg         *message
}

// MailboxSettings is the part of Graph's mailboxSettings the emulator
// keeps; SetMailboxSettings replaces it.
type MailboxSettings struct {
	TimeZone         string
	Locale           string // e.g. "en-US"
	LocaleName       string // e.g. "English (United States)"
	AutoReplyStatus  string // disabled, alwaysEnabled, scheduled
	ExternalAudience string // none, contactsOnly, all
	ScheduledStart   time.Time
	ScheduledEnd     time.Time
	InternalReply    string
	ExternalReply    string
	WorkDays         []string
	WorkStart        string // "08:00:00.0000000"
	WorkEnd          string
}

func defaultSettings() MailboxSettings {
	return MailboxSettings{TimeZone: "UTC", Locale: "en-US", LocaleName: "English (United States)",
		AutoReplyStatus: "disabled", ExternalAudience: "all",
		WorkDays:  []string{"monday", "tuesday", "wednesday", "thursday", "friday"},
		WorkStart: "08:00:00.0000000", WorkEnd: "17:00:00.0000000"}
}

// userGUID is the stable GUID-shaped id /me answers for a user.
func userGUID(userID string) string {
	h := sha256.Sum256([]byte("graph-user:" + userID))
	x := hex.EncodeToString(h[:16])
	return x[:8] + "-" + x[8:12] + "-" + x[12:16] + "-" + x[16:20] + "-" + x[20:32]
}

// standard folders of a new mailbox: display name, well-known name, hidden.
var standardFolders = []struct {
	name, wellKnown string
	hidden          bool
}{
	{"Archive", "archive", false},
	{"Conversation History", "conversationhistory", false},
	{"Deleted Items", "deleteditems", false},
	{"Drafts", "drafts", false},
	{"Inbox", "inbox", false},
	{"Junk Email", "junkemail", false},
	{"Outbox", "outbox", false},
	{"Sent Items", "sentitems", false},
	{"Sync Issues", "syncissues", true},
}

// mailboxLocked answers the grant's mailbox, creating it on first use.
func (s *Server) mailboxLocked(g oauth.Grant) *mailbox {
	if mb, ok := s.mailboxes[g.UserID]; ok {
		return mb
	}
	return s.addMailboxLocked(g.UserID, g.Email, "")
}

func (s *Server) addMailboxLocked(userID, email, name string) *mailbox {
	if mb, ok := s.mailboxes[userID]; ok {
		return mb
	}
	for _, u := range s.cfg.Users {
		if name == "" && u.ID == userID {
			name = u.Name
		}
	}
	if name == "" {
		name, _, _ = strings.Cut(email, "@")
	}
	mb := &mailbox{userID: userID, email: email, name: name, wellKnown: map[string]*folder{}, settings: defaultSettings()}
	mb.root = &folder{id: newID(restPrefix, 42), name: "Top of Information Store", wellKnown: "msgfolderroot", mb: mb}
	s.folderIDs[mb.root.id] = mb.root
	mb.wellKnown["msgfolderroot"] = mb.root
	for _, f := range standardFolders {
		nf := s.newFolderLocked(mb.root, f.name, f.hidden)
		nf.wellKnown = f.wellKnown
		mb.wellKnown[f.wellKnown] = nf
	}
	sync := mb.wellKnown["syncissues"]
	for _, c := range []struct{ name, wk string }{{"Conflicts", "conflicts"}, {"Local Failures", "localfailures"}, {"Server Failures", "serverfailures"}} {
		nf := s.newFolderLocked(sync, c.name, true)
		nf.wellKnown = c.wk
		mb.wellKnown[c.wk] = nf
	}
	s.mailboxes[userID] = mb
	if email != "" {
		s.byEmail[strings.ToLower(email)] = mb
	}
	return mb
}

func (s *Server) newFolderLocked(parent *folder, name string, hidden bool) *folder {
	f := &folder{id: newID(restPrefix, 42), name: name, hidden: hidden, parent: parent, mb: parent.mb}
	parent.children = append(parent.children, f)
	s.folderIDs[f.id] = f
	return f
}

// nextChangeKeyLocked answers a fresh change key.
func (s *Server) nextChangeKeyLocked() string {
	s.seq++
	b := make([]byte, 24)
	copy(b, []byte{0x09, 0, 0, 0, 0x16, 0, 0, 0})
	binary.BigEndian.PutUint64(b[8:], uint64(s.seq))
	_, _ = rand.Read(b[16:])
	return base64.StdEncoding.EncodeToString(b)
}

// addMessageLocked files a new message in f, giving it ids.
func (s *Server) addMessageLocked(f *folder, m *message) {
	m.mb, m.folder = f.mb, f
	m.restID = newID(restPrefix, 66)
	if m.immID == "" {
		m.immID = newID(immutablePrefix, 65)
	}
	if m.conversationID == "" {
		m.conversationID = newID(restPrefix, 24)
	}
	if m.internID == "" {
		m.internID = "<" + strings.ToUpper(newGUID()[:18]) + "@" + domainOf(f.mb.email) + ">"
	}
	if m.importance == "" {
		m.importance = "normal"
	}
	if m.flagStatus == "" {
		m.flagStatus = "notFlagged"
	}
	if m.body.ContentType == "" {
		m.body.ContentType = "text"
	}
	if m.uniqueBody.ContentType == "" {
		m.uniqueBody = m.body
	}
	m.changeKey = s.nextChangeKeyLocked()
	m.doc = nil
	f.msgs = append(f.msgs, m)
	s.ids[m.restID] = m
	s.ids[m.immID] = m
	for _, a := range m.attachments {
		a.msg = m
		s.attIDs[a.id] = a
	}
}

// moveLocked moves m to folder to: its REST id changes (as Exchange's do),
// its immutable id stays.
func (s *Server) moveLocked(m *message, to *folder) {
	from := m.folder
	from.msgs = slices.DeleteFunc(from.msgs, func(x *message) bool { return x == m })
	delete(s.ids, m.restID)
	m.restID = newID(restPrefix, 66)
	s.ids[m.restID] = m
	m.folder = to
	to.msgs = append(to.msgs, m)
	s.touchLocked(m)
}

func (s *Server) removeLocked(m *message) {
	m.folder.msgs = slices.DeleteFunc(m.folder.msgs, func(x *message) bool { return x == m })
	delete(s.ids, m.restID)
	delete(s.ids, m.immID)
	for _, a := range m.attachments {
		delete(s.attIDs, a.id)
	}
}

func (s *Server) touchLocked(m *message) {
	m.modified = s.cfg.Now().UTC()
	m.changeKey = s.nextChangeKeyLocked()
	m.doc = nil
}

func domainOf(email string) string {
	if _, d, ok := strings.Cut(email, "@"); ok && d != "" {
		return d
	}
	return "example.com"
}

func (m *message) hasAttachments() bool {
	for _, a := range m.attachments {
		if !a.isInline {
			return true
		}
	}
	return false
}

// eachMessage calls fn for the messages of f and its descendants.
func (f *folder) eachMessage(fn func(*message)) {
	for _, m := range f.msgs {
		fn(m)
	}
	for _, c := range f.children {
		c.eachMessage(fn)
	}
}

func (m *message) id(immutable bool) string {
	if immutable {
		return m.immID
	}
	return m.restID
}

func (m *message) etag() string { return `W/"` + m.changeKey + `"` }

func fmtTime(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UTC().Format(time.RFC3339)
}

func recipientsJSON(rs []recipient) []any {
	out := make([]any, 0, len(rs))
	for _, r := range rs {
		out = append(out, map[string]any{"emailAddress": map[string]any{"name": r.EmailAddress.Name, "address": r.EmailAddress.Address}})
	}
	return out
}

func recipientJSON(r *recipient) any {
	if r == nil {
		return nil
	}
	return map[string]any{"emailAddress": map[string]any{"name": r.EmailAddress.Name, "address": r.EmailAddress.Address}}
}

// docLocked answers the message's full JSON object with its REST id, the
// object $filter, $orderby and $search run against. Callers must not
// modify it.
func (m *message) docLocked() map[string]any {
	if m.doc != nil {
		return m.doc
	}
	cats := make([]any, 0, len(m.categories))
	for _, c := range m.categories {
		cats = append(cats, c)
	}
	atts := make([]any, 0, len(m.attachments))
	for _, a := range m.attachments {
		atts = append(atts, map[string]any{"name": a.name, "contentType": a.contentType, "size": float64(a.size()), "isInline": a.isInline})
	}
	m.doc = map[string]any{
		"@odata.etag":                m.etag(),
		"id":                         m.restID,
		"createdDateTime":            fmtTime(m.created),
		"lastModifiedDateTime":       fmtTime(m.modified),
		"changeKey":                  m.changeKey,
		"categories":                 cats,
		"receivedDateTime":           fmtTime(m.received),
		"sentDateTime":               fmtTime(m.sent),
		"hasAttachments":             m.hasAttachments(),
		"internetMessageId":          m.internID,
		"subject":                    m.subject,
		"bodyPreview":                bodyPreview(m.body),
		"importance":                 m.importance,
		"parentFolderId":             m.folder.id,
		"conversationId":             m.conversationID,
		"isDeliveryReceiptRequested": false,
		"isReadReceiptRequested":     false,
		"isRead":                     m.isRead,
		"isDraft":                    m.isDraft,
		"webLink":                    "https://outlook.office365.com/owa/?ItemID=" + escapeQuery(m.restID) + "&exvsurl=1&viewmodel=ReadMessageItem",
		"inferenceClassification":    "focused",
		"body":                       map[string]any{"contentType": m.body.ContentType, "content": m.body.Content},
		"uniqueBody":                 map[string]any{"contentType": m.uniqueBody.ContentType, "content": m.uniqueBody.Content},
		"sender":                     recipientJSON(m.sender),
		"from":                       recipientJSON(m.from),
		"toRecipients":               recipientsJSON(m.to),
		"ccRecipients":               recipientsJSON(m.cc),
		"bccRecipients":              recipientsJSON(m.bcc),
		"replyTo":                    recipientsJSON(m.replyTo),
		"flag":                       map[string]any{"flagStatus": m.flagStatus},
		// attachments is not a property of a listed message (it is a
		// navigation property); it is kept for $search's attachment: and
		// removed from every answer.
		"attachments": atts,
	}
	return m.doc
}

func (a *attachment) size() int { return len(a.content) + len(a.name) + 150 }

// messageProps are the properties a message answer has, in Graph's order.
var messageProps = []string{"@odata.etag", "id", "createdDateTime", "lastModifiedDateTime", "changeKey", "categories",
	"receivedDateTime", "sentDateTime", "hasAttachments", "internetMessageId", "subject", "bodyPreview", "importance",
	"parentFolderId", "conversationId", "isDeliveryReceiptRequested", "isReadReceiptRequested", "isRead", "isDraft",
	"webLink", "inferenceClassification", "body", "sender", "from", "toRecipients", "ccRecipients", "bccRecipients",
	"replyTo", "flag"}

// bodyPreview is the first 255 characters of the body as text, with
// whitespace runs collapsed, as Exchange computes it.
func bodyPreview(b itemBody) string {
	text := b.Content
	if strings.EqualFold(b.ContentType, "html") {
		text = htmlToText(text)
	}
	text = strings.Join(strings.Fields(text), " ")
	if utf8.RuneCountInString(text) <= 255 {
		return text
	}
	r := []rune(text)
	return string(r[:255])
}

func escapeQuery(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-', c == '_', c == '.':
			b.WriteByte(c)
		default:
			b.WriteString("%" + strings.ToUpper(hex.EncodeToString([]byte{c})))
		}
	}
	return b.String()
}
