package controlplane

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/oauth2"
	docs "google.golang.org/api/docs/v1"
	drive "google.golang.org/api/drive/v3"
	"google.golang.org/api/googleapi"
	"google.golang.org/api/option"

	"github.com/auditrail/auditrail/internal/emulators/google"
	"github.com/auditrail/auditrail/internal/emulators/oauth"
	"github.com/auditrail/auditrail/internal/emulators/oauth/oauthtest"
	"github.com/auditrail/auditrail/internal/testenv"
	"github.com/auditrail/auditrail/internal/testenv/browser"
)

// googleEnv is the Google emulator and its OAuth server on one HTTP server,
// as the demo mounts them: <url>/oauth/… and <url>/google/… (the API base
// URL of the organization's provider "gdocs").
type googleEnv struct {
	url  string
	auth *oauth.Server
	g    *google.Server
}

const (
	docsAppSecret    = "docs-app-secret-5b1f"
	docsEditorSecret = "docs-editor-secret-0c2e"
)

func newGoogleEnv(t *testing.T) *googleEnv {
	t.Helper()
	o, err := oauth.New(oauth.Config{Clients: []oauth.Client{{ID: "docs-app", Secret: docsAppSecret}, {ID: "docs-editor", Secret: docsEditorSecret}},
		Users: []oauth.User{{ID: "u-ann", Email: "ann@corp.example", Name: "Ann"}, {ID: "u-ben", Email: "ben@corp.example", Name: "Ben"}}, AutoApprove: true})
	if err != nil {
		t.Fatal(err)
	}
	g, err := google.New(google.Config{Auth: o})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/oauth/", http.StripPrefix("/oauth", o.Handler()))
	mux.Handle("/google/", http.StripPrefix("/google", g.Handler()))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return &googleEnv{url: srv.URL, auth: o, g: g}
}

// token runs the code flow at the emulator for a client and user (the
// user's own editor, not the platform).
func (ge *googleEnv) token(t *testing.T, client, secret, user string, scopes ...string) string {
	t.Helper()
	return oauthtest.Token(t, ge.url+"/oauth", oauthtest.Client{ID: client, Secret: secret, RedirectURI: "https://editor.example/cb"}, user, scopes...)
}

func clientOpts(endpoint, token string) []option.ClientOption {
	return []option.ClientOption{option.WithEndpoint(endpoint),
		option.WithTokenSource(oauth2.StaticTokenSource(&oauth2.Token{AccessToken: token, TokenType: "Bearer"}))}
}

func notFound(err error) bool {
	var ge *googleapi.Error
	return errors.As(err, &ge) && ge.Code == http.StatusNotFound
}

// TestPickerGrantsAccessInBrowser: the whole picker flow in a real browser.
// The platform's drive.file token cannot see a document the user made with
// another app; the picker URL opens the platform's page, which says what
// will happen and holds no token until the user clicks "Choose files"; the
// click claims the link and opens the provider's picker (the emulator's
// script, at the provider's api_base_url) under the page's CSP; the user
// checks the document and clicks Select; the page reports the pick —
// retrying while the platform cannot record it — says access was granted,
// and the same Drive and Docs calls now succeed, for that document only.
// The pick is audited once. The URL works once; an expired one opens
// nothing.
func TestPickerGrantsAccessInBrowser(t *testing.T) {
	srv, _, _ := testenv.NATS(t)
	e := newOAuthEnv(t, srv.ClientURL())
	tab := browser.Tab(t)
	ge := newGoogleEnv(t)
	ctx := context.Background()
	base := ge.url + "/google"
	e.svc.TrustPickerScripts(ge.url) // the operator's emulator, as dev --demo trusts its own

	e.must(201, "POST", e.providers(), e.alice, map[string]any{"id": "gdocs", "type": "google", "client_id": "docs-app",
		"client_secret": docsAppSecret, "authorize_url": ge.url + "/oauth/authorize", "token_url": ge.url + "/oauth/token",
		"revoke_url": ge.url + "/oauth/revoke", "userinfo_url": ge.url + "/oauth/userinfo", "api_base_url": base})
	e.seen(docsAppSecret)

	// bob connects his Google account (Ann's, at the emulator) with drive.file only.
	r := e.must(200, "POST", e.connPath("bob")+"/gdocs/authorize", e.bob, map[string]any{"scopes": []string{google.ScopeDriveFile}})
	var authz struct {
		URL string `json:"url"`
	}
	_ = json.Unmarshal(r.Data, &authz)
	resp, err := noRedirect.Get(e.begin(authz.URL) + "&login_hint=ann%40corp.example")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if st, body, _ := e.browse(resp.Header.Get("Location")); st != 200 || !strings.Contains(body, "Connected to gdocs") {
		t.Fatalf("callback: %d %s", st, body)
	}

	// Ann wrote two documents with her editor (another OAuth client).
	editor := ge.token(t, "docs-editor", docsEditorSecret, "ann@corp.example", google.ScopeDocs)
	docsByEditor, err := docs.NewService(ctx, clientOpts(base+"/", editor)...)
	if err != nil {
		t.Fatal(err)
	}
	plan, err := docsByEditor.Documents.Create(&docs.Document{Title: "Quarterly plan"}).Do()
	if err != nil {
		t.Fatal(err)
	}
	private, err := docsByEditor.Documents.Create(&docs.Document{Title: "Private notes"}).Do()
	if err != nil {
		t.Fatal(err)
	}
	// A file name is the file owner's text: the picker shows it, never runs it.
	const hostile = `<img src=x onerror="document.title='pwned'">Budget`
	if _, err := docsByEditor.Documents.Create(&docs.Document{Title: hostile}).Do(); err != nil {
		t.Fatal(err)
	}

	conn, err := e.svc.Connection(ctx, e.org, e.project, "bob", "gdocs")
	if err != nil || conn.APIBaseURL != base {
		t.Fatalf("Connection: %v (api base %q)", err, conn.APIBaseURL)
	}
	e.seen(conn.AccessToken, editor)
	driveSvc, err := drive.NewService(ctx, clientOpts(base+"/drive/v3/", conn.AccessToken)...)
	if err != nil {
		t.Fatal(err)
	}
	docsSvc, err := docs.NewService(ctx, clientOpts(base+"/", conn.AccessToken)...)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := driveSvc.Files.Get(plan.DocumentId).Fields("id, name").Do(); !notFound(err) || !strings.Contains(err.Error(), "File not found: "+plan.DocumentId+".") {
		t.Fatalf("drive.file token sees a document it was not given: %v", err)
	}
	if _, err := docsSvc.Documents.Get(plan.DocumentId).Do(); !notFound(err) {
		t.Fatalf("drive.file token reads a document it was not given: %v", err)
	}

	pickerURL, _, err := e.svc.PickerURL(ctx, e.org, e.project, "bob", "gdocs")
	if err != nil {
		t.Fatal(err)
	}
	e.seen(strings.TrimPrefix(pickerURL, e.base+pickerPath))
	planBox := `input.picker-file[value="` + plan.DocumentId + `"]`
	page, err := chromedp.Run(tab, chromedp.NavigateResponse(pickerURL))
	if err != nil || page.Status != 200 {
		t.Fatalf("open the picker: %v", err)
	}
	// Until the click, the page says what will happen and holds no token.
	if err := chromedp.Do(tab, chromedp.WaitVisible(chromedp.CSS("#choose"))); err != nil {
		t.Fatalf("the page's button: %v", err)
	}
	who, err := chromedp.Run(tab, chromedp.Evaluate[[]string](`[document.getElementById('provider').textContent, document.getElementById('user').textContent,
		document.getElementById('choose').textContent, document.querySelectorAll('.picker-dialog').length.toString()]`))
	if err != nil || strings.Join(who, "|") != "gdocs|bob|Choose files|0" {
		t.Fatalf("the page before the click: %q %v", who, err)
	}
	if html, err := chromedp.Run(tab, chromedp.Evaluate[string](`document.documentElement.outerHTML`)); err != nil || strings.Contains(html, conn.AccessToken) {
		t.Fatalf("the page holds the token before the click: %v", err)
	}
	// The style sheet applies under the CSP (style-src 'self').
	if bg, err := chromedp.Run(tab, chromedp.Evaluate[string](`getComputedStyle(document.getElementById('choose')).backgroundColor`)); err != nil || bg != "rgb(26, 95, 180)" {
		t.Fatalf("the page's style sheet: %q %v", bg, err)
	}
	if err := chromedp.Do(tab,
		chromedp.Click(chromedp.CSS("#choose")),
		chromedp.WaitVisible(chromedp.CSS(planBox)),
		chromedp.WaitVisible(chromedp.CSS(`input.picker-file[value="`+private.DocumentId+`"]`)),
		chromedp.WaitVisible(chromedp.CSS(`input.picker-file[aria-label="`+strings.ReplaceAll(hostile, `"`, `\"`)+`"]`)),
	); err != nil {
		t.Fatalf("the picker lists Ann's files: %v", err)
	}
	if n, err := chromedp.Run(tab, chromedp.Evaluate[int](`document.querySelectorAll('.picker-dialog img').length`)); err != nil || n != 0 {
		t.Fatalf("a file name became an element: %d %v", n, err)
	}
	// The platform cannot record the report at first (the bucket refuses
	// its commit): the page retries until it can.
	js, err := jetstream.New(e.nc)
	if err != nil {
		t.Fatal(err)
	}
	atomicBatches := func(on bool) {
		t.Helper()
		st, err := js.Stream(ctx, "KV_cp_test")
		if err != nil {
			t.Fatal(err)
		}
		cfg := st.CachedInfo().Config
		cfg.AllowAtomicPublish = on
		if _, err := js.UpdateStream(ctx, cfg); err != nil {
			t.Fatal(err)
		}
	}
	atomicBatches(false)
	if err := chromedp.Do(tab,
		chromedp.Click(chromedp.CSS(planBox)),
		chromedp.Click(chromedp.CSS("button.picker-select")),
	); err != nil {
		t.Fatalf("pick in the browser: %v", err)
	}
	testenv.Eventually(t, 10*time.Second, "a report refused", func() bool { return strings.Contains(e.logs.String(), "picker: report not recorded") })
	atomicBatches(true)
	if err := chromedp.Do(tab, chromedp.WaitVisible(chromedp.CSS("#status.ok"))); err != nil {
		t.Fatalf("the page's retried report: %v", err)
	}
	status, err := chromedp.Run(tab, chromedp.Text(chromedp.CSS("#status")))
	if err != nil || status != "Access granted to 1 file(s). Return to your assistant and retry." {
		t.Fatalf("status: %q %v", status, err)
	}
	if title, err := chromedp.Run(tab, chromedp.Title()); err != nil || title != "Choose files · auditrail" {
		t.Fatalf("page title %q: a file name ran as markup? %v", title, err)
	}

	// The retry succeeds, for the picked document only.
	f, err := driveSvc.Files.Get(plan.DocumentId).Fields("id, name").Do()
	if err != nil || f.Name != "Quarterly plan" {
		t.Fatalf("files.get after the pick: %v", err)
	}
	if d, err := docsSvc.Documents.Get(plan.DocumentId).Do(); err != nil || d.Title != "Quarterly plan" {
		t.Fatalf("documents.get after the pick: %v", err)
	}
	if _, err := driveSvc.Files.Get(private.DocumentId).Fields("id").Do(); !notFound(err) {
		t.Fatalf("the document not picked became visible: %v", err)
	}

	// The page reported the pick: one USER_CONNECTION UPDATED by bob.
	picks := func() int {
		n := 0
		for _, ev := range e.connEvents() {
			if ev.PrincipalID == "bob" && strings.Contains(string(ev.Data), `"picker_files":[{"id":"`+plan.DocumentId+`"`) {
				n++
			}
		}
		return n
	}
	testenv.Eventually(t, 10*time.Second, "the picker event", func() bool { return picks() == 1 })

	// Once only, in the browser too; an expired URL opens nothing.
	again, err := chromedp.Run(tab, chromedp.NavigateResponse(pickerURL))
	if err != nil || again.Status != 400 {
		t.Fatalf("reopen: %v", err)
	}
	if text, err := chromedp.Run(tab, chromedp.Text(chromedp.CSS("body"))); err != nil || !strings.Contains(text, "already used") {
		t.Fatalf("reopened page: %q %v", text, err)
	}
	// Cancel: nothing granted, and the page says so.
	cancelURL, _, err := e.svc.PickerURL(ctx, e.org, e.project, "bob", "gdocs")
	if err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(tab, chromedp.Navigate(cancelURL), chromedp.Click(chromedp.CSS("#choose")), chromedp.WaitVisible(chromedp.CSS("input.picker-file")),
		chromedp.Click(chromedp.CSS("button.picker-cancel")), chromedp.WaitVisible(chromedp.CSS("#status.err"))); err != nil {
		t.Fatalf("cancel: %v", err)
	}
	if text, err := chromedp.Run(tab, chromedp.Text(chromedp.CSS("#status"))); err != nil || !strings.HasPrefix(text, "No file was chosen.") {
		t.Fatalf("after cancel: %q %v", text, err)
	}
	if _, err := driveSvc.Files.Get(private.DocumentId).Fields("id").Do(); !notFound(err) {
		t.Fatalf("cancel granted access: %v", err)
	}
	// The page open here, the link claimed elsewhere first (another
	// browser): the click is refused, and the page says why.
	takenURL, _, err := e.svc.PickerURL(ctx, e.org, e.project, "bob", "gdocs")
	if err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(tab, chromedp.Navigate(takenURL), chromedp.WaitVisible(chromedp.CSS("#choose"))); err != nil {
		t.Fatalf("open: %v", err)
	}
	elsewhere := e.newBrowser()
	elsewhere.open(takenURL)
	if st, _, msg := elsewhere.click(nil); st != 200 {
		t.Fatalf("claim in the other browser: %d %s", st, msg)
	}
	if err := chromedp.Do(tab, chromedp.Click(chromedp.CSS("#choose")), chromedp.WaitVisible(chromedp.CSS("#status.err"))); err != nil {
		t.Fatalf("click on a claimed link: %v", err)
	}
	if text, err := chromedp.Run(tab, chromedp.Text(chromedp.CSS("#status"))); err != nil ||
		text != "This file picker link has been used already; each works once. Ask your assistant for a new link." {
		t.Fatalf("after a refused claim: %q %v", text, err)
	}
	if n, err := chromedp.Run(tab, chromedp.Evaluate[int](`document.querySelectorAll('.picker-dialog').length + (document.getElementById('choose').disabled ? 0 : 10)`)); err != nil || n != 0 {
		t.Fatalf("a picker opened, or the button stayed enabled, after a refused claim: %d %v", n, err)
	}
	expired := e.sealPicker(pickerState{Nonce: "expired-1", Org: uuid.MustParse(e.org), Project: uuid.MustParse(e.project), User: "bob",
		Provider: "gdocs", ExpiresAt: time.Now().Add(-time.Minute).UTC()})
	if st, body, _ := e.browse(expired); st != 400 || !strings.Contains(body, "Link expired") {
		t.Fatalf("expired: %d %s", st, body)
	}
	if n := picks(); n != 1 {
		t.Fatalf("%d picker events, want 1", n)
	}
	e.clean()
}
