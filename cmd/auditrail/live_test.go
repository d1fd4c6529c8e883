package main

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
)

// TestLiveStreamInDev: through the real binary, a live stream of an org
// receives the events emitted into it (the query role follows the event
// stream with its own NATS credentials), a second org's stream none of
// them, and SIGTERM ends the open streams and lets dev exit promptly.
func TestLiveStreamInDev(t *testing.T) {
	p, key := devWithKey(t)
	org, other := uuid.New(), uuid.New()
	type msg struct{ id, data string }
	open := func(org uuid.UUID) (<-chan msg, <-chan struct{}) {
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, "http://"+p.http+"/api/v1/orgs/"+org.String()+"/audit_logs/stream", nil)
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
			t.Fatalf("stream: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		msgs, done := make(chan msg, 100), make(chan struct{})
		go func() {
			defer close(done)
			r := bufio.NewScanner(resp.Body)
			r.Buffer(make([]byte, 0, 64<<10), 1<<20)
			var m msg
			for r.Scan() {
				line := r.Text()
				switch {
				case strings.HasPrefix(line, "id: "):
					m.id = line[4:]
				case strings.HasPrefix(line, "data: "):
					m.data = line[6:]
				case line == "" && m.id != "":
					msgs <- m
					m = msg{}
				}
			}
		}()
		return msgs, done
	}
	msgs, done := open(org)
	otherMsgs, otherDone := open(other)
	// Both consumers exist before the events are emitted.
	time.Sleep(500 * time.Millisecond)
	emit(t, p, org, 3)
	for i := 0; i < 3; i++ {
		select {
		case m := <-msgs:
			var it map[string]any
			if err := json.Unmarshal([]byte(m.data), &it); err != nil {
				t.Fatalf("data %q: %v", m.data, err)
			}
			if it["event_id"] != m.id || it["organization_id"] != org.String() {
				t.Fatalf("message %s: %s", m.id, m.data)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("%d of 3 messages within 20 s", i)
		}
	}
	select {
	case m := <-otherMsgs:
		t.Fatalf("another org's stream received %s", m.data)
	case <-time.After(300 * time.Millisecond):
	}
	took, _, err := p.terminate(t)
	if err != nil {
		t.Fatalf("dev exited with %v with streams open", err)
	}
	if took > 5*time.Second {
		t.Fatalf("dev took %s to exit with streams open", took)
	}
	for _, d := range []<-chan struct{}{done, otherDone} {
		select {
		case <-d:
		case <-time.After(5 * time.Second):
			t.Fatal("a stream did not end when dev stopped")
		}
	}
}
