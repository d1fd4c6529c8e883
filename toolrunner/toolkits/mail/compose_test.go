package mail

import (
	"encoding/base64"
	"net/http"
	"slices"
	"strings"
	"testing"
)

// missingID is a well-formed message id of no message.
var missingID = base64.URLEncoding.EncodeToString(append([]byte{0x00, 0x03, 0x24, 0x00}, make([]byte, 40)...))

func addrs(v any) []string {
	var out []string
	for _, x := range v.([]any) {
		out = append(out, strings.ToLower(x.(map[string]any)["address"].(string)))
	}
	slices.Sort(out)
	return out
}

// TestUnsentStateTable is seeds/002's state table: each kind of un-sent
// email (draft, reply, reply-all and forward drafts) × UpdateDraftEmail ×
// SendDraftEmail; a sent email (and a received one) can be neither
// updated nor sent, and is refused before any write.
func TestUnsentStateTable(t *testing.T) {
	e := newEnv(t)
	orig := e.find(t, "u1", "Smørrebrød order for the offsite") // from soren, cc marc and kate
	origID := orig["id"].(string)
	tests := []struct {
		kind     string
		create   func(t *testing.T) string
		wantTo   []string // recipients after the update (to_add ben, to_remove kate)
		wantCc   []string
		quoted   bool
		sameConv bool
	}{
		{"draft", func(t *testing.T) string {
			out := e.ok(t, "CreateDraftEmail", map[string]any{"subject": "Plan", "body": "first text", "to_recipients": []string{"kate.obrien@contoso.com", "Li Wei <li.wei@example.cn>"},
				"cc_recipients": []string{"marc.dubois@fabrikam.fr"}, "bcc_recipients": []string{"hr@contoso.com"}})
			if out["is_draft"] != true || out["subject"] != "Plan" || !strings.Contains(out["body"].(string), "first text") {
				t.Fatalf("created %v", out)
			}
			return out["id"].(string)
		}, []string{"ben@contoso.com", "li.wei@example.cn"}, []string{"marc.dubois@fabrikam.fr"}, false, false},
		{"reply draft", func(t *testing.T) string {
			st, d := e.post(t, "u1", "/me/messages/"+origID+"/createReply", map[string]any{})
			if st != http.StatusCreated {
				t.Fatalf("createReply %d %v", st, d)
			}
			return d["id"].(string)
		}, []string{"ben@contoso.com", "soren@nordisk.dk"}, nil, true, true},
		{"reply-all draft", func(t *testing.T) string {
			_, d := e.post(t, "u1", "/me/messages/"+origID+"/createReplyAll", map[string]any{})
			return d["id"].(string)
		}, []string{"ben@contoso.com", "soren@nordisk.dk"}, []string{"marc.dubois@fabrikam.fr"}, true, true},
		{"forward draft", func(t *testing.T) string {
			_, d := e.post(t, "u1", "/me/messages/"+origID+"/createForward", map[string]any{})
			return d["id"].(string)
		}, []string{"ben@contoso.com"}, nil, true, true},
	}
	for _, tc := range tests {
		t.Run(tc.kind, func(t *testing.T) {
			id := tc.create(t)
			before := e.direct(t, "u1", "/me/messages/"+id)
			up := e.ok(t, "UpdateDraftEmail", map[string]any{"message_id": id, "subject": "Updated " + tc.kind, "body": "New text <b>not markup</b>\nsecond line",
				"to_add": []string{"BEN@contoso.com"}, "to_remove": []string{"KATE.OBRIEN@contoso.com"}, "cc_remove": []string{"kate.obrien@contoso.com"}})
			if up["id"] != id || up["is_draft"] != true || up["subject"] != "Updated "+tc.kind {
				t.Fatalf("updated %v", up)
			}
			if got := addrs(up["to"]); !slices.Equal(got, tc.wantTo) {
				t.Errorf("to %v, want %v", got, tc.wantTo)
			}
			if got := addrs(up["cc"]); len(got)+len(tc.wantCc) > 0 && !slices.Equal(got, tc.wantCc) {
				t.Errorf("cc %v, want %v", got, tc.wantCc)
			}
			body := up["body"].(string)
			if !strings.Contains(body, "New text &lt;b&gt;not markup&lt;/b&gt;<br>second line") && !strings.Contains(body, "New text <b>not markup</b>\nsecond line") {
				t.Errorf("body %q", body)
			}
			if tc.quoted {
				if !strings.Contains(body, "divRplyFwdMsg") || !strings.Contains(body, "smørrebrød choices") {
					t.Errorf("the quoted original was lost: %q", body)
				}
				if strings.Count(body, "<hr") != strings.Count(before["body"].(map[string]any)["content"].(string), "<hr") {
					t.Errorf("quote duplicated or cut: %q", body)
				}
			}
			if tc.sameConv && up["conversation_id"] != orig["conversationId"] && orig["conversationId"] != nil {
				t.Errorf("conversation %v, want %v (same kind of draft)", up["conversation_id"], orig["conversationId"])
			}
			// A second update keeps a single copy of the new text.
			up = e.ok(t, "UpdateDraftEmail", map[string]any{"message_id": id, "body": "Final text"})
			if b := up["body"].(string); strings.Contains(b, "New text") || !strings.Contains(b, "Final text") || tc.quoted && !strings.Contains(b, "smørrebrød choices") {
				t.Errorf("second update body %q", b)
			}
			benBefore := len(e.mailbox(t, "u2"))
			sent := e.ok(t, "SendDraftEmail", map[string]any{"message_id": id})
			if sent["id"] != id || sent["is_draft"] != false || sent["status"] != "sent" || sent["subject"] != "Updated "+tc.kind || sent["sent_at"] == nil {
				t.Fatalf("sent %v", sent)
			}
			sentItems := e.direct(t, "u1", "/me/mailFolders/sentitems")
			if sent["folder_id"] != sentItems["id"] {
				t.Errorf("sent email in folder %v, want Sent Items %v", sent["folder_id"], sentItems["id"])
			}
			if n := len(e.mailbox(t, "u2")); n != benBefore+1 {
				t.Errorf("ben's mailbox went from %d to %d messages", benBefore, n)
			}
			// Sent mail is not un-sent: refused before any write.
			e.sent.reset()
			for _, in := range []struct {
				tool string
				in   map[string]any
			}{{"UpdateDraftEmail", map[string]any{"message_id": id, "subject": "again"}}, {"SendDraftEmail", map[string]any{"message_id": id}}} {
				err := e.fails(t, in.tool, in.in, "TOOL_INPUT_INVALID")
				if !strings.Contains(err.Message, "not an un-sent email") {
					t.Errorf("%s: %s", in.tool, err.Message)
				}
			}
			for _, r := range e.sent.all() {
				if r.Method != http.MethodGet {
					t.Errorf("a refused call sent %s %s", r.Method, r.URL.Path)
				}
			}
			if n := len(e.mailbox(t, "u2")); n != benBefore+1 {
				t.Errorf("sent twice: ben has %d messages", n)
			}
		})
	}
	// A received email is not un-sent either.
	e.sent.reset()
	e.fails(t, "UpdateDraftEmail", map[string]any{"message_id": origID, "body": "x"}, "TOOL_INPUT_INVALID")
	e.fails(t, "SendDraftEmail", map[string]any{"message_id": origID}, "TOOL_INPUT_INVALID")
	for _, r := range e.sent.all() {
		if r.Method != http.MethodGet {
			t.Errorf("a refused call sent %s %s", r.Method, r.URL.Path)
		}
	}
	e.fails(t, "SendDraftEmail", map[string]any{"message_id": missingID}, "NOT_FOUND")
	e.fails(t, "UpdateDraftEmail", map[string]any{"message_id": origID}, "TOOL_INPUT_INVALID") // nothing to update
	e.fails(t, "SendDraftEmail", map[string]any{"message_id": "not-an-id"}, "TOOL_INPUT_INVALID")
	// Every request asked for immutable ids (a sent draft keeps its id).
	for _, r := range e.sent.all() {
		if !strings.Contains(r.Header.Get("Prefer"), `IdType="ImmutableId"`) {
			t.Errorf("%s %s without Prefer: IdType", r.Method, r.URL.Path)
		}
	}
}

func TestCreateAndSendAndReply(t *testing.T) {
	e := newEnv(t)
	out := e.ok(t, "CreateAndSendEmail", map[string]any{"subject": "Hello Ben", "body": "<p>Hi <b>Ben</b></p>", "body_type": "HTML",
		"to_recipients": []string{"Ben Ode <ben@contoso.com>"}, "cc_recipients": []string{"priya@contoso.com"}})
	if out["is_draft"] != false || out["status"] != "sent" || out["subject"] != "Hello Ben" || out["body_type"] != "html" {
		t.Fatalf("sent %v", out)
	}
	got := e.find(t, "u2", "Hello Ben")
	if got["isRead"] != false || !strings.Contains(got["body"].(map[string]any)["content"].(string), "Hi Ben") {
		t.Fatalf("ben received %v", got)
	}
	drafts, _ := e.graph.MessageCount("u1", "drafts")
	// Ben replies to all: Ann gets it, Priya is cc'd.
	reply := e.okAs(t, "u2", "ReplyToEmail", map[string]any{"message_id": got["id"], "body": "Thanks Ann!\nSee you.", "reply_type": "REPLY_ALL"})
	if reply["status"] != "sent" || reply["is_draft"] != false || reply["subject"] != "RE: Hello Ben" {
		t.Fatalf("reply %v", reply)
	}
	if to := addrs(reply["to"]); !slices.Equal(to, []string{"ann@contoso.com"}) {
		t.Errorf("reply-all to %v", to)
	}
	if cc := addrs(reply["cc"]); !slices.Equal(cc, []string{"priya@contoso.com"}) {
		t.Errorf("reply-all cc %v", cc)
	}
	back := e.find(t, "u1", "RE: Hello Ben")
	content := back["body"].(map[string]any)["content"].(string)
	if !strings.Contains(content, "Thanks Ann!") || !strings.Contains(content, "Hi Ben") || strings.Index(content, "Thanks Ann!") > strings.Index(content, "Hi Ben") {
		t.Errorf("Ann received %q: the reply text must come above the quoted original", content)
	}
	if back["conversationId"] != got["conversationId"] && got["conversationId"] != nil {
		t.Errorf("reply in another conversation")
	}
	// Reply to the sender only.
	r2 := e.ok(t, "ReplyToEmail", map[string]any{"message_id": back["id"], "body": "You're welcome"})
	if to := addrs(r2["to"]); !slices.Equal(to, []string{"ben@contoso.com"}) || len(addrs(r2["cc"])) != 0 {
		t.Errorf("reply to %v cc %v", to, r2["cc"])
	}
	if n, _ := e.graph.MessageCount("u1", "drafts"); n != drafts {
		t.Errorf("drafts left behind: %d, was %d", n, drafts)
	}
	e.fails(t, "ReplyToEmail", map[string]any{"message_id": missingID, "body": "x"}, "NOT_FOUND")
	e.fails(t, "CreateAndSendEmail", map[string]any{"subject": "x", "body": "x", "to_recipients": []string{"not an address"}}, "TOOL_INPUT_INVALID")
	e.fails(t, "CreateDraftEmail", map[string]any{"subject": "x", "body": "x", "to_recipients": []string{}}, "TOOL_INPUT_INVALID")
}
