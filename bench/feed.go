package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/auditrail/auditrail/ingest"
	"github.com/auditrail/auditrail/internal/chserver"
	"github.com/auditrail/auditrail/internal/natsx"
	"github.com/auditrail/auditrail/internal/synth"
	"github.com/auditrail/auditrail/producers"
	"github.com/auditrail/auditrail/schemas"
)

// FeedConfig says what the feed benchmark runs.
type FeedConfig struct {
	// Exe is the auditrail binary (its `dev`).
	Exe string
	// Entries of the tenant whose feed and list are walked (ClickHouse).
	Entries int
	// Rate (events/s) published for Duration while a poller follows the
	// feed of `dev` on its own store (SQLite): the latency from publish to
	// visible.
	Rate     int
	Duration time.Duration
}

// DefaultFeedConfig is what `auditrail bench` runs.
func DefaultFeedConfig(exe string) FeedConfig {
	return FeedConfig{Exe: exe, Entries: 1_000_000, Rate: 5000, Duration: 20 * time.Second}
}

// FeedResult holds what the feed benchmark measured.
type FeedResult struct {
	Entries int
	// FeedTime: one poller following the feed's cursor (pages of 1000) over
	// every entry; ListTime: the list route walking the same entries (pages
	// of 100, its largest).
	FeedTime, ListTime time.Duration
	FeedRead, ListRead int
	// Visible is the time from an event's publication (the stream's ack) to
	// its first appearance in the feed of a poller polling all along;
	// Publish the time of the publications themselves (the reference).
	Visible, Publish Latency
	Published        int
}

// Figures are the feed's figures: throughput against the list, and the
// latency to visible (goal: p99 ≤ 2 s under 5k events/s).
func (r FeedResult) Figures() []Figure {
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	return []Figure{
		{Name: "feed, one poller (entries/s)", Value: rate(r.FeedRead, r.FeedTime), Unit: "entries/s",
			Reference: rate(r.ListRead, r.ListTime), RefName: "the list route walking them", Goal: 1},
		{Name: "feed, publish to visible p99 (ms)", Value: ms(r.Visible.P99), Unit: "ms",
			Reference: max(ms(r.Publish.P99), 1), RefName: "the publish itself p99", Goal: 1000, Lower: true, Max: 2000},
	}
}

// Feed measures the feed: a tenant of cfg.Entries entries published
// through `dev` into a throwaway ClickHouse, read once by following the
// feed and once by walking the list; then the latency to visible in a
// `dev` on its SQLite store under cfg.Rate events/s.
func Feed(ctx context.Context, cfg FeedConfig, progress io.Writer) (r FeedResult, err error) {
	if cfg.Exe == "" || cfg.Entries < 1000 || cfg.Rate < 1 || cfg.Duration <= 0 {
		return r, fmt.Errorf("feed benchmark: want a binary, at least 1000 entries, a rate and a duration, got %+v", cfg)
	}
	say := func(format string, args ...any) { fmt.Fprintf(progress, "  "+format+"\n", args...) }
	dir, err := os.MkdirTemp("", "auditrail-bench-feed-")
	if err != nil {
		return r, err
	}
	defer os.RemoveAll(dir)
	srv, err := chserver.Start(filepath.Join(dir, "clickhouse"))
	if err != nil {
		return r, err
	}
	defer srv.Stop()
	dsn := srv.DSN("bench_feed")
	if err := feedThroughput(ctx, cfg, filepath.Join(dir, "ch"), dsn, say, &r); err != nil {
		return r, err
	}
	srv.Stop()
	if err := feedLatency(ctx, cfg, filepath.Join(dir, "sqlite"), say, &r); err != nil {
		return r, err
	}
	return r, nil
}

// devJetStream connects to dev's NATS with its admin credentials.
func devJetStream(d *devProcess) (*nats.Conn, jetstream.JetStream, error) {
	opts, err := natsx.CredsOptions(natsx.CredsFile(filepath.Join(d.data, "nats"), natsx.RoleAdmin))
	if err != nil {
		return nil, nil, err
	}
	nc, err := nats.Connect(d.nats, opts...)
	if err != nil {
		return nil, nil, fmt.Errorf("connect to dev's NATS: %w", err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	return nc, js, nil
}

// feedDev is a dev with an organization and a publisher on its NATS.
type feedDev struct {
	dev *devProcess
	org uuid.UUID
	nc  *nats.Conn
	js  jetstream.JetStream
	pub *producers.Publisher
}

// startFeedDev starts dev in dir on dsn (its SQLite store when empty),
// creates an organization named name and connects a publisher.
func startFeedDev(ctx context.Context, exe, dir, dsn, name string, devArgs ...string) (_ *feedDev, err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	e := &feedDev{}
	if e.dev, err = startDev(ctx, exe, dir, dsn, devArgs...); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			e.close()
		}
	}()
	if e.org, err = e.dev.createOrg(ctx, name); err != nil {
		return nil, err
	}
	if e.nc, e.js, err = devJetStream(e.dev); err != nil {
		return nil, err
	}
	if e.pub, err = producers.New(e.nc, producers.DefaultConfig(), nil); err != nil {
		return nil, err
	}
	return e, nil
}

func (e *feedDev) close() {
	if e.nc != nil {
		e.nc.Close()
	}
	e.dev.stop()
}

func feedThroughput(ctx context.Context, cfg FeedConfig, dir, dsn string, say func(string, ...any), r *FeedResult) error {
	env, err := startFeedDev(ctx, cfg.Exe, dir, dsn, "Feed bench")
	if err != nil {
		return err
	}
	defer env.close()
	dev, org, js, pub := env.dev, env.org, env.js, env.pub
	say("publishing %d events of one organization (30 days of traffic, 1 in 100 an hour late) through dev's ingest", cfg.Entries)
	gen := synth.New(org, 5, 23)
	start := time.Now().Add(-30 * 24 * time.Hour)
	step := 30 * 24 * time.Hour / time.Duration(cfg.Entries)
	const batch = 5000
	for i := 0; i < cfg.Entries; i += batch {
		evs := make([]producers.Event, min(batch, cfg.Entries-i))
		for j := range evs {
			at := start.Add(time.Duration(i+j) * step)
			if (i+j)%100 == 99 {
				at = at.Add(-time.Hour) // late: stored after what happened after it
			}
			e := gen.Event(at)
			evs[j] = &e
		}
		if err := pub.PublishBatch(ctx, evs); err != nil {
			return fmt.Errorf("publish: %w", err)
		}
	}
	if err := waitIngested(ctx, js, say); err != nil {
		return err
	}
	if err := waitMerges(ctx, dsn, 5*time.Minute, say); err != nil {
		return err
	}
	base := "/api/v1/orgs/" + org.String() + "/audit_logs"
	say("following the feed (pages of 1000)")
	t0 := time.Now()
	n, err := walkFeed(ctx, dev, base+"/feed?limit=1000")
	if err != nil {
		return err
	}
	r.FeedTime, r.FeedRead = time.Since(t0), n
	say("walking the list (pages of 100)")
	t0 = time.Now()
	if r.ListRead, err = walkList(ctx, dev, base+"?limit=100"); err != nil {
		return err
	}
	r.ListTime, r.Entries = time.Since(t0), cfg.Entries
	say("feed: %d entries in %s; list: %d in %s", r.FeedRead, r.FeedTime.Round(time.Millisecond), r.ListRead, r.ListTime.Round(time.Millisecond))
	if r.FeedRead < cfg.Entries || r.ListRead < cfg.Entries {
		return fmt.Errorf("feed benchmark: the feed gave %d and the list %d of %d entries", r.FeedRead, r.ListRead, cfg.Entries)
	}
	return nil
}

// waitIngested waits until ingest has acknowledged every audit event.
func waitIngested(ctx context.Context, js jetstream.JetStream, say func(string, ...any)) error {
	t0 := time.Now()
	for {
		c, err := js.Consumer(ctx, schemas.StreamEvents, ingest.DefaultConfig().Durable)
		if err == nil {
			info := c.CachedInfo()
			if info.NumPending == 0 && info.NumAckPending == 0 {
				say("ingested in %s after the last publish", time.Since(t0).Round(time.Millisecond))
				return nil
			}
		}
		if time.Since(t0) > 10*time.Minute {
			return fmt.Errorf("ingest did not catch up in 10 minutes")
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

type feedPage struct {
	Data struct {
		Items []struct {
			EventID string `json:"event_id"`
		} `json:"items"`
		NextCursor string `json:"next_cursor"`
		HasMore    bool   `json:"has_more"`
	} `json:"data"`
}

// readPage reads the page of a listing or feed at path after cursor.
func readPage(ctx context.Context, d *devProcess, path, cursor string) (feedPage, error) {
	if cursor != "" {
		path += "&cursor=" + url.QueryEscape(cursor)
	}
	var page feedPage
	b, err := d.get(ctx, path)
	if err != nil {
		return page, err
	}
	if err := json.Unmarshal(b, &page); err != nil {
		return page, fmt.Errorf("page of %s: %w", path, err)
	}
	return page, nil
}

// walk reads the listing or feed at path from its start, page after page,
// until done says the page was the last, and answers how many entries it
// read.
func walk(ctx context.Context, d *devProcess, path string, done func(feedPage) bool) (int, error) {
	n, cursor := 0, ""
	for {
		page, err := readPage(ctx, d, path, cursor)
		if err != nil {
			return n, err
		}
		n += len(page.Data.Items)
		if done(page) {
			return n, nil
		}
		cursor = page.Data.NextCursor
	}
}

// walkFeed follows the feed at path until a page is empty.
func walkFeed(ctx context.Context, d *devProcess, path string) (int, error) {
	return walk(ctx, d, path, func(p feedPage) bool { return len(p.Data.Items) == 0 })
}

// walkList walks the list at path to its end.
func walkList(ctx context.Context, d *devProcess, path string) (int, error) {
	return walk(ctx, d, path, func(p feedPage) bool { return !p.Data.HasMore })
}

// feedLatency publishes cfg.Rate events/s for cfg.Duration into a dev on
// its own SQLite store while a poller follows the feed, and measures when
// each event first shows.
func feedLatency(ctx context.Context, cfg FeedConfig, dir string, say func(string, ...any), r *FeedResult) error {
	say("publishing %d events/s for %s into dev (SQLite) while a poller follows the feed", cfg.Rate, cfg.Duration)
	lr, err := latencyUnderLoad(ctx, cfg.Exe, dir, "", nil, cfg.Rate, cfg.Duration, false, say)
	if err != nil {
		return err
	}
	r.Visible, r.Publish, r.Published = lr.visible, lr.publish, lr.published
	return nil
}

// loadLatency is what latencyUnderLoad measured.
type loadLatency struct {
	published              int
	rate                   float64 // events/s published
	visible, publish, page Latency
}

// latencyUnderLoad publishes rate events/s for d into a dev on dsn (its
// SQLite store when empty; devArgs are more flags) while a poller follows
// the feed and measures when each event first shows; with pages, another
// reads the newest page of the list over and over, timed.
func latencyUnderLoad(ctx context.Context, exe, dir, dsn string, devArgs []string, rate int, d time.Duration, pages bool,
	say func(string, ...any)) (lr loadLatency, err error) {
	env, err := startFeedDev(ctx, exe, dir, dsn, "Load", devArgs...)
	if err != nil {
		return lr, err
	}
	defer env.close()
	org, pub := env.org, env.pub
	var mu sync.Mutex
	published := map[string]time.Time{}
	seen := map[string]time.Time{}
	stop := make(chan struct{})
	polled := make(chan error, 2)
	go func() {
		path := "/api/v1/orgs/" + env.org.String() + "/audit_logs/feed?limit=1000"
		cursor := ""
		for {
			page, err := readPage(ctx, env.dev, path, cursor)
			if err != nil {
				polled <- err
				return
			}
			at := time.Now()
			mu.Lock()
			for _, it := range page.Data.Items {
				if _, ok := seen[it.EventID]; !ok {
					seen[it.EventID] = at
				}
			}
			mu.Unlock()
			cursor = page.Data.NextCursor
			if len(page.Data.Items) == 0 {
				select {
				case <-stop:
					polled <- nil
					return
				case <-time.After(20 * time.Millisecond):
				}
			}
		}
	}()
	var pageTimes []time.Duration
	if pages {
		go func() {
			path := "/api/v1/orgs/" + env.org.String() + "/audit_logs?limit=50"
			for {
				t0 := time.Now()
				if _, err := readPage(ctx, env.dev, path, ""); err != nil {
					polled <- fmt.Errorf("newest page: %w", err)
					return
				}
				mu.Lock()
				pageTimes = append(pageTimes, time.Since(t0))
				mu.Unlock()
				select {
				case <-stop:
					polled <- nil
					return
				case <-time.After(50 * time.Millisecond):
				}
			}
		}()
	}
	gen := synth.New(org, 3, 5)
	const tick = 50 * time.Millisecond
	per := max(1, rate*int(tick/time.Millisecond)/1000)
	var pubTimes []time.Duration
	start := time.Now()
	for next := start; time.Since(start) < d; next = next.Add(tick) {
		time.Sleep(time.Until(next))
		evs := make([]producers.Event, per)
		ids := make([]string, per)
		for i := range evs {
			e := gen.Event(time.Now())
			evs[i], ids[i] = &e, e.EventID.String()
		}
		t0 := time.Now()
		if err := pub.PublishBatch(ctx, evs); err != nil {
			close(stop)
			return lr, fmt.Errorf("publish: %w", err)
		}
		done := time.Now()
		pubTimes = append(pubTimes, done.Sub(t0))
		mu.Lock()
		for _, id := range ids {
			published[id] = done
		}
		mu.Unlock()
	}
	lr.rate = float64(len(published)) / time.Since(start).Seconds()
	// Everything shows within a minute, or the figure says so.
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		mu.Lock()
		n := len(seen)
		mu.Unlock()
		if n >= len(published) {
			break
		}
	}
	close(stop)
	for range 1 + btoi(pages) {
		if err := <-polled; err != nil {
			return lr, fmt.Errorf("poller: %w", err)
		}
	}
	var lat []time.Duration
	for id, at := range published {
		s, ok := seen[id]
		if !ok {
			return lr, fmt.Errorf("event %s published but not in the feed after a minute", id)
		}
		lat = append(lat, max(0, s.Sub(at)))
	}
	lr.visible, lr.publish, lr.published = summarize(lat), summarize(pubTimes), len(published)
	if pages {
		lr.page = summarize(pageTimes)
	}
	say("%d events (%.0f/s): visible p50 %s p99 %s (publish p99 %s)", lr.published, lr.rate, lr.visible.P50.Round(time.Millisecond),
		lr.visible.P99.Round(time.Millisecond), lr.publish.P99.Round(time.Millisecond))
	return lr, nil
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
