package producers_test

import (
	"context"
	"testing"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/auditrail/auditrail/internal/testenv"
	"github.com/auditrail/auditrail/producers"
)

func BenchmarkPublishMsgs(b *testing.B) {
	_, nc, _ := testenv.NATS(b)
	p, err := producers.New(nc, producers.DefaultConfig(), nil)
	if err != nil {
		b.Fatal(err)
	}
	org := uuid.New()
	msgs := make([]*nats.Msg, b.N)
	for i := range msgs {
		if msgs[i], err = producers.Message(event(org)); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	if err := p.PublishMsgs(context.Background(), msgs); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkBarePublishAsync is the reference: jetstream.PublishMsgAsync with
// nothing around it.
func BenchmarkBarePublishAsync(b *testing.B) {
	_, nc, _ := testenv.NATS(b)
	js, _ := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(4000))
	org := uuid.New()
	msgs := make([]*nats.Msg, b.N)
	for i := range msgs {
		msgs[i], _ = producers.Message(event(org))
	}
	b.ResetTimer()
	for _, m := range msgs {
		if _, err := js.PublishMsgAsync(m); err != nil {
			b.Fatal(err)
		}
	}
	<-js.PublishAsyncComplete()
}
