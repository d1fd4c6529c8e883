package controlplane

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/auditrail/auditrail/controlplane/cpstate"
	"github.com/auditrail/auditrail/internal/natsx"
	"github.com/auditrail/auditrail/internal/testenv"
	"github.com/auditrail/auditrail/schemas"
	"github.com/auditrail/auditrail/schemas/openapitest"
)

// The names the control plane shows are the ones the NATS permissions grant.
func TestStreamCredentialNamesMatchNATS(t *testing.T) {
	const id = "1a000000-0000-4000-8000-00000000001a"
	if streamName != schemas.StreamEvents || streamConsumerPrefix+id != natsx.StreamConsumer(id) || streamInboxPrefix+id != natsx.StreamInboxPrefix(id) {
		t.Fatal("the stream, consumer or inbox names differ from natsx's")
	}
}

// streamCredsEnv is a control plane with its real NATS credentials and
// stream credentials enabled, two organizations and their admins.
type streamCredsEnv struct {
	a          *testenv.AuthNATS
	n          *node
	admin      jetstream.JetStream
	issuer     natsx.StreamIssuer
	orgA, orgB string
	alice, bob string // alice: admin of A; bob: member of A
	stopProxy  func() // the consumer proxy, asking the node's state
}

func newStreamCredsEnv(t *testing.T) *streamCredsEnv {
	t.Helper()
	a := testenv.NATSAuth(t)
	n := newNode(t, a.Server.ClientURL(), roleOpts(t, a, natsx.RoleControlPlane))
	n.run()
	js, _ := jetstream.New(n.nc)
	iss := natsx.StreamIssuer{Signer: a.Auth.StreamSigner(), Consumers: natsx.StreamConsumers{JS: js}}
	n.svc.UseStreamCredentials(iss)
	admin, _ := jetstream.New(a.Connect(t, natsx.RoleAdmin))
	e := &streamCredsEnv{a: a, n: n, admin: admin, issuer: iss}
	stop, err := (&natsx.StreamConsumerProxy{NC: n.nc, Account: a.Auth.StreamSigner().Account(), Creds: n.svc}).Start()
	if err != nil {
		t.Fatal(err)
	}
	e.stopProxy = stop
	t.Cleanup(stop)
	key := func(org, user, role string) string {
		n.must(201, "PUT", "/api/v1/orgs/"+org+"/members/"+user, bootKey, map[string]any{"role": role})
		return n.must(201, "POST", "/api/v1/orgs/"+org+"/api_keys", bootKey, map[string]any{"name": user, "user_id": user}).field("key")
	}
	e.orgA = n.must(201, "POST", "/api/v1/orgs", bootKey, map[string]any{"name": "A"}).field("id")
	e.orgB = n.must(201, "POST", "/api/v1/orgs", bootKey, map[string]any{"name": "B"}).field("id")
	e.alice, e.bob = key(e.orgA, "alice", "admin"), key(e.orgA, "bob", "member")
	return e
}

// do calls the API and checks the answer against admin.yaml.
func (e *streamCredsEnv) do(t *testing.T, want int, method, path, token string, body any) reply {
	t.Helper()
	var raw []byte
	if body != nil {
		raw, _ = json.Marshal(body)
	}
	const base = "http://127.0.0.1:8080"
	req := httptest.NewRequest(method, base+path, bytes.NewReader(raw))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := e.n.app.Test(req, -1)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		t.Fatalf("%s %s: %d %s (want %d)", method, path, resp.StatusCode, out, want)
	}
	check, _ := http.NewRequest(method, base+path, bytes.NewReader(raw))
	check.Header = req.Header
	openapitest.CheckResponse(t, openapitest.Router(t, "admin.yaml", base), check, resp.StatusCode, resp.Header, out)
	r := reply{status: resp.StatusCode}
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("%s", out)
	}
	return r
}

// connect connects as a SIEM does with the credentials file of a reply.
func connectStream(t *testing.T, url string, r reply) (*nats.Conn, error) {
	t.Helper()
	var d struct {
		Creds       string `json:"creds"`
		InboxPrefix string `json:"inbox_prefix"`
	}
	_ = json.Unmarshal(r.Data, &d)
	path := filepath.Join(t.TempDir(), "siem.creds")
	if err := os.WriteFile(path, []byte(d.Creds), 0o600); err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(url, nats.UserCredentials(path), nats.CustomInboxPrefix(d.InboxPrefix), nats.MaxReconnects(0))
	if err == nil {
		t.Cleanup(nc.Close)
	}
	return nc, err
}

// The routes end to end: an admin creates a credential that reads the
// organization's events and nothing of another; its secret is in no list,
// audit event or stored record; revoking it stops it within 5 s; an
// expired one is refused by NATS and its consumer swept.
func TestStreamCredentialsEndToEnd(t *testing.T) {
	e := newStreamCredsEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	base := "/api/v1/orgs/" + e.orgA + "/stream_credentials"
	in := func(d time.Duration) string { return time.Now().Add(d).UTC().Format(time.RFC3339) }

	// Validation and authorization.
	for _, bad := range []struct {
		body any
		want int
		who  string
	}{
		{map[string]any{"name": "siem"}, 400, e.alice},                                         // no expiry
		{map[string]any{"name": "siem", "expires_at": in(-time.Minute)}, 400, e.alice},         // past
		{map[string]any{"name": "siem", "expires_at": in(367 * 24 * time.Hour)}, 400, e.alice}, // too far
		{map[string]any{"name": "", "expires_at": in(time.Hour)}, 400, e.alice},
		{map[string]any{"name": "siem", "expires_at": "tomorrow"}, 400, e.alice},
		{map[string]any{"name": "siem", "expires_at": in(time.Hour), "filter": ">"}, 400, e.alice},
		{map[string]any{"name": "siem", "expires_at": in(time.Hour)}, 403, e.bob}, // a member
	} {
		e.do(t, bad.want, "POST", base, bad.who, bad.body)
	}
	e.do(t, 403, "GET", base, e.bob, nil)
	e.do(t, 403, "POST", "/api/v1/orgs/"+e.orgB+"/stream_credentials", e.alice, map[string]any{"name": "x", "expires_at": in(time.Hour)})

	for _, subj := range []string{schemas.EventSubject(e.orgA, schemas.KindAudit), schemas.EventSubject(e.orgB, schemas.KindAudit)} {
		if _, err := e.admin.Publish(ctx, subj, []byte("event of "+subj)); err != nil {
			t.Fatal(err)
		}
	}
	created := e.do(t, 201, "POST", base, e.alice, map[string]any{"name": "splunk", "expires_at": in(time.Hour)})
	var cred struct {
		ID, Creds, Stream, Consumer, ExpiresAt, Status string
		Subjects                                       []string
	}
	if err := json.Unmarshal(created.Data, &struct {
		ID        *string   `json:"id"`
		Creds     *string   `json:"creds"`
		Stream    *string   `json:"stream"`
		Consumer  *string   `json:"consumer"`
		ExpiresAt *string   `json:"expires_at"`
		Status    *string   `json:"status"`
		Subjects  *[]string `json:"subjects"`
	}{&cred.ID, &cred.Creds, &cred.Stream, &cred.Consumer, &cred.ExpiresAt, &cred.Status, &cred.Subjects}); err != nil {
		t.Fatal(err)
	}
	if cred.Stream != schemas.StreamEvents || len(cred.Subjects) != 1 || cred.Subjects[0] != "auditrail.events."+e.orgA+".>" ||
		cred.Status != "active" || !strings.Contains(cred.Creds, "BEGIN NATS USER JWT") || !strings.Contains(cred.Creds, "BEGIN USER NKEY SEED") {
		t.Fatalf("created %s", created.Data)
	}
	tok, err := jwt.ParseDecoratedJWT([]byte(cred.Creds))
	if err != nil {
		t.Fatal(err)
	}
	uc, err := jwt.DecodeUserClaims(tok)
	if err != nil {
		t.Fatal(err)
	}
	if exp, _ := time.Parse(time.RFC3339, cred.ExpiresAt); uc.Expires != exp.Unix() {
		t.Fatalf("JWT exp %d, expires_at %s", uc.Expires, cred.ExpiresAt)
	}
	seed, err := jwt.ParseDecoratedNKey([]byte(cred.Creds))
	if err != nil {
		t.Fatal(err)
	}
	rawSeed, _ := seed.Seed()

	// The list, the record and the audit stream never hold the secret.
	list := e.do(t, 200, "GET", base, e.alice, nil)
	if strings.Contains(string(list.Data), "creds") || !strings.Contains(string(list.Data), cred.ID) {
		t.Fatalf("list: %s", list.Data)
	}
	e.do(t, 200, "GET", base+"/"+cred.ID, e.alice, nil)
	e.do(t, 404, "GET", base+"/00000000-0000-4000-8000-000000000000", e.alice, nil)
	secretIn := func(b []byte) bool { return bytes.Contains(b, rawSeed) || bytes.Contains(b, []byte(tok)) }
	var stored cpstate.StreamCredential
	if _, err := e.n.state.Get(cpstate.StreamCredKey(e.orgA, cred.ID), &stored); err != nil {
		t.Fatal(err)
	}
	if b, _ := json.Marshal(stored); secretIn(b) {
		t.Fatal("the stored record holds the secret")
	}
	auditOf := func(action string) []byte {
		t.Helper()
		var found []byte
		testenv.Eventually(t, 10*time.Second, "the audit event of "+action, func() bool {
			st, _ := e.admin.Stream(ctx, schemas.StreamEvents)
			info, _ := st.Info(ctx)
			for seq := info.State.FirstSeq; seq <= info.State.LastSeq; seq++ {
				m, err := st.GetMsg(ctx, seq)
				if err != nil {
					continue
				}
				if secretIn(m.Data) {
					t.Fatalf("audit event %d carries the secret", seq)
				}
				if bytes.Contains(m.Data, []byte(cred.ID)) && bytes.Contains(m.Data, []byte(action)) && bytes.Contains(m.Data, []byte("SETTING")) {
					found = m.Data
				}
			}
			return found != nil
		})
		return found
	}
	auditOf("CREATED")

	// The SIEM reads A's events, and only A's.
	nc, err := connectStream(t, e.a.Server.ClientURL(), created)
	if err != nil {
		t.Fatalf("connect with the credential: %v", err)
	}
	js, _ := jetstream.New(nc)
	cons, err := js.Consumer(ctx, cred.Stream, cred.Consumer)
	if err != nil {
		t.Fatal(err)
	}
	batch, err := cons.Fetch(10, jetstream.FetchMaxWait(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for m := range batch.Messages() {
		got = append(got, m.Subject())
		_ = m.Ack()
	}
	for _, s := range got {
		if !strings.HasPrefix(s, "auditrail.events."+e.orgA+".") {
			t.Fatalf("the credential of A read %s", s)
		}
	}
	if len(got) < 2 { // the published event and the credential's own audit event
		t.Fatalf("read %v", got)
	}

	// Revocation: refused within 5 s; the record says revoked; once.
	start := time.Now()
	e.do(t, 200, "DELETE", base+"/"+cred.ID, e.alice, nil)
	for {
		_, err := js.Consumer(ctx, cred.Stream, cred.Consumer)
		if errors.Is(err, jetstream.ErrConsumerNotFound) {
			break
		}
		if time.Since(start) > 5*time.Second {
			t.Fatalf("still working 5 s after the revocation: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("revoked credential refused %s after DELETE was sent", time.Since(start).Round(time.Millisecond))
	if b, err := cons.Fetch(1, jetstream.FetchMaxWait(time.Second)); err == nil {
		for range b.Messages() {
			t.Fatal("a revoked credential fetched")
		}
	}
	if r := e.do(t, 200, "GET", base+"/"+cred.ID, e.alice, nil); r.field("status") != "revoked" {
		t.Fatalf("after revocation: %s", r.Data)
	}
	auditOf("DELETED")
	e.do(t, 200, "DELETE", base+"/"+cred.ID, e.alice, nil) // again: nothing new
	e.do(t, 404, "DELETE", base+"/00000000-0000-4000-8000-000000000000", e.alice, nil)

	// Another control plane (a restart) sees it revoked.
	n2 := newNode(t, e.a.Server.ClientURL(), roleOpts(t, e.a, natsx.RoleControlPlane))
	var again cpstate.StreamCredential
	if _, err := n2.state.Get(cpstate.StreamCredKey(e.orgA, cred.ID), &again); err != nil || again.RevokedAt == nil {
		t.Fatalf("after a restart: %+v %v", again, err)
	}

	// Expiry: NATS refuses the credential; the sweep deletes its consumer.
	short := e.do(t, 201, "POST", base, e.alice, map[string]any{"name": "short", "expires_at": in(3 * time.Second)})
	ns, err := connectStream(t, e.a.Server.ClientURL(), short)
	if err != nil {
		t.Fatalf("connect before expiry: %v", err)
	}
	testenv.Eventually(t, 10*time.Second, "the expired credential's connection closed", ns.IsClosed)
	exp, _ := time.Parse(time.RFC3339, short.field("expires_at"))
	time.Sleep(time.Until(exp.Add(time.Second))) // NATS refuses a JWT after its exp second
	if _, err := connectStream(t, e.a.Server.ClientURL(), short); err == nil {
		t.Fatal("an expired credential connected")
	}
	if err := e.n.svc.SweepStreamCredentials(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := e.admin.Consumer(ctx, schemas.StreamEvents, natsx.StreamConsumer(short.field("id"))); !errors.Is(err, jetstream.ErrConsumerNotFound) {
		t.Fatalf("the expired credential's consumer: %v", err)
	}
	if r := e.do(t, 200, "GET", base+"/"+short.field("id"), e.alice, nil); r.field("status") != "expired" {
		t.Fatalf("expired: %s", r.Data)
	}
}

// Without a signer the routes answer 503.
func TestStreamCredentialsNotConfigured(t *testing.T) {
	srv, _, _ := testenv.NATS(t)
	n := newNode(t, srv.ClientURL(), nodeOpts{})
	org := n.must(201, "POST", "/api/v1/orgs", bootKey, map[string]any{"name": "A"}).field("id")
	n.must(503, "POST", "/api/v1/orgs/"+org+"/stream_credentials", bootKey, map[string]any{"name": "x", "expires_at": time.Now().Add(time.Hour)})
}

// An organization holds at most the limit of active credentials (409);
// a revoked one frees its place, another organization has its own.
func TestStreamCredentialsLimit(t *testing.T) {
	e := newStreamCredsEnv(t)
	e.n.svc.maxCreds = 2
	base := "/api/v1/orgs/" + e.orgA + "/stream_credentials"
	body := map[string]any{"name": "s", "expires_at": time.Now().Add(time.Hour).UTC().Format(time.RFC3339)}
	first := e.do(t, 201, "POST", base, e.alice, body).field("id")
	e.do(t, 201, "POST", base, e.alice, body)
	e.do(t, 409, "POST", base, e.alice, body)
	e.do(t, 201, "POST", "/api/v1/orgs/"+e.orgB+"/stream_credentials", bootKey, body)
	e.do(t, 200, "DELETE", base+"/"+first, e.alice, nil)
	e.do(t, 201, "POST", base, e.alice, body)
}

// A credential made by the route creates (the same consumer, as a client
// that knows only its name and filter asks for it), deletes and re-creates
// its consumer with nats.go, through the proxy asking this control plane's
// state; a JWT for its id that the route did not issue is refused, so is
// another organization's filter; once revoked, it can neither create nor
// read within 5 s.
func TestStreamCredentialManagesItsConsumer(t *testing.T) {
	e := newStreamCredsEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	base := "/api/v1/orgs/" + e.orgA + "/stream_credentials"
	if _, err := e.admin.Publish(ctx, schemas.EventSubject(e.orgA, schemas.KindExecution), []byte("x")); err != nil {
		t.Fatal(err)
	}
	created := e.do(t, 201, "POST", base, e.alice, map[string]any{"name": "splunk", "expires_at": time.Now().Add(time.Hour).UTC().Format(time.RFC3339)})
	id, consumer, all := created.field("id"), created.field("consumer"), "auditrail.events."+e.orgA+".>"
	nc, err := connectStream(t, e.a.Server.ClientURL(), created)
	if err != nil {
		t.Fatal(err)
	}
	js, _ := jetstream.New(nc)
	short := func() context.Context {
		c, cancel := context.WithTimeout(ctx, time.Second)
		t.Cleanup(cancel)
		return c
	}
	s := schemas.StreamEvents
	cons, err := js.CreateConsumer(ctx, s, jetstream.ConsumerConfig{Durable: consumer, FilterSubject: all})
	if err != nil {
		t.Fatalf("the credential creates its consumer: %v", err)
	}
	b, err := cons.Fetch(10, jetstream.FetchMaxWait(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for m := range b.Messages() {
		if !strings.HasPrefix(m.Subject(), "auditrail.events."+e.orgA+".") {
			t.Fatalf("read %s", m.Subject())
		}
		n++
	}
	if n == 0 {
		t.Fatal("read nothing")
	}
	if err := js.DeleteConsumer(ctx, s, consumer); err != nil {
		t.Fatalf("the credential deletes its consumer: %v", err)
	}
	if _, err := js.CreateOrUpdateConsumer(ctx, s, jetstream.ConsumerConfig{Durable: consumer, FilterSubject: schemas.EventSubject(e.orgA, schemas.KindAudit)}); err != nil {
		t.Fatalf("the credential re-creates its consumer: %v", err)
	}
	if _, err := js.CreateOrUpdateConsumer(short(), s, jetstream.ConsumerConfig{Durable: consumer, FilterSubject: "auditrail.events." + e.orgB + ".>"}); err == nil {
		t.Fatal("the credential widened its filter to another organization")
	}
	// A JWT for the same id, signed with the key but not issued by the route.
	stray, _, err := e.issuer.Issue(e.orgA, id, time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	var d map[string]any
	_ = json.Unmarshal(created.Data, &d)
	d["creds"] = string(stray)
	raw, _ := json.Marshal(d)
	ns, err := connectStream(t, e.a.Server.ClientURL(), reply{Data: raw})
	if err != nil {
		t.Fatal(err)
	}
	jsStray, _ := jetstream.New(ns)
	if _, err := jsStray.CreateOrUpdateConsumer(ctx, s, jetstream.ConsumerConfig{Durable: consumer, FilterSubject: all}); !isRefused(err) {
		t.Fatalf("a JWT the route did not issue: %v", err)
	}

	start := time.Now()
	e.do(t, 200, "DELETE", base+"/"+id, e.alice, nil)
	if _, err := js.CreateOrUpdateConsumer(ctx, s, jetstream.ConsumerConfig{Durable: consumer, FilterSubject: all}); !isRefused(err) || !strings.Contains(err.Error(), "revoked") {
		t.Fatalf("a revoked credential creates its consumer: %v", err)
	}
	if _, err := js.Consumer(ctx, s, consumer); !errors.Is(err, jetstream.ErrConsumerNotFound) {
		t.Fatalf("a revoked credential reads: %v", err)
	}
	if time.Since(start) > 5*time.Second {
		t.Fatalf("refused %s after the revocation", time.Since(start))
	}
}

// isRefused reports whether err is the proxy's refusal (a JetStream error 403).
func isRefused(err error) bool {
	var ae *jetstream.APIError
	return errors.As(err, &ae) && ae.Code == 403
}

// revokingCreds revokes the credential through the route right after the
// proxy's first check: the revocation lands between the check and the
// proxy's create.
type revokingCreds struct {
	e    *streamCredsEnv
	path string
	once sync.Once
}

func (r *revokingCreds) ActiveStreamCredential(ctx context.Context, id, user string, current bool) (string, string, error) {
	org, name, err := r.e.n.svc.ActiveStreamCredential(ctx, id, user, current)
	r.once.Do(func() {
		req := httptest.NewRequest("DELETE", "http://127.0.0.1:8080"+r.path, nil)
		req.Header.Set("Authorization", "Bearer "+r.e.alice)
		if resp, err := r.e.n.app.Test(req, -1); err == nil {
			resp.Body.Close()
		}
	})
	return org, name, err
}

// A revocation recorded while the proxy creates the consumer: the proxy
// checks again (with the state current) and deletes what it created.
func TestStreamCredentialRevokedDuringCreate(t *testing.T) {
	e := newStreamCredsEnv(t)
	e.stopProxy()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	base := "/api/v1/orgs/" + e.orgA + "/stream_credentials"
	created := e.do(t, 201, "POST", base, e.alice, map[string]any{"name": "racy", "expires_at": time.Now().Add(time.Hour).UTC().Format(time.RFC3339)})
	id, consumer := created.field("id"), created.field("consumer")
	stop, err := (&natsx.StreamConsumerProxy{NC: e.n.nc, Account: e.a.Auth.StreamSigner().Account(), Creds: &revokingCreds{e: e, path: base + "/" + id}}).Start()
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	nc, err := connectStream(t, e.a.Server.ClientURL(), created)
	if err != nil {
		t.Fatal(err)
	}
	js, _ := jetstream.New(nc)
	_, err = js.CreateOrUpdateConsumer(ctx, schemas.StreamEvents, jetstream.ConsumerConfig{Durable: consumer, FilterSubject: "auditrail.events." + e.orgA + ".>"})
	if !isRefused(err) {
		t.Fatalf("a create that raced the revocation: %v", err)
	}
	if r := e.do(t, 200, "GET", base+"/"+id, e.alice, nil); r.field("status") != "revoked" {
		t.Fatalf("not revoked: %s", r.Data)
	}
	if _, err := e.admin.Consumer(ctx, schemas.StreamEvents, consumer); !errors.Is(err, jetstream.ErrConsumerNotFound) {
		t.Fatalf("the consumer of the revoked credential exists: %v", err)
	}
}
