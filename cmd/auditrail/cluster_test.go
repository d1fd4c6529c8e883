//go:build e2e

package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/auditrail/auditrail/controlplane"
	"github.com/auditrail/auditrail/controlplane/cpstate"
	"github.com/auditrail/auditrail/ingest"
	"github.com/auditrail/auditrail/internal/httpapi"
	"github.com/auditrail/auditrail/internal/natsx"
	"github.com/auditrail/auditrail/internal/testenv"
	"github.com/auditrail/auditrail/schemas"
)

// roleProc is a role of the real binary started without waiting for it.
type roleProc struct {
	role, addr string
	cmd        *exec.Cmd
	out        *testenv.SyncBuffer
}

// launchRole starts role on a free port; it stops when the test ends.
func launchRole(t *testing.T, role string, args ...string) *roleProc {
	t.Helper()
	port, _ := testenv.FreePort()
	p := &roleProc{role: role, addr: fmt.Sprintf("127.0.0.1:%d", port), out: &testenv.SyncBuffer{}}
	p.cmd = exec.Command(binary(t), append([]string{role, "--http", p.addr}, args...)...)
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		_ = p.cmd.Wait()
		if t.Failed() {
			t.Logf("%s output:\n%s", role, p.out)
		}
	})
	return p
}

// health is the status and body of the role's /healthz (0 while it does
// not answer).
func (p *roleProc) health() (int, map[string]any) {
	c := http.Client{Timeout: 3 * time.Second}
	resp, err := c.Get("http://" + p.addr + "/healthz")
	if err != nil {
		return 0, nil
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var body map[string]any
	_ = json.Unmarshal(b, &body)
	return resp.StatusCode, body
}

// waitHealth waits until /healthz answers want, and returns its body.
func (p *roleProc) waitHealth(t *testing.T, want int, within time.Duration) map[string]any {
	t.Helper()
	var status int
	var body map[string]any
	testenv.Eventually(t, within, func() string {
		return fmt.Sprintf("%s: /healthz %d %v, want %d; output:\n%s", p.role, status, body, want, p.out)
	}, func() bool {
		status, body = p.health()
		return status == want
	})
	return body
}

// streamReplicas is the replica count of each stream (a bucket is KV_<name>).
func streamReplicas(t *testing.T, js jetstream.JetStream, names ...string) map[string]int {
	t.Helper()
	got := map[string]int{}
	for _, n := range names {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		st, err := js.Stream(ctx, n)
		cancel()
		if err != nil {
			t.Fatalf("stream %s: %v", n, err)
		}
		got[n] = st.CachedInfo().Config.Replicas
	}
	return got
}

// Every role started before what it needs exists serves /healthz at once
// with 503 naming what it waits for, and becomes healthy once the control
// plane has created it; --nats-replicas sets the replicas of every stream
// and bucket on creation, and a later control plane started with another
// count raises, then lowers, those of an existing deployment.
func TestRolesStartInAnyOrderOnACluster(t *testing.T) {
	testenv.Long(t, "three NATS servers, ClickHouse and six processes")
	cluster := testenv.NewNATSCluster(t, 3)
	dsn := testenv.ClickHouse(t)
	boot := "bootstrap-key-of-the-cluster-test"
	key := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	secrets, cursor, pages := key("secrets-key-of-32-bytes-for-test"), key("cursor-key-of-the-cluster-test!"), key("page-token-key-of-the-test")
	natsArgs := func(role string, replicas int) []string {
		a := append([]string{"--nats-url", cluster.URL(), "--nats-creds", cluster.Creds(role)}, cluster.TLSArgs()...)
		if replicas > 0 {
			a = append(a, "--nats-replicas", fmt.Sprint(replicas))
		}
		return a
	}
	// Before the control plane: nothing exists.
	waiting := []struct {
		proc *roleProc
		want string // in waiting_for
	}{
		// A rate limit the polls below cannot reach: an ingest consumer made
		// while the stream's replicas change may wait out a missed
		// heartbeat (30 s) before it receives.
		{launchRole(t, "query", append(natsArgs(natsx.RoleQuery, 3), "--clickhouse", dsn, "--bootstrap-key", boot, "--cursor-keys", cursor,
			"--rate-limit", "100000/60s")...),
			"KV bucket " + cpstate.DefaultBucket},
		{launchRole(t, "toolrunner", append(natsArgs(natsx.RoleToolRunner, 3), "--bootstrap-key", boot, "--secrets-keys", secrets,
			"--page-token-keys", pages, "--outbox", t.TempDir())...), "stream " + schemas.StreamEvents},
		{launchRole(t, "deliver", append(natsArgs(natsx.RoleDeliver, 3), "--secrets-keys", secrets)...), "stream " + schemas.StreamEvents},
		{launchRole(t, "ingest", append(natsArgs(natsx.RoleIngest, 0), "--clickhouse", dsn)...), schemas.StreamEvents},
	}
	for _, w := range waiting {
		body := w.proc.waitHealth(t, http.StatusServiceUnavailable, 30*time.Second)
		if got, _ := body[httpapi.HealthWaitingFor].(string); !strings.Contains(got, w.want) {
			t.Errorf("%s: waiting_for %q, want it to name %q (%v)", w.proc.role, got, w.want, body)
		}
	}
	// Its API answers 503 meanwhile, not 404.
	if r := newAPIClient(t, waiting[0].proc.addr).call("GET", "/api/v1/me", boot, nil); r.status != http.StatusServiceUnavailable {
		t.Errorf("query API before the control plane: %d %s", r.status, r.raw)
	}
	time.Sleep(time.Second) // they keep waiting: none exits
	for _, w := range waiting {
		if status, _ := w.proc.health(); status != http.StatusServiceUnavailable {
			t.Fatalf("%s: /healthz %d while waiting", w.proc.role, status)
		}
	}

	// The control plane with one replica creates what they wait for.
	cp := launchRole(t, "controlplane", append(natsArgs(natsx.RoleControlPlane, 1), "--bootstrap-key", boot, "--secrets-keys", secrets)...)
	cp.waitHealth(t, http.StatusOK, 60*time.Second)
	for _, w := range waiting {
		w.proc.waitHealth(t, http.StatusOK, 60*time.Second)
	}
	admin := newAPIClient(t, cp.addr)
	org := admin.call("POST", "/api/v1/orgs", boot, map[string]any{"name": "Acme"}).data()["id"].(string)
	q := newAPIClient(t, waiting[0].proc.addr)
	var last string
	testenv.Eventually(t, 60*time.Second, func() string { return "the org's creation listed by the query role: " + last }, func() bool {
		r := q.call("GET", "/api/v1/orgs/"+org+"/audit_logs", boot, nil)
		last = fmt.Sprintf("%d %s", r.status, r.raw)
		items, _ := r.data()["items"].([]any)
		return r.status == 200 && len(items) == 1
	})

	// The tool runner's API works too: an execution is answered and listed.
	project := admin.call("POST", "/api/v1/orgs/"+org+"/projects", boot, map[string]any{"name": "p"}).data()["id"].(string)
	r := newAPIClient(t, waiting[1].proc.addr).call("POST", "/api/v1/orgs/"+org+"/projects/"+project+"/tools/execute", boot,
		map[string]any{"tool_name": "DocumentDbToolkit.DiscoverDatabases", "input": map[string]any{}, "user_id": "alice"})
	execID, _ := r.data()["execution_id"].(string)
	if r.status != 200 || execID == "" {
		t.Fatalf("tool execution on the tool runner: %d %s", r.status, r.raw)
	}
	testenv.Eventually(t, 30*time.Second, func() string { return "the execution listed by the query role: " + last }, func() bool {
		l := q.call("GET", "/api/v1/orgs/"+org+"/tool_executions?limit=1", boot, nil)
		last = fmt.Sprintf("%d %s", l.status, l.raw)
		items, _ := l.data()["items"].([]any)
		return len(items) == 1 && items[0].(map[string]any)["execution_id"] == execID
	})

	js, err := jetstream.New(cluster.Connect(t, natsx.RoleAdmin))
	if err != nil {
		t.Fatal(err)
	}
	cpStreams := []string{schemas.StreamEvents, schemas.StreamDLQ, "KV_" + cpstate.DefaultBucket, "KV_" + cpstate.DefaultStatesBucket,
		"KV_" + adminLimit.bucket}
	others := []string{"KV_" + auditLimit.bucket, "KV_" + toolLimit.bucket, "KV_" + controlplane.DeliverBucket}
	for n, r := range streamReplicas(t, js, cpStreams...) {
		if r != 1 {
			t.Errorf("%s: %d replicas, want 1 (--nats-replicas 1)", n, r)
		}
	}
	for n, r := range streamReplicas(t, js, others...) {
		if r != 3 {
			t.Errorf("%s: %d replicas, want 3 (--nats-replicas 3)", n, r)
		}
	}
	// Raised on the existing deployment by a control plane started with 3,
	// then lowered by one started with 2; the data stays.
	for _, n := range []int{3, 2} {
		p := launchRole(t, "controlplane", append(natsArgs(natsx.RoleControlPlane, n), "--bootstrap-key", boot, "--secrets-keys", secrets)...)
		p.waitHealth(t, http.StatusOK, 60*time.Second)
		for s, r := range streamReplicas(t, js, cpStreams...) {
			if r != n {
				t.Errorf("%s: %d replicas after a control plane with --nats-replicas %d", s, r, n)
			}
		}
		if r := newAPIClient(t, p.addr).call("GET", "/api/v1/orgs/"+org, boot, nil); r.status != 200 {
			t.Errorf("the org after replicas %d: %d %s", n, r.status, r.raw)
		}
	}
	// Every replica catches up.
	for _, s := range cpStreams {
		testenv.Eventually(t, 30*time.Second, func() string { return s + ": replicas current: " + last }, func() bool {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			st, err := js.Stream(ctx, s)
			cancel()
			if err != nil {
				last = err.Error()
				return false
			}
			last = fmt.Sprintf("%+v", st.CachedInfo().Cluster)
			return st.CachedInfo().Cluster != nil && len(st.CachedInfo().Cluster.Replicas) == 1 && st.CachedInfo().Cluster.Replicas[0].Current
		})
	}
	// Ingest's durable consumer, created at one replica, follows its stream.
	testenv.Eventually(t, 30*time.Second, func() string { return "ingest's consumer follows its stream to 2 replicas: " + last }, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		ci, err := js.Consumer(ctx, schemas.StreamEvents, ingest.DefaultConfig().Durable)
		cancel()
		if err != nil {
			last = err.Error()
			return false
		}
		last = fmt.Sprintf("%+v", ci.CachedInfo().Cluster)
		return ci.CachedInfo().Cluster != nil && len(ci.CachedInfo().Cluster.Replicas) == 1
	})
}

// --nats-replicas outside 1..5 is a usage error.
func TestNATSReplicasFlag(t *testing.T) {
	for _, n := range []string{"0", "6", "-1"} {
		cmd := exec.Command(binary(t), "deliver", "--nats-replicas", n, "--secrets-keys", base64.StdEncoding.EncodeToString(make([]byte, 32)))
		out, err := cmd.CombinedOutput()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !strings.Contains(string(out), "--nats-replicas") {
			t.Errorf("--nats-replicas %s: %v %s", n, err, out)
		}
	}
}
