package controlplane

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/auditrail/auditrail/controlplane/cpstate"
	"github.com/auditrail/auditrail/internal/retry"
	"github.com/auditrail/auditrail/internal/testenv"
)

// apiKey creates an org, member alice and her API key through w; it
// returns the org, the key's id and its secret.
func apiKey(t *testing.T, w *node) (org, id, secret string) {
	t.Helper()
	org = w.must(201, "POST", "/api/v1/orgs", bootKey, map[string]any{"name": "Acme"}).field("id")
	w.must(201, "PUT", "/api/v1/orgs/"+org+"/members/alice", bootKey, map[string]any{"role": "admin"})
	r := w.must(201, "POST", "/api/v1/orgs/"+org+"/api_keys", bootKey, map[string]any{"name": "ci", "user_id": "alice"})
	return org, r.field("id"), r.field("key")
}

// While the server cannot confirm that the mirror is current (NATS down),
// API keys fail closed with 503 once MaxStaleness has passed; they work
// again when the server is back.
func TestStaleMirrorFailsClosed(t *testing.T) {
	ns, _, _ := testenv.NewRestartableNATS(t)
	w := newNode(t, ns.URL(), nodeOpts{})
	r := newNode(t, ns.URL(), nodeOpts{state: func(c *cpstate.StateConfig) {
		c.MaxStaleness = 600 * time.Millisecond
		c.Reconnect = retry.Policy{Initial: 50 * time.Millisecond, Max: 200 * time.Millisecond}
	}})
	org, id, secret := apiKey(t, w)
	orgPath := "/api/v1/orgs/" + org
	testenv.Eventually(t, 10*time.Second, "the reader accepts the key", func() bool { return r.call("GET", orgPath, secret, nil).status == 200 })
	// Fresh while the server answers, well past the bound.
	time.Sleep(time.Second)
	r.must(200, "GET", orgPath, secret, nil)

	ns.Stop()
	testenv.Eventually(t, 10*time.Second, "the key is refused with 503 once the mirror is stale", func() bool {
		return r.call("GET", orgPath, secret, nil).status == 503
	})
	if resp := r.call("GET", orgPath, secret, nil); !strings.Contains(resp.Msg, "stale") {
		t.Fatalf("stale answer: %d %s", resp.status, resp.Msg)
	}
	if _, err := r.svc.access.Authenticate(context.Background(), secret); !errors.Is(err, cpstate.ErrStale) {
		t.Fatalf("Authenticate on a stale mirror: %v", err)
	}
	// The bootstrap key does not depend on the mirror.
	r.must(200, "GET", orgPath, bootKey, nil)

	ns.Start()
	testenv.Eventually(t, 10*time.Second, "the key works again once the server confirms the mirror", func() bool {
		return r.call("GET", orgPath, secret, nil).status == 200
	})
	// And the mirror follows changes made after the restart.
	testenv.Eventually(t, 10*time.Second, "the writer is back", func() bool {
		return w.call("POST", orgPath+"/api_keys/"+id+"/disable", bootKey, nil).status == 200
	})
	testenv.Eventually(t, 10*time.Second, "a key disabled after the restart is refused", func() bool {
		return r.call("GET", orgPath, secret, nil).status == 401
	})
}

// A read-only state looks the bucket up (it never creates it), mirrors
// it, refuses writes, and has no outbox to sweep.
func TestReadOnlyState(t *testing.T) {
	srv, nc, _ := testenv.NATS(t)
	js, _ := jetstream.New(nc)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ro := cpstate.DefaultStateConfig()
	ro.Bucket, ro.ReadOnly = "cp_test", true
	if _, err := cpstate.OpenState(ctx, js, ro, nil); !errors.Is(err, jetstream.ErrBucketNotFound) {
		t.Fatalf("read-only open of a missing bucket: %v", err)
	}
	w := newNode(t, srv.ClientURL(), nodeOpts{})
	org := w.must(201, "POST", "/api/v1/orgs", bootKey, map[string]any{"name": "Acme"}).field("id")
	r := newNode(t, srv.ClientURL(), nodeOpts{state: func(c *cpstate.StateConfig) { c.ReadOnly = true }})
	r.must(200, "GET", "/api/v1/orgs/"+org, bootKey, nil)
	if resp := r.call("POST", "/api/v1/orgs", bootKey, map[string]any{"name": "x"}); resp.status != 503 || resp.header.Get(HeaderEventID) != "" {
		t.Fatalf("write on a read-only state: %d %s", resp.status, resp.Msg)
	}
	if err := r.svc.Run(ctx); err != nil {
		t.Fatal(err)
	}
}
