package mail

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestListEmails: every folder, newest first by default, each sort key
// and order, pagination across pages until the whole mailbox is listed
// once.
func TestListEmails(t *testing.T) {
	e := newEnv(t)
	all := e.mailbox(t, "u1")
	out := e.ok(t, "ListEmails", nil)
	got := emails(t, out)
	if len(got) != 10 || out["has_more"] != true || out["pagination_token"] == nil || out["count"] != 10.0 {
		t.Fatalf("default page: %d emails, has_more %v", len(got), out["has_more"])
	}
	for i := 1; i < len(got); i++ {
		if got[i-1]["received_at"].(string) < got[i]["received_at"].(string) {
			t.Fatalf("not newest first: %v then %v", got[i-1]["received_at"], got[i]["received_at"])
		}
	}
	folders := map[string]bool{}
	// Every page, 7 at a time: each message exactly once.
	seen := map[string]int{}
	in := map[string]any{"limit": 7, "sort_order": "ascending"}
	prev := ""
	for pages := 0; ; pages++ {
		if pages > 20 {
			t.Fatal("pagination does not end")
		}
		out := e.ok(t, "ListEmails", in)
		for _, m := range emails(t, out) {
			seen[m["id"].(string)]++
			folders[m["folder_id"].(string)] = true
			if r := m["received_at"].(string); r < prev {
				t.Fatalf("ascending broken across pages: %s after %s", r, prev)
			} else {
				prev = r
			}
		}
		tok, _ := out["pagination_token"].(string)
		if tok == "" {
			if out["has_more"] != false {
				t.Fatal("no token but has_more")
			}
			break
		}
		if strings.Contains(tok, "http") || strings.Contains(tok, "$skip") || strings.Contains(tok, e.gs.URL) {
			t.Fatalf("token is not opaque: %s", tok)
		}
		in["pagination_token"] = tok
	}
	if len(seen) != len(all) {
		t.Fatalf("paged through %d messages, the mailbox has %d", len(seen), len(all))
	}
	for id, n := range seen {
		if n != 1 {
			t.Fatalf("%s listed %d times", id, n)
		}
	}
	if len(folders) < 4 {
		t.Fatalf("ListEmails spans %d folders only", len(folders))
	}
	// Sort keys.
	for _, tc := range []struct {
		sortBy, order string
		key           func(map[string]any) string
	}{
		{"subject", "ascending", func(m map[string]any) string { return strings.ToLower(m["subject"].(string)) }},
		{"importance", "descending", func(m map[string]any) string {
			return map[string]string{"low": "0", "normal": "1", "high": "2"}[m["importance"].(string)] // Graph orders the enum's members
		}},
		{"sender_email_address", "descending", func(m map[string]any) string {
			f, _ := m["from"].(map[string]any)
			if f == nil {
				return ""
			}
			return strings.ToLower(f["address"].(string))
		}},
	} {
		got := emails(t, e.ok(t, "ListEmails", map[string]any{"sort_by": tc.sortBy, "sort_order": tc.order, "limit": 100}))
		if len(got) == 0 {
			t.Fatalf("%s: nothing", tc.sortBy)
		}
		for i := 1; i < len(got); i++ {
			a, b := tc.key(got[i-1]), tc.key(got[i])
			if tc.order == "ascending" && a > b || tc.order == "descending" && a < b {
				t.Fatalf("sort %s %s broken: %q then %q", tc.sortBy, tc.order, a, b)
			}
		}
	}
}

func TestPaginationTokenBinding(t *testing.T) {
	e := newEnv(t)
	out := e.ok(t, "ListEmails", map[string]any{"limit": 5})
	tok := out["pagination_token"].(string)
	// Another query, another tool, another user: refused.
	e.fails(t, "ListEmails", map[string]any{"limit": 5, "sort_by": "subject", "pagination_token": tok}, "TOOL_INPUT_INVALID")
	e.fails(t, "ListEmailsInFolder", map[string]any{"limit": 5, "well_known_folder_name": "inbox", "pagination_token": tok}, "TOOL_INPUT_INVALID")
	res := e.runAs(t, "u2", "ListEmails", map[string]any{"limit": 5, "pagination_token": tok})
	if res.Success || res.Error.Kind != "TOOL_INPUT_INVALID" {
		t.Fatalf("another user's token: %+v", res)
	}
	for _, bad := range []string{"x", "mtk1.", "mtk1.!!!", tok + "A", strings.Replace(tok, tokenPurpose+".", "mtk1.", 1)} {
		e.fails(t, "ListEmails", map[string]any{"limit": 5, "pagination_token": bad}, "TOOL_INPUT_INVALID")
	}
	// The same query continues.
	next := emails(t, e.ok(t, "ListEmails", map[string]any{"limit": 5, "pagination_token": tok}))
	first := emails(t, out)
	if len(next) != 5 || slices.Contains(ids(first), ids(next)[0]) {
		t.Fatalf("second page %v", ids(next))
	}
}

// TestForeignNextLink: a Graph answer whose @odata.nextLink points at
// another host is never followed and never becomes a token; a token
// forged to hold another host's URL is refused before any request.
func TestForeignNextLink(t *testing.T) {
	e := newEnv(t)
	var mu sync.Mutex
	var stolen []string
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		stolen = append(stolen, r.Header.Get("Authorization"))
		mu.Unlock()
		_, _ = io.WriteString(w, `{"value":[]}`)
	}))
	defer evil.Close()
	// A Graph in front of the emulator that rewrites nextLinks to evil.
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req, _ := http.NewRequest(r.Method, e.gs.URL+r.URL.RequestURI(), r.Body)
		req.Header = r.Header.Clone()
		resp, err := http.DefaultTransport.RoundTrip(req)
		if err != nil {
			w.WriteHeader(502)
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var m map[string]any
		if json.Unmarshal(b, &m) == nil {
			if nl, ok := m["@odata.nextLink"].(string); ok {
				m["@odata.nextLink"] = strings.Replace(nl, "http://"+r.Host, evil.URL, 1)
			}
			b, _ = json.Marshal(m)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(resp.StatusCode)
		_, _ = w.Write(b)
	}))
	defer proxy.Close()
	e.setBase("u1", proxy.URL+"/microsoft")
	res := e.run(t, "ListEmails", map[string]any{"limit": 3})
	if res.Success || res.Error.Kind != "UPSTREAM_ERROR" || strings.Contains(res.Error.Message, evil.URL) {
		t.Fatalf("foreign nextLink: %+v", res)
	}
	// A forged token holding an absolute URL or a path elsewhere.
	e.setBase("u1", e.api)
	bind := binding("u1", e.api, "ListEmails", map[string]any{"limit": int64(3), "sort_by": "receivedDateTime", "sort_order": "descending"})
	for _, next := range []string{evil.URL + "/me/messages", "//" + strings.TrimPrefix(evil.URL, "http://") + "/me/messages", "@" + strings.TrimPrefix(evil.URL, "http://") + "/me/messages",
		"/me/messages/../../../x/messages"} {
		tok, err := e.tk.encodeToken(bind, next)
		if err != nil {
			t.Fatal(err)
		}
		e.fails(t, "ListEmails", map[string]any{"limit": 3, "pagination_token": tok}, "TOOL_INPUT_INVALID")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(stolen) > 0 {
		t.Fatalf("the other host received %d requests with tokens %v", len(stolen), stolen)
	}
}

var _ = fmt.Sprint
var _ = time.Now
