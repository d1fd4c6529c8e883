package odata

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

func msg(t testing.TB, s string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

const sample = `{
 "id": "AAA1", "subject": "Let's meet for LUNCH?", "importance": "high", "isRead": false, "hasAttachments": true,
 "receivedDateTime": "2026-01-02T03:04:05Z", "sentDateTime": "2026-01-02T03:04:00.5+01:00",
 "body": {"contentType": "html", "content": "<p>Numbers 123 and Ünïcode</p>"},
 "from": {"emailAddress": {"name": "Garth Fort", "address": "Garth.Fort@contoso.com"}},
 "sender": {"emailAddress": {"name": "Garth Fort", "address": "garth.fort@contoso.com"}},
 "toRecipients": [{"emailAddress": {"name": "Ann", "address": "ann@contoso.com"}},
                  {"emailAddress": {"name": "Bob", "address": "bob@fabrikam.com"}}],
 "ccRecipients": [],
 "categories": ["Red category", "Blue"],
 "flag": {"flagStatus": "flagged"},
 "parentFolderId": "123"
}`

func TestFilterMatch(t *testing.T) {
	m := msg(t, sample)
	tests := []struct {
		filter string
		want   bool
	}{
		{"subject eq 'Let''s meet for LUNCH?'", true},
		{"subject eq 'let''s meet for lunch?'", true}, // Exchange compares case-insensitively
		{"subject ne 'let''s meet for lunch?'", false},
		{"subject eq 'Lets meet'", false},
		{"importance eq 'high'", true},
		{"importance eq 'HIGH'", true},
		{"importance gt 'normal'", true}, // enums order by value: low < normal < high
		{"importance gt 'high'", false},
		{"importance ge 'normal'", true},
		{"importance lt 'low'", false},
		{"'high' eq importance", true},
		{"importance ne null", true},
		{"flag/flagStatus gt 'complete'", true},
		{"body/contentType eq 'html'", true},
		{"importance eq 'high' and isRead eq false", true},
		{"importance eq 'low' or isRead eq true", false},
		{"importance eq 'low' or isRead eq false", true},
		{"not (isRead eq true)", true},
		{"not isRead", true},
		{"isRead", false},
		{"hasAttachments", true},
		{"hasAttachments eq true and not (importance eq 'low')", true},
		{"(importance eq 'low' or importance eq 'high') and hasAttachments eq true", true},
		{"importance eq 'low' or importance eq 'high' and hasAttachments eq false", false}, // and binds tighter
		{"contains(subject, 'lunch')", true},
		{"contains(subject,'MEET FOR')", true},
		{"contains(subject, 'dinner')", false},
		{"contains(subject, 'lunch?')", true},
		{"startswith(subject, 'let''s')", true},
		{"endswith(subject, 'lunch?')", true},
		{"endswith(subject, 'lunch')", false},
		{"contains(body/content, 'ünï')", true},
		{"from/emailAddress/address eq 'garth.fort@contoso.com'", true},
		{"sender/emailAddress/name eq 'Garth Fort'", true},
		{"flag/flagStatus eq 'flagged'", true},
		{"flag/flagStatus ne 'flagged'", false},
		{"parentFolderId eq '123'", true}, // a quoted number is a string
		{"receivedDateTime ge 2026-01-02T03:04:05Z", true},
		{"receivedDateTime gt 2026-01-02T03:04:05Z", false},
		{"receivedDateTime lt 2026-01-02T04:04:05+01:00", false}, // the same instant
		{"receivedDateTime le 2026-01-02T04:04:05+01:00", true},
		{"receivedDateTime eq 2026-01-02T03:04:05.000Z", true},
		{"receivedDateTime ge 2026-01-02 and receivedDateTime lt 2026-01-03", true},
		{"receivedDateTime ge 2026-01-02T03:05Z", false},
		{"sentDateTime lt 2026-01-02T02:04:01Z", true}, // 02:04:00.5Z
		{"receivedDateTime ge 1900-01-01T00:00:00Z and from/emailAddress/address eq 'Garth.Fort@contoso.com'", true},
		{"toRecipients/any(r: r/emailAddress/address eq 'bob@fabrikam.com')", true},
		{"toRecipients/any(r:r/emailAddress/address eq 'carl@fabrikam.com')", false},
		{"toRecipients/all(r: endswith(r/emailAddress/address, '.com'))", true},
		{"toRecipients/all(r: endswith(r/emailAddress/address, 'contoso.com'))", false},
		{"toRecipients/any()", true},
		{"ccRecipients/any()", false},
		{"ccRecipients/all(r: r/emailAddress/address eq 'x')", true},
		{"bccRecipients/any(r: r/emailAddress/address eq 'x')", false}, // missing collection
		{"categories/any(c: c eq 'blue')", true},
		{"categories/any(c: startswith(c, 'red'))", true},
		{"categories/any(c: c eq 'Green')", false},
		{"not categories/any(c: c eq 'Green')", true},
		{"inferenceClassification eq null", true},
		{"inferenceClassification ne null", false},
		{"subject ne null", true},
		{"null eq subject", false},
		{"subject gt 'a'", true},
		{"subject lt 'a'", false},
		{"true", true},
		{"false or true", true},
		{"isRead eq isDraft", false},                  // isDraft is missing: null
		{"Subject eq 'let''s meet for lunch?'", true}, // Graph resolves names ignoring case
		{"ReceivedDateTime ge 2026-01-01T00:00:00Z and From/EmailAddress/Address eq 'garth.fort@contoso.com'", true},
		{"Contains(subject,'lunch')", true},
		{"ToRecipients/any(r: r/EmailAddress/address eq 'ann@contoso.com')", true},
		{"1 eq 1", true},
		{"1 eq 1.0", true},
		{"2 gt 10", false},
	}
	for _, tc := range tests {
		f, err := ParseFilter(tc.filter)
		if err != nil {
			t.Errorf("%s: %v", tc.filter, err)
			continue
		}
		if got := f.Match(m); got != tc.want {
			t.Errorf("%s: Match = %v, want %v", tc.filter, got, tc.want)
		}
		// The printed form parses back to the same tree and the same answer.
		g, err := ParseFilter(f.String())
		if err != nil {
			t.Errorf("%s: reparse of %q: %v", tc.filter, f.String(), err)
			continue
		}
		if !reflect.DeepEqual(f.Root, g.Root) {
			t.Errorf("%s: %q parses to a different tree", tc.filter, f.String())
		}
	}
}

func TestFilterErrors(t *testing.T) {
	tests := []struct {
		filter string
		code   string
		msg    string // a part of the message
	}{
		{"", CodeBadRequest, "Invalid filter clause: Expression expected"},
		{"subject eq", CodeBadRequest, "Expression expected at position 10"},
		{"subject eq 'x", CodeBadRequest, "unterminated string literal"},
		{"(subject eq 'x'", CodeBadRequest, "')' or operator expected"},
		{"subject eq 'x')", CodeBadRequest, "Syntax error at position 14"},
		{"subject eq 'x' and", CodeBadRequest, "Expression expected"},
		{"subject 'x'", CodeBadRequest, "Syntax error"},
		{"subject eq 123", CodeBadRequest, "Found operand types 'Edm.String' and 'Edm.Int32' for operator kind 'Equal'"},
		{"subject eq 1.5", CodeBadRequest, "'Edm.String' and 'Edm.Double'"},
		{"receivedDateTime ge '2026-01-02T03:04:05Z'", CodeBadRequest, "'Edm.DateTimeOffset' and 'Edm.String' for operator kind 'GreaterThanOrEqual'"},
		{"isRead eq 'true'", CodeBadRequest, "'Edm.Boolean' and 'Edm.String'"},
		{"importance eq 'urgent'", CodeBadRequest, "The string 'urgent' is not a valid enumeration type constant."},
		{"importance eq 2", CodeBadRequest, "'microsoft.graph.importance' and 'Edm.Int32'"},
		{"importance eq subject", CodeBadRequest, "'microsoft.graph.importance' and 'Edm.String'"},
		{"importance eq flag/flagStatus", CodeBadRequest, "'microsoft.graph.importance' and 'microsoft.graph.followupFlagStatus'"},
		{"contains(importance,'hi')", CodeBadRequest, "No function signature for the function with name 'contains'"},
		{"subject", CodeBadRequest, "must evaluate to a single boolean value"},
		{"subject and isRead", CodeBadRequest, "operator kind 'And'"},
		{"not subject", CodeBadRequest, "operator kind 'Not'"},
		{"foo eq 'x'", CodeBadRequest, "Could not find a property named 'foo' on type 'microsoft.graph.message'"},
		{"from/emailAddress/street eq 'x'", CodeBadRequest, "property named 'street' on type 'microsoft.graph.emailAddress'"},
		{"subject/length eq 'x'", CodeBadRequest, "property named 'length'"},
		{"from eq 'x'", CodeBadRequest, "not a single value"},
		{"toRecipients eq 'x'", CodeBadRequest, "not a single value"},
		{"subject/any(s: s eq 'x')", CodeBadRequest, "collection"},
		{"frob(subject, 'x')", CodeBadRequest, "An unknown function with name 'frob'"},
		{"tolower(subject) eq 'x'", CodeInvalidURLQueryFilter, "invalid nodes"},
		{"contains(subject)", CodeBadRequest, "No function signature for the function with name 'contains'"},
		{"contains(isRead, 'x')", CodeBadRequest, "No function signature"},
		{"contains(subject, 'x'", CodeBadRequest, "')' or ',' expected"},
		{"receivedDateTime ge 2026-13-02T03:04:05Z", CodeBadRequest, "Unrecognized 'Edm.DateTimeOffset' literal"},
		{"toRecipients/any(r: r/emailAddress/address)", CodeBadRequest, "single boolean value"},
		{"toRecipients/any(r r/emailAddress/address eq 'x')", CodeBadRequest, "':' expected"},
		{"toRecipients/any(r: toRecipients/any(r: r/emailAddress/address eq 'x'))", CodeBadRequest, "already been declared"},
		{"toRecipients/all()", CodeBadRequest, "Syntax error"},
		{"subject eq 'x' # 1", CodeBadRequest, "character '#' is not valid"},
		{strings.Repeat("(", 200) + "isRead" + strings.Repeat(")", 200), CodeBadRequest, "recursion limit"},
		{strings.Repeat("not ", 200) + "isRead", CodeBadRequest, "recursion limit"},
		{"12abc eq 1", CodeBadRequest, "Syntax error"},
	}
	for _, tc := range tests {
		_, err := ParseFilter(tc.filter)
		var oe *Error
		if !errors.As(err, &oe) {
			t.Errorf("%q: err = %v, want an *Error", tc.filter, err)
			continue
		}
		if oe.Code != tc.code || !strings.Contains(oe.Message, tc.msg) {
			t.Errorf("%q: %s %q, want %s containing %q", tc.filter, oe.Code, oe.Message, tc.code, tc.msg)
		}
	}
}

func TestFilterProperties(t *testing.T) {
	f, err := ParseFilter("ReceivedDateTime ge 2026-01-01T00:00:00Z and (contains(Subject,'x') or toRecipients/any(r: r/emailAddress/address eq 'a')) and subject ne 'y' and categories/any(c: c eq 'Red') and ccRecipients/any()")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"receivedDateTime", "subject", "toRecipients/emailAddress/address", "categories", "ccRecipients"}
	if got := f.Properties(); !reflect.DeepEqual(got, want) {
		t.Fatalf("Properties = %q, want %q", got, want)
	}
}
