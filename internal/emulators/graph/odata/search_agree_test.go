package odata

import (
	"fmt"
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
	"time"
)

// smsg is a generated message for the $search agreement test.
type smsg struct {
	Subject, Body, FromName, FromAddr string
	To, Cc, Categories, Attachments   []string
	Importance                        string
	IsRead, HasAttachments            bool
	Received                          time.Time
}

var sWords = []string{"budget", "Budgeting", "lunch", "meeting", "Meet", "plan", "q3", "report", "invoice", "memo", "agenda", "pizza"}

func (m *smsg) object() map[string]any {
	rc := func(addrs []string) []any {
		out := []any{}
		for _, a := range addrs {
			out = append(out, map[string]any{"emailAddress": map[string]any{"name": strings.ToUpper(a[:1]) + a[1:strings.IndexByte(a, '@')], "address": a}})
		}
		return out
	}
	atts, cats := []any{}, []any{}
	for _, a := range m.Attachments {
		atts = append(atts, map[string]any{"name": a})
	}
	for _, c := range m.Categories {
		cats = append(cats, c)
	}
	return map[string]any{
		"subject": m.Subject, "body": map[string]any{"contentType": "html", "content": "<p>" + m.Body + "</p>"},
		"from":         map[string]any{"emailAddress": map[string]any{"name": m.FromName, "address": m.FromAddr}},
		"toRecipients": rc(m.To), "ccRecipients": rc(m.Cc), "categories": cats, "attachments": atts,
		"importance": m.Importance, "isRead": m.IsRead, "hasAttachments": m.HasAttachments,
		"receivedDateTime": m.Received.In(time.FixedZone("", -5*3600)).Format(time.RFC3339),
	}
}

func genSearchBox(r *rand.Rand, n int) []smsg {
	people := []string{"ann@contoso.com", "bob@fabrikam.com", "carl@contoso.com", "dana@example.org"}
	ws := func(k int) string {
		out := make([]string, k)
		for i := range out {
			out[i] = pick(r, sWords)
		}
		return strings.Join(out, " ")
	}
	box := make([]smsg, n)
	for i := range box {
		m := &box[i]
		m.Subject, m.Body = ws(1+r.IntN(3)), ws(3+r.IntN(6))+", regards."
		m.FromAddr = pick(r, people)
		m.FromName = strings.ToUpper(m.FromAddr[:1]) + m.FromAddr[1:strings.IndexByte(m.FromAddr, '@')] + " Smith"
		for range r.IntN(3) {
			m.To = append(m.To, pick(r, people))
		}
		for range r.IntN(2) {
			m.Cc = append(m.Cc, pick(r, people))
		}
		for range r.IntN(2) {
			m.Categories = append(m.Categories, pick(r, []string{"Red category", "Finance", "Blue"}))
		}
		for range r.IntN(3) {
			m.Attachments = append(m.Attachments, pick(r, []string{"Q3-report.xlsx", "agenda.docx", "photo.png"}))
		}
		m.HasAttachments = len(m.Attachments) > 0
		m.Importance = pick(r, genImp)
		m.IsRead = r.IntN(2) == 0
		m.Received = genBase.Add(time.Duration(r.IntN(30*86400)) * time.Second)
	}
	return box
}

// wordRe matches the words of q as Exchange's prefix matching does: each at
// the start of a word, consecutive words separated by non-word characters.
func wordRe(q string) *regexp.Regexp {
	parts := regexp.MustCompile(`[\pL\pN]+`).FindAllString(q, -1)
	for i, p := range parts {
		parts[i] = regexp.QuoteMeta(p)
	}
	return regexp.MustCompile(`(?i)(^|[^\pL\pN])` + strings.Join(parts, `[\pL\pN]*[^\pL\pN]+`))
}

type sexpr struct {
	text string
	eval func(*smsg) bool
}

func anyRe(re *regexp.Regexp, ss ...string) bool {
	for _, s := range ss {
		if re.MatchString(s) {
			return true
		}
	}
	return false
}

func withNames(addrs []string) []string {
	var out []string
	for _, a := range addrs {
		out = append(out, a, a[:strings.IndexByte(a, '@')])
	}
	return out
}

func genSearchAtom(r *rand.Rand) sexpr {
	word := func() string {
		w := pick(r, sWords)
		if r.IntN(3) == 0 && len(w) > 3 {
			w = w[:3] // a prefix
		}
		return recase(r, w)
	}
	day := genBase.AddDate(0, 0, r.IntN(30))
	ds := day.Format("2006-01-02")
	utcDay := func(m *smsg) time.Time {
		u := m.Received.UTC()
		return time.Date(u.Year(), u.Month(), u.Day(), 0, 0, 0, 0, time.UTC)
	}
	switch r.IntN(14) {
	case 0, 1:
		w := word()
		re := wordRe(w)
		return sexpr{w, func(m *smsg) bool { return anyRe(re, m.Subject, m.Body, m.FromName, m.FromAddr) }}
	case 2:
		w := word() + " " + word()
		re := wordRe(w)
		return sexpr{`"` + w + `"`, func(m *smsg) bool { return anyRe(re, m.Subject, m.Body, m.FromName, m.FromAddr) }}
	case 3:
		w := pick(r, []string{"ann", "bob@fabrikam.com", "carl@contoso", "Dana Smith", "contoso"})
		re := wordRe(w)
		q := "from:" + w
		if strings.Contains(w, " ") {
			q = `from:"` + w + `"`
		}
		return sexpr{q, func(m *smsg) bool { return anyRe(re, m.FromName, m.FromAddr) }}
	case 4:
		w := pick(r, []string{"ann", "bob@fabrikam.com", "contoso", "dana"})
		re := wordRe(w)
		return sexpr{"to:" + w, func(m *smsg) bool { return anyRe(re, withNames(m.To)...) }}
	case 5:
		w := pick(r, []string{"ann", "bob", "example"})
		re := wordRe(w)
		return sexpr{"cc:" + w, func(m *smsg) bool { return anyRe(re, withNames(m.Cc)...) }}
	case 6:
		w := word()
		re := wordRe(w)
		return sexpr{"subject:" + w, func(m *smsg) bool { return re.MatchString(m.Subject) }}
	case 7:
		w := word()
		re := wordRe(w)
		return sexpr{"body:" + w, func(m *smsg) bool { return re.MatchString(m.Body) }}
	case 8:
		w := pick(r, []string{"q3", "report", "agenda", "photo.png", "xlsx"})
		re := wordRe(w)
		return sexpr{"attachment:" + w, func(m *smsg) bool { return anyRe(re, m.Attachments...) }}
	case 9:
		b := r.IntN(2) == 0
		if r.IntN(2) == 0 {
			return sexpr{fmt.Sprintf("hasattachments:%t", b), func(m *smsg) bool { return m.HasAttachments == b }}
		}
		return sexpr{fmt.Sprintf("isread:%t", b), func(m *smsg) bool { return m.IsRead == b }}
	case 10:
		v := pick(r, genImp)
		return sexpr{"importance:" + v, func(m *smsg) bool { return m.Importance == v }}
	case 11:
		w := pick(r, []string{"red", "finance", "blue", "category"})
		re := wordRe(w)
		return sexpr{"category:" + w, func(m *smsg) bool { return anyRe(re, m.Categories...) }}
	case 12:
		if r.IntN(2) == 0 {
			return sexpr{"received>=" + ds, func(m *smsg) bool { return !utcDay(m).Before(day) }}
		}
		return sexpr{"received<=" + ds, func(m *smsg) bool { return !utcDay(m).After(day) }}
	}
	return sexpr{"received:" + ds, func(m *smsg) bool { return utcDay(m).Equal(day) }}
}

func genSearch(r *rand.Rand, depth int) sexpr {
	if depth == 0 || r.IntN(3) == 0 {
		return genSearchAtom(r)
	}
	a, b := genSearch(r, depth-1), genSearch(r, depth-1)
	switch r.IntN(5) {
	case 0:
		return sexpr{"NOT (" + a.text + ")", func(m *smsg) bool { return !a.eval(m) }}
	case 1:
		return sexpr{"(" + a.text + ") OR (" + b.text + ")", func(m *smsg) bool { return a.eval(m) || b.eval(m) }}
	case 2:
		return sexpr{"(" + a.text + ") (" + b.text + ")", func(m *smsg) bool { return a.eval(m) && b.eval(m) }}
	}
	return sexpr{"(" + a.text + ") AND (" + b.text + ")", func(m *smsg) bool { return a.eval(m) && b.eval(m) }}
}

// $search agrees with predicates written independently (regular
// expressions for the prefix matching) on 2,000 generated messages for
// 60 random queries.
func TestSearchAgreesWithGo(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 2026))
	box := genSearchBox(r, 2000)
	objs := make([]map[string]any, len(box))
	for i := range box {
		objs[i] = box[i].object()
	}
	split := 0
	for i := 0; i < 60; i++ {
		g := genSearch(r, 3)
		q, err := ParseSearch(`"` + strings.ReplaceAll(g.text, `"`, `\"`) + `"`)
		if err != nil {
			t.Fatalf("%s: %v", g.text, err)
		}
		hits := 0
		for j := range box {
			want := g.eval(&box[j])
			if got := q.Match(objs[j]); got != want {
				t.Fatalf("search %s, message %+v: Match = %v, want %v", g.text, box[j], got, want)
			}
			if want {
				hits++
			}
		}
		if hits > 0 && hits < len(box) {
			split++
		}
	}
	if split < 35 {
		t.Fatalf("only %d of 60 searches split the mailbox", split)
	}
}
