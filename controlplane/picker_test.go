package controlplane

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/auditrail/auditrail/controlplane/cpstate"
	"github.com/auditrail/auditrail/internal/oauthflow"
	"github.com/auditrail/auditrail/internal/testenv"
	"github.com/auditrail/auditrail/schemas"
)

// sealPicker seals a picker state as PickerURL does (for states PickerURL
// would not issue: expired ones).
func (e *oauthEnv) sealPicker(st pickerState) string {
	e.t.Helper()
	b, _ := json.Marshal(st)
	sealed, err := e.svc.sealer.Seal(pickerStateKey, b)
	if err != nil {
		e.t.Fatal(err)
	}
	return e.base + pickerPath + base64.RawURLEncoding.EncodeToString(sealed)
}

// pickerNonce is the nonce of a picker URL's state.
func (e *oauthEnv) pickerNonce(u string) string {
	e.t.Helper()
	st, err := e.svc.openPickerState(strings.TrimPrefix(u, e.base+pickerPath), time.Time{})
	if err != nil {
		e.t.Fatal(err)
	}
	return st.Nonce
}

// pickerBrowser is a user's browser on a picker page, over real HTTP: its
// own cookies, the page's anti-CSRF value, the platform's Origin on its
// POSTs — what the page's module sends.
type pickerBrowser struct {
	e      *oauthEnv
	client *http.Client
	url    string
	csrf   string
	claim  string
	report string
}

func (e *oauthEnv) newBrowser() *pickerBrowser {
	jar, _ := cookiejar.New(nil)
	return &pickerBrowser{e: e, client: &http.Client{Jar: jar, Timeout: 10 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

var pickerDataRE = regexp.MustCompile(`<main id="picker" data-claim="([^"]*)" data-report="([^"]*)" data-csrf="([^"]*)">`)

// open GETs the page and reads its data.
func (b *pickerBrowser) open(u string) (int, string, http.Header) {
	b.e.t.Helper()
	resp, err := b.client.Get(u)
	if err != nil {
		b.e.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	b.url = u
	if m := pickerDataRE.FindStringSubmatch(string(body)); m != nil {
		b.claim, b.report, b.csrf = html.UnescapeString(m[1]), html.UnescapeString(m[2]), html.UnescapeString(m[3])
	}
	return resp.StatusCode, string(body), resp.Header
}

type envelope struct {
	Code int             `json:"code"`
	Msg  string          `json:"msg"`
	Data json.RawMessage `json:"data"`
}

// post sends what the page sends; edit changes the request first (a
// forgery).
func (b *pickerBrowser) post(u, body string, edit func(*http.Request)) (int, envelope, http.Header) {
	b.e.t.Helper()
	req, _ := http.NewRequest("POST", u, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Origin", b.e.base)
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	req.Header.Set(pickerCSRFHeader, b.csrf)
	if edit != nil {
		edit(req)
	}
	resp, err := b.client.Do(req)
	if err != nil {
		b.e.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var env envelope
	_ = json.Unmarshal(raw, &env)
	return resp.StatusCode, env, resp.Header
}

// click is the click on "Choose files": the claim.
func (b *pickerBrowser) click(edit func(*http.Request)) (int, pickerConfig, string) {
	b.e.t.Helper()
	st, env, h := b.post(b.url+"/claim", `{}`, edit)
	if h.Get("Cache-Control") != "no-store" {
		b.e.t.Fatalf("claim answered with Cache-Control %q", h.Get("Cache-Control"))
	}
	var cfg pickerConfig
	_ = json.Unmarshal(env.Data, &cfg)
	return st, cfg, env.Msg
}

func (b *pickerBrowser) picked(body string) (int, string) {
	b.e.t.Helper()
	st, env, _ := b.post(b.url+"/picked", body, nil)
	return st, env.Msg
}

// pickerURL issues a picker URL of user's corp connection.
func (e *oauthEnv) pickerURL(user string) string {
	e.t.Helper()
	u, _, err := e.svc.PickerURL(context.Background(), e.org, e.project, user, "corp")
	if err != nil {
		e.t.Fatal(err)
	}
	e.seen(strings.TrimPrefix(u, e.base+pickerPath))
	return u
}

const onePick = `{"files":[{"id":"f1","name":"n","mime_type":"text/plain"}]}`

func TestPickerURLAndPage(t *testing.T) {
	srv, _, _ := testenv.NATS(t)
	e := newOAuthEnv(t, srv.ClientURL())
	ctx := context.Background()

	if _, _, err := e.svc.PickerURL(ctx, e.org, e.project, "bob", "corp"); !errors.Is(err, oauthflow.ErrNotConnected) {
		t.Fatalf("PickerURL before any connection: %v", err)
	}
	if _, _, err := e.svc.PickerURL(ctx, e.org, e.project, "bob", "nope"); !errors.Is(err, oauthflow.ErrNoProvider) {
		t.Fatalf("PickerURL of an unknown provider: %v", err)
	}
	e.connect("bob", e.bob, "drive.file")
	tokens := e.remember("bob")
	e.must(200, "PATCH", e.providers()+"/corp", e.alice, map[string]any{"picker_api_key": "AIzaPickerKey_1-x"})

	e.svc.TrustPickerScripts(e.emuURL) // the operator's emulator serves the picker script
	u, exp, err := e.svc.PickerURL(ctx, e.org, e.project, "bob", "corp")
	if err != nil || !strings.HasPrefix(u, e.base+"/api/v1/picker/") || exp.Before(time.Now().Add(9*time.Minute)) || exp.After(time.Now().Add(11*time.Minute)) {
		t.Fatalf("PickerURL: %q %v %v", u, exp, err)
	}
	state := strings.TrimPrefix(u, e.base+pickerPath)
	e.seen(state)

	// The page: what will happen, a button, no token; its scripts are
	// files allowed by nonce, nothing inline.
	b := e.newBrowser()
	st, body, h := b.open(u)
	if st != 200 || strings.Contains(body, tokens.AccessToken) || strings.Contains(h.Get("Set-Cookie"), tokens.AccessToken) {
		t.Fatalf("picker page: %d %s", st, body)
	}
	csp := h.Get("Content-Security-Policy")
	nonce := regexp.MustCompile(`script-src 'nonce-([A-Za-z0-9_-]{24})' 'strict-dynamic' 'self' ` + regexp.QuoteMeta(e.emuURL) + `;`).FindStringSubmatch(csp)
	if h.Get("Cache-Control") != "no-store" || h.Get("Referrer-Policy") != "no-referrer" || h.Get("X-Frame-Options") != "DENY" ||
		nonce == nil || strings.Contains(csp, "unsafe-") || !strings.Contains(csp, "default-src 'none'") ||
		!strings.Contains(csp, "frame-ancestors 'none'") || !strings.Contains(csp, "connect-src 'self' "+e.emuURL+";") ||
		!strings.Contains(csp, "style-src 'self' "+e.emuURL+";") {
		t.Fatalf("page headers: %v", h)
	}
	js, css := pickerStaticPath+"picker.js?v="+pickerStatic["picker.js"].version, pickerStaticPath+"picker.css?v="+pickerStatic["picker.css"].version
	if strings.Count(body, "<script") != 2 || strings.Count(body, `nonce="`+nonce[1]+`"`) != 2 ||
		!strings.Contains(body, `<script nonce="`+nonce[1]+`" src="`+e.emuURL+`/api/js/api.js"></script>`) ||
		!strings.Contains(body, `<script type="module" nonce="`+nonce[1]+`" src="`+js+`"></script>`) ||
		!strings.Contains(body, `<link rel="stylesheet" href="`+css+`">`) || strings.Contains(body, "<style") ||
		regexp.MustCompile(`(?i)\son[a-z]+=`).MatchString(body) ||
		!strings.Contains(body, `<button type="button" id="choose">Choose files</button>`) ||
		!strings.Contains(body, `<strong id="provider">corp</strong>`) || !strings.Contains(body, `<strong id="user">bob</strong>`) {
		t.Fatalf("page body:\n%s", body)
	}
	if b.claim != u+"/claim" || b.report != u+"/picked" || len(b.csrf) != 43 {
		t.Fatalf("page data: claim %q report %q csrf %q", b.claim, b.report, b.csrf)
	}
	var cookie *http.Cookie
	for _, c := range (&http.Response{Header: h}).Cookies() {
		if c.Name == pickerCookie {
			cookie = c
		}
	}
	if cookie == nil || cookie.Value != b.csrf || !cookie.HttpOnly || cookie.SameSite != http.SameSiteStrictMode ||
		cookie.Path != pickerPath+state || cookie.MaxAge < int((cpstate.PickerTTL+cpstate.PickerReportTTL)/time.Second) || cookie.Secure {
		t.Fatalf("anti-CSRF cookie: %+v", cookie)
	}
	// A report before the click is refused, and burns nothing.
	if st, msg := b.picked(onePick); st != 400 || !strings.Contains(msg, "never opened") {
		t.Fatalf("report before the claim: %d %s", st, msg)
	}
	// The click claims the link and answers the token and configuration.
	st, cfg, msg := b.click(nil)
	if st != 200 || cfg != (pickerConfig{Token: tokens.AccessToken, AppID: "corp-client", DeveloperKey: "AIzaPickerKey_1-x"}) {
		t.Fatalf("claim: %d %s (token is bob's: %v)", st, msg, cfg.Token == tokens.AccessToken)
	}
	// Once only: another click, the page opened again.
	if st, cfg, msg := b.click(nil); st != 409 || cfg.Token != "" || !strings.Contains(msg, "used already") {
		t.Fatalf("second claim: %d %s", st, msg)
	}
	if st, body, h := e.newBrowser().open(u); st != 400 || !strings.Contains(body, "already used") || strings.Contains(body, "<script") ||
		h.Get("Set-Cookie") != "" || strings.Contains(h.Get("Content-Security-Policy"), "unsafe-") {
		t.Fatalf("page after the claim: %d %s %v", st, body, h)
	}

	// The page's report is recorded once, by bob, with the files.
	tests := []struct {
		name string
		body string
		want int
	}{
		{"no files", `{"files":[]}`, 400},
		{"bad id", `{"files":[{"id":"../x","name":"x"}]}`, 400},
		{"unknown field", `{"files":[{"id":"f1"}],"token":"x"}`, 400},
		{"newline in name", `{"files":[{"id":"f1","name":"a\nb"}]}`, 400},
		{"ok", `{"files":[{"id":"1AbC_d-9","name":"Plan \"Q3\"","mime_type":"application/vnd.google-apps.document"}]}`, 204},
		{"twice", `{"files":[{"id":"f2","name":"y"}]}`, 409},
	}
	for _, tc := range tests {
		if st, msg := b.picked(tc.body); st != tc.want {
			t.Fatalf("report %s: %d %s, want %d", tc.name, st, msg, tc.want)
		}
	}
	var evs []schemas.AuditEvent
	testenv.Eventually(t, 10*time.Second, "the picker event", func() bool { evs = e.connEvents(); return len(evs) >= 2 })
	ev := evs[len(evs)-1]
	var data struct {
		Before, After struct {
			PickerFiles []pickedFile `json:"picker_files"`
		}
	}
	_ = json.Unmarshal(ev.Data, &data)
	if ev.Action != schemas.AuditActionUpdated || ev.PrincipalID != "bob" || ev.PrincipalType != "ACCOUNT" || *ev.ResourceID != "bob/corp" ||
		len(data.Before.PickerFiles) != 0 || len(data.After.PickerFiles) != 1 ||
		data.After.PickerFiles[0] != (pickedFile{ID: "1AbC_d-9", Name: `Plan "Q3"`, MimeType: "application/vnd.google-apps.document"}) {
		t.Fatalf("picker event: %s", ev.Data)
	}

	// Expired, tampered, forged or OAuth states open nothing.
	orgID, projectID := uuid.MustParse(e.org), uuid.MustParse(e.project)
	expired := e.sealPicker(pickerState{Nonce: "n-expired", Org: orgID, Project: projectID, User: "bob", Provider: "corp",
		ExpiresAt: time.Now().Add(-time.Second).UTC()})
	fresh := e.pickerURL("bob")
	raw, _ := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(fresh, e.base+pickerPath))
	raw[len(raw)/2] ^= 1
	tampered := e.base + pickerPath + base64.RawURLEncoding.EncodeToString(raw)
	au, _ := url.Parse(e.begin(must(e.authorize("bob", e.bob))))
	oauthState := e.base + pickerPath + au.Query().Get("state")
	refusals := []struct{ name, url, want string }{
		{"expired", expired, "Link expired"},
		{"tampered", tampered, "Invalid link"},
		{"oauth state", oauthState, "Invalid link"},
		{"garbage", e.base + pickerPath + "not-a-state", "Invalid link"},
		{"too long", e.base + pickerPath + strings.Repeat("A", 3000), "Invalid link"},
	}
	for _, r := range refusals {
		if st, body, h := e.browse(r.url); st != 400 || !strings.Contains(body, r.want) || strings.Contains(body, tokens.AccessToken) || h.Get("Set-Cookie") != "" {
			t.Fatalf("%s: %d %s", r.name, st, body)
		}
		// Its claim neither (with a page's cookie and value for it).
		fb := e.newBrowser()
		fb.open(fresh)
		fb.url = r.url
		if st, cfg, msg := fb.click(func(req *http.Request) {
			req.AddCookie(&http.Cookie{Name: pickerCookie, Value: fb.csrf})
		}); st != 400 || cfg.Token != "" {
			t.Fatalf("claim of %s: %d %s", r.name, st, msg)
		}
	}
	// The untampered state still works (the tampered copy did not burn it).
	fb := e.newBrowser()
	if st, _, _ := fb.open(fresh); st != 200 {
		t.Fatalf("fresh state after its tampered copy: %d", st)
	}
	if st, cfg, _ := fb.click(nil); st != 200 || cfg.Token != tokens.AccessToken {
		t.Fatalf("claim of the fresh state: %d", st)
	}

	// A user id is shown as text.
	const hostile = `<img src=x onerror=alert(1)>&"eve"`
	e.must(201, "PUT", e.connPath(url.PathEscape(hostile))+"/corp", bootKey, map[string]any{"access_token": "eve-token", "scopes": []string{"drive.file"}})
	if st, body, _ := e.newBrowser().open(e.pickerURL(hostile)); st != 200 || strings.Contains(body, "<img") ||
		!strings.Contains(body, `<strong id="user">&lt;img src=x onerror=alert(1)&gt;&amp;&#34;eve&#34;</strong>`) {
		t.Fatalf("hostile user id: %d %s", st, body)
	}

	// Another organization's picker state carries that organization's
	// user's connection only, and dies with its provider.
	org2 := e.must(201, "POST", "/api/v1/orgs", bootKey, map[string]any{"name": "other"}).field("id")
	project2 := e.must(201, "POST", "/api/v1/orgs/"+org2+"/projects", bootKey, map[string]any{"name": "p2"}).field("id")
	e.must(201, "POST", "/api/v1/orgs/"+org2+"/auth_providers", bootKey, map[string]any{"id": "corp", "type": "oauth2",
		"client_id": "corp-client", "authorize_url": e.emuURL + "/authorize", "token_url": e.emuURL + "/token", "api_base_url": e.emuURL + "/api"})
	e.must(201, "PUT", "/api/v1/orgs/"+org2+"/projects/"+project2+"/users/bob/connections/corp", bootKey,
		map[string]any{"access_token": "org2-token-of-another-bob", "scopes": []string{"drive.file"}})
	if _, _, err := e.svc.PickerURL(ctx, org2, e.project, "bob", "corp"); !errors.Is(err, oauthflow.ErrNotConnected) {
		t.Fatalf("PickerURL with another organization's project: %v", err)
	}
	other, _, err := e.svc.PickerURL(ctx, org2, project2, "bob", "corp")
	if err != nil {
		t.Fatal(err)
	}
	other2, _, err := e.svc.PickerURL(ctx, org2, project2, "bob", "corp")
	if err != nil {
		t.Fatal(err)
	}
	ob := e.newBrowser()
	ob.open(other)
	if st, cfg, _ := ob.click(nil); st != 200 || cfg.Token != "org2-token-of-another-bob" {
		t.Fatalf("other organization's claim: %d", st)
	}
	e.must(200, "DELETE", "/api/v1/orgs/"+org2+"/auth_providers/corp", bootKey, nil)
	if st, body, _ := e.browse(other2); st != 400 || !strings.Contains(body, "no longer has the auth provider") {
		t.Fatalf("state of a deleted provider: %d %s", st, body)
	}
	e.clean()
}

// A plain GET of the picker URL — a link scanner, a preview bot — holds no
// token and consumes nothing: the user who opens the link later still
// picks. A POST that is not the page's own (no cookie, another value,
// another origin, cross-site) is refused and consumes nothing either; a
// second claim — a replay, another browser — is refused, saying why.
func TestPickerClaimNeedsThePageAndAClick(t *testing.T) {
	srv, _, _ := testenv.NATS(t)
	e := newOAuthEnv(t, srv.ClientURL())
	e.connect("bob", e.bob, "drive.file")
	tokens := e.remember("bob")
	u := e.pickerURL("bob")

	scanner := &http.Client{Timeout: 10 * time.Second} // follows redirects, keeps no cookies
	for i := 0; i < 3; i++ {
		resp, err := scanner.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || strings.Contains(string(body), tokens.AccessToken) || strings.Contains(resp.Header.Get("Set-Cookie"), tokens.AccessToken) ||
			!strings.Contains(string(body), "Choose files") {
			t.Fatalf("scanner's GET %d: %d %s", i, resp.StatusCode, body)
		}
	}
	// HEAD, as some scanners do.
	if resp, err := scanner.Head(u); err != nil || resp.StatusCode != 200 {
		t.Fatalf("HEAD: %v", err)
	}

	user := e.newBrowser()
	if st, _, _ := user.open(u); st != 200 {
		t.Fatalf("user's GET after the scanner's: %d", st)
	}
	// A browser that loaded the page too (the scanner's with cookies).
	other := e.newBrowser()
	other.open(u)
	forgeries := []struct {
		name string
		edit func(*http.Request)
	}{
		{"no Origin", func(r *http.Request) { r.Header.Del("Origin") }},
		{"foreign Origin", func(r *http.Request) { r.Header.Set("Origin", "https://evil.example") }},
		{"null Origin", func(r *http.Request) { r.Header.Set("Origin", "null") }},
		{"cross-site", func(r *http.Request) { r.Header.Set("Sec-Fetch-Site", "cross-site") }},
		{"no echoed value", func(r *http.Request) { r.Header.Del(pickerCSRFHeader) }},
		{"another value", func(r *http.Request) { r.Header.Set(pickerCSRFHeader, other.csrf) }},
	}
	for _, f := range forgeries {
		if st, cfg, msg := user.click(f.edit); st != 403 || cfg.Token != "" || msg == "" {
			t.Fatalf("claim with %s: %d %q", f.name, st, msg)
		}
	}
	// No cookie: a client that copied the page's value but not its cookie.
	bare := e.newBrowser()
	bare.url, bare.csrf = u, user.csrf
	if st, cfg, _ := bare.click(nil); st != 403 || cfg.Token != "" {
		t.Fatalf("claim without the cookie: %d", st)
	}

	// The user's click still claims it.
	if st, cfg, msg := user.click(nil); st != 200 || cfg.Token != tokens.AccessToken {
		t.Fatalf("the user's claim: %d %s", st, msg)
	}
	// A replay, and the other browser's click: refused, saying why.
	for _, b := range []*pickerBrowser{user, other} {
		if st, cfg, msg := b.click(nil); st != 409 || cfg.Token != "" || msg != "This file picker link has been used already; each works once. Ask your assistant for a new link." {
			t.Fatalf("second claim: %d %q", st, msg)
		}
	}
	// Only the browser that claimed reports.
	if st, msg := other.picked(onePick); st != 403 || !strings.Contains(msg, "another browser") {
		t.Fatalf("report from the other browser: %d %s", st, msg)
	}
	if st, msg := user.picked(onePick); st != 204 {
		t.Fatalf("report: %d %s", st, msg)
	}
	// The claim of an expired link says so.
	late := e.sealPicker(pickerState{Nonce: "late-1", Org: uuid.MustParse(e.org), Project: uuid.MustParse(e.project), User: "bob",
		Provider: "corp", ExpiresAt: time.Now().Add(time.Second).UTC()})
	lb := e.newBrowser()
	if st, _, _ := lb.open(late); st != 200 {
		t.Fatalf("page of a link about to expire: %d", st)
	}
	e.svc.now = e.clock.Now
	e.clock.Advance(2 * time.Second)
	if st, _, msg := lb.click(nil); st != 400 || !strings.Contains(msg, "older than its time limit") {
		t.Fatalf("claim after expiry: %d %s", st, msg)
	}
	e.clean()
}

// A report is accepted exactly once, up to PickerReportTTL after the link
// expired, and refused after; the markers that make it once outlive that
// window.
func TestPickerReportWindow(t *testing.T) {
	srv, _, _ := testenv.NATS(t)
	e := newOAuthEnv(t, srv.ClientURL())
	e.svc.now = e.clock.Now
	ctx := context.Background()
	e.connect("bob", e.bob, "drive.file")

	claimed := func() (*pickerBrowser, string) {
		t.Helper()
		u := e.pickerURL("bob")
		b := e.newBrowser()
		b.open(u)
		if st, _, msg := b.click(nil); st != 200 {
			t.Fatalf("claim: %d %s", st, msg)
		}
		return b, u
	}
	b, u := claimed()
	e.clock.Advance(20 * time.Minute)
	if st, msg := b.picked(onePick); st != 204 {
		t.Fatalf("report 20 minutes after the claim: %d %s", st, msg)
	}
	if st, msg := b.picked(onePick); st != 409 || !strings.Contains(msg, "already reported") {
		t.Fatalf("second report: %d %s", st, msg)
	}

	// The markers outlive the window: the claim (states bucket) and the
	// report (its marker, committed with the event).
	js, _ := jetstream.New(e.nc)
	states, err := js.KeyValue(ctx, cpstate.DefaultStatesBucket)
	if err != nil {
		t.Fatal(err)
	}
	status, err := states.Status(ctx)
	if window := cpstate.PickerTTL + cpstate.PickerReportTTL; err != nil || status.TTL() < window+time.Minute {
		t.Fatalf("states bucket TTL %v < the report window %v: %v", status.TTL(), window, err)
	}
	stream, err := js.Stream(ctx, "KV_cp_test")
	if err != nil {
		t.Fatal(err)
	}
	m, err := stream.GetLastMsgForSubject(ctx, "$KV.cp_test."+cpstate.MarkerPrefix+pickedMarker(e.pickerNonce(u)))
	if err != nil {
		t.Fatalf("report marker: %v", err)
	}
	if ttl, err := time.ParseDuration(m.Header.Get(jetstream.MsgTTLHeader)); err != nil || ttl < cpstate.PickerTTL+cpstate.PickerReportTTL+time.Minute {
		t.Fatalf("report marker TTL %q", m.Header.Get(jetstream.MsgTTLHeader))
	}
	var v any
	if _, err := e.state.Get(cpstate.MarkerPrefix+pickedMarker(e.pickerNonce(u)), &v); !errors.Is(err, cpstate.ErrNotFound) {
		t.Fatalf("the mirror holds a marker: %v", err)
	}

	// The last minute of the window is still in it.
	b2, _ := claimed()
	e.clock.Advance(cpstate.PickerTTL + cpstate.PickerReportTTL - time.Minute)
	if st, msg := b2.picked(onePick); st != 204 {
		t.Fatalf("report in the last minute of the window: %d %s", st, msg)
	}
	// After it, refused, and nothing recorded.
	b3, _ := claimed()
	e.clock.Advance(cpstate.PickerTTL + cpstate.PickerReportTTL)
	if st, msg := b3.picked(onePick); st != 400 || !strings.Contains(msg, "is over") {
		t.Fatalf("report after the window: %d %s", st, msg)
	}
	picks := func() int {
		n := 0
		for _, ev := range e.connEvents() {
			if strings.Contains(string(ev.Data), "picker_files") {
				n++
			}
		}
		return n
	}
	testenv.Eventually(t, 10*time.Second, "two picker events", func() bool { return picks() == 2 })
	time.Sleep(200 * time.Millisecond)
	if n := picks(); n != 2 {
		t.Fatalf("%d picker events, want 2", n)
	}
	e.clean()
}

// A report whose commit fails (the bucket refuses the atomic batch) leaves
// neither its marker nor its event: the page's retry is recorded, once.
func TestPickerReportRetryableAfterCommitFailure(t *testing.T) {
	srv, _, _ := testenv.NATS(t)
	e := newOAuthEnv(t, srv.ClientURL())
	ctx := context.Background()
	e.connect("bob", e.bob, "drive.file")
	u := e.pickerURL("bob")
	b := e.newBrowser()
	b.open(u)
	if st, _, msg := b.click(nil); st != 200 {
		t.Fatalf("claim: %d %s", st, msg)
	}
	js, _ := jetstream.New(e.nc)
	atomic := func(on bool) {
		t.Helper()
		s, err := js.Stream(ctx, "KV_cp_test")
		if err != nil {
			t.Fatal(err)
		}
		cfg := s.CachedInfo().Config
		cfg.AllowAtomicPublish = on
		if _, err := js.UpdateStream(ctx, cfg); err != nil {
			t.Fatal(err)
		}
	}
	before := len(e.connEvents())
	atomic(false)
	if st, msg := b.picked(onePick); st != 503 {
		t.Fatalf("report while the bucket refuses batches: %d %s", st, msg)
	}
	atomic(true)
	if st, msg := b.picked(onePick); st != 204 {
		t.Fatalf("retried report: %d %s", st, msg)
	}
	if st, msg := b.picked(onePick); st != 409 {
		t.Fatalf("report after the recorded one: %d %s", st, msg)
	}
	testenv.Eventually(t, 10*time.Second, "the picker event", func() bool { return len(e.connEvents()) == before+1 })
	time.Sleep(200 * time.Millisecond)
	if evs := e.connEvents(); len(evs) != before+1 || !strings.Contains(string(evs[len(evs)-1].Data), `"picker_files":[{"id":"f1"`) {
		t.Fatalf("%d events after the retry, want %d", len(evs), before+1)
	}
	e.clean()
}

// The page's module and style sheet: served by the platform with their
// types, cacheable (their URLs carry their hash); nothing else is.
func TestPickerStaticFiles(t *testing.T) {
	srv, _, _ := testenv.NATS(t)
	e := newOAuthEnv(t, srv.ClientURL())
	tests := []struct {
		file, ctype, holds string
		status             int
	}{
		{"picker.js", "text/javascript; charset=utf-8", "choose.addEventListener('click', claim);", 200},
		{"picker.css", "text/css; charset=utf-8", "#choose", 200},
		{"picker.html", "", "", 404},
		{"..%2fpicker_page.go", "", "", 404},
	}
	for _, tc := range tests {
		st, body, h := e.browse(e.base + pickerStaticPath + tc.file + "?v=x")
		if st != tc.status || (st == 200 && (h.Get("Content-Type") != tc.ctype || !strings.Contains(body, tc.holds) ||
			h.Get("X-Content-Type-Options") != "nosniff" || h.Get("Cache-Control") != "public, max-age=86400")) {
			t.Errorf("%s: %d %v", tc.file, st, h)
		}
	}
	// The module builds the page's text with textContent only.
	js := string(pickerStatic["picker.js"].body)
	for _, sink := range []string{"innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function"} {
		if strings.Contains(js, sink) {
			t.Errorf("picker.js uses %s", sink)
		}
	}
}

func TestPickerAppIDAndScript(t *testing.T) {
	tests := []struct {
		clientID, appID string
	}{
		{"123456789012-abcdef.apps.googleusercontent.com", "123456789012"},
		{"corp-client", "corp-client"},
		{"12-x", "12-x"},
	}
	for _, tc := range tests {
		if got := pickerAppID(tc.clientID); got != tc.appID {
			t.Errorf("pickerAppID(%q) = %q, want %q", tc.clientID, got, tc.appID)
		}
	}
	scripts := []struct {
		base, script, origin string
		err                  bool
	}{
		{"", googlePickerScript, "https://apis.google.com", false},
		// The operator trusts the emulator's origin: its script.
		{"http://127.0.0.1:8080/google/", "http://127.0.0.1:8080/google/js/api.js", "http://127.0.0.1:8080", false},
		// An org admin's host: Google's script, never theirs on our origin.
		{"https://collector.example.net/api", googlePickerScript, "https://apis.google.com", false},
		{"javascript:alert(1)", "", "", true},
		{"https://user:pw@example.com", "", "", true},
	}
	trusted := func(o string) bool { return o == "http://127.0.0.1:8080" }
	for _, tc := range scripts {
		script, origin, err := pickerScript(oauthflow.Provider{Endpoints: oauthflow.Endpoints{APIBaseURL: tc.base}}, trusted)
		if (err != nil) != tc.err || script != tc.script || origin != tc.origin {
			t.Errorf("pickerScript(%q) = %q %q %v", tc.base, script, origin, err)
		}
	}
	csp := pickerCSP("N", "https://apis.google.com")
	if !strings.Contains(csp, "frame-src https://apis.google.com https://docs.google.com;") || strings.Contains(csp, "unsafe-") {
		t.Errorf("Google's picker CSP: %s", csp)
	}
}

// The origin the POSTs must come from is the public URL's, as a browser
// writes it.
func TestPickerPublicOrigin(t *testing.T) {
	tests := []struct{ public, origin, path string }{
		{"http://127.0.0.1:8080", "http://127.0.0.1:8080", ""},
		{"https://Platform.Example.com:443/", "https://platform.example.com", ""},
		{"http://platform.example.com:80/auditrail/", "http://platform.example.com", "/auditrail"},
		{"https://platform.example.com:8443/a%20b", "https://platform.example.com:8443", "/a%20b"},
		{"http://[::1]:9000", "http://[::1]:9000", ""},
		{"ftp://platform.example.com", "", ""},
		{"/relative", "", ""},
	}
	for _, tc := range tests {
		if origin, path := splitOrigin(tc.public); origin != tc.origin || path != tc.path {
			t.Errorf("splitOrigin(%q) = %q %q, want %q %q", tc.public, origin, path, tc.origin, tc.path)
		}
	}
}

// The picker routes' answers, over real HTTP, match schemas/openapi/admin.yaml.
func TestPickerRoutesMatchOpenAPI(t *testing.T) {
	srv, _, _ := testenv.NATS(t)
	e := newOAuthEnv(t, srv.ClientURL())
	api := newAdminSpec(t, e.base)
	openapi3filter.RegisterBodyDecoder("text/javascript", openapi3filter.PlainBodyDecoder)
	e.connect("bob", e.bob)
	u := e.pickerURL("bob")
	b := e.newBrowser()
	do := func(method, u, body string, want int, edit func(*http.Request)) {
		t.Helper()
		req, _ := http.NewRequest(method, u, strings.NewReader(body))
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		req.Header.Set("Origin", e.base)
		req.Header.Set(pickerCSRFHeader, b.csrf)
		if edit != nil {
			edit(req)
		}
		for _, c := range b.client.Jar.Cookies(req.URL) {
			req.AddCookie(c)
		}
		api.do(t, req, want)
	}
	b.open(u)
	do("GET", u, "", 200, nil)
	do("GET", e.base+pickerStaticPath+"picker.js", "", 200, nil)
	do("GET", e.base+pickerStaticPath+"nope.js", "", 404, nil)
	b.open(u)
	do("POST", u+"/claim", `{}`, 403, func(r *http.Request) { r.Header.Set("Origin", "https://evil.example") })
	do("POST", u+"/picked", onePick, 400, nil)
	do("POST", u+"/claim", `{}`, 200, nil)
	do("POST", u+"/claim", `{}`, 409, nil)
	do("GET", u, "", 400, nil)
	do("POST", u+"/picked", `{"files":[]}`, 400, nil)
	do("POST", u+"/picked", onePick, 204, nil)
	do("POST", u+"/picked", onePick, 409, nil)
	for _, op := range []string{"pickerPage", "pickerClaim", "pickerPicked", "pickerStatic"} {
		if !api.checked[op] {
			t.Errorf("%s not checked", op)
		}
	}
}

// FuzzPickerState: a picker state from the path (outside input) never
// panics and never opens unless this platform sealed it as a picker state:
// no other sealed value (an OAuth state, a connection) and no alteration of
// a real one passes.
func FuzzPickerState(f *testing.F) {
	key := make([]byte, 32)
	sealer, err := cpstate.NewSealer(key)
	if err != nil {
		f.Fatal(err)
	}
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	s := &Service{sealer: sealer, now: func() time.Time { return now }}
	st := pickerState{Nonce: "n", Org: uuid.MustParse("0b7e1c7e-8f53-4c3b-9a57-5b0f5e3e9f01"),
		Project: uuid.MustParse("6a1f2d9c-0f6e-4f0e-8d44-2f7e1b9c3a02"), User: "bob", Provider: "corp", ExpiresAt: now.Add(time.Minute)}
	b, _ := json.Marshal(st)
	good, _ := sealer.Seal(pickerStateKey, b)
	forged := st
	forged.User = "mallory"
	fb, _ := json.Marshal(forged)
	other, _ := sealer.Seal("oauth-state", fb) // an OAuth state's key: must not open as a picker state
	valid := base64.RawURLEncoding.EncodeToString(good)
	if got, err := s.openPickerState(valid, now); err != nil || got != st {
		f.Fatalf("the sealed state does not open: %v", err)
	}
	f.Add(valid)
	f.Add(base64.RawURLEncoding.EncodeToString(other))
	f.Add("")
	f.Add("AAAA")
	f.Add(strings.Repeat("A", 3000))
	f.Fuzz(func(t *testing.T, state string) {
		// Only a value sealed with the key as a picker state opens (in
		// fuzzing, a seed above): never another state, never an altered one.
		if got, err := s.openPickerState(state, now); err == nil && got != st {
			t.Fatalf("%q opened as %+v", state, got)
		}
		if _, err := s.openPickerState(state, now.Add(time.Hour)); err == nil {
			t.Fatalf("%q opened after its expiry", state)
		}
	})
}
