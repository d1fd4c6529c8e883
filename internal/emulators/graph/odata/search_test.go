package odata

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

const searchSample = `{
 "subject": "Quarterly budget meeting", "importance": "high", "isRead": false, "hasAttachments": true,
 "receivedDateTime": "2026-03-04T23:30:00-02:00", "sentDateTime": "2026-03-04T10:00:00Z",
 "body": {"contentType": "html", "content": "<p>Please bring the Q3 numbers, pizza provided.</p>"},
 "from": {"emailAddress": {"name": "Garth Fort", "address": "garth.fort@contoso.com"}},
 "toRecipients": [{"emailAddress": {"name": "Ann Lee", "address": "ann@fabrikam.com"}}],
 "ccRecipients": [{"emailAddress": {"name": "Bob", "address": "bob@contoso.com"}}],
 "bccRecipients": [{"emailAddress": {"name": "Eve", "address": "eve@example.org"}}],
 "categories": ["Finance", "Red category"],
 "attachments": [{"name": "Q3-report.xlsx"}, {"name": "agenda.docx"}]
}`

func TestSearchMatch(t *testing.T) {
	m := msg(t, searchSample)
	tests := []struct {
		q    string
		want bool
	}{
		{`"pizza"`, true},
		{`pizza`, true},
		{`PIZZA`, true},
		{`pizz`, true}, // prefix of a word
		{`izza`, false},
		{`budget meeting`, true},
		{`meeting budget`, true},        // two words, any order
		{`"\"meeting budget\""`, false}, // a phrase keeps its order
		{`"\"budget meet\""`, true},
		{`garth`, true},  // from is a default property
		{`ann`, false},   // to is not
		{`to:ann`, true}, //
		{`to:ann@fabrikam.com`, true},
		{`to:ann@contoso.com`, false},
		{`from:garth.fort@contoso.com`, true},
		{`from:"Garth Fort"`, true},
		{`from:bob`, false},
		{`cc:bob`, true},
		{`bcc:eve`, true},
		{`recipients:eve`, true},
		{`recipients:garth`, false},
		{`participants:garth`, true},
		{`subject:budget`, true},
		{`subject:pizza`, false},
		{`body:pizza`, true},
		{`body:budget`, false},
		{`attachment:agenda`, true},
		{`attachment:q3-report`, true},
		{`attachment:minutes`, false},
		{`hasattachments:true`, true},
		{`hasAttachments:false`, false},
		{`importance:high`, true},
		{`importance:low`, false},
		{`isread:false`, true},
		{`category:finance`, true},
		{`category:red`, true},
		{`category:blue`, false},
		{`received:2026-03-05`, true}, // 23:30-02:00 is 01:30Z the next day
		{`received:2026-03-04`, false},
		{`received>=2026-03-05`, true},
		{`received<=2026-03-05`, true},
		{`received>2026-03-05`, false},
		{`received<2026-03-06`, true},
		{`received>=2026-03-01 AND received<=2026-03-04`, false},
		{`sent=2026-03-04`, true},
		{`sent<>2026-03-04`, false},
		{`received<>2026-03-04`, true},
		{`pizza AND budget`, true},
		{`pizza AND dinner`, false},
		{`pizza OR dinner`, true},
		{`dinner OR lunch`, false},
		{`NOT dinner`, true},
		{`NOT pizza`, false},
		{`pizza NOT budget`, false},
		{`(dinner OR pizza) AND from:garth`, true},
		{`dinner OR pizza AND from:bob`, false}, // AND binds tighter
		{`subject:(lunch OR budget)`, true},
		{`subject:(lunch OR pizza)`, false},
		{`pizza and dinner`, false}, // lower-case "and" is a word
		{`foo:pizza`, false},        // an unknown property is text: words foo, pizza
		{`"from:ann"`, false},
	}
	for _, tc := range tests {
		q, err := ParseSearch(tc.q)
		if err != nil {
			t.Errorf("%s: %v", tc.q, err)
			continue
		}
		if got := q.Match(m); got != tc.want {
			t.Errorf("%s: Match = %v, want %v", tc.q, got, tc.want)
		}
		r, err := ParseSearch(q.String())
		if err != nil {
			t.Errorf("%s: reparse of %s: %v", tc.q, q.String(), err)
			continue
		}
		if !reflect.DeepEqual(q.Root, r.Root) {
			t.Errorf("%s: %s parses to a different tree", tc.q, q.String())
		}
	}
}

func TestSearchErrors(t *testing.T) {
	tests := []struct{ q, msg string }{
		{``, "empty"},
		{`""`, "empty"},
		{`"pizza`, "unterminated"},
		{`pizza "budget`, "unterminated"},
		{`(pizza`, "')' expected"},
		{`pizza)`, "Syntax error"},
		{`pizza AND`, "Expression expected"},
		{`OR pizza`, "Syntax error"},
		{`received>=yesterday`, "not a date"},
		{`received:2026-02-30`, "not a date"},
		{`hasattachments:maybe`, "not true or false"},
		{`importance:urgent`, "not low, normal or high"},
		{`subject>=x`, "not valid for the property"},
		{`from<>ann`, "not valid for the property"},
		{`from: ann`, "value is expected"},
		{strings.Repeat("(", 300) + "x" + strings.Repeat(")", 300), "recursion limit"},
	}
	for _, tc := range tests {
		_, err := ParseSearch(tc.q)
		var oe *Error
		if !errors.As(err, &oe) || oe.Code != CodeBadRequest || !strings.Contains(oe.Message, tc.msg) {
			t.Errorf("%q: err = %v, want BadRequest containing %q", tc.q, err, tc.msg)
		}
	}
}
