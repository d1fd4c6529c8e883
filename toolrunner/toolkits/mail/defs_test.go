package mail

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/auditrail/auditrail/toolrunner"
)

func TestDefinitions(t *testing.T) {
	tk, err := New(DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	type want struct {
		params     string // name:type:required[=default], comma-separated
		ops        string
		ro, de, id bool
		scopes     []string
	}
	read, draft, send := []string{"Mail.Read"}, []string{"Mail.ReadWrite"}, []string{"Mail.ReadWrite", "Mail.Send"}
	list := "sort_by:string:false=receivedDateTime,sort_order:string:false=descending,limit:integer:false=10,pagination_token:string:false"
	compose := "subject:string:true,body:string:true,to_recipients:array<string>:true,cc_recipients:array<string>:false,bcc_recipients:array<string>:false,body_type:string:false=text"
	tests := map[string]want{
		"CreateAndSendEmail":   {compose, "create", false, true, false, send},
		"CreateDraftEmail":     {compose, "create", false, false, false, draft},
		"GetEmail":             {"message_id:string:true,body_format:string:false=plain_text,max_body_characters:integer:false=5000,body_offset:integer:false=0", "read", true, false, true, read},
		"ListEmailAttachments": {"message_id:string:true,limit:integer:false=25,pagination_token:string:false", "read", true, false, true, read},
		"ListEmails":           {list, "read", true, false, true, read},
		"ListEmailsByProperty": {"mail_property:string:true,operator:string:true,value:string:true," + list, "read", true, false, true, read},
		"ListEmailsInFolder":   {"well_known_folder_name:string:false,folder_id:string:false," + list, "read", true, false, true, read},
		"ListMailFolders":      {"parent_folder_id:string:false,include_hidden:boolean:false=false,limit:integer:false=25,pagination_token:string:false", "read", true, false, true, read},
		"ReplyToEmail":         {"message_id:string:true,body:string:true,reply_type:string:false=reply", "read,create", false, true, false, send},
		"SearchEmails": {"keywords:array<string>:false,sender:array<string>:false,recipient:array<string>:false,attachment_name:array<string>:false," +
			"has_attachments:boolean:false,importance:string:false,is_read:boolean:false,category:string:false,received_after:string:false,received_before:string:false," +
			"limit:integer:false=10,pagination_token:string:false", "read", true, false, true, read},
		"SendDraftEmail":   {"message_id:string:true", "read,update", false, true, false, send},
		"UpdateDraftEmail": {"message_id:string:true,subject:string:false,body:string:false,to_add:array<string>:false,to_remove:array<string>:false,cc_add:array<string>:false,cc_remove:array<string>:false,bcc_add:array<string>:false,bcc_remove:array<string>:false", "read,update", false, false, true, draft},
		"WhoAmI":           {"", "read", true, false, true, []string{"User.Read", "MailboxSettings.Read"}},
	}
	tools := tk.Tools()
	if len(tools) != 13 {
		t.Fatalf("%d tools, want 13", len(tools))
	}
	reg := toolrunner.NewRegistry()
	if err := reg.Register(tools...); err != nil {
		t.Fatalf("register: %v", err)
	}
	limits := map[string][3]int64{} // tool -> default, min, max of limit
	for _, tool := range tools {
		d := tool.Definition()
		w, ok := tests[d.Name]
		if !ok {
			t.Errorf("unexpected tool %s", d.Name)
			continue
		}
		var ps []string
		for _, p := range d.Parameters {
			s := p.Name + ":" + p.Type + ":" + map[bool]string{true: "true", false: "false"}[p.Required]
			if p.Default != nil {
				b, _ := json.Marshal(p.Default)
				s += "=" + strings.ReplaceAll(string(b), `"`, "")
			}
			ps = append(ps, s)
			if p.Name == "limit" {
				limits[d.Name] = [3]int64{p.Default.(int64), *p.Minimum, *p.Maximum}
			}
		}
		if got := strings.Join(ps, ","); got != w.params {
			t.Errorf("%s params\n got %s\nwant %s", d.Name, got, w.params)
		}
		b := d.Metadata.Behavior
		if d.Toolkit != "MailToolkit" || d.Version != "1.0.0" || d.Output.Type != "json" || strings.Join(b.Operations, ",") != w.ops ||
			b.ReadOnly != w.ro || b.Destructive != w.de || b.Idempotent != w.id || !b.OpenWorld || d.Deprecated ||
			!slices.Equal(d.Metadata.Classification.ServiceDomains, []string{"EMAIL"}) {
			t.Errorf("%s: %+v output %s", d.Name, d.Metadata, d.Output.Type)
		}
		if a := d.Requirements.Authorization; len(a) != 1 || a[0].ProviderID != "microsoft" || a[0].ProviderType != "microsoft" || !slices.Equal(a[0].Scopes, w.scopes) {
			t.Errorf("%s authorization %+v", d.Name, a)
		}
		if len(d.Requirements.Secrets) != 0 {
			t.Errorf("%s secrets %+v", d.Name, d.Requirements.Secrets)
		}
		delete(tests, d.Name)
	}
	if len(tests) > 0 {
		t.Errorf("missing tools: %v", tests)
	}
	wantLimits := map[string][3]int64{"ListEmails": {10, 1, 100}, "ListEmailsByProperty": {10, 1, 100}, "ListEmailsInFolder": {10, 1, 100},
		"ListEmailAttachments": {25, 1, 100}, "ListMailFolders": {25, 1, 100}, "SearchEmails": {10, 1, 25}}
	for name, w := range wantLimits {
		if limits[name] != w {
			t.Errorf("%s limit default/min/max %v, want %v", name, limits[name], w)
		}
	}
}

// TestEnumsAndBounds: the seed's values, its upper-case spellings, null
// max_body_characters, and the bounds enforced by the runner's validation.
func TestEnumsAndBounds(t *testing.T) {
	enums := map[string][]string{}
	for _, d := range []toolrunner.Definition{defListEmailsByProperty(), defListEmailsInFolder(), defGetEmail(), defReplyToEmail(), defSearchEmails(), defCreateDraftEmail()} {
		for _, p := range d.Parameters {
			if len(p.Enum) > 0 {
				enums[d.Name+"."+p.Name] = p.Enum
			}
		}
	}
	want := map[string]string{
		"ListEmailsByProperty.mail_property":        "subject,conversationId,receivedDateTime,sender/emailAddress/address,isRead,hasAttachments,importance,flag/flagStatus",
		"ListEmailsByProperty.operator":             "eq,ne,gt,ge,lt,le,startsWith,endsWith,contains",
		"ListEmailsByProperty.sort_by":              "receivedDateTime,subject,sender_email_address,importance",
		"ListEmailsByProperty.sort_order":           "ascending,descending",
		"ListEmailsInFolder.well_known_folder_name": "deleteditems,drafts,inbox,junkemail,sentitems,starred,tasks",
		"ListEmailsInFolder.sort_by":                "receivedDateTime,subject,sender_email_address,importance",
		"ListEmailsInFolder.sort_order":             "ascending,descending",
		"GetEmail.body_format":                      "plain_text,html",
		"ReplyToEmail.reply_type":                   "reply,reply_all",
		"SearchEmails.importance":                   "low,normal,high",
		"CreateDraftEmail.body_type":                "text,html",
	}
	for k, w := range want {
		if got := strings.Join(enums[k], ","); got != w {
			t.Errorf("%s enum %s, want %s", k, got, w)
		}
	}
	cases := []struct {
		def  toolrunner.Definition
		in   map[string]any
		fail string // the parameter named by the error, "" for valid
	}{
		{defGetEmail(), map[string]any{"message_id": "m", "body_format": "PLAIN_TEXT"}, ""},
		{defGetEmail(), map[string]any{"message_id": "m", "body_format": "HTML"}, ""},
		{defGetEmail(), map[string]any{"message_id": "m", "body_format": "markdown"}, "body_format"},
		{defGetEmail(), map[string]any{"message_id": "m", "max_body_characters": nil}, ""},
		{defGetEmail(), map[string]any{"message_id": "m", "max_body_characters": 0.0}, "max_body_characters"},
		{defGetEmail(), map[string]any{"message_id": "m", "body_offset": -1.0}, "body_offset"},
		{defReplyToEmail(), map[string]any{"message_id": "m", "body": "b", "reply_type": "REPLY_ALL"}, ""},
		{defListEmails(), map[string]any{"limit": 100.0}, ""},
		{defListEmails(), map[string]any{"limit": 101.0}, "limit"},
		{defListEmails(), map[string]any{"limit": 0.0}, "limit"},
		{defListEmails(), map[string]any{"sort_by": "size"}, "sort_by"},
		{defSearchEmails(), map[string]any{"limit": 25.0}, ""},
		{defSearchEmails(), map[string]any{"limit": 26.0}, "limit"},
		{defListMailFolders(), map[string]any{"limit": 101.0}, "limit"},
		{defListEmailAttachments(), map[string]any{"message_id": "m", "limit": 101.0}, "limit"},
		{defListEmailsInFolder(), map[string]any{"well_known_folder_name": "archive"}, "well_known_folder_name"},
		{defListEmailsByProperty(), map[string]any{"mail_property": "body", "operator": "eq", "value": "x"}, "mail_property"},
	}
	for _, c := range cases {
		out, err := toolrunner.Validate(c.def, c.in)
		if c.fail == "" {
			if err != nil {
				t.Errorf("%s %v: %v", c.def.Name, c.in, err)
			}
			if v, ok := c.in["max_body_characters"]; ok && v == nil {
				if got, present := out["max_body_characters"]; !present || got != nil {
					t.Errorf("null max_body_characters became %v", got)
				}
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), c.fail+":") {
			t.Errorf("%s %v: err %v, want one naming %s", c.def.Name, c.in, err, c.fail)
		}
	}
}
