package graph_test

import (
	"errors"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/auditrail/auditrail/internal/emulators/graph"
)

const immutable = `IdType="ImmutableId"`

// TestDraftStateTable runs seeds/002's table of un-sent mail: each kind of
// draft (new, reply, reply-all, forward) × update × send; sent mail refuses
// both.
func TestDraftStateTable(t *testing.T) {
	e := newEnv(t)
	tok := e.token(t, "ann@contoso.com", allScopes...)
	orig := e.all(t, tok, "/me/messages?$filter="+url.QueryEscape("subject eq 'Smørrebrød order for the offsite'"))[0]
	oid := str(orig, "id")
	for _, tc := range []struct {
		kind                   string
		create                 func() map[string]any
		wantTo, wantCc         []string
		wantSubject            string
		quoted, keepsConv, att bool
	}{
		{kind: "draft", create: func() map[string]any {
			return e.must(t, 201, tok, "POST", "/me/messages", map[string]any{"subject": "Plan", "body": map[string]any{"contentType": "text", "content": "first"},
				"toRecipients": rcpts("priya@contoso.com")}, "Prefer", immutable).body
		}, wantTo: []string{"priya@contoso.com"}, wantSubject: "Plan"},
		{kind: "reply", create: func() map[string]any {
			return e.must(t, 201, tok, "POST", "/me/messages/"+oid+"/createReply", map[string]any{"comment": "Herring for me"}, "Prefer", immutable).body
		}, wantTo: []string{"soren@nordisk.dk"}, wantSubject: "RE: Smørrebrød order for the offsite", quoted: true, keepsConv: true},
		{kind: "replyAll", create: func() map[string]any {
			return e.must(t, 201, tok, "POST", "/me/messages/"+oid+"/createReplyAll", nil, "Prefer", immutable).body
		}, wantTo: []string{"soren@nordisk.dk"}, wantCc: []string{"marc.dubois@fabrikam.fr", "kate.obrien@contoso.com"},
			wantSubject: "RE: Smørrebrød order for the offsite", quoted: true, keepsConv: true},
		{kind: "forward", create: func() map[string]any {
			return e.must(t, 201, tok, "POST", "/me/messages/"+oid+"/createForward", map[string]any{"comment": "FYI"}, "Prefer", immutable).body
		}, wantSubject: "FW: Smørrebrød order for the offsite", quoted: true, keepsConv: true},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			d := tc.create()
			id := str(d, "id")
			if d["isDraft"] != true || d["subject"] != tc.wantSubject || !slices.Equal(addrs(d, "toRecipients"), tc.wantTo) ||
				!slices.Equal(addrs(d, "ccRecipients"), tc.wantCc) || !strings.HasPrefix(id, "AAkALg") {
				t.Fatalf("created %s: subject %q to %v cc %v id %s draft %v", tc.kind, d["subject"], addrs(d, "toRecipients"), addrs(d, "ccRecipients"), id, d["isDraft"])
			}
			body := str(d, "body", "content")
			if tc.quoted && (!strings.Contains(body, "Please send your smørrebrød choices") || !strings.Contains(body, "<b>From:</b> Søren Ølgaard &lt;soren@nordisk.dk&gt;")) {
				t.Fatalf("%s body does not quote the original: %s", tc.kind, body)
			}
			if tc.keepsConv && d["conversationId"] != orig["conversationId"] {
				t.Fatal("conversationId not kept")
			}
			drafts := e.all(t, tok, "/me/mailFolders/drafts/messages?$top=50", "Prefer", immutable)
			if !slices.ContainsFunc(drafts, func(m map[string]any) bool { return m["id"] == id }) {
				t.Fatal("not in Drafts")
			}
			// Update: subject, body and recipients while un-sent.
			up := e.must(t, 200, tok, "PATCH", "/me/messages/"+id, map[string]any{"subject": tc.wantSubject + " (" + tc.kind + ")",
				"toRecipients": rcpts("ben@contoso.com", "x@external.example"), "ccRecipients": rcpts(), "categories": []string{"Blue category"}}, "Prefer", immutable).body
			if up["subject"] != tc.wantSubject+" ("+tc.kind+")" || !slices.Equal(addrs(up, "toRecipients"), []string{"ben@contoso.com", "x@external.example"}) ||
				str(up["toRecipients"].([]any)[0].(map[string]any), "emailAddress", "name") != "Ben Ode" ||
				str(up["toRecipients"].([]any)[1].(map[string]any), "emailAddress", "name") != "x@external.example" ||
				len(addrs(up, "ccRecipients")) != 0 || up["id"] != id || up["lastModifiedDateTime"] == d["lastModifiedDateTime"] {
				t.Fatalf("patched: %v", up)
			}
			// Send: 202, no body; the message is in Sent Items under the same immutable id.
			if r := e.must(t, 202, tok, "POST", "/me/messages/"+id+"/send", nil); len(r.raw) != 0 {
				t.Fatalf("send answered a body: %s", r.raw)
			}
			sent := e.must(t, 200, tok, "GET", "/me/messages/"+id, nil, "Prefer", immutable).body
			sentItems := e.must(t, 200, tok, "GET", "/me/mailFolders/sentitems", nil).body
			if sent["isDraft"] != false || sent["parentFolderId"] != sentItems["id"] || sent["sentDateTime"] == nil ||
				str(sent, "from", "emailAddress", "address") != "ann@contoso.com" || sent["id"] != id {
				t.Fatalf("sent: %v", sent)
			}
			// Sent mail can be neither updated nor sent again; flags and read state still change.
			if r := e.do(t, tok, "PATCH", "/me/messages/"+id, map[string]any{"subject": "changed"}); r.status != 400 || r.code() != "ErrorInvalidPropertyUpdateSentMessage" {
				t.Fatalf("PATCH subject of sent mail: %d %s", r.status, r.raw)
			}
			if r := e.do(t, tok, "PATCH", "/me/messages/"+id, map[string]any{"toRecipients": rcpts("y@example.com")}); r.status != 400 || r.code() != "ErrorInvalidPropertyUpdateSentMessage" {
				t.Fatalf("PATCH recipients of sent mail: %d %s", r.status, r.raw)
			}
			if r := e.do(t, tok, "POST", "/me/messages/"+id+"/send", nil); r.status != 404 || r.code() != "ErrorItemNotFound" {
				t.Fatalf("send of sent mail: %d %s", r.status, r.raw)
			}
			e.must(t, 200, tok, "PATCH", "/me/messages/"+id, map[string]any{"flag": map[string]any{"flagStatus": "flagged"}, "isRead": false})
			// Delivered to ben, not to the external address.
			ben := e.token(t, "ben@contoso.com", "Mail.Read")
			got := e.all(t, ben, "/me/mailFolders/inbox/messages?$filter="+url.QueryEscape("subject eq '"+tc.wantSubject+" ("+tc.kind+")'"))
			if len(got) != 1 || got[0]["isRead"] != false || got[0]["isDraft"] != false || str(got[0], "from", "emailAddress", "address") != "ann@contoso.com" {
				t.Fatalf("delivery to ben: %v", got)
			}
		})
	}
	// A received message cannot be sent or have its body changed.
	if r := e.do(t, tok, "POST", "/me/messages/"+oid+"/send", nil); r.status != 404 || r.code() != "ErrorItemNotFound" {
		t.Fatalf("send of received mail: %d %s", r.status, r.raw)
	}
	if r := e.do(t, tok, "PATCH", "/me/messages/"+oid, map[string]any{"body": map[string]any{"contentType": "text", "content": "x"}}); r.status != 400 || r.code() != "ErrorInvalidPropertyUpdateSentMessage" {
		t.Fatalf("PATCH body of received mail: %d %s", r.status, r.raw)
	}
}

// TestIDsWithoutImmutable: default (REST) ids change when a draft is sent
// (it moves to Sent Items), as Graph's do; immutable ids do not.
func TestIDsWithoutImmutable(t *testing.T) {
	e := newEnv(t)
	tok := e.token(t, "ann@contoso.com", allScopes...)
	d := e.must(t, 201, tok, "POST", "/me/messages", map[string]any{"subject": "ids", "toRecipients": rcpts("ben@contoso.com")}).body
	rest := str(d, "id")
	if !strings.HasPrefix(rest, "AAMkA") {
		t.Fatalf("REST id %s", rest)
	}
	imm := str(e.must(t, 200, tok, "GET", "/me/messages/"+rest, nil, "Prefer", immutable).body, "id")
	if imm == rest || !strings.HasPrefix(imm, "AAkALg") {
		t.Fatalf("immutable id %s", imm)
	}
	e.must(t, 202, tok, "POST", "/me/messages/"+rest+"/send", nil)
	if r := e.do(t, tok, "GET", "/me/messages/"+rest, nil); r.status != 404 || r.code() != "ErrorItemNotFound" {
		t.Fatalf("old REST id after send: %d", r.status)
	}
	sent := e.must(t, 200, tok, "GET", "/me/messages/"+imm, nil).body
	if sent["isDraft"] != false || sent["id"] == rest {
		t.Fatalf("by immutable id after send: %v", sent)
	}
	// Both preferences in one header, as a client sends them.
	both := e.must(t, 200, tok, "GET", "/me/messages/"+imm, nil, "Prefer", immutable+`, outlook.body-content-type="html"`)
	if both.body["id"] != imm || str(both.body, "body", "contentType") != "html" ||
		both.header.Get("Preference-Applied") != `outlook.body-content-type="html", `+immutable {
		t.Fatalf("combined Prefer: id %v, body %v, applied %q", both.body["id"], str(both.body, "body", "contentType"), both.header.Get("Preference-Applied"))
	}
}

func TestSendMailAndReplies(t *testing.T) {
	e := newEnv(t)
	ann := e.token(t, "ann@contoso.com", allScopes...)
	ben := e.token(t, "ben@contoso.com", allScopes...)
	sentBefore := len(e.all(t, ann, "/me/mailFolders/sentitems/messages"))
	e.must(t, 202, ann, "POST", "/me/sendMail", map[string]any{"message": map[string]any{"subject": "Hello Ben",
		"body":         map[string]any{"contentType": "html", "content": "<p>Hi <b>Ben</b></p>"},
		"toRecipients": rcpts("ben@contoso.com"), "bccRecipients": rcpts("cy@contoso.com")}, "saveToSentItems": false})
	if n := len(e.all(t, ann, "/me/mailFolders/sentitems/messages")); n != sentBefore {
		t.Fatalf("saveToSentItems false saved: %d → %d", sentBefore, n)
	}
	in := e.all(t, ben, "/me/mailFolders/inbox/messages")
	if len(in) != 1 || in[0]["subject"] != "Hello Ben" || len(addrs(in[0], "bccRecipients")) != 0 || in[0]["isRead"] != false {
		t.Fatalf("ben's inbox: %v", in)
	}
	// Ben replies directly (reply = createReply + send, 202).
	e.must(t, 202, ben, "POST", "/me/messages/"+str(in[0], "id")+"/reply", map[string]any{"comment": "Hi Ann!"})
	got := e.all(t, ann, "/me/mailFolders/inbox/messages?$filter="+url.QueryEscape("subject eq 'RE: Hello Ben'"), "Prefer", `outlook.body-content-type="text"`)
	if len(got) != 1 || !strings.HasPrefix(str(got[0], "body", "content"), "Hi Ann!") || !strings.Contains(str(got[0], "body", "content"), "Hi Ben") ||
		str(got[0], "from", "emailAddress", "address") != "ben@contoso.com" {
		t.Fatalf("ann's reply: %v", got)
	}
	if n := len(e.all(t, ben, "/me/mailFolders/sentitems/messages")); n != 1 {
		t.Fatalf("ben's sent items: %d", n)
	}
	for _, tc := range []struct {
		name string
		body map[string]any
		code string
	}{
		{"no message", map[string]any{}, "ErrorInvalidRequest"},
		{"no recipient", map[string]any{"message": map[string]any{"subject": "x"}}, "ErrorInvalidRecipients"},
		{"bad recipient", map[string]any{"message": map[string]any{"subject": "x", "toRecipients": rcpts("not an address")}}, "ErrorInvalidRecipients"},
		{"unknown property", map[string]any{"message": map[string]any{"subjekt": "x"}}, "BadRequest"},
	} {
		if r := e.do(t, ann, "POST", "/me/sendMail", tc.body); r.status != 400 || r.code() != tc.code {
			t.Errorf("%s: %d %s", tc.name, r.status, r.raw)
		}
	}
	// A forward draft has no recipient: send refuses until one is added.
	orig := e.all(t, ann, "/me/messages?$filter="+url.QueryEscape("subject eq 'Fwd: contract draft (v2)'"))[0]
	fw := e.must(t, 201, ann, "POST", "/me/messages/"+str(orig, "id")+"/createForward", nil).body
	if r := e.do(t, ann, "POST", "/me/messages/"+str(fw, "id")+"/send", nil); r.status != 400 || r.code() != "ErrorInvalidRecipients" {
		t.Fatalf("forward without recipient: %d %s", r.status, r.raw)
	}
	if len(e.all(t, ann, "/me/messages/"+str(fw, "id")+"/attachments")) != 2 {
		t.Fatal("forward lost the attachments")
	}
}

// TestWriteRequests covers the other writes: drafts in a named folder,
// copies, reply-all and forward sent at once, a createReply with message
// properties, and the request errors of writes.
func TestWriteRequests(t *testing.T) {
	e := newEnv(t, func(c *graph.Config) { c.MaxBodyBytes = 4096 })
	tok := e.token(t, "ann@contoso.com", allScopes...)
	ben := e.token(t, "ben@contoso.com", "Mail.Read")
	d := e.must(t, 201, tok, "POST", "/me/mailFolders/archive/messages", map[string]any{"subject": "filed",
		"attachments": []any{map[string]any{"@odata.type": "#microsoft.graph.fileAttachment", "name": "n.txt", "contentBytes": "eA=="}}}).body
	archive := e.must(t, 200, tok, "GET", "/me/mailFolders/archive", nil).body
	if d["parentFolderId"] != archive["id"] || d["isDraft"] != true || d["hasAttachments"] != true {
		t.Fatalf("draft in archive: %v", d)
	}
	cp := e.must(t, 201, tok, "POST", "/me/messages/"+str(d, "id")+"/copy", map[string]any{"destinationId": "inbox"}).body
	if cp["id"] == d["id"] || cp["subject"] != "filed" || len(e.all(t, tok, "/me/messages/"+str(cp, "id")+"/attachments")) != 1 {
		t.Fatalf("copy: %v", cp)
	}
	e.must(t, 200, tok, "GET", "/me/messages/"+str(d, "id"), nil)                                    // the original stays
	orig := e.all(t, tok, "/me/messages?$filter="+url.QueryEscape("subject eq 'Offsite agenda'"))[0] // sent by ann to soren, marc
	e.must(t, 202, tok, "POST", "/me/messages/"+str(orig, "id")+"/replyAll", map[string]any{"comment": "Updated agenda",
		"message": map[string]any{"ccRecipients": rcpts("ben@contoso.com")}})
	got := e.all(t, ben, "/me/messages?$filter="+url.QueryEscape("subject eq 'RE: Offsite agenda'"))
	if len(got) != 1 || !slices.Equal(addrs(got[0], "toRecipients"), []string{"soren@nordisk.dk", "marc.dubois@fabrikam.fr"}) {
		t.Fatalf("reply-all to own message: %v", got)
	}
	e.must(t, 202, tok, "POST", "/me/messages/"+str(orig, "id")+"/forward", map[string]any{"comment": "FYI", "toRecipients": rcpts("ben@contoso.com")})
	fw := e.all(t, ben, "/me/messages?$filter="+url.QueryEscape("subject eq 'FW: Offsite agenda'"))
	if len(fw) != 1 || fw[0]["hasAttachments"] != true {
		t.Fatalf("forward: %v", fw)
	}
	if r := e.do(t, tok, "POST", "/me/messages/"+str(orig, "id")+"/forward", map[string]any{"comment": "nobody"}); r.status != 400 || r.code() != "ErrorInvalidRecipients" {
		t.Fatalf("forward without recipients: %d %s", r.status, r.raw)
	}
	cr := e.must(t, 201, tok, "POST", "/me/messages/"+str(orig, "id")+"/createReply", map[string]any{"message": map[string]any{
		"body": map[string]any{"contentType": "text", "content": "mine"}, "importance": "high"}}).body
	if str(cr, "body", "content") != "mine" || cr["importance"] != "high" {
		t.Fatalf("createReply with message: %v", cr)
	}
	big := strings.Repeat("x", 5000)
	for _, tc := range []struct {
		name, method, path string
		body               any
		hdr                []string
		status             int
		code               string
	}{
		{"too large", "POST", "/me/messages", map[string]any{"subject": big}, nil, 413, "RequestEntityTooLarge"},
		{"not json", "POST", "/me/messages", map[string]any{}, []string{"Content-Type", "text/plain"}, 415, "UnsupportedMediaType"},
		{"empty patch", "PATCH", "/me/messages/" + str(d, "id"), nil, nil, 400, "RequestBodyRead"},
		{"bad flag", "PATCH", "/me/messages/" + str(d, "id"), map[string]any{"flag": map[string]any{"flagStatus": "red"}}, nil, 400, "BadRequest"},
		{"bad body type", "PATCH", "/me/messages/" + str(d, "id"), map[string]any{"body": map[string]any{"contentType": "rtf", "content": "x"}}, nil, 400, "BadRequest"},
		{"bad type", "PATCH", "/me/messages/" + str(d, "id"), map[string]any{"isRead": "yes"}, nil, 400, "BadRequest"},
		{"bad attachment", "POST", "/me/messages", map[string]any{"attachments": []any{map[string]any{"name": "a", "contentBytes": "%%%"}}}, nil, 400, "BadRequest"},
		{"item attachment", "POST", "/me/messages/" + str(d, "id") + "/attachments", map[string]any{"@odata.type": "#microsoft.graph.itemAttachment", "name": "a"}, nil, 400, "ErrorInvalidRequest"},
		{"bad destination", "POST", "/me/messages/" + str(d, "id") + "/move", map[string]any{"destinationId": "starred"}, nil, 400, "ErrorInvalidIdMalformed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if r := e.do(t, tok, tc.method, tc.path, tc.body, tc.hdr...); r.status != tc.status || r.code() != tc.code {
				t.Fatalf("%d %s, want %d %s", r.status, r.raw, tc.status, tc.code)
			}
		})
	}
	if err := e.g.SetMailboxSettings("u1", graph.MailboxSettings{TimeZone: "Europe/Paris", AutoReplyStatus: "alwaysEnabled", ExternalAudience: "none"}); err != nil {
		t.Fatal(err)
	}
	st := e.must(t, 200, tok, "GET", "/me/mailboxSettings", nil).body
	if st["timeZone"] != "Europe/Paris" || str(st, "automaticRepliesSetting", "status") != "alwaysEnabled" {
		t.Fatalf("settings after SetMailboxSettings: %v", st)
	}
	if err := e.g.SetMailboxSettings("nobody", graph.MailboxSettings{}); !errors.Is(err, graph.ErrUnknownMailbox) {
		t.Fatalf("unknown mailbox: %v", err)
	}
	if n, err := e.g.MessageCount("u2", "inbox"); err != nil || n != 2 { // the reply-all (cc) and the forward
		t.Fatalf("ben's inbox: %d %v", n, err)
	}
}
