package google_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	docs "google.golang.org/api/docs/v1"
	drive "google.golang.org/api/drive/v3"
	"google.golang.org/api/option"

	"github.com/auditrail/auditrail/internal/emulators/google"
	"github.com/auditrail/auditrail/internal/emulators/oauth"
)

// denv is an emulator with two OAuth clients ("app" and "other"), two users
// and a settable clock.
type denv struct {
	g    *google.Server
	url  string
	auth *httptest.Server
	mu   sync.Mutex
	now  time.Time
}

func newDriveEnv(t *testing.T) *denv {
	t.Helper()
	cb := []string{"https://app.example/cb"}
	o, err := oauth.New(oauth.Config{Clients: []oauth.Client{{ID: "app", Secret: "s", RedirectURIs: cb},
		{ID: "other", Secret: "s", RedirectURIs: cb}},
		Users:       []oauth.User{{ID: "u1", Email: "ann@example.com", Name: "Ann Lee"}, {ID: "u2", Email: "ben@example.com"}},
		AutoApprove: true})
	if err != nil {
		t.Fatal(err)
	}
	e := &denv{now: time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)}
	g, err := google.New(google.Config{Auth: o, Now: e.clock,
		Users: []oauth.User{{ID: "u1", Email: "ann@example.com", Name: "Ann Lee"}}})
	if err != nil {
		t.Fatal(err)
	}
	as := httptest.NewServer(o.Handler())
	gs := httptest.NewServer(g.Handler())
	t.Cleanup(func() { gs.Close(); as.Close() })
	e.g, e.url, e.auth = g, gs.URL, as
	return e
}

// clock answers the test time and advances it by a second, so that every
// write has its own timestamp.
func (e *denv) clock() time.Time {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.now = e.now.Add(time.Second)
	return e.now
}

// token runs the real authorization-code flow with PKCE for the user and client.
func (e *denv) token(t *testing.T, client, user string, scopes ...string) string {
	t.Helper()
	sum := sha256.Sum256([]byte(verifier))
	q := url.Values{"response_type": {"code"}, "client_id": {client}, "redirect_uri": {"https://app.example/cb"},
		"scope": {strings.Join(scopes, " ")}, "state": {"x"}, "login_hint": {user},
		"code_challenge": {base64.RawURLEncoding.EncodeToString(sum[:])}, "code_challenge_method": {"S256"}}
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	defer c.CloseIdleConnections()
	resp, err := c.Get(e.auth.URL + "/authorize?" + q.Encode())
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	loc, err := url.Parse(resp.Header.Get("Location"))
	if err != nil || loc.Query().Get("code") == "" {
		t.Fatalf("authorize: %d %v", resp.StatusCode, loc)
	}
	form := url.Values{"grant_type": {"authorization_code"}, "code": {loc.Query().Get("code")},
		"redirect_uri": {"https://app.example/cb"}, "code_verifier": {verifier}}
	req, _ := http.NewRequest(http.MethodPost, e.auth.URL+"/token", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(client, "s")
	resp, err = c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var tok struct {
		AccessToken string `json:"access_token"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&tok); err != nil || tok.AccessToken == "" {
		t.Fatalf("token: %d %v", resp.StatusCode, err)
	}
	return tok.AccessToken
}

func (e *denv) client(t *testing.T, tok string) *http.Client {
	hc := &http.Client{Transport: bearer{tok}}
	t.Cleanup(hc.CloseIdleConnections)
	return hc
}

func (e *denv) docs(t *testing.T, tok string) *docs.Service {
	t.Helper()
	svc, err := docs.NewService(context.Background(), option.WithEndpoint(e.url+"/"), option.WithHTTPClient(e.client(t, tok)))
	if err != nil {
		t.Fatal(err)
	}
	return svc
}

func (e *denv) drive(t *testing.T, tok string) *drive.Service {
	t.Helper()
	svc, err := drive.NewService(context.Background(), option.WithEndpoint(e.url+"/drive/v3/"), option.WithHTTPClient(e.client(t, tok)))
	if err != nil {
		t.Fatal(err)
	}
	return svc
}

func (e *denv) create(t *testing.T, svc *docs.Service, title, body string) string {
	t.Helper()
	d, err := svc.Documents.Create(&docs.Document{Title: title}).Do()
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		_, err = svc.Documents.BatchUpdate(d.DocumentId, &docs.BatchUpdateDocumentRequest{Requests: []*docs.Request{
			{InsertText: &docs.InsertTextRequest{Location: &docs.Location{Index: 1}, Text: body}}}}).Do()
		if err != nil {
			t.Fatal(err)
		}
	}
	return d.DocumentId
}

// TestDriveFileVisibility: with only drive.file a client sees the documents
// it created or was granted (GrantFile, the picker); broader scopes see all
// the user's documents; nobody sees another user's.
func TestDriveFileVisibility(t *testing.T) {
	e := newDriveEnv(t)
	appTok := e.token(t, "app", "ann@example.com", google.ScopeDriveFile)
	otherTok := e.token(t, "other", "ann@example.com", google.ScopeDriveFile)
	mine := e.create(t, e.docs(t, appTok), "Made by app", "hello")
	theirs := e.create(t, e.docs(t, otherTok), "Made by other", "")

	tests := []struct {
		name string
		tok  string
		id   string
		want int // 0: visible
		// driveWant is the Drive API's answer when it differs (the Docs
		// scopes do not open the Drive API: 403).
		driveWant int
	}{
		{"creator client", appTok, mine, 0, 0},
		{"other client drive.file", otherTok, mine, 404, 404},
		{"app does not see other's", appTok, theirs, 404, 404},
		{"other client documents scope", e.token(t, "other", "ann@example.com", google.ScopeDocsReadOnly), mine, 0, 403},
		{"other client drive.readonly", e.token(t, "other", "ann@example.com", google.ScopeDriveRO), mine, 0, 0},
		{"another user, full scope", e.token(t, "app", "ben@example.com", google.ScopeDrive), mine, 404, 404},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := e.docs(t, tt.tok).Documents.Get(tt.id).Do()
			if code, msg := apiCode(err); code != tt.want || tt.want == 404 && msg != "Requested entity was not found." {
				t.Fatalf("docs get: %v", err)
			}
			_, err = e.drive(t, tt.tok).Files.Get(tt.id).Do()
			if code, msg := apiCode(err); code != tt.driveWant || tt.driveWant == 404 && msg != "File not found: "+tt.id+"." {
				t.Fatalf("drive get: %v", err)
			}
		})
	}

	// The picker's grant makes the file visible to the other client's
	// drive.file token, and only for that user and client.
	if err := e.g.GrantFile("u2", "other", mine); err == nil {
		t.Fatal("GrantFile of another user's file succeeded")
	}
	if err := e.g.GrantFile("u1", "other", mine); err != nil {
		t.Fatal(err)
	}
	if _, err := e.docs(t, otherTok).Documents.Get(mine).Do(); err != nil {
		t.Fatalf("after grant: %v", err)
	}
	f, err := e.drive(t, otherTok).Files.Get(mine).Fields("id,name,mimeType").Do()
	if err != nil || f.Name != "Made by app" || f.MimeType != google.MimeTypeDocument {
		t.Fatalf("drive get after grant: %+v %v", f, err)
	}
	if _, err := e.docs(t, appTok).Documents.Get(theirs).Do(); err == nil {
		t.Fatal("grant leaked to the other direction")
	}
}
