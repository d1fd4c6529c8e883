package controlplane

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/auditrail/auditrail/internal/oauthflow"
	"github.com/auditrail/auditrail/internal/testenv"
	"github.com/auditrail/auditrail/schemas"
)

var pickerConfigRE = regexp.MustCompile(`<script type="application/json" id="picker-config">([^<]*)</script>`)

// pickerConfigOf reads the page's script configuration.
func pickerConfigOf(t *testing.T, body string) pickerConfig {
	t.Helper()
	m := pickerConfigRE.FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no picker configuration in the page:\n%s", body)
	}
	var cfg pickerConfig
	if err := json.Unmarshal([]byte(html.UnescapeString(m[1])), &cfg); err != nil {
		t.Fatalf("picker configuration %q: %v", m[1], err)
	}
	return cfg
}

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

func (e *oauthEnv) report(pickerURL string, body string) int {
	e.t.Helper()
	resp, err := http.Post(pickerURL+"/picked", "application/json", strings.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

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

	u, exp, err := e.svc.PickerURL(ctx, e.org, e.project, "bob", "corp")
	if err != nil || !strings.HasPrefix(u, e.base+"/api/v1/picker/") || exp.Before(time.Now().Add(9*time.Minute)) || exp.After(time.Now().Add(11*time.Minute)) {
		t.Fatalf("PickerURL: %q %v %v", u, exp, err)
	}
	e.seen(strings.TrimPrefix(u, e.base+pickerPath))

	// A report before the page was opened is refused, and burns the link.
	unopened, _, err := e.svc.PickerURL(ctx, e.org, e.project, "bob", "corp")
	if err != nil {
		t.Fatal(err)
	}
	if st := e.report(unopened, `{"files":[{"id":"f1","name":"x","mime_type":"text/plain"}]}`); st != 400 {
		t.Fatalf("report of an unopened page: %d", st)
	}
	if st, body, _ := e.browse(unopened); st != 400 || !strings.Contains(body, "already used") {
		t.Fatalf("page after a report: %d %s", st, body)
	}

	st, body, h := e.browse(u)
	if st != 200 {
		t.Fatalf("picker page: %d %s", st, body)
	}
	csp := h.Get("Content-Security-Policy")
	nonce := regexp.MustCompile(`script-src 'nonce-([A-Za-z0-9_-]{24})' 'strict-dynamic' ` + regexp.QuoteMeta(e.emuURL) + `;`).FindStringSubmatch(csp)
	if h.Get("Cache-Control") != "no-store" || h.Get("Referrer-Policy") != "no-referrer" || h.Get("X-Frame-Options") != "DENY" ||
		nonce == nil || strings.Contains(csp, "'unsafe-inline' 'nonce") || !strings.Contains(csp, "default-src 'none'") ||
		!strings.Contains(csp, "frame-ancestors 'none'") || !strings.Contains(csp, "connect-src "+e.emuURL+" "+e.base+";") {
		t.Fatalf("page headers: %v", h)
	}
	if strings.Count(body, `nonce="`+nonce[1]+`"`) != 2 || strings.Count(body, "<script") != 3 ||
		!strings.Contains(body, `<script nonce="`+nonce[1]+`" src="`+e.emuURL+`/api/js/api.js"></script>`) ||
		!strings.Contains(body, ".addView(google.picker.ViewId.DOCUMENTS)") || !strings.Contains(body, ".setOAuthToken(cfg.token)") {
		t.Fatalf("page body:\n%s", body)
	}
	cfg := pickerConfigOf(t, body)
	if cfg.Token != tokens.AccessToken || cfg.AppID != "corp-client" || cfg.Report != u+"/picked" || cfg.DeveloperKey != "AIzaPickerKey_1-x" ||
		!strings.Contains(body, "b.setDeveloperKey(cfg.developer_key)") {
		t.Fatalf("page configuration: app %q report %q (token is bob's: %v)", cfg.AppID, cfg.Report, cfg.Token == tokens.AccessToken)
	}
	// Once only.
	if st, body, _ := e.browse(u); st != 400 || !strings.Contains(body, "already used") || strings.Contains(body, tokens.AccessToken) {
		t.Fatalf("second open: %d %s", st, body)
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
		if st := e.report(u, tc.body); st != tc.want {
			t.Fatalf("report %s: %d, want %d", tc.name, st, tc.want)
		}
	}
	var evs []schemas.AuditEvent
	eventually(t, "the picker event", func() bool { evs = e.connEvents(); return len(evs) >= 2 })
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
	fresh, _, err := e.svc.PickerURL(ctx, e.org, e.project, "bob", "corp")
	if err != nil {
		t.Fatal(err)
	}
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
		if st, body, _ := e.browse(r.url); st != 400 || !strings.Contains(body, r.want) || strings.Contains(body, tokens.AccessToken) {
			t.Fatalf("%s: %d %s", r.name, st, body)
		}
	}
	// The untampered state still works (the tampered copy did not burn it).
	if st, _, _ := e.browse(fresh); st != 200 {
		t.Fatalf("fresh state after its tampered copy: %d", st)
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
	if st, body, _ := e.browse(other); st != 200 || pickerConfigOf(t, body).Token != "org2-token-of-another-bob" {
		t.Fatalf("other organization's page: %d", st)
	}
	e.must(200, "DELETE", "/api/v1/orgs/"+org2+"/auth_providers/corp", bootKey, nil)
	if st, body, _ := e.browse(other2); st != 400 || !strings.Contains(body, "no longer has the auth provider") {
		t.Fatalf("state of a deleted provider: %d %s", st, body)
	}
	e.clean()
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
		{"http://127.0.0.1:8080/google/", "http://127.0.0.1:8080/google/js/api.js", "http://127.0.0.1:8080", false},
		{"javascript:alert(1)", "", "", true},
		{"https://user:pw@example.com", "", "", true},
	}
	for _, tc := range scripts {
		script, origin, err := pickerScript(oauthflow.Provider{Endpoints: oauthflow.Endpoints{APIBaseURL: tc.base}})
		if (err != nil) != tc.err || script != tc.script || origin != tc.origin {
			t.Errorf("pickerScript(%q) = %q %q %v", tc.base, script, origin, err)
		}
	}
	if csp := pickerCSP("N", "https://apis.google.com", "https://p.example"); !strings.Contains(csp, "frame-src https://apis.google.com https://docs.google.com;") {
		t.Errorf("Google's picker frame not allowed: %s", csp)
	}
}

// The picker routes' answers, over real HTTP, match schemas/openapi/admin.yaml.
func TestPickerRoutesMatchOpenAPI(t *testing.T) {
	srv, _, _ := testenv.NATS(t)
	e := newOAuthEnv(t, srv.ClientURL())
	api := newAdminSpec(t, e.base)
	do := func(method, u, body string, want int) {
		t.Helper()
		req, _ := http.NewRequest(method, u, strings.NewReader(body))
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		api.do(t, req, want)
	}
	e.connect("bob", e.bob)
	u, _, err := e.svc.PickerURL(context.Background(), e.org, e.project, "bob", "corp")
	if err != nil {
		t.Fatal(err)
	}
	do("GET", u, "", 200)
	do("GET", u, "", 400)
	do("POST", u+"/picked", `{"files":[]}`, 400)
	do("POST", u+"/picked", `{"files":[{"id":"f1","name":"n","mime_type":"m"}]}`, 204)
	do("POST", u+"/picked", `{"files":[{"id":"f1"}]}`, 409)
	for _, op := range []string{"pickerPage", "pickerPicked"} {
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
	sealer, err := NewSealer(key)
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
