//go:build e2e

package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/auditrail/auditrail/internal/natsx"
	"github.com/auditrail/auditrail/internal/testenv"
	"github.com/auditrail/auditrail/schemas"
)

// bootKey starts a dev and returns it with its printed bootstrap key.
func devWithKey(t *testing.T, extra ...string) (*devProc, string) {
	t.Helper()
	p := startDev(t, t.TempDir(), extra...)
	key := keyRe.FindString(p.stdout.String())
	if key == "" {
		t.Fatalf("no bootstrap key printed:\n%s", p.stdout)
	}
	return p, key
}

// auditEntries waits until the org (or project) listing holds n entries
// and returns them, newest first.
func auditEntries(t *testing.T, c *apiClient, key, path string, n int) []map[string]any {
	t.Helper()
	var all []map[string]any
	testenv.Eventually(t, 20*time.Second, func() string { return fmt.Sprintf("%s holds %d entries, want %d", path, len(all), n) }, func() bool {
		all = nil
		cursor := ""
		for {
			p := path + "?limit=100"
			if cursor != "" {
				p += "&cursor=" + url.QueryEscape(cursor)
			}
			r := c.call("GET", p, key, nil)
			if r.status != 200 {
				t.Fatalf("GET %s: %d %s", p, r.status, r.raw)
			}
			for _, it := range r.data()["items"].([]any) {
				all = append(all, it.(map[string]any))
			}
			if r.data()["has_more"] != true {
				break
			}
			cursor = r.data()["next_cursor"].(string)
		}
		if len(all) > n {
			t.Fatalf("%s holds %d entries, want %d", path, len(all), n)
		}
		return len(all) == n
	})
	return all
}

func TestAdminAPIAndAuditTrail(t *testing.T) {
	t.Parallel()
	t.Run("sqlite", func(t *testing.T) { adminAndAudit(t) })
	t.Run("clickhouse", func(t *testing.T) { adminAndAudit(t, "--clickhouse", testenv.ClickHouse(t)) })
}

func adminAndAudit(t *testing.T, extra ...string) {
	p, boot := devWithKey(t, extra...)
	c := newAPIClient(t, p.http)
	var mutations int // successful mutations of org A, each one audit event

	// Organization, project, members, keys — by the platform admin.
	r := c.call("POST", "/api/v1/orgs", boot, map[string]any{"name": "Acme"})
	if r.status != 201 {
		t.Fatalf("create org: %d %s", r.status, r.raw)
	}
	orgA := r.data()["id"].(string)
	mutations = 1
	orgPath := "/api/v1/orgs/" + orgA
	proj := c.call("POST", orgPath+"/projects", boot, map[string]any{"name": "billing"})
	if proj.status != 201 {
		t.Fatalf("create project: %d %s", proj.status, proj.raw)
	}
	projP := proj.data()["id"].(string)
	projPath := orgPath + "/projects/" + projP
	mutations++
	for _, m := range []struct{ user, role, name string }{{"alice", "owner", "Alice"}, {"bob", "member", "Bob"}, {"carol", "member", "Carol"}} {
		if r := c.call("PUT", orgPath+"/members/"+m.user, boot, map[string]any{"role": m.role, "display_name": m.name}); r.status != 201 {
			t.Fatalf("member %s: %d %s", m.user, r.status, r.raw)
		}
		mutations++
	}
	if r := c.call("PUT", projPath+"/members/bob", boot, map[string]any{"role": "member"}); r.status != 201 {
		t.Fatalf("project member: %d %s", r.status, r.raw)
	}
	mutations++
	keys := map[string]string{}
	keyIDs := map[string]string{}
	for _, u := range []string{"alice", "bob", "carol"} {
		r := c.call("POST", orgPath+"/api_keys", boot, map[string]any{"name": u + "'s key", "user_id": u})
		if r.status != 201 {
			t.Fatalf("api key %s: %d %s", u, r.status, r.raw)
		}
		keys[u], keyIDs[u] = r.data()["key"].(string), r.data()["id"].(string)
		if len(keys[u]) < 43 || r.data()["hash"] != nil {
			t.Fatalf("key %q too short, or its hash shown", keys[u])
		}
		mutations++
	}
	// A second org with its own owner.
	orgB := c.call("POST", "/api/v1/orgs", boot, map[string]any{"name": "Other"}).data()["id"].(string)
	c.call("PUT", "/api/v1/orgs/"+orgB+"/members/dave", boot, map[string]any{"role": "owner"})
	daveKey := c.call("POST", "/api/v1/orgs/"+orgB+"/api_keys", boot, map[string]any{"name": "d", "user_id": "dave"}).data()["key"].(string)

	entries := auditEntries(t, c, boot, orgPath+"/audit_logs", mutations)
	first := entries[len(entries)-1]
	if first["action"] != "AUDIT_ACTION_CREATED" || first["resource_type"] != "RESOURCE_TYPE_ORGANIZATION" ||
		first["resource_display"] != "Acme" || first["source"] != "AUDIT_SOURCE_API" || first["principal_type"] != "PLATFORM_ADMIN" ||
		first["principal_id"] != "bootstrap" || first["client_ip"] != "127.0.0.1" || first["organization_id"] != orgA {
		t.Fatalf("org creation entry: %v", first)
	}
	keyEntry := entries[0]
	if keyEntry["resource_type"] != "RESOURCE_TYPE_API_KEY" || strings.Contains(fmt.Sprint(keyEntry["data"]), keys["carol"]) ||
		strings.Contains(fmt.Sprint(keyEntry["data"]), "hash") {
		t.Fatalf("api key entry leaks the key or its hash: %v", keyEntry)
	}

	// Who reads what.
	for _, tc := range []struct {
		who, path string
		status    int
	}{
		{keys["alice"], orgPath + "/audit_logs", 200},
		{keys["carol"], orgPath + "/audit_logs", 200},
		{keys["bob"], projPath + "/audit_logs", 200},
		{keys["carol"], projPath + "/audit_logs", 403}, // not a project member
		{keys["alice"], projPath + "/audit_logs", 403}, // owners too need project membership (seeds/000)
		{daveKey, orgPath + "/audit_logs", 403},        // another org's key
		{keys["alice"], "/api/v1/orgs/" + orgB + "/audit_logs", 403},
		{keys["alice"], "/api/v1/orgs/" + uuid.NewString() + "/audit_logs", 403}, // unknown org: no oracle
		{boot, "/api/v1/orgs/" + uuid.NewString() + "/audit_logs", 200},          // platform admin: logs outlive orgs
		{"ak_not-a-key", orgPath + "/audit_logs", 401},
		{"", orgPath + "/audit_logs", 401},
		{"", "/api/v1/orgs/not-a-uuid/audit_logs", 401}, // authentication before parameters
	} {
		if r := c.call("GET", tc.path, tc.who, nil); r.status != tc.status {
			t.Errorf("GET %s as %.12s: %d, want %d (%s)", tc.path, tc.who, r.status, tc.status, r.msg())
		}
	}

	// Owners mutate (declaring the CLI); members do not.
	q := c.call("POST", orgPath+"/projects", keys["alice"], map[string]any{"name": "ops"}, "X-Auditrail-Source", "CLI")
	if q.status != 201 {
		t.Fatalf("owner creates project: %d %s", q.status, q.raw)
	}
	mutations++
	if r := c.call("POST", orgPath+"/projects", keys["bob"], map[string]any{"name": "nope"}); r.status != 403 {
		t.Fatalf("member creates project: %d", r.status)
	}
	entries = auditEntries(t, c, boot, orgPath+"/audit_logs", mutations)
	if e := entries[0]; e["source"] != "AUDIT_SOURCE_CLI" || e["principal_type"] != "API_KEY" || e["principal_id"] != keyIDs["alice"] ||
		e["user_id"] != "alice" || e["display_name"] != "Alice" || e["resource_display"] != "ops" {
		t.Fatalf("owner's entry: %v", e)
	}

	// Bad input: 400 naming the field, nothing recorded.
	for _, tc := range []struct {
		method, path string
		body         any
		hdr          []string
		want         string
	}{
		{"POST", orgPath + "/projects", `{"name":`, nil, "body"},
		{"POST", orgPath + "/projects", map[string]any{}, nil, "name"},
		{"POST", orgPath + "/projects", map[string]any{"name": "x", "colour": "red"}, nil, "colour"},
		{"POST", orgPath + "/projects", nil, nil, "body"},
		{"PUT", orgPath + "/members/erin", map[string]any{"role": "king"}, nil, "role"},
		{"POST", orgPath + "/projects", map[string]any{"name": "x"}, []string{"X-Auditrail-Source", "SYSTEM"}, "X-Auditrail-Source"},
		{"POST", orgPath + "/api_keys", map[string]any{"name": "k", "user_id": "stranger"}, nil, "user_id"},
		{"POST", "/api/v1/orgs/not-a-uuid/projects", map[string]any{"name": "x"}, nil, "org_id"},
		{"POST", orgPath + "/hooks", map[string]any{"name": "h", "endpoint": "https://h.example", "points": map[string]any{"pre": map[string]any{"failure_mode": "fail_sideways"}}, "auth": map[string]any{"type": "bearer", "token": "t"}}, nil, "points.pre.failure_mode"},
		{"POST", orgPath + "/hooks", map[string]any{"name": "h", "endpoint": "ftp://h.example", "points": map[string]any{"pre": map[string]any{}}, "auth": map[string]any{"type": "bearer", "token": "t"}}, nil, "endpoint"},
		{"POST", orgPath + "/hooks", map[string]any{"name": "h", "endpoint": "https://h.example", "points": map[string]any{"pre": map[string]any{}}, "auth": map[string]any{"type": "bearer"}}, nil, "auth.token"},
	} {
		r := c.call(tc.method, tc.path, boot, tc.body, tc.hdr...)
		if r.status != 400 || !strings.Contains(r.msg(), tc.want) {
			t.Errorf("%s %s %v: %d %q, want 400 naming %s", tc.method, tc.path, tc.body, r.status, r.msg(), tc.want)
		}
	}
	if r := c.call("GET", orgPath+"/projects/"+uuid.NewString()+"/members", boot, nil); r.status != 404 {
		t.Errorf("unknown project: %d", r.status)
	}
	if r := c.call("DELETE", orgPath+"/members/alice", boot, nil); r.status != 409 {
		t.Errorf("removing the last owner: %d %s", r.status, r.raw)
	}

	// Secrets: encrypted at rest, never returned, redacted in events.
	const secretValue = "s3cr3t-value-never-shown"
	r = c.call("PUT", projPath+"/secrets/DB_CONNECTION_STRING", keys["alice"], map[string]any{"value": secretValue})
	if r.status != 201 || strings.Contains(string(r.raw), secretValue) {
		t.Fatalf("put secret: %d %s", r.status, r.raw)
	}
	mutations++
	if r := c.call("PUT", projPath+"/secrets/DB_CONNECTION_STRING", keys["alice"], map[string]any{"value": secretValue + "2"}); r.status != 200 {
		t.Fatalf("update secret: %d", r.status)
	}
	mutations++
	if r := c.call("GET", projPath+"/secrets", keys["bob"], nil); r.status != 200 || strings.Contains(string(r.raw), secretValue) {
		t.Fatalf("list secrets: %d %s", r.status, r.raw)
	}
	if r := c.call("GET", projPath+"/secrets", keys["carol"], nil); r.status != 403 { // an org member outside the project
		t.Fatalf("list secrets outside the project: %d %s", r.status, r.raw)
	}
	// Hooks: created, patched, disabled, deleted; the token never shown.
	const hookToken = "hook-token-never-shown"
	h := c.call("POST", projPath+"/hooks", keys["alice"], map[string]any{
		"name": "policy", "endpoint": "https://hooks.example.com",
		"points": map[string]any{"access": map[string]any{"path": "/access", "timeout_ms": 2000}, "pre": map[string]any{}, "post": map[string]any{"failure_mode": "fail_open"}},
		"auth":   map[string]any{"type": "bearer", "token": hookToken}, "retries": map[string]any{"max_attempts": 3, "backoff_ms": 50}})
	if h.status != 201 || strings.Contains(string(h.raw), hookToken) {
		t.Fatalf("create hook: %d %s", h.status, h.raw)
	}
	mutations++
	cfg := h.data()["config"].(map[string]any)
	pts := cfg["points"].(map[string]any)
	if pts["pre"].(map[string]any)["path"] != "/pre" || pts["pre"].(map[string]any)["failure_mode"] != "fail_closed" ||
		pts["pre"].(map[string]any)["timeout_ms"] != float64(5000) || cfg["auth"].(map[string]any)["token"] != "[REDACTED]" {
		t.Fatalf("hook defaults: %v", cfg)
	}
	hookPath := projPath + "/hooks/" + h.data()["id"].(string)
	if r := c.call("PATCH", hookPath, keys["alice"], map[string]any{"timeout_ms": 1500, "points": map[string]any{"pre": map[string]any{"failure_mode": "fail_open"}}}); r.status != 200 ||
		r.data()["config"].(map[string]any)["timeout_ms"] != float64(1500) {
		t.Fatalf("patch hook: %d %s", r.status, r.raw)
	}
	mutations++
	if r := c.call("POST", hookPath+"/disable", keys["alice"], nil); r.status != 200 || r.data()["config"].(map[string]any)["enabled"] != false {
		t.Fatalf("disable hook: %d %s", r.status, r.raw)
	}
	mutations++
	if r := c.call("DELETE", hookPath, keys["alice"], nil); r.status != 200 {
		t.Fatalf("delete hook: %d %s", r.status, r.raw)
	}
	mutations++
	if r := c.call("GET", hookPath, keys["alice"], nil); r.status != 404 {
		t.Fatalf("deleted hook: %d", r.status)
	}
	// User connections.
	const accessToken = "ya29.token-never-shown"
	if r := c.call("PUT", projPath+"/users/bob/connections/google", keys["alice"], map[string]any{"access_token": accessToken, "refresh_token": "r", "scopes": []string{"drive"}, "expires_at": time.Now().Add(time.Hour).UTC().Format(time.RFC3339)}); r.status != 201 || strings.Contains(string(r.raw), accessToken) {
		t.Fatalf("put connection: %d %s", r.status, r.raw)
	}
	mutations++
	if r := c.call("DELETE", projPath+"/users/bob/connections/google", keys["alice"], nil); r.status != 200 {
		t.Fatalf("delete connection: %d", r.status)
	}
	mutations++

	// Disabling and deleting keys take effect at once.
	if r := c.call("POST", orgPath+"/api_keys/"+keyIDs["carol"]+"/disable", keys["alice"], nil); r.status != 200 || r.data()["disabled"] != true {
		t.Fatalf("disable key: %d %s", r.status, r.raw)
	}
	mutations++
	if r := c.call("GET", orgPath+"/audit_logs", keys["carol"], nil); r.status != 401 {
		t.Fatalf("disabled key still works: %d", r.status)
	}
	if r := c.call("DELETE", orgPath+"/api_keys/"+keyIDs["bob"], keys["alice"], nil); r.status != 200 {
		t.Fatalf("delete key: %d", r.status)
	}
	mutations++
	if r := c.call("GET", projPath+"/audit_logs", keys["bob"], nil); r.status != 401 {
		t.Fatalf("deleted key still works: %d", r.status)
	}

	// Every successful mutation: exactly one event, in order, secrets nowhere.
	entries = auditEntries(t, c, boot, orgPath+"/audit_logs", mutations)
	for _, e := range entries {
		s := fmt.Sprint(e)
		for _, leak := range []string{secretValue, hookToken, accessToken, keys["alice"], keys["bob"], keys["carol"]} {
			if strings.Contains(s, leak) {
				t.Fatalf("audit entry leaks a secret: %v", e)
			}
		}
	}
	want := []string{"API_KEY/DELETED", "API_KEY/DISABLED", "USER_CONNECTION/DELETED", "USER_CONNECTION/CREATED",
		"HOOK/DELETED", "HOOK/DISABLED", "HOOK/UPDATED", "HOOK/CREATED", "SECRET/UPDATED", "SECRET/CREATED", "PROJECT/CREATED"}
	for i, w := range want {
		e := entries[i]
		got := strings.TrimPrefix(e["resource_type"].(string), "RESOURCE_TYPE_") + "/" + strings.TrimPrefix(e["action"].(string), "AUDIT_ACTION_")
		if got != w {
			t.Fatalf("entry %d is %s, want %s", i, got, w)
		}
	}
	secretEntry := entries[9]
	if d := secretEntry["data"].(map[string]any); d["after"].(map[string]any)["value"] != "[REDACTED]" || d["before"] != nil {
		t.Fatalf("secret entry data: %v", secretEntry["data"])
	}
	if e := entries[6]; e["data"].(map[string]any)["before"] == nil || e["data"].(map[string]any)["after"] == nil {
		t.Fatalf("update entry lacks before/after: %v", e)
	}
	// The project listing holds the project's entries only.
	projEntries := auditEntries(t, c, boot, projPath+"/audit_logs", 10) // project, pmember, 2 secrets, 4 hook, 2 connection
	for _, e := range projEntries {
		if e["project_id"] != projP {
			t.Fatalf("project listing holds %v", e)
		}
	}
	// Filters page consistently; a cursor cannot be moved to another listing.
	hooks := c.call("GET", orgPath+"/audit_logs?resource_type=RESOURCE_TYPE_HOOK&limit=2", boot, nil)
	if len(hooks.data()["items"].([]any)) != 2 || hooks.data()["has_more"] != true {
		t.Fatalf("hook filter: %s", hooks.raw)
	}
	cur := url.QueryEscape(hooks.data()["next_cursor"].(string))
	if r := c.call("GET", orgPath+"/audit_logs?resource_type=RESOURCE_TYPE_HOOK&limit=2&cursor="+cur, boot, nil); r.status != 200 || len(r.data()["items"].([]any)) != 2 || r.data()["has_more"] != false {
		t.Fatalf("hook filter page 2: %s", r.raw)
	}
	for _, p := range []string{
		orgPath + "/audit_logs?resource_type=RESOURCE_TYPE_SECRET&limit=2&cursor=" + cur,
		projPath + "/audit_logs?resource_type=RESOURCE_TYPE_HOOK&limit=2&cursor=" + cur,
		"/api/v1/orgs/" + orgB + "/audit_logs?resource_type=RESOURCE_TYPE_HOOK&limit=2&cursor=" + cur,
	} {
		if r := c.call("GET", p, boot, nil); r.status != 400 || !strings.Contains(r.msg(), "cursor") {
			t.Errorf("cursor replayed on %s: %d %s", p, r.status, r.msg())
		}
	}

	// Secrets are sealed in the KV store itself.
	nc := p.connect(t)
	js, _ := jetstream.New(nc)
	kv, err := js.KeyValue(context.Background(), "auditrail_controlplane")
	if err != nil {
		t.Fatal(err)
	}
	lister, _ := kv.ListKeys(context.Background())
	for k := range lister.Keys() {
		e, err := kv.Get(context.Background(), k)
		if err != nil {
			continue
		}
		for _, leak := range []string{secretValue, hookToken, accessToken, keys["alice"]} {
			if strings.Contains(string(e.Value()), leak) {
				t.Fatalf("KV entry %s holds a secret in clear", k)
			}
		}
	}
	if c.checked < 50 {
		t.Fatalf("only %d responses validated against OpenAPI", c.checked)
	}
}

// When the audit stream is unavailable, a mutation is applied and answered
// as usual (with its event's id); the event waits in the control plane's
// outbox and is stored, once, when the stream returns. (Past
// ServiceConfig.MaxPending waiting events, mutations are refused with 503:
// controlplane.TestMutationAuditedWhenAuditLogReturns.)
func TestMutationAuditedWhenAuditLogReturns(t *testing.T) {
	t.Parallel()
	p, boot := devWithKey(t)
	c := newAPIClient(t, p.http)
	org := c.call("POST", "/api/v1/orgs", boot, map[string]any{"name": "Acme"}).data()["id"].(string)
	nc := p.connect(t)
	js, _ := jetstream.New(nc)
	ctx := context.Background()
	if err := js.DeleteStream(ctx, schemas.StreamEvents); err != nil {
		t.Fatal(err)
	}
	r := c.call("POST", "/api/v1/orgs/"+org+"/projects", boot, map[string]any{"name": "audited later"})
	id := r.header.Get("Auditrail-Event-Id")
	if r.status != 201 || id == "" {
		t.Fatalf("mutation while the audit log is down: %d %q %s", r.status, id, r.raw)
	}
	if r := c.call("GET", "/api/v1/orgs/"+org+"/projects", boot, nil); r.status != 200 || len(r.data()["items"].([]any)) != 1 {
		t.Fatalf("the applied change is missing: %s", r.raw)
	}
	if pending := outboxPending(t, p.http); pending < 1 {
		t.Fatalf("/healthz shows %d audit events waiting while the audit log is down", pending)
	}
	if err := natsx.EnsureStreams(ctx, js, natsx.DefaultStreamConfig()); err != nil {
		t.Fatal(err)
	}
	st, err := js.Stream(ctx, schemas.StreamEvents)
	if err != nil {
		t.Fatal(err)
	}
	stored := func() int {
		info, err := st.Info(ctx)
		if err != nil || info.State.Msgs == 0 {
			return 0
		}
		n := 0
		for seq := info.State.FirstSeq; seq <= info.State.LastSeq; seq++ {
			if m, err := st.GetMsg(ctx, seq); err == nil && m.Header.Get(schemas.HeaderMsgID) == id {
				n++
			}
		}
		return n
	}
	testenv.Eventually(t, 20*time.Second, "the waiting event published after the audit log returned", func() bool { return stored() > 0 })
	time.Sleep(2 * time.Second) // further sweeps
	if n := stored(); n != 1 {
		t.Fatalf("event stored %d times", n)
	}
	if pending := outboxPending(t, p.http); pending != 0 {
		t.Fatalf("/healthz shows %d audit events waiting after they were published", pending)
	}
}

// outboxPending reads audit_outbox.pending from /healthz.
func outboxPending(t *testing.T, addr string) int {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var h struct {
		AuditOutbox struct {
			Pending *int `json:"pending"`
		} `json:"audit_outbox"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil || h.AuditOutbox.Pending == nil {
		t.Fatalf("/healthz without audit_outbox.pending: %v", err)
	}
	return *h.AuditOutbox.Pending
}

func TestRateLimitSharedAndTrustedProxies(t *testing.T) {
	t.Parallel()
	// Day-long windows, entered well before their end: the counts below
	// cannot be split by a new window starting mid-test.
	if left := time.Until(time.Now().UTC().Truncate(24 * time.Hour).Add(24 * time.Hour)); left < 2*time.Minute {
		time.Sleep(left + time.Second)
	}
	p, boot := devWithKey(t, "--rate-limit", "5/24h", "--admin-rate-limit", "3/24h", "--tool-rate-limit", "2/24h", "--trusted-proxies", "127.0.0.1")
	c := newAPIClient(t, p.http)
	path := "/api/v1/orgs/" + uuid.NewString() + "/audit_logs"
	for i := 0; i < 5; i++ {
		r := c.call("GET", path, boot, nil)
		if r.status != 200 || r.header.Get("X-RateLimit-Limit") != "5" || r.header.Get("X-RateLimit-Remaining") != fmt.Sprint(4-i) || r.header.Get("X-RateLimit-Reset") == "" {
			t.Fatalf("request %d: %d %v", i, r.status, r.header)
		}
	}
	r := c.call("GET", path, boot, nil)
	if r.status != 429 || r.header.Get("Retry-After") == "" {
		t.Fatalf("6th request: %d %v", r.status, r.header)
	}
	// Unauthenticated requests count too, and the project endpoint shares the limit.
	if r := c.call("GET", "/api/v1/orgs/"+uuid.NewString()+"/projects/"+uuid.NewString()+"/audit_logs", "", nil); r.status != 429 {
		t.Fatalf("project endpoint over the limit: %d", r.status)
	}
	// A client behind the trusted proxy has its own budget.
	if r := c.call("GET", path, boot, nil, "X-Forwarded-For", "198.51.100.7"); r.status != 200 || r.header.Get("X-RateLimit-Remaining") != "4" {
		t.Fatalf("forwarded client: %d %v", r.status, r.header)
	}
	// The admin API is not rate limited by the audit limit, but by its own;
	// so is the tool runner API.
	org := c.call("POST", "/api/v1/orgs", boot, map[string]any{"name": "x"})
	if org.status != 201 || org.header.Get("X-RateLimit-Limit") != "3" {
		t.Fatalf("admin API: %d %v", org.status, org.header)
	}
	orgID := org.data()["id"].(string)
	project := c.call("POST", "/api/v1/orgs/"+orgID+"/projects", boot, map[string]any{"name": "p"}).data()["id"].(string)
	if r := c.call("GET", "/api/v1/orgs/"+orgID, boot, nil); r.status != 200 {
		t.Fatalf("3rd admin request: %d", r.status)
	}
	if r := c.call("GET", "/api/v1/orgs/"+orgID, boot, nil); r.status != 429 || r.header.Get("Retry-After") == "" {
		t.Fatalf("4th admin request: %d %v", r.status, r.header)
	}
	tools := "/api/v1/orgs/" + orgID + "/projects/" + project + "/tools?user_id=u"
	for i, want := range []int{200, 200, 429} {
		if r := c.call("GET", tools, boot, nil); r.status != want {
			t.Fatalf("tool request %d: %d, want %d", i+1, r.status, want)
		}
	}
}

func writeJWKS(t *testing.T, secret []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "jwks.json")
	jwks := fmt.Sprintf(`{"keys":[{"kty":"oct","kid":"k1","alg":"HS256","k":%q}]}`, b64url(secret))
	if err := os.WriteFile(path, []byte(jwks), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func b64url(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

func TestJWTUsers(t *testing.T) {
	t.Parallel()
	secret := []byte("0123456789abcdef0123456789abcdef")
	p, boot := devWithKey(t, "--jwks", writeJWKS(t, secret), "--jwt-issuer", "https://idp.example")
	c := newAPIClient(t, p.http)
	token := func(sub string, exp time.Duration, mut func(*jwt.Token)) string {
		tok := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"sub": sub, "iss": "https://idp.example", "exp": time.Now().Add(exp).Unix()})
		tok.Header["kid"] = "k1"
		if mut != nil {
			mut(tok)
		}
		s, err := tok.SignedString(secret)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	// A signed-in user creates an organization and owns it.
	r := c.call("POST", "/api/v1/orgs", token("user-7", time.Hour, nil), map[string]any{"name": "Seven"})
	if r.status != 201 {
		t.Fatalf("JWT user creates org: %d %s", r.status, r.raw)
	}
	org := r.data()["id"].(string)
	members := c.call("GET", "/api/v1/orgs/"+org+"/members", token("user-7", time.Hour, nil), nil)
	if members.status != 200 || !strings.Contains(string(members.raw), `"role":"owner"`) {
		t.Fatalf("owner membership: %s", members.raw)
	}
	entries := auditEntries(t, c, token("user-7", time.Hour, nil), "/api/v1/orgs/"+org+"/audit_logs", 1)
	if e := entries[0]; e["principal_type"] != "ACCOUNT" || e["principal_id"] != "user-7" || e["user_id"] != "user-7" {
		t.Fatalf("entry of a JWT user: %v", e)
	}
	if r := c.call("GET", "/api/v1/orgs/"+org+"/audit_logs", token("user-8", time.Hour, nil), nil); r.status != 403 {
		t.Fatalf("another user: %d", r.status)
	}
	none, _ := jwt.NewWithClaims(jwt.SigningMethodNone, jwt.MapClaims{"sub": "user-7", "iss": "https://idp.example", "exp": time.Now().Add(time.Hour).Unix()}).SignedString(jwt.UnsafeAllowNoneSignatureType)
	for name, tok := range map[string]string{
		"expired":     token("user-7", -time.Minute, nil),
		"unknown kid": token("user-7", time.Hour, func(t *jwt.Token) { t.Header["kid"] = "k2" }),
		"alg none":    none,
	} {
		if r := c.call("GET", "/api/v1/orgs/"+org+"/audit_logs", tok, nil); r.status != 401 {
			t.Errorf("%s token: %d", name, r.status)
		}
	}
	_ = boot
}
