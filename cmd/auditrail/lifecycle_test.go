//go:build e2e

package main

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/auditrail/auditrail/internal/natsx"
	"github.com/auditrail/auditrail/internal/testenv"
	"github.com/auditrail/auditrail/schemas"
)

// An organization's retention, through dev on SQLite: the entries older
// than it leave the listing, the export, the proof route and the event
// stream, but not those a legal hold keeps; `auditrail verify` still
// passes and says what expired; a hand deletion, of an entry above the
// horizon or of a held one, still fails.
func TestRetentionExpiresProvably(t *testing.T) {
	t.Parallel()
	p, boot := devWithKey(t, "--retention-interval", "300ms", "--retention-grace", "0s", "--checkpoint-interval", "200ms")
	c := newAPIClient(t, p.http)
	org := c.call("POST", "/api/v1/orgs", boot, map[string]any{"name": "Acme"}).data()["id"].(string)
	var events, projects []string
	for i := range 6 {
		r := c.call("POST", "/api/v1/orgs/"+org+"/projects", boot, map[string]any{"name": fmt.Sprintf("p%d", i)})
		if r.status != 201 {
			t.Fatalf("create project: %d %s", r.status, r.raw)
		}
		events = append(events, r.header.Get("Auditrail-Event-Id"))
		projects = append(projects, r.data()["id"].(string))
	}
	held := events[2]
	r := c.call("POST", "/api/v1/orgs/"+org+"/legal_holds", boot, map[string]any{"name": "dispute", "q": "resource_id:" + projects[2]})
	if r.status != 201 {
		t.Fatalf("legal hold: %d %s", r.status, r.raw)
	}
	holdID := r.data()["id"].(string)
	auditEntries(t, c, boot, "/api/v1/orgs/"+org+"/audit_logs", 8)
	time.Sleep(1500 * time.Millisecond) // these entries are older than the retention set next
	if r := c.call("PUT", "/api/v1/orgs/"+org+"/retention", boot, map[string]any{"audit_logs": "1s"}); r.status != 200 {
		t.Fatalf("PUT retention: %d %s", r.status, r.raw)
	}

	listed := func() []string {
		r := c.call("GET", "/api/v1/orgs/"+org+"/audit_logs?limit=100", boot, nil)
		var ids []string
		for _, it := range r.data()["items"].([]any) {
			ids = append(ids, it.(map[string]any)["event_id"].(string))
		}
		return ids
	}
	testenv.Eventually(t, 30*time.Second, func() string { return fmt.Sprintf("still listed: %v", listed()) }, func() bool {
		ids := listed()
		for _, e := range events {
			if e != held && slices.Contains(ids, e) {
				return false
			}
		}
		return slices.Contains(ids, held)
	})
	if r := c.call("GET", "/api/v1/orgs/"+org+"/legal_holds/"+holdID, boot, nil); r.status != 200 || r.data()["held"] != float64(1) {
		t.Fatalf("the hold: %d %s", r.status, r.raw)
	}

	// The proof of an expired entry: 410.
	if r := c.call("GET", "/api/v1/orgs/"+org+"/audit_logs/proof?event_id="+events[0], boot, nil); r.status != 410 || !strings.Contains(r.msg(), "expired") {
		t.Fatalf("proof of an expired entry: %d %s", r.status, r.raw)
	}
	if r := c.call("GET", "/api/v1/orgs/"+org+"/audit_logs/proof?event_id="+held, boot, nil); r.status != 200 {
		t.Fatalf("proof of a held entry: %d %s", r.status, r.raw)
	}

	// The stream holds none of the expired entries any more.
	nc := p.connect(t)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	st, err := js.Stream(ctx, schemas.StreamEvents)
	if err != nil {
		t.Fatal(err)
	}
	cons, err := st.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{FilterSubjects: []string{schemas.EventSubject(org, schemas.KindAudit)}})
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx, jetstream.WithSubjectFilter(schemas.EventSubject(org, schemas.KindAudit)))
	if err != nil {
		t.Fatal(err)
	}
	n := int(info.State.Subjects[schemas.EventSubject(org, schemas.KindAudit)])
	if n > 0 {
		batch, err := cons.FetchNoWait(n)
		if err != nil {
			t.Fatal(err)
		}
		for m := range batch.Messages() {
			if id := m.Headers().Get(schemas.HeaderMsgID); slices.Contains(events, id) && id != events[len(events)-1] {
				t.Errorf("the stream still holds expired event %s", id)
			}
		}
	}

	// Verified online, with a note saying what expired.
	keysFile := filepath.Join(t.TempDir(), "keys.json")
	if err := os.WriteFile(keysFile, c.call("GET", "/api/v1/audit_keys", boot, nil).raw, 0o600); err != nil {
		t.Fatal(err)
	}
	verify := func() (string, error) {
		out, err := exec.Command(binary(t), "verify", "--url", "http://"+p.http, "--key", boot, "--org", org, "--keys", keysFile, "--wait", "10s").CombinedOutput()
		return string(out), err
	}
	out, err := verify()
	if err != nil || !strings.Contains(out, "expired under the organization's retention of 1 second") && !strings.Contains(out, "expired under the organization's retention of 1s") {
		t.Fatalf("verify after the expiry: %v\n%s", err, out)
	}

	// Hand edits still fail: the held entry deleted.
	db, err := sql.Open("sqlite", "file:"+filepath.Join(p.data, "audit.db")+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`DELETE FROM audit_logs WHERE organization_id = ? AND event_id = ?`, org, held); err != nil {
		t.Fatal(err)
	}
	if out, err := verify(); err == nil || !strings.Contains(out, "held entries were deleted") {
		t.Fatalf("verify after deleting a held entry: %v\n%s", err, out)
	}
	_ = natsx.RoleAdmin
}
