package controlplane

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/auditrail/auditrail/controlplane/cpstate"
	"github.com/auditrail/auditrail/internal/egress"
	"github.com/auditrail/auditrail/internal/testenv"
	"github.com/auditrail/auditrail/schemas"
)

const destSecret = "the-secret-of-a-destination"

// auditOf returns the audit events recorded for resource id.
func auditOf(t *testing.T, js jetstream.JetStream, id string) []schemas.AuditEvent {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := js.Stream(ctx, schemas.StreamEvents)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var out []schemas.AuditEvent
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		m, err := st.GetMsg(ctx, seq)
		if err != nil {
			continue
		}
		ev, err := schemas.UnmarshalAuditEvent(m.Data)
		if err == nil && ev.ResourceID != nil && *ev.ResourceID == id {
			out = append(out, ev)
		}
	}
	return out
}

// The destination routes: validation naming the field, the egress guard,
// owners and admins only, secrets sealed (never shown, never in an audit
// event), every change one SETTING event, the status the delivery role
// writes, pause/resume/replay — and every answer as admin.yaml says.
func TestDestinationsAPI(t *testing.T) {
	srv, _, js := testenv.NATS(t)
	n := newNode(t, srv.ClientURL(), nodeOpts{})
	n.run()
	n.svc.UseEgress(egress.AllowLoopback())
	org := n.must(201, "POST", "/api/v1/orgs", bootKey, map[string]any{"name": "acme"}).field("id")
	n.must(201, "PUT", "/api/v1/orgs/"+org+"/members/alice", bootKey, map[string]any{"role": "member"})
	alice := n.must(201, "POST", "/api/v1/orgs/"+org+"/api_keys", bootKey, map[string]any{"name": "a", "user_id": "alice"}).field("key")
	n.must(201, "PUT", "/api/v1/orgs/"+org+"/members/bob", bootKey, map[string]any{"role": "admin"})
	bob := n.must(201, "POST", "/api/v1/orgs/"+org+"/api_keys", bootKey, map[string]any{"name": "b", "user_id": "bob"}).field("key")

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = n.app.Listener(ln) }()
	t.Cleanup(func() { _ = n.app.Shutdown(); <-done })
	base := "http://" + ln.Addr().String()
	api := newAdminSpec(t, base)
	do := func(method, path, key string, body any, want int) []byte {
		t.Helper()
		var rd io.Reader
		if body != nil {
			b, _ := json.Marshal(body)
			rd = bytes.NewReader(b)
		}
		req, _ := http.NewRequest(method, base+path, rd)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+key)
		return api.do(t, req, want)
	}
	dests := "/api/v1/orgs/" + org + "/destinations"
	valid := func() map[string]any {
		return map[string]any{"name": "siem", "type": "https", "url": "http://127.0.0.1:9/in", "secret": destSecret, "q": "action:CREATED"}
	}
	for _, tt := range []struct {
		field string
		mut   func(m map[string]any)
	}{
		{"name", func(m map[string]any) { m["name"] = " " }},
		{"type", func(m map[string]any) { m["type"] = "webhook" }},
		{"format", func(m map[string]any) { m["format"] = "xml" }},
		{"url", func(m map[string]any) { m["url"] = "ftp://example.com" }},
		{"url", func(m map[string]any) { m["url"] = "http://example.com/plain-http" }},
		{"url", func(m map[string]any) { m["url"] = "https://user:pw@example.com/" }},
		{"url", func(m map[string]any) { m["url"] = "https://10.1.2.3/in" }},
		{"url", func(m map[string]any) { m["url"] = "https://169.254.169.254/latest/meta-data" }},
		{"secret", func(m map[string]any) { delete(m, "secret") }},
		{"secret", func(m map[string]any) { m["secret"] = "short" }},
		{"secret", func(m map[string]any) { m["secret"] = cpstate.Redacted }},
		{"token", func(m map[string]any) { m["type"] = "splunk_hec"; delete(m, "secret") }},
		{"q", func(m map[string]any) { m["q"] = `"unterminated` }},
		{"q", func(m map[string]any) { m["q"] = "action:NOPE" }},
	} {
		body := valid()
		tt.mut(body)
		raw := do("POST", dests, bob, body, 400)
		if !strings.Contains(string(raw), tt.field) {
			t.Errorf("%v: the 400 does not name %s: %s", body, tt.field, raw)
		}
	}
	do("POST", dests, alice, valid(), 403)
	do("GET", dests, alice, nil, 403)

	raw := do("POST", dests, bob, valid(), 201)
	var created struct {
		Data map[string]any `json:"data"`
	}
	_ = json.Unmarshal(raw, &created)
	id, _ := created.Data["id"].(string)
	if created.Data["secret"] != cpstate.Redacted || created.Data["sealed"] != nil || strings.Contains(string(raw), destSecret) {
		t.Fatalf("create answer: %s", raw)
	}
	path := dests + "/" + id
	do("GET", dests, bob, nil, 200)
	if raw := do("GET", path, bob, nil, 200); !strings.Contains(string(raw), `"status":"starting"`) || strings.Contains(string(raw), destSecret) {
		t.Fatalf("get before any delivery: %s", raw)
	}

	// The status the delivery role writes in its bucket.
	ctx := context.Background()
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: DeliverBucket})
	if err != nil {
		t.Fatal(err)
	}
	oldest := time.Now().Add(-90 * time.Second).UTC()
	st, _ := json.Marshal(DeliveryStatus{State: DeliveryFailing, Pending: 12, OldestPending: &oldest, Failures: 3, LastError: "status 503", UpdatedAt: time.Now()})
	if _, err := kv.Put(ctx, DeliveryStatusKey(uuid.MustParse(id)), st); err != nil {
		t.Fatal(err)
	}
	var got struct {
		Data destinationReply `json:"data"`
	}
	_ = json.Unmarshal(do("GET", path, bob, nil, 200), &got)
	if d := got.Data; d.Status != DeliveryFailing || d.Pending != 12 || d.Failures != 3 || d.LastError != "status 503" || d.LagSeconds < 89 {
		t.Fatalf("status: %+v", d)
	}

	reader := cpstate.NewDestinationReader(n.state, n.svc.sealer)
	secretOf := func() string {
		ds, err := reader.Destinations()
		if err != nil || len(ds) != 1 {
			t.Fatalf("destinations: %v %v", ds, err)
		}
		return ds[0].Secret
	}
	do("PATCH", path, bob, map[string]any{"url": "http://127.0.0.1:10/other", "format": "ocsf"}, 200)
	if s := secretOf(); s != destSecret {
		t.Fatalf("a patch without the secret changed it: %q", s)
	}
	do("PATCH", path, bob, map[string]any{"secret": "a-new-secret-of-the-destination"}, 200)
	if s := secretOf(); s != "a-new-secret-of-the-destination" {
		t.Fatalf("the secret after a patch: %q", s)
	}
	do("PATCH", path, bob, map[string]any{"url": "https://10.0.0.1/"}, 400)
	do("POST", path+"/pause", bob, nil, 200)
	if raw := do("GET", path, bob, nil, 200); !strings.Contains(string(raw), `"status":"paused"`) {
		t.Fatalf("after pause: %s", raw)
	}
	do("POST", path+"/resume", bob, nil, 200)
	since := time.Now().Add(-time.Hour).UTC().Truncate(time.Second)
	raw = do("POST", path+"/replay", bob, map[string]any{"since": since.Format(time.RFC3339)}, 200)
	if !strings.Contains(string(raw), `"generation":1`) || !strings.Contains(string(raw), since.Format(time.RFC3339)) {
		t.Fatalf("after replay: %s", raw)
	}
	do("POST", path+"/replay", bob, map[string]any{"since": "not a time"}, 400)
	do("DELETE", path, alice, nil, 403)
	do("DELETE", path, bob, nil, 200)
	do("GET", path, bob, nil, 404)

	// One SETTING event per change, never with a secret.
	testenv.Eventually(t, 10*time.Second, "the audit events", func() bool { return len(auditOf(t, js, id)) == 7 })
	for _, ev := range auditOf(t, js, id) {
		if ev.ResourceType == nil || *ev.ResourceType != schemas.ResourceTypeSetting {
			t.Fatalf("resource type %v", ev.ResourceType)
		}
		if bytes.Contains(ev.Data, []byte("secret-of")) || bytes.Contains(ev.Data, []byte("sealed")) {
			t.Fatalf("an audit event carries the secret: %s", ev.Data)
		}
	}
	for _, op := range []string{"listDestinations", "createDestination", "getDestination", "patchDestination", "deleteDestination",
		"pauseDestination", "resumeDestination", "replayDestination"} {
		if !api.checked[op] {
			t.Errorf("%s not checked", op)
		}
	}
}

// Splunk HEC destinations take a token (and no secret is required).
func TestDestinationSplunkNeedsToken(t *testing.T) {
	in := destinationInput{Name: "s", Type: DestSplunkHEC, URL: "https://splunk.example.com:8088/services/collector/event", Token: "t"}
	if err := in.normalize(); err != nil || in.Format != FormatJSON {
		t.Fatalf("%v %+v", err, in)
	}
	for q, kinds := range map[string]string{"": "ae", "tool:x": "e", "action:CREATED": "a", "alice": "ae"} {
		a, e, err := DestinationFilter(q)
		got := ""
		if a != nil {
			got += "a"
		}
		if e != nil {
			got += "e"
		}
		if err != nil || got != kinds {
			t.Errorf("q %q applies to %q (%v), want %q", q, got, err, kinds)
		}
	}
}
