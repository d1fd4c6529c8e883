package metrics

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/auditrail/auditrail/internal/testenv"
	"github.com/auditrail/auditrail/schemas"
)

func TestMain(m *testing.M) { testenv.MainNoLeaks(m) }

// serve starts r on a free loopback port until the test ends.
func serve(t *testing.T, r *Registry) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.ServeListener(ctx, l, slog.New(slog.DiscardHandler)) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	return l.Addr().String()
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// Two registries in one process do not share a series; the listener
// answers GET /metrics only.
func TestRegistriesAndListener(t *testing.T) {
	a, b := New(), New()
	a.ObserveRequest("/x", "GET", 200, time.Millisecond)
	a.RateLimited("/x")
	addrA, addrB := serve(t, a), serve(t, b)
	for _, tc := range []struct {
		method, url string
		status      int
		has, hasNot string
	}{
		{"GET", "http://" + addrA + "/metrics", 200, `auditrail_http_requests_total{code="200",method="GET",route="/x"} 1`, ""},
		{"GET", "http://" + addrA + "/metrics", 200, `auditrail_http_rate_limited_total{route="/x"} 1`, ""},
		{"GET", "http://" + addrA + "/metrics", 200, "go_goroutines", ""},
		{"GET", "http://" + addrA + "/metrics", 200, "process_resident_memory_bytes", ""},
		{"GET", "http://" + addrB + "/metrics", 200, "go_goroutines", `route="/x"`},
		{"GET", "http://" + addrA + "/", 404, "", "auditrail_"},
		{"GET", "http://" + addrA + "/healthz", 404, "", "auditrail_"},
		{"GET", "http://" + addrA + "/metrics/x", 404, "", "auditrail_"},
		{"POST", "http://" + addrA + "/metrics", 405, "", "auditrail_"},
	} {
		req, _ := http.NewRequest(tc.method, tc.url, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.status || !strings.Contains(string(body), tc.has) || (tc.hasNot != "" && strings.Contains(string(body), tc.hasNot)) {
			t.Errorf("%s %s: %d, want %d with %q without %q:\n%.300s", tc.method, tc.url, resp.StatusCode, tc.status, tc.has, tc.hasNot, body)
		}
	}
}

// The JetStream collector reads a consumer's pending messages and the
// streams' sizes at each scrape; a consumer that does not exist counts as
// an info error and leaves its series out.
func TestJetStreamCollector(t *testing.T) {
	_, _, js := testenv.NATS(t)
	ctx := context.Background()
	if _, err := js.CreateOrUpdateConsumer(ctx, schemas.StreamEvents, jetstream.ConsumerConfig{Durable: "c1", AckPolicy: jetstream.AckExplicitPolicy}); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := js.Publish(ctx, schemas.EventSubject("o", schemas.KindAudit), []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := js.Publish(ctx, schemas.DLQSubject(schemas.EventSubject("o", schemas.KindAudit)), []byte("dead")); err != nil {
		t.Fatal(err)
	}
	r := New()
	r.Register(NewJetStreamCollector(js, schemas.StreamEvents, []string{"c1", "missing"}, []string{schemas.StreamEvents, schemas.StreamDLQ}))
	_, body := get(t, "http://"+serve(t, r)+"/metrics")
	for _, want := range []string{
		`auditrail_ingest_consumer_pending_messages{consumer="c1"} 3`,
		`auditrail_ingest_consumer_redelivered_messages{consumer="c1"} 0`,
		`auditrail_stream_messages{stream="AUDITRAIL_EVENTS"} 3`,
		`auditrail_stream_messages{stream="AUDITRAIL_DLQ"} 1`,
		`auditrail_jetstream_info_errors 1`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("no %s in:\n%s", want, body)
		}
	}
	if strings.Contains(body, `consumer="missing"`) {
		t.Error("a missing consumer has series")
	}
}

// The tamper-evidence log's metrics: counters by kind from zero, the
// sequencer's lag, and the seconds since the last checkpoint per kind
// (absent before the first, never an organization label).
func TestTLogMetrics(t *testing.T) {
	r := New()
	o := r.TLog()
	o.now = func() time.Time { return time.Unix(1000, 0) }
	addr := serve(t, r)
	_, body := get(t, "http://"+addr+"/metrics")
	for _, want := range []string{`auditrail_tlog_checkpoints_signed_total{kind="audit_logs"} 0`, `auditrail_tlog_sequencer_lag_messages 0`} {
		if !strings.Contains(body, want) {
			t.Errorf("missing %q", want)
		}
	}
	if strings.Contains(body, "auditrail_tlog_seconds_since_last_checkpoint{") {
		t.Error("seconds since the last checkpoint before any")
	}
	o.CheckpointSigned("audit_logs")
	o.CheckpointSigned("audit_logs")
	o.CheckpointPublishFailed("tool_executions")
	o.CheckpointRound("audit_logs", time.Unix(990, 0))
	o.CheckpointRound("audit_logs", time.Unix(980, 0)) // older: ignored
	o.SequencerAppended("tool_executions", 7)
	o.SequencerLag(42)
	_, body = get(t, "http://"+addr+"/metrics")
	for _, want := range []string{
		`auditrail_tlog_checkpoints_signed_total{kind="audit_logs"} 2`,
		`auditrail_tlog_checkpoint_publish_failures_total{kind="tool_executions"} 1`,
		`auditrail_tlog_seconds_since_last_checkpoint{kind="audit_logs"} 10`,
		`auditrail_tlog_sequencer_leaves_appended_total{kind="tool_executions"} 7`,
		`auditrail_tlog_sequencer_lag_messages 42`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("missing %q", want)
		}
	}
	if strings.Contains(body, `auditrail_tlog_seconds_since_last_checkpoint{kind="tool_executions"}`) {
		t.Error("seconds since a checkpoint never signed")
	}
}
