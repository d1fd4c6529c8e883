//go:build e2e && !race

// The cluster tests run without the race detector, in the second step of
// `make test`: what they test runs in other processes (the roles, the
// ClickHouse and NATS servers of the cluster) or is tested under the race
// detector elsewhere, and the race detector would make their in-process
// servers and harness several times slower (14 minutes were not enough).

package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/auditrail/auditrail/internal/natsx"
	"github.com/auditrail/auditrail/internal/testenv"
	"github.com/auditrail/auditrail/producers"
	"github.com/auditrail/auditrail/schemas"
)

// Two of every role, processes of the real binary, against a 3-server NATS
// cluster (TLS, 3 replicas) and a ClickHouse cluster (2 shards x 2
// replicas), behind the gateway: the admin
// CLI works through the gateway's one base URL; an organization made on one
// control plane is on the other; the ingest instances share the durable
// consumers (one per kind; every event is stored once); the query
// instances share the rate limit; a key disabled on one control plane is
// refused by the other roles within a second; tool executions run on both
// tool runners are listed once each; the two tlog instances sequence every
// entry once (one sequencer at a time) and sign checkpoints that
// `auditrail verify --url` accepts through the gateway.
func TestEveryRoleTwice(t *testing.T) {
	cluster := testenv.NewNATSCluster(t, 3)
	chArgs := scaleOutClickHouse(t)
	const boot = "bootstrap-key-of-every-role-twice"
	secrets := base64.StdEncoding.EncodeToString([]byte("0123456789abcdef0123456789abcdef"))
	cursor := base64.StdEncoding.EncodeToString([]byte("cursor-key-shared-by-instances!!"))
	pageKeys := base64.StdEncoding.EncodeToString([]byte("page-token-key-shared-by-runners"))
	nats := func(role string, replicas bool) []string {
		a := append([]string{"--nats-url", cluster.URL(), "--nats-creds", cluster.Creds(role)}, cluster.TLSArgs()...)
		if replicas {
			a = append(a, "--nats-replicas", "3")
		}
		return a
	}
	api := []string{"--bootstrap-key", boot, "--trusted-proxies", "127.0.0.1"}
	var procs []*roleProc
	launch := func(role string, args ...string) *roleProc {
		p := launchRole(t, role, args...)
		procs = append(procs, p)
		return p
	}
	var cps, qs, trs, ings []*roleProc
	for i := 0; i < 2; i++ {
		cpArgs := append(append(nats(natsx.RoleControlPlane, true), api...), "--secrets-keys", secrets)
		if i == 0 { // the store, read only: it counts the legal holds' entries
			cpArgs = append(cpArgs, chArgs...)
		}
		cps = append(cps, launch("controlplane", cpArgs...))
		qs = append(qs, launch("query", append(append(append(nats(natsx.RoleQuery, true), api...), chArgs...), "--cursor-keys", cursor, "--rate-limit", "40/1h")...))
		trs = append(trs, launch("toolrunner", append(append(nats(natsx.RoleToolRunner, true), api...), "--secrets-keys", secrets,
			"--page-token-keys", pageKeys, "--outbox", t.TempDir())...))
		// Small pulls, so that the two instances share the events.
		ings = append(ings, launch("ingest", append(append(nats(natsx.RoleIngest, false), chArgs...), "--batch-size", "100", "--fetch-size", "100")...))
		launch("tlog", append(append(nats(natsx.RoleTLog, true), chArgs...), "--secrets-keys", secrets, "--checkpoint-interval", "500ms")...)
	}
	launch("lifecycle", append(append(nats(natsx.RoleLifecycle, false), chArgs...), "--retention-interval", "1s")...)
	for _, p := range procs {
		p.waitHealth(t, http.StatusOK, 90*time.Second)
	}
	urls := func(ps []*roleProc) string {
		var u []string
		for _, p := range ps {
			u = append(u, "http://"+p.addr)
		}
		return strings.Join(u, ",")
	}
	gw := launchRole(t, "gateway", "--query", urls(qs), "--toolrunner", urls(trs), "--controlplane", urls(cps))
	testenv.Eventually(t, 30*time.Second, "the gateway healthy", func() bool {
		resp, err := http.Get("http://" + gw.addr + "/gateway/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
	base := "http://" + gw.addr

	// The admin CLI through the gateway, as the compose file's header says.
	out, err := exec.Command(binary(t), "admin", "--url", base, "--key", boot, "org", "create", "Acme").Output()
	if err != nil {
		t.Fatalf("admin org create through the gateway: %v\n%s", err, out)
	}
	var created struct{ ID string }
	if err := json.Unmarshal(out, &created); err != nil || created.ID == "" {
		t.Fatalf("admin org create: %s", out)
	}
	org := created.ID
	// Made through one control plane, on both.
	for _, cp := range cps {
		c := newAPIClient(t, cp.addr)
		if r := c.call("GET", "/api/v1/orgs/"+org, boot, nil); r.status != 200 {
			t.Fatalf("the org on controlplane %s: %d %s", cp.addr, r.status, r.raw)
		}
	}
	g := newAPIClient(t, gw.addr)
	project := g.call("POST", "/api/v1/orgs/"+org+"/projects", boot, map[string]any{"name": "p"}).data()["id"].(string)
	g.call("PUT", "/api/v1/orgs/"+org+"/members/alice", boot, map[string]any{"role": "owner"})
	g.call("PUT", "/api/v1/orgs/"+org+"/projects/"+project+"/members/alice", boot, map[string]any{"role": "member"})

	// The ingest instances share the durable consumer: every event stored
	// once, each instance storing some.
	js, err := jetstream.New(cluster.Connect(t, natsx.RoleAdmin))
	if err != nil {
		t.Fatal(err)
	}
	const events = 3000
	ids := map[string]bool{}
	var batch []producers.Event
	for i := 0; i < events; i++ {
		e := schemas.AuditEvent{EventID: uuid.New(), Timestamp: time.Now().Add(-time.Duration(i) * time.Millisecond), Action: schemas.AuditActionUpdated,
			Source: schemas.AuditSourceAPI, OrganizationID: uuid.MustParse(org), PrincipalID: "emitter", PrincipalType: "ACCOUNT",
			ResourceType: schemas.Ptr(schemas.ResourceTypeHook), ResourceID: schemas.Ptr(fmt.Sprint("hook-", i))}
		ids[e.EventID.String()] = true
		batch = append(batch, &e)
	}
	pub, err := producers.New(js.Conn(), producers.DefaultConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// In 30 publishes over 1.5 s, so that both instances' pulls get some
	// (one fetch could take a backlog published at once).
	for i := 0; i < len(batch); i += 100 {
		if err := pub.PublishBatch(ctx, batch[i:i+100]); err != nil {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// Each listing request from its own client address: the rate limit is
	// tested below.
	n := 0
	ip := func() string { n++; return fmt.Sprintf("198.18.%d.%d", n/250, 1+n%250) }
	seen := map[string]int{}
	testenv.Eventually(t, 60*time.Second, func() string { return fmt.Sprintf("%d of %d events listed", len(seen), events) }, func() bool {
		clear(seen)
		for cur := ""; ; {
			path := "/api/v1/orgs/" + org + "/audit_logs?limit=100&q=" + "resource_type:HOOK"
			if cur != "" {
				path += "&cursor=" + cur
			}
			r := newAPIClient(t, qs[n%2].addr).call("GET", path, boot, nil, "X-Forwarded-For", ip())
			if r.status != 200 {
				t.Fatalf("list: %d %s", r.status, r.raw)
			}
			for _, it := range r.data()["items"].([]any) {
				seen[it.(map[string]any)["event_id"].(string)]++
			}
			next, _ := r.data()["next_cursor"].(string)
			if next == "" {
				break
			}
			cur = next
		}
		return len(seen) >= events
	})
	for id, n := range seen {
		if n != 1 || !ids[id] {
			t.Fatalf("event %s listed %d times (published: %v)", id, n, ids[id])
		}
	}
	if len(seen) != events {
		t.Fatalf("%d of %d events listed", len(seen), events)
	}
	// One durable consumer per kind for both instances (not one each).
	st, err := js.Stream(ctx, schemas.StreamEvents)
	if err != nil {
		t.Fatal(err)
	}
	var durables []string
	for name := range st.ListConsumers(ctx).Info() {
		if strings.HasPrefix(name.Name, "auditrail-ingest") {
			durables = append(durables, name.Name)
		}
	}
	if len(durables) != 2 {
		t.Fatalf("ingest consumers %v, want one durable per kind shared by both instances", durables)
	}
	for _, p := range ings {
		_, h := p.health()
		stored, _ := h[healthIngestAudit].(map[string]any)["stored"].(float64)
		t.Logf("ingest %s stored %.0f of the %d events", p.addr, stored, events)
	}

	// The two tlog instances: every entry in the org's log once, under a
	// checkpoint that verifies through the gateway.
	var last string
	testenv.Eventually(t, 60*time.Second, func() string { return fmt.Sprintf("a checkpoint of the %d events: %s", events, last) }, func() bool {
		r := g.call("GET", "/api/v1/orgs/"+org+"/audit_logs/checkpoint", boot, nil, "X-Forwarded-For", ip())
		last = fmt.Sprintf("%d %s", r.status, r.raw)
		size, _ := r.data()["size"].(float64)
		return r.status == 200 && size >= events
	})
	keys := g.call("GET", "/api/v1/audit_keys", boot, nil, "X-Forwarded-For", ip())
	if keys.status != 200 {
		t.Fatalf("audit_keys through the gateway: %d %s", keys.status, keys.raw)
	}
	keysFile := filepath.Join(t.TempDir(), "keys.json")
	if err := os.WriteFile(keysFile, keys.raw, 0o600); err != nil {
		t.Fatal(err)
	}
	out, err = exec.Command(binary(t), "verify", "--url", base, "--key", boot, "--org", org, "--keys", keysFile).CombinedOutput()
	m := regexp.MustCompile(`OK: (\d+) entries`).FindSubmatch(out)
	if err != nil || m == nil {
		t.Fatalf("auditrail verify --url through the gateway: %v\n%s", err, out)
	}
	if n, _ := strconv.Atoi(string(m[1])); n < events {
		t.Fatalf("verify: %d entries, want at least the %d events\n%s", n, events, out)
	}

	// A legal hold: counted by the control plane given the store, not
	// counted (null) by the one without.
	hold := newAPIClient(t, cps[0].addr).call("POST", "/api/v1/orgs/"+org+"/legal_holds", boot, map[string]any{"name": "dispute", "q": "project:" + project})
	if hold.status != 201 {
		t.Fatalf("legal hold: %d %s", hold.status, hold.raw)
	}
	holdPath := "/api/v1/orgs/" + org + "/legal_holds/" + hold.data()["id"].(string)
	if r := newAPIClient(t, cps[0].addr).call("GET", holdPath, boot, nil); r.status != 200 || r.data()["held"] == nil {
		t.Fatalf("the hold on the control plane with the store: %d %s", r.status, r.raw)
	}
	if r := newAPIClient(t, cps[1].addr).call("GET", holdPath, boot, nil); r.status != 200 || r.data()["held"] != nil {
		t.Fatalf("the hold on the control plane without the store: %d %s", r.status, r.raw)
	}

	// A key made through the gateway works on every role; disabled on one
	// control plane, the others refuse it within a second.
	k := newAPIClient(t, cps[0].addr).call("POST", "/api/v1/orgs/"+org+"/api_keys", boot, map[string]any{"name": "k", "user_id": "alice"})
	key, keyID := k.data()["key"].(string), k.data()["id"].(string)
	exec1 := func(tr *roleProc, key string) apiResp {
		return newAPIClient(t, tr.addr).call("POST", "/api/v1/orgs/"+org+"/projects/"+project+"/tools/execute", key,
			map[string]any{"tool_name": "DocumentDbToolkit.DiscoverDatabases", "input": map[string]any{}})
	}
	var execIDs []string
	testenv.Eventually(t, 10*time.Second, func() string { return "4 tool executions with the new key: " + last }, func() bool {
		r := exec1(trs[len(execIDs)%2], key)
		if id, _ := r.data()["execution_id"].(string); r.status == 200 && id != "" {
			execIDs = append(execIDs, id)
		} else {
			last = fmt.Sprintf("%d %s", r.status, r.raw)
		}
		return len(execIDs) >= 4
	})
	if r := newAPIClient(t, cps[1].addr).call("POST", "/api/v1/orgs/"+org+"/api_keys/"+keyID+"/disable", boot, nil); r.status != 200 {
		t.Fatalf("disable on the second control plane: %d %s", r.status, r.raw)
	}
	start := time.Now()
	var wg sync.WaitGroup
	for _, p := range []*roleProc{qs[0], qs[1], trs[0], trs[1], cps[0]} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := newAPIClient(t, p.addr)
			path := "/api/v1/orgs/" + org + "/audit_logs?limit=1"
			if strings.Contains(p.role, "toolrunner") {
				path = "/api/v1/orgs/" + org + "/projects/" + project + "/tools"
			} else if p.role == "controlplane" {
				path = "/api/v1/orgs/" + org + "/projects"
			}
			for i := 0; c.call("GET", path, key, nil, "X-Forwarded-For", fmt.Sprintf("198.19.%d.%d", len(p.addr)%250, 1+i%250)).status != 401; i++ {
				if time.Since(start) > time.Second {
					t.Errorf("%s %s still takes the disabled key after a second", p.role, p.addr)
					return
				}
				time.Sleep(10 * time.Millisecond)
			}
		}()
	}
	wg.Wait()

	// The executions of both tool runners, listed once each.
	var count map[string]int
	testenv.Eventually(t, 30*time.Second, func() string { return fmt.Sprintf("executions listed %v, want each of %v once", count, execIDs) }, func() bool {
		r := g.call("GET", "/api/v1/orgs/"+org+"/tool_executions?limit=100", boot, nil)
		count = map[string]int{}
		for _, it := range r.data()["items"].([]any) {
			count[it.(map[string]any)["execution_id"].(string)]++
		}
		ok := len(count) == len(execIDs)
		for _, id := range execIDs {
			ok = ok && count[id] == 1
		}
		return ok
	})

	// One rate limit over both query instances (40 an hour per client).
	inOneRateWindow(time.Hour)
	refused := 0
	for i := 0; i < 44; i++ {
		if newAPIClient(t, qs[i%2].addr).call("GET", "/api/v1/orgs/"+org+"/audit_logs?limit=1", boot, nil, "X-Forwarded-For", "198.51.100.7").status == 429 {
			refused++
		}
	}
	if refused != 4 {
		t.Fatalf("%d of 44 requests over a shared limit of 40 refused, want 4", refused)
	}
}

// scaleOutClickHouse is the store of TestEveryRoleTwice, a ClickHouse
// cluster of 2 shards x 2 replicas: the flags of the roles that open it.
func scaleOutClickHouse(t *testing.T) []string {
	_, dsn := testenv.ClickHouseCluster(t)
	return []string{"--clickhouse", dsn, "--clickhouse-cluster", testenv.ClusterName}
}
