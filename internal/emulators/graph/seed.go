package graph

import (
	"errors"
	"fmt"
	stdhtml "html"
	"math/rand/v2"
	"strings"
	"time"
)

// ErrAlreadySeeded is answered by SeedSample for a mailbox that has mail.
var ErrAlreadySeeded = errors.New("graph emulator: mailbox already has messages")

// AddMailbox creates the mailbox of a user (with Graph's standard folders)
// if it does not exist yet; a user's mailbox is otherwise created on their
// first call.
func (s *Server) AddMailbox(userID, email, displayName string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.addMailboxLocked(userID, email, displayName)
}

// SetMailboxSettings replaces the mailbox settings of a user (time zone,
// language, automatic replies, working hours).
func (s *Server) SetMailboxSettings(userID string, ms MailboxSettings) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	mb, ok := s.mailboxes[userID]
	if !ok {
		return fmt.Errorf("%w: %s", ErrUnknownMailbox, userID)
	}
	mb.settings = ms
	return nil
}

// MessageCount answers how many messages the user's folder (a well-known
// name) holds, for tests and the demo.
func (s *Server) MessageCount(userID, wellKnown string) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	mb, ok := s.mailboxes[userID]
	if !ok {
		return 0, fmt.Errorf("%w: %s", ErrUnknownMailbox, userID)
	}
	f, ok := mb.wellKnown[strings.ToLower(wellKnown)]
	if !ok {
		return 0, fmt.Errorf("graph emulator: no folder %q", wellKnown)
	}
	return len(f.msgs), nil
}

type seedAtt struct {
	name, contentType, content string
	inline                     bool
}

type seedMsg struct {
	folder      string // well-known name or a path of display names ("Projects/Apollo")
	from        string // "Name <address>"; "" is the mailbox owner
	to, cc      []string
	subject     string
	body        string
	html        bool
	ago         time.Duration // before the seed's clock
	read        bool
	flag        string
	importance  string
	categories  []string
	attachments []seedAtt
	thread      string // messages with the same thread share a conversation
	draft       bool
}

func parseAddr(s string) recipient {
	if i := strings.LastIndexByte(s, '<'); i >= 0 && strings.HasSuffix(s, ">") {
		return recipient{EmailAddress: emailAddress{Name: strings.TrimSpace(s[:i]), Address: s[i+1 : len(s)-1]}}
	}
	return recipient{EmailAddress: emailAddress{Name: s, Address: s}}
}

// SeedSample fills the user's mailbox (created if needed) with a realistic
// sample: about 60 messages over Inbox, Sent Items, Drafts, Archive, Junk
// Email, Deleted Items and child folders (Inbox/Newsletters, Projects,
// Projects/Apollo) plus a hidden folder; threads with replies, attachments,
// flags, categories, importance, unread mail, HTML and text bodies, quoted
// history, unicode and quotes in subjects, a subject that looks like a
// number and a body longer than 5000 characters. Timestamps are before the
// emulator's clock, spread over two months.
func (s *Server) SeedSample(userID, email string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	mb := s.addMailboxLocked(userID, email, "")
	n := 0
	mb.root.eachMessage(func(*message) { n++ })
	if n > 0 {
		return fmt.Errorf("%w: %s", ErrAlreadySeeded, userID)
	}
	mb.jobTitle = "Product Manager"
	now := s.cfg.Now().UTC().Truncate(time.Second)
	mb.settings.AutoReplyStatus = "scheduled"
	mb.settings.ExternalAudience = "contactsOnly"
	mb.settings.ScheduledStart = now.Add(10 * 24 * time.Hour).Truncate(24 * time.Hour)
	mb.settings.ScheduledEnd = mb.settings.ScheduledStart.Add(7 * 24 * time.Hour)
	mb.settings.InternalReply = "<html><body>I am on leave; Priya covers the budget review.</body></html>"
	mb.settings.ExternalReply = "<html><body>I am out of the office and will answer on my return.</body></html>"

	folders := map[string]*folder{}
	for wk, f := range mb.wellKnown {
		folders[wk] = f
	}
	folders["Inbox/Newsletters"] = s.newFolderLocked(mb.wellKnown["inbox"], "Newsletters", false)
	folders["Projects"] = s.newFolderLocked(mb.root, "Projects", false)
	folders["Projects/Apollo"] = s.newFolderLocked(folders["Projects"], "Apollo", false)
	folders["Projects/Hermes"] = s.newFolderLocked(folders["Projects"], "Hermes", false)
	folders["Quarantine Notes"] = s.newFolderLocked(mb.root, "Quarantine Notes", true)

	me := mb.name + " <" + mb.email + ">"
	convs := map[string]string{}
	for i, sm := range sampleMessages(me) {
		f, ok := folders[sm.folder]
		if !ok {
			return fmt.Errorf("graph emulator: sample folder %q", sm.folder)
		}
		at := now.Add(-sm.ago)
		m := &message{created: at, modified: at, received: at, sent: at.Add(-40 * time.Second), subject: sm.subject,
			isRead: sm.read, isDraft: sm.draft, flagStatus: sm.flag, importance: sm.importance, categories: sm.categories}
		if sm.draft {
			m.sent = at
		}
		from := sm.from
		if from == "" {
			from = me
		}
		if !sm.draft || sm.from != "" {
			fr := parseAddr(from)
			m.from, m.sender = &fr, &fr
		}
		for _, t := range sm.to {
			m.to = append(m.to, parseAddr(t))
		}
		for _, c := range sm.cc {
			m.cc = append(m.cc, parseAddr(c))
		}
		m.body = itemBody{ContentType: "text", Content: sm.body}
		if sm.html {
			m.body.ContentType = "html"
		}
		if sm.thread != "" {
			if c, ok := convs[sm.thread]; ok {
				m.conversationID = c
			} else {
				m.conversationID = newID(restPrefix, 24)
				convs[sm.thread] = m.conversationID
			}
		}
		for _, a := range sm.attachments {
			m.attachments = append(m.attachments, &attachment{id: newID(restPrefix, 80), name: a.name, contentType: a.contentType,
				content: []byte(a.content), isInline: a.inline, modified: at})
		}
		m.internID = fmt.Sprintf("<sample-%03d.%d@%s>", i, at.Unix(), domainOf(parseAddr(from).EmailAddress.Address))
		s.addMessageLocked(f, m)
	}
	return nil
}

const (
	priya = "Priya Natarajan <priya@contoso.com>"
	marc  = "Marc Dubois <marc.dubois@fabrikam.fr>"
	soren = "Søren Ølgaard <soren@nordisk.dk>"
	kate  = "Kate O'Brien <kate.obrien@contoso.com>"
	ci    = "Build Bot <ci@builds.example.net>"
	news  = "The Weekly Brief <news@weekly.example.org>"
	hr    = "Contoso HR <hr@contoso.com>"
	li    = "Li Wei <li.wei@example.cn>"
)

const day = 24 * time.Hour

func newsletterHTML(n int, topic string) string {
	return fmt.Sprintf(`<html><head><style>p { color: #333 } .hidden { display:none }</style><script>trackOpen(%d)</script><title>Weekly Brief %d</title></head>`+
		`<body><h1>The Weekly Brief #%d</h1><p>This week: <b>%s</b> &amp; more.</p><ul><li>Markets &gt; expectations</li><li>Tips &amp; tricks</li></ul>`+
		`<p>Read online at <a href="https://weekly.example.org/%d">weekly.example.org</a>.</p><p style="font-size:8px">Unsubscribe</p></body></html>`, n, n, n, topic, n)
}

func longBody() string {
	var b strings.Builder
	b.WriteString("Minutes of the Apollo design review 🚀\n\n")
	for i := 1; b.Len() < 7000; i++ {
		fmt.Fprintf(&b, "%d. Décision: the team agreed on item %d — naïve caching is out, 日本語 notes kept, emoji 👍 recorded.\n", i, i)
	}
	b.WriteString("\nEnd of minutes.")
	return b.String()
}

// sampleMessages is the sample mailbox; me is the owner as "Name <address>".
func sampleMessages(me string) []seedMsg {
	msgs := []seedMsg{
		// The Q3 budget thread: HTML, a reply from the owner, a reply with an attachment.
		{folder: "inbox", from: priya, to: []string{me}, cc: []string{marc}, subject: "Q3 budget review", html: true, ago: 20 * day, read: true, thread: "budget",
			body: `<html><body><p>Hi,</p><p>Could you review the <b>Q3 budget</b> before Friday? The numbers are in the shared folder.</p><p>Thanks,<br>Priya</p></body></html>`},
		{folder: "sentitems", to: []string{priya}, cc: []string{marc}, subject: "RE: Q3 budget review", html: true, ago: 19 * day, read: true, thread: "budget",
			body: `<html><body><div>Sure, I will look at it tomorrow.</div><hr><div id="divRplyFwdMsg"><b>From:</b> Priya Natarajan<br><b>Subject:</b> Q3 budget review</div><p>Could you review the <b>Q3 budget</b> before Friday?</p></body></html>`},
		{folder: "inbox", from: priya, to: []string{me}, cc: []string{marc}, subject: "RE: Q3 budget review", html: true, ago: 18 * day, read: false, thread: "budget",
			flag: "flagged", importance: "high", categories: []string{"Finance"},
			attachments: []seedAtt{{name: "budget-q3.xlsx", contentType: "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet", content: "PK\x03\x04 budget sheet"}},
			body:        `<html><body><p>Here is the final sheet, see the attachment.</p><blockquote>Sure, I will look at it tomorrow.</blockquote></body></html>`},
		// Subjects with unicode, quotes, numbers.
		{folder: "inbox", from: marc, to: []string{me}, subject: "Café meeting — déjà vu ☕", ago: 15 * day, read: true, categories: []string{"Red category"},
			body: "Bonjour! Shall we meet at the café on Thursday? À bientôt, Marc"},
		{folder: "inbox", from: kate, to: []string{me, priya}, subject: "Kate's farewell party", ago: 12 * day, read: false, thread: "farewell",
			body: "It's my last week — drinks on Friday at 5pm in the atrium. Don't tell HR it's O'Malley's!"},
		{folder: "inbox", from: ci, to: []string{me}, subject: "12345", ago: 11 * day, read: true,
			body: "Ticket 12345 was closed automatically."},
		{folder: "inbox", from: li, to: []string{me}, subject: "2026-03-01", ago: 10 * day, read: true,
			body: "A subject that looks like a date. 你好!"},
		{folder: "inbox", from: soren, to: []string{me}, cc: []string{marc, kate}, subject: "Smørrebrød order for the offsite", ago: 9 * day, read: false,
			categories: []string{"Travel", "Blue category"}, body: "Hej! Please send your smørrebrød choices by Wednesday. Mvh, Søren"},
		{folder: "inbox", from: hr, to: []string{me}, subject: "Action required: update your emergency contact", ago: 8 * day, read: false, importance: "high", flag: "flagged",
			html: true, body: `<html><body><p>Please <a href="https://hr.contoso.com/profile">update your profile</a> by the end of the month.</p></body></html>`},
		{folder: "inbox", from: priya, to: []string{me}, subject: "Slides for the board", ago: 7 * day, read: true, flag: "complete",
			attachments: []seedAtt{{name: "board-deck.pdf", contentType: "application/pdf", content: "%PDF-1.7 board deck"},
				{name: "chart.png", contentType: "image/png", content: "\x89PNG chart", inline: true}},
			html: true, body: `<html><body><p>Deck attached; the chart is inline below.</p><img src="cid:chart.png"></body></html>`},
		{folder: "inbox", from: marc, to: []string{me}, subject: "Fwd: contract draft (v2)", ago: 6 * day, read: false,
			attachments: []seedAtt{{name: "contract-v2.docx", contentType: "application/vnd.openxmlformats-officedocument.wordprocessingml.document", content: "PK contract"},
				{name: "notes.txt", contentType: "text/plain", content: "Clause 4 needs legal review."}},
			body: "See the contract draft attached.\n\n> From: Legal\n> Please circulate v2 for comments.\n> Thanks"},
		{folder: "inbox", from: kate, to: []string{me}, subject: "RE: Kate's farewell party", ago: 5 * day, read: true, thread: "farewell",
			body: "Thanks everyone for coming!\n\n-----Original Message-----\nIt's my last week — drinks on Friday."},
		{folder: "inbox", from: li, to: []string{me}, subject: "Lunch?", ago: 2 * day, read: false, body: "Free for lunch tomorrow?"},
		{folder: "inbox", from: priya, to: []string{me}, subject: "Quick question about the offsite", ago: 3 * time.Hour, read: false,
			body: "Are we still on for the offsite next week?"},
		{folder: "inbox", from: marc, to: []string{me}, subject: "Invoice #4471 from Fabrikam", ago: 17 * day, read: true, categories: []string{"Finance"},
			attachments: []seedAtt{{name: "invoice-4471.pdf", contentType: "application/pdf", content: "%PDF invoice 4471"}},
			body:        "Please find invoice 4471 attached. Payment terms: 30 days."},
		{folder: "inbox", from: soren, to: []string{me}, subject: "Offsite venue", ago: 21 * day, read: true, thread: "venue",
			body: "Two options: the harbour hall or the old brewery."},
		{folder: "sentitems", to: []string{soren}, subject: "RE: Offsite venue", ago: 21*day - 3*time.Hour, read: true, thread: "venue",
			body: "The brewery, please.\n\n> Two options: the harbour hall or the old brewery."},
		{folder: "inbox", from: soren, to: []string{me}, subject: "RE: RE: Offsite venue", ago: 20*day + 5*time.Hour, read: true, thread: "venue",
			body: "Booked!\n\n> The brewery, please.\n>> Two options: the harbour hall or the old brewery."},
		{folder: "inbox", from: "IT Service Desk <it@contoso.com>", to: []string{me}, subject: "Password expiry notice 🔑", ago: 1 * day, read: false, importance: "high",
			html: true, body: `<html><body><p>Your password expires in <b>5 days</b>.</p><p>Change it at <a href="https://it.contoso.com">it.contoso.com</a>.</p></body></html>`},
		// The Apollo project folder, with a long body.
		{folder: "Projects/Apollo", from: soren, to: []string{me}, subject: "Apollo design review minutes", ago: 25 * day, read: true, thread: "apollo",
			body: longBody()},
		{folder: "Projects/Apollo", from: me, to: []string{soren}, subject: "RE: Apollo design review minutes", ago: 24 * day, read: true, thread: "apollo",
			body: "Thanks, Søren. One correction on item 3."},
		{folder: "Projects/Apollo", from: marc, to: []string{me}, subject: "Apollo launch checklist", ago: 4 * day, read: false, flag: "flagged", importance: "high",
			attachments: []seedAtt{{name: "checklist.pdf", contentType: "application/pdf", content: "%PDF checklist"}},
			body:        "Checklist attached; please tick your items."},
		{folder: "Projects/Hermes", from: li, to: []string{me}, subject: "Hermes kickoff", ago: 30 * day, read: true, importance: "low",
			body: "Kickoff notes for Hermes."},
		{folder: "Projects", from: priya, to: []string{me}, subject: "Project portfolio overview", ago: 35 * day, read: true,
			html: true, body: `<html><body><table><tr><td>Apollo</td><td>green</td></tr><tr><td>Hermes</td><td>amber</td></tr></table></body></html>`},
		// Archive, junk, deleted, the hidden folder.
		{folder: "archive", from: hr, to: []string{me}, subject: "Welcome to Contoso", ago: 58 * day, read: true, body: "Welcome aboard!"},
		{folder: "archive", from: priya, to: []string{me}, subject: "Q2 budget review", ago: 55 * day, read: true, categories: []string{"Finance"},
			body: "Q2 numbers are final."},
		{folder: "archive", from: marc, to: []string{me}, subject: "Old contract (v1)", ago: 50 * day, read: true,
			attachments: []seedAtt{{name: "contract-v1.docx", contentType: "application/vnd.openxmlformats-officedocument.wordprocessingml.document", content: "PK v1"}},
			body:        "The first version, for the record."},
		{folder: "junkemail", from: "Prize Team <win@lottery.example.biz>", to: []string{me}, subject: "You have WON!!!", ago: 6 * day, read: false,
			html: true, body: `<html><body><p>Click <a href="http://lottery.example.biz">here</a> to claim.</p></body></html>`},
		{folder: "junkemail", from: "Pharmacy <deals@pills.example.biz>", to: []string{me}, subject: "Cheap deals", ago: 16 * day, read: false, body: "Buy now."},
		{folder: "deleteditems", from: news, to: []string{me}, subject: "The Weekly Brief #1", ago: 45 * day, read: true, html: true, body: newsletterHTML(1, "A fresh start")},
		{folder: "deleteditems", from: ci, to: []string{me}, subject: "Build #100 passed", ago: 44 * day, read: true, body: "Build 100 of main passed."},
		{folder: "Quarantine Notes", from: "Security <security@contoso.com>", to: []string{me}, subject: "Quarantined message report", ago: 13 * day, read: false,
			body: "One message was quarantined."},
		// Sent items.
		{folder: "sentitems", to: []string{marc}, subject: "RE: Café meeting — déjà vu ☕", ago: 14 * day, read: true, body: "Thursday works, see you there."},
		{folder: "sentitems", to: []string{kate}, cc: []string{priya}, subject: "RE: Kate's farewell party", ago: 11*day + 2*time.Hour, read: true, thread: "farewell",
			body: "We'll miss you, Kate!"},
		{folder: "sentitems", to: []string{li}, subject: "Hermes budget", ago: 29 * day, read: true, importance: "high", body: "Budget for Hermes is approved."},
		{folder: "sentitems", to: []string{hr}, subject: "Emergency contact updated", ago: 7*day + time.Hour, read: true, body: "Done."},
		{folder: "sentitems", to: []string{soren, marc}, subject: "Offsite agenda", ago: 8*day + 3*time.Hour, read: true,
			attachments: []seedAtt{{name: "agenda.txt", contentType: "text/plain", content: "09:00 coffee\n10:00 planning"}}, body: "Agenda attached."},
		// Drafts: a new one and a reply draft.
		{folder: "drafts", to: []string{priya}, subject: "Draft: Q4 planning", ago: 1 * day, read: true, draft: true, body: "Ideas for Q4: ..."},
		{folder: "drafts", to: []string{li}, subject: "RE: Lunch?", ago: 2 * time.Hour, read: true, draft: true, html: true,
			body: `<html><body><div>Yes, 12:30?</div><hr><div id="divRplyFwdMsg"><b>From:</b> Li Wei</div><div>Free for lunch tomorrow?</div></body></html>`},
	}
	// Build notifications: text bodies, the CI category, a few unread.
	for i := 1; i <= 14; i++ {
		status := "passed"
		imp := "normal"
		if i%5 == 0 {
			status, imp = "failed", "high"
		}
		msgs = append(msgs, seedMsg{folder: "inbox", from: ci, to: []string{me}, subject: fmt.Sprintf("Build #%d %s", 200+i, status),
			ago: time.Duration(40-2*i)*day + time.Duration(i)*time.Hour, read: i%3 != 0, importance: imp, categories: []string{"CI"},
			body: fmt.Sprintf("Build %d of main %s in %d s.\nCommit: %07x", 200+i, status, 60+i, i*7919)})
	}
	// Newsletters in a child folder of the Inbox: HTML with head, style and script.
	topics := []string{"Rates", "Cloud costs", "Hiring", "Remote work", "Security", "AI tools", "Energy", "Travel"}
	for i, t := range topics {
		msgs = append(msgs, seedMsg{folder: "Inbox/Newsletters", from: news, to: []string{me}, subject: fmt.Sprintf("The Weekly Brief #%d: %s", i+2, t),
			ago: time.Duration(49-7*i)*day + 6*time.Hour, read: i < 5, html: true, body: newsletterHTML(i+2, t)})
	}
	return msgs
}

// SeedGenerated adds n generated messages to the user's Inbox (the mailbox
// is created if needed): deterministic for a seed, with varied senders,
// subjects, read and flag states, importance and categories, one minute
// apart before the emulator's clock. Benchmarks and load tests use it for
// mailboxes larger than SeedSample's.
func (s *Server) SeedGenerated(userID, email string, n int, seed int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	mb := s.addMailboxLocked(userID, email, "")
	rng := rand.New(rand.NewPCG(uint64(seed), 0x9e3779b97f4a7c15))
	senders := []string{priya, marc, soren, kate, ci, news, hr, li}
	words := []string{"budget", "review", "offsite", "invoice", "launch", "agenda", "contract", "hiring", "café", "report", "déjà", "plan"}
	now := s.cfg.Now().UTC().Truncate(time.Second)
	for i := 0; i < n; i++ {
		at := now.Add(-time.Duration(i+1) * time.Minute)
		from := parseAddr(senders[rng.IntN(len(senders))])
		subject := words[rng.IntN(len(words))] + " " + words[rng.IntN(len(words))] + fmt.Sprintf(" #%d", i)
		m := &message{created: at, modified: at, received: at, sent: at.Add(-30 * time.Second), subject: subject,
			from: &from, sender: &from, to: []recipient{{EmailAddress: emailAddress{Name: mb.name, Address: mb.email}}},
			isRead: rng.IntN(3) > 0, importance: []string{"low", "normal", "normal", "high"}[rng.IntN(4)],
			body: itemBody{ContentType: "text", Content: strings.Repeat(subject+". ", 1+rng.IntN(20))}}
		if rng.IntN(5) == 0 {
			m.flagStatus = "flagged"
		}
		if rng.IntN(4) == 0 {
			m.categories = []string{[]string{"Finance", "Travel", "CI", "Red category"}[rng.IntN(4)]}
		}
		if rng.IntN(6) == 0 {
			m.body = itemBody{ContentType: "html", Content: "<html><body><p>" + stdhtml.EscapeString(m.body.Content) + "</p></body></html>"}
		}
		s.addMessageLocked(mb.wellKnown["inbox"], m)
	}
}
