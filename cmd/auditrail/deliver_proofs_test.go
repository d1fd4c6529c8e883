//go:build e2e

package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/auditrail/auditrail/internal/testenv"
	"github.com/auditrail/auditrail/producers"
	"github.com/auditrail/auditrail/schemas"
)

// Proof with every delivery: dev's JSON destinations get batches whose
// last line proves them (BatchItem), and `auditrail receive --verify
// --keys` checks every one: each entry in the signed checkpoint, the
// filtered leaves covered by subtrees, no leaf between batches missing.
// A batch removed on the way (a proxy that answers 200 and drops it) is a
// gap the receiver names by leaf.
func TestDevDeliveriesProveThemselves(t *testing.T) {
	t.Parallel()
	const secret = "the-secret-of-the-proven-destination"
	boot := "bootstrap-key-of-the-proofs-test"
	p := startDev(t, t.TempDir(), "--bootstrap-key", boot, "--deliver-batch", "10")
	c := newAPIClient(t, p.http)
	org := c.call("POST", "/api/v1/orgs", boot, map[string]any{"name": "Proven Co"}).data()["id"].(string)
	keysFile := filepath.Join(t.TempDir(), "keys.json")
	if err := os.WriteFile(keysFile, c.call("GET", "/api/v1/audit_keys", boot, nil).raw, 0o600); err != nil {
		t.Fatal(err)
	}
	good, goodOut := startReceive(t, secret, "--verify", "--keys", keysFile)
	lossy, lossyOut := startReceive(t, secret, "--verify", "--keys", keysFile)
	// The lossy receiver sits behind a proxy that drops the third POST.
	var posts atomic.Int64
	target, _ := url.Parse("http://" + lossy)
	rp := httputil.NewSingleHostReverseProxy(target)
	drop := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if posts.Add(1) == 3 {
			_, _ = io.Copy(io.Discard, r.Body)
			w.WriteHeader(http.StatusOK) // taken, never passed on
			return
		}
		rp.ServeHTTP(w, r)
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: drop}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })

	for name, u := range map[string]string{"all": "http://" + good + "/in", "lossy": "http://" + ln.Addr().String() + "/in"} {
		body := map[string]any{"name": name, "type": "https", "url": u, "secret": secret}
		if name == "all" {
			body["q"] = "resource_type:API_KEY" // half the events: the others' leaves come as subtrees
		}
		if r := c.call("POST", "/api/v1/orgs/"+org+"/destinations", boot, body); r.status != 201 {
			t.Fatalf("destination %s: %d %s", name, r.status, r.raw)
		}
	}
	js, err := jetstream.New(p.connect(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const n = 60
	for i := 0; i < n; i++ {
		rt := schemas.ResourceTypeAPIKey
		if i%2 == 1 {
			rt = schemas.ResourceTypeProject
		}
		ev := schemas.AuditEvent{EventID: uuid.New(), Timestamp: time.Now(), Action: schemas.AuditActionCreated,
			Source: schemas.AuditSourceAPI, DisplayName: "alice", OrganizationID: uuid.MustParse(org), PrincipalID: "alice",
			PrincipalType: "ACCOUNT", ResourceType: schemas.Ptr(rt), ResourceID: schemas.Ptr(fmt.Sprint("r", i))}
		m, err := producers.Message(&ev)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := js.PublishMsg(ctx, m); err != nil {
			t.Fatal(err)
		}
		if i%15 == 14 {
			time.Sleep(1500 * time.Millisecond) // several checkpoints, several batches
		}
	}
	testenv.Eventually(t, 60*time.Second, func() string {
		return fmt.Sprintf("the filtered receiver verified every batch: %v\n%s", receiveCounts(t, good), goodOut)
	}, func() bool { return receiveCounts(t, good)["unique"] >= n/2 })
	time.Sleep(500 * time.Millisecond)
	gc := receiveCounts(t, good)
	if gc["verified"] < 2 || gc["gaps"] != 0 || gc["proof_failures"] != 0 || gc["unproven"] != 0 || gc["leaf_duplicates"] != 0 {
		t.Fatalf("the receiver of every batch: %v\n%s", gc, goodOut)
	}
	if !strings.Contains(goodOut.String(), "verified: organization "+org+" audit_logs: leaves ") {
		t.Fatalf("no verified line:\n%s", goodOut)
	}
	// The lossy one: the dropped batch's leaves are a gap, named.
	testenv.Eventually(t, 60*time.Second, func() string {
		return fmt.Sprintf("the lossy receiver names the gap: %v\n%s", receiveCounts(t, lossy), lossyOut)
	}, func() bool { return receiveCounts(t, lossy)["gaps"] >= 1 })
	if !bytes.Contains([]byte(lossyOut.String()), []byte("gap: organization "+org+" audit_logs: leaves ")) {
		t.Fatalf("no gap line:\n%s", lossyOut)
	}
	if lc := receiveCounts(t, lossy); lc["proof_failures"] != 0 {
		t.Fatalf("the lossy receiver's other batches failed: %v\n%s", lc, lossyOut)
	}
}
