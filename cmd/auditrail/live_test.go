//go:build e2e

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
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
	t.Parallel()
	p, key := devWithKey(t)
	org, other := uuid.New(), uuid.New()
	open := func(org uuid.UUID) (<-chan sseFrame, <-chan struct{}) {
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
		msgs, done := readSSE(resp.Body)
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

// TestLiveStreamRevokedInDev: through the real binary, a member's open
// stream ends with an "error" event (403) within 5 s of the member's
// removal, and the entries recorded afterwards never reach it; a reconnect
// with the same key is refused.
func TestLiveStreamRevokedInDev(t *testing.T) {
	t.Parallel()
	p, boot := devWithKey(t)
	api := newAPIClient(t, p.http)
	r := api.call("POST", "/api/v1/orgs", boot, map[string]any{"name": "Acme"})
	if r.status != 201 {
		t.Fatalf("org: %d %s", r.status, r.raw)
	}
	org := "/api/v1/orgs/" + r.data()["id"].(string)
	if r := api.call("PUT", org+"/members/alice", boot, map[string]any{"role": "member"}); r.status != 201 {
		t.Fatalf("member: %d %s", r.status, r.raw)
	}
	r = api.call("POST", org+"/api_keys", boot, map[string]any{"name": "alice's", "user_id": "alice"})
	if r.status != 201 {
		t.Fatalf("key: %d %s", r.status, r.raw)
	}
	key := r.data()["key"].(string)
	req, _ := http.NewRequest(http.MethodGet, "http://"+p.http+org+"/audit_logs/stream", nil)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("stream: %d", resp.StatusCode)
	}
	frames, done := readSSE(resp.Body)
	project := func(name string) string {
		t.Helper()
		r := api.call("POST", org+"/projects", boot, map[string]any{"name": name})
		if r.status != 201 {
			t.Fatalf("project: %d %s", r.status, r.raw)
		}
		return r.data()["id"].(string)
	}
	time.Sleep(300 * time.Millisecond) // the stream's consumer exists
	before := project("before")
	for f := range frames {
		if strings.Contains(f.data, before) {
			break
		}
	}
	if r := api.call("DELETE", org+"/members/alice", boot, nil); r.status != 200 {
		t.Fatalf("remove alice: %d %s", r.status, r.raw)
	}
	removed := time.Now()
	var later []string
	for i := range 3 {
		later = append(later, project("after-"+string(rune('a'+i))))
	}
	var ended *sseFrame
	for ended == nil {
		select {
		case f := <-frames:
			for _, id := range later {
				if strings.Contains(f.data, id) {
					t.Fatalf("an entry recorded after the removal reached the removed member: %s", f.data)
				}
			}
			if f.event == "error" {
				ended = &f
			}
		case <-done:
			select {
			case f := <-frames: // read before the end: select chose at random
				frames <- f
				continue
			default:
			}
			t.Fatal("the stream ended without an error event")
		case <-time.After(5*time.Second - time.Since(removed)):
			t.Fatal("the removed member's stream is still open 5 s later")
		}
	}
	var d struct {
		Code int    `json:"code"`
		Msg  string `json:"msg"`
	}
	if err := json.Unmarshal([]byte(ended.data), &d); err != nil || d.Code != 403 || d.Msg == "" {
		t.Fatalf("error event %q: %v", ended.data, err)
	}
	t.Logf("the stream ended %s after the removal", time.Since(removed).Round(time.Millisecond))
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the stream stays open after its error event")
	}
	if r := api.call("GET", org+"/audit_logs/stream", key, nil); r.status != 403 {
		t.Fatalf("reconnect of the removed member: %d %s", r.status, r.raw)
	}
}

// sseFrame is one message of a live stream: its id, its event name (empty
// for an entry) and its data.
type sseFrame struct{ id, event, data string }

// readSSE reads the messages of a live stream from body until it ends
// (done closes then).
func readSSE(body io.Reader) (chan sseFrame, <-chan struct{}) {
	frames, done := make(chan sseFrame, 100), make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(body)
		sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
		var f sseFrame
		for sc.Scan() {
			switch line := sc.Text(); {
			case strings.HasPrefix(line, "id: "):
				f.id = line[4:]
			case strings.HasPrefix(line, "event: "):
				f.event = line[7:]
			case strings.HasPrefix(line, "data: "):
				f.data = line[6:]
			case line == "" && f.data != "":
				frames <- f
				f = sseFrame{}
			}
		}
	}()
	return frames, done
}
