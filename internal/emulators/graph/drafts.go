package graph

import (
	"encoding/json"
	"fmt"
	stdhtml "html"
	"net/http"
	"slices"
	"strings"
	"time"
)

// createMessage answers POST /me/messages: a draft in Drafts.
func (s *Server) createMessage(w http.ResponseWriter, r *http.Request) { s.createIn(w, r, "drafts") }

// createFolderMessage answers POST /me/mailFolders/{fid}/messages: a
// draft in that folder.
func (s *Server) createFolderMessage(w http.ResponseWriter, r *http.Request) {
	s.createIn(w, r, r.PathValue("fid"))
}

func (s *Server) createIn(w http.ResponseWriter, r *http.Request, fid string) {
	g, ok := s.auth(w, r, ScopeMailReadWrite)
	if !ok {
		return
	}
	var raw map[string]json.RawMessage
	if !s.readJSON(w, r, &raw, true) {
		return
	}
	in, ok := decodeMessage(w, r, raw, false, true)
	if !ok {
		return
	}
	pr := parsePrefer(r)
	s.mu.Lock()
	mb := s.mailboxLocked(g)
	f, ok := s.folderLocked(w, r, mb, fid)
	var out map[string]any
	if ok {
		m := s.newDraftLocked(in)
		s.addMessageLocked(f, m)
		out = s.entityLocked(r, m, pr, nil, g.UserID)
	}
	s.mu.Unlock()
	if ok {
		pr.applied(w)
		writeJSON(w, http.StatusCreated, out)
	}
}

func (s *Server) newDraftLocked(in msgInput) *message {
	now := s.cfg.Now().UTC().Truncate(time.Second)
	m := &message{created: now, modified: now, received: now, sent: now, isDraft: true, isRead: true}
	s.applyLocked(m, in)
	if in.IsRead == nil {
		m.isRead = true
	}
	return m
}

// messageAction answers POST /me/messages/{id}/{action}.
func (s *Server) messageAction(w http.ResponseWriter, r *http.Request) {
	action := r.PathValue("action")
	switch action {
	case "createReply", "createReplyAll", "createForward":
		s.createResponse(w, r, action)
	case "reply", "replyAll", "forward":
		s.respond(w, r, action)
	case "send":
		s.send(w, r)
	case "move", "copy":
		s.moveCopy(w, r, action)
	default:
		writeError(w, r, http.StatusBadRequest, CodeBadRequest, fmt.Sprintf("Resource not found for the segment '%s'.", action))
	}
}

// responseInput is the body of createReply/reply and friends.
type responseInput struct {
	Comment      string                     `json:"comment"`
	Message      map[string]json.RawMessage `json:"message"`
	ToRecipients *[]recipient               `json:"toRecipients"`
}

func (s *Server) createResponse(w http.ResponseWriter, r *http.Request, action string) {
	g, ok := s.auth(w, r, ScopeMailReadWrite)
	if !ok {
		return
	}
	var in responseInput
	if !s.readJSON(w, r, &in, true) {
		return
	}
	var over msgInput
	if in.Message != nil {
		if over, ok = decodeMessage(w, r, in.Message, false, true); !ok {
			return
		}
	}
	pr := parsePrefer(r)
	s.mu.Lock()
	mb := s.mailboxLocked(g)
	orig, ok := s.messageLocked(w, r, mb, r.PathValue("id"))
	var out map[string]any
	if ok {
		d := s.responseDraftLocked(mb, orig, strings.TrimPrefix(action, "create"), in.Comment, over, in.ToRecipients)
		out = s.entityLocked(r, d, pr, nil, g.UserID)
	}
	s.mu.Unlock()
	if ok {
		pr.applied(w)
		writeJSON(w, http.StatusCreated, out)
	}
}

// respond answers reply, replyAll and forward: the response is created and
// sent at once (202).
func (s *Server) respond(w http.ResponseWriter, r *http.Request, action string) {
	g, ok := s.auth(w, r, ScopeMailSend)
	if !ok {
		return
	}
	var in responseInput
	if !s.readJSON(w, r, &in, true) {
		return
	}
	var over msgInput
	if in.Message != nil {
		if over, ok = decodeMessage(w, r, in.Message, false, true); !ok {
			return
		}
	}
	kind := map[string]string{"reply": "Reply", "replyAll": "ReplyAll", "forward": "Forward"}[action]
	s.mu.Lock()
	defer s.mu.Unlock()
	mb := s.mailboxLocked(g)
	orig, ok := s.messageLocked(w, r, mb, r.PathValue("id"))
	if !ok {
		return
	}
	d := s.responseDraftLocked(mb, orig, kind, in.Comment, over, in.ToRecipients)
	if !s.checkRecipients(w, r, d) {
		s.removeLocked(d)
		return
	}
	s.sendLocked(mb, d, true)
	w.WriteHeader(http.StatusAccepted)
}

// responseDraftLocked creates the reply, reply-all or forward draft of
// orig in Drafts: Exchange's recipients and subject prefix, the comment
// above the quoted original (HTML), the conversation kept.
func (s *Server) responseDraftLocked(mb *mailbox, orig *message, kind, comment string, over msgInput, to *[]recipient) *message {
	now := s.cfg.Now().UTC().Truncate(time.Second)
	d := &message{created: now, modified: now, received: now, sent: now, isDraft: true, isRead: true,
		conversationID: orig.conversationID, importance: "normal"}
	prefix := "RE: "
	if kind == "Forward" {
		prefix = "FW: "
	}
	d.subject = orig.subject
	if !strings.HasPrefix(strings.ToUpper(orig.subject), prefix) {
		d.subject = prefix + orig.subject
	}
	me := strings.ToLower(mb.email)
	var sender []recipient
	switch {
	case len(orig.replyTo) > 0:
		sender = slices.Clone(orig.replyTo)
	case orig.from != nil:
		sender = []recipient{*orig.from}
	case orig.sender != nil:
		sender = []recipient{*orig.sender}
	}
	fromMe := len(sender) > 0 && strings.EqualFold(sender[0].EmailAddress.Address, me)
	switch kind {
	case "Reply":
		d.to = sender
		if fromMe {
			// Replying to one's own message addresses its recipients.
			d.to = slices.Clone(orig.to)
		}
	case "ReplyAll":
		seen := map[string]bool{me: true}
		add := func(dst *[]recipient, rs []recipient) {
			for _, rc := range rs {
				a := strings.ToLower(rc.EmailAddress.Address)
				if !seen[a] {
					seen[a] = true
					*dst = append(*dst, rc)
				}
			}
		}
		if !fromMe {
			add(&d.to, sender)
		}
		add(&d.to, orig.to)
		add(&d.cc, orig.cc)
	case "Forward":
		for _, a := range orig.attachments {
			d.attachments = append(d.attachments, &attachment{id: newID(restPrefix, 80), name: a.name, contentType: a.contentType,
				content: a.content, isInline: a.isInline, contentID: a.contentID, modified: now})
		}
	}
	if to != nil {
		d.to = slices.Clone(*to)
	}
	commentHTML := ""
	if comment != "" {
		commentHTML = "<div>" + strings.ReplaceAll(stdhtml.EscapeString(comment), "\n", "<br>") + "</div>"
	}
	d.body = itemBody{ContentType: "html", Content: "<html><head>\r\n<meta http-equiv=\"Content-Type\" content=\"text/html; charset=utf-8\">\r\n</head>\r\n<body>\r\n" +
		commentHTML + quoteHeader(orig) + innerBody(asHTML(orig.body)) + "\r\n</body>\r\n</html>\r\n"}
	d.uniqueBody = itemBody{ContentType: "html", Content: "<html><body>" + commentHTML + "</body></html>"}
	s.applyLocked(d, over)
	if over.Body != nil {
		d.uniqueBody = *over.Body
	}
	s.addMessageLocked(mb.wellKnown["drafts"], d)
	return d
}

// quoteHeader is Outlook's header above a quoted message.
func quoteHeader(m *message) string {
	var b strings.Builder
	b.WriteString("<hr style=\"display:inline-block;width:98%\" tabindex=\"-1\"><div id=\"divRplyFwdMsg\" dir=\"ltr\"><font face=\"Calibri, sans-serif\" style=\"font-size:11pt\" color=\"#000000\">")
	if m.from != nil {
		b.WriteString("<b>From:</b> " + stdhtml.EscapeString(displayAddr(*m.from)) + "<br>")
	}
	sent := m.sent
	if sent.IsZero() {
		sent = m.created
	}
	b.WriteString("<b>Sent:</b> " + sent.UTC().Format("Monday, January 2, 2006 3:04 PM") + "<br>")
	b.WriteString("<b>To:</b> " + stdhtml.EscapeString(joinAddrs(m.to)) + "<br>")
	if len(m.cc) > 0 {
		b.WriteString("<b>Cc:</b> " + stdhtml.EscapeString(joinAddrs(m.cc)) + "<br>")
	}
	b.WriteString("<b>Subject:</b> " + stdhtml.EscapeString(m.subject) + "</font>\r\n<div>&nbsp;</div>\r\n</div>\r\n")
	return b.String()
}

func displayAddr(r recipient) string {
	if r.EmailAddress.Name == "" || r.EmailAddress.Name == r.EmailAddress.Address {
		return r.EmailAddress.Address
	}
	return r.EmailAddress.Name + " <" + r.EmailAddress.Address + ">"
}

func joinAddrs(rs []recipient) string {
	parts := make([]string, 0, len(rs))
	for _, r := range rs {
		parts = append(parts, displayAddr(r))
	}
	return strings.Join(parts, "; ")
}

// send answers POST /me/messages/{id}/send: 202 and the draft moves to Sent
// Items. A message that is not a draft answers 404 ErrorItemNotFound, as
// Exchange does (it looks the id up among drafts).
func (s *Server) send(w http.ResponseWriter, r *http.Request) {
	g, ok := s.auth(w, r, ScopeMailSend)
	if !ok {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	mb := s.mailboxLocked(g)
	m, ok := s.messageLocked(w, r, mb, r.PathValue("id"))
	if !ok {
		return
	}
	if !m.isDraft {
		writeError(w, r, http.StatusNotFound, CodeItemNotFound, msgItemNotFound)
		return
	}
	if !s.checkRecipients(w, r, m) {
		return
	}
	s.sendLocked(mb, m, true)
	w.WriteHeader(http.StatusAccepted)
}

// checkRecipients answers Exchange's error for a message without
// recipients or with an address that cannot be resolved.
func (s *Server) checkRecipients(w http.ResponseWriter, r *http.Request, m *message) bool {
	all := slices.Concat(m.to, m.cc, m.bcc)
	if len(all) == 0 {
		writeError(w, r, http.StatusBadRequest, CodeInvalidRecipients, "At least one recipient is required, but none were found.")
		return false
	}
	for _, rc := range all {
		a := rc.EmailAddress.Address
		if at := strings.IndexByte(a, '@'); at <= 0 || at == len(a)-1 || strings.ContainsAny(a, " <>,;") {
			writeError(w, r, http.StatusBadRequest, CodeInvalidRecipients,
				fmt.Sprintf("At least one recipient isn't valid., Recipient '%s' isn't resolved. All recipients must be resolved before a message can be submitted.", a))
			return false
		}
	}
	return true
}

// sendLocked sends the draft m of mb: it becomes a sent message in Sent
// Items (or is dropped without saveToSent) and every recipient with a
// mailbox here receives a copy in its Inbox.
func (s *Server) sendLocked(mb *mailbox, m *message, saveToSent bool) {
	now := s.cfg.Now().UTC().Truncate(time.Second)
	me := recipient{EmailAddress: emailAddress{Name: mb.name, Address: mb.email}}
	if m.from == nil {
		m.from = &me
	}
	m.sender = &me
	m.isDraft, m.isRead = false, true
	m.sent, m.received = now, now
	if saveToSent {
		s.moveLocked(m, mb.wellKnown["sentitems"])
	} else {
		s.removeLocked(m)
	}
	s.deliverLocked(m, now)
}

func (s *Server) deliverLocked(m *message, now time.Time) {
	seen := map[string]bool{}
	for _, rc := range slices.Concat(m.to, m.cc, m.bcc) {
		addr := strings.ToLower(rc.EmailAddress.Address)
		if seen[addr] {
			continue
		}
		seen[addr] = true
		rcpt, ok := s.byEmail[addr]
		if !ok {
			continue
		}
		c := &message{created: now, modified: now, received: now, sent: m.sent, subject: m.subject, body: m.body,
			uniqueBody: m.uniqueBody, to: slices.Clone(m.to), cc: slices.Clone(m.cc), replyTo: slices.Clone(m.replyTo),
			importance: m.importance, conversationID: m.conversationID, internID: m.internID}
		if m.from != nil {
			f := *m.from
			c.from = &f
		}
		if m.sender != nil {
			sd := *m.sender
			c.sender = &sd
		}
		for _, a := range m.attachments {
			c.attachments = append(c.attachments, &attachment{id: newID(restPrefix, 80), name: a.name, contentType: a.contentType,
				content: a.content, isInline: a.isInline, contentID: a.contentID, modified: now})
		}
		s.addMessageLocked(rcpt.wellKnown["inbox"], c)
	}
}

// sendMail answers POST /me/sendMail {message, saveToSentItems}: 202.
func (s *Server) sendMail(w http.ResponseWriter, r *http.Request) {
	g, ok := s.auth(w, r, ScopeMailSend)
	if !ok {
		return
	}
	var body struct {
		Message         map[string]json.RawMessage `json:"message"`
		SaveToSentItems *bool                      `json:"saveToSentItems"`
	}
	if !s.readJSON(w, r, &body, false) {
		return
	}
	if body.Message == nil {
		writeError(w, r, http.StatusBadRequest, CodeInvalidRequest, "The message parameter is required.")
		return
	}
	in, ok := decodeMessage(w, r, body.Message, false, true)
	if !ok {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	mb := s.mailboxLocked(g)
	m := s.newDraftLocked(in)
	s.addMessageLocked(mb.wellKnown["drafts"], m)
	if !s.checkRecipients(w, r, m) {
		s.removeLocked(m)
		return
	}
	s.sendLocked(mb, m, body.SaveToSentItems == nil || *body.SaveToSentItems)
	w.WriteHeader(http.StatusAccepted)
}

// moveCopy answers move and copy {destinationId}: 201 with the message in
// its new folder (a move changes the REST id, a copy is a new message).
func (s *Server) moveCopy(w http.ResponseWriter, r *http.Request, action string) {
	g, ok := s.auth(w, r, ScopeMailReadWrite)
	if !ok {
		return
	}
	var in struct {
		DestinationID string `json:"destinationId"`
	}
	if !s.readJSON(w, r, &in, false) {
		return
	}
	pr := parsePrefer(r)
	s.mu.Lock()
	mb := s.mailboxLocked(g)
	m, ok := s.messageLocked(w, r, mb, r.PathValue("id"))
	var dst *folder
	if ok {
		dst, ok = s.folderLocked(w, r, mb, in.DestinationID)
	}
	var out map[string]any
	if ok {
		if action == "move" {
			s.moveLocked(m, dst)
		} else {
			c := *m
			c.restID, c.immID, c.doc = "", "", nil
			c.attachments = nil
			for _, a := range m.attachments {
				na := *a
				na.id = newID(restPrefix, 80)
				c.attachments = append(c.attachments, &na)
			}
			s.addMessageLocked(dst, &c)
			m = &c
		}
		out = s.entityLocked(r, m, pr, nil, g.UserID)
	}
	s.mu.Unlock()
	if ok {
		pr.applied(w)
		writeJSON(w, http.StatusCreated, out)
	}
}
