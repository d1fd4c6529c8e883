package ingest

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/auditrail/auditrail/schemas"
)

// DeadLetter is one message of the DLQ stream, as an operator reviews it
// before replaying it.
type DeadLetter struct {
	// Seq is its sequence in the DLQ stream (what replay and delete take).
	Seq  uint64    `json:"seq"`
	Time time.Time `json:"time"`
	// Subject is the subject the message was first published to.
	Subject string `json:"subject"`
	// Org is the organization of Subject.
	Org       string `json:"organization_id"`
	Kind      string `json:"kind"`
	Reason    string `json:"reason"`
	MsgID     string `json:"msg_id,omitempty"`
	StreamSeq string `json:"stream_seq,omitempty"`
	Bytes     int    `json:"bytes"`

	data   []byte
	header nats.Header
}

// ErrNotReplayable: a dead letter whose original subject is not an event
// subject (auditrail.events.<org>.<audit|execution>) is never republished.
var ErrNotReplayable = errors.New("dead letter cannot be replayed")

// DeadLetterFilter selects dead letters: an organization (uuid.Nil: any)
// and sequences (empty: all).
type DeadLetterFilter struct {
	Org  uuid.UUID
	Seqs map[uint64]bool
}

func (f DeadLetterFilter) match(d DeadLetter) bool {
	if f.Org != uuid.Nil && d.Org != f.Org.String() {
		return false
	}
	return len(f.Seqs) == 0 || f.Seqs[d.Seq]
}

// ListDeadLetters reads the DLQ stream in order and answers the dead letters
// that match f, at most limit of them (0: no limit).
func ListDeadLetters(ctx context.Context, js jetstream.JetStream, f DeadLetterFilter, limit int) ([]DeadLetter, error) {
	st, err := js.Stream(ctx, schemas.StreamDLQ)
	if err != nil {
		return nil, fmt.Errorf("stream %s: %w", schemas.StreamDLQ, err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("stream %s: %w", schemas.StreamDLQ, err)
	}
	var out []DeadLetter
	if info.State.Msgs == 0 {
		return out, nil
	}
	subject := schemas.SubjectDLQAll
	if f.Org != uuid.Nil {
		subject = "auditrail.dlq." + f.Org.String() + ".>"
	}
	cons, err := st.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{FilterSubjects: []string{subject}, DeliverPolicy: jetstream.DeliverAllPolicy})
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", schemas.StreamDLQ, err)
	}
	for {
		m, err := cons.Next(jetstream.FetchMaxWait(time.Second))
		if errors.Is(err, nats.ErrTimeout) || errors.Is(err, context.DeadlineExceeded) {
			return out, nil // read to the end
		}
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", schemas.StreamDLQ, err)
		}
		meta, err := m.Metadata()
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", schemas.StreamDLQ, err)
		}
		d := deadLetterOf(meta.Sequence.Stream, meta.Timestamp, m.Headers(), m.Data())
		if f.match(d) {
			out = append(out, d)
			if limit > 0 && len(out) >= limit {
				return out, nil
			}
		}
		if meta.NumPending == 0 {
			return out, nil
		}
	}
}

func deadLetterOf(seq uint64, at time.Time, h nats.Header, data []byte) DeadLetter {
	d := DeadLetter{Seq: seq, Time: at.UTC(), Subject: h.Get(schemas.HeaderDLQSubject), Reason: h.Get(schemas.HeaderDLQReason),
		MsgID: h.Get(schemas.HeaderDLQMsgID), StreamSeq: h.Get(schemas.HeaderDLQStreamSeq), Bytes: len(data), data: data, header: h}
	// Only a canonical event subject is replayable.
	if org, kind, ok := schemas.ParseEventSubject(d.Subject); ok && (kind == schemas.KindAudit || kind == schemas.KindExecution) {
		if id, err := uuid.Parse(org); err == nil && id.String() == org {
			d.Org, d.Kind = org, kind
		}
	}
	return d
}

// ReplayDeadLetter publishes the payload of d again to its original subject
// (with its Content-Type and schema), so that ingest takes it once more
// after the cause was fixed, then deletes it from the DLQ stream. The
// republication's Nats-Msg-Id is derived from the dead letter, so replaying
// one twice within the dedup window publishes it once; ingest stores an
// event_id once whatever happens. A message that fails again goes back to
// the DLQ with its new reason.
func ReplayDeadLetter(ctx context.Context, js jetstream.JetStream, d DeadLetter) error {
	if d.Org == "" {
		return fmt.Errorf("%w: seq %d: original subject %q is not an event subject", ErrNotReplayable, d.Seq, d.Subject)
	}
	m := nats.NewMsg(d.Subject)
	m.Data = d.data
	for _, k := range dlqHeaders {
		if v := d.header.Get(k); v != "" {
			m.Header.Set(k, v)
		}
	}
	m.Header.Set(schemas.HeaderMsgID, "replay-"+schemas.StreamDLQ+"-"+strconv.FormatUint(d.Seq, 10))
	if _, err := js.PublishMsg(ctx, m); err != nil {
		return fmt.Errorf("replay seq %d to %s: %w", d.Seq, d.Subject, err)
	}
	st, err := js.Stream(ctx, schemas.StreamDLQ)
	if err != nil {
		return fmt.Errorf("replayed seq %d, but cannot remove it from %s: %w", d.Seq, schemas.StreamDLQ, err)
	}
	if err := st.DeleteMsg(ctx, d.Seq); err != nil {
		// Already removed (a replay of the same list twice) is fine.
		if _, gerr := st.GetMsg(ctx, d.Seq); !errors.Is(gerr, jetstream.ErrMsgNotFound) {
			return fmt.Errorf("replayed seq %d, but cannot remove it from %s: %w", d.Seq, schemas.StreamDLQ, err)
		}
	}
	return nil
}
