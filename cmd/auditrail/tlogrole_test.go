//go:build e2e

package main

import (
	"context"
	"encoding/json"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/auditrail/auditrail/evidence/checkpointer"
	"github.com/auditrail/auditrail/internal/natsx"
	"github.com/auditrail/auditrail/internal/testenv"
	"github.com/auditrail/auditrail/internal/tlog"
	"github.com/auditrail/auditrail/producers"
	"github.com/auditrail/auditrail/schemas"
)

// dev runs the tamper-evidence logs: every entry published is appended to
// its organization's log, and a checkpoint signed by a key of the tlog
// bucket reaches the org's subject, whose root is the root of the entries
// exactly as the feed route returns them, in the feed's order.
func TestDevSignsCheckpointsOfTheFeed(t *testing.T) {
	t.Parallel()
	t.Run("sqlite", func(t *testing.T) { testDevSignsCheckpoints(t) })
	t.Run("clickhouse", func(t *testing.T) { testDevSignsCheckpoints(t, "--clickhouse", testenv.ClickHouse(t)) })
}

func testDevSignsCheckpoints(t *testing.T, store ...string) {
	boot := "bootstrap-key-of-the-tlog-test"
	dev := startDev(t, t.TempDir(), append([]string{"--bootstrap-key", boot, "--checkpoint-interval", "300ms"}, store...)...)
	api := newAPIClient(t, dev.http)
	org := uuid.MustParse(api.call("POST", "/api/v1/orgs", boot, map[string]any{"name": "Evidence Co"}).data()["id"].(string))
	nc := dev.connect(t)
	notes := make(chan *nats.Msg, 64)
	sub, err := nc.ChanSubscribe(schemas.EventSubject(org.String(), schemas.KindCheckpoint), notes)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()

	pub, err := producers.New(nc, producers.DefaultConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	const n = 250
	batch := make([]producers.Event, n)
	for i := range batch {
		batch[i] = &schemas.AuditEvent{EventID: uuid.New(), OrganizationID: org, Timestamp: time.Now().Add(-time.Duration(i) * time.Second).UTC(),
			Action: schemas.AuditActionUpdated, Source: schemas.AuditSourceSDK, DisplayName: "signer ✓", PrincipalID: "svc", PrincipalType: "SERVICE"}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := pub.PublishBatch(ctx, batch); err != nil {
		t.Fatal(err)
	}

	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	kv, err := js.KeyValue(ctx, natsx.TLogBucket)
	if err != nil {
		t.Fatal(err)
	}
	ring, err := checkpointer.NewKeyring(kv, nil, checkpointer.DefaultKeyringConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	// The log holds the org's creation (an admin event) and the n events.
	var cp tlog.Checkpoint
	var cpNote []byte
	for cp.Size < n+1 {
		select {
		case m := <-notes:
			if m.Header.Get("Auditrail-Schema") != "checkpoint/v1" {
				t.Fatalf("checkpoint headers %v", m.Header)
			}
			pubs, err := ring.PublicKeys(ctx)
			if err != nil {
				t.Fatal(err)
			}
			keys, err := tlog.NewKeySet(pubs...)
			if err != nil {
				t.Fatal(err)
			}
			cpNote = m.Data
			if cp, _, err = tlog.Open(m.Data, keys); err != nil {
				t.Fatalf("checkpoint does not open with the published keys: %v\n%s", err, m.Data)
			}
			if want := tlog.Origin("auditrail", org, tlog.KindAudit); cp.Origin != want {
				t.Fatalf("origin %q, want %q", cp.Origin, want)
			}
		case <-ctx.Done():
			t.Fatalf("no checkpoint of %d entries (last size %d)\n%s", n+1, cp.Size, dev.stderr)
		}
	}
	if cp.Size != n+1 {
		t.Fatalf("checkpoint of %d entries, published %d (and one admin event)", cp.Size, n)
	}

	// The feed's items, as served, in the feed's order. Each carries the
	// salt its producer gave it (the SDK's publisher, the control plane's
	// recorder), one per entry, and so has a leaf of version 2.
	var leaves []tlog.Hash
	salts := map[string]bool{}
	cursor := ""
	for {
		path := "/api/v1/orgs/" + org.String() + "/audit_logs/feed?limit=1000"
		if cursor != "" {
			path += "&cursor=" + url.QueryEscape(cursor)
		}
		r := api.call("GET", path, boot, nil)
		var page struct {
			Data struct {
				Items      []json.RawMessage `json:"items"`
				NextCursor string            `json:"next_cursor"`
				HasMore    bool              `json:"has_more"`
			} `json:"data"`
		}
		if err := json.Unmarshal(r.raw, &page); err != nil {
			t.Fatal(err)
		}
		// The feed's items carry their position, which no leaf covers.
		for _, it := range page.Data.Items {
			l, err := tlog.Leaf(it)
			if err != nil {
				t.Fatal(err)
			}
			leaves = append(leaves, l)
			var item struct {
				Salt []byte `json:"salt"` // standard base64
			}
			e, err := tlog.ParseEntry(nil, it)
			if err != nil || json.Unmarshal(it, &item) != nil || len(item.Salt) != tlog.SaltBytes || e.Version != 2 || salts[string(item.Salt)] {
				t.Fatalf("an entry without a salt of its own (leaf version %d, %v): %s", e.Version, err, it)
			}
			salts[string(item.Salt)] = true
		}
		cursor = page.Data.NextCursor
		if !page.Data.HasMore || len(page.Data.Items) == 0 {
			break
		}
	}
	// Reading the feed from its start is itself recorded (a bulk read):
	// that entry may follow the checkpoint's.
	if int64(len(leaves)) != cp.Size && int64(len(leaves)) != cp.Size+1 {
		t.Fatalf("the feed holds %d entries, the checkpoint %d", len(leaves), cp.Size)
	}
	leaves = leaves[:cp.Size]
	if root := tlog.RootOf(leaves); root != cp.Root {
		t.Fatalf("the checkpoint's root %s is not the root of the feed's entries %s", cp.Root, root)
	}

	// The same keys through the API, and the whole organization verified
	// online by `auditrail verify` (keys, checkpoint, export, proofs).
	keysResp := api.call("GET", "/api/v1/audit_keys", boot, nil)
	if keysResp.status != 200 {
		t.Fatalf("audit_keys: %d %s", keysResp.status, keysResp.raw)
	}
	apiKeys, err := tlog.ParseKeySet(keysResp.raw)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := tlog.Open(cpNote, apiKeys); err != nil {
		t.Fatalf("the checkpoint does not open with GET /api/v1/audit_keys: %v", err)
	}
	// The keys saved from audit_keys are pinned, as a user keeps them.
	keysFile := filepath.Join(t.TempDir(), "keys.json")
	if err := os.WriteFile(keysFile, keysResp.raw, 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(binary(t), "verify", "--url", "http://"+dev.http, "--key", boot, "--org", org.String(), "--keys", keysFile).CombinedOutput()
	if err != nil {
		t.Fatalf("auditrail verify online: %v\n%s", err, out)
	}
}
