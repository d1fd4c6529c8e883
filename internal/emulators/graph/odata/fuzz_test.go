package odata

import (
	"reflect"
	"testing"
)

// FuzzParseFilter: parsing never panics, every error is an *Error, and the
// printed form of a parsed filter parses back to an equal tree that gives
// the same answers.
func FuzzParseFilter(f *testing.F) {
	for _, s := range []string{
		"subject eq 'Let''s meet'", "importance eq 'high' and not (isRead eq true)",
		"contains(subject,'x') or startswith(from/emailAddress/address,'a')",
		"receivedDateTime ge 2026-01-02T03:04:05.123+01:00 and receivedDateTime lt 2026-02-01",
		"toRecipients/any(r: r/emailAddress/address eq 'x') and categories/all(c: c ne 'Red')",
		"ccRecipients/any()", "not not hasAttachments", "1 eq 1.5e3", "subject eq null", "((isRead))",
		"flag/flagStatus eq 'flagged'", "subject eq 123", "frob(x)", "(", "'", "-1e999 eq 1",
		"importance gt 'low'", "'HIGH' eq importance", "importance eq 'urgent'", "Subject eq 'x' and StartsWith(subject,'y')",
	} {
		f.Add(s)
	}
	obj := msg(f, sample)
	f.Fuzz(func(t *testing.T, s string) {
		p, err := ParseFilter(s)
		if err != nil {
			if _, ok := err.(*Error); !ok {
				t.Fatalf("%q: error of type %T", s, err)
			}
			return
		}
		out := p.String()
		q, err := ParseFilter(out)
		if err != nil {
			t.Fatalf("%q printed as %q: %v", s, out, err)
		}
		if !reflect.DeepEqual(p.Root, q.Root) {
			t.Fatalf("%q printed as %q parses to a different tree", s, out)
		}
		if p.Match(obj) != q.Match(obj) {
			t.Fatalf("%q and %q disagree", s, out)
		}
	})
}

// FuzzParseSearch: likewise for $search.
func FuzzParseSearch(f *testing.F) {
	for _, s := range []string{
		`"pizza"`, `pizza`, `"from:ann AND subject:(lunch OR dinner)"`, `received>=2026-01-01 received<=2026-01-31`,
		`NOT "quoted phrase" OR x`, `hasattachments:true importance:high isread:false category:red`,
		`"\"a b\" c"`, `attachment:report.xlsx`, `(`, `"`, `from:`, `to:"Ann Lee"`,
	} {
		f.Add(s)
	}
	obj := msg(f, searchSample)
	f.Fuzz(func(t *testing.T, s string) {
		p, err := ParseSearch(s)
		if err != nil {
			if _, ok := err.(*Error); !ok {
				t.Fatalf("%q: error of type %T", s, err)
			}
			return
		}
		out := p.String()
		q, err := ParseSearch(out)
		if err != nil {
			t.Fatalf("%q printed as %q: %v", s, out, err)
		}
		if !reflect.DeepEqual(p.Root, q.Root) {
			t.Fatalf("%q printed as %q parses to a different tree", s, out)
		}
		if p.Match(obj) != q.Match(obj) {
			t.Fatalf("%q and %q disagree", s, out)
		}
	})
}
