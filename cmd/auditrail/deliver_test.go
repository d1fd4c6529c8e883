//go:build e2e

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/auditrail/auditrail/internal/datadir"
	"github.com/auditrail/auditrail/internal/natsx"
	"github.com/auditrail/auditrail/internal/testenv"
	"github.com/auditrail/auditrail/producers"
	"github.com/auditrail/auditrail/schemas"
)

// startReceive runs `auditrail receive` on a free port until the test
// ends, with the flags of extra added.
func startReceive(t *testing.T, secret string, extra ...string) (string, *testenv.SyncBuffer) {
	t.Helper()
	port, err := testenv.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	out := &testenv.SyncBuffer{}
	cmd := exec.Command(binary(t), append([]string{"receive", "--secret", secret, "--listen", addr}, extra...)...)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Signal(syscall.SIGTERM); _ = cmd.Wait() })
	testenv.Eventually(t, 10*time.Second, func() string { return "receive starts:\n" + out.String() },
		func() bool { return strings.Contains(out.String(), "listening") })
	return addr, out
}

// receiveCounts is GET /counts of `auditrail receive`.
func receiveCounts(t *testing.T, addr string) map[string]float64 {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/counts")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var c map[string]float64
	if err := json.NewDecoder(resp.Body).Decode(&c); err != nil {
		t.Fatal(err)
	}
	return c
}

// `auditrail dev` runs the delivery role: a destination on `auditrail
// receive` gets the events published an hour late, every one, signed;
// after dedup exactly the published ones; the destination's status says so.
func TestDevDeliversToReceive(t *testing.T) {
	t.Parallel()
	const secret = "the-secret-of-the-dev-destination"
	p, boot := devWithKey(t)
	addr, out := startReceive(t, secret)
	c := newAPIClient(t, p.http)
	r := c.call("POST", "/api/v1/orgs", boot, map[string]any{"name": "acme"})
	org, _ := r.data()["id"].(string)
	r = c.call("POST", "/api/v1/orgs/"+org+"/destinations", boot, map[string]any{"name": "siem", "type": "https",
		"url": "http://" + addr + "/in", "secret": secret, "q": "resource_type:API_KEY"})
	if r.status != 201 {
		t.Fatalf("create destination: %d %s", r.status, r.raw)
	}
	dest, _ := r.data()["id"].(string)

	js, err := jetstream.New(p.connect(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const n = 25
	for i := 0; i < n; i++ {
		ev := schemas.AuditEvent{EventID: uuid.New(), Timestamp: time.Now().Add(-time.Hour), Action: schemas.AuditActionCreated,
			Source: schemas.AuditSourceAPI, DisplayName: "alice", OrganizationID: uuid.MustParse(org), PrincipalID: "alice",
			PrincipalType: "ACCOUNT", ResourceType: schemas.Ptr(schemas.ResourceTypeAPIKey), ResourceID: schemas.Ptr("k1")}
		m, err := producers.Message(&ev)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := js.PublishMsg(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	testenv.Eventually(t, 20*time.Second, func() string {
		return fmt.Sprintf("receive got %v, want %d events\n%s", receiveCounts(t, addr), n, out)
	},
		func() bool { return receiveCounts(t, addr)["unique"] >= n })
	time.Sleep(300 * time.Millisecond)
	if got := receiveCounts(t, addr); got["unique"] != n || got["rejected"] != 0 {
		t.Fatalf("receive counts %v", got)
	}
	if !strings.Contains(out.String(), "delivery ") {
		t.Fatalf("receive printed no delivery line:\n%s", out)
	}
	testenv.Eventually(t, 10*time.Second, func() string { return "destination active, delivered, nothing pending: " + string(r.raw) }, func() bool {
		r = c.call("GET", "/api/v1/orgs/"+org+"/destinations/"+dest, boot, nil)
		d := r.data()
		return d["status"] == "active" && d["last_delivered_at"] != nil && d["pending"] == 0.0
	})
	resp, err := http.Get("http://" + p.http + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	var h map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&h)
	resp.Body.Close()
	if _, ok := h["deliver"]; !ok {
		t.Fatalf("healthz without the delivery role: %v", h)
	}
}

// `auditrail deliver` runs alone with the deliver credentials and the
// control plane's secrets keys, beside dev's own delivery role: the two
// share the destinations (each delivers some), every destination gets
// every event, and its /healthz reports what it delivered.
func TestDeliverRoleProcess(t *testing.T) {
	t.Parallel()
	const secret = "the-secret-of-the-role-destination"
	// Short leases: the new instance takes its share within a second, not
	// the default lease's five.
	p, boot := devWithKey(t, "--deliver-lease", "3s")
	keys, err := os.ReadFile(filepath.Join(p.data, datadir.SecretsKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	hp, _ := testenv.FreePort()
	health := fmt.Sprintf("127.0.0.1:%d", hp)
	out := &testenv.SyncBuffer{}
	cmd := exec.Command(binary(t), append([]string{"deliver", "--http", health, "--secrets-keys", strings.TrimSpace(string(keys)),
		"--allow-private-egress", "--deliver-lease", "3s"}, p.natsArgs(natsx.RoleDeliver)...)...)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("deliver output:\n%s", out)
		}
	})
	c := newAPIClient(t, p.http)
	org, _ := c.call("POST", "/api/v1/orgs", boot, map[string]any{"name": "acme"}).data()["id"].(string)
	// The two instances share the destinations by rendezvous hashing; with
	// 16 of them, all land on one instance with a chance of 2 in 65,536.
	const n = 16
	var addrs []string
	for i := 0; i < n; i++ {
		addr, _ := startReceive(t, secret)
		addrs = append(addrs, addr)
		r := c.call("POST", "/api/v1/orgs/"+org+"/destinations", boot, map[string]any{"name": fmt.Sprint("d", i), "type": "https",
			"url": "http://" + addr + "/in", "secret": secret, "q": "resource_type:API_KEY"})
		if r.status != 201 {
			t.Fatalf("create destination: %d %s", r.status, r.raw)
		}
	}
	// dev's instance may hold every lease until its next heartbeat shows it
	// the new instance (a third of the lease): wait for the hand-over, so
	// that the events below are delivered by both.
	testenv.Eventually(t, 30*time.Second, func() string {
		return fmt.Sprintf("the deliver role takes a destination: %+v", deliverHealth(t, health))
	},
		func() bool { return deliverHealth(t, health).Destinations > 0 })
	js, err := jetstream.New(p.connect(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := 0; i < 10; i++ {
		ev := schemas.AuditEvent{EventID: uuid.New(), Timestamp: time.Now(), Action: schemas.AuditActionCreated, Source: schemas.AuditSourceAPI,
			OrganizationID: uuid.MustParse(org), PrincipalID: "alice", PrincipalType: "ACCOUNT", ResourceType: schemas.Ptr(schemas.ResourceTypeAPIKey)}
		m, _ := producers.Message(&ev)
		if _, err := js.PublishMsg(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	for _, addr := range addrs {
		testenv.Eventually(t, 30*time.Second, func() string { return fmt.Sprintf("receiver %s got %v, want 10", addr, receiveCounts(t, addr)) },
			func() bool { return receiveCounts(t, addr)["unique"] >= 10 })
	}
	if h := deliverHealth(t, health); h.Destinations == 0 || h.Delivered == 0 {
		t.Fatalf("the deliver role's /healthz: %+v", h)
	}
}

type deliverStatus struct {
	Destinations int     `json:"destinations"`
	Delivered    float64 `json:"delivered"`
}

// deliverHealth reads the delivery part of a deliver role's /healthz.
func deliverHealth(t *testing.T, addr string) deliverStatus {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var h struct {
		Deliver deliverStatus `json:"deliver"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil || resp.StatusCode != 200 {
		t.Fatalf("the deliver role's /healthz: %d %v", resp.StatusCode, err)
	}
	return h.Deliver
}
