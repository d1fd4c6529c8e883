//go:build e2e

package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	ch "github.com/ClickHouse/clickhouse-go/v2"
	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/auditrail/auditrail/internal/testenv"
	"github.com/auditrail/auditrail/producers"
	"github.com/auditrail/auditrail/schemas"
)

// An organization's retention, through dev on SQLite and on ClickHouse:
// the entries older than it leave the listing, the export, the proof
// route and the event stream, but not those a legal hold keeps;
// `auditrail verify` still passes and says what expired; a hand deletion
// of a held entry still fails.
func TestRetentionExpiresProvably(t *testing.T) {
	t.Parallel()
	t.Run("sqlite", func(t *testing.T) { retentionExpiresProvably(t) })
	t.Run("clickhouse", func(t *testing.T) { retentionExpiresProvably(t, "--clickhouse", testenv.ClickHouse(t)) })
}

func retentionExpiresProvably(t *testing.T, store ...string) {
	p, boot := devWithKey(t, append([]string{"--retention-interval", "300ms", "--retention-grace", "0s", "--checkpoint-interval", "200ms"}, store...)...)
	c := newAPIClient(t, p.http)
	org := c.call("POST", "/api/v1/orgs", boot, map[string]any{"name": "Acme"}).data()["id"].(string)
	var events, projects []string
	for i := range 6 {
		r := c.call("POST", "/api/v1/orgs/"+org+"/projects", boot, map[string]any{"name": fmt.Sprintf("p%d", i)})
		if r.status != 201 {
			t.Fatalf("create project: %d %s", r.status, r.raw)
		}
		events = append(events, r.header.Get("Auditrail-Event-Id"))
		projects = append(projects, r.data()["id"].(string))
	}
	held := events[2]
	r := c.call("POST", "/api/v1/orgs/"+org+"/legal_holds", boot, map[string]any{"name": "dispute", "q": "resource_id:" + projects[2]})
	if r.status != 201 {
		t.Fatalf("legal hold: %d %s", r.status, r.raw)
	}
	holdID := r.data()["id"].(string)
	// Tool executions, which expire under their own retention.
	pub, err := producers.New(p.connect(t), producers.DefaultConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var execs []producers.Event
	for range 5 {
		id := uuid.Must(uuid.NewV7()).String()
		execs = append(execs, &schemas.ExecutionEvent{EventID: id, ExecutionID: id, OrganizationID: org, ProjectID: projects[0], UserID: "alice",
			Tool: schemas.ToolRef{Toolkit: "DocumentDbToolkit", Name: "CountDocuments", Version: "0.4.0"}, StartedAt: time.Now(),
			EndedAt: time.Now().Add(time.Millisecond), DurationMS: 1, Success: true, ExecutionCode: "OK"})
	}
	if err := pub.PublishBatch(context.Background(), execs); err != nil {
		t.Fatal(err)
	}
	executions := func() int {
		return len(c.call("GET", "/api/v1/orgs/"+org+"/tool_executions?limit=100", boot, nil).data()["items"].([]any))
	}
	testenv.Eventually(t, 20*time.Second, func() string { return "the executions listed" }, func() bool { return executions() == 5 })
	auditEntries(t, c, boot, "/api/v1/orgs/"+org+"/audit_logs", 8)
	time.Sleep(1500 * time.Millisecond) // these entries are older than the retention set next
	if r := c.call("PUT", "/api/v1/orgs/"+org+"/retention", boot, map[string]any{"audit_logs": "1s", "tool_executions": "1s"}); r.status != 200 {
		t.Fatalf("PUT retention: %d %s", r.status, r.raw)
	}

	listed := func() []string {
		r := c.call("GET", "/api/v1/orgs/"+org+"/audit_logs?limit=100", boot, nil)
		var ids []string
		for _, it := range r.data()["items"].([]any) {
			ids = append(ids, it.(map[string]any)["event_id"].(string))
		}
		return ids
	}
	testenv.Eventually(t, 30*time.Second, func() string { return fmt.Sprintf("still listed: %v", listed()) }, func() bool {
		ids := listed()
		for _, e := range events {
			if e != held && slices.Contains(ids, e) {
				return false
			}
		}
		return slices.Contains(ids, held)
	})
	if r := c.call("GET", "/api/v1/orgs/"+org+"/legal_holds/"+holdID, boot, nil); r.status != 200 || r.data()["held"] != float64(1) {
		t.Fatalf("the hold: %d %s", r.status, r.raw)
	}

	// The proof of an expired entry: 410.
	if r := c.call("GET", "/api/v1/orgs/"+org+"/audit_logs/proof?event_id="+events[0], boot, nil); r.status != 410 || !strings.Contains(r.msg(), "expired") {
		t.Fatalf("proof of an expired entry: %d %s", r.status, r.raw)
	}
	if r := c.call("GET", "/api/v1/orgs/"+org+"/audit_logs/proof?event_id="+held, boot, nil); r.status != 200 {
		t.Fatalf("proof of a held entry: %d %s", r.status, r.raw)
	}

	// The stream holds none of the expired entries any more.
	nc := p.connect(t)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	st, err := js.Stream(ctx, schemas.StreamEvents)
	if err != nil {
		t.Fatal(err)
	}
	cons, err := st.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{FilterSubjects: []string{schemas.EventSubject(org, schemas.KindAudit)}})
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx, jetstream.WithSubjectFilter(schemas.EventSubject(org, schemas.KindAudit)))
	if err != nil {
		t.Fatal(err)
	}
	n := int(info.State.Subjects[schemas.EventSubject(org, schemas.KindAudit)])
	if n > 0 {
		batch, err := cons.FetchNoWait(n)
		if err != nil {
			t.Fatal(err)
		}
		for m := range batch.Messages() {
			if id := m.Headers().Get(schemas.HeaderMsgID); slices.Contains(events, id) && id != events[len(events)-1] {
				t.Errorf("the stream still holds expired event %s", id)
			}
		}
	}

	// Verified online, with a note saying what expired.
	keysFile := filepath.Join(t.TempDir(), "keys.json")
	if err := os.WriteFile(keysFile, c.call("GET", "/api/v1/audit_keys", boot, nil).raw, 0o600); err != nil {
		t.Fatal(err)
	}
	verify := func() (string, error) {
		out, err := exec.Command(binary(t), "verify", "--url", "http://"+p.http, "--key", boot, "--org", org, "--keys", keysFile, "--wait", "10s").CombinedOutput()
		return string(out), err
	}
	out, err := verify()
	if err != nil || !strings.Contains(out, "expired under the organization's retention of 1 second") && !strings.Contains(out, "expired under the organization's retention of 1s") {
		t.Fatalf("verify after the expiry: %v\n%s", err, out)
	}
	testenv.Eventually(t, 20*time.Second, func() string { return fmt.Sprintf("%d executions listed", executions()) }, func() bool { return executions() == 0 })
	xout, err := exec.Command(binary(t), "verify", "--url", "http://"+p.http, "--key", boot, "--org", org, "--keys", keysFile, "--kind", "executions", "--wait", "10s").CombinedOutput()
	if err != nil || !strings.Contains(string(xout), "5 entries expired under the organization's retention") {
		t.Fatalf("verify of the executions after their expiry: %v\n%s", err, xout)
	}

	// Hand edits still fail: the held entry deleted.
	openTrail(t, p.data, store).deleteEntry(org, held)
	if out, err := verify(); err == nil || !strings.Contains(out, "held entries were deleted") {
		t.Fatalf("verify after deleting a held entry: %v\n%s", err, out)
	}
}

// An erasure of a person, through dev on SQLite and on ClickHouse: every
// entry that names her (as actor, as resource, in data) shows the
// pseudonym instead, in the listing, the search, the export and the
// stream; the erasure's own event does not name her; `auditrail verify`
// still passes and says what was erased.
func TestErasureProvably(t *testing.T) {
	t.Parallel()
	t.Run("sqlite", func(t *testing.T) { erasureProvably(t) })
	t.Run("clickhouse", func(t *testing.T) { erasureProvably(t, "--clickhouse", testenv.ClickHouse(t)) })
}

func erasureProvably(t *testing.T, store ...string) {
	p, boot := devWithKey(t, append([]string{"--retention-interval", "300ms", "--checkpoint-interval", "200ms"}, store...)...)
	c := newAPIClient(t, p.http)
	org := c.call("POST", "/api/v1/orgs", boot, map[string]any{"name": "Acme"}).data()["id"].(string)
	const alice, name = "alice@example.com", "Alice Smith"
	if r := c.call("PUT", "/api/v1/orgs/"+org+"/members/"+alice, boot, map[string]any{"role": "member", "display_name": name}); r.status != 200 && r.status != 201 {
		t.Fatalf("member: %d %s", r.status, r.raw)
	}
	key := c.call("POST", "/api/v1/orgs/"+org+"/api_keys", boot, map[string]any{"name": "alice's", "user_id": alice}).data()["key"].(string)
	// Alice's own action: an export, recorded with her as the actor.
	req, _ := http.NewRequest("GET", "http://"+p.http+"/api/v1/orgs/"+org+"/audit_logs/export?format=jsonl", nil)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("export as alice: %d", resp.StatusCode)
	}
	c.call("POST", "/api/v1/orgs/"+org+"/projects", boot, map[string]any{"name": "unrelated"})
	entries := auditEntries(t, c, boot, "/api/v1/orgs/"+org+"/audit_logs", 5)
	names := 0
	for _, e := range entries {
		b, _ := json.Marshal(e)
		if strings.Contains(string(b), alice) {
			names++
		}
	}
	if names < 3 {
		t.Fatalf("%d entries name alice before the erasure, want at least 3", names)
	}

	r := c.call("POST", "/api/v1/orgs/"+org+"/erasures", boot, map[string]any{"subject": map[string]any{"user_id": alice}, "reason": "GDPR article 17 request"})
	if r.status != 202 || strings.Contains(string(r.raw), alice) {
		t.Fatalf("POST erasure: %d %s", r.status, r.raw)
	}
	id := r.data()["id"].(string)
	pseudonym := r.data()["pseudonym"].(string)
	var status map[string]any
	testenv.Eventually(t, 30*time.Second, func() string { return fmt.Sprintf("erasure %v", status) }, func() bool {
		status = c.call("GET", "/api/v1/orgs/"+org+"/erasures/"+id, boot, nil).data()
		return status["status"] == "done"
	})
	if status["entries"].(float64) < 3 || strings.Contains(fmt.Sprint(status), alice) {
		t.Fatalf("erasure done: %v", status)
	}

	all := c.call("GET", "/api/v1/orgs/"+org+"/audit_logs?limit=100", boot, nil)
	if strings.Contains(string(all.raw), alice) || strings.Contains(string(all.raw), name) {
		t.Fatalf("the listing still names her:\n%s", all.raw)
	}
	if !strings.Contains(string(all.raw), pseudonym) || !strings.Contains(string(all.raw), `"erasure":{"id":"`+id+`"`) {
		t.Fatalf("the listing shows no pseudonym or erasure member:\n%s", all.raw)
	}
	if r := c.call("GET", "/api/v1/orgs/"+org+"/audit_logs?q="+url.QueryEscape("actor:"+alice), boot, nil); len(r.data()["items"].([]any)) != 0 {
		t.Fatalf("searching for her finds: %s", r.raw)
	}

	// The stream keeps no message that names her.
	nc := p.connect(t)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	st, err := js.Stream(ctx, schemas.StreamEvents)
	if err != nil {
		t.Fatal(err)
	}
	subj := schemas.EventSubject(org, schemas.KindAudit) // (erasure)
	info, err := st.Info(ctx, jetstream.WithSubjectFilter(subj))
	if err != nil {
		t.Fatal(err)
	}
	if n := int(info.State.Subjects[subj]); n > 0 {
		cons, err := st.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{FilterSubjects: []string{subj}})
		if err != nil {
			t.Fatal(err)
		}
		batch, err := cons.Fetch(n, jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		for m := range batch.Messages() {
			if bytes.Contains(m.Data(), []byte(alice)) || bytes.Contains(m.Data(), []byte(name)) {
				t.Errorf("the stream still holds a message naming her (%s)", m.Headers().Get(schemas.HeaderMsgID))
			}
		}
	}

	keysFile := filepath.Join(t.TempDir(), "keys.json")
	if err := os.WriteFile(keysFile, c.call("GET", "/api/v1/audit_keys", boot, nil).raw, 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(binary(t), "verify", "--url", "http://"+p.http, "--key", boot, "--org", org, "--keys", keysFile, "--wait", "10s").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "erased by erasure "+id) || !strings.Contains(string(out), "every field the erasure did not replace checked") {
		t.Fatalf("verify after the erasure: %v\n%s", err, out)
	}

	// The export: each erased entry without its salt, its fields opened;
	// verified as is, and failing once a field the erasure kept (its
	// action) is altered by hand.
	req, _ = http.NewRequest("GET", "http://"+p.http+"/api/v1/orgs/"+org+"/audit_logs/export?format=jsonl", nil)
	req.Header.Set("Authorization", "Bearer "+boot)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	export, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("export: %d %v", resp.StatusCode, err)
	}
	var lines []string
	altered := false
	for line := range strings.SplitSeq(strings.TrimRight(string(export), "\n"), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil && m["erasure"] != nil {
			er := m["erasure"].(map[string]any)
			if m["salt"] != nil || er["fields"] == nil {
				t.Fatalf("an erased entry keeps its salt or has no fields: %s", line)
			}
			if !altered {
				m["action"], altered = "DELETED", true
				b, _ := json.Marshal(m)
				line = string(b)
			}
		}
		lines = append(lines, line)
	}
	if !altered {
		t.Fatalf("the export has no erased entry:\n%s", export)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "audit.jsonl"), export, 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(binary(t), "verify", "--export", filepath.Join(dir, "audit.jsonl"), "--keys", keysFile).CombinedOutput(); err != nil || !strings.Contains(string(out), "every field the erasure did not replace checked") {
		t.Fatalf("verify of the export after the erasure: %v\n%s", err, out)
	}
	if err := os.WriteFile(filepath.Join(dir, "altered.jsonl"), []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err = exec.Command(binary(t), "verify", "--export", filepath.Join(dir, "altered.jsonl"), "--keys", keysFile).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "a field that erasure "+id+" did not replace was altered") {
		t.Fatalf("verify of an erased entry altered by hand: %v\n%s", err, out)
	}
}

// A lifecycle killed in the middle of an expiry finishes the same expiry
// when dev starts again on the same --data (and --clickhouse): exactly the
// entries persisted before the cutoff are gone, every later one stays,
// and the log still verifies. On SQLite the deletion takes steps of a
// transaction each: dev is killed (SIGKILL) once the expiry is planned
// (log_expiries done = 0) and partly applied. On ClickHouse it is one
// mutation per table, which the server finishes on its own: dev is killed
// once the expiry is planned and before it is done, and the restarted dev
// finds it undone and finishes it.
func TestRetentionSurvivesAKillMidCycle(t *testing.T) {
	t.Parallel()
	// SQLite: enough entries for a deletion of several steps; ClickHouse
	// deletes them all at once whatever their number.
	t.Run("sqlite", func(t *testing.T) { retentionSurvivesAKill(t, 20000) })
	t.Run("clickhouse", func(t *testing.T) { retentionSurvivesAKill(t, 5000, "--clickhouse", testenv.ClickHouse(t)) })
}

func retentionSurvivesAKill(t *testing.T, old int, store ...string) {
	data := t.TempDir()
	args := append([]string{"--retention-interval", "300ms", "--retention-grace", "0s", "--checkpoint-interval", "200ms"}, store...)
	p := startDev(t, data, args...)
	boot := keyRe.FindString(p.stdout.String())
	c := newAPIClient(t, p.http)
	org := c.call("POST", "/api/v1/orgs", boot, map[string]any{"name": "Acme"}).data()["id"].(string)
	orgID := uuid.MustParse(org)
	const young = 40
	start := time.Now()
	emit(t, p, orgID, old)
	size := func(c *apiClient) float64 {
		r := c.call("GET", "/api/v1/orgs/"+org+"/audit_logs/checkpoint", boot, nil)
		if r.status != 200 {
			return 0
		}
		return r.data()["size"].(float64)
	}
	testenv.Eventually(t, 60*time.Second, func() string { return fmt.Sprintf("checkpoint of %v entries", size(c)) }, func() bool { return size(c) >= float64(old+1) })
	t.Logf("%d entries in a checkpoint after %s", old, time.Since(start).Round(time.Millisecond))
	mid := time.Now()
	time.Sleep(8 * time.Second)
	emit(t, p, orgID, young)
	testenv.Eventually(t, 30*time.Second, func() string { return "the young entries in a checkpoint" }, func() bool { return size(c) >= float64(old+young+1) })

	tr := openTrail(t, data, store)
	// The cutoff 4 s after the old entries: between them and the young.
	retention := time.Since(mid.Add(4 * time.Second)).Round(time.Second)
	if r := c.call("PUT", "/api/v1/orgs/"+org+"/retention", boot, map[string]any{"audit_logs": retention.String()}); r.status != 200 {
		t.Fatalf("PUT retention: %d %s", r.status, r.raw)
	}
	set := time.Now()
	// Kill dev once an expiry is planned, not done, and (SQLite) has
	// deleted a part.
	before := tr.entries(org)
	deadline := time.Now().Add(30 * time.Second)
	for {
		if tr.undoneExpiries() > 0 && (tr.ch != nil || tr.entries(org) < before) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no expiry started within 30 s\n%s", p.stderr)
		}
		if tr.ch == nil {
			time.Sleep(5 * time.Millisecond)
		}
	}
	if err := p.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-p.exited
	left := tr.entries(org)
	t.Logf("killed %s after the retention was set, with %d of the organization's %d entries left", time.Since(set).Round(time.Millisecond), left, before)
	if tr.ch == nil && (left >= before || left <= young) {
		t.Fatalf("the kill did not land in the middle of the deletion: %d of %d left", left, before)
	}
	if undone := tr.undoneExpiries(); undone != 1 {
		t.Fatalf("the expiry is not left undone by the kill (%d undone): nothing to resume", undone)
	}

	// The restarted dev takes the cycles' lease once the killed one's
	// expires (lifecycleLeaseTTL, 30 s after its last renewal).
	killed := time.Now()
	p = startDev(t, data, args...)
	c = newAPIClient(t, p.http)
	testenv.Eventually(t, lifecycleLeaseTTL+20*time.Second, func() string { return fmt.Sprintf("%d entries left", tr.entries(org)) }, func() bool {
		return tr.undoneExpiries() == 0 && tr.entries(org) <= young+4
	})
	t.Logf("the expiry finished %s after the kill", time.Since(killed).Round(time.Millisecond))
	if !strings.Contains(p.stderr.String(), "resumed an expiry") {
		t.Errorf("dev did not say it resumed the expiry:\n%s", p.stderr)
	}
	oldLeft, youngLeft := tr.entriesCreated(org, "<", mid.UnixMilli()), tr.entriesCreated(org, ">", mid.Add(4*time.Second).UnixMilli())
	if oldLeft != 0 || youngLeft < young {
		t.Fatalf("after the resumed expiry: %d old entries left (want 0), %d young (want at least %d)", oldLeft, youngLeft, young)
	}
	keysFile := filepath.Join(t.TempDir(), "keys.json")
	if err := os.WriteFile(keysFile, c.call("GET", "/api/v1/audit_keys", boot, nil).raw, 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(binary(t), "verify", "--url", "http://"+p.http, "--key", boot, "--org", org, "--keys", keysFile, "--wait", "10s").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "expired under the organization's retention") {
		t.Fatalf("verify after the resumed expiry: %v\n%s", err, out)
	}
}

// trail reads the audit store of a dev from the test (and edits it by
// hand): the SQLite file under its --data, or the ClickHouse database of
// its --clickhouse DSN (store: the dev's store flags).
type trail struct {
	t    *testing.T
	data string
	db   *sql.DB // SQLite, read-only
	ch   ch.Conn // ClickHouse
}

func openTrail(t *testing.T, data string, store []string) *trail {
	t.Helper()
	tr := &trail{t: t, data: data}
	for i, a := range store {
		if a == "--clickhouse" && i+1 < len(store) {
			opts, err := ch.ParseDSN(store[i+1])
			if err != nil {
				t.Fatal(err)
			}
			if tr.ch, err = ch.Open(opts); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { tr.ch.Close() })
			return tr
		}
	}
	db, err := sql.Open("sqlite", "file:"+filepath.Join(data, "audit.db")+"?mode=ro&_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	tr.db = db
	return tr
}

// count runs a query of one count: the SQLite one, or the ClickHouse one.
func (tr *trail) count(sqlite, clickhouse string, args ...any) int {
	tr.t.Helper()
	if tr.ch != nil {
		var n uint64
		if err := tr.ch.QueryRow(context.Background(), clickhouse, args...).Scan(&n); err != nil {
			tr.t.Fatalf("%s: %v", clickhouse, err)
		}
		return int(n)
	}
	var n int
	if err := tr.db.QueryRow(sqlite, args...).Scan(&n); err != nil {
		tr.t.Fatalf("%s: %v", sqlite, err)
	}
	return n
}

// entries counts the organization's entries (a copy written twice once).
func (tr *trail) entries(org string) int {
	return tr.count(`SELECT count(*) FROM audit_logs WHERE organization_id = ?`,
		`SELECT uniqExact(event_id) FROM audit_logs WHERE organization_id = ?`, org)
}

// entriesCreated counts the organization's entries persisted before (cmp
// "<") or after (">") ms.
func (tr *trail) entriesCreated(org, cmp string, ms int64) int {
	return tr.count(`SELECT count(*) FROM audit_logs WHERE organization_id = ? AND created_ms `+cmp+` ?`,
		`SELECT uniqExact(event_id) FROM audit_logs WHERE organization_id = ? AND created_ms `+cmp+` ?`, org, ms)
}

// undoneExpiries counts the expiries saved and not done (each one's
// latest save).
func (tr *trail) undoneExpiries() int {
	return tr.count(`SELECT count(*) FROM log_expiries WHERE done = 0`, `SELECT countIf(done = 0) FROM log_expiries FINAL`)
}

// deleteEntry deletes an entry by hand (on ClickHouse: a mutation, waited
// for).
func (tr *trail) deleteEntry(org, id string) {
	t := tr.t
	t.Helper()
	if tr.ch != nil {
		if err := tr.ch.Exec(context.Background(), `ALTER TABLE audit_logs DELETE WHERE organization_id = ? AND event_id = ?`, org, id); err != nil {
			t.Fatal(err)
		}
		testenv.Eventually(t, 20*time.Second, "the entry deleted by hand", func() bool {
			return tr.count("", `SELECT count() FROM audit_logs WHERE organization_id = ? AND event_id = ?`, org, id) == 0
		})
		return
	}
	db, err := sql.Open("sqlite", "file:"+filepath.Join(tr.data, "audit.db")+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`DELETE FROM audit_logs WHERE organization_id = ? AND event_id = ?`, org, id); err != nil {
		t.Fatal(err)
	}
}
