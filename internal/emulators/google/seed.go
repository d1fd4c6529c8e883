package google

import (
	"errors"
	"fmt"

	"github.com/auditrail/auditrail/internal/emulators/oauth"
	docs "google.golang.org/api/docs/v1"
)

// sampleBuilder builds a sample document by applying batchUpdate requests,
// so that every sample is valid by construction (the same code path and
// invariants as a client's edits).
type sampleBuilder struct {
	d *document
}

func newSampleBuilder(id, title string) *sampleBuilder {
	return &sampleBuilder{d: &document{ID: id, Title: title, Revision: 1, Tabs: []*tab{newTab("t.0", "Tab 1")}}}
}

// apply runs one batch; a sample that does not apply is a programming error
// (seed_test.go applies every sample).
func (b *sampleBuilder) apply(reqs ...*docs.Request) []*docs.Response {
	nd, replies, err := applyBatch(b.d, reqs)
	if err != nil {
		panic(fmt.Sprintf("google emulator: sample %q: %v", b.d.Title, err))
	}
	b.d = nd
	return replies
}

func (b *sampleBuilder) body(tabID string) *segment {
	t, _ := b.d.tab(tabID)
	return t.Body
}

// para appends text (one or more paragraphs, ending with "\n") before the
// tab's final empty paragraph, gives them the named style, and answers the
// index where the text starts.
func (b *sampleBuilder) para(tabID, text, named string) int {
	at := len(b.body(tabID).items) - 1
	n := int64(len(toUnits(text)))
	reqs := []*docs.Request{{InsertText: &docs.InsertTextRequest{Location: &docs.Location{Index: int64(at), TabId: tabID}, Text: text}}}
	if named != "" {
		reqs = append(reqs, &docs.Request{UpdateParagraphStyle: &docs.UpdateParagraphStyleRequest{
			Range:          &docs.Range{StartIndex: int64(at), EndIndex: int64(at) + n, TabId: tabID},
			ParagraphStyle: &docs.ParagraphStyle{NamedStyleType: named}, Fields: "namedStyleType"}})
	}
	b.apply(reqs...)
	return at
}

// list appends paragraphs (leading tabs give the nesting) as a list.
func (b *sampleBuilder) list(tabID, text, preset string) {
	at := b.para(tabID, text, "NORMAL_TEXT")
	b.apply(&docs.Request{CreateParagraphBullets: &docs.CreateParagraphBulletsRequest{
		Range:        &docs.Range{StartIndex: int64(at), EndIndex: int64(at + len(toUnits(text))), TabId: tabID},
		BulletPreset: preset}})
}

// style applies a text style to the first occurrence of sub at or after
// from in the tab's body.
func (b *sampleBuilder) style(tabID string, from int, sub string, ts *docs.TextStyle, fields string) {
	s := b.body(tabID)
	want := toUnits(sub)
	for i := from; i+len(want) <= len(s.items); i++ {
		if matchAt(s.items, i, want, true) {
			b.apply(&docs.Request{UpdateTextStyle: &docs.UpdateTextStyleRequest{
				Range: &docs.Range{StartIndex: int64(i), EndIndex: int64(i + len(want)), TabId: tabID}, TextStyle: ts, Fields: fields}})
			return
		}
	}
	panic(fmt.Sprintf("google emulator: sample %q: %q not found", b.d.Title, sub))
}

// find answers the index just after the first occurrence of sub.
func (b *sampleBuilder) after(tabID, sub string) int64 {
	s := b.body(tabID)
	want := toUnits(sub)
	for i := 0; i+len(want) <= len(s.items); i++ {
		if matchAt(s.items, i, want, true) {
			return int64(i + len(want))
		}
	}
	panic(fmt.Sprintf("google emulator: sample %q: %q not found", b.d.Title, sub))
}

// table appends a table and fills its cells (row by row), answering the
// table's start index.
func (b *sampleBuilder) table(tabID string, cells [][]string) int64 {
	b.apply(&docs.Request{InsertTable: &docs.InsertTableRequest{EndOfSegmentLocation: &docs.EndOfSegmentLocation{TabId: tabID},
		Rows: int64(len(cells)), Columns: int64(len(cells[0]))}})
	s := b.body(tabID)
	start := -1
	for i := len(s.items) - 1; i >= 0; i-- {
		if s.items[i].k == kTableStart {
			start = i
			break
		}
	}
	// The cells' content indices, filled from the last so that earlier
	// indices stay valid.
	var at []int64
	for i := start; i < len(s.items) && s.items[i].k != kTableEnd; i++ {
		if s.items[i].k == kCellStart {
			at = append(at, int64(i+1))
		}
	}
	var flat []string
	for _, row := range cells {
		flat = append(flat, row...)
	}
	var reqs []*docs.Request
	for k := len(flat) - 1; k >= 0; k-- {
		if flat[k] != "" {
			reqs = append(reqs, &docs.Request{InsertText: &docs.InsertTextRequest{Location: &docs.Location{Index: at[k], TabId: tabID}, Text: flat[k]}})
		}
	}
	b.apply(reqs...)
	return int64(start)
}

// sampleDocuments answers the sample documents the demo seeds for a user:
// a project plan (every common element kind), meeting notes with a child
// tab, a document with emoji and CJK text, and "O'Brien's notes" (an
// apostrophe in the title and a backslash in the body, for search-escaping
// demos). Their IDs are fixed; the caller sets the owner (and may assign
// fresh IDs).
func sampleDocuments() []*document {
	return []*document{samplePlan(), sampleMeetingNotes(), sampleTravel(), sampleOBrien()}
}

func samplePlan() *document {
	b := newSampleBuilder("1SamplePlanApolloLaunch000000000000000000000", "Apollo launch plan")
	b.para("", "Apollo launch plan\n", "TITLE")
	b.para("", "Platform team · Q3 2026\n", "SUBTITLE")
	b.para("", "Goals\n", "HEADING_1")
	g := b.para("", "We ship the audit trail to three pilot customers and keep every tool call verifiable end to end.\n", "NORMAL_TEXT")
	b.style("", g, "three pilot customers", &docs.TextStyle{Bold: true}, "bold")
	b.style("", g, "verifiable", &docs.TextStyle{Italic: true}, "italic")
	fn := b.apply(&docs.Request{CreateFootnote: &docs.CreateFootnoteRequest{Location: &docs.Location{Index: b.after("", "three pilot customers")}}})
	b.apply(&docs.Request{InsertText: &docs.InsertTextRequest{EndOfSegmentLocation: &docs.EndOfSegmentLocation{SegmentId: fn[0].CreateFootnote.FootnoteId},
		Text: "Pilot contracts were signed in October."}})
	b.para("", "Milestones\n", "HEADING_2")
	b.list("", "Design review\n\tThreat model\n\tAPI sketch\nBuild\n\tIngest pipeline\n\t\tClickHouse schema\nPilot with three customers\n", "NUMBERED_DECIMAL_ALPHA_ROMAN")
	b.para("", "Risks\n", "HEADING_3")
	b.list("", "Schema drift between services\n\tMitigation: contract tests in CI\nVendor delays\n", "BULLET_DISC_CIRCLE_SQUARE")
	b.para("", "Owners\n", "HEADING_2")
	ts := b.table("", [][]string{{"Name", "Role", "Due"}, {"Ann Lee", "Ingest", "2026-09-15"}, {"Ben Ito", "Query API", "2026-09-30"}})
	b.apply(&docs.Request{PinTableHeaderRows: &docs.PinTableHeaderRowsRequest{TableStartLocation: &docs.Location{Index: ts}, PinnedHeaderRowsCount: 1}})
	b.style("", int(ts), "Name", &docs.TextStyle{Bold: true}, "bold")
	b.style("", int(ts), "Role", &docs.TextStyle{Bold: true}, "bold")
	b.style("", int(ts), "Due", &docs.TextStyle{Bold: true}, "bold")
	b.para("", "Architecture\n", "HEADING_2")
	b.apply(&docs.Request{InsertInlineImage: &docs.InsertInlineImageRequest{Uri: "https://www.example.com/apollo/architecture.png",
		Location:   &docs.Location{Index: int64(b.para("", "Diagram: \n", "NORMAL_TEXT") + len("Diagram: "))},
		ObjectSize: &docs.Size{Width: &docs.Dimension{Magnitude: 320, Unit: "PT"}, Height: &docs.Dimension{Magnitude: 180, Unit: "PT"}}}})
	l := b.para("", "Status page: status.example.com\n", "NORMAL_TEXT")
	b.style("", l, "status.example.com", &docs.TextStyle{Link: &docs.Link{Url: "https://status.example.com"}}, "link")
	h := b.apply(&docs.Request{CreateHeader: &docs.CreateHeaderRequest{Type: "DEFAULT"}})
	b.apply(&docs.Request{InsertText: &docs.InsertTextRequest{EndOfSegmentLocation: &docs.EndOfSegmentLocation{SegmentId: h[0].CreateHeader.HeaderId},
		Text: "Apollo — internal"}})
	f := b.apply(&docs.Request{CreateFooter: &docs.CreateFooterRequest{Type: "DEFAULT"}})
	b.apply(&docs.Request{InsertText: &docs.InsertTextRequest{EndOfSegmentLocation: &docs.EndOfSegmentLocation{SegmentId: f[0].CreateFooter.FooterId},
		Text: "Confidential"}})
	return b.d
}

func sampleMeetingNotes() *document {
	b := newSampleBuilder("1SampleWeeklySyncNotes0000000000000000000000", "Weekly sync — meeting notes")
	b.apply(&docs.Request{UpdateDocumentTabProperties: &docs.UpdateDocumentTabPropertiesRequest{
		TabProperties: &docs.TabProperties{TabId: "t.0", Title: "Notes", IconEmoji: "📝"}, Fields: "title,iconEmoji"}})
	b.para("t.0", "Weekly sync\n", "HEADING_1")
	at := b.para("t.0", "Date: \nAttendees: , \n", "NORMAL_TEXT")
	// Highest index first, so that each index is still valid when applied.
	b.apply(
		&docs.Request{InsertPerson: &docs.InsertPersonRequest{Location: &docs.Location{Index: b.after("t.0", "Attendees: , "), TabId: "t.0"},
			PersonProperties: &docs.PersonProperties{Email: "ben@example.com", Name: "Ben Ito"}}},
		&docs.Request{InsertPerson: &docs.InsertPersonRequest{Location: &docs.Location{Index: b.after("t.0", "Attendees: "), TabId: "t.0"},
			PersonProperties: &docs.PersonProperties{Email: "ann@example.com", Name: "Ann Lee"}}},
		&docs.Request{InsertDate: &docs.InsertDateRequest{Location: &docs.Location{Index: int64(at + len("Date: ")), TabId: "t.0"},
			DateElementProperties: &docs.DateElementProperties{Timestamp: "2026-11-16T15:00:00Z", DateFormat: "DATE_FORMAT_ISO8601"}}})
	b.para("t.0", "Decisions\n", "HEADING_2")
	b.list("t.0", "Ship the ingest fix on Thursday\nKeep the retention at 400 days\n\tRevisit after the pilot\n", "BULLET_DISC_CIRCLE_SQUARE")
	b.para("t.0", "Discussion\n", "HEADING_2")
	d := b.para("t.0", "Latency of the query API is fine under load; the dashboard needs paging.\n", "NORMAL_TEXT")
	b.style("t.0", d, "needs paging", &docs.TextStyle{Bold: true}, "bold")
	child := b.apply(&docs.Request{AddDocumentTab: &docs.AddDocumentTabRequest{TabProperties: &docs.TabProperties{Title: "Action items", ParentTabId: "t.0"}}})
	ct := child[0].AddDocumentTab.TabProperties.TabId
	b.para(ct, "Action items\n", "HEADING_1")
	b.list(ct, "Ann: write the migration note\nBen: add paging to the dashboard\n\tInclude a test with 10k rows\n", "BULLET_CHECKBOX")
	return b.d
}

func sampleTravel() *document {
	b := newSampleBuilder("1SampleTravelNotesEmojiCJK000000000000000000", "Travel notes 🌏 旅行メモ")
	b.para("", "旅行メモ — Tokyo & Seoul ✈️\n", "TITLE")
	b.para("", "東京\n", "HEADING_1")
	t := b.para("", "東京での会議は午前10時に始まります。Bring the 🎫 tickets and a 🔌 adapter.\n", "NORMAL_TEXT")
	b.style("", t, "午前10時", &docs.TextStyle{Bold: true}, "bold")
	b.style("", t, "🎫", &docs.TextStyle{Italic: true}, "italic")
	b.para("", "서울\n", "HEADING_1")
	b.list("", "경복궁 방문 🏯\n\t오전 9시 입장\n北京烤鸭 dinner 🦆\n👍🏽 Family photo\n", "NUMBERED_DECIMAL_NESTED")
	b.para("", "Mixed scripts: Ελληνικά, русский, العربية, हिन्दी, 😀😀.\n", "NORMAL_TEXT")
	return b.d
}

func sampleOBrien() *document {
	b := newSampleBuilder("1SampleOBriensNotes0000000000000000000000000", "O'Brien's notes")
	b.para("", "O'Brien's notes\n", "HEADING_1")
	b.para("", "Backups live in C:\\Users\\obrien\\backups and the regex is \\d+\\.txt.\n", "NORMAL_TEXT")
	b.para("", "She said \"it's fine\" — O'Brien, 3 o'clock.\n", "NORMAL_TEXT")
	return b.d
}

// ErrSeeded is returned by SeedSample when a sample document exists
// already (the samples' IDs are fixed).
var ErrSeeded = errors.New("google emulator: the sample documents exist already")

// SeedSample gives userID the sample documents, as if the OAuth client
// clientID had created them: that client's drive.file tokens see them, as
// they see what the platform creates. It answers their IDs. The IDs are
// fixed, so one emulator seeds one user (ErrSeeded otherwise).
func (s *Server) SeedSample(userID, clientID string) ([]string, error) {
	samples := sampleDocuments()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, d := range samples {
		if _, ok := s.docs[d.ID]; ok {
			return nil, fmt.Errorf("%w: %s", ErrSeeded, d.ID)
		}
	}
	ids := make([]string, 0, len(samples))
	for _, d := range samples {
		d.Owner = userID
		s.docs[d.ID] = d
		s.addFileLocked(d, oauth.Grant{UserID: userID, ClientID: clientID}, "")
		ids = append(ids, d.ID)
	}
	return ids, nil
}
