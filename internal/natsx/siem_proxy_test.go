package natsx_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/auditrail/auditrail/internal/natsx"
	"github.com/auditrail/auditrail/schemas"
)

// credTable is the control plane's record of stream credentials, as the
// proxy asks it (controlplane.Service.ActiveStreamCredential is the real
// one, tested end to end in controlplane).
type credTable struct {
	mu   sync.Mutex
	rows map[string]credRow
}

type credRow struct {
	org, user string
	name      string
	expires   time.Time
	revoked   bool
}

func (c *credTable) set(id string, r credRow) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.rows[id] = r
}

func (c *credTable) revoke(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.rows[id]
	r.revoked = true
	c.rows[id] = r
}

func (c *credTable) ActiveStreamCredential(_ context.Context, id, user string, _ bool) (string, string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	r, ok := c.rows[id]
	switch {
	case !ok || r.user != user:
		return "", "", errors.New("unknown credential")
	case r.revoked:
		return "", "", errors.New("credential revoked")
	case !time.Now().Before(r.expires):
		return "", "", errors.New("credential expired")
	}
	return r.org, r.name, nil
}

// apiCode is the code of a JetStream error answered to a request (0 when
// the error is none).
func apiCode(err error) int {
	var ae *jetstream.APIError
	if errors.As(err, &ae) {
		return ae.Code
	}
	return 0
}

// A stream credential creates, updates, deletes and re-creates its own
// consumer with nats.go's jetstream client, through the control plane's
// proxy, and reads its organization's events with it.
func TestStreamCredentialCreatesItsConsumer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	e := newStreamEnv(t, ctx)
	nc, _, err := e.connect(t, e.issue(t, e.orgA, e.idA, time.Now().Add(time.Hour)), e.idA)
	if err != nil {
		t.Fatal(err)
	}
	js, _ := jetstream.New(nc)
	s, own := schemas.StreamEvents, natsx.StreamConsumer(e.idA)
	all := schemas.EventSubject(e.orgA, ">")
	// A "create" of the consumer the control plane made, as a client that
	// knows only its name and filter asks for it: the same consumer.
	cons, err := js.CreateConsumer(ctx, s, jetstream.ConsumerConfig{Durable: own, FilterSubject: all})
	if err != nil {
		t.Fatalf("the credential creates its consumer: %v", err)
	}
	fetch := func(c jetstream.Consumer, n int) []string {
		t.Helper()
		b, err := c.Fetch(n, jetstream.FetchMaxWait(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for m := range b.Messages() {
			got = append(got, m.Subject())
			if err := m.DoubleAck(ctx); err != nil {
				t.Fatal(err)
			}
		}
		return got
	}
	if got := fetch(cons, 10); len(got) != 2 || !strings.HasPrefix(got[0], "auditrail.events."+e.orgA+".") || !strings.HasPrefix(got[1], "auditrail.events."+e.orgA+".") {
		t.Fatalf("read %v", got)
	}
	// An update narrows the filter to the audit events.
	audit := schemas.EventSubject(e.orgA, schemas.KindAudit)
	if _, err := js.CreateOrUpdateConsumer(ctx, s, jetstream.ConsumerConfig{Durable: own, FilterSubject: audit, AckWait: time.Minute, MaxAckPending: 50}); err != nil {
		t.Fatalf("the credential updates its consumer: %v", err)
	}
	// Deleted and created again, it reads from the start of the stream.
	if err := js.DeleteConsumer(ctx, s, own); err != nil {
		t.Fatalf("the credential deletes its consumer: %v", err)
	}
	if _, err := e.cons.Exists(ctx, e.idA); err != nil {
		t.Fatal(err)
	} else if ok, _ := e.cons.Exists(ctx, e.idA); ok {
		t.Fatal("the consumer survived its deletion")
	}
	cons, err = js.CreateOrUpdateConsumer(ctx, s, jetstream.ConsumerConfig{Name: own, FilterSubject: audit, DeliverPolicy: jetstream.DeliverAllPolicy})
	if err != nil {
		t.Fatalf("the credential re-creates its consumer: %v", err)
	}
	if got := fetch(cons, 10); len(got) != 1 || got[0] != audit {
		t.Fatalf("read %v", got)
	}
	// What the server holds is the proxy's: a durable pull consumer
	// (named only, it would be deleted after 5 s idle), the control
	// plane's metadata.
	info, err := e.admin.Consumer(ctx, s, own)
	if err != nil {
		t.Fatal(err)
	}
	c := info.CachedInfo().Config
	if c.Durable != own || c.InactiveThreshold != 0 || c.Metadata["auditrail_org"] != e.orgA || c.Metadata["auditrail_stream_credential"] != e.idA ||
		c.Description != "stream credential siem of a" || c.AckPolicy != jetstream.AckExplicitPolicy {
		t.Fatalf("stored config %+v", c)
	}
	// The unfiltered create form (the filter in the body) works too.
	req := `{"stream_name":"` + s + `","config":{"durable_name":"` + own + `","filter_subject":"` + all + `","ack_policy":"explicit","deliver_policy":"all"}}`
	m, err := nc.Request("$JS.API.CONSUMER.CREATE."+s+"."+own, []byte(req), 2*time.Second)
	if err != nil || strings.Contains(string(m.Data), `"error"`) {
		t.Fatalf("unfiltered create: %v %s", err, m.Data)
	}
}

// Every other create or delete is refused: by the user's permissions (a
// foreign name, another organization's or a wider filter, another's
// consumer) or by the proxy (a push consumer, filter_subjects, a body that
// differs from its subject, idle deletion, other acks, unbounded or
// unknown fields, metadata), and by the proxy for a credential that is not
// active or not the one recorded, even with a forged Nats-Request-Info.
func TestStreamCredentialCreateRefusals(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	e := newStreamEnv(t, ctx)
	nc, errs, err := e.connect(t, e.issue(t, e.orgA, e.idA, time.Now().Add(time.Hour)), e.idA)
	if err != nil {
		t.Fatal(err)
	}
	js, _ := jetstream.New(nc, jetstream.WithDefaultTimeout(time.Second))
	s, own, other := schemas.StreamEvents, natsx.StreamConsumer(e.idA), natsx.StreamConsumer(e.idB)
	all := schemas.EventSubject(e.orgA, ">")
	// A refused publish gets no answer: nats.go waits for the context.
	short := func() context.Context {
		c, cancel := context.WithTimeout(ctx, time.Second)
		t.Cleanup(cancel)
		return c
	}
	create := func(cfg jetstream.ConsumerConfig) func() error {
		return func() error { _, err := js.CreateOrUpdateConsumer(short(), s, cfg); return err }
	}
	byPermission := []struct {
		name string
		try  func() error
		subj string
	}{
		{"another organization's filter", create(jetstream.ConsumerConfig{Durable: own, FilterSubject: schemas.EventSubject(e.orgB, ">")}), "$JS.API.CONSUMER.CREATE." + s + "." + own},
		{"every organization's events", create(jetstream.ConsumerConfig{Durable: own, FilterSubject: "auditrail.events.>"}), "$JS.API.CONSUMER.CREATE." + s + "." + own},
		{"every auditrail subject", create(jetstream.ConsumerConfig{Durable: own, FilterSubject: "auditrail.>"}), "$JS.API.CONSUMER.CREATE." + s + "." + own},
		{"a wildcard organization", create(jetstream.ConsumerConfig{Durable: own, FilterSubject: "auditrail.events.*.>"}), "$JS.API.CONSUMER.CREATE." + s + "." + own},
		{"a foreign consumer name", create(jetstream.ConsumerConfig{Durable: "mine", FilterSubject: all}), "$JS.API.CONSUMER.CREATE." + s + ".mine"},
		{"another credential's consumer name", create(jetstream.ConsumerConfig{Durable: other, FilterSubject: all}), "$JS.API.CONSUMER.CREATE." + s + "." + other},
		{"an ephemeral consumer", create(jetstream.ConsumerConfig{FilterSubject: all}), "$JS.API.CONSUMER.CREATE." + s},
		{"an ordered consumer", func() error {
			c, err := js.OrderedConsumer(short(), s, jetstream.OrderedConsumerConfig{FilterSubjects: []string{all}})
			if err != nil {
				return err
			}
			_, err = c.Fetch(1, jetstream.FetchMaxWait(500*time.Millisecond))
			return err
		}, "$JS.API.CONSUMER.CREATE." + s},
		{"deleting another's consumer", func() error { return js.DeleteConsumer(short(), s, other) }, "$JS.API.CONSUMER.DELETE." + s + "." + other},
	}
	for _, r := range byPermission {
		t.Run(r.name, func(t *testing.T) {
			if err := r.try(); err == nil {
				t.Fatalf("the credential succeeded: %s", r.name)
			}
			denied(t, errs, r.subj)
		})
	}

	raw := func(subj, config string) (string, error) {
		m, err := nc.Request(subj, []byte(`{"stream_name":"`+s+`","config":`+config+`}`), 2*time.Second)
		if err != nil {
			return "", err
		}
		return string(m.Data), nil
	}
	filtered := "$JS.API.CONSUMER.CREATE." + s + "." + own + "." + all
	plain := "$JS.API.CONSUMER.CREATE." + s + "." + own
	base := `"durable_name":"` + own + `","filter_subject":"` + all + `","ack_policy":"explicit"`
	byProxy := []struct{ name, subj, config string }{
		{"a push consumer into the control-plane bucket", filtered, `{` + base + `,"deliver_subject":"$KV.` + natsx.ControlPlaneBucket + `.org.` + e.orgB + `"}`},
		{"a push consumer by the unfiltered form", plain, `{` + base + `,"deliver_subject":"` + natsx.ConnRefreshSubject + `"}`},
		{"a queue group", filtered, `{` + base + `,"deliver_group":"g"}`},
		{"flow control", filtered, `{` + base + `,"flow_control":true}`},
		{"idle heartbeats", filtered, `{` + base + `,"idle_heartbeat":1000000000}`},
		{"filter_subjects", plain, `{"durable_name":"` + own + `","filter_subjects":["` + all + `","` + schemas.EventSubject(e.orgB, ">") + `"]}`},
		{"filter_subjects with a filter", filtered, `{` + base + `,"filter_subjects":["auditrail.events.>"]}`},
		{"a body filter wider than the subject's", filtered, `{"durable_name":"` + own + `","filter_subject":"auditrail.events.>"}`},
		{"an unfiltered create of every organization", plain, `{"durable_name":"` + own + `","filter_subject":"auditrail.events.>"}`},
		{"an unfiltered create of another organization", plain, `{"durable_name":"` + own + `","filter_subject":"` + schemas.EventSubject(e.orgB, ">") + `"}`},
		{"an unfiltered create without filter", plain, `{"durable_name":"` + own + `"}`},
		{"a foreign name in the body", filtered, `{"durable_name":"x","filter_subject":"` + all + `"}`},
		{"deletion when idle", filtered, `{` + base + `,"inactive_threshold":1000000000}`},
		{"no acks", filtered, `{"durable_name":"` + own + `","filter_subject":"` + all + `","ack_policy":"none"}`},
		{"acks of all", filtered, `{"durable_name":"` + own + `","filter_subject":"` + all + `","ack_policy":"all"}`},
		{"memory storage", filtered, `{` + base + `,"mem_storage":true}`},
		{"sampling advisories", filtered, `{` + base + `,"sample_freq":"100%"}`},
		{"paused", filtered, `{` + base + `,"pause_until":"2999-01-01T00:00:00Z"}`},
		{"priority groups", filtered, `{` + base + `,"priority_groups":["g"],"priority_policy":"pinned_client"}`},
		{"unbounded ack pending", filtered, `{` + base + `,"max_ack_pending":-1}`},
		{"a huge max_bytes", filtered, `{` + base + `,"max_bytes":1099511627776}`},
		{"foreign metadata", filtered, `{` + base + `,"metadata":{"auditrail_org":"` + e.orgB + `"}}`},
		{"an unknown field", filtered, `{` + base + `,"direct_subject":"x"}`},
		{"a malformed body", filtered, `{`},
	}
	for _, r := range byProxy {
		t.Run(r.name, func(t *testing.T) {
			got, err := raw(r.subj, r.config)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(got, `"code":403`) {
				t.Fatalf("the proxy answered %s", got)
			}
		})
	}
	// What the server holds is unchanged: A's and B's pull consumers,
	// nothing else.
	st, err := e.admin.Stream(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	lister := st.ListConsumers(ctx)
	var names []string
	for ci := range lister.Info() {
		names = append(names, ci.Name)
		if ci.Config.DeliverSubject != "" || len(ci.Config.FilterSubjects) > 0 || ci.Config.InactiveThreshold != 0 {
			t.Fatalf("consumer %s: %+v", ci.Name, ci.Config)
		}
		if ci.Name == own && ci.Config.FilterSubject != all {
			t.Fatalf("A's filter is %s", ci.Config.FilterSubject)
		}
	}
	if lister.Err() != nil || len(names) != 2 {
		t.Fatalf("consumers %v %v", names, lister.Err())
	}

	// A JWT for A's id that the control plane never issued (another user
	// key, signed with the key): the proxy refuses it, even when it
	// claims the recorded user in Nats-Request-Info (the server writes
	// that header).
	stray, _, err := e.a.Auth.StreamSigner().Issue(e.orgA, e.idA, time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	ns, _, err := e.connect(t, stray, e.idA)
	if err != nil {
		t.Fatal(err)
	}
	e.creds.mu.Lock()
	recorded := e.creds.rows[e.idA].user
	e.creds.mu.Unlock()
	msg := nats.NewMsg(filtered)
	msg.Header.Set("Nats-Request-Info", `{"acc":"`+e.a.Auth.StreamSigner().Account()+`","user":"`+recorded+`"}`)
	msg.Data = []byte(`{"stream_name":"` + s + `","config":{` + base + `}}`)
	if m, err := ns.RequestMsg(msg, 2*time.Second); err != nil || !strings.Contains(string(m.Data), `"code":403`) {
		t.Fatalf("an unrecorded credential: %v %s", err, m.Data)
	}
	// An application-account role cannot ask the proxy itself.
	q := e.a.Connect(t, natsx.RoleQuery)
	if _, err := q.Request("auditrail.siem.consumer.create."+own+"."+all, msg.Data, 700*time.Millisecond); err == nil {
		t.Fatal("the query role reached the proxy")
	}

	// Revoked (the control plane deletes the consumer): neither a read nor
	// a create, nor a delete.
	e.creds.revoke(e.idA)
	if err := e.cons.Delete(ctx, e.idA); err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateOrUpdateConsumer(ctx, s, jetstream.ConsumerConfig{Durable: own, FilterSubject: all}); apiCode(err) != 403 || !strings.Contains(err.Error(), "revoked") {
		t.Fatalf("a revoked credential creates: %v", err)
	}
	if err := js.DeleteConsumer(ctx, s, own); apiCode(err) != 403 {
		t.Fatalf("a revoked credential deletes: %v", err)
	}
	if _, err := js.Consumer(ctx, s, own); !errors.Is(err, jetstream.ErrConsumerNotFound) {
		t.Fatalf("a revoked credential reads: %v", err)
	}
}

func TestStreamFilterInside(t *testing.T) {
	const org = streamOrgA
	for _, c := range []struct {
		filter string
		want   bool
	}{
		{"auditrail.events." + org + ".>", true},
		{"auditrail.events." + org + ".audit", true},
		{"auditrail.events." + org + ".*", true},
		{"auditrail.events." + org + ".*.x", true},
		{"auditrail.events." + org, false},
		{"auditrail.events." + org + ".", false},
		{"auditrail.events." + org + "..x", false},
		{"auditrail.events." + org + ".>.x", false},
		{"auditrail.events." + org + ".a>", false},
		{"auditrail.events." + org + ".a b", false},
		{"auditrail.events." + org + "x.>", false},
		{"auditrail.events.>", false},
		{"auditrail.events.*.>", false},
		{"auditrail.>", false},
		{">", false},
		{"", false},
		{"auditrail.events." + streamOrgB + ".>", false},
	} {
		if got := natsx.StreamFilterInside(org, c.filter); got != c.want {
			t.Errorf("%q: %v, want %v", c.filter, got, c.want)
		}
	}
	if natsx.StreamFilterInside("", "auditrail.events..>") || natsx.StreamFilterInside("*", "auditrail.events.*.>") {
		t.Error("an empty or wildcard organization")
	}
}

// Whatever the body, what the proxy sends is a durable pull consumer of
// the credential, filtered inside its organization, with explicit acks.
func FuzzSanitizeStreamCreate(f *testing.F) {
	const org, id = streamOrgA, streamIDA
	own, all := natsx.StreamConsumer(id), schemas.EventSubject(org, ">")
	f.Add([]byte(`{"stream_name":"AUDITRAIL_EVENTS","config":{"durable_name":"`+own+`","deliver_policy":"all","ack_policy":"explicit","filter_subject":"`+all+`","replay_policy":"instant","num_replicas":0},"action":""}`), all)
	f.Add([]byte(`{"stream_name":"AUDITRAIL_EVENTS","config":{"ack_policy":"explicit","deliver_policy":"all","durable_name":"`+own+`","name":"`+own+`","filter_subject":"`+all+`","max_deliver":-1,"replay_policy":"instant","num_replicas":0,"pause_until":"0001-01-01T00:00:00Z"},"action":""}`), all)
	f.Add([]byte(`{"stream_name":"AUDITRAIL_EVENTS","config":{"name":"`+own+`","filter_subject":"`+all+`","deliver_subject":"x"}}`), "")
	f.Add([]byte(`{"stream_name":"AUDITRAIL_EVENTS","config":{"name":"`+own+`","filter_subject":"auditrail.events.>","metadata":{"_nats.level":"1"}}}`), "")
	f.Fuzz(func(t *testing.T, body []byte, subjectFilter string) {
		out, filter, err := natsx.SanitizeStreamCreate(body, org, id, "n", subjectFilter)
		if err != nil {
			return
		}
		var req struct {
			Stream string `json:"stream_name"`
			Config struct {
				jetstream.ConsumerConfig
				DeliverSubject string `json:"deliver_subject"`
				DeliverGroup   string `json:"deliver_group"`
			} `json:"config"`
		}
		dec := json.NewDecoder(bytes.NewReader(out))
		if err := dec.Decode(&req); err != nil {
			t.Fatalf("%s: %v", out, err)
		}
		c := req.Config
		switch {
		case req.Stream != schemas.StreamEvents, c.Durable != own, c.Name != own, c.FilterSubject != filter, !natsx.StreamFilterInside(org, filter),
			subjectFilter != "" && filter != subjectFilter, len(c.FilterSubjects) > 0, c.DeliverSubject != "", c.DeliverGroup != "",
			c.InactiveThreshold != 0, c.AckPolicy != jetstream.AckExplicitPolicy, c.MemoryStorage, c.Metadata["auditrail_org"] != org:
			t.Fatalf("sanitized %s from %s", out, body)
		}
	})
}
