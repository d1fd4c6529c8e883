//go:build e2e

package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/auditrail/auditrail/internal/testenv"
)

func TestAdminCLI(t *testing.T) {
	t.Parallel()
	p, boot := devWithKey(t)
	run := func(stdin string, args ...string) (string, int) {
		t.Helper()
		cmd := exec.Command(binary(t), append([]string{"admin", "--url", "http://" + p.http, "--key", boot}, args...)...)
		cmd.Stdin = strings.NewReader(stdin)
		out, err := cmd.CombinedOutput()
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return string(out), code
	}
	field := func(out, name string) string {
		t.Helper()
		var m map[string]any
		if err := json.Unmarshal([]byte(out), &m); err != nil {
			t.Fatalf("output is not JSON: %s", out)
		}
		return m[name].(string)
	}
	out, code := run("", "org", "create", "Acme Corp")
	if code != 0 {
		t.Fatalf("org create: %d %s", code, out)
	}
	org := field(out, "id")
	out, _ = run("", "project", "create", org, "billing")
	project := field(out, "id")
	if out, code := run("", "member", "set", org, "alice", "--role", "owner", "--display-name", "Alice"); code != 0 || !strings.Contains(out, `"owner"`) {
		t.Fatalf("member set: %d %s", code, out)
	}
	out, code = run("", "key", "create", org, "alice", "ci")
	if code != 0 || !strings.HasPrefix(field(out, "key"), "ak_") {
		t.Fatalf("key create: %d %s", code, out)
	}
	if out, code := run("postgres://u:pw@db/x\n", "secret", "set", org, project, "DB_CONNECTION_STRING"); code != 0 || strings.Contains(out, "pw@db") {
		t.Fatalf("secret set from stdin: %d %s", code, out)
	}
	if out, code := run("", "secret", "list", org, project); code != 0 || !strings.Contains(out, "DB_CONNECTION_STRING") {
		t.Fatalf("secret list: %d %s", code, out)
	}
	// Auth providers: the JSON (with its client secret) from standard input;
	// no answer shows the secret.
	const provSecret = "cli-provider-secret-1b2c"
	if out, code := run(`{"id":"corp","type":"oauth2","client_id":"c1","client_secret":"`+provSecret+`",`+
		`"authorize_url":"https://idp.example.com/authorize","token_url":"https://idp.example.com/token"}`,
		"provider", "create", org, "--file", "-"); code != 0 || strings.Contains(out, provSecret) || !strings.Contains(out, `"client_secret_set": true`) {
		t.Fatalf("provider create: %d %s", code, out)
	}
	if out, code := run(`{"client_id":"c2"}`, "provider", "patch", org, "corp", "--file", "-"); code != 0 || !strings.Contains(out, `"client_id": "c2"`) {
		t.Fatalf("provider patch: %d %s", code, out)
	}
	if out, code := run("", "providers", "list", org); code != 0 || !strings.Contains(out, `"corp"`) || strings.Contains(out, provSecret) {
		t.Fatalf("providers list: %d %s", code, out)
	}
	if out, code := run("", "provider", "get", org, "corp"); code != 0 || !strings.Contains(out, `"token_url": "https://idp.example.com/token"`) {
		t.Fatalf("provider get: %d %s", code, out)
	}
	if out, code := run("", "provider", "delete", org, "corp"); code != 0 {
		t.Fatalf("provider delete: %d %s", code, out)
	}
	if out, code := run("", "provider", "create", org); code != 2 || !strings.Contains(out, "--file") {
		t.Fatalf("provider create without --file: %d %s", code, out)
	}
	// Errors: the API's message and status 1; a bad command line, status 2.
	if out, code := run("", "member", "set", org, "bob", "--role", "emperor"); code != 1 || !strings.Contains(out, "400") || !strings.Contains(out, "role") {
		t.Fatalf("bad role: %d %s", code, out)
	}
	if out, code := run("", "org", "explode"); code != 2 || !strings.Contains(out, "unknown command") {
		t.Fatalf("unknown command: %d %s", code, out)
	}
	if out, code := run("", "project", "create", org); code != 2 || !strings.Contains(out, "usage") {
		t.Fatalf("missing argument: %d %s", code, out)
	}
	// Every change above is in the audit log, with source CLI.
	var last string
	testenv.Eventually(t, 15*time.Second, func() string { return "8 entries in logs: " + last }, func() bool {
		out, code := run("", "logs", org, "--format", "json", "--all", "--limit", "2")
		last = fmt.Sprintf("%d %s", code, out)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if code != 0 || len(lines) != 8 { // org, project, member, key, secret, 3 provider changes
			return false
		}
		for _, l := range lines {
			if !strings.Contains(l, `"source":"AUDIT_SOURCE_CLI"`) {
				t.Fatalf("entry without source CLI: %s", l)
			}
		}
		return true
	})
	out, code = run("", "logs", org)
	if code != 0 || !strings.Contains(out, "TIMESTAMP") || !strings.Contains(out, "SECRET") {
		t.Fatalf("logs table: %d %s", code, out)
	}
	// The names the table prints are filters, in any case; UNSPECIFIED is none.
	for _, f := range [][]string{{"--action", "CREATED"}, {"--action", "created"}, {"--source", "CLI"}, {"--resource-type", "AUTH_PROVIDER"},
		{"--resource-type", "RESOURCE_TYPE_AUTH_PROVIDER"}} {
		out, code := run("", "logs", org, f[0], f[1], "--format", "json", "--all")
		if code != 0 || strings.TrimSpace(out) == "" {
			t.Fatalf("logs %s %s: %d %s", f[0], f[1], code, out)
		}
	}
	if out, code := run("", "logs", org, "--resource-type", "AUTH_PROVIDER", "--action", "DELETED", "--format", "json"); code != 0 || strings.Count(strings.TrimSpace(out), "\n") != 0 {
		t.Fatalf("logs of deleted providers: %d %s", code, out)
	}
	if out, code := run("", "logs", org, "--action", "UNSPECIFIED"); code != 2 || !strings.Contains(out, "no action filter") {
		t.Fatalf("logs --action UNSPECIFIED: %d %s", code, out)
	}
	if out, code := run("", "logs", org, "--action", "EXPLODED"); code != 2 || !strings.Contains(out, "CREATED, UPDATED, DELETED, DISABLED") {
		t.Fatalf("logs --action EXPLODED: %d %s", code, out)
	}
	// Without --all, more pages are announced with the way to get them.
	if out, code := run("", "logs", org, "--limit", "3"); code != 0 || !strings.Contains(out, "3 shown; 5 more follow: pass --all") {
		t.Fatalf("logs with more pages: %d %s", code, out)
	}
	if out, code := run("", "org", "list"); code != 0 || !strings.Contains(out, org) || !strings.Contains(out, "Acme Corp") {
		t.Fatalf("org list: %d %s", code, out)
	}
	if out, code := run("", "executions", org, project); code != 0 || !strings.Contains(out, "STARTED") || !strings.Contains(out, "TOOL") {
		t.Fatalf("executions: %d %s", code, out)
	}
	if out, code := run("", "executions", org, "--success", "maybe"); code != 2 {
		t.Fatalf("executions --success maybe: %d %s", code, out)
	}
}

// The API takes the enum names (the seed's), refuses a short name as an
// unknown name, and refuses *_UNSPECIFIED with a message that says what to do.
func TestFilterNamesInTheAPI(t *testing.T) {
	t.Parallel()
	p, boot := devWithKey(t)
	org := "00000000-0000-4000-8000-0000000000aa"
	for _, tc := range []struct {
		query string
		code  int
		msg   string
	}{
		{"action=AUDIT_ACTION_CREATED", 200, ""},
		{"source=AUDIT_SOURCE_CLI&resource_type=RESOURCE_TYPE_HOOK", 200, ""},
		{"action=CREATED", 400, "action"},
		{"action=AUDIT_ACTION_UNSPECIFIED", 400, "action: AUDIT_ACTION_UNSPECIFIED is no action filter (omit action to list every entry)"},
		{"resource_type=RESOURCE_TYPE_UNSPECIFIED", 400, "omit resource_type"},
		{"source=FAX", 400, "AUDIT_SOURCE_API, AUDIT_SOURCE_DASHBOARD"},
	} {
		code, lr, _ := get(t, p.http, "/api/v1/orgs/"+org+"/audit_logs?"+tc.query, boot)
		if code != tc.code || !strings.Contains(lr.Msg, tc.msg) {
			t.Errorf("%s: %d %q", tc.query, code, lr.Msg)
		}
	}
}

// `admin logs --all` waits out the rate limit (Retry-After) with a progress
// line and finishes the walk.
func TestAdminLogsWaitsOutRateLimit(t *testing.T) {
	t.Parallel()
	p, boot := devWithKey(t, "--rate-limit", "3/1s")
	c := newAPIClient(t, p.http)
	org := c.call("POST", "/api/v1/orgs", boot, map[string]any{"name": "Walk"}).data()["id"].(string)
	for i := 0; i < 7; i++ {
		if r := c.call("PUT", "/api/v1/orgs/"+org+"/members/u"+strconv.Itoa(i), boot, map[string]any{"role": "member", "display_name": "U"}); r.status != 200 && r.status != 201 {
			t.Fatalf("member %d: %d %s", i, r.status, r.raw)
		}
	}
	time.Sleep(1500 * time.Millisecond) // ingested (flush 100 ms), and a fresh window
	cmd := exec.Command(binary(t), "admin", "--url", "http://"+p.http, "--key", boot, "logs", org, "--all", "--limit", "1", "--format", "json")
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("admin logs --all: %v\n%s", err, stderr.String())
	}
	if n := strings.Count(strings.TrimSpace(stdout.String()), "\n") + 1; n != 8 {
		t.Fatalf("%d rows, want 8 (the org and 7 members):\n%s", n, stdout.String())
	}
	if !strings.Contains(stderr.String(), "rate limited, continuing in") {
		t.Fatalf("no progress line while rate limited:\n%s", stderr.String())
	}
}

// The second-day CLI: admin logs and executions search (--q), bound the
// time (--since, --until) and export (--format csv|jsonl through the export
// route); each command's -h shows its own flags; every list verb prints a
// table.
func TestAdminSecondDay(t *testing.T) {
	t.Parallel()
	p, boot := devWithKey(t, "--checkpoint-interval", "1s")
	run := func(args ...string) (stdout, stderr string, code int) {
		t.Helper()
		cmd := exec.Command(binary(t), append([]string{"admin", "--url", "http://" + p.http, "--key", boot}, args...)...)
		var o, e strings.Builder
		cmd.Stdout, cmd.Stderr = &o, &e
		err := cmd.Run()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return o.String(), e.String(), code
	}
	c := newAPIClient(t, p.http)
	org := c.call("POST", "/api/v1/orgs", boot, map[string]any{"name": "Second Day"}).data()["id"].(string)
	for _, u := range []string{"alice", "bob"} {
		c.call("PUT", "/api/v1/orgs/"+org+"/members/"+u, boot, map[string]any{"role": "member", "display_name": u})
	}
	c.call("POST", "/api/v1/orgs/"+org+"/api_keys", boot, map[string]any{"user_id": "alice", "name": "laptop"})
	auditEntries(t, c, boot, "/api/v1/orgs/"+org+"/audit_logs", 4)

	// --q: the search language.
	out, errOut, code := run("logs", org, "--q", "resource_type:API_KEY", "--format", "json")
	if code != 0 || strings.Count(out, "\n") != 1 || !strings.Contains(out, `"resource_display":"laptop"`) {
		t.Fatalf("logs --q resource_type:API_KEY: %d %s %s", code, out, errOut)
	}
	if out, errOut, code := run("logs", org, "--q", "bob"); code != 0 || !strings.Contains(out, "bob") || strings.Contains(out, "laptop") {
		t.Fatalf("logs --q bob: %d %s %s", code, out, errOut)
	}
	if _, errOut, code := run("logs", org, "--q", `resource_type:"unclosed`); code != 1 || !strings.Contains(errOut, "400") || !strings.Contains(errOut, "q") {
		t.Fatalf("logs with a malformed q: %d %s", code, errOut)
	}
	// --since and --until.
	if out, _, code := run("logs", org, "--since", "1h", "--format", "json"); code != 0 || strings.Count(out, "\n") != 4 {
		t.Fatalf("logs --since 1h: %d %s", code, out)
	}
	if out, _, code := run("logs", org, "--until", "2020-01-01", "--format", "json"); code != 0 || out != "" {
		t.Fatalf("logs --until 2020-01-01: %d %q", code, out)
	}
	if _, errOut, code := run("logs", org, "--since", "yesterday"); code != 2 || !strings.Contains(errOut, "RFC 3339") {
		t.Fatalf("logs --since yesterday: %d %s", code, errOut)
	}
	// csv through the export route: every entry, a summary on stderr; the
	// export itself is recorded.
	out, errOut, code = run("logs", org, "--format", "csv", "--q", "-resource_type:ORGANIZATION")
	if code != 0 || !strings.HasPrefix(out, "id,event_id,timestamp,") || strings.Count(out, "\r\n") != 4 ||
		!strings.Contains(errOut, "exported 3 rows") {
		t.Fatalf("logs --format csv: %d\n%s\n%s", code, out, errOut)
	}
	if _, errOut, code := run("logs", org, "--format", "csv", "--limit", "5"); code != 2 || !strings.Contains(errOut, "exports every matching entry") {
		t.Fatalf("logs --format csv --limit 5: %d %s", code, errOut)
	}
	// jsonl of the whole organization ends with its checkpoint: auditrail
	// verify --export checks it offline.
	dir := t.TempDir()
	var verified string
	testenv.Eventually(t, 30*time.Second, func() string { return "verify --export of admin logs --format jsonl: " + verified }, func() bool {
		// The keys as the server lists them (dev makes its first key
		// shortly after it starts).
		keys := c.call("GET", "/api/v1/audit_keys", boot, nil)
		if err := os.WriteFile(filepath.Join(dir, "keys.json"), []byte(keys.raw), 0o600); err != nil {
			t.Fatal(err)
		}
		out, errOut, code := run("logs", org, "--format", "jsonl")
		if code != 0 {
			t.Fatalf("logs --format jsonl: %d %s", code, errOut)
		}
		if err := os.WriteFile(filepath.Join(dir, "audit.jsonl"), []byte(out), 0o600); err != nil {
			t.Fatal(err)
		}
		v, err := exec.Command(binary(t), "verify", "--export", filepath.Join(dir, "audit.jsonl"), "--keys", filepath.Join(dir, "keys.json")).CombinedOutput()
		verified = fmt.Sprintf("%v %s", err, v)
		return err == nil && strings.Contains(string(v), "OK") && !strings.Contains(string(v), "not sequenced")
	})
	if out, errOut, code := run("executions", org, "--format", "csv"); code != 0 || !strings.HasPrefix(out, "execution_id,event_id,") || !strings.Contains(errOut, "exported 0 rows") {
		t.Fatalf("executions --format csv: %d %s %s", code, out, errOut)
	}
	// Each command's -h shows its own flags, on stdout, exit 0.
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"logs", "-h"}, []string{"usage: auditrail admin logs ORG", "-q string", "-since string", "-until string", "csv or jsonl", "-resource-type"}},
		{[]string{"executions", "--help"}, []string{"usage: auditrail admin executions ORG [PROJECT]", "-success", "-q string"}},
		{[]string{"key", "create", "-h"}, []string{"usage: auditrail admin key create ORG USER NAME"}},
		{[]string{"org", "list", "-h"}, []string{"-format string", "table"}},
	} {
		out, errOut, code := run(c.args...)
		for _, w := range c.want {
			if code != 0 || !strings.Contains(out, w) {
				t.Errorf("admin %v: %d, stdout lacks %q:\n%s%s", c.args, code, w, out, errOut)
			}
		}
	}
	// --format table wherever a list is printed.
	if out, _, code := run("member", "list", org, "--format", "table"); code != 0 || !strings.Contains(out, "USER_ID") || !strings.Contains(out, "alice") {
		t.Fatalf("member list --format table: %d %s", code, out)
	}
	if out, _, code := run("org", "list", "--format", "table"); code != 0 || !strings.HasPrefix(out, "ID") || !strings.Contains(out, "Second Day") {
		t.Fatalf("org list --format table: %d %s", code, out)
	}
	if _, errOut, code := run("org", "list", "--format", "xml"); code != 2 || !strings.Contains(errOut, "json or table") {
		t.Fatalf("org list --format xml: %d %s", code, errOut)
	}
}
