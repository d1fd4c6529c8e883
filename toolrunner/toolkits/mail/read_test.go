package mail

import (
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/auditrail/auditrail/internal/oauthflow"
)

func TestGetEmail(t *testing.T) {
	e := newEnv(t)
	long := e.find(t, "u1", "Apollo design review minutes")
	full := long["body"].(map[string]any)["content"].(string)
	runes := []rune(full)
	if len(runes) <= 5000 {
		t.Fatalf("the long body has %d characters", len(runes))
	}
	id := long["id"].(string)
	tests := []struct {
		name       string
		in         map[string]any
		start, n   int // expected part: runes[start:start+n] (n -1: to the end)
		remaining  int
		truncated  bool
		wantFormat string
	}{
		{"default 5000", map[string]any{}, 0, 5000, len(runes) - 5000, true, "plain_text"},
		{"null is the whole body", map[string]any{"max_body_characters": nil}, 0, -1, 0, false, "plain_text"},
		{"offset and max", map[string]any{"body_offset": 37, "max_body_characters": 3}, 37, 3, len(runes) - 40, true, "plain_text"},
		{"offset past the end", map[string]any{"body_offset": len(runes) + 10}, len(runes), 0, 0, false, "plain_text"},
		{"the rest", map[string]any{"body_offset": 5000, "max_body_characters": 100000}, 5000, -1, 0, false, "plain_text"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := map[string]any{"message_id": id}
			for k, v := range tc.in {
				in[k] = v
			}
			out := e.ok(t, "GetEmail", in)
			want := ""
			switch {
			case tc.start >= len(runes):
			case tc.n < 0:
				want = string(runes[tc.start:])
			default:
				want = string(runes[tc.start : tc.start+tc.n])
			}
			body := out["body"].(string)
			if body != want || !utf8.ValidString(body) {
				t.Fatalf("body %d chars %q…, want %d chars %q…", utf8.RuneCountInString(body), trunc(body), utf8.RuneCountInString(want), trunc(want))
			}
			if out["body_total_characters"] != float64(len(runes)) || out["body_remaining_characters"] != float64(tc.remaining) ||
				out["body_truncated"] != tc.truncated || out["body_format"] != tc.wantFormat {
				t.Fatalf("counts %v %v %v %v", out["body_total_characters"], out["body_remaining_characters"], out["body_truncated"], out["body_format"])
			}
		})
	}
	// Reading on with offsets reassembles the body exactly (emoji and CJK
	// never split).
	var b strings.Builder
	for off := 0; ; off += 997 {
		out := e.ok(t, "GetEmail", map[string]any{"message_id": id, "body_offset": off, "max_body_characters": 997})
		b.WriteString(out["body"].(string))
		if out["body_remaining_characters"] == 0.0 {
			break
		}
	}
	if b.String() != full {
		t.Fatal("the parts do not reassemble the body")
	}
	// HTML: plain_text strips markup (scripts, styles, head), keeps
	// breaks; html returns the markup.
	news := e.find(t, "u1", "The Weekly Brief #3: Cloud costs")
	plain := e.ok(t, "GetEmail", map[string]any{"message_id": news["id"], "body_format": "PLAIN_TEXT"})["body"].(string)
	if strings.Contains(plain, "<") || strings.Contains(plain, "trackOpen") || strings.Contains(plain, "color: #333") ||
		!strings.Contains(plain, "The Weekly Brief #3") || !strings.Contains(plain, "Cloud costs & more") || !strings.Contains(plain, "\n") {
		t.Errorf("plain text %q", plain)
	}
	html := e.ok(t, "GetEmail", map[string]any{"message_id": news["id"], "body_format": "html", "max_body_characters": nil})
	if h := html["body"].(string); !strings.Contains(h, "<h1>The Weekly Brief #3</h1>") || !strings.Contains(h, "&amp;") || html["body_format"] != "html" {
		t.Errorf("html %q", h)
	}
	// The Prefer header asked for the format.
	var prefers []string
	for _, r := range e.sent.all() {
		if strings.Contains(r.URL.Path, "/me/messages/") {
			prefers = append(prefers, r.Header.Get("Prefer"))
		}
	}
	if !slices.Contains(prefers, `IdType="ImmutableId", outlook.body-content-type="html"`) || !slices.Contains(prefers, `IdType="ImmutableId", outlook.body-content-type="text"`) {
		t.Errorf("Prefer headers %v", prefers)
	}
	out := e.ok(t, "GetEmail", map[string]any{"message_id": id, "max_body_characters": 10})
	if out["subject"] != "Apollo design review minutes" || out["from"].(map[string]any)["address"] != "soren@nordisk.dk" || out["id"] != id {
		t.Errorf("metadata %v", out)
	}
	e.fails(t, "GetEmail", map[string]any{"message_id": missingID}, "NOT_FOUND")
	e.fails(t, "GetEmail", map[string]any{"message_id": ".."}, "TOOL_INPUT_INVALID")
}

func trunc(s string) string {
	if r := []rune(s); len(r) > 30 {
		return string(r[:30])
	}
	return s
}

func TestListEmailsByProperty(t *testing.T) {
	e := newEnv(t)
	all := e.mailbox(t, "u1")
	str := func(m map[string]any, path ...string) string {
		var v any = m
		for _, p := range path {
			mm, _ := v.(map[string]any)
			v = mm[p]
		}
		s, _ := v.(string)
		return s
	}
	day := func(s string) time.Time { d, _ := time.Parse(time.DateOnly, s); return d }
	recv := func(m map[string]any) time.Time {
		t, _ := time.Parse(time.RFC3339, str(m, "receivedDateTime"))
		return t
	}
	// A day with mail on it, taken from the mailbox.
	someDay := recv(all[len(all)/2]).UTC().Format(time.DateOnly)
	budgetConv := str(e.find(t, "u1", "Q3 budget review"), "conversationId")
	tests := []struct {
		prop, op, value, sortBy string
		want                    func(m map[string]any) bool
	}{
		{"subject", "eq", "12345", "", func(m map[string]any) bool { return str(m, "subject") == "12345" }},
		{"subject", "eq", "Kate's farewell party", "subject", func(m map[string]any) bool { return str(m, "subject") == "Kate's farewell party" }},
		{"subject", "contains", "budget", "sender_email_address", func(m map[string]any) bool {
			return strings.Contains(strings.ToLower(str(m, "subject")), "budget")
		}},
		{"subject", "startsWith", "RE:", "importance", func(m map[string]any) bool { return strings.HasPrefix(strings.ToLower(str(m, "subject")), "re:") }},
		{"subject", "endsWith", "☕", "", func(m map[string]any) bool { return strings.HasSuffix(str(m, "subject"), "☕") }},
		{"subject", "eq", "2026-03-01", "", func(m map[string]any) bool { return str(m, "subject") == "2026-03-01" }},
		{"sender/emailAddress/address", "eq", "PRIYA@contoso.com", "subject", func(m map[string]any) bool {
			return strings.EqualFold(str(m, "sender", "emailAddress", "address"), "priya@contoso.com")
		}},
		{"isRead", "eq", "false", "", func(m map[string]any) bool { return m["isRead"] == false }},
		{"hasAttachments", "eq", "true", "subject", func(m map[string]any) bool { return m["hasAttachments"] == true }},
		{"importance", "eq", "high", "", func(m map[string]any) bool { return m["importance"] == "high" }},
		{"importance", "ne", "normal", "importance", func(m map[string]any) bool { return m["importance"] != "normal" }},
		{"flag/flagStatus", "eq", "flagged", "", func(m map[string]any) bool { return str(m, "flag", "flagStatus") == "flagged" }},
		{"receivedDateTime", "eq", someDay, "", func(m map[string]any) bool {
			r := recv(m)
			return !r.Before(day(someDay)) && r.Before(day(someDay).AddDate(0, 0, 1))
		}},
		{"receivedDateTime", "le", someDay, "subject", func(m map[string]any) bool { return recv(m).Before(day(someDay).AddDate(0, 0, 1)) }},
		{"receivedDateTime", "gt", someDay, "", func(m map[string]any) bool { return !recv(m).Before(day(someDay).AddDate(0, 0, 1)) }},
		{"conversationId", "eq", budgetConv, "", func(m map[string]any) bool { return str(m, "conversationId") == budgetConv }},
	}
	for _, tc := range tests {
		name := tc.prop + " " + tc.op + " " + tc.value + " by " + tc.sortBy
		t.Run(name, func(t *testing.T) {
			var want []string
			for _, m := range all {
				if tc.want(m) {
					if tc.sortBy == "sender_email_address" && str(m, "sender", "emailAddress", "address") == "" {
						continue // documented: no sender, not listed when sorting by sender
					}
					want = append(want, m["id"].(string))
				}
			}
			if len(want) == 0 {
				t.Fatal("the case matches nothing: a vacuous test")
			}
			in := map[string]any{"mail_property": tc.prop, "operator": tc.op, "value": tc.value, "limit": 100}
			if tc.sortBy != "" {
				in["sort_by"] = tc.sortBy
			}
			list := emails(t, e.ok(t, "ListEmailsByProperty", in))
			// Sorted as asked (default: newest first).
			for i := 1; i < len(list); i++ {
				a, b := list[i-1], list[i]
				switch tc.sortBy {
				case "":
					if a["received_at"].(string) < b["received_at"].(string) {
						t.Fatalf("not newest first: %v then %v", a["received_at"], b["received_at"])
					}
				case "subject":
					if strings.ToLower(a["subject"].(string)) < strings.ToLower(b["subject"].(string)) {
						t.Fatalf("not by subject descending: %q then %q", a["subject"], b["subject"])
					}
				}
			}
			got := ids(list)
			slices.Sort(got)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Fatalf("got %d emails, want %d", len(got), len(want))
			}
		})
	}
	// On the wire: quotes doubled, numbers-as-strings quoted, unicode.
	e.sent.reset()
	e.ok(t, "ListEmailsByProperty", map[string]any{"mail_property": "subject", "operator": "eq", "value": "Kate's 12345 ☕"})
	e.ok(t, "ListEmailsByProperty", map[string]any{"mail_property": "receivedDateTime", "operator": "ge", "value": "2026-02-01T10:00:00+01:00", "sort_by": "subject", "sort_order": "ascending"})
	var filters, orders []string
	for _, r := range e.sent.all() {
		q, _ := url.ParseQuery(r.URL.RawQuery)
		filters, orders = append(filters, q.Get("$filter")), append(orders, q.Get("$orderby"))
	}
	if !slices.Equal(filters, []string{"receivedDateTime ge 1900-01-01T00:00:00Z and subject eq 'Kate''s 12345 ☕'", "subject ge '' and receivedDateTime ge 2026-02-01T09:00:00Z"}) ||
		!slices.Equal(orders, []string{"receivedDateTime desc", "subject asc"}) {
		t.Fatalf("sent $filter %q $orderby %q", filters, orders)
	}
	// Typed values: clear errors before any request.
	e.sent.reset()
	for _, in := range []map[string]any{
		{"mail_property": "isRead", "operator": "eq", "value": "yes"},
		{"mail_property": "isRead", "operator": "contains", "value": "true"},
		{"mail_property": "receivedDateTime", "operator": "ge", "value": "last week"},
		{"mail_property": "importance", "operator": "eq", "value": "urgent"},
	} {
		e.fails(t, "ListEmailsByProperty", in, "TOOL_INPUT_INVALID")
	}
	if n := len(e.sent.all()); n != 0 {
		t.Fatalf("%d requests for invalid inputs", n)
	}
}

func TestListEmailsInFolder(t *testing.T) {
	e := newEnv(t)
	all := e.mailbox(t, "u1")
	inbox := e.direct(t, "u1", "/me/mailFolders/inbox")
	count := func(pred func(m map[string]any) bool) int {
		n := 0
		for _, m := range all {
			if pred(m) {
				n++
			}
		}
		return n
	}
	flag := func(m map[string]any) string {
		f, _ := m["flag"].(map[string]any)
		s, _ := f["flagStatus"].(string)
		return s
	}
	tests := []struct {
		in   map[string]any
		want int
	}{
		{map[string]any{"well_known_folder_name": "INBOX"}, count(func(m map[string]any) bool { return m["parentFolderId"] == inbox["id"] })},
		{map[string]any{"folder_id": inbox["id"]}, count(func(m map[string]any) bool { return m["parentFolderId"] == inbox["id"] })},
		{map[string]any{"well_known_folder_name": "drafts"}, count(func(m map[string]any) bool { return m["isDraft"] == true })},
		{map[string]any{"well_known_folder_name": "starred"}, count(func(m map[string]any) bool { return flag(m) == "flagged" })},
		{map[string]any{"well_known_folder_name": "tasks", "sort_by": "subject"}, count(func(m map[string]any) bool { return flag(m) == "flagged" || flag(m) == "complete" })},
	}
	for _, tc := range tests {
		tc.in["limit"] = 100
		out := e.ok(t, "ListEmailsInFolder", tc.in)
		if got := len(emails(t, out)); got != tc.want || tc.want == 0 {
			t.Errorf("%v: %d emails, want %d", tc.in, got, tc.want)
		}
	}
	if n := count(func(m map[string]any) bool { return flag(m) == "complete" }); n == 0 {
		t.Fatal("no completed flag in the sample: tasks and starred not told apart")
	}
	for _, in := range []map[string]any{{}, {"well_known_folder_name": "inbox", "folder_id": inbox["id"]}, {"folder_id": "  "}} {
		err := e.fails(t, "ListEmailsInFolder", in, "TOOL_INPUT_INVALID")
		if !strings.Contains(err.Message, "exactly one of well_known_folder_name and folder_id") {
			t.Errorf("%v: %s", in, err.Message)
		}
	}
	e.fails(t, "ListEmailsInFolder", map[string]any{"folder_id": missingID}, "NOT_FOUND")
}

func TestListMailFoldersAndAttachments(t *testing.T) {
	e := newEnv(t)
	names := func(out map[string]any) map[string]map[string]any {
		res := map[string]map[string]any{}
		for _, f := range out["folders"].([]any) {
			m := f.(map[string]any)
			res[m["name"].(string)] = m
		}
		return res
	}
	top := names(e.ok(t, "ListMailFolders", map[string]any{"limit": 100}))
	inbox, ok := top["Inbox"]
	if !ok || top["Projects"] == nil || top["Quarantine Notes"] != nil {
		t.Fatalf("top-level folders %v", top)
	}
	if inbox["unread_count"].(float64) == 0 || inbox["total_count"].(float64) < inbox["unread_count"].(float64) || inbox["child_folder_count"] != 1.0 {
		t.Errorf("inbox counts %v", inbox)
	}
	hidden := names(e.ok(t, "ListMailFolders", map[string]any{"limit": 100, "include_hidden": true}))
	if hidden["Quarantine Notes"] == nil || hidden["Quarantine Notes"]["is_hidden"] != true {
		t.Errorf("include_hidden: %v", hidden)
	}
	kids := names(e.ok(t, "ListMailFolders", map[string]any{"parent_folder_id": top["Projects"]["id"]}))
	if len(kids) != 2 || kids["Apollo"] == nil || kids["Apollo"]["parent_folder_id"] != top["Projects"]["id"] {
		t.Errorf("children %v", kids)
	}
	// Paging folders.
	p1 := e.ok(t, "ListMailFolders", map[string]any{"limit": 2})
	p2 := e.ok(t, "ListMailFolders", map[string]any{"limit": 2, "pagination_token": p1["pagination_token"]})
	if p1["has_more"] != true || len(p2["folders"].([]any)) != 2 || names(p2)[p1["folders"].([]any)[0].(map[string]any)["name"].(string)] != nil {
		t.Errorf("folder pages %v / %v", p1, p2)
	}
	e.fails(t, "ListMailFolders", map[string]any{"parent_folder_id": missingID}, "NOT_FOUND")

	slides := e.find(t, "u1", "Slides for the board")
	out := e.ok(t, "ListEmailAttachments", map[string]any{"message_id": slides["id"]})
	atts := out["attachments"].([]any)
	if len(atts) != 2 || out["has_more"] != false {
		t.Fatalf("attachments %v", out)
	}
	var got []string
	for _, a := range atts {
		m := a.(map[string]any)
		if _, has := m["content_bytes"]; has || m["size"].(float64) <= 0 || m["id"] == "" {
			t.Errorf("attachment %v", m)
		}
		got = append(got, m["name"].(string)+"|"+m["content_type"].(string)+"|"+map[bool]string{true: "inline", false: "file"}[m["is_inline"].(bool)])
	}
	slices.Sort(got)
	if !slices.Equal(got, []string{"board-deck.pdf|application/pdf|file", "chart.png|image/png|inline"}) {
		t.Errorf("attachments %v", got)
	}
	for _, r := range e.sent.all() {
		if strings.HasSuffix(r.URL.Path, "/attachments") && !strings.Contains(r.URL.RawQuery, "$select=") {
			t.Errorf("attachments listed without $select: %s", r.URL.RawQuery)
		}
	}
	p1 = e.ok(t, "ListEmailAttachments", map[string]any{"message_id": slides["id"], "limit": 1})
	p2 = e.ok(t, "ListEmailAttachments", map[string]any{"message_id": slides["id"], "limit": 1, "pagination_token": p1["pagination_token"]})
	if len(p1["attachments"].([]any)) != 1 || len(p2["attachments"].([]any)) != 1 || p2["has_more"] != false {
		t.Errorf("attachment pages %v %v", p1, p2)
	}
	// A token of another message's attachments is refused.
	other := e.find(t, "u1", "Fwd: contract draft (v2)")
	e.fails(t, "ListEmailAttachments", map[string]any{"message_id": other["id"], "limit": 1, "pagination_token": p1["pagination_token"]}, "TOOL_INPUT_INVALID")
}

func TestWhoAmI(t *testing.T) {
	e := newEnv(t)
	out := e.ok(t, "WhoAmI", nil)
	p := out["profile"].(map[string]any)
	if p["email"] != "ann@contoso.com" || p["name"] != "Ann Lee" || p["job_title"] != "Product Manager" {
		t.Errorf("profile %v", p)
	}
	a := out["automatic_replies"].(map[string]any)
	if a["status"] != "scheduled" || a["external_audience"] != "contactsOnly" || a["scheduled_start"] == nil || !strings.Contains(a["internal_reply_message"].(string), "Priya covers") {
		t.Errorf("automatic replies %v", a)
	}
	if s := out["mailbox_settings"].(map[string]any); s["time_zone"] == nil {
		t.Errorf("settings %v", s)
	}
}

// TestErrors: Graph's refusals become clear tool errors: a token without
// the scope → AUTHORIZATION_FAILED (retry after reconnecting), throttling
// retried with Retry-After then UPSTREAM_ERROR can_retry; never a 5xx.
func TestErrors(t *testing.T) {
	e := newEnv(t)
	// The connection claims every scope, the token holds User.Read only.
	tok := e.token(t, "u1", ScopeUserRead)
	e.conns.Update("u1", func(c *oauthflow.Connection) { c.AccessToken = tok })
	err := e.fails(t, "ListEmails", nil, "AUTHORIZATION_FAILED")
	if !err.CanRetry || !strings.Contains(err.Message, "reconnect") {
		t.Errorf("%+v", err)
	}
	e.connect(t, "u1", allScopes...)
	// Throttled twice, then served: the toolkit waits Retry-After (1 s).
	var mu sync.Mutex
	n := 0
	e.thMu.Lock()
	e.throttle = func(r *http.Request) time.Duration {
		mu.Lock()
		defer mu.Unlock()
		if n++; n <= 2 {
			return time.Second
		}
		return 0
	}
	e.thMu.Unlock()
	start := time.Now()
	e.ok(t, "ListEmails", map[string]any{"limit": 1})
	if el := time.Since(start); el < 2*time.Second {
		t.Errorf("served after %v: Retry-After not honoured", el)
	}
	// Throttled for good: bounded attempts, then a retryable upstream error.
	e.thMu.Lock()
	e.throttle = func(*http.Request) time.Duration { return time.Second }
	e.thMu.Unlock()
	res := e.run(t, "ListEmails", map[string]any{"limit": 1})
	if res.Success || res.Error.Kind != "UPSTREAM_ERROR" || !res.Error.CanRetry {
		t.Errorf("throttled: %+v", res.Error)
	}
	e.thMu.Lock()
	e.throttle = nil
	e.thMu.Unlock()
	// Not connected.
	e.conns.Delete("u2")
	res = e.runAs(t, "u2", "WhoAmI", nil)
	if res.Success || res.Error.Kind != "AUTHORIZATION_REQUIRED" {
		t.Errorf("not connected: %+v", res.Error)
	}
}
