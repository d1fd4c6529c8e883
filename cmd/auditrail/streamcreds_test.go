//go:build e2e

package main

import (
	"context"
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/auditrail/auditrail/internal/natsx"
	"github.com/auditrail/auditrail/schemas"
)

// Stream credentials through the binaries: `dev` issues them with its own
// key, the production controlplane role with --nats-stream-key (the file
// nats-setup writes); a SIEM reads its organization's events with one on
// dev's NATS and stops when it is revoked; without the flag the routes
// answer 503.
func TestStreamCredentialsOnDevAndControlPlaneRole(t *testing.T) {
	t.Parallel()
	const boot = "bootstrap-key-of-the-streams-test"
	data := t.TempDir()
	dev := startDev(t, data, "--bootstrap-key", boot)
	api := newAPIClient(t, dev.http)
	secrets := base64.StdEncoding.EncodeToString([]byte("0123456789abcdef0123456789abcdef"))
	common := append(dev.natsArgs(natsx.RoleControlPlane), "--bootstrap-key", boot, "--secrets-keys", secrets)
	keyFile := natsx.StreamKeyFile(filepath.Join(data, "nats"))
	cp := newAPIClient(t, startRole(t, "controlplane", append(common, "--nats-stream-key", keyFile)...))
	bare := newAPIClient(t, startRole(t, "controlplane", common...))

	org := api.call("POST", "/api/v1/orgs", boot, map[string]any{"name": "Streams"}).data()["id"].(string)
	other := api.call("POST", "/api/v1/orgs", boot, map[string]any{"name": "Other"}).data()["id"].(string)
	expires := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	if r := bare.call("POST", "/api/v1/orgs/"+org+"/stream_credentials", boot, map[string]any{"name": "x", "expires_at": expires}); r.status != 503 {
		t.Fatalf("without --nats-stream-key: %d %s", r.status, r.raw)
	}
	for _, c := range []*apiClient{api, cp} {
		r := c.call("POST", "/api/v1/orgs/"+org+"/stream_credentials", boot, map[string]any{"name": "siem", "expires_at": expires})
		if r.status != 201 {
			t.Fatalf("create: %d %s", r.status, r.raw)
		}
		d := r.data()
		id, creds := d["id"].(string), d["creds"].(string)
		path := filepath.Join(t.TempDir(), "siem.creds")
		if err := os.WriteFile(path, []byte(creds), 0o600); err != nil {
			t.Fatal(err)
		}
		nc, err := nats.Connect("nats://"+dev.nats, nats.UserCredentials(path), nats.CustomInboxPrefix(d["inbox_prefix"].(string)))
		if err != nil {
			t.Fatalf("connect with the credential: %v", err)
		}
		defer nc.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		js, _ := jetstream.New(nc)
		cons, err := js.Consumer(ctx, d["stream"].(string), d["consumer"].(string))
		if err != nil {
			t.Fatal(err)
		}
		b, err := cons.Fetch(100, jetstream.FetchMaxWait(2*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for m := range b.Messages() {
			if !strings.HasPrefix(m.Subject(), "auditrail.events."+org+".") || strings.Contains(m.Subject(), other) {
				t.Fatalf("the credential read %s", m.Subject())
			}
			n++
			_ = m.Ack()
		}
		if n == 0 || b.Error() != nil {
			t.Fatalf("read %d events: %v", n, b.Error())
		}
		if _, err := nc.Request(schemas.EventSubject(org, schemas.KindAudit), []byte("x"), 500*time.Millisecond); err == nil {
			t.Fatal("the credential published an event")
		}
		// It deletes and creates its consumer itself (the proxy of either
		// process answers).
		own := jetstream.ConsumerConfig{Durable: d["consumer"].(string), FilterSubject: "auditrail.events." + org + ".>"}
		if err := js.DeleteConsumer(ctx, d["stream"].(string), own.Durable); err != nil {
			t.Fatalf("the credential deletes its consumer: %v", err)
		}
		if _, err := js.CreateConsumer(ctx, d["stream"].(string), own); err != nil {
			t.Fatalf("the credential creates its consumer: %v", err)
		}
		if r := c.call("DELETE", "/api/v1/orgs/"+org+"/stream_credentials/"+id, boot, nil); r.status != 200 || r.data()["status"] != "revoked" {
			t.Fatalf("revoke: %d %s", r.status, r.raw)
		}
		if _, err := js.Consumer(ctx, d["stream"].(string), d["consumer"].(string)); !errors.Is(err, jetstream.ErrConsumerNotFound) {
			t.Fatalf("after the revocation: %v", err)
		}
		var ae *jetstream.APIError
		if _, err := js.CreateOrUpdateConsumer(ctx, d["stream"].(string), own); !errors.As(err, &ae) || ae.Code != 403 {
			t.Fatalf("a revoked credential creates its consumer: %v", err)
		}
	}
}
