package cpstate

// Stream credentials in the state: the record of each (never its secret).

import (
	"context"
	"time"

	"github.com/google/uuid"
)

// StreamCredential is a credential of the event stream, as stored: the
// credentials file itself is shown once and never stored.
type StreamCredential struct {
	ID          uuid.UUID  `json:"id"`
	OrgID       uuid.UUID  `json:"organization_id"`
	Name        string     `json:"name"`
	User        string     `json:"user"` // public key of its NATS user
	Stream      string     `json:"stream"`
	Subjects    []string   `json:"subjects"`
	Consumer    string     `json:"consumer"`
	InboxPrefix string     `json:"inbox_prefix"`
	ExpiresAt   time.Time  `json:"expires_at"`
	CreatedAt   time.Time  `json:"created_at"`
	RevokedAt   *time.Time `json:"revoked_at"`
}

// StreamCredKey is the key of credential id of org.
func StreamCredKey(org, id string) string { return "streamcred." + org + "." + id }

// WaitCurrent waits until the mirror has applied the bucket's last
// message as of the call.
func (s *State) WaitCurrent(ctx context.Context) error {
	last, err := s.lastSeq(ctx)
	if err != nil {
		return err
	}
	for {
		s.mu.RLock()
		w := s.watched
		s.mu.RUnlock()
		if w >= last {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
}
