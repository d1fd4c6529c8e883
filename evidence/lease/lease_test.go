package lease_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/auditrail/auditrail/evidence/lease"
	"github.com/auditrail/auditrail/internal/testenv"
)

func TestMain(m *testing.M) { testenv.MainNoLeaks(m) }

// One holder at a time: of many instances racing for a free lease exactly
// one wins; the others win only after it lapses; the holder renews.
func TestLeaseOneHolder(t *testing.T) {
	_, _, js := testenv.NATS(t)
	ctx := context.Background()
	kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "auditrail_tlog"})
	if err != nil {
		t.Fatal(err)
	}
	const n = 8
	ls := make([]*lease.Lease, n)
	for i := range ls {
		ls[i] = lease.New(kv, "checkpointer", string(rune('a'+i)), time.Second, nil)
	}
	won := make([]bool, n)
	var wg sync.WaitGroup
	for i := range ls {
		wg.Add(1)
		go func() { defer wg.Done(); won[i] = ls[i].Acquire(ctx) }()
	}
	wg.Wait()
	holder := -1
	for i, w := range won {
		if w {
			if holder >= 0 {
				t.Fatalf("instances %d and %d both hold the lease", holder, i)
			}
			holder = i
		}
	}
	if holder < 0 {
		t.Fatal("no instance holds a free lease")
	}
	other := (holder + 1) % n
	if !ls[holder].Held() || !ls[holder].Acquire(ctx) {
		t.Fatal("the holder cannot renew")
	}
	if ls[other].Acquire(ctx) {
		t.Fatal("another instance took a live lease")
	}
	// Another key is another lease.
	if !lease.New(kv, "sequencer", "z", time.Second, nil).Acquire(ctx) {
		t.Fatal("the sequencer's lease is not free")
	}
	time.Sleep(1100 * time.Millisecond)
	if ls[holder].Held() {
		t.Fatal("a lease not renewed is still held")
	}
	if !ls[other].Acquire(ctx) {
		t.Fatal("an expired lease cannot be taken")
	}
	if ls[holder].Keep(ctx) {
		t.Fatal("the old holder keeps a lease taken over")
	}
}
