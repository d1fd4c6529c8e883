package ingest_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/auditrail/auditrail/internal/testenv"
	"github.com/auditrail/auditrail/schemas"
)

// A dead message's headers cannot stall ingest: headers that would make the
// dead letter's publication fail, or act on the DLQ stream
// (Nats-Expected-Stream of the events stream, Nats-Expected-Last-*,
// Nats-Rollup, Nats-TTL), are not copied; only Content-Type and the schema
// are, with the original Nats-Msg-Id kept as Auditrail-Dlq-Msg-Id. Good
// events around them are stored and everything is acknowledged.
func TestPoisonedHeadersDoNotStallIngest(t *testing.T) {
	store := backends()[0].open(t)
	_, nc, js := testenv.NATS(t)
	pub := newPublisher(t, nc)
	cfg := testConfig()
	in, _ := runIngester(t, nc, store, cfg)

	org := uuid.New()
	subject := schemas.EventSubject(org.String(), schemas.KindAudit)
	poisoned := []nats.Header{
		{"Nats-Expected-Stream": {schemas.StreamEvents}, "Nats-Msg-Id": {"poison-1"}},
		// (each holds for the events stream when published, never for the DLQ)
		{"Nats-Expected-Stream": {schemas.StreamEvents}, "Nats-Expected-Last-Subject-Sequence": {"2"}, "Nats-Msg-Id": {"poison-2"}},
		{"Nats-Expected-Last-Msg-Id": {"poison-2"}, "Content-Type": {schemas.ContentMsgpack}, "Auditrail-Schema": {schemas.SchemaAuditV1}},
		{"X-Custom": {"kept out"}, "Nats-Msg-Id": {"poison-4"}},
	}
	good := []*schemas.AuditEvent{event(org, time.Now()), event(org, time.Now())}
	publish(t, pub, good[:1])
	for i, h := range poisoned {
		publishRaw(t, js, subject, []byte{0xc1, byte(i)}, h)
	}
	publish(t, pub, good[1:])

	testenv.Eventually(t, 20*time.Second, "all messages handled", func() bool { return in.Stats().Received >= uint64(len(poisoned)+2) })
	testenv.Eventually(t, 15*time.Second, "all acked", func() bool { ack, pending := consumerPending(t, js, cfg.Durable); return ack == 0 && pending == 0 })
	checkExactlyOnce(t, store, org, good)
	msgs := dlqMessages(t, js)
	if len(msgs) != len(poisoned) {
		t.Fatalf("DLQ holds %d messages, want %d", len(msgs), len(poisoned))
	}
	for _, m := range msgs {
		for k := range m.Header {
			switch k {
			case schemas.HeaderMsgID, schemas.HeaderContentType, schemas.HeaderSchema, schemas.HeaderDLQReason,
				schemas.HeaderDLQSubject, schemas.HeaderDLQStreamSeq, schemas.HeaderDLQMsgID:
			default:
				t.Errorf("dead letter %q carries header %s", m.Data, k)
			}
		}
	}
	if got := msgs[0].Header.Get(schemas.HeaderDLQMsgID); got != "poison-1" {
		t.Errorf("original Nats-Msg-Id kept as %q", got)
	}
	if got := msgs[2].Header.Get(schemas.HeaderSchema); got != schemas.SchemaAuditV1 {
		t.Errorf("schema header not kept: %q", got)
	}
	if st := in.Stats(); st.DeadLettered != uint64(len(poisoned)) || st.SetAside != 0 {
		t.Errorf("stats %+v", st)
	}
}

// A dead letter that cannot be published at all (here the DLQ stream is
// gone) is set aside after a few tries — its message left unacknowledged in
// the stream, delivered again later — and does not hold up the good events
// of its batch, nor the batches after it.
func TestUnpublishableDeadLetterDoesNotBlockOthers(t *testing.T) {
	store := backends()[0].open(t)
	_, nc, js := testenv.NATS(t)
	if err := js.DeleteStream(context.Background(), schemas.StreamDLQ); err != nil {
		t.Fatal(err)
	}
	pub := newPublisher(t, nc)
	cfg := testConfig()
	in, _ := runIngester(t, nc, store, cfg)

	org := uuid.New()
	subject := schemas.EventSubject(org.String(), schemas.KindAudit)
	good := []*schemas.AuditEvent{event(org, time.Now()), event(org, time.Now()), event(org, time.Now())}
	publish(t, pub, good[:1])
	publishRaw(t, js, subject, []byte("\xc1poison"), nil)
	publish(t, pub, good[1:2])
	testenv.Eventually(t, 30*time.Second, "the good events stored", func() bool { return in.Stats().Stored >= 2 })
	publish(t, pub, good[2:])
	testenv.Eventually(t, 30*time.Second, "the later batch stored", func() bool { return in.Stats().Stored >= 3 })
	checkExactlyOnce(t, store, org, good)
	testenv.Eventually(t, 10*time.Second, "the poison set aside", func() bool { return in.Stats().SetAside >= 1 })
	// The poison is not acknowledged: it waits in the stream for its
	// redelivery (NakWithDelay), every good event is acknowledged.
	cons, err := js.Consumer(context.Background(), schemas.StreamEvents, cfg.Durable)
	if err != nil {
		t.Fatal(err)
	}
	info, err := cons.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if info.AckFloor.Stream != 1 || info.NumAckPending+int(info.NumPending) < 1 {
		t.Fatalf("consumer: ack floor %d, ack pending %d, pending %d; want the poison (seq 2) unacknowledged", info.AckFloor.Stream, info.NumAckPending, info.NumPending)
	}
	_ = jetstream.AckExplicitPolicy
}
