package deliver_test

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"

	"github.com/auditrail/auditrail/deliver"
	"github.com/auditrail/auditrail/internal/testenv"
	"github.com/auditrail/auditrail/internal/tlog"
	"github.com/auditrail/auditrail/producers"
	"github.com/auditrail/auditrail/schemas"
)

// rejections counts deliver.Observer's rejected events by reason.
type rejections struct {
	mu sync.Mutex
	n  map[string]int
}

func (r *rejections) Delivered([]time.Duration) {}
func (r *rejections) DeliveryFailed()           {}
func (r *rejections) DeliveryRejected(reason string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.n[reason]++
}

func (r *rejections) get(reason string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n[reason]
}

// A message on one organization's subject whose payload names another
// organization (a producer that could publish on A's subjects forging B's
// events, or the reverse) is delivered to neither organization's
// destination: like ingest, the deliverer checks the payload against the
// subject; it logs and counts the event (reason organization_mismatch)
// and goes on with the next ones.
func TestDeliverOrganizationMismatchNotDelivered(t *testing.T) {
	e := newEnv(t)
	orgA := uuid.MustParse(e.org)
	var b struct {
		ID string `json:"id"`
	}
	e.must(201, "POST", "/api/v1/orgs", map[string]any{"name": "globex"}, &b)
	orgB := uuid.MustParse(b.ID)
	rcA, rcB := newReceiver(t, secret), newReceiver(t, secret)
	// No q: every event and checkpoint of the organization is delivered.
	e.destination(map[string]any{"name": "siem-a", "type": "https", "url": rcA.url(), "secret": secret})
	e.must(201, "POST", "/api/v1/orgs/"+orgB.String()+"/destinations",
		map[string]any{"name": "siem-b", "type": "https", "url": rcB.url(), "secret": secret}, nil)
	obs := &rejections{n: map[string]int{}}
	d, _ := e.runObserved(testConfig(), nil, obs)

	audit := func(payloadOrg uuid.UUID) (*nats.Msg, string) {
		rt := schemas.ResourceTypeAPIKey
		ev := schemas.AuditEvent{EventID: uuid.New(), Timestamp: time.Now(), Action: schemas.AuditActionCreated, Source: schemas.AuditSourceAPI,
			DisplayName: "mallory", OrganizationID: payloadOrg, PrincipalID: "mallory", PrincipalType: "ACCOUNT", ResourceType: &rt, ResourceID: schemas.Ptr("k1")}
		m, err := producers.Message(&ev)
		if err != nil {
			t.Fatal(err)
		}
		return m, ev.EventID.String()
	}
	execution := func(payloadOrg uuid.UUID) (*nats.Msg, string) {
		id := uuid.NewString()
		ev := &schemas.ExecutionEvent{EventID: id, ExecutionID: id, OrganizationID: payloadOrg.String(), ProjectID: uuid.NewString(), UserID: "mallory",
			Tool:      schemas.ToolRef{Toolkit: "DocumentDbToolkit", Name: "CountDocuments", Version: "0.4.0"},
			StartedAt: time.Now(), EndedAt: time.Now(), Success: true, ExecutionCode: "OK"}
		m, err := producers.Message(ev)
		if err != nil {
			t.Fatal(err)
		}
		return m, id
	}
	checkpoint := func(noteOrg uuid.UUID) (*nats.Msg, string) {
		origin := tlog.Origin("auditrail.example", noteOrg, tlog.KindAudit)
		m := nats.NewMsg("")
		m.Data = []byte(origin + "\n1\n" + "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\ntimestamp 2026-01-01T00:00:00.000Z\n\n— forged\n")
		return m, origin
	}
	forged := []struct {
		name             string
		make             func(uuid.UUID) (*nats.Msg, string)
		subject, payload uuid.UUID
		kind             string
	}{
		{"audit event of B on A's subject", audit, orgA, orgB, schemas.KindAudit},
		{"audit event of A on B's subject", audit, orgB, orgA, schemas.KindAudit},
		{"execution of B on A's subject", execution, orgA, orgB, schemas.KindExecution},
		{"execution of A on B's subject", execution, orgB, orgA, schemas.KindExecution},
		{"checkpoint of B's log on A's subject", checkpoint, orgA, orgB, schemas.KindCheckpoint},
	}
	var forgedIDs []string
	for _, f := range forged {
		m, id := f.make(f.payload)
		m.Subject = schemas.EventSubject(f.subject.String(), f.kind)
		if _, err := e.admin.PublishMsg(e.ctx, m); err != nil {
			t.Fatalf("%s: %v", f.name, err)
		}
		forgedIDs = append(forgedIDs, id)
	}
	// Then a genuine event of each organization: once it has arrived,
	// the forged ones before it on the same subjects were handled.
	markA, idA := audit(orgA)
	markB, idB := audit(orgB)
	for _, m := range []*nats.Msg{markA, markB} {
		if _, err := e.admin.PublishMsg(e.ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	has := func(rc *receiver, id string) bool {
		for _, got := range rc.r.EventIDs() {
			if got == id {
				return true
			}
		}
		return false
	}
	testenv.Eventually(t, 20*time.Second, "each organization's genuine event arrives", func() bool { return has(rcA, idA) && has(rcB, idB) })
	for i, f := range forged {
		for name, rc := range map[string]*receiver{"A": rcA, "B": rcB} {
			if has(rc, forgedIDs[i]) {
				t.Errorf("%s: delivered to %s's destination", f.name, name)
			}
			for _, line := range rc.lines() {
				if note, _ := line["note"].(string); f.kind == schemas.KindCheckpoint && strings.HasPrefix(note, forgedIDs[i]) {
					t.Errorf("%s: delivered to %s's destination", f.name, name)
				}
			}
		}
	}
	testenv.Eventually(t, 5*time.Second, "every forged message counted", func() bool {
		return obs.get(deliver.RejectOrganizationMismatch) == len(forged)
	})
	if n := obs.get(deliver.RejectUndecodable); n != 0 {
		t.Errorf("%d events counted undecodable", n)
	}
	if got := d.Stats()["rejected"]; got != uint64(len(forged)) {
		t.Errorf("/healthz rejected %v, want %d", got, len(forged))
	}
}
