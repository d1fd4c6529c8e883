//go:build e2e

package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/auditrail/auditrail/internal/natsx"
	"github.com/auditrail/auditrail/internal/testenv"
	"github.com/auditrail/auditrail/producers"
	"github.com/auditrail/auditrail/schemas"
)

// feedPoller follows a feed over HTTP as a compliance system would: from
// its cursor, forever, counting what it receives.
type feedPoller struct {
	base, path, key string
	mu              sync.Mutex
	cursor          string
	seen            map[string]int
	last            float64
	backwards       int
	errs            []string
}

func (p *feedPoller) pollOnce() {
	for {
		q := url.Values{"limit": {"200"}}
		p.mu.Lock()
		if p.cursor != "" {
			q.Set("cursor", p.cursor)
		}
		p.mu.Unlock()
		req, _ := http.NewRequest("GET", "http://"+p.base+p.path+"?"+q.Encode(), nil)
		req.Header.Set("Authorization", "Bearer "+p.key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			p.fail("GET: %v", err)
			return
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			p.fail("GET %s: %d %s", p.path, resp.StatusCode, body)
			return
		}
		var page struct {
			Data struct {
				Items []struct {
					EventID  string  `json:"event_id"`
					Position float64 `json:"position"`
				} `json:"items"`
				NextCursor *string `json:"next_cursor"`
			} `json:"data"`
		}
		if err := json.Unmarshal(body, &page); err != nil || page.Data.NextCursor == nil {
			p.fail("page without next_cursor: %s", body)
			return
		}
		p.mu.Lock()
		for _, it := range page.Data.Items {
			p.seen[it.EventID]++
			if it.Position <= p.last {
				p.backwards++
			}
			p.last = it.Position
		}
		p.cursor = *page.Data.NextCursor
		p.mu.Unlock()
		if len(page.Data.Items) == 0 {
			return
		}
	}
}

func (p *feedPoller) fail(format string, args ...any) {
	p.mu.Lock()
	p.errs = append(p.errs, fmt.Sprintf(format, args...))
	p.mu.Unlock()
}

// count answers how many of ids the poller received, and how many of them
// more than once.
func (p *feedPoller) count(ids []string) (got, twice int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, id := range ids {
		switch n := p.seen[id]; {
		case n == 1:
			got++
		case n > 1:
			got++
			twice++
		}
	}
	return got, twice
}

// The feed's guarantee through the production roles: a poller of the query
// role follows an organization's feed while events are published, some of
// them an hour old (published after the poller passed their timestamps),
// by two ingest instances (dev's and an ingest role) of which the role is
// killed mid-way and started again. The poller receives every event
// exactly once, in increasing positions; the list route holds them too.
func TestFeedLateEventsAndIngestRestart(t *testing.T) {
	t.Parallel()
	dsn := testenv.ClickHouse(t)
	boot := "bootstrap-key-of-the-feed-test"
	cursorKey := base64.StdEncoding.EncodeToString([]byte("cursor-key-of-the-feed-test-1234"))
	common := []string{"--clickhouse", dsn, "--bootstrap-key", boot, "--cursor-keys", cursorKey, "--rate-limit", "100000/60s"}
	dev := startDev(t, t.TempDir(), append(common, "--ack-wait", "3s")...)
	q := startQueryRole(t, append(dev.natsArgs(natsx.RoleQuery), common...)...)
	ingestArgs := append(dev.natsArgs(natsx.RoleIngest), "--clickhouse", dsn, "--ack-wait", "3s", "--flush-interval", "100ms")
	startIngest := func() *exec.Cmd {
		port, _ := testenv.FreePort()
		cmd := exec.Command(binary(t), append([]string{"ingest", "--http", fmt.Sprintf("127.0.0.1:%d", port)}, ingestArgs...)...)
		out := &testenv.SyncBuffer{}
		cmd.Stdout, cmd.Stderr = out, out
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			if t.Failed() {
				t.Logf("ingest role output:\n%s", out)
			}
		})
		return cmd
	}
	ing := startIngest()

	api := newAPIClient(t, dev.http)
	org := uuid.MustParse(api.call("POST", "/api/v1/orgs", boot, map[string]any{"name": "Feed Co"}).data()["id"].(string))
	pub, err := producers.New(dev.connect(t), producers.DefaultConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var published []string
	round := func(n int, age time.Duration) {
		t.Helper()
		batch := make([]producers.Event, n)
		for i := range batch {
			e := &schemas.AuditEvent{EventID: uuid.New(), OrganizationID: org, Timestamp: time.Now().Add(-age).UTC(),
				Action: schemas.AuditActionUpdated, Source: schemas.AuditSourceSDK, DisplayName: "feeder", PrincipalID: "svc", PrincipalType: "SERVICE"}
			batch[i] = e
			published = append(published, e.EventID.String())
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := pub.PublishBatch(ctx, batch); err != nil {
			t.Fatal(err)
		}
	}

	p := &feedPoller{base: q, path: "/api/v1/orgs/" + org.String() + "/audit_logs/feed", key: boot, seen: map[string]int{}}
	stop := make(chan struct{})
	polled := make(chan struct{})
	go func() {
		defer close(polled)
		for {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
				p.pollOnce()
			}
		}
	}()
	waitAll := func(what string, within time.Duration) {
		t.Helper()
		got := 0
		testenv.Eventually(t, within, func() string {
			return fmt.Sprintf("%s: the poller received %d of %d events (errors: %v)", what, got, len(published), p.errs)
		}, func() bool {
			var twice int
			if got, twice = p.count(published); twice > 0 {
				t.Fatalf("%s: %d events received twice", what, twice)
			}
			return got == len(published)
		})
	}

	round(400, 0)
	waitAll("current events", 30*time.Second)
	// Late: an hour old, published after the poller went past that hour.
	round(400, time.Hour)
	waitAll("late events", 30*time.Second)
	// The ingest role dies (no drain) while a round is published, and
	// comes back: its unacknowledged messages are redelivered.
	round(600, 2*time.Hour)
	if err := ing.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	round(300, 30*time.Minute)
	startIngest()
	round(300, 0)
	waitAll("events across an ingest restart", 60*time.Second)
	close(stop)
	<-polled
	if p.backwards != 0 {
		t.Fatalf("%d positions went backwards", p.backwards)
	}
	if len(p.errs) > 0 {
		t.Fatalf("poller errors: %v", p.errs)
	}
	if ids := walk(t, q, "/api/v1/orgs/"+org.String()+"/audit_logs", boot, 100); len(ids) < len(published) {
		t.Fatalf("the list holds %d of %d events", len(ids), len(published))
	}
}
