//go:build e2e

package main

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/common/expfmt"

	"github.com/auditrail/auditrail/internal/natsx"
	"github.com/auditrail/auditrail/internal/testenv"
	"github.com/auditrail/auditrail/schemas"
)

// scrapeMetrics gets and parses addr's /metrics.
func scrapeMetrics(t *testing.T, addr string) scrape {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("GET /metrics: %d %s", resp.StatusCode, b)
	}
	var p expfmt.TextParser
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	return fams
}

// delta is after's value minus before's (a missing series counts 0).
func delta(before, after scrape, name string, want ...string) float64 {
	return max(0, after.value(name, want...)) - max(0, before.value(name, want...))
}

// denyingHook is a hook server that denies every pre call.
func denyingHook(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/pre":
			_, _ = io.WriteString(w, `{"code":"CHECK_FAILED","error_message":"not on a thursday"}`)
		default:
			_, _ = io.WriteString(w, `{"code":"OK"}`)
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// settled waits until ingest has nothing pending or in flight and its
// counters stopped moving, and returns that scrape.
func settled(t *testing.T, addr string) scrape {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	prev := scrapeMetrics(t, addr)
	for {
		time.Sleep(300 * time.Millisecond)
		cur := scrapeMetrics(t, addr)
		still := cur.value("auditrail_ingest_consumer_pending_messages") == 0 && cur.value("auditrail_ingest_consumer_ack_pending_messages") == 0 &&
			cur.value("auditrail_outbox_pending_events") <= 0 // none in the ingest role
		for _, n := range []string{"auditrail_ingest_rows_total", "auditrail_ingest_batches_total", "auditrail_ingest_dead_lettered_total", "auditrail_stream_messages"} {
			still = still && cur.value(n) == prev.value(n)
		}
		if still {
			return cur
		}
		if time.Now().After(deadline) {
			t.Fatal("ingest did not settle within 30s")
		}
		prev = cur
	}
}

// The metrics of the dev binary (every role in one process) move by
// exactly the traffic sent: events ingested, a dead letter, a 404, 429s
// of the tool runner's rate limit, a tool execution denied by a pre hook
// after an access hook failed open. /metrics answers on --metrics only,
// not on the tenant listener. The deploy files name only metrics that a
// real scrape holds (checkDeployFiles).
func TestMetricsEndToEnd(t *testing.T) {
	t.Parallel()
	maddr := freeAddr(t)
	const toolLimit = 6
	p, boot := devWithKey(t, "--metrics", maddr, "--tool-rate-limit", fmt.Sprintf("%d/60s", toolLimit))

	// Not on the tenant listener, and only /metrics on its own.
	for _, u := range []string{"http://" + p.http + "/metrics", "http://" + maddr + "/healthz", "http://" + maddr + "/api/v1/orgs"} {
		resp, err := http.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 404 || strings.Contains(string(b), "auditrail_") || strings.Contains(string(b), "go_goroutines") {
			t.Fatalf("GET %s: %d %.200s", u, resp.StatusCode, b)
		}
	}

	c := newAPIClient(t, p.http)
	org := c.call("POST", "/api/v1/orgs", boot, map[string]any{"name": "Acme"}).data()["id"].(string)
	project := c.call("POST", "/api/v1/orgs/"+org+"/projects", boot, map[string]any{"name": "p"}).data()["id"].(string)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().String()
	l.Close()
	if r := c.call("POST", "/api/v1/orgs/"+org+"/hooks", boot, map[string]any{"name": "gone", "endpoint": "http://" + closed,
		"points": map[string]any{"access": map[string]any{"failure_mode": "fail_open", "timeout_ms": 500}}, "auth": map[string]any{"type": "bearer", "token": "t"},
		"retries": map[string]any{"max_attempts": 1}, "breaker": map[string]any{"consecutive_failures": 5, "open_ms": 60000}}); r.status != 201 {
		t.Fatalf("access hook: %d %s", r.status, r.raw)
	}
	if r := c.call("POST", "/api/v1/orgs/"+org+"/projects/"+project+"/hooks", boot, map[string]any{"name": "policy", "endpoint": denyingHook(t),
		"points": map[string]any{"pre": map[string]any{"timeout_ms": 2000}}, "auth": map[string]any{"type": "bearer", "token": "t"}}); r.status != 201 {
		t.Fatalf("pre hook: %d %s", r.status, r.raw)
	}

	// A destination of the org, on `auditrail receive`.
	const secret = "the-secret-of-the-metrics-destination"
	raddr, _ := startReceive(t, secret)
	if r := c.call("POST", "/api/v1/orgs/"+org+"/destinations", boot, map[string]any{"name": "siem", "type": "https",
		"url": "http://" + raddr + "/in", "secret": secret}); r.status != 201 {
		t.Fatalf("create destination: %d %s", r.status, r.raw)
	}

	before := settled(t, maddr)

	// A tool execution: the access hook fails open, the pre hook denies.
	tools := "/api/v1/orgs/" + org + "/projects/" + project + "/tools"
	res := c.call("POST", tools+"/execute", boot, map[string]any{"tool_name": "DocumentDbToolkit.DiscoverDatabases", "input": map[string]any{}, "user_id": "alice"})
	if res.status != 200 || !strings.Contains(string(res.raw), "HOOK_CHECK_FAILED") {
		t.Fatalf("execution: %d %s", res.status, res.raw)
	}
	// The tool runner's rate limit: list until refused (its window may
	// roll over once: count what was answered).
	var ok, refused int
	for i := 0; i < 3*toolLimit && refused < 2; i++ {
		switch r := c.call("GET", tools+"?user_id=alice", boot, nil); r.status {
		case 200:
			ok++
		case 429:
			refused++
		default:
			t.Fatalf("list tools: %d %s", r.status, r.raw)
		}
	}
	if refused == 0 {
		t.Fatalf("no 429 after %d calls", ok)
	}
	// A route that does not exist.
	if r := c.call("GET", "/api/v1/orgs/"+org+"/no_such_thing", boot, nil); r.status != 404 {
		t.Fatalf("unknown route: %d", r.status)
	}
	// 40 events in the org, and one message that cannot be decoded.
	const emitted = 40
	emit(t, p, uuid.MustParse(org), emitted)
	nc := p.connect(t)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.PublishMsg(context.Background(), &nats.Msg{Subject: schemas.EventSubject(uuid.NewString(), schemas.KindAudit), Data: []byte("not msgpack"),
		Header: nats.Header{nats.MsgIdHdr: {uuid.NewString()}}}); err != nil {
		t.Fatal(err)
	}
	// Wait for what ingest must do, then for quiet.
	var s scrape
	testenv.Eventually(t, 30*time.Second, func() string {
		return fmt.Sprintf("ingest takes the traffic: rows audit +%v execution +%v, dlq +%v", delta(before, s, "auditrail_ingest_rows_total", "kind", "audit"),
			delta(before, s, "auditrail_ingest_rows_total", "kind", "execution"), delta(before, s, "auditrail_stream_messages", "stream", schemas.StreamDLQ))
	}, func() bool {
		s = scrapeMetrics(t, maddr)
		return delta(before, s, "auditrail_ingest_rows_total", "kind", "audit") >= emitted && delta(before, s, "auditrail_ingest_rows_total", "kind", "execution") >= 1 &&
			delta(before, s, "auditrail_stream_messages", "stream", schemas.StreamDLQ) >= 1
	})
	after := settled(t, maddr)
	// The event stream holds the events, and the checkpoints dev signs
	// every second (each published on the organization's subject: a
	// scrape may fall between a signing and its publishing).
	checkpoints := delta(before, after, "auditrail_tlog_checkpoints_signed_total")
	if got := delta(before, after, "auditrail_stream_messages", "stream", schemas.StreamEvents); got < emitted+2 || got > emitted+2+checkpoints {
		t.Errorf("auditrail_stream_messages[stream %s] moved by %v, want %v and the %v checkpoints signed", schemas.StreamEvents, got, emitted+2, checkpoints)
	}

	listRoute := "/api/v1/orgs/:org_id/projects/:project_id/tools"
	execRoute := listRoute + "/execute"
	for _, tc := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"auditrail_ingest_rows_total", []string{"kind", "audit"}, emitted},
		{"auditrail_ingest_rows_total", []string{"kind", "execution"}, 1},
		{"auditrail_ingest_dead_lettered_total", []string{"kind", "audit"}, 1},
		{"auditrail_ingest_dead_lettered_total", []string{"kind", "execution"}, 0},
		{"auditrail_stream_messages", []string{"stream", schemas.StreamDLQ}, 1},
		{"auditrail_http_requests_total", []string{"route", execRoute, "method", "POST", "code", "200"}, 1},
		{"auditrail_http_request_duration_seconds", []string{"route", execRoute, "method", "POST"}, 1},
		{"auditrail_http_requests_total", []string{"route", listRoute, "code", "200"}, float64(ok)},
		{"auditrail_http_requests_total", []string{"route", listRoute, "code", "429"}, float64(refused)},
		{"auditrail_http_rate_limited_total", []string{"route", listRoute}, float64(refused)},
		{"auditrail_http_rate_limited_total", nil, float64(refused)},
		{"auditrail_http_requests_total", []string{"route", "unmatched", "method", "GET", "code", "404"}, 1},
		{"auditrail_tool_executions_total", []string{"toolkit", "DocumentDbToolkit", "outcome", "HOOK_CHECK_FAILED"}, 1},
		{"auditrail_tool_executions_total", nil, 1},
		{"auditrail_tool_execution_duration_seconds", []string{"toolkit", "DocumentDbToolkit"}, 1},
		{"auditrail_hook_calls_total", []string{"point", "pre", "outcome", "deny", "breaker", "closed"}, 1},
		{"auditrail_hook_calls_total", []string{"point", "access", "outcome", "failed_open", "breaker", "closed"}, 1},
		{"auditrail_hook_calls_total", nil, 2},
		{"auditrail_hook_fail_open_allowed_total", []string{"point", "access"}, 1},
		{"auditrail_hook_fail_open_allowed_total", nil, 1},
	} {
		if got := delta(before, after, tc.name, tc.labels...); got != tc.want {
			t.Errorf("%s%v moved by %v, want %v", tc.name, tc.labels, got, tc.want)
		}
	}
	if t.Failed() {
		for _, m := range after["auditrail_http_requests_total"].GetMetric() {
			t.Logf("auditrail_http_requests_total%v %v", m.GetLabel(), m.GetCounter().GetValue())
		}
	}
	// Batches and commit timings move with the rows.
	if b, h := delta(before, after, "auditrail_ingest_batches_total", "kind", "audit"), delta(before, after, "auditrail_ingest_commit_duration_seconds", "kind", "audit"); b < 1 || b != h {
		t.Errorf("audit batches +%v, commit timings +%v", b, h)
	}
	// Gauges at rest: nothing pending, no breaker open.
	for _, g := range [][]string{{"auditrail_outbox_pending_events", "outbox", "controlplane"}, {"auditrail_outbox_pending_events", "outbox", "execution"},
		{"auditrail_ingest_consumer_pending_messages"}, {"auditrail_ingest_consumer_redelivered_messages"}, {"auditrail_hook_breakers_open"}, {"auditrail_jetstream_info_errors"}} {
		if v := after.value(g[0], g[1:]...); v != 0 {
			t.Errorf("%v = %v, want 0", g, v)
		}
	}
	// No tenant's id is a label value.
	for name, fam := range after {
		for _, m := range fam.GetMetric() {
			for _, l := range m.GetLabel() {
				if strings.Contains(l.GetValue(), org) || strings.Contains(l.GetValue(), project) || strings.Contains(l.GetValue(), "alice") {
					t.Errorf("%s has a tenant's id in label %s=%s", name, l.GetName(), l.GetValue())
				}
			}
		}
	}
	// Every event the receiver took is counted once as delivered, with its lag.
	var delivered, lags float64
	var got map[string]float64
	testenv.Eventually(t, 30*time.Second, func() string {
		return fmt.Sprintf("every delivery counted: delivered %v, lag observations %v; the receiver took %v", delivered, lags, got)
	}, func() bool {
		s := scrapeMetrics(t, maddr)
		got = receiveCounts(t, raddr)
		delivered, lags = s.value("auditrail_delivered_events_total"), s.value("auditrail_delivery_lag_seconds")
		return got["unique"] >= emitted && delivered == got["events"] && lags == delivered
	})
	t.Logf("delivered %v events (%v unique)", delivered, got["unique"])
	checkDeployFiles(t, after)
	checkDocMetrics(t, after)
	lintScrape(t, maddr)
}

// lintScrape runs `promtool check metrics` (naming and unit conventions)
// on a scrape, where promtool is installed.
func lintScrape(t *testing.T, addr string) {
	t.Helper()
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Log("promtool not installed: the scrape is not linted")
		return
	}
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = resp.Body
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("promtool check metrics: %v\n%s", err, out)
	}
}

// Every production role serves /metrics on --metrics and not on its API
// listener, with its own metrics; two ingest processes (dev's and the
// ingest role) sharing the durable consumer store the emitted events
// exactly once between them, as their counters say.
func TestMetricsOnEveryRole(t *testing.T) {
	t.Parallel()
	dsn := testenv.ClickHouse(t)
	boot := "bootstrap-key-of-the-metrics-test"
	secrets := base64.StdEncoding.EncodeToString([]byte("0123456789abcdef0123456789abcdef"))
	cursorKey := base64.StdEncoding.EncodeToString([]byte("cursor-key-shared-by-instances!!"))
	devMetrics := freeAddr(t)
	dev := startDev(t, t.TempDir(), "--clickhouse", dsn, "--bootstrap-key", boot, "--secrets-keys", secrets, "--cursor-keys", cursorKey, "--metrics", devMetrics,
		"--checkpoint-interval", "300ms") // either checkpointer may hold the lease: neither waits its default minute
	pageKeys := base64.StdEncoding.EncodeToString([]byte("page-token-key-shared-by-runners"))
	roles := []struct {
		role string
		args []string
		want []string // metric families of the role
	}{
		{"ingest", append(dev.natsArgs(natsx.RoleIngest), "--clickhouse", dsn, "--flush-interval", "100ms"),
			[]string{"auditrail_ingest_rows_total", "auditrail_ingest_commit_duration_seconds", "auditrail_ingest_consumer_pending_messages", "auditrail_stream_messages"}},
		{"query", append(dev.natsArgs(natsx.RoleQuery), "--clickhouse", dsn, "--bootstrap-key", boot, "--cursor-keys", cursorKey), nil},
		{"controlplane", append(dev.natsArgs(natsx.RoleControlPlane), "--bootstrap-key", boot, "--secrets-keys", secrets), []string{"auditrail_outbox_pending_events"}},
		{"toolrunner", append(dev.natsArgs(natsx.RoleToolRunner), "--bootstrap-key", boot, "--secrets-keys", secrets, "--outbox", t.TempDir(), "--page-token-keys", pageKeys),
			[]string{"auditrail_outbox_pending_events", "auditrail_hook_breakers_open"}},
		{"deliver", append(dev.natsArgs(natsx.RoleDeliver), "--secrets-keys", secrets), []string{"auditrail_delivered_events_total", "auditrail_delivery_lag_seconds"}},
		{"tlog", append(dev.natsArgs(natsx.RoleTLog), "--clickhouse", dsn, "--secrets-keys", secrets, "--checkpoint-interval", "300ms"),
			[]string{"auditrail_tlog_sequencer_leaves_appended_total", "auditrail_tlog_checkpoints_signed_total", "auditrail_tlog_sequencer_lag_messages"}},
	}
	scrapes := map[string]string{}
	for _, r := range roles {
		maddr := freeAddr(t)
		api := startRole(t, r.role, append(r.args, "--metrics", maddr)...)
		scrapes[r.role] = maddr
		resp, err := http.Get("http://" + api + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 404 || strings.Contains(string(b), "auditrail_") {
			t.Errorf("%s: /metrics on the API listener: %d %.200s", r.role, resp.StatusCode, b)
		}
		s := scrapeMetrics(t, maddr)
		for _, name := range append(r.want, "go_goroutines", "process_cpu_seconds_total", "auditrail_http_requests_total") {
			if _, ok := s[name]; !ok {
				t.Errorf("%s: no %s in its scrape", r.role, name)
			}
		}
		if v := s.value("auditrail_http_requests_total", "route", "/healthz", "code", "200"); v < 1 {
			t.Errorf("%s: /healthz requests %v", r.role, v)
		}
	}
	beforeDev, beforeIngest := settled(t, devMetrics), settled(t, scrapes["ingest"])
	const emitted = 3000
	emit(t, dev, uuid.New(), emitted)
	var d, i float64
	testenv.Eventually(t, 60*time.Second, func() string {
		return fmt.Sprintf("rows stored: %v by dev + %v by the ingest role, want %d", d, i, emitted)
	}, func() bool {
		afterDev, afterIngest := scrapeMetrics(t, devMetrics), scrapeMetrics(t, scrapes["ingest"])
		d, i = delta(beforeDev, afterDev, "auditrail_ingest_rows_total", "kind", "audit"), delta(beforeIngest, afterIngest, "auditrail_ingest_rows_total", "kind", "audit")
		if d+i > emitted {
			t.Fatalf("rows stored: %v by dev + %v by the ingest role, want %d", d, i, emitted)
		}
		return d+i == emitted
	})
	t.Logf("rows stored: %v by dev, %v by the ingest role", d, i)
	// The tamper-evidence logs: dev and the tlog role run a sequencer and a
	// checkpointer each, one of each at work at a time (leases): between
	// them every entry is appended once, and checkpoints are signed.
	var appended, signed float64
	testenv.Eventually(t, 60*time.Second, func() string {
		return fmt.Sprintf("tlog: %v leaves appended (emitted %d), %v checkpoints signed", appended, emitted, signed)
	}, func() bool {
		afterDev, afterTLog := scrapeMetrics(t, devMetrics), scrapeMetrics(t, scrapes["tlog"])
		appended = afterDev.value("auditrail_tlog_sequencer_leaves_appended_total", "kind", "audit_logs") +
			afterTLog.value("auditrail_tlog_sequencer_leaves_appended_total", "kind", "audit_logs")
		signed = afterDev.value("auditrail_tlog_checkpoints_signed_total", "kind", "audit_logs") +
			afterTLog.value("auditrail_tlog_checkpoints_signed_total", "kind", "audit_logs")
		_, devSince := afterDev["auditrail_tlog_seconds_since_last_checkpoint"]
		_, roleSince := afterTLog["auditrail_tlog_seconds_since_last_checkpoint"]
		return appended >= emitted && signed >= 1 && (devSince || roleSince)
	})
	t.Logf("tlog: %v leaves appended, %v checkpoints signed", appended, signed)
}

// freeAddr is a free loopback address.
func freeAddr(t *testing.T) string {
	t.Helper()
	p, err := testenv.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("127.0.0.1:%d", p)
}
