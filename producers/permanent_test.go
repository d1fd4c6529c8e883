package producers

import (
	"context"
	"fmt"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Which publish errors are retried: those of a stream that is electing a
// leader (in a cluster) or busy are; a refusal of the message is not.
func TestPermanent(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"no responders (no leader)", nats.ErrNoResponders, false},
		{"timeout", context.DeadlineExceeded, false},
		{"unavailable", &jetstream.APIError{Code: 503, ErrorCode: 10008}, false},
		{"duplicate in process (leader change)", fmt.Errorf("publish: %w", &jetstream.APIError{Code: 409, ErrorCode: 10158, Description: "duplicate message id is in process"}), false},
		{"wrong last sequence", &jetstream.APIError{Code: 400, ErrorCode: 10071}, true},
		{"too large", nats.ErrMaxPayload, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := permanent(tc.err); got != tc.want {
				t.Errorf("permanent(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
}
