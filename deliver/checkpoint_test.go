package deliver_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"

	"github.com/auditrail/auditrail/deliver"
	"github.com/auditrail/auditrail/evidence/checkpointer"
	"github.com/auditrail/auditrail/internal/testenv"
	"github.com/auditrail/auditrail/internal/tlog"
	"github.com/auditrail/auditrail/schemas"
)

// publishCheckpoint publishes a signed checkpoint of the org's audit log
// as the checkpointer does, and returns the note.
func (e *env) publishCheckpoint(size int64) string {
	e.t.Helper()
	priv, _, err := tlog.GenerateKey("auditrail", time.Now())
	if err != nil {
		e.t.Fatal(err)
	}
	note, err := tlog.Sign(tlog.Checkpoint{Origin: tlog.Origin("auditrail", uuid.MustParse(e.org), tlog.KindAudit), Size: size, Time: time.Now()}, priv)
	if err != nil {
		e.t.Fatal(err)
	}
	m := nats.NewMsg(schemas.EventSubject(e.org, schemas.KindCheckpoint))
	m.Data = note
	m.Header.Set(schemas.HeaderSchema, schemas.SchemaCheckpointV1)
	m.Header.Set(schemas.HeaderContentType, schemas.ContentTextPlain)
	m.Header.Set(schemas.HeaderMsgID, checkpointer.MsgID(note))
	if _, err := e.admin.PublishMsg(e.ctx, m); err != nil {
		e.t.Fatal(err)
	}
	return string(note)
}

// A checkpoint published on the org's subjects reaches a JSON destination
// as a line {"type":"checkpoint","note":…} in stream order, whatever its
// filter q; an OCSF destination skips it on purpose (no OCSF class for a
// signed tree head) and is not stuck on it; neither counts it as an event.
func TestDeliverCheckpoints(t *testing.T) {
	e := newEnv(t)
	rcJSON, rcOCSF := newReceiver(t, secret), newReceiver(t, secret)
	e.destination(map[string]any{"name": "siem", "type": "https", "url": rcJSON.url(), "secret": secret, "q": "resource_type:API_KEY"})
	e.destination(map[string]any{"name": "ocsf", "type": "https", "url": rcOCSF.url(), "secret": secret, "format": "ocsf", "q": "resource_type:API_KEY"})
	hec, err := deliver.NewReceiver(deliver.ReceiverConfig{SplunkToken: "hec-token"})
	if err != nil {
		t.Fatal(err)
	}
	var hecBodies []string
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		hecBodies = append(hecBodies, string(b))
		mu.Unlock()
		r.Body = io.NopCloser(bytes.NewReader(b))
		hec.ServeHTTP(w, r)
	}))
	defer srv.Close()
	e.destination(map[string]any{"name": "splunk", "type": "splunk_hec", "url": srv.URL + "/services/collector/event", "token": "hec-token", "q": "resource_type:API_KEY"})
	e.run(testConfig(), nil)
	want := e.publish(3, time.Now(), schemas.ResourceTypeAPIKey)
	note := e.publishCheckpoint(3)
	want = append(want, e.publish(2, time.Now(), schemas.ResourceTypeAPIKey)...)
	for _, rc := range []*receiver{rcJSON, rcOCSF} {
		testenv.Eventually(t, 20*time.Second, "the destination receives the 5 events", func() bool { return rc.r.Counts().Unique >= 5 })
	}
	time.Sleep(300 * time.Millisecond)
	for name, rc := range map[string]*receiver{"json": rcJSON, "ocsf": rcOCSF} {
		if c := rc.r.Counts(); c.Rejected != 0 || c.Unique != 5 || c.Events != 5 {
			t.Errorf("%s: counts %+v", name, c)
		}
	}
	var kinds []string
	for _, m := range rcJSON.lines() {
		if m["type"] == "checkpoint" {
			if m["note"] != note || len(m) != 2 {
				t.Fatalf("checkpoint line %v, want the note %q", m, note)
			}
			kinds = append(kinds, "checkpoint")
			continue
		}
		kinds = append(kinds, "event")
	}
	if want := []string{"event", "event", "event", "checkpoint", "event", "event"}; !equal(kinds, want) {
		t.Errorf("JSON lines %v, want %v", kinds, want)
	}
	for _, m := range rcOCSF.lines() {
		if _, ok := m["note"]; ok || m["type"] == "checkpoint" {
			t.Errorf("OCSF destination got a checkpoint: %v", m)
		}
	}
	if got := rcJSON.r.EventIDs(); !equal(got, want) {
		t.Errorf("events %v, want %v", got, want)
	}
	// Splunk HEC (JSON format): the same line in the event envelope.
	testenv.Eventually(t, 20*time.Second, "splunk receives the 5 events", func() bool { return hec.Counts().Unique >= 5 })
	mu.Lock()
	all := strings.Join(hecBodies, "\n")
	mu.Unlock()
	if c := hec.Counts(); c.Rejected != 0 || c.Events != 5 {
		t.Errorf("splunk: counts %+v", c)
	}
	line, _ := json.Marshal(deliver.CheckpointItem{Type: "checkpoint", Note: note})
	if !strings.Contains(all, `"sourcetype":"auditrail:checkpoint","event":`+string(line)) {
		t.Errorf("splunk bodies without the checkpoint %s:\n%s", line, all)
	}
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
