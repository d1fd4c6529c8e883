package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/auditrail/auditrail/hookproxy"
	"github.com/auditrail/auditrail/internal/egress"
	"github.com/auditrail/auditrail/internal/emulators/graph"
	"github.com/auditrail/auditrail/internal/emulators/oauth"
	"github.com/auditrail/auditrail/internal/oauthflow"
	"github.com/auditrail/auditrail/producers"
	"github.com/auditrail/auditrail/toolrunner"
	"github.com/auditrail/auditrail/toolrunner/toolkits/mail"
	"github.com/auditrail/auditrail/toolrunner/toolkits/mail/graphapi"
)

// mailListSamples is the number of timed listings of each side.
var mailListSamples = 40

// mailConn is the bench user's microsoft connection.
type mailConn struct{ c oauthflow.Connection }

func (m mailConn) Connection(context.Context, string, string, string, string) (oauthflow.Connection, error) {
	return m.c, nil
}
func (m mailConn) ConnectionStatus(_, _, _, _ string) (bool, []string) { return true, m.c.Scopes }
func (m mailConn) AuthorizationURL(context.Context, string, string, string, string, []string) (string, time.Time, error) {
	return "", time.Time{}, oauthflow.ErrNoProvider
}

// MailList measures MailToolkit.ListEmails of 100 messages end to end
// through the tool runner (access check, the microsoft connection, the
// Graph call to the emulator in process, the answer's mapping, the
// execution event published to JetStream) against the reference: the
// direct emulator call the toolkit makes (the same URL and Prefer header,
// the JSON decoded). Interleaved samples, medians compared; issue 12's
// goal: <= 1.3x.
func MailList(ctx context.Context) (Figure, error) {
	fail := func(err error) (Figure, error) { return Figure{}, fmt.Errorf("mail list bench: %w", err) }
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	users := []oauth.User{{ID: "bench", Email: "bench@contoso.com", Name: "Bench User"}}
	o, err := oauth.New(oauth.Config{Clients: []oauth.Client{{ID: "app", Secret: "s", RedirectURIs: []string{"https://app.example/cb"}}},
		Users: users, AutoApprove: true, Logger: quiet})
	if err != nil {
		return fail(err)
	}
	g, err := graph.New(graph.Config{Auth: o, Users: users, Logger: quiet})
	if err != nil {
		return fail(err)
	}
	if err := g.SeedSample("bench", "bench@contoso.com"); err != nil {
		return fail(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/microsoft/", http.StripPrefix("/microsoft", g.Handler()))
	as, gs := httptest.NewServer(o.Handler()), httptest.NewServer(mux)
	defer as.Close()
	defer gs.Close()
	api := gs.URL + "/microsoft"
	scopes := []string{mail.ScopeMailRead, mail.ScopeMailReadWrite}
	tok, err := benchToken(ctx, as.URL, "bench", scopes...)
	if err != nil {
		return fail(err)
	}
	tr := egress.AllowLoopback().Transport(5 * time.Second)
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr}
	do := func(method, rel string, body any) ([]byte, error) {
		var rd io.Reader
		if body != nil {
			b, _ := json.Marshal(body)
			rd = bytes.NewReader(b)
		}
		req, _ := http.NewRequestWithContext(ctx, method, api+rel, rd)
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Prefer", `IdType="ImmutableId"`)
		resp, err := hc.Do(req)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if resp.StatusCode >= 300 {
			return nil, fmt.Errorf("%s %s: %d %s", method, rel, resp.StatusCode, b)
		}
		return b, err
	}
	// Drafts until the mailbox holds more than 100 messages.
	for i := 0; i < 50; i++ {
		if _, err := do(http.MethodPost, "/me/messages", map[string]any{"subject": fmt.Sprintf("Bench draft %d", i),
			"body":         map[string]any{"contentType": "text", "content": "A draft of the benchmark, with a body of a few words."},
			"toRecipients": []any{map[string]any{"emailAddress": map[string]any{"address": "someone@example.com"}}}}); err != nil {
			return fail(err)
		}
	}

	dir, err := os.MkdirTemp("", "auditrail-bench-")
	if err != nil {
		return fail(err)
	}
	defer os.RemoveAll(dir)
	bn, err := startNATS(ctx, dir)
	if err != nil {
		return fail(err)
	}
	defer bn.close()
	nc := bn.nc
	pub, err := producers.New(nc, producers.DefaultConfig(), quiet)
	if err != nil {
		return fail(err)
	}
	cfg := mail.DefaultConfig()
	cfg.HTTPClient, cfg.Log = &http.Client{Transport: tr}, quiet
	tk, err := mail.New(cfg)
	if err != nil {
		return fail(err)
	}
	defer tk.Close()
	reg := toolrunner.NewRegistry()
	if err := reg.Register(tk.Tools()...); err != nil {
		return fail(err)
	}
	conn := mailConn{oauthflow.Connection{AccessToken: tok, Scopes: scopes, APIBaseURL: api}}
	runner := toolrunner.New(toolrunner.DefaultConfig(), reg, hookproxy.New(hookproxy.DefaultConfig(), quiet), noSources{}, noSources{}, conn, pub, quiet)
	sc := toolrunner.Scope{Org: uuid.New(), Project: uuid.New(), UserID: "bench"}

	// The reference: the request the toolkit sends, made directly.
	var sent string
	probe := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		sent = r.URL.RequestURI()
		return tr.RoundTrip(r)
	})}
	pcfg := cfg
	pcfg.HTTPClient = probe
	ptk, err := mail.New(pcfg)
	if err != nil {
		return fail(err)
	}
	for _, t := range ptk.Tools() {
		if t.Definition().Name == "ListEmails" {
			in, _ := toolrunner.Validate(t.Definition(), map[string]any{"limit": int64(100)})
			if _, err := t.Run(ctx, toolrunner.Call{Inputs: in, UserID: "bench", Connections: map[string]oauthflow.Connection{mail.Provider: conn.c}}); err != nil {
				return fail(err)
			}
		}
	}
	rel := sent[len("/microsoft"):]
	direct := func() error {
		b, err := do(http.MethodGet, rel, nil)
		if err != nil {
			return err
		}
		var p graphapi.Page[map[string]any]
		if err := json.Unmarshal(b, &p); err != nil {
			return err
		}
		if len(p.Value) != 100 {
			return fmt.Errorf("direct call: %d messages", len(p.Value))
		}
		return nil
	}
	viaRunner := func() error {
		res, err := runner.Execute(ctx, sc, "MailToolkit.ListEmails", map[string]any{"limit": float64(100)})
		if err != nil {
			return err
		}
		if !res.Success {
			return fmt.Errorf("ListEmails: %+v", res.Error)
		}
		if n := res.Output.(map[string]any)["count"]; n != 100 {
			return fmt.Errorf("ListEmails answered %v messages", n)
		}
		return nil
	}
	var ours, ref []time.Duration
	warm := mailListSamples / 10
	for i := range mailListSamples + warm {
		t0 := time.Now()
		if err := viaRunner(); err != nil {
			return fail(err)
		}
		d1 := time.Since(t0)
		t0 = time.Now()
		if err := direct(); err != nil {
			return fail(err)
		}
		d2 := time.Since(t0)
		if i >= warm {
			ours, ref = append(ours, d1), append(ref, d2)
		}
	}
	ms := func(ds []time.Duration) float64 {
		slices.Sort(ds)
		return float64(ds[len(ds)/2].Microseconds()) / 1000
	}
	return Figure{Name: "ListEmails, 100 messages, via the runner p50", Value: ms(ours), Unit: "ms",
		Reference: ms(ref), RefName: "the same Graph call made directly", Goal: 1.3, Lower: true}, nil
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
