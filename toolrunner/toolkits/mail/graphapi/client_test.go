package graphapi

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/auditrail/auditrail/internal/retry"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// seen is a request as the server received it.
type seen struct {
	method, path, rawQuery, prefer, auth, body string
}

// recorder is an httptest server that records what the client sends and
// answers from a script (one entry per request, the last repeated).
type recorder struct {
	srv    *httptest.Server
	mu     sync.Mutex
	reqs   []seen
	script []func(w http.ResponseWriter, r *http.Request)
}

func newRecorder(t *testing.T, script ...func(w http.ResponseWriter, r *http.Request)) *recorder {
	t.Helper()
	rec := &recorder{script: script}
	rec.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		rec.mu.Lock()
		rec.reqs = append(rec.reqs, seen{r.Method, r.URL.EscapedPath(), r.URL.RawQuery, strings.Join(r.Header.Values("Prefer"), " | "), r.Header.Get("Authorization"), string(b)})
		i := min(len(rec.reqs)-1, len(rec.script)-1)
		rec.mu.Unlock()
		rec.script[i](w, r)
	}))
	t.Cleanup(rec.srv.Close)
	return rec
}

func (rec *recorder) all() []seen {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return append([]seen(nil), rec.reqs...)
}

func jsonAnswer(status int, body string) func(http.ResponseWriter, *http.Request) {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}
}

func graphError(status int, code, msg string, hdr ...string) func(http.ResponseWriter, *http.Request) {
	return func(w http.ResponseWriter, _ *http.Request) {
		for i := 0; i+1 < len(hdr); i += 2 {
			w.Header().Set(hdr[i], hdr[i+1])
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, `{"error":{"code":"`+code+`","message":"`+msg+`","innerError":{"date":"2026-11-22T09:00:00","request-id":"rid-1","client-request-id":"cid-1"}}}`)
	}
}

func client(t *testing.T, base string, attempts int) *Client {
	t.Helper()
	cfg := DefaultConfig()
	cfg.BaseURL, cfg.Token = base, "tok"
	cfg.Retry = retry.Policy{Initial: time.Millisecond, Max: 2 * time.Millisecond, MaxAttempts: attempts}
	cfg.MaxRetryAfter = 2 * time.Second
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestClause(t *testing.T) {
	tests := []struct {
		prop, op, value string
		want            string // "" for ErrInvalidQuery
	}{
		{"subject", "eq", "O'Brien's", "subject eq 'O''Brien''s'"},
		{"subject", "eq", "123", "subject eq '123'"},
		{"subject", "eq", "true", "subject eq 'true'"},
		{"subject", "eq", "2026-01-02", "subject eq '2026-01-02'"},
		{"subject", "contains", "''", "contains(subject,'''''')"},
		{"SUBJECT", "startsWith", "Ré: ünïcödé 🎉", "startswith(subject,'Ré: ünïcödé 🎉')"},
		{"sender/emailAddress/address", "endswith", "@contoso.com", "endswith(sender/emailAddress/address,'@contoso.com')"},
		{"conversationId", "eq", "AAQk=", "conversationId eq 'AAQk='"},
		{"isRead", "eq", "FALSE", "isRead eq false"},
		{"hasAttachments", "ne", "true", "hasAttachments ne true"},
		{"isRead", "eq", "'true'", ""},
		{"isRead", "gt", "true", ""},
		{"isRead", "contains", "true", ""},
		{"importance", "eq", "HIGH", "importance eq 'high'"},
		{"importance", "eq", "urgent", ""},
		{"flag/flagStatus", "ne", "notflagged", "flag/flagStatus ne 'notFlagged'"},
		{"flag/flagStatus", "contains", "flag", ""},
		{"receivedDateTime", "ge", "2026-01-02T03:04:05+02:00", "receivedDateTime ge 2026-01-02T01:04:05Z"},
		{"receivedDateTime", "lt", "2026-01-02T03:04:05.5Z", "receivedDateTime lt 2026-01-02T03:04:05.5Z"},
		{"receivedDateTime", "eq", "2026-01-02", "(receivedDateTime ge 2026-01-02T00:00:00Z and receivedDateTime lt 2026-01-03T00:00:00Z)"},
		{"receivedDateTime", "ne", "2026-01-02", "(receivedDateTime lt 2026-01-02T00:00:00Z or receivedDateTime ge 2026-01-03T00:00:00Z)"},
		{"receivedDateTime", "gt", "2026-01-02", "receivedDateTime ge 2026-01-03T00:00:00Z"},
		{"receivedDateTime", "le", "2026-12-31", "receivedDateTime lt 2027-01-01T00:00:00Z"},
		{"receivedDateTime", "ge", "yesterday", ""},
		{"receivedDateTime", "ge", "2026-01-02 or 1 eq 1", ""},
		{"receivedDateTime", "contains", "2026", ""},
		{"body/content", "contains", "x", ""},
		{"subject) or (isRead", "eq", "x", ""},
		{"subject", "eq) or (1 eq 1", "x", ""},
	}
	for _, tc := range tests {
		got, err := Clause(tc.prop, tc.op, tc.value)
		if tc.want == "" {
			if !errors.Is(err, ErrInvalidQuery) {
				t.Errorf("Clause(%q, %q, %q) = %q, %v; want ErrInvalidQuery", tc.prop, tc.op, tc.value, got, err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("Clause(%q, %q, %q) = %q, %v; want %q", tc.prop, tc.op, tc.value, got, err, tc.want)
		}
	}
}

// TestQueryOnTheWire: what the server receives is the clause exactly,
// percent-encoded (no '+' for spaces, quotes and unicode intact).
func TestQueryOnTheWire(t *testing.T) {
	rec := newRecorder(t, jsonAnswer(200, `{"value":[]}`))
	c := client(t, rec.srv.URL+"/v1.0", 1)
	filter, err := Clause("subject", "eq", "a+b & c='d' #1 ünï")
	if err != nil {
		t.Fatal(err)
	}
	q := Query{Filter: filter, OrderBy: []OrderBy{{Property: "subject", Desc: true}}, Top: 7, Select: []string{"id", "subject"}}
	if _, err := c.ListMessages(context.Background(), WithQuery(MessagesPath("inbox"), q)); err != nil {
		t.Fatal(err)
	}
	r := rec.all()[0]
	if r.path != "/v1.0/me/mailFolders/inbox/messages" || strings.Contains(r.rawQuery, "+") {
		t.Fatalf("sent %s ? %s", r.path, r.rawQuery)
	}
	vals, err := url.ParseQuery(r.rawQuery)
	if err != nil {
		t.Fatal(err)
	}
	if vals.Get("$filter") != `subject eq 'a+b & c=''d'' #1 ünï'` || vals.Get("$orderby") != "subject desc" || vals.Get("$top") != "7" || vals.Get("$select") != "id,subject" {
		t.Fatalf("query %v", vals)
	}
	// $search: the KQL in double quotes, inner quotes escaped.
	kql := "from:" + KQLPhrase(`Ann "the boss" \ O'Neil`) + ` AND "budget"`
	if _, err := c.ListMessages(context.Background(), WithQuery(MessagesPath(""), Query{Search: SearchValue(kql), Top: 5})); err != nil {
		t.Fatal(err)
	}
	vals, _ = url.ParseQuery(rec.all()[1].rawQuery)
	if got := vals.Get("$search"); got != `"from:\"Ann  the boss    O'Neil\" AND \"budget\""` || vals.Has("$orderby") {
		t.Fatalf("$search %q", got)
	}
}

func TestPreferAndAuth(t *testing.T) {
	rec := newRecorder(t, jsonAnswer(200, `{"id":"m1","body":{"contentType":"text","content":"hi"}}`))
	c := client(t, rec.srv.URL, 1)
	ctx := context.Background()
	_, _ = c.GetMessage(ctx, "m1", ContentText)
	_, _ = c.GetMessage(ctx, "m1", ContentHTML)
	_, _ = c.GetMessage(ctx, "a/b+c=", "")
	_, _ = c.Me(ctx)
	_, _ = c.UpdateMessage(ctx, "m1", MessagePatch{})
	reqs := rec.all()
	want := []string{`IdType="ImmutableId", outlook.body-content-type="text"`, `IdType="ImmutableId", outlook.body-content-type="html"`,
		`IdType="ImmutableId"`, `IdType="ImmutableId"`, `IdType="ImmutableId"`}
	for i, r := range reqs {
		if r.prefer != want[i] || r.auth != "Bearer tok" {
			t.Errorf("request %d: Prefer %q auth %q", i, r.prefer, r.auth)
		}
	}
	if reqs[2].path != "/me/messages/a%2Fb+c=" {
		t.Errorf("id path %s", reqs[2].path)
	}
	if reqs[4].method != "PATCH" || reqs[4].body != "{}" {
		t.Errorf("patch %+v", reqs[4])
	}
}

func TestSendAndErrors(t *testing.T) {
	rec := newRecorder(t, func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusAccepted) })
	c := client(t, rec.srv.URL, 1)
	if err := c.Send(context.Background(), "m1"); err != nil {
		t.Fatalf("202: %v", err)
	}
	if r := rec.all()[0]; r.method != "POST" || r.path != "/me/messages/m1/send" {
		t.Fatalf("send %+v", r)
	}
	rec = newRecorder(t, graphError(404, "ErrorItemNotFound", "The specified object was not found in the store."))
	c = client(t, rec.srv.URL, 3)
	_, err := c.GetMessage(context.Background(), "gone", "")
	var ge *Error
	if !errors.As(err, &ge) || ge.Status != 404 || ge.Code != "ErrorItemNotFound" || ge.RequestID != "rid-1" || !strings.Contains(ge.Message, "not found in the store") {
		t.Fatalf("error %#v", err)
	}
	if n := len(rec.all()); n != 1 {
		t.Fatalf("a 404 was tried %d times", n)
	}
	// Not Graph's JSON: the status text.
	rec = newRecorder(t, func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(502)
		_, _ = io.WriteString(w, "<html>bad gateway</html>")
	})
	_, err = client(t, rec.srv.URL, 1).Me(context.Background())
	if !errors.As(err, &ge) || ge.Status != 502 || ge.Code != "" || ge.Message != "Bad Gateway" {
		t.Fatalf("error %#v", err)
	}
}

func TestRetry(t *testing.T) {
	ok := jsonAnswer(200, `{"value":[]}`)
	throttled := graphError(429, "TooManyRequests", "Please retry again later.", "Retry-After", "1")
	unavailable := graphError(503, "ServiceNotAvailable", "down")
	ctx := context.Background()
	tests := []struct {
		name     string
		script   []func(http.ResponseWriter, *http.Request)
		send     bool // POST …/send instead of a GET
		attempts int
		wantReqs int
		wantErr  int // status, 0 for success
		minWait  time.Duration
	}{
		{"429 then ok honours Retry-After", []func(http.ResponseWriter, *http.Request){throttled, ok}, false, 4, 2, 0, time.Second},
		{"503 then ok on a GET", []func(http.ResponseWriter, *http.Request){unavailable, unavailable, ok}, false, 4, 3, 0, 0},
		{"always 429: bounded", []func(http.ResponseWriter, *http.Request){graphError(429, "TooManyRequests", "x")}, false, 3, 3, 429, 0},
		{"an absurd Retry-After: at once", []func(http.ResponseWriter, *http.Request){graphError(429, "TooManyRequests", "x", "Retry-After", "99999999999999"), ok}, false, 4, 1, 429, 0},
		{"Retry-After beyond the bound: at once", []func(http.ResponseWriter, *http.Request){graphError(429, "TooManyRequests", "x", "Retry-After", "3600"), ok}, false, 4, 1, 429, 0},
		{"503 on send is not retried", []func(http.ResponseWriter, *http.Request){unavailable, func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(202) }}, true, 4, 1, 503, 0},
		{"429 on send is retried", []func(http.ResponseWriter, *http.Request){graphError(429, "TooManyRequests", "x"), func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(202) }}, true, 4, 2, 0, 0},
		{"500 is not retried", []func(http.ResponseWriter, *http.Request){graphError(500, "generalException", "x"), ok}, false, 4, 1, 500, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := newRecorder(t, tc.script...)
			c := client(t, rec.srv.URL, tc.attempts)
			start := time.Now()
			var err error
			if tc.send {
				err = c.Send(ctx, "m1")
			} else {
				_, err = c.ListMessages(ctx, "/me/messages")
			}
			if n := len(rec.all()); n != tc.wantReqs {
				t.Errorf("%d requests, want %d", n, tc.wantReqs)
			}
			var ge *Error
			if tc.wantErr == 0 && err != nil || tc.wantErr != 0 && (!errors.As(err, &ge) || ge.Status != tc.wantErr) {
				t.Errorf("err %v, want status %d", err, tc.wantErr)
			}
			if time.Since(start) < tc.minWait {
				t.Errorf("retried after %v, Retry-After said %v", time.Since(start), tc.minWait)
			}
		})
	}
}

func TestRelative(t *testing.T) {
	c := client(t, "https://graph.example/v1.0", 1)
	tests := []struct{ link, want string }{
		{"https://graph.example/v1.0/me/messages?$skip=10&$top=10", "/me/messages?$skip=10&$top=10"},
		{"https://GRAPH.example/v1.0/me/mailFolders('Inbox')/messages?%24skip=10", "/me/mailFolders('Inbox')/messages?%24skip=10"},
		{"https://evil.example/v1.0/me/messages?$skip=10", ""},
		{"http://graph.example/v1.0/me/messages?$skip=10", ""},
		{"https://graph.example:8443/v1.0/me/messages", ""},
		{"https://user@graph.example/v1.0/me/messages", ""},
		{"https://graph.example/beta/me/messages", ""},
		{"https://graph.example/v1.0/../admin/me/messages", ""},
		{"https://graph.example/v1.0/me/../../admin", ""},
		{"https://graph.example/v1.0/me/messages#frag", ""},
		{"https://graph.example/v1.0/sites/root", ""},
		{"//evil.example/v1.0/me/messages", ""},
		{"/v1.0/me/messages", ""},
		{"javascript:alert(1)", ""},
		{"https://graph.example/v1.0@evil.example/me/messages", ""},
	}
	for _, tc := range tests {
		got, err := c.Relative(tc.link)
		if tc.want == "" {
			if !errors.Is(err, ErrForeignLink) {
				t.Errorf("Relative(%q) = %q, %v; want ErrForeignLink", tc.link, got, err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("Relative(%q) = %q, %v; want %q", tc.link, got, err, tc.want)
		}
	}
	for _, rel := range []string{"/me/messages", "/me", "/users/u1/messages"} {
		if _, err := c.Resolve(rel); err != nil {
			t.Errorf("Resolve(%q): %v", rel, err)
		}
	}
	for _, rel := range []string{"@evil.example/me", "/me/../x", "//evil.example/me", "/mex", "me/messages", "/me/messages#x", `/me\messages`} {
		if _, err := c.Resolve(rel); !errors.Is(err, ErrForeignLink) {
			t.Errorf("Resolve(%q): %v, want ErrForeignLink", rel, err)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	for _, base := range []string{"", "ftp://x", "https://u:p@graph.example", "https://graph.example?x=1", "graph.example"} {
		cfg := DefaultConfig()
		cfg.BaseURL, cfg.Token = base, "t"
		if _, err := New(cfg); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("base %q: %v", base, err)
		}
	}
	cfg := DefaultConfig()
	if _, err := New(cfg); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("no token: %v", err)
	}
}
