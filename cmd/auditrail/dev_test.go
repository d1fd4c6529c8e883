//go:build e2e

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/auditrail/auditrail/internal/natsx"
	"github.com/auditrail/auditrail/internal/testenv"
)

// binary builds cmd/auditrail (and auditrail-demo beside it: dev --demo
// runs the demo's servers from it) once per test run.
func binary(t *testing.T) string {
	return testenv.Binaries(t, "github.com/auditrail/auditrail/cmd/auditrail", "github.com/auditrail/auditrail/cmd/auditrail-demo")
}

// devProc is a running `auditrail dev`.
type devProc struct {
	cmd    *exec.Cmd
	http   string
	nats   string
	data   string
	stdout *testenv.SyncBuffer
	stderr *testenv.SyncBuffer
	exited chan error
}

// launchDev starts `auditrail dev` without waiting for it.
func launchDev(t *testing.T, data string, extra ...string) *devProc {
	t.Helper()
	return launchCmd(t, "", binary(t), append([]string{"--data", data}, extra...), true)
}

// launchCmd starts `bin dev args…` in dir on free ports; fast adds a short
// flush interval and a high rate limit for tests (args may override them).
func launchCmd(t *testing.T, dir, bin string, args []string, fast bool) *devProc {
	t.Helper()
	hp, _ := testenv.FreePort()
	np, _ := testenv.FreePort()
	data := ""
	for i, a := range args {
		if a == "--data" && i+1 < len(args) {
			data = args[i+1]
		}
	}
	p := &devProc{http: fmt.Sprintf("127.0.0.1:%d", hp), nats: fmt.Sprintf("127.0.0.1:%d", np), data: data,
		stdout: &testenv.SyncBuffer{}, stderr: &testenv.SyncBuffer{}, exited: make(chan error, 1)}
	line := []string{"dev", "--http", p.http, "--nats-listen", p.nats}
	if fast {
		line = append(line, "--flush-interval", "100ms", "--rate-limit", "100000/60s")
	}
	p.cmd = exec.Command(bin, append(line, args...)...)
	p.cmd.Dir = dir
	p.cmd.Stdout, p.cmd.Stderr = p.stdout, p.stderr
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.exited <- p.cmd.Wait() }()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		if t.Failed() {
			t.Logf("dev stdout:\n%s\ndev stderr:\n%s", p.stdout, p.stderr)
		}
	})
	return p
}

// health returns the status of dev's /healthz (0 when it does not answer).
func (p *devProc) health() int {
	resp, err := http.Get("http://" + p.http + "/healthz")
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

func startDev(t *testing.T, data string, extra ...string) *devProc {
	t.Helper()
	p := launchDev(t, data, extra...)
	p.waitHealthy(t, 30*time.Second)
	return p
}

// waitHealthy waits until /healthz answers 200.
func (p *devProc) waitHealthy(t *testing.T, within time.Duration) {
	t.Helper()
	testenv.Eventually(t, within, func() string { return "dev healthy\n" + p.stderr.String() }, func() bool {
		resp, err := http.Get("http://" + p.http + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return true
			}
		}
		select {
		case err := <-p.exited:
			t.Fatalf("dev exited at start: %v\n%s", err, p.stderr)
		default:
		}
		return false
	})
}

// creds is the NATS credentials file of role that dev wrote.
func (p *devProc) creds(role string) string {
	return natsx.CredsFile(filepath.Join(p.data, "nats"), role)
}

// natsArgs are the flags that connect a tool or role to this dev's NATS
// with the credentials of role.
func (p *devProc) natsArgs(role string) []string {
	return []string{"--nats-url", "nats://" + p.nats, "--nats-creds", p.creds(role)}
}

// connect connects to this dev's NATS with the admin credentials.
func (p *devProc) connect(t *testing.T) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect("nats://"+p.nats, nats.UserCredentials(p.creds(natsx.RoleAdmin)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// stop sends SIGTERM and expects exit status 0.
func (p *devProc) stop(t *testing.T) {
	t.Helper()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-p.exited:
		if err != nil {
			t.Fatalf("dev exited with %v after SIGTERM\n%s", err, p.stderr)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("dev did not exit within 30s of SIGTERM")
	}
}

type listResp struct {
	Code int    `json:"code"`
	Msg  string `json:"msg"`
	Data *struct {
		Items      []map[string]any `json:"items"`
		HasMore    bool             `json:"has_more"`
		NextCursor *string          `json:"next_cursor"`
	} `json:"data"`
}

func get(t *testing.T, base, path, key string) (int, listResp, http.Header) {
	t.Helper()
	req, _ := http.NewRequest("GET", "http://"+base+path, nil)
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var lr listResp
	if err := json.Unmarshal(body, &lr); err != nil {
		t.Fatalf("GET %s: %d, body is not JSON: %s", path, resp.StatusCode, body)
	}
	if lr.Code != resp.StatusCode {
		t.Fatalf("GET %s: body code %d != status %d", path, lr.Code, resp.StatusCode)
	}
	return resp.StatusCode, lr, resp.Header
}

func emit(t *testing.T, p *devProc, org uuid.UUID, count int) {
	t.Helper()
	args := append([]string{"emit", "--org", org.String(), "--count", fmt.Sprint(count), "--batch", "250"}, p.natsArgs(natsx.RoleAdmin)...)
	out, err := exec.Command(binary(t), args...).CombinedOutput()
	if err != nil {
		t.Fatalf("emit: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), fmt.Sprintf("emitted %d events", count)) {
		t.Fatalf("emit output: %s", out)
	}
	// A named organization gets synthetic events only with a loud warning.
	if !strings.Contains(string(out), fmt.Sprintf("WARNING: %d SYNTHETIC events go into the audit trail of organization %s", count, org)) {
		t.Fatalf("emit into a named org did not warn: %s", out)
	}
}

// walk pages through a listing and returns the event ids in order.
func walk(t *testing.T, base, path, key string, limit int) []string {
	t.Helper()
	var ids []string
	cursor := ""
	for i := 0; i < 1000; i++ {
		sep := "?"
		if strings.Contains(path, "?") {
			sep = "&"
		}
		p := fmt.Sprintf("%s%slimit=%d", path, sep, limit)
		if cursor != "" {
			p += "&cursor=" + url.QueryEscape(cursor)
		}
		code, lr, _ := get(t, base, p, key)
		if code != 200 {
			t.Fatalf("GET %s: %d %s", p, code, lr.Msg)
		}
		for _, it := range lr.Data.Items {
			ids = append(ids, it["event_id"].(string))
		}
		if !lr.Data.HasMore {
			if lr.Data.NextCursor != nil {
				t.Fatal("next_cursor present with has_more false")
			}
			return ids
		}
		cursor = *lr.Data.NextCursor
	}
	t.Fatal("walk did not end")
	return nil
}

var keyRe = regexp.MustCompile(`ark_[A-Za-z0-9_-]+`)

func TestDevEndToEnd(t *testing.T) {
	t.Parallel()
	t.Run("sqlite", func(t *testing.T) { devEndToEnd(t) })
	t.Run("clickhouse", func(t *testing.T) { devEndToEnd(t, "--clickhouse", testenv.ClickHouse(t)) })
}

func devEndToEnd(t *testing.T, extra ...string) {
	data := t.TempDir()
	p := startDev(t, data, extra...)
	key := keyRe.FindString(p.stdout.String())
	if key == "" {
		t.Fatalf("no bootstrap key printed:\n%s", p.stdout)
	}
	org := uuid.New()
	emit(t, p, org, 1200)

	path := "/api/v1/orgs/" + org.String() + "/audit_logs"
	var ids []string
	testenv.Eventually(t, 20*time.Second, func() string { return fmt.Sprintf("listed %d events, want 1200", len(ids)) }, func() bool {
		ids = walk(t, p.http, path, key, 100)
		return len(ids) >= 1200
	})
	if len(ids) != 1200 {
		t.Fatalf("listed %d events, want 1200", len(ids))
	}
	seen := map[string]bool{}
	for _, id := range ids {
		if seen[id] {
			t.Fatalf("event %s listed twice", id)
		}
		seen[id] = true
	}

	// Default limit, envelope, every field present.
	code, lr, _ := get(t, p.http, path, key)
	if code != 200 || lr.Msg == "" || len(lr.Data.Items) != 50 || !lr.Data.HasMore {
		t.Fatalf("default page: %d %q %d items has_more=%v", code, lr.Msg, len(lr.Data.Items), lr.Data.HasMore)
	}
	for _, f := range []string{"id", "event_id", "timestamp", "client_ip", "action", "source", "display_name", "customer_id",
		"organization_id", "project_id", "principal_id", "user_id", "principal_type", "resource_type", "resource_id",
		"resource_display", "data", "created_time"} {
		if _, ok := lr.Data.Items[0][f]; !ok {
			t.Errorf("item lacks field %q", f)
		}
	}
	if ts := lr.Data.Items[0]["timestamp"].(string); !regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$`).MatchString(ts) {
		t.Errorf("timestamp %q is not UTC with milliseconds", ts)
	}

	// Filters narrow and page consistently.
	filtered := walk(t, p.http, path+"?action=AUDIT_ACTION_CREATED&resource_type=RESOURCE_TYPE_HOOK", key, 7)
	if len(filtered) == 0 || len(filtered) >= 1200 {
		t.Fatalf("filter returned %d", len(filtered))
	}
	projectID := lr.Data.Items[0]["project_id"]
	for _, it := range lr.Data.Items {
		if it["project_id"] != nil {
			projectID = it["project_id"]
			break
		}
	}
	proj := walk(t, p.http, fmt.Sprintf("/api/v1/orgs/%s/projects/%s/audit_logs", org, projectID), key, 100)
	if len(proj) == 0 || len(proj) >= 1200 {
		t.Fatalf("project listing returned %d", len(proj))
	}

	// Errors.
	for _, c := range []struct {
		path, key string
		code      int
		msg       string
	}{
		{path, "", 401, "bearer"},
		{path, "wrong-key-wrong-key", 401, "invalid"},
		{"/api/v1/orgs/not-a-uuid/audit_logs", key, 400, "org_id"},
		{path + "?limit=0", key, 400, "limit"},
		{path + "?limit=101", key, 400, "limit"},
		{path + "?limit=ten", key, 400, "limit"},
		{path + "?action=CREATED", key, 400, "action"},
		{path + "?action=AUDIT_ACTION_UNSPECIFIED", key, 400, "omit action"},
		{path + "?source=AUDIT_SOURCE_X", key, 400, "source"},
		{path + "?resource_type=nope", key, 400, "resource_type"},
		{path + "?cursor=garbage", key, 400, "cursor"},
		{"/api/v1/nothing", key, 404, "no route"},
		{"/api/v1/orgs/" + uuid.NewString() + "/api_keys/x/disable", key, 405, "allowed: POST"},
	} {
		code, lr, _ := get(t, p.http, c.path, c.key)
		if code != c.code || !strings.Contains(lr.Msg, c.msg) || lr.Data != nil {
			t.Errorf("GET %s: %d %q, want %d naming %q", c.path, code, lr.Msg, c.code, c.msg)
		}
	}
	// A cursor replayed with other filters is refused.
	_, first, _ := get(t, p.http, path+"?limit=5", key)
	code, lr, _ = get(t, p.http, path+"?limit=5&source=AUDIT_SOURCE_CLI&cursor="+url.QueryEscape(*first.Data.NextCursor), key)
	if code != 400 || !strings.Contains(lr.Msg, "cursor") {
		t.Errorf("cursor with other filters: %d %s", code, lr.Msg)
	}

	// SIGTERM drains and exits 0; a restart on the same data keeps everything,
	// including the bootstrap key.
	p.stop(t)
	p2 := startDev(t, data, extra...)
	if keyRe.MatchString(p2.stdout.String()) {
		t.Error("restart printed a new bootstrap key")
	}
	again := walk(t, p2.http, path, key, 100)
	if len(again) != 1200 {
		t.Fatalf("after restart: %d events", len(again))
	}
	org2 := uuid.New()
	emit(t, p2, org2, 10)
	testenv.Eventually(t, 10*time.Second, "events after restart ingested", func() bool {
		return len(walk(t, p2.http, "/api/v1/orgs/"+org2.String()+"/audit_logs", key, 100)) == 10
	})
	p2.stop(t)
}

// dev's embedded NATS refuses anonymous clients, writes every role's
// credentials (0600) and prints the admin one; a role's credentials carry
// only that role's permissions.
func TestDevNATSAuth(t *testing.T) {
	t.Parallel()
	data := t.TempDir()
	p := startDev(t, data)
	if !strings.Contains(p.stdout.String(), p.creds(natsx.RoleAdmin)) {
		t.Fatalf("dev did not print the admin credentials path:\n%s", p.stdout)
	}
	for _, role := range natsx.Roles {
		fi, err := os.Stat(p.creds(role))
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("creds of %s: %v %v", role, fi, err)
		}
	}
	if nc, err := nats.Connect("nats://"+p.nats, nats.MaxReconnects(0)); err == nil {
		nc.Close()
		t.Fatal("dev's NATS accepted an anonymous connection")
	}
	// The toolrunner's credentials cannot mint state (an API key) behind
	// the control plane's back.
	opts, err := natsx.CredsOptions(p.creds(natsx.RoleToolRunner))
	if err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect("nats://"+p.nats, opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	kv, err := js.KeyValue(ctx, natsx.ControlPlaneBucket)
	if err != nil {
		t.Fatalf("toolrunner opens the bucket: %v", err)
	}
	if _, err := kv.Put(ctx, "apikey.forged", []byte("{}")); err == nil {
		t.Fatal("toolrunner credentials wrote the control-plane bucket")
	}
	old := filepath.Join(t.TempDir(), "admin.creds")
	b, _ := os.ReadFile(p.creds(natsx.RoleAdmin))
	if err := os.WriteFile(old, b, 0o600); err != nil {
		t.Fatal(err)
	}
	p.stop(t)
	// A restart keeps the keys: the credentials issued before still work.
	p2 := startDev(t, data)
	nc2, err := nats.Connect("nats://"+p2.nats, nats.UserCredentials(old))
	if err != nil {
		t.Fatalf("credentials of the first run refused after a restart: %v", err)
	}
	nc2.Close()
}

// A ClickHouse that is not up when dev starts: dev serves at once with
// /healthz 503, keeps trying, then ingests once the store answers.
func TestDevWaitsForStore(t *testing.T) {
	t.Parallel()
	srv, dsn := testenv.ClickHouseDedicated(t)
	srv.Stop()
	p := launchDev(t, t.TempDir(), "--clickhouse", dsn, "--bootstrap-key", "bootstrap-key-of-the-late-store")
	testenv.Eventually(t, 30*time.Second, func() string { return "a /healthz answer\n" + p.stderr.String() }, func() bool { return p.health() != 0 })
	// Not ready, and still so a few seconds later: the process waits.
	for i := 0; i < 30; i++ {
		if code := p.health(); code != 503 {
			t.Fatalf("/healthz %d while the store is down, want 503", code)
		}
		select {
		case err := <-p.exited:
			t.Fatalf("dev exited while the store was down: %v\n%s", err, p.stderr)
		case <-time.After(100 * time.Millisecond):
		}
	}
	org := uuid.New()
	emit(t, p, org, 20) // accepted by the stream meanwhile
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	p.waitHealthy(t, 60*time.Second)
	if !strings.Contains(p.stderr.String(), "audit store not answering") {
		t.Errorf("no retry logged:\n%s", p.stderr)
	}
	key := "bootstrap-key-of-the-late-store"
	testenv.Eventually(t, 20*time.Second, "the events published while the store was down ingested", func() bool {
		return len(walk(t, p.http, "/api/v1/orgs/"+org.String()+"/audit_logs", key, 100)) == 20
	})
	p.stop(t)
}
