package natsx_test

import (
	"context"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/auditrail/auditrail/ingest"
	"github.com/auditrail/auditrail/internal/natsx"
	"github.com/auditrail/auditrail/internal/testenv"
	"github.com/auditrail/auditrail/schemas"
)

func TestAnonymousRefused(t *testing.T) {
	a := testenv.NATSAuth(t)
	nc, err := nats.Connect(a.Server.ClientURL(), nats.MaxReconnects(0))
	if err == nil {
		nc.Close()
		t.Fatal("an anonymous connection was accepted")
	}
	if !errors.Is(err, nats.ErrAuthorization) && !strings.Contains(strings.ToLower(err.Error()), "authorization") {
		t.Fatalf("anonymous connection: %v, want an authorization violation", err)
	}
	// Credentials of another operator are refused too.
	other, err := natsx.LoadOrCreateAuth(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := other.WriteCreds(dir); err != nil {
		t.Fatal(err)
	}
	if nc, err := nats.Connect(a.Server.ClientURL(), nats.UserCredentials(natsx.CredsFile(dir, natsx.RoleAdmin)), nats.MaxReconnects(0)); err == nil {
		nc.Close()
		t.Fatal("credentials of a foreign account were accepted")
	}
}

// denied waits for the permission violation of subject on errs.
func denied(t *testing.T, errs <-chan error, subject string) {
	t.Helper()
	deadline := time.After(5 * time.Second)
	for {
		select {
		case err := <-errs:
			if errors.Is(err, nats.ErrPermissionViolation) && strings.Contains(err.Error(), subject) {
				return
			}
		case <-deadline:
			t.Fatalf("no permission violation for %s", subject)
		}
	}
}

func TestRolePermissions(t *testing.T) {
	a := testenv.NATSAuth(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	// The control plane creates the streams, and creates and writes the bucket.
	cpJS, _ := jetstream.New(a.Connect(t, natsx.RoleControlPlane))
	if err := natsx.EnsureStreams(ctx, cpJS, natsx.DefaultStreamConfig()); err != nil {
		t.Fatalf("controlplane ensures the streams: %v", err)
	}
	cpKV, err := cpJS.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: natsx.ControlPlaneBucket, History: 1})
	if err != nil {
		t.Fatalf("controlplane creates the bucket: %v", err)
	}
	if _, err := cpKV.Put(ctx, "org.1", []byte("v1")); err != nil {
		t.Fatalf("controlplane writes the bucket: %v", err)
	}
	if _, err := cpJS.Publish(ctx, schemas.EventSubject("00000000-0000-0000-0000-000000000001", schemas.KindAudit), []byte("x")); err != nil {
		t.Fatalf("controlplane publishes audit events: %v", err)
	}
	// It marks used OAuth states in their own bucket.
	stKV, err := cpJS.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: natsx.OAuthStatesBucket, TTL: 15 * time.Minute})
	if err != nil {
		t.Fatalf("controlplane creates the OAuth states bucket: %v", err)
	}
	if _, err := stKV.Create(ctx, "nonce1", []byte("used")); err != nil {
		t.Fatalf("controlplane marks a state used: %v", err)
	}

	// A refused request gets no answer: it ends with this timeout (the
	// refusal itself arrives at once, as an asynchronous error).
	short := func() (context.Context, context.CancelFunc) { return context.WithTimeout(ctx, time.Second) }

	t.Run("toolrunner reads but cannot write the bucket", func(t *testing.T) {
		nc, errs := a.ConnectErrs(t, natsx.RoleToolRunner)
		js, _ := jetstream.New(nc)
		kv, err := js.KeyValue(ctx, natsx.ControlPlaneBucket)
		if err != nil {
			t.Fatal(err)
		}
		w, err := kv.WatchAll(ctx)
		if err != nil {
			t.Fatalf("watch: %v", err)
		}
		defer w.Stop()
		select {
		case e := <-w.Updates():
			if e == nil || string(e.Value()) != "v1" {
				t.Fatalf("watch delivered %v", e)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("watch delivered nothing")
		}
		if e, err := kv.Get(ctx, "org.1"); err != nil || string(e.Value()) != "v1" {
			t.Fatalf("get: %v", err)
		}
		sctx, c := short()
		defer c()
		if _, err := kv.Put(sctx, "org.1", []byte("forged")); err == nil {
			t.Fatal("toolrunner wrote the control-plane bucket")
		}
		denied(t, errs, "$KV."+natsx.ControlPlaneBucket+".org.1")
		// Not even a connection key: the control plane stores refreshed
		// tokens (a rollup on any key would erase the bucket).
		rev, err := cpKV.Put(ctx, "conn.o.p.u.google", []byte("v1"))
		if err != nil {
			t.Fatal(err)
		}
		uctx0, uc0 := short()
		if _, err := kv.Update(uctx0, "conn.o.p.u.google", []byte("refreshed"), rev); err == nil {
			t.Fatal("toolrunner updated a connection key")
		}
		uc0()
		denied(t, errs, "$KV."+natsx.ControlPlaneBucket+".conn.o.p.u.google")
		for _, key := range []string{"connx.o", "apikey.o.1", "provider.o.google", "outbox.1"} {
			sctx, c := short()
			if _, err := kv.Put(sctx, key, []byte("forged")); err == nil {
				t.Fatalf("toolrunner wrote %s", key)
			}
			c()
			denied(t, errs, "$KV."+natsx.ControlPlaneBucket+"."+key)
		}
		// Nor the used OAuth states (only the control plane marks them).
		sctx4, c4 := short()
		defer c4()
		if _, err := js.CreateOrUpdateKeyValue(sctx4, jetstream.KeyValueConfig{Bucket: natsx.OAuthStatesBucket}); err == nil {
			t.Fatal("toolrunner created the OAuth states bucket")
		}
		// Nor reconfigure it (history 0, a TTL that would erase keys).
		uctx, uc := short()
		defer uc()
		if _, err := js.UpdateKeyValue(uctx, jetstream.KeyValueConfig{Bucket: natsx.ControlPlaneBucket, History: 1, TTL: time.Second}); err == nil {
			t.Fatal("toolrunner reconfigured the control-plane bucket")
		}
		if _, err := js.Publish(ctx, schemas.EventSubject("00000000-0000-0000-0000-000000000001", schemas.KindExecution), []byte("x")); err != nil {
			t.Fatalf("toolrunner publishes executions: %v", err)
		}
		sctx2, c2 := short()
		defer c2()
		if _, err := js.Publish(sctx2, schemas.EventSubject("00000000-0000-0000-0000-000000000001", schemas.KindAudit), []byte("x")); err == nil {
			t.Fatal("toolrunner published an audit event")
		}
	})

	t.Run("ingest cannot publish events", func(t *testing.T) {
		nc, errs := a.ConnectErrs(t, natsx.RoleIngest)
		js, _ := jetstream.New(nc)
		subj := schemas.EventSubject("00000000-0000-0000-0000-000000000002", schemas.KindAudit)
		sctx, c := short()
		defer c()
		if _, err := js.Publish(sctx, subj, []byte("x")); err == nil {
			t.Fatal("ingest published an event")
		}
		denied(t, errs, subj)
		if _, err := js.Publish(ctx, "auditrail.dlq.test", []byte("x")); err != nil {
			t.Fatalf("ingest writes the DLQ: %v", err)
		}
		if _, err := js.Publish(ctx, schemas.CommitSubject("00000000-0000-0000-0000-000000000002", schemas.KindAudit), nil); err != nil {
			t.Fatalf("ingest marks a commit: %v", err)
		}
		// It consumes the stream with a durable.
		cons, err := js.CreateOrUpdateConsumer(ctx, schemas.StreamEvents, jetstream.ConsumerConfig{Durable: "test-ingest", AckPolicy: jetstream.AckExplicitPolicy})
		if err != nil {
			t.Fatalf("consumer: %v", err)
		}
		b, err := cons.Fetch(1, jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for m := range b.Messages() {
			if err := m.DoubleAck(ctx); err != nil {
				t.Fatalf("ack: %v", err)
			}
			n++
		}
		if n != 1 {
			t.Fatalf("fetched %d", n)
		}
		// It cannot change the stream.
		sctx3, c3 := short()
		defer c3()
		if _, err := js.UpdateStream(sctx3, jetstream.StreamConfig{Name: schemas.StreamEvents, Subjects: []string{"x.>"}}); err == nil {
			t.Fatal("ingest updated the stream")
		}
	})

	t.Run("producer neither reads nor writes the bucket", func(t *testing.T) {
		nc, errs := a.ConnectErrs(t, natsx.RoleProducer)
		js, _ := jetstream.New(nc)
		if _, err := js.Publish(ctx, schemas.EventSubject("00000000-0000-0000-0000-000000000003", schemas.KindAudit), []byte("x")); err != nil {
			t.Fatalf("producer publishes events: %v", err)
		}
		sctx, c := short()
		defer c()
		if _, err := js.KeyValue(sctx, natsx.ControlPlaneBucket); err == nil {
			t.Fatal("producer opened the bucket")
		}
		denied(t, errs, "$JS.API.STREAM.INFO.KV_"+natsx.ControlPlaneBucket)
		sctx2, c2 := short()
		defer c2()
		if _, err := js.Publish(sctx2, "$KV."+natsx.ControlPlaneBucket+".org.1", []byte("forged")); err == nil {
			t.Fatal("producer wrote the bucket")
		}
		denied(t, errs, "$KV."+natsx.ControlPlaneBucket+".org.1")
		// Nor may it listen to another role's replies.
		if _, err := nc.SubscribeSync(natsx.InboxPrefix(natsx.RoleControlPlane) + ".>"); err != nil {
			t.Fatal(err)
		}
		denied(t, errs, natsx.InboxPrefix(natsx.RoleControlPlane))
	})

	t.Run("query reads the bucket and uses the rate limits", func(t *testing.T) {
		nc, errs := a.ConnectErrs(t, natsx.RoleQuery)
		js, _ := jetstream.New(nc)
		for _, b := range natsx.RateLimitBuckets {
			kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: b, Storage: jetstream.MemoryStorage})
			if err != nil {
				t.Fatalf("rate-limit bucket %s: %v", b, err)
			}
			if _, err := kv.Create(ctx, "k", []byte("1")); err != nil {
				t.Fatal(err)
			}
		}
		kv, err := js.KeyValue(ctx, natsx.ControlPlaneBucket)
		if err != nil {
			t.Fatal(err)
		}
		sctx, c := short()
		defer c()
		if err := kv.Delete(sctx, "org.1"); err == nil {
			t.Fatal("query deleted a bucket entry")
		}
		denied(t, errs, "$KV."+natsx.ControlPlaneBucket)
		// It records exports as audit events, and publishes nothing else.
		if _, err := js.Publish(ctx, schemas.EventSubject("00000000-0000-0000-0000-000000000004", schemas.KindAudit), []byte("x")); err != nil {
			t.Fatalf("query publishes audit events: %v", err)
		}
		subj := schemas.EventSubject("00000000-0000-0000-0000-000000000004", schemas.KindExecution)
		if err := nc.Publish(subj, []byte("x")); err != nil {
			t.Fatal(err)
		}
		denied(t, errs, subj)
	})

	t.Run("tlog publishes checkpoints only and owns its bucket", func(t *testing.T) {
		nc, errs := a.ConnectErrs(t, natsx.RoleTLog)
		js, _ := jetstream.New(nc)
		kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: natsx.TLogBucket})
		if err != nil {
			t.Fatalf("tlog creates its bucket: %v", err)
		}
		if _, err := kv.Create(ctx, "key-current", []byte(`{"key_id":"0a0b0c0d"}`)); err != nil {
			t.Fatalf("tlog writes its bucket: %v", err)
		}
		org := "00000000-0000-0000-0000-000000000005"
		if _, err := js.Publish(ctx, schemas.EventSubject(org, schemas.KindCheckpoint), []byte("note")); err != nil {
			t.Fatalf("tlog publishes a checkpoint: %v", err)
		}
		for _, kind := range []string{schemas.KindAudit, schemas.KindExecution} {
			subj := schemas.EventSubject(org, kind)
			sctx, c := short()
			if _, err := js.Publish(sctx, subj, []byte("x")); err == nil {
				t.Fatalf("tlog published an %s event", kind)
			}
			c()
		}
		// Its durable follows the commit marks: created, pulled, acked.
		ajs, _ := jetstream.New(a.Connect(t, natsx.RoleAdmin))
		if _, err := ajs.Publish(ctx, schemas.CommitSubject(org, schemas.KindAudit), nil); err != nil {
			t.Fatal(err)
		}
		cons, err := js.CreateOrUpdateConsumer(ctx, schemas.StreamCommits, jetstream.ConsumerConfig{Durable: natsx.TLogDurable,
			AckPolicy: jetstream.AckAllPolicy})
		if err != nil {
			t.Fatalf("tlog creates its durable: %v", err)
		}
		b, err := cons.Fetch(1, jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		for m := range b.Messages() {
			if err := m.DoubleAck(ctx); err != nil {
				t.Fatalf("ack: %v", err)
			}
		}
		// The time of an event by its sequence (a seal's); but no durable
		// of its own on the event stream any more, only the deletion of
		// the one it had there.
		if _, err := js.Stream(ctx, schemas.StreamEvents); err != nil {
			t.Fatalf("tlog reads the event stream's info: %v", err)
		}
		ev, err := ajs.Stream(ctx, schemas.StreamEvents)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ev.GetMsg(ctx, ev.CachedInfo().State.FirstSeq); err != nil {
			t.Fatalf("admin reads a message: %v", err)
		}
		tev, _ := js.Stream(ctx, schemas.StreamEvents)
		if _, err := tev.GetMsg(ctx, ev.CachedInfo().State.FirstSeq); err != nil {
			t.Fatalf("tlog reads an event's time by its sequence: %v", err)
		}
		ectx, ec := short()
		if _, err := js.CreateOrUpdateConsumer(ectx, schemas.StreamEvents, jetstream.ConsumerConfig{Durable: natsx.TLogDurable, AckPolicy: jetstream.AckAllPolicy}); err == nil {
			t.Fatal("tlog created its old durable on the event stream")
		}
		ec()
		if _, err := ajs.CreateOrUpdateConsumer(ctx, schemas.StreamEvents, jetstream.ConsumerConfig{Durable: natsx.TLogDurable, AckPolicy: jetstream.AckAllPolicy}); err != nil {
			t.Fatal(err)
		}
		if err := js.DeleteConsumer(ctx, schemas.StreamEvents, natsx.TLogDurable); err != nil {
			t.Fatalf("tlog deletes its old durable on the event stream: %v", err)
		}
		// Ingest's durables: their info (watermarks), never a pull.
		if _, err := ajs.CreateOrUpdateConsumer(ctx, schemas.StreamEvents, jetstream.ConsumerConfig{Durable: natsx.IngestDurables[0], AckPolicy: jetstream.AckExplicitPolicy}); err != nil {
			t.Fatal(err)
		}
		ing, err := js.Consumer(ctx, schemas.StreamEvents, natsx.IngestDurables[0])
		if err != nil {
			t.Fatalf("tlog reads ingest's consumer info: %v", err)
		}
		if b, err := ing.Fetch(1, jetstream.FetchMaxWait(time.Second)); err == nil {
			for range b.Messages() {
				t.Fatal("tlog pulled from ingest's durable")
			}
		}
		sctx, c := short()
		defer c()
		// Another durable, the control-plane bucket, the stream: refused.
		if _, err := js.CreateOrUpdateConsumer(sctx, schemas.StreamEvents, jetstream.ConsumerConfig{Durable: "other", AckPolicy: jetstream.AckExplicitPolicy}); err == nil {
			t.Fatal("tlog created another durable")
		}
		if err := nc.Publish("$KV."+natsx.ControlPlaneBucket+".org.1", []byte("forged")); err != nil {
			t.Fatal(err)
		}
		denied(t, errs, "$KV."+natsx.ControlPlaneBucket+".org.1")
		dctx, dc := short()
		defer dc()
		if err := js.DeleteStream(dctx, schemas.StreamEvents); err == nil {
			t.Fatal("tlog deleted the event stream")
		}
		denied(t, errs, "$JS.API.STREAM.DELETE."+schemas.StreamEvents)
	})

	t.Run("query reads the tlog bucket", func(t *testing.T) {
		nc, errs := a.ConnectErrs(t, natsx.RoleQuery)
		js, _ := jetstream.New(nc)
		kv, err := js.KeyValue(ctx, natsx.TLogBucket)
		if err != nil {
			t.Fatalf("query opens the tlog bucket: %v", err)
		}
		if e, err := kv.Get(ctx, "key-current"); err != nil || !strings.Contains(string(e.Value()), "0a0b0c0d") {
			t.Fatalf("query reads the current key: %v", err)
		}
		sctx, c := short()
		defer c()
		if _, err := kv.Put(sctx, "key-current", []byte("forged")); err == nil {
			t.Fatal("query wrote the tlog bucket")
		}
		denied(t, errs, "$KV."+natsx.TLogBucket+".key-current")
	})

	// The organizations' witnesses: the tlog role reads (and watches) the
	// control-plane bucket to find them, and writes it no more than before.
	t.Run("tlog reads but cannot write the control-plane bucket", func(t *testing.T) {
		nc, errs := a.ConnectErrs(t, natsx.RoleTLog)
		js, _ := jetstream.New(nc)
		kv, err := js.KeyValue(ctx, natsx.ControlPlaneBucket)
		if err != nil {
			t.Fatalf("tlog opens the control-plane bucket: %v", err)
		}
		w, err := kv.WatchAll(ctx)
		if err != nil {
			t.Fatalf("watch: %v", err)
		}
		defer w.Stop()
		select {
		case e := <-w.Updates():
			if e == nil || e.Key() != "org.1" {
				t.Fatalf("watch delivered %v", e)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("watch delivered nothing")
		}
		if e, err := kv.Get(ctx, "org.1"); err != nil || string(e.Value()) != "v1" {
			t.Fatalf("get: %v", err)
		}
		for _, key := range []string{"org.1", "witnesses.1"} {
			sctx, c := short()
			if _, err := kv.Put(sctx, key, []byte("forged")); err == nil {
				t.Fatalf("tlog wrote %s", key)
			}
			c()
			denied(t, errs, "$KV."+natsx.ControlPlaneBucket+"."+key)
		}
		sctx, c := short()
		defer c()
		if err := kv.Purge(sctx, "org.1"); err == nil {
			t.Fatal("tlog purged a key of the control-plane bucket")
		}
	})

	// The control plane reads the witnesses' statuses in the tlog bucket
	// (GET …/witnesses) and cannot forge one.
	t.Run("controlplane reads but cannot write the tlog bucket", func(t *testing.T) {
		nc, errs := a.ConnectErrs(t, natsx.RoleControlPlane)
		js, _ := jetstream.New(nc)
		kv, err := js.KeyValue(ctx, natsx.TLogBucket)
		if err != nil {
			t.Fatalf("controlplane opens the tlog bucket: %v", err)
		}
		if e, err := kv.Get(ctx, "key-current"); err != nil || !strings.Contains(string(e.Value()), "0a0b0c0d") {
			t.Fatalf("controlplane reads the tlog bucket: %v", err)
		}
		for _, key := range []string{"wstatus.o.audit_logs.w", "witnesses.operator", "key-current", "checkpointer"} {
			sctx, c := short()
			if _, err := kv.Put(sctx, key, []byte("forged")); err == nil {
				t.Fatalf("controlplane wrote %s in the tlog bucket", key)
			}
			c()
			denied(t, errs, "$KV."+natsx.TLogBucket+"."+key)
		}
		uctx, uc := short()
		defer uc()
		if _, err := js.UpdateKeyValue(uctx, jetstream.KeyValueConfig{Bucket: natsx.TLogBucket, TTL: time.Second}); err == nil {
			t.Fatal("controlplane reconfigured the tlog bucket")
		}
		dctx, dc := short()
		defer dc()
		if err := js.DeleteKeyValue(dctx, natsx.TLogBucket); err == nil {
			t.Fatal("controlplane deleted the tlog bucket")
		}
	})

	// Nothing forged reached the bucket.
	if e, err := cpKV.Get(ctx, "org.1"); err != nil || string(e.Value()) != "v1" {
		t.Fatalf("bucket entry after the attempts: %v %v", e, err)
	}
}

func TestAuthKeysKeptAcrossRestarts(t *testing.T) {
	dir := t.TempDir()
	a1, err := natsx.LoadOrCreateAuth(dir)
	if err != nil {
		t.Fatal(err)
	}
	a2, err := natsx.LoadOrCreateAuth(dir)
	if err != nil {
		t.Fatal(err)
	}
	if a1.Account() != a2.Account() || a1.SystemAccount() != a2.SystemAccount() {
		t.Fatal("keys changed across loads")
	}
	if err := a1.WriteCreds(dir); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		info, _ := e.Info()
		if info.Mode().Perm() != 0o600 {
			t.Errorf("%s has mode %v, want 0600", e.Name(), info.Mode().Perm())
		}
	}
	for _, r := range natsx.Roles {
		if _, err := os.Stat(natsx.CredsFile(dir, r)); err != nil {
			t.Errorf("creds of %s: %v", r, err)
		}
	}
	if _, err := natsx.Permissions("nobody"); !errors.Is(err, natsx.ErrInvalidOption) {
		t.Fatalf("unknown role: %v", err)
	}
	conf, err := a1.ServerConf()
	if err != nil || !strings.Contains(conf, "resolver: MEMORY") || !strings.Contains(conf, a1.Account()) {
		t.Fatalf("server conf: %v\n%s", err, conf)
	}
}

// The query role creates an ordered consumer filtered
// to one org's subjects, receives its deliveries and deletes it; it cannot
// create an unfiltered or durable consumer, touch ingest's durable, publish
// anything but audit events, nor change or delete the stream.
func TestQueryLiveStreamPermissions(t *testing.T) {
	a := testenv.NATSAuth(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	short := func() (context.Context, context.CancelFunc) { return context.WithTimeout(ctx, 700*time.Millisecond) }
	org := "00000000-0000-0000-0000-000000000005"
	admin, _ := jetstream.New(a.Connect(t, natsx.RoleAdmin))
	if _, err := admin.CreateOrUpdateConsumer(ctx, schemas.StreamEvents, jetstream.ConsumerConfig{Durable: natsx.IngestDurables[0], AckPolicy: jetstream.AckExplicitPolicy,
		FilterSubject: schemas.SubjectAuditAll}); err != nil {
		t.Fatal(err)
	}
	nc, errs := a.ConnectErrs(t, natsx.RoleQuery)
	js, _ := jetstream.New(nc)
	cons, err := js.OrderedConsumer(ctx, schemas.StreamEvents, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{schemas.EventSubject(org, schemas.KindAudit)}, DeliverPolicy: jetstream.DeliverNewPolicy})
	if err != nil {
		t.Fatalf("query creates a filtered ordered consumer: %v", err)
	}
	it, err := cons.Messages()
	if err != nil {
		t.Fatal(err)
	}
	defer it.Stop()
	for _, o := range []string{"00000000-0000-0000-0000-000000000006", org} {
		if _, err := admin.Publish(ctx, schemas.EventSubject(o, schemas.KindAudit), []byte(o)); err != nil {
			t.Fatal(err)
		}
	}
	m, err := it.Next(jetstream.NextMaxWait(5 * time.Second))
	if err != nil {
		t.Fatalf("query receives the consumer's deliveries: %v", err)
	}
	if string(m.Data()) != org || m.Subject() != schemas.EventSubject(org, schemas.KindAudit) {
		t.Fatalf("delivered %s on %s", m.Data(), m.Subject())
	}
	if _, err := cons.Info(ctx); err != nil {
		t.Fatalf("query reads its consumer's info: %v", err)
	}
	if err := js.DeleteConsumer(ctx, schemas.StreamEvents, cons.CachedInfo().Name); err != nil {
		t.Fatalf("query deletes its consumer: %v", err)
	}

	refused := []struct {
		name string
		try  func(ctx context.Context) error
		subj string
	}{
		{"an unfiltered consumer", func(ctx context.Context) error {
			_, err := js.CreateOrUpdateConsumer(ctx, schemas.StreamEvents, jetstream.ConsumerConfig{Name: "q1", AckPolicy: jetstream.AckNonePolicy})
			return err
		}, "$JS.API.CONSUMER.CREATE." + schemas.StreamEvents + ".q1"},
		{"a consumer filtered outside the events", func(ctx context.Context) error {
			_, err := js.CreateOrUpdateConsumer(ctx, schemas.StreamEvents, jetstream.ConsumerConfig{Name: "q2", FilterSubject: "auditrail.dlq.>", AckPolicy: jetstream.AckNonePolicy})
			return err
		}, "$JS.API.CONSUMER.CREATE." + schemas.StreamEvents + ".q2"},
		{"a durable consumer (the legacy create)", func(ctx context.Context) error {
			_, err := nc.Request("$JS.API.CONSUMER.DURABLE.CREATE."+schemas.StreamEvents+".q3", []byte(`{}`), 700*time.Millisecond)
			return err
		}, "$JS.API.CONSUMER.DURABLE.CREATE." + schemas.StreamEvents + ".q3"},
		{"redefining ingest's durable", func(ctx context.Context) error {
			_, err := js.CreateOrUpdateConsumer(ctx, schemas.StreamEvents, jetstream.ConsumerConfig{Name: natsx.IngestDurables[0], FilterSubject: schemas.EventSubject(org, ">"), AckPolicy: jetstream.AckNonePolicy})
			return err
		}, "$JS.API.CONSUMER.CREATE." + schemas.StreamEvents + "." + natsx.IngestDurables[0]},
		{"pulling from ingest's durable", func(ctx context.Context) error {
			_, err := nc.Request("$JS.API.CONSUMER.MSG.NEXT."+schemas.StreamEvents+"."+natsx.IngestDurables[0], []byte(`{"batch":1,"no_wait":true}`), 700*time.Millisecond)
			return err
		}, "$JS.API.CONSUMER.MSG.NEXT." + schemas.StreamEvents + "." + natsx.IngestDurables[0]},
		{"deleting ingest's durable", func(ctx context.Context) error {
			return js.DeleteConsumer(ctx, schemas.StreamEvents, natsx.IngestDurables[0])
		}, "$JS.API.CONSUMER.DELETE." + schemas.StreamEvents + "." + natsx.IngestDurables[0]},
		{"deleting the stream", func(ctx context.Context) error {
			return js.DeleteStream(ctx, schemas.StreamEvents)
		}, "$JS.API.STREAM.DELETE." + schemas.StreamEvents},
		{"purging the stream", func(ctx context.Context) error {
			s, err := js.Stream(ctx, schemas.StreamEvents)
			if err != nil {
				return err
			}
			return s.Purge(ctx)
		}, "$JS.API.STREAM.PURGE." + schemas.StreamEvents},
		{"updating the stream", func(ctx context.Context) error {
			_, err := js.UpdateStream(ctx, jetstream.StreamConfig{Name: schemas.StreamEvents, Subjects: []string{"x.>"}})
			return err
		}, "$JS.API.STREAM.UPDATE." + schemas.StreamEvents},
		{"publishing an execution", func(ctx context.Context) error {
			_, err := js.Publish(ctx, schemas.EventSubject(org, schemas.KindExecution), []byte("x"))
			return err
		}, schemas.EventSubject(org, schemas.KindExecution)},
		{"publishing to the DLQ", func(ctx context.Context) error {
			_, err := js.Publish(ctx, "auditrail.dlq.x", []byte("x"))
			return err
		}, "auditrail.dlq.x"},
		{"acking", func(ctx context.Context) error {
			return nc.Publish("$JS.ACK."+schemas.StreamEvents+".x.1.1.1.1.0", []byte("+ACK"))
		}, "$JS.ACK." + schemas.StreamEvents},
	}
	for _, r := range refused {
		sctx, c := short()
		err := r.try(sctx)
		c()
		if err == nil && !strings.HasPrefix(r.subj, "$JS.ACK") {
			t.Fatalf("query succeeded in %s", r.name)
		}
		denied(t, errs, r.subj)
	}
	// The stream and ingest's durable are still there.
	if _, err := admin.Consumer(ctx, schemas.StreamEvents, natsx.IngestDurables[0]); err != nil {
		t.Fatalf("ingest's durable: %v", err)
	}
}

// The durables the query role may not touch are ingest's defaults.
func TestIngestDurablesDenied(t *testing.T) {
	if got, want := natsx.IngestDurables, []string{ingest.DefaultConfig().Durable, ingest.ExecutionDurable}; !slices.Equal(got, want) {
		t.Fatalf("natsx.IngestDurables = %v, ingest's defaults are %v", got, want)
	}
}
