//go:build e2e

package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/auditrail/auditrail/internal/chserver"
	"github.com/auditrail/auditrail/internal/natsx"
	"github.com/auditrail/auditrail/internal/testenv"
)

func TestClickHouseCredentials(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "pw")
	if err := os.WriteFile(file, []byte("s3cret-from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, dsn, user, file, env string
		want, err                  string
	}{
		{"nothing apart", "clickhouse://h:9000/db", "", "", "", "clickhouse://h:9000/db", ""},
		{"password from a file", "clickhouse://h:9000/db", "", file, "", "clickhouse://default:s3cret-from-file@h:9000/db", ""},
		{"user and password from the environment", "clickhouse://h:9000/db", "audit", "", "p@ss word", "clickhouse://audit:p%40ss%20word@h:9000/db", ""},
		{"the DSN's user kept", "clickhouse://reader@h:9000/db", "", "", "pw", "clickhouse://reader:pw@h:9000/db", ""},
		{"a user without a password", "clickhouse://h:9000/db", "audit", "", "", "clickhouse://audit@h:9000/db", ""},
		{"file and environment", "clickhouse://h:9000/db", "", file, "pw", "", "given twice"},
		{"DSN and environment", "clickhouse://u:inline@h:9000/db", "", "", "pw", "", "given twice"},
		{"missing file", "clickhouse://h:9000/db", "", filepath.Join(dir, "none"), "", "", "--clickhouse-password-file"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.env != "" {
				t.Setenv(envClickHousePassword, c.env)
			}
			f := chCredsFlags{user: &c.user, passwordFile: &c.file}
			got, err := f.withCredentials(c.dsn)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("error %v, want %q", err, c.err)
				}
				if strings.Contains(err.Error(), "s3cret") || (c.env != "" && strings.Contains(err.Error(), c.env)) {
					t.Fatalf("the error shows the password: %v", err)
				}
				return
			}
			if err != nil || got != c.want {
				t.Fatalf("got %q, %v; want %q", got, err, c.want)
			}
		})
	}
}

// passwordClickHouse starts a ClickHouse whose only user is "auditrail"
// with password pw.
func passwordClickHouse(t *testing.T, pw string) *chserver.Server {
	t.Helper()
	if _, err := chserver.Binary(); err != nil {
		testenv.Missing(t, "%v", err)
	}
	dir := t.TempDir()
	sum := sha256.Sum256([]byte(pw))
	users := `<?xml version="1.0"?>
<yandex>
  <profiles><default><max_memory_usage>10000000000</max_memory_usage></default></profiles>
  <users><auditrail>
    <password_sha256_hex>` + hex.EncodeToString(sum[:]) + `</password_sha256_hex>
    <networks><ip>::/0</ip></networks><profile>default</profile><quota>default</quota>
  </auditrail></users>
  <quotas><default><interval><duration>3600</duration><queries>0</queries><errors>0</errors><result_rows>0</result_rows><read_rows>0</read_rows><execution_time>0</execution_time></interval></default></quotas>
</yandex>
`
	if err := os.WriteFile(filepath.Join(dir, "users.xml"), []byte(users), 0o644); err != nil {
		t.Fatal(err)
	}
	// config.d overrides the server's configuration: its users are these.
	if err := os.MkdirAll(filepath.Join(dir, "config.d"), 0o755); err != nil {
		t.Fatal(err)
	}
	over := `<?xml version="1.0"?><yandex><users_config>` + filepath.Join(dir, "users.xml") + `</users_config></yandex>`
	if err := os.WriteFile(filepath.Join(dir, "config.d", "users.xml"), []byte(over), 0o644); err != nil {
		t.Fatal(err)
	}
	srv, err := chserver.Start(dir)
	if err != nil {
		t.Fatalf("start clickhouse: %v", err)
	}
	t.Cleanup(srv.Stop)
	return srv
}

// The ingest role reaches a ClickHouse that requires a password, given in a
// file; with a wrong password it waits (503) and says why, and the
// password is in none of its output or answers.
func TestIngestRoleClickHousePassword(t *testing.T) {
	t.Parallel()
	const pw = "the-clickhouse-password-of-the-test"
	srv := passwordClickHouse(t, pw)
	p := startDev(t, t.TempDir())
	dir := t.TempDir()
	good, bad := filepath.Join(dir, "good"), filepath.Join(dir, "bad")
	_ = os.WriteFile(good, []byte(pw+"\n"), 0o600)
	_ = os.WriteFile(bad, []byte(pw+"-wrong\n"), 0o600)
	dsn := srv.DSN("audit_pw")
	run := func(file string) (string, *testenv.SyncBuffer, func()) {
		port, _ := testenv.FreePort()
		addr := fmt.Sprintf("127.0.0.1:%d", port)
		out := &testenv.SyncBuffer{}
		cmd := exec.Command(binary(t), append([]string{"ingest", "--http", addr, "--clickhouse", dsn, "--clickhouse-user", "auditrail",
			"--clickhouse-password-file", file}, p.natsArgs(natsx.RoleIngest)...)...)
		cmd.Stdout, cmd.Stderr = out, out
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return addr, out, func() { _ = cmd.Process.Signal(syscall.SIGTERM); _ = cmd.Wait() }
	}
	health := func(addr string) (int, string) {
		resp, err := http.Get("http://" + addr + "/healthz")
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	addr, out, stop := run(bad)
	var code int
	var body string
	testenv.Eventually(t, 30*time.Second, func() string { return fmt.Sprintf("with a wrong password: /healthz %d %s\n%s", code, body, out) }, func() bool {
		code, body = health(addr)
		return code == 503 && (strings.Contains(strings.ToLower(body), "password") || strings.Contains(body, "uthenticat"))
	})
	time.Sleep(500 * time.Millisecond) // a retry or two logged
	stop()
	if strings.Contains(body, pw) || strings.Contains(out.String(), pw) {
		t.Fatalf("the password is shown:\n/healthz: %s\noutput: %s", body, out)
	}
	addr, out, stop = run(good)
	defer stop()
	testenv.Eventually(t, 30*time.Second, func() string { return fmt.Sprintf("with the password: /healthz %d %s\n%s", code, body, out) }, func() bool {
		code, body = health(addr)
		return code == 200
	})
	if strings.Contains(out.String(), pw) {
		t.Fatalf("the password is shown:\n%s", out)
	}
}
