package controlplane

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/auditrail/auditrail/internal/auth"
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

// A watch that stops is re-created from the last revision it delivered: a
// key disabled while it was down is refused once it is back.
func TestWatchReconnectsAndAppliesWhatItMissed(t *testing.T) {
	srv, _, _ := testenv.NATS(t)
	w := newNode(t, srv.ClientURL(), nodeOpts{})
	r := newNode(t, srv.ClientURL(), nodeOpts{state: func(c *StateConfig) {
		c.Reconnect = retry.Policy{Initial: 400 * time.Millisecond, Max: 400 * time.Millisecond, Jitter: -1}
	}})
	org, id, secret := apiKey(t, w)
	ctx := context.Background()
	testenv.Eventually(t, 10*time.Second, "the reader accepts the key", func() bool {
		_, err := r.svc.access.Authenticate(ctx, secret)
		return err == nil
	})

	r.state.cutMu.Lock()
	r.state.cut() // the watch stops, as when its subscription closes
	r.state.cutMu.Unlock()
	w.must(200, "POST", "/api/v1/orgs/"+org+"/api_keys/"+id+"/disable", bootKey, nil)
	if _, err := r.svc.access.Authenticate(ctx, secret); err != nil {
		t.Fatalf("the cut watch saw the change already (%v): the test proves nothing", err)
	}
	testenv.Eventually(t, 10*time.Second, "the disabled key is refused after the watch is back", func() bool {
		_, err := r.svc.access.Authenticate(ctx, secret)
		return errors.Is(err, auth.ErrUnauthenticated)
	})
	// The watch keeps following changes.
	w.must(200, "DELETE", "/api/v1/orgs/"+org+"/members/alice", bootKey, nil)
	testenv.Eventually(t, 10*time.Second, "later changes still arrive", func() bool {
		_, err := r.state.get(memberKey(org, "alice"), &Member{})
		return errors.Is(err, ErrNotFound)
	})
}

// While the server cannot confirm that the mirror is current (NATS down),
// API keys fail closed with 503 once MaxStaleness has passed; they work
// again when the server is back.
func TestStaleMirrorFailsClosed(t *testing.T) {
	ns, _, _ := testenv.NewRestartableNATS(t)
	w := newNode(t, ns.URL(), nodeOpts{})
	r := newNode(t, ns.URL(), nodeOpts{state: func(c *StateConfig) {
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
	if _, err := r.svc.access.Authenticate(context.Background(), secret); !errors.Is(err, ErrStale) {
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
	ro := DefaultStateConfig()
	ro.Bucket, ro.ReadOnly = "cp_test", true
	if _, err := OpenState(ctx, js, ro, nil); !errors.Is(err, jetstream.ErrBucketNotFound) {
		t.Fatalf("read-only open of a missing bucket: %v", err)
	}
	w := newNode(t, srv.ClientURL(), nodeOpts{})
	org := w.must(201, "POST", "/api/v1/orgs", bootKey, map[string]any{"name": "Acme"}).field("id")
	r := newNode(t, srv.ClientURL(), nodeOpts{state: func(c *StateConfig) { c.ReadOnly = true }})
	r.must(200, "GET", "/api/v1/orgs/"+org, bootKey, nil)
	if resp := r.call("POST", "/api/v1/orgs", bootKey, map[string]any{"name": "x"}); resp.status != 503 || resp.header.Get(HeaderEventID) != "" {
		t.Fatalf("write on a read-only state: %d %s", resp.status, resp.Msg)
	}
	if err := r.svc.Run(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestStateConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		mut  func(*StateConfig)
		ok   bool
	}{
		{"default", func(*StateConfig) {}, true},
		{"read-only", func(c *StateConfig) { c.ReadOnly = true }, true},
		{"empty bucket", func(c *StateConfig) { c.Bucket = "" }, false},
		{"bucket with a dot", func(c *StateConfig) { c.Bucket = "a.b" }, false},
		{"staleness too short", func(c *StateConfig) { c.MaxStaleness = time.Millisecond }, false},
		{"bad reconnect", func(c *StateConfig) { c.Reconnect.Initial = 0 }, false},
		{"no states bucket (the default)", func(c *StateConfig) { c.StatesBucket = "" }, true},
		{"states bucket with a dot", func(c *StateConfig) { c.StatesBucket = "a.b" }, false},
		{"states bucket is the state's", func(c *StateConfig) { c.StatesBucket = c.Bucket }, false},
	}
	for _, tc := range tests {
		c := DefaultStateConfig()
		tc.mut(&c)
		if err := c.Validate(); (err == nil) != tc.ok || (err != nil && !errors.Is(err, ErrInvalidOption)) {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
}
