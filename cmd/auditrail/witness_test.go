//go:build e2e

package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/auditrail/auditrail/internal/testenv"
	"github.com/auditrail/auditrail/internal/tlog"
	"github.com/auditrail/auditrail/producers"
	"github.com/auditrail/auditrail/schemas"
)

// TestDevWitnessed: dev with --witness submits every checkpoint to a
// litewitness (torchwood v0.6.1, a C2SP tlog-witness nobody here wrote),
// serves the cosigned checkpoint, and `auditrail verify --witness VKEY
// --witness-quorum K` passes with the witness's cosignature, fails without
// a quorum, and fails on a forged cosignature.
func TestDevWitnessed(t *testing.T) {
	lw := testenv.StartLitewitness(t, "witness.example/e2e")
	boot := "bootstrap-key-of-the-witness-test"
	dev := startDev(t, t.TempDir(), "--bootstrap-key", boot, "--checkpoint-interval", "300ms", "--witness", lw.URL+","+lw.VKey)
	api := newAPIClient(t, dev.http)
	org := uuid.MustParse(api.call("POST", "/api/v1/orgs", boot, map[string]any{"name": "Witnessed Co"}).data()["id"].(string))

	// The witness is told of the organization's log and the log's key,
	// as published by audit_keys (vkey) from the role's first start.
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
	lw.AddLog(origin, keys.Data[0].VKey)
	keysFile := filepath.Join(t.TempDir(), "keys.json")
	if err := os.WriteFile(keysFile, keysResp.raw, 0o600); err != nil {
		t.Fatal(err)
	}
	wkey, err := tlog.ParseWitnessKey(lw.VKey)
	if err != nil {
		t.Fatal(err)
	}

	nc := dev.connect(t)
	pub, err := producers.New(nc, producers.DefaultConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	batch := make([]producers.Event, 40)
	for i := range batch {
		batch[i] = &schemas.AuditEvent{EventID: uuid.New(), OrganizationID: org, Timestamp: time.Now().UTC(),
			Action: schemas.AuditActionUpdated, Source: schemas.AuditSourceSDK, DisplayName: "witnessed", PrincipalID: "svc", PrincipalType: "SERVICE"}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := pub.PublishBatch(ctx, batch); err != nil {
		t.Fatal(err)
	}

	// The checkpoint route and the tiles' checkpoint serve the note with
	// the witness's cosignature once it covers the events.
	var note []byte
	testenv.Eventually(t, 30*time.Second, func() string {
		return "a cosigned checkpoint of 41 entries: " + string(note) + "\n" + lw.Logs()
	}, func() bool {
		r := api.call("GET", "/api/v1/orgs/"+org.String()+"/audit_logs/checkpoint", boot, nil)
		if r.status != 200 {
			return false
		}
		note = []byte(r.data()["note"].(string))
		got, _, _ := tlog.Cosignatures(note, []tlog.WitnessKey{wkey})
		return r.data()["size"].(float64) >= 41 && len(got) == 1
	})
	if lw.Size(origin) < 41 {
		t.Fatalf("the witness knows the log at %d", lw.Size(origin))
	}
	// The checkpoint seals the log: every entry created by its
	// sealed_until is below its size; the feed answers the seal too.
	r := api.call("GET", "/api/v1/orgs/"+org.String()+"/audit_logs/checkpoint", boot, nil)
	sealed, _ := r.data()["sealed_until"].(string)
	if sealed == "" || !strings.Contains(r.data()["note"].(string), "\nsealed_until "+sealed+"\n") {
		t.Fatalf("no sealed_until in the checkpoint: %s", r.raw)
	}
	feed := api.call("GET", "/api/v1/orgs/"+org.String()+"/audit_logs/feed?limit=1", boot, nil)
	if s, _ := feed.data()["sealed_until"].(string); s == "" || s < sealed {
		t.Fatalf("the feed's sealed_until %q, the checkpoint's %q", s, sealed)
	}

	verify := func(args ...string) (string, error) {
		out, err := exec.Command(binary(t), append([]string{"verify", "--keys", keysFile}, args...)...).CombinedOutput()
		return string(out), err
	}
	online := []string{"--url", "http://" + dev.http, "--key", boot, "--org", org.String()}
	out, err := verify(append(online, "--witness", lw.VKey, "--witness-quorum", "1")...)
	if err != nil || !strings.Contains(out, "verified by 1 witnesses") {
		t.Fatalf("verify with the witness: %v\n%s", err, out)
	}

	// A second witness that never saw the log: a quorum of 2 fails.
	other := testenv.StartLitewitness(t, "witness.example/other")
	out, err = verify(append(online, "--witness", lw.VKey, "--witness", other.VKey, "--witness-quorum", "2")...)
	if err == nil || !strings.Contains(out, "cosigned by 1 of the witnesses given") {
		t.Fatalf("verify without a quorum passed or said why not: %v\n%s", err, out)
	}

	// A forged cosignature on the checkpoint verified against fails.
	req, _ := http.NewRequest("GET", "http://"+dev.http+"/api/v1/orgs/"+org.String()+"/audit_logs/export?format=jsonl", nil)
	req.Header.Set("Authorization", "Bearer "+boot)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	exported, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("export: %d %v", resp.StatusCode, err)
	}
	dir := t.TempDir()
	exportFile, cpFile, forgedFile := filepath.Join(dir, "export.jsonl"), filepath.Join(dir, "cp.note"), filepath.Join(dir, "forged.note")
	if err := os.WriteFile(exportFile, exported, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cpFile, note, 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := verify("--export", exportFile, "--checkpoint", cpFile, "--witness", lw.VKey); err != nil || !strings.Contains(out, "verified by 1 witnesses") {
		t.Fatalf("offline with the witness: %v\n%s", err, out)
	}
	got, _, _ := tlog.Cosignatures(note, []tlog.WitnessKey{wkey})
	line := strings.TrimSuffix(got[0].Line, "\n")
	i := strings.LastIndexByte(line, ' ')
	sig, _ := base64.StdEncoding.DecodeString(line[i+1:])
	sig[len(sig)-1] ^= 1
	forged := strings.Replace(string(note), line, line[:i+1]+base64.StdEncoding.EncodeToString(sig), 1)
	if err := os.WriteFile(forgedFile, []byte(forged), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err = verify("--export", exportFile, "--checkpoint", forgedFile, "--witness", lw.VKey)
	if err == nil || !strings.Contains(out, "does not verify") {
		t.Fatalf("a forged cosignature passed: %v\n%s", err, out)
	}
}
