//go:build e2e

package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	ch "github.com/ClickHouse/clickhouse-go/v2"
	"github.com/google/uuid"

	"github.com/auditrail/auditrail/internal/auditstore"
	"github.com/auditrail/auditrail/internal/auditstore/clickhouse"
	"github.com/auditrail/auditrail/internal/auditstore/storetest"
	"github.com/auditrail/auditrail/internal/chserver"
	"github.com/auditrail/auditrail/internal/natsx"
	"github.com/auditrail/auditrail/internal/testenv"
	"github.com/auditrail/auditrail/schemas"
	"github.com/auditrail/auditrail/schemas/apiitem"
)

// deployBaseUsers is the users configuration the roles' users.d file is
// merged into on the test's server: the default profile as
// deploy/clickhouse/profile.xml makes it, and the migrator as the
// ClickHouse image makes it from CLICKHOUSE_USER (a user of the default
// profile, with DDL rights).
const deployBaseUsers = `<?xml version="1.0"?>
<yandex>
  <profiles><default>
    <max_memory_usage>10000000000</max_memory_usage>
    <load_balancing>in_order</load_balancing>
  </default></profiles>
  <users><auditrail>
    <password>migrator-password</password>
    <networks><ip>::/0</ip></networks>
    <profile>default</profile>
    <quota>default</quota>
  </auditrail></users>
  <quotas><default><interval><duration>3600</duration><queries>0</queries><errors>0</errors><result_rows>0</result_rows><read_rows>0</read_rows><execution_time>0</execution_time></interval></default></quotas>
</yandex>
`

// deploy/clickhouse/users.xml, run for real on a throwaway ClickHouse
// (Debian's 18.16) as docker-compose.yml runs it: `auditrail migrate` as
// the migrator applies the migrations; until then a role that does not
// migrate waits (ErrNotMigrated); each role's user then does what its
// role does through the store — ingest writes entries, tlog appends to a
// log, query lists them without any DDL — and nothing more: the query
// user's INSERT and DROP fail, the writers' DROP, ALTER, TRUNCATE and
// CREATE fail, no role reaches another database, and a role asked to
// migrate with its own user stops with ErrNoDDL.
func TestDeployClickHouseUsers(t *testing.T) {
	t.Parallel()
	if _, err := chserver.Binary(); err != nil {
		testenv.Missing(t, "%v", err)
	}
	deployUsers, err := os.ReadFile(usersFile)
	if err != nil {
		t.Fatal(err)
	}
	u := readUsersXML(t)
	passwords := map[string]string{"auditrail": "migrator-password"}
	var env []string
	for _, x := range u.Users.Any {
		pw := "pw-of-" + x.XMLName.Local
		passwords[x.XMLName.Local] = pw
		env = append(env, x.Password.FromEnv+"="+pw)
	}
	dir, err := os.MkdirTemp("", "auditrail-clickhouse-users-")
	if err != nil {
		t.Fatal(err)
	}
	srv, err := chserver.StartWith(dir, chserver.Options{UsersXML: deployBaseUsers,
		UsersD: map[string][]byte{"auditrail-users.xml": deployUsers}, Env: env})
	if err != nil {
		t.Fatalf("clickhouse with %s: %v", usersFile, err)
	}
	t.Cleanup(func() { srv.Stop(); _ = os.RemoveAll(dir) })
	dsn := func(user string) string {
		return fmt.Sprintf("clickhouse://%s:%s@127.0.0.1:%d/auditrail", user, url.QueryEscape(passwords[user]), srv.TCPPort)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	open := func(user string, noMigrate bool) (*clickhouse.Store, error) {
		return clickhouse.OpenWith(ctx, dsn(user), clickhouse.Options{NoMigrate: noMigrate, Leaves: apiitem.Leaves{}})
	}
	roles := []string{"auditrail_ingest", "auditrail_tlog", "auditrail_query"}

	// Before the migrations: the roles wait.
	for _, user := range roles {
		if _, err := open(user, true); !errors.Is(err, clickhouse.ErrNotMigrated) {
			t.Fatalf("%s before the migrations: %v, want ErrNotMigrated", user, err)
		}
	}
	// The migrator, as the clickhouse-migrate service runs it (the
	// password from the environment).
	cmd := exec.Command(binary(t), "migrate", "--clickhouse", fmt.Sprintf("clickhouse://127.0.0.1:%d/auditrail", srv.TCPPort), "--clickhouse-user", "auditrail")
	cmd.Env = append(os.Environ(), envClickHousePassword+"="+passwords["auditrail"])
	if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "migrations") {
		t.Fatalf("auditrail migrate: %v\n%s", err, out)
	}

	// Each role with --clickhouse-migrate (the default) and its own user,
	// or auditrail migrate run as it: refused for good (no retries),
	// naming the way out, never the password.
	for _, user := range roles {
		if _, err := open(user, false); !errors.Is(err, clickhouse.ErrNoDDL) {
			t.Errorf("%s asked to migrate: %v, want ErrNoDDL", user, err)
		}
		start := time.Now()
		out, err := exec.Command(binary(t), "migrate", "--clickhouse", dsn(user), "--wait", "30s").CombinedOutput()
		if err == nil || !strings.Contains(string(out), "--clickhouse-migrate=false") || strings.Contains(string(out), passwords[user]) || time.Since(start) > 20*time.Second {
			t.Errorf("auditrail migrate as %s: %v after %s\n%s", user, err, time.Since(start).Round(time.Millisecond), out)
		}
	}

	// What each role does, through the store.
	org := uuid.New()
	ingest, err := open("auditrail_ingest", true)
	if err != nil {
		t.Fatalf("ingest: %v", err)
	}
	defer ingest.Close()
	rt := schemas.ResourceTypeAPIKey
	var evs []schemas.AuditEvent
	for i := range 5 {
		evs = append(evs, schemas.AuditEvent{EventID: uuid.New(), Timestamp: time.Now().Add(time.Duration(i) * time.Millisecond).UTC(), Action: schemas.AuditActionCreated,
			Source: schemas.AuditSourceAPI, DisplayName: "alice", OrganizationID: org, PrincipalID: "alice", PrincipalType: "ACCOUNT", ResourceType: &rt, ResourceID: schemas.Ptr("k1")})
	}
	if err := ingest.WriteAudit(ctx, evs); err != nil {
		t.Fatalf("the ingest user cannot insert: %v", err)
	}
	tl, err := open("auditrail_tlog", true)
	if err != nil {
		t.Fatalf("tlog: %v", err)
	}
	defer tl.Close()
	leaves, hashes := storetest.NewLogModel().Add(t, 4)
	if err := tl.AppendLog(ctx, org, auditstore.LogAudit, leaves, hashes); err != nil {
		t.Fatalf("the tlog user cannot append: %v", err)
	}
	q, err := open("auditrail_query", true)
	if err != nil {
		t.Fatalf("query: %v", err)
	}
	defer q.Close()
	page, err := q.ListAudit(ctx, auditstore.Query{OrgID: org, Limit: 50})
	if err != nil || len(page.Items) != len(evs) {
		t.Fatalf("the query user lists %d entries (%v), want %d", len(page.Items), err, len(evs))
	}
	if size, _, err := q.LogHead(ctx, org, auditstore.LogAudit); err != nil || size != 4 {
		t.Fatalf("the query user reads the log's head: %d %v", size, err)
	}

	// What no role may do, straight on the connection.
	const (
		ok          = 0
		readonly    = 164 // READONLY
		noDDL       = 392 // QUERY_IS_PROHIBITED (allow_ddl 0)
		dbDenied    = 291 // DATABASE_ACCESS_DENIED (allow_databases)
		badPassword = 193 // WRONG_PASSWORD
	)
	statements := []struct {
		name, sql string
		want      map[string]int // user → exception code (0: succeeds)
	}{
		{"select", "SELECT count() FROM audit_logs", map[string]int{"auditrail_query": ok, "auditrail_ingest": ok, "auditrail_tlog": ok}},
		{"insert", "INSERT INTO schema_migrations (name, applied_ms)", map[string]int{"auditrail_query": readonly, "auditrail_ingest": ok, "auditrail_tlog": ok}},
		{"drop table", "DROP TABLE audit_logs", map[string]int{"auditrail_query": readonly, "auditrail_ingest": noDDL, "auditrail_tlog": noDDL}},
		{"drop database", "DROP DATABASE auditrail", map[string]int{"auditrail_query": readonly, "auditrail_ingest": noDDL, "auditrail_tlog": noDDL}},
		{"truncate", "TRUNCATE TABLE audit_logs", map[string]int{"auditrail_query": readonly, "auditrail_ingest": noDDL, "auditrail_tlog": noDDL}},
		{"alter delete", "ALTER TABLE audit_logs DELETE WHERE 1 = 1", map[string]int{"auditrail_query": readonly, "auditrail_ingest": noDDL, "auditrail_tlog": noDDL}},
		{"create", "CREATE TABLE planted (a UInt8) ENGINE = Memory", map[string]int{"auditrail_query": readonly, "auditrail_ingest": noDDL, "auditrail_tlog": noDDL}},
		{"rename", "RENAME TABLE audit_logs TO gone", map[string]int{"auditrail_query": readonly, "auditrail_ingest": noDDL, "auditrail_tlog": noDDL}},
		{"set allow_ddl back", "SET allow_ddl = 1", map[string]int{"auditrail_ingest": noDDL, "auditrail_tlog": noDDL}},
		{"set readonly back", "SET readonly = 0", map[string]int{"auditrail_query": readonly}},
		{"system", "SYSTEM STOP MERGES", map[string]int{"auditrail_query": readonly, "auditrail_ingest": noDDL, "auditrail_tlog": noDDL}},
		{"another database", "SELECT count() FROM system.one WHERE 0 = 1 UNION ALL SELECT count() FROM default.planted", map[string]int{"auditrail_query": dbDenied, "auditrail_ingest": dbDenied, "auditrail_tlog": dbDenied}},
	}
	conns := map[string]ch.Conn{}
	for _, user := range roles {
		opts, err := ch.ParseDSN(dsn(user))
		if err != nil {
			t.Fatal(err)
		}
		c, err := ch.Open(opts)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		conns[user] = c
	}
	for _, st := range statements {
		for _, user := range roles {
			want, asked := st.want[user]
			if !asked {
				continue
			}
			t.Run(st.name+"/"+user, func(t *testing.T) {
				var err error
				switch {
				case strings.HasPrefix(st.sql, "INSERT"):
					var b interface {
						Append(...any) error
						Send() error
					}
					b, err = conns[user].PrepareBatch(ctx, st.sql)
					if err == nil {
						if err = b.Append("zz_"+user, int64(0)); err == nil {
							err = b.Send()
						}
					}
				case strings.HasPrefix(st.sql, "SELECT"):
					var rows interface{ Close() error }
					rows, err = conns[user].Query(ctx, st.sql)
					if err == nil {
						rows.Close()
					}
				default:
					err = conns[user].Exec(ctx, st.sql)
				}
				var exc *ch.Exception
				got := 0
				if errors.As(err, &exc) {
					got = int(exc.Code)
				} else if err != nil {
					t.Fatalf("%s: %v", st.sql, err)
				}
				if got != want {
					t.Fatalf("%s as %s: code %d (%v), want %d", st.sql, user, got, err, want)
				}
			})
		}
	}
	// A wrong password is refused.
	opts, _ := ch.ParseDSN(dsn("auditrail_query"))
	opts.Auth.Password = "not-the-password"
	if c, err := ch.Open(opts); err == nil {
		err = c.Ping(ctx)
		c.Close()
		var exc *ch.Exception
		if !errors.As(err, &exc) || exc.Code != badPassword {
			t.Errorf("a wrong password: %v", err)
		}
	}
	// Nothing was dropped: the entries are all there.
	if page, err := q.ListAudit(ctx, auditstore.Query{OrgID: org, Limit: 50}); err != nil || len(page.Items) != len(evs) {
		t.Fatalf("after the attempts: %d entries, %v", len(page.Items), err)
	}

	// The roles themselves, as the compose file runs them: the ingest and
	// query roles with their users and --clickhouse-migrate=false, on a
	// dev's NATS; an organization created there is stored by the ingest
	// role and listed by the query role.
	const boot = "bootstrap-key-of-the-deploy-users-test"
	cursorKey := "Y3Vyc29yLWtleS1vZi10aGUtZGVwbG95LXRlc3QhIQ=="
	dev := startDev(t, t.TempDir(), "--bootstrap-key", boot)
	pwFile := func(user string) string {
		f := t.TempDir() + "/" + user
		if err := os.WriteFile(f, []byte(passwords[user]+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		return f
	}
	plainDSN := fmt.Sprintf("clickhouse://127.0.0.1:%d/auditrail", srv.TCPPort)
	const durable = "deploy-users-ingest"
	startRole(t, "ingest", append(dev.natsArgs(natsx.RoleIngest), "--clickhouse", plainDSN, "--clickhouse-user", "auditrail_ingest",
		"--clickhouse-password-file", pwFile("auditrail_ingest"), "--clickhouse-migrate=false", "--durable", durable)...)
	qAddr := startQueryRole(t, append(dev.natsArgs(natsx.RoleQuery), "--clickhouse", plainDSN, "--clickhouse-user", "auditrail_query",
		"--clickhouse-password-file", pwFile("auditrail_query"), "--clickhouse-migrate=false", "--ingest-durable", durable,
		"--bootstrap-key", boot, "--cursor-keys", cursorKey)...)
	created := newAPIClient(t, dev.http).call("POST", "/api/v1/orgs", boot, map[string]any{"name": "Acme"})
	id, _ := created.data()["id"].(string)
	if created.status != 201 || id == "" {
		t.Fatalf("create an organization: %d %s", created.status, created.raw)
	}
	entries := auditEntries(t, newAPIClient(t, qAddr), boot, "/api/v1/orgs/"+id+"/audit_logs", 1)
	if entries[0]["resource_type"] != "RESOURCE_TYPE_ORGANIZATION" {
		t.Fatalf("the query role lists %v", entries[0])
	}
}
