package graph_test

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/auditrail/auditrail/internal/emulators/graph"
	"github.com/auditrail/auditrail/internal/emulators/oauth"
)

func TestConfigValidate(t *testing.T) {
	o, err := oauth.New(oauth.Config{Clients: []oauth.Client{{ID: "a", Secret: "s", RedirectURIs: []string{"https://x/cb"}}},
		Users: []oauth.User{{ID: "u", Email: "u@x"}}})
	if err != nil {
		t.Fatal(err)
	}
	ok := graph.DefaultConfig()
	ok.Auth = o
	for _, tc := range []struct {
		name string
		mod  func(*graph.Config)
		bad  bool
	}{
		{"defaults", func(*graph.Config) {}, false},
		{"no auth", func(c *graph.Config) { c.Auth = nil }, true},
		{"no body", func(c *graph.Config) { c.MaxBodyBytes = -1 }, true},
		{"no top", func(c *graph.Config) { c.MaxTop = 0 }, true},
		{"base url", func(c *graph.Config) { c.BaseURL = "https://graph.example/v1.0" }, false},
		{"relative base", func(c *graph.Config) { c.BaseURL = "/v1.0" }, true},
		{"base with query", func(c *graph.Config) { c.BaseURL = "https://x/v1.0?a=b" }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := ok
			tc.mod(&c)
			err := c.Validate()
			if (err != nil) != tc.bad {
				t.Fatalf("Validate() = %v, want error %v", err, tc.bad)
			}
			if err != nil && !errors.Is(err, graph.ErrInvalidConfig) {
				t.Fatalf("error %v does not wrap ErrInvalidConfig", err)
			}
		})
	}
}

func TestMeAndSettings(t *testing.T) {
	e := newEnv(t)
	tok := e.token(t, "ann@contoso.com", "User.Read", "MailboxSettings.Read")
	me := e.must(t, 200, tok, "GET", "/me", nil).body
	if me["mail"] != "ann@contoso.com" || me["displayName"] != "Ann Lee" || me["userPrincipalName"] != "ann@contoso.com" || me["jobTitle"] != "Product Manager" || str(me, "id") == "" {
		t.Fatalf("/me = %v", me)
	}
	ms := e.must(t, 200, tok, "GET", "/me/mailboxSettings", nil).body
	ar, _ := ms["automaticRepliesSetting"].(map[string]any)
	if ms["timeZone"] != "UTC" || ar["status"] != "scheduled" || ar["externalAudience"] != "contactsOnly" ||
		str(ar, "scheduledStartDateTime", "dateTime") == "" || !strings.Contains(str(ar, "internalReplyMessage"), "on leave") ||
		str(ms, "language", "locale") != "en-US" {
		t.Fatalf("mailboxSettings = %v", ms)
	}
	if e.must(t, 200, tok, "GET", "/me/mailboxSettings/automaticRepliesSetting", nil).body["status"] != "scheduled" {
		t.Fatal("automaticRepliesSetting")
	}
	// The same through /users/{upn} and /users/{id}.
	if e.must(t, 200, tok, "GET", "/users/ann@contoso.com", nil).body["mail"] != "ann@contoso.com" {
		t.Fatal("/users/{upn}")
	}
	e.must(t, 200, tok, "GET", "/users/"+str(me, "id")+"/mailboxSettings", nil)
	// Another user's mailbox with a delegated token: 403.
	if r := e.do(t, tok, "GET", "/users/ben@contoso.com/messages", nil); r.status != 403 || r.code() != "ErrorAccessDenied" {
		t.Fatalf("other mailbox: %d %s", r.status, r.raw)
	}
	// A user without a mailbox yet gets one on first use.
	cy := e.token(t, "cy@contoso.com", allScopes...)
	if e.must(t, 200, cy, "GET", "/me", nil).body["displayName"] != "cy" {
		t.Fatal("new mailbox display name")
	}
	if n := len(e.all(t, cy, "/me/messages")); n != 0 {
		t.Fatalf("new mailbox has %d messages", n)
	}
}

func TestAuthAndScopeErrors(t *testing.T) {
	e := newEnv(t)
	read := e.token(t, "ann@contoso.com", "Mail.Read")
	rw := e.token(t, "ann@contoso.com", "Mail.ReadWrite")
	for _, tc := range []struct {
		name, tok, method, path string
		body                    any
		status                  int
		code                    string
	}{
		{"no token", "", "GET", "/me/messages", nil, 401, "InvalidAuthenticationToken"},
		{"bad token", "nope", "GET", "/me/messages", nil, 401, "InvalidAuthenticationToken"},
		{"me needs User.Read", read, "GET", "/me", nil, 403, "ErrorAccessDenied"},
		{"settings need MailboxSettings.Read", read, "GET", "/me/mailboxSettings", nil, 403, "ErrorAccessDenied"},
		{"draft needs Mail.ReadWrite", read, "POST", "/me/messages", map[string]any{"subject": "x"}, 403, "ErrorAccessDenied"},
		{"send needs Mail.Send", rw, "POST", "/me/sendMail", map[string]any{"message": map[string]any{"subject": "x"}}, 403, "ErrorAccessDenied"},
		{"ReadWrite reads", rw, "GET", "/me/messages", nil, 200, ""},
		{"Read reads folders", read, "GET", "/me/mailFolders", nil, 200, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := e.do(t, tc.tok, tc.method, tc.path, tc.body, "client-request-id", "c-123")
			if r.status != tc.status || r.code() != tc.code {
				t.Fatalf("%d %s, want %d %s", r.status, r.raw, tc.status, tc.code)
			}
			if tc.status == 401 && !strings.HasPrefix(r.header.Get("WWW-Authenticate"), "Bearer ") {
				t.Fatal("401 without WWW-Authenticate")
			}
			if tc.code != "" {
				inner, _ := r.body["error"].(map[string]any)["innerError"].(map[string]any)
				if inner["client-request-id"] != "c-123" || str(inner, "request-id") == "" || str(inner, "date") == "" ||
					str(r.body, "error", "message") == "" {
					t.Fatalf("error shape: %s", r.raw)
				}
			}
		})
	}
}

func TestFolders(t *testing.T) {
	e := newEnv(t)
	tok := e.token(t, "ann@contoso.com", "Mail.Read")
	top := e.all(t, tok, "/me/mailFolders")
	names := func(fs []map[string]any) []string {
		var out []string
		for _, f := range fs {
			out = append(out, str(f, "displayName"))
		}
		return out
	}
	want := []string{"Archive", "Conversation History", "Deleted Items", "Drafts", "Inbox", "Junk Email", "Outbox", "Projects", "Sent Items"}
	if got := names(top); !slices.Equal(got, want) {
		t.Fatalf("top folders = %v, want %v", got, want)
	}
	hidden := names(e.all(t, tok, "/me/mailFolders?includeHiddenFolders=true"))
	if !slices.Contains(hidden, "Quarantine Notes") || !slices.Contains(hidden, "Sync Issues") || len(hidden) != len(want)+2 {
		t.Fatalf("with hidden = %v", hidden)
	}
	// Paging: $top=4 gives pages of 4 with an absolute nextLink under the mount prefix.
	r := e.must(t, 200, tok, "GET", "/me/mailFolders?$top=4&$count=true", nil)
	next, _ := r.body["@odata.nextLink"].(string)
	if len(r.items()) != 4 || !strings.HasPrefix(next, e.api+"/me/mailFolders?") || r.body["@odata.count"] != float64(len(want)) {
		t.Fatalf("page: %d items, next %q, count %v", len(r.items()), next, r.body["@odata.count"])
	}
	if got := names(e.all(t, tok, "/me/mailFolders?$top=4")); !slices.Equal(got, want) {
		t.Fatalf("paged folders = %v", got)
	}
	// Well-known names in any case; counts agree with the messages listed.
	inbox := e.must(t, 200, tok, "GET", "/me/mailFolders/Inbox", nil).body
	if inbox["displayName"] != "Inbox" || inbox["childFolderCount"] != float64(1) || inbox["isHidden"] != false {
		t.Fatalf("inbox = %v", inbox)
	}
	msgs := e.all(t, tok, "/me/mailFolders/inbox/messages?$top=7")
	unread := 0
	for _, m := range msgs {
		if m["isRead"] == false {
			unread++
		}
		if m["parentFolderId"] != inbox["id"] {
			t.Fatalf("message of folder %v in inbox", m["parentFolderId"])
		}
	}
	if inbox["totalItemCount"] != float64(len(msgs)) || inbox["unreadItemCount"] != float64(unread) || unread == 0 {
		t.Fatalf("counts %v/%v, listed %d/%d", inbox["totalItemCount"], inbox["unreadItemCount"], len(msgs), unread)
	}
	// OData key segments, as Graph also accepts them.
	if got := e.all(t, tok, "/me/mailFolders('Inbox')/messages?$top=50"); len(got) != len(msgs) {
		t.Fatalf("mailFolders('Inbox')/messages: %d of %d", len(got), len(msgs))
	}
	e.must(t, 200, tok, "GET", "/me/messages('"+str(msgs[0], "id")+"')", nil)
	byID := e.must(t, 200, tok, "GET", "/me/mailFolders/"+str(inbox, "id"), nil).body
	if byID["displayName"] != "Inbox" {
		t.Fatal("folder by id")
	}
	child := e.all(t, tok, "/me/mailFolders/inbox/childFolders")
	if len(child) != 1 || child[0]["displayName"] != "Newsletters" || child[0]["parentFolderId"] != inbox["id"] {
		t.Fatalf("childFolders = %v", child)
	}
	var projects string
	for _, f := range top {
		if f["displayName"] == "Projects" {
			projects = str(f, "id")
		}
	}
	if got := names(e.all(t, tok, "/me/mailFolders/"+projects+"/childFolders")); !slices.Equal(got, []string{"Apollo", "Hermes"}) {
		t.Fatalf("Projects children = %v", got)
	}
	unreadTop := e.all(t, tok, "/me/mailFolders?$filter="+url.QueryEscape("unreadItemCount gt 0"))
	for _, f := range unreadTop {
		if f["unreadItemCount"].(float64) <= 0 {
			t.Fatalf("$filter on folders: %v", f)
		}
	}
	if len(unreadTop) == 0 || len(unreadTop) == len(top) {
		t.Fatalf("$filter unreadItemCount gt 0 kept %d of %d", len(unreadTop), len(top))
	}
	sel := e.must(t, 200, tok, "GET", "/me/mailFolders/drafts?$select=displayName", nil).body
	if len(sel) != 3 || sel["displayName"] != "Drafts" { // id, displayName, @odata.context
		t.Fatalf("$select = %v", sel)
	}
	for _, tc := range []struct {
		seg    string
		status int
		code   string
	}{
		{"starred", 400, "ErrorInvalidIdMalformed"}, // not a Graph well-known folder
		{"tasks", 400, "ErrorInvalidIdMalformed"},
		{"scheduled", 404, "ErrorItemNotFound"}, // well-known but absent from this mailbox
		{"AAMkAGVmMDEzMTM4LTZmYWUtNDdkNC1hMDZiLTU1OGY5OTZhYmY4OAAuAAAAAAAiQ8W967B7TKBjgx9rVEURAQAiIsqMbYjsT5e-T7KzowPTAAAAAAEMAAA=", 404, "ErrorItemNotFound"},
	} {
		if r := e.do(t, tok, "GET", "/me/mailFolders/"+tc.seg+"/messages", nil); r.status != tc.status || r.code() != tc.code {
			t.Fatalf("%s: %d %s", tc.seg, r.status, r.raw)
		}
	}
}

func TestListMessages(t *testing.T) {
	e := newEnv(t)
	tok := e.token(t, "ann@contoso.com", "Mail.Read")
	first := e.must(t, 200, tok, "GET", "/me/messages?$count=true", nil)
	all := e.all(t, tok, "/me/messages")
	if len(first.items()) != 10 || first.body["@odata.count"] != float64(len(all)) || len(all) < 55 {
		t.Fatalf("first page %d, count %v, all %d", len(first.items()), first.body["@odata.count"], len(all))
	}
	// Every folder's messages, newest received first, no duplicate.
	seen := map[string]bool{}
	for i, m := range all {
		if seen[str(m, "id")] {
			t.Fatalf("duplicate %s", m["id"])
		}
		seen[str(m, "id")] = true
		if i > 0 && str(all[i-1], "receivedDateTime") < str(m, "receivedDateTime") {
			t.Fatalf("not newest first at %d", i)
		}
		if m["uniqueBody"] != nil || m["attachments"] != nil {
			t.Fatalf("unrequested property in %v", m)
		}
	}
	folders := map[string]bool{}
	for _, m := range all {
		folders[str(m, "parentFolderId")] = true
	}
	if len(folders) < 8 {
		t.Fatalf("messages of %d folders", len(folders))
	}
	// $skip and $top.
	page := e.must(t, 200, tok, "GET", "/me/messages?$top=5&$skip=10", nil).items()
	for i, m := range page {
		if m["id"] != all[10+i]["id"] {
			t.Fatalf("$skip page differs at %d", i)
		}
	}
	// $select: only the selected properties plus id and @odata.etag.
	sel := e.must(t, 200, tok, "GET", "/me/messages?$select=subject,from&$top=3", nil).items()
	for _, m := range sel {
		_, hasFrom := m["from"]
		if len(m) != 4 || m["subject"] == nil || !hasFrom || m["@odata.etag"] == nil {
			t.Fatalf("$select answer %v", m)
		}
	}
	ub := e.must(t, 200, tok, "GET", "/me/messages?$select=uniqueBody&$top=1", nil).items()
	if str(ub[0], "uniqueBody", "contentType") == "" {
		t.Fatalf("uniqueBody not answered when selected: %v", ub[0])
	}
	// $filter evaluated against the messages (expected counts computed here).
	unread, flagged, withAtt := 0, 0, 0
	for _, m := range all {
		if m["isRead"] == false {
			unread++
		}
		if str(m, "flag", "flagStatus") == "flagged" {
			flagged++
		}
		if m["hasAttachments"] == true {
			withAtt++
		}
	}
	for _, tc := range []struct {
		filter string
		want   int
	}{
		{"isRead eq false", unread},
		{"flag/flagStatus eq 'flagged'", flagged},
		{"hasAttachments eq true", withAtt},
		{"subject eq 'Kate''s farewell party'", 1},
		{"subject eq '12345'", 1},
		{"categories/any(c: c eq 'CI')", 14},
		{"from/emailAddress/address eq 'priya@contoso.com' and importance eq 'high'", 1},
	} {
		got := e.all(t, tok, "/me/messages?$top=50&$filter="+url.QueryEscape(tc.filter))
		if len(got) != tc.want {
			t.Errorf("$filter=%s: %d messages, want %d", tc.filter, len(got), tc.want)
		}
	}
	// $orderby alone, and with the filter on the same property first.
	bySubject := e.all(t, tok, "/me/messages?$top=100&$orderby=subject")
	for i := 1; i < len(bySubject); i++ {
		if strings.ToLower(str(bySubject[i-1], "subject")) > strings.ToLower(str(bySubject[i], "subject")) {
			t.Fatalf("$orderby=subject out of order at %d: %q > %q", i, bySubject[i-1]["subject"], bySubject[i]["subject"])
		}
	}
	e.must(t, 200, tok, "GET", "/me/messages?$filter="+url.QueryEscape("importance eq 'high' and isRead eq false")+"&$orderby=importance", nil)
	for _, tc := range []struct {
		query, code string
	}{
		{"$filter=" + url.QueryEscape("isRead eq false") + "&$orderby=subject", "InefficientFilter"},
		{"$search=budget&$orderby=subject", "SearchWithOrderBy"},
		{"$search=budget&$filter=" + url.QueryEscape("isRead eq false"), "ErrorInvalidUrlQuery"},
		{"$filter=" + url.QueryEscape("subject eq"), "BadRequest"},
		{"$filter=" + url.QueryEscape("nope eq 1"), "BadRequest"},
		{"$orderby=nope", "BadRequest"},
		{"$top=1001", "BadRequest"},
		{"$top=-1", "BadRequest"},
		{"$skip=x", "BadRequest"},
		{"$select=subject,nope", "BadRequest"},
		{"$count=maybe", "BadRequest"},
	} {
		if r := e.do(t, tok, "GET", "/me/messages?"+tc.query, nil); r.status != 400 || r.code() != tc.code {
			t.Errorf("%s: %d %s, want 400 %s", tc.query, r.status, r.raw, tc.code)
		}
	}
	if n := len(e.must(t, 200, tok, "GET", "/me/messages?$top=1000", nil).items()); n != len(all) {
		t.Fatalf("$top=1000 answered %d of %d", n, len(all))
	}
}

func TestGetMessageAndPreferBody(t *testing.T) {
	e := newEnv(t)
	tok := e.token(t, "ann@contoso.com", "Mail.Read")
	find := func(subject string) map[string]any {
		t.Helper()
		got := e.all(t, tok, "/me/messages?$filter="+url.QueryEscape("subject eq '"+strings.ReplaceAll(subject, "'", "''")+"'"))
		if len(got) != 1 {
			t.Fatalf("%q: %d messages", subject, len(got))
		}
		return got[0]
	}
	nl := find("The Weekly Brief #3: Cloud costs")
	id := str(nl, "id")
	html := e.must(t, 200, tok, "GET", "/me/messages/"+id, nil)
	if str(html.body, "body", "contentType") != "html" || !strings.Contains(str(html.body, "body", "content"), "<h1>") || html.header.Get("Preference-Applied") != "" {
		t.Fatalf("stored body: %v", html.body["body"])
	}
	txt := e.must(t, 200, tok, "GET", "/me/messages/"+id, nil, "Prefer", `outlook.body-content-type="text"`)
	content := str(txt.body, "body", "content")
	if str(txt.body, "body", "contentType") != "text" || strings.Contains(content, "<") || strings.Contains(content, "trackOpen") ||
		strings.Contains(content, "color: #333") || !strings.Contains(content, "Cloud costs & more.") || !strings.Contains(content, "Markets > expectations") ||
		txt.header.Get("Preference-Applied") != `outlook.body-content-type="text"` {
		t.Fatalf("text body %q (applied %q)", content, txt.header.Get("Preference-Applied"))
	}
	if strings.Contains(str(nl, "bodyPreview"), "<") || len([]rune(str(nl, "bodyPreview"))) > 255 {
		t.Fatalf("bodyPreview %q", nl["bodyPreview"])
	}
	lunch := find("Lunch?")
	h := e.must(t, 200, tok, "GET", "/me/messages/"+str(lunch, "id"), nil, "Prefer", `outlook.body-content-type="html"`)
	if str(h.body, "body", "contentType") != "html" || !strings.Contains(str(h.body, "body", "content"), "<div class=\"PlainText\">Free for lunch tomorrow?</div>") {
		t.Fatalf("html of a text body: %v", h.body["body"])
	}
	long := find("Apollo design review minutes")
	if n := len([]rune(str(long, "body", "content"))); n < 5000 {
		t.Fatalf("long body has %d characters", n)
	}
	if len([]rune(str(long, "bodyPreview"))) != 255 {
		t.Fatalf("bodyPreview of the long body has %d characters", len([]rune(str(long, "bodyPreview"))))
	}
	// Folder-scoped GET only finds the folder's messages.
	e.must(t, 200, tok, "GET", "/me/mailFolders/inbox/messages/"+str(lunch, "id"), nil)
	if r := e.do(t, tok, "GET", "/me/mailFolders/drafts/messages/"+str(lunch, "id"), nil); r.status != 404 || r.code() != "ErrorItemNotFound" {
		t.Fatalf("message in another folder: %d", r.status)
	}
	sel := e.must(t, 200, tok, "GET", "/me/messages/"+str(lunch, "id")+"?$select=subject", nil).body
	if len(sel) != 4 || sel["subject"] != "Lunch?" { // @odata.context, @odata.etag, id, subject
		t.Fatalf("$select on GET: %v", sel)
	}
}

func TestIDErrors(t *testing.T) {
	e := newEnv(t)
	ann := e.token(t, "ann@contoso.com", allScopes...)
	ben := e.token(t, "ben@contoso.com", allScopes...)
	annMsg := str(e.must(t, 200, ann, "GET", "/me/messages?$top=1", nil).items()[0], "id")
	for _, tc := range []struct {
		name, tok, method, path string
		body                    any
		status                  int
		code                    string
	}{
		{"malformed", ann, "GET", "/me/messages/not-an-id", nil, 400, "ErrorInvalidIdMalformed"},
		{"unknown", ann, "GET", "/me/messages/AAMkAGI2TG93AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", nil, 404, "ErrorItemNotFound"},
		{"other mailbox", ben, "GET", "/me/messages/" + annMsg, nil, 404, "ErrorItemNotFound"},
		{"other mailbox patch", ben, "PATCH", "/me/messages/" + annMsg, map[string]any{"isRead": true}, 404, "ErrorItemNotFound"},
		{"unknown property", ann, "PATCH", "/me/messages/" + annMsg, map[string]any{"colour": "red"}, 400, "BadRequest"},
		{"bad importance", ann, "PATCH", "/me/messages/" + annMsg, map[string]any{"importance": "urgent"}, 400, "BadRequest"},
		{"bad json", ann, "POST", "/me/messages", "{", 400, "RequestBodyRead"},
		{"unknown action", ann, "POST", "/me/messages/" + annMsg + "/explode", map[string]any{}, 400, "BadRequest"},
		{"unknown path", ann, "GET", "/me/calendars", nil, 400, "BadRequest"},
		{"unknown attachment", ann, "GET", "/me/messages/" + annMsg + "/attachments/AAMkAGI2TG93AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", nil, 404, "ErrorItemNotFound"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if r := e.do(t, tc.tok, tc.method, tc.path, tc.body); r.status != tc.status || r.code() != tc.code {
				t.Fatalf("%d %s, want %d %s", r.status, r.raw, tc.status, tc.code)
			}
		})
	}
}

func TestAttachments(t *testing.T) {
	e := newEnv(t)
	tok := e.token(t, "ann@contoso.com", allScopes...)
	got := e.all(t, tok, "/me/messages?$filter="+url.QueryEscape("subject eq 'Fwd: contract draft (v2)'"))
	if len(got) != 1 || got[0]["hasAttachments"] != true {
		t.Fatalf("contract message: %v", got)
	}
	id := str(got[0], "id")
	atts := e.all(t, tok, "/me/messages/"+id+"/attachments?$top=1")
	if len(atts) != 2 {
		t.Fatalf("%d attachments", len(atts))
	}
	for _, a := range atts {
		if a["contentBytes"] != nil || str(a, "name") == "" || str(a, "contentType") == "" || a["size"] == nil || a["isInline"] != false ||
			a["@odata.type"] != "#microsoft.graph.fileAttachment" {
			t.Fatalf("listed attachment %v", a)
		}
	}
	one := e.must(t, 200, tok, "GET", "/me/messages/"+id+"/attachments/"+str(atts[1], "id"), nil).body
	if one["name"] != "notes.txt" || one["contentBytes"] != "Q2xhdXNlIDQgbmVlZHMgbGVnYWwgcmV2aWV3Lg==" {
		t.Fatalf("attachment %v", one)
	}
	// Only inline attachments: hasAttachments false is not the seed's case;
	// the deck has one file and one inline image.
	deck := e.all(t, tok, "/me/messages?$filter="+url.QueryEscape("subject eq 'Slides for the board'"))[0]
	if deck["hasAttachments"] != true || len(e.all(t, tok, "/me/messages/"+str(deck, "id")+"/attachments")) != 2 {
		t.Fatal("deck attachments")
	}
	// Attachments are added to drafts only.
	d := e.must(t, 201, tok, "POST", "/me/messages", map[string]any{"subject": "with file", "toRecipients": rcpts("x@example.com")}).body
	file := map[string]any{"@odata.type": "#microsoft.graph.fileAttachment", "name": "a.txt", "contentType": "text/plain", "contentBytes": "aGk="}
	e.must(t, 201, tok, "POST", "/me/messages/"+str(d, "id")+"/attachments", file)
	if e.must(t, 200, tok, "GET", "/me/messages/"+str(d, "id"), nil).body["hasAttachments"] != true {
		t.Fatal("hasAttachments after adding")
	}
	if r := e.do(t, tok, "POST", "/me/messages/"+id+"/attachments", file); r.status != 400 || r.code() != "ErrorInvalidPropertyUpdateSentMessage" {
		t.Fatalf("attachment on a received message: %d %s", r.status, r.raw)
	}
}

func TestThrottle(t *testing.T) {
	var calls atomic.Int32
	e := newEnv(t, func(c *graph.Config) {
		c.Throttle = func(r *http.Request, g oauth.Grant) time.Duration {
			if calls.Add(1) == 1 {
				return 1500 * time.Millisecond
			}
			return 0
		}
	})
	tok := e.token(t, "ann@contoso.com", "Mail.Read")
	r := e.do(t, tok, "GET", "/me/messages", nil)
	if r.status != 429 || r.header.Get("Retry-After") != "2" || r.code() != "ApplicationThrottled" {
		t.Fatalf("throttled: %d %q %s", r.status, r.header.Get("Retry-After"), r.raw)
	}
	e.must(t, 200, tok, "GET", "/me/messages", nil)
	before := calls.Load()
	e.must(t, 200, tok, "GET", "/users/ann@contoso.com/messages", nil)
	if n := calls.Load() - before; n != 1 {
		t.Fatalf("/users/… asked the throttle %d times", n)
	}
}

func TestDeleteAndMove(t *testing.T) {
	e := newEnv(t)
	tok := e.token(t, "ann@contoso.com", allScopes...)
	m := e.all(t, tok, "/me/messages?$filter="+url.QueryEscape("subject eq 'Lunch?'"))[0]
	moved := e.must(t, 201, tok, "POST", "/me/messages/"+str(m, "id")+"/move", map[string]any{"destinationId": "archive"}).body
	if moved["id"] == m["id"] || moved["parentFolderId"] == m["parentFolderId"] {
		t.Fatal("a move keeps the REST id")
	}
	if r := e.do(t, tok, "GET", "/me/messages/"+str(m, "id"), nil); r.status != 404 {
		t.Fatalf("old REST id after move: %d", r.status)
	}
	e.must(t, 204, tok, "DELETE", "/me/messages/"+str(moved, "id"), nil)
	del := e.all(t, tok, "/me/mailFolders/deleteditems/messages?$filter="+url.QueryEscape("subject eq 'Lunch?'"))
	if len(del) != 1 {
		t.Fatalf("deleted message not in Deleted Items: %d", len(del))
	}
	e.must(t, 204, tok, "DELETE", "/me/messages/"+str(del[0], "id"), nil)
	if n := len(e.all(t, tok, "/me/messages?$filter="+url.QueryEscape("subject eq 'Lunch?'"))); n != 0 {
		t.Fatalf("deleted twice, still %d", n)
	}
	if err := e.g.SeedSample("u1", "ann@contoso.com"); !errors.Is(err, graph.ErrAlreadySeeded) {
		t.Fatalf("second seed: %v", err)
	}
}

// TestSearch checks $search against answers computed here from the listed
// messages, its order (newest sent first) and paging.
func TestSearch(t *testing.T) {
	e := newEnv(t)
	tok := e.token(t, "ann@contoso.com", "Mail.Read")
	all := e.all(t, tok, "/me/messages?$top=100")
	words := func(s string) []string {
		return strings.FieldsFunc(strings.ToLower(s), func(r rune) bool {
			return !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 127)
		})
	}
	hasWordPrefix := func(s, p string) bool {
		return slices.ContainsFunc(words(s), func(w string) bool { return strings.HasPrefix(w, p) })
	}
	count := func(pred func(m map[string]any) bool) int {
		n := 0
		for _, m := range all {
			if pred(m) {
				n++
			}
		}
		return n
	}
	attNames := map[string][]string{}
	for _, m := range all {
		if m["hasAttachments"] == true {
			for _, a := range e.all(t, tok, "/me/messages/"+str(m, "id")+"/attachments") {
				attNames[str(m, "id")] = append(attNames[str(m, "id")], str(a, "name"))
			}
		}
	}
	for _, tc := range []struct {
		search string
		want   int
	}{
		{`"subject:farewell"`, count(func(m map[string]any) bool { return hasWordPrefix(str(m, "subject"), "farewell") })},
		{`"hasattachments:true"`, count(func(m map[string]any) bool { return m["hasAttachments"] == true })},
		{`"isread:false"`, count(func(m map[string]any) bool { return m["isRead"] == false })},
		{`"from:priya@contoso.com"`, count(func(m map[string]any) bool { return str(m, "from", "emailAddress", "address") == "priya@contoso.com" })},
		{`"attachment:contract"`, count(func(m map[string]any) bool {
			return slices.ContainsFunc(attNames[str(m, "id")], func(n string) bool { return hasWordPrefix(n, "contract") })
		})},
		{`"importance:high AND subject:build"`, count(func(m map[string]any) bool {
			return m["importance"] == "high" && hasWordPrefix(str(m, "subject"), "build")
		})},
	} {
		got := e.all(t, tok, "/me/messages?$top=3&$search="+url.QueryEscape(tc.search))
		if len(got) != tc.want || tc.want == 0 {
			t.Errorf("$search=%s: %d messages, want %d", tc.search, len(got), tc.want)
		}
		for i := 1; i < len(got); i++ {
			if str(got[i-1], "sentDateTime") < str(got[i], "sentDateTime") {
				t.Errorf("$search=%s: not newest sent first at %d", tc.search, i)
			}
		}
	}
	if r := e.do(t, tok, "GET", "/me/messages?$search="+url.QueryEscape(`"subject:(unbalanced"`), nil); r.status != 400 || r.code() == "" {
		t.Fatalf("bad $search: %d %s", r.status, r.raw)
	}
}

// TestConcurrentUse sends, reads and lists from several goroutines (run
// with -race).
func TestConcurrentUse(t *testing.T) {
	e := newEnv(t)
	ann := e.token(t, "ann@contoso.com", allScopes...)
	ben := e.token(t, "ben@contoso.com", allScopes...)
	const n = 8
	errs := make(chan string, 2*n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(2)
		go func(i int) {
			defer wg.Done()
			r := e.do(t, ann, "POST", "/me/sendMail", map[string]any{"message": map[string]any{"subject": fmt.Sprintf("c%d", i), "toRecipients": rcpts("ben@contoso.com")}})
			if r.status != 202 {
				errs <- string(r.raw)
			}
		}(i)
		go func() {
			defer wg.Done()
			if r := e.do(t, ben, "GET", "/me/messages?$top=5", nil); r.status != 200 {
				errs <- string(r.raw)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for s := range errs {
		t.Error(s)
	}
	if got := len(e.all(t, ben, "/me/mailFolders/inbox/messages")); got != n {
		t.Fatalf("ben received %d of %d", got, n)
	}
}

// TestNextLinkBase: nextLinks are absolute, under Config.BaseURL when set,
// else under the request's host and mount prefix; following them pages
// through without overlap.
func TestNextLinkBase(t *testing.T) {
	e := newEnv(t, func(c *graph.Config) { c.BaseURL = "https://graph.example/v1.0/" })
	tok := e.token(t, "ann@contoso.com", "Mail.Read")
	r := e.must(t, 200, tok, "GET", "/me/messages?$top=5&$filter="+url.QueryEscape("isRead eq false"), nil)
	next, _ := r.body["@odata.nextLink"].(string)
	u, err := url.Parse(next)
	if err != nil || u.Scheme != "https" || u.Host != "graph.example" || u.Path != "/v1.0/me/messages" ||
		u.Query().Get("$skip") != "5" || u.Query().Get("$filter") != "isRead eq false" || u.Query().Get("$top") != "5" {
		t.Fatalf("nextLink %q", next)
	}
	if !strings.HasPrefix(str(r.body, "@odata.context"), "https://graph.example/v1.0/$metadata#users('") {
		t.Fatalf("@odata.context %v", r.body["@odata.context"])
	}
	// $top=0 answers no page and no nextLink (no endless paging).
	if z := e.must(t, 200, tok, "GET", "/me/messages?$top=0", nil); len(z.items()) != 0 || z.body["@odata.nextLink"] != nil {
		t.Fatalf("$top=0: %s", z.raw)
	}
}

func TestSeedGenerated(t *testing.T) {
	e := newEnv(t)
	e.g.SeedGenerated("u2", "ben@contoso.com", 150, 7)
	tok := e.token(t, "ben@contoso.com", "Mail.Read")
	r := e.must(t, 200, tok, "GET", "/me/mailFolders/inbox/messages?$top=100&$count=true&$select=subject", nil)
	if len(r.items()) != 100 || r.body["@odata.count"] != float64(150) || r.body["@odata.nextLink"] == nil {
		t.Fatalf("generated inbox: %d items, count %v", len(r.items()), r.body["@odata.count"])
	}
	// The same seed gives the same subjects.
	e2 := newEnv(t)
	e2.g.SeedGenerated("u2", "ben@contoso.com", 150, 7)
	r2 := e2.must(t, 200, e2.token(t, "ben@contoso.com", "Mail.Read"), "GET", "/me/mailFolders/inbox/messages?$top=100&$select=subject", nil)
	for i, m := range r.items() {
		if m["subject"] != r2.items()[i]["subject"] {
			t.Fatalf("subject %d differs: %v / %v", i, m["subject"], r2.items()[i]["subject"])
		}
	}
}
