package controlplane

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/auditrail/auditrail/controlplane/cpstate"
	"github.com/auditrail/auditrail/controlplane/linkbrowser"
	"github.com/auditrail/auditrail/internal/testenv"
)

// another is a browser of its own (its own cookie jar).
func (e *oauthEnv) another() *linkbrowser.Browser {
	b := linkbrowser.New(nil)
	e.t.Cleanup(b.HTTP.CloseIdleConnections)
	return b
}

// noConnection fails when user has a connection or any USER_CONNECTION
// event was recorded.
func (e *oauthEnv) noConnection(t *testing.T, user string) {
	t.Helper()
	if items := e.list(user, e.alice); len(items) != 0 {
		t.Fatalf("%s has a connection: %+v", user, items)
	}
	time.Sleep(100 * time.Millisecond)
	if evs := e.connEvents(); len(evs) != 0 {
		t.Fatalf("%d connection events", len(evs))
	}
}

// Issue 18 point 1: bob obtains a link to connect his account and sends it
// to carol; whatever carol's browser does with it, bob's connection does
// not get carol's tokens. The links of the authorize route and of the
// tool runner (AUTHORIZATION_REQUIRED) alike.
func TestOAuthLinkFromAnotherBrowserRefused(t *testing.T) {
	srv, _, _ := testenv.NATS(t)
	e := newOAuthEnv(t, srv.ClientURL())
	ctx := context.Background()
	fromRoute, _ := e.authorize("bob", e.bob, "docs.read")
	fromTool, _, err := e.svc.AuthorizationURL(ctx, e.org, e.project, "bob", "corp", []string{"docs.read"})
	if err != nil || !strings.HasPrefix(fromTool, e.base+"/api/v1/oauth/start/") {
		t.Fatalf("the tool runner's link %q: %v", fromTool, err)
	}
	e.seen(fromTool)
	for _, link := range []struct{ name, url string }{{"authorize route", fromRoute}, {"tool runner", fromTool}} {
		t.Run(link.name, func(t *testing.T) {
			tests := []struct {
				name       string
				credential string // carol's browser signs in with it first ("" none)
				says       string // what the sign-in answers
			}{
				{"not signed in", "", ""},
				{"signed in as carol", e.carol, "This link was made for user bob"},
				{"signed in as an org admin", e.alice, "This link was made for user bob"},
				{"the platform admin's key", bootKey, "not a user"},
			}
			for _, tc := range tests {
				t.Run(tc.name, func(t *testing.T) {
					carol := e.another()
					p, err := carol.Get(ctx, link.url)
					if err != nil || p.Status != 200 || p.SignIn == "" || p.Continue != "" || !strings.Contains(p.Body, "This link was made for user bob") {
						t.Fatalf("start page in carol's browser: %d %v\n%s", p.Status, err, p.Body)
					}
					if tc.credential != "" {
						p, err = carol.Post(ctx, p.SignIn, e.base, url.Values{"csrf": {p.CSRF}, "credential": {tc.credential}})
						if err != nil || p.Status != 403 || !strings.Contains(p.Body, tc.says) || strings.Contains(p.Body, tc.credential) {
							t.Fatalf("sign-in: %d %v\n%s", p.Status, err, p.Body)
						}
						if hasCookie(carol, e.base, sessionCookie) {
							t.Fatal("a session was set")
						}
					}
					// Continue posted anyway (a forged form of the page, with
					// carol's own double-submit token): refused.
					p, err = carol.Post(ctx, strings.TrimSuffix(p.SignIn, "/sign_in"), e.base, url.Values{"csrf": {p.CSRF}})
					if err != nil || p.Status != 403 || p.Location != "" || !strings.Contains(p.Body, "sign in as bob") {
						t.Fatalf("continue: %d %v %s\n%s", p.Status, err, p.Location, p.Body)
					}
					if hasCookie(carol, e.base+"/api/v1/oauth/", bindCookie) {
						t.Fatal("a flow was bound to carol's browser")
					}
				})
			}
		})
	}

	// bob starts in his browser, and the provider's URL (or the callback)
	// is carried to carol's: the callback there connects nothing.
	t.Run("callback in another browser", func(t *testing.T) {
		authURL := e.begin(fromRoute)
		carol := e.another()
		p, err := carol.Get(ctx, authURL) // carol consents at the provider
		if err != nil || p.Status != http.StatusFound || !strings.HasPrefix(p.Location, e.base+"/api/v1/oauth/callback?") {
			t.Fatalf("provider: %d %v %s", p.Status, err, p.Location)
		}
		q, _ := url.Parse(p.Location)
		e.seen(q.Query().Get("code"), q.Query().Get("state"))
		cb := p.Location
		p, err = carol.Get(ctx, cb)
		if err != nil || p.Status != 400 || !strings.Contains(p.Body, "started in another browser") ||
			!strings.Contains(p.Body, "Nothing was connected") || !strings.Contains(p.Body, "Open the link again in the browser where you started it") {
			t.Fatalf("callback in carol's browser: %d %v\n%s", p.Status, err, p.Body)
		}
		// A forged bind cookie does not help either.
		u, _ := url.Parse(e.base + "/api/v1/oauth/")
		carol.HTTP.Jar.SetCookies(u, []*http.Cookie{{Name: bindCookie, Value: strings.Repeat("A", 43), Path: "/api/v1/oauth/"}})
		if p, _ := carol.Get(ctx, cb); p.Status != 400 || !strings.Contains(p.Body, "started in another browser") {
			t.Fatalf("callback with a forged cookie: %d\n%s", p.Status, p.Body)
		}
		e.noConnection(t, "bob")
		if s := e.emu.Stats(); s.CodeGrants != 0 {
			t.Fatalf("the provider granted %d codes", s.CodeGrants)
		}
		if !strings.Contains(e.logs.String(), "OAuth callback from another browser than the one that started the flow refused") {
			t.Fatal("no warning logged")
		}
	})
	e.clean()
}

func hasCookie(b *linkbrowser.Browser, at, name string) bool {
	u, _ := url.Parse(at)
	for _, c := range b.HTTP.Jar.Cookies(u) {
		if c.Name == name && c.Value != "" {
			return true
		}
	}
	return false
}

// The honest flow in one browser: sign in, continue, consent, callback;
// the pages say who and what; the cookies are what they should be; a
// second flow adds a scope.
func TestOAuthLinkHonestFlow(t *testing.T) {
	srv, _, _ := testenv.NATS(t)
	e := newOAuthEnv(t, srv.ClientURL())
	ctx := context.Background()
	bob := e.another()
	link, _ := e.authorize("bob", e.bob, "docs.read")

	// GET changes nothing and never redirects, however often.
	for range 3 {
		p, err := bob.Get(ctx, link)
		if err != nil || p.Status != 200 || p.Location != "" {
			t.Fatalf("start page: %d %v", p.Status, err)
		}
		for _, want := range []string{"Connect corp", "<dd>bob</dd>", "acme (" + e.org + ")", "docs.read, email, openid", "Sign in"} {
			if !strings.Contains(p.Body, want) {
				t.Fatalf("the start page lacks %q:\n%s", want, p.Body)
			}
		}
		if csp := p.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "form-action 'self' "+e.emuURL) || strings.Contains(csp, "script") ||
			p.Header.Get("Referrer-Policy") != "same-origin" || p.Header.Get("Cache-Control") != "no-store" {
			t.Fatalf("headers %v", p.Header)
		}
		if c := setCookie(p.Header, csrfCookie); !strings.Contains(c, "HttpOnly") || !strings.Contains(c, "SameSite=Strict") || !strings.Contains(c, "path=/api/v1/oauth/") {
			t.Fatalf("csrf cookie %q", c)
		}
	}
	if s := e.emu.Stats(); s.CodesIssued != 0 {
		t.Fatal("the provider was visited")
	}

	// Sign in as bob.
	p, _ := bob.Get(ctx, link)
	p, err := bob.Post(ctx, p.SignIn, e.base, url.Values{"csrf": {p.CSRF}, "credential": {e.bob}})
	if err != nil || p.Status != http.StatusSeeOther || p.Location != link {
		t.Fatalf("sign-in: %d %v %q", p.Status, err, p.Location)
	}
	if c := setCookie(p.Header, sessionCookie); !strings.Contains(c, "HttpOnly") || !strings.Contains(c, "SameSite=Lax") || !strings.Contains(c, "path=/;") ||
		!strings.Contains(c, "max-age=43200") || strings.Contains(c, e.bob) {
		t.Fatalf("session cookie %q", c)
	}
	p, _ = bob.Get(ctx, link)
	if p.Status != 200 || p.SignIn != "" || p.Continue == "" || !strings.Contains(p.Body, "Signed in as bob.") || !strings.Contains(p.Body, "Continue to corp") {
		t.Fatalf("start page signed in: %d\n%s", p.Status, p.Body)
	}
	// Continue twice: two states, each bound to the (renewed) cookie.
	var authURLs []string
	for range 2 {
		p, err = bob.Post(ctx, p.Continue, e.base, url.Values{"csrf": {p.CSRF}})
		if err != nil || p.Status != http.StatusSeeOther || !strings.HasPrefix(p.Location, e.emuURL+"/authorize?") {
			t.Fatalf("continue: %d %v %q", p.Status, err, p.Location)
		}
		c := setCookie(p.Header, bindCookie)
		if !strings.Contains(c, "HttpOnly") || !strings.Contains(c, "SameSite=Lax") || !strings.Contains(c, "path=/api/v1/oauth/") || !strings.Contains(c, "max-age=") {
			t.Fatalf("bind cookie %q", c)
		}
		if p.Header.Get("Referrer-Policy") != "no-referrer" {
			t.Fatal("the redirect to the provider may carry the ticket as referrer")
		}
		authURLs = append(authURLs, p.Location)
		p, _ = bob.Get(ctx, link)
	}
	if authURLs[0] == authURLs[1] {
		t.Fatal("a second Continue made the same state")
	}
	// The last state completes; the first one's cookie was replaced.
	p, _ = bob.Get(ctx, authURLs[1])
	p, err = bob.Get(ctx, p.Location)
	if err != nil || p.Status != 200 || !strings.Contains(p.Body, "Connected to corp as Some One &lt;someone@corp.example&gt;, for platform user bob.") {
		t.Fatalf("callback: %d %v\n%s", p.Status, err, p.Body)
	}
	if c := setCookie(p.Header, bindCookie); !strings.Contains(c, "expires=Thu, 01 Jan 1970") {
		t.Fatalf("the callback left the bind cookie: %q", c)
	}
	p, _ = bob.Get(ctx, authURLs[0])
	if p, _ := bob.Get(ctx, p.Location); p.Status != 400 || !strings.Contains(p.Body, "started in another browser") {
		t.Fatalf("an older state: %d\n%s", p.Status, p.Body)
	}
	e.remember("bob")
	if items := e.list("bob", e.bob); len(items) != 1 || !slices.Equal(items[0].Scopes, []string{"docs.read", "email", "openid"}) {
		t.Fatalf("listing: %+v", items)
	}

	// Incremental: a second link adds a scope; the session still holds.
	link2, asked := e.authorize("bob", e.bob, "drive.file")
	p, err = bob.Connect(ctx, link2, "")
	if err != nil || p.Status != 200 || !strings.Contains(p.Body, "Connected to corp") {
		t.Fatalf("second flow: %d %v\n%s", p.Status, err, p.Body)
	}
	e.remember("bob")
	if items := e.list("bob", e.bob); len(items) != 1 || !slices.Equal(items[0].Scopes, asked) || !slices.Contains(asked, "drive.file") || !slices.Contains(asked, "docs.read") {
		t.Fatalf("merged: %+v (asked %v)", items, asked)
	}
	e.clean()
}

func setCookie(h http.Header, name string) string {
	for _, c := range h.Values("Set-Cookie") {
		if strings.HasPrefix(c, name+"=") {
			return c
		}
	}
	return ""
}

// A service key's link (an application acting for its end users, who have
// no platform credentials) needs no sign-in, shows who is being linked and
// still binds the flow to the browser that continues.
func TestOAuthLinkOfServiceKey(t *testing.T) {
	srv, _, _ := testenv.NATS(t)
	e := newOAuthEnv(t, srv.ClientURL())
	ctx := context.Background()
	svcKey := e.must(201, "POST", e.projectPath()+"/service_keys", bootKey, map[string]any{"name": "app"}).field("key")
	e.seen(svcKey)
	link, _ := e.authorize("end-user-7", svcKey)
	fromTool, _, err := e.svc.AppAuthorizationURL(ctx, e.org, e.project, "end-user-7", "corp", nil)
	if err != nil {
		t.Fatal(err)
	}
	e.seen(fromTool)
	for _, l := range []string{link, fromTool} {
		if !e.ticketOf(l).ByApp {
			t.Fatalf("the service key's link is a user's")
		}
	}
	user := e.another()
	p, err := user.Get(ctx, link)
	if err != nil || p.Status != 200 || p.SignIn != "" || p.Continue == "" || !strings.Contains(p.Body, "An application of the project made this link for user end-user-7") {
		t.Fatalf("start page: %d %v\n%s", p.Status, err, p.Body)
	}
	// The click is still needed, from the page.
	if p, _ := user.Post(ctx, p.Continue, "https://evil.example", url.Values{"csrf": {p.CSRF}}); p.Status != 403 {
		t.Fatalf("cross-origin continue: %d", p.Status)
	}
	authURL, err := user.Continue(ctx, link, "")
	if err != nil {
		t.Fatal(err)
	}
	p, _ = user.Get(ctx, authURL)
	cb := p.Location
	if p, _ := e.another().Get(ctx, cb); p.Status != 400 {
		t.Fatalf("callback in another browser: %d", p.Status)
	}
	p, err = user.Get(ctx, cb)
	if err != nil || p.Status != 200 || !strings.Contains(p.Body, "for platform user end-user-7") || !strings.Contains(p.Body, "someone@corp.example") {
		t.Fatalf("callback: %d %v\n%s", p.Status, err, p.Body)
	}
	e.remember("end-user-7")
	if items := e.list("end-user-7", e.alice); len(items) != 1 || !items[0].Connected {
		t.Fatalf("listing %+v", items)
	}
	// Once used, the link is spent: someone else who holds it (it was
	// posted in a shared channel) cannot replace the connection with an
	// account of theirs, even through the whole flow in their own browser.
	before := len(e.connEvents())
	thief := e.another()
	authURL, err = thief.Continue(ctx, link, "")
	if err != nil {
		t.Fatal(err)
	}
	p, _ = thief.Get(ctx, authURL)
	if p, _ := thief.Get(ctx, p.Location); p.Status != 400 || !strings.Contains(p.Body, "Link already used") {
		t.Fatalf("second flow of a used link: %d\n%s", p.Status, p.Body)
	}
	time.Sleep(100 * time.Millisecond)
	if after := len(e.connEvents()); after != before {
		t.Fatalf("the used link changed the connection: %d events, was %d", after, before)
	}
	e.clean()
}

// Login CSRF: another site cannot sign a victim's browser in (as the
// attacker, so that the victim's consent lands in the attacker's
// connection), nor click Continue for it.
func TestOAuthStartFormsRefuseCSRF(t *testing.T) {
	srv, _, _ := testenv.NATS(t)
	e := newOAuthEnv(t, srv.ClientURL())
	ctx := context.Background()
	link, _ := e.authorize("bob", e.bob)
	b := e.another()
	page, _ := b.Get(ctx, link)
	good := url.Values{"csrf": {page.CSRF}, "credential": {e.bob}}
	tests := []struct {
		name    string
		origin  string
		referer string
		form    url.Values
		want    int
	}{
		{"cross-origin", "https://evil.example", "", good, 403},
		{"cross-origin, same-origin referer", "https://evil.example", e.base + "/x", good, 403},
		{"null origin", "null", "", good, 403},
		{"no origin, no referer", "", "", good, 403},
		{"no origin, other referer", "", "https://evil.example/a", good, 403},
		{"no token", e.base, "", url.Values{"credential": {e.bob}}, 403},
		{"wrong token", e.base, "", url.Values{"csrf": {strings.Repeat("x", 43)}, "credential": {e.bob}}, 403},
		{"oversized", e.base, "", url.Values{"csrf": {page.CSRF}, "credential": {strings.Repeat("k", 20000)}}, 413},
		{"same-origin referer", "", link, good, 303},
		{"same origin", e.base, "", good, 303},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			u, _ := url.Parse(e.base)
			b.HTTP.Jar.SetCookies(u, []*http.Cookie{{Name: sessionCookie, Value: "", MaxAge: -1, Path: "/"}})
			req, _ := http.NewRequest("POST", page.SignIn, strings.NewReader(tc.form.Encode()))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			if tc.origin != "" {
				req.Header.Set("Origin", tc.origin)
			}
			if tc.referer != "" {
				req.Header.Set("Referer", tc.referer)
			}
			resp, err := b.HTTP.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.want || (tc.want != 303) == hasCookie(b, e.base, sessionCookie) {
				t.Fatalf("%d (session set: %v), want %d", resp.StatusCode, hasCookie(b, e.base, sessionCookie), tc.want)
			}
		})
	}
	// Without the double-submit cookie (another site's form cannot make
	// the browser send it: SameSite=Strict), even with the field.
	fresh := e.another()
	if p, _ := fresh.Post(ctx, page.SignIn, e.base, good); p.Status != 403 {
		t.Fatalf("without the cookie: %d", p.Status)
	}
}

// The session cookie opens only as what the platform sealed as a session:
// not a ticket, a state, another key's value, nor an expired session.
func TestBrowserSessionCookie(t *testing.T) {
	srv, _, _ := testenv.NATS(t)
	e := newOAuthEnv(t, srv.ClientURL())
	org := uuid.MustParse(e.org)
	good, err := e.svc.sealSession(browserSession{User: "bob", Org: &org, ExpiresAt: time.Now().Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	expired, _ := e.svc.sealSession(browserSession{User: "bob", ExpiresAt: time.Now().Add(-time.Second)})
	tooLong, _ := e.svc.sealSession(browserSession{User: "bob", ExpiresAt: time.Now().Add(48 * time.Hour)})
	noUser, _ := e.svc.sealSession(browserSession{ExpiresAt: time.Now().Add(time.Hour)})
	link, _ := e.authorize("bob", e.bob)
	ticket := link[strings.LastIndex(link, "/")+1:]
	// One character in the middle changed (its six bits, whole): the end's
	// last characters may hold padding bits, and a value that already
	// ended in what replaced them was not tampered at all (1 run in a few
	// hundred).
	mid := len(good) / 2
	flipped := byte('A')
	if good[mid] == 'A' {
		flipped = 'B'
	}
	tampered := good[:mid] + string(flipped) + good[mid+1:]
	tests := []struct {
		name  string
		value string
		ok    bool
	}{
		{"good", good, true},
		{"expired", expired, false},
		{"longer than 12 h", tooLong, false},
		{"no user", noUser, false},
		{"a ticket", ticket, false},
		{"tampered", tampered, false},
		{"garbage", "not a session", false},
		{"huge", strings.Repeat("A", 5000), false},
		{"empty", "", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b, ok := e.svc.openSession(tc.value)
			if ok != tc.ok || (ok && (b.User != "bob" || b.Org == nil || *b.Org != org)) {
				t.Fatalf("openSession: %+v %v", b, ok)
			}
		})
	}
	// A session fits the tickets of its user in its organization only.
	tk := e.ticketOf(link)
	other := uuid.New()
	for _, c := range []struct {
		s    browserSession
		fits bool
	}{
		{browserSession{User: "bob", Org: &org}, true},
		{browserSession{User: "bob"}, true}, // a JWT's
		{browserSession{User: "bob", Org: &other}, false},
		{browserSession{User: "carol", Org: &org}, false},
	} {
		if c.s.fits(tk) != c.fits {
			t.Fatalf("%+v fits %v", c.s, !c.fits)
		}
	}
}

func FuzzOpenSession(f *testing.F) {
	k := make([]byte, 32)
	sealer, err := cpstate.NewSealer(k)
	if err != nil {
		f.Fatal(err)
	}
	s := &Service{sealer: sealer, now: time.Now}
	good, err := s.sealSession(browserSession{User: "u", ExpiresAt: time.Now().Add(time.Hour)})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add("")
	f.Add("AAAA")
	f.Fuzz(func(t *testing.T, v string) {
		b, ok := s.openSession(v)
		if ok && (b.User == "" || !time.Now().Before(b.ExpiresAt)) {
			t.Fatalf("opened %+v", b)
		}
	})
}

// Where the pages live, from the redirect URI: the origin the forms must
// come from, the links' base, the cookies' path and Secure.
func TestOAuthSite(t *testing.T) {
	tests := []struct {
		redirect                 string
		origin, base, cookiePath string
		secure                   bool
	}{
		{"http://127.0.0.1:8080/api/v1/oauth/callback", "http://127.0.0.1:8080", "http://127.0.0.1:8080/api/v1/oauth", "/api/v1/oauth/", false},
		{"https://Auditrail.Example.com:443/api/v1/oauth/callback", "https://auditrail.example.com", "https://Auditrail.Example.com:443/api/v1/oauth", "/api/v1/oauth/", true},
		{"http://example.com:80/api/v1/oauth/callback", "http://example.com", "http://example.com:80/api/v1/oauth", "/api/v1/oauth/", false},
		{"https://example.com/tenant/api/v1/oauth/callback", "https://example.com", "https://example.com/tenant/api/v1/oauth", "/tenant/api/v1/oauth/", true},
	}
	for _, tc := range tests {
		t.Run(tc.redirect, func(t *testing.T) {
			s := siteOf(tc.redirect)
			if s.origin != tc.origin || s.base != tc.base || s.cookiePath != tc.cookiePath || s.secure != tc.secure {
				t.Fatalf("%+v", s)
			}
		})
	}
	for origin, ok := range map[string]bool{"https://idp.example.com": true, "http://127.0.0.1:9000": true, "http://[::1]:9000": true,
		"https://a.example; script-src *": false, "javascript:alert(1)": false, "https://a.example/path": false, "": false} {
		if originPattern.MatchString(origin) != ok {
			t.Errorf("%q: %v", origin, !ok)
		}
	}
}

// A session signed in with a JWT (valid in every organization) continues a
// user's link only in an organization the user is a member of; and a
// callback whose state is not ours does not spend the browser's binding
// (a page could otherwise break a flow in progress).
func TestSessionOfAMemberAndForgedCallbacks(t *testing.T) {
	srv, _, _ := testenv.NATS(t)
	e := newOAuthEnv(t, srv.ClientURL())
	link, _ := e.authorize("bob", e.bob, "docs.read")
	tk := e.ticketOf(link)
	if !e.svc.sessionFits(browserSession{User: "bob"}, tk) {
		t.Fatal("a JWT session of bob, a member, does not fit bob's link")
	}
	tk.User = "mallory" // not a member of the organization
	if (browserSession{User: "mallory"}).fits(tk) != true || e.svc.sessionFits(browserSession{User: "mallory"}, tk) {
		t.Fatal("a JWT session of a non-member fits a link of the organization")
	}
	req := httptest.NewRequest("GET", "/api/v1/oauth/callback?state=forged&code=x", nil)
	req.Header.Set("Cookie", bindCookie+"=keep-me")
	resp, err := e.app.Test(req, -1)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	for _, c := range resp.Cookies() {
		if c.Name == bindCookie {
			t.Fatalf("a forged callback touched the binding cookie: %v", c)
		}
	}
	if resp.StatusCode != 400 {
		t.Fatalf("forged callback: %d", resp.StatusCode)
	}
}
