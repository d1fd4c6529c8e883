package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/auditrail/auditrail/schemas"
)

// JetStream purges the event stream and the dead-letter stream, one
// organization's subject at a time.
type JetStream struct {
	js jetstream.JetStream
}

var _ Streams = (*JetStream)(nil)

// NewJetStream returns the purger of the streams of js.
func NewJetStream(js jetstream.JetStream) *JetStream { return &JetStream{js: js} }

// PurgeThrough implements Streams on schemas.StreamEvents.
func (s *JetStream) PurgeThrough(ctx context.Context, subject string, seq uint64) error {
	st, err := s.js.Stream(ctx, schemas.StreamEvents)
	if err != nil {
		return fmt.Errorf("stream %s: %w", schemas.StreamEvents, err)
	}
	// WithPurgeSequence purges below (not including) its sequence.
	if err := st.Purge(ctx, jetstream.WithPurgeSubject(subject), jetstream.WithPurgeSequence(seq+1)); err != nil {
		return fmt.Errorf("purge %s through %d: %w", subject, seq, err)
	}
	return nil
}

// PurgeBefore implements Streams on schemas.StreamDLQ: the first message
// of subject stored at or after t (an ordered consumer started at t) bounds
// the purge; without one, the stream's last sequence read before looking
// does (a message stored meanwhile comes after it).
func (s *JetStream) PurgeBefore(ctx context.Context, subject string, t time.Time) error {
	st, err := s.js.Stream(ctx, schemas.StreamDLQ)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("stream %s: %w", schemas.StreamDLQ, err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		return fmt.Errorf("stream %s: %w", schemas.StreamDLQ, err)
	}
	bound := info.State.LastSeq + 1
	start := t.UTC()
	c, err := st.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{FilterSubjects: []string{subject},
		DeliverPolicy: jetstream.DeliverByStartTimePolicy, OptStartTime: &start})
	if err != nil {
		return fmt.Errorf("find the first dead letter of %s after %s: %w", subject, start.Format(time.RFC3339), err)
	}
	msgs, err := c.Fetch(1, jetstream.FetchMaxWait(time.Second))
	if err != nil {
		return fmt.Errorf("find the first dead letter of %s after %s: %w", subject, start.Format(time.RFC3339), err)
	}
	for m := range msgs.Messages() {
		if md, err := m.Metadata(); err == nil && md.Sequence.Stream < bound {
			bound = md.Sequence.Stream
		}
	}
	if err := msgs.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) && !errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("find the first dead letter of %s: %w", subject, err)
	}
	if bound <= 1 {
		return nil
	}
	if err := st.Purge(ctx, jetstream.WithPurgeSubject(subject), jetstream.WithPurgeSequence(bound)); err != nil {
		return fmt.Errorf("purge %s below %d: %w", subject, bound, err)
	}
	return nil
}
