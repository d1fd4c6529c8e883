package controlplane

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/auditrail/auditrail/controlplane/cpstate"
	"github.com/auditrail/auditrail/internal/egress"
	"github.com/auditrail/auditrail/internal/testenv"
	"github.com/auditrail/auditrail/schemas"
)

// auditEvents returns every audit event of the stream, in order.
func auditEvents(t *testing.T, nc *nats.Conn) []schemas.AuditEvent {
	t.Helper()
	var out []schemas.AuditEvent
	for _, m := range streamMessages(t, nc) {
		if !strings.HasSuffix(m.Subject, "."+schemas.KindAudit) {
			continue
		}
		ev, err := schemas.UnmarshalAuditEvent(m.Data)
		if err != nil {
			t.Fatalf("audit event: %v", err)
		}
		out = append(out, ev)
	}
	return out
}

// streamMessages returns every message of the event stream (their bytes
// as published: msgpack keeps strings as they are, so a scan finds tokens).
func streamMessages(t *testing.T, nc *nats.Conn) []*jetstream.RawStreamMsg {
	t.Helper()
	js, _ := jetstream.New(nc)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := js.Stream(ctx, schemas.StreamEvents)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var out []*jetstream.RawStreamMsg
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		m, err := st.GetMsg(ctx, seq)
		if err != nil {
			t.Fatalf("message %d: %v", seq, err)
		}
		out = append(out, m)
	}
	return out
}

// noneHolds fails when a published message holds one of the secrets.
func noneHolds(t *testing.T, nc *nats.Conn, secrets ...string) {
	t.Helper()
	msgs := streamMessages(t, nc)
	if len(msgs) == 0 {
		t.Fatal("no message to scan")
	}
	for _, m := range msgs {
		for _, s := range secrets {
			if bytes.Contains(m.Data, []byte(s)) {
				t.Fatalf("a published message (%s) holds %q", m.Subject, s)
			}
		}
	}
}

// eventsOf returns the audit events of one resource type.
func eventsOf(t *testing.T, nc *nats.Conn, rt schemas.ResourceType) []schemas.AuditEvent {
	var out []schemas.AuditEvent
	for _, ev := range auditEvents(t, nc) {
		if *ev.ResourceType == rt {
			out = append(out, ev)
		}
	}
	return out
}

// cpEnv is one control-plane node with an org, a project, an admin (alice,
// with an API key) and a plain member (bob, with an API key).
type cpEnv struct {
	*node
	org, project string
	alice, bob   string
}

func newCPEnv(t *testing.T, url string, guard *egress.Guard, opts ...nodeOpts) *cpEnv {
	t.Helper()
	var o nodeOpts
	if len(opts) > 0 {
		o = opts[0]
	}
	n := newNode(t, url, o)
	n.run()
	if guard != nil {
		n.svc.UseEgress(guard)
	}
	e := &cpEnv{node: n}
	e.org = n.must(201, "POST", "/api/v1/orgs", bootKey, map[string]any{"name": "acme"}).field("id")
	e.project = n.must(201, "POST", "/api/v1/orgs/"+e.org+"/projects", bootKey, map[string]any{"name": "p"}).field("id")
	for _, u := range []struct{ id, role string }{{"alice", "admin"}, {"bob", "member"}, {"carol", "member"}} {
		n.must(201, "PUT", "/api/v1/orgs/"+e.org+"/members/"+u.id, bootKey, map[string]any{"role": u.role})
		n.must(201, "PUT", "/api/v1/orgs/"+e.org+"/projects/"+e.project+"/members/"+u.id, bootKey, map[string]any{"role": "member"})
	}
	e.alice = n.must(201, "POST", "/api/v1/orgs/"+e.org+"/api_keys", bootKey, map[string]any{"name": "a", "user_id": "alice"}).field("key")
	e.bob = n.must(201, "POST", "/api/v1/orgs/"+e.org+"/api_keys", bootKey, map[string]any{"name": "b", "user_id": "bob"}).field("key")
	return e
}

func (e *cpEnv) providers() string { return "/api/v1/orgs/" + e.org + "/auth_providers" }

const providerSecret = "client-secret-never-shown-7f3a"

func TestAuthProviderCRUDAndAudit(t *testing.T) {
	srv, _, _ := testenv.NATS(t)
	e := newCPEnv(t, srv.ClientURL(), nil)

	// A member may neither read nor change providers.
	if r := e.call("POST", e.providers(), e.bob, map[string]any{"id": "google", "type": "google", "client_id": "c"}); r.status != 403 {
		t.Fatalf("member creates a provider: %d %s", r.status, r.Msg)
	}
	if r := e.call("GET", e.providers(), e.bob, nil); r.status != 403 {
		t.Fatalf("member lists providers: %d", r.status)
	}

	// google: the real endpoints fill what is not given.
	r := e.must(201, "POST", e.providers(), e.alice, map[string]any{"id": "google", "type": "google", "client_id": "cid.apps",
		"client_secret": providerSecret, "api_base_url": "https://docs.example.com"})
	var v map[string]any
	_ = json.Unmarshal(r.Data, &v)
	if v["token_url"] != "https://oauth2.googleapis.com/token" || v["authorize_url"] != "https://accounts.google.com/o/oauth2/v2/auth" ||
		v["api_base_url"] != "https://docs.example.com" || v["client_secret_set"] != true || v["client_secret"] != cpstate.Redacted {
		t.Fatalf("created: %s", r.Data)
	}
	if r.header.Get(HeaderEventID) == "" {
		t.Fatal("no Auditrail-Event-Id")
	}
	e.must(409, "POST", e.providers(), e.alice, map[string]any{"id": "google", "type": "google", "client_id": "x"})

	// The sealed secret opens for the platform.
	p, err := e.svc.Provider(uuidMust(e.org), "google")
	if err != nil || p.ClientSecret != providerSecret || p.ClientID != "cid.apps" || p.TokenURL != "https://oauth2.googleapis.com/token" {
		t.Fatalf("Provider: %+v %v", p, err)
	}
	if _, err := e.svc.Provider(uuidMust(e.org), "nope"); err == nil {
		t.Fatal("Provider of an unknown id")
	}

	e.must(200, "GET", e.providers()+"/google", e.alice, nil)
	if r := e.must(200, "GET", e.providers(), e.alice, nil); !strings.Contains(string(r.Data), `"id":"google"`) {
		t.Fatalf("list: %s", r.Data)
	}
	// PATCH merges: the secret stays unless given.
	r = e.must(200, "PATCH", e.providers()+"/google", e.alice, map[string]any{"client_id": "cid2", "scopes_default": []string{"openid", "email", "drive.file"}})
	if p, _ := e.svc.Provider(uuidMust(e.org), "google"); p.ClientSecret != providerSecret || p.ClientID != "cid2" || len(p.ScopesDefault) != 3 {
		t.Fatalf("after patch: %+v", p)
	}
	e.must(200, "PATCH", e.providers()+"/google", e.alice, map[string]any{"client_secret": "rotated-" + providerSecret})
	if p, _ := e.svc.Provider(uuidMust(e.org), "google"); p.ClientSecret != "rotated-"+providerSecret {
		t.Fatalf("secret not rotated")
	}
	e.must(400, "PATCH", e.providers()+"/google", e.alice, map[string]any{"id": "other"})
	e.must(200, "DELETE", e.providers()+"/google", e.alice, nil)
	e.must(404, "GET", e.providers()+"/google", e.alice, nil)

	// Every change is one event; no event or answer holds the secret.
	var evs []schemas.AuditEvent
	testenv.Eventually(t, 10*time.Second, "the provider events", func() bool {
		evs = eventsOf(t, e.nc, schemas.ResourceTypeAuthProvider)
		return len(evs) == 4
	})
	want := []schemas.AuditAction{schemas.AuditActionCreated, schemas.AuditActionUpdated, schemas.AuditActionUpdated, schemas.AuditActionDeleted}
	for i, ev := range evs {
		if ev.Action != want[i] || *ev.ResourceID != "google" {
			t.Errorf("event %d: %v %v", i, ev.Action, *ev.ResourceID)
		}
	}
	if !strings.Contains(string(evs[0].Data), `"client_secret":"[REDACTED]"`) {
		t.Errorf("created event: %s", evs[0].Data)
	}
	noneHolds(t, e.nc, providerSecret, "rotated-"+providerSecret)
}

func TestAuthProviderValidation(t *testing.T) {
	srv, _, _ := testenv.NATS(t)
	guard, err := egress.New(egress.Config{Mode: egress.ModeStrict, Resolver: testNames}, nil)
	if err != nil {
		t.Fatal(err)
	}
	e := newCPEnv(t, srv.ClientURL(), guard)
	ok := map[string]any{"id": "corp", "type": "oauth2", "client_id": "c", "authorize_url": "https://idp.example.com/authorize",
		"token_url": "https://hooks.example.com/token"}
	with := func(k string, v any) map[string]any {
		m := map[string]any{}
		for a, b := range ok {
			m[a] = b
		}
		if v == nil {
			delete(m, k)
		} else {
			m[k] = v
		}
		return m
	}
	tests := []struct {
		name  string
		body  map[string]any
		field string // the 400 names it
	}{
		{"id missing", with("id", nil), "id"},
		{"id uppercase", with("id", "Google"), "id"},
		{"id too long", with("id", "a"+strings.Repeat("b", 63)), "id"},
		{"id with a dot", with("id", "a.b"), "id"},
		{"type unknown", with("type", "saml"), "type"},
		{"oauth2 without authorize_url", with("authorize_url", nil), "authorize_url"},
		{"oauth2 without token_url", with("token_url", nil), "token_url"},
		{"client_id missing", with("client_id", nil), "client_id"},
		{"authorize_url not http", with("authorize_url", "javascript:alert(1)"), "authorize_url"},
		{"token_url relative", with("token_url", "/token"), "token_url"},
		{"token_url with credentials", with("token_url", "https://u:p@hooks.example.com/token"), "token_url"},
		{"token_url loopback", with("token_url", "http://127.0.0.1:8080/token"), "token_url"},
		{"token_url private name", with("token_url", "https://inside.example.com/token"), "token_url"},
		{"revoke_url metadata", with("revoke_url", "http://169.254.169.254/latest"), "revoke_url"},
		{"userinfo_url metadata name", with("userinfo_url", "http://metadata.example.com/"), "userinfo_url"},
		{"api_base_url private", with("api_base_url", "http://10.0.0.7/v1"), "api_base_url"},
		{"scope with a space", with("scopes_default", []string{"a b"}), "scopes_default"},
		{"empty scope", with("scopes_default", []string{""}), "scopes_default"},
		{"picker_api_key with a quote", with("picker_api_key", `AIza"><script>`), "picker_api_key"},
		{"unknown field", with("issuer", "x"), "body"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := e.call("POST", e.providers(), e.alice, tc.body)
			if r.status != 400 || !strings.HasPrefix(r.Msg, tc.field+": ") {
				t.Fatalf("%d %q (want 400 naming %s)", r.status, r.Msg, tc.field)
			}
		})
	}
	// The valid one is accepted; a patch to a private token URL is not.
	e.must(201, "POST", e.providers(), e.alice, ok)
	if r := e.call("PATCH", e.providers()+"/corp", e.alice, map[string]any{"token_url": "http://127.0.0.1/token"}); r.status != 400 || !strings.HasPrefix(r.Msg, "token_url: ") {
		t.Fatalf("patch to loopback: %d %s", r.status, r.Msg)
	}
	if n := len(eventsOf(t, e.nc, schemas.ResourceTypeAuthProvider)); n != 1 {
		t.Fatalf("%d provider events after one valid change", n)
	}
}

func uuidMust(s string) uuid.UUID { return uuid.MustParse(s) }

// The trust model (README, Security): an org admin may point a provider's
// URLs at any public host, and so receive its users' tokens for that
// provider. Every such change is in the audit log with the URL before and
// after, under the admin who made it.
func TestProviderURLChangeAuditedWithBeforeAndAfter(t *testing.T) {
	srv, _, _ := testenv.NATS(t)
	e := newCPEnv(t, srv.ClientURL(), nil)
	e.must(201, "POST", e.providers(), e.alice, map[string]any{"id": "google", "type": "google", "client_id": "cid.apps",
		"client_secret": providerSecret, "api_base_url": "https://docs.example.com"})
	e.must(200, "PATCH", e.providers()+"/google", e.alice, map[string]any{"api_base_url": "https://collector.example.net", "token_url": "https://collector.example.net/token"})
	var evs []schemas.AuditEvent
	testenv.Eventually(t, 10*time.Second, "the provider events", func() bool {
		evs = eventsOf(t, e.nc, schemas.ResourceTypeAuthProvider)
		return len(evs) == 2
	})
	ev := evs[1]
	var d struct {
		Before, After map[string]any
	}
	if err := json.Unmarshal(ev.Data, &d); err != nil {
		t.Fatal(err)
	}
	if ev.Action != schemas.AuditActionUpdated || ev.PrincipalID == "" || ev.UserID == nil || *ev.UserID != "alice" ||
		d.Before["api_base_url"] != "https://docs.example.com" || d.After["api_base_url"] != "https://collector.example.net" ||
		d.Before["token_url"] != "https://oauth2.googleapis.com/token" || d.After["token_url"] != "https://collector.example.net/token" {
		t.Fatalf("update event: %+v %s", ev, ev.Data)
	}
}
