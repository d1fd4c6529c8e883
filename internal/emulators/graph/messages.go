package graph

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
)

// selectable are the message properties $select accepts.
var selectable = append(slices.Clone(messageProps[1:]), "uniqueBody")

// renderLocked answers a message as Graph does for the preferences and
// $select (nil: every default property): only the selected properties plus
// id and @odata.etag; bodies converted per outlook.body-content-type.
func renderLocked(m *message, p prefs, sel []string) map[string]any {
	doc := m.docLocked()
	keys := messageProps
	if sel != nil {
		keys = append([]string{"@odata.etag", "id"}, sel...)
	}
	out := make(map[string]any, len(keys))
	for _, k := range keys {
		out[k] = doc[k]
	}
	out["id"] = m.id(p.immutable)
	for _, k := range []string{"body", "uniqueBody"} {
		if _, ok := out[k]; !ok {
			continue
		}
		b := m.body
		if k == "uniqueBody" {
			b = m.uniqueBody
		}
		switch {
		case p.bodyType == "text" && strings.EqualFold(b.ContentType, "html"):
			b = itemBody{ContentType: "text", Content: htmlToText(b.Content)}
		case p.bodyType == "html" && strings.EqualFold(b.ContentType, "text"):
			b = itemBody{ContentType: "html", Content: textToHTML(b.Content)}
		}
		out[k] = map[string]any{"contentType": b.ContentType, "content": b.Content}
	}
	return out
}

// messageLocked resolves a message id of the mailbox (REST or immutable):
// 400 ErrorInvalidIdMalformed for an id that cannot be one, 404
// ErrorItemNotFound for an unknown one or another mailbox's.
func (s *Server) messageLocked(w http.ResponseWriter, r *http.Request, mb *mailbox, id string) (*message, bool) {
	if !wellFormed(id) {
		writeError(w, r, http.StatusBadRequest, CodeInvalidIDMalformed, msgMalformedID)
		return nil, false
	}
	m, ok := s.ids[id]
	if !ok || m.mb != mb {
		writeError(w, r, http.StatusNotFound, CodeItemNotFound, msgItemNotFound)
		return nil, false
	}
	return m, true
}

func (s *Server) listMessages(w http.ResponseWriter, r *http.Request) { s.listIn(w, r, "") }

func (s *Server) listFolderMessages(w http.ResponseWriter, r *http.Request) {
	s.listIn(w, r, r.PathValue("fid"))
}

func (s *Server) listIn(w http.ResponseWriter, r *http.Request, fid string) {
	g, ok := s.auth(w, r, ScopeMailRead, ScopeMailReadWrite)
	if !ok {
		return
	}
	p, ok := parsePage(w, r, 10, s.cfg.MaxTop)
	if !ok {
		return
	}
	sel, ok := parseSelect(w, r, selectable, "microsoft.graph.message")
	if !ok {
		return
	}
	q, qerr := parseQuery(r)
	if qerr != nil {
		writeError(w, r, http.StatusBadRequest, qerr.Code, qerr.Message)
		return
	}
	pr := parsePrefer(r)
	s.mu.Lock()
	mb := s.mailboxLocked(g)
	var msgs []*message
	ctx := fmt.Sprintf("users('%s')/messages", url.PathEscape(userGUID(g.UserID)))
	if fid == "" {
		mb.root.eachMessage(func(m *message) { msgs = append(msgs, m) })
	} else {
		f, ok := s.folderLocked(w, r, mb, fid)
		if !ok {
			s.mu.Unlock()
			return
		}
		msgs = slices.Clone(f.msgs)
		ctx = fmt.Sprintf("users('%s')/mailFolders('%s')/messages", url.PathEscape(userGUID(g.UserID)), url.PathEscape(f.id))
	}
	msgs = q.run(msgs)
	from, to, more := p.window(len(msgs))
	items := make([]any, 0, to-from)
	for _, m := range msgs[from:to] {
		items = append(items, renderLocked(m, pr, sel))
	}
	s.mu.Unlock()
	pr.applied(w)
	writeJSON(w, http.StatusOK, collection(r, ctx, items, len(msgs), p, more))
}

func (s *Server) getMessage(w http.ResponseWriter, r *http.Request) { s.getIn(w, r, "") }

func (s *Server) getFolderMessage(w http.ResponseWriter, r *http.Request) {
	s.getIn(w, r, r.PathValue("fid"))
}

func (s *Server) getIn(w http.ResponseWriter, r *http.Request, fid string) {
	g, ok := s.auth(w, r, ScopeMailRead, ScopeMailReadWrite)
	if !ok {
		return
	}
	sel, ok := parseSelect(w, r, selectable, "microsoft.graph.message")
	if !ok {
		return
	}
	pr := parsePrefer(r)
	s.mu.Lock()
	mb := s.mailboxLocked(g)
	var f *folder
	if fid != "" {
		if f, ok = s.folderLocked(w, r, mb, fid); !ok {
			s.mu.Unlock()
			return
		}
	}
	m, ok := s.messageLocked(w, r, mb, r.PathValue("id"))
	if ok && f != nil && m.folder != f {
		writeError(w, r, http.StatusNotFound, CodeItemNotFound, msgItemNotFound)
		ok = false
	}
	var out map[string]any
	if ok {
		out = s.entityLocked(r, m, pr, sel, g.UserID)
	}
	s.mu.Unlock()
	if ok {
		pr.applied(w)
		writeJSON(w, http.StatusOK, out)
	}
}

func (s *Server) entityLocked(r *http.Request, m *message, pr prefs, sel []string, userID string) map[string]any {
	out := renderLocked(m, pr, sel)
	out["@odata.context"] = fmt.Sprintf("%s/$metadata#users('%s')/messages/$entity", baseURL(r), url.PathEscape(userGUID(userID)))
	return out
}

// Properties of a PATCH: anyOn may change on any message, draftOnly only
// while the message is a draft, ignored are read-only ones Graph accepts
// back unchanged.
var (
	anyOn     = []string{"isRead", "flag", "categories", "importance", "inferenceClassification", "isDeliveryReceiptRequested", "isReadReceiptRequested"}
	draftOnly = []string{"subject", "body", "toRecipients", "ccRecipients", "bccRecipients", "replyTo", "from", "sender", "internetMessageId"}
	ignored   = []string{"@odata.etag", "@odata.type", "@odata.context", "id", "createdDateTime", "lastModifiedDateTime", "changeKey", "receivedDateTime",
		"sentDateTime", "hasAttachments", "bodyPreview", "parentFolderId", "conversationId", "conversationIndex", "isDraft", "webLink", "uniqueBody"}
)

// msgInput is a message as a client writes it (create, PATCH, sendMail).
type msgInput struct {
	Subject    *string      `json:"subject"`
	Body       *itemBody    `json:"body"`
	To         *[]recipient `json:"toRecipients"`
	Cc         *[]recipient `json:"ccRecipients"`
	Bcc        *[]recipient `json:"bccRecipients"`
	ReplyTo    *[]recipient `json:"replyTo"`
	From       *recipient   `json:"from"`
	Sender     *recipient   `json:"sender"`
	Importance *string      `json:"importance"`
	Categories *[]string    `json:"categories"`
	IsRead     *bool        `json:"isRead"`
	Flag       *struct {
		FlagStatus string `json:"flagStatus"`
	} `json:"flag"`
	InternetMessageID *string    `json:"internetMessageId"`
	Attachments       []attInput `json:"attachments"`
}

type attInput struct {
	ODataType    string `json:"@odata.type"`
	Name         string `json:"name"`
	ContentType  string `json:"contentType"`
	ContentBytes string `json:"contentBytes"`
	IsInline     bool   `json:"isInline"`
	ContentID    string `json:"contentId"`
}

// decodeMessage checks the properties of raw (unknown → 400, and with
// forSent draft-only ones → 400 ErrorInvalidPropertyUpdateSentMessage)
// and decodes it.
func decodeMessage(w http.ResponseWriter, r *http.Request, raw map[string]json.RawMessage, sent, allowAttachments bool) (msgInput, bool) {
	var in msgInput
	for k := range raw {
		switch {
		case slices.Contains(anyOn, k), slices.Contains(ignored, k):
		case slices.Contains(draftOnly, k):
			if sent {
				writeError(w, r, http.StatusBadRequest, CodeUpdateSentMessage, "Update operation is invalid for property of a sent message.")
				return in, false
			}
		case k == "attachments" && allowAttachments:
		default:
			writeError(w, r, http.StatusBadRequest, CodeBadRequest, fmt.Sprintf("The property '%s' does not exist on type 'microsoft.graph.message'. Make sure to only use property names that are defined by the type or mark the type as open type.", k))
			return in, false
		}
	}
	b, _ := json.Marshal(raw)
	if err := json.Unmarshal(b, &in); err != nil {
		writeError(w, r, http.StatusBadRequest, CodeBadRequest, "Cannot read the message: "+err.Error())
		return in, false
	}
	if in.Importance != nil && !slices.Contains([]string{"low", "normal", "high"}, strings.ToLower(*in.Importance)) {
		writeError(w, r, http.StatusBadRequest, CodeBadRequest, fmt.Sprintf("Requested value '%s' was not found.", *in.Importance))
		return in, false
	}
	if in.Flag != nil && !slices.Contains([]string{"notFlagged", "complete", "flagged"}, in.Flag.FlagStatus) {
		writeError(w, r, http.StatusBadRequest, CodeBadRequest, fmt.Sprintf("Requested value '%s' was not found.", in.Flag.FlagStatus))
		return in, false
	}
	if in.Body != nil {
		switch strings.ToLower(in.Body.ContentType) {
		case "", "text":
			in.Body.ContentType = "text"
		case "html":
			in.Body.ContentType = "html"
		default:
			writeError(w, r, http.StatusBadRequest, CodeBadRequest, fmt.Sprintf("Requested value '%s' was not found.", in.Body.ContentType))
			return in, false
		}
	}
	for _, a := range in.Attachments {
		if a.ODataType != "" && a.ODataType != "#microsoft.graph.fileAttachment" {
			writeError(w, r, http.StatusBadRequest, CodeInvalidRequest, "Only file attachments are supported by this emulator.")
			return in, false
		}
		if _, err := base64.StdEncoding.DecodeString(a.ContentBytes); err != nil {
			writeError(w, r, http.StatusBadRequest, CodeBadRequest, "The attachment's contentBytes is not valid base64.")
			return in, false
		}
	}
	return in, true
}

// applyLocked writes the decoded properties onto m.
func (s *Server) applyLocked(m *message, in msgInput) {
	if in.Subject != nil {
		m.subject = *in.Subject
	}
	if in.Body != nil {
		m.body = *in.Body
		m.uniqueBody = *in.Body
	}
	set := func(dst *[]recipient, src *[]recipient) {
		if src != nil {
			*dst = slices.Clone(*src)
			for i := range *dst {
				s.resolveLocked(&(*dst)[i])
			}
		}
	}
	set(&m.to, in.To)
	set(&m.cc, in.Cc)
	set(&m.bcc, in.Bcc)
	set(&m.replyTo, in.ReplyTo)
	if in.From != nil {
		f := *in.From
		s.resolveLocked(&f)
		m.from = &f
	}
	if in.Sender != nil {
		sd := *in.Sender
		s.resolveLocked(&sd)
		m.sender = &sd
	}
	if in.Importance != nil {
		m.importance = strings.ToLower(*in.Importance)
	}
	if in.Categories != nil {
		m.categories = slices.Clone(*in.Categories)
	}
	if in.IsRead != nil {
		m.isRead = *in.IsRead
	}
	if in.Flag != nil {
		m.flagStatus = in.Flag.FlagStatus
	}
	if in.InternetMessageID != nil {
		m.internID = *in.InternetMessageID
	}
	for _, a := range in.Attachments {
		content, _ := base64.StdEncoding.DecodeString(a.ContentBytes)
		na := &attachment{id: newID(restPrefix, 80), name: a.Name, contentType: a.ContentType, content: content,
			isInline: a.IsInline, contentID: a.ContentID, modified: s.cfg.Now().UTC(), msg: m}
		if na.contentType == "" {
			na.contentType = "application/octet-stream"
		}
		m.attachments = append(m.attachments, na)
		if m.restID != "" {
			s.attIDs[na.id] = na
		}
	}
}

// resolveLocked names a recipient given by address only, as Exchange
// does: a mailbox of the emulator by its display name, another address by
// itself.
func (s *Server) resolveLocked(r *recipient) {
	if r.EmailAddress.Name != "" {
		return
	}
	r.EmailAddress.Name = r.EmailAddress.Address
	if mb, ok := s.byEmail[strings.ToLower(r.EmailAddress.Address)]; ok {
		r.EmailAddress.Name = mb.name
	}
}

func (s *Server) patchMessage(w http.ResponseWriter, r *http.Request) {
	g, ok := s.auth(w, r, ScopeMailReadWrite)
	if !ok {
		return
	}
	var raw map[string]json.RawMessage
	if !s.readJSON(w, r, &raw, false) {
		return
	}
	pr := parsePrefer(r)
	s.mu.Lock()
	m, ok := s.messageLocked(w, r, s.mailboxLocked(g), r.PathValue("id"))
	var in msgInput
	if ok {
		in, ok = decodeMessage(w, r, raw, !m.isDraft, false)
	}
	var out map[string]any
	if ok {
		s.applyLocked(m, in)
		s.touchLocked(m)
		out = s.entityLocked(r, m, pr, nil, g.UserID)
	}
	s.mu.Unlock()
	if ok {
		pr.applied(w)
		writeJSON(w, http.StatusOK, out)
	}
}

// deleteMessage moves the message to Deleted Items, or removes it when it
// is there already, as Outlook's delete does.
func (s *Server) deleteMessage(w http.ResponseWriter, r *http.Request) {
	g, ok := s.auth(w, r, ScopeMailReadWrite)
	if !ok {
		return
	}
	s.mu.Lock()
	mb := s.mailboxLocked(g)
	m, ok := s.messageLocked(w, r, mb, r.PathValue("id"))
	if ok {
		if del := mb.wellKnown["deleteditems"]; m.folder != del {
			s.moveLocked(m, del)
		} else {
			s.removeLocked(m)
		}
	}
	s.mu.Unlock()
	if ok {
		w.WriteHeader(http.StatusNoContent)
	}
}

func (a *attachment) json(withContent bool) map[string]any {
	out := map[string]any{
		"@odata.type":             "#microsoft.graph.fileAttachment",
		"@odata.mediaContentType": a.contentType,
		"id":                      a.id,
		"lastModifiedDateTime":    fmtTime(a.modified),
		"name":                    a.name,
		"contentType":             a.contentType,
		"size":                    a.size(),
		"isInline":                a.isInline,
		"contentId":               nilIfEmpty(a.contentID),
		"contentLocation":         nil,
	}
	if withContent {
		out["contentBytes"] = base64.StdEncoding.EncodeToString(a.content)
	}
	return out
}

var attachmentProps = []string{"id", "lastModifiedDateTime", "name", "contentType", "size", "isInline", "contentId", "contentLocation", "contentBytes"}

func (s *Server) listAttachments(w http.ResponseWriter, r *http.Request) {
	g, ok := s.auth(w, r, ScopeMailRead, ScopeMailReadWrite)
	if !ok {
		return
	}
	p, ok := parsePage(w, r, 10, s.cfg.MaxTop)
	if !ok {
		return
	}
	sel, ok := parseSelect(w, r, attachmentProps, "microsoft.graph.attachment")
	if !ok {
		return
	}
	s.mu.Lock()
	m, ok := s.messageLocked(w, r, s.mailboxLocked(g), r.PathValue("id"))
	var out map[string]any
	if ok {
		from, to, more := p.window(len(m.attachments))
		items := make([]any, 0, to-from)
		for _, a := range m.attachments[from:to] {
			j := a.json(slices.Contains(sel, "contentBytes"))
			if sel != nil {
				j = selectFolder(j, sel)
				j["@odata.type"] = "#microsoft.graph.fileAttachment"
			}
			items = append(items, j)
		}
		out = collection(r, fmt.Sprintf("users('%s')/messages('%s')/attachments", url.PathEscape(userGUID(g.UserID)), url.PathEscape(m.restID)),
			items, len(m.attachments), p, more)
	}
	s.mu.Unlock()
	if ok {
		writeJSON(w, http.StatusOK, out)
	}
}

func (s *Server) getAttachment(w http.ResponseWriter, r *http.Request) {
	g, ok := s.auth(w, r, ScopeMailRead, ScopeMailReadWrite)
	if !ok {
		return
	}
	s.mu.Lock()
	m, ok := s.messageLocked(w, r, s.mailboxLocked(g), r.PathValue("id"))
	var out map[string]any
	if ok {
		aid := r.PathValue("aid")
		a, found := s.attIDs[aid]
		switch {
		case !wellFormed(aid):
			writeError(w, r, http.StatusBadRequest, CodeInvalidIDMalformed, msgMalformedID)
			ok = false
		case !found || a.msg != m:
			writeError(w, r, http.StatusNotFound, CodeItemNotFound, msgItemNotFound)
			ok = false
		default:
			out = a.json(true)
			out["@odata.context"] = fmt.Sprintf("%s/$metadata#users('%s')/messages('%s')/attachments/$entity", baseURL(r), url.PathEscape(userGUID(g.UserID)), url.PathEscape(m.restID))
		}
	}
	s.mu.Unlock()
	if ok {
		writeJSON(w, http.StatusOK, out)
	}
}

// addAttachment adds a file attachment to a draft.
func (s *Server) addAttachment(w http.ResponseWriter, r *http.Request) {
	g, ok := s.auth(w, r, ScopeMailReadWrite)
	if !ok {
		return
	}
	var in attInput
	if !s.readJSON(w, r, &in, false) {
		return
	}
	if in.ODataType != "#microsoft.graph.fileAttachment" {
		writeError(w, r, http.StatusBadRequest, CodeInvalidRequest, "The @odata.type of the attachment must be #microsoft.graph.fileAttachment.")
		return
	}
	content, err := base64.StdEncoding.DecodeString(in.ContentBytes)
	if err != nil || in.Name == "" {
		writeError(w, r, http.StatusBadRequest, CodeInvalidRequest, "The attachment needs a name and base64 contentBytes.")
		return
	}
	s.mu.Lock()
	m, ok := s.messageLocked(w, r, s.mailboxLocked(g), r.PathValue("id"))
	var out map[string]any
	if ok && !m.isDraft {
		writeError(w, r, http.StatusBadRequest, CodeUpdateSentMessage, "Update operation is invalid for property of a sent message.")
		ok = false
	}
	if ok {
		a := &attachment{id: newID(restPrefix, 80), name: in.Name, contentType: in.ContentType, content: content,
			isInline: in.IsInline, contentID: in.ContentID, modified: s.cfg.Now().UTC(), msg: m}
		if a.contentType == "" {
			a.contentType = "application/octet-stream"
		}
		m.attachments = append(m.attachments, a)
		s.attIDs[a.id] = a
		s.touchLocked(m)
		out = a.json(true)
	}
	s.mu.Unlock()
	if ok {
		writeJSON(w, http.StatusCreated, out)
	}
}
