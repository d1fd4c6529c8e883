//go:build e2e

package main

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/auditrail/auditrail/internal/testenv"
	"github.com/auditrail/auditrail/internal/tlog"
	"github.com/auditrail/auditrail/producers"
	"github.com/auditrail/auditrail/schemas"
)

// TestDevOrgWitness: an organization's admin adds a witness of its own
// (litewitness, torchwood v0.6.1) through the API, beside the operator's
// (--witness). dev allows it on loopback but still refuses a private or
// metadata address. Before the witness knows the log it refuses (403) and
// its status says so; once told of the log and the log's key, the
// checkpoint route serves the note cosigned by both witnesses and the
// list shows the organization's as cosigning at that size. Removed, it is
// sent no later checkpoint: the next one carries the operator's
// cosignature only, and the witness still knows the log at the old size.
// Both changes are in the organization's audit log.
func TestDevOrgWitness(t *testing.T) {
	opW := testenv.StartLitewitness(t, "witness.example/operator")
	orgW := testenv.StartLitewitness(t, "witness.example/org")
	boot := "bootstrap-key-of-the-org-witness-test"
	dev := startDev(t, t.TempDir(), "--bootstrap-key", boot, "--checkpoint-interval", "300ms", "--witness", opW.URL+","+opW.VKey)
	api := newAPIClient(t, dev.http)
	org := uuid.MustParse(api.call("POST", "/api/v1/orgs", boot, map[string]any{"name": "Self-Witnessed Co"}).data()["id"].(string))
	orgPath := "/api/v1/orgs/" + org.String()
	if r := api.call("PUT", orgPath+"/members/ada", boot, map[string]any{"role": "admin"}); r.status != 201 {
		t.Fatalf("member: %d %s", r.status, r.raw)
	}
	admin, _ := api.call("POST", orgPath+"/api_keys", boot, map[string]any{"name": "ada", "user_id": "ada"}).data()["key"].(string)
	if admin == "" {
		t.Fatal("no API key")
	}

	// dev allows loopback (the witness runs here), nothing else inside.
	for _, u := range []string{"http://10.0.0.1:8080", "http://169.254.169.254", "http://[::ffff:10.0.0.1]"} {
		if r := api.call("POST", orgPath+"/witnesses", admin, map[string]any{"url": u, "vkey": orgW.VKey}); r.status != 400 || !strings.Contains(r.msg(), "url") {
			t.Fatalf("%s: %d %s", u, r.status, r.raw)
		}
	}
	r := api.call("POST", orgPath+"/witnesses", admin, map[string]any{"url": orgW.URL, "vkey": orgW.VKey})
	if r.status != 201 || r.data()["status"] != "pending" || r.data()["source"] != "organization" || r.header.Get("Auditrail-Event-Id") == "" {
		t.Fatalf("add the witness: %d %s", r.status, r.raw)
	}
	wid := r.data()["id"].(string)

	keysResp := api.call("GET", "/api/v1/audit_keys", boot, nil)
	var keys struct {
		Data []struct {
			VKey string `json:"vkey"`
		} `json:"data"`
	}
	if err := json.Unmarshal(keysResp.raw, &keys); err != nil || len(keys.Data) == 0 || keys.Data[0].VKey == "" {
		t.Fatalf("audit_keys without a vkey: %s", keysResp.raw)
	}
	origin := tlog.Origin("auditrail", org, tlog.KindAudit)
	opW.AddLog(origin, keys.Data[0].VKey) // the operator's witness knows the log from the start
	opKey, err := tlog.ParseWitnessKey(opW.VKey)
	if err != nil {
		t.Fatal(err)
	}
	orgKey, err := tlog.ParseWitnessKey(orgW.VKey)
	if err != nil {
		t.Fatal(err)
	}

	nc := dev.connect(t)
	pub, err := producers.New(nc, producers.DefaultConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	publish := func(n int) {
		t.Helper()
		batch := make([]producers.Event, n)
		for i := range batch {
			batch[i] = &schemas.AuditEvent{EventID: uuid.New(), OrganizationID: org, Timestamp: time.Now().UTC(),
				Action: schemas.AuditActionUpdated, Source: schemas.AuditSourceSDK, DisplayName: "witnessed", PrincipalID: "svc", PrincipalType: "SERVICE"}
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := pub.PublishBatch(ctx, batch); err != nil {
			t.Fatal(err)
		}
	}
	type wlog struct {
		Status           string `json:"status"`
		LastCosignedSize *int64 `json:"last_cosigned_size"`
		LastError        string `json:"last_error"`
	}
	type wreply struct {
		ID     string `json:"id"`
		Source string `json:"source"`
		VKey   string `json:"vkey"`
		wlog
		Logs map[string]wlog `json:"logs"`
	}
	witnesses := func() []wreply {
		t.Helper()
		r := api.call("GET", orgPath+"/witnesses", admin, nil)
		var out struct {
			Data []wreply `json:"data"`
		}
		if r.status != 200 || json.Unmarshal(r.raw, &out) != nil {
			t.Fatalf("list the witnesses: %d %s", r.status, r.raw)
		}
		return out.Data
	}
	// checkpoint answers the latest checkpoint's size and which of the two
	// witnesses cosigned it.
	checkpoint := func() (size int64, byOp, byOrg bool, note string) {
		t.Helper()
		r := api.call("GET", orgPath+"/audit_logs/checkpoint", admin, nil)
		if r.status != 200 {
			return -1, false, false, string(r.raw)
		}
		note = r.data()["note"].(string)
		got, _, _ := tlog.Cosignatures([]byte(note), []tlog.WitnessKey{opKey, orgKey})
		for _, c := range got {
			byOp = byOp || c.Witness.String() == opKey.String()
			byOrg = byOrg || c.Witness.String() == orgKey.String()
		}
		return int64(r.data()["size"].(float64)), byOp, byOrg, note
	}

	// Not told of the log yet: it refuses, and its status says so.
	publish(10)
	var list []wreply
	testenv.Eventually(t, 30*time.Second, func() string { return "the witness failing (403): " + string(mustJSON(list)) + "\n" + orgW.Logs() }, func() bool {
		list = witnesses()
		return len(list) == 2 && list[1].ID == wid && list[1].Status == "failing" && strings.Contains(list[1].LastError, "403")
	})
	if op := list[0]; op.Source != "operator" || op.VKey != opW.VKey {
		t.Fatalf("the operator's witness first: %+v", op)
	}
	if _, _, byOrg, _ := checkpoint(); byOrg {
		t.Fatal("a checkpoint cosigned by a witness that refused it")
	}

	// Told of the log: the next checkpoints are cosigned by both.
	orgW.AddLog(origin, keys.Data[0].VKey)
	publish(30)
	var size int64
	var note string
	testenv.Eventually(t, 30*time.Second, func() string { return "a checkpoint cosigned by both: " + note + "\n" + orgW.Logs() }, func() bool {
		var byOp, byOrg bool
		size, byOp, byOrg, note = checkpoint()
		return size >= 40 && byOp && byOrg
	})
	testenv.Eventually(t, 10*time.Second, func() string { return "the witness cosigning: " + string(mustJSON(list)) }, func() bool {
		list = witnesses()
		w := list[len(list)-1]
		return w.ID == wid && w.Status == "cosigning" && w.LastError == "" && w.LastCosignedSize != nil && *w.LastCosignedSize >= size &&
			w.Logs["audit_logs"].Status == "cosigning" && *w.LastCosignedSize == orgW.Size(origin)
	})
	if r := api.call("GET", orgPath+"/witnesses/"+wid, admin, nil); r.status != 200 || r.data()["status"] != "cosigning" {
		t.Fatalf("get the witness: %d %s", r.status, r.raw)
	}

	// An organization may not remove the operator's witness.
	if r := api.call("DELETE", orgPath+"/witnesses/"+list[0].ID, admin, nil); r.status != 403 {
		t.Fatalf("delete the operator's witness: %d %s", r.status, r.raw)
	}
	// Removed: 204 (no body), recorded.
	req, _ := http.NewRequest("DELETE", "http://"+dev.http+orgPath+"/witnesses/"+wid, nil)
	req.Header.Set("Authorization", "Bearer "+admin)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 204 || resp.Header.Get("Auditrail-Event-Id") == "" {
		t.Fatalf("delete: %d %v", resp.StatusCode, resp.Header)
	}
	if l := witnesses(); len(l) != 1 || l[0].Source != "operator" {
		t.Fatalf("after the delete: %+v", l)
	}
	// A checkpoint being cosigned at the moment of the delete may still
	// reach it: wait for the log's checkpoint that covers the delete's own
	// event (cosigned by the operator's witness), then take the size the
	// removed witness knows.
	base := size
	testenv.Eventually(t, 30*time.Second, "a checkpoint after the delete", func() bool {
		s, byOp, _, _ := checkpoint()
		if s > base && byOp {
			base = s
			return true
		}
		return false
	})
	known := orgW.Size(origin)
	publish(20)
	testenv.Eventually(t, 30*time.Second, func() string { return "a later checkpoint cosigned by the operator's witness: " + note }, func() bool {
		var byOp bool
		size, byOp, _, note = checkpoint()
		return size >= base+20 && byOp
	})
	if _, _, byOrg, _ := checkpoint(); byOrg {
		t.Fatalf("a checkpoint signed after the witness was removed carries its cosignature:\n%s", note)
	}
	time.Sleep(time.Second) // a few more rounds: nothing is sent to it
	if got := orgW.Size(origin); got != known || got >= size {
		t.Fatalf("the removed witness was sent later checkpoints: it knows the log at %d (at %d when removed), the log is at %d", got, known, size)
	}

	// Both changes are in the organization's audit log.
	testenv.Eventually(t, 20*time.Second, "the witness's CREATED and DELETED entries", func() bool {
		r := api.call("GET", orgPath+"/audit_logs?resource_type=RESOURCE_TYPE_SETTING", admin, nil)
		items, _ := r.data()["items"].([]any)
		var actions []string
		for _, it := range items {
			m, _ := it.(map[string]any)
			if m["resource_id"] == wid {
				actions = append(actions, m["action"].(string))
			}
		}
		return len(actions) == 2 && actions[0] == "AUDIT_ACTION_DELETED" && actions[1] == "AUDIT_ACTION_CREATED"
	})
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}
