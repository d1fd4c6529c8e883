package natsx_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/auditrail/auditrail/internal/natsx"
	"github.com/auditrail/auditrail/internal/testenv"
	"github.com/auditrail/auditrail/schemas"
)

// The deliver role reads the control-plane bucket, writes its own bucket,
// and keeps a durable consumer per destination filtered to one org's
// subjects: it pulls, acknowledges, reads and deletes it. It cannot write
// the control-plane bucket, publish events, touch ingest's durables (an
// ack there would lose ingest's messages), create a consumer outside the
// event subjects, nor change the stream.
func TestDeliverRolePermissions(t *testing.T) {
	a := testenv.NATSAuth(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	short := func() (context.Context, context.CancelFunc) { return context.WithTimeout(ctx, 700*time.Millisecond) }
	org := "00000000-0000-0000-0000-000000000007"
	admin, _ := jetstream.New(a.Connect(t, natsx.RoleAdmin))
	if _, err := admin.CreateOrUpdateConsumer(ctx, schemas.StreamEvents, jetstream.ConsumerConfig{Durable: natsx.IngestDurables[0],
		AckPolicy: jetstream.AckExplicitPolicy, FilterSubject: schemas.SubjectAuditAll}); err != nil {
		t.Fatal(err)
	}
	cpJS, _ := jetstream.New(a.Connect(t, natsx.RoleControlPlane))
	cpKV, err := cpJS.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: natsx.ControlPlaneBucket, History: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cpKV.Put(ctx, "dest."+org+".d1", []byte("v1")); err != nil {
		t.Fatal(err)
	}
	for _, o := range []string{"00000000-0000-0000-0000-000000000008", org} {
		if _, err := admin.Publish(ctx, schemas.EventSubject(o, schemas.KindAudit), []byte(o)); err != nil {
			t.Fatal(err)
		}
	}

	nc, errs := a.ConnectErrs(t, natsx.RoleDeliver)
	js, _ := jetstream.New(nc)
	kv, err := js.KeyValue(ctx, natsx.ControlPlaneBucket)
	if err != nil {
		t.Fatalf("deliver looks the control-plane bucket up: %v", err)
	}
	if e, err := kv.Get(ctx, "dest."+org+".d1"); err != nil || string(e.Value()) != "v1" {
		t.Fatalf("deliver reads a destination: %v", err)
	}
	own, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: natsx.DeliverBucket, History: 1})
	if err != nil {
		t.Fatalf("deliver creates its bucket: %v", err)
	}
	if _, err := own.Put(ctx, "status.d1", []byte(`{}`)); err != nil {
		t.Fatalf("deliver writes its bucket: %v", err)
	}
	cons, err := js.CreateOrUpdateConsumer(ctx, schemas.StreamEvents, jetstream.ConsumerConfig{Durable: "deliver_d1_0",
		FilterSubject: schemas.EventSubject(org, ">"), AckPolicy: jetstream.AckExplicitPolicy, DeliverPolicy: jetstream.DeliverAllPolicy})
	if err != nil {
		t.Fatalf("deliver creates a durable consumer filtered to one org: %v", err)
	}
	b, err := cons.Fetch(10, jetstream.FetchMaxWait(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var got []jetstream.Msg
	for m := range b.Messages() {
		got = append(got, m)
	}
	if len(got) != 1 || string(got[0].Data()) != org {
		t.Fatalf("deliver fetched %d messages", len(got))
	}
	if err := got[0].DoubleAck(ctx); err != nil {
		t.Fatalf("deliver acknowledges: %v", err)
	}
	st, _ := js.Stream(ctx, schemas.StreamEvents)
	names := 0
	for range st.ListConsumers(ctx).Info() {
		names++
	}
	if names == 0 {
		t.Fatal("deliver lists the consumers")
	}
	if err := js.DeleteConsumer(ctx, schemas.StreamEvents, "deliver_d1_0"); err != nil {
		t.Fatalf("deliver deletes its consumer: %v", err)
	}

	refused := []struct {
		name string
		try  func(ctx context.Context) error
		subj string
	}{
		{"writing the control-plane bucket", func(ctx context.Context) error {
			_, err := kv.Put(ctx, "dest."+org+".d1", []byte("forged"))
			return err
		}, "$KV." + natsx.ControlPlaneBucket + ".dest." + org + ".d1"},
		{"publishing an event", func(ctx context.Context) error {
			_, err := js.Publish(ctx, schemas.EventSubject(org, schemas.KindAudit), []byte("x"))
			return err
		}, schemas.EventSubject(org, schemas.KindAudit)},
		{"a consumer filtered outside the events", func(ctx context.Context) error {
			_, err := js.CreateOrUpdateConsumer(ctx, schemas.StreamEvents, jetstream.ConsumerConfig{Durable: "d2", FilterSubject: "auditrail.dlq.>", AckPolicy: jetstream.AckAllPolicy})
			return err
		}, "$JS.API.CONSUMER.CREATE." + schemas.StreamEvents + ".d2"},
		{"an unfiltered consumer", func(ctx context.Context) error {
			_, err := js.CreateOrUpdateConsumer(ctx, schemas.StreamEvents, jetstream.ConsumerConfig{Durable: "d3", AckPolicy: jetstream.AckAllPolicy})
			return err
		}, "$JS.API.CONSUMER.CREATE." + schemas.StreamEvents + ".d3"},
		{"pulling from ingest's durable", func(ctx context.Context) error {
			_, err := nc.Request("$JS.API.CONSUMER.MSG.NEXT."+schemas.StreamEvents+"."+natsx.IngestDurables[0], []byte(`{"batch":1,"no_wait":true}`), 700*time.Millisecond)
			return err
		}, "$JS.API.CONSUMER.MSG.NEXT." + schemas.StreamEvents + "." + natsx.IngestDurables[0]},
		{"acknowledging for ingest's durable", func(ctx context.Context) error {
			return nc.Publish("$JS.ACK."+schemas.StreamEvents+"."+natsx.IngestDurables[0]+".1.1.1.1.0", []byte("+ACK"))
		}, "$JS.ACK." + schemas.StreamEvents + "." + natsx.IngestDurables[0]},
		{"deleting ingest's durable", func(ctx context.Context) error {
			return js.DeleteConsumer(ctx, schemas.StreamEvents, natsx.IngestDurables[0])
		}, "$JS.API.CONSUMER.DELETE." + schemas.StreamEvents + "." + natsx.IngestDurables[0]},
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
	}
	for _, r := range refused {
		sctx, c := short()
		err := r.try(sctx)
		c()
		if err == nil && !strings.HasPrefix(r.subj, "$JS.ACK") {
			t.Fatalf("deliver succeeded in %s", r.name)
		}
		denied(t, errs, r.subj)
	}
	if _, err := admin.Consumer(ctx, schemas.StreamEvents, natsx.IngestDurables[0]); err != nil {
		t.Fatalf("ingest's durable: %v", err)
	}
	if e, err := cpKV.Get(ctx, "dest."+org+".d1"); err != nil || string(e.Value()) != "v1" {
		t.Fatalf("the control-plane bucket changed: %v", err)
	}
}
