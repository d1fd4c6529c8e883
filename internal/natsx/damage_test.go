package natsx_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/auditrail/auditrail/internal/natsx"
	"github.com/auditrail/auditrail/internal/testenv"
	"github.com/auditrail/auditrail/schemas"
)

// subjectMatches reports whether subject matches the NATS pattern
// (* one token, > the rest).
func subjectMatches(pattern, subject string) bool {
	p, s := strings.Split(pattern, "."), strings.Split(subject, ".")
	for i, t := range p {
		switch {
		case t == ">":
			return len(s) > i
		case i >= len(s):
			return false
		case t != "*" && t != s[i]:
			return false
		}
	}
	return len(p) == len(s)
}

// concreteSubjects instantiates a permission's pattern: its wildcards
// filled with a token, and every known subject it matches.
func concreteSubjects(pattern string, known []string) []string {
	toks := strings.Split(pattern, ".")
	for i, t := range toks {
		if t == "*" || t == ">" {
			toks[i] = "x"
		}
	}
	out := []string{strings.Join(toks, ".")}
	for _, k := range known {
		if subjectMatches(pattern, k) && !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	return out
}

// storedMsg is a message of a stream that must survive.
type storedMsg struct {
	stream, subject, data string
	seq                   uint64
}

// TestRoleCredentialsCannotDamageState publishes, with the credentials of
// every role but admin, to every subject its permissions allow (wildcards
// filled, and every stored key and event subject they match) messages that
// would erase or rewrite a stream's content — rollups of the whole stream or
// of a subject, KV purge and delete markers, message TTLs, Nats-Expected-*
// headers — and sends the JetStream API requests that purge, delete or
// reconfigure streams and delete messages. Afterwards the control-plane
// bucket holds every key it held, the OAuth states and delivery buckets too, and the event
// and dead-letter streams lost no message. The control plane writes its own
// buckets by design (and their rollups, for its outbox purges): its
// attempts on them are left out, as are the deliver role's on its own bucket.
func TestRoleCredentialsCannotDamageState(t *testing.T) {
	a := testenv.NATSAuth(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	admin, err := jetstream.New(a.Connect(t, natsx.RoleAdmin))
	if err != nil {
		t.Fatal(err)
	}
	// The buckets as the control plane opens them (controlplane.openBucket:
	// atomic batches and message TTLs on).
	cpJS, _ := jetstream.New(a.Connect(t, natsx.RoleControlPlane))
	cpKV, err := cpJS.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: natsx.ControlPlaneBucket, History: 1, Storage: jetstream.FileStorage})
	if err != nil {
		t.Fatal(err)
	}
	st, err := cpJS.Stream(ctx, "KV_"+natsx.ControlPlaneBucket)
	if err != nil {
		t.Fatal(err)
	}
	sc := st.CachedInfo().Config
	sc.AllowAtomicPublish, sc.AllowMsgTTL = true, true
	if _, err := cpJS.UpdateStream(ctx, sc); err != nil {
		t.Fatal(err)
	}
	statesKV, err := cpJS.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: natsx.OAuthStatesBucket, History: 1, TTL: 15 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	// The delivery role's bucket (statuses, leases), as it creates it.
	dJS, _ := jetstream.New(a.Connect(t, natsx.RoleDeliver))
	deliverKV, err := dJS.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: natsx.DeliverBucket, History: 1, Storage: jetstream.FileStorage})
	if err != nil {
		t.Fatal(err)
	}
	const deliverKey, deliverValue = "status.d1", `{"state":"active"}`
	// The tamper-evidence log's bucket (leases, signing keys), as the tlog
	// role creates it.
	tJS, _ := jetstream.New(a.Connect(t, natsx.RoleTLog))
	tlogKV, err := tJS.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: natsx.TLogBucket})
	if err != nil {
		t.Fatal(err)
	}
	const tlogKey, tlogValue = "key-current", `{"key_id":"0a0b0c0d"}`
	for _, b := range natsx.RateLimitBuckets {
		if _, err := admin.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: b, Storage: jetstream.MemoryStorage}); err != nil {
			t.Fatal(err)
		}
	}

	const org, project = "7d0f4a52-9d7e-4c44-a4a1-0c7b1d2f9e01", "3b5e1c88-2f0a-4d6b-9c1e-5a4f8e7d6c02"
	keys := map[string]string{
		"org." + org:                                  `{"name":"acme"}`,
		"member." + org + ".alice":                    `{"role":"owner"}`,
		"apikey." + org + ".k1":                       `{"hash":"h"}`,
		"provider." + org + ".google":                 `{"type":"google"}`,
		"hook." + org + ".h1":                         `{"endpoint":"https://hooks.example.com"}`,
		"secret." + org + "." + project + ".db":       `{"sealed":"AQ=="}`,
		"conn." + org + "." + project + ".u.google":   `{"sealed":"AQ=="}`,
		"conn." + org + "." + project + ".u2.google":  `{"sealed":"AQ=="}`,
		"outbox.0b7c2d9e-1f3a-4b5c-8d6e-7f8091a2b3c4": `{"subject":"auditrail.events.x.audit"}`,
	}
	var known []string
	for k, v := range keys {
		if _, err := cpKV.Put(ctx, k, []byte(v)); err != nil {
			t.Fatal(err)
		}
		known = append(known, "$KV."+natsx.ControlPlaneBucket+"."+k)
	}
	if _, err := statesKV.Create(ctx, "nonce1", []byte("used")); err != nil {
		t.Fatal(err)
	}
	known = append(known, "$KV."+natsx.OAuthStatesBucket+".nonce1")
	if _, err := deliverKV.Put(ctx, deliverKey, []byte(deliverValue)); err != nil {
		t.Fatal(err)
	}
	known = append(known, "$KV."+natsx.DeliverBucket+"."+deliverKey)
	if _, err := tlogKV.Put(ctx, tlogKey, []byte(tlogValue)); err != nil {
		t.Fatal(err)
	}
	known = append(known, "$KV."+natsx.TLogBucket+"."+tlogKey)
	var msgs []storedMsg
	for i, subj := range []string{
		schemas.EventSubject(org, schemas.KindAudit), schemas.EventSubject(org, schemas.KindExecution),
		schemas.EventSubject(org, schemas.KindAudit), "auditrail.dlq." + org, "auditrail.dlq.other",
		schemas.EventSubject(org, schemas.KindCheckpoint),
	} {
		data := fmt.Sprintf("event %d", i)
		ack, err := admin.Publish(ctx, subj, []byte(data))
		if err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, storedMsg{stream: ack.Stream, subject: subj, data: data, seq: ack.Sequence})
		known = append(known, subj)
	}
	streams := []string{"KV_" + natsx.ControlPlaneBucket, "KV_" + natsx.OAuthStatesBucket, "KV_" + natsx.DeliverBucket, "KV_" + natsx.TLogBucket, schemas.StreamEvents, schemas.StreamDLQ}
	configs := map[string]jetstream.StreamConfig{}
	for _, s := range streams {
		st, err := admin.Stream(ctx, s)
		if err != nil {
			t.Fatal(err)
		}
		configs[s] = st.CachedInfo().Config
	}

	// Headers that would remove or rewrite stored messages, or make a
	// publish depend on the stream's state.
	headerSets := []nats.Header{
		{"Nats-Rollup": {"all"}},
		{"Nats-Rollup": {"sub"}},
		{"KV-Operation": {"PURGE"}, "Nats-Rollup": {"sub"}},
		{"KV-Operation": {"PURGE"}},
		{"KV-Operation": {"DEL"}},
		{"Nats-TTL": {"1s"}},
		{"Nats-Rollup": {"all"}, "Nats-Expected-Stream": {"KV_" + natsx.ControlPlaneBucket}},
		{"Nats-Expected-Stream": {schemas.StreamEvents}},
		{"Nats-Expected-Last-Sequence": {"0"}},
		{"Nats-Expected-Last-Sequence": {"1"}},
		{"Nats-Expected-Last-Subject-Sequence": {"0"}},
		{"Nats-Expected-Last-Msg-Id": {"x"}},
	}
	// ownBuckets are the subjects the control plane writes by design.
	ownBuckets := map[string][]string{
		natsx.RoleControlPlane: {"$KV." + natsx.ControlPlaneBucket + ".>", "$KV." + natsx.OAuthStatesBucket + ".>"},
		natsx.RoleDeliver:      {"$KV." + natsx.DeliverBucket + ".>"},
		natsx.RoleTLog:         {"$KV." + natsx.TLogBucket + ".>"},
		natsx.RoleLifecycle:    {"$KV." + natsx.ControlPlaneBucket + ".erasure.>", "$KV." + natsx.LifecycleBucket + ".>"}, // the erasures' progress, its lease
	}

	for _, role := range natsx.Roles {
		if role == natsx.RoleAdmin {
			continue // everything, by design
		}
		t.Run(role, func(t *testing.T) {
			// Each role is judged alone: what an earlier one erased is back.
			for k, v := range keys {
				if e, err := cpKV.Get(ctx, k); err != nil || string(e.Value()) != v {
					if _, err := cpKV.Put(ctx, k, []byte(v)); err != nil {
						t.Fatal(err)
					}
				}
			}
			if e, err := deliverKV.Get(ctx, deliverKey); err != nil || string(e.Value()) != deliverValue {
				if _, err := deliverKV.Put(ctx, deliverKey, []byte(deliverValue)); err != nil {
					t.Fatal(err)
				}
			}
			if e, err := tlogKV.Get(ctx, tlogKey); err != nil || string(e.Value()) != tlogValue {
				if _, err := tlogKV.Put(ctx, tlogKey, []byte(tlogValue)); err != nil {
					t.Fatal(err)
				}
			}
			nc, _ := a.ConnectErrs(t, role) // permission violations expected (and dropped)
			var mu sync.Mutex
			replies, accepted := 0, 0
			last := time.Now()
			inbox := nc.NewInbox()
			sub, err := nc.Subscribe(inbox+".>", func(m *nats.Msg) {
				var ack struct {
					Stream string          `json:"stream"`
					Error  json.RawMessage `json:"error"`
				}
				mu.Lock()
				defer mu.Unlock()
				replies++
				last = time.Now()
				if json.Unmarshal(m.Data, &ack) == nil && ack.Stream != "" && ack.Error == nil {
					accepted++
				}
			})
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = sub.Unsubscribe() }()
			perms, err := natsx.Permissions(role)
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			send := func(subject string, h nats.Header, data []byte) {
				n++
				m := &nats.Msg{Subject: subject, Reply: fmt.Sprintf("%s.%d", inbox, n), Header: h, Data: data}
				if err := nc.PublishMsg(m); err != nil {
					t.Fatalf("publish %s: %v", subject, err)
				}
			}
			for _, pattern := range perms.Pub.Allow {
				for _, subj := range concreteSubjects(pattern, known) {
					if slices.ContainsFunc(ownBuckets[role], func(b string) bool { return subjectMatches(b, subj) }) {
						continue
					}
					if role == natsx.RoleLifecycle && (strings.HasPrefix(subj, "$JS.API.STREAM.PURGE.") || strings.HasPrefix(subj, "$JS.API.STREAM.MSG.DELETE.")) {
						continue // it purges expired subjects and deletes erased messages by design (lifecycle's tests)
					}
					for _, h := range headerSets {
						send(subj, h, []byte("forged"))
					}
				}
			}
			for _, s := range streams {
				if role != natsx.RoleLifecycle { // it purges expired subjects and deletes erased messages by design (lifecycle's tests)
					send("$JS.API.STREAM.PURGE."+s, nil, []byte(`{}`))
					send("$JS.API.STREAM.PURGE."+s, nil, []byte(`{"filter":">"}`))
					send("$JS.API.STREAM.PURGE."+s, nil, []byte(`{"keep":0}`))
					send("$JS.API.STREAM.MSG.DELETE."+s, nil, []byte(`{"seq":1}`))
					send("$JS.API.STREAM.MSG.DELETE."+s, nil, []byte(`{"seq":1,"no_erase":true}`))
				}
				send("$JS.API.STREAM.DELETE."+s, nil, nil)
				if role == natsx.RoleControlPlane || role == natsx.RoleDeliver && s == "KV_"+natsx.DeliverBucket || role == natsx.RoleTLog && s == "KV_"+natsx.TLogBucket {
					continue // it configures these streams by design
				}
				bad := configs[s]
				bad.MaxMsgs, bad.MaxAge, bad.AllowRollup, bad.DenyPurge = 1, time.Second, true, false
				b, _ := json.Marshal(bad)
				send("$JS.API.STREAM.UPDATE."+s, nil, b)
			}
			if err := nc.Flush(); err != nil {
				t.Fatal(err)
			}
			// What the server took from this connection is in the streams'
			// queues now: a later publish to each stream, once acknowledged,
			// comes after it. Then wait for the last answers.
			for _, subj := range []string{"$KV." + natsx.ControlPlaneBucket + ".sync", "$KV." + natsx.OAuthStatesBucket + ".sync", "$KV." + natsx.DeliverBucket + ".sync", "$KV." + natsx.TLogBucket + ".sync",
				schemas.EventSubject(org, "sync"), "auditrail.dlq.sync"} {
				if _, err := admin.Publish(ctx, subj, []byte("sync")); err != nil {
					t.Fatalf("sync %s: %v", subj, err)
				}
			}
			for deadline := time.Now().Add(10 * time.Second); ; {
				mu.Lock()
				quiet := time.Since(last) > 500*time.Millisecond
				mu.Unlock()
				if quiet || time.Now().After(deadline) {
					break
				}
				time.Sleep(50 * time.Millisecond)
			}
			mu.Lock()
			t.Logf("%s: %d attempts, %d answers, %d messages stored", role, n, replies, accepted)
			mu.Unlock()

			for k, v := range keys {
				e, err := cpKV.Get(ctx, k)
				if err != nil || string(e.Value()) != v {
					t.Errorf("control-plane bucket lost %s after the %s credentials' attempts: %v", k, role, err)
				}
			}
			if e, err := statesKV.Get(ctx, "nonce1"); err != nil || string(e.Value()) != "used" {
				t.Errorf("OAuth states bucket lost its state after the %s credentials' attempts: %v", role, err)
			}
			if e, err := deliverKV.Get(ctx, deliverKey); err != nil || string(e.Value()) != deliverValue {
				t.Errorf("the delivery bucket lost %s after the %s credentials' attempts: %v", deliverKey, role, err)
			}
			if role != natsx.RoleTLog { // its own bucket, by design
				if e, err := tlogKV.Get(ctx, tlogKey); err != nil || string(e.Value()) != tlogValue {
					t.Errorf("the tlog bucket lost %s after the %s credentials' attempts: %v", tlogKey, role, err)
				}
			}
			for _, m := range msgs {
				st, err := admin.Stream(ctx, m.stream)
				if err != nil {
					t.Fatalf("stream %s after the %s credentials' attempts: %v", m.stream, role, err)
				}
				got, err := st.GetMsg(ctx, m.seq)
				if err != nil || got.Subject != m.subject || string(got.Data) != m.data {
					t.Errorf("%s lost message %d (%s) after the %s credentials' attempts: %v", m.stream, m.seq, m.subject, role, err)
				}
			}
			for _, s := range streams {
				st, err := admin.Stream(ctx, s)
				if err != nil {
					t.Fatalf("stream %s after the %s credentials' attempts: %v", s, role, err)
				}
				got, want := st.CachedInfo().Config, configs[s]
				if got.MaxMsgs != want.MaxMsgs || got.MaxAge != want.MaxAge || got.AllowRollup != want.AllowRollup ||
					got.DenyPurge != want.DenyPurge || got.DenyDelete != want.DenyDelete || !slices.Equal(got.Subjects, want.Subjects) {
					t.Errorf("stream %s reconfigured by the %s credentials: %+v", s, role, got)
				}
			}
		})
	}
}
