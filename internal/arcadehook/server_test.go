package arcadehook

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func contract(t *testing.T) *Contract {
	t.Helper()
	c, err := LoadContract(description)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// The description's shapes are the public contract's: what it documents is
// valid, what auditrail's own contract sends in its place is not.
func TestDescriptionShapes(t *testing.T) {
	c := contract(t)
	for _, tc := range []struct {
		name, schema, json string
		valid              bool
	}{
		{"context: secrets are names", "ToolContext", `{"secrets":["API_KEY"],"user_id":"u"}`, true},
		{"context: secrets as auditrail's object", "ToolContext", `{"secrets":{"API_KEY":true}}`, false},
		{"context: authorization a list", "ToolContext", `{"authorization":[{"provider_id":"google","oauth2":{"scopes":["a"]}}]}`, true},
		{"context: authorization as auditrail's map", "ToolContext", `{"authorization":{"google":{"provider_type":"oauth2","connected":true,"scopes":["a"]}}}`, false},
		{"requirements: secrets {name}", "ToolkitRequirements", `{"secrets":[{"name":"API_KEY"}]}`, true},
		{"requirements: secrets as strings", "ToolkitRequirements", `{"secrets":["API_KEY"]}`, false},
		{"requirements: secret without name", "ToolkitRequirements", `{"secrets":[{}]}`, false},
		{"requirements: oauth2 scopes", "ToolkitRequirements", `{"authorization":[{"provider_id":"google","provider_type":"oauth2","oauth2":{"scopes":["a"]}}]}`, true},
		{"pre answer: secrets array of maps", "PreHookResult", `{"code":"OK","override":{"secrets":[{"A":"1"},{"A":"2","B":"3"}]}}`, true},
		{"pre answer: secrets as auditrail's object", "PreHookResult", `{"code":"OK","override":{"secrets":{"A":"1"}}}`, false},
		{"pre answer: unknown code", "PreHookResult", `{"code":"MAYBE"}`, false},
		{"pre answer: code missing", "PreHookResult", `{"error_message":"x"}`, false},
		{"post answer: any output", "PostHookResult", `{"code":"OK","override":{"output":[1,"two",{"three":3}]}}`, true},
		{"access answer: tools with versions", "AccessHookResult", `{"deny":{"Gmail":{"tools":{"Send":[{"version":"1.0.0"}]}}}}`, true},
		{"access answer: whole toolkit", "AccessHookResult", `{"only":{"Gmail":{}}}`, true},
		{"access answer: auditrail's name list", "AccessHookResult", `{"deny":{"Gmail":["Send"]}}`, false},
		{"health: degraded", "HealthResponse", `{"status":"degraded"}`, true},
		{"health: up", "HealthResponse", `{"status":"up"}`, false},
		{"tool: version required", "ToolInfo", `{"name":"Send","toolkit":"Gmail"}`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ref := c.Doc.Components.Schemas[tc.schema]
			if ref == nil {
				t.Fatalf("no schema %s", tc.schema)
			}
			var v any
			if err := json.Unmarshal([]byte(tc.json), &v); err != nil {
				t.Fatal(err)
			}
			err := ref.Value.VisitJSON(v)
			if (err == nil) != tc.valid {
				t.Fatalf("valid %v, want %v: %v", err == nil, tc.valid, err)
			}
		})
	}
}

func TestPolicyValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		p    Policy
		ok   bool
	}{
		{"empty", Policy{}, true},
		{"all kinds of names", Policy{Hide: []string{"Gmail", "Gmail.Send", "Gmail.Send@1.0.0"}, Deny: map[string]string{"Gmail.Send": "no"}}, true},
		{"hide a.b.c", Policy{Hide: []string{"a.b.c"}}, false},
		{"deny a toolkit", Policy{Deny: map[string]string{"Gmail": "no"}}, false},
		{"output of .x", Policy{Output: map[string]any{".x": 1}}, false},
		{"secrets of a@1", Policy{Secrets: map[string][]map[string]string{"a.b@1": nil}}, false},
		{"health up", Policy{Health: "up"}, false},
	} {
		err := tc.p.Validate()
		if (err == nil) != tc.ok || (err != nil && !errors.Is(err, ErrInvalidPolicy)) {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
}

const token = "t0k-arcade"

func serve(t *testing.T, p Policy) (*httptest.Server, *Recorder) {
	t.Helper()
	rec := &Recorder{}
	s, err := New(Config{Token: token, Policy: p, Middlewares: []MiddlewareFunc{rec.Middleware}}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	return srv, rec
}

func post(t *testing.T, srv *httptest.Server, method, path, auth, body string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("%s: not JSON: %s", path, b)
	}
	return resp.StatusCode, m
}

const catalog = `{"user_id":"bob","toolkits":{
  "Gmail":{"tools":{"Send":[{"version":"1.0.0","requirements":{"secrets":[{"name":"SMTP"}]}},{"version":"2.0.0"}],
                    "Read":[{"version":"1.0.0","metadata":{"behavior":{"read_only":true}}}],
                    "Purge":[{"version":"1.0.0","metadata":{"behavior":{"destructive":true}}}]}},
  "Docs":{"tools":{"Create":[{"version":"0.1.0"}]}}}}`

const preReq = `{"execution_id":"e1","tool":{"name":"Send","toolkit":"Gmail","version":"1.0.0"},"inputs":{"to":"a@x","body":"hi"},
  "context":{"secrets":["SMTP"],"authorization":[{"provider_id":"google","oauth2":{"scopes":["mail.send"]}}],"user_id":"bob"}}`

const postReq = `{"execution_id":"e1","tool":{"name":"Send","toolkit":"Gmail","version":"1.0.0"},"inputs":{"to":"a@x"},
  "success":true,"output":{"id":"m1"},"execution_code":"OK","context":{"secrets":["SMTP"],"user_id":"bob"}}`

// Every answer of the policy server: what it decides, and that the answer
// is valid for the description (as are the requests of this table).
func TestServerAnswersFromPolicy(t *testing.T) {
	c := contract(t)
	for _, tc := range []struct {
		name   string
		p      Policy
		path   string
		body   string
		status int
		want   string // the answer, as JSON
	}{
		{"access: no rule", Policy{}, "/access", catalog, 200, `{}`},
		{"access: hide a tool, a toolkit and a version", Policy{Hide: []string{"Docs", "Gmail.Read", "Gmail.Send@2.0.0"}}, "/access", catalog, 200,
			`{"deny":{"Docs":{},"Gmail":{"tools":{"Read":[{"version":"1.0.0"}],"Send":[{"version":"2.0.0"}]}}}}`},
		{"access: hide destructive", Policy{HideDestructive: true}, "/access", catalog, 200,
			`{"deny":{"Gmail":{"tools":{"Purge":[{"version":"1.0.0"}]}}}}`},
		{"access: only", Policy{Only: []string{"Gmail.Read"}, Hide: []string{"Docs"}}, "/access", catalog, 200,
			`{"only":{"Gmail":{"tools":{"Read":[{"version":"1.0.0"}]}}}}`},
		{"access: only, nothing matches", Policy{Only: []string{"Slack"}}, "/access", catalog, 200, `{"only":{}}`},
		{"pre: allow", Policy{}, "/pre", preReq, 200, `{"code":"OK"}`},
		{"pre: deny", Policy{Deny: map[string]string{"Gmail.Send": "no mail on Sundays"}}, "/pre", preReq, 200,
			`{"code":"CHECK_FAILED","error_message":"no mail on Sundays"}`},
		{"pre: rate limit", Policy{RateLimit: map[string]string{"Gmail.Send": "slow down"}}, "/pre", preReq, 200,
			`{"code":"RATE_LIMIT_EXCEEDED","error_message":"slow down"}`},
		{"pre: override inputs and secrets", Policy{Inputs: map[string]map[string]any{"Gmail.Send": {"body": "[redacted]"}},
			Secrets: map[string][]map[string]string{"Gmail.Send": {{"SMTP": "a"}, {"SMTP": "b"}}}}, "/pre", preReq, 200,
			`{"code":"OK","override":{"inputs":{"to":"a@x","body":"[redacted]"},"secrets":[{"SMTP":"a"},{"SMTP":"b"}]}}`},
		{"pre: rules of another tool", Policy{Deny: map[string]string{"Gmail.Read": "x"}}, "/pre", preReq, 200, `{"code":"OK"}`},
		{"post: allow", Policy{}, "/post", postReq, 200, `{"code":"OK"}`},
		{"post: override output", Policy{Output: map[string]any{"Gmail.Send": "sent"}}, "/post", postReq, 200,
			`{"code":"OK","override":{"output":"sent"}}`},
		{"post: deny", Policy{DenyOutput: map[string]string{"Gmail.Send": "leaks"}}, "/post", postReq, 200,
			`{"code":"CHECK_FAILED","error_message":"leaks"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, rec := serve(t, tc.p)
			st, got := post(t, srv, "POST", tc.path, "Bearer "+token, tc.body)
			var want map[string]any
			_ = json.Unmarshal([]byte(tc.want), &want)
			g, _ := json.Marshal(got)
			w, _ := json.Marshal(want)
			if st != tc.status || !bytes.Equal(g, w) {
				t.Fatalf("%d %s, want %d %s", st, g, tc.status, w)
			}
			for _, ex := range rec.Exchanges() {
				if err := c.ValidateResponse(ex); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// What a server generated from the public contract refuses: a request
// without the bearer token (401), and requests in auditrail's own shapes
// (400) — each refusal an ErrorResponse valid for the description.
func TestServerRefuses(t *testing.T) {
	c := contract(t)
	srv, rec := serve(t, Policy{})
	for _, tc := range []struct {
		name, path, auth, body string
		status                 int
		msg                    string
	}{
		{"no token", "/pre", "", preReq, 401, "bearer"},
		{"wrong token", "/pre", "Bearer nope", preReq, 401, "bearer"},
		{"auditrail context.secrets", "/pre", "Bearer " + token, strings.Replace(preReq, `"secrets":["SMTP"]`, `"secrets":{"SMTP":true}`, 1), 400, "secrets"},
		{"auditrail context.authorization", "/pre", "Bearer " + token,
			strings.Replace(preReq, `[{"provider_id":"google","oauth2":{"scopes":["mail.send"]}}]`, `{"google":{"provider_type":"oauth2","connected":true}}`, 1), 400, "authorization"},
		{"auditrail requirements.secrets", "/access", "Bearer " + token, strings.Replace(catalog, `[{"name":"SMTP"}]`, `["SMTP"]`, 1), 400, "secrets"},
		{"auditrail post context", "/post", "Bearer " + token, strings.Replace(postReq, `"secrets":["SMTP"]`, `"secrets":{"SMTP":true}`, 1), 400, "secrets"},
		{"tool without version", "/pre", "Bearer " + token, strings.Replace(preReq, `,"version":"1.0.0"`, ``, 1), 400, "version"},
		{"not JSON", "/pre", "Bearer " + token, `{`, 400, "malformed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec.Reset()
			st, got := post(t, srv, "POST", tc.path, tc.auth, tc.body)
			msg, _ := got["error"].(string)
			if st != tc.status || !strings.Contains(msg, tc.msg) {
				t.Fatalf("%d %v, want %d with %q", st, got, tc.status, tc.msg)
			}
			exs := rec.Exchanges()
			if len(exs) != 1 {
				t.Fatalf("%d exchanges recorded", len(exs))
			}
			if tc.status == 401 {
				exs[0].Header.Set("Authorization", "Bearer x") // the answer's shape, not the token, is checked
			}
			if _, err := c.ValidateRequest(exs[0]); tc.status == 400 && tc.msg != "malformed" && err == nil {
				t.Fatal("the contract accepts the request the server refused")
			}
			if tc.status == 401 {
				if err := c.ValidateResponse(exs[0]); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

func TestHealth(t *testing.T) {
	c := contract(t)
	for _, tc := range []struct {
		st     HealthResponseStatus
		status int
		want   string
	}{
		{"", 200, "healthy"}, {Degraded, 200, "degraded"}, {Unhealthy, 503, "unhealthy"},
	} {
		srv, rec := serve(t, Policy{Health: tc.st})
		st, got := post(t, srv, "GET", "/health", "", "")
		if st != tc.status || got["status"] != tc.want {
			t.Errorf("%q: %d %v", tc.st, st, got)
		}
		for _, ex := range rec.Exchanges() {
			if err := c.ValidateResponse(ex); err != nil {
				t.Error(err)
			}
		}
	}
}
