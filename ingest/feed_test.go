package ingest_test

import (
	"context"
	"math"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/auditrail/auditrail/ingest"
	"github.com/auditrail/auditrail/internal/auditstore"
	"github.com/auditrail/auditrail/internal/natsx"
	"github.com/auditrail/auditrail/internal/testenv"
	"github.com/auditrail/auditrail/schemas"
)

// feedStore is the store as a feed reader needs it.
type feedStore interface {
	auditstore.Store
	FeedAudit(ctx context.Context, q auditstore.FeedQuery) (auditstore.FeedPage, error)
}

// gatedStore holds back the write of any batch that holds a gated event
// until release is closed; the other batches are written at once.
type gatedStore struct {
	auditstore.Store
	gated   map[uuid.UUID]bool
	waiting chan struct{} // closed when a gated batch waits
	release chan struct{}
	once    sync.Once
}

func (s *gatedStore) WriteAudit(ctx context.Context, evs []schemas.AuditEvent) error {
	for _, e := range evs {
		if s.gated[e.EventID] {
			s.once.Do(func() { close(s.waiting) })
			select {
			case <-s.release:
			case <-ctx.Done():
				return ctx.Err()
			}
			break
		}
	}
	return s.Store.WriteAudit(ctx, evs)
}

// poller follows an organization's feed as a client of the feed route
// does: from its cursor, up to the watermark (or, to show the trap, up to
// whatever is stored).
type poller struct {
	store  feedStore
	marks  *natsx.Watermarks
	org    uuid.UUID
	naive  bool // ignore the watermark
	after  auditstore.FeedKey
	seen   map[uuid.UUID]int
	last   uint64
	orders int // positions that went backwards
}

func newPoller(s feedStore, marks *natsx.Watermarks, org uuid.UUID, naive bool) *poller {
	return &poller{store: s, marks: marks, org: org, naive: naive, seen: map[uuid.UUID]int{}}
}

// poll reads pages until one is empty.
func (p *poller) poll(t *testing.T, limit int) {
	t.Helper()
	for {
		upto := uint64(math.MaxInt64)
		if !p.naive {
			var err error
			if upto, err = p.marks.Watermark(context.Background(), ingest.DefaultConfig().Durable); err != nil {
				t.Error(err)
				return
			}
		}
		page, err := p.store.FeedAudit(context.Background(), auditstore.FeedQuery{OrgID: p.org, After: p.after, Upto: upto, Limit: limit})
		if err != nil {
			t.Error(err)
			return
		}
		for _, e := range page.Items {
			p.seen[e.EventID]++
			if e.Stored.Seq <= p.last {
				p.orders++
			}
			p.last = e.Stored.Seq
		}
		p.after = page.Next
		if len(page.Items) == 0 {
			return
		}
	}
}

// The trap the watermark closes: a batch committed after a later one.
// Batch A is held in the store while batch B, published after it, is
// committed. A reader that follows what is stored passes B and never sees
// A; a reader that follows the watermark waits for A and gets both.
func TestFeedWatermarkWaitsForSlowerBatch(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			base := b.open(t).(feedStore)
			_, nc, js := testenv.NATS(t)
			org := uuid.New()
			var a, bb []*schemas.AuditEvent
			gated := map[uuid.UUID]bool{}
			for i := 0; i < 10; i++ {
				e := event(org, time.Now().Add(-time.Hour)) // late: an hour old
				a = append(a, e)
				gated[e.EventID] = true
				bb = append(bb, event(org, time.Now()))
			}
			store := &gatedStore{Store: base, gated: gated, waiting: make(chan struct{}), release: make(chan struct{})}
			cfg := testConfig()
			cfg.Writers = 2
			in, _ := runIngester(t, nc, store, cfg)
			pub := newPublisher(t, nc)
			publish(t, pub, a)
			select {
			case <-store.waiting:
			case <-time.After(30 * time.Second):
				t.Fatal("batch A never reached the store")
			}
			publish(t, pub, bb)
			testenv.Eventually(t, 30*time.Second, "batch B stored", func() bool { return in.Stats().Stored >= 10 })

			marks := natsx.NewWatermarks(js, time.Millisecond)
			careful := newPoller(base, marks, org, false)
			naive := newPoller(base, marks, org, true)
			careful.poll(t, 7)
			naive.poll(t, 7)
			if len(careful.seen) != 0 {
				t.Fatalf("the feed showed %d entries past the slower batch's gap", len(careful.seen))
			}
			if len(naive.seen) != 10 {
				t.Fatalf("the naive reader saw %d of batch B, want 10", len(naive.seen))
			}

			close(store.release)
			testenv.Eventually(t, 30*time.Second, "both batches acknowledged", func() bool {
				ack, pending := consumerPending(t, js, cfg.Durable)
				return ack == 0 && pending == 0
			})
			careful.poll(t, 7)
			naive.poll(t, 7)
			for _, e := range append(a, bb...) {
				if careful.seen[e.EventID] != 1 {
					t.Fatalf("the feed gave event %s %d times", e.EventID, careful.seen[e.EventID])
				}
			}
			if len(naive.seen) != 10 {
				t.Fatalf("the naive reader saw %d entries: the trap did not happen, this test proves nothing", len(naive.seen))
			}
		})
	}
}

// slowStore delays each write by a random time (commits land out of order).
type slowStore struct {
	auditstore.Store
	mu  sync.Mutex
	rng *rand.Rand
}

func (s *slowStore) WriteAudit(ctx context.Context, evs []schemas.AuditEvent) error {
	s.mu.Lock()
	d := time.Duration(s.rng.IntN(40)) * time.Millisecond
	s.mu.Unlock()
	select {
	case <-time.After(d):
	case <-ctx.Done():
		return ctx.Err()
	}
	return s.Store.WriteAudit(ctx, evs)
}

// The feed's guarantee as a property: two ingest instances sharing the
// durable, each writing two batches at once, every commit delayed at
// random, three producers publishing events of random timestamps (some an
// hour old), and a poller following the cursor all along: it receives
// every stored entry exactly once, in increasing positions.
func TestFeedEveryEntryOnceUnderConcurrentIngest(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			base := b.open(t).(feedStore)
			_, nc, js := testenv.NATS(t)
			org, other := uuid.New(), uuid.New()
			cfg := testConfig()
			cfg.BatchSize = 40
			cfg.Writers = 2
			for i := range 2 {
				runIngester(t, nc, &slowStore{Store: base, rng: rand.New(rand.NewPCG(uint64(i), 42))}, cfg)
			}
			marks := natsx.NewWatermarks(js, 5*time.Millisecond)
			p := newPoller(base, marks, org, false)

			const producers, perProducer = 3, 700
			var wg sync.WaitGroup
			var mu sync.Mutex
			var mine []*schemas.AuditEvent
			for w := range producers {
				wg.Go(func() {
					pub := newPublisher(t, nc)
					rng := rand.New(rand.NewPCG(uint64(w), 7))
					for i := 0; i < perProducer; i += 35 {
						var batch []*schemas.AuditEvent
						for range 35 {
							o := org
							if rng.IntN(4) == 0 {
								o = other
							}
							e := event(o, time.Now().Add(-time.Duration(rng.IntN(3600))*time.Second))
							batch = append(batch, e)
							if o == org {
								mu.Lock()
								mine = append(mine, e)
								mu.Unlock()
							}
						}
						publish(t, pub, batch)
						time.Sleep(time.Duration(rng.IntN(10)) * time.Millisecond)
					}
				})
			}
			done := make(chan struct{})
			go func() { wg.Wait(); close(done) }()
			for polling := true; polling; {
				select {
				case <-done:
					polling = false
				default:
					p.poll(t, 37)
					time.Sleep(3 * time.Millisecond)
				}
			}
			testenv.Eventually(t, 60*time.Second, "every event acknowledged", func() bool {
				ack, pending := consumerPending(t, js, cfg.Durable)
				return ack == 0 && pending == 0
			})
			p.poll(t, 37)
			if p.orders != 0 {
				t.Fatalf("%d positions went backwards", p.orders)
			}
			for _, e := range mine {
				if p.seen[e.EventID] != 1 {
					t.Fatalf("event %s received %d times", e.EventID, p.seen[e.EventID])
				}
			}
			if len(p.seen) != len(mine) {
				t.Fatalf("received %d entries, published %d", len(p.seen), len(mine))
			}
		})
	}
}
