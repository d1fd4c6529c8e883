package query

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
)

func TestParseListSearch(t *testing.T) {
	org := uuid.NewString()
	path := func(k string) string { return map[string]string{"org_id": org}[k] }
	get := func(m map[string]string) Getter { return func(k string) string { return m[k] } }
	tests := []struct {
		name      string
		q         map[string]string
		wantParam string // the message names it; "" = accepted
		wantMsg   string
	}{
		{"since and until", map[string]string{"since": "2026-01-02T10:00:00+02:00", "until": "2026-01-02T09:00:00.5Z"}, "", ""},
		{"q", map[string]string{"q": `action:CREATED -source:CLI actor:"Ada L" ip:10.0.0.0/8 prod`}, "", ""},
		{"since without offset", map[string]string{"since": "2026-01-02T10:00:00"}, "since", "is not an RFC 3339 time with an offset"},
		{"since a date", map[string]string{"since": "2026-01-02"}, "since", ""},
		{"until unix", map[string]string{"until": "1767225600"}, "until", ""},
		{"since equals until", map[string]string{"since": "2026-01-02T10:00:00+02:00", "until": "2026-01-02T08:00:00Z"}, "until", "is not after since"},
		{"since after until", map[string]string{"since": "2026-01-03T00:00:00Z", "until": "2026-01-02T00:00:00Z"}, "until", ""},
		{"unknown key", map[string]string{"q": "action:CREATED source:CLI actoor:x"}, "q", `q: term 3 "actoor:x": unknown key actoor; keys: action, source, resource_type, resource_id, actor, principal_type, project, ip, event_id`},
		{"execution key on audit", map[string]string{"q": "tool:x"}, "q", `term 1 "tool:x": unknown key tool`},
		{"bad enum", map[string]string{"q": "resource_type:NOPE"}, "q", `term 1 "resource_type:NOPE"`},
		{"unterminated", map[string]string{"q": `"abc`}, "q", "unterminated quote"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := ParseList(path, get(tc.q), false)
			if tc.wantParam == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, ErrBadParam) || !strings.Contains(err.Error(), ": "+tc.wantParam+": ") || !strings.Contains(err.Error(), tc.wantMsg) {
				t.Fatalf("err = %v, want a bad %s (%s)", err, tc.wantParam, tc.wantMsg)
			}
			_ = p
		})
	}
	p, err := ParseList(path, get(map[string]string{"since": "2026-01-02T10:00:00+02:00", "until": "2026-01-02T09:00:00.5Z", "q": "ada"}), false)
	if err != nil {
		t.Fatal(err)
	}
	if !p.Since.Equal(time.Date(2026, 1, 2, 8, 0, 0, 0, time.UTC)) || !p.Until.Equal(time.Date(2026, 1, 2, 9, 0, 0, 5e8, time.UTC)) || len(p.Search.Terms) != 1 {
		t.Fatalf("parsed %+v", p)
	}
	execP, err := ParseExecList(path, get(map[string]string{"q": "tool:SendEmail -success:true hook_decision:deny", "since": "2026-01-02T00:00:00Z"}), false)
	if err != nil || len(execP.Search.Terms) != 3 || execP.Since == nil {
		t.Fatalf("exec %+v %v", execP, err)
	}
	if _, err := ParseExecList(path, get(map[string]string{"q": "action:CREATED"}), false); err == nil || !strings.Contains(err.Error(), "q: term 1 \"action:CREATED\": unknown key action; keys: tool, toolkit, user, success, hook_decision, error_kind") {
		t.Fatalf("an audit key on executions: %v", err)
	}
}

// since, until and q are part of the cursor scope: a cursor replays only
// with the same search (the same instants, whatever their offset); a
// listing without one keeps the scope it always had.
func TestSearchScope(t *testing.T) {
	org := uuid.NewString()
	path := func(k string) string { return map[string]string{"org_id": org}[k] }
	scope := func(q map[string]string) [scopeLen]byte {
		t.Helper()
		p, err := ParseList(path, func(k string) string { return q[k] }, false)
		if err != nil {
			t.Fatal(err)
		}
		return p.Scope("audit_logs/org")
	}
	execScope := func(q map[string]string) [scopeLen]byte {
		t.Helper()
		p, err := ParseExecList(path, func(k string) string { return q[k] }, false)
		if err != nil {
			t.Fatal(err)
		}
		return p.Scope("tool_executions/org")
	}
	base := scope(nil)
	if base != Scope("audit_logs/org", org, "", "", "", "") {
		t.Fatal("the scope of a listing without a search changed")
	}
	if execScope(nil) != Scope("tool_executions/org", org, "", "", "") {
		t.Fatal("the scope of an execution listing without a search changed")
	}
	distinct := []map[string]string{
		{"q": "ada"}, {"q": "bob"}, {"since": "2026-01-02T00:00:00Z"}, {"until": "2026-01-02T00:00:00Z"},
		{"since": "2026-01-02T00:00:00Z", "q": "ada"}, {"since": "2026-01-01T00:00:00Z", "until": "2026-01-02T00:00:00Z"},
	}
	seen := map[[scopeLen]byte]int{base: -1}
	for i, q := range distinct {
		s := scope(q)
		if j, dup := seen[s]; dup {
			t.Fatalf("search %v has the scope of %d", q, j)
		}
		seen[s] = i
		if execScope(map[string]string{"since": q["since"], "until": q["until"]}) == execScope(nil) && (q["since"] != "" || q["until"] != "") {
			t.Fatalf("execution window %v not in the scope", q)
		}
	}
	if scope(map[string]string{"since": "2026-01-02T02:00:00+02:00"}) != scope(map[string]string{"since": "2026-01-02T00:00:00Z"}) {
		t.Fatal("one instant, two scopes")
	}
	if execScope(map[string]string{"q": "tool:a"}) == execScope(map[string]string{"q": "tool:b"}) {
		t.Fatal("execution q not in the scope")
	}
}
