package odata

import (
	"errors"
	"reflect"
	"sort"
	"strings"
	"testing"
)

func TestParseOrderBy(t *testing.T) {
	tests := []struct {
		in   string
		want []OrderKey
		err  string
	}{
		{in: "receivedDateTime", want: []OrderKey{{Path: "receivedDateTime"}}},
		{in: "receivedDateTime desc", want: []OrderKey{{Path: "receivedDateTime", Desc: true}}},
		{in: "receivedDateTime DESC", err: "Syntax error"},
		{in: "ReceivedDateTime desc,From/EmailAddress/Name", want: []OrderKey{{Path: "receivedDateTime", Desc: true}, {Path: "from/emailAddress/name"}}},
		{in: " importance desc , from/emailAddress/name asc,subject", want: []OrderKey{
			{Path: "importance", Desc: true}, {Path: "from/emailAddress/name"}, {Path: "subject"}}},
		{in: "", err: "Expression expected"},
		{in: "subject,", err: "Syntax error"},
		{in: "foo", err: "Could not find a property named 'foo'"},
		{in: "from", err: "single value of primitive type"},
		{in: "toRecipients", err: "single value of primitive type"},
		{in: "from/emailAddress/foo", err: "property named 'foo' on type 'microsoft.graph.emailAddress'"},
		{in: "subject desc desc", err: "Syntax error"},
		{in: "subject 'x'", err: "Syntax error"},
		{in: "subject,'x", err: "unterminated string literal"},
	}
	for _, tc := range tests {
		got, err := ParseOrderBy(tc.in)
		if tc.err != "" {
			var oe *Error
			if !errors.As(err, &oe) || oe.Code != CodeBadRequest || !strings.Contains(oe.Message, tc.err) || strings.HasPrefix(oe.Message, "Invalid filter clause") {
				t.Errorf("%q: err = %v, want %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%q: %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
	}
}

func TestCompare(t *testing.T) {
	msgs := []map[string]any{
		msg(t, `{"id":"a","subject":"banana","receivedDateTime":"2026-01-02T10:00:00+02:00","importance":"high"}`), // 08:00Z
		msg(t, `{"id":"b","subject":"Apple","receivedDateTime":"2026-01-02T09:00:00Z","importance":"high"}`),
		msg(t, `{"id":"c","subject":null,"receivedDateTime":"2026-01-02T08:30:00.5Z","importance":"low"}`),
		msg(t, `{"id":"d","subject":"apple pie","importance":"normal"}`),
		msg(t, `{"id":"e","subject":"Cherry","receivedDateTime":"2026-01-01T23:59:59Z","importance":"high","isRead":true}`),
	}
	tests := []struct {
		orderby string
		want    string
	}{
		{"subject", "cbdae"},                          // null first, case-insensitive
		{"subject desc", "eadbc"},                     // null last descending
		{"receivedDateTime", "deacb"},                 // as instants, not as strings
		{"receivedDateTime desc", "bcaed"},            //
		{"importance,subject desc", "cdeab"},          // enum order low, normal, high; ties by the next key
		{"importance desc,receivedDateTime", "eabdc"}, // high by time, normal, low
		{"isRead desc,id", "eabcd"},                   // missing sorts as null
	}
	for _, tc := range tests {
		keys, err := ParseOrderBy(tc.orderby)
		if err != nil {
			t.Fatal(err)
		}
		s := append([]map[string]any(nil), msgs...)
		sort.SliceStable(s, func(i, j int) bool { return Compare(keys, s[i], s[j]) < 0 })
		var got strings.Builder
		for _, m := range s {
			got.WriteString(m["id"].(string))
		}
		if got.String() != tc.want {
			t.Errorf("%s: %s, want %s", tc.orderby, got.String(), tc.want)
		}
	}
}

func TestCheckInefficient(t *testing.T) {
	tests := []struct {
		filter, orderby string
		ok              bool
	}{
		{"from/emailAddress/address eq 'a@b.c'", "", true},
		{"from/emailAddress/address eq 'a@b.c'", "receivedDateTime", false}, // Microsoft's example 1a
		{"receivedDateTime ge 1900-01-01T00:00:00Z and from/emailAddress/address eq 'a@b.c'", "receivedDateTime", true},
		{"receivedDateTime ge 1900-01-01T00:00:00Z and from/emailAddress/address eq 'a@b.c'", "receivedDateTime desc", true},
		{"receivedDateTime ge 2026-01-01 and hasAttachments eq true", "hasAttachments,receivedDateTime", false}, // wrong order
		{"hasAttachments eq true and receivedDateTime ge 2026-01-01", "hasAttachments,receivedDateTime desc", true},
		{"isRead eq false and subject eq 'x'", "subject", false}, // subject is not first
		{"subject eq 'x' and isRead eq false", "subject desc", true},
		{"subject eq 'x' or subject eq 'y'", "subject", true},
		{"contains(subject,'x')", "subject", true},
		{"importance eq 'high'", "importance,receivedDateTime", false}, // receivedDateTime missing
		{"toRecipients/any(r: r/emailAddress/address eq 'x')", "subject", false},
	}
	for _, tc := range tests {
		f, err := ParseFilter(tc.filter)
		if err != nil {
			t.Fatal(err)
		}
		var keys []OrderKey
		if tc.orderby != "" {
			if keys, err = ParseOrderBy(tc.orderby); err != nil {
				t.Fatal(err)
			}
		}
		err = CheckInefficient(f, keys)
		var oe *Error
		switch {
		case tc.ok && err != nil:
			t.Errorf("%s / %s: %v", tc.filter, tc.orderby, err)
		case !tc.ok && (!errors.As(err, &oe) || oe.Code != "InefficientFilter" || oe.Message != "The restriction or sort order is too complex for this operation."):
			t.Errorf("%s / %s: err = %v, want InefficientFilter", tc.filter, tc.orderby, err)
		}
	}
	if err := CheckInefficient(nil, []OrderKey{{Path: "subject"}}); err != nil {
		t.Errorf("no filter: %v", err)
	}
}
