package bench

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"time"

	gdocs "google.golang.org/api/docs/v1"
	"google.golang.org/api/option"

	"github.com/auditrail/auditrail/internal/egress"
	"github.com/auditrail/auditrail/internal/emulators/google"
	"github.com/auditrail/auditrail/internal/emulators/oauth"
	"github.com/auditrail/auditrail/internal/oauthflow"
	"github.com/auditrail/auditrail/toolrunner"
	docstk "github.com/auditrail/auditrail/toolrunner/toolkits/docs"
)

// docsEditSamples is the number of timed edits of each side.
var docsEditSamples = 30

// DocsEdit measures DocsToolkit.EditDocument with 100 requests end to end
// against the Google emulator in process (validation, the raw batchUpdate,
// documents.get, DocMD of the result) against the reference: the client
// library's own batchUpdate of the same requests followed by documents.get.
// Each sample edits a fresh document of 100 paragraphs; the medians are
// compared. Issue 11's goal: <= 100 ms; the ratio shows the toolkit's cost.
func DocsEdit(ctx context.Context) (Figure, error) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	users := []oauth.User{{ID: "bench", Email: "bench@example.com"}}
	o, err := oauth.New(oauth.Config{Clients: []oauth.Client{{ID: "app", Secret: "s", RedirectURIs: []string{"https://app.example/cb"}}},
		Users: users, AutoApprove: true, Logger: quiet})
	if err != nil {
		return Figure{}, fmt.Errorf("docs edit bench: %w", err)
	}
	g, err := google.New(google.Config{Auth: o, Users: users, Logger: quiet})
	if err != nil {
		return Figure{}, fmt.Errorf("docs edit bench: %w", err)
	}
	as, gs := httptest.NewServer(o.Handler()), httptest.NewServer(g.Handler())
	defer as.Close()
	defer gs.Close()
	tok, err := benchToken(ctx, as.URL, "bench", docstk.ScopeDriveFile)
	if err != nil {
		return Figure{}, fmt.Errorf("docs edit bench: %w", err)
	}

	tr := egress.AllowLoopback().Transport(5 * time.Second)
	defer tr.CloseIdleConnections()
	cfg := docstk.DefaultConfig()
	cfg.HTTPClient, cfg.Log = &http.Client{Transport: tr}, quiet
	tk, err := docstk.New(cfg)
	if err != nil {
		return Figure{}, err
	}
	defer tk.Close()
	tools := map[string]toolrunner.Tool{}
	for _, t := range tk.Tools() {
		tools[t.Definition().Name] = t
	}
	call := func(name string, in map[string]any) (any, error) {
		return tools[name].Run(ctx, toolrunner.Call{Inputs: in, UserID: "bench",
			Connections: map[string]oauthflow.Connection{docstk.Provider: {AccessToken: tok, Scopes: []string{docstk.ScopeDriveFile}, APIBaseURL: gs.URL}}})
	}
	hc := &http.Client{Transport: bearerTransport{tok, tr}}
	svc, err := gdocs.NewService(ctx, option.WithEndpoint(gs.URL+"/"), option.WithHTTPClient(hc))
	if err != nil {
		return Figure{}, err
	}

	const para = "Paragraph text that is long enough.\n"
	text := strings.Repeat(para, 100)
	newDoc := func() (string, error) {
		out, err := call("CreateDocumentFromText", map[string]any{"title": "Bench", "text_content": text, "input_format": "plain"})
		if err != nil {
			return "", err
		}
		return out.(map[string]any)["documentId"].(string), nil
	}
	var raw []any
	var typed []*gdocs.Request
	for p := 49; p >= 0; p-- { // highest index first, as seeds/002 asks
		start := int64(1 + p*len(para))
		raw = append(raw,
			map[string]any{"updateTextStyle": map[string]any{"range": map[string]any{"startIndex": start + 2, "endIndex": start + 8},
				"textStyle": map[string]any{"bold": true}, "fields": "bold"}},
			map[string]any{"insertText": map[string]any{"text": "x", "location": map[string]any{"index": start + 1}}})
		typed = append(typed,
			&gdocs.Request{UpdateTextStyle: &gdocs.UpdateTextStyleRequest{Range: &gdocs.Range{StartIndex: start + 2, EndIndex: start + 8},
				TextStyle: &gdocs.TextStyle{Bold: true}, Fields: "bold"}},
			&gdocs.Request{InsertText: &gdocs.InsertTextRequest{Text: "x", Location: &gdocs.Location{Index: start + 1}}})
	}
	var ours, ref []time.Duration
	for i := range docsEditSamples + docsEditSamples/10 { // a tenth is warm-up
		a, err := newDoc()
		if err != nil {
			return Figure{}, fmt.Errorf("docs edit bench: %w", err)
		}
		b, err := newDoc()
		if err != nil {
			return Figure{}, fmt.Errorf("docs edit bench: %w", err)
		}
		t0 := time.Now()
		out, err := call("EditDocument", map[string]any{"document_id": a, "requests": raw})
		d1 := time.Since(t0)
		if err != nil || out.(map[string]any)["edits_applied"] != len(raw) {
			return Figure{}, fmt.Errorf("docs edit bench: EditDocument: %v", err)
		}
		t0 = time.Now()
		if _, err := svc.Documents.BatchUpdate(b, &gdocs.BatchUpdateDocumentRequest{Requests: typed}).Context(ctx).Do(); err != nil {
			return Figure{}, fmt.Errorf("docs edit bench: batchUpdate: %w", err)
		}
		if _, err := svc.Documents.Get(b).IncludeTabsContent(true).Context(ctx).Do(); err != nil {
			return Figure{}, fmt.Errorf("docs edit bench: get: %w", err)
		}
		d2 := time.Since(t0)
		if i >= docsEditSamples/10 {
			ours, ref = append(ours, d1), append(ref, d2)
		}
	}
	ms := func(ds []time.Duration) float64 {
		slices.Sort(ds)
		return float64(ds[len(ds)/2].Microseconds()) / 1000
	}
	return Figure{Name: "EditDocument, 100 requests, emulator p50", Value: ms(ours), Unit: "ms", Max: 100,
		Reference: ms(ref), RefName: "docs/v1 client batchUpdate + get of the same requests", Goal: 1.5, Lower: true}, nil
}

type bearerTransport struct {
	tok  string
	base http.RoundTripper
}

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.tok)
	return b.base.RoundTrip(r)
}

// benchToken runs the OAuth emulator's authorization-code flow with PKCE.
func benchToken(ctx context.Context, base, user string, scopes ...string) (string, error) {
	const verifier = "bench-verifier-0123456789-abcdefghijklmnopqrstuvwxyz"
	sum := sha256.Sum256([]byte(verifier))
	q := url.Values{"response_type": {"code"}, "client_id": {"app"}, "redirect_uri": {"https://app.example/cb"},
		"scope": {strings.Join(scopes, " ")}, "state": {"x"}, "login_hint": {user},
		"code_challenge": {base64.RawURLEncoding.EncodeToString(sum[:])}, "code_challenge_method": {"S256"}}
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	defer c.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/authorize?"+q.Encode(), nil)
	if err != nil {
		return "", err
	}
	resp, err := c.Do(req)
	if err != nil {
		return "", err
	}
	resp.Body.Close()
	loc, err := url.Parse(resp.Header.Get("Location"))
	if err != nil || loc.Query().Get("code") == "" {
		return "", fmt.Errorf("authorize: %d %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	form := url.Values{"grant_type": {"authorization_code"}, "code": {loc.Query().Get("code")},
		"redirect_uri": {"https://app.example/cb"}, "code_verifier": {verifier}}
	req, err = http.NewRequestWithContext(ctx, http.MethodPost, base+"/token", strings.NewReader(form.Encode()))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth("app", "s")
	resp, err = c.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var tok struct {
		AccessToken string `json:"access_token"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&tok); err != nil || tok.AccessToken == "" {
		return "", fmt.Errorf("token: %d %v", resp.StatusCode, err)
	}
	return tok.AccessToken, nil
}
