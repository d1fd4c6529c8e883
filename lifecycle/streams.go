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

var _ MessageEraser = (*JetStream)(nil)

// EraseMessages implements MessageEraser: an ordered consumer reads the
// subject's messages up to the stream's last sequence, and each that
// matches is deleted (its payload overwritten on disk).
func (s *JetStream) EraseMessages(ctx context.Context, stream, subject string, match func(msgID string, data []byte) bool) (int, error) {
	st, err := s.js.Stream(ctx, stream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("stream %s: %w", stream, err)
	}
	info, err := st.Info(ctx, jetstream.WithSubjectFilter(subject))
	if err != nil {
		return 0, fmt.Errorf("stream %s: %w", stream, err)
	}
	total := 0
	for _, n := range info.State.Subjects {
		total += int(n)
	}
	if total == 0 {
		return 0, nil
	}
	last := info.State.LastSeq
	c, err := st.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{FilterSubjects: []string{subject}})
	if err != nil {
		return 0, fmt.Errorf("read %s: %w", subject, err)
	}
	var del []uint64
	seen := 0
	for seen < total {
		batch, err := c.Fetch(min(total-seen, 1000), jetstream.FetchMaxWait(2*time.Second))
		if err != nil {
			return 0, fmt.Errorf("read %s: %w", subject, err)
		}
		got := 0
		for m := range batch.Messages() {
			got++
			md, err := m.Metadata()
			if err != nil {
				continue
			}
			if md.Sequence.Stream > last {
				seen = total
				break
			}
			if match(m.Headers().Get(schemas.HeaderMsgID), m.Data()) {
				del = append(del, md.Sequence.Stream)
			}
		}
		if got == 0 {
			break
		}
		seen += got
	}
	for _, seq := range del {
		if err := st.SecureDeleteMsg(ctx, seq); err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) {
			return 0, fmt.Errorf("delete message %d of %s: %w", seq, stream, err)
		}
	}
	return len(del), nil
}
