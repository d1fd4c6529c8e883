package ratelimit

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// racingKV is a bucket whose updates lose compare-and-set races (another
// request counted first) races times, then answer only when ctx ends: a
// bucket whose leader is moving.
type racingKV struct {
	jetstream.KeyValue
	races int
}

type entry struct {
	jetstream.KeyValueEntry
	v []byte
}

func (e entry) Value() []byte    { return e.v }
func (e entry) Revision() uint64 { return 1 }

func (k *racingKV) Get(ctx context.Context, key string) (jetstream.KeyValueEntry, error) {
	return entry{v: []byte("1")}, nil
}

func (k *racingKV) Update(ctx context.Context, key string, value []byte, last uint64) (uint64, error) {
	if k.races > 0 {
		k.races--
		return 0, &jetstream.APIError{ErrorCode: jetstream.JSErrCodeStreamWrongLastSequence}
	}
	<-ctx.Done()
	return 0, ctx.Err()
}

// A request that lost a race or two and then ran out of time met a slow
// bucket: that is the bucket's failure (the caller counts locally), not a
// flood of its client; one that lost many races is refused.
func TestCountSlowBucketIsNoFlood(t *testing.T) {
	l := &Limiter{spec: Spec{Limit: 1_000_000, Window: time.Minute}}
	for _, tc := range []struct {
		races            int
		wantErr, allowed bool
	}{
		{races: 1, wantErr: true},
		{races: floodRaces - 1, wantErr: true},
		{races: floodRaces + 1, wantErr: false},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		n, allowed, err := l.count(ctx, &racingKV{races: tc.races}, "k")
		cancel()
		if (err != nil) != tc.wantErr || allowed {
			t.Errorf("%d races: n=%d allowed=%v err=%v; want an error: %v", tc.races, n, allowed, err, tc.wantErr)
		}
		if !tc.wantErr && n != l.spec.Limit {
			t.Errorf("%d races: a flood is counted at the limit, got %d", tc.races, n)
		}
	}
}
