package natsx_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/auditrail/auditrail/internal/natsx"
	"github.com/auditrail/auditrail/schemas"
)

// The tamper-evidence log's checkpoints, published by the tlog role on
// each organization's subjects, reach that organization's stream
// credential (issue 22) with their headers, and no other organization's.
func TestStreamCredentialReadsCheckpoints(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	e := newStreamEnv(t, ctx)
	tjs, _ := jetstream.New(e.a.Connect(t, natsx.RoleTLog))
	for _, org := range []string{e.orgA, e.orgB} {
		m := nats.NewMsg(schemas.EventSubject(org, schemas.KindCheckpoint))
		m.Data = []byte("checkpoint of " + org)
		m.Header.Set(schemas.HeaderSchema, schemas.SchemaCheckpointV1)
		m.Header.Set(schemas.HeaderContentType, schemas.ContentTextPlain)
		m.Header.Set(schemas.HeaderMsgID, "cp-"+org)
		if _, err := tjs.PublishMsg(ctx, m); err != nil {
			t.Fatalf("the tlog role publishes a checkpoint: %v", err)
		}
	}
	nc, _, err := e.connect(t, e.issue(t, e.orgA, e.idA, time.Now().Add(time.Hour)), e.idA)
	if err != nil {
		t.Fatal(err)
	}
	js, _ := jetstream.New(nc)
	cons, err := js.Consumer(ctx, schemas.StreamEvents, natsx.StreamConsumer(e.idA))
	if err != nil {
		t.Fatal(err)
	}
	batch, err := cons.Fetch(10, jetstream.FetchMaxWait(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var checkpoints []jetstream.Msg
	for m := range batch.Messages() {
		_ = m.Ack()
		if _, kind, _ := schemas.ParseEventSubject(m.Subject()); kind == schemas.KindCheckpoint {
			checkpoints = append(checkpoints, m)
		}
	}
	if len(checkpoints) != 1 {
		t.Fatalf("the credential of A read %d checkpoints, want its organization's one", len(checkpoints))
	}
	m := checkpoints[0]
	if string(m.Data()) != "checkpoint of "+e.orgA || m.Headers().Get(schemas.HeaderSchema) != schemas.SchemaCheckpointV1 ||
		m.Headers().Get(schemas.HeaderContentType) != schemas.ContentTextPlain {
		t.Fatalf("checkpoint %q, headers %v", m.Data(), m.Headers())
	}
}
