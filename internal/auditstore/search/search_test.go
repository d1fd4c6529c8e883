package search

import (
	"errors"
	"net/netip"
	"reflect"
	"strings"
	"testing"

	"github.com/auditrail/auditrail/schemas"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name string
		kind Kind
		in   string
		want []Term
	}{
		{"empty", Audit, "  ", nil},
		{"word", Audit, "alice", []Term{{Values: []string{"alice"}}}},
		{"phrase", Audit, `"prod key"`, []Term{{Values: []string{"prod key"}}}},
		{"negated phrase", Audit, `-"prod key"`, []Term{{Not: true, Values: []string{"prod key"}}}},
		{"escaped quote", Audit, `"a \"b\" \\c"`, []Term{{Values: []string{`a "b" \c`}}}},
		{"enum short and long", Audit, "action:CREATED,AUDIT_ACTION_DELETED", []Term{{Key: "action", Values: []string{"CREATED", "AUDIT_ACTION_DELETED"}, Nums: []uint8{uint8(schemas.AuditActionCreated), uint8(schemas.AuditActionDeleted)}}}},
		{"several", Audit, `source:CLI -resource_type:HOOK  actor:"Ann Lee" x`, []Term{
			{Key: "source", Values: []string{"CLI"}, Nums: []uint8{uint8(schemas.AuditSourceCLI)}},
			{Key: "resource_type", Not: true, Values: []string{"HOOK"}, Nums: []uint8{uint8(schemas.ResourceTypeHook)}},
			{Key: "actor", Values: []string{"Ann Lee"}},
			{Values: []string{"x"}},
		}},
		{"quoted list", Audit, `resource_id:"a b",c,"d,e"`, []Term{{Key: "resource_id", Values: []string{"a b", "c", "d,e"}}}},
		{"ip and cidr", Audit, "ip:10.0.0.7,10.1.0.0/16,2001:db8::/32,::ffff:1.2.3.4", []Term{{Key: "ip", Values: []string{"10.0.0.7", "10.1.0.0/16", "2001:db8::/32", "::ffff:1.2.3.4"},
			Prefixes: []netip.Prefix{netip.MustParsePrefix("10.0.0.7/32"), netip.MustParsePrefix("10.1.0.0/16"), netip.MustParsePrefix("2001:db8::/32"), netip.MustParsePrefix("1.2.3.4/32")}}}},
		{"mapped cidr", Audit, "ip:::ffff:10.1.0.0/112,::/0", []Term{{Key: "ip", Values: []string{"::ffff:10.1.0.0/112", "::/0"}, Prefixes: []netip.Prefix{netip.MustParsePrefix("10.1.0.0/16"), netip.MustParsePrefix("::/0")}}}},
		{"cidr masked", Audit, "ip:10.1.2.3/8", []Term{{Key: "ip", Values: []string{"10.1.2.3/8"}, Prefixes: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}}}},
		{"uuids", Audit, "event_id:0193a0b0-0000-7000-8000-000000000001 project:0193a0b0-0000-7000-8000-000000000002", []Term{
			{Key: "event_id", Values: []string{"0193a0b0-0000-7000-8000-000000000001"}},
			{Key: "project", Values: []string{"0193a0b0-0000-7000-8000-000000000002"}},
		}},
		{"exec keys", Executions, "tool:Search toolkit:docs -success:true hook_decision:deny,fail_open error_kind:timeout user:u1", []Term{
			{Key: "tool", Values: []string{"Search"}},
			{Key: "toolkit", Values: []string{"docs"}},
			{Key: "success", Not: true, Values: []string{"true"}},
			{Key: "hook_decision", Values: []string{"deny", "fail_open"}},
			{Key: "error_kind", Values: []string{"timeout"}},
			{Key: "user", Values: []string{"u1"}},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q, err := Parse(tc.kind, tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(q.Terms, tc.want) {
				t.Fatalf("got %+v\nwant %+v", q.Terms, tc.want)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct {
		kind Kind
		in   string
		msg  string // the error message contains it
	}{
		{Audit, `action:CREATED source:CLI actoor:x`, `term 3 "actoor:x": unknown key actoor; keys: action, source, resource_type, resource_id, actor, principal_type, project, ip, event_id`},
		{Audit, `tool:x`, `term 1 "tool:x": unknown key tool`},
		{Executions, `actor:x`, `unknown key actor; keys: tool, toolkit, user, success, hook_decision, error_kind`},
		{Audit, `action:NOPE`, `term 1 "action:NOPE": unknown enum name: action "NOPE"; one of CREATED`},
		{Audit, `action:UNSPECIFIED`, `is no action filter`},
		{Audit, `resource_type:RESOURCE_TYPE_UNSPECIFIED`, `is no resource_type filter`},
		{Audit, `"open`, `term 1 "\"open": unterminated quote`},
		{Audit, `a "open`, `term 2 "\"open": unterminated quote`},
		{Audit, `actor:`, `empty value`},
		{Audit, `actor:a,`, `empty value after ,`},
		{Audit, `actor:a,,b`, `empty value`},
		{Audit, `-`, `nothing after -`},
		{Audit, `""`, `empty phrase`},
		{Audit, `"a"b`, `after the quoted phrase`},
		{Audit, `actor:"a"b`, `after a quoted value`},
		{Audit, `ab"c d"`, `a quote inside a word`},
		{Audit, `actor:a"b c"`, `a quote inside a value`},
		{Audit, `ip:10.0.0.300`, `ip "10.0.0.300" is not an address or a CIDR`},
		{Audit, `ip:10.0.0.0/33`, `is not an address or a CIDR`},
		{Audit, `ip:fe80::1%eth0`, `is not an address or a CIDR`},
		{Audit, `event_id:nope`, `event_id "nope" is not a UUID`},
		{Audit, `project:0193a0b000007000800000000000000100000`, `is not a UUID`},
		{Executions, `success:yes`, `success "yes" is not true or false`},
		{Executions, `hook_decision:maybe`, `one of allow, deny, fail_open, fail_closed`},
		{Audit, strings.Repeat("a ", MaxTerms+1), `17 terms, at most 16`},
		{Audit, "actor:" + strings.Repeat("a,", MaxValues) + "a", `33 values, at most 32`},
		{Audit, strings.Repeat("a", MaxLen+1), `longer than 1024 bytes`},
		{Audit, "\xff", `not UTF-8`},
	} {
		t.Run(tc.in, func(t *testing.T) {
			_, err := Parse(tc.kind, tc.in)
			if !errors.Is(err, ErrSyntax) {
				t.Fatalf("Parse(%q) = %v, want ErrSyntax", tc.in, err)
			}
			if !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("Parse(%q) = %q, want it to contain %q", tc.in, err, tc.msg)
			}
		})
	}
}

func TestRange16(t *testing.T) {
	for _, tc := range []struct{ prefix, lo, hi string }{
		{"10.1.0.0/16", "00000000000000000000FFFF0A010000", "00000000000000000000FFFF0A01FFFF"},
		{"1.2.3.4/32", "00000000000000000000FFFF01020304", "00000000000000000000FFFF01020304"},
		{"0.0.0.0/0", "00000000000000000000FFFF00000000", "00000000000000000000FFFFFFFFFFFF"},
		{"2001:db8::/32", "20010DB8000000000000000000000000", "20010DB8FFFFFFFFFFFFFFFFFFFFFFFF"},
		{"2001:db8::1/128", "20010DB8000000000000000000000001", "20010DB8000000000000000000000001"},
	} {
		lo, hi := Range16(netip.MustParsePrefix(tc.prefix))
		if lo != tc.lo || hi != tc.hi {
			t.Errorf("Range16(%s) = %s, %s; want %s, %s", tc.prefix, lo, hi, tc.lo, tc.hi)
		}
	}
	if got := Hex16("::ffff:10.1.2.3"); got != Hex16("10.1.2.3") || got != "00000000000000000000FFFF0A010203" {
		t.Errorf("Hex16 of a mapped address = %s", got)
	}
	if Hex16("nope") != "" {
		t.Error("Hex16 of no address is not empty")
	}
}

// FuzzParseQuery: Parse never panics, every error wraps ErrSyntax, a parsed
// query respects the limits and its terms are well-formed.
func FuzzParseQuery(f *testing.F) {
	for _, s := range []string{"", "alice", `"a b" -x`, `action:CREATED,DELETED -source:CLI`, `ip:10.0.0.0/8,::1`,
		`actor:"a \"b\"",c`, `tool:x success:true hook_decision:deny`, `actoor:x`, `"open`, `-`, `a:`, `event_id:0193a0b0-0000-7000-8000-000000000001`} {
		f.Add(s, false)
		f.Add(s, true)
	}
	f.Fuzz(func(t *testing.T, s string, exec bool) {
		kind := Audit
		if exec {
			kind = Executions
		}
		q, err := Parse(kind, s)
		if err != nil {
			if !errors.Is(err, ErrSyntax) {
				t.Fatalf("error %v does not wrap ErrSyntax", err)
			}
			return
		}
		if len(q.Terms) > MaxTerms {
			t.Fatalf("%d terms", len(q.Terms))
		}
		for _, term := range q.Terms {
			if len(term.Values) == 0 || len(term.Values) > MaxValues {
				t.Fatalf("term %+v: %d values", term, len(term.Values))
			}
			for _, v := range term.Values {
				if v == "" {
					t.Fatalf("term %+v has an empty value", term)
				}
			}
			if term.Key == "" && len(term.Values) != 1 {
				t.Fatalf("free text term %+v", term)
			}
			if term.Key != "" && !known(kind, term.Key) {
				t.Fatalf("unknown key %q accepted", term.Key)
			}
			switch term.Key {
			case KeyAction, KeySource, KeyResourceType:
				if len(term.Nums) != len(term.Values) {
					t.Fatalf("term %+v: nums", term)
				}
			case KeyIP:
				if len(term.Prefixes) != len(term.Values) {
					t.Fatalf("term %+v: prefixes", term)
				}
			}
		}
	})
}
