package deliver_test

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/auditrail/auditrail/deliver"
	"github.com/auditrail/auditrail/internal/egress"
	"github.com/auditrail/auditrail/internal/testenv"
	"github.com/auditrail/auditrail/schemas"
)

const secret = "a-destination-secret-of-the-tests"

// Events published after the destination exists but dated an hour back
// (an execution kept in an outbox, a producer that retried) reach the
// destination, each once after dedup and in the order they were persisted, as the list route's items with
// created_time; what q leaves out (other resource types, the control
// plane's own SETTING events) is not delivered; every body is signed.
func TestDeliverLateEventsExactlyOnce(t *testing.T) {
	e := newEnv(t)
	rc := newReceiver(t, secret)
	id := e.destination(map[string]any{"name": "siem", "type": "https", "url": rc.url(), "secret": secret, "q": "resource_type:API_KEY"})
	e.run(testConfig(), nil)
	late := e.publish(40, time.Now().Add(-time.Hour), schemas.ResourceTypeAPIKey)
	e.publish(10, time.Now().Add(-time.Hour), schemas.ResourceTypeProject) // filtered out
	late = append(late, e.publish(10, time.Now(), schemas.ResourceTypeAPIKey)...)
	testenv.Eventually(t, 20*time.Second, "the destination receives the 50 events", func() bool { return rc.r.Counts().Unique >= 50 })
	time.Sleep(500 * time.Millisecond)
	if got := rc.r.EventIDs(); !slices.Equal(got, late) {
		t.Fatalf("received %d distinct events, want exactly the %d published (API_KEY), in their order", len(got), len(late))
	}
	if c := rc.r.Counts(); c.Rejected != 0 {
		t.Fatalf("the receiver refused %d deliveries", c.Rejected)
	}
	for _, m := range rc.lines() {
		evID, _ := uuid.Parse(m["event_id"].(string))
		if m["id"] != schemas.EntryID(evID).String() || m["created_time"] == "" || m["resource_type"] != "RESOURCE_TYPE_API_KEY" || m["organization_id"] != e.org {
			t.Fatalf("line is not the list route's item: %v", m)
		}
	}
	testenv.Eventually(t, 5*time.Second, "the status says delivered and caught up", func() bool {
		s := e.status(id)
		return s.Status == "active" && s.LastDeliveredAt != nil && s.Pending == 0 && s.Failures == 0
	})
	if s := e.status(id); s.Secret != "[REDACTED]" || s.LagSeconds != 0 {
		t.Fatalf("status %+v", s)
	}
}

// The receiver is down for 30 s while events are published: the
// deliverer retries with back-off (shortened here), the status says
// failing with a generic error, and once the receiver is back every event
// arrives, exactly once after dedup.
func TestDeliverReceiverDown30s(t *testing.T) {
	testenv.Long(t, "30 s")
	e := newEnv(t)
	rc := newReceiver(t, secret)
	id := e.destination(map[string]any{"name": "siem", "type": "https", "url": rc.url(), "secret": secret, "q": "resource_type:API_KEY"})
	e.run(testConfig(), nil)
	want := e.publish(5, time.Now(), schemas.ResourceTypeAPIKey)
	testenv.Eventually(t, 10*time.Second, "the first events arrive", func() bool { return rc.r.Counts().Unique == 5 })
	rc.down()
	downAt := time.Now()
	for time.Since(downAt) < 30*time.Second {
		want = append(want, e.publish(3, time.Now(), schemas.ResourceTypeAPIKey)...)
		time.Sleep(2 * time.Second)
	}
	s := e.status(id)
	if s.Status != "failing" || s.Failures == 0 || s.LastError == "" || s.Pending == 0 || s.LagSeconds <= 0 {
		t.Fatalf("status while the receiver is down: %+v", s)
	}
	if strings.Contains(s.LastError, secret) || strings.Contains(s.LastError, rc.addr) {
		t.Fatalf("last_error tells too much: %q", s.LastError)
	}
	rc.up()
	testenv.Eventually(t, 20*time.Second, "every event arrives once the receiver is back", func() bool { return rc.r.Counts().Unique == int64(len(want)) })
	if got := rc.r.EventIDs(); !slices.Equal(got, want) {
		t.Fatalf("received %d distinct events, want the %d published, in their order", len(got), len(want))
	}
	testenv.Eventually(t, 5*time.Second, "the status recovers", func() bool { s := e.status(id); return s.Status == "active" && s.Failures == 0 })
}

// Pause holds the delivery (events wait in the stream), resume delivers
// what waited, replay {since} delivers again from that time (duplicates,
// which the receiver's dedup removes).
func TestDeliverPauseResumeReplay(t *testing.T) {
	e := newEnv(t)
	rc := newReceiver(t, secret)
	id := e.destination(map[string]any{"name": "siem", "type": "https", "url": rc.url(), "secret": secret, "q": "resource_type:API_KEY"})
	e.run(testConfig(), nil)
	start := time.Now().Add(-time.Second)
	first := e.publish(5, time.Now(), schemas.ResourceTypeAPIKey)
	testenv.Eventually(t, 10*time.Second, "5 events", func() bool { return rc.r.Counts().Unique == 5 })

	e.must(200, "POST", e.destPath(id)+"/pause", nil, nil)
	testenv.Eventually(t, 5*time.Second, "status paused", func() bool { return e.status(id).Status == "paused" })
	time.Sleep(300 * time.Millisecond) // the deliverer sees the pause
	held := e.publish(5, time.Now(), schemas.ResourceTypeAPIKey)
	time.Sleep(time.Second)
	if n := rc.r.Counts().Unique; n != 5 {
		t.Fatalf("a paused destination received %d events", n)
	}
	e.must(200, "POST", e.destPath(id)+"/resume", nil, nil)
	testenv.Eventually(t, 10*time.Second, "the held events after resume", func() bool { return rc.r.Counts().Unique == 10 })
	if got := rc.r.EventIDs(); !sameSet(got, append(first, held...)) {
		t.Fatal("resume delivered other events")
	}

	before := rc.r.Counts().Events
	e.must(200, "POST", e.destPath(id)+"/replay", map[string]any{"since": start.UTC().Format(time.RFC3339Nano)}, nil)
	testenv.Eventually(t, 10*time.Second, "the replay delivers the 10 events again", func() bool { return rc.r.Counts().Events >= before+10 })
	if c := rc.r.Counts(); c.Unique != 10 || c.Duplicates < 10 {
		t.Fatalf("after the replay: %+v", c)
	}
	e.must(400, "POST", e.destPath(id)+"/replay", map[string]any{"since": "yesterday"}, nil)
	e.must(400, "POST", e.destPath(id)+"/replay", map[string]any{"since": time.Now().Add(time.Hour).Format(time.RFC3339)}, nil)
}

// Hostile receivers cannot hurt the deliverer: an endless answer is read
// only up to its cap, a slow one times out, a redirect to another host is
// not followed, a private address is refused at creation and, when a name
// resolves there later, at the dial. Meanwhile a healthy destination of
// the same deliverer keeps receiving.
func TestDeliverHostileReceivers(t *testing.T) {
	e := newEnv(t)
	healthy := newReceiver(t, secret)
	e.destination(map[string]any{"name": "healthy", "type": "https", "url": healthy.url(), "secret": secret, "q": "resource_type:API_KEY"})

	var endlessWritten atomic.Int64
	endless := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(200)
		chunk := make([]byte, 64<<10)
		for i := 0; i < 16<<10; i++ { // up to 1 GiB
			n, err := w.Write(chunk)
			endlessWritten.Add(int64(n))
			if err != nil {
				return
			}
		}
	}))
	defer endless.Close()
	release := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(30 * time.Second):
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer slow.Close()
	defer close(release)
	var elsewhere atomic.Int64
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { elsewhere.Add(1) }))
	defer other.Close()
	redirect := httptest.NewServer(http.RedirectHandler(strings.Replace(other.URL, "127.0.0.1", "localhost", 1)+"/steal", http.StatusTemporaryRedirect))
	defer redirect.Close()

	endlessID := e.destination(map[string]any{"name": "endless", "type": "https", "url": endless.URL, "secret": secret, "q": "resource_type:API_KEY"})
	slowID := e.destination(map[string]any{"name": "slow", "type": "https", "url": slow.URL, "secret": secret, "q": "resource_type:API_KEY"})
	redirID := e.destination(map[string]any{"name": "redirect", "type": "https", "url": redirect.URL, "secret": secret, "q": "resource_type:API_KEY"})
	for _, u := range []string{"https://10.0.0.1/x", "https://169.254.169.254/latest", "https://[fd00::1]/x", "http://192.168.1.1/x"} {
		if code, msg := e.call("POST", "/api/v1/orgs/"+e.org+"/destinations", map[string]any{"name": "private", "type": "https", "url": u, "secret": secret}, nil); code != 400 || !strings.Contains(msg, "url") {
			t.Fatalf("destination at %s: %d %s", u, code, msg)
		}
	}
	cfg := testConfig()
	cfg.RequestTimeout = 500 * time.Millisecond
	cfg.AckWait = 5 * time.Second
	e.run(cfg, nil)
	want := e.publish(20, time.Now(), schemas.ResourceTypeAPIKey)
	testenv.Eventually(t, 15*time.Second, "the healthy destination receives everything", func() bool { return healthy.r.Counts().Unique == 20 })
	if got := healthy.r.EventIDs(); !sameSet(got, want) {
		t.Fatal("the healthy destination received other events")
	}
	testenv.Eventually(t, 10*time.Second, "the endless answer counts as delivered", func() bool { return e.status(endlessID).LastDeliveredAt != nil })
	if n := endlessWritten.Load(); n > 64<<20 {
		t.Fatalf("the deliverer read %d bytes of an endless answer", n)
	}
	testenv.Eventually(t, 10*time.Second, "the slow receiver times out", func() bool {
		s := e.status(slowID)
		return s.Status == "failing" && strings.HasPrefix(s.LastError, "timeout")
	})
	testenv.Eventually(t, 10*time.Second, "the redirect is not followed", func() bool {
		s := e.status(redirID)
		return s.Status == "failing" && strings.Contains(s.LastError, "307")
	})
	if n := elsewhere.Load(); n != 0 {
		t.Fatalf("the redirect was followed to another host %d times", n)
	}

	// The deliverer's own guard decides at every dial: an address the
	// control plane accepted (its policy, or the name's resolution, has
	// changed since) is refused when connecting.
	e2 := newEnv(t)
	rebound := newReceiver(t, secret)
	rid := e2.destination(map[string]any{"name": "rebound", "type": "https", "url": rebound.url(), "secret": secret})
	e2.run(testConfig(), egress.Strict())
	e2.publish(3, time.Now(), schemas.ResourceTypeAPIKey)
	testenv.Eventually(t, 10*time.Second, "the dial is refused", func() bool {
		s := e2.status(rid)
		return s.Status == "failing" && strings.Contains(s.LastError, "egress")
	})
	if n := rebound.r.Counts().Events; n != 0 {
		t.Fatalf("a refused address received %d events", n)
	}
}

// Two instances share the destinations (each owns some, by lease); when
// one stops, the other takes its destinations over and nothing is lost.
func TestDeliverInstancesShareTheWork(t *testing.T) {
	e := newEnv(t)
	const n = 10 // both instances get some unless the hashing is very unlucky (2 in 1024)
	var rcs []*receiver
	for i := 0; i < n; i++ {
		rc := newReceiver(t, secret)
		rcs = append(rcs, rc)
		e.destination(map[string]any{"name": "d" + string(rune('a'+i)), "type": "https", "url": rc.url(), "secret": secret, "q": "resource_type:API_KEY"})
	}
	cfgA, cfgB := testConfig(), testConfig()
	cfgA.Instance, cfgB.Instance = "a", "b"
	a, stopA := e.run(cfgA, nil)
	b, _ := e.run(cfgB, nil)
	want := e.publish(10, time.Now(), schemas.ResourceTypeAPIKey)
	for _, rc := range rcs {
		testenv.Eventually(t, 15*time.Second, "every destination receives the events", func() bool { return rc.r.Counts().Unique == 10 })
	}
	testenv.Eventually(t, 5*time.Second, "both instances own destinations, each destination one", func() bool {
		da, db := a.Stats()["destinations"].(int), b.Stats()["destinations"].(int)
		return da > 0 && db > 0 && da+db == n
	})
	stopA()
	want = append(want, e.publish(10, time.Now(), schemas.ResourceTypeAPIKey)...)
	for _, rc := range rcs {
		testenv.Eventually(t, 15*time.Second, "b delivers every destination", func() bool { return rc.r.Counts().Unique == 20 })
		if !sameSet(rc.r.EventIDs(), want) {
			t.Fatal("a destination received other events")
		}
	}
	if got := b.Stats()["destinations"].(int); got != n {
		t.Fatalf("b owns %d destinations after a stopped, want %d", got, n)
	}
}

// Splunk HEC: the event envelope, Authorization: Splunk <token>; OCSF
// API Activity lines; the receiver dedups both by their event id.
func TestDeliverSplunkHECAndOCSF(t *testing.T) {
	e := newEnv(t)
	var auth atomic.Value
	hec, err := deliver.NewReceiver(deliver.ReceiverConfig{SplunkToken: "hec-token"})
	if err != nil {
		t.Fatal(err)
	}
	var bodies atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth.Store(r.Header.Get("Authorization"))
		b, _ := io.ReadAll(r.Body)
		bodies.Store(string(b))
		r.Body = io.NopCloser(bytes.NewReader(b))
		hec.ServeHTTP(w, r)
	}))
	defer srv.Close()
	id := e.destination(map[string]any{"name": "splunk", "type": "splunk_hec", "url": srv.URL + "/services/collector/event", "token": "hec-token", "format": "ocsf", "q": "resource_type:API_KEY"})
	if s := e.status(id); s.Token != "[REDACTED]" || s.Secret != "" {
		t.Fatalf("view: %+v", s)
	}
	e.run(testConfig(), nil)
	want := e.publish(5, time.Now(), schemas.ResourceTypeAPIKey)
	testenv.Eventually(t, 10*time.Second, "splunk receives 5 events", func() bool { return hec.Counts().Unique == 5 })
	if !sameSet(hec.EventIDs(), want) {
		t.Fatal("other events")
	}
	if a, _ := auth.Load().(string); a != "Splunk hec-token" {
		t.Fatalf("Authorization %q", a)
	}
	body, _ := bodies.Load().(string)
	if !strings.Contains(body, `"sourcetype":"ocsf:api_activity"`) || !strings.Contains(body, `"class_uid":6003`) || !strings.Contains(body, `"event":{`) {
		t.Fatalf("body %s", body)
	}
}

// A destination whose secret is not the receiver's: every delivery is
// refused (401), nothing is counted, and the status says why.
func TestDeliverWrongSecretRefused(t *testing.T) {
	e := newEnv(t)
	rc := newReceiver(t, secret)
	id := e.destination(map[string]any{"name": "siem", "type": "https", "url": rc.url(), "secret": "not-the-receivers-secret", "q": "resource_type:API_KEY"})
	e.run(testConfig(), nil)
	e.publish(3, time.Now(), schemas.ResourceTypeAPIKey)
	testenv.Eventually(t, 10*time.Second, "the receiver refuses the deliveries", func() bool {
		s := e.status(id)
		return rc.r.Counts().Rejected > 0 && s.Status == "failing" && s.LastError == "status 401"
	})
	if c := rc.r.Counts(); c.Events != 0 || c.Deliveries != 0 {
		t.Fatalf("a wrongly signed delivery was taken: %+v", c)
	}
}

// An instance that dies with a batch in hand leaves it unacknowledged: the
// instance that takes over waits for its redelivery before fetching, so
// the receiver still gets every event in the order it was persisted.
func TestDeliverTakeoverAfterCrashKeepsOrder(t *testing.T) {
	e := newEnv(t)
	rc := newReceiver(t, secret)
	id := e.destination(map[string]any{"name": "siem", "type": "https", "url": rc.url(), "secret": secret, "q": "resource_type:API_KEY"})
	cfg := testConfig()
	cfg.RequestTimeout, cfg.Retry.Max, cfg.AckWait = 400*time.Millisecond, 400*time.Millisecond, 2*time.Second
	_, stopA := e.run(cfg, nil)
	want := e.publish(5, time.Now(), schemas.ResourceTypeAPIKey)
	testenv.Eventually(t, 10*time.Second, "the first events", func() bool { return rc.r.Counts().Unique == 5 })
	stopA()

	// The crashed instance: it held the lease, fetched 3 events and never
	// acknowledged them.
	kv, err := e.admin.KeyValue(e.ctx, deliver.DefaultBucket)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(e.ctx, "lease."+id, []byte(`{"owner":"crashed","until":"`+time.Now().Add(cfg.LeaseTTL).UTC().Format(time.RFC3339Nano)+`"}`)); err != nil {
		t.Fatal(err)
	}
	want = append(want, e.publish(5, time.Now(), schemas.ResourceTypeAPIKey)...)
	cons, err := e.admin.Consumer(e.ctx, schemas.StreamEvents, "deliver_"+id+"_0")
	if err != nil {
		t.Fatal(err)
	}
	b, err := cons.Fetch(3, jetstream.FetchMaxWait(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for range b.Messages() {
		n++
	}
	if n != 3 {
		t.Fatalf("the crashed instance fetched %d", n)
	}
	want = append(want, e.publish(5, time.Now(), schemas.ResourceTypeAPIKey)...)

	e.run(cfg, nil)
	testenv.Eventually(t, 15*time.Second, "every event after the takeover", func() bool { return rc.r.Counts().Unique == 15 })
	if got := rc.r.EventIDs(); !slices.Equal(got, want) {
		t.Fatalf("the events came out of order after the takeover:\n got %v\nwant %v", got, want)
	}
}

// An instance that stops with a batch in hand hands it back and releases
// the lease: the next instance delivers at once, not after the batch's ack
// wait (a minute here), and in order.
func TestDeliverCleanHandOverIsPrompt(t *testing.T) {
	e := newEnv(t)
	rc := newReceiver(t, secret)
	var first atomic.Bool
	first.Store(true)
	held := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if first.CompareAndSwap(true, false) { // the batch stays in hand until the instance stops
			_, _ = io.Copy(io.Discard, r.Body) // then the server sees the client go
			close(held)
			<-r.Context().Done()
			return
		}
		rc.ServeHTTP(w, r)
	}))
	defer srv.Close()
	e.destination(map[string]any{"name": "siem", "type": "https", "url": srv.URL + "/events", "secret": secret, "q": "resource_type:API_KEY"})
	cfg := testConfig()
	cfg.AckWait = time.Minute
	_, stopA := e.run(cfg, nil)
	want := e.publish(5, time.Now(), schemas.ResourceTypeAPIKey)
	select {
	case <-held:
	case <-time.After(10 * time.Second):
		t.Fatal("the first instance sent nothing")
	}
	stopA()
	start := time.Now()
	e.run(cfg, nil)
	testenv.Eventually(t, 10*time.Second, "the next instance delivers the handed-back batch", func() bool { return rc.r.Counts().Unique == 5 })
	if got := rc.r.EventIDs(); !slices.Equal(got, want) {
		t.Fatalf("out of order:\n got %v\nwant %v", got, want)
	}
	t.Logf("delivered %s after the hand-over", time.Since(start).Round(time.Millisecond))
}
