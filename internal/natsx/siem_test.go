package natsx_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/auditrail/auditrail/internal/natsx"
	"github.com/auditrail/auditrail/internal/testenv"
	"github.com/auditrail/auditrail/schemas"
)

// streamEnv is an authenticated NATS server with two organizations' events,
// the control plane's connection and a stream credential per organization.
type streamEnv struct {
	a        *testenv.AuthNATS
	admin    jetstream.JetStream
	cons     natsx.StreamConsumers
	kv       jetstream.KeyValue
	orgA     string
	orgB     string
	idA, idB string
	creds    *credTable // what the proxy asks (the control plane's state)
}

const (
	streamOrgA = "0a000000-0000-4000-8000-00000000000a"
	streamOrgB = "0b000000-0000-4000-8000-00000000000b"
	streamIDA  = "1a000000-0000-4000-8000-00000000001a"
	streamIDB  = "1b000000-0000-4000-8000-00000000001b"
)

func newStreamEnv(t *testing.T, ctx context.Context) *streamEnv {
	t.Helper()
	a := testenv.NATSAuth(t)
	admin, _ := jetstream.New(a.Connect(t, natsx.RoleAdmin))
	cpConn := a.Connect(t, natsx.RoleControlPlane)
	cp, _ := jetstream.New(cpConn)
	kv, err := cp.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: natsx.ControlPlaneBucket, History: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, "org."+streamOrgB, []byte(`{"name":"b"}`)); err != nil {
		t.Fatal(err)
	}
	e := &streamEnv{a: a, admin: admin, cons: natsx.StreamConsumers{JS: cp}, kv: kv, orgA: streamOrgA, orgB: streamOrgB, idA: streamIDA, idB: streamIDB,
		creds: &credTable{rows: map[string]credRow{}}}
	proxy := &natsx.StreamConsumerProxy{NC: cpConn, Account: a.Auth.StreamSigner().Account(), Creds: e.creds}
	stop, err := proxy.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	for _, subj := range []string{
		schemas.EventSubject(e.orgA, schemas.KindAudit), schemas.EventSubject(e.orgB, schemas.KindAudit),
		schemas.EventSubject(e.orgA, schemas.KindExecution), schemas.EventSubject(e.orgB, schemas.KindExecution),
	} {
		if _, err := admin.Publish(ctx, subj, []byte(subj)); err != nil {
			t.Fatal(err)
		}
	}
	// The control plane creates each credential's consumer.
	if err := e.cons.Create(ctx, e.orgA, e.idA, "siem of a"); err != nil {
		t.Fatalf("the controlplane role creates a credential's consumer: %v", err)
	}
	if err := e.cons.Create(ctx, e.orgB, e.idB, "siem of b"); err != nil {
		t.Fatal(err)
	}
	return e
}

// connect connects with a stream credential, as a SIEM would: the
// credentials file and the inbox prefix it may subscribe to.
func (e *streamEnv) connect(t *testing.T, creds []byte, id string) (*nats.Conn, <-chan error, error) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "stream.creds")
	if err := os.WriteFile(path, creds, 0o600); err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 256)
	nc, err := nats.Connect(e.a.Server.ClientURL(), nats.UserCredentials(path), nats.CustomInboxPrefix(natsx.StreamInboxPrefix(id)),
		nats.MaxReconnects(0), nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			select {
			case errs <- err:
			default:
			}
		}))
	if err == nil {
		t.Cleanup(nc.Close)
	}
	return nc, errs, err
}

func (e *streamEnv) issue(t *testing.T, org, id string, expires time.Time) []byte {
	t.Helper()
	creds, user, err := e.a.Auth.StreamSigner().Issue(org, id, expires)
	if err != nil || !strings.HasPrefix(user, "U") {
		t.Fatalf("issue: %q %v", user, err)
	}
	e.creds.set(id, credRow{org: org, user: user, expires: expires, name: map[string]string{streamOrgA: "siem of a", streamOrgB: "siem of b"}[org]})
	return creds
}

// subjectCount is how many messages of the event stream are on subject.
func (e *streamEnv) subjectCount(t *testing.T, ctx context.Context, stream, subject string) uint64 {
	t.Helper()
	st, err := e.admin.Stream(ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx, jetstream.WithSubjectFilter(subject))
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Subjects[subject]
}

// A stream credential reads its organization's events through its
// consumer, with nats.go's jetstream client, and acknowledges them.
func TestStreamCredentialReadsItsOrganization(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	e := newStreamEnv(t, ctx)
	nc, _, err := e.connect(t, e.issue(t, e.orgA, e.idA, time.Now().Add(time.Hour)), e.idA)
	if err != nil {
		t.Fatalf("connect with a stream credential: %v", err)
	}
	js, _ := jetstream.New(nc)
	cons, err := js.Consumer(ctx, schemas.StreamEvents, natsx.StreamConsumer(e.idA))
	if err != nil {
		t.Fatalf("the credential reads its consumer's info: %v", err)
	}
	if got := cons.CachedInfo().Config.FilterSubject; got != natsx.StreamSubjects(e.orgA)[0] {
		t.Fatalf("filter %q", got)
	}
	batch, err := cons.Fetch(10, jetstream.FetchMaxWait(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for m := range batch.Messages() {
		got = append(got, m.Subject())
		if err := m.DoubleAck(ctx); err != nil {
			t.Fatalf("ack %s: %v", m.Subject(), err)
		}
	}
	if batch.Error() != nil {
		t.Fatal(batch.Error())
	}
	want := []string{schemas.EventSubject(e.orgA, schemas.KindAudit), schemas.EventSubject(e.orgA, schemas.KindExecution)}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("fetched %v, want %v", got, want)
	}
	// Continuous consumption (Consume: pulls and heartbeats) works too.
	if _, err := e.admin.Publish(ctx, schemas.EventSubject(e.orgA, schemas.KindAudit), []byte("later")); err != nil {
		t.Fatal(err)
	}
	recv := make(chan jetstream.Msg, 4)
	cc, err := cons.Consume(func(m jetstream.Msg) { _ = m.DoubleAck(ctx); recv <- m })
	if err != nil {
		t.Fatal(err)
	}
	select {
	case m := <-recv:
		if string(m.Data()) != "later" {
			t.Fatalf("consumed %q", m.Data())
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Consume delivered nothing")
	}
	cc.Stop()
	<-cc.Closed()
	info, err := cons.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.AckFloor.Stream == 0 || info.NumAckPending != 0 || info.NumPending != 0 {
		t.Fatalf("acks did not reach the consumer: %+v", info)
	}
}

// Everything else is refused: another organization's consumer, publishing,
// the stream's and the buckets' APIs, the creation of another consumer or
// with a wider filter (the proxy's refusals: TestStreamCredentialCreateRefusals),
// other inboxes; a reply subject cannot carry the server's answers into the
// application account (the bucket, another organization's subjects).
func TestStreamCredentialRefusals(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	e := newStreamEnv(t, ctx)
	nc, errs, err := e.connect(t, e.issue(t, e.orgA, e.idA, time.Now().Add(time.Hour)), e.idA)
	if err != nil {
		t.Fatal(err)
	}
	s := schemas.StreamEvents
	own, other := natsx.StreamConsumer(e.idA), natsx.StreamConsumer(e.idB)
	req := func(subj, body string) func() error {
		return func() error {
			_, err := nc.Request(subj, []byte(body), 700*time.Millisecond)
			return err
		}
	}
	create := func(name, filter, body string) func() error {
		subj := "$JS.API.CONSUMER.CREATE." + s + "." + name
		if filter != "" {
			subj += "." + filter
		}
		return req(subj, body)
	}
	orgAll := schemas.EventSubject(e.orgA, ">")
	refused := []struct {
		name string
		try  func() error
		subj string // the subject of the expected violation
	}{
		{"pulling from another organization's consumer", req("$JS.API.CONSUMER.MSG.NEXT."+s+"."+other, `{"batch":5,"no_wait":true}`), "$JS.API.CONSUMER.MSG.NEXT." + s + "." + other},
		{"reading another organization's consumer", req("$JS.API.CONSUMER.INFO."+s+"."+other, ``), "$JS.API.CONSUMER.INFO." + s + "." + other},
		{"acking another organization's consumer", func() error {
			return nc.Publish("$JS.ACK."+s+"."+other+".1.1.1.1.0", []byte("+ACK"))
		}, "$JS.ACK." + s + "." + other},
		{"deleting another's consumer", req("$JS.API.CONSUMER.DELETE."+s+"."+other, ``), "$JS.API.CONSUMER.DELETE." + s + "." + other},
		{"widening its filter to every organization", create(own, "auditrail.events.>",
			`{"stream_name":"`+s+`","config":{"durable_name":"`+own+`","filter_subject":"auditrail.events.>","ack_policy":"explicit"}}`), "$JS.API.CONSUMER.CREATE." + s + "." + own},
		{"widening with a wildcard organization", create(own, "auditrail.events.*.>",
			`{"stream_name":"`+s+`","config":{"name":"`+own+`","filter_subject":"auditrail.events.*.>"}}`), "$JS.API.CONSUMER.CREATE." + s + "." + own},
		{"the legacy durable create", req("$JS.API.CONSUMER.DURABLE.CREATE."+s+"."+own,
			`{"stream_name":"`+s+`","config":{"durable_name":"`+own+`","filter_subject":"auditrail.events.>"}}`), "$JS.API.CONSUMER.DURABLE.CREATE." + s + "." + own},
		{"a push consumer delivering into the bucket", create("p1", orgAll,
			`{"stream_name":"`+s+`","config":{"name":"p1","filter_subject":"`+orgAll+`","deliver_subject":"$KV.`+natsx.ControlPlaneBucket+`.org.`+e.orgB+`"}}`), "$JS.API.CONSUMER.CREATE." + s + ".p1"},
		{"publishing to its own organization", func() error {
			return nc.Publish(schemas.EventSubject(e.orgA, schemas.KindAudit), []byte("forged"))
		}, schemas.EventSubject(e.orgA, schemas.KindAudit)},
		{"publishing to another organization", func() error {
			return nc.Publish(schemas.EventSubject(e.orgB, schemas.KindExecution), []byte("forged"))
		}, schemas.EventSubject(e.orgB, schemas.KindExecution)},
		{"publishing to the DLQ", func() error { return nc.Publish("auditrail.dlq.x", []byte("x")) }, "auditrail.dlq.x"},
		{"writing the control-plane bucket", func() error {
			return nc.Publish("$KV."+natsx.ControlPlaneBucket+".org."+e.orgB, []byte("{}"))
		}, "$KV." + natsx.ControlPlaneBucket},
		{"stream info with subjects", req("$JS.API.STREAM.INFO."+s, `{"subjects_filter":">"}`), "$JS.API.STREAM.INFO." + s},
		{"a message get", req("$JS.API.STREAM.MSG.GET."+s, `{"seq":1}`), "$JS.API.STREAM.MSG.GET." + s},
		{"a direct get", req("$JS.API.DIRECT.GET."+s, `{"seq":1}`), "$JS.API.DIRECT.GET." + s},
		{"a direct get of the bucket", req("$JS.API.DIRECT.GET.KV_"+natsx.ControlPlaneBucket, `{"last_by_subj":"$KV.`+natsx.ControlPlaneBucket+`.org.`+e.orgB+`"}`), "$JS.API.DIRECT.GET.KV_" + natsx.ControlPlaneBucket},
		{"listing consumers", req("$JS.API.CONSUMER.LIST."+s, `{}`), "$JS.API.CONSUMER.LIST." + s},
		{"consumer names", req("$JS.API.CONSUMER.NAMES."+s, `{}`), "$JS.API.CONSUMER.NAMES." + s},
		{"stream names", req("$JS.API.STREAM.NAMES", `{}`), "$JS.API.STREAM.NAMES"},
		{"account info", req("$JS.API.INFO", ``), "$JS.API.INFO"},
		{"purging the stream", req("$JS.API.STREAM.PURGE."+s, `{}`), "$JS.API.STREAM.PURGE." + s},
		{"deleting the stream", req("$JS.API.STREAM.DELETE."+s, ``), "$JS.API.STREAM.DELETE." + s},
		{"updating the stream", req("$JS.API.STREAM.UPDATE."+s, `{"name":"`+s+`","subjects":["x"]}`), "$JS.API.STREAM.UPDATE." + s},
		{"a system request", req("$SYS.REQ.SERVER.PING", ``), "$SYS.REQ.SERVER.PING"},
		{"subscribing to the events", func() error {
			_, err := nc.SubscribeSync(schemas.EventSubject(e.orgA, ">"))
			return err
		}, schemas.EventSubject(e.orgA, ">")},
		{"subscribing to another credential's inbox", func() error {
			_, err := nc.SubscribeSync(natsx.StreamInboxPrefix(e.idB) + ".>")
			return err
		}, natsx.StreamInboxPrefix(e.idB)},
		{"subscribing to everything", func() error {
			_, err := nc.SubscribeSync(">")
			return err
		}, "Subscription to \">\""},
	}
	for _, r := range refused {
		t.Run(r.name, func(t *testing.T) {
			if err := r.try(); err == nil && !strings.HasPrefix(r.subj, "$JS.ACK") && !strings.Contains(r.name, "subscribing") &&
				!strings.Contains(r.name, "publishing") && !strings.Contains(r.name, "writing") {
				t.Fatalf("the credential succeeded in %s", r.name)
			}
			denied(t, errs, r.subj)
		})
	}

	// The server's answers go to the requester's reply subject, which no
	// permission checks: in AUDITRAIL_SIEM that subject is one of that
	// account's, never the bucket's or another organization's.
	if _, err := e.admin.Publish(ctx, schemas.EventSubject(e.orgA, schemas.KindAudit), []byte("x")); err != nil {
		t.Fatal(err)
	}
	bSubj := schemas.EventSubject(e.orgB, schemas.KindAudit)
	before := e.subjectCount(t, ctx, s, bSubj)
	kvKey := "org." + e.orgB
	// The control plane's service of token refreshes, as its subscriber
	// (the admin, in the application account) sees it.
	watched := natsx.ConnRefreshSubject + ".siem"
	watcher := e.a.Connect(t, natsx.RoleAdmin)
	leaked, err := watcher.SubscribeSync(watched)
	if err != nil {
		t.Fatal(err)
	}
	if err := watcher.Flush(); err != nil {
		t.Fatal(err)
	}
	for _, reply := range []string{"$KV." + natsx.ControlPlaneBucket + "." + kvKey, bSubj, "auditrail.dlq." + e.orgB, watched} {
		for _, subj := range []string{"$JS.API.CONSUMER.INFO." + s + "." + own, "$JS.API.CONSUMER.MSG.NEXT." + s + "." + own,
			"$JS.API.CONSUMER.CREATE." + s + "." + own + "." + orgAll, "$JS.API.CONSUMER.CREATE." + s + "." + own} { // the proxy's answers
			if err := nc.PublishRequest(subj, reply, []byte(`{"batch":10,"expires":200000000}`)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	if m, err := leaked.NextMsg(100 * time.Millisecond); err == nil {
		t.Fatalf("an answer to the credential reached %s in the application account: %.80q", watched, m.Data)
	}
	if got := e.subjectCount(t, ctx, s, bSubj); got != before {
		t.Fatalf("answers sent to a reply subject reached another organization's subject: %d messages, was %d", got, before)
	}
	if got := e.subjectCount(t, ctx, schemas.StreamDLQ, "auditrail.dlq."+e.orgB); got != 0 {
		t.Fatalf("answers reached the DLQ: %d", got)
	}
	if v, err := e.kv.Get(ctx, kvKey); err != nil || string(v.Value()) != `{"name":"b"}` {
		t.Fatalf("answers reached the control-plane bucket: %v %q", err, v.Value())
	}
	// B's consumer was not touched.
	info, err := e.admin.Stream(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	cb, err := info.Consumer(ctx, other)
	if err != nil {
		t.Fatal(err)
	}
	if ci := cb.CachedInfo(); ci.Delivered.Consumer != 0 || ci.AckFloor.Stream != 0 {
		t.Fatalf("B's consumer was used: %+v", ci)
	}
}

// A revoked credential (its consumer deleted by the control plane) reaches
// nothing within 5 s; an expired one is disconnected and refused by NATS.
func TestStreamCredentialRevokedAndExpired(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	e := newStreamEnv(t, ctx)
	nc, _, err := e.connect(t, e.issue(t, e.orgA, e.idA, time.Now().Add(time.Hour)), e.idA)
	if err != nil {
		t.Fatal(err)
	}
	js, _ := jetstream.New(nc)
	cons, err := js.Consumer(ctx, schemas.StreamEvents, natsx.StreamConsumer(e.idA))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cons.Fetch(1, jetstream.FetchMaxWait(time.Second)); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := e.cons.Delete(ctx, e.idA); err != nil {
		t.Fatalf("the controlplane role deletes the consumer: %v", err)
	}
	if err := e.cons.Delete(ctx, e.idA); err != nil {
		t.Fatalf("deleting it again: %v", err)
	}
	for {
		_, err := js.Consumer(ctx, schemas.StreamEvents, natsx.StreamConsumer(e.idA))
		if errors.Is(err, jetstream.ErrConsumerNotFound) {
			break
		}
		if time.Since(start) > 5*time.Second {
			t.Fatalf("the revoked credential still reads its consumer after 5 s: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	b, err := cons.Fetch(1, jetstream.FetchMaxWait(time.Second))
	if err == nil {
		for range b.Messages() {
			t.Fatal("a revoked credential fetched a message")
		}
		if b.Error() == nil {
			t.Fatal("a fetch of a revoked credential did not fail")
		}
	}
	t.Logf("revoked: refused %s after the deletion", time.Since(start).Round(time.Millisecond))
	if ok, err := e.cons.Exists(ctx, e.idA); err != nil || ok {
		t.Fatalf("consumer exists: %v %v", ok, err)
	}

	// Expiry: NATS closes the connection when the JWT expires and refuses
	// new ones.
	exp := time.Now().Add(2 * time.Second)
	creds := e.issue(t, e.orgB, e.idB, exp)
	nb, _, err := e.connect(t, creds, e.idB)
	if err != nil {
		t.Fatalf("connect before expiry: %v", err)
	}
	jb, _ := jetstream.New(nb)
	if _, err := jb.Consumer(ctx, schemas.StreamEvents, natsx.StreamConsumer(e.idB)); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 6*time.Second, "the connection of an expired credential closes", nb.IsClosed)
	// The server refuses a JWT once its exp (whole seconds) has passed.
	time.Sleep(time.Until(time.Unix(exp.Unix()+1, 0)))
	if _, _, err := e.connect(t, creds, e.idB); err == nil {
		t.Fatal("an expired credential connected")
	}
}

// The server include and the embedded server hold AUDITRAIL_SIEM; the key
// file of the control plane signs credentials of that account.
func TestStreamSignerKeyFile(t *testing.T) {
	dir := t.TempDir()
	a, err := natsx.LoadOrCreateAuth(dir)
	if err != nil {
		t.Fatal(err)
	}
	s, err := natsx.LoadStreamSigner(natsx.StreamKeyFile(dir))
	if err != nil {
		t.Fatal(err)
	}
	if s.Account() != a.StreamSigner().Account() {
		t.Fatal("the key file is not the account's key")
	}
	conf, err := a.ServerConf()
	if err != nil || !strings.Contains(conf, s.Account()) {
		t.Fatalf("the server include lacks AUDITRAIL_SIEM: %v", err)
	}
	if _, err := natsx.LoadStreamSigner(filepath.Join(dir, "operator.nk")); !errors.Is(err, natsx.ErrInvalidOption) {
		t.Fatalf("an operator seed was taken as the stream key: %v", err)
	}
}

// Why stream credentials live in an account of their own and may not
// create consumers: in the application account, nats-server (v2.15.2)
// lets a user whose only grants are a filtered consumer create and a
// consumer info make the server publish on subjects it may not publish to,
// through a push consumer's deliver_subject (nats-io/nats-server#8274) and
// through a request's reply subject — here the control plane's service of
// token refreshes, which the admin listens to. If this test fails, the
// server has started checking them.
func TestAppAccountUserPublishesThroughTheServer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	e := newStreamEnv(t, ctx)
	s := schemas.StreamEvents
	orgAll := schemas.EventSubject(e.orgA, ">")
	creds, err := e.a.Auth.AppCredsForTest(jwt.Permissions{
		Pub: jwt.Permission{Allow: []string{"$JS.API.CONSUMER.CREATE." + s + ".p1." + orgAll, "$JS.API.CONSUMER.INFO." + s + ".p1"}},
		Sub: jwt.Permission{Allow: []string{"_INBOX_t.>"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "app.creds")
	if err := os.WriteFile(path, creds, 0o600); err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(e.a.Server.ClientURL(), nats.UserCredentials(path), nats.CustomInboxPrefix("_INBOX_t"),
		nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	watcher := e.a.Connect(t, natsx.RoleAdmin)
	push, reply := natsx.ConnRefreshSubject+".push", natsx.ConnRefreshSubject+".reply"
	got := map[string]chan *nats.Msg{push: make(chan *nats.Msg, 16), reply: make(chan *nats.Msg, 16)}
	for subj, ch := range got {
		ch := ch
		if _, err := watcher.Subscribe(subj, func(m *nats.Msg) { ch <- m }); err != nil {
			t.Fatal(err)
		}
	}
	if err := watcher.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := nc.Publish(push, nil); err == nil {
		_ = nc.Flush() // refused: the user may not publish there itself
	}
	body := `{"stream_name":"` + s + `","config":{"name":"p1","filter_subject":"` + orgAll + `","deliver_subject":"` + push + `","ack_policy":"none"}}`
	m, err := nc.Request("$JS.API.CONSUMER.CREATE."+s+".p1."+orgAll, []byte(body), 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(m.Data), `"error"`) {
		t.Fatalf("the server refuses the push consumer now: %s", m.Data)
	}
	if err := nc.PublishRequest("$JS.API.CONSUMER.INFO."+s+".p1", reply, nil); err != nil {
		t.Fatal(err)
	}
	for subj, ch := range got {
		select {
		case m := <-ch:
			t.Logf("the server published on %s for a user without the grant: %.60q", subj, m.Data)
		case <-time.After(5 * time.Second):
			t.Fatalf("nothing reached %s: the server checks it now; stream credentials could live in the application account", subj)
		}
	}
}

// A revocation survives a restart of NATS: the consumer's deletion is
// JetStream state; a credential whose consumer still exists reads again
// after the restart (the test could fail).
func TestStreamRevocationSurvivesNATSRestart(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	keys, store := t.TempDir(), t.TempDir()
	auth, err := natsx.LoadOrCreateAuth(keys)
	if err != nil {
		t.Fatal(err)
	}
	if err := auth.WriteCreds(keys); err != nil {
		t.Fatal(err)
	}
	start := func() *server.Server {
		cfg := natsx.DefaultServerConfig()
		cfg.Listen, cfg.StoreDir, cfg.Auth = "127.0.0.1:0", store, auth
		s, err := natsx.StartServer(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	s := start()
	cpOpts, _ := natsx.CredsOptions(natsx.CredsFile(keys, natsx.RoleControlPlane))
	cpConn, err := nats.Connect(s.ClientURL(), cpOpts...)
	if err != nil {
		t.Fatal(err)
	}
	cp, _ := jetstream.New(cpConn)
	if err := natsx.EnsureStreams(ctx, cp, natsx.DefaultStreamConfig()); err != nil {
		t.Fatal(err)
	}
	cons := natsx.StreamConsumers{JS: cp}
	kept, revoked := streamIDA, streamIDB
	for _, id := range []string{kept, revoked} {
		if err := cons.Create(ctx, streamOrgA, id, id); err != nil {
			t.Fatal(err)
		}
	}
	if err := cons.Delete(ctx, revoked); err != nil {
		t.Fatal(err)
	}
	cpConn.Close()
	s.Shutdown()
	s.WaitForShutdown()
	s = start()
	defer func() { s.Shutdown(); s.WaitForShutdown() }() // its goroutines gone before goleak looks
	read := func(id string) error {
		creds, _, err := auth.StreamSigner().Issue(streamOrgA, id, time.Now().Add(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(t.TempDir(), "c.creds")
		if err := os.WriteFile(path, creds, 0o600); err != nil {
			t.Fatal(err)
		}
		nc, err := nats.Connect(s.ClientURL(), nats.UserCredentials(path), nats.CustomInboxPrefix(natsx.StreamInboxPrefix(id)))
		if err != nil {
			return err
		}
		defer nc.Close()
		js, _ := jetstream.New(nc)
		_, err = js.Consumer(ctx, schemas.StreamEvents, natsx.StreamConsumer(id))
		return err
	}
	if err := read(kept); err != nil {
		t.Fatalf("a credential with a consumer after the restart: %v", err)
	}
	if err := read(revoked); !errors.Is(err, jetstream.ErrConsumerNotFound) {
		t.Fatalf("a revoked credential after the restart: %v", err)
	}
}
