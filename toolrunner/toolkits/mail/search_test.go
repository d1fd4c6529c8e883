package mail

import (
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"
)

// wordsOf splits text into lower-case runs of letters and digits.
func wordsOf(s string) []string {
	return strings.FieldsFunc(strings.ToLower(s), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
}

// hasWords: the query's words appear consecutively in one of the texts,
// each a prefix of the text's word (Exchange's matching, see the seed's
// "keywords").
func hasWords(q string, texts ...string) bool {
	qw := wordsOf(q)
	for _, text := range texts {
		tw := wordsOf(text)
		for i := 0; i+len(qw) <= len(tw); i++ {
			ok := true
			for j := range qw {
				if !strings.HasPrefix(tw[i+j], qw[j]) {
					ok = false
					break
				}
			}
			if ok && len(qw) > 0 {
				return true
			}
		}
	}
	return false
}

// searchFacts is what the expected answers are computed from: each
// message of the mailbox read directly, with its attachments' names.
type searchFacts struct {
	m        map[string]any
	from     []string
	to       []string
	atts     []string
	received time.Time
	body     string
}

func facts(t *testing.T, e *env) []searchFacts {
	var out []searchFacts
	for _, m := range e.mailbox(t, "u1") {
		f := searchFacts{m: m}
		if fr, ok := m["from"].(map[string]any); ok {
			ea := fr["emailAddress"].(map[string]any)
			f.from = []string{ea["name"].(string), ea["address"].(string)}
		}
		for _, r := range m["toRecipients"].([]any) {
			ea := r.(map[string]any)["emailAddress"].(map[string]any)
			f.to = append(f.to, ea["name"].(string), ea["address"].(string))
		}
		if m["hasAttachments"] == true {
			for _, a := range e.direct(t, "u1", "/me/messages/"+url.PathEscape(m["id"].(string))+"/attachments")["value"].([]any) {
				f.atts = append(f.atts, a.(map[string]any)["name"].(string))
			}
		}
		f.received, _ = time.Parse(time.RFC3339, m["receivedDateTime"].(string))
		f.body = m["body"].(map[string]any)["content"].(string)
		out = append(out, f)
	}
	return out
}

func TestSearchEmails(t *testing.T) {
	e := newEnv(t)
	fs := facts(t, e)
	day := func(s string) time.Time { d, _ := time.Parse(time.DateOnly, s); return d }
	// Dates with mail on them.
	d1 := fs[len(fs)/3].received.UTC().Format(time.DateOnly)
	d2 := fs[2*len(fs)/3].received.UTC().Format(time.DateOnly)
	if d1 > d2 {
		d1, d2 = d2, d1
	}
	anyOf := func(vs []string, pred func(string) bool) bool { return slices.ContainsFunc(vs, pred) }
	cats := func(f searchFacts) []string {
		var out []string
		for _, c := range f.m["categories"].([]any) {
			out = append(out, c.(string))
		}
		return out
	}
	subject := func(f searchFacts) string { return f.m["subject"].(string) }
	keyword := func(k string) func(f searchFacts) bool {
		return func(f searchFacts) bool { return hasWords(k, append([]string{subject(f), f.body}, f.from...)...) }
	}
	and := func(ps ...func(searchFacts) bool) func(searchFacts) bool {
		return func(f searchFacts) bool {
			for _, p := range ps {
				if !p(f) {
					return false
				}
			}
			return true
		}
	}
	tests := []struct {
		name string
		in   map[string]any
		want func(f searchFacts) bool
	}{
		{"one keyword", map[string]any{"keywords": []string{"budget"}}, keyword("budget")},
		{"all keywords", map[string]any{"keywords": []string{"budget", "Q3"}}, and(keyword("budget"), keyword("q3"))},
		{"a phrase with a quote", map[string]any{"keywords": []string{`Kate's "farewell"`}}, keyword("Kate s farewell")},
		{"senders any", map[string]any{"sender": []string{"priya@contoso.com", "Marc"}}, func(f searchFacts) bool {
			return hasWords("priya@contoso.com", f.from...) || hasWords("marc", f.from...)
		}},
		{"sender and attachments", map[string]any{"sender": []string{"priya@contoso.com"}, "has_attachments": true}, func(f searchFacts) bool {
			return hasWords("priya@contoso.com", f.from...) && f.m["hasAttachments"] == true
		}},
		{"no attachments, low importance", map[string]any{"has_attachments": false, "importance": "LOW"}, func(f searchFacts) bool {
			return f.m["hasAttachments"] == false && f.m["importance"] == "low"
		}},
		{"recipients any", map[string]any{"recipient": []string{"kate.obrien@contoso.com", "Li Wei"}}, func(f searchFacts) bool {
			return hasWords("kate.obrien@contoso.com", f.to...) || hasWords("li wei", f.to...)
		}},
		{"attachment names any", map[string]any{"attachment_name": []string{"board-deck.pdf", "checklist.pdf"}}, func(f searchFacts) bool {
			return anyOf(f.atts, func(a string) bool { return hasWords("board-deck.pdf", a) || hasWords("checklist.pdf", a) })
		}},
		{"unread and important", map[string]any{"importance": "high", "is_read": false}, func(f searchFacts) bool {
			return f.m["importance"] == "high" && f.m["isRead"] == false
		}},
		{"category", map[string]any{"category": "Finance"}, func(f searchFacts) bool { return anyOf(cats(f), func(c string) bool { return hasWords("finance", c) }) }},
		{"dates inclusive", map[string]any{"received_after": d1, "received_before": d2}, func(f searchFacts) bool {
			return !f.received.Before(day(d1)) && f.received.Before(day(d2).AddDate(0, 0, 1))
		}},
		{"everything at once", map[string]any{"keywords": []string{"build"}, "category": "CI", "is_read": true, "received_before": d2, "sender": []string{"ci@builds.example.net", "nobody@example.com"}},
			and(keyword("build"), func(f searchFacts) bool {
				return anyOf(cats(f), func(c string) bool { return hasWords("ci", c) }) && f.m["isRead"] == true &&
					f.received.Before(day(d2).AddDate(0, 0, 1)) && (hasWords("ci@builds.example.net", f.from...) || hasWords("nobody@example.com", f.from...))
			})},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			want := map[string]bool{}
			for _, f := range fs {
				if tc.want(f) {
					want[f.m["id"].(string)] = true
				}
			}
			if len(want) == 0 || len(want) == len(fs) {
				t.Fatalf("the case matches %d of %d messages: not a test", len(want), len(fs))
			}
			got := map[string]bool{}
			in := map[string]any{"limit": 4}
			for k, v := range tc.in {
				in[k] = v
			}
			for pages := 0; ; pages++ {
				if pages > 30 {
					t.Fatal("pagination does not end")
				}
				out := e.ok(t, "SearchEmails", in)
				es := emails(t, out)
				for i, m := range es {
					if got[m["id"].(string)] {
						t.Fatalf("%s listed twice", m["id"])
					}
					got[m["id"].(string)] = true
					if b := m["body"].(string); utf8.RuneCountInString(b) > 255 || !utf8.ValidString(b) {
						t.Fatalf("body of %d characters", utf8.RuneCountInString(b))
					}
					if i > 0 && es[i-1]["sent_at"] != nil && m["sent_at"] != nil && es[i-1]["sent_at"].(string) < m["sent_at"].(string) {
						t.Fatalf("not newest sent first: %v then %v", es[i-1]["sent_at"], m["sent_at"])
					}
				}
				tok, _ := out["pagination_token"].(string)
				if tok == "" {
					break
				}
				in["pagination_token"] = tok
			}
			for id := range want {
				if !got[id] {
					t.Errorf("missing %q", e.subjectOf(fs, id))
				}
			}
			for id := range got {
				if !want[id] {
					t.Errorf("unexpected %q", e.subjectOf(fs, id))
				}
			}
		})
	}
	// Bodies cut at 255 characters, said so.
	out := e.ok(t, "SearchEmails", map[string]any{"keywords": []string{"Apollo", "minutes"}, "sender": []string{"soren@nordisk.dk"}})
	var long map[string]any
	for _, m := range emails(t, out) {
		if m["subject"] == "Apollo design review minutes" {
			long = m
		}
	}
	if long == nil || utf8.RuneCountInString(long["body"].(string)) != 255 || long["body_truncated"] != true {
		t.Fatalf("long body: %v", long)
	}
	// On the wire: $search quoted, no $orderby, no $filter.
	for _, r := range e.sent.all() {
		q, _ := url.ParseQuery(r.URL.RawQuery)
		if s := q.Get("$search"); s != "" && (q.Has("$orderby") || q.Has("$filter") || !strings.HasPrefix(s, `"`) || !strings.HasSuffix(s, `"`)) {
			t.Fatalf("search request %s", r.URL.RawQuery)
		}
	}
	for _, in := range []map[string]any{{"received_after": "01/02/2026"}, {"received_after": "2026-02-02", "received_before": "2026-02-01"}} {
		e.fails(t, "SearchEmails", in, "TOOL_INPUT_INVALID")
	}
	// No filter at all: everything, newest sent first.
	if got := emails(t, e.ok(t, "SearchEmails", map[string]any{"limit": 25})); len(got) != 25 {
		t.Fatalf("no filter: %d", len(got))
	}
}

func (e *env) subjectOf(fs []searchFacts, id string) string {
	for _, f := range fs {
		if f.m["id"] == id {
			return f.m["subject"].(string)
		}
	}
	return id
}
